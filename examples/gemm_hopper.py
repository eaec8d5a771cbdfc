"""A TMA-fed, warp-specialized WGMMA GEMM for Hopper, written in TVMScript.

``C = A @ B^T`` (B given as N x K, cuBLAS's "TN") or ``C = A @ B`` (B given as K x N), with
A row-major M x K, bf16 or fp16 inputs, fp32 accumulation and C in the input type; or FP8
(e4m3 / e5m2) A and B with per-tensor scales and a bf16 ``C = scale_a * scale_b * A @ B^T``.

Run it: ``python examples/gemm_hopper.py`` builds the kernel of a ragged problem, assembles
it for sm_90a and, on a Hopper GPU, checks it against numpy; ``--dtype float8_e4m3fn`` (or
``float8_e5m2``) does the same for FP8 inputs (K 3008: FP8 K is a multiple of 16).

The kernel lives in the package, built from pieces the project's other kernels share
(python/tvm_tma/kernels/): :mod:`tvm_tma.kernels.gemm`'s docstring explains how it works
(persistent grid, producer warpgroup issuing ``Tx.copy_async(..., dispatch="tma")`` into a
:class:`tvm_tma.pipeline.TmaPipeline` ring, consumer warpgroups running WGMMA, the swizzled
C stage and TMA store, clusters with B multicast, split-K), and each piece has a module
of its own: ``gemm_config`` (:class:`GemmConfig`), ``scheduler`` (tile order), ``wgmma``
(descriptors, consumer mainloop), ``epilogue`` (C stage, TMA store), ``operands`` (an A
that is a view of another tensor) and ``reference`` (fp32 reference, error bound, GPU run).
"""

from __future__ import annotations

import argparse

import numpy as np

from tvm_tma.demo import hopper_available  # importing tvm_tma registers dispatch="tma"
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import DTYPES_16, FP8_DTYPES, GemmConfig
from tvm_tma.kernels.reference import run
from tvm_tma.testing.runner import assemble, compile_kernel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="bfloat16", choices=(*DTYPES_16, *FP8_DTYPES))
    dtype = parser.parse_args(argv).dtype
    # Ragged: no extent a multiple of a tile (FP8: K a multiple of 16).
    k = 3008 if dtype in FP8_DTYPES else 3000
    cfg = GemmConfig.for_problem(1000, 2000, k, dtype=dtype)
    cubin = assemble(compile_kernel(gemm_kernel(cfg)).cuda_source)
    print(f"{cfg}: {len(cubin)} bytes of sm_90a cubin")
    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    c, ref, bound = run(cfg)
    worst = float(np.max(np.abs(c - ref) / bound))
    ok = bool(np.isfinite(c).all()) and worst <= 1.0
    product = "scale_a * scale_b * A @ B^T" if cfg.fp8 else "A @ B^T"
    print(f"C = {product}, {cfg.m}x{cfg.n}x{cfg.k} {cfg.dtype}: "
          f"{'every element within' if ok else 'OUTSIDE'} the bound (worst error/bound "
          f"{worst:.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
