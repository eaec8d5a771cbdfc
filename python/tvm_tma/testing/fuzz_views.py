"""The fuzz generator's global views: strides, views declared at an offset, strided pieces.

It exists apart from :mod:`.fuzz_cases` (which draws the region, the shared side and the
case as a whole) because a view's layout is a draw of its own: given the view's shape and
the region in it, choose how the elements lie in the allocation. It also holds the weighted
draw both modules use.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import TypeVar

from .copy_cases import row_major_strides

_Key = TypeVar("_Key")


def weighted(rng: random.Random, table: Mapping[_Key, int]) -> _Key:
    """One key of ``table``, drawn with the weights its values give."""
    keys = list(table)
    return rng.choices(keys, weights=[table[k] for k in keys])[0]


def global_strides(rng: random.Random, shape: list[int], width: int,
                    align_rows: bool = False) -> list[int] | None:
    """None (dense row-major) or a padded / permuted view's strides (``align_rows``: padded,
    rows first rounded up to 16 bytes)."""
    roll = rng.random()
    if roll < 0.62 and not align_rows:
        return None
    rank = len(shape)
    if roll < 0.65 and rank > 1 and not align_rows:  # a permuted (transposed) dense view
        return _laid_out(rng, shape, rng.sample(range(rank), rank), width, {"none": 1})
    unit16 = max(1, 16 // width)
    strides = [0] * rank
    strides[-1] = 2 if rng.random() < 0.04 else 1  # every other element: not contiguous
    for d in reversed(range(rank - 1)):
        kind = weighted(rng, {"none": 45, "aligned": 45, "odd": 10})
        pad = (unit16 * rng.randint(1, 8) if kind == "aligned" else
               rng.randint(1, 9) if kind == "odd" else 0)
        row = strides[d + 1] * shape[d + 1]
        strides[d] = (-(-row // unit16) * unit16 if align_rows else row) + pad
    return strides


def view_offset(rng: random.Random, shape: list[int], start: list[int],
                 strides: list[int] | None, width: int) -> tuple[list[int] | None, int]:
    """(strides, offset) of a view declared in the kernel at an offset: a sub-box of a padded
    parent (whole rows and columns; its columns may start off 16 bytes, the region then
    shifts back onto them), whole outer rows of the view, or any (mis)aligned offset."""
    unit16, rank = max(1, 16 // width), len(shape)
    kind = weighted(rng, {"sub": 40, "rows": 20, "aligned": 25, "misaligned": 15})
    if kind == "sub":  # A.sub[k0:, k1:, ...] of a parent with room around the view
        ks = [0 if shape[d] == 1 or rng.random() < 0.35 else rng.randint(1, 24)
              for d in range(rank)]
        ks[-1] = unit16 * rng.randint(0, 8) if shape[-1] > 1 else 0
        shift = rng.randint(1, unit16 - 1) * (rng.random() < 0.5)  # columns off 16 bytes
        if shift and shape[-1] > 1 and start[-1] >= shift and start[-1] % unit16 == 0:
            ks[-1], start[-1] = ks[-1] + shift, start[-1] - shift  # misaligned, folds
        strides = [1] * rank
        for d in reversed(range(rank - 1)):
            row = strides[d + 1] * (shape[d + 1] + ks[d + 1] + rng.choice((0, 0, 8, 13)))
            strides[d] = -(-row // unit16) * unit16 if rng.random() < 0.85 else row
        offset = sum(k * s for k, s in zip(ks, strides))
        return strides, offset or strides[0] * rng.randint(1, 4)
    if kind == "rows":  # a flat sub-range A[k * row:] viewed with the same strides
        used = zip(strides or row_major_strides(shape), shape)
        return strides, max((s for s, n in used if n > 1), default=1) * rng.randint(1, 16)
    offset = rng.randint(1, 127)  # in 16-byte units when aligned
    return strides, unit16 * offset if kind == "aligned" else offset + (offset % unit16 == 0)


def pieces(rng: random.Random, shape: list[int], start: list[int], extents: list[int],
            stages: int, width: int, edges: dict[int, str]
            ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``global_tiles``: dims as several padded, sometimes interleaved strided pieces (row
    blocks, column planes); ``shape`` may grow to a multiple of a piece. None: no split."""
    pieces: list[int] = []
    for d, n in enumerate(shape):
        split = [n]
        if n > 2 and d not in edges and rng.random() < 0.6:
            unit = max(1, 16 // width) if d == len(shape) - 1 else 1  # 16-byte rows
            split = _split_dim(rng, n, start[d], extents[d], bool(stages) and d == 0, unit)
            shape[d] = math.prod(split)
        pieces.extend(split)
    if len(pieces) == len(shape):
        return None
    order = list(range(len(pieces)))  # memory order, outermost first
    roll = rng.random()
    if roll < 0.3:  # interleaved: one piece outermost in memory (planes of columns)
        order.insert(0, order.pop(rng.randrange(len(order) - 1)))
    elif roll < 0.4:
        order = [*rng.sample(order[:-1], len(order) - 1), order[-1]]
    strides = _laid_out(rng, pieces, order, width, {"none": 45, "aligned": 45, "odd": 10})
    return tuple(pieces), tuple(strides)


def _laid_out(rng: random.Random, extents: list[int], order: list[int], width: int,
              pads: Mapping[str, int]) -> list[int]:
    """Strides of ``extents`` in memory ``order`` (outermost first), steps padded by ``pads``."""
    unit16, strides, step = max(1, 16 // width), [0] * len(extents), 1
    for i in reversed(order):
        strides[i] = step
        kind = weighted(rng, pads)
        step *= extents[i]
        if kind == "aligned":
            step = -(-step // unit16) * unit16 + unit16 * rng.randint(0, 4)
        elif kind == "odd":
            step += rng.randint(1, 9)
    return strides


def _split_dim(rng: random.Random, n: int, s: int, e: int, staged: bool, unit: int = 1
               ) -> list[int]:
    """Pieces (outer first) of a dim of ``n``, mostly ones that its region ``[s, s + e)`` (each
    stage's when ``staged``) covers whole or stays inside one row of."""
    divisors = [r for r in range(2, min(n, 257)) if n % r == 0]
    good = [r for r in divisors if ((s % r == 0 and e % r == 0) or (
        not staged and s // r == (s + e - 1) // r)) and (r % unit == 0 or rng.random() < 0.2)]
    if good and rng.random() < 0.9:
        r = rng.choice(good)
    elif divisors and rng.random() < 0.5:
        r = rng.choice(divisors)  # may cut the region: refused with rule layout
    else:
        r = min(64, math.gcd(s, e) & -math.gcd(s, e))  # a power of two; n grows to fit
        if r < 2:
            return [n]
        n = -(-n // r) * r
    inner = [r]
    if r > 2 and rng.random() < 0.25:
        whole = s % r == 0 and e % r == 0
        inner = _split_dim(rng, r, 0 if whole else s % r, r if whole else e, False)
    return [n // r, *inner]
