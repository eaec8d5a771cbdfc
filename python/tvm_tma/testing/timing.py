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

**The power cap.** Under sustained load the GPU holds its power limit by lowering the SM
clock (an H200 running a large GEMM: 1980 MHz from idle, 1350-1550 MHz within about a
tenth of a second, throttle reason "SW power cap"). Timing that starts from idle
therefore runs its first replays faster than later ones, and whichever kernel a
benchmark times first after a pause (after compiling, after building operands) gains up
to 10% on a long kernel over one timed while the clock is already held down (measured:
benchmarks/RESULTS.md 6z13). :func:`kernel_times` therefore heats first: it replays the
kernel for :data:`HEAT_MS` before the timed replays, so both sides of a ratio are timed
at the clock their own load settles to, whatever ran before them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

#: Milliseconds of replays :func:`kernel_times` runs before it times (see the module
#: docstring): long enough for the clock to settle under the power cap.
HEAT_MS = 300.0


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
                 warmup: int, heat_ms: float = 0.0) -> float:
    """Best milliseconds per launch over ``repetitions`` runs of ``launches`` back-to-back
    launches between two CUDA events; ``heat_ms``: launch back to back for about that
    long first (the power cap: see the module docstring)."""
    for _ in range(warmup):
        launch()
    torch.cuda.synchronize()
    heat(torch, launch, heat_ms)
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
                       warmup: int, heat_ms: float = 0.0) -> float:
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
    the graph lives.

    ``heat_ms``: replay the graph for about that long (one queue of replays, no host gap
    between them) before the timed replays."""
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
    heat(torch, graph.replay, heat_ms)
    best = float("inf")
    for _ in range(repetitions):
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / launches)
    return best


def heat(torch, run: Callable[[], None], heat_ms: float) -> None:
    """Run ``run`` (a launch, or a graph's replay, already warm) back to back for about
    ``heat_ms``, its count from one timed run; nothing where ``heat_ms`` is 0."""
    if heat_ms <= 0:
        return
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    for _ in range(heat_replays(heat_ms, start.elapsed_time(end))):
        run()
    torch.cuda.synchronize()


def heat_replays(heat_ms: float, replay_ms: float) -> int:
    """How many replays of ``replay_ms`` fill ``heat_ms`` (at least one; at most 100000,
    for a replay timed at next to nothing)."""
    return max(1, min(100_000, math.ceil(heat_ms / max(replay_ms, 1e-3))))


def kernel_times(torch, launch: Callable[[], None], launches: int, repetitions: int,
                 runs: int, warmup: int, heat_ms: float = HEAT_MS
                 ) -> tuple[float, float, float]:
    """(best ms per launch of ``repetitions`` replays of a CUDA graph of ``launches``
    back-to-back launches, each between two events: the kernel with no host in between,
    what the benchmarks' ratios use; the same launched from the host; median ms of
    ``runs`` launches each between its own two events). A baseline that takes longer to
    launch than to run (torch.matmul on a 5 us GEMM: 12 us a launch from the host, H200)
    is timed as fast as its kernel runs, as ours is. The graph replays come after
    ``heat_ms`` of replays (the power cap: see the module docstring)."""
    return (graph_back_to_back(torch, launch, launches, repetitions, warmup, heat_ms),
            back_to_back(torch, launch, launches, repetitions, warmup),
            per_launch_median(torch, launch, runs, 0))
