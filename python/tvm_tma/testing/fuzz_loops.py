"""The fuzz generator's persistent loops: a drawn copy becomes a loop case, and the tables.

It exists apart from :mod:`.fuzz_cases` so that the stream of cases stays what it was: whether
case ``index`` is a loop case, and every number its loop needs, come from a random stream of
their own (:func:`draw_loop`), and only a plain case (no variant) can become one, so every
other case draws exactly the numbers it always drew. A loop case is a drawn one-stage copy
(any dtype, shared layout, region, strided or offset view, ``oob=``) whose global region
becomes tile 0 of a grid of tiles of its own extents (:class:`~.loop_forms.LoopForm`): the
global view is reshaped to hold the grid -- exactly, with room to spare, or cut inside the
last tile (then mostly with ``oob=``: an edge tile) -- and three in ten loops are an unsafe
neighbour of their form, mostly with a tile count for which the slip does run a tile past
the grid. Which executed tiles leave the tensor is decided from the loop alone
(:func:`~.loop_forms.truth`), so the oracle's verdict never rests on the drawing.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter

from .copy_cases import CopyCase
from .fuzz_views import global_strides, view_offset, weighted
from .loop_forms import FORMS, MUTATIONS, LoopForm, truth

#: Share of the plain cases that become loop cases (about 10% of the whole stream).
LOOP_SHARE = 0.12
#: Share of the loop cases that are an unsafe neighbour of their form.
MUTATION_SHARE = 0.3
#: Share of the unsafe neighbours given a tile count at which the slip leaves the grid.
BITING_SHARE = 0.75
MAX_TILES = 12
_CTAS = {1: 2, 2: 4, 3: 4, 4: 3, 5: 2, 8: 1}
_COLS = {1: 4, 2: 3, 3: 2, 4: 2}
#: How the global view holds the tile grid: exactly, with room, or cut inside the last tile.
_FIT = {"tight": 55, "slack": 20, "partial": 25}
_FLOATS = ("float16", "bfloat16", "float32")


def draw_loop(seed: int, index: int) -> random.Random | None:
    """The loop stream of case ``index`` when the case is a loop case, else None."""
    rng = random.Random(f"tvm-tma-fuzz-loops:{seed}:{index}")
    return rng if rng.random() < LOOP_SHARE else None


def loop_case(base: CopyCase, rng: random.Random, max_elems: int) -> CopyCase | None:
    """``base`` (a drawn plain case) as a loop case, or None when it cannot carry one (stages,
    layout pieces, regions of unequal element counts, too big a grid)."""
    if base.stages or base.global_tiles is not None or base.cluster or base.reduce:
        return None
    if math.prod(base.global_extent) != math.prod(base.s_extent):
        return None
    rank, width, extent = len(base.global_shape), base.element_bytes, base.global_extent
    form = rng.choice(FORMS)
    mutation = rng.choice(MUTATIONS[form]) if rng.random() < MUTATION_SHARE else None
    ksteps = rng.randint(1, 3) if form == "ksteps" else 0
    row_dim, col_dim = _dims(rng, rank)
    cols = weighted(rng, _COLS) if row_dim is not None else 1
    most = min(MAX_TILES, max_elems // (2 * math.prod(extent) * max(ksteps, 1)))
    if most < 1:
        return None
    loop = LoopForm(form, weighted(rng, _CTAS), rng.randint(1, most), cols, ksteps, mutation,
                    row_dim, col_dim)
    if mutation is not None and rng.random() < BITING_SHARE:
        biting = [n for n in range(1, most + 1)
                  if _leaves_grid(dataclasses.replace(loop, tiles=n))]
        if biting:
            loop = dataclasses.replace(loop, tiles=rng.choice(biting))
    shape, start = list(base.global_shape), list(base.global_start)
    dims = [(d, count) for d, count in zip((row_dim, col_dim), loop.grid()) if d is not None]
    for dim, count in dims:
        shape[dim] = max(1, start[dim] + count * extent[dim])
    oob, fit = base.oob, weighted(rng, _FIT)
    cuttable = [d for d, _ in dims if extent[d] > 1 and shape[d] > 1]
    if fit == "slack":
        dim = rng.choice([d for d, _ in dims])
        shape[dim] += rng.choice((rng.randint(1, extent[dim]), extent[dim]))
    elif fit == "partial" and cuttable:
        dim = rng.choice(cuttable)
        whole, unit16 = shape[dim], max(1, 16 // width)
        shape[dim] = max(1, whole - rng.randint(1, extent[dim] - 1))
        if dim == rank - 1 and rng.random() < 0.5:  # a store may end there only on 16 bytes
            shape[dim] = min(-(-shape[dim] // unit16) * unit16, whole - 1)
        if oob is None and rng.random() < 0.85:
            oob = "skip" if base.direction == "s2g" else (
                "nan" if base.dtype in _FLOATS and rng.random() < 0.4 else "zero")
    odd_rows = (shape[-1] * width) % 16 != 0
    strides = global_strides(rng, shape, width, odd_rows and rng.random() < 0.8)
    offset = 0
    if base.global_offset:
        strides, offset = view_offset(rng, shape, start, strides, width)
    case = dataclasses.replace(
        base, global_shape=tuple(shape), global_start=tuple(start), oob=oob, loop=loop,
        global_strides=None if strides is None else tuple(strides), global_offset=offset)
    return case if case.global_storage_elems <= max_elems else None


def _dims(rng: random.Random, rank: int) -> tuple[int | None, int]:
    """(row dim, column dim) of the tile grid: mostly the innermost dim for the columns and
    an outer one for the rows; a rank-1 view lays its tiles along its one dim."""
    if rank == 1:
        return None, 0
    col = rank - 1 if rng.random() < 0.75 else rng.randrange(rank)
    others = [d for d in range(rank) if d != col]
    outer = [d for d in others if d < col]
    row = rng.choice(outer if outer and rng.random() < 0.8 else others)
    return row, col


def _leaves_grid(loop: LoopForm) -> bool:
    """Some tile the loop runs lies outside the grid that tiles ``0 .. tiles - 1`` span."""
    rows, blocks = loop.grid()
    for step in loop.executed():
        row, col = loop.blocks(step.tile, step.k)
        if col >= blocks or (rows is not None and row >= rows):
            return True
    return False


# --------------------------------------------------------------------------------------------
# Coverage and the loop table of a run
# --------------------------------------------------------------------------------------------


def loop_truth(case: CopyCase) -> str:
    """``safe``, ``edge`` or ``unsafe`` (:func:`~.loop_forms.truth`) of a loop case."""
    return truth(case.loop, case.global_shape, case.global_start, case.global_extent, case.oob)


def loop_keys(case: CopyCase) -> list[str]:
    """Coverage keys of a loop case: its form, its mutation and the loop's truth."""
    if case.loop is None:
        return []
    form, fact = case.loop.form, loop_truth(case)
    return ["loop", f"loop={form}", f"loop={form}:{case.loop.mutation or 'natural'}",
            f"loop-{fact}", f"loop={form}:{fact}"]


def loop_verdict(case: CopyCase, status: str, rule: str | None) -> tuple[str, str, str]:
    """(form, truth, verdict) of a checked loop case: what a run tallies per form."""
    verdict = f"refused:{rule}" if status == "refused" else status
    return case.loop.form, loop_truth(case), verdict


def loop_table(verdicts: Counter) -> list[str]:
    """The loop cases of a run: per form and truth, accepted / refused (and mismatches), so a
    safe loop the prover refuses shows, and an unsafe one accepted is a mismatch."""
    if not verdicts:
        return []
    totals = Counter()
    for (form, fact, verdict), count in verdicts.items():
        totals[(form, fact, verdict.split(":")[0])] += count
        totals[("all", fact, verdict.split(":")[0])] += count

    def cell(form: str, fact: str) -> str:
        got = [totals[(form, fact, s)] for s in ("accepted", "refused", "mismatch")]
        return f"{got[0]:5d}/{got[1]:<5d}" + (f" {got[2]} MISMATCH" if got[2] else "")

    def bounds(form: str, fact: str) -> int:  # refused with region-bounds
        return sum(n for (f, truth_, verdict), n in verdicts.items() if truth_ == fact
                   and form in (f, "all") and verdict == "refused:region-bounds")

    unsafe = sum(totals[("all", "unsafe", s)] for s in ("accepted", "refused", "mismatch"))
    lines = [f"loops: {sum(verdicts.values())} cases; safe refused per form [by region-bounds]: "
             + ", ".join(f"{form} {totals[(form, 'safe', 'refused')]} [{bounds(form, 'safe')}]"
                         for form in FORMS)
             + f"; unsafe refused by region-bounds: {bounds('all', 'unsafe')} of {unsafe}",
             "  form           safe acc/ref  edge acc/ref  unsafe acc/ref"]
    for form in (*FORMS, "all"):
        lines.append(f"  {form:14s} " + " ".join(
            cell(form, fact) for fact in ("safe", "edge", "unsafe")))
    return lines
