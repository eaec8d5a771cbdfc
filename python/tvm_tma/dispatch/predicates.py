"""The two gates of the "tma" variant: a valid global<->shared copy, issued by one thread."""

from __future__ import annotations

from tvm.tirx.operator.tile_primitive import predicate

from ..planner.proofs import Prover


def _non_unit_extents(region) -> list:
    return [r.extent for r in region.region if not Prover().prove(r.extent == 1)]


def valid_copy(op, sctx) -> tuple[bool, str]:
    """Both sides have layouts, one global and one shared, equal dtype, equal extents."""
    dst, src = op.args[:2]
    scopes = (src.source.scope(), dst.source.scope())
    global_shared = (scopes[0] == "global" and scopes[1].startswith("shared")) or (
        scopes[0].startswith("shared") and scopes[1] == "global"
    )
    if not global_shared:
        return False, f"not a global<->shared copy (src {scopes[0]}, dst {scopes[1]})"
    for side, region in (("dst", dst), ("src", src)):
        if region.source.layout is None:
            return False, f"{side} buffer {region.source.name} has no layout"
    if str(dst.source.dtype) != str(src.source.dtype):
        return False, f"[dtype] dst dtype {dst.source.dtype} != src dtype {src.source.dtype}"
    dst_extents, src_extents = _non_unit_extents(dst), _non_unit_extents(src)
    prover = Prover()
    same = len(dst_extents) == len(src_extents) and all(
        prover.prove(a == b) for a, b in zip(dst_extents, src_extents)
    )
    if not same:
        return False, (
            f"[extent] dst extents {[str(e) for e in dst_extents]} != src extents "
            f"{[str(e) for e in src_extents]}"
        )
    return True, ""


def single_thread(op, sctx) -> tuple[bool, str]:
    """TMA is issued by one elected thread; a warp or CTA scope would issue it N times."""
    return bool(sctx.is_thread), f"[scope] expected a single-thread scope, got {sctx.exec_scope}"


PREDICATES = [
    predicate("validate_copy_op", valid_copy),
    predicate("single_thread", single_thread),
]
