"""A grouped GEMM for mixture-of-experts on Hopper, each group's rows copied through tensor
maps rebound on the device.

Run it: ``python examples/grouped_gemm_hopper.py`` builds the kernel of an 8-expert layer
(``torch._grouped_mm(A, B^T, offs=offs)`` semantics: A (M, K) stacked, B (E, N, K), offs the
group ends in device memory), shows how the dispatch planned the copies of a group's rows,
assembles the kernel for sm_90a and, on a Hopper GPU, checks every output element against a
numpy fp32 reference for groups that are empty, one row, shorter than a tile and longer
than many, with rows after the last group that must stay untouched.

The kernel is the package's warp-specialized WGMMA GEMM (``tvm_tma.kernels.gemm``) walking
the tiles of every group (``tvm_tma.kernels.grouped_gemm``). Per tile, the producer declares
the group's rows of A, ``A[offs[g - 1]:offs[g], :]``, as a view whose start and extent it
read from ``offs``; the dispatch cannot encode that map on the host, so it encodes a template
and the producer thread rebinds a copy of it in its CTA's slots of a global workspace
whenever the group changes (``tensormap=``; :mod:`tvm_tma.dispatch.device_view`). The
epilogue does the same for C, so a tile crossing a group's last row stores nothing past it.
"""

from __future__ import annotations

import numpy as np

import tvm_tma
from tvm_tma.demo import hopper_available
from tvm_tma.kernels.grouped_gemm import GroupedGemmConfig, grouped_gemm_kernel
from tvm_tma.kernels.grouped_reference import matches, run
from tvm_tma.testing.runner import assemble, compile_kernel

#: Rows per expert: empty, one row, shorter than a 128-row tile, several tiles; 60 rows of
#: A after the last group belong to none (C's rows there must stay as they were).
SIZES = [300, 0, 1, 77, 1024, 130, 0, 456]


def main() -> int:
    gcfg = GroupedGemmConfig.for_problem(len(SIZES), 2048, 1024, 512)
    cfg = gcfg.gemm
    print(f"{gcfg.groups} groups over A {cfg.m} x {cfg.k}, B {gcfg.groups} x {cfg.n} x "
          f"{cfg.k}: {cfg.schedule} {cfg.block_m}x{cfg.block_n} tiles, {cfg.stages} stages, "
          f"{cfg.ctas} CTAs")
    kernel = grouped_gemm_kernel(gcfg)
    for index, copy in enumerate(tvm_tma.explain(kernel).copies):
        plan = copy.plan
        where = "rebound on the device" if plan.device_view else "encoded on the host"
        print(f"  copy {index}: {copy.instruction}; map {where}, dims "
              f"{[str(d) for d in plan.tensor_map.global_dims]}")
    cubin = assemble(compile_kernel(kernel).cuda_source)
    print(f"{len(cubin)} bytes of sm_90a cubin")
    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    c, expected, bound = run(gcfg, SIZES)
    ok = matches(c, expected, bound)
    inside = ~np.isnan(expected)
    worst = float(np.max(np.abs(c[inside] - expected[inside]) / bound[inside]))
    print(f"C = grouped_mm(A, B^T, offs), {cfg.dtype}: "
          f"{'every element within' if ok else 'OUTSIDE'} the bound (worst error/bound "
          f"{worst:.3f}), rows outside the groups untouched: {bool(np.isnan(c[~inside]).all())}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
