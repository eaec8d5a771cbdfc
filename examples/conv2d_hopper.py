"""A conv2d on Hopper as an implicit GEMM whose A tiles are TMA im2col loads.

Run it: ``python examples/conv2d_hopper.py`` builds the kernel of a ResNet-50 3x3 layer
(at batch 4), shows how the dispatch planned its activation load, assembles it for sm_90a
and, on a Hopper GPU, checks every output element against a numpy fp32 convolution.

The kernel is the package's warp-specialized WGMMA GEMM (``tvm_tma.kernels.gemm``) with A
declared as the im2col view of the NHWC activation (``tvm_tma.conv.Conv2dGeometry``): the
producer's ``Tx.copy_async(a_tile, A[m0:m0 + 128, k0:k0 + 64], dispatch="tma")`` reads
128 output pixels' worth of one filter tap's 64 channels (32 or 16 where C needs it, two
8-channel pieces where C is 8 mod 16), which the planner turns into one
``cp.async.bulk.tensor.4d...im2col`` load (the padding halo arrives as zeros). B is the
KRSC filter as (K, R*S*C), C the NPQK output as (N*P*Q, K).
:mod:`tvm_tma.kernels.conv2d` picks the tiling (``conv2d_config``), refuses what it does
not handle (C or K not a multiple of 8, other dtypes) and holds the reference and the
error bound.
"""

from __future__ import annotations

import tvm_tma
from tvm_tma.conv import Conv2dGeometry
from tvm_tma.demo import hopper_available
from tvm_tma.kernels.conv2d import conv2d_config, conv2d_kernel, run
from tvm_tma.testing.runner import assemble, compile_kernel


def main() -> int:
    # ResNet-50's 28x28 3x3 layer, 128 -> 128 channels, padding 1, batch 4.
    geometry = Conv2dGeometry(4, 28, 28, 128, 128, 3, 3, padding=(1, 1))
    cfg = conv2d_config(geometry)
    print(f"{geometry.describe()}: GEMM {geometry.gemm_m} x {geometry.k} x "
          f"{geometry.gemm_k}, {cfg.schedule} {cfg.block_m}x{cfg.block_n} tiles, "
          f"{cfg.stages} stages, cluster {cfg.cluster}x{cfg.cluster_n}")
    kernel = conv2d_kernel(geometry, cfg)
    a_load = tvm_tma.explain(kernel).copies[0]
    spec = a_load.plan.tensor_map
    print(f"A tile load: {a_load.instruction}")
    print(f"  {a_load.encoder}: dims {spec.global_dims}, corners {spec.lower_corner} "
          f"{spec.upper_corner}, {spec.pixels_per_column} pixels x "
          f"{spec.channels_per_pixel} channels; tap offsets "
          f"{[str(o) for o in a_load.plan.im2col_offsets]}")
    cubin = assemble(compile_kernel(kernel).cuda_source)
    print(f"{len(cubin)} bytes of sm_90a cubin")
    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    result = run(geometry, cfg)
    print(f"Y = conv2d(X, F), {cfg.dtype}: "
          f"{'every element within' if result.ok else 'OUTSIDE'} the bound (worst "
          f"error/bound {result.worst:.3f}; {result.worst_element()})")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
