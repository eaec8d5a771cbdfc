"""The fuzzer's oracle: one case -> the planner -> hardware invariants and the TMA model.

It exists apart from the generator and the drivers because it is the part every consumer
shares: the batch runner, the shrinker (its failure predicate), the CLI and the generated
regression tests (``from tvm_tma.testing.fuzz import check_case``) all judge a case here.

The planner must either refuse with a rule of :data:`~tvm_tma.planner.RULES`, or return plans
that satisfy the hardware invariants (checked here independently of the planner's own rules)
and that, run on the TMA model over the whole global allocation and the whole shared arena,
give exactly the bytes numpy's copy gives. A crash, a refusal without a known rule or a case
that runs past its time limit is a mismatch too.

The variants are judged the same way, plus what they promise: a multicast load's plan is dealt
out among the cluster's CTAs (each issue made by exactly one CTA, each CTA's run as long as the
others, every piece 128-byte aligned) and every CTA's image on the model is the one-CTA copy; a
reduction keeps the element type, is refused with rule ``reduce`` exactly when PTX does not
define its (op, dtype) pair, and leaves numpy's reduction of the region in global memory
(``expected_after`` computes it apart from the TMA model).

A device-view case (``case.device_view``) is planned as its kernel's copy is (the view over
the kernel argument, the facts of its clamps); its plan is device-born exactly when its map
reads the device's values, it must move the right bytes at the case's own launch and at one
that places the view elsewhere and makes it shorter, and a refusal must name a rule of
device-side views, the rule its static twin is refused with, or ``oob`` for a store that
crosses the device-side end.

A loop case (``case.loop``: a persistent kernel around the copy) is judged by
:mod:`.fuzz_loop_oracle`, which plans the whole kernel as the build does and checks the plan
at every tile the loop runs; the checks both apply live in :mod:`.fuzz_checks`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import replace

from ..planner import RULES, PlanError
from .copy_cases import CopyCase
from .device_view_case import DEVICE_VIEW_RULES
from .fuzz_checks import (
    MAX_BOX,
    SMEM_ALIGN,
    CaseTimeout,
    Outcome,
    arena_offsets,
    crash_outcome,
    model_mismatch,
    plan_invariants,
    relaunch_mismatch,
    split_invariants,
    variant_invariants,
)
from .fuzz_loop_oracle import check_loop_case
from .fuzz_variants import reduction_defined
from .runner import plans_of

__all__ = [
    "CASE_TIMEOUT", "MAX_BOX", "SMEM_ALIGN", "CaseTimeout", "Outcome", "arena_offsets",
    "check_case", "model_mismatch", "plan_invariants", "plans_of", "split_invariants",
    "variant_invariants",
]

#: Seconds one case may take before it counts as a mismatch (typical: a few milliseconds).
CASE_TIMEOUT = 10.0


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in this (main) thread after ``seconds`` of wall time."""
    usable = (seconds and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def expire(signum: int, frame: object) -> None:
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
    if case.loop is not None:
        return check_loop_case(case, data_seed)
    try:
        plans = plans_of(case)
    except PlanError as error:
        if error.rule not in RULES:
            return Outcome("mismatch", kind="unknown-rule", problem=str(error))
        problem = _reduce_refusal_problem(case, error.rule)
        if problem:
            return Outcome("mismatch", kind="reduce-refusal", problem=f"{problem}: {error}")
        problem = _device_refusal_problem(case, error.rule)
        if problem:
            return Outcome("mismatch", kind="device-view-refusal",
                           problem=f"{problem}: {error}")
        return Outcome("refused", rule=error.rule)
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001 -- any other exception is a planner failure
        return crash_outcome("plan", error)
    if case.reduce is not None and not reduction_defined(case.reduce, case.dtype):
        return Outcome("mismatch", kind="reduce-accepted", problem=(
            f"reduce={case.reduce!r} on {case.dtype} was planned: PTX does not define it"))
    try:
        problems = plan_invariants(case, plans)
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001
        return crash_outcome("invariants", error)
    if problems:
        name, detail = problems[0]
        return Outcome("mismatch", kind=f"invariant:{name}", problem=detail)
    try:
        problem = model_mismatch(case, plans, data_seed) or relaunch_mismatch(case, data_seed)
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001
        return crash_outcome("model", error)
    issues = sum(p.num_issues for p, _ in plans)
    if problem:
        return Outcome("mismatch", kind="bytes", problem=problem, issues=issues)
    return Outcome("accepted", issues=issues)


def _device_refusal_problem(case: CopyCase, rule: str) -> str:
    """'' when refusing a device-view case with ``rule`` is explained: a rule of device-side
    views (:data:`~.device_view_case.DEVICE_VIEW_RULES`: its base, dims, strides, bounds
    are proven or refused by name), the rule its static twin is refused with, or ``oob`` for
    a store that crosses the view's end along the device-side dim 0 (a store's crossed end
    must be provably on 16 bytes, and the device's row count is not)."""
    if not case.device_view or rule in DEVICE_VIEW_RULES:
        return ""
    reach = case.global_start[0] + case.global_extent[0] * max(case.stages, 1)
    if rule == "oob" and case.direction == "s2g" and reach > case.global_shape[0]:
        return ""
    try:
        plans_of(replace(case, device_view=False))
    except PlanError as error:
        if error.rule == rule:
            return ""
        return f"the device-side view refused with {rule!r}, its static twin with {error.rule!r}"
    return f"the device-side view refused with {rule!r}, its static twin planned"


def _reduce_refusal_problem(case: CopyCase, rule: str) -> str:
    """'' when refusing ``case`` with ``rule`` agrees with the PTX ISA's reductions: a pair
    it does not define is refused for that (rule ``reduce``), one it defines never is."""
    if case.reduce is None:
        return ""
    defined = reduction_defined(case.reduce, case.dtype)
    if not defined and rule != "reduce":
        return (f"reduce={case.reduce!r} on {case.dtype} (undefined in PTX) refused with rule "
                f"{rule!r}, not 'reduce'")
    if defined and rule == "reduce":
        return f"reduce={case.reduce!r} on {case.dtype} (defined in PTX) refused as a reduction"
    return ""
