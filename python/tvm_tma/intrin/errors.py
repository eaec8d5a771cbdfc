"""Errors raised when an intrinsic call is built with operands the instruction cannot take."""

from __future__ import annotations


class IntrinError(ValueError):
    """A malformed TMA intrinsic call; ``rule`` names the violated constraint."""

    def __init__(self, rule: str, detail: str) -> None:
        self.rule = rule
        super().__init__(f"[{rule}] {detail}")
