"""A TMA-fed, warp-specialized WGMMA GEMM for Hopper, written in TVMScript.

``C = A @ B^T`` (B given as N x K, cuBLAS's "TN") or ``C = A @ B`` (B given as K x N), with
A row-major M x K, bf16 or fp16 inputs, fp32 accumulation and C in the input type.

Run it: ``python examples/gemm_hopper.py`` builds the kernel of a ragged problem, assembles
it for sm_90a and, on a Hopper GPU, checks it against numpy.

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

import numpy as np

from tvm_tma.demo import hopper_available  # importing tvm_tma registers dispatch="tma"
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.kernels.reference import run
from tvm_tma.testing.runner import assemble, compile_kernel


def main() -> int:
    cfg = GemmConfig.for_problem(1000, 2000, 3000)  # ragged: no extent a multiple of a tile
    cubin = assemble(compile_kernel(gemm_kernel(cfg)).cuda_source)
    print(f"{cfg}: {len(cubin)} bytes of sm_90a cubin")
    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    c, ref, bound = run(cfg)
    worst = float(np.max(np.abs(c - ref) / bound))
    ok = bool(np.isfinite(c).all()) and worst <= 1.0
    print(f"C = A @ B^T, {cfg.m}x{cfg.n}x{cfg.k} {cfg.dtype}: "
          f"{'every element within' if ok else 'OUTSIDE'} the bound (worst error/bound "
          f"{worst:.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
