"""Bad inputs a kernel author could write, refused with a named rule and the offending value.

Three surfaces: the ``T.tma.*`` builders (operand classes, rule ``operand-type``; spaces,
``operand-space``), the host encode written in TVMScript (``T.tma.encode_tiled``: the C++
runtime's rules on the compile-time constants, ``map-footprint``), and the runtime's Python
functions (``tvm_tma.validate_tiled`` / ``tvm_tma.encode_tiled`` /
``tvm_tma.validate_tiled_static``). Every refusal must name its rule AND the value. The
correct forms still build, and the kernels that now compile assemble for sm_90a.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Callable

import pytest
import tvm
import tvm_ffi
from intrinsic_operands import (
    BAR,
    DESC_GLOB,
    DESC_SMEM,
    GLOB,
    MAP,
    SMEM,
    gdesc,
    glob,
    mbar,
    sdesc,
    smem,
    tmap,
)
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout

from tvm_tma import _runtime, intrin
from tvm_tma.intrin import RULES, IntrinError, TmaNamespace
from tvm_tma.intrin.errors import HOST_RULES, EncodeError
from tvm_tma.intrin.host import bind_encoded_map, check_static_encode
from tvm_tma.planner.plan_types import TensorMapSpec
from tvm_tma.testing.runner import assemble, compile_kernel

_runtime.load_runtime()
validate_tiled = tvm_ffi.get_global_func("tvm_tma.validate_tiled")
validate_tiled_static = tvm_ffi.get_global_func("tvm_tma.validate_tiled_static")
encode_tiled = tvm_ffi.get_global_func("tvm_tma.encode_tiled")

NS = TmaNamespace

# ---- scalars of each class (the pointer operands come from intrinsic_operands.py) -----

I32 = T.Var("i", "int32")
U32 = T.Var("u", "uint32")
I64 = T.Var("big", "int64")
U64 = T.Var("addr", "uint64")
F32 = T.Var("f", "float32")


LOAD_SPEC = "rank=2,mode=tile,dst=shared::cluster,multicast=0,cache_hint={ch},cta_group=0"


@dataclass(frozen=True)
class Bad:
    id: str
    rule: str
    build: Callable[[], object]
    needles: tuple[str, ...]  # the operand's name and the offending value (and its type)


# ---- 1. the builders: every family, every operand class --------------------------------

BUILDER_CASES = [
    # load: coordinates (s32), tensor map, shared dst, mbarrier, h operands, cache policy
    Bad("load-coordinate-float-imm", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, T.float32(1.5)], mbar()),
        ("coordinate 1", "T.float32(1.5)", "float32")),
    Bad("load-coordinate-python-float", "operand-type",
        lambda: intrin.load(smem(), tmap(), [2.5, 0], mbar()),
        ("coordinate 0", "2.5", "Python float")),
    Bad("load-coordinate-float-var", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, F32], mbar()), ("coordinate 1", "f", "float32")),
    Bad("load-coordinate-int64-var", "operand-type",
        lambda: intrin.load(smem(), tmap(), [I64, 0], mbar()),
        ("coordinate 0", "big", "int64", "at most 32 bits")),
    Bad("load-coordinate-python-int-too-big", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 2**31], mbar()),
        ("coordinate 1", "2147483648")),
    Bad("load-coordinate-bool", "operand-type",
        lambda: intrin.load(smem(), tmap(), [True, 0], mbar()), ("coordinate 0", "True", "bool")),
    Bad("load-coordinate-string", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, "1"], mbar()), ("coordinate 1", "'1'", "str")),
    Bad("load-coordinate-buffer", "operand-type",
        lambda: intrin.load(smem(), tmap(), [GLOB, 0], mbar()), ("coordinate 0", "buffer A")),
    Bad("load-coordinates-not-a-list", "operand-type",
        lambda: intrin.load(smem(), tmap(), 3, mbar()), ("load coordinates", "3", "list")),
    Bad("load-tensor-map-python-int", "operand-type",
        lambda: intrin.load(smem(), 4096, [0, 0], mbar()),
        ("tensor map", "4096", "integer constant")),
    Bad("load-tensor-map-uint64-constant", "operand-type",
        lambda: intrin.load(smem(), T.uint64(65536), [0, 0], mbar()),
        ("tensor map", "T.uint64(65536)", "integer constant")),
    Bad("load-tensor-map-float", "operand-type",
        lambda: intrin.load(smem(), T.float32(1.0), [0, 0], mbar()),
        ("tensor map", "T.float32(1.0)", "float32")),
    Bad("load-tensor-map-32-bit-var", "operand-type",
        lambda: intrin.load(smem(), U32, [0, 0], mbar()), ("tensor map", "u", "uint32")),
    Bad("load-tensor-map-buffer", "operand-type",
        lambda: intrin.load(smem(), GLOB, [0, 0], mbar()), ("tensor map", "buffer A")),
    Bad("load-tensor-map-shared-data", "operand-space",
        lambda: intrin.load(smem(), SMEM.data, [0, 0], mbar()),
        ("tensor map", "shared pointer", "smem.data")),
    Bad("load-dst-buffer", "operand-type",
        lambda: intrin.load(SMEM, tmap(), [0, 0], mbar()),
        ("load dst_smem", "buffer smem", "smem.ptr_to")),
    Bad("load-dst-integer-constant", "operand-type",
        lambda: intrin.load(0, tmap(), [0, 0], mbar()), ("load dst_smem", "0", "Python int")),
    Bad("load-dst-global-data", "operand-space",
        lambda: intrin.load(GLOB.data, tmap(), [0, 0], mbar()),
        ("load destination", "global pointer", "A.data")),
    Bad("load-mbar-float", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], 0.5), ("load mbar", "0.5")),
    Bad("load-mbar-32-bit-var", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], I32), ("load mbar", "i", "int32")),
    Bad("load-cache-hint-uint32-constant", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], mbar(), cache_hint=T.uint32(5)),
        ("cache_hint", "T.uint32(5)", "uint32", "64-bit")),
    Bad("load-cache-hint-int32-var", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], mbar(), cache_hint=I32),
        ("cache_hint", "i", "int32")),
    Bad("load-cache-hint-float", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], mbar(), cache_hint=T.float64(2.0)),
        ("cache_hint", "T.float64(2.0)", "float64")),
    Bad("load-cache-hint-python-float", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], mbar(), cache_hint=0.25),
        ("cache_hint", "0.25", "Python float")),
    Bad("load-cache-hint-negative", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], mbar(), cache_hint=-1),
        ("cache_hint", "-1")),
    Bad("load-multicast-mask-uint32", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], mbar(), multicast_mask=T.uint32(3)),
        ("multicast_mask", "T.uint32(3)", "16 bits")),
    Bad("load-multicast-mask-float", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0], mbar(), multicast_mask=3.0),
        ("multicast_mask", "3.0")),
    Bad("load-im2col-offset-float", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0, 0], mbar(), mode="im2col",
                            im2col_offsets=[T.float32(1.0)]),
        ("im2col offset 0", "T.float32(1.0)")),
    Bad("load-im2col-offset-int32-var", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0, 0, 0], mbar(), mode="im2col",
                            im2col_offsets=[0, I32]),
        ("im2col offset 1", "i", "16 bits")),
    Bad("load-im2col-offset-too-big", "operand-type",
        lambda: intrin.load(smem(), tmap(), [0, 0, 0], mbar(), mode="im2col",
                            im2col_offsets=[70000]),
        ("im2col offset 0", "70000")),
    # store / reduce / prefetch
    Bad("store-coordinate-float", "operand-type",
        lambda: intrin.store(tmap(), [T.float32(0.5), 0], smem()),
        ("store coordinate 0", "T.float32(0.5)")),
    Bad("store-tensor-map-constant", "operand-type",
        lambda: intrin.store(T.int64(128), [0, 0], smem()),
        ("store tensor map", "T.int64(128)", "integer constant")),
    Bad("store-source-buffer", "operand-type",
        lambda: intrin.store(tmap(), [0, 0], SMEM), ("store src_smem", "buffer smem")),
    Bad("store-cache-hint-int32-constant", "operand-type",
        lambda: intrin.store(tmap(), [0, 0], smem(), cache_hint=T.int32(9)),
        ("store cache_hint", "9 (constant of type int32)")),
    Bad("reduce-coordinate-bfloat16", "operand-type",
        lambda: intrin.reduce("add", tmap(), [0, T.bfloat16(1.0)], smem()),
        ("reduce coordinate 1", "bfloat16")),
    Bad("reduce-tensor-map-python-int", "operand-type",
        lambda: intrin.reduce("max", 0, [0, 0], smem()), ("reduce tensor map", "0")),
    Bad("reduce-cache-hint-float", "operand-type",
        lambda: intrin.reduce("add", tmap(), [0, 0], smem(), cache_hint=1.5),
        ("reduce cache_hint", "1.5")),
    Bad("reduce-op-not-a-string", "reduce-op",
        lambda: intrin.reduce(1, tmap(), [0, 0], smem()), ("1",)),
    Bad("prefetch-coordinate-float", "operand-type",
        lambda: intrin.prefetch(tmap(), [0, 7.5]), ("prefetch coordinate 1", "7.5")),
    Bad("prefetch-tensor-map-constant", "operand-type",
        lambda: intrin.prefetch(T.uint64(0), [0, 0]), ("prefetch tensor map", "T.uint64(0)")),
    Bad("prefetch-cache-hint-uint32-var", "operand-type",
        lambda: intrin.prefetch(tmap(), [0, 0], cache_hint=U32),
        ("prefetch cache_hint", "u", "uint32")),
    Bad("prefetch-im2col-offset-float", "operand-type",
        lambda: intrin.prefetch(tmap(), [0, 0, 0], mode="im2col", im2col_offsets=[0.5]),
        ("prefetch im2col offset 0", "0.5")),
    # prefetch_descriptor
    Bad("prefetch-descriptor-constant", "operand-type",
        lambda: intrin.prefetch_descriptor(1024), ("prefetch_descriptor tensor map", "1024")),
    Bad("prefetch-descriptor-float", "operand-type",
        lambda: intrin.prefetch_descriptor(T.float16(1.0)),
        ("prefetch_descriptor tensor map", "float16")),
    Bad("prefetch-descriptor-buffer", "operand-type",
        lambda: intrin.prefetch_descriptor(DESC_GLOB), ("tensor map", "buffer desc_glob")),
    # bulk_load / bulk_store
    Bad("bulk-load-size-float", "operand-type",
        lambda: intrin.bulk_load(smem(), glob(), 64.0, mbar()), ("bulk_load size", "64.0")),
    Bad("bulk-load-size-int64-var", "operand-type",
        lambda: intrin.bulk_load(smem(), glob(), I64, mbar()),
        ("bulk_load size", "big", "int64")),
    Bad("bulk-load-src-constant", "operand-type",
        lambda: intrin.bulk_load(smem(), T.uint64(4096), 64, mbar()),
        ("bulk_load src_global", "T.uint64(4096)")),
    Bad("bulk-load-dst-float", "operand-type",
        lambda: intrin.bulk_load(1.0, glob(), 64, mbar()), ("bulk_load dst_smem", "1.0")),
    Bad("bulk-load-mbar-buffer", "operand-type",
        lambda: intrin.bulk_load(smem(), glob(), 64, BAR), ("bulk_load mbar", "buffer bar")),
    Bad("bulk-load-cache-hint-uint32", "operand-type",
        lambda: intrin.bulk_load(smem(), glob(), 64, mbar(), cache_hint=T.uint32(1)),
        ("bulk_load cache_hint", "T.uint32(1)")),
    Bad("bulk-load-multicast-mask-int32-var", "operand-type",
        lambda: intrin.bulk_load(smem(), glob(), 64, mbar(), multicast_mask=I32),
        ("bulk_load multicast_mask", "i", "int32")),
    Bad("bulk-store-dst-constant", "operand-type",
        lambda: intrin.bulk_store(0, smem(), 64), ("bulk_store dst_global", "0")),
    Bad("bulk-store-size-too-big", "operand-type",
        lambda: intrin.bulk_store(glob(), smem(), 2**33), ("bulk_store size", "8589934592")),
    Bad("bulk-store-source-float", "operand-type",
        lambda: intrin.bulk_store(glob(), T.float32(0.0), 64),
        ("bulk_store src_smem", "T.float32(0.0)")),
    Bad("bulk-store-cache-hint-int16", "operand-type",
        lambda: intrin.bulk_store(glob(), smem(), 64, cache_hint=T.int16(3)),
        ("bulk_store cache_hint", "int16")),
    # bulk_copy_cluster: the source is the one pointer; dst and mbar are 32-bit addresses
    Bad("bulk-copy-cluster-global-source", "operand-space",
        lambda: intrin.bulk_copy_cluster(smem(), glob(), 64, mbar()),
        ("bulk_copy_cluster src", "global pointer", "A[0, 0]")),
    Bad("bulk-copy-cluster-global-data-source", "operand-space",
        lambda: intrin.bulk_copy_cluster(U32, GLOB.data, 64, U32),
        ("bulk_copy_cluster src", "global pointer", "A.data")),
    Bad("bulk-copy-cluster-buffer-source", "operand-type",
        lambda: intrin.bulk_copy_cluster(U32, GLOB, 64, U32),
        ("bulk_copy_cluster src", "buffer A")),
    Bad("bulk-copy-cluster-pointer-dst", "operand-type",
        lambda: intrin.bulk_copy_cluster(smem(), smem(), 64, U32),
        ("bulk_copy_cluster dst", "smem[0, 0]", "pointer")),
    Bad("bulk-copy-cluster-64-bit-mbar", "operand-type",
        lambda: intrin.bulk_copy_cluster(U32, smem(), 64, U64),
        ("bulk_copy_cluster mbar", "addr", "uint64")),
    Bad("bulk-copy-cluster-float-dst", "operand-type",
        lambda: intrin.bulk_copy_cluster(T.float32(8.0), smem(), 64, U32),
        ("bulk_copy_cluster dst", "T.float32(8.0)")),
    Bad("bulk-copy-cluster-buffer-dst", "operand-type",
        lambda: intrin.bulk_copy_cluster(GLOB, smem(), 64, U32),
        ("bulk_copy_cluster dst", "buffer A")),
    # wait_group
    Bad("wait-group-python-float", "operand-type", lambda: intrin.wait_group(1.0),
        ("wait_group count", "1.0")),
    Bad("wait-group-float-imm", "operand-type", lambda: intrin.wait_group(T.float32(0.0)),
        ("wait_group count", "T.float32(0.0)")),
    Bad("wait-group-string", "operand-type", lambda: intrin.wait_group("0"),
        ("wait_group count", "'0'")),
    Bad("wait-group-bool", "operand-type", lambda: intrin.wait_group(True),
        ("wait_group count", "True")),
    Bad("wait-group-read-string", "operand-type", lambda: intrin.wait_group(0, read="yes"),
        ("wait_group read", "'yes'")),
    # device-side mutators: descriptor pointers, 64-bit addresses, 32-bit dims, 64-bit strides
    Bad("replace-address-float", "operand-type",
        lambda: intrin.replace_address(gdesc(), 1.5, arch="sm_90a"),
        ("replace_address address", "1.5")),
    Bad("replace-address-uint32", "operand-type",
        lambda: intrin.replace_address(gdesc(), U32, arch="sm_90a"),
        ("replace_address address", "u", "uint32", "64-bit")),
    Bad("replace-address-pointer", "operand-type",
        lambda: intrin.replace_address(gdesc(), glob(), arch="sm_90a"),
        ("replace_address address", "A[0, 0]", "T.reinterpret")),
    Bad("replace-address-constant-descriptor", "operand-type",
        lambda: intrin.replace_address(T.uint64(256), U64, space="global", arch="sm_90a"),
        ("replace_address descriptor", "T.uint64(256)", "integer constant")),
    Bad("replace-dim-float-extent", "operand-type",
        lambda: intrin.replace_dim(gdesc(), 0, T.float32(64.0), rank=2, arch="sm_90a"),
        ("replace_dim extent", "T.float32(64.0)")),
    Bad("replace-dim-int64-extent", "operand-type",
        lambda: intrin.replace_dim(gdesc(), 0, I64, rank=2, arch="sm_90a"),
        ("replace_dim extent", "big", "int64")),
    Bad("replace-dim-float-dim", "operand-type",
        lambda: intrin.replace_dim(gdesc(), 1.0, 64, rank=2, arch="sm_90a"),
        ("replace_dim dim", "1.0")),
    Bad("replace-stride-float", "operand-type",
        lambda: intrin.replace_stride(sdesc(), 1, 128.0, rank=2, arch="sm_90a"),
        ("replace_stride stride_bytes", "128.0")),
    Bad("replace-stride-float-descriptor", "operand-type",
        lambda: intrin.replace_stride(F32, 1, 128, rank=2, space="global", arch="sm_90a"),
        ("replace_stride descriptor", "f", "float32")),
    Bad("rebind-float-dim", "operand-type",
        lambda: intrin.rebind(gdesc(), U64, [64, 8.5], [128], arch="sm_90a"),
        ("rebind dim 1", "8.5")),
    Bad("rebind-int64-dim", "operand-type",
        lambda: intrin.rebind(gdesc(), U64, [I64, 8], [128], arch="sm_90a"),
        ("rebind dim 0", "big", "int64")),
    Bad("rebind-float-stride", "operand-type",
        lambda: intrin.rebind(gdesc(), U64, [64, 8], [T.float32(128.0)], arch="sm_90a"),
        ("rebind stride 1", "T.float32(128.0)")),
    Bad("rebind-pointer-address", "operand-type",
        lambda: intrin.rebind(gdesc(), glob(), [64, 8], [128], arch="sm_90a"),
        ("rebind address", "A[0, 0]")),
    Bad("rebind-constant-descriptor", "operand-type",
        lambda: intrin.rebind(0, U64, [64, 8], [128], space="global", arch="sm_90a"),
        ("rebind descriptor", "0", "integer constant")),
    Bad("rebind-dims-not-a-list", "operand-type",
        lambda: intrin.rebind(gdesc(), U64, 64, [], arch="sm_90a"), ("rebind dims", "64")),
    Bad("rebind-tensor-map-handle", "operand-space",
        lambda: intrin.rebind(MAP, U64, [64, 8], [128], space="global", arch="sm_90a"),
        ("kernel parameter", "T.address_of(m)")),
    Bad("fence-acquire-constant", "operand-type",
        lambda: intrin.fence_acquire(T.uint64(0)), ("fence_acquire descriptor", "T.uint64(0)")),
    Bad("fence-acquire-float", "operand-type",
        lambda: intrin.fence_acquire(2.0), ("fence_acquire descriptor", "2.0")),
    Bad("cp-fenceproxy-constant-dst", "operand-type",
        lambda: intrin.cp_fenceproxy(0, sdesc(), arch="sm_90a"),
        ("cp_fenceproxy dst_global_desc", "0")),
    Bad("cp-fenceproxy-buffer-src", "operand-type",
        lambda: intrin.cp_fenceproxy(gdesc(), DESC_SMEM, arch="sm_90a"),
        ("cp_fenceproxy src_shared_desc", "buffer desc_smem")),
    Bad("replace-field-not-a-string", "not-device-mutable",
        lambda: intrin.replace(gdesc(), 3, 0), ("3",)),
    # the printed raw form is checked against the op's operand kinds
    Bad("raw-load-float-coordinate", "operand-type",
        lambda: NS.load(LOAD_SPEC.format(ch=0), smem(), tmap(), T.float32(1.5), 0, mbar()),
        ("load operand 2", "T.float32(1.5)")),
    Bad("raw-load-constant-tensor-map", "operand-type",
        lambda: NS.load(LOAD_SPEC.format(ch=0), smem(), T.uint64(64), 0, 0, mbar()),
        ("load operand 1", "T.uint64(64)", "integer constant")),
    Bad("raw-store-32-bit-cache-policy", "operand-type",
        lambda: NS.store("rank=1,mode=tile,cache_hint=1", tmap(), 0, smem(), T.uint32(5)),
        ("store operand 3", "T.uint32(5)", "64-bit")),
    Bad("raw-bulk-copy-cluster-pointer-dst", "operand-type",
        lambda: NS.bulk_copy_cluster("size_known=1", smem(), smem(), T.uint32(64),
                                     T.uint32(0)),
        ("bulk_copy_cluster operand 0", "smem[0, 0]")),
    # T.tma.<name> (the script namespace) is the same builder
    Bad("namespace-load-float-coordinate", "operand-type",
        lambda: NS.load(smem(), tmap(), [T.float32(3.5)], mbar()),
        ("coordinate 0", "T.float32(3.5)")),
]


@pytest.mark.parametrize("case", BUILDER_CASES, ids=[c.id for c in BUILDER_CASES])
def test_builder_refuses_bad_operand(case: Bad):
    with pytest.raises(IntrinError) as info:
        case.build()
    error = info.value
    assert error.rule == case.rule, str(error)
    assert str(error).startswith(f"[{case.rule}] ")
    for needle in case.needles:
        assert needle in str(error), (needle, str(error))


FAMILIES_COVERED = {"load", "store", "reduce", "prefetch", "prefetch-descriptor", "bulk-load",
                    "bulk-store", "bulk-copy-cluster", "wait-group", "replace-address",
                    "replace-dim", "replace-stride", "rebind", "fence-acquire",
                    "cp-fenceproxy", "replace-field"}


def test_every_builder_family_has_bad_operand_cases():
    prefixes = {c.id.removeprefix("raw-").removeprefix("namespace-") for c in BUILDER_CASES}
    for family in FAMILIES_COVERED:
        assert any(p.startswith(family) for p in prefixes), family
    assert "operand-type" in RULES


# ---- the correct forms still build -------------------------------------------------------

GOOD_FORMS = {
    "load-python-int-coordinates": lambda: intrin.load(smem(), tmap(), [0, 64], mbar()),
    "load-negative-coordinate": lambda: intrin.load(smem(), tmap(), [-8, 0], mbar()),
    "load-32-bit-coordinates": lambda: intrin.load(smem(), tmap(), [I32, U32 * 2], mbar()),
    "load-16-bit-coordinate": lambda: intrin.load(smem(), tmap(), [T.int16(3), 0], mbar()),
    "load-int32-constant-coordinate": lambda: intrin.load(smem(), tmap(), [T.int32(5)],
                                                          mbar()),
    "load-bare-tensor-map-handle": lambda: intrin.load(smem(), MAP, [0, 0], mbar()),
    "load-global-descriptor-pointer": lambda: intrin.load(smem(), gdesc(), [0, 0], mbar()),
    "load-64-bit-address-variables": lambda: intrin.load(U64, U64, [0, 0], U64),
    "load-uint64-cache-hint": lambda: intrin.load(smem(), tmap(), [0, 0], mbar(),
                                                  cache_hint=T.uint64(0x14F0000000000000)),
    "load-int64-cache-hint-var": lambda: intrin.load(smem(), tmap(), [0, 0], mbar(),
                                                     cache_hint=I64),
    "load-python-int-cache-hint-top-bit": lambda: intrin.load(
        smem(), tmap(), [0, 0], mbar(), cache_hint=0x8000000000000001),
    "load-mask-uint16": lambda: intrin.load(smem(), tmap(), [0, 0], mbar(),
                                            multicast_mask=T.uint16(3)),
    "load-im2col-python-offsets": lambda: intrin.load(smem(), tmap(), [0, 0, 0, 0], mbar(),
                                                      mode="im2col", im2col_offsets=[1, -1]),
    "store-python-cache-hint": lambda: intrin.store(tmap(), [0, 0], smem(), cache_hint=5),
    "prefetch-descriptor-handle": lambda: intrin.prefetch_descriptor(MAP),
    "bulk-load-int32-size": lambda: intrin.bulk_load(smem(), glob(), I32, mbar()),
    "bulk-copy-cluster-32-bit-addresses": lambda: intrin.bulk_copy_cluster(
        U32, smem(), 64, T.uint32(0)),
    "bulk-copy-cluster-python-int-addresses": lambda: intrin.bulk_copy_cluster(
        0, smem(), 64, 0),
    "wait-group-int-imm": lambda: intrin.wait_group(T.int32(1), read=True),
    "replace-address-reinterpret": lambda: intrin.replace_address(
        gdesc(), T.reinterpret("uint64", glob()), arch="sm_90a"),
    "replace-address-python-int": lambda: intrin.replace_address(gdesc(), 0, arch="sm_90a"),
    "replace-dim-int-imm-dim": lambda: intrin.replace_dim(gdesc(), T.int32(1), U32,
                                                          rank=T.int32(2), arch="sm_90a"),
    "replace-stride-int64-var": lambda: intrin.replace_stride(gdesc(), 1, I64, rank=2,
                                                              arch="sm_90a"),
    "replace-stride-uint64-var-descriptor": lambda: intrin.replace_stride(
        U64, 1, 256, rank=2, space="shared::cta", arch="sm_90a"),
    "rebind-mixed": lambda: intrin.rebind(sdesc(), U64, [U32, 8], [I64], arch="sm_90a"),
    "fence-acquire-global-pointer": lambda: intrin.fence_acquire(gdesc()),
    "cp-fenceproxy-pointers": lambda: intrin.cp_fenceproxy(gdesc(), sdesc(), arch="sm_90a"),
}


@pytest.mark.parametrize("name", sorted(GOOD_FORMS))
def test_correct_form_still_builds(name):
    call = GOOD_FORMS[name]()
    assert call.op.name.startswith("tirx.tvm_tma_")
    # ... and its printed raw form is accepted by the same checks
    family = call.op.name.removeprefix("tirx.tvm_tma_")
    tvm.ir.assert_structural_equal(call, getattr(NS, family)(call.args[0].value,
                                                             *call.args[1:]))


def test_bare_tensor_map_handle_becomes_its_address():
    call = intrin.load(smem(), MAP, [0, 0], mbar())
    tvm.ir.assert_structural_equal(call.args[2], tmap())


# ---- 2. TVMScript kernels --------------------------------------------------------------

ROWS, COLS = 8, 64
TILE_BYTES = ROWS * COLS * 2


def _intrin_error_in(error: BaseException) -> IntrinError | None:
    """The IntrinError behind the parser's diagnostic."""
    while error is not None and not isinstance(error, IntrinError):
        error = error.__cause__ or error.__context__
    return error


def _refused_while_parsing(make) -> IntrinError:
    with pytest.raises(Exception) as info:
        make()
    error = _intrin_error_in(info.value)
    assert error is not None, f"not an IntrinError: {info.value}"
    # the parser's own error carries the rule too
    assert f"[{error.rule}]" in str(info.value)
    return error


def _float_coordinate_kernel():
    # fmt: off
    @T.prim_func
    def kernel(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        tmap = T.meta_var(T.tma.encode_tiled(A, "float16", [COLS, ROWS], [COLS * 2],
                                             [COLS, ROWS]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data, layout=TileLayout(S[ROWS, COLS]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.tma.load(tile.ptr_to([0, 0]), T.address_of(tmap), [0, T.float32(1.5)],
                       mbar.ptr_to([0]))
    # fmt: on
    return kernel


def _constant_tensor_map_kernel():
    # fmt: off
    @T.prim_func
    def kernel(A_ptr: T.handle):
        T.match_buffer(A_ptr, (ROWS, COLS), "float16")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.tma.load(tile.ptr_to([0, 0]), 12345, [0, 0], mbar.ptr_to([0]))
    # fmt: on
    return kernel


def _cache_hint_kernel(hint_kind: str):
    # fmt: off
    @T.prim_func
    def kernel(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        tmap = T.meta_var(T.tma.encode_tiled(A, "float16", [COLS, ROWS], [COLS * 2],
                                             [COLS, ROWS]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data, layout=TileLayout(S[ROWS, COLS]))
        if tid == 0:
            if hint_kind == "uint32":
                T.tma.store(T.address_of(tmap), [0, 0], tile.ptr_to([0, 0]),
                            cache_hint=T.uint32(0x14F00000))
            elif hint_kind == "float":
                T.tma.store(T.address_of(tmap), [0, 0], tile.ptr_to([0, 0]),
                            cache_hint=T.float32(1.0))
            else:
                T.tma.store(T.address_of(tmap), [0, 0], tile.ptr_to([0, 0]),
                            cache_hint=T.uint64(0x14F0000000000000))
            T.tma.commit_group()
            T.tma.wait_group(0)
    # fmt: on
    return kernel


def _global_source_cluster_copy_kernel():
    # fmt: off
    @T.prim_func
    def kernel(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (1024,), "uint8")
        T.device_entry()
        T.cluster_id([2])
        T.cta_id_in_cluster([2])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((1024,), "uint8", scope="shared.dyn")
        buf = T.decl_buffer((1024,), "uint8", dyn.data)
        bar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=64)
        if tid == 0:
            T.tma.bulk_copy_cluster(buf.ptr_to([0]), A.ptr_to([0]), 256, bar.ptr_to([0]))
    # fmt: on
    return kernel


def test_script_float_coordinate():
    error = _refused_while_parsing(_float_coordinate_kernel)
    assert error.rule == "operand-type"
    assert "coordinate 1" in str(error) and "T.float32(1.5)" in str(error)


def test_script_integer_constant_tensor_map():
    error = _refused_while_parsing(_constant_tensor_map_kernel)
    assert error.rule == "operand-type"
    assert "tensor map" in str(error) and "12345" in str(error)


@pytest.mark.parametrize("kind,value", [("uint32", "T.uint32(351272960)"),
                                        ("float", "T.float32(1.0)")])
def test_script_bad_cache_hint(kind, value):
    error = _refused_while_parsing(lambda: _cache_hint_kernel(kind))
    assert error.rule == "operand-type"
    assert "cache_hint" in str(error) and value in str(error)


def test_script_global_source_of_a_cluster_copy():
    error = _refused_while_parsing(_global_source_cluster_copy_kernel)
    assert error.rule == "operand-space"
    assert "bulk_copy_cluster src" in str(error) and "global pointer" in str(error)
    assert "A[0]" in str(error)


# ---- static T.tma.encode_tiled arguments ------------------------------------------------

def _encode_kernel(dtype="float16", dims=(64, 64), strides=(128,), box=(64, 8), shape=(64, 64),
                   buffer_dtype="float16", buffer_strides=None, **options):
    dims, strides, box = list(dims), list(strides), list(box)
    declared = {"strides": buffer_strides} if buffer_strides else {}

    # fmt: off
    @T.prim_func
    def kernel(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, shape, buffer_dtype, **declared)
        tmap = T.meta_var(T.tma.encode_tiled(A, dtype, dims, strides, box, **options))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        if tid == 0:
            T.tma.prefetch_descriptor(T.address_of(tmap))
    # fmt: on
    return kernel


ENCODE_CASES = [
    ("box-0", dict(box=(64, 0)), "box-dim", ("box[1] = 0",)),
    ("box-257", dict(box=(8, 257), dims=(64, 512), shape=(512, 64)), "box-dim",
     ("box[1] = 257",)),
    ("stride-120", dict(strides=(120,)), "global-stride", ("strides[0] = 120",)),
    ("stride-negative", dict(strides=(-128,)), "global-stride", ("strides[0] = -128",)),
    ("swizzle-5", dict(swizzle=5), "enum", ("swizzle 5",)),
    ("interleave-3", dict(interleave=3), "enum", ("interleave 3",)),
    ("l2-promotion-7", dict(l2_promotion=7), "enum", ("l2_promotion 7",)),
    ("element-stride-9", dict(element_strides=[1, 9]), "element-stride",
     ("element_strides[1] = 9",)),
    ("element-stride-0", dict(element_strides=[0, 1]), "element-stride",
     ("element_strides[0] = 0",)),
    ("nan-fill-int16", dict(dtype="int16", buffer_dtype="int16", oob_fill=1), "oob-fill-dtype",
     ("'int16'",)),
    ("inner-box-8-bytes", dict(box=(4, 8)), "inner-box-16B", ("4 * 2 = 8 bytes",)),
    ("swizzle-span-exceeded", dict(box=(64, 8), swizzle=2), "swizzle-span",
     ("64 * 2 = 128 bytes", "64-byte span")),
    ("interleave-swizzle", dict(dims=(64, 8, 8), strides=(128, 1024), box=(16, 8, 8),
                                interleave=2, swizzle=3), "interleave-swizzle", ("swizzle 3",)),
    ("interleave-rank-2", dict(interleave=1, box=(8, 8)), "rank", ("rank 2",)),
    ("dim-0", dict(dims=(64, 0)), "global-dim", ("dims[1] = 0",)),
    ("bogus-dtype", dict(dtype="float7"), "dtype", ("'float7'",)),
    ("dtype-not-a-string", dict(dtype=16), "dtype", ("16",)),
    ("too-many-strides", dict(strides=(128, 128)), "rank", ("takes 1 strides", "[128, 128]")),
    ("too-few-box-dims", dict(box=(64,)), "rank", ("takes 2 box", "[64]")),
    ("too-many-element-strides", dict(element_strides=[1, 1, 1]), "rank",
     ("takes 2 element_strides", "[1, 1, 1]")),
    ("rank-6", dict(dims=(1,) * 6, strides=(16,) * 5, box=(16,) + (1,) * 5), "rank",
     ("rank 6",)),
    ("float-dim", dict(dims=(64.0, 64)), "operand-type", ("dims[0]", "64.0")),
    ("float-box", dict(box=(64, T.float32(8.0))), "operand-type", ("box[1]", "T.float32(8.0)")),
    ("footprint-dims", dict(dims=(64, 128)), "map-footprint",
     ("buffer A", "16384 bytes", "8192 bytes")),
    ("footprint-stride", dict(strides=(256,)), "map-footprint",
     ("buffer A", "16256 bytes", "8192 bytes")),
    ("footprint-dtype", dict(dtype="float32", box=(32, 8)), "map-footprint",
     ("buffer A", "8320 bytes", "8192 bytes")),
    ("footprint-strided-buffer", dict(buffer_strides=[128, 1], dims=(64, 65), strides=(256,)),
     "map-footprint", ("buffer A", "16512 bytes", "16256 bytes", "strides [128, 1]")),
    ("dim-beyond-64-bits", dict(dims=(64, 2**70)), "global-dim", ("dims[1]", str(2**70))),
]


@pytest.mark.parametrize("options,rule,needles", [c[1:] for c in ENCODE_CASES],
                         ids=[c[0] for c in ENCODE_CASES])
def test_script_encode_tiled_static_argument(options, rule, needles):
    error = _refused_while_parsing(lambda: _encode_kernel(**options))
    assert isinstance(error, EncodeError)
    assert error.rule == rule, str(error)
    assert rule in HOST_RULES
    assert "T.tma.encode_tiled over A" in str(error)
    for needle in needles:
        assert needle in str(error), (needle, str(error))


def test_script_encode_tiled_over_a_handle():
    # fmt: off
    def make():
        @T.prim_func
        def kernel(A_ptr: T.handle):
            T.match_buffer(A_ptr, (64, 64), "float16")
            T.meta_var(T.tma.encode_tiled(A_ptr, "float16", [64, 64], [128], [64, 8]))
            T.device_entry()
            T.cta_id([1])
        return kernel
    # fmt: on
    error = _refused_while_parsing(make)
    assert error.rule == "operand-type" and "A_ptr" in str(error)


def test_rules_of_run_time_values_are_left_to_the_launch():
    """A dynamic dim/stride skips its own rules at compile time (the encode checks it at
    launch) while the static box is still checked."""

    # fmt: off
    def kernel(box0):
        @T.prim_func
        def k(A_ptr: T.handle, n: T.int64):
            m = T.int64()
            A = T.match_buffer(A_ptr, (m, 64), "float16")
            tmap = T.meta_var(T.tma.encode_tiled(A, "float16", [64, m], [n], [box0, 8]))
            T.device_entry()
            T.cta_id([1])
            tid = T.thread_id([128])
            if tid == 0:
                T.tma.prefetch_descriptor(T.address_of(tmap))
        return k
    # fmt: on

    assert "tvm_tma.encode_tiled" in kernel(64).script()
    error = _refused_while_parsing(lambda: kernel(300))
    assert error.rule == "box-dim" and "box[0] = 300" in str(error)


def test_the_dispatch_encode_is_checked_too():
    """bind_encoded_map (the dispatch's encode) refuses a static violation before emitting."""
    bad = TensorMapSpec(dtype="float16", global_dims=(64, 64), global_strides=(128,),
                        box_dims=(64, 8), element_strides=(1, 1), swizzle=1)
    with pytest.raises(EncodeError) as info:
        bind_encoded_map(bad, GLOB)
    assert info.value.rule == "swizzle-span" and "32-byte span" in str(info.value)
    assert "tensor map over A" in str(info.value)
    dynamic = TensorMapSpec(dtype="float16", global_dims=(64, I64), global_strides=(I64,),
                            box_dims=(64, 8), element_strides=(1, 1), swizzle=3)
    check_static_encode(dynamic, "dynamic")  # run-time dims: nothing static is wrong


def test_good_encode_kernels_still_build():
    for options in (dict(), dict(swizzle=3), dict(box=(32, 8), swizzle=2),
                    dict(dims=(64, 32), box=(64, 32)), dict(dtype="uint8", box=(128, 8)),
                    dict(element_strides=(1, 2)), dict(oob_fill=1, l2_promotion=3),
                    dict(buffer_strides=[128, 1], strides=(256,)),
                    dict(dims=(32, 128), strides=(64,), box=(32, 8))):
        assert "tvm_tma.encode_tiled" in _encode_kernel(**options).script()


# ---- kernels that now compile, assembled for sm_90a ------------------------------------

def _bare_handle_kernel():
    """The map variable itself (no T.address_of) as the tensor map, a uint32 coordinate and a
    cache policy with its top bit set: each failed before (nvcc error, TVM TypeError)."""

    # fmt: off
    @T.prim_func
    def kernel(A_ptr: T.handle, Out_ptr: T.handle, row: T.uint32):
        A = T.match_buffer(A_ptr, (2 * ROWS, COLS), "float16",
                           layout=TileLayout(S[2 * ROWS, COLS]))
        Out = T.match_buffer(Out_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        tmap = T.meta_var(T.tma.encode_tiled(A, "float16", [COLS, 2 * ROWS], [COLS * 2],
                                             [COLS, ROWS]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data, layout=TileLayout(S[ROWS, COLS]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.tma.prefetch_descriptor(tmap)
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.tma.load(tile.ptr_to([0, 0]), tmap, [0, row], mbar.ptr_to([0]),
                       cache_hint=0x8000000000000000)
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE_BYTES))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for i in T.serial(tid, ROWS * COLS, step=128):
            Out[i // COLS, i % COLS] = tile[i // COLS, i % COLS]
    # fmt: on
    return kernel


def _cluster_copy_kernel():
    """bulk_copy_cluster with 32-bit cluster addresses and a shared source, wait_group with an
    integer constant: the correct forms next to the refused ones above."""

    # fmt: off
    @T.prim_func
    def kernel(A_ptr: T.handle, peer: T.uint32, peer_bar: T.uint32):
        T.match_buffer(A_ptr, (1024,), "uint8")
        T.device_entry()
        T.cluster_id([1])
        T.cta_id_in_cluster([2])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((1024,), "uint8", scope="shared.dyn")
        buf = T.decl_buffer((1024,), "uint8", dyn.data)
        if tid == 0:
            T.tma.bulk_copy_cluster(peer, buf.ptr_to([0]), 256, peer_bar)
            T.tma.wait_group(T.int32(0))
    # fmt: on
    return kernel


@pytest.mark.parametrize("make", [_bare_handle_kernel, _cluster_copy_kernel],
                         ids=["bare-handle-and-top-bit-policy", "cluster-copy"])
def test_now_compiling_kernel_assembles_for_sm90a(make):
    built = compile_kernel(make())
    assert "tvm_tma_" in built.cuda_source
    assert len(assemble(built.cuda_source, "sm_90a")) > 0


def test_bare_handle_kernel_passes_the_map_address():
    source = compile_kernel(_bare_handle_kernel()).cuda_source
    assert "const __grid_constant__ CUtensorMap" in source
    assert "9223372036854775808" in source  # the policy reached the instruction unchanged


# ---- 3. the runtime's Python functions --------------------------------------------------

_MAP_STORAGE = (ctypes.c_uint8 * 256)()
MAP_PTR = ctypes.c_void_p((ctypes.addressof(_MAP_STORAGE) + 127) // 128 * 128)


def _seed(address=0x10000, dims=(64, 8, 4), strides=(512, 128), box=(64, 8, 4),
          estrides=(1, 1, 1), interleave=0, swizzle=3, l2=2, oob=0, dtype="float16"):
    return [dtype, len(dims), address, *dims, *strides, *box, *estrides, interleave, swizzle,
            l2, oob]


def _static(args):
    """The validate_tiled_static layout: the same arguments without the address."""
    return args[:2] + args[3:]


RUNTIME_CASES = [
    ("validate-negative-address", lambda: validate_tiled(*_seed(address=-16)),
     "global-address-align", ("-16", "negative")),
    ("validate-negative-address-minus-1", lambda: validate_tiled(*_seed(address=-1)),
     "global-address-align", ("-1", "negative")),
    ("validate-negative-address-int64-min",
     lambda: validate_tiled(*_seed(address=-(2**63))), "global-address-align",
     (str(-(2**63)),)),
    ("encode-negative-address", lambda: encode_tiled(MAP_PTR, *_seed(address=-4096)),
     "global-address-align", ("-4096", "negative")),
    ("encode-negative-map", lambda: encode_tiled(-128, *_seed()), "map-null", ("-128",)),
    ("validate-box-257", lambda: validate_tiled(*_seed(box=(64, 8, 257))), "box-dim",
     ("box[2] = 257",)),
    ("validate-nan-fill-int16", lambda: validate_tiled(*_seed(dtype="int16", oob=1)),
     "oob-fill-dtype", ("'int16'",)),
    ("validate-bogus-dtype", lambda: validate_tiled(*_seed(dtype="half")), "dtype",
     ("'half'",)),
    ("static-box-0", lambda: validate_tiled_static(*_static(_seed(box=(64, 0, 4)))), "box-dim",
     ("box[1] = 0",)),
    ("static-swizzle-5", lambda: validate_tiled_static(*_static(_seed(swizzle=5))), "enum",
     ("swizzle 5",)),
    ("static-stride-120-with-unknowns",
     lambda: validate_tiled_static("float16", 2, None, None, 120, 64, None, 1, 1, 0, None,
                                   None, None),
     "global-stride", ("strides[0] = 120",)),
    ("static-span-known-box", lambda: validate_tiled_static(
        "float16", 2, None, None, None, 128, None, None, None, 0, 3, 2, 0),
     "swizzle-span", ("128 * 2 = 256 bytes",)),
]


@pytest.mark.parametrize("call,rule,needles", [c[1:] for c in RUNTIME_CASES],
                         ids=[c[0] for c in RUNTIME_CASES])
def test_runtime_function_refuses_bad_value(call, rule, needles):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert f"tvm_tma: rule '{rule}'" in message, message
    for needle in needles:
        assert needle in message, (needle, message)


def test_validate_tiled_static_skips_unknown_values():
    assert validate_tiled_static(*_static(_seed())) is None
    # every integer unknown: only dtype and rank are checked
    assert validate_tiled_static("float16", 3, *([None] * 15)) is None
    # an unknown interleave leaves the swizzle span and inner-box rules to the launch
    assert validate_tiled_static("float16", 1, 64, 300 // 300 * 4, 1, None, 3, 2, 0) is None
    with pytest.raises(TypeError, match="expected 17"):
        validate_tiled_static(*_seed())  # the address does not belong in this layout
    with pytest.raises(TypeError, match="integer or None"):
        validate_tiled_static("float16", 1, "64", 64, 1, 0, 0, 2, 0)


def test_runtime_type_mistakes_are_type_errors():
    """A value of the wrong type is a TypeError naming the argument (a bool is no dim)."""
    args = _seed()
    args[3] = True
    with pytest.raises(TypeError, match=r"argument 3 \(dims\) must be an integer, got bool"):
        validate_tiled(*args)
    args = _seed()
    args[2] = 1.5
    with pytest.raises(TypeError, match=r"argument 2 \(global_address\)"):
        validate_tiled(*args)


def test_non_negative_addresses_still_validate():
    assert validate_tiled(*_seed(address=0x7F0000000000)) is None
    assert validate_tiled(*_seed(address=ctypes.c_void_p(0x10000))) is None


# ---- the count -------------------------------------------------------------------------

def test_at_least_sixty_bad_inputs():
    # inline kernels (float coordinate, constant map, two cache hints, global cluster-copy
    # source, encode over a handle, a box of 300 next to a dynamic dim), the dispatch's
    # encode, and the runtime's two type mistakes
    others = 7 + 1 + 2
    assert len(BUILDER_CASES) + len(ENCODE_CASES) + len(RUNTIME_CASES) + others >= 60


@pytest.mark.gpu
def test_every_bad_script_kernel_is_refused_on_the_gpu_machine(capsys):
    """On the GPU machine: the kernels that used to compile and then fault, run silently or
    be refused only at launch (a float coordinate, an integer tensor map, 32-bit and float
    cache hints, a global cluster-copy source, every bad static encode) are refused while
    they are built, so nothing reaches the GPU."""
    builders = [_float_coordinate_kernel, _constant_tensor_map_kernel,
                lambda: _cache_hint_kernel("uint32"), lambda: _cache_hint_kernel("float"),
                _global_source_cluster_copy_kernel]
    builders += [lambda options=options: _encode_kernel(**options)
                 for _, options, _, _ in ENCODE_CASES]
    refused = 0
    for make in builders:
        try:
            make()
        except Exception as error:  # noqa: BLE001  (the parser wraps the IntrinError)
            refused += _intrin_error_in(error) is not None
    with capsys.disabled():
        print(f"\nbad T.tma kernels refused while built: {refused} of {len(builders)}")
    assert refused == len(builders)
