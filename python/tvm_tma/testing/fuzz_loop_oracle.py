"""The fuzz oracle of a loop case: plan the whole kernel as the build does, then check that
plan at every tile the loop runs.

It exists apart from :mod:`.fuzz_oracle` because a loop case is judged through the real
pipeline rather than the planner alone: its kernel (:func:`~.loop_kernel.build_loop_kernel`)
is parsed from TVMScript, which captures the facts at the copy, and
:func:`~tvm_tma.explainer.explain.explain` plans it with those facts and the loop ranges,
exactly as the lowering does. So the parse-time fact capture and the prover are under test
together, and the verdict comes from the loop's own truth (:mod:`.loop_forms` enumerates,
in plain Python, every (CTA, tile) the loop runs), never from a prover:

* refused (with a rule of :data:`~tvm_tma.planner.RULES`): fine, whatever the truth (a safe
  loop refused is counted, per form, by the batch driver, not a mismatch);
* accepted although some executed region leaves the tensor and the copy has no ``oob=``:
  a mismatch of kind ``unsound-accept`` (TMA would clip or fill it silently);
* accepted otherwise: the plan's symbolic coordinates, shared offset and base are evaluated
  at each step, with the scope id, loop variables and local scalars (``t[0]``, ``cur[0]``)
  bound to their values there (:func:`bind`); each step's concrete plan must satisfy the
  hardware invariants (:func:`~.fuzz_checks.plan_invariants`) and, run on the TMA model,
  leave every byte of the shared arena and, after all steps, of the global allocation as
  numpy's copy of that tile does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

import numpy as np

from ..explainer.explain import explain
from ..planner import RULES
from ..planner.plan_types import TmaPlan
from .copy_cases import CopyCase, global_storage
from .copy_expected import expected_after
from .fuzz_checks import CaseTimeout, Outcome, arena_offsets, crash_outcome, plan_invariants
from .loop_forms import Step, leaving_steps
from .loop_kernel import build_loop_kernel, image_index, loop_inputs, step_case
from .runner import _arena
from .tma_model import execute_plan

_BINARY = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "FloorDiv": lambda a, b: a // b, "FloorMod": lambda a, b: a % b,
    "Div": lambda a, b: abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1),
    "Mod": lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)),
    "Min": min, "Max": max,
    "LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b,
    "GE": lambda a, b: a >= b, "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b,
    "And": lambda a, b: bool(a) and bool(b), "Or": lambda a, b: bool(a) or bool(b),
    "BitwiseAnd": lambda a, b: a & b, "BitwiseOr": lambda a, b: a | b,
    "BitwiseXor": lambda a, b: a ^ b, "ShiftLeft": lambda a, b: a << b,
    "ShiftRight": lambda a, b: a >> b,
}


def bind(expr: object, names: Mapping[str, int]) -> int:
    """The value of a plan expression at one loop step: each variable and each load of a
    local scalar (``t[0]``) takes the value ``names`` gives its name (:attr:`Step.names`)."""
    if isinstance(expr, (bool, int, np.integer)):
        return int(expr)
    kind = type(expr).__name__
    if kind in ("IntImm", "BoolImm"):
        return int(expr.value)
    if kind == "Var":
        return _named(str(expr.name), names, expr)
    if kind in ("TensorLoad", "BufferLoad"):
        source = expr.source if hasattr(expr, "source") else expr.buffer
        if any(bind(index, names) != 0 for index in expr.indices):
            raise ValueError(f"{expr}: only one-element local scalars have a value here")
        return _named(str(source.name), names, expr)
    if kind == "Cast":
        return bind(expr.value, names)
    if kind == "Not":
        return int(not bind(expr.a, names))
    if kind == "Select":
        branch = expr.true_value if bind(expr.condition, names) else expr.false_value
        return bind(branch, names)
    if kind == "Let":
        return bind(expr.body, {**names, str(expr.var.name): bind(expr.value, names)})
    if kind in _BINARY:
        return int(_BINARY[kind](bind(expr.a, names), bind(expr.b, names)))
    raise NotImplementedError(f"{kind} in a plan expression: {expr}")


def _named(name: str, names: Mapping[str, int], expr: object) -> int:
    if name not in names:
        raise KeyError(f"{expr}: {name!r} has no value at the step (known: {sorted(names)})")
    return int(names[name])


def concrete_plan(plan: TmaPlan, names: Mapping[str, int]) -> TmaPlan:
    """``plan`` at one loop step: every symbolic field evaluated (:func:`bind`)."""
    def value(expr: object) -> int:
        return bind(expr, names)

    spec = dataclasses.replace(plan.tensor_map,
                               global_dims=tuple(map(value, plan.tensor_map.global_dims)),
                               global_strides=tuple(map(value, plan.tensor_map.global_strides)))
    axes = tuple(dataclasses.replace(axis, smem_stride=value(axis.smem_stride),
                                     coord_step=value(axis.coord_step))
                 for axis in plan.issue_axes)
    return dataclasses.replace(plan, tensor_map=spec, issue_axes=axes, host_checks=(),
                               coordinates=tuple(map(value, plan.coordinates)),
                               smem_offset=value(plan.smem_offset),
                               base_offset=value(plan.base_offset))


def check_loop_case(case: CopyCase, data_seed: int = 0) -> Outcome:
    """Explain the loop case's kernel; judge a refusal's rule, or the plan at every step."""
    try:
        kernel = build_loop_kernel(case)
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001 -- a kernel the generator drew must build
        return crash_outcome("build", error)
    try:
        copies = explain(kernel).copies
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001
        return crash_outcome("plan", error)
    if len(copies) != 1:
        return Outcome("mismatch", kind="loop-copies",
                       problem=f"explain found {len(copies)} TMA copies in a one-copy kernel")
    copy = copies[0]
    if copy.plan is None:
        if copy.rule not in RULES:
            return Outcome("mismatch", kind="unknown-rule", problem=f"[{copy.rule}] {copy.detail}")
        return Outcome("refused", rule=copy.rule)
    try:
        refusal = _launch_refusal(copy.plan)
    except Exception as error:  # noqa: BLE001 -- every shape is static: a check must evaluate
        return crash_outcome("host-check", error)
    if refusal is not None:
        return refusal
    unsound = unsound_acceptance(case)
    if unsound:
        return Outcome("mismatch", kind="unsound-accept", problem=unsound)
    try:
        return run_steps(case, copy.plan, data_seed)
    except CaseTimeout:
        raise
    except Exception as error:  # noqa: BLE001
        return crash_outcome("model", error)


def _launch_refusal(plan: TmaPlan) -> Outcome | None:
    """A host check the launch fails (every shape is static here): the copy never runs, so
    the plan is a refusal by the check's rule."""
    for check in plan.host_checks:
        if not bind(check.condition, {}):
            rule = re.match(r"\[([\w-]+)\]", check.message)
            if rule is None or rule.group(1) not in RULES:
                return Outcome("mismatch", kind="unknown-rule", problem=check.message)
            return Outcome("refused", rule=rule.group(1))
    return None


def unsound_acceptance(case: CopyCase) -> str:
    """Why accepting the loop case's copy is unsound ('' when it is not): some executed
    region leaves the tensor and the copy has no ``oob=``."""
    loop = case.loop
    leaving = leaving_steps(loop, case.global_shape, case.global_start, case.global_extent)
    if not leaving or case.oob is not None:
        return ""
    step, start = leaving[0]
    return (f"{loop.unsafe_label} with {loop.ctas} CTAs and {loop.tiles} tiles: CTA "
            f"{step.cta} copies {_where(step)} at {start} (extent {case.global_extent}), "
            f"outside the view {case.global_shape}; planned without oob= ({len(leaving)} "
            f"such copies)")


def _where(step: Step) -> str:
    names = ", ".join(f"{name}={value}" for name, value in sorted(step.names.items()))
    return f"tile {step.tile}" + (f" block {step.k}" if "k" in step.names else "") + \
        f" ({names})"


def run_steps(case: CopyCase, plan: TmaPlan, data_seed: int = 0) -> Outcome:
    """Every step the loop runs, on the model, in order: the plan at the step must satisfy
    the invariants and leave the shared arena (each step) and the global allocation (after
    the last) exactly as numpy's copy of the tile does."""
    loop, width = case.loop, case.element_bytes
    offsets = arena_offsets(case)  # the shared side is the same at every step
    global_in, images = loop_inputs(case, data_seed)
    model_global = global_storage(case, global_in).view(np.uint8)
    want = global_in.copy()
    issues = 0
    for step in loop.executed():
        plain = step_case(case, step)
        concrete = concrete_plan(plan, step.names)
        problems = plan_invariants(plain, [(concrete, {})])
        if problems:
            name, detail = problems[0]
            return Outcome("mismatch", kind=f"invariant:{name}",
                           problem=f"CTA {step.cta}, {_where(step)}: {detail}")
        image = images[image_index(loop, step.tile, step.k)]
        arena = _arena(offsets, width, image)
        execute_plan(concrete, model_global, arena, width, {})
        want, want_image = expected_after(plain, want, image)
        wrong = np.flatnonzero(arena != _arena(offsets, width, want_image))
        issues += concrete.num_issues
        if wrong.size:
            return Outcome("mismatch", kind="bytes", issues=issues, problem=(
                f"CTA {step.cta}, {_where(step)}: shared: {wrong.size} bytes differ, first "
                f"at byte {wrong[0]}"))
    wrong = np.flatnonzero(model_global != global_storage(case, want).view(np.uint8))
    if wrong.size:
        return Outcome("mismatch", kind="bytes", issues=issues, problem=(
            f"global after every step: {wrong.size} bytes differ, first at byte {wrong[0]}"))
    return Outcome("accepted", issues=issues)
