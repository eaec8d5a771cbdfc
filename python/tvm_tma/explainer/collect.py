"""Find the ``copy_async(..., dispatch="tma")`` calls of a PrimFunc, with what encloses them.

The dispatch sees each call with the ranges of its enclosing loops and launch indices
(``sctx.var_range_map``, ``sctx.launch_params``) and the facts the call carries from parse
time. ``explain`` has no lowering context, so it walks the body itself and collects the same
ranges: every enclosing ``For`` and every ``thread_extent`` attribute.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import tvm

COPY_ASYNC_OP = "tirx.tile.copy_async"
VARIANT = "tma"


@dataclass(frozen=True)
class CopySite:
    """One TMA copy call and the variable ranges in force where it stands."""

    op: object  # the TilePrimitiveCall
    var_ranges: dict


def _children(node) -> Iterator:
    if hasattr(node, "seq"):
        yield from node.seq
    for field in ("body", "then_case", "else_case"):
        child = getattr(node, field, None)
        if child is not None and isinstance(child, tvm.tirx.Stmt):
            yield child


def _scope_of(node) -> dict:
    """The variable ranges a statement adds for its body."""
    if isinstance(node, tvm.tirx.For):
        return {node.loop_var: tvm.ir.Range.from_min_extent(node.min, node.extent)}
    if isinstance(node, tvm.tirx.AttrStmt) and node.attr_key == "thread_extent":
        iter_var = node.node
        if hasattr(iter_var, "var"):
            return {iter_var.var: tvm.ir.Range.from_min_extent(0, node.value)}
    return {}


def is_tma_copy(node) -> bool:
    op = getattr(node, "op", None)
    return (type(node).__name__ == "TilePrimitiveCall"
            and getattr(op, "name", "") == COPY_ASYNC_OP
            and str(getattr(node, "dispatch", "")) == VARIANT)


def tma_copies(func) -> list[CopySite]:
    """Every TMA copy of ``func`` in program order."""
    sites: list[CopySite] = []

    def walk(node, ranges: dict) -> None:
        if is_tma_copy(node):
            sites.append(CopySite(node, dict(ranges)))
            return
        inner = {**ranges, **_scope_of(node)}
        for child in _children(node):
            walk(child, inner)

    walk(func.body, {})
    return sites
