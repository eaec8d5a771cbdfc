"""The fuzzer's case generator: a seed and an index -> one random :class:`CopyCase`.

It exists apart from the oracle so that the stream of cases is defined in one place and can
be read, tested and tuned (weights, bounds) without the planner or the TMA model in view.
Case ``index`` of stream ``seed`` depends on nothing else, so a failure found in a run of
10,000 cases reproduces alone as ``random_case(seed, index)``, and a run splits over worker
processes by index.

A case is a global view (rank 1..5, random shape, region at random starts, padded or permuted
strides; or declared in the kernel at an offset -- a padded parent's sub-box, whole rows,
(mis)aligned -- or as strided pieces, tiled or interleaved), a region that may cross the
view's edges with ``oob=`` (dim 0's end, an outer end, both, a load's start), a shared buffer
(plain, padded rows, row blocks, TVM's MMA swizzle atoms, multi-stage, at aligned or
misaligned offsets, a sub-region or the whole buffer), often of another shape than the
global region (a reshape), one of seven dtypes and either direction. A share of the cases
are variants (:mod:`.fuzz_variants`): multicast loads split among a cluster of 2 or 4 CTAs,
and stores that reduce with a random op, on a dtype PTX defines it for or, sometimes, not.
About one in ten is a persistent tile loop around a plain copy (:mod:`.fuzz_loops`): one of
the loop forms kernel authors write, or an unsafe neighbour of it. A few of the views declared
in the one-CTA kernel are device-side (:func:`device_view`): their offset and rows are read
from a kernel argument, as a grouped kernel reads a group's rows.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

from .copy_cases import CopyCase
from .device_view_case import device_eligible
from .fuzz_loops import draw_loop, loop_case
from .fuzz_variants import PLAIN, REDUCE_ONLY_DTYPES, Variant, draw_variant
from .fuzz_views import global_strides, pieces, view_offset, weighted

#: Element bytes of every dtype a plain case draws.
DTYPES: dict[str, int] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "uint8": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
}
#: Element bytes of every dtype any case draws (reductions draw wider integers too).
ALL_DTYPES: dict[str, int] = {**DTYPES, **REDUCE_ONLY_DTYPES}
#: The most dimensions a tensor map (and so a drawn global view) has.
MAX_RANK = 5
#: Upper bounds that keep one case fast on the model and launchable as one CTA.
MAX_TILE_BYTES = 48 * 1024
MAX_GLOBAL_ELEMS = 1 << 18
DEFAULT_SEED = 20251122
FLOAT_DTYPES = ("float16", "bfloat16", "float32")  #: the dtypes oob="nan" fills

#: Share of the cases whose view may be device-side (declared in the one-CTA kernel at an
#: offset) that read its offset and rows from a kernel argument: about 1% of the stream.
DEVICE_VIEW_SHARE = 0.08

_OUTER = {1: 3, 2: 4, 3: 2, 4: 3, 5: 1, 8: 3, 16: 2, 64: 1, 256: 1, 512: 1}  # outer extents


def random_case(seed: int, index: int) -> CopyCase:
    """Case ``index`` of the stream ``seed`` (independent of every other case)."""
    rng = random.Random(f"tvm-tma-fuzz:{seed}:{index}")
    variant = draw_variant(seed, index, ALL_DTYPES)
    loop = draw_loop(seed, index) if variant == PLAIN else None
    for _ in range(100):
        case = _draw(rng, f"fuzz-{seed}-{index}", variant)
        if case is not None and loop is not None:
            case = loop_case(case, loop, MAX_GLOBAL_ELEMS)
        if case is not None:
            return device_view(case, seed, index)
    raise RuntimeError(f"generator found no case for seed {seed} index {index}")


def _draw(rng: random.Random, name: str, variant: Variant) -> CopyCase | None:
    direction = variant.direction or rng.choice(("g2s", "s2g"))
    oob = None  # edge tiles: oob= for a quarter of the copies, rarely the other direction's
    if rng.random() < 0.24:
        store = (direction == "s2g") != (rng.random() < 0.03)
        oob = "skip" if store else rng.choice(("zero", "nan"))
    floats = oob == "nan" and rng.random() < 0.85  # NaN fill exists for float types only
    dtype = variant.dtype or rng.choice(FLOAT_DTYPES if floats else list(DTYPES))
    width = ALL_DTYPES[dtype]
    layout = weighted(rng, {"row": 28, "padded": 16, "blocked": 8, "swizzle:0": 9,
                            "swizzle:1": 13, "swizzle:2": 13, "swizzle:3": 13})
    buf = _shared_tile(rng, layout, width)
    if buf is None:
        return None
    if layout == "padded":
        layout = f"padded:{_row_pad(rng, buf[-1], width)}"
    elif layout == "blocked":
        rows = rng.choice([r for r in range(1, buf[-2]) if buf[-2] % r == 0])
        layout = f"blocked:{rows}:{_row_pad(rng, rows * buf[-1], width)}"
    s_start, s_ext = _shared_region(rng, layout, width, buf)
    stages = rng.choice((1, 2, 2, 3, 4)) if rng.random() < 0.2 else 0
    g_ext = _global_extents(rng, [e for e in s_ext if e != 1], width)
    if rng.random() < 0.015:  # the two sides disagree on the element count
        g_ext[rng.randrange(len(g_ext))] += 1
    edges = _edges(rng, oob, direction, g_ext, stages)
    g_shape, g_start = _global_box(rng, g_ext, width, stages, edges)
    view = weighted(rng, {"argument": 72, "offset": 16, "pieces": 12})
    g_strides, g_offset, tiles = None, 0, None
    if view == "pieces":
        tiles = pieces(rng, g_shape, g_start, g_ext, stages, width, edges)
        if tiles is not None and rng.random() < 0.25:
            g_offset = max(1, 16 // width) * rng.randint(1, 64)
    if tiles is None:
        odd_rows = (len(g_shape) - 1 in edges) and (g_shape[-1] * width) % 16
        g_strides = global_strides(rng, g_shape, width, bool(odd_rows) and rng.random() < 0.8)
    if view == "offset":
        g_strides, g_offset = view_offset(rng, g_shape, g_start, g_strides, width)
    whole = tuple(s_ext) == tuple(buf)
    lead = (0,) if stages else ()
    case = CopyCase(
        name=name, dtype=dtype, direction=direction, global_shape=tuple(g_shape),
        global_start=tuple(g_start), global_extent=tuple(g_ext),
        shared_shape=((stages,) if stages else ()) + tuple(buf), shared_layout=layout,
        shared_start=None if whole else lead + tuple(s_start),
        shared_extent=None if whole else (1,) * len(lead) + tuple(s_ext),
        smem_elem_offset=_smem_offset(rng, layout, width), stages=stages,
        global_strides=None if g_strides is None else tuple(g_strides), global_offset=g_offset,
        oob=oob, global_tiles=tiles, cluster=variant.cluster, reduce=variant.reduce,
    )
    return case if case.global_storage_elems <= MAX_GLOBAL_ELEMS else None


def device_view(case: CopyCase, seed: int, index: int) -> CopyCase:
    """``case``, its view made device-side (:mod:`.device_view_case`) for a share of the
    cases that may have one. The roll comes from a stream of its own, so every case draws
    exactly the numbers it always drew and only this flag changes."""
    if not device_eligible(case):
        return case
    rng = random.Random(f"tvm-tma-fuzz-device-view:{seed}:{index}")
    return replace(case, device_view=True) if rng.random() < DEVICE_VIEW_SHARE else case


def _edges(rng: random.Random, oob: str | None, direction: str, extents: list[int],
           stages: int) -> dict[int, str]:
    """Dims whose edge the region crosses: ``"end"`` (past the view's end) or ``"before"``
    (a start below 0; loads only, a store's is refused)."""
    reach = [e * (max(stages, 1) if d == 0 else 1) for d, e in enumerate(extents)]
    dims = [d for d, r in enumerate(reach) if r > 1]
    last, edges = len(extents) - 1, {}
    outer = [d for d in dims if d != last]
    kind = weighted(rng, {"inside": 12, "dim0": 24, "outer": 22, "both": 20, "before": 28})
    if oob is None or not dims or kind == "inside":
        return edges
    if kind in ("dim0", "both") and last in dims:
        edges[last] = "end"
    if kind in ("outer", "both") and outer:
        edges[rng.choice(outer)] = "end"
    if kind == "before" and (direction == "g2s" or rng.random() < 0.1):
        edges[rng.choice(dims)] = "before"
        if rng.random() < 0.3:
            edges.setdefault(rng.choice(dims), "end")
    return edges or {rng.choice(dims): "end"}


def _row_pad(rng: random.Random, last: int, width: int) -> int:
    """Elements of padding after each shared row: mostly to a 128-byte pitch (so row issues
    stay aligned), sometimes to a 16-byte one, sometimes odd."""
    pitch = weighted(rng, {128: 65, 16: 23, "odd": 12})
    if pitch == "odd":
        return rng.randint(1, 17)
    more = rng.randint(0, 2 if pitch == 128 else 4)
    return ((-last * width) % pitch + pitch * more) // width or pitch // width


def _span(layout: str, width: int) -> int:
    """Elements of one swizzle span (0 for layouts without a swizzle)."""
    kind, _, argument = layout.partition(":")
    return (16 << int(argument)) // width if kind == "swizzle" and int(argument) > 0 else 0


def _shared_tile(rng: random.Random, layout: str, width: int) -> list[int] | None:
    """The shape of one stage of the shared buffer."""
    span = _span(layout, width)
    if span:
        last = span * rng.choice((1, 1, 2, 2, 3, 4))
        rows = 8 * weighted(rng, {1: 6, 2: 4, 3: 1, 4: 3, 8: 2, 16: 1, 32: 1, 64: 1})
        rank = weighted(rng, {2: 6, 3: 3, 4: 1})
        shape = [*[weighted(rng, _OUTER) for _ in range(rank - 2)], rows, last]
    else:
        if layout.startswith("swizzle") or rng.random() < 0.9:
            last = max(1, rng.choice((16, 32, 32, 64, 64, 128, 128, 256, 512, 1024, 2048))
                       // width)
        else:
            last = rng.randint(1, 300)
        weights = {2: 6, 3: 3, 4: 1} if layout.startswith(("swizzle", "blocked")) else {
            1: 2, 2: 6, 3: 3, 4: 1}
        rank = weighted(rng, weights)
        shape = [weighted(rng, _OUTER) for _ in range(rank - 1)] + [last]
        if layout == "blocked" and shape[-2] < 2:
            shape[-2] = rng.choice((2, 4, 8, 16))
    while math.prod(shape) * width > MAX_TILE_BYTES:
        big = max(range(len(shape) - 1), key=lambda d: shape[d], default=None)
        if big is None or shape[big] == 1:
            return None
        shape[big] = max(1, shape[big] // 2)
    if (span and shape[-2] % 8) or (layout == "blocked" and shape[-2] < 2):
        return None
    return shape


def _shared_region(rng: random.Random, layout: str, width: int, buf: list[int]
                   ) -> tuple[list[int], list[int]]:
    """(start, extent) of the copied region inside one stage of the shared buffer."""
    if rng.random() < 0.55:
        return [0] * len(buf), list(buf)
    span = _span(layout, width)
    starts, extents = [], []
    for d, n in enumerate(buf):
        last = d == len(buf) - 1
        grain, align = 1, 1  # extent granule and start alignment (elements)
        if last and span and rng.random() < 0.85:
            grain = align = span
        elif last and rng.random() < 0.85:
            grain = max(1, 16 // width)
            align = max(1, rng.choice((128, 128, 128, 128, 16)) // width)
        elif d == len(buf) - 2 and span and rng.random() < 0.7:
            grain = align = 8
        choices = list(range(grain, n + 1, grain)) or [n]
        extent = rng.choice((n, rng.choice(choices), rng.choice(choices),
                             max(grain, n // 2 // grain * grain)))
        extent = min(max(extent, 1), n)
        starts.append(rng.choice(list(range(0, n - extent + 1, align)) or [0])
                      if rng.random() < 0.8 else rng.randint(0, n - extent))
        extents.append(extent)
    return starts, extents


def _global_extents(rng: random.Random, inner: list[int], width: int) -> list[int]:
    """The global region's extents: the shared non-unit extents, often reshaped (dims split,
    merged or regrouped; the element count stays), plus unit dims."""
    extents = list(inner)
    if extents and rng.random() < 0.2:
        for _ in range(rng.choice((1, 1, 2, 3))):
            changed = _refactor(rng, extents, width)
            if len(changed) <= MAX_RANK:
                extents = changed
    least = max(1, len(extents))
    rank = least if rng.random() < 0.4 else rng.randint(least, MAX_RANK)
    trailing = rng.random() < 0.1  # unit dims after the innermost copied dim
    while len(extents) < rank:
        top = len(extents) if trailing or not extents else len(extents) - 1
        extents.insert(rng.randint(0, top), 1)
    return extents


def _refactor(rng: random.Random, extents: list[int], width: int) -> list[int]:
    """One reshape step: split a dim in two, merge 2..3 neighbours, or regroup two
    neighbours into rows of another length (elements still pair in row-major order)."""
    d, roll = rng.randrange(len(extents)), rng.random()
    if 0.45 <= roll < 0.85 and d + 1 < len(extents):
        k = rng.choice((2, 2, 3))
        return [*extents[:d], math.prod(extents[d : d + k]), *extents[d + k:]]
    group = extents[d : d + (2 if roll >= 0.85 else 1)]
    total = math.prod(group)
    factors = [f for f in range(2, min(total, 4097)) if total % f == 0 and f != group[-1]]
    if not factors:
        return extents
    wide = [f for f in factors if d + len(group) < len(extents) or (f * width) % 16 == 0]
    f = rng.choice(wide if wide and rng.random() < 0.8 else factors)  # rows of 16 B mostly
    return [*extents[:d], total // f, f, *extents[d + len(group):]]


def _global_box(rng: random.Random, extents: list[int], width: int, stages: int,
                edges: dict[int, str]) -> tuple[list[int], list[int]]:
    """(shape, start) of the global view around the region (stage dim 0 walks it); the
    region crosses the view's end or starts before it along ``edges``."""
    unit16 = max(1, 16 // width)
    innermost = max((d for d, e in enumerate(extents) if e != 1), default=len(extents) - 1)
    shape, start = [], []
    for d, e in enumerate(extents):
        kind = weighted(rng, {"zero": 35, "multiple": 25, "eight": 15, "any": 25})
        if d == innermost and kind == "any" and rng.random() < 0.7:
            kind = "unit16"  # TMA boxes start on 16 bytes along dimension 0
        s = (0 if kind == "zero" else e * rng.randint(0, 3) if kind == "multiple" else
             8 * rng.randint(0, 4) if kind == "eight" else
             unit16 * rng.randint(0, max(1, 2 * e // unit16)) if kind == "unit16" else
             rng.randint(0, 2 * e))
        reach = e * (max(stages, 1) if d == 0 else 1)
        slack = weighted(rng, {0: 40, "small": 30, "round": 30})
        slack = (rng.randint(1, e) if slack == "small" else
                 rng.choice((8, 16, 32, 64)) if slack == "round" else 0)
        n = s + reach + slack
        if d > innermost and rng.random() < 0.5:
            n, s = 1, 0  # a trailing unit dim that keeps the rows contiguous
        if d == len(extents) - 1 and rng.random() < 0.9:
            n = -(-n // unit16) * unit16  # rows a multiple of 16 bytes
        if rng.random() < 0.03:
            n = max(1, s + reach - 1)  # the region sticks out of the tensor
        if edges.get(d) == "end":  # crosses the end; sometimes an end on 16 bytes
            n = s + rng.randint(1, reach - 1)
            if rng.random() < 0.5 and -(-n // unit16) * unit16 < s + reach:
                n = -(-n // unit16) * unit16
        elif edges.get(d) == "before":  # a halo: the load starts before the view
            step = unit16 if d == len(extents) - 1 else 1
            s = -step * rng.randint(1, max(1, (reach - 1) // step))
            n = max(1, s + reach + slack)
        shape.append(n)
        start.append(s)
    return shape, start


def _smem_offset(rng: random.Random, layout: str, width: int) -> int:
    kind = weighted(rng, {"zero": 55, "aligned": 39, "misaligned": 6})
    if kind == "zero":
        return 0
    if kind == "aligned":
        align = rng.choice((1024, 1024, 128)) if layout.startswith("swizzle") else 128
        return align // width * rng.randint(1, 4)
    return rng.choice((16 // width * rng.randint(1, 15), rng.randint(1, 100)))
