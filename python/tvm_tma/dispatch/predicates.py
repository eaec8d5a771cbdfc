"""The two gates of the "tma" variant: a valid global<->shared copy, issued by one thread."""

from __future__ import annotations

from tvm.tirx.operator.tile_primitive import predicate

from ..planner.errors import PlanError, refuse
from ..planner.proofs import Prover


def _non_unit_extents(region) -> list:
    return [r.extent for r in region.region if not Prover().prove(r.extent == 1)]


def check_copy(op) -> None:
    """Both sides have layouts, one global and one shared, equal dtype, equal extents.

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
    dst_extents, src_extents = _non_unit_extents(dst), _non_unit_extents(src)
    prover = Prover()
    same = len(dst_extents) == len(src_extents) and all(
        prover.prove(a == b) for a, b in zip(dst_extents, src_extents)
    )
    if not same:
        raise refuse("extent", f"dst extents {[str(e) for e in dst_extents]} != src extents "
                     f"{[str(e) for e in src_extents]}")


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
