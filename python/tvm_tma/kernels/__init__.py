"""Kernels written in TVMScript on top of the ``dispatch="tma"`` copies, built from one set
of pieces so that every kernel shares them instead of copying them.

Each module has one job:

* :mod:`.gemm_config`: :class:`~.gemm_config.GemmConfig`, the problem and its tiling,
  and the hardware budgets it is checked against.
* :mod:`.scheduler`: which output tile (and K part) a persistent worker computes next.
* :mod:`.operands`: :class:`~.operands.AOperand`, how a kernel declares its A operand
  when A is a view of another tensor (the im2col view of a conv2d activation).
* :mod:`.wgmma`: shared-memory descriptors and the consumer warpgroup's WGMMA mainloop.
* :mod:`.epilogue`: accumulators to a swizzled C stage to a TMA store (or reduce-add).
* :mod:`.gemm`: the warp-specialized GEMM kernel, wiring the pieces to warpgroups, and its
  TMA producer.
* :mod:`.reference`: the fp32 reference, the error bound and a run-on-GPU helper.
* :mod:`.fp8_reference`: FP8 inputs, the scaled fp32 reference and the terms FP8 adds to
  the bound (the tensor core's accumulation precision).

The ring the producer and consumers share is :class:`tvm_tma.pipeline.TmaPipeline`. The
in-kernel pieces are factories of the configuration (``make_mma_unit(cfg)`` returns the
``@T.inline`` helper for that configuration), so another kernel reuses them with its own.
Nothing is imported here: a kernel module is imported by name
(``from tvm_tma.kernels.gemm import gemm_kernel``).
"""
