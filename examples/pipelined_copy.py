"""A persistent, multi-stage TMA streaming copy written with ``Tx.copy_async(dispatch="tma")``.

Run it: ``python examples/pipelined_copy.py`` builds the kernel (dynamic schedule), assembles
it for sm_90a and, on a Hopper GPU, copies a random 4096 x 4096 float16 tensor and checks
every element. The kernel, commented (the ring, the refill order, the dynamic schedule), is
:mod:`tvm_tma.kernels.pipelined_copy`.
"""

from __future__ import annotations

import tvm

from tvm_tma.kernels.pipelined_copy import PipelineShape, pipelined_copy_kernel


def main() -> int:
    import numpy as np

    shape = PipelineShape(4096, 4096, "float16", tile_rows=32, stages=3, ctas=264,
                          schedule="dynamic")
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    executable = tvm.compile(tvm.IRModule({"main": pipelined_copy_kernel(shape)}),
                             target=target, tir_pipeline="tirx")
    cuda = executable.mod.imports[0].inspect_source()
    with target:
        cubin = tvm.support.nvcc.compile_cuda(cuda, target_format="cubin", arch="sm_90a",
                                              compiler="nvcc")
    print(f"{shape.num_tiles} tiles of {shape.tile_rows}x{shape.tile_cols} over "
          f"{shape.ctas} CTAs x {shape.producers} producers, {shape.stages} stages, "
          f"{shape.schedule} schedule: "
          f"{len(cubin)} bytes of sm_90a cubin")
    device = tvm.cuda(0)
    if not (device.exist and device.compute_version.startswith("9")):
        print("no Hopper GPU here: built and assembled only")
        return 0
    rng = np.random.default_rng(0)
    source = rng.integers(0, 1 << 16, (shape.rows, shape.cols), dtype=np.uint16)
    a = tvm.runtime.tensor(source.view(np.float16), device)
    b = tvm.runtime.tensor(np.full_like(source, 0xA5A5).view(np.float16), device)
    work = tvm.runtime.tensor(np.zeros(2, np.int32), device)  # the scheduler's counters
    executable["main"](a, b, work)
    device.sync()
    same = np.array_equal(b.numpy().view(np.uint16), source)
    same = same and work.numpy().tolist() == [0, 0]  # left zero for the next launch
    print("copy is bit-exact" if same else "MISMATCH")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
