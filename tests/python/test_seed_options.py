"""The seed options of ``Tx.copy_async(..., dispatch="tma")`` (issue 12) in CI: the exact PTX
each emits, the tensor map it encodes, ptxas for sm_90a, and a refusal per new rule.

Multicast with box splitting deals a tile's boxes out among the CTAs of a cluster; ``reduce``
turns a store into ``cp.reduce.async.bulk.tensor``; ``prefetch=True`` turns a load into an
L2 prefetch of the same boxes; ``l2_promotion`` sets the map's L2 promotion.
"""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path

import pytest
import tvm
from seed_kernels import (
    multicast_kernel,
    prefetch_kernel,
    promotion_kernel,
    reduce_kernel,
)

from tvm_tma.dispatch import descriptors
from tvm_tma.intrin.host import encode_arguments
from tvm_tma.planner.reductions import REDUCE_OPS, REDUCE_TYPES
from tvm_tma.testing.runner import assemble, compile_kernel

SM90A = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


@pytest.fixture
def encoded_maps(monkeypatch):
    """The tensor-map specs the dispatch encodes while a kernel compiles, in order."""
    specs = []
    original = descriptors.bind_encoded_map

    def recording(spec, buffer, **kwargs):
        specs.append(spec)
        return original(spec, buffer, **kwargs)

    monkeypatch.setattr(descriptors, "bind_encoded_map", recording)
    return specs


def _asm(source: str, head: str) -> list[str]:
    """The asm templates of the helpers whose instruction starts with ``head``."""
    return re.findall(r'asm volatile\("(' + re.escape(head) + r'[^"]*)"', source)


def _calls(source: str, family: str) -> list[str]:
    """The call sites of the generated ``tvm_tma_<family>_*`` helpers."""
    return [line.strip() for line in source.splitlines()
            if re.match(rf"\s+tvm_tma_{family}_\w+\(", line)]


# ---- multicast ------------------------------------------------------------------------

SPLITS = [  # rows, cols, CTAs, swizzle
    (64, 64, 2, 0), (64, 64, 4, 0), (128, 128, 2, 3), (128, 128, 4, 3), (64, 128, 4, 2),
]


@pytest.mark.parametrize("rows,cols,ctas,swizzle", SPLITS)
def test_split_multicast_issues_one_nth_of_the_tile_per_cta(rows, cols, ctas, swizzle,
                                                            encoded_maps):
    built = compile_kernel(multicast_kernel(rows, cols, ctas, swizzle=swizzle))
    (spec,) = encoded_maps
    rank = spec.rank
    coords = ", ".join(f"%{i}" for i in range(2, 2 + rank))
    assert _asm(built.cuda_source, "cp.async.bulk.tensor") == [
        f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes"
        f".multicast::cluster [%0], [%1, {{{coords}}}], [%{2 + rank}], %{3 + rank};"]
    assert f'"h"((unsigned short)(a{3 + rank}))' in built.cuda_source  # the mask is 16-bit
    calls = _calls(built.cuda_source, "load")
    # Each CTA runs the same code: its calls are its issues, and together the cluster's
    # CTAs issue the tile exactly once.
    assert len(calls) * ctas * spec.box_bytes == rows * cols * 2
    assert all(call.endswith(f"(ushort){(1 << ctas) - 1});") for call in calls)
    assert all("tvm_builtin_cluster_ctaid_x()" in call for call in calls)
    assert spec.swizzle == swizzle
    assert len(assemble(built.cuda_source)) > 0


def test_a_static_mask_loads_the_whole_tile_from_one_cta(encoded_maps):
    built = compile_kernel(multicast_kernel(64, 64, 2, split=False))
    (spec,) = encoded_maps
    (call,) = _calls(built.cuda_source, "load")
    assert spec.box_bytes == 64 * 64 * 2
    assert call.endswith("(ushort)3);")
    assert len(assemble(built.cuda_source)) > 0


def test_multicast_with_a_cache_hint_orders_modifiers_and_operands():
    kernel = _kernel(_TILE, _load("multicast=rank, cache_hint=\"evict_last\""), cluster=2)
    built = compile_kernel(kernel)
    assert _asm(built.cuda_source, "cp.async.bulk.tensor") == [
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;"]
    assert '"h"((unsigned short)(a5)), "l"((unsigned long long)(a6))' in built.cuda_source
    assert len(assemble(built.cuda_source)) > 0


# ---- reductions -----------------------------------------------------------------------

@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reduce_emits_the_tensor_reduction(op, encoded_maps):
    dtype = REDUCE_TYPES[op][0]
    built = compile_kernel(reduce_kernel(op, dtype))
    assert _asm(built.cuda_source, "cp.reduce") == [
        f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.bulk_group "
        "[%0, {%1, %2}], [%3];"]
    assert len(_calls(built.cuda_source, "reduce")) == 1
    assert not _asm(built.cuda_source, "cp.async.bulk.tensor")
    (spec,) = encoded_maps
    assert spec.dtype == dtype  # the reduction computes in the tensor's own type
    assert len(assemble(built.cuda_source)) > 0


def test_a_reducing_store_keeps_its_element_type_where_a_store_widens(encoded_maps):
    """32 whole rows of B are 4096 contiguous elements: a store moves them as 8-byte
    elements, a reduction must add them as float16."""
    rows = 'rows = T.decl_buffer((32, 128), "float16", dyn.data, layout=TileLayout(S[32, 128]))'
    for extra in ("", ', reduce="add"'):
        compile_kernel(_kernel(rows, f'Tx.copy_async(B[0:32, :], rows[:, :], dispatch="tma"'
                                     f'{extra})'))
    plain, reducing = encoded_maps
    assert (plain.dtype, plain.box_dims) == ("uint64", (256, 4))
    assert (reducing.dtype, reducing.box_dims) == ("float16", (256, 16))


def test_a_bitwise_reduction_of_int64_runs_through_a_uint64_map(encoded_maps):
    """The hardware takes only a UINT64 map for 64-bit and/or/xor (an INT64 map is an
    illegal instruction, tools/probe_reduce_types.py --raw): the same bits, unsigned."""
    compile_kernel(reduce_kernel("xor", "int64"))
    compile_kernel(reduce_kernel("max", "int64"))
    xor, maximum = encoded_maps
    assert (xor.dtype, maximum.dtype) == ("uint64", "int64")


def test_use_tma_reduce_is_the_same_reduction():
    ours = compile_kernel(reduce_kernel("max", "int32")).cuda_source
    theirs = compile_kernel(reduce_kernel("max", "int32", alias=True)).cuda_source
    assert _asm(ours, "cp.reduce") == _asm(theirs, "cp.reduce") == [
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.bulk_group "
        "[%0, {%1, %2}], [%3];"]
    assert _calls(ours, "reduce") == _calls(theirs, "reduce")


# ---- prefetch and L2 promotion --------------------------------------------------------

def test_prefetch_issues_the_load_boxes_into_l2_over_the_same_map(encoded_maps):
    built = compile_kernel(prefetch_kernel())
    assert _asm(built.cuda_source, "cp.async.bulk.prefetch") == [
        "cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];"]
    (prefetch,) = _calls(built.cuda_source, "prefetch")
    (load,) = _calls(built.cuda_source, "load")
    # The prefetch names the same map and coordinates as the load that follows it.
    assert prefetch.split("(", 1)[1].rstrip(");") in load
    assert built.tensormap_params == 1 and len(encoded_maps) == 1
    assert len(assemble(built.cuda_source)) > 0


@pytest.mark.parametrize("value,enum", [("none", 0), (64, 1), (128, 2), (256, 3), (None, 2)])
def test_l2_promotion_is_written_into_the_map(value, enum, encoded_maps):
    compile_kernel(promotion_kernel(value, value))
    (spec,) = encoded_maps
    assert spec.l2_promotion == enum
    assert encode_arguments(spec, "A.data")[-2] == enum  # promotion, then OOB fill


def test_a_different_promotion_makes_a_different_map(encoded_maps):
    built = compile_kernel(promotion_kernel(64, 256))
    assert built.tensormap_params == 2
    assert [spec.l2_promotion for spec in encoded_maps] == [1, 3]
    assert len(assemble(built.cuda_source)) > 0


# ---- refusals ---------------------------------------------------------------------------

TEMPLATE = '''
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 128), "{dtype}", layout=TileLayout(S[128, 128]))
    B = T.match_buffer(B_ptr, (128, 128), "{dtype}", layout=TileLayout(S[128, 128]))
    T.device_entry()
{cluster}
    tid = T.thread_id([128])
    dyn = T.alloc_buffer((65600,), "uint8", scope="shared.dyn")
{decls}
    if tid == 0:
{body}
'''
_TILE = """
tile = T.decl_buffer((64, 64), "{dtype}", dyn.data, layout=TileLayout(S[64, 64]))
mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=8192)
"""
_SWIZZLED_ROWS = """
tile = T.decl_buffer((8, 64), "float16", dyn.data,
                     layout=mma_shared_layout("float16", 3, (8, 64)))
mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=8192)
"""


def _load(extra: str, region: str = "A[0:64, 0:64]", tile: str = "tile[:, :]") -> str:
    return f'Tx.copy_async({tile}, {region}, dispatch="tma", mbar=mbar.ptr_to([0]), {extra})'


def _store(extra: str) -> str:
    extra = f", {extra}" if extra else ""
    return f'Tx.copy_async(B[0:64, 0:64], tile[:, :], dispatch="tma"{extra})'


def _kernel(decls: str, body: str, cluster: int = 0, dtype: str = "float16",
            cluster_shape: str | None = None):
    """A kernel with one copy (written to a file: TVMScript parses source)."""
    if cluster_shape is not None:
        scopes = f"T.cluster_id([1])\nrank, rank_y = T.cta_id_in_cluster({cluster_shape})"
    elif cluster:
        scopes = f"T.cluster_id([1])\nrank = T.cta_id_in_cluster([{cluster}])"
    else:
        scopes = "cta = T.cta_id([1])"
    source = TEMPLATE.format(
        dtype=dtype, cluster=textwrap.indent(scopes, "    "),
        decls=textwrap.indent(textwrap.dedent(decls.format(dtype=dtype)).strip(), "    "),
        body=textwrap.indent(textwrap.dedent(body).strip(), "        "))
    path = Path("/tmp") / f"tvm_tma_seed_{abs(hash(source))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


REFUSALS = {
    # name: (kernel, rule, a substring naming the offending value)
    "multicast-outside-a-cluster": (
        lambda: _kernel(_TILE, _load("multicast=3")),
        "multicast", "multicast=3 needs a cluster kernel"),
    "multicast-on-a-store": (
        lambda: _kernel(_TILE, _store("multicast=rank"), cluster=2),
        "multicast", "multicast is for global->shared loads"),
    "mask-names-ctas-outside-the-cluster": (
        lambda: _kernel(_TILE, _load("multicast=5"), cluster=2),
        "multicast", "multicast mask 0b101 names CTAs outside the 2-CTA cluster"),
    "tile-that-cannot-be-split": (
        lambda: _kernel(_SWIZZLED_ROWS, _load("multicast=rank", "A[0:8, 0:64]"), cluster=16),
        "multicast", "cannot be split among 16 CTAs"),
    "split-under-a-guard-that-leaves-a-cta-out": (
        lambda: _kernel(_TILE, "if rank == 0:\n    " + _load("multicast=rank"), cluster=2),
        "multicast", "never runs where rank == 1"),
    "split-along-a-2d-cluster": (
        lambda: _kernel(_TILE, _load("multicast=rank"), cluster_shape="[2, 2]"),
        "multicast", "splits the tile along one axis of a 2-D cluster"),
    "multicast-of-a-float": (
        lambda: _kernel(_TILE, _load("multicast=1.5"), cluster=2),
        "multicast", "multicast=1.5 is neither a CTA mask"),
    "multicast-prefetch": (
        lambda: _kernel(_TILE, 'Tx.copy_async(tile[:, :], A[0:64, 0:64], dispatch="tma", '
                               'prefetch=True, multicast=rank)', cluster=2),
        "multicast", "a prefetch brings data into L2 only"),
    "reduce-on-a-load": (
        lambda: _kernel(_TILE, _load('reduce="add"')),
        "reduce", "reduce='add': a reduction combines shared data into global memory"),
    "reduce-with-an-unknown-op": (
        lambda: _kernel(_TILE, _store('reduce="mul"')),
        "reduce", "reduce='mul' is not one of"),
    "reduce-min-on-float32": (
        lambda: _kernel(_TILE, _store('reduce="min"'), dtype="float32"),
        "reduce", "reduce='min' on float32"),
    "reduce-add-on-int8": (
        lambda: _kernel(_TILE, _store('use_tma_reduce="add"'), dtype="int8"),
        "reduce", "reduce='add' on int8"),
    "reduce-add-on-float64": (
        lambda: _kernel(_TILE, _store('reduce="add"'), dtype="float64"),
        "reduce", "reduce='add' on float64"),
    "reduce-inc-on-int32": (
        lambda: _kernel(_TILE, _store('reduce="inc"'), dtype="int32"),
        "reduce", "reduce='inc' on int32: PTX defines the inc tensor reduction for uint32"),
    "reduce-and-alias-disagree": (
        lambda: _kernel(_TILE, _store('reduce="add", use_tma_reduce="max"')),
        "reduce", "reduce='add' and use_tma_reduce='max' disagree"),
    "prefetch-with-an-mbarrier": (
        lambda: _kernel(_TILE, _load("prefetch=True")),
        "config", "a prefetch writes no shared memory and completes on nothing"),
    "prefetch-of-a-store": (
        lambda: _kernel(_TILE, _store("prefetch=True")),
        "config", "prefetch=True is for global->shared copies"),
    "prefetch-of-a-string": (
        lambda: _kernel(_TILE, 'Tx.copy_async(tile[:, :], A[0:64, 0:64], dispatch="tma", '
                               'prefetch="yes")'),
        "config", "prefetch='yes' must be True or False"),
    "l2-promotion-of-32-bytes": (
        lambda: _kernel(_TILE, _load("l2_promotion=32")),
        "config", "l2_promotion=32 must be one of 'none', 64, 128, 256"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_bad_seed_option_is_refused_with_its_rule(name):
    make, rule, value = REFUSALS[name]
    kernel = make()
    with pytest.raises(Exception) as info:
        tvm.compile(tvm.IRModule({"main": kernel}), target=SM90A, tir_pipeline="tirx")
    message = str(info.value)
    assert f"[{rule}]" in message, message[-1500:]
    assert value in message, message[-1500:]


SAFE = {  # the neighbours of the refusals above, which plan and assemble
    # Two 128-byte swizzled rows per CTA: off the 1024-byte period, on the tile's pattern.
    "swizzled-rows-among-4-ctas": lambda: _kernel(
        _SWIZZLED_ROWS, _load("multicast=rank", "A[0:8, 0:64]"), cluster=4),
    "split-in-a-4-cta-cluster": lambda: _kernel(_TILE, _load("multicast=rank"), cluster=4),
    "mask-from-one-cta": lambda: _kernel(
        _TILE, "if rank == 0:\n    " + _load("multicast=3"), cluster=2),
    "mask-expression": lambda: _kernel(
        _TILE, _load("multicast=T.uint16(1) << T.Cast(\"uint16\", rank)"), cluster=2),
    "reduce-add-on-bfloat16": lambda: _kernel(_TILE, _store('reduce="add"'), dtype="bfloat16"),
    "reduce-xor-on-uint64": lambda: _kernel(_TILE, _store('reduce="xor"'), dtype="uint64"),
    "prefetch-past-the-edge": lambda: _kernel(
        _TILE, 'Tx.copy_async(tile[:, :], A[96:160, 0:64], dispatch="tma", prefetch=True, '
               'oob="zero")'),
}


@pytest.mark.parametrize("name", sorted(SAFE))
def test_safe_neighbour_of_a_refusal_assembles(name):
    built = compile_kernel(SAFE[name]())
    assert len(_calls(built.cuda_source, "(?:load|store|reduce|prefetch)")) >= 1
    assert len(assemble(built.cuda_source)) > 0


def test_every_new_rule_has_a_refusal():
    rules = {rule for _, rule, _ in REFUSALS.values()}
    assert {"multicast", "reduce"} <= rules


def test_explain_shows_the_split_and_each_option_instruction():
    import tvm_tma
    from tvm_tma.explainer.report import format_kernel

    text = format_kernel(tvm_tma.explain(multicast_kernel(128, 128, 4, swizzle=3)))
    assert ("instruction: cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::"
            "complete_tx::bytes.multicast::cluster") in text
    assert "split among the cluster's 4 CTAs: CTA r makes issues [r * 1, (r + 1) * 1)" in text
    reduce = format_kernel(tvm_tma.explain(reduce_kernel("xor", "int64")))
    assert "instruction: cp.reduce.async.bulk.tensor.2d.global.shared::cta.xor.bulk_group" \
        in reduce and "tensorDataType = uint64" in reduce
    prefetch = format_kernel(tvm_tma.explain(prefetch_kernel()))
    assert "instruction: cp.async.bulk.prefetch.tensor.2d.L2.global\n" in prefetch


@pytest.mark.parametrize("options,direction,rule", [
    (dict(reduce="add"), "g2s", "reduce"), (dict(multicast_ctas=2), "s2g", "multicast")])
def test_the_planner_itself_refuses_an_option_of_the_other_direction(options, direction,
                                                                     rule):
    from tvm_tma.planner import PlanError, plan
    from tvm_tma.testing.copy_cases import CopyCase, planner_regions

    case = CopyCase("c", "float32", direction, (32, 64), (0, 0), (8, 64), (8, 64))
    with pytest.raises(PlanError) as info:
        plan(*planner_regions(case), **options)
    assert info.value.rule == rule
