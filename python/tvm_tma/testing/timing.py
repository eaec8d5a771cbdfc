"""Timing GPU launches for the benchmarks, the ways RESULTS.md reports them.

A launch timed between its own pair of CUDA events also measures the host's launch cost
and the gap between launches, which poses as kernel time (or hides it) for kernels under
about 100 us; back-to-back launches between two events measure the kernels as the GPU runs
them, one after the other, as long as the host launches faster than the GPU runs them;
replays of a CUDA graph of such launches take the host out altogether (a baseline such as
torch.matmul may take longer to launch than its kernel runs). The benchmarks take their
ratios from the graph replays and report the other two beside them
(:func:`kernel_times`), so all three are here once (torch is imported by the caller: this
module needs no GPU to import).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable


def per_launch_median(torch, launch: Callable[[], None], runs: int, warmup: int) -> float:
    """Median milliseconds of one launch, each timed with its own pair of CUDA events."""
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(runs)]
    for start, end in pairs:
        start.record()
        launch()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in pairs)


def back_to_back(torch, launch: Callable[[], None], launches: int, repetitions: int,
                 warmup: int) -> float:
    """Best milliseconds per launch over ``repetitions`` runs of ``launches`` back-to-back
    launches between two CUDA events."""
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repetitions):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        for _ in range(launches):
            launch()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / launches)
    return best


def graph_back_to_back(torch, launch: Callable[[], None], launches: int, repetitions: int,
                       warmup: int) -> float:
    """Best milliseconds per launch over ``repetitions`` replays of a CUDA graph holding
    ``launches`` back-to-back launches, each replay between two CUDA events.

    Back-to-back launches from the host still measure the host where it takes longer to
    launch a kernel than the GPU takes to run it: a cuDNN convolution goes through
    torch's dispatcher and cuDNN's own host code for every launch, and a layer that runs
    in 17 us on the GPU timed at 28 us that way (H100). A graph replays the captured
    launches with no host in between, so this times the kernels alone, for ours and the
    baseline alike. TVM's launches join the capture through ``tvm_ffi.use_torch_stream``
    (the FFI's current stream is torch's capture stream); each kernel's arguments, tensor
    maps included, are captured by value, so the tensors must stay where they are while
    the graph lives."""
    import tvm_ffi

    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with tvm_ffi.use_torch_stream(torch.cuda.graph(graph)):
        for _ in range(launches):
            launch()
    torch.cuda.synchronize()
    graph.replay()  # the first replay uploads the graph
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repetitions):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / launches)
    return best


def kernel_times(torch, launch: Callable[[], None], launches: int, repetitions: int,
                 runs: int, warmup: int) -> tuple[float, float, float]:
    """(best ms per launch of ``repetitions`` replays of a CUDA graph of ``launches``
    back-to-back launches, each between two events: the kernel with no host in between,
    what the benchmarks' ratios use; the same launched from the host; median ms of
    ``runs`` launches each between its own two events). A baseline that takes longer to
    launch than to run (torch.matmul on a 5 us GEMM: 12 us a launch from the host, H200)
    is timed as fast as its kernel runs, as ours is."""
    return (graph_back_to_back(torch, launch, launches, repetitions, warmup),
            back_to_back(torch, launch, launches, repetitions, warmup),
            per_launch_median(torch, launch, runs, 0))
