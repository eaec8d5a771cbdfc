"""The fuzzer's shrinker: a failing case -> the smallest case found that fails the same way.

It exists apart from the oracle and the drivers because minimizing is a search over case
*edits* (drop a stage, a stride, a dimension, layout pieces, the view's offset or ``oob=``,
pull the region back inside the view, undo a reshape, halve an extent, simplify the layout
or dtype, load in one CTA or a smaller cluster, store without reducing, make a device-side
view static, drop a persistent loop or make it smaller), driven only by a failure predicate;
it knows nothing about plans. :func:`minimize_failure` keeps the failure's ``kind`` fixed
while it shrinks; :mod:`.fuzz_save` writes the result as a regression test.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator

from .copy_cases import CopyCase, row_major_strides, shared_layout_of
from .fuzz_cases import MAX_RANK
from .fuzz_oracle import CASE_TIMEOUT, Outcome, check_case
from .fuzz_run import crossings, is_reshape
from .layout_eval import layout_offsets


def valid_case(case: CopyCase) -> bool:
    """The case describes a real copy: its shared layout exists and its region fits."""
    try:
        if not case.global_shape or len(case.global_shape) > MAX_RANK:
            return False
        if any(n < 1 for n in case.global_shape) or any(e < 1 for e in case.global_extent):
            return False
        if len({len(case.global_shape), len(case.global_start), len(case.global_extent)}) != 1:
            return False
        if case.global_strides is not None and len(case.global_strides) != len(
                case.global_shape):
            return False
        if case.global_offset < 0 or (case.global_tiles is not None and tile_groups(
                case.global_shape, case.global_tiles[0]) is None):
            return False
        if case.stages and (case.stages < 1 or len(case.shared_shape) < 2):
            return False
        if case.loop is not None and not case.loop.fits(len(case.global_shape)):
            return False
        for s, e, n in zip(case.s_start, case.s_extent, case.shared_shape):
            if s < 0 or e < 1 or s + e > n:
                return False
        if len(case.s_start) != len(case.shared_shape) or len(case.s_extent) != len(
                case.shared_shape):
            return False
        offsets = layout_offsets(shared_layout_of(case), case.shared_shape)
        return int(offsets.min()) >= 0
    except Exception:  # noqa: BLE001 -- a layout TVM cannot build is not a case
        return False


def shrink(case: CopyCase, fails: Callable[[CopyCase], bool], budget: int = 400) -> CopyCase:
    """Greedily simplify ``case`` while ``fails`` holds (at most ``budget`` predicate calls)."""
    current = case
    calls = 0
    progress = True
    while progress and calls < budget:
        progress = False
        for candidate in _simpler(current):
            if candidate is None or candidate == current or not valid_case(candidate):
                continue
            calls += 1
            if fails(candidate):
                current = candidate
                progress = True
                break
            if calls >= budget:
                break
    return current


def _replace(case: CopyCase, **changes: object) -> CopyCase | None:
    """``case`` changed, or None where the change leaves no case (a device-side view whose
    offset went to 0, say: :class:`CopyCase` refuses it)."""
    try:
        return dataclasses.replace(case, **changes)
    except ValueError:
        return None


def _simpler(case: CopyCase) -> Iterator[CopyCase | None]:
    """Candidate simplifications of ``case``, boldest first."""
    yield from _plainer(case)
    yield from _unstaged(case)
    if case.global_tiles is not None:
        yield _replace(case, global_tiles=None, global_strides=None)
        yield _replace(case, global_tiles=(case.global_tiles[0],
                                           row_major_strides(case.global_tiles[0])))
    if case.global_offset:
        yield _replace(case, global_offset=0)
        yield _replace(case, global_offset=case.global_offset // 2)
    if case.oob is not None:
        yield from _simpler_oob(case)
    if case.global_strides is not None:
        yield _replace(case, global_strides=None)
        yield from _denser_strides(case)
    if case.smem_elem_offset:
        yield _replace(case, smem_elem_offset=0)
        yield _replace(case, smem_elem_offset=case.smem_elem_offset // 2)
    yield from _simpler_layouts(case)
    yield from _dropped_global_dims(case)
    yield from _dropped_shared_dims(case)
    yield from _smaller_extents(case)
    yield from _tighter_global(case)
    yield from _tighter_shared(case)
    yield from _simpler_dtypes(case)
    yield from _unreshaped(case)
    if case.direction == "s2g":
        yield _replace(case, direction="g2s", oob="zero" if case.oob else None, reduce=None)


def _plainer(case: CopyCase) -> Iterator[CopyCase | None]:
    """The variant undone: a one-CTA load (or a cluster of two), a plain store, a static
    view; the loop dropped, or made smaller (fewer tiles or CTAs, one tile per row, one K
    step)."""
    if case.loop is not None:
        yield _replace(case, loop=None)
        yield from (_replace(case, loop=loop) for loop in case.loop.smaller())
    if case.cluster:
        yield _replace(case, cluster=0)
        if case.cluster > 2:
            yield _replace(case, cluster=2)
    if case.reduce is not None:
        yield _replace(case, reduce=None)
    if case.device_view:
        yield _replace(case, device_view=False)


def tile_groups(shape: tuple[int, ...], pieces: tuple[int, ...]) -> list[list[int]] | None:
    """The indices of each dim's pieces (outer first; at least one each), or None when the
    pieces do not multiply out to ``shape``."""
    groups, i = [], 0
    for n in shape:
        first, product = i, 1
        while i < len(pieces) and (i == first or product < n):
            product *= pieces[i]
            i += 1
        if product != n:
            return None
        groups.append(list(range(first, i)))
    return groups if i == len(pieces) else None


def _global(case: CopyCase, dropped: int | None = None, **changes: object
            ) -> CopyCase | None:
    """``case`` with a new global shape (and starts, extents...; dim ``dropped`` removed):
    a dim of a tiled layout shrinks through its outermost piece, a dropped dim takes its
    pieces along (None when the pieces cannot express the new shape)."""
    new = _replace(case, **changes)
    if new is None or case.global_tiles is None or "global_shape" not in changes:
        return new
    (pieces, strides), shape = case.global_tiles, new.global_shape
    groups = tile_groups(case.global_shape, pieces)
    if groups is None:
        return None
    if dropped is not None:
        keep = [i for d, g in enumerate(groups) if d != dropped for i in g]
        return _replace(new, global_tiles=(tuple(pieces[i] for i in keep),
                                           tuple(strides[i] for i in keep)))
    pieces = list(pieces)
    for group, old, size in zip(groups, case.global_shape, shape):
        inner = math.prod(pieces[i] for i in group[1:])
        if size != old and (size % inner or size > old):
            return None
        pieces[group[0]] = size // inner
    return _replace(new, global_tiles=(tuple(pieces), strides))


def _simpler_oob(case: CopyCase) -> Iterator[CopyCase]:
    """No ``oob`` once the region stays inside, zero fill for NaN, starts pulled back inside
    the view and ends that no longer cross it."""
    ends, befores = crossings(case)
    if not ends and not befores:
        yield _replace(case, oob=None)
    if case.oob == "nan":
        yield _replace(case, oob="zero")
    for d in sorted(befores):
        yield _replace(case, global_start=_put(case.global_start, d, 0))
    for d in sorted(ends):
        reach = case.global_extent[d] * (max(case.stages, 1) if d == 0 else 1)
        if case.global_shape[d] >= reach:
            start = case.global_shape[d] - reach
            yield _replace(case, global_start=_put(case.global_start, d, start))
        yield _global(case, global_shape=_put(case.global_shape, d,
                                              case.global_start[d] + reach))


def _put(values: tuple[int, ...], d: int, value: int) -> tuple[int, ...]:
    return (*values[:d], value, *values[d + 1:])


def _unreshaped(case: CopyCase) -> Iterator[CopyCase]:
    """The global region as a dense tensor of the shared region's shape (no reshape)."""
    if case.stages or not is_reshape(case):
        return
    extents = tuple(e for e in case.s_extent if e != 1) or (1,)
    if len(extents) <= MAX_RANK:
        yield _replace(case, global_shape=extents, global_start=(0,) * len(extents),
                       global_extent=extents, global_strides=None, global_tiles=None,
                       global_offset=0, oob=None)


def _unstaged(case: CopyCase) -> Iterator[CopyCase]:
    if not case.stages:
        return
    yield _replace(case, stages=0, shared_shape=case.shared_shape[1:],
                   shared_start=None if case.shared_start is None else case.shared_start[1:],
                   shared_extent=None if case.shared_extent is None else case.shared_extent[1:])
    if case.stages > 1:
        yield _replace(case, stages=case.stages - 1,
                       shared_shape=(case.stages - 1, *case.shared_shape[1:]))


def _denser_strides(case: CopyCase) -> Iterator[CopyCase]:
    strides = list(case.global_strides)
    for d in range(len(strides)):
        dense = 1 if d == len(strides) - 1 else strides[d + 1] * case.global_shape[d + 1]
        if strides[d] > dense and (d == len(strides) - 1 or strides[d + 1] <= strides[d]):
            yield _replace(case, global_strides=(*strides[:d], dense, *strides[d + 1:]))


def _simpler_layouts(case: CopyCase) -> Iterator[CopyCase]:
    kind, _, argument = case.shared_layout.partition(":")
    if kind != "row":
        yield _replace(case, shared_layout="row")
    if kind == "padded" and int(argument) > 1:
        yield _replace(case, shared_layout=f"padded:{int(argument) // 2}")
    if kind == "blocked":
        rows, gap = (int(v) for v in argument.split(":"))
        if gap:
            yield _replace(case, shared_layout=f"blocked:{rows}:0")
            yield _replace(case, shared_layout=f"blocked:{rows}:{gap // 2}")
    if kind == "swizzle" and int(argument) > 0:
        yield _replace(case, shared_layout=f"swizzle:{int(argument) - 1}")


def _drop(values: tuple[int, ...] | None, d: int) -> tuple[int, ...] | None:
    return None if values is None else (*values[:d], *values[d + 1:])


def _dropped_global_dims(case: CopyCase) -> Iterator[CopyCase]:
    for d, extent in enumerate(case.global_extent):
        if extent != 1 or len(case.global_shape) == 1 or (case.stages and d == 0):
            continue
        yield _global(case, dropped=d, global_shape=_drop(case.global_shape, d),
                      global_start=_drop(case.global_start, d),
                      global_extent=_drop(case.global_extent, d),
                      global_strides=_drop(case.global_strides, d))


def _dropped_shared_dims(case: CopyCase) -> Iterator[CopyCase]:
    first = 1 if case.stages else 0
    for d in range(first, len(case.shared_shape)):
        if case.shared_shape[d] != 1 or len(case.shared_shape) - first == 1:
            continue
        yield _replace(case, shared_shape=_drop(case.shared_shape, d),
                       shared_start=_drop(case.shared_start, d),
                       shared_extent=_drop(case.shared_extent, d))


def paired_dims(case: CopyCase) -> list[tuple[int, int]] | None:
    """(global dim, shared dim) pairs of the non-unit extents, when both sides list the same."""
    first = 1 if case.stages else 0
    g_dims = [d for d, e in enumerate(case.global_extent) if e != 1]
    s_dims = [d for d in range(first, len(case.shared_shape)) if case.s_extent[d] != 1]
    if [case.global_extent[d] for d in g_dims] != [case.s_extent[d] for d in s_dims]:
        return None
    return list(zip(g_dims, s_dims))


def _smaller_extents(case: CopyCase) -> Iterator[CopyCase]:
    pairs = paired_dims(case)
    if pairs is None:
        return
    for g, s in pairs:
        extent = case.global_extent[g]
        for smaller in sorted({1, extent // 2}, reverse=True):
            if smaller < 1 or smaller == extent:
                continue
            g_ext = (*case.global_extent[:g], smaller, *case.global_extent[g + 1:])
            s_ext = (*case.s_extent[:s], smaller, *case.s_extent[s + 1:])
            if case.shared_extent is None:
                shape = (*case.shared_shape[:s], smaller, *case.shared_shape[s + 1:])
                yield _replace(case, global_extent=g_ext, shared_shape=shape)
            yield _replace(case, global_extent=g_ext, shared_start=tuple(case.s_start),
                           shared_extent=s_ext)


def _tighter_global(case: CopyCase) -> Iterator[CopyCase]:
    for d in range(len(case.global_shape)):
        reach = case.global_extent[d] * (max(case.stages, 1) if d == 0 else 1)
        start = case.global_start[d]
        for smaller in sorted({0, start % 16, start // 2}):
            if smaller >= start:
                continue
            shape = (*case.global_shape[:d], max(1, case.global_shape[d] - start + smaller),
                     *case.global_shape[d + 1:])
            yield _global(case, global_start=_put(case.global_start, d, smaller),
                          global_shape=shape)
        if case.global_shape[d] > start + reach:
            yield _global(case, global_shape=_put(case.global_shape, d, start + reach))
            half = max(start + reach, (case.global_shape[d] + start + reach) // 2)
            yield _global(case, global_shape=_put(case.global_shape, d, half))


def _tighter_shared(case: CopyCase) -> Iterator[CopyCase]:
    if case.shared_extent is None:
        return
    first = 1 if case.stages else 0
    if tuple(case.s_extent[first:]) == tuple(case.shared_shape[first:]):
        yield _replace(case, shared_start=None, shared_extent=None)
    for d in range(first, len(case.shared_shape)):
        start, extent = case.s_start[d], case.s_extent[d]
        if start:
            yield _replace(case, shared_start=(*case.s_start[:d], 0, *case.s_start[d + 1:]),
                           shared_shape=(*case.shared_shape[:d], case.shared_shape[d] - start,
                                         *case.shared_shape[d + 1:]))
        if case.shared_shape[d] > start + extent:
            yield _replace(case, shared_shape=(*case.shared_shape[:d], start + extent,
                                               *case.shared_shape[d + 1:]))


def _simpler_dtypes(case: CopyCase) -> Iterator[CopyCase]:
    same_width = {"bfloat16": "float16", "int8": "uint8", "float8_e4m3fn": "uint8",
                  "float8_e5m2": "uint8"}
    if case.dtype in same_width:
        yield _replace(case, dtype=same_width[case.dtype])


def minimize_failure(case: CopyCase, outcome: Outcome, data_seed: int = 0,
                     budget: int = 400) -> tuple[CopyCase, Outcome]:
    """The smallest case found that fails the same way (same ``kind``) as ``case``."""

    timeout = 2.0 if outcome.kind == "timeout" else CASE_TIMEOUT

    def fails(candidate: CopyCase) -> bool:
        return check_case(candidate, data_seed, timeout).kind == outcome.kind

    small = shrink(case, fails, budget)
    return small, check_case(small, data_seed)
