"""The planner's entry point: two buffer regions in, one :class:`TmaPlan` out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .descriptor import Context, build_plan
from .errors import refuse
from .plan_types import TmaPlan
from .proofs import Prover
from .refine import refine
from .views import read_global, read_shared


def copy_direction(dst, src) -> str:
    """``"g2s"`` or ``"s2g"`` from the buffers' storage scopes."""
    src_scope, dst_scope = src.source.scope(), dst.source.scope()
    if src_scope == "global" and dst_scope.startswith("shared"):
        return "g2s"
    if src_scope.startswith("shared") and dst_scope == "global":
        return "s2g"
    raise refuse(
        "direction",
        f"TMA copies global<->shared, got src scope {src_scope!r} and dst scope {dst_scope!r}",
    )


def plan(dst, src, *, var_ranges: Mapping | None = None, facts: Iterable = (),
         prover: Prover | None = None) -> TmaPlan:
    """Plan ``copy(dst, src)`` between a global and a shared BufferRegion.

    ``var_ranges`` maps the kernel's variables (block ids, loop vars) to their ``Range`` and
    ``facts`` are boolean facts known at the copy (see :class:`Prover`), so alignments and
    bounds that depend on them can be proven; or pass a ready ``prover`` (it then records
    what the plan rests on). Raises :class:`PlanError`.
    """
    direction = copy_direction(dst, src)
    shared_region, global_region = (dst, src) if direction == "g2s" else (src, dst)
    if str(shared_region.source.dtype) != str(global_region.source.dtype):
        raise refuse(
            "dtype",
            f"shared dtype {shared_region.source.dtype} != global dtype "
            f"{global_region.source.dtype}",
        )
    if prover is None:
        prover = Prover(var_ranges, facts)
    shared = read_shared(shared_region, prover)
    global_view = read_global(global_region, prover)
    axes = refine(shared, global_view)
    return build_plan(axes, Context(shared, global_view, direction, prover))
