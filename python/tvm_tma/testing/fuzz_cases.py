"""The fuzzer's case generator: a seed and an index -> one random :class:`CopyCase`.

It exists apart from the oracle so that the stream of cases is defined in one place and can
be read, tested and tuned (weights, bounds) without the planner or the TMA model in view.
Case ``index`` of stream ``seed`` depends on nothing else, so a failure found in a run of
10,000 cases reproduces alone as ``random_case(seed, index)``, and a run splits over worker
processes by index.

A case is a global view (rank 1..5, random shape, region at random starts, padded or permuted
strides, sometimes an offset view), a shared buffer (plain, padded rows, row blocks, TVM's MMA
swizzle atoms, multi-stage, at aligned or misaligned offsets, a sub-region or the whole
buffer, sometimes factored differently), one of seven dtypes and either direction.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import TypeVar

from .copy_cases import CopyCase

#: Element bytes of every dtype the fuzzer draws.
DTYPES: dict[str, int] = {
    "float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "uint8": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1,
}
#: The most dimensions a tensor map (and so a drawn global view) has.
MAX_RANK = 5
#: Upper bounds that keep one case fast on the model and launchable as one CTA.
MAX_TILE_BYTES = 48 * 1024
MAX_GLOBAL_ELEMS = 1 << 18
DEFAULT_SEED = 20251122

_Key = TypeVar("_Key")


def random_case(seed: int, index: int) -> CopyCase:
    """Case ``index`` of the stream ``seed`` (independent of every other case)."""
    rng = random.Random(f"tvm-tma-fuzz:{seed}:{index}")
    for _ in range(100):
        case = _draw(rng, f"fuzz-{seed}-{index}")
        if case is not None:
            return case
    raise RuntimeError(f"generator found no case for seed {seed} index {index}")


def _weighted(rng: random.Random, table: Mapping[_Key, int]) -> _Key:
    """One key of ``table``, drawn with the weights its values give."""
    keys = list(table)
    return rng.choices(keys, weights=[table[k] for k in keys])[0]


def _draw(rng: random.Random, name: str) -> CopyCase | None:
    dtype = rng.choice(list(DTYPES))
    width = DTYPES[dtype]
    direction = rng.choice(("g2s", "s2g"))
    layout = _weighted(rng, {"row": 28, "padded": 16, "blocked": 8, "swizzle:0": 9,
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

    inner = [e for e in s_ext if e != 1]
    g_ext = _global_extents(rng, inner)
    if g_ext is None:
        return None
    if rng.random() < 0.015:  # the two sides disagree on the element count
        d = rng.randrange(len(g_ext))
        g_ext[d] += 1
    g_shape, g_start = _global_box(rng, g_ext, width, stages)
    g_strides = _global_strides(rng, g_shape, width)
    g_offset = rng.randint(1, 64) if rng.random() < 0.02 else 0

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
    )
    if case.global_storage_elems > MAX_GLOBAL_ELEMS:
        return None
    return case


def _row_pad(rng: random.Random, last: int, width: int) -> int:
    """Elements of padding after each shared row: mostly to a 128-byte pitch (so row issues
    stay aligned), sometimes to a 16-byte one, sometimes odd."""
    kind = _weighted(rng, {"pitch128": 65, "pitch16": 23, "odd": 12})
    row = last * width
    if kind == "pitch128":
        return ((-row) % 128 + 128 * rng.randint(0, 2)) // width or 128 // width
    if kind == "pitch16":
        return ((-row) % 16 + 16 * rng.randint(0, 4)) // width or 16 // width
    return rng.randint(1, 17)


def _span(layout: str, width: int) -> int:
    """Elements of one swizzle span (0 for layouts without a swizzle)."""
    kind, _, argument = layout.partition(":")
    if kind == "swizzle" and int(argument) > 0:
        return (16 << int(argument)) // width
    return 0


def _shared_tile(rng: random.Random, layout: str, width: int) -> list[int] | None:
    """The shape of one stage of the shared buffer."""
    span = _span(layout, width)
    if span:
        last = span * rng.choice((1, 1, 2, 2, 3, 4))
        rows = 8 * _weighted(rng, {1: 6, 2: 4, 3: 1, 4: 3, 8: 2, 16: 1, 32: 1, 64: 1})
        rank = _weighted(rng, {2: 6, 3: 3, 4: 1})
        shape = [*[_outer_extent(rng) for _ in range(rank - 2)], rows, last]
    else:
        if layout.startswith("swizzle") or rng.random() < 0.9:
            last = max(1, rng.choice((16, 32, 32, 64, 64, 128, 128, 256, 512, 1024, 2048))
                       // width)
        else:
            last = rng.randint(1, 300)
        weights = {2: 6, 3: 3, 4: 1} if layout.startswith(("swizzle", "blocked")) else {
            1: 2, 2: 6, 3: 3, 4: 1}
        rank = _weighted(rng, weights)
        shape = [_outer_extent(rng) for _ in range(rank - 1)] + [last]
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


def _outer_extent(rng: random.Random) -> int:
    return _weighted(rng, {1: 3, 2: 4, 3: 2, 4: 3, 5: 1, 8: 3, 16: 2, 64: 1, 256: 1, 512: 1})


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
        room = n - extent
        if rng.random() < 0.8:
            start = rng.choice(list(range(0, room + 1, align)) or [0])
        else:
            start = rng.randint(0, room)
        starts.append(start)
        extents.append(extent)
    return starts, extents


def _global_extents(rng: random.Random, inner: list[int]) -> list[int] | None:
    """The global region's extents: the shared non-unit extents, maybe refactored, plus units."""
    extents = list(inner)
    if extents and rng.random() < 0.12:
        d = rng.randrange(len(extents))
        factors = [f for f in range(2, extents[d]) if extents[d] % f == 0]
        if factors and rng.random() < 0.6:
            f = rng.choice(factors)
            extents[d : d + 1] = [extents[d] // f, f]
        elif len(extents) > 1 and d + 1 < len(extents):
            extents[d : d + 2] = [extents[d] * extents[d + 1]]
    if len(extents) > MAX_RANK:
        return None
    rank = rng.randint(max(1, len(extents)), MAX_RANK)
    if rng.random() < 0.4:
        rank = max(1, len(extents))
    trailing = rng.random() < 0.1  # unit dims after the innermost copied dim
    while len(extents) < rank:
        top = len(extents) if trailing or not extents else len(extents) - 1
        extents.insert(rng.randint(0, top), 1)
    return extents


def _global_box(rng: random.Random, extents: list[int], width: int, stages: int
                ) -> tuple[list[int], list[int]]:
    """(shape, start) of the global view around the region (stage dim 0 walks it)."""
    unit16 = max(1, 16 // width)
    innermost = max((d for d, e in enumerate(extents) if e != 1), default=len(extents) - 1)
    shape, start = [], []
    for d, e in enumerate(extents):
        kind = _weighted(rng, {"zero": 35, "multiple": 25, "eight": 15, "any": 25})
        if d == innermost and kind == "any" and rng.random() < 0.7:
            kind = "unit16"  # TMA boxes start on 16 bytes along dimension 0
        if kind == "zero":
            s = 0
        elif kind == "multiple":
            s = e * rng.randint(0, 3)
        elif kind == "eight":
            s = 8 * rng.randint(0, 4)
        elif kind == "unit16":
            s = unit16 * rng.randint(0, max(1, 2 * e // unit16))
        else:
            s = rng.randint(0, 2 * e)
        needed = s + e * (max(stages, 1) if d == 0 else 1)
        slack = _weighted(rng, {0: 40, "small": 30, "round": 30})
        if slack == "small":
            slack = rng.randint(1, e)
        elif slack == "round":
            slack = rng.choice((8, 16, 32, 64))
        n = needed + slack
        if d > innermost and rng.random() < 0.5:
            n, s = 1, 0  # a trailing unit dim that keeps the rows contiguous
        if d == len(extents) - 1 and rng.random() < 0.9:
            n = -(-n // unit16) * unit16  # rows a multiple of 16 bytes
        if rng.random() < 0.03:
            n = max(1, needed - 1)  # the region sticks out of the tensor
        shape.append(n)
        start.append(s)
    return shape, start


def _global_strides(rng: random.Random, shape: list[int], width: int) -> list[int] | None:
    """None (dense row-major) or the strides of a padded / permuted view."""
    roll = rng.random()
    if roll < 0.62:
        return None
    rank = len(shape)
    if roll < 0.65 and rank > 1:  # a permuted (transposed) dense view
        order = list(range(rank))
        rng.shuffle(order)
        strides = [0] * rank
        step = 1
        for d in reversed(order):
            strides[d] = step
            step *= shape[d]
        return strides
    strides = [0] * rank
    strides[-1] = 2 if rng.random() < 0.04 else 1  # every other element: not contiguous
    for d in reversed(range(rank - 1)):
        kind = _weighted(rng, {"none": 45, "aligned": 45, "odd": 10})
        pad = 0
        if kind == "aligned":
            pad = max(1, 16 // width) * rng.randint(1, 8)
        elif kind == "odd":
            pad = rng.randint(1, 9)
        strides[d] = strides[d + 1] * shape[d + 1] + pad
    return strides


def _smem_offset(rng: random.Random, layout: str, width: int) -> int:
    kind = _weighted(rng, {"zero": 55, "aligned": 39, "misaligned": 6})
    if kind == "zero":
        return 0
    if kind == "aligned":
        align = rng.choice((1024, 1024, 128)) if layout.startswith("swizzle") else 128
        return align // width * rng.randint(1, 4)
    return rng.choice((16 // width * rng.randint(1, 15), rng.randint(1, 100)))
