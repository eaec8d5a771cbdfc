"""A conv2d's A operand as halo tiles: each tile's input rows loaded once, every filter tap
read from them by the MMAs' descriptors.

The im2col loads of :mod:`.conv2d` read every input pixel once per filter tap (nine times
for a 3x3 filter) and ask the L2 for each pixel's channels separately. Where a pixel is a
few channels (24 or 40: 48 or 80 bytes, off the 32-byte sectors) that is the bound:
``ncu`` counted 5.31 M L2 requests for N=16 112x112x24 -> 64 against the 1.06 M of
cuDNN's kernel (``benchmarks/RESULTS.md`` 6z6, 6z8). A halo tile is read once: one tiled
TMA load per output tile brings the input rows the tile's taps touch, and each tap's A
tile is the same shared memory at another offset.

**The layout.** The tile's output pixels are ``rows`` output rows by ``cols`` columns of
one image; its input is ``halo_rows = rows + (R - 1) * dilation`` rows by ``width = cols +
(S - 1) * dilation`` columns (padding included: the load starts ``padding`` before the
tile's first pixel and reads zeros outside the image). The MMAs read it as **channel
planes**: plane ``c8`` holds channels ``8 c8 .. 8 c8 + 7`` of every halo pixel, 16 bytes
a pixel, pixels row-major. Pixel ``(y, x)`` of the halo sits at ``y * width + x`` of each
plane, so the accumulator row ``i = a * width + b`` (output row ``a``, column ``b`` of the
tile) reads tap ``(r, s)`` at ``i + r * dh * width + s * dw``: the same **linear** map for
every row. That is exactly wgmma's unswizzled K-major layout (core matrices of 8 rows of 16
bytes, 128 bytes apart along M: the stride byte offset; the second 8 channels of a k16
step the leading byte offset further), so each k16 step's A is a descriptor into the
planes (:meth:`HaloTiling.mma_operand`).

**K folded over the taps** (:attr:`HaloTiling.folded`, the default): the filter is read as
it is, (K, R*S*C), and k16 step ``i`` reads 8-channel groups ``2i`` and ``2i + 1`` of the
(tap, channel) order, group ``g`` plane ``g % (C/8)`` at tap ``g // (C/8)``'s offset: a 3x3
layer of 24 channels takes 14 k16 steps a tile, not the 18 of taps padded to 32 columns
(benchmarks/RESULTS.md 6z18: 1.04-1.63x on 24 of 25 layers). The leading byte offset is
unsigned and the second group of a step that crosses a tap (the last plane of one, plane
0 of the next) lies at a lower address, so with an odd number of planes plane 0 is stored
again after the last one; a second group past K reads a zeroed region after the planes,
and a step wholly past K runs no MMA. Otherwise (a K block the caller chose) each tap's
channels are padded to ``planes * 8`` columns, the planes past C zeroed, and a K step is
one tap's block of planes.

**The load.** The TMA moves a box a row at a time, and its rate is rows, not bytes, for
short rows: ``scratch/s33/rowrate.py`` (streaming copies, H200) moved 16-byte rows at 700-870
rows a microsecond an SM (1.5-1.8 TB/s), 48-byte rows at 560 (3.5-3.6 TB/s, the DRAM's).
A box of planes (a 5-D view (N, C/8, H, W, 8): 16 bytes a row) costs ``C / 8`` rows a
pixel, so the halo is loaded **pixel-major** instead, one row a pixel ((C, W, H, N) box
``(C, width, halo_rows)``: the activation's own layout) into a raw slot, and the
producer warpgroup's three idle warps (:data:`TRANSPOSERS` threads) copy it into the
planes, 16 bytes a thread at a time (reads contiguous, each 16-byte chunk to its plane),
fence it into the async proxy and arrive on the planes' barrier (with K folded and C/8
odd, chunk 0 of each pixel twice: its plane and the copy). Planes past C (a tap padded
to whole K blocks: 24 channels in 32), or with K folded the region after the planes, are
zeroed once. So a tile has two rings of
:data:`HALO_STAGES` slots beside the GEMM's: raw slots (TMA -> transposers) and plane
slots (transposers -> consumers).

Rows ``i`` with ``b >= cols`` (the ``(S - 1) * dilation`` columns between two output rows
of the tile) and rows past ``rows * width`` compute garbage that is never stored: the
epilogue stores the C stage as (``rows``, ``box_cols``, channels) of the (N, P, Q, K)
output, and a tile of whole output rows (``cols == Q``) stores ``box_cols = width``
columns whose last ``(S - 1) * dilation`` fall past Q (the store skips them); a tile of
one row segment (``rows == 1``) stores its ``cols`` columns only, and a segment of
several rows (a row wider than a tile) one store a row, each ``cols`` columns from
``a * width`` of the stage (``width`` a multiple of 8: a whole swizzle period).

:class:`HaloTiling` is that plan for one layer and tile height (:func:`halo_tiling`
chooses rows and columns); :mod:`.gemm` runs it (the raw and plane rings, one halo a
tile, and the transposers), :mod:`.wgmma` addresses it, :mod:`.epilogue` stores through
it.
Stride 1 only: a stride would make the taps' pixels every other halo pixel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm.script import tirx as T

from tvm_tma.conv import Conv2dGeometry
from tvm_tma.pipeline import TmaPipeline
from tvm_tma.planner.context import MAX_BOX

#: Halo slots: the producer loads tile j + 1's halo while the consumers read tile j's.
HALO_STAGES = 2
#: Channels a plane holds: one 16-byte row of a wgmma core matrix of 16-bit elements.
PLANE_CHANNELS = 8
#: Bytes of one halo pixel in one plane (16-bit elements).
PLANE_PIXEL_BYTES = 16
#: Alignment of each halo slot in shared memory (the TMA destination's, generously).
SLOT_ALIGN = 1024
#: Threads that copy a raw halo into its planes: warps 1-3 of the producer warpgroup
#: (warp 0's first thread issues the TMA loads).
TRANSPOSERS = 96
#: The first of them (thread index).
FIRST_TRANSPOSER = 32


@dataclass(frozen=True)
class HaloTiling:
    """How a stride-1 conv2d's output is cut into halo tiles (see the module docstring)."""

    #: Images, output rows and columns (N, P, Q), channels.
    batch: int
    out_rows: int
    out_cols: int
    channels: int
    #: Filter rows and columns, padding and dilation (rows, columns).
    taps_r: int
    taps_s: int
    padding: tuple[int, int]
    dilation: tuple[int, int]
    #: Output rows and columns of a tile.
    rows: int
    cols: int
    #: Channel planes: a tap's K columns over 8 (those past C read zeros); with
    #: :attr:`folded` K, C over 8.
    planes: int
    #: The MMAs' rows a tile takes (``GemmConfig.block_m``): ``rows * width`` and the
    #: garbage rows after them.
    block_m: int
    #: K over the taps unpadded (``R * S * C`` columns, the filter as it is): each k16
    #: step reads the next two 8-channel groups of the (tap, channel) order, the second
    #: one tap further where it crosses a tap (:meth:`mma_operand`). Otherwise each tap's
    #: channels are padded to ``planes * 8`` columns (``GemmConfig.tap_columns``).
    folded: bool = False

    @property
    def width(self) -> int:
        """Halo columns: the tile's columns and the filter's reach past them."""
        return self.cols + (self.taps_s - 1) * self.dilation[1]

    @property
    def halo_rows(self) -> int:
        return self.rows + (self.taps_r - 1) * self.dilation[0]

    @property
    def box_cols(self) -> int:
        """Columns a tile's store writes per output row: the whole halo width on a tile of
        whole output rows (the columns past Q are skipped), else the tile's columns (a
        row segment: the garbage rows follow them)."""
        return self.width if self.cols == self.out_cols else self.cols

    @property
    def row_stores(self) -> int:
        """Stores a C stage takes: one (whole output rows, or a one-row segment), or one
        an output row of a segment of several rows (each row's ``cols`` pixels sit
        ``width`` rows of the stage apart; one store of them all would write the garbage
        columns between them over the next segment's pixels)."""
        return self.rows if self.rows > 1 and self.cols < self.out_cols else 1

    @property
    def tiles_down(self) -> int:
        return math.ceil(self.out_rows / self.rows)

    @property
    def tiles_across(self) -> int:
        return math.ceil(self.out_cols / self.cols)

    @property
    def tiles(self) -> int:
        return self.batch * self.tiles_down * self.tiles_across

    @property
    def plane_pixels(self) -> int:
        return self.halo_rows * self.width

    @property
    def load_bytes(self) -> int:
        """Bytes one halo load delivers: its box of pixels, zero fill included."""
        return self.halo_rows * self.width * self.channels * 2

    @property
    def raw_slot_bytes(self) -> int:
        """Bytes of one raw (pixel-major) halo slot."""
        return math.ceil(self.load_bytes / SLOT_ALIGN) * SLOT_ALIGN

    @property
    def copy_plane(self) -> bool:
        """Folded K over an odd number of planes: a k16 step that crosses a tap reads the
        last plane of one tap and the first of the next, a leading byte offset apart that
        must be positive (the descriptor's field is unsigned), so plane 0 is stored again
        after the last one (:meth:`mma_operand`)."""
        return self.folded and self.planes % 2 == 1

    @property
    def stored_planes(self) -> int:
        """Planes a slot holds: :attr:`planes`, and the copy of plane 0 (:attr:`copy_plane`)."""
        return self.planes + self.copy_plane

    @property
    def zero_pixels(self) -> int:
        """Folded K: a zeroed region after the stored planes, as many 16-byte rows as a
        tile has MMA rows, that a k16 step's second 8 channels read where they lie past K
        (an odd number of 8-channel groups: R * S * C / 8); exact zeros, never input data
        (an Inf times B's zero fill would be NaN). It also takes the last plane's
        :attr:`slack_pixels`. Padded taps zero their planes past C instead."""
        return self.block_m if self.folded else 0

    @property
    def zero_start(self) -> int:
        """Start of the zeroed region (:attr:`zero_pixels`) in a slot, in 16-byte units."""
        return self.stored_planes * self.plane_pixels

    @property
    def slack_pixels(self) -> int:
        """Pixels after the last plane that garbage rows read: the last tap reaches
        ``(R - 1) dh * width + (S - 1) dw`` past a row, and rows run to ``block_m``."""
        reach = (self.taps_s - 1) * self.dilation[1] + self.block_m
        return max(0, reach - self.rows * self.width)

    @property
    def slot_bytes(self) -> int:
        tail = max(self.slack_pixels, self.zero_pixels)
        raw = (self.stored_planes * self.plane_pixels + tail) * PLANE_PIXEL_BYTES
        return math.ceil(raw / SLOT_ALIGN) * SLOT_ALIGN

    @property
    def slot_elements(self) -> int:
        """16-bit elements of one slot (the slot buffer's inner extent)."""
        return self.slot_bytes // 2

    @property
    def taps(self) -> int:
        return self.taps_r * self.taps_s

    # -- the load ------------------------------------------------------------------------
    @property
    def raw_shape(self) -> tuple[int, int, int]:
        """A raw slot: (halo rows, width, C), pixel-major as the activation."""
        return (self.halo_rows, self.width, self.channels)

    def coordinates(self, tile):
        """(image, first output row, first output column) of halo tile ``tile`` (an
        expression): tiles walk columns, then rows, then images."""
        per_image = self.tiles_down * self.tiles_across
        rest = tile % per_image
        return (tile // per_image, rest // self.tiles_across * self.rows,
                rest % self.tiles_across * self.cols)

    def load_region(self, activation, tile):
        """The region of the (N, H, W, C) ``activation`` tile ``tile``'s halo load reads:
        from ``padding`` before the tile's first output pixel (zeros outside)."""
        n, p0, q0 = self.coordinates(tile)
        y0, x0 = p0 - self.padding[0], q0 - self.padding[1]
        return activation[n, y0:y0 + self.halo_rows, x0:x0 + self.width, :]

    # -- the MMAs ------------------------------------------------------------------------
    def tap_start(self, k_step, block_k: int):
        """Start of K step ``k_step``'s A tile in its slot, in 16-byte units: the tap's
        offset in the halo plus the first plane of its channel block (K steps walk the
        taps, ``tap_columns / block_k`` blocks a tap)."""
        blocks = self.planes * PLANE_CHANNELS // block_k
        tap, block = k_step // blocks, k_step % blocks
        return (self.tap_offset(tap)
                + block * (block_k // PLANE_CHANNELS) * self.plane_pixels)

    def tap_offset(self, tap):
        """Pixels from a row's own pixel to its tap ``tap`` (row-major ``r * S + s``) in
        the halo: ``r * dh * width + s * dw``, increasing with the tap."""
        r, s = tap // self.taps_s, tap % self.taps_s
        return r * self.dilation[0] * self.width + s * self.dilation[1]

    @property
    def groups(self) -> int:
        """8-channel groups of K: taps times planes (folded K: ``R * S * C / 8``)."""
        return self.taps * self.planes

    def mma_operand(self, k_step, kk, block_k: int):
        """(start, leading byte offset, live) of the A operand of k16 step ``kk`` of K step
        ``k_step`` (expressions, or ints), in 16-byte units from the slot's first pixel:
        its first 8 channels' core matrices begin at ``start`` (plus the row), its second
        8 channels' ``lead`` further. ``live`` is False for a k16 step wholly past K (no
        MMA is issued for it).

        Padded taps: the K step's tap and channel block (:meth:`tap_start`), a plane
        apart. Folded K: 8-channel group ``g`` (tap ``g // planes``, plane ``g %
        planes``) sits at ``plane * plane_pixels + tap_offset(tap)``; the step reads
        groups ``2 (k_step * block_k / 16 + kk)`` and the next one. Where that one is
        the next tap's plane 0 it is read from the copy after the last plane
        (:attr:`copy_plane`: its address is past the first group's, as the unsigned
        leading offset needs: the taps' offsets increase); past K, from the zeroed region
        (:attr:`zero_pixels`)."""
        if not self.folded:
            return (self.tap_start(k_step, block_k) + kk * 2 * self.plane_pixels,
                    self.plane_pixels, True)
        planes, pitch = self.planes, self.plane_pixels
        first = k_step * (block_k // PLANE_CHANNELS) + 2 * kk
        second = first + 1
        start = first % planes * pitch + self.tap_offset(first // planes)
        # The second group's plane: its own, or the copy of plane 0 after the last one.
        plane = second % planes + _select(second % planes == 0, planes, 0)
        inside = plane * pitch + self.tap_offset(second // planes)
        lead = _select(second < self.groups, inside, self.zero_start) - start
        return start, lead, first < self.groups

    # -- the store -----------------------------------------------------------------------
    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        """The (N*P*Q, K) output seen as (N, P, Q) pixels; the channels are appended."""
        return (self.batch, self.out_rows, self.out_cols)

    def store_region(self, output, tile, n0, columns: int, row: int = 0):
        """The region of the (N, P, Q, K) ``output`` a store of tile ``tile``'s C stage
        writes: ``rows`` output rows (or, where a C stage takes :attr:`row_stores`, its
        ``row``-th) by ``box_cols`` columns by ``columns`` channels from ``n0``."""
        n, p0, q0 = self.coordinates(tile)
        rows = self.rows // self.row_stores
        p = p0 + row
        return output[n, p:p + rows, q0:q0 + self.box_cols, n0:n0 + columns]

    def stage_start(self, row: int = 0) -> int:
        """First row of the C stage store ``row`` reads (:attr:`row_stores`)."""
        return row * self.width if self.row_stores > 1 else 0

    @property
    def stored_rows(self) -> int:
        """Rows of the C stage a store reads: its output rows' runs of ``box_cols``."""
        return self.rows // self.row_stores * self.box_cols


def halo_tiling(geometry: Conv2dGeometry, block_m: int, tap_columns: int,
                segments: bool = False) -> HaloTiling:
    """The halo tiles of a stride-1 layer on ``block_m``-row MMAs: whole output rows
    where a row and the filter's reach fit ``block_m`` (as many rows a tile as fit,
    evened out over the tiles an image needs), else row segments (:func:`_segment`:
    one row, or several rows of a halo width a multiple of 8, whichever loads the
    fewest halo pixels). ``segments``: segments of several rows even where a whole row
    fits, for a layer whose whole-row slots (the halo rows of a wide image of many
    channels) do not fit shared memory. ``tap_columns`` 0: K folded over the taps (R * S
    * C columns, :attr:`HaloTiling.folded`), else each tap's channels padded to it.
    Raises ValueError where the channels are no multiple of 8, the K columns of a tap no
    whole planes, or (``segments``) no segment of several rows fits ``block_m``."""
    c, p, q, s, dilation = (geometry.c, geometry.p, geometry.q, geometry.s,
                            geometry.dilation)
    folded = tap_columns == 0
    if folded:
        tap_columns = c
    if c % PLANE_CHANNELS or tap_columns % PLANE_CHANNELS or tap_columns < c:
        raise ValueError(f"halo tiles: C={c} and the tap's K columns {tap_columns} must be "
                         f"multiples of {PLANE_CHANNELS} with C <= {tap_columns} (16-byte "
                         f"channel planes)")
    reach = (s - 1) * dilation[1]
    if segments:
        rows, cols = _segment(p, q, (geometry.r - 1) * dilation[0], reach, block_m,
                              several_rows=True)
    elif q + reach <= block_m and q + reach <= MAX_BOX:
        rows = min(p, block_m // (q + reach))
        rows = math.ceil(p / math.ceil(p / rows))
        cols = q
    else:
        fit = min(block_m, MAX_BOX) - reach
        if fit < 8:
            raise ValueError(f"halo tiles: a {s}-wide filter at dilation {dilation[1]} "
                             f"leaves {fit} columns of a {block_m}-row tile")
        rows, cols = _segment(p, q, (geometry.r - 1) * dilation[0], reach, block_m)
    return HaloTiling(geometry.n, p, q, c, geometry.r, s, geometry.padding, dilation, rows,
                      cols, tap_columns // PLANE_CHANNELS, block_m, folded)


def _segment(p: int, q: int, reach_rows: int, reach: int, block_m: int,
             several_rows: bool = False) -> tuple[int, int]:
    """(rows, cols) of the row segments of a layer whose output row and the filter's reach
    pass ``block_m``: one row of ``cols`` evened out over the segments a row needs, or
    ``rows`` rows of a halo ``width`` a multiple of 8 (so that each output row's part of
    the C stage starts on a swizzle period), whichever loads the fewest halo pixels over
    all the tiles (then the fewest tiles). Rows share their vertical halo: a 3x3 filter on
    112-pixel rows loads 3 rows of 114 pixels a row of 112 outputs on one-row segments,
    10 rows of 16 for 8 x 14 outputs on eight-row ones (1.4 pixels an output, not 3).
    H200, same run, several rows against one (RESULTS.md 6z11): N=1 224x224x24 -> 48
    1.16x, N=2 200x200x24 -> 32 1.58x, N=1 256x256x40 1.20x, N=4 160x160x48 1.15x, N=2
    128x128x40 1.13x, N=4 150x150x24 1.21x. Where one whole row fits a tile it stays one
    row: N=8 112x112x40 ran 0.84x on eight-row segments (N=4 112x112x24 -> 32 1.16x).
    ``several_rows``: the candidates of two rows or more only (the one-row candidate
    would be the whole row its caller could not fit)."""
    room = min(block_m, MAX_BOX)
    fit = room - reach
    candidates = [] if several_rows else [(1, math.ceil(q / math.ceil(q / fit)))]
    for rows in range(2, p + 1):
        cols = room // rows // 8 * 8 - reach
        if cols < 8:
            break
        candidates.append((rows, cols))
    if not candidates:
        raise ValueError(f"halo tiles: no segment of several rows of {p} output rows fits "
                         f"{block_m} rows beside the {reach + 1}-wide filter's reach")

    def cost(candidate):
        rows, cols = candidate
        tiles = math.ceil(p / rows) * math.ceil(q / cols)
        return tiles * (rows + reach_rows) * (cols + reach), tiles

    return min(candidates, key=cost)


def halo_ring(ring: TmaPipeline) -> TmaPipeline:
    """The plane slots' ring beside the GEMM's ``ring``: :data:`HALO_STAGES` slots whose
    barriers follow the ring's in its ``full`` and ``empty`` buffers (declared ``stages +
    2 * HALO_STAGES`` long), filled by the transposers, released by the ring's
    consumers. Its uses are the CTA's tiles (one halo a tile), counted as the ring's."""
    return TmaPipeline(ring.full, ring.empty, HALO_STAGES, consumers=ring.consumers,
                       first=ring.stages, cluster=ring.cluster)


def raw_ring(ring: TmaPipeline) -> TmaPipeline:
    """The raw slots' ring: after the plane slots' barriers, filled by the TMA (the
    producer thread), released by the :data:`TRANSPOSERS`."""
    return TmaPipeline(ring.full, ring.empty, HALO_STAGES, consumers=TRANSPOSERS,
                       first=ring.stages + HALO_STAGES, cluster=ring.cluster)


@T.inline
def init_rings(ring):
    """Initialise both halo rings (one thread): the plane slots' "full" barriers count
    the transposers' arrivals, their "empty" ones the consumers'; the raw slots' are a
    TMA ring's (one expect-tx arrival; the transposers release)."""
    planes = T.meta_var(halo_ring(ring))
    for s in T.unroll(HALO_STAGES):
        T.ptx.mbarrier.init.shared.b64(planes.full.ptr_to([planes.first + s]),
                                       T.uint32(TRANSPOSERS))
        T.ptx.mbarrier.init.shared.b64(planes.empty.ptr_to([planes.first + s]),
                                       T.uint32(planes.consumers))
    raw_ring(ring).init()


def make_transpose(halo: HaloTiling):
    """``transpose(ring, raw_words, plane_words, j, t)``: transposer ``t`` (0 ..
    :data:`TRANSPOSERS` - 1) takes its share of tile use ``j``: waits for the raw slot,
    and for the plane slot's previous tile to be released, copies every ``t``-th 16-byte
    chunk of the planes from the raw halo (stored plane ``q`` of pixel ``e // stored``,
    ``q = e % stored``, is the pixel's raw chunk ``q % (C/8)``: its own plane, or for the
    copy of plane 0 (:attr:`HaloTiling.copy_plane`) chunk 0 again), fences its writes into
    the async proxy (the consumers' wgmma reads them) and arrives on the planes' "full"
    barrier and the raw slot's "empty" one. On its first tile it also zeroes, in both
    plane slots, what no tile writes and some MMA reads as zeros: the planes past C
    (padded taps) or the region after the stored planes (folded K,
    :attr:`HaloTiling.zero_pixels`). ``raw_words`` / ``plane_words`` are uint32 views of
    the raw and plane slots."""
    real = halo.channels // PLANE_CHANNELS
    stored = halo.stored_planes if halo.folded else real
    chunks = halo.halo_rows * halo.width * stored
    raw_words, slot_words = halo.raw_slot_bytes // 4, halo.slot_bytes // 4
    plane_words = halo.plane_pixels * 4
    if halo.folded:
        zero_first, padding_words = halo.zero_start * 4, halo.zero_pixels * 4
    else:
        zero_first, padding_words = real * plane_words, (halo.planes - real) * plane_words
    per_thread = math.ceil(chunks / TRANSPOSERS)

    # fmt: off
    @T.inline
    def transpose(ring, raw_buf, plane_buf, j, t):
        raw = T.meta_var(raw_ring(ring))
        planes = T.meta_var(halo_ring(ring))
        if padding_words > 0:
            if j == 0:
                for i in T.serial(math.ceil(padding_words / TRANSPOSERS)):
                    if i * TRANSPOSERS + t < padding_words:
                        for h in T.unroll(HALO_STAGES):
                            plane_buf[h * slot_words + zero_first
                                      + i * TRANSPOSERS + t] = T.uint32(0)
        raw.consumer_wait(j)
        planes.producer_acquire(j)
        for i in T.serial(per_thread):
            e = T.meta_var(i * TRANSPOSERS + t)
            if e < chunks:
                for v in T.vectorized(4):
                    plane_buf[j % HALO_STAGES * slot_words + e % stored * plane_words
                              + e // stored * 4 + v] = raw_buf[
                        j % HALO_STAGES * raw_words
                        + (e // stored * real + e % stored % real) * 4 + v]
        T.ptx.fence.proxy.async_.shared__cta()
        T.evaluate(T.ptx.mbarrier.arrive.shared.b64(planes.full_barrier(j), T.uint32(1)))
        raw.consumer_release(j)
    # fmt: on
    return transpose


def _select(condition, when_true, when_false):
    """``when_true`` where ``condition`` holds, else ``when_false``: a Python choice for a
    Python bool (addresses of an unrolled step), an ``if_then_else`` for an expression."""
    if isinstance(condition, bool):
        return when_true if condition else when_false
    return T.if_then_else(condition, when_true, when_false)
