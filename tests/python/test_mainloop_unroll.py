"""The mainloops' K loops (tvm_tma.kernels.wgmma.k_loop): unrolled in the CUDA the GEMM and
conv2d kernels emit where the step count is a constant within the accumulator-step budget,
a loop otherwise; either way the kernel assembles for sm_90a."""

from __future__ import annotations

import math
import re

import pytest

from tvm_tma.conv import Conv2dGeometry
from tvm_tma.kernels import wgmma
from tvm_tma.kernels.conv2d import conv2d_config, conv2d_kernel
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.kernels.tiling import PINGPONG_UNROLLED_STEPS
from tvm_tma.kernels.tiling import model as tiling_model
from tvm_tma.testing.runner import assemble, compile_kernel, ptxas_usage

#: The K loops TVM writes for a rolled mainloop: ``for (int ks = 0; ks < 20; ++ks)`` (the
#: producer's) and ``ks_1`` (the consumers').
K_LOOP = re.compile(r"for \(int ks(?:_\d+)? = 0; ks(?:_\d+)? < (\d+); \+\+ks(?:_\d+)?\)")
MMA = re.compile(r"wgmma_[a-z0-9_]*mma_async\w*\(")
LOAD = re.compile(r"tvm_tma_load_\w+\(")


def calls(pattern: re.Pattern, src: str) -> int:
    """Call sites of ``pattern`` in ``src`` (not the helper's own definition)."""
    return sum(len(pattern.findall(line)) for line in src.splitlines()
               if "__device__" not in line)


def narrow(k: int) -> GemmConfig:
    """One wave of 64 x 48 tiles (24 accumulators a consumer thread), whole K each."""
    return GemmConfig(1024, 384, k, block_m=64, block_n=48, epilogue_n=0, stages=8,
                      schedule="cooperative")


def test_a_short_mainloop_is_unrolled_step_by_step():
    cfg = narrow(1280)  # 20 K steps x 24 accumulators = 480 <= the budget
    assert cfg.k_steps * cfg.accumulators <= wgmma.UNROLLED_ACCUMULATOR_STEPS
    src = compile_kernel(gemm_kernel(cfg)).cuda_source
    assert K_LOOP.findall(src) == []
    # Four k16 MMAs a 64-column K step, every step written out; one A and one B load a
    # step in the producer.
    assert calls(MMA, src) == 4 * cfg.k_steps
    assert calls(LOAD, src) == 2 * cfg.k_steps
    assert len(assemble(src)) > 0


def test_a_mainloop_past_the_budget_stays_a_loop():
    cfg = GemmConfig(2048, 2048, 4096, block_m=128, block_n=256, epilogue_n=128, stages=4,
                     schedule="cooperative")  # 64 steps x 128 accumulators
    assert cfg.k_steps * cfg.accumulators > wgmma.UNROLLED_ACCUMULATOR_STEPS
    src = compile_kernel(gemm_kernel(cfg)).cuda_source
    assert K_LOOP.findall(src) == ["64", "64"]  # the producer's and the consumers'
    assert calls(MMA, src) == 4


@pytest.mark.parametrize("extra", [0, 1])
def test_the_budget_is_inclusive(extra, monkeypatch):
    cfg = narrow(1280)
    monkeypatch.setattr(wgmma, "UNROLLED_ACCUMULATOR_STEPS",
                        cfg.k_steps * cfg.accumulators - extra)
    src = compile_kernel(gemm_kernel(cfg)).cuda_source
    assert K_LOOP.findall(src) == ([] if extra == 0 else ["20", "20"])


def test_a_stream_k_run_of_unknown_length_stays_a_loop():
    """Stream-K's runs start and end anywhere in a tile: their K step counts are
    expressions, which no unrolling can spell out."""
    cfg = GemmConfig(1536, 3072, 1024, block_m=128, block_n=128, epilogue_n=128, stages=6,
                     stream_k=True)
    src = compile_kernel(gemm_kernel(cfg)).cuda_source
    # The whole tiles before the shared-out ones have 16 K steps each (unrolled); the
    # segments' loops, the producer's and the consumers', are bounded by expressions.
    assert K_LOOP.findall(src) == []
    assert len(re.findall(r"for \(int ks(?:_\d+)? = 0; ks(?:_\d+)? < \(min\(", src)) == 2
    assert len(assemble(src)) > 0


def test_a_pointwise_conv_mainloop_is_unrolled():
    """conv2d shares the mainloop: SD UNet's N=1 1x1 32x32x1280 -> 640 (64 x 80 tiles, 20
    K steps) is written out step by step, its im2col-free A loads included."""
    geometry = Conv2dGeometry(1, 32, 32, 1280, 640, 1, 1)
    cfg = conv2d_config(geometry)
    assert (cfg.block_m, cfg.block_n, cfg.k_steps) == (64, 80, 20)
    src = compile_kernel(conv2d_kernel(geometry, cfg)).cuda_source
    assert K_LOOP.findall(src) == []
    assert calls(MMA, src) == 4 * cfg.k_steps
    assert len(assemble(src)) > 0


def pingpong(m: int, k: int) -> GemmConfig:
    """Ping-pong 128 x 128 tiles (128 accumulators a consumer thread) over N = 2048."""
    return GemmConfig(m, 2048, k, block_m=128, block_n=128, epilogue_n=64, stages=6,
                      schedule="pingpong")


@pytest.mark.parametrize("m, k, rolled", [
    (1536, 1024, True),   # 16 steps, 192 tiles on 132 CTAs: two rounds
    (1536, 768, False),   # 12 steps: PINGPONG_UNROLLED_STEPS
    (1024, 1024, False),  # 16 steps, 128 tiles: one round, every step's slot a constant
])
def test_a_pingpong_mainloop_of_two_rounds_unrolls_at_most_twelve_steps(m, k, rolled):
    """Unrolled past 12 steps of 128 x 128 ping-pong tiles taken in two rounds (nvcc
    unrolls the two-tile loop too), the code spills at the 168 registers of a 384-thread
    kernel (16 steps: 548 bytes, and 1x1 conv layers ran 1.21-1.32x slower so): those
    loops stay rolled, and the kernel spills nothing."""
    cfg = pingpong(m, k)
    assert PINGPONG_UNROLLED_STEPS == 12
    assert cfg.k_steps * cfg.accumulators <= wgmma.UNROLLED_ACCUMULATOR_STEPS
    assert math.ceil(cfg.work_units / cfg.workers) == (2 if m == 1536 else 1)
    src = compile_kernel(gemm_kernel(cfg)).cuda_source
    assert K_LOOP.findall(src) == ([str(cfg.k_steps)] * 2 if rolled else [])
    assert ptxas_usage(src).spill_store_bytes == 0


def test_the_two_round_pingpong_loop_spills_when_unrolled(monkeypatch):
    """Why the rule exists: without it the two-round kernel unrolls and ptxas (nvcc 13.0)
    spills; if a later nvcc stops spilling here, the rule is worth measuring again."""
    monkeypatch.setattr(tiling_model, "PINGPONG_UNROLLED_STEPS", 64)
    src = compile_kernel(gemm_kernel(pingpong(1536, 1024))).cuda_source
    assert K_LOOP.findall(src) == []
    assert ptxas_usage(src).spill_store_bytes > 0


def test_a_pingpong_mainloop_of_more_rounds_is_unrolled():
    """From three rounds the loop over tiles stays a loop, and the unrolled steps ran
    1.01-1.08x faster (seven 1x1 conv layers of 16 steps, 392 to 1568 tiles)."""
    cfg = pingpong(4096, 1024)  # 512 tiles: 4 rounds
    src = compile_kernel(gemm_kernel(cfg)).cuda_source
    assert K_LOOP.findall(src) == []
    assert len(assemble(src)) > 0


def test_the_stride_2_pointwise_layer_that_spilled_unrolled_stays_a_loop():
    """ResNet-50's N=32 1x1 14x14x1024 -> 2048 stride-2 shortcut: 208 ping-pong tiles of
    16 K steps (im2col A loads), rolled and spill-free."""
    geometry = Conv2dGeometry(32, 14, 14, 1024, 2048, 1, 1, stride=(2, 2))
    cfg = conv2d_config(geometry)
    assert (cfg.schedule, cfg.block_m, cfg.block_n, cfg.k_steps, cfg.num_tiles) == (
        "pingpong", 128, 128, 16, 208)
    src = compile_kernel(conv2d_kernel(geometry, cfg)).cuda_source
    assert K_LOOP.findall(src) == ["16", "16"]
    assert ptxas_usage(src).spill_store_bytes == 0


@pytest.mark.parametrize("cfg", [
    # 128 x 256 cooperative tiles (128 accumulators a consumer thread), 16 steps unrolled,
    # four rounds of tiles.
    GemmConfig(4096, 2048, 1024, block_m=128, block_n=256, epilogue_n=128, stages=4,
               schedule="cooperative"),
    # 192 x 128 tiles: three consumer warpgroups, 512 threads, so 128 registers a thread,
    # 18 steps unrolled.
    GemmConfig(6144, 1024, 1152, block_m=192, block_n=128, epilogue_n=128, stages=4,
               schedule="cooperative"),
], ids=["128x256-16-steps", "192x128-18-steps"])
def test_the_fullest_unrolled_mainloops_spill_nothing(cfg):
    """The unrolled kernels with the fewest registers to spare (the most accumulators for
    their thread count) fit without spilling; a scan of 343 default kernels found only
    the two-round ping-pong case above."""
    src = compile_kernel(gemm_kernel(cfg)).cuda_source
    assert K_LOOP.findall(src) == []
    assert ptxas_usage(src).spill_store_bytes == 0
