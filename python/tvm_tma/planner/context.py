"""What every planner stage shares: the hardware's size limits and the copy being planned.

Kept apart from the stages so that the L2/L3 builder (:mod:`.descriptor`) and the rule
checks (:mod:`.rules`) both depend on it and never on each other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass

from .global_view import GlobalView
from .proofs import Prover
from .views import SharedView

#: A tiled tensor map has at most five dimensions.
MAX_RANK = 5
#: Every box dimension holds at most 256 elements.
MAX_BOX = 256


@dataclass(frozen=True)
class Context:
    """One copy under planning: both sides read by L1, its direction and its prover."""

    shared: SharedView
    global_view: GlobalView
    direction: str
    prover: Prover
    #: Bytes the shared allocation holding the tile is known to be aligned to.
    shared_alignment: int = 16
    #: The tensor reduction the copy performs (None: a plain copy).
    reduce: str | None = None
    #: The map's L2 promotion enum (0 none, 1 64 B, 2 128 B, 3 256 B).
    l2_promotion: int = 2
    #: The tile is the shared side of an im2col load (:mod:`.im2col`): its channels are one
    #: box of the tensor's own element type.
    im2col: bool = False

    @property
    def keeps_dtype(self) -> bool:
        """The map must keep the tensor's element type (no promotion): NaN fill needs a float
        type, and a reduction computes in the map's type."""
        return self.global_view.fills_nan or self.reduce is not None or self.im2col
