"""The two gates of the "tma" variant: a valid global<->shared copy, issued by one thread."""

from __future__ import annotations

from tvm.tirx.operator.tile_primitive import predicate

from ..planner.errors import PlanError, refuse
from ..planner.proofs import Prover, as_int


def _element_count(region, side: str) -> int:
    count = 1
    for extent in (r.extent for r in region.region):
        value = as_int(Prover().simplify(extent))
        if value is None:
            raise refuse("extent", f"{side} region extent {extent} is not static")
        count *= value
    return count


def check_copy(op) -> None:
    """Both sides have layouts, one global and one shared, equal dtype, equal element counts.

    TIRx pairs the elements of the two regions in row-major order, so the shapes may differ
    (a shared ``[128, 128]`` tile filled from a global ``[1, 32, 4, 128]`` region); whether
    the two orders factor into common axes is the planner's question (``layout-mismatch``).
    Raises :class:`PlanError` naming the rule (``direction``, ``layout``, ``dtype``,
    ``extent``).
    """
    dst, src = op.args[:2]
    scopes = (src.source.scope(), dst.source.scope())
    global_shared = (scopes[0] == "global" and scopes[1].startswith("shared")) or (
        scopes[0].startswith("shared") and scopes[1] == "global"
    )
    if not global_shared:
        raise refuse("direction", f"not a global<->shared copy (src {scopes[0]}, "
                     f"dst {scopes[1]})")
    for side, region in (("dst", dst), ("src", src)):
        if region.source.layout is None:
            raise refuse("layout", f"{side} buffer {region.source.name} has no layout")
    if str(dst.source.dtype) != str(src.source.dtype):
        raise refuse("dtype", f"dst dtype {dst.source.dtype} != src dtype {src.source.dtype}")
    dst_count, src_count = _element_count(dst, "dst"), _element_count(src, "src")
    if dst_count != src_count:
        raise refuse("extent", f"dst region {[str(r.extent) for r in dst.region]} holds "
                     f"{dst_count} elements but src region {[str(r.extent) for r in src.region]}"
                     f" holds {src_count}")


def check_scope(scope_name: str) -> None:
    """TMA is issued by one elected thread; a warp or CTA scope would issue it N times."""
    if scope_name != "thread":
        raise refuse("scope", f"expected a single-thread scope, got {scope_name}")


def valid_copy(op, sctx) -> tuple[bool, str]:
    try:
        check_copy(op)
    except PlanError as error:
        return False, str(error)
    return True, ""


def single_thread(op, sctx) -> tuple[bool, str]:
    return bool(sctx.is_thread), f"[scope] expected a single-thread scope, got {sctx.exec_scope}"


PREDICATES = [
    predicate("validate_copy_op", valid_copy),
    predicate("single_thread", single_thread),
]
