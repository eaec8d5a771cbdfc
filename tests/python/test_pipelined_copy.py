"""tvm_tma.kernels.pipelined_copy (run by examples/pipelined_copy.py) and the streaming-copy
benchmarks: generated code and results.

CPU: the persistent kernel's device code (exact TMA instructions, the ring's pipeline
ops, the dynamic scheduler's draws and reset), its shape checks, and
``benchmarks/copy_bandwidth.py --compile-only`` (every benchmark kernel built and assembled
for sm_90a). GPU: the persistent kernel copies bit-exactly for
uneven tile shares, idle CTAs, two stages, float32, the 128B-swizzled ring, the dynamic
schedule (three launches: the counters reset themselves) and L2 cache hints.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import tvm

from tvm_tma.kernels.pipelined_copy import PipelineShape, pipelined_copy_kernel
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
_BENCHMARK = load_script(REPO / "benchmarks" / "copy_bandwidth.py")
Problem, one_tile_kernel = _BENCHMARK.Problem, _BENCHMARK.one_tile_kernel


def _build(shape: PipelineShape):
    built = compile_kernel(pipelined_copy_kernel(shape))
    return built.executable, built.cuda_source


def _calls(cuda: str, prefix: str) -> list[str]:
    return [line.strip() for line in cuda.splitlines() if line.strip().startswith(prefix)]


def test_persistent_kernel_device_code():
    """Row-major ring: one 2-D box of 128 x 128 per tile, at the tile's (column, row)."""
    executable, cuda = _build(PipelineShape(1024, 512, "float16", stages=3, ctas=5))
    assert ('asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::'
            'complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"') in cuda
    assert ('asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group '
            '[%0, {%1, %2}], [%3];"') in cuda
    assert cuda.count('asm volatile("cp.async.bulk.wait_group.read 1;"') == 1
    loads, stores = _calls(cuda, "tvm_tma_load_"), _calls(cuda, "tvm_tma_store_")
    assert len(loads) == 2 and len(stores) == 1  # prologue + refill; one store
    # 4 tiles per row of 512 columns; the ring starts 1024 bytes (512 halves) in.
    assert "(((half*)dyn_ptr)[((k * 16384) + 512)])" in loads[0]
    # Tile t = lane + k * lanes is a local scalar; the guard t < 32 bounds it (no clamp).
    assert "(&(A_tensormap))), ((tile_ptr[0] & 3) * 128), ((tile_ptr[0] >> 2) * 128)" \
        in loads[0]
    assert "tile_ptr[0] = ((k * 5) + ((int)blockIdx.x));" in cuda
    assert "(&(B_tensormap))), ((tile_ptr_1[0] & 3) * 128)" in stores[0]
    assert not re.search(r"\bmin\(\(", cuda)  # no clamp of the tile index
    assert len(assemble(cuda)) > 0


def test_swizzled_ring_moves_each_tile_as_one_3d_box():
    """128B swizzle caps the inner box at 64 halves: the planner folds the tile's two
    64-column halves into a third map dimension, so each tile is still one instruction."""
    _, cuda = _build(PipelineShape(1024, 512, "float16", stages=3, ctas=5, swizzle=True))
    loads, stores = _calls(cuda, "tvm_tma_load_"), _calls(cuda, "tvm_tma_store_")
    assert len(loads) == 2 and len(stores) == 1
    assert "cp.async.bulk.tensor.3d.shared::cluster.global" in cuda
    assert re.search(r"\(&\(A_tensormap\)\)\), 0, .* \* 128\), .* \* 2\)", loads[0]), loads[0]
    assert len(assemble(cuda)) > 0


def test_dynamic_schedule_device_code():
    """Static prologue, then one atomic draw per refill (drawn one refill ahead), a drain
    loop on the held tile indices, and the last producer's counter reset."""
    shape = PipelineShape(1024, 512, "float16", stages=2, ctas=5, schedule="dynamic",
                          load_hint="evict_first")
    executable, cuda = _build(shape)
    signature = next(line for line in cuda.splitlines() if line.startswith('extern "C"'))
    assert signature.endswith("B_tensormap, int* __restrict__ work_ptr);")
    draws = re.findall(r"drawn_ptr\[0\] = \(tvm_builtin_cuda_atomic_add\("
                       r"\(&\(work_ptr\[0\]\)\), 1\) \+ (\d+)\);", cuda)
    assert draws == ["10", "10"]  # 2 stages x 5 lanes are the static prologue's tiles
    assert "while (1) {" in cuda
    # The loop ends when the slot to store holds an index past the 32 tiles.
    assert "if (!((tile_ptr[0] < 32))) { break; }" in cuda
    assert "tile_ptr[0] = ((int*)dyn_ptr)[((k_ptr[0] & 1) + 128)];" in cuda
    assert "if (tvm_builtin_cuda_atomic_add((&(work_ptr[1])), 1) == 4) {" in cuda
    assert cuda.index("tvm_builtin_cuda_thread_fence();") < cuda.index("(&(work_ptr[1]))")
    # Every load carries the evict_first policy; the stores carry none.
    assert ("mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;"
            in cuda)
    assert "bulk_group [%0, {%1, %2}], [%3];" in cuda
    assert len(_calls(cuda, "tvm_tma_load_")) == 2 and len(_calls(cuda, "tvm_tma_store_")) == 1
    assert len(assemble(cuda)) > 0


@pytest.mark.parametrize("schedule", ["static", "dynamic"])
@pytest.mark.parametrize("producers", [1, 4])
def test_ring_is_a_tma_pipeline_drained_by_stores(schedule, producers):
    """Each producer's ring is a TmaPipeline with empty=None: one full mbarrier per slot
    (initialised unrolled, one arrival each, at the producer's own slots), one try_wait per
    tile (consumer_wait), and the refill acquires with ``wait_group.read 1`` between the
    store's commit and the refill load; no empty barriers, no other wait."""
    stages = 3
    shape = PipelineShape(2048, 1024, "float16", tile_rows=32, stages=stages, ctas=5,
                          producers=producers, schedule=schedule)
    _, cuda = _build(shape)
    # The kernel's definition (the first `extern "C" __global__` line declares it).
    body = cuda[cuda.index(") {", cuda.index('extern "C" __global__')):]
    inits = re.findall(r"tvm_builtin_ptx_mbarrier_init_init_shared_b64\(.*?dyn_ptr\)\[(.*?)\]\)"
                       r"\)\), \(uint\)(\d+)\);", body)
    slots = [index for index, _ in inits]
    assert len(inits) == stages and len(set(slots)) == stages, inits
    assert all(count == "1" for _, count in inits)  # full barriers only: one arrival
    if producers == 1:
        assert slots == ["0", "1", "2"]
    else:  # ring p starts at barrier p * stages
        assert slots[0] == "((((int)threadIdx.x) >> 5) * 3)"
    assert cuda.count("mbarrier.init.shared.b64") == 1  # the one helper
    # One try_wait loop (the helper) and one call to it per tile: consumer_wait.
    assert cuda.count("mbarrier.try_wait") == 1
    assert body.count("tvm_builtin_cuda_mbarrier_wait(") == 1
    assert "mbarrier.arrive.shared" not in cuda  # no empty barriers to release
    # producer_acquire(k - 1 + stages, pending_stores=1): after the store's commit, before
    # the refill's load; the epilogue waits for every store's reads.
    read1 = "tvm_builtin_ptx_cp_async_bulk_wait_group_async_bulk_wait_group_read_1();"
    read0 = "tvm_builtin_ptx_cp_async_bulk_wait_group_async_bulk_wait_group_read_0();"
    assert body.count(read1) == 1 and body.count(read0) == 1
    assert cuda.count("cp.async.bulk.wait_group") == 2  # read 1 and read 0, nothing else
    lines = [line.strip() for line in body.splitlines()]
    position = {name: next(i for i, line in enumerate(lines) if line.startswith(prefix))
                for name, prefix in [("wait", "tvm_builtin_cuda_mbarrier_wait("),
                                     ("store", "tvm_tma_store_"),
                                     ("commit", "tvm_builtin_ptx_cp_async_bulk_commit_group"),
                                     ("read1", read1), ("read0", read0)]}
    refill = [i for i, line in enumerate(lines) if line.startswith("tvm_tma_load_")][1]
    assert (position["wait"] < position["store"] < position["commit"] < position["read1"]
            < refill < position["read0"]), position
    # The refill announces its bytes right after its load, on the load's barrier.
    expect = lines[refill + 1]
    assert expect.startswith("tvm_builtin_ptx_mbarrier_arrive_expect_tx"), expect
    assert lines[refill].split(", ")[-1].rstrip(");") in expect
    assert len(assemble(cuda)) > 0


def test_one_tile_kernel_in_row_bands():
    """chunks=4: four 32-row bands, each loaded on its own mbarrier and stored once it has
    arrived; one read-wait at the end."""
    built = compile_kernel(one_tile_kernel(Problem(1024, 512, "float16"), (128, 128),
                                           chunks=4))
    cuda = built.cuda_source
    lines = _calls(cuda, ("tvm_tma_load_", "tvm_tma_store_", "tvm_builtin_cuda_mbarrier_wait"))
    loads, rest = lines[:4], lines[4:]
    tile_row = "((((int)blockIdx.x) >> 2) * 128)"
    for band in range(4):
        row = tile_row if band == 0 else f"({tile_row} + {band * 32})"
        column = "((((int)blockIdx.x) & 3) * 128)"
        smem = f"(&(((half*)dyn_ptr)[{band * 4096}]))"  # 32 rows x 128 halves per band
        mbar = f"(&(((uint64_t*)dyn_ptr)[{4096 + band}]))"  # right after the 32 KiB tile
        assert loads[band].endswith(f"{smem}, ((unsigned long long)(&(A_tensormap))), "
                                    f"{column}, {row}, {mbar});")
        # Band by band: wait for this band's barrier, then store the band.
        assert rest[2 * band] == f"tvm_builtin_cuda_mbarrier_wait({mbar}, 0);"
        assert rest[2 * band + 1].endswith(
            f"((unsigned long long)(&(B_tensormap))), {column}, {row}, {smem});")
    assert len(rest) == 8
    assert cuda.count('asm volatile("cp.async.bulk.wait_group.read 0;"') == 1
    assert len(assemble(cuda)) > 0
    with pytest.raises(ValueError, match="chunks=3 does not divide the tile's 128 rows"):
        one_tile_kernel(Problem(1024, 512, "float16"), (128, 128), chunks=3)


@pytest.mark.parametrize("kwargs, message", [
    ({"tile_rows": 96}, "tile 96x128 does not divide the tensor 1024x512"),
    ({"stages": 1}, "stages=1"),
    ({"stages": 8}, "8 slots of 32768 bytes need 263168 bytes"),
    ({"producers": 2, "stages": 4}, "8 slots of 32768 bytes need 263168 bytes"),
    ({"producers": 32, "stages": 3, "tile_rows": 8}, "at most 32 producers and 64 slots"),
    ({"schedule": "guided"}, "schedule='guided'"),
])
def test_shapes_the_kernel_cannot_run_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        pipelined_copy_kernel(PipelineShape(1024, 512, "float16", **kwargs))


def test_bandwidth_benchmark_compiles_and_assembles_every_kernel():
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "copy_bandwidth.py"), "--compile-only"],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [line for line in result.stdout.splitlines() if "assembled for sm_90a" in line]
    assert len(lines) == 12, result.stdout
    for problem in ("16384x8192 float16", "8192x8192 float32", "32768x4096 bfloat16"):
        for kernel in ("persistent ", "one-tile ", "persistent-swizzled ",
                       "persistent-static "):
            assert any(line.startswith(problem) and f" {kernel}" in line for line in lines)


GPU_SHAPES = [
    PipelineShape(1024, 1024, "float16", stages=4, ctas=132),  # 64 tiles: 68 CTAs idle
    PipelineShape(4096, 1024, "float16", stages=3, ctas=7),  # 256 tiles, 36 or 37 each
    PipelineShape(2048, 512, "float16", tile_rows=64, tile_cols=128, stages=2, ctas=13),
    PipelineShape(1024, 1024, "float32", tile_cols=64, stages=4, ctas=11),
    PipelineShape(2048, 1024, "bfloat16", stages=4, ctas=9, swizzle=True),
    PipelineShape(1024, 512, "float32", tile_cols=64, stages=3, ctas=5, swizzle=True),
    PipelineShape(2048, 1024, "float16", tile_rows=64, stages=3, producers=3, ctas=5),
    PipelineShape(2048, 1024, "bfloat16", stages=2, producers=2, ctas=7, swizzle=True),
    # Dynamic schedule: more tiles than the static prologue covers, none left over for
    # some producers, idle CTAs, several producers, swizzle and L2 hints.
    PipelineShape(4096, 1024, "float16", stages=3, ctas=7, schedule="dynamic"),
    PipelineShape(2048, 512, "float32", tile_cols=64, stages=2, ctas=13, schedule="dynamic",
                  load_hint="evict_first", store_hint="evict_first"),
    PipelineShape(1024, 1024, "float16", stages=4, ctas=132, schedule="dynamic"),
    PipelineShape(2048, 1024, "bfloat16", tile_rows=64, stages=2, producers=3, ctas=5,
                  schedule="dynamic", swizzle=True, load_hint="evict_last"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES,
                         ids=[f"{s.rows}x{s.cols}-{s.dtype}-{s.tile_rows}x{s.tile_cols}-"
                              f"s{s.stages}-p{s.producers}-c{s.ctas}{'-swz' if s.swizzle else ''}"
                              f"{'-dyn' if s.schedule == 'dynamic' else ''}"
                              f"{'-hint' if s.load_hint or s.store_hint else ''}"
                              for s in GPU_SHAPES])
def test_persistent_copy_is_bit_exact_on_gpu(shape):
    executable, _ = _build(shape)
    extra = ()
    if shape.schedule == "dynamic":
        extra = (tvm.runtime.tensor(np.zeros(2, np.int32), tvm.cuda(0)),)
    _check_copy(executable, shape.rows, shape.cols, shape.dtype, extra,
                seed=shape.rows + shape.ctas)


#: (problem, tile (None: the default), row bands, CTAs-per-SM cap (0: none))
ONE_TILE_CASES = [
    ((2048, 1024, "float16"), None, 1, 3), ((2048, 1024, "float16"), (128, 128), 4, 0),
    ((1024, 512, "float32"), (64, 64), 2, 2), ((512, 2048, "bfloat16"), (4, 2048), 2, 0),
]


@pytest.mark.gpu
@pytest.mark.parametrize("problem, tile, chunks, per_sm", ONE_TILE_CASES)
def test_one_tile_copy_is_bit_exact_on_gpu(problem, tile, chunks, per_sm):
    """The benchmark's one-tile kernel: default and whole-row tiles, row bands, and the
    shared-memory padding that caps CTAs per SM."""
    kernel = one_tile_kernel(Problem(*problem), tile, chunks=chunks, per_sm=per_sm)
    _check_copy(compile_kernel(kernel).executable, *problem, (),
                seed=sum(problem[:2]) + chunks)


def _gpu_kernels():
    for shape in GPU_SHAPES:
        yield pipelined_copy_kernel(shape)
    for problem, tile, chunks, per_sm in ONE_TILE_CASES:
        yield one_tile_kernel(Problem(*problem), tile, chunks=chunks, per_sm=per_sm)


def test_every_gpu_test_kernel_assembles_for_sm90a():
    """CI has no GPU: the kernels the GPU tests launch are assembled here instead."""
    for kernel in _gpu_kernels():
        assert len(assemble(compile_kernel(kernel).cuda_source)) > 0


def _check_copy(executable, rows: int, cols: int, dtype: str, extra: tuple, seed: int):
    """Random bits in, poison out, three launches, every element compared each time."""
    device = tvm.cuda(0)
    word = np.uint16 if tvm.DataType(dtype).bits == 16 else np.uint32
    rng = np.random.default_rng(seed)
    source = rng.integers(0, np.iinfo(word).max, (rows, cols), dtype=word)
    poison = np.full_like(source, 0xA5A5A5A5 & np.iinfo(word).max)
    numpy_dtype = {"float16": np.float16, "float32": np.float32,
                   "bfloat16": ml_dtypes.bfloat16}[dtype]
    a = tvm.runtime.empty(source.shape, dtype, device)
    b = tvm.runtime.empty(source.shape, dtype, device)
    a.copyfrom(source.view(numpy_dtype))
    b.copyfrom(poison.view(numpy_dtype))
    for _ in range(3):  # later launches replay the cached maps (and reuse the counters)
        executable["main"](a, b, *extra)
        device.sync()
        result = b.numpy().view(word)
        mismatched = np.flatnonzero(result != source)
        assert mismatched.size == 0, (
            f"{mismatched.size} elements differ, first at flat index {mismatched[:5]}")
        if extra:  # the last producer to finish left the scheduler's counters zero
            assert extra[0].numpy().tolist() == [0, 0]
        b.copyfrom(poison.view(numpy_dtype))
