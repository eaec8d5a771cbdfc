"""The benchmarks' timing helpers (tvm_tma.testing.timing) on a model GPU whose clock drops
under load, as an H200's does at its power cap: a timing that heats first must report the
settled speed for whichever kernel it times, a timing from idle the boosted one."""

from __future__ import annotations

import contextlib
import types

import pytest
import tvm_ffi

from tvm_tma.testing import timing


class PowerCappedGpu:
    """A stand-in for ``torch``: kernels run ``fast_ms`` each for the first ``boost_ms`` of
    load after the GPU idled, ``slow_ms`` after; events read the model's clock. Capture
    (``torch.cuda.graph``) records launches into the graph instead of running them."""

    def __init__(self, fast_ms: float, slow_ms: float, boost_ms: float) -> None:
        self.fast_ms, self.slow_ms, self.boost_ms = fast_ms, slow_ms, boost_ms
        self.now = 0.0
        self.loaded = 0.0  # milliseconds of load since the GPU last idled
        self.capturing: PowerCappedGpu.Graph | None = None
        self.replays = 0
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.at = None

            def record(self) -> None:
                self.at = gpu.now

            def elapsed_time(self, end: Event) -> float:
                return end.at - self.at

        class Graph:
            def __init__(self) -> None:
                self.launches = 0

            def replay(self) -> None:
                gpu.replays += 1
                for _ in range(self.launches):
                    gpu.run_kernel()

        @contextlib.contextmanager
        def graph(g: Graph):
            gpu.capturing = g
            yield
            gpu.capturing = None

        self.Graph = Graph
        self.cuda = types.SimpleNamespace(Event=Event, CUDAGraph=Graph, graph=graph,
                                          synchronize=lambda: None)

    def run_kernel(self) -> None:
        ms = self.fast_ms if self.loaded < self.boost_ms else self.slow_ms
        self.now += ms
        self.loaded += ms

    def launch(self) -> None:
        if self.capturing is not None:
            self.capturing.launches += 1
        else:
            self.run_kernel()

    def idle(self) -> None:
        self.loaded = 0.0


@pytest.fixture(autouse=True)
def no_torch_stream(monkeypatch):
    # The FFI's stream hook needs torch; the model has no streams.
    monkeypatch.setattr(tvm_ffi, "use_torch_stream", lambda ctx: ctx)


def test_timing_from_idle_reports_the_boosted_clock():
    gpu = PowerCappedGpu(fast_ms=1.0, slow_ms=1.25, boost_ms=200.0)
    assert timing.graph_back_to_back(gpu, gpu.launch, 20, 5, 3) == pytest.approx(1.0)


def test_heated_timing_reports_the_settled_clock_whatever_ran_before():
    gpu = PowerCappedGpu(fast_ms=1.0, slow_ms=1.25, boost_ms=200.0)
    gpu.idle()
    from_idle = timing.graph_back_to_back(gpu, gpu.launch, 20, 5, 3, heat_ms=300.0)
    # The same kernel timed again at once, the GPU still loaded: the same answer.
    again = timing.graph_back_to_back(gpu, gpu.launch, 20, 5, 3, heat_ms=300.0)
    assert from_idle == pytest.approx(1.25) and again == pytest.approx(1.25)


def test_heat_fills_the_heat_time():
    gpu = PowerCappedGpu(fast_ms=2.0, slow_ms=2.0, boost_ms=0.0)
    timing.graph_back_to_back(gpu, gpu.launch, 10, 4, 0, heat_ms=300.0)
    # One upload replay, one of 20 ms timed for the count, 300 / 20 = 15 heat replays,
    # then 4 timed.
    assert gpu.replays == 1 + 1 + 15 + 4
    assert timing.heat_replays(300.0, 20.0) == 15
    assert timing.heat_replays(300.0, 7.0) == 43
    assert timing.heat_replays(0.5, 20.0) == 1
    assert timing.heat_replays(300.0, 0.0) == 100_000


def test_kernel_times_heats_by_default():
    gpu = PowerCappedGpu(fast_ms=1.0, slow_ms=1.5, boost_ms=250.0)
    graph_ms, host_ms, median_ms = timing.kernel_times(gpu, gpu.launch, 20, 5, 10, 3)
    assert timing.HEAT_MS >= 250.0
    assert graph_ms == pytest.approx(1.5)
    assert host_ms == pytest.approx(1.5) and median_ms == pytest.approx(1.5)


def test_host_launched_timing_heats_when_asked():
    gpu = PowerCappedGpu(fast_ms=1.0, slow_ms=1.25, boost_ms=200.0)
    assert timing.back_to_back(gpu, gpu.launch, 20, 5, 3) == pytest.approx(1.0)
    gpu = PowerCappedGpu(fast_ms=1.0, slow_ms=1.25, boost_ms=200.0)
    assert timing.back_to_back(gpu, gpu.launch, 20, 5, 3, heat_ms=300.0) == pytest.approx(1.25)
    # 3 warm-up launches, one of 1 ms timed for the count, 300 heat launches (the first
    # 196 still fast), then 5 runs of 20.
    assert gpu.now == pytest.approx(200 * 1.0 + 104 * 1.25 + 100 * 1.25)
