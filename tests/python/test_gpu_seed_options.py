"""The seed options on a Hopper GPU, bit-exact against numpy with poisoned outputs: multicast
in clusters of 2 and 4 (plain and 128B-swizzled tiles, split among the CTAs or sent by one),
every tensor reduction PTX defines on every element type it allows, prefetch then load, and
loads through maps of every L2 promotion. In CI each kernel is assembled for sm_90a.
"""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from seed_kernels import (
    multicast_kernel,
    numpy_type,
    prefetch_kernel,
    promotion_kernel,
    reduce_data,
    reduce_kernel,
    reduce_reference,
)

from tvm_tma.planner.reductions import REDUCE_TYPES
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.scripts import load_script

MULTICASTS = [  # rows, cols, CTAs per cluster, swizzle, split among the CTAs
    (64, 64, 2, 0, True), (64, 64, 4, 0, True), (128, 128, 2, 3, True),
    (128, 128, 4, 3, True), (64, 64, 2, 3, False), (128, 64, 4, 0, False),
    (8, 64, 4, 3, True),  # two 128B-swizzled rows per CTA: pieces off the 1024-byte period
]
CLUSTERS = 3
PAIRS = [(op, dtype) for op, dtypes in REDUCE_TYPES.items() for dtype in dtypes]
POISON = 0xA5


def _ids(case) -> str:
    rows, cols, ctas, swizzle, split = case
    return f"{rows}x{cols}-{ctas}ctas-swizzle{swizzle}-{'split' if split else 'mask'}"


def _run(built, *arrays: np.ndarray) -> list[np.ndarray]:
    """Launch ``built`` on copies of ``arrays``; every array comes back."""
    import tvm

    device = tvm.cuda(0)
    tensors = [tvm.runtime.tensor(array, device) for array in arrays]
    built.executable["main"](*tensors)
    device.sync()
    return [tensor.numpy() for tensor in tensors]


def _poisoned(shape, dtype) -> np.ndarray:
    return np.full(int(np.prod(shape)) * np.dtype(dtype).itemsize, POISON,
                   dtype=np.uint8).view(dtype).reshape(shape)


def _random_bits(shape, rng) -> np.ndarray:
    return rng.integers(0, 1 << 16, size=shape, dtype=np.uint16).view(np.float16)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


# ---- every kernel assembles for sm_90a (CI) ----------------------------------------------

@pytest.mark.parametrize("case", MULTICASTS, ids=_ids)
def test_multicast_kernel_assembles(case):
    rows, cols, ctas, swizzle, split = case
    built = compile_kernel(multicast_kernel(rows, cols, ctas, CLUSTERS, swizzle, split=split))
    assert len(assemble(built.cuda_source)) > 0


@pytest.mark.parametrize("op,dtype", PAIRS, ids=[f"{op}-{dtype}" for op, dtype in PAIRS])
def test_reduce_kernel_assembles(op, dtype):
    built = compile_kernel(reduce_kernel(op, dtype))
    assert f".{op}.bulk_group" in built.cuda_source
    assert len(assemble(built.cuda_source)) > 0


# ---- on the GPU ------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("case", MULTICASTS, ids=_ids)
def test_every_cta_of_the_cluster_receives_the_whole_tile(case):
    rows, cols, ctas, swizzle, split = case
    built = compile_kernel(multicast_kernel(rows, cols, ctas, CLUSTERS, swizzle, split=split))
    source = _random_bits((CLUSTERS * rows, cols), np.random.default_rng(rows + ctas))
    out = _poisoned((CLUSTERS, ctas, rows, cols), np.float16)
    _, result = _run(built, source, out)
    for cluster in range(CLUSTERS):
        tile = source[cluster * rows:(cluster + 1) * rows]
        for rank in range(ctas):
            assert _same_bits(result[cluster, rank], tile), f"cluster {cluster}, CTA {rank}"


@pytest.mark.gpu
@pytest.mark.parametrize("op,dtype", PAIRS, ids=[f"{op}-{dtype}" for op, dtype in PAIRS])
def test_reduction_matches_numpy(op, dtype):
    rows, cols, ctas = 16, 64, 2
    rng = np.random.default_rng(zlib.crc32(f"{op}-{dtype}".encode()))
    old = reduce_data(dtype, (ctas * rows, cols), rng)
    new = reduce_data(dtype, (ctas, rows, cols), rng)
    if op in ("inc", "dec"):  # make the wrap cases certain: old >= new, old == 0, old > new
        old[0, :8] = new[0, 0, :8]
        old[0, 8:16] = 0
        old[0, 16:24] = new[0, 0, 16:24] + np.uint32(1)
    built = compile_kernel(reduce_kernel(op, dtype, rows, cols, ctas))
    result, staged = _run(built, old, new)
    expected = reduce_reference(op, old, new.reshape(ctas * rows, cols))
    assert _same_bits(staged, new)
    assert _same_bits(result, expected), (
        f"{op} on {dtype}: {np.count_nonzero(result.view(np.uint8) != expected.view(np.uint8))}"
        " bytes differ")


@pytest.mark.gpu
@pytest.mark.parametrize("op,dtype", [("add", "int32"), ("max", "int64"), ("xor", "uint32")])
def test_every_cta_accumulates_into_the_same_tile(op, dtype):
    """Split-K: four CTAs reduce into one tile; the result is order-free for these ops."""
    rows, cols, ctas = 16, 64, 4
    rng = np.random.default_rng(5)
    old = reduce_data(dtype, (rows, cols), rng)
    new = reduce_data(dtype, (ctas, rows, cols), rng)
    built = compile_kernel(reduce_kernel(op, dtype, rows, cols, ctas, shared_target=True))
    result, _ = _run(built, old, new)
    expected = old
    for cta in range(ctas):
        expected = reduce_reference(op, expected, new[cta])
    assert _same_bits(result, expected)


@pytest.mark.gpu
def test_prefetch_then_load_copies_every_tile():
    built = compile_kernel(prefetch_kernel())
    source = _random_bits((4 * 64, 64), np.random.default_rng(3))
    _, out = _run(built, source, _poisoned(source.shape, np.float16))
    assert _same_bits(out, source)


@pytest.mark.gpu
@pytest.mark.parametrize("first,second", [("none", 64), (128, 256), (None, "none")])
def test_loads_through_maps_of_every_promotion_are_exact(first, second):
    built = compile_kernel(promotion_kernel(first, second))
    source = _random_bits((64, 64), np.random.default_rng(4))
    _, out = _run(built, source, _poisoned(source.shape, np.float16))
    assert _same_bits(out, source)


def test_reduce_data_is_finite_and_spans_both_signs():
    for dtype in ("float16", "bfloat16", "float32", "int32", "int64"):
        values = reduce_data(dtype, (64, 64), np.random.default_rng(0)).astype(np.float64)
        assert np.isfinite(values).all() and (values < 0).any() and (values > 0).any()
    assert reduce_data("bfloat16", (2,), np.random.default_rng(0)).dtype == numpy_type(
        "bfloat16")


# ---- the example and the benchmark ---------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _example():
    return load_script(REPO / "examples" / "cluster_multicast.py")


def test_cluster_multicast_example_shares_b_and_assembles():
    example = _example()
    built = compile_kernel(example.gemm_kernel(256, 128, 512))
    loads = [line.strip() for line in built.cuda_source.splitlines()
             if line.strip().startswith("tvm_tma_load_")]
    # Prologue and refill each load A (whole) and B (this CTA's half, multicast to both).
    assert len(loads) == 4 and sum(line.endswith("(ushort)3);") for line in loads) == 2
    assert len(assemble(built.cuda_source)) > 0


def test_multicast_benchmark_compiles():
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "multicast.py"),
                          "--compile-only", "--tiles", "16"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("2 TMA call sites") == 8


@pytest.mark.gpu
def test_cluster_multicast_example_is_bit_exact(capsys):
    assert _example().main() == 0
    assert "GPU run: bit-exact" in capsys.readouterr().out
