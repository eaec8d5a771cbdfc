"""im2col: a load from the GEMM view of an NHWC activation, planned as TMA im2col issues.

An implicit-GEMM convolution multiplies ``A[M, K]`` by the filter, where row ``m`` of A is
an output pixel ``(n, p, q)`` and column ``k`` a filter tap and input channel ``(r, s, c)``:
``A[(n, p, q), (r, s, c)] = X[n, p*u + r*dh - ph, q*v + s*dw - pw, c]`` (zero outside X).
A kernel author declares that view over the activation's data, as a buffer::

    Xcol = T.decl_buffer((N * P * Q, R * S * C), dtype, X.data,
                         elem_offset=-(ph * W * C + pw * C),
                         layout=TileLayout(S[(N, P, Q, R, S, C) :
                                             (H*W*C, u*W*C, v*C, dh*W*C, dw*C, 1)]))

(:class:`tvm_tma.conv.Conv2dGeometry` computes it) and copies tiles of it like any matrix:
``Tx.copy_async(a_tile[:, :], Xcol[m0:m0 + BM, k0:k0 + BK], dispatch="tma", ...)``. The
layout is exact: every element of the view is that element of X; only the halo that padding
adds lies outside X, and there the view reads zeros (that is what padding means).

TMA's im2col mode moves exactly such a tile: ``pixelsPerColumn`` consecutive output pixels
(walking W, then H, then N inside a bounding box the map's corners draw around the tensor),
``channelsPerPixel`` channels each, read at one filter tap (the instruction's 16-bit
offsets). This module recognizes the view (:func:`recognize`) and derives everything the
hardware needs from it: the corners (``lower = -padding``, ``upper = padding - dilation *
(filter - 1)``), the traversal strides (the convolution's), the first pixel's coordinates
(``m0`` unravelled into ``(n, p, q)``, then ``(q*v - pw, p*u - ph)``), the tap offsets
(``k0 // C`` unravelled into ``(r, s)``, times the dilation) and the channel start. The
shared side is planned exactly as a tiled copy of a ``BM x BK`` tile (swizzle spans, issue
steps along the channels, every alignment rule), then re-expressed in im2col terms.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import tvm

from .errors import PlanError, refuse
from .global_view import GlobalDim, GlobalView
from .plan_types import Im2colMapSpec, TmaPlan
from .proofs import Expr, Prover, as_int
from .views import SharedView, buffer_tile, region_bounds, static_extents

#: im2col corner offsets are signed and narrower the more spatial dims the map has.
CORNER_BITS = {3: 16, 4: 8, 5: 5}
#: The instruction's tap offsets are unsigned 16-bit.
MAX_TAP_OFFSET = (1 << 16) - 1
#: An im2col map's element strides (the traversal strides) are 1 to 8.
MAX_TRAVERSAL_STRIDE = 8


@dataclass(frozen=True)
class ConvView:
    """A 2-D convolution's GEMM view over an NHWC activation (what :func:`recognize` read).

    ``argument_strides`` are X's element strides of N, H and W (C is contiguous).
    """

    batch: Expr
    height: Expr
    width: Expr
    channels: int
    filter: tuple[int, int]  # (R, S)
    stride: tuple[int, int]  # (u, v)
    dilation: tuple[int, int]
    padding: tuple[int, int]  # (ph, pw)
    out: tuple[int, int]  # (P, Q)
    argument_strides: tuple[Expr, Expr, Expr]
    #: The patch axes :func:`fold_patches` folded, in words (empty: none).
    folded: tuple[str, ...] = ()

    @property
    def rows(self) -> Expr:
        return self.batch * self.out[0] * self.out[1]

    @property
    def is_pointwise(self) -> bool:
        """A 1x1 filter at stride 1 without padding: output pixel (n, p, q) reads input
        pixel (n, p, q) alone, so the view is X read as an (N*H*W, C) matrix."""
        return self.filter == (1, 1) and self.stride == (1, 1) and self.padding == (0, 0)

    @property
    def cols(self) -> int:
        return self.filter[0] * self.filter[1] * self.channels

    @property
    def lower_corner(self) -> tuple[int, int]:
        """The bounding box's lower corner, driver order (W, H)."""
        return (-self.padding[1], -self.padding[0])

    @property
    def upper_corner(self) -> tuple[int, int]:
        """The bounding box's upper corner, driver order (W, H): the box holds exactly the
        positions of the filter's first tap for every output pixel."""
        (r, s), (dh, dw), (ph, pw) = self.filter, self.dilation, self.padding
        return (pw - dw * (s - 1), ph - dh * (r - 1))


@dataclass(frozen=True)
class LoadWindow:
    """What one im2col load reads: ``pixels`` output pixels from ``first_pixel``, at filter
    ``tap``, ``channels`` channels from ``first_channel`` (which may run past the tap's C
    from a 3-D view, :func:`plan_im2col`)."""

    first_pixel: Expr
    pixels: int
    tap: Expr
    first_channel: Expr
    channels: int


def _static(value: Expr, prover: Prover) -> int | None:
    return as_int(prover.simplify(value))


def recognize(region, argument, prover: Prover) -> ConvView | None:
    """The convolution whose GEMM view ``region``'s buffer is, or None when it is not one.

    A view is one when it is 2-D, aliases a 4-D kernel argument X (N, H, W, C) with
    contiguous channels, and its layout walks rows as (N, P, Q) and columns as (R, S, C)
    with the strides of the module docstring (TVM drops the pieces of extent 1: a 1x1 filter
    has no R or S piece). A view that reads like one but whose numbers do not make a
    convolution is refused (rule ``im2col``), naming what is off, unless its offset is 0:
    then it means no padding, and it is a plain view (a reshape of X), None.

    A 3-D view, (N*P*Q, taps, channels), is the same matrix with each tap's channels a
    dimension of their own (:func:`plan_im2col`: a load may then run past them, reading
    zeros); its last dimension must be one tap's channels as the map reads them: C, or
    ``S * C`` where the W patch axis folds (:func:`fold_patches`).
    """
    buffer = region.source
    if argument is None or len(buffer.shape) not in (2, 3) or len(argument.shape) != 4:
        return None
    if buffer.layout is None:
        return None
    try:
        grouped, separators = buffer.layout.group(list(buffer.shape))
    except (TypeError, ValueError, tvm.error.InternalError):
        return None
    x_strides = [iterator.stride for iterator in buffer_tile(argument).shard]
    if len(x_strides) != 4 or _static(x_strides[3], prover) != 1:
        return None
    s_n, s_h, s_w = (prover.simplify(stride) for stride in x_strides[:3])
    row_readings = _matches(grouped.shard[separators[0]:separators[1]],
                            (("N", s_n, True), ("P", s_h, False), ("Q", s_w, False)), prover)
    col_readings = _matches(grouped.shard[separators[1]:separators[-1]],
                            (("R", s_h, False), ("S", s_w, False), ("C", 1, True)), prover)
    readings = [(rows, cols) for rows in row_readings for cols in col_readings
                if cols["C"][0] != 1 and (set(rows) - {"N"} or set(cols) - {"C"})]
    if not readings:
        return None  # not a convolution's view, or a plain matrix over X (1x1, stride 1)
    view = f"view {buffer.name}"
    fits, failures = [], []
    for rows, cols in readings:
        for padding in _paddings(buffer.elem_offset, s_h, s_w, view, prover):
            try:
                fits.append(_reading(rows, cols, padding, argument, (s_n, s_h, s_w), view,
                                     prover))
            except PlanError as error:
                failures.append(error)
    if not fits:
        if _static(buffer.elem_offset, prover) == 0:
            # No convolution, and no padding the view could mean (its offset is 0): a plain
            # view of X (a reshape such as (N*H*W, C) whose layout TVM merged), whose every
            # element is where its layout puts it: the tiled planner's.
            return None
        raise failures[0]
    fits = list({_identity(conv): conv for conv in fits}.values())  # one after folding
    if len(fits) > 1:
        raise refuse("im2col", f"{view} reads as {len(fits)} different convolutions ("
                     + "; ".join(_describe(conv) for conv in fits[:3]) + f"): X's strides "
                     f"{prover.simplify(s_h)} (H) and {prover.simplify(s_w)} (W) do not tell "
                     "which filter taps and padding lie along H and which along W, so which "
                     "elements are padding is ambiguous; convolve an image of width above 1, "
                     "or without the unit dimension")
    return _check_traversal(_check_tap_dims(fits[0], buffer, _static(argument.shape[3], prover),
                                            view, prover), view)


def _check_tap_dims(conv: ConvView, buffer, channels: int, view: str,
                    prover: Prover) -> ConvView:
    """A 3-D view's last dimension is one tap's channels: X's ``channels``, or the
    ``S * C`` of a folded W patch axis (where it keeps X's C, each load stays inside one
    pixel's C: :func:`plan_im2col`)."""
    if len(buffer.shape) == 2:
        return conv
    last = _static(buffer.shape[2], prover)
    if last not in (conv.channels, channels):
        raise refuse("im2col", f"{view}: its last dimension ({buffer.shape[2]}) must be one "
                     f"filter tap's channels ({conv.channels}"
                     + (f", or X's {channels} a pixel" if channels != conv.channels else "")
                     + "): a 3-D view is (output pixels, taps, channels)")
    return conv


def _reading(rows: dict, cols: dict, padding: tuple[int, int], argument, strides: tuple,
             view: str, prover: Prover) -> ConvView:
    """The convolution one assignment of the view's pieces and one padding describe, or a
    refusal saying why its numbers do not make one."""
    batch, height, width, channels = (prover.simplify(e) for e in argument.shape)
    (n_view, _), (p_ext, u), (q_ext, v) = rows.get("N", (1, 1)), rows.get("P", (1, 1)), \
        rows.get("Q", (1, 1))
    (r_ext, dh), (s_ext, dw), (c_ext, _) = cols.get("R", (1, 1)), cols.get("S", (1, 1)), \
        cols["C"]
    if None in (as_int(r_ext), as_int(s_ext), as_int(c_ext)) or as_int(channels) != c_ext:
        raise refuse("im2col", f"{view}: its columns must be (R, S, C) with C = {channels}, "
                     f"the channels of {argument.name}; got ({r_ext}, {s_ext}, {c_ext})")
    conv = ConvView(batch, height, width, c_ext, (r_ext, s_ext), (u, v), (dh, dw), padding,
                    (_static(p_ext, prover), _static(q_ext, prover)), strides)
    if None in conv.out:
        raise refuse("im2col", f"{view}: its output extents ({p_ext}, {q_ext}) must be static")
    conv = _unit_outputs(conv, view)
    _check_shape(conv, n_view, p_ext, q_ext, view, prover)
    return fold_patches(conv, prover)


def _identity(conv: ConvView) -> tuple:
    """What tells two readings apart: equal identities read every element alike (two
    readings of a one-patch image fold into one)."""
    return tuple(str(getattr(conv, f.name)) for f in fields(ConvView) if f.name != "folded")


def _describe(conv: ConvView) -> str:
    (r, s), (ph, pw), (dh, dw) = conv.filter, conv.padding, conv.dilation
    return f"filter {r}x{s}, padding {ph}x{pw}, dilation {dh}x{dw}"


def _matches(iterators, slots, prover: Prover) -> list[dict]:
    """Every assignment of a view's pieces (outer first) to named slots, in slot order: each
    slot is (name, unit stride, exact); a piece fits a slot when its stride is the unit times
    1..16 (times 1 exactly for an ``exact`` slot). Each is {name: (extent, multiple)} for the
    slots used (the others have extent 1)."""
    pieces = list(iterators)

    def fit(index: int, slot: int) -> list[dict]:
        if index == len(pieces):
            return [{}]
        found = []
        for chosen in range(slot, len(slots)):
            name, unit, exact = slots[chosen]
            multiple = _multiple(pieces[index].stride, unit, prover)
            if multiple is None or (exact and multiple != 1):
                continue
            entry = (prover.simplify(pieces[index].extent), multiple)
            found += [{name: entry, **rest} for rest in fit(index + 1, chosen + 1)]
        return found

    return fit(0, 0)


def _unit_outputs(conv: ConvView, view: str) -> ConvView:
    """A convolution with one output row (or column) hides its stride: its view has no P
    (Q) piece. Any stride that leaves one output position works; take the smallest (a
    filter covering the unpadded axis exactly is one patch: :func:`fold_patches` folds
    it whatever the stride)."""
    (r, s), (dh, dw), (ph, pw) = conv.filter, conv.dilation, conv.padding
    spans = (as_int(conv.height + 2 * ph - dh * (r - 1)),
             as_int(conv.width + 2 * pw - dw * (s - 1)))
    stride = list(conv.stride)
    for axis, (out, span) in enumerate(zip(conv.out, spans)):
        if out == 1 and span == 1:
            stride[axis] = 1  # two readings of one position agree
        elif out == 1 and span is not None and span > 1:
            if span > MAX_TRAVERSAL_STRIDE:
                raise refuse("im2col", f"{view}: one output {'row' if axis == 0 else 'column'}"
                             f" over {span} positions needs a traversal stride of {span} "
                             f"(at most {MAX_TRAVERSAL_STRIDE})")
            stride[axis] = span
    return replace(conv, stride=tuple(stride))


def fold_patches(conv: ConvView, prover: Prover) -> ConvView:
    """The same view with each patch axis folded (``tvm_tma.conv.Conv2dGeometry.
    patches_folded`` is this for a layer's numbers: the conv kernel picks its K blocks
    from it). A W axis whose filter width is its stride (``s == v > 1``, or one patch:
    ``Q == 1``), undilated and unpadded, over whole patches (``W == Q * s``) of contiguous
    pixels reads each run of
    ``s`` pixels (``s * C`` contiguous elements) once: it is one pixel of ``s * C``
    channels of a ``W / s``-wide image under a one-tap filter. An H axis likewise
    (``r == u > 1``, ``H == P * r``, images stacked densely) is ``N * P`` images of ``r``
    rows, one output row each. Every element of the view is where it was (column ``(r,
    s, c)`` is column ``(r, s * C + c)``): only the map that walks it changes, to
    traversal strides of 1 (an unfolded stride above 8 has no im2col map) and loads of
    up to ``s * C`` channels instead of ``C``."""
    (r, s), (u, v), (dh, dw), (ph, pw) = conv.filter, conv.stride, conv.dilation, conv.padding
    (p, q), (s_n, s_h, s_w) = conv.out, conv.argument_strides
    batch, height, width = (_static(e, prover) for e in (conv.batch, conv.height, conv.width))
    pixel = _static(s_w, prover)
    folded = []
    if (s > 1 and (v == s or q == 1) and dw == 1 and pw == 0 and width == q * s
            and pixel == conv.channels):
        conv = replace(conv, width=q, channels=s * conv.channels, filter=(r, 1),
                       stride=(u, 1), argument_strides=(s_n, s_h, prover.simplify(s * s_w)))
        folded.append(f"W in patches of {s} pixels ({conv.channels} channels a pixel)")
    if (r > 1 and (u == r or p == 1) and dh == 1 and ph == 0 and height == p * r
            and batch is not None and prover.prove(tvm.tirx.EQ(s_n, s_h * height))):
        conv = replace(conv, batch=batch * p, height=r, stride=(1, conv.stride[1]),
                       out=(1, q), argument_strides=(prover.simplify(r * s_h), s_h,
                                                     conv.argument_strides[2]))
        folded.append(f"H in patches of {r} rows ({batch * p} images of {r} rows)")
    return replace(conv, folded=tuple(folded)) if folded else conv


def _check_traversal(conv: ConvView, view: str) -> ConvView:
    """An im2col map walks pixels at its element strides, 1 to 8: a stride above that the
    folding did not remove has no map (the encoder's ``element-stride`` rule, refused here
    at planning time, where the view is named)."""
    for axis, stride in zip("HW", conv.stride):
        if stride > MAX_TRAVERSAL_STRIDE:
            raise refuse("im2col", f"{view}: stride {stride} along {axis} (filter "
                         f"{conv.filter[0]}x{conv.filter[1]}, padding {conv.padding[0]}x"
                         f"{conv.padding[1]}) is above the im2col traversal stride's "
                         f"{MAX_TRAVERSAL_STRIDE}; only a patch axis (filter = stride, no "
                         "padding or dilation, a whole number of patches) folds to stride 1")
    return conv


def _multiple(stride: Expr, unit: Expr, prover: Prover) -> int | None:
    """``stride / unit`` when it is a positive whole number, else None."""
    for factor in range(1, 17):
        if prover.prove(tvm.tirx.EQ(stride, unit * factor)):
            return factor
    return None


def _paddings(elem_offset: Expr, s_h: Expr, s_w: Expr, view: str, prover: Prover
              ) -> list[tuple[int, int]]:
    """Every (ph, pw) >= 0 with ``-(ph * s_h + pw * s_w)`` the view's offset."""
    offset, row, pixel = _static(elem_offset, prover), _static(s_h, prover), _static(s_w,
                                                                                    prover)
    if offset is None or row is None or pixel is None:
        raise refuse("im2col", f"{view}: its offset {elem_offset} and {prover.simplify(s_h)}-"
                     "element rows must be static (the padding is part of the tensor map)")
    # Every split: a padding wider than the image reads like one more row of padding
    # (ph, pw + W) ~ (ph + 1, pw); the shapes then tell them apart, or the view is ambiguous.
    found = [(pad_h, (-offset - pad_h * row) // pixel)
             for pad_h in range(max(-offset, 0) // row + 1)
             if (-offset - pad_h * row) % pixel == 0]
    if offset > 0 or not found:
        raise refuse("im2col", f"{view}: elem_offset {offset} is not -(ph * {row} + pw * "
                     f"{pixel}) for a padding (ph, pw)")
    return found


def _check_shape(conv: ConvView, n_view, p_ext, q_ext, view: str, prover: Prover) -> None:
    (r, s), (u, v), (dh, dw), (ph, pw) = conv.filter, conv.stride, conv.dilation, conv.padding
    want_p = (conv.height + 2 * ph - dh * (r - 1) - 1) // u + 1
    want_q = (conv.width + 2 * pw - dw * (s - 1) - 1) // v + 1
    for name, got, want in (("N", n_view, conv.batch), ("P", p_ext, want_p),
                            ("Q", q_ext, want_q)):
        if not prover.prove(tvm.tirx.EQ(got, want)):
            raise refuse("im2col", f"{view}: its rows walk {name} = {got}, but the "
                         f"convolution (filter {r}x{s}, stride {u}x{v}, padding {ph}x{pw}, "
                         f"dilation {dh}x{dw}) over {conv.height}x{conv.width} has "
                         f"{name} = {prover.simplify(want)}")
    bits = CORNER_BITS[4]
    for corner in (*conv.lower_corner, *conv.upper_corner):
        if not -(1 << (bits - 1)) <= corner < (1 << (bits - 1)):
            raise refuse("im2col", f"{view}: corner {corner} (padding {ph}x{pw}, filter "
                         f"{r}x{s}) is outside the {bits}-bit range of a rank-4 im2col map")


def plan_im2col(conv: ConvView, shared: SharedView, global_region, prover: Prover,
                oob: str | None, plan_tiled) -> TmaPlan:
    """The im2col plan of a load from ``conv``'s GEMM view into the ``shared`` tile.

    From a 2-D view the columns ``[k0, k0 + bk)`` must lie in one tap's channels. From a
    3-D view (pixels, taps, channels) the load reads one tap ``t`` and channels ``[c0, c0 +
    bk)``, which may run past the tap's channels where ``oob`` is given: those columns lie
    outside the view and read the fill, as the padding halo does (the hardware fills
    channels past the map's C). A K block wider than C then reads each tap in one load (24
    channels in one 32-wide load, not three 8-wide ones).

    ``plan_tiled(global_view)`` plans the shared side as a tiled copy of the same tile (the
    planner's own L2/L3 with every rule); its box and issue steps are re-expressed here.
    """
    view = f"view {global_region.source.name}"
    window = _load_window(conv, global_region, view, prover)
    m0, bm, tap = window.first_pixel, window.pixels, window.tap
    c0, bk = window.first_channel, window.channels
    channels = conv.channels
    channels_inside = prover.establish(c0 + bk <= channels, "im2col (columns in one tap)")
    if not channels_inside and (len(global_region.region) == 2 or oob is None):
        raise refuse("im2col", f"{view}: columns [{c0}, {c0} + {bk}) of tap {tap} must lie "
                     f"in one filter tap's {channels} channels"
                     + (" (a K block divides C and starts on it)"
                        if len(global_region.region) == 2 else
                        "; channels past them read zeros only with oob=\"zero\" or \"nan\""))
    rows_inside = prover.establish(tvm.tirx.all(m0 >= 0, m0 + bm <= conv.rows),
                                   "region-bounds (output pixels)")
    if not rows_inside:
        if oob is None:
            raise refuse("region-bounds", f"{view}: rows [{m0}, {m0} + {bm}) are not provably "
                         f"inside [0, {prover.simplify(conv.rows)}); a tile of output pixels "
                         "that may run past the last one needs oob=\"zero\" or \"nan\"")
        if not prover.establish(m0 >= 0, "region-bounds (first output pixel)"):
            raise refuse("region-bounds", f"{view}: rows [{m0}, {m0} + {bm}) may start before "
                         "the first output pixel")
    # The shared side, as a tiled copy of the tile: pixels (outer) by channels. The pixel
    # stride is any 16-byte multiple that keeps the two dims apart (never merged or folded).
    pixel_stride = 2 * max(channels, bk)
    tiled = plan_tiled(GlobalView(
        dtype=shared.dtype, element_bytes=shared.element_bytes,
        dims=(GlobalDim(prover.simplify(conv.rows), pixel_stride, m0, bm, rows_inside,
                        "output pixels"),
              GlobalDim(channels, 1, c0, bk, channels_inside, "channels")),
        oob=oob, direction="g2s"))
    edges = ((0,) if not channels_inside else ()) + ((3,) if not rows_inside else ())
    return _as_im2col(conv, tiled, m0, tap, bm, oob, edges, view, prover)


def _load_window(conv: ConvView, global_region, view: str, prover: Prover) -> LoadWindow:
    """The window of a load from a 2-D view (columns ``k0`` on: tap ``k0 // C``) or a
    3-D one (one tap of the middle dimension; a last dimension of X's C under a folded W
    is a folded tap's pixel), each bound proven or refused by name."""
    starts, extents = region_bounds(global_region)
    starts = [prover.simplify(start) for start in starts]
    sizes = static_extents(extents, "global")
    channels = conv.channels
    if len(starts) == 2:
        (m0, k0), (bm, bk) = starts, sizes
        if not prover.establish(k0 >= 0, "im2col (columns in the view)") or not \
                prover.establish(k0 + bk <= conv.cols, "im2col (columns in the view)"):
            raise refuse("region-bounds", f"{view}: columns [{k0}, {k0} + {bk}) are not "
                         f"provably inside [0, {conv.cols})")
        return LoadWindow(m0, bm, prover.simplify(tvm.tirx.floordiv(k0, channels)),
                          prover.simplify(tvm.tirx.floormod(k0, channels)), bk)
    (m0, tap, c0), (bm, one_tap, bk) = starts, sizes
    taps = conv.cols // channels
    width = _static(global_region.source.shape[2], prover)
    if one_tap != 1:
        raise refuse("im2col", f"{view}: a load reads one filter tap; the region takes "
                     f"{one_tap} of them")
    if not prover.establish(tvm.tirx.all(tap >= 0, tap * width < taps * channels),
                            "region-bounds (filter taps)"):
        raise refuse("region-bounds", f"{view}: tap {tap} is not provably inside [0, "
                     f"{taps * channels // width})")
    if not prover.establish(c0 >= 0, "region-bounds (first channel)"):
        raise refuse("region-bounds", f"{view}: channels [{c0}, {c0} + {bk}) may start "
                     "before the first")
    if width != channels:
        # X's C a pixel under a folded W: the load must stay inside the pixel (past it are
        # the next pixel's channels, which the folded map reads as this tap's).
        if not prover.establish(c0 + bk <= width, "im2col (columns in one pixel)"):
            raise refuse("im2col", f"{view}: channels [{c0}, {c0} + {bk}) of a {width}-"
                         f"channel pixel must lie inside it: the W patch axis folds "
                         f"({channels} channels a tap), so declare the view's last "
                         f"dimension {channels} to read past a tap's channels")
        k0 = prover.simplify(tap * width + c0)
        return LoadWindow(m0, bm, prover.simplify(tvm.tirx.floordiv(k0, channels)),
                          prover.simplify(tvm.tirx.floormod(k0, channels)), bk)
    return LoadWindow(m0, bm, tap, c0, bk)


def _as_im2col(conv: ConvView, tiled: TmaPlan, m0, tap, bm: int, oob: str | None,
               edges: tuple[int, ...], view: str, prover: Prover) -> TmaPlan:
    spec = tiled.tensor_map
    if spec.rank != 2 or spec.box_dims[1] != bm or any(
            axis.coord_dim != 0 for axis in tiled.issue_axes):
        raise refuse("im2col", f"{view}: a block of {bm} output pixels must land as one "
                     f"column of pixels per load (at most 256); the tile needs box "
                     f"{list(spec.box_dims)} with steps along "
                     f"{sorted({axis.coord_dim for axis in tiled.issue_axes})}")
    if tiled.notes:  # the planner promoted the element type: the channels do not fit a box
        raise refuse("im2col", f"{view}: the channels of one load ({spec.box_dims[0]}) "
                     "must fit one box without promoting the element type")
    (r, s), (u, v), (dh, dw), (ph, pw) = conv.filter, conv.stride, conv.dilation, conv.padding
    p, q = conv.out
    pixel = tvm.tirx.floormod(m0, p * q)
    coordinates = (
        tiled.coordinates[0],
        prover.simplify(tvm.tirx.floormod(pixel, q) * v - pw),
        prover.simplify(tvm.tirx.floordiv(pixel, q) * u - ph),
        prover.simplify(tvm.tirx.floordiv(m0, p * q)),
    )
    offsets = (prover.simplify(tvm.tirx.floormod(tap, s) * dw),
               prover.simplify(tvm.tirx.floordiv(tap, s) * dh))
    for offset in offsets:
        if not prover.establish(tvm.tirx.all(offset >= 0, offset <= MAX_TAP_OFFSET),
                                "im2col (16-bit tap offsets)"):
            raise refuse("im2col", f"{view}: tap offset {offset} is not provably a 16-bit "
                         "value")
    s_n, s_h, s_w = conv.argument_strides
    element_bytes = spec.element_bytes
    im2col_spec = Im2colMapSpec(
        dtype=spec.dtype,
        global_dims=(conv.channels, conv.width, conv.height, conv.batch),
        global_strides=tuple(prover.simplify(st * element_bytes) for st in (s_w, s_h, s_n)),
        lower_corner=conv.lower_corner,
        upper_corner=conv.upper_corner,
        channels_per_pixel=spec.box_dims[0],
        pixels_per_column=bm,
        element_strides=(1, v, u, 1),
        swizzle=spec.swizzle,
        l2_promotion=spec.l2_promotion,
        oob_fill=1 if oob == "nan" else 0,
    )
    return replace(tiled, tensor_map=im2col_spec, coordinates=coordinates,
                   im2col_offsets=offsets, edge_dims=edges,
                   notes=(f"im2col: filter {r}x{s}, stride {u}x{v}, padding {ph}x{pw}, "
                          f"dilation {dh}x{dw}, output {p}x{q}"
                          + "".join(f"; folded {axis}" for axis in conv.folded),))
