"""L1, the global side: canonicalize a global region into dims a tensor map can describe.

A kernel author's global operand is rarely "a kernel argument, one stride per dimension":
it may be a view (``A.sub[16:512, 8:72]``, ``T.decl_buffer(..., A.data, elem_offset=8)``,
``A.sub[4096:8192].view(64, 64)``) that starts somewhere inside its argument, its layout
may lay one logical dimension out as several strided pieces (a tiled or interleaved
``TileLayout``), and its contiguous dims may be cut finer than the hardware rules need
(a whole ``uint8 [64, 8]`` tensor is one 512-byte run). This module rewrites the region,
without changing which addresses it names, into :class:`GlobalDim` s:

1. *pieces*: neighbouring layout pieces of a dimension whose strides compose (outer stride
   == inner stride * inner extent: rows written as ``4 x 96`` with strides ``96*s, s``) are
   one run of that dimension and fold into one piece first, so a region may cut them
   anywhere, exactly as over the plain dimension; every remaining piece (a tiled or
   interleaved layout, whose pieces leave gaps or cross) becomes its own dim, with the
   region's start and extent split across the pieces (refused when the region cuts such a
   piece partially);
2. *the view's offset*: folded into the coordinates along the view's own dims (the map's
   base stays the argument's data pointer and its upper edges stay the view's), else
   encoded as the map's base (``data + offset``, 16-byte alignment proven or checked at run
   time), else -- for a view placed by a CTA-dependent offset -- translated into the
   coordinates of the kernel argument it aliases. A folded offset moves the region's starts
   (a 1-D view at element 252 copying from 768 starts at 1020), which can keep the later
   steps from cutting a dim on its start; so where the base placement is allowed too, it is
   kept as the second choice (:func:`global_placements`), which the planner tries only when
   the folded one is refused;
3. *merge*: a dim covered whole whose outer neighbour continues it in memory merges into that
   neighbour (before any box, 16-byte or 256-element rule is applied);
4. *bounds*: each dim records whether the region provably lies inside it. Without ``oob``
   every dim must; with it, the planner keeps the tensor map's bounds equal to the view's on
   every dim that may be crossed (:mod:`.descriptor` checks that each later rewrite does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import tvm
from tvm.tirx.layout import TileLayout

from .errors import refuse
from .plan_types import HostCheck
from .proofs import Expr, Prover, as_int
from .views import (
    buffer_span,
    check_memory_layout,
    memory_offset,
    region_bounds,
    static_extents,
)

#: Largest size of one tensor-map dimension (cuTensorMapEncodeTiled: globalDim <= 2^32).
MAX_GLOBAL_DIM = 1 << 32
#: ``oob=`` values: what happens to the elements of a box outside the tensor. A load fills
#: them (zeros or NaN); a store never writes them, so on a store every value means "skip"
#: (kernels written for upstream's variants pass "zero" or "nan" there).
LOAD_OOB = ("zero", "nan")
STORE_OOB = ("skip", "zero", "nan")


@dataclass(frozen=True)
class GlobalDim:
    """One dimension of the tensor map's view of global memory and the region along it.

    ``inside`` records that the region provably lies in ``[0, size)`` along this dim; a dim
    that is not inside is one the copy may cross (``oob=``), so the hardware's bounds on it
    must stay exactly the view's. ``name`` says where the dim came from, for messages.
    """

    size: Expr
    stride: Expr  # elements
    start: Expr
    extent: int
    inside: bool = True
    name: str = ""


@dataclass(frozen=True)
class GlobalView:
    """The global side of a copy: its dims, outermost first, and the map's base.

    ``base_offset`` is the element offset of the tensor map's base from the buffer's data
    pointer (0 unless a view's offset could not be folded into the coordinates).
    """

    dtype: str
    element_bytes: int
    dims: tuple[GlobalDim, ...]
    base_offset: Expr = 0
    oob: str | None = None
    direction: str = "g2s"
    host_checks: tuple[HostCheck, ...] = ()

    @property
    def fills_nan(self) -> bool:
        """A load that fills out-of-bounds elements with NaN (the map keeps its float type)."""
        return self.oob == "nan" and self.direction == "g2s"

    @property
    def edge_dims(self) -> tuple[int, ...]:
        """Indices of the dims the region may cross (only ever non-empty with ``oob``)."""
        return tuple(i for i, d in enumerate(self.dims) if not d.inside)


def read_global(region, prover: Prover, direction: str, oob: str | None = None,
                argument=None) -> GlobalView:
    """Canonicalize a global BufferRegion (see the module docstring): the preferred of its
    :func:`global_placements`.

    ``argument`` is the kernel argument (a Buffer) whose data the region's buffer aliases,
    when the parser could see it; it is needed only for views placed by a CTA-dependent
    offset.
    """
    return global_placements(region, prover, direction, oob, argument)[0]


def global_placements(region, prover: Prover, direction: str, oob: str | None = None,
                      argument=None) -> tuple[GlobalView, ...]:
    """Every way the tensor map may place a global BufferRegion, preferred first.

    One view, except for a view whose offset folds into coordinates and may also be the
    map's base (``data + offset`` 16-byte aligned, proven or left to the encoder's check):
    then the folded view, then the view at that base. Both name the same addresses and
    both pass the same bounds checks (:func:`_bound` runs once, on the view's own dims);
    they differ only in the dims' sizes and starts, so a rule that refuses the plan of one
    (a start off the box cut, an issue step off 128 bytes) may accept the other's.
    """
    buffer = region.source
    dtype = str(buffer.dtype)
    width = tvm.DataType(dtype).bits // 8
    layout = buffer.layout
    if not isinstance(layout, TileLayout):
        raise refuse("layout", f"global buffer {buffer.name} needs a TileLayout, got {layout}")
    check_memory_layout(layout, "global")
    if argument is not None and not argument.same_as(buffer):
        _check_view_in_argument(buffer, argument, prover)
    checks: list[HostCheck] = []
    dims = _bound(_pieces(region, prover), prover, direction, oob, checks)
    offset = prover.simplify(buffer.elem_offset + memory_offset(layout))
    _check_offset_width(buffer, offset, prover)
    return tuple(GlobalView(dtype, width, tuple(_merge_whole(placed, prover)), base, oob,
                            direction, tuple(checks))
                 for placed, base in _place_view(dims, offset, width, buffer, prover, argument))


def _check_view_in_argument(view, argument, prover: Prover) -> None:
    """A view declared over a kernel argument's data must address only the argument's bytes:
    the allocation behind the argument may be larger (a caching allocator's block), so the
    encoder's allocation check at launch cannot see a view that reads past the argument.
    A view whose size the device computes (a group's rows) must first be provably
    non-empty: its map is rebound to that size, and a map has no empty dim."""
    for index, size in enumerate(view.shape):
        if not prover.is_host_expr(size) and not prover.establish(
                size >= 1, f"global-dim ({view.name} dimension {index})"):
            raise refuse("global-dim", f"global view {view.name} dimension {index} has the "
                         f"device-side size {size}, not provably at least 1: its map is "
                         "rebound to that size on the device, and a map needs every dim in "
                         f"(0, 2^32] (guard the copy: if {size} > 0)")
    lo, hi = buffer_span(view, prover)
    arg_lo, arg_hi = buffer_span(argument, prover)
    if not prover.establish(tvm.tirx.all(lo >= arg_lo, hi <= arg_hi),
                            f"global-view-bounds ({view.name} in {argument.name})"):
        raise refuse(
            "global-view-bounds",
            f"global view {view.name} addresses bytes [{lo}, {hi}) of the data of kernel "
            f"argument {argument.name}, which holds bytes [{arg_lo}, {arg_hi})")


def _pieces(region, prover: Prover) -> list[GlobalDim]:
    """One GlobalDim per layout piece of every buffer dim (outermost first)."""
    buffer = region.source
    try:
        grouped, separators = buffer.layout.group(list(buffer.shape))
    except (TypeError, ValueError, tvm.error.InternalError) as error:
        raise refuse("layout", f"global layout {buffer.layout} does not follow shape "
                     f"{list(buffer.shape)}: {str(error).splitlines()[-1]}") from None
    starts, extents = region_bounds(region)
    dims: list[GlobalDim] = []
    for d, (start, extent) in enumerate(zip(starts, static_extents(extents, "global"))):
        pieces = _compose([it for it in grouped.shard[separators[d]:separators[d + 1]]
                           if as_int(it.extent) != 1], prover)
        name = f"global dimension {d}"
        if len(pieces) <= 1:
            stride = pieces[0].stride if pieces else 0
            dims.append(GlobalDim(prover.simplify(buffer.shape[d]), stride,
                                  prover.simplify(start), extent, name=name))
            continue
        dims.extend(_split_pieces(pieces, prover.simplify(start), extent, name, prover))
    return dims


@dataclass(frozen=True)
class _Piece:
    """One strided piece of a global dimension: ``extent`` steps ``stride`` elements apart."""

    extent: Expr
    stride: Expr


def _compose(iterators: list, prover: Prover) -> list[_Piece]:
    """The pieces of one dimension (outer first), neighbours whose strides compose folded.

    Pieces ``(outer, inner)`` with ``outer.stride == inner.stride * inner.extent`` name the
    same addresses as one piece of ``outer.extent * inner.extent`` elements at
    ``inner.stride``: the layout only spelled one run of the dimension in two parts (rows as
    ``4 x 96`` with strides ``96*s, s`` are 384 rows of stride ``s``). Left apart, a region
    that crosses a 96-row boundary mid-piece would be refused, and the descriptor would plan
    the copy differently from the same copy over the plain dimension. Pieces whose strides
    do not compose (a gap between row blocks, interleaved planes) stay apart.
    """
    out: list[_Piece] = []
    for iterator in reversed(iterators):  # innermost first
        piece = _Piece(prover.simplify(iterator.extent), prover.simplify(iterator.stride))
        if out and prover.prove(piece.stride == out[-1].stride * out[-1].extent):
            inner = out[-1]
            out[-1] = _Piece(prover.simplify(piece.extent * inner.extent), inner.stride)
            continue
        out.append(piece)
    out.reverse()
    return out


def _split_pieces(pieces: list[_Piece], start: Expr, extent: int, name: str, prover: Prover
                  ) -> list[GlobalDim]:
    """The region ``[start, start + extent)`` of a dim laid out as ``pieces`` (outer first),
    as one region per piece: each inner piece is covered whole (and the rest moves out) or
    holds the whole remaining region inside one of its rows."""
    out: list[GlobalDim] = []
    count = len(pieces)
    for index in range(count - 1, 0, -1):  # innermost piece first; the outermost takes the rest
        piece = pieces[index]
        size = as_int(piece.extent)
        label = f"{name} (piece {index} of {count})"
        if size is None:
            raise refuse("layout", f"{label} has symbolic extent {piece.extent}; only the "
                         "outermost piece of a dimension may be symbolic")
        stride = piece.stride
        if extent % size == 0 and prover.divisible(start, size):
            out.append(GlobalDim(size, stride, 0, size, name=label))
            start, extent = prover.simplify(tvm.tirx.floordiv(start, size)), extent // size
        elif extent <= size and prover.prove(tvm.tirx.floormod(start, size) + extent <= size):
            out.append(GlobalDim(size, stride, prover.simplify(tvm.tirx.floormod(start, size)),
                                 extent, name=label))
            start, extent = prover.simplify(tvm.tirx.floordiv(start, size)), 1
        else:
            raise refuse("layout", f"the region [{start}, {start} + {extent}) of {name} cuts "
                         f"its layout piece of {size} elements (stride {stride}) partially; "
                         "TMA needs each piece covered whole or the region inside one row")
    outer = pieces[0]
    out.append(GlobalDim(outer.extent, outer.stride, start, extent,
                         name=f"{name} (piece 0 of {count})"))
    out.reverse()
    return out


def _place_view(dims: list[GlobalDim], offset: Expr, width: int, buffer, prover: Prover,
                argument) -> list[tuple[list[GlobalDim], Expr]]:
    """Where the tensor map may start, preferred first, as (dims, base offset) pairs: fold
    the view's offset into coordinates (then, if allowed, also the offset as the base, the
    fallback :func:`global_placements` describes), or use it as the base, or express the
    region in the kernel argument's coordinates."""
    if _is_zero(offset, prover):
        return [(dims, 0)]
    folded = _fold_offset(dims, offset, prover)
    if folded is not None:
        return [(folded, 0)] + ([(dims, offset)] if _base_allowed(offset, width, prover)
                                else [])
    if prover.is_host_expr(offset):
        if not _base_allowed(offset, width, prover):
            raise refuse(
                "global-address-align",
                f"global view {buffer.name} starts {prover.simplify(offset * width)} bytes "
                "past its data pointer, not a multiple of 16, and the offset cannot be folded "
                "into the coordinates (the region may start before the view)")
        return [(dims, offset)]
    translated = _in_argument(dims, offset, prover, argument)
    if translated is not None:
        return [(translated, 0)]
    if _device_base_aligned(offset, width, prover):
        # A view the device places (rows offs[g - 1]:offs[g] of A): the map starts at
        # data + offset and keeps the view's own dims, so a device-born map rebound per
        # view (``TmaPlan.device_view``) bounds the copy in hardware.
        return [(dims, offset)]
    raise refuse(
        "global-address-align",
        f"global view {buffer.name} starts at the device-side offset {offset} "
        f"({prover.simplify(offset * width)} bytes past its data pointer), not provably a "
        "multiple of 16 bytes: the base of a map rebound on the device must be (and no host "
        "encode checks it)")


def _check_offset_width(buffer, offset: Expr, prover: Prover) -> None:
    """A view's offset computed in 32 bits must provably stay in 32 bits: the kernel computes
    it with wrapping arithmetic, while the proofs here are over the integers, so an offset
    that may pass 2^31 (expert ``g`` of 256 at ``g * 2048 * 7168``) would be proven inside
    its tensor and then read elsewhere."""
    if as_int(offset) is not None or str(offset.ty.dtype) != "int32" or \
            prover.is_host_expr(offset):
        return  # a constant, 64 bits, or the host's to compute (the encoder checks the base)
    wide = tvm.tirx.Cast("int64", offset)
    if not prover.establish(tvm.tirx.all(wide >= tvm.tirx.const(-(1 << 31), "int64"),
                                         wide < tvm.tirx.const(1 << 31, "int64")),
                            f"global-view-bounds ({buffer.name}'s offset in 32 bits)"):
        raise refuse("global-view-bounds", f"global view {buffer.name} starts at the 32-bit "
                     f"offset {offset}, which may pass 2^31 elements and wrap; compute it in "
                     "64 bits (T.Cast(\"int64\", ...))")


def _device_base_aligned(offset: Expr, width: int, prover: Prover) -> bool:
    """``data + offset`` computed on the device is provably 16-byte aligned: no host encode
    sees that address, so the proof is the only check it gets (a misaligned base faults)."""
    return prover.establish_divisible(prover.simplify(offset * width), 16,
                                      "global-address-align (device-side base)")


def _base_allowed(offset: Expr, width: int, prover: Prover) -> bool:
    """``data + offset`` may be the map's base: the host computes it, and it is not known to
    be off 16 bytes (16-byte aligned when constant; a symbolic offset the analyzer cannot
    refute is left to the encoder, which checks the base address at run time)."""
    if not prover.is_host_expr(offset):
        return False
    constant = as_int(offset)
    if constant is not None:
        return (constant * width) % 16 == 0
    return not prover.refutable(tvm.tirx.floormod(offset * width, 16) == 0)


def _fold_offset(dims: list[GlobalDim], offset: Expr, prover: Prover
                 ) -> list[GlobalDim] | None:
    """``offset`` as whole coordinates ``k`` along the view's own dims (static strides):
    the map's dims grow to ``k + size`` (same upper edges) and the region starts at
    ``k + start``. Valid only where the region cannot start before the view (a lower edge
    the map would no longer have) and where ``k`` is known on the host."""
    coordinates = _split_offset(offset, [d.stride for d in dims], [d.size for d in dims],
                                prover)
    if coordinates is None:
        return None
    out = []
    for dim, k in zip(dims, coordinates):
        if _is_zero(k, prover):
            out.append(dim)
            continue
        if not prover.is_host_expr(k) or not prover.prove(tvm.tirx.all(k >= 0,
                                                                        dim.start >= 0)):
            return None
        out.append(replace(dim, size=prover.simplify(dim.size + k),
                           start=prover.simplify(dim.start + k)))
    return out if _nested(out, prover) else None


def _nested(dims: list[GlobalDim], prover: Prover) -> bool:
    """Each dim's span ends before the next larger stride begins (``size * stride <=
    next stride``), as in any padded row-major tensor: a fold that grows a dim past that
    would describe overlapping rows, which the planner never asks the hardware for."""
    ordered = sorted((d for d in dims if as_int(d.size) != 1), key=lambda d: as_int(d.stride))
    return all(prover.prove(inner.size * inner.stride <= outer.stride)
               for inner, outer in zip(ordered, ordered[1:]))


def _split_offset(offset: Expr, strides: list, sizes: list, prover: Prover) -> list | None:
    """Whole coordinates ``k`` with ``sum(k[i] * strides[i]) == offset``, largest stride
    first, or None. Dims of size 1 take no part (their stride means nothing); the other
    strides must be distinct positive constants."""
    static = [as_int(s) for s in strides]
    used = [i for i, size in enumerate(sizes) if as_int(size) != 1]
    if any(static[i] is None or static[i] <= 0 for i in used) or len(
            {static[i] for i in used}) != len(used):
        return None
    coordinates: list = [0] * len(strides)
    rest: Expr = offset
    for index in sorted(used, key=lambda i: -static[i]):
        coordinates[index] = prover.simplify(tvm.tirx.floordiv(rest, static[index]))
        rest = prover.simplify(tvm.tirx.floormod(rest, static[index]))
    return coordinates if _is_zero(rest, prover) else None


def _in_argument(dims: list[GlobalDim], offset: Expr, prover: Prover, argument
                 ) -> list[GlobalDim] | None:
    """The region in the coordinates of the kernel argument the view aliases.

    For a view whose dims are some of the argument's dims (same strides, as ``A.sub[...]``
    and ``A.tile(...)`` make them): the offset is split along the argument's strides and
    added to the region's starts; the argument's own shape bounds the map. The region was
    proven inside the view (:func:`_bound`); here it must also be inside the argument.
    """
    if argument is None or not all(d.inside for d in dims):
        return None
    arg_dims = _pieces(_whole_region(argument), prover)
    starts = _split_offset(offset, [d.stride for d in arg_dims], [d.size for d in arg_dims],
                           prover)
    if starts is None:
        return None
    by_stride = {as_int(d.stride): i for i, d in enumerate(arg_dims) if as_int(d.size) != 1}
    extents = [1] * len(arg_dims)
    taken: set[int] = set()
    for dim in dims:
        if as_int(dim.size) == 1:
            continue
        index = by_stride.get(as_int(dim.stride))
        if index is None or index in taken:
            return None  # not a sub-box of the argument
        taken.add(index)
        starts[index] = prover.simplify(starts[index] + dim.start)
        extents[index] = dim.extent
    placed = []
    for arg_dim, start, extent in zip(arg_dims, starts, extents):
        dim = GlobalDim(arg_dim.size, arg_dim.stride, start, extent,
                        name=f"{argument.name} {arg_dim.name}")
        if not _inside(dim, prover):
            return None
        placed.append(dim)
    return placed


def _is_zero(value: Expr, prover: Prover) -> bool:
    return as_int(value) == 0 if as_int(value) is not None else prover.prove(
        tvm.tirx.EQ(value, tvm.tirx.const(0, value.ty.dtype)))


def _whole_region(buffer):
    return tvm.tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, s)
                                          for s in buffer.shape])


def _inside(dim: GlobalDim, prover: Prover) -> bool:
    return prover.prove(tvm.tirx.all(dim.start >= 0, dim.start + dim.extent <= dim.size))


def _bound(dims: list[GlobalDim], prover: Prover, direction: str, oob: str | None,
           checks: list[HostCheck]) -> list[GlobalDim]:
    """Record which dims the region provably stays inside; refuse what ``oob`` does not
    allow: without it the region must be inside every dim (proven, or, where only a value
    the host passes decides it, checked at launch), and a store may cross a dim's end but
    never start before it (the H100 faults)."""
    out = []
    for dim in dims:
        inside = tvm.tirx.all(dim.start >= 0, dim.start + dim.extent <= dim.size)
        if prover.establish(inside, f"region-bounds ({dim.name})"):
            out.append(replace(dim, inside=True))
            continue
        check = None if oob is not None else _launch_check(dim, prover)
        if check is not None:
            checks.append(check)
            out.append(replace(dim, inside=True))
            continue
        if oob is None:
            options = '"zero" or "nan"' if direction == "g2s" else '"skip"'
            raise refuse(
                "region-bounds",
                f"{dim.name}: region [{dim.start}, {dim.start} + {dim.extent}) is not provably "
                f"inside [0, {dim.size}); a tile that may cross the tensor's edge needs "
                f"oob={options}")
        if direction == "s2g" and not prover.establish(dim.start >= 0,
                                                       f"store-start ({dim.name})"):
            raise refuse(
                "region-bounds",
                f"{dim.name}: a store's region [{dim.start}, {dim.start} + {dim.extent}) may "
                "start before the tensor; TMA stores may cross a tensor's end, never its start "
                "(the hardware faults)")
        out.append(replace(dim, inside=False))
    return out


def _launch_check(dim: GlobalDim, prover: Prover) -> HostCheck | None:
    """The region's bound as a condition on host values, when only those leave it open.

    ``A[0:64, :]`` of a tensor of ``M`` rows needs ``64 <= M``; ``A[cta * 64:cta * 64 + 64,
    :]`` with ``cta < 8`` needs ``512 <= M``: the largest start the device ranges allow (a
    sound over-approximation) plus the extent. The start must still be provably >= 0.
    """
    if not prover.is_host_expr(dim.size) or not prover.prove(dim.start >= 0):
        return None
    if prover.is_host_expr(dim.start):
        end = prover.simplify(dim.start + dim.extent)
    else:
        bound = prover.analyzer.const_int_bound(dim.start)
        if abs(bound.max_value) >= 1 << 62:
            return None
        end = bound.max_value + dim.extent
    condition = prover.simplify(end <= dim.size)
    if as_int(condition) is not None or prover.refutable(condition):
        return None  # decided already: a constant, or provably out of bounds
    return HostCheck(condition, f"[region-bounds] {dim.name}: the copy needs {end} <= "
                     f"{dim.size} (its region [{dim.start}, {dim.start} + {dim.extent}))")


def _merge_whole(dims: list[GlobalDim], prover: Prover) -> list[GlobalDim]:
    """Merge every dim covered whole into its outer neighbour when the two are one run of
    memory (``stride_outer == stride_inner * size_inner``): then a whole ``uint8 [64, 8]``
    tensor is one 512-element dim, and the box rules see the run, not its rows."""
    merged: list[GlobalDim] = []
    for dim in reversed(dims):  # innermost first
        if merged:
            inner = merged[-1]
            whole = inner.inside and prover.prove(
                tvm.tirx.all(inner.start == 0, inner.size == inner.extent))
            if whole and prover.prove(dim.stride == inner.stride * inner.size) and _fits(
                    dim.size, inner.size, prover):
                merged[-1] = GlobalDim(
                    prover.simplify(dim.size * inner.size), inner.stride,
                    prover.simplify(dim.start * inner.size), dim.extent * inner.extent,
                    dim.inside, f"{dim.name} x {inner.name}")
                continue
        merged.append(dim)
    merged.reverse()
    return merged


def _fits(size_a: Expr, size_b: Expr, prover: Prover) -> bool:
    """``size_a * size_b`` is provably a legal tensor-map dim (at most 2^32 elements)."""
    a, b = as_int(size_a), as_int(size_b)
    if a is not None and b is not None:
        return a * b <= MAX_GLOBAL_DIM
    wide = tvm.tirx.Cast("int64", size_a) * tvm.tirx.Cast("int64", size_b)
    return prover.prove(wide <= tvm.tirx.const(MAX_GLOBAL_DIM, "int64"))
