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
