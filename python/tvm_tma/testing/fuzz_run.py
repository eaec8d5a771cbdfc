"""The fuzzer's batch driver: check a stream of cases, in worker processes, and tally them.

It exists apart from the oracle so that one case's verdict (:func:`check_case`) stays free of
process pools, timings and counters; this module only walks ``random_case(seed, 0..N-1)``,
splits the indices over spawned workers and merges their :class:`Summary` (counts, refusal
rules, failures, coverage) in index order, so a run's counts and failures do not depend on
``jobs``. The GPU mode reuses its :func:`spawn_pool`.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from .copy_cases import CopyCase, row_major_strides
from .fuzz_cases import random_case
from .fuzz_loops import loop_keys, loop_verdict
from .fuzz_oracle import Outcome, check_case
from .fuzz_variants import reduction_defined


@dataclass
class Summary:
    """What a run of many cases did: counts, refusal rules, failures and coverage."""

    cases: int = 0
    accepted: int = 0
    refused: int = 0
    mismatches: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[int, Outcome]] = field(default_factory=list)
    issues: int = 0
    seconds: float = 0.0  # wall time of the whole run
    coverage: Counter[tuple[str, str]] = field(default_factory=Counter)
    accepted_indices: list[int] = field(default_factory=list)
    slowest: tuple[float, int] = (0.0, -1)  # (seconds, index) of the slowest case
    #: Loop cases by (form, truth, verdict): :func:`~.fuzz_loops.loop_table` prints them
    loops: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def add(self, index: int, case: CopyCase, outcome: Outcome, seconds: float = 0.0) -> None:
        self.cases += 1
        self.issues += outcome.issues
        self.slowest = max(self.slowest, (seconds, index))
        if outcome.status == "accepted":
            self.accepted += 1
            self.accepted_indices.append(index)
        elif outcome.status == "refused":
            self.refused += 1
            self.rules[outcome.rule] += 1
        else:
            self.mismatches += 1
            self.failures.append((index, outcome))
        for key in coverage_keys(case):
            self.coverage[(key, outcome.status)] += 1
        if case.loop is not None:
            self.loops[loop_verdict(case, outcome.status, outcome.rule)] += 1

    def merge(self, other: Summary) -> None:
        self.cases += other.cases
        self.accepted += other.accepted
        self.refused += other.refused
        self.mismatches += other.mismatches
        self.rules.update(other.rules)
        self.failures.extend(other.failures)
        self.issues += other.issues
        self.coverage.update(other.coverage)
        self.accepted_indices.extend(other.accepted_indices)
        self.slowest = max(self.slowest, other.slowest)
        self.loops.update(other.loops)

    @property
    def line(self) -> str:
        return (f"{self.cases} cases, {self.accepted} accepted, {self.refused} refused, "
                f"{self.mismatches} mismatches")


def coverage_keys(case: CopyCase) -> list[str]:
    """Features of a case, for the coverage table (and the generator's tests)."""
    kind = case.shared_layout.split(":")[0]
    layout = case.shared_layout if kind == "swizzle" else kind
    keys = [f"dtype={case.dtype}", f"rank={len(case.global_shape)}", f"layout={layout}",
            f"direction={case.direction}"]
    if case.stages:
        keys.append("stages")
    if case.global_strides is not None and not case.global_is_dense:
        keys.append("strided-global")
    if case.global_offset:
        keys.append("view-offset")
        if (case.global_offset * case.element_bytes) % 16:
            keys.append("view-offset-misaligned")
        if case.global_tiles is None and case.g_strides != row_major_strides(
                case.global_shape):
            keys.append("view-strided")
    if case.smem_elem_offset:
        keys.append("smem-offset")
    if case.shared_extent is not None:
        keys.append("shared-subregion")
    if case.oob is not None:
        keys.append(f"oob={case.oob}")
    ends, befores = crossings(case)
    if ends or befores:
        keys.append("crosses-edge")
    if len(case.global_shape) - 1 in ends:
        keys.append("crosses-dim0")
    if ends - {len(case.global_shape) - 1}:
        keys.append("crosses-outer")
        if len(case.global_shape) - 1 in ends:
            keys.append("crosses-both")
    if befores:
        keys.append("starts-before")
    if case.global_tiles is not None:
        keys.append("pieces")
    if case.device_view:
        keys.append("device-view")
    if is_reshape(case):
        keys.append("reshape")
    return keys + variant_keys(case) + loop_keys(case)


def variant_keys(case: CopyCase) -> list[str]:
    """Coverage keys of a case's variant: multicast (and its cluster size), reduce (its op,
    and whether PTX defines the pair)."""
    if case.cluster:
        return ["multicast", f"cluster={case.cluster}"]
    if case.reduce is None:
        return []
    defined = "defined" if reduction_defined(case.reduce, case.dtype) else "undefined"
    return ["reduce", f"reduce={case.reduce}", f"reduce-{defined}"]


def crossings(case: CopyCase) -> tuple[set[int], set[int]]:
    """(dims whose end the global region crosses, dims it starts before), over all stages."""
    ends, befores = set(), set()
    for d, (n, start, extent) in enumerate(zip(case.global_shape, case.global_start,
                                               case.global_extent)):
        reach = extent * (max(case.stages, 1) if d == 0 else 1)
        if start < 0:
            befores.add(d)
        if start + reach > n:
            ends.add(d)
    return ends, befores


def is_reshape(case: CopyCase) -> bool:
    """The two regions hold as many elements in differently shaped (non-unit) extents."""
    first = 1 if case.stages else 0
    g_ext = [e for e in case.global_extent if e != 1]
    s_ext = [e for e in case.s_extent[first:] if e != 1]
    return g_ext != s_ext and math.prod(g_ext) == math.prod(s_ext)


def _check_range(seed: int, indices: Iterable[int], data_seed: int) -> Summary:
    summary = Summary()
    for index in indices:
        start = time.perf_counter()
        case = random_case(seed, index)
        outcome = check_case(case, data_seed)
        summary.add(index, case, outcome, time.perf_counter() - start)
    return summary


def run_fuzz(cases: int, seed: int, jobs: int = 1, data_seed: int = 0) -> Summary:
    """Check ``cases`` cases of stream ``seed`` in ``jobs`` processes (1: in this one)."""
    start = time.perf_counter()
    if jobs <= 1:
        summary = _check_range(seed, range(cases), data_seed)
    else:
        summary = Summary()
        with spawn_pool(jobs) as pool:
            futures = [pool.submit(_check_range, seed, range(k, cases, jobs), data_seed)
                       for k in range(jobs)]
            for future in futures:
                summary.merge(future.result())
    summary.failures.sort(key=lambda item: item[0])
    summary.accepted_indices.sort()
    summary.seconds = time.perf_counter() - start
    return summary


def spawn_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool of ``jobs`` worker processes started with ``spawn``."""
    import multiprocessing

    # TVM starts threads on import; fork after that is unsafe, so workers start fresh.
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
