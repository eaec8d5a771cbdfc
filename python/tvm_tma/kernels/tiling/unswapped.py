"""The refinements measured on ``A @ B^T``'s tiles, in the order they apply after the
model's choice: what a problem takes unswapped, which the swap rule (:mod:`.swap`) weighs
a swap against, and which :mod:`.rules` applies after it where it does not swap."""

from __future__ import annotations

from collections.abc import Callable

from .clusters import in_two_by_two, sharing_a_in_fours
from .half_rows import on_half_rows, on_wide_half_rows
from .model import Tiling, trimmed
from .one_wave import in_one_exact_wave

#: The rules after the swap, in order: 64-row tiles, the trim, 64 x 256 tiles for a few row
#: blocks, 2x2 clusters, one exact wave, A shared in clusters of 4; each measured on the
#: problems its docstring names, each keeping what it does not apply to.
UNSWAPPED_RULES: tuple[Callable[[Tiling], Tiling], ...] = (
    on_half_rows, trimmed, on_wide_half_rows, in_two_by_two, in_one_exact_wave,
    sharing_a_in_fours)


def unswapped_tiling(cfg: Tiling) -> Tiling:
    """``cfg`` through every rule of :data:`UNSWAPPED_RULES`: the tiling the problem takes
    unswapped."""
    for rule in UNSWAPPED_RULES:
        cfg = rule(cfg)
    return cfg
