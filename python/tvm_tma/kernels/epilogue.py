"""The GEMM epilogue: fp32 accumulators -> swizzled C stage -> TMA store.

After a tile's last MMA the consumer warpgroups round their accumulators to the output type
and write them into a C stage in shared memory, ``epilogue_n`` columns at a time; one
thread then stores the stage with a TMA store. The rounding takes two neighbouring
columns at once (``cvt.rn.bf16x2.f32``, one register of two outputs) and the writes are
``stmatrix .x4``: a wgmma accumulator fragment is, register pair for register pair, the
fragment of an 8 x 8 ``stmatrix`` block, so one instruction writes four such blocks (16
rows x 16 columns of a warp) where 16-bit stores took eight times as many instructions
(H100, same runs: 8192^3 775 -> 801 TFLOP/s, 8192 x 8192 x 1024 696 -> 715).
The stage is 128B-swizzled when it is a whole number of 64-column atoms, 64B-swizzled when
it is 32 columns (a tile whose width is a multiple of 32 but not of 64:
:func:`c_stage_layout`), and the whole tile unswizzled when the width is no multiple of 32
(a multiple of 8: 104, say); a width of 8 mod 16 ends each row group on one ``stmatrix
.x2`` (two 8 x 8 blocks). Going through shared memory turns the wgmma fragment (each thread
holds pairs of columns of scattered rows) into whole swizzled rows the TMA moves in one
instruction, and ``oob="skip"`` makes the parts of an edge tile past M or N fall away
without any per-element guard. A narrower stage costs more store/barrier rounds but leaves
room for another ring slot.

With split-K the store is a TMA reduce-add (``reduce="add"``): each K part adds its
product into C, so the kernel computes ``C += A @ B``. Ordered split-K
(``split_k_ordered``, :mod:`.split_k`): part 0 stores, the other parts wait for its store
to complete and then add, so the kernel computes ``C = A @ B``.

With FP8 inputs C is bf16 and the accumulators are multiplied by the product of the two
per-tensor scales (``scale``: a one-element fp32 local the kernel fills once from its
``scale_a`` and ``scale_b`` arguments) as they are rounded, ``torch._scaled_mm``'s
``scale_a * scale_b * (A @ B)``: everything before the epilogue (the MMAs, stream-K's
partial tiles) stays unscaled, so the scales are applied once per element.

With ``swap_ab`` the accumulator tile is C^T's (its rows are C's columns): each 8 x 8 block
is written with ``stmatrix .trans``, each lane naming a column of the block, which is a
row of C, so the stage holds ``epilogue_n`` of C's rows by ``block_m`` of its columns
(whole 64-column atoms, 128B-swizzled: :func:`c_stage_shape`), and the TMA store writes it
at (column block, row block) of C. The registers, their rounding and the stores'
waits are the same.

Each stage waits until the previous store has read the C stage (``cp.async.bulk
wait_group.read 0`` by the storing thread, then a named barrier over the threads that
share the stage), and the stage is fenced into the async proxy before the store reads it.
With two C stages (``GemmConfig.epilogue_buffers``) the stores alternate between them and
each waits only until all but the newest store have read (``wait_group.read 1``): the
other stage's store runs while this one is rounded. Where a store is skipped (past N or
M) the next stage's wait is for all of them, since the newest store may then be its own
stage's. Two stages each the tile's whole width alternate from one tile to the next where
the caller counts its tiles in rounds (``round_parity``, the plain persistent loop: round
j stores from stage j % 2 and waits for all but the newest store, whose tile, the one
before, was stored whole); elsewhere (stream-K's runs, the tail split) such a tile waits
for all of them, as one stage does.
:func:`make_store_unit` builds this for one configuration; a kernel whose output is a GEMM
output tile (conv2d's NPQ x K output is one) reuses it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from .gemm_config import WARPGROUP, GemmConfig
from .split_k import make_order, tile_flag
from .wgmma import swizzled_layout

#: The swizzle mode of a 32-column C stage, as ``mma_shared_layout`` numbers it (2: 64-byte
#: swizzle, a pattern period of 8 rows of 64 bytes = 512 bytes).
SWIZZLE_64B = 2
#: The PTX type of two packed 16-bit outputs (what ``cvt`` makes of two fp32 values).
PACKED = {"bfloat16": "bf16x2", "float16": "f16x2"}
#: Columns of a 64B-swizzled C stage: one 64-byte row of 16-bit elements, the widest inner
#: box the 64B swizzle allows (``GemmConfig.check`` names the same rule).
SWIZZLE_64B_COLUMNS = 32


def c_stage_shape(cfg: GemmConfig) -> tuple[int, int, int]:
    """The C stages' buffer shape: ``(c_stages, block_m, epilogue_cols)``, a stage per
    ``epilogue_cols`` columns of the accumulator tile; with ``swap_ab`` ``(c_stages,
    epilogue_cols, block_m)``, the same elements as rows of C (the tile is C^T's)."""
    if cfg.swap_ab:
        return cfg.c_stages, cfg.epilogue_cols, cfg.block_m
    return cfg.c_stages, cfg.block_m, cfg.epilogue_cols


def c_stage_layout(cfg: GemmConfig):
    """The shared layout of the C stage(s), :func:`c_stage_shape`: the swizzled layout the
    TMA store reads.

    A stage of whole 64-column atoms (128 bytes of 16-bit elements per row) takes the 128B
    swizzle of the ring's slots. A tile whose width is a multiple of 32 but not of 64 (160,
    say) cannot be cut into such stages; it is staged 32 columns at a time, and a 32-column
    stage has 64-byte rows: the 64B swizzle (a TMA box with the 128B swizzle would need
    128-byte inner rows). Its period is 512 bytes; the stage starts 1024-aligned, and each
    stage of ``block_m`` rows is a whole number of periods. Only the swizzle pattern
    differs: the store unit writes the same (row, column) elements either way, through the
    layout, and the TMA store's tensor map takes the swizzle from it. A width no multiple
    of 32 (any multiple of 8, :meth:`GemmConfig.check`) is staged whole in plain rows: no
    swizzle span divides it, and a row of 13 16-byte units (104 columns) spreads an 8 x 8
    ``stmatrix`` block over distinct banks. A swapped tile's stage (``swap_ab``) has rows
    of ``block_m`` columns, whole 64-column atoms, so it always takes the 128B swizzle: the
    8 rows one ``stmatrix .trans`` block writes (16 bytes each, at one column) fall on 8
    distinct 16-byte chunks of the pattern.
    """
    shape = c_stage_shape(cfg)
    if cfg.swap_ab or cfg.epilogue_cols % 64 == 0:
        # With swap_ab the rows are block_m (64, 128 or 192) of C's columns: whole atoms.
        return swizzled_layout(cfg.out_dtype, shape)
    if cfg.epilogue_cols == SWIZZLE_64B_COLUMNS:
        return mma_shared_layout(cfg.out_dtype, SWIZZLE_64B, shape)
    # A width no multiple of 32 (GemmConfig.check): the whole tile, unswizzled rows.
    return TileLayout(S[shape]).canonicalize()


def epilogue_threads(cfg: GemmConfig) -> int:
    """Threads that meet at an epilogue barrier: every consumer (cooperative: they share
    one C stage) or one warpgroup (ping-pong: each has its own)."""
    return WARPGROUP * (1 if cfg.schedule == "pingpong" else cfg.consumers)


def make_store_unit(cfg: GemmConfig, ordered_parts: int | None = None
                    ) -> Callable[..., None]:
    """``store_unit(C, c_tile, acc, cs, row0, mb, nb, lane, barrier, storer, scale,
    order)``: write one consumer warpgroup's accumulators (rows ``row0 ..`` of tile
    (``mb``, ``nb``)) to C through C stage ``cs`` of ``c_tile``. ``ordered_parts``: the
    store of a tile cut into that many ordered K parts whatever ``cfg``'s split (the tail
    split's tiles left over); None: ``cfg``'s own.

    ``barrier`` is the named barrier of the threads sharing the stage, ``storer`` the
    condition that selects the one thread that issues the stores (and waits for them).
    ``scale`` is the one-element fp32 local holding ``scale_a * scale_b`` (FP8; None, and
    not read, for 16-bit inputs). ``order`` is ``(flags, flag, part)`` with ordered
    split-K (the flags workspace, a one-element int32 local, the unit's K part), else None
    (not read). ``c_map``: where C is a device-side view (a grouped GEMM's group of rows),
    the ``tensormap=`` slots its stores rebind (:mod:`tvm_tma.dispatch.device_view`).
    ``round_parity``: the parity of the caller's round (its count of tiles stored before
    this one, every one of them stored whole), by which two whole-tile C stages take
    turns; None where the caller does not count (a whole-tile stage is then reused).
    """
    m, n, dtype = cfg.product_m, cfg.product_n, cfg.out_dtype
    swapped = cfg.swap_ab
    scaled = cfg.fp8
    bm, bn, en = cfg.block_m, cfg.block_n, cfg.epilogue_cols
    m_sub = cfg.consumer_rows // 64
    split_k = cfg.split_k if ordered_parts is None else ordered_parts
    threads = epilogue_threads(cfg)
    reduce = "add" if split_k > 1 else None
    ordered = cfg.split_k_ordered if ordered_parts is None else True
    wait_for_first, finish = make_order(cfg, split_k) if ordered else (None, None)
    # Two fp32 accumulators -> one register of two 16-bit outputs (rounded to nearest
    # even, as a cast; the first source lands in the upper half: the higher column).
    cvt = T.ptx[f"cvt.rn.{PACKED[dtype]}.f32"]
    # With swap_ab the blocks are written transposed (.trans): the stage holds C, whose
    # rows are the accumulator tile's columns.
    trans = ".trans" if swapped else ""
    stmatrix = T.ptx[f"stmatrix.sync.aligned.m8n8.x4{trans}.shared.b16"]
    # A stage of 8 mod 16 columns ends on one 8-column block: two 8 x 8 matrices (the
    # warp's 16 rows), lanes 0-15 naming their rows.
    stmatrix_x2 = T.ptx[f"stmatrix.sync.aligned.m8n8.x2{trans}.shared.b16"]

    def block_address(c_tile, stage, first_row, first_col, lane):
        """The address lane ``lane`` gives ``stmatrix`` for its 8 x 8 block, whose first
        accumulator is (``first_row``, ``first_col``) of the tile (columns counted in this
        stage): the block's row ``lane % 8`` in the stage; or with swap_ab, where the
        stage holds C = the tile transposed, the block's column ``lane % 8``, which is a
        row of the stage whose 8 elements run along the tile's rows (``.trans``)."""
        if swapped:
            return c_tile.ptr_to([stage, first_col + lane % 8, first_row])
        return c_tile.ptr_to([stage, first_row + lane % 8, first_col])

    halo = cfg.halo

    def c_block(C, mb, col, part=0):
        """The region of C a stage of tile ``mb`` at column ``col`` of the product
        stores: ``block_m x en`` at row ``mb * block_m``, or with swap_ab ``en x block_m``
        at (``col``, ``mb * block_m``) of C (the product is C^T); with halo tiles the
        tile's output pixels (:meth:`.halo.HaloTiling.store_region`, C as (N, P, Q, K);
        store ``part`` of :attr:`~.halo.HaloTiling.row_stores`)."""
        row = mb * bm
        if halo is not None:
            return halo.store_region(C, mb, col, en, part)
        if swapped:
            return C[col:col + en, row:row + bm]
        return C[row:row + bm, col:col + en]

    def stage_read(c_tile, stage, part=0):
        """The part of C stage ``stage`` a store reads: all of it, or a halo tile's
        stored rows (the garbage rows after them are not stored)."""
        if halo is not None:
            start = halo.stage_start(part)
            return c_tile[stage, start:start + halo.stored_rows, :]
        return c_tile[stage, :, :]

    #: Stores a C stage takes (several only for halo segments of several output rows).
    stores = 1 if halo is None else halo.row_stores
    tail = en % 16 == 8
    # Two C stages: store h rounds into stage cs + h % 2 while store h - 1 reads the other.
    double = cfg.c_stages == 2 and cfg.schedule == "cooperative"

    # fmt: off
    @T.inline
    def store_unit(C, c_tile, acc, cs, row0, mb, nb, lane, barrier, storer, scale, order,
                   c_map=None, round_parity=None):
        # en columns at a time: round the accumulators into the C stage, then one thread
        # stores it with TMA; the previous store must have read the stage first.
        warp = T.meta_var(lane // 32)
        words = T.alloc_local((4,), "uint32")
        if ordered:
            flags, flag, part = T.meta_var(order)
            index = T.meta_var(tile_flag(cfg, mb, nb))
            if storer and part > 0:
                wait_for_first(flags, flag, index)
        # A whole-width stage alternates between tiles where the caller counts them
        # (round_parity: the round's parity): each tile's store drains while the next
        # tile is staged in the other stage.
        across = T.meta_var(double and bn == en and round_parity is not None)
        for h in T.unroll(bn // en):
            stage = T.meta_var(cs + round_parity if across else (cs + h % 2 if double else cs))
            n0 = T.meta_var(nb * bn + h * en)
            if storer:
                # The stage's last store has read it: with two stages all but the newest
                # store (the other stage's) where this one and so the one before it are
                # stored; else all of them: before a tile's first store (a tile of an odd
                # number of stores ends on the stage it starts on), and past N or M, where
                # the stores before were skipped and the newest may be this stage's.
                if across:
                    T.ptx.cp.async_.bulk.wait_group.read(1)
                elif double:
                    if h > 0 and n0 < n and mb * bm < m:
                        T.ptx.cp.async_.bulk.wait_group.read(1)
                    else:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                else:
                    T.ptx.cp.async_.bulk.wait_group.read(0)
            T.ptx.bar.sync(T.Cast("uint32", barrier), threads)
            for mi in T.unroll(m_sub):
                for p in T.unroll(en // 16):
                    # One stmatrix x4 per 16 columns: matrices q = 0..3 are the 8 x 8
                    # blocks (rows 8*(q%2) .. of the warp's 16, columns 16p + 8*(q//2) ..),
                    # whose fragments are exactly wgmma's registers 4*jb + 2*(q%2) + {0, 1}
                    # (jb = 2p + q//2 in this stage); lane l names row l%8 of matrix l//8
                    # (its column l%8 with swap_ab).
                    for q in T.unroll(4):
                        r = T.meta_var(mi * (bn // 2) + h * (en // 2) + 8 * p + 2 * q)
                        if scaled:
                            cvt(words[q], acc[r + 1] * scale[0], acc[r] * scale[0])
                        else:
                            cvt(words[q], acc[r + 1], acc[r])
                    row = T.meta_var(row0 + mi * 64 + warp * 16 + lane % 32 // 8 % 2 * 8)
                    col = T.meta_var(p * 16 + lane % 32 // 16 * 8)
                    stmatrix(block_address(c_tile, stage, row, col, lane), words[0],
                             words[1], words[2], words[3])
                if tail:
                    for q in T.unroll(2):
                        r = T.meta_var(mi * (bn // 2) + h * (en // 2) + 8 * (en // 16) + 2 * q)
                        if scaled:
                            cvt(words[q], acc[r + 1] * scale[0], acc[r] * scale[0])
                        else:
                            cvt(words[q], acc[r + 1], acc[r])
                    row = T.meta_var(row0 + mi * 64 + warp * 16 + lane % 16 // 8 * 8)
                    stmatrix_x2(block_address(c_tile, stage, row, en // 16 * 16, lane),
                                words[0], words[1])
            T.ptx.fence.proxy.async_.shared__cta()
            T.ptx.bar.sync(T.Cast("uint32", barrier), threads)
            if storer and mb * bm < m and n0 < n:
                if ordered:
                    # Part 0 stores, the others add (after part 0's store: above).
                    if part == 0:
                        Tx.copy_async(c_block(C, mb, n0),
                                      stage_read(c_tile, stage), dispatch="tma", oob="skip",
                                      tensormap=c_map)
                    else:
                        Tx.copy_async(c_block(C, mb, n0),
                                      stage_read(c_tile, stage), dispatch="tma", oob="skip",
                                      reduce=reduce, tensormap=c_map)
                elif split_k > 1:
                    Tx.copy_async(c_block(C, mb, n0), stage_read(c_tile, stage),
                                  dispatch="tma", oob="skip", reduce=reduce,
                                  tensormap=c_map)
                else:
                    for part in T.unroll(stores):
                        Tx.copy_async(c_block(C, mb, n0, part), stage_read(c_tile, stage, part),
                                      dispatch="tma", oob="skip", tensormap=c_map)
                T.ptx.cp.async_.bulk.commit_group()
        if ordered:
            # Every unit, its stores skipped past M or N or not, passes the flag on.
            if storer:
                finish(flags, flag, index, part)
    # fmt: on
    return store_unit
