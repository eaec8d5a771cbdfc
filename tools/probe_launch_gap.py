"""Is the persistent kernel's gap to copy_ in the kernel or around it?

Times, per launch (CUDA events) and as a batch (one event pair around many launches):
the persistent kernel at its default shared size (> 48 KiB: TVM sets the dynamic-smem
attribute) and at < 48 KiB, and the one-tile kernel at 32 KiB and 64 KiB tiles.
"""

from __future__ import annotations

from pathlib import Path

import torch
import tvm

from tvm_tma.testing.runner import compile_kernel
from tvm_tma.testing.scripts import load_script

cb = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "copy_bandwidth.py")

problem = cb.PROBLEMS[0]
kernels = {
    "persistent 4x32K (129 KiB smem)": cb.pipelined_copy_kernel(cb.persistent_shape(problem, 132)),
    "persistent 2x16K (33 KiB smem)": cb.pipelined_copy_kernel(
        cb.persistent_shape(problem, 132, tile_rows=64, stages=2)),
    "persistent 2x16K x2 CTAs/SM": cb.pipelined_copy_kernel(
        cb.persistent_shape(problem, 264, tile_rows=64, stages=2)),
    "one-tile 32K": cb.one_tile_kernel(problem),
    "one-tile 64K (65 KiB smem)": cb.one_tile_kernel(problem, (256, 128)),
}
source = cb.random_tensor(torch, problem, 1)
target = torch.empty_like(source)
moved = 2 * problem.nbytes


def batch_ms(launch, n=50):
    for _ in range(5):
        launch()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        launch()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


copy_ms = cb.time_launches(torch, lambda: target.copy_(source), 50, 5)
print(f"copy_: per-launch {copy_ms:.4f} ms, batch {batch_ms(lambda: target.copy_(source)):.4f} ms")
a, b = tvm.runtime.from_dlpack(source), tvm.runtime.from_dlpack(target)
for name, func in kernels.items():
    ex = compile_kernel(func).executable["main"]
    target.zero_()
    ex(a, b)
    torch.cuda.synchronize()
    ok = torch.equal(target.view(torch.int16), source.view(torch.int16))
    per = cb.time_launches(torch, lambda f=ex: f(a, b), 50, 5)
    bat = batch_ms(lambda f=ex: f(a, b))
    print(f"{name:34} ok={ok} per-launch {per:.4f} ms ({copy_ms / per:.1%}), "
          f"batch {bat:.4f} ms ({copy_ms / bat:.1%}), {moved / bat / 1e6:.0f} GB/s")
