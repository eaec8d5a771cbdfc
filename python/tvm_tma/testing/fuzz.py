"""Differential fuzzer: random copies -> the planner -> the numpy TMA model -> numpy's copy.

Each case is a random :class:`CopyCase`: a global view (rank 1..5, random shape, region at
random starts, padded or permuted strides, sometimes an offset view), a shared buffer (plain,
padded rows, row blocks, TVM's MMA swizzle atoms, multi-stage, at aligned or misaligned
offsets, a sub-region or the whole buffer, sometimes factored differently), one of
seven dtypes and either direction. The planner must either refuse with a rule of
:data:`~tvm_tma.planner.RULES`, or return plans that satisfy the hardware invariants (checked
here independently of the planner's own rules) and that, run on the TMA model over the whole
global allocation and the whole shared arena, give exactly the bytes numpy's copy gives.

A failing case is minimized (:func:`shrink`) and saved as a regression test
(:func:`save_regression`). ``--gpu`` builds the accepted cases' kernels in worker processes and
runs them on the GPU, comparing every byte of both buffers.

    python -m tvm_tma.testing.fuzz --cases 10000 --seed 1 [--jobs 2] [--gpu] [--save-failures D]

prints ``seed S`` first and ``N cases, A accepted, R refused, M mismatches`` last, and exits 1
on any mismatch (an invariant violation, a crash or a refusal without a known rule count as
mismatches).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import math
import os
import random
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..planner import RULES, PlanError
from ..planner.plan_types import DESCRIPTOR_DTYPE_BYTES, SWIZZLE_GEOMETRY
from .copy_cases import CopyCase, expected_after, shared_layout_of
from .layout_eval import evaluate, layout_offsets
from .runner import inputs, model_buffers, plans_of, run_model_buffers
from .tma_model import box_addresses

#: Element bytes of every dtype the fuzzer draws.
DTYPES: dict[str, int] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "uint8": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
}
MAX_RANK = 5
MAX_BOX = 256
SMEM_ALIGN = 128
#: Upper bounds that keep one case fast on the model and launchable as one CTA.
MAX_TILE_BYTES = 48 * 1024
MAX_GLOBAL_ELEMS = 1 << 18
#: The dynamic shared memory one kernel may use (H100: 227 KiB per block).
MAX_KERNEL_SMEM = 200 * 1024
DEFAULT_SEED = 20251122
#: Seconds one case may take before it counts as a mismatch (typical: a few milliseconds).
CASE_TIMEOUT = 10.0
REGRESSION_DIR = Path("tests/python/fuzz_regressions")


# --------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------


def random_case(seed: int, index: int) -> CopyCase:
    """Case ``index`` of the stream ``seed`` (independent of every other case)."""
    rng = random.Random(f"tvm-tma-fuzz:{seed}:{index}")
    for _ in range(100):
        case = _draw(rng, f"fuzz-{seed}-{index}")
        if case is not None:
            return case
    raise RuntimeError(f"generator found no case for seed {seed} index {index}")


def _weighted(rng: random.Random, table: dict):
    keys = list(table)
    return rng.choices(keys, weights=[table[k] for k in keys])[0]


def _draw(rng: random.Random, name: str) -> CopyCase | None:
    dtype = rng.choice(list(DTYPES))
    width = DTYPES[dtype]
    direction = rng.choice(("g2s", "s2g"))
    layout = _weighted(rng, {"row": 28, "padded": 16, "blocked": 8, "swizzle:0": 9,
                             "swizzle:1": 13, "swizzle:2": 13, "swizzle:3": 13})
    buf = _shared_tile(rng, layout, width)
    if buf is None:
        return None
    if layout == "padded":
        layout = f"padded:{_row_pad(rng, buf[-1], width)}"
    elif layout == "blocked":
        rows = rng.choice([r for r in range(1, buf[-2]) if buf[-2] % r == 0])
        layout = f"blocked:{rows}:{_row_pad(rng, rows * buf[-1], width)}"
    s_start, s_ext = _shared_region(rng, layout, width, buf)
    stages = rng.choice((1, 2, 2, 3, 4)) if rng.random() < 0.2 else 0

    inner = [e for e in s_ext if e != 1]
    g_ext = _global_extents(rng, inner)
    if g_ext is None:
        return None
    if rng.random() < 0.015:  # the two sides disagree on the element count
        d = rng.randrange(len(g_ext))
        g_ext[d] += 1
    g_shape, g_start = _global_box(rng, g_ext, width, stages)
    g_strides = _global_strides(rng, g_shape, width)
    g_offset = rng.randint(1, 64) if rng.random() < 0.02 else 0

    whole = tuple(s_ext) == tuple(buf)
    lead = (0,) if stages else ()
    case = CopyCase(
        name=name, dtype=dtype, direction=direction, global_shape=tuple(g_shape),
        global_start=tuple(g_start), global_extent=tuple(g_ext),
        shared_shape=((stages,) if stages else ()) + tuple(buf), shared_layout=layout,
        shared_start=None if whole else lead + tuple(s_start),
        shared_extent=None if whole else (1,) * len(lead) + tuple(s_ext),
        smem_elem_offset=_smem_offset(rng, layout, width), stages=stages,
        global_strides=None if g_strides is None else tuple(g_strides), global_offset=g_offset,
    )
    if case.global_storage_elems > MAX_GLOBAL_ELEMS:
        return None
    return case


def _row_pad(rng: random.Random, last: int, width: int) -> int:
    """Elements of padding after each shared row: mostly to a 128-byte pitch (so row issues
    stay aligned), sometimes to a 16-byte one, sometimes odd."""
    kind = _weighted(rng, {"pitch128": 65, "pitch16": 23, "odd": 12})
    row = last * width
    if kind == "pitch128":
        return ((-row) % 128 + 128 * rng.randint(0, 2)) // width or 128 // width
    if kind == "pitch16":
        return ((-row) % 16 + 16 * rng.randint(0, 4)) // width or 16 // width
    return rng.randint(1, 17)


def _span(layout: str, width: int) -> int:
    """Elements of one swizzle span (0 for layouts without a swizzle)."""
    kind, _, argument = layout.partition(":")
    if kind == "swizzle" and int(argument) > 0:
        return (16 << int(argument)) // width
    return 0


def _shared_tile(rng: random.Random, layout: str, width: int) -> list[int] | None:
    """The shape of one stage of the shared buffer."""
    span = _span(layout, width)
    if span:
        last = span * rng.choice((1, 1, 2, 2, 3, 4))
        rows = 8 * _weighted(rng, {1: 6, 2: 4, 3: 1, 4: 3, 8: 2, 16: 1, 32: 1, 64: 1})
        rank = _weighted(rng, {2: 6, 3: 3, 4: 1})
        shape = [*[_outer_extent(rng) for _ in range(rank - 2)], rows, last]
    else:
        if layout.startswith("swizzle") or rng.random() < 0.9:
            last = max(1, rng.choice((16, 32, 32, 64, 64, 128, 128, 256, 512, 1024, 2048))
                       // width)
        else:
            last = rng.randint(1, 300)
        weights = {2: 6, 3: 3, 4: 1} if layout.startswith(("swizzle", "blocked")) else {
            1: 2, 2: 6, 3: 3, 4: 1}
        rank = _weighted(rng, weights)
        shape = [_outer_extent(rng) for _ in range(rank - 1)] + [last]
        if layout == "blocked" and shape[-2] < 2:
            shape[-2] = rng.choice((2, 4, 8, 16))
    while math.prod(shape) * width > MAX_TILE_BYTES:
        big = max(range(len(shape) - 1), key=lambda d: shape[d], default=None)
        if big is None or shape[big] == 1:
            return None
        shape[big] = max(1, shape[big] // 2)
    if (span and shape[-2] % 8) or (layout == "blocked" and shape[-2] < 2):
        return None
    return shape


def _outer_extent(rng: random.Random) -> int:
    return _weighted(rng, {1: 3, 2: 4, 3: 2, 4: 3, 5: 1, 8: 3, 16: 2, 64: 1, 256: 1, 512: 1})


def _shared_region(rng: random.Random, layout: str, width: int, buf: list[int]):
    """(start, extent) of the copied region inside one stage of the shared buffer."""
    if rng.random() < 0.55:
        return [0] * len(buf), list(buf)
    span = _span(layout, width)
    starts, extents = [], []
    for d, n in enumerate(buf):
        last = d == len(buf) - 1
        grain, align = 1, 1  # extent granule and start alignment (elements)
        if last and span and rng.random() < 0.85:
            grain = align = span
        elif last and rng.random() < 0.85:
            grain = max(1, 16 // width)
            align = max(1, rng.choice((128, 128, 128, 128, 16)) // width)
        elif d == len(buf) - 2 and span and rng.random() < 0.7:
            grain = align = 8
        choices = list(range(grain, n + 1, grain)) or [n]
        extent = rng.choice((n, rng.choice(choices), rng.choice(choices),
                             max(grain, n // 2 // grain * grain)))
        extent = min(max(extent, 1), n)
        room = n - extent
        if rng.random() < 0.8:
            start = rng.choice(list(range(0, room + 1, align)) or [0])
        else:
            start = rng.randint(0, room)
        starts.append(start)
        extents.append(extent)
    return starts, extents


def _global_extents(rng: random.Random, inner: list[int]) -> list[int] | None:
    """The global region's extents: the shared non-unit extents, maybe refactored, plus units."""
    extents = list(inner)
    if extents and rng.random() < 0.12:
        d = rng.randrange(len(extents))
        factors = [f for f in range(2, extents[d]) if extents[d] % f == 0]
        if factors and rng.random() < 0.6:
            f = rng.choice(factors)
            extents[d : d + 1] = [extents[d] // f, f]
        elif len(extents) > 1 and d + 1 < len(extents):
            extents[d : d + 2] = [extents[d] * extents[d + 1]]
    if len(extents) > MAX_RANK:
        return None
    rank = rng.randint(max(1, len(extents)), MAX_RANK)
    if rng.random() < 0.4:
        rank = max(1, len(extents))
    trailing = rng.random() < 0.1  # unit dims after the innermost copied dim
    while len(extents) < rank:
        top = len(extents) if trailing or not extents else len(extents) - 1
        extents.insert(rng.randint(0, top), 1)
    return extents


def _global_box(rng: random.Random, extents: list[int], width: int, stages: int):
    """(shape, start) of the global view around the region (stage dim 0 walks it)."""
    unit16 = max(1, 16 // width)
    innermost = max((d for d, e in enumerate(extents) if e != 1), default=len(extents) - 1)
    shape, start = [], []
    for d, e in enumerate(extents):
        kind = _weighted(rng, {"zero": 35, "multiple": 25, "eight": 15, "any": 25})
        if d == innermost and kind == "any" and rng.random() < 0.7:
            kind = "unit16"  # TMA boxes start on 16 bytes along dimension 0
        if kind == "zero":
            s = 0
        elif kind == "multiple":
            s = e * rng.randint(0, 3)
        elif kind == "eight":
            s = 8 * rng.randint(0, 4)
        elif kind == "unit16":
            s = unit16 * rng.randint(0, max(1, 2 * e // unit16))
        else:
            s = rng.randint(0, 2 * e)
        needed = s + e * (max(stages, 1) if d == 0 else 1)
        slack = _weighted(rng, {0: 40, "small": 30, "round": 30})
        if slack == "small":
            slack = rng.randint(1, e)
        elif slack == "round":
            slack = rng.choice((8, 16, 32, 64))
        n = needed + slack
        if d > innermost and rng.random() < 0.5:
            n, s = 1, 0  # a trailing unit dim that keeps the rows contiguous
        if d == len(extents) - 1 and rng.random() < 0.9:
            n = -(-n // unit16) * unit16  # rows a multiple of 16 bytes
        if rng.random() < 0.03:
            n = max(1, needed - 1)  # the region sticks out of the tensor
        shape.append(n)
        start.append(s)
    return shape, start


def _global_strides(rng: random.Random, shape: list[int], width: int) -> list[int] | None:
    """None (dense row-major) or the strides of a padded / permuted view."""
    roll = rng.random()
    if roll < 0.62:
        return None
    rank = len(shape)
    if roll < 0.65 and rank > 1:  # a permuted (transposed) dense view
        order = list(range(rank))
        rng.shuffle(order)
        strides = [0] * rank
        step = 1
        for d in reversed(order):
            strides[d] = step
            step *= shape[d]
        return strides
    strides = [0] * rank
    strides[-1] = 2 if rng.random() < 0.04 else 1  # every other element: not contiguous
    for d in reversed(range(rank - 1)):
        kind = _weighted(rng, {"none": 45, "aligned": 45, "odd": 10})
        pad = 0
        if kind == "aligned":
            pad = max(1, 16 // width) * rng.randint(1, 8)
        elif kind == "odd":
            pad = rng.randint(1, 9)
        strides[d] = strides[d + 1] * shape[d + 1] + pad
    return strides


def _smem_offset(rng: random.Random, layout: str, width: int) -> int:
    kind = _weighted(rng, {"zero": 55, "aligned": 39, "misaligned": 6})
    if kind == "zero":
        return 0
    if kind == "aligned":
        align = rng.choice((1024, 1024, 128)) if layout.startswith("swizzle") else 128
        return align // width * rng.randint(1, 4)
    return rng.choice((16 // width * rng.randint(1, 15), rng.randint(1, 100)))


# --------------------------------------------------------------------------------------------
# One case: plan, invariants, model
# --------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one case did. ``kind`` names the failure class (the shrinker keeps it fixed)."""

    status: str  # "accepted", "refused" or "mismatch"
    rule: str | None = None
    kind: str = ""
    problem: str = ""
    issues: int = 0


class CaseTimeout(Exception):
    """A case ran past its time limit (a planner that does not terminate, say)."""


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """Raise :class:`CaseTimeout` in this (main) thread after ``seconds`` of wall time."""
    usable = (seconds and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise CaseTimeout(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_case(case: CopyCase, data_seed: int = 0, timeout: float | None = CASE_TIMEOUT
               ) -> Outcome:
    """Plan ``case``; check a refusal's rule, or the plans' invariants and bytes on the model.

    A case that takes over ``timeout`` seconds (planning included) is a mismatch of kind
    ``timeout``: a planner that loops must fail the run, not stall it.
    """
    try:
        with _time_limit(timeout):
            return _check_case(case, data_seed)
    except CaseTimeout as error:
        return Outcome("mismatch", kind="timeout", problem=str(error))


def _check_case(case: CopyCase, data_seed: int) -> Outcome:
    try:
        plans = plans_of(case)
    except PlanError as error:
        if error.rule in RULES:
            return Outcome("refused", rule=error.rule)
        return Outcome("mismatch", kind="unknown-rule", problem=str(error))
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001 -- any other exception is a planner failure
        return _crash("plan", error)
    try:
        problems = plan_invariants(case, plans)
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001
        return _crash("invariants", error)
    if problems:
        name, detail = problems[0]
        return Outcome("mismatch", kind=f"invariant:{name}", problem=detail)
    try:
        problem = model_mismatch(case, plans, data_seed)
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001
        return _crash("model", error)
    issues = sum(p.num_issues for p, _ in plans)
    if problem:
        return Outcome("mismatch", kind="bytes", problem=problem, issues=issues)
    return Outcome("accepted", issues=issues)


def _crash(stage: str, error: Exception) -> Outcome:
    where = traceback.extract_tb(error.__traceback__)[-1]
    return Outcome("mismatch", kind=f"crash:{stage}:{type(error).__name__}",
                   problem=f"{type(error).__name__}: {error} (at {where.filename}:{where.lineno})")


def _int(value, env) -> int:
    return int(evaluate(value, env))


def plan_invariants(case: CopyCase, plans) -> list[tuple[str, str]]:
    """Every hardware invariant an accepted plan must satisfy, checked on concrete values.

    Returns (name, detail) for each violation; empty when the plans are legal.
    """
    problems: list[tuple[str, str]] = []

    def fail(name: str, detail: str) -> None:
        problems.append((name, detail))

    width = case.element_bytes
    kind, _, argument = case.shared_layout.partition(":")
    want_swizzle = int(argument) if kind == "swizzle" else 0
    arena_bytes = (int(_arena_offsets_cached(case).max()) + 1) * width
    storage_bytes = case.global_storage_elems * width
    shared_seen: list[np.ndarray] = []
    for copy_plan, env in plans:
        spec = copy_plan.tensor_map
        rank = spec.rank
        if copy_plan.direction != case.direction:
            fail("direction", f"plan direction {copy_plan.direction} for a {case.direction} copy")
        if not 1 <= rank <= MAX_RANK:
            fail("rank", f"rank {rank}")
            continue
        lengths = (len(spec.global_dims), len(spec.global_strides) + 1, len(spec.box_dims),
                   len(spec.element_strides), len(copy_plan.coordinates))
        if set(lengths) != {rank}:
            fail("rank", f"field lengths {lengths} for rank {rank}")
            continue
        if any(not 1 <= b <= MAX_BOX for b in spec.box_dims):
            fail("box-dim", f"box {spec.box_dims}")
        if any(e != 1 for e in spec.element_strides):
            fail("element-strides", f"element strides {spec.element_strides}")
        if spec.dtype not in DESCRIPTOR_DTYPE_BYTES or spec.element_bytes % width:
            fail("descriptor-dtype", f"{spec.dtype} for {case.dtype}")
        if spec.swizzle != (want_swizzle if want_swizzle else 0):
            fail("swizzle", f"swizzle {spec.swizzle} for layout {case.shared_layout}")
        if (spec.interleave, spec.l2_promotion, spec.oob_fill) != (0, 2, 0):
            fail("options", f"interleave/l2/oob {spec.interleave}/{spec.l2_promotion}/"
                            f"{spec.oob_fill}")
        inner = spec.box_dims[0] * spec.element_bytes
        if spec.swizzle:
            span, period = SWIZZLE_GEOMETRY.get(spec.swizzle, (None, None))
            if inner != span:
                fail("swizzle-span", f"inner box {inner} bytes, span {span}")
            if period is None or (case.smem_elem_offset * width) % period:
                fail("swizzle-base-period", f"buffer at byte {case.smem_elem_offset * width}")
        elif inner % 16:
            fail("inner-box-16B", f"inner box {inner} bytes")
        strides = [_int(s, env) for s in spec.global_strides]
        if any(s % 16 or not 0 <= s < (1 << 40) for s in strides):
            fail("global-stride", f"strides {strides}")
        dims = [_int(d, env) for d in spec.global_dims]
        if any(not 0 < d <= (1 << 32) for d in dims):
            fail("global-dim", f"dims {dims}")
        if copy_plan.bytes_per_issue * copy_plan.num_issues != case.copy_bytes:
            fail("bytes", f"{copy_plan.bytes_per_issue} B x {copy_plan.num_issues} issues != "
                          f"{case.copy_bytes} B")
        for axis in copy_plan.issue_axes:
            if axis.extent < 1 or not 0 <= axis.coord_dim < rank:
                fail("issue-axis", f"{axis}")
        if problems:
            continue
        for issue in copy_plan.issues():
            smem = _int(issue.smem_offset, env) * width
            coords = [_int(c, env) for c in issue.coordinates]
            if smem % SMEM_ALIGN:
                fail("smem-align-128", f"issue at shared byte {smem}")
                break
            if (coords[0] * spec.element_bytes) % 16:
                fail("inner-coordinate-16B", f"issue at {coords}: dimension 0 starts "
                                             f"{coords[0] * spec.element_bytes} bytes in")
                break
            g_off, s_addr, inside = box_addresses(spec, coords, smem, dims)
            if not inside.all():
                fail("out-of-bounds", f"issue at {coords} leaves the tensor {dims}")
                break
            if g_off.min() < 0 or g_off.max() + spec.element_bytes > storage_bytes:
                fail("global-range", f"issue at {coords} reaches bytes [{g_off.min()}, "
                                     f"{g_off.max()}] of a {storage_bytes}-byte allocation")
                break
            if s_addr.min() < 0 or s_addr.max() + spec.element_bytes > arena_bytes:
                fail("shared-range", f"issue at shared byte {smem} reaches "
                                     f"[{s_addr.min()}, {s_addr.max()}] of {arena_bytes}")
                break
            shared_seen.append(s_addr)
    if not problems and shared_seen:
        every = np.concatenate(shared_seen)
        if np.unique(every).size != every.size:
            fail("overlap", "two issues write the same shared address")
    return problems


_OFFSETS_CACHE: dict[int, tuple[CopyCase, np.ndarray]] = {}


def _arena_offsets_cached(case: CopyCase) -> np.ndarray:
    """Arena element offsets of the shared buffer (one entry: a case is checked at a time)."""
    hit = _OFFSETS_CACHE.get(0)
    if hit is not None and hit[0] is case:
        return hit[1]
    offsets = case.smem_elem_offset + layout_offsets(shared_layout_of(case), case.shared_shape)
    _OFFSETS_CACHE[0] = (case, offsets)
    return offsets


def model_mismatch(case: CopyCase, plans, data_seed: int = 0) -> str:
    """'' when the plans, run on the TMA model, move exactly the bytes numpy's copy moves."""
    offsets = _arena_offsets_cached(case)
    global_in, shared_in = inputs(case, data_seed)
    want = model_buffers(case, *expected_after(case, global_in, shared_in), offsets)
    got = run_model_buffers(case, global_in, shared_in, plans=plans, arena_offsets=offsets)
    problems = []
    for label, have, expect in zip(("global", "shared"), got, want):
        wrong = np.flatnonzero(have != expect)
        if wrong.size:
            problems.append(f"{label}: {wrong.size} bytes differ, first at byte {wrong[0]}")
    return "; ".join(problems)


# --------------------------------------------------------------------------------------------
# Many cases
# --------------------------------------------------------------------------------------------


@dataclass
class Summary:
    cases: int = 0
    accepted: int = 0
    refused: int = 0
    mismatches: int = 0
    rules: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)  # (index, Outcome)
    issues: int = 0
    seconds: float = 0.0  # wall time of the whole run
    coverage: Counter = field(default_factory=Counter)
    accepted_indices: list = field(default_factory=list)
    slowest: tuple = (0.0, -1)  # (seconds, index) of the slowest case

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
        keys.append("global-offset")
    if case.smem_elem_offset:
        keys.append("smem-offset")
    if case.shared_extent is not None:
        keys.append("shared-subregion")
    return keys


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
        with _pool(jobs) as pool:
            futures = [pool.submit(_check_range, seed, range(k, cases, jobs), data_seed)
                       for k in range(jobs)]
            for future in futures:
                summary.merge(future.result())
    summary.failures.sort(key=lambda item: item[0])
    summary.accepted_indices.sort()
    summary.seconds = time.perf_counter() - start
    return summary


def _pool(jobs: int) -> ProcessPoolExecutor:
    import multiprocessing

    # TVM starts threads on import; fork after that is unsafe, so workers start fresh.
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))


# --------------------------------------------------------------------------------------------
# Minimization and regression tests
# --------------------------------------------------------------------------------------------


def valid_case(case: CopyCase) -> bool:
    """The case describes a real copy: its shared layout exists and its region fits."""
    try:
        if not case.global_shape or len(case.global_shape) > MAX_RANK:
            return False
        if any(n < 1 for n in case.global_shape) or any(e < 1 for e in case.global_extent):
            return False
        if len({len(case.global_shape), len(case.global_start), len(case.global_extent)}) != 1:
            return False
        if case.global_strides is not None and len(case.global_strides) != len(
                case.global_shape):
            return False
        if case.stages and (case.stages < 1 or len(case.shared_shape) < 2):
            return False
        for s, e, n in zip(case.s_start, case.s_extent, case.shared_shape):
            if s < 0 or e < 1 or s + e > n:
                return False
        if len(case.s_start) != len(case.shared_shape) or len(case.s_extent) != len(
                case.shared_shape):
            return False
        offsets = layout_offsets(shared_layout_of(case), case.shared_shape)
        return int(offsets.min()) >= 0
    except Exception:  # noqa: BLE001 -- a layout TVM cannot build is not a case
        return False


def shrink(case: CopyCase, fails: Callable[[CopyCase], bool], budget: int = 400) -> CopyCase:
    """Greedily simplify ``case`` while ``fails`` holds (at most ``budget`` predicate calls)."""
    current = case
    calls = 0
    progress = True
    while progress and calls < budget:
        progress = False
        for candidate in _simpler(current):
            if candidate == current or not valid_case(candidate):
                continue
            calls += 1
            if fails(candidate):
                current = candidate
                progress = True
                break
            if calls >= budget:
                break
    return current


def _replace(case: CopyCase, **changes) -> CopyCase:
    return dataclasses.replace(case, **changes)


def _simpler(case: CopyCase):
    """Candidate simplifications of ``case``, boldest first."""
    yield from _unstaged(case)
    if case.global_offset:
        yield _replace(case, global_offset=0)
    if case.global_strides is not None:
        yield _replace(case, global_strides=None)
        yield from _denser_strides(case)
    if case.smem_elem_offset:
        yield _replace(case, smem_elem_offset=0)
        yield _replace(case, smem_elem_offset=case.smem_elem_offset // 2)
    yield from _simpler_layouts(case)
    yield from _dropped_global_dims(case)
    yield from _dropped_shared_dims(case)
    yield from _smaller_extents(case)
    yield from _tighter_global(case)
    yield from _tighter_shared(case)
    yield from _simpler_dtypes(case)
    if case.direction == "s2g":
        yield _replace(case, direction="g2s")


def _unstaged(case: CopyCase):
    if not case.stages:
        return
    yield _replace(case, stages=0, shared_shape=case.shared_shape[1:],
                   shared_start=None if case.shared_start is None else case.shared_start[1:],
                   shared_extent=None if case.shared_extent is None else case.shared_extent[1:])
    if case.stages > 1:
        yield _replace(case, stages=case.stages - 1,
                       shared_shape=(case.stages - 1, *case.shared_shape[1:]))


def _denser_strides(case: CopyCase):
    strides = list(case.global_strides)
    for d in range(len(strides)):
        dense = 1 if d == len(strides) - 1 else strides[d + 1] * case.global_shape[d + 1]
        if strides[d] > dense and (d == len(strides) - 1 or strides[d + 1] <= strides[d]):
            yield _replace(case, global_strides=(*strides[:d], dense, *strides[d + 1:]))


def _simpler_layouts(case: CopyCase):
    kind, _, argument = case.shared_layout.partition(":")
    if kind != "row":
        yield _replace(case, shared_layout="row")
    if kind == "padded" and int(argument) > 1:
        yield _replace(case, shared_layout=f"padded:{int(argument) // 2}")
    if kind == "blocked":
        rows, gap = (int(v) for v in argument.split(":"))
        if gap:
            yield _replace(case, shared_layout=f"blocked:{rows}:0")
            yield _replace(case, shared_layout=f"blocked:{rows}:{gap // 2}")
    if kind == "swizzle" and int(argument) > 0:
        yield _replace(case, shared_layout=f"swizzle:{int(argument) - 1}")


def _drop(values, d):
    return None if values is None else (*values[:d], *values[d + 1:])


def _dropped_global_dims(case: CopyCase):
    for d, extent in enumerate(case.global_extent):
        if extent != 1 or len(case.global_shape) == 1 or (case.stages and d == 0):
            continue
        yield _replace(case, global_shape=_drop(case.global_shape, d),
                       global_start=_drop(case.global_start, d),
                       global_extent=_drop(case.global_extent, d),
                       global_strides=_drop(case.global_strides, d))


def _dropped_shared_dims(case: CopyCase):
    first = 1 if case.stages else 0
    for d in range(first, len(case.shared_shape)):
        if case.shared_shape[d] != 1 or len(case.shared_shape) - first == 1:
            continue
        yield _replace(case, shared_shape=_drop(case.shared_shape, d),
                       shared_start=_drop(case.shared_start, d),
                       shared_extent=_drop(case.shared_extent, d))


def _paired_dims(case: CopyCase) -> list[tuple[int, int]] | None:
    """(global dim, shared dim) pairs of the non-unit extents, when both sides list the same."""
    first = 1 if case.stages else 0
    g_dims = [d for d, e in enumerate(case.global_extent) if e != 1]
    s_dims = [d for d in range(first, len(case.shared_shape)) if case.s_extent[d] != 1]
    if [case.global_extent[d] for d in g_dims] != [case.s_extent[d] for d in s_dims]:
        return None
    return list(zip(g_dims, s_dims))


def _smaller_extents(case: CopyCase):
    pairs = _paired_dims(case)
    if pairs is None:
        return
    for g, s in pairs:
        extent = case.global_extent[g]
        for smaller in sorted({1, extent // 2}, reverse=True):
            if smaller < 1 or smaller == extent:
                continue
            g_ext = (*case.global_extent[:g], smaller, *case.global_extent[g + 1:])
            s_ext = (*case.s_extent[:s], smaller, *case.s_extent[s + 1:])
            if case.shared_extent is None:
                shape = (*case.shared_shape[:s], smaller, *case.shared_shape[s + 1:])
                yield _replace(case, global_extent=g_ext, shared_shape=shape)
            yield _replace(case, global_extent=g_ext, shared_start=tuple(case.s_start),
                           shared_extent=s_ext)


def _tighter_global(case: CopyCase):
    for d in range(len(case.global_shape)):
        reach = case.global_extent[d] * (max(case.stages, 1) if d == 0 else 1)
        start = case.global_start[d]
        for smaller in sorted({0, start % 16, start // 2}):
            if smaller >= start:
                continue
            shape = (*case.global_shape[:d], max(1, case.global_shape[d] - start + smaller),
                     *case.global_shape[d + 1:])
            yield _replace(case, global_start=(*case.global_start[:d], smaller,
                                               *case.global_start[d + 1:]), global_shape=shape)
        if case.global_shape[d] > start + reach:
            shape = (*case.global_shape[:d], start + reach, *case.global_shape[d + 1:])
            yield _replace(case, global_shape=shape)
            half = max(start + reach, (case.global_shape[d] + start + reach) // 2)
            yield _replace(case, global_shape=(*case.global_shape[:d], half,
                                               *case.global_shape[d + 1:]))


def _tighter_shared(case: CopyCase):
    if case.shared_extent is None:
        return
    first = 1 if case.stages else 0
    if tuple(case.s_extent[first:]) == tuple(case.shared_shape[first:]):
        yield _replace(case, shared_start=None, shared_extent=None)
    for d in range(first, len(case.shared_shape)):
        start, extent = case.s_start[d], case.s_extent[d]
        if start:
            yield _replace(case, shared_start=(*case.s_start[:d], 0, *case.s_start[d + 1:]),
                           shared_shape=(*case.shared_shape[:d], case.shared_shape[d] - start,
                                         *case.shared_shape[d + 1:]))
        if case.shared_shape[d] > start + extent:
            yield _replace(case, shared_shape=(*case.shared_shape[:d], start + extent,
                                               *case.shared_shape[d + 1:]))


def _simpler_dtypes(case: CopyCase):
    same_width = {"bfloat16": "float16", "int8": "uint8", "float8_e4m3fn": "uint8",
                  "float8_e5m2": "uint8"}
    if case.dtype in same_width:
        yield _replace(case, dtype=same_width[case.dtype])


def case_digest(case: CopyCase) -> str:
    """A stable short hash of a case's content (its name excluded)."""
    fields = dataclasses.asdict(_replace(case, name=""))
    return hashlib.sha1(repr(sorted(fields.items())).encode()).hexdigest()[:12]


def case_source(case: CopyCase, indent: str = "    ") -> str:
    """``CopyCase(...)`` as Python source, one field per line."""
    lines = ["CopyCase("]
    for item in dataclasses.fields(case):
        value = getattr(case, item.name)
        if value == item.default or (item.name == "expect" and not value):
            continue
        lines.append(f"{indent}{item.name}={value!r},")
    lines.append(")")
    return "\n".join(lines)


def regression_source(case: CopyCase, outcome: Outcome, origin: str) -> str:
    digest = case_digest(case)
    problem = " ".join(outcome.problem.split())[:300]
    return f'''"""Fuzzer regression {digest}: {outcome.kind}.

Minimized from {origin}. Failure when found:
{_wrap(problem)}
"""

from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz import check_case

CASE = {case_source(case)}


def test_fuzz_regression_{digest}():
    outcome = check_case(CASE)
    assert outcome.status != "mismatch", f"{{outcome.kind}}: {{outcome.problem}}"
'''


def _wrap(text: str, width: int = 96) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or "(no detail)"


def save_regression(case: CopyCase, outcome: Outcome, directory: Path | str,
                    origin: str = "") -> Path:
    """Write ``case`` as ``<directory>/test_case_<hash>.py`` (a pytest module)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"test_case_{case_digest(case)}.py"
    path.write_text(regression_source(case, outcome, origin or case.name))
    return path


def minimize_failure(case: CopyCase, outcome: Outcome, data_seed: int = 0,
                     budget: int = 400) -> tuple[CopyCase, Outcome]:
    """The smallest case found that fails the same way (same ``kind``) as ``case``."""

    timeout = 2.0 if outcome.kind == "timeout" else CASE_TIMEOUT

    def fails(candidate: CopyCase) -> bool:
        return check_case(candidate, data_seed, timeout).kind == outcome.kind

    small = shrink(case, fails, budget)
    return small, check_case(small, data_seed)


# --------------------------------------------------------------------------------------------
# GPU mode
# --------------------------------------------------------------------------------------------


def kernel_compatible(case: CopyCase) -> bool:
    """The test kernel can express the case: the copy op's two regions list the same
    non-unit extents (the dispatch's ``validate_copy_op`` gate) and the arena fits."""
    if _paired_dims(case) is None:
        return False
    arena = (int(_arena_offsets_cached(case).max()) + 1) * case.element_bytes
    return arena + 16 <= MAX_KERNEL_SMEM


def _compile_worker(case: CopyCase, directory: str) -> tuple[str, float, str]:
    """(library path, seconds, error) for one case: compile, then export to a shared object."""
    start = time.perf_counter()
    try:
        from .runner import compile_case

        built = compile_case(case)
        path = os.path.join(directory, f"{case_digest(case)}.so")
        built.executable.export_library(path)
        return path, time.perf_counter() - start, ""
    except Exception as error:  # noqa: BLE001
        return "", time.perf_counter() - start, f"{type(error).__name__}: {error}"


@dataclass
class GpuSummary:
    kernels: int = 0
    ran: int = 0
    mismatches: int = 0
    compile_seconds: float = 0.0  # summed over the workers
    run_seconds: float = 0.0  # load + launch + compare, in this process
    wall_seconds: float = 0.0
    failures: list = field(default_factory=list)  # (index, case, problem)


def run_gpu(cases: list[tuple[int, CopyCase]], jobs: int, data_seed: int = 0,
            log=print) -> GpuSummary:
    """Build every case's kernel in ``jobs`` workers; run each on GPU 0 as it arrives."""
    import tempfile
    from types import SimpleNamespace

    import tvm

    from .runner import run_on_gpu

    summary = GpuSummary()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tvm_tma_fuzz_") as directory, \
            _pool(max(1, jobs)) as pool:
        futures = {pool.submit(_compile_worker, case, directory): (index, case)
                   for index, case in cases}
        for future in as_completed(futures):
            index, case = futures[future]
            path, seconds, error = future.result()
            summary.kernels += 1
            summary.compile_seconds += seconds
            if error:
                problem = f"build failed: {error}"
            else:
                launched = time.perf_counter()
                try:
                    module = tvm.runtime.load_module(path)
                    ok, problem = run_on_gpu(case, SimpleNamespace(executable=module),
                                             seed=data_seed)
                    summary.ran += 1
                    problem = "" if ok else problem
                except Exception as error:  # noqa: BLE001
                    problem = f"run failed: {type(error).__name__}: {error}"
                summary.run_seconds += time.perf_counter() - launched
            if problem:
                summary.mismatches += 1
                summary.failures.append((index, case, problem))
                log(f"GPU MISMATCH case {index} ({case.name}): {problem[:500]}")
            if summary.kernels % 100 == 0:
                log(f"gpu: {summary.kernels}/{len(cases)} kernels, {summary.mismatches} "
                    f"mismatches, {time.perf_counter() - start:.0f} s")
    summary.wall_seconds = time.perf_counter() - start
    return summary


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _histogram(summary: Summary) -> list[str]:
    lines = ["refusals by rule:"]
    for rule, count in sorted(summary.rules.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"  {rule:22s} {count:7d}  {100 * count / max(summary.cases, 1):5.1f}%")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tvm_tma.testing.fuzz",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=None,
                        help="case stream (default: TVM_TMA_FUZZ_SEED or a fixed seed)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--gpu", action="store_true",
                        help="also build and run every accepted case's kernel on GPU 0")
    parser.add_argument("--gpu-limit", type=int, default=None,
                        help="at most this many kernels in --gpu mode")
    parser.add_argument("--save-failures", type=Path, default=None, metavar="DIR",
                        help="minimize each mismatch and save it as DIR/test_case_<hash>.py "
                        f"(the suite collects {REGRESSION_DIR})")
    parser.add_argument("--shrink-budget", type=int, default=400)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(
        os.environ.get("TVM_TMA_FUZZ_SEED", DEFAULT_SEED))

    print(f"seed {seed}", flush=True)
    summary = run_fuzz(args.cases, seed, jobs=args.jobs)
    print(f"model: {summary.cases} cases in {summary.seconds:.1f} s "
          f"({1000 * summary.seconds / max(summary.cases, 1):.2f} ms/case wall, "
          f"{args.jobs} jobs), {summary.issues} issues modelled, slowest case "
          f"{summary.slowest[1]} ({summary.slowest[0]:.2f} s)")
    for line in _histogram(summary):
        print(line)
    for index, outcome in summary.failures[:50]:
        print(f"MISMATCH case {index}: {outcome.kind}: {outcome.problem[:500]}")
        print(f"  reproduce: random_case({seed}, {index})")
    if args.save_failures is not None:
        seen = set()
        for index, outcome in summary.failures[:20]:
            small, small_outcome = minimize_failure(random_case(seed, index), outcome,
                                                    budget=args.shrink_budget)
            if case_digest(small) in seen:
                continue
            seen.add(case_digest(small))
            path = save_regression(small, small_outcome if small_outcome.kind else outcome,
                                   args.save_failures, f"random_case({seed}, {index})")
            print(f"  minimized case {index} -> {path}")

    mismatches = summary.mismatches
    if args.gpu:
        chosen = []
        for index in summary.accepted_indices:
            case = random_case(seed, index)
            if kernel_compatible(case):
                chosen.append((index, case))
            if args.gpu_limit is not None and len(chosen) >= args.gpu_limit:
                break
        print(f"gpu: building {len(chosen)} kernels with {args.jobs} jobs", flush=True)
        gpu = run_gpu(chosen, args.jobs)
        per_kernel = gpu.compile_seconds / max(gpu.kernels, 1)
        print(f"gpu: {gpu.kernels} kernels built, {gpu.ran} run, {gpu.mismatches} mismatches; "
              f"{per_kernel:.2f} s compile per kernel (in a worker), "
              f"{gpu.run_seconds / max(gpu.ran, 1):.3f} s load+run per kernel, "
              f"{gpu.wall_seconds:.0f} s wall")
        mismatches += gpu.mismatches
        if args.save_failures is not None:
            for index, case, problem in gpu.failures[:20]:
                outcome = Outcome("mismatch", kind="gpu", problem=problem)
                path = save_regression(case, outcome, args.save_failures,
                                       f"random_case({seed}, {index}) on the GPU")
                print(f"  saved GPU failure {index} -> {path}")
    print(f"{summary.cases} cases, {summary.accepted} accepted, {summary.refused} refused, "
          f"{mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
