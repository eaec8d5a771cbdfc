"""The kernel's scope identifiers (``cta = T.cta_id([132])``, ``tid = T.thread_id([128])``).

A copy whose coordinates depend on the CTA index (every persistent or tiled kernel) can
only be planned if the planner knows the index's range. TVM 0.27 hands a dispatch the
launch IterVars and the enclosing loop ranges, but not the script's scope-id variables:
those stay unbound ``Var``s until after dispatch, when LowerTIRx maps them to
``blockIdx``/``threadIdx``. Their extents are, however, in the ``ScopeIdDefStmt``s that
the IR builder holds while the kernel is parsed. So the range of each scope id is recorded
when a ``dispatch="tma"`` copy is parsed, and the dispatch looks it up by the Var itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import tvm

#: Var -> Range(0, extent) for every scope id seen while parsing a kernel with a TMA copy.
_RECORDED: dict = {}


def scope_id_defs_being_parsed() -> Iterator | None:
    """The ``ScopeIdDef``s of the PrimFunc being parsed, or None outside of parsing one."""
    from tvm.script.ir_builder import IRBuilder

    if not IRBuilder.is_in_scope():
        return None
    frames = list(IRBuilder.current().frames)
    if not frames or type(frames[0]).__name__ != "PrimFuncFrame":
        return None
    return (getattr(stmt, "def") for frame in frames for stmt in getattr(frame, "stmts", ())
            if type(stmt).__name__ == "ScopeIdDefStmt")


def record_scope_id_ranges() -> None:
    """Remember ``[0, extent)`` for each scope id of the kernel being parsed."""
    for scope_def in scope_id_defs_being_parsed() or ():
        extents = scope_def.extents
        if extents is None:  # deferred: its extent is only known after the verifier
            continue
        for var, extent in zip(scope_def.def_ids, extents):
            _RECORDED[var] = tvm.ir.Range.from_min_extent(0, extent)


def recorded_range(var) -> tvm.ir.Range | None:
    """The recorded range of a scope-id Var (None: not a recorded scope id)."""
    return _RECORDED.get(var)


def recorded_ranges_for(expressions) -> dict:
    """Recorded ranges of the scope ids that occur in ``expressions``."""
    ranges = {}
    for expression in expressions:
        for var in tvm.tirx.analysis.undefined_vars(expression):
            found = recorded_range(var)
            if found is not None:
                ranges[var] = found
    return ranges
