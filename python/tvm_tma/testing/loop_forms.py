"""The persistent tile loops kernel authors write, as a field of a copy case.

A :class:`LoopForm` turns a one-tile copy case into a persistent kernel: ``ctas`` CTAs share
``tiles`` tiles, and each runs one of the loop forms below, performing the case's copy with
the global region moved to every tile it takes. The case's ``global_start`` is tile 0's
region; tile ``t`` lies ``t // cols`` tiles down ``row_dim`` and ``t % cols`` tiles along
``col_dim`` (tiles of the region's own extents), and in the ``ksteps`` form each tile is
``ksteps`` column blocks, block ``k`` copied by the inner loop's step ``k``. With no
``row_dim`` (a rank-1 tensor) the tiles lie one after another along ``col_dim``.

The forms (``cta = T.cta_id([ctas])``, ``n`` tiles, ``rounds = ceil(n / ctas)``):

* ``guard-meta``:   ``for i in T.serial(rounds): t = T.meta_var(cta + i * ctas); if t < n:``
* ``guard-scalar``: the same with ``t = cta + i * ctas`` a local scalar
* ``exact-rounds``: ``for i in T.serial((n - cta + ctas - 1) // ctas): t = T.meta_var(...)``
* ``strided``:      ``for t in T.serial(cta, n, step=ctas):``
* ``while``:        ``cur[0] = cta; while cur[0] < n: copy(tile cur[0]); cur[0] += ctas``
* ``ksteps``:       ``guard-scalar``, then ``for k in T.serial(ksteps):`` around the copy

and their unsafe neighbours (``mutation``), each of which runs a tile past ``n``:
``le-guard`` (``if t <= n:``), ``no-guard`` (the guard left out), ``extra-round`` (``(n -
cta + ctas) // ctas`` rounds), ``stop-plus-one`` (a stop of ``n + 1``) and ``advance-first``
(the counter advanced before the copy instead of after it).

What a form runs is enumerated here in plain Python (:meth:`LoopForm.executed`), apart from
the kernel (:mod:`.loop_kernel`) and from any prover, so that the fuzzer's verdict on a plan
for the loop -- is every executed region inside the tensor? -- is the loop's own truth. This
module imports nothing of the package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

#: Every form, in the order of the issue that lists them (1, 1b, 2, 3, 4, 5).
FORMS = ("guard-meta", "guard-scalar", "exact-rounds", "strided", "while", "ksteps")
#: The unsafe neighbours of each form: a one-character slip that runs a tile past the end.
MUTATIONS: dict[str, tuple[str, ...]] = {
    "guard-meta": ("le-guard", "no-guard"),
    "guard-scalar": ("le-guard", "no-guard"),
    "exact-rounds": ("extra-round",),
    "strided": ("stop-plus-one",),
    "while": ("advance-first",),
    "ksteps": ("le-guard",),
}
#: The forms whose tile index is a loop variable ``i`` (``t = cta + i * ctas``).
ROUND_FORMS = ("guard-meta", "guard-scalar", "exact-rounds", "ksteps")
#: The forms guarded by ``if t < n:``.
GUARDED_FORMS = ("guard-meta", "guard-scalar", "ksteps")


class Step(NamedTuple):
    """One copy a loop performs: CTA ``cta`` copies block ``k`` of tile ``tile``. ``names``
    binds every name a plan of the copy may mention to its value there: the scope id
    ``cta``, the loop variables (``i``, ``t``, ``k``) and the local scalars (``t``, ``cur``),
    ``tid`` (the issuing thread, 0)."""

    cta: int
    tile: int
    k: int
    names: dict


@dataclass(frozen=True)
class LoopForm:
    """A persistent loop around a case's copy (see the module docstring)."""

    form: str
    ctas: int
    tiles: int
    cols: int = 1
    ksteps: int = 0
    mutation: str | None = None
    row_dim: int | None = 0
    col_dim: int = 1

    def __post_init__(self) -> None:
        if self.form not in FORMS:
            raise ValueError(f"unknown loop form {self.form!r} (one of {', '.join(FORMS)})")
        if self.mutation is not None and self.mutation not in MUTATIONS[self.form]:
            raise ValueError(f"{self.form} has no mutation {self.mutation!r}")
        if min(self.ctas, self.tiles, self.cols) < 1:
            raise ValueError(f"{self}: ctas, tiles and cols are at least 1")
        if (self.ksteps >= 1) != (self.form == "ksteps"):
            raise ValueError("ksteps >= 1 exactly for the ksteps form")
        if self.row_dim is not None and self.row_dim == self.col_dim:
            raise ValueError("row_dim and col_dim are two dims")

    @property
    def k_blocks(self) -> int:
        """Column blocks per tile (the ``ksteps`` form's inner loop; 1 otherwise)."""
        return max(self.ksteps, 1)

    @property
    def rounds(self) -> int:
        """``ceil(tiles / ctas)``: the rounds of the guarded forms."""
        return -(-self.tiles // self.ctas)

    @property
    def unsafe_label(self) -> str:
        """``form`` or ``form:mutation``, for tables."""
        return self.form if self.mutation is None else f"{self.form}:{self.mutation}"

    def smaller(self) -> Iterator[LoopForm]:
        """Simpler loops of the same form (the shrinker's steps): fewer tiles or CTAs, one
        tile per row, one K step, the natural form instead of its neighbour."""
        for tiles in sorted({1, self.tiles // 2, self.tiles - 1}):
            if 1 <= tiles < self.tiles:
                yield dataclasses.replace(self, tiles=tiles)
        for ctas in sorted({1, self.ctas - 1}):
            if 1 <= ctas < self.ctas:
                yield dataclasses.replace(self, ctas=ctas)
        if self.cols > 1:
            yield dataclasses.replace(self, cols=1)
        if self.ksteps > 1:
            yield dataclasses.replace(self, ksteps=1)
        if self.mutation is not None:
            yield dataclasses.replace(self, mutation=None)

    def fits(self, rank: int) -> bool:
        """The loop's dims exist in a global view of ``rank`` dims."""
        dims = [self.col_dim] + ([] if self.row_dim is None else [self.row_dim])
        return all(0 <= d < rank for d in dims)

    # ----------------------------------------------------------------------------------------
    # What the loop runs
    # ----------------------------------------------------------------------------------------

    def tiles_of(self, cta: int) -> list[tuple[int, dict]]:
        """The tiles CTA ``cta`` copies, in order, each with the loop's names at the copy."""
        n, ctas, mutation = self.tiles, self.ctas, self.mutation
        found = []
        if self.form in GUARDED_FORMS:
            for i in range(self.rounds):
                t = cta + i * ctas
                runs = (t <= n if mutation == "le-guard" else True if mutation == "no-guard"
                        else t < n)
                if runs:
                    found.append((t, {"i": i, "t": t}))
        elif self.form == "exact-rounds":
            last = ctas if mutation == "extra-round" else ctas - 1
            for i in range(max(0, (n - cta + last) // ctas)):
                found.append((cta + i * ctas, {"i": i, "t": cta + i * ctas}))
        elif self.form == "strided":
            stop = n + 1 if mutation == "stop-plus-one" else n
            found = [(t, {"t": t}) for t in range(cta, stop, ctas)]
        else:  # while
            cur = cta
            while cur < n:
                if mutation == "advance-first":
                    cur += ctas
                    found.append((cur, {"cur": cur}))
                else:
                    found.append((cur, {"cur": cur}))
                    cur += ctas
        return found

    def executed(self) -> list[Step]:
        """Every copy the loop performs, CTA by CTA, each in the CTA's order."""
        steps = []
        for cta in range(self.ctas):
            for tile, names in self.tiles_of(cta):
                for k in range(self.k_blocks):
                    bound = {**names, "cta": cta, "tid": 0}
                    if self.form == "ksteps":
                        bound["k"] = k
                    steps.append(Step(cta, tile, k, bound))
        return steps

    def slots(self) -> int:
        """Tile indices a buffer indexed by tile needs: the largest tile run, plus one."""
        return 1 + max((step.tile for step in self.executed()), default=0)

    # ----------------------------------------------------------------------------------------
    # Where a tile lies
    # ----------------------------------------------------------------------------------------

    def blocks(self, t, k=0) -> tuple:
        """(row block, column block) of block ``k`` of tile ``t`` (ints, or TIR expressions
        for a kernel: ``//`` and ``%`` are floor division on both). No ``row_dim``: (None,
        column block)."""
        multi = self.form == "ksteps"
        if self.row_dim is None:
            return None, (t * self.k_blocks + k) if multi else t
        row = t if self.cols == 1 else t // self.cols
        col = 0 if self.cols == 1 else t % self.cols
        if multi:
            col = k if self.cols == 1 else col * self.k_blocks + k
        return row, col

    def tile_start(self, start, extent, t, k=0) -> tuple:
        """The global region's start for block ``k`` of tile ``t``: ``start`` (tile 0's) moved
        by whole tiles (ints, or TIR expressions as a kernel writes them)."""
        moved = list(start)
        row, col = self.blocks(t, k)
        for dim, block in ((self.row_dim, row), (self.col_dim, col)):
            if dim is None or (isinstance(block, int) and block == 0):
                continue
            step = block * extent[dim]
            moved[dim] = step if _is_zero(start[dim]) else start[dim] + step
        return tuple(moved)

    def grid(self) -> tuple[int | None, int]:
        """(row blocks, column blocks) that tiles ``0 .. tiles - 1`` span: the tensor a
        natural kernel's tiles fill exactly."""
        if self.row_dim is None:
            return None, self.tiles * self.k_blocks
        rows = (self.tiles - 1) // self.cols + 1
        return rows, min(self.tiles, self.cols) * self.k_blocks


def _is_zero(value) -> bool:
    return isinstance(value, int) and value == 0


def region_leaves(shape, start, extent) -> bool:
    """The region ``[start, start + extent)`` is not inside ``[0, shape)`` along some dim."""
    return any(s < 0 or s + e > n for n, s, e in zip(shape, start, extent))


def leaving_steps(loop: LoopForm, shape, start, extent) -> list[tuple[Step, tuple]]:
    """(step, region start) of every copy the loop performs whose region leaves the tensor."""
    found = []
    for step in loop.executed():
        moved = loop.tile_start(start, extent, step.tile, step.k)
        if region_leaves(shape, moved, extent):
            found.append((step, moved))
    return found


def truth(loop: LoopForm, shape, start, extent, oob: str | None) -> str:
    """``"safe"`` (every executed region inside the tensor), ``"edge"`` (some cross it and
    the copy has ``oob=``: legal) or ``"unsafe"`` (some cross it, no ``oob=``: a sound
    planner refuses the copy)."""
    if not leaving_steps(loop, shape, start, extent):
        return "safe"
    return "edge" if oob is not None else "unsafe"
