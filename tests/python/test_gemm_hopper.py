"""The warp-specialized WGMMA GEMM example: CUDA text, sm_90a assembly, and (on a Hopper
GPU) every element of C against an fp32 numpy reference within ``error_bound``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tvm_tma.testing.runner import assemble, compile_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from gemm_hopper import GemmConfig, gemm_kernel, run  # noqa: E402

#: Every shape class of the benchmark at small sizes: whole tiles, ragged edges in M, N and
#: K at once, a K shorter than one step, more tiles than CTAs (persistent loop), both B
#: layouts, both dtypes, both tile widths.
CASES = [
    GemmConfig(256, 512, 256),
    GemmConfig(256, 512, 256, stages=3, epilogue_n=0),
    GemmConfig.for_problem(1000, 2000, 3000),
    GemmConfig(200, 136, 328),
    GemmConfig(1000, 2000, 3000, ctas=16),
    GemmConfig(128, 256, 40, b_layout="kn"),
    GemmConfig(384, 768, 512, b_layout="kn", ctas=5),
    GemmConfig(264, 520, 136, dtype="float16"),
    GemmConfig(264, 520, 136, dtype="float16", b_layout="kn"),
    GemmConfig(512, 384, 1024, block_n=128, stages=4, group_m=2, ctas=7),
    GemmConfig(192, 320, 200, block_n=128, stages=5, b_layout="kn", dtype="float16"),
    GemmConfig(520, 648, 1000, ctas=9),
    GemmConfig(256, 264, 192, stages=4, epilogue_n=64, b_layout="kn"),
]


def _name(cfg: GemmConfig) -> str:
    return (f"{cfg.m}x{cfg.n}x{cfg.k}-{cfg.dtype}-{cfg.b_layout}-bn{cfg.block_n}"
            f"-s{cfg.stages}-e{cfg.epilogue_cols}-c{cfg.ctas}")


@pytest.fixture(scope="module", params=CASES, ids=_name)
def built(request):
    cfg = request.param
    return cfg, compile_kernel(gemm_kernel(cfg))


def test_gemm_assembles_for_sm90a(built):
    cfg, kernel = built
    assert len(assemble(kernel.cuda_source)) > 0


def test_gemm_issues_the_expected_instructions(built):
    cfg, kernel = built
    src = kernel.cuda_source
    ptx_type = "bf16" if cfg.dtype == "bfloat16" else "f16"
    mma = f"wgmma.mma_async.sync.aligned.m64n{cfg.block_n}k16.f32.{ptx_type}.{ptx_type}"
    assert mma in src
    # Four k16 MMAs per 64-wide K step, the transpose bit set only for the K x N B.
    trans_b = 1 if cfg.b_layout == "kn" else 0
    assert src.count(f"_1_1_0_{trans_b}(acc_ptr[0]") == 4
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in src
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in src
    assert f"__launch_bounds__({cfg.threads})" in src
    # One TMA load call site for A, one for B; N-wide tiles (the K x N B slot, the C tile)
    # go in one 3-D box or, where an N edge keeps the 64-column swizzle atoms from folding
    # into one dim, one box per atom.
    loads = len(re.findall(r"tvm_tma_load_\w+\(\(", src))
    assert loads in ((2, 1 + cfg.block_n // 64) if cfg.b_layout == "kn" else (2,))
    stores = len(re.findall(r"tvm_tma_store_\w+\(\(", src))
    stages = cfg.block_n // cfg.epilogue_cols  # the epilogue loop over C stages is unrolled
    assert stores in (stages, stages * cfg.epilogue_cols // 64)
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global"
                          r"\.mbarrier::complete_tx::bytes", src)) >= 1
    assert re.search(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta\.bulk_group", src)
    # The full barriers expect both tiles' bytes; the empty ones one arrival per consumer.
    assert f"(uint){cfg.a_tile_bytes + cfg.b_tile_bytes})" in src
    assert src.count(f"(uint){cfg.consumers});") == cfg.stages


@pytest.mark.parametrize("bad, rule", [
    (dict(m=1001), "m=1001: GEMM extents must be positive multiples of 8"),
    (dict(block_n=96), "block_n=96: a multiple of 64"),
    (dict(stages=5), "5 stages of 128x256x64 tiles need"),
    (dict(b_layout="mn"), "b_layout='mn'"),
    (dict(dtype="float32"), "dtype='float32'"),
])
def test_gemm_refuses_configurations_it_cannot_run(bad, rule):
    params = dict(m=256, n=256, k=256) | bad
    with pytest.raises(ValueError, match=re.escape(rule)):
        gemm_kernel(GemmConfig(**params))


def test_default_tiling_keeps_every_sm_busy():
    assert GemmConfig.for_problem(8192, 8192, 8192).block_n == 256
    assert GemmConfig.for_problem(8192, 1024, 8192).block_n == 256  # 256 tiles >= 132
    ragged = GemmConfig.for_problem(1000, 2000, 3000)  # 64 wide tiles for 132 SMs
    assert (ragged.block_n, ragged.num_tiles) == (128, 128)


def test_benchmark_compile_only_assembles_every_variant(capsys):
    """What CI runs of benchmarks/gemm.py: the default kernel of a square and the ragged
    problem for both dtypes and both B layouts, assembled for sm_90a."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gemm as benchmark

    assert benchmark.main(["--compile-only", "--problem", "8192x8192x8192",
                           "--problem", "1000x2000x3000"]) == 0
    assert "8 kernels assembled" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CASES, ids=_name)
def test_gemm_matches_numpy_on_the_gpu(cfg):
    c, ref, bound = run(cfg, seed=cfg.m + cfg.n + cfg.k)
    assert np.isfinite(c).all(), "elements left unwritten (NaN poison survived)"
    error = np.abs(c - ref)
    worst = np.unravel_index(np.argmax(error / bound), error.shape)
    assert (error <= bound).all(), (
        f"C{list(worst)} = {c[worst]} vs {ref[worst]} (bound {bound[worst]})")
