"""The "tma" variant as TVM sees it: registration, parse-time acceptance, host/device code."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma
from tvm_tma.testing.runner import assemble


def _entry_point_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "tvm_tma" for ep in entry_points(group="tvm.backends"))


def _local_gpu_is_not_blackwell() -> bool:
    """With a GPU present TVM compiles CUDA eagerly for that GPU's arch, not the target's."""
    try:
        device = tvm.cuda(0)
        return bool(device.exist) and not device.compute_version.startswith("10")
    except Exception:
        return False


@pytest.mark.skipif(not _entry_point_installed(),
                    reason="tvm_tma is on PYTHONPATH, not pip-installed: no entry point")
def test_plain_import_tvm_registers_the_variant():
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('error')\n"
        "import tvm\n"
        "from tvm.tirx.operator.tile_primitive import list_registered_schedules as table\n"
        "variants = table()['tirx.tile.copy_async']['cuda']\n"
        "assert 'tma' in variants, variants\n"
        "assert 'tvm_tma' in sys.modules\n"
        "import tvm_ffi\n"
        "assert tvm_ffi.get_global_func('tvm_tma.encode_tiled') is not None\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_variant_priority_and_predicates():
    from tvm.tirx.operator.tile_primitive.dispatcher import _DISPATCH_TABLE

    cases = [case for (op, target), cases in _DISPATCH_TABLE.items()
             if op.name == "tirx.tile.copy_async" and target == "cuda" for case in cases
             if case.variant == "tma"]
    assert len(cases) == 1
    assert cases[0].priority == 10
    assert [p.name for p in cases[0].preds] == ["validate_copy_op", "single_thread"]
    assert tvm_tma.is_registered()


NB = 2 * 8 * 64 * 2


def _two_stage_kernel(second_rows: int):
    """Two g2s copies of one tensor into two stages; the second starts at ``second_rows``."""

    # fmt: off
    @T.prim_func
    def k(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64, 64), "float16", layout=TileLayout(S[64, 64]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
        tiles = T.decl_buffer((2, 8, 64), "float16", dyn.data, elem_offset=0,
                              layout=TileLayout(S[2, 8, 64]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            Tx.copy_async(tiles[0, :, :], A[0:8, :], dispatch="tma", mbar=mbar.ptr_to([0]))
            Tx.copy_async(tiles[1, :, :], A[second_rows:second_rows + 8, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(NB))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    # fmt: on
    return k


def _compile(func, arch="sm_90a"):
    """CUDA and host source of ``func``; the CUDA is assembled for ``arch`` (ptxas accepts it)."""
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    executable = tvm.compile(tvm.IRModule({"main": func}), target=target, tir_pipeline="tirx")
    cuda = executable.mod.imports[0].inspect_source()
    assert len(assemble(cuda, arch=arch)) > 0
    return cuda, executable.mod.inspect_source()


def _kernel_signature(cuda: str) -> str:
    return next(line for line in cuda.splitlines() if line.startswith('extern "C" __global__'))


@pytest.mark.parametrize("second_rows", [0, 24])
def test_identical_tensor_maps_share_one_descriptor(second_rows):
    # Both copies need the same map (rows of 64 float16, box 64 x 8); only coordinates differ.
    cuda, host = _compile(_two_stage_kernel(second_rows))
    assert _encode_calls(host) == 1
    assert _kernel_signature(cuda).count("CUtensorMap") == 1
    calls = [line.strip() for line in cuda.splitlines()
             if line.strip().startswith("tvm_tma_load_")]
    assert len(calls) == 2
    # Whole rows are one run: a rank-1 map of uint32 (two halves each), box 256 = 8 rows.
    # Stage 0 at coordinate 0; stage 1 (8 * 64 elements in shared) at rows * 64 / 2.
    assert "(((half*)dyn_ptr)[0])" in calls[0] and "(&(A_tensormap))), 0, (" in calls[0]
    assert "(((half*)dyn_ptr)[512])" in calls[1]
    assert f"(&(A_tensormap))), {second_rows * 32}, (" in calls[1]


def _encode_calls(host_llvm: str) -> int:
    """Call sites of the encoder in the host module (each loads the cached function handle)."""
    return host_llvm.count("load ptr, ptr @.tvm_func.tvm_tma.encode_tiled")


def test_distinct_tensor_maps_get_distinct_descriptors():
    # fmt: off
    @T.prim_func
    def k(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64, 64), "float16", layout=TileLayout(S[64, 64]))
        B = T.match_buffer(B_ptr, (64, 64), "float16", layout=TileLayout(S[64, 64]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
        tiles = T.decl_buffer((2, 8, 64), "float16", dyn.data, elem_offset=0,
                              layout=TileLayout(S[2, 8, 64]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            Tx.copy_async(tiles[0, :, :], A[0:8, :], dispatch="tma", mbar=mbar.ptr_to([0]))
            Tx.copy_async(tiles[1, :, :], B[0:8, :], dispatch="tma", mbar=mbar.ptr_to([0]))
    # fmt: on
    cuda, host = _compile(k)
    assert _encode_calls(host) == 2
    assert _kernel_signature(cuda).count("CUtensorMap") == 2


@pytest.mark.skipif(_local_gpu_is_not_blackwell(),
                    reason="TVM builds sm_100a CUDA eagerly for the local non-Blackwell GPU")
def test_blackwell_load_carries_cta_group():
    from tvm_tma.demo import demo_kernel

    cuda, _ = _compile(demo_kernel(), arch="sm_100a")
    assert ("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".cta_group::1 [%0], [%1, {%2, %3, %4}], [%5];") in cuda
    assert "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" \
        in cuda


def test_cache_hint_expression_is_passed_through_to_both_directions():
    """A policy the kernel builds itself (createpolicy) is the operand of load and store."""

    # fmt: off
    @T.prim_func
    def k(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64, 128), "float16", layout=TileLayout(S[64, 128]))
        B = T.match_buffer(B_ptr, (64, 128), "float16", layout=TileLayout(S[64, 128]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((8, 64), "float16", dyn.data, elem_offset=0,
                             layout=TileLayout(S[8, 64]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
        streamed = T.alloc_buffer((1,), "uint64", scope="local")
        if tid == 0:
            T.ptx.createpolicy.fractional.L2__evict_first.b64(streamed[0], T.float32(0.5))
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            Tx.copy_async(tile[:, :], A[8:16, 0:64], dispatch="tma", mbar=mbar.ptr_to([0]),
                          cache_hint=streamed[0])
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(B[16:24, 0:64], tile[:, :], dispatch="tma", cache_hint=streamed[0])
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    cuda, _ = _compile(k)
    assert ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;") in cuda
    assert ("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint "
            "[%0, {%1, %2}], [%3], %4;") in cuda
    calls = [line.strip() for line in cuda.splitlines()
             if line.strip().startswith(("tvm_tma_load_", "tvm_tma_store_"))]
    assert len(calls) == 2
    assert calls[0].endswith("(&(A_tensormap))), 0, 8, (&(((uint64_t*)dyn_ptr)[256])), "
                             "streamed_ptr[0]);")
    assert "(&(B_tensormap))), 0, 16, (&(((half*)dyn_ptr)[0])), streamed_ptr[0]);" in calls[1]
    assert "createpolicy.fractional.L2::evict_first.b64 %0, %1;" in cuda  # only the kernel's
    assert cuda.count("createpolicy.fractional") == 1


def _reshaping_copy(dispatch: str):
    """A copy whose regions hold equal bytes in different shapes (8 x 64 vs 512)."""

    # fmt: off
    @T.prim_func
    def k(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (512,), "float16", layout=TileLayout(S[512]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((2048,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((8, 64), "float16", dyn.data, elem_offset=0,
                             layout=TileLayout(S[8, 64]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=1024 // 8)
        if tid == 0:
            Tx.copy_async(tile[:, :], A[:], dispatch=dispatch, mbar=mbar.ptr_to([0]))
    # fmt: on
    return k


def test_parse_time_region_check_matches_upstream_tma_variants():
    # Upstream's TMA variants accept equal-byte regions at parse time; so must "tma" ...
    _reshaping_copy("tma_auto")
    _reshaping_copy("tma")
    # ... while the elementwise variants keep the strict shape check.
    with pytest.raises(Exception, match="identical regions"):
        _reshaping_copy("ldgsts")


def test_reshaping_copy_plans():
    """TIRx pairs the regions' elements in row-major order: 512 halves fill the 8 x 64 tile
    as one run (rank 1, promoted to 256 uint32)."""
    cuda, _ = _compile(_reshaping_copy("tma"))
    (call,) = [line.strip() for line in cuda.splitlines()
               if line.strip().startswith("tvm_tma_load_")]
    assert "(&(A_tensormap))), 0, (" in call
    assert "cp.async.bulk.tensor.1d.shared::cluster.global" in cuda


def test_region_element_counts_must_match():
    """Built without the parser (which checks equal bytes), a copy whose regions hold
    different element counts fails the predicate with [extent]."""
    from tvm_tma.dispatch.predicates import check_copy
    from tvm_tma.planner import PlanError

    smem = tvm.tirx.decl_buffer((8, 64), "float16", "smem", scope="shared.dyn",
                                layout=TileLayout(S[8, 64]))
    glob = tvm.tirx.decl_buffer((1024,), "float16", "A", layout=TileLayout(S[1024]))
    dst = tvm.tirx.BufferRegion(smem, [tvm.ir.Range(0, 8), tvm.ir.Range(0, 64)])
    src = tvm.tirx.BufferRegion(glob, [tvm.ir.Range(0, 1000)])

    class Op:
        args = (dst, src)

    with pytest.raises(PlanError) as info:
        check_copy(Op())
    assert info.value.rule == "extent" and "512" in info.value.detail \
        and "1000" in info.value.detail


def test_seed_encode_arguments_in_driver_order():
    from tvm_tma.demo import demo_plan
    from tvm_tma.intrin.host import encode_arguments

    spec = demo_plan().tensor_map
    assert encode_arguments(spec, "A.data") == [
        "float16", 3, "A.data",
        64, 8, 4,        # global dims, innermost first
        512, 128,        # byte strides of dims 1 and 2
        64, 8, 4,        # box
        1, 1, 1,         # element strides
        0, 3, 2, 0,      # interleave none, swizzle 128B, L2 promotion 128B, OOB fill none
    ]


def test_encoder_accepts_the_seed_map_and_names_a_broken_rule():
    import tvm_ffi

    from tvm_tma.demo import demo_plan
    from tvm_tma.intrin.host import encode_arguments

    validate = tvm_ffi.get_global_func("tvm_tma.validate_tiled")
    arguments = encode_arguments(demo_plan().tensor_map, 0x10000)
    validate(*arguments)
    arguments[2] = 0x10008  # 8-byte aligned base
    with pytest.raises(ValueError, match="global-address-align"):
        validate(*arguments)


def _per_cta_kernel(rows: int, ctas: int):
    """CTA ``cta`` loads rows [8 cta, 8 cta + 8) of a (rows x 64) tensor: a CTA-dependent copy."""

    # fmt: off
    @T.prim_func
    def k(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (rows, 64), "float16", layout=TileLayout(S[rows, 64]))
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((8, 64), "float16", dyn.data, elem_offset=0,
                             layout=TileLayout(S[8, 64]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            Tx.copy_async(tile[:, :], A[cta * 8:cta * 8 + 8, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]))
    # fmt: on
    return k


def test_cta_dependent_coordinates_use_the_scope_id_range():
    """``T.cta_id([4])`` bounds ``cta`` to [0, 4): rows 8 cta .. 8 cta + 8 fit 32 rows."""
    cuda, _ = _compile(_per_cta_kernel(rows=32, ctas=4))
    call = next(line.strip() for line in cuda.splitlines()
                if line.strip().startswith("tvm_tma_load_"))
    # Whole rows are one run (rank 1, promoted to uint32): rows 8 cta.. start at 256 cta.
    assert "(&(A_tensormap))), (((int)blockIdx.x) * 256)," in call
    assert len(assemble(cuda)) > 0


def test_cta_range_that_overruns_the_tensor_is_refused():
    """With 4 CTAs and only 24 rows, CTA 3 would read rows 24..32: refused, naming the rule."""
    with pytest.raises(Exception) as info:
        _compile(_per_cta_kernel(rows=24, ctas=4))
    message = str(info.value)
    assert "[region-bounds]" in message and "[0, 24)" in message


def _built_cuda(entry: str, func, arch: str = "sm_90a") -> str:
    """CUDA source of ``func`` built through ``tvm.compile``, ``tvm.tirx.build`` or
    ``tvm.build`` (deprecated in 0.27, still what many scripts call)."""
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    mod = tvm.IRModule({"main": func})
    if entry == "compile":
        return tvm.compile(mod, target=target, tir_pipeline="tirx").mod.imports[0] \
            .inspect_source()
    build = tvm.tirx.build if entry == "tirx.build" else tvm.build
    return build(mod, target=target, pipeline="tirx").imports[0].inspect_source()


@pytest.mark.filterwarnings("ignore:build is deprecated:DeprecationWarning")
@pytest.mark.parametrize("entry", ["compile", "tirx.build", "build"])
def test_both_entry_points_plan_and_emit_the_demo(entry):
    """Kernel authors reach TVM through tvm.compile(tir_pipeline=) or tvm.build(pipeline=)."""
    from tvm_tma.demo import demo_kernel

    cuda = _built_cuda(entry, demo_kernel())
    asm = re.findall(r'asm volatile\("(cp\.async\.bulk\.tensor[^"]*)"', cuda)
    assert sorted(asm) == [
        "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];",
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%0], [%1, {%2, %3, %4}], [%5];",
    ]
    assert _kernel_signature(cuda).count("const __grid_constant__ CUtensorMap") == 2
    assemble(cuda)


@pytest.mark.filterwarnings("ignore:build is deprecated:DeprecationWarning")
def test_default_pipeline_is_not_a_tirx_pipeline():
    """TVM's default pipeline fails inside TVM for any TIRx kernel: the README says to pass
    pipeline="tirx" (tvm.build) or tir_pipeline="tirx" (tvm.compile)."""
    from tvm_tma.demo import demo_kernel

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with pytest.raises(Exception, match="are not passed in as API arguments"):
        tvm.build(tvm.IRModule({"main": demo_kernel()}), target=target)
