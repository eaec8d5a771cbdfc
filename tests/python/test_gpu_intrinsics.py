"""The intrinsics on a Hopper GPU, bit-exact; in CI every kernel is assembled for sm_90a."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from intrinsic_kernels import COLS, KERNELS, ROWS

from tvm_tma.testing.runner import assemble

SM90A = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _build(name):
    return tvm.compile(tvm.IRModule({"main": KERNELS[name]()}), target=SM90A,
                       tir_pipeline="tirx")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_intrinsic_kernel_assembles_for_sm90a(name):
    source = _build(name).mod.imports[0].inspect_source()
    assert "tvm_tma_" in source
    assert len(assemble(source)) > 0


def _random_f16(shape, rng):
    import torch

    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    bits &= 0x7BFF  # finite values only, so equality below is bit equality
    return torch.from_numpy(bits.view(np.float16).copy()).cuda()


def _poison(shape, dtype):
    import torch

    return torch.full(shape, -7.0, dtype=dtype, device="cuda")


def _bits_equal(a, b) -> bool:
    import torch

    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.gpu
def test_multicast_load_reaches_both_ctas_of_the_cluster():
    import torch

    rng = np.random.default_rng(11)
    source = _random_f16((ROWS, COLS), rng)
    out = _poison((2, ROWS, COLS), torch.float16)
    _build("multicast")["main"](source, out)
    torch.cuda.synchronize()
    assert _bits_equal(out[0], source), "CTA 0 (the issuer) did not receive the tile"
    assert _bits_equal(out[1], source), "CTA 1 did not receive the multicast tile"


@pytest.mark.gpu
def test_reduce_add_and_max_into_global():
    import torch

    rng = np.random.default_rng(12)
    g = torch.from_numpy(rng.standard_normal((ROWS, COLS)).astype(np.float32)).cuda()
    x = torch.from_numpy(rng.standard_normal((ROWS, COLS)).astype(np.float32)).cuda()
    h = torch.from_numpy(rng.integers(-1000, 1000, (ROWS, COLS), dtype=np.int32)).cuda()
    y = torch.from_numpy(rng.integers(-1000, 1000, (ROWS, COLS), dtype=np.int32)).cuda()
    want_sum = (g.cpu().numpy() + x.cpu().numpy()).astype(np.float32)
    want_max = np.maximum(h.cpu().numpy(), y.cpu().numpy())
    _build("reduce")["main"](g, x, h, y)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(g.cpu().numpy().view(np.uint32), want_sum.view(np.uint32))
    np.testing.assert_array_equal(h.cpu().numpy(), want_max)


@pytest.mark.gpu
def test_prefetch_then_cache_hinted_load():
    import torch

    rng = np.random.default_rng(13)
    source = _random_f16((2 * ROWS, COLS), rng)
    out = _poison((ROWS, COLS), torch.float16)
    _build("prefetch")["main"](source, out)
    torch.cuda.synchronize()
    assert _bits_equal(out, source[ROWS:])


@pytest.mark.gpu
def test_device_rebind_to_a_second_tensor():
    import torch

    rng = np.random.default_rng(14)
    first = _random_f16((ROWS, COLS), rng)
    second = _random_f16((3 * ROWS, 2 * COLS), rng)  # other dims and row stride
    slot = torch.zeros(128, dtype=torch.uint8, device="cuda")
    out = _poison((ROWS, COLS), torch.float16)
    _build("rebind")["main"](first, second, slot, out)
    torch.cuda.synchronize()
    assert _bits_equal(out, second[ROWS:2 * ROWS, :COLS]), "load did not follow the rebind"
    assert not _bits_equal(out, first)


@pytest.mark.gpu
def test_bulk_copy_round_trip():
    import torch

    rng = np.random.default_rng(15)
    source = torch.from_numpy(rng.integers(0, 256, 2048, dtype=np.uint8)).cuda()
    out = torch.full((2048,), 0xA5, dtype=torch.uint8, device="cuda")
    _build("bulk")["main"](source, out)
    torch.cuda.synchronize()
    assert torch.equal(out, source)
