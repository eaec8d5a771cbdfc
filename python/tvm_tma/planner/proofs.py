"""Symbolic facts the planner must *prove* before it emits a copy.

TMA faults or silently miscopies when an alignment or bound is wrong, so every such
condition goes through :class:`Prover`: constant conditions are decided exactly, symbolic
ones with TVM's analyzer under the kernel's variable ranges. "Cannot prove" is a refusal,
never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Union

import tvm
from tvm.sym import Analyzer

Expr = Union[int, "tvm.tirx.PrimExpr"]


def as_int(value: Expr) -> int | None:
    """The value as a Python int when it is a compile-time constant, else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, tvm.tirx.IntImm):
        return int(value.value)
    return None


class Prover:
    """An analyzer bound to the ranges of the kernel's variables (block ids, loop vars)."""

    def __init__(self, var_ranges: Mapping | None = None) -> None:
        self.analyzer = Analyzer()
        for var, rng in (var_ranges or {}).items():
            if isinstance(rng, tvm.ir.Range):
                self.analyzer.bind(var, rng)

    def simplify(self, value: Expr) -> Expr:
        """Fold ``value``; constants come back as plain ints."""
        if as_int(value) is not None:
            return as_int(value)
        folded = self.analyzer.simplify(value)
        constant = as_int(folded)
        return folded if constant is None else constant

    def prove(self, condition) -> bool:
        """True only when ``condition`` holds for every value of the bound variables."""
        if isinstance(condition, bool):
            return condition
        folded = self.analyzer.simplify(condition)
        if as_int(folded) is not None:
            return bool(as_int(folded))
        return bool(self.analyzer.can_prove(folded))

    def divisible(self, value: Expr, divisor: int) -> bool:
        """Prove ``value % divisor == 0``."""
        if divisor == 1:
            return True
        constant = as_int(self.simplify(value))
        if constant is not None:
            return constant % divisor == 0
        return self.prove(tvm.tirx.floormod(value, divisor) == 0)

    def refutable(self, condition) -> bool:
        """True when ``condition`` is provably false (used to split "unknown" from "wrong")."""
        return self.prove(tvm.tirx.Not(condition)) if not isinstance(condition, bool) else (
            not condition
        )
