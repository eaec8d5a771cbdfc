"""``explain(prim_func)``: what the "tma" dispatch will do with each copy, before compiling.

Each copy goes through the same gates and the same planner as the lowering
(:func:`tvm_tma.dispatch.variant.plan_copy`), with the variable ranges of its enclosing loops
and the facts it carries from parse time, so a copy that explains as planned lowers to
exactly that plan, and a refused one fails the build with the same rule.
"""

from __future__ import annotations

import linecache

from ..dispatch.config import CopyOptions
from ..dispatch.loop_facts import complete_facts
from ..dispatch.predicates import check_copy, check_scope
from ..dispatch.variant import copy_prover, plan_copy
from ..intrin.target import writes_cta_group
from ..intrin.tensor_copy import LOAD, PREFETCH, REDUCE, STORE
from ..planner.errors import PlanError
from .collect import CopySite, tma_copies
from .hints import RULE_HINTS
from .model import CopyExplanation, KernelExplanation


def _source_line(op) -> tuple[int | None, str]:
    span = getattr(op, "span", None)
    if span is None or getattr(span, "line", 0) <= 0:
        return None, str(op.script()).strip() if hasattr(op, "script") else str(op)
    name = str(getattr(span.source_name, "name", ""))
    last = max(span.line, getattr(span, "end_line", span.line))
    text = " ".join(linecache.getline(name, n).strip() for n in range(span.line, last + 1))
    return span.line, text.strip()


def instruction_for(direction: str, rank: int, arch: str, options: CopyOptions,
                    mode: str = "tile") -> str:
    """The PTX mnemonic (with its modifiers) each issue of the copy becomes on ``arch``
    (``mode`` "im2col" for a load from a convolution's GEMM view)."""
    hint = options.cache_hint is not None
    if options.prefetch:
        rendered = PREFETCH.render({"rank": rank, "mode": "tile", "cache_hint": hint})
    elif direction == "g2s":
        rendered = LOAD.render({
            "rank": rank, "mode": mode, "dst": "shared::cluster",
            "multicast": options.multicast is not None, "cache_hint": hint,
            "cta_group": 1 if writes_cta_group(arch) else 0})
    elif options.reduce is not None:
        rendered = REDUCE.render({"op": options.reduce, "rank": rank, "mode": "tile",
                                  "cache_hint": hint})
    else:
        rendered = STORE.render({"rank": rank, "mode": "tile", "cache_hint": hint})
    return rendered.instructions[0].template.split(" ")[0]


def _direction_of(op) -> str | None:
    dst, src = op.args[:2]
    if src.source.scope() == "global":
        return "g2s"
    if dst.source.scope() == "global":
        return "s2g"
    return None


def explain_copy(site: CopySite, arch: str = "sm_90a") -> CopyExplanation:
    """Plan one copy as the dispatch would; a refusal becomes the rule, value and hint."""
    op = site.op
    line, source = _source_line(op)
    prover = None
    try:
        check_copy(op)
        check_scope(str(getattr(op.scope, "name", "thread")))
        prover = copy_prover(op, site.var_ranges)
        planned = plan_copy(op, site.var_ranges, prover)
    except PlanError as error:
        unproven = prover.unproven[-1:] if prover is not None else []
        return CopyExplanation(line, source, _direction_of(op), rule=error.rule,
                               detail=error.detail, hint=RULE_HINTS.get(error.rule),
                               unproven=tuple(unproven))
    plan = planned.plan
    instruction = instruction_for(plan.direction, plan.rank, arch, planned.options,
                                  "im2col" if plan.is_im2col else "tile")
    return CopyExplanation(line, source, plan.direction, plan=plan,
                           established=tuple(planned.prover.established),
                           instruction=instruction)


def explain(func, arch: str = "sm_90a") -> KernelExplanation:
    """Every ``copy_async(..., dispatch="tma")`` of ``func`` (a PrimFunc), explained."""
    name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs \
        else "main"
    copies = tuple(explain_copy(site, arch) for site in tma_copies(complete_facts(func)))
    return KernelExplanation(name, arch, copies)
