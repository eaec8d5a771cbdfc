"""The consumer side of the GEMM: WGMMA on shared-memory descriptors of the ring's slots.

A consumer warpgroup keeps its accumulator tile in registers and, per K step, waits for a
ring slot, issues ``block_k / 16`` ``wgmma.mma_async m64nNk16`` (16-bit inputs; FP8:
``block_k / 32`` ``m64nNk32``) per 64-row sub-tile on descriptors of the slot, commits
them as a group and waits until at most this group is in flight: the previous step's group
is then done reading its slot, which it releases. So one group of MMAs runs while the next
slot's wait completes, and the producer stays up to ``stages`` slots ahead.
:func:`make_mma_unit` builds that mainloop for one configuration,
:func:`make_release` the slot release it ends each step with.

The descriptors follow the slot layout the TMA wrote (:func:`swizzled_layout`: the swizzle
whose span is the slot's row, :func:`swizzle_mode`). K-major tiles (A; B as N x K) have rows
of ``block_k`` 16-bit elements: 128 bytes (``block_k`` 64, 128B swizzle), 64 bytes (32, 64B
swizzle) or 32 bytes (16, 32B swizzle), in 8-row swizzle atoms of 8 x row bytes (stride
byte offset 1024, 512 or 256 bytes); the N-major B tile (B as K x N, ``block_k`` 64 only) is
64-column 128B atoms stacked along N, ``block_k`` rows of 128 bytes apart (leading byte
offset), read with the transpose bit. Each k16 step moves the descriptor's start address by
32 bytes inside the row (K-major: 4, 2 or 1 steps per row) or 16 rows of 128 bytes
(N-major). FP8 tiles are K-major only (the 8-bit wgmma has no transpose) with rows of
``block_k`` 128 one-byte elements: the 128-byte row and 1024-byte atom of the 16-bit
``block_k`` 64 tile, so the same fields, and each k32 step is the same 32 bytes along it
(:func:`mma_k`: a step is 32 bytes of K whatever the element width). The descriptor's
layout field names the same swizzle
(``T.cuda.wgmma.encode_matrix_descriptor`` takes it numbered as ``mma_shared_layout`` and
the tensor map do: 3, 2, 1 for 128B, 64B, 32B, and writes the PTX encoding of bits 62-63:
1, 2, 3). :func:`descriptor_fields` computes those numbers once, so a kernel whose slots
hold the same tiles (conv2d's im2col A tile is an ordinary K-major tile once in shared
memory) uses the same mainloop.

Ring uses are counted, not tracked: the mainloop numbers them ``it = j * steps + k`` (the
CTA's work unit ordinal ``j``, K step ``k``) exactly as the producer does, so slot and
parity agree on both sides (:mod:`tvm_tma.pipeline`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout

from .gemm_config import GemmConfig
from .halo import HALO_STAGES, halo_ring
from .scheduler import unit_steps
from .tiling import UNROLLED_ACCUMULATOR_STEPS, unrolled

#: K extent of one wgmma instruction for 16-bit inputs.
MMA_K = 16
#: Widest N of one wgmma instruction.
MAX_MMA_N = 256
#: Bytes of K one wgmma instruction reads per row: k16 of 16-bit or k32 of 8-bit elements.
MMA_K_BYTES = 32
#: PTX type of each input type in the wgmma mnemonic.
PTX_TYPES = {"bfloat16": "bf16", "float16": "f16", "float8_e4m3fn": "e4m3",
             "float8_e5m2": "e5m2"}
#: Swizzle modes as ``mma_shared_layout``, the tensor map (``CUtensorMapSwizzle``) and
#: ``T.cuda.wgmma.encode_matrix_descriptor`` number them (the last maps them to the PTX
#: descriptor's bits 62-63: 128B -> 1, 64B -> 2, 32B -> 3).
SWIZZLE_128B = 3
SWIZZLE_64B = 2
SWIZZLE_32B = 1
#: Swizzle mode by the bytes of a slot's row (its inner extent): a row of whole 128-byte
#: spans takes the 128B swizzle; a 64- or 32-byte row the swizzle of that span.
SWIZZLE_BY_ROW_BYTES = {64: SWIZZLE_64B, 32: SWIZZLE_32B}


def swizzle_mode(dtype: str, inner: int) -> int:
    """The swizzle mode of a shared tile whose rows are ``inner`` elements of ``dtype``: 128B
    for a whole number of 128-byte spans, else 64B or 32B for a row of exactly 64 or 32
    bytes (the span is the row: a TMA box with a wider swizzle would need wider rows)."""
    row_bytes = inner * tvm.DataType(dtype).bits // 8
    if row_bytes % 128 == 0:
        return SWIZZLE_128B
    if row_bytes in SWIZZLE_BY_ROW_BYTES:
        return SWIZZLE_BY_ROW_BYTES[row_bytes]
    raise ValueError(f"a row of {inner} {dtype} elements ({row_bytes} bytes): a swizzled "
                     f"slot row is 32, 64 or a multiple of 128 bytes")


def swizzled_layout(dtype: str, shape: tuple[int, ...]):
    """The swizzled shared layout of ``shape`` (outer dims stacked slots) that the TMA
    writes and the wgmma descriptors of :func:`descriptor_fields` address: the swizzle of
    its rows' width (:func:`swizzle_mode`; 128B for rows of whole 64-element atoms)."""
    return mma_shared_layout(dtype, swizzle_mode(dtype, shape[-1]), shape)


#: The leading byte offset's place in a wgmma matrix descriptor: bits 16-29, in 16-byte
#: units (the start address is bits 0-13).
DESCRIPTOR_LEAD_UNIT = 1 << 16
#: Swizzle mode "none" (``encode_matrix_descriptor`` and the tensor map number it 0): the
#: unswizzled K-major A slot of 8-column pieces (``GemmConfig.a_copy_k``).
SWIZZLE_NONE = 0


def k_loop(count, cfg: GemmConfig):
    """The loop over ``count`` K steps of a mainloop (the consumers' here, the producer's
    in :func:`.gemm.make_load_steps`): unrolled where ``count`` is a constant and ``count``
    times :attr:`~.gemm_config.GemmConfig.accumulators` is at most
    :data:`UNROLLED_ACCUMULATOR_STEPS`, else serial (longer loops, and counts that are
    expressions: stream-K's runs, a short part 0).

    A rolled mainloop computes each step's slot (``it % stages``), barrier parity and
    both wgmma descriptors at run time and moves the descriptors into uniform registers
    before it issues the step's MMAs: some 40 instructions after the slot's wait (SASS of
    a 64 x 48 tile). Left to itself nvcc unrolls a loop of a constant count or not by its
    own measure, which moves with the count and the ring depth: that was the ring-depth
    anomaly of benchmarks/RESULTS.md 6v-6w (8 stages fastest at 15, 17 or 20+ K steps,
    slowest at 16 or 18; neither the L2 nor the addresses). H200, one wave of 64 x 48
    tiles, rings of 6-12 stages, as nvcc chose / unrolled: 15 K steps 3.90-5.28 us /
    3.56-3.67, 18 steps 3.68-5.76 / 3.69-3.99, 20 steps 5.25-6.97 / 3.86-4.18. The
    defaults, rolled -> unrolled, same runs: GEMM 1024 x 640 x 1280 1.29x (91-94% of
    cuBLAS -> 116-121%), conv2d 1x1 N=1 32x32x1280 -> 640 1.50x, N=32 7x7x960 -> 160
    1.39x, N=1 14x14x672 -> 112 1.26x, 3x3 N=32 14x14x256 1.13x, N=8 1x1 32x32x1280 ->
    640 1.11x; 25 others 0.95-1.08x."""
    # The budget is this module's name for tiling's constant, passed explicitly so that
    # a test that sets wgmma.UNROLLED_ACCUMULATOR_STEPS changes what the kernel unrolls.
    if isinstance(count, int) and unrolled(count, cfg, UNROLLED_ACCUMULATOR_STEPS):
        return T.unroll(count)
    return T.serial(count)


def a_slot_layout(cfg: GemmConfig):
    """The shared layout of the A ring, (stages, block_m, block_k): swizzled K-major rows
    (:func:`swizzled_layout`), or with ``cfg.a_copy_k`` 8 the unswizzled K-major layout of
    wgmma core matrices: each 8-column piece of a slot is ``block_m`` rows of 16 contiguous
    bytes (a core matrix every 8 rows, 128 bytes apart), the slot's two pieces one after
    the other. Each piece is then one contiguous box for its own TMA copy."""
    stages, bm, bk = cfg.stages, cfg.block_m, cfg.block_k
    if not cfg.a_copy_k:
        return swizzled_layout(cfg.mma_dtypes[0], (stages, bm, bk))
    piece = cfg.a_copy_k
    return TileLayout(S[(stages, bm, bk // piece, piece) : (bm * bk, piece, bm * piece, 1)])


def mma_k(cfg: GemmConfig) -> int:
    """K extent of one wgmma instruction: 32 bytes of the row (16 for 16-bit, 32 for FP8)."""
    return MMA_K_BYTES // cfg.element_bytes


def mma_columns(cfg: GemmConfig) -> list[tuple[int, int]]:
    """(first column, width) of each MMA a k16 step issues per 64-row sub-tile: the whole
    tile, or for a tile wider than wgmma's N of 256 two halves. The halves' accumulators
    are consecutive: the fragment of an m64nN MMA holds 8-column group j in registers 4j ..
    4j + 3, so two halves side by side are the fragment one m64n{block_n} MMA would have
    (the epilogue reads either the same way)."""
    if cfg.block_n <= MAX_MMA_N:
        return [(0, cfg.block_n)]
    half = cfg.block_n // 2
    return [(0, half), (half, half)]


def mma_mnemonic(cfg: GemmConfig, width: int | None = None) -> str:
    """The ``wgmma.mma_async`` mnemonic of ``cfg``: shape m64n{width}k{mma_k} (``width``
    the tile's unless given: :func:`mma_columns`), fp32 accumulator, A's and B's PTX types
    (``.bf16.bf16``, ``.e4m3.e5m2``, ...)."""
    a_type, b_type = (PTX_TYPES[t] for t in cfg.mma_dtypes)
    return (f"wgmma.mma_async.sync.aligned.m64n{width or cfg.block_n}k{mma_k(cfg)}.f32."
            f"{a_type}.{b_type}")


@dataclass(frozen=True)
class DescriptorFields:
    """wgmma matrix-descriptor fields and advances, in 16-byte units, and the swizzle
    modes of the two descriptors."""

    #: Leading and stride byte offsets of the A descriptor (K-major).
    a_lead: int
    a_stride: int
    #: Leading and stride byte offsets of the B descriptor (K-major or N-major).
    b_lead: int
    b_stride: int
    #: Start-address advance per MMA step (k16, or k32 for FP8) of A and of B.
    a_step: int
    b_step: int
    #: Start-address advance per 64-row A sub-tile.
    a_sub: int
    #: Swizzle modes of the A and B slots (:func:`swizzle_mode`), as
    #: ``encode_matrix_descriptor`` takes them.
    a_swizzle: int = SWIZZLE_128B
    b_swizzle: int = SWIZZLE_128B


def descriptor_fields(cfg: GemmConfig) -> DescriptorFields:
    """The descriptor fields of ``cfg``'s slots: K-major tiles have 8-row atoms of 8 x row
    bytes (``block_k`` elements a row: 1024, 512 or 256 bytes an atom); the N-major B tile
    (``block_k`` 64) has 64-column atoms ``block_k`` rows of 128 bytes apart. The
    unswizzled A slot of 8-column pieces (:func:`a_slot_layout`) has core matrices 128
    bytes apart along M (stride byte offset) and ``block_m x 16`` bytes apart along K
    (leading byte offset: the next piece). FP8 rows are ``block_k`` 128 one-byte elements:
    128 bytes, as the 16-bit ``block_k`` 64 row."""
    kn = cfg.b_layout == "kn"
    row_bytes = cfg.block_k * cfg.element_bytes  # a K-major row: 128, 64 or 32 bytes
    k_major = swizzle_mode(cfg.dtype, cfg.block_k)
    a_step = MMA_K_BYTES // 16  # 32 bytes along the row per MMA step
    if cfg.a_copy_k:
        piece_row = cfg.a_copy_k * cfg.element_bytes  # 16 bytes
        a_fields = {"a_lead": cfg.block_m * piece_row // 16, "a_stride": 8 * piece_row // 16,
                    "a_sub": 64 * piece_row // 16, "a_swizzle": SWIZZLE_NONE}
    else:
        a_fields = {"a_lead": 1, "a_stride": 8 * row_bytes // 16,
                    "a_sub": 64 * row_bytes // 16, "a_swizzle": k_major}
    return DescriptorFields(
        **a_fields,
        b_lead=cfg.block_k * 128 // 16 if kn else 1,
        b_stride=1024 // 16 if kn else 8 * row_bytes // 16,
        a_step=a_step,
        b_step=MMA_K * 128 // 16 if kn else a_step,  # N-major: 16 rows of 128 bytes
        b_swizzle=swizzle_mode(cfg.dtype, cfg.block_n) if kn else k_major)


def make_release(cfg: GemmConfig) -> Callable[..., None]:
    """``release(ring, it, lane)``: one warpgroup hands ring use ``it`` back.

    One arrival per warpgroup (the "empty" barrier counts warpgroups, not threads): from
    lane 0, or in a cluster from lanes 0 .. cluster-1, lane r on CTA r's barrier (the
    arrivals travel in parallel), since a multicast slot is empty only once every CTA's
    consumers have read it.
    """
    cluster = cfg.cluster_size

    # fmt: off
    @T.inline
    def release(ring, it, lane):
        if cluster > 1:
            if lane < cluster:
                ring.consumer_release(it, rank=lane)
        elif lane == 0:
            ring.consumer_release(it)
    # fmt: on
    return release


def make_mma_steps(cfg: GemmConfig) -> Callable[..., None]:
    """``mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, it0, k_step0, count, row0,
    lane)``: one consumer warpgroup's mainloop over ``count`` consecutive ring uses ``it0 ..
    it0 + count - 1`` (``count`` at least 1, a constant or an expression; written out step
    by step where :func:`k_loop` unrolls it), holding K steps ``k_step0 ..`` of one tile.

    It computes rows ``row0 .. row0 + consumer_rows - 1`` of each slot's A tile times its B
    tile into ``acc`` (``cfg.accumulators`` fp32 registers per thread, in the wgmma fragment
    order the epilogue reads), overwriting ``acc`` at the first MMA step: the sum of the
    ``count`` K steps' products. ``desc_a`` / ``desc_b`` are one-element uint64 local
    buffers for the descriptors. A work unit is ``steps_per_unit`` uses
    (:func:`make_mma_unit`); a stream-K segment is whatever part of a tile's K steps the
    CTA's run holds. The K step matters only to a last K block of one 8-column piece
    (``cfg.a_zero_bytes``): its descriptor's second piece is the zeroed region.
    """
    bn, bk = cfg.block_n, cfg.block_k
    m_sub = cfg.consumer_rows // 64
    kn = cfg.b_layout == "kn"
    steps = bk // mma_k(cfg)
    row_bytes = bk * cfg.element_bytes
    # Each MMA of a k16 step: its mnemonic, first accumulator, accumulators, and the B
    # descriptor's start advance to its first column (a K-major B row of the slot).
    mmas = [(T.ptx[mma_mnemonic(cfg, width)], col // 2, width // 2, col * row_bytes // 16)
            for col, width in mma_columns(cfg)]
    mma, _, mma_accs, _ = mmas[0]
    # The second half of a wide tile (TVMScript unrolls no Python list: two named MMAs).
    wide = len(mmas) == 2
    mma_2, first_2, mma_accs_2, b_col_2 = mmas[-1]
    # The immediates after scale-d: scale-a, scale-b (1: no negation), and for 16-bit inputs
    # trans-a, trans-b (B transposed when K x N); the 8-bit forms have no transpose.
    immediates = (1, 1) if cfg.fp8 else (1, 1, 0, 1 if kn else 0)
    fields = descriptor_fields(cfg)
    a_lead, a_stride, a_step, a_sub = fields.a_lead, fields.a_stride, fields.a_step, fields.a_sub
    b_lead, b_stride, b_step = fields.b_lead, fields.b_stride, fields.b_step
    a_swizzle, b_swizzle = fields.a_swizzle, fields.b_swizzle
    release = make_release(cfg)

    def a_operand(k_step, kk):
        """(advance of the A descriptor, whether the step runs) for k16 step ``kk`` of K
        step ``k_step``: ``kk`` steps along the slot's row, or with halo tiles the
        step's operand start and leading offset (:meth:`.halo.HaloTiling.mma_operand`;
        a step wholly past K runs no MMA). Both in 16-byte units, before the 64-row
        sub-tile's advance is added."""
        if halo is None:
            return kk * a_step, True
        start, lead, live = halo.mma_operand(k_step, kk, bk)
        return start + lead * DESCRIPTOR_LEAD_UNIT, live

    # A half K block at the end of K reads its missing piece from the zeroed region: the
    # leading byte offset from slot s's first piece to it.
    half_last_block = cfg.a_zero_bytes > 0
    last_step = cfg.k_steps - 1
    zero_lead = (cfg.a_zero_start - cfg.a_ring_start) // 16
    slot_units = cfg.a_tile_bytes // 16
    # Halo tiles: every K step's A is the tile's halo slot (use j = it0 // k_steps of the
    # halo ring: whole units), unswizzled K-major core matrices; each k16 step's operand
    # starts at its own offset, its second 8 channels its own leading offset further
    # (:meth:`.halo.HaloTiling.mma_operand`, 16-byte units; the descriptor is encoded
    # with a zero leading offset and each step adds its own to bits 16-29).
    halo = cfg.halo
    if halo is not None:
        a_stride, a_swizzle, a_sub = 8, SWIZZLE_NONE, 64

    # fmt: off
    @T.inline
    def mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, it0, k_step0, count, row0,
                  lane):
        if halo is not None:
            j = T.meta_var(it0 // cfg.k_steps)
            h_ring = T.meta_var(halo_ring(ring))
            h_ring.consumer_wait(j)
        # Wait for each slot, run its MMAs, and release the previous slot once the group
        # that read it has retired.
        for ks in k_loop(count, cfg):
            it = T.meta_var(it0 + ks)
            s = T.meta_var(ring.slot(it))
            ring.consumer_wait(it)
            if halo is not None:
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc_a[0]), a_ring.ptr_to([j % HALO_STAGES, 0, 0, 0, 0]),
                    0, a_stride, a_swizzle)
                desc_a[0] = desc_a[0] + T.Cast("uint64", row0)
            elif half_last_block:
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc_a[0]), a_ring.ptr_to([s, row0, 0]),
                    T.if_then_else(k_step0 + ks == last_step, zero_lead - s * slot_units,
                                   a_lead),
                    a_stride, a_swizzle)
            else:
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc_a[0]), a_ring.ptr_to([s, row0, 0]), a_lead, a_stride,
                    a_swizzle)
            T.cuda.wgmma.encode_matrix_descriptor(
                T.address_of(desc_b[0]), b_ring.ptr_to([s, 0, 0]), b_lead, b_stride,
                b_swizzle)
            T.ptx.wgmma.fence.sync.aligned()
            for kk in T.unroll(steps):
                a_at, live = T.meta_var(a_operand(k_step0 + ks, kk))
                if live:
                    for mi in T.unroll(m_sub):
                        mma(*[acc[mi * (bn // 2) + i] for i in range(mma_accs)],
                            desc_a[0] + T.uint64(mi * a_sub + a_at),
                            desc_b[0] + T.uint64(kk * b_step),
                            T.Or(ks > 0, kk > 0), *immediates)
                        if wide:
                            mma_2(*[acc[mi * (bn // 2) + first_2 + i]
                                    for i in range(mma_accs_2)],
                                  desc_a[0] + T.uint64(mi * a_sub + a_at),
                                  desc_b[0] + T.uint64(b_col_2 + kk * b_step),
                                  T.Or(ks > 0, kk > 0), *immediates)
            T.ptx.wgmma.commit_group.sync.aligned()
            # At most this step's group in flight: the previous one has read its slot.
            T.ptx.wgmma.wait_group.sync.aligned(1)
            if ks > 0:
                release(ring, it - 1, lane)
        T.ptx.wgmma.wait_group.sync.aligned(0)
        release(ring, it0 + count - 1, lane)
        if halo is not None:
            if lane == 0:
                h_ring.consumer_release(j)
    # fmt: on
    return mma_steps


def make_mma_unit(cfg: GemmConfig) -> Callable[..., None]:
    """``mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, part, row0, lane)``: the
    mainloop (:func:`make_mma_steps`) over work unit ordinal ``j`` (K part ``part``): the
    ring uses and K steps of :func:`.scheduler.unit_steps` (ring uses ``j * steps ..``
    holding K steps ``part * steps ..`` with equal parts), the numbering the producer uses
    too."""
    mma_steps = make_mma_steps(cfg)

    @T.inline
    def mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, part, row0, lane):
        it0, k_step0, count = T.meta_var(unit_steps(cfg, j, part))
        mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, it0, k_step0, count, row0, lane)

    return mma_unit
