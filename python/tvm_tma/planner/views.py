"""L1, part one: read the shared side of a copy into plain numbers the planner can reason
about, and the layout helpers both sides share.

A shared region becomes a list of (extent, stride) iterators over the region's row-major
index space plus its swizzle (the global side is :mod:`.global_view`). Layouts come from
TVM's layout classes (``TileLayout`` and the swizzling ``ComposeLayout``), exactly as kernel
authors declare them. Unlike the global side, the shared side needs no fold of pieces whose
strides compose: ``TileLayout.slice`` already merges them (rows 8..72 of rows written as
``(4, 32) : (2048, 64)`` slice to 64 rows of stride 64), so such a tile plans as the plain
one, and it returns None (refused ``[layout]``) for a region that cuts pieces that do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
from tvm.tirx.layout import ComposeLayout, S, TileLayout

from .errors import refuse
from .plan_types import SWIZZLE_GEOMETRY
from .proofs import Expr, Prover, as_int


@dataclass(frozen=True)
class SharedView:
    """The shared side: dense iterators of the region, in the region's row-major order."""

    dtype: str
    element_bytes: int
    swizzle: int
    iters: tuple[tuple[int, int], ...]  # (extent, stride in elements), unit extents dropped
    region_offset: Expr  # element offset of the region start from the buffer's data pointer
    buffer_offset: Expr  # the buffer's own elem_offset from its data pointer
    scope: str  # "shared.dyn" (1024-byte aligned arena) or "shared"


def region_bounds(region) -> tuple[list[Expr], list[Expr]]:
    """(starts, extents) of a BufferRegion's ranges."""
    return [r.min for r in region.region], [r.extent for r in region.region]


def static_extents(extents: list[Expr], side: str) -> list[int]:
    values = [as_int(e) for e in extents]
    if any(v is None for v in values):
        raise refuse("extent", f"{side} region extents {[str(e) for e in extents]} are not static")
    return values  # type: ignore[return-value]


def swizzle_mode(layout, dtype: str) -> int:
    """The TMA swizzle mode (0..3) a shared layout implies, or a refusal naming why not.

    TMA swizzles 16-byte units within rows of 2^atom bytes, XOR-ing the row index into the
    unit index: a ComposeLayout matches only with 16-byte units (per_element), atom_len 3 and
    the ``swizzle_inner`` direction; anything else would land data permuted.
    """
    if isinstance(layout, TileLayout):
        return 0
    if not isinstance(layout, ComposeLayout):
        raise refuse("layout", f"shared layout {layout} is neither a TileLayout nor a swizzle")
    length = int(layout.swizzle_len)
    if length == 0:
        return 0
    element_bytes = tvm.DataType(dtype).bits // 8
    expected_per_element = int(math.log2(16 // element_bytes)) if element_bytes <= 16 else -1
    problems = []
    if int(layout.per_element) != expected_per_element:
        problems.append(
            f"per_element={int(layout.per_element)} (16-byte units of {dtype} need "
            f"{expected_per_element})"
        )
    if int(layout.atom_len) != 3:
        problems.append(f"atom_len={int(layout.atom_len)} (TMA needs 3)")
    if not bool(layout.swizzle_inner):
        problems.append("swizzle_inner=False (TMA XORs the row bits into the unit bits)")
    if length not in SWIZZLE_GEOMETRY:
        problems.append(f"swizzle_len={length} (TMA has 1, 2, 3)")
    if problems:
        detail = "; ".join(problems)
        raise refuse("swizzle-layout", f"shared swizzle is not a TMA pattern: {detail}")
    return length


def _tile_of(layout, shape) -> TileLayout:
    """The unswizzled address map of a layout over ``shape``."""
    if isinstance(layout, TileLayout):
        return layout
    tile = layout.tile_layout
    if tile.is_trivial():
        # A bare swizzle carries only its period; the buffer itself is row-major.
        static = [as_int(s) for s in shape]
        if None not in static and int(tile.size()) != math.prod(static):
            return TileLayout(S[tuple(static)])
    return tile


def buffer_tile(buffer) -> TileLayout:
    """The unswizzled address map of a buffer (row-major when it declares no layout)."""
    if buffer.layout is None:
        return TileLayout(S[tuple(buffer.shape)])
    return _tile_of(buffer.layout, buffer.shape)


def memory_offset(layout: TileLayout) -> Expr:
    total: Expr = 0
    for axis, value in layout.offset.items():
        if not axis.is_memory():
            raise refuse("layout", f"layout offset on non-memory axis {axis.name}")
        total = total + value
    return total


def check_memory_layout(layout: TileLayout, side: str) -> None:
    if len(layout.replica) > 0:
        raise refuse("layout", f"{side} layout {layout} replicates data across threads")
    for iterator in layout.shard:
        if not iterator.axis.is_memory():
            raise refuse("layout", f"{side} layout {layout} has non-memory axis {iterator.axis}")


def read_shared(region, prover: Prover) -> SharedView:
    buffer = region.source
    dtype = str(buffer.dtype)
    if buffer.layout is None:
        raise refuse("layout", f"shared buffer {buffer.name} has no layout")
    swizzle = swizzle_mode(buffer.layout, dtype)
    starts, extents = region_bounds(region)
    region_extents = static_extents(extents, "shared")
    tile = _tile_of(buffer.layout, buffer.shape)
    check_memory_layout(tile, "shared")
    try:
        sliced = tile.slice(list(buffer.shape),
                            [(s, s + e) for s, e in zip(starts, region_extents)])
    except (tvm.error.InternalError, ValueError, TypeError) as error:
        raise refuse("layout", f"shared layout {tile} does not fit buffer {buffer.name} of "
                     f"shape {list(buffer.shape)}: {str(error).splitlines()[-1]}") from None
    if not isinstance(sliced, TileLayout):
        raise refuse(
            "layout",
            f"shared layout {tile} cannot be sliced to start={[str(s) for s in starts]} "
            f"extent={region_extents}",
        )
    check_memory_layout(sliced, "shared")
    iters = []
    for iterator in sliced.shard:
        extent, stride = as_int(iterator.extent), as_int(prover.simplify(iterator.stride))
        if extent is None or stride is None:
            raise refuse("layout", f"shared iterator {iterator} is not static")
        if extent != 1:
            iters.append((extent, stride))
    return SharedView(
        dtype=dtype,
        element_bytes=tvm.DataType(dtype).bits // 8,
        swizzle=swizzle,
        iters=tuple(iters),
        region_offset=prover.simplify(buffer.elem_offset + memory_offset(sliced)),
        buffer_offset=prover.simplify(buffer.elem_offset),
        scope=buffer.scope(),
    )


def buffer_span(buffer, prover: Prover) -> tuple[Expr, Expr]:
    """Bytes ``[lo, hi)`` from the buffer's data pointer that its layout can address.

    A swizzle moves a 16-byte unit only within its (16 << mode)-byte row, so the span of a
    swizzled buffer ends at the next such row boundary.
    """
    width = tvm.DataType(str(buffer.dtype)).bits // 8
    tile = buffer_tile(buffer)
    # In 64 bits: a tensor of more than 2^31 elements (a mixture of 256 experts' weights)
    # is an ordinary kernel argument, and its span must not wrap.
    lo: Expr = _wide(buffer.elem_offset + memory_offset(tile))
    hi: Expr = lo + 1
    for iterator in tile.shard:
        reach = _wide(iterator.extent - 1) * _wide(iterator.stride)
        if prover.prove(reach >= 0):
            hi = hi + reach
        else:
            lo = lo + reach
    lo, hi = prover.simplify(lo * width), prover.simplify(hi * width)
    mode = swizzle_mode(buffer.layout, str(buffer.dtype)) if buffer.layout is not None else 0
    if mode:
        row = 16 << mode
        hi = prover.simplify(tvm.tirx.floordiv(hi + row - 1, row) * row)
    return lo, hi


def _wide(value) -> Expr:
    """``value`` as a 64-bit integer (Python ints are exact already)."""
    if isinstance(value, int):
        return value
    constant = as_int(value)
    if constant is not None:
        return tvm.tirx.const(constant, "int64")
    return value if str(value.ty.dtype) == "int64" else tvm.tirx.Cast("int64", value)


def element_offset(buffer, indices, prover: Prover) -> Expr:
    """Elements from the buffer's data pointer to ``buffer[indices]``, through its layout.

    TVM 0.27's own ``elem_offset_of`` leaves a symbolic ``buffer_offset`` call behind; the
    planner needs a number (or a provable expression) to check alignments.
    """
    layout = buffer.layout
    tile = _tile_of(layout, buffer.shape) if layout is not None else None
    if tile is None:
        tile = TileLayout(S[tuple(buffer.shape)])
    try:
        sliced = tile.slice(list(buffer.shape), [(i, i + 1) for i in indices])
    except (tvm.error.InternalError, ValueError, TypeError) as error:
        raise refuse("layout", f"layout {tile} of {buffer.name} cannot locate element "
                     f"{[str(i) for i in indices]}: {str(error).splitlines()[-1]}") from None
    if not isinstance(sliced, TileLayout):
        raise refuse("layout", f"layout {tile} of {buffer.name} cannot locate element "
                     f"{[str(i) for i in indices]}")
    return prover.simplify(buffer.elem_offset + memory_offset(sliced))
