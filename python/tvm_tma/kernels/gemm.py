"""A TMA-fed, warp-specialized WGMMA GEMM for Hopper, written in TVMScript.

``C = A @ B^T`` (B given as N x K, cuBLAS's "TN") or ``C = A @ B`` (B given as K x N), with
A row-major M x K, bf16 or fp16 inputs, fp32 accumulation and C in the input type; or FP8
inputs (e4m3 or e5m2 A and B, B as N x K), fp32 accumulation and bf16
``C = scale_a * scale_b * (A @ B^T)`` with per-tensor fp32 scales, as ``torch._scaled_mm``.
:func:`gemm_kernel` returns the PrimFunc of a :class:`.gemm_config.GemmConfig`;
``examples/gemm_hopper.py`` builds, assembles and (on a Hopper GPU) checks one.

FP8 is the same kernel: the 8-bit slots are the 16-bit ones with twice the K block in the
same 128-byte rows (the same TMA boxes in bytes, the same 128B swizzle, the same descriptor
fields), the mainloop issues ``block_k / 32`` k32 MMAs per K step instead of ``block_k / 16``
k16 ones, and the epilogue multiplies by ``scale_a * scale_b`` (read once per thread at
the start) as it rounds to bf16.

How the kernel works
--------------------
The grid is persistent: ``ctas`` CTAs (one per SM) walk the ``ceil(M / BM) x ceil(N / BN)``
output tiles (the work units; more with split-K); CTA ``b`` takes units ``b, b + ctas,
b + 2 ctas, ...`` (clusters of CTAs take them the same way). Tile numbers map to
(row block, column block) in groups of ``group_m`` row blocks
(:func:`.scheduler.tile_coordinates`), so the CTAs running at one moment share A row blocks
and B column blocks in L2.

Each CTA has three warpgroups (384 threads):

* **Producer** (warpgroup 0): gives registers back (``setmaxnreg.dec`` to 40) and one
  thread issues, for every K step of every tile, the TMA loads of an A tile (BM x BK) and a
  B tile (BN x BK, or BK x BN) into the next slot of a ring of ``stages`` swizzled slots
  (128B-swizzled, but for the K-major tiles of a 32- or 16-wide K block: 64- or 32-byte
  rows, the 64B or 32B swizzle;
  :class:`tvm_tma.pipeline.TmaPipeline`: it waits for the slot's "empty" barrier,
  announces the slot's bytes on its "full" barrier, then copies with
  ``Tx.copy_async(..., dispatch="tma", mbar=..., oob="zero")``). Edge tiles read past M, N
  or K; TMA fills those elements with zeros, which add nothing to the products.
* **Consumers** (warpgroups 1 and 2) take ``setmaxnreg.inc`` to 232 registers. With the
  default **cooperative** schedule warpgroup ``c`` owns rows ``64c .. 64c + 63`` of every
  tile and keeps its 64 x BN fp32 accumulator in registers. Per K step it waits for the
  slot's "full" barrier, issues ``BK / 16`` ``wgmma.mma_async m64nBNk16`` on shared-memory
  descriptors of the slot, commits them as a group and waits until at most this group is
  in flight: the previous step's group is then done reading its slot, which it releases
  ("empty"). So one group of MMAs runs while the next slot's wait completes, and the
  producer stays up to ``stages`` slots ahead.
* With the **ping-pong** schedule each consumer warpgroup takes every other tile of the
  CTA whole (``block_m / 64`` MMAs per k16), and the two take turns through named
  barriers: a warpgroup starts its mainloop once the other's has retired its last MMA,
  so one warpgroup's epilogue runs under the other's MMAs. A slot is then read, and
  released, by one warpgroup.
* **Epilogue** (consumers): after the tile's last MMA the accumulators are rounded to the
  output type and written into a 128B-swizzled C stage in shared memory (``epilogue_n``
  columns at a time; one stage per warpgroup in ping-pong), then one thread stores it with
  a TMA store (``oob="skip"``: the parts of an edge tile past M or N are not written).
  Each stage waits until the previous store has read the C stage.

Options:

* ``cluster=2``: the CTAs of a 2x1 cluster compute vertically adjacent tiles of one
  column block, which need the same B tiles; each CTA loads half of every B tile with
  ``multicast=rank``, and the TMA writes it into both CTAs' slots. A slot is then empty
  only once the consumers of both CTAs released it, so each consumer arrives on the
  "empty" barrier of both (``TmaPipeline(cluster=2)``), and every CTA's barriers are
  initialised before, and kept alive until after, any peer's multicast.
* ``cluster_n=2`` or ``4``: the CTAs of a 1xN cluster compute horizontally adjacent tiles
  of one row block, which need the same A tiles; CTA ``r`` loads rows ``r * block_m / N
  ..`` of every A tile into all N CTAs' slots (its own rows, so a static mask of them all
  names every receiver once), and slots are released in every CTA as above. The worker
  and the rank that the tile arithmetic reads come from the CTA index (``cta // N``,
  ``cta % N``), not from ``%clusterid`` / ``%cluster_ctarank``: TVM reads those through
  volatile asm at every use, and the producer would redo a tile's im2col unravel at
  every K step (the slowdown clusters had on conv layers).
* ``cluster=2`` with ``cluster_n=2`` or ``4``: a 2-D cluster (B as N x K). CTA ``r``
  computes row ``r % 2``, column ``r // 2`` of the cluster's tiles, sends its share ``r //
  2`` of the A tile to the CTAs of its row and its half ``r % 2`` of the B tile to those of
  its column, each with a 16-bit mask of its rank; every consumer still releases a slot in
  every CTA of the cluster (a CTA neither in its row nor in its column, which sends it
  nothing, then waits with the others: the cluster's CTAs run in step anyway).
* ``split_k=S``: K is cut into S parts, each its own work unit, and each unit adds its
  product into C with a TMA reduce-add store (``reduce="add"``): the kernel computes
  ``C += A @ B``. The last part's K steps past K load zeros, so every unit runs the same
  number of ring uses. With ``split_k_ordered`` part 0 stores instead and the other parts
  add after its store completed (:mod:`.split_k`, one flag per tile): ``C = A @ B``.
* ``tail_split=S``: the full waves run whole tiles; each tile left over is cut into S
  ordered K parts (the same flags and order as ``split_k_ordered``), one per worker, all
  in one last round (:func:`.scheduler.tail_unit`, :func:`.scheduler.tail_steps`): no
  wave runs a third full, and every part starts on the same K step of its tile.
* ``stream_k=True``: the full waves run whole tiles, the rest of the K steps are cut into
  one run per worker, and a tile cut between runs is finished from fp32 partials
  (:mod:`.stream_k`).
* ``swap_ab=True``: the kernel computes ``C^T = B A^T``: the B argument feeds the MMAs' A
  slot (its rows are the tiles' ``block_m``, 64 to 192 of N), the A argument their B slot
  (``block_n``: M rounded up to 8, from 8 to 256), and the epilogue writes each
  accumulator tile transposed into a C stage of C's rows (``stmatrix .trans``), which
  the TMA store writes into C as usual. Both operands are K-major 16-bit rows, so the
  ring, the descriptors and every option above are the same; only the roles of the two
  arguments and the epilogue's addresses change. A problem of few rows (a decode step)
  then multiplies no padding rows: the default for M under 256
  (:func:`.tiling.on_swapped_operands`); a problem of few columns (N at most 256) gets
  tiles that fill the SMs' rounds (:func:`.tiling.on_few_columns`). An A view
  (``a_operand``, a conv2d's activation) is then declared over the B ring's argument.

* ``halo`` (a conv2d's halo tiles, :mod:`.halo`): the A "ring" is two halo slots
  loaded once a tile (raw pixels by TMA, copied into channel planes by the producer
  warpgroup's warps 1-3), every K step's A descriptor an offset into them; the ring's
  slots hold B alone.

The kernel's pieces are modules of their own, shared with the other kernels of
:mod:`tvm_tma.kernels`: the work order (:mod:`.scheduler`), the ring
(:class:`tvm_tma.pipeline.TmaPipeline`), the consumer mainloop ``mma_unit`` and its slot
``release`` (:mod:`.wgmma`), and the epilogue ``store_unit`` (:mod:`.epilogue`). This
module holds the producer ``load_unit`` and :func:`gemm_kernel`, which wires them to the
warpgroups. The A operand may be a view of another tensor (``a_operand=``,
:class:`.operands.AOperand`): the conv2d kernel is this GEMM with A the im2col view of its
activation.

The barrier phases are counted, not tracked: producer and consumers both number their uses
of the ring ``it = j * steps + k`` (the CTA's work unit ordinal j, K step k), so slot and
parity are ``it % stages`` and ``it // stages % 2`` on both sides (see
:mod:`tvm_tma.pipeline` for the protocol drawn out step by step); a ping-pong warpgroup
skips the other's units without touching a barrier.

The WGMMA operand descriptors follow the swizzled slot layout the TMA wrote (the swizzle of
the slot's row width, :func:`.wgmma.swizzled_layout`); their fields are drawn out in
:mod:`.wgmma`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tvm_tma.pipeline import TmaPipeline

from .epilogue import c_stage_layout, c_stage_shape, make_store_unit
from .gemm_config import PRODUCER_REGISTERS, WARPGROUP, GemmConfig
from .halo import FIRST_TRANSPOSER, HALO_STAGES, init_rings, make_transpose, raw_ring
from .launch import with_dependent_launch
from .operands import AOperand
from .scheduler import (
    cluster_place,
    rounds,
    stream_k_run_tile,
    stream_k_tile_coordinates,
    stream_k_walk,
    tail_steps,
    tail_unit,
    unit_coordinates,
    unit_of,
    unit_steps,
)
from .stream_k import make_fixup, workspace_shapes
from .wgmma import a_slot_layout, k_loop, make_mma_steps, make_mma_unit, swizzled_layout


def make_load_steps(cfg: GemmConfig) -> Callable[..., None]:
    """``load_steps(ring, a_ring, b_ring, A, B, it0, k_step0, count, mb, nb, rank,
    place)``: the producer's loads for ``count`` consecutive ring uses ``it0 ..`` holding
    K steps ``k_step0 ..`` of tile (``mb``, ``nb``), in the loop :func:`.wgmma.k_loop`
    unrolls or not as the consumers' (the same count, so the same decision).

    One ring slot per K step: acquire the slot, announce both tiles' bytes on its "full"
    barrier, then TMA-load the A tile (``block_m x block_k`` of ``A``, whatever layout
    ``A`` has: the dispatch plans the copy against it) and the B tile. Edge tiles read
    zeros past M, N and K (``oob="zero"``). In a cluster along M each CTA loads
    ``1/cluster`` of the shared B tile and multicasts it into every CTA's slot
    (``multicast=rank``); along N each CTA loads its own ``share`` rows of the A tile
    into every CTA's slot (a mask of them all). ``rank`` is the CTA's rank in its
    cluster as the scope id, ``place`` the same number computed from the CTA index (0
    and 0 without a cluster: see :func:`make_kernel_body`). ``a_map`` / ``b_map``: where
    A / B is a device-side view (a grouped GEMM's group), the ``tensormap=`` slots its
    loads rebind (:mod:`tvm_tma.dispatch.device_view`); None otherwise.
    """
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    cluster, cluster_n = cfg.cluster, cfg.cluster_n
    # A cluster along N: CTA ``rank`` loads rows ``rank * share ..`` of the A tile and
    # multicasts them to every CTA of the cluster (a mask: each CTA's rows are its own).
    # In a 2-D cluster the CTAs of row ``rank % cluster`` share A (CTA ``rank`` sends
    # share ``rank // cluster`` of it to them) and those of column ``rank // cluster``
    # share B (CTA ``rank`` sends share ``rank % cluster``): two masks of the rank.
    share, b_share = cfg.a_share_rows, cfg.b_share_rows
    two_d = cluster > 1 and cluster_n > 1
    taps = cfg.tap_columns

    def k_block(operand, first, rows, k0):
        # Rows [first, first + rows) of the K block at k0: its columns of a (rows, K)
        # operand, or, with K over filter taps, tap k0 // taps and the block's channels
        # of a (rows, taps, channels) one (past the channels: the copy's zero fill).
        if taps:
            return operand[first:first + rows, k0 // taps, k0 % taps:k0 % taps + bk]
        return operand[first:first + rows, k0:k0 + bk]
    row_ctas = sum(1 << (cluster * column) for column in range(cluster_n))
    column_ctas = (1 << cluster) - 1

    def a_part(rank):
        return cluster_place(cfg, rank)[1] if two_d else rank

    def a_mask(rank):
        if not two_d:
            return row_ctas
        return T.Cast("uint16", T.shift_left(T.int32(row_ctas), cluster_place(cfg, rank)[0]))

    def b_mask(rank):
        # A 16-bit operand (the ``h`` class of the multicast mask).
        return T.Cast("uint16", T.shift_left(T.int32(column_ctas),
                                             cluster * cluster_place(cfg, rank)[1]))
    kn = cfg.b_layout == "kn"
    tile_bytes = cfg.a_step_bytes + cfg.b_tile_bytes
    # Halo tiles: A is one load a tile into a raw halo slot (use j of the raw ring, j the
    # unit's ordinal: whole units of k_steps ring uses), before the tile's B steps.
    halo = cfg.halo
    pieces, piece = cfg.a_pieces, cfg.a_copy_k
    # K 8 mod 16 in pieces: the last K block loads only its first piece (the MMA reads
    # zeros for the second), so its slot expects that much less.
    half_last_block = cfg.a_zero_bytes > 0
    last_step, half_piece_bytes = cfg.k_steps - 1, cfg.a_tile_bytes // pieces
    promotion = cfg.l2_promotion
    # A resident B (one column block; K steps dividing the stages, so a slot always holds
    # the same K step's B): loaded on each slot's first use only; the slot's later uses
    # expect A's bytes alone. With one K step every step is the last.
    resident, stages = cfg.b_resident, cfg.stages
    first_use_bytes = tile_bytes - (half_piece_bytes if half_last_block else 0)
    last_step_only = half_last_block and cfg.k_steps > 1

    # fmt: off
    @T.inline
    def load_b(ring, b_ring, B, s, it, k0, nb, rank, place, b_map):
        # The B tile of K step k0 and column block nb into slot s: shared in a cluster
        # along M (each CTA its 1/cluster of the rows, multicast), else this CTA's own.
        if two_d:
            # The CTAs of this column share the B tile: each loads its rows into them.
            mine_b = T.meta_var(cluster_place(cfg, rank)[0] * b_share)
            first_b = T.meta_var(nb * bn + cluster_place(cfg, place)[0] * b_share)
            Tx.copy_async(b_ring[s, mine_b:mine_b + b_share, :],
                          k_block(B, first_b, b_share, k0),
                          dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                          l2_promotion=promotion, multicast=b_mask(rank),
                          tensormap=b_map)
        elif cluster > 1:
            # The cluster's CTAs share the B tile: each loads 1/cluster of it into all.
            if kn:
                Tx.copy_async(b_ring[s, :, :], B[k0:k0 + bk, nb * bn:nb * bn + bn],
                              dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                              l2_promotion=promotion, multicast=rank, tensormap=b_map)
            else:
                Tx.copy_async(b_ring[s, :, :], k_block(B, nb * bn, bn, k0),
                              dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                              l2_promotion=promotion, multicast=rank, tensormap=b_map)
        elif kn:
            Tx.copy_async(b_ring[s, :, :], B[k0:k0 + bk, nb * bn:nb * bn + bn],
                          dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                          l2_promotion=promotion, tensormap=b_map)
        else:
            Tx.copy_async(b_ring[s, :, :], k_block(B, nb * bn, bn, k0),
                          dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                          l2_promotion=promotion, tensormap=b_map)

    @T.inline
    def load_steps(ring, a_ring, b_ring, A, B, it0, k_step0, count, mb, nb, rank, place,
                   a_map=None, b_map=None):
        if halo is not None:
            # The tile's halo into raw slot j % 2 (a_ring: the raw slots), pixel-major.
            j = T.meta_var(it0 // cfg.k_steps)
            h_ring = T.meta_var(raw_ring(ring))
            h_ring.producer_acquire(j)
            h_ring.producer_commit(j, halo.load_bytes)
            Tx.copy_async(a_ring[j % HALO_STAGES, :, :, :], halo.load_region(A, mb),
                          dispatch="tma", mbar=h_ring.full_barrier(j), oob="zero",
                          l2_promotion=promotion)
        for ks in k_loop(count, cfg):
            it = T.meta_var(it0 + ks)
            s = T.meta_var(ring.slot(it))
            k0 = T.meta_var((k_step0 + ks) * bk)
            ring.producer_acquire(it)
            if resident and last_step_only:
                ring.producer_commit(it, T.if_then_else(
                    it < stages, tile_bytes, tile_bytes - cfg.b_tile_bytes) - T.if_then_else(
                    k_step0 + ks == last_step, half_piece_bytes, 0))
            elif resident:
                ring.producer_commit(it, T.if_then_else(it < stages, first_use_bytes,
                                                        first_use_bytes - cfg.b_tile_bytes))
            elif half_last_block:
                ring.producer_commit(it, T.if_then_else(k_step0 + ks == last_step,
                                                        tile_bytes - half_piece_bytes,
                                                        tile_bytes))
            else:
                ring.producer_commit(it, tile_bytes)
            # (With halo tiles the tile's halo holds every K step's A.)
            if halo is None:
                if cluster_n > 1:
                    # The cluster's CTAs share the A tile: each loads its own rows into all.
                    mine = T.meta_var(a_part(rank) * share)
                    first = T.meta_var(mb * bm + a_part(place) * share)
                    if pieces == 1:
                        Tx.copy_async(a_ring[s, mine:mine + share, :],
                                      k_block(A, first, share, k0),
                                      dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                                      l2_promotion=promotion, multicast=a_mask(rank),
                                      tensormap=a_map)
                    else:
                        for p in T.unroll(pieces):
                            if k0 + p * piece < cfg.k:
                                Tx.copy_async(a_ring[s, mine:mine + share,
                                                     p * piece:p * piece + piece],
                                              A[first:first + share,
                                                k0 + p * piece:k0 + p * piece + piece],
                                              dispatch="tma", mbar=ring.full_barrier(it),
                                              oob="zero", l2_promotion=promotion,
                                              multicast=a_mask(rank), tensormap=a_map)
                elif pieces == 1:
                    Tx.copy_async(a_ring[s, :, :], k_block(A, mb * bm, bm, k0),
                                  dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                                  l2_promotion=promotion, tensormap=a_map)
                else:
                    # One copy per 8-column piece (each inside one filter tap of a conv2d);
                    # no piece starts at or past K.
                    for p in T.unroll(pieces):
                        if k0 + p * piece < cfg.k:
                            Tx.copy_async(a_ring[s, :, p * piece:p * piece + piece],
                                          A[mb * bm:mb * bm + bm,
                                            k0 + p * piece:k0 + p * piece + piece],
                                          dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                                          l2_promotion=promotion, tensormap=a_map)
            if resident:
                # This slot's B (the only column block, the slot's K step): loaded on
                # the slot's first use only (the same use in every CTA of a cluster), its
                # later uses keep it.
                if it < stages:
                    load_b(ring, b_ring, B, s, it, k0, nb, rank, place, b_map)
            else:
                load_b(ring, b_ring, B, s, it, k0, nb, rank, place, b_map)
    # fmt: on
    return load_steps


def make_load_unit(cfg: GemmConfig) -> Callable[..., None]:
    """``load_unit(ring, a_ring, b_ring, A, B, j, mb, nb, part, rank, place)``: the
    producer's loads (:func:`make_load_steps`) for work unit ordinal ``j``: tile (``mb``,
    ``nb``), K part ``part``, on the ring uses and K steps of :func:`.scheduler.unit_steps`
    (``j * steps ..`` and ``part * steps ..`` with equal parts)."""
    load_steps = make_load_steps(cfg)

    @T.inline
    def load_unit(ring, a_ring, b_ring, A, B, j, mb, nb, part, rank, place, a_map=None,
                  b_map=None):
        it0, k_step0, count = T.meta_var(unit_steps(cfg, j, part))
        load_steps(ring, a_ring, b_ring, A, B, it0, k_step0, count, mb, nb, rank, place,
                   a_map, b_map)

    return load_unit


def gemm_kernel(cfg: GemmConfig, a_operand: AOperand | None = None) -> tvm.tirx.PrimFunc:
    """The persistent warp-specialized GEMM of ``cfg`` as a TVMScript PrimFunc
    ``gemm(A, B, C)``, or with ``cfg.stream_k`` ``gemm(A, B, C, partials, flags)`` (the
    workspace of :mod:`.stream_k`, from :func:`.stream_k.workspace`). FP8 kernels take the
    two per-tensor scales after C, each a one-element fp32 tensor (shape (1,)):
    ``gemm(A, B, C, scale_a, scale_b)`` or ``gemm(A, B, C, scale_a, scale_b, partials,
    flags)``.

    ``a_operand`` None: A is the row-major (M, K) kernel argument. Otherwise the first
    argument is ``a_operand``'s tensor (``argument_shape``, ``argument_layout``) and the A
    the loads read is its (M, K) view (``view_layout`` at ``view_elem_offset``), so a
    conv2d passes its activation and the im2col view of it; nothing else in the kernel
    depends on which (see :mod:`.operands`). With ``cfg.tap_columns`` the view is (M,
    taps, channels), B the (N, taps x channels) argument read as (N, taps, channels), and
    K the taps times ``tap_columns`` (each tap's channels padded to whole K blocks).
    """
    cfg.check()
    m, n, k = cfg.m, cfg.n, cfg.k
    (a_dtype, b_dtype), c_dtype = cfg.input_dtypes, cfg.out_dtype
    b_shape = (k, n) if cfg.b_layout == "kn" else (n, k)
    if cfg.tap_columns:
        # K over filter taps padded to whole blocks: B is the (N, taps x channels) filter.
        _, taps, channels = _tap_view_shape(cfg, a_operand)
        b_shape = (n, taps * channels)
    if a_operand is None:
        a_shape, a_layout = (m, k), TileLayout(S[m, k])
    else:
        a_shape, a_layout = tuple(a_operand.argument_shape), a_operand.argument_layout
    body = make_kernel_body(cfg, a_operand)
    partials_shape, flags_shape = workspace_shapes(cfg)
    # Halo tiles: M counts the tiles' MMA rows; C is the N*P*Q output pixels.
    c_rows = math.prod(cfg.halo.output_shape) if cfg.halo is not None else m

    # fmt: off
    @T.inline
    def matched(A_ptr, B_ptr, C_ptr, scales, partials, flags):
        # The A argument is named X when the loads read a view of it.
        if a_operand is None:
            A = T.match_buffer(A_ptr, a_shape, a_dtype, layout=a_layout)
            a_arg = T.meta_var(A)
        else:
            X = T.match_buffer(A_ptr, a_shape, a_dtype, layout=a_layout)
            a_arg = T.meta_var(X)
        B = T.match_buffer(B_ptr, b_shape, b_dtype, layout=TileLayout(S[b_shape]))
        C = T.match_buffer(C_ptr, (c_rows, n), c_dtype, layout=TileLayout(S[c_rows, n]))
        if cfg.swap_ab:
            # C^T = B A^T: B's rows are the product's rows (the MMAs' A slot), A's its
            # columns; the epilogue stores the product transposed.
            body(B, a_arg, C, scales, partials, flags)
        else:
            body(a_arg, B, C, scales, partials, flags)

    if cfg.fp8 and cfg.stream_k:
        @T.prim_func
        def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, SA_ptr: T.handle,
                 SB_ptr: T.handle, P_ptr: T.handle, F_ptr: T.handle):
            scale_a = T.match_buffer(SA_ptr, (1,), "float32")
            scale_b = T.match_buffer(SB_ptr, (1,), "float32")
            partials = T.match_buffer(P_ptr, partials_shape, "float32")
            flags = T.match_buffer(F_ptr, flags_shape, "int32")
            matched(A_ptr, B_ptr, C_ptr, (scale_a, scale_b), partials, flags)
    elif cfg.fp8 and cfg.order_waits:
        @T.prim_func
        def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, SA_ptr: T.handle,
                 SB_ptr: T.handle, F_ptr: T.handle):
            scale_a = T.match_buffer(SA_ptr, (1,), "float32")
            scale_b = T.match_buffer(SB_ptr, (1,), "float32")
            flags = T.match_buffer(F_ptr, flags_shape, "int32")
            matched(A_ptr, B_ptr, C_ptr, (scale_a, scale_b), None, flags)
    elif cfg.order_waits:
        @T.prim_func
        def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, F_ptr: T.handle):
            flags = T.match_buffer(F_ptr, flags_shape, "int32")
            matched(A_ptr, B_ptr, C_ptr, None, None, flags)
    elif cfg.fp8:
        @T.prim_func
        def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, SA_ptr: T.handle,
                 SB_ptr: T.handle):
            scale_a = T.match_buffer(SA_ptr, (1,), "float32")
            scale_b = T.match_buffer(SB_ptr, (1,), "float32")
            matched(A_ptr, B_ptr, C_ptr, (scale_a, scale_b), None, None)
    elif cfg.stream_k:
        @T.prim_func
        def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, P_ptr: T.handle,
                 F_ptr: T.handle):
            partials = T.match_buffer(P_ptr, partials_shape, "float32")
            flags = T.match_buffer(F_ptr, flags_shape, "int32")
            matched(A_ptr, B_ptr, C_ptr, None, partials, flags)
    else:
        @T.prim_func
        def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
            matched(A_ptr, B_ptr, C_ptr, None, None, None)
    # fmt: on
    return with_dependent_launch(gemm)


def _tap_view_shape(cfg: GemmConfig, a_operand: AOperand | None) -> tuple[int, int, int]:
    """(M, taps, channels) of a kernel whose K walks filter taps (``cfg.tap_columns``):
    the A operand's 3-D view, whose taps times ``tap_columns`` must be K. With halo tiles
    (whose A operand is the activation itself) the halo's taps and channels."""
    if cfg.halo is not None:
        return cfg.m, cfg.halo.taps, cfg.halo.channels
    shape = getattr(a_operand, "view_shape", None)
    if shape is None or len(shape) != 3 or shape[0] != cfg.m or (
            shape[1] * cfg.tap_columns != cfg.k or shape[2] > cfg.tap_columns):
        raise ValueError(f"tap_columns={cfg.tap_columns}: the A operand's view must be "
                         f"(M, taps, channels) with M={cfg.m}, taps x {cfg.tap_columns} = "
                         f"K={cfg.k} and at most {cfg.tap_columns} channels; got {shape}")
    return tuple(shape)


def make_kernel_body(cfg: GemmConfig, a_operand: AOperand | None, work=None
                     ) -> Callable[..., None]:
    """``body(A_arg, B, C, scales, partials, flags, groups)``: the whole kernel after its
    arguments are matched (every match_buffer precedes the A view's decl_buffer here: a
    declaration opens a frame, after which no argument can be matched). ``scales`` is the
    ``(scale_a, scale_b)`` pair of one-element fp32 buffers with FP8 inputs, else None;
    ``partials`` and ``flags`` are None but with stream-K.

    The kernel's entry (the CTA and thread indices, the dynamic shared memory) is this
    function's; what a CTA does with them is :func:`make_cta_body`'s, so a kernel holding
    two tilings (:mod:`.grouped_gemm`) opens one entry and branches between two of those.

    ``work``: another kernel's walk over its work (a grouped GEMM's tiles across groups,
    :mod:`.grouped_gemm`), with ``produce(ring, a_ring, b_ring, A, B, groups, cta)``
    and ``consume(ring, a_ring, b_ring, c_tile, acc, desc_a, desc_b, C, groups, cta,
    consumer, lane, tid)`` run by the producer thread and the consumer warpgroups in
    place of the GEMM's loops (``groups`` is that kernel's extra arguments, ``cta`` the
    CTA's (worker, rank, place): see :func:`make_cta_body`); everything else -- shared
    memory, ring, barriers, register split -- is this kernel's."""
    m, k = cfg.m, cfg.k
    a_dtype = cfg.mma_dtypes[0]
    ctas, cluster = cfg.ctas, cfg.cluster_size
    # The A view, read only when a_operand is given (the ifs on a_operand and stream_k in
    # the body are decided while it is parsed). With swap_ab the view is the body's second
    # operand (the MMAs' B slot: A's rows are the product's columns).
    view_layout = view_offset = None
    view_shape = (m, k)
    if a_operand is not None:
        view_layout, view_offset = a_operand.view_layout, a_operand.view_elem_offset
        view_shape = getattr(a_operand, "view_shape", None) or (m, k)
    view_first = a_operand is not None and not cfg.swap_ab
    view_second = a_operand is not None and cfg.swap_ab
    # K over filter taps: B, the (N, taps x channels) argument, read as (N, taps, channels).
    taps_b = (cfg.n, *_tap_view_shape(cfg, a_operand)[1:]) if cfg.tap_columns else None
    # Halo tiles store C as (N, P, Q) pixels by K channels (:meth:`.halo.HaloTiling.
    # store_region`).
    halo_c = (*cfg.halo.output_shape, cfg.n) if cfg.halo is not None else None
    cta_body = make_cta_body(cfg, work)

    # fmt: off
    @T.inline
    def body(A_arg, B, C, scales, partials, flags, groups=None):
        if view_first:
            A = T.decl_buffer(view_shape, a_dtype, A_arg.data, elem_offset=view_offset,
                              layout=view_layout)
        else:
            A = T.meta_var(A_arg)
        if cfg.tap_columns > 0:
            B_taps = T.decl_buffer(taps_b, B.dtype, B.data)
            B_read = T.meta_var(B_taps)
        elif view_second:
            B_view = T.decl_buffer(view_shape, B.dtype, B.data, elem_offset=view_offset,
                                   layout=view_layout)
            B_read = T.meta_var(B_view)
        else:
            B_read = T.meta_var(B)
        if halo_c is not None:
            C_pixels = T.decl_buffer(halo_c, C.dtype, C.data)
            C_write = T.meta_var(C_pixels)
        else:
            C_write = T.meta_var(C)
        T.device_entry()
        if cluster > 1:
            # The CTA's rank in its cluster twice: the scope id (what the dispatch's
            # multicast copies name, and the rows of a shared tile a CTA sends) and the
            # same number from the CTA index (a 1-D cluster of `cluster` consecutive
            # CTAs: rank = cta % cluster, cluster id = cta // cluster), for the tile
            # arithmetic. nvcc reads %cluster_ctarank and %clusterid through volatile asm
            # at every use, so loop-invariant arithmetic on them (the im2col unravel of a
            # tile's first pixel) would be recomputed at every K step of the producer;
            # on the CTA index it is hoisted.
            cta = T.cta_id([ctas])
            rank = T.cta_id_in_cluster([cluster])
            worker = T.meta_var(cta // cluster)
            place = T.meta_var(cta % cluster)
        else:
            worker = T.cta_id([ctas])
            rank = T.meta_var(0)
            place = T.meta_var(0)
        tid = T.thread_id([cfg.threads])
        dyn = T.alloc_buffer((cfg.shared_bytes,), "uint8", scope="shared.dyn")
        cta_body(A, B_read, C_write, scales, partials, flags, groups,
                 (worker, rank, place, tid, dyn))
    # fmt: on
    return body


def make_cta_body(cfg: GemmConfig, work=None, threads: int | None = None,
                  waited: bool = False) -> Callable[..., None]:
    """``cta(A, B, C, scales, partials, flags, groups, entry)``: what one CTA of the kernel
    does -- lay out its shared memory, initialise the ring's barriers, split the registers
    between producer and consumers and run their loops (or ``work``'s, see
    :func:`make_kernel_body`) -- given the kernel's ``entry`` = (worker, rank, place, tid,
    dyn): the CTA's worker index, its rank in its cluster (scope id and from the CTA
    index), the thread index and the dynamic shared memory (at least
    ``cfg.shared_bytes``).

    ``threads``: the kernel's threads where it launches more than ``cfg.threads`` (a kernel
    holding two tilings, one with fewer consumer warpgroups): the warpgroups past this
    tiling's pass the barrier after the ring's initialisation and do nothing else.
    ``waited``: the kernel's entry has already waited for the previous grid (it read
    global memory to choose the tiling), so the CTA does not wait again."""
    idle_warpgroups = threads is not None and threads > cfg.threads
    (a_dtype, b_dtype), c_dtype = cfg.mma_dtypes, cfg.out_dtype
    bm, bn, bk, stages = cfg.block_m, cfg.block_n, cfg.block_k, cfg.stages
    cluster, workers, units = cfg.cluster_size, cfg.workers, cfg.work_units
    n_rounds = rounds(cfg)
    pingpong, stream_k, fp8 = cfg.schedule == "pingpong", cfg.stream_k, cfg.fp8
    ordered = cfg.split_k_ordered
    tail = cfg.tail_split > 1
    elem, out_elem = cfg.element_bytes, cfg.out_bytes
    b_slot = (bk, bn) if cfg.b_layout == "kn" else (bn, bk)
    a_offset, b_offset = cfg.a_ring_start // elem, cfg.b_ring_start // elem
    c_offset = cfg.c_stage_start // out_elem
    a_layout = a_slot_layout(cfg)
    a_shape = (stages, bm, bk)
    # Halo tiles: the A ring is the plane slots (:mod:`.halo`), the raw slots after
    # them; both rings' barriers follow the ring's.
    halo = cfg.halo
    barriers = stages
    if halo is not None:
        a_shape = (HALO_STAGES, halo.stored_planes, halo.halo_rows, halo.width, 8)
        a_layout = TileLayout(S[a_shape : (halo.slot_elements, halo.plane_pixels * 8,
                                           halo.width * 8, 8, 1)])
        raw_shape = (HALO_STAGES, *halo.raw_shape)
        raw_layout = TileLayout(S[raw_shape : (halo.raw_slot_bytes // elem,
                                               halo.width * halo.channels, halo.channels,
                                               1)])
        raw_offset = cfg.halo_raw_start // elem
        halo_words = HALO_STAGES * halo.slot_bytes // 4
        raw_words = HALO_STAGES * halo.raw_slot_bytes // 4
        transpose = make_transpose(halo)
        barriers = stages + 2 * HALO_STAGES
    b_layout = swizzled_layout(b_dtype, (stages, *b_slot))
    c_layout = c_stage_layout(cfg)
    c_shape = c_stage_shape(cfg)
    load_unit, load_steps = make_load_unit(cfg), make_load_steps(cfg)
    mma_unit, mma_steps = make_mma_unit(cfg), make_mma_steps(cfg)
    store_unit = make_store_unit(cfg)
    store_tail = make_store_unit(cfg, cfg.tail_split) if tail else None
    publish, gather = make_fixup(cfg) if stream_k else (None, None)
    k_steps = cfg.k_steps
    zero_words = cfg.a_zero_bytes // 4
    dp_rounds = cfg.stream_k_dp_rounds if stream_k else cfg.tail_rounds if tail else 0
    dp_steps = dp_rounds * k_steps
    tail_units = cfg.tail_tiles * cfg.tail_split if tail else 0

    # fmt: off
    @T.inline
    def cta(A, B, C, scales, partials, flags, groups, entry):
        worker, rank, place, tid, dyn = T.meta_var(entry)
        full = T.decl_buffer((barriers,), "uint64", dyn.data, elem_offset=0)
        empty = T.decl_buffer((barriers,), "uint64", dyn.data, elem_offset=barriers)
        a_ring = T.decl_buffer(a_shape, a_dtype, dyn.data, elem_offset=a_offset,
                               layout=a_layout)
        b_ring = T.decl_buffer((stages, *b_slot), b_dtype, dyn.data, elem_offset=b_offset,
                               layout=b_layout)
        c_tile = T.decl_buffer(c_shape, c_dtype, dyn.data, elem_offset=c_offset,
                               layout=c_layout)
        if halo is not None:
            # Halo tiles: the producer loads into the raw slots, the transposers copy
            # them (as words) into the plane slots (a_ring), which the consumers read.
            a_raw = T.decl_buffer(raw_shape, a_dtype, dyn.data, elem_offset=raw_offset,
                                  layout=raw_layout)
            raw_words_buf = T.decl_buffer((raw_words,), "uint32", dyn.data,
                                          elem_offset=cfg.halo_raw_start // 4)
            plane_words_buf = T.decl_buffer((halo_words,), "uint32", dyn.data,
                                            elem_offset=cfg.a_ring_start // 4)
            a_loads = T.meta_var(a_raw)
        else:
            a_loads = T.meta_var(a_ring)
        acc = T.alloc_local((cfg.accumulators,), "float32")
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")
        if stream_k or ordered or tail:
            flag = T.alloc_local((1,), "int32")
        if fp8:
            scale = T.alloc_local((1,), "float32")
        else:
            scale = T.meta_var(None)
        ring = TmaPipeline(full, empty, stages, consumers=cfg.ring_consumers,
                           cluster=cluster)
        warpgroup = T.meta_var(tid // WARPGROUP)
        lane = T.meta_var(tid % WARPGROUP)
        # (row block, column block, part) of this worker's whole tile of round j, before
        # stream-K's run or the tail split's part.
        whole_tile = T.meta_var(
            lambda j: unit_coordinates(cfg, unit_of(cfg, worker, j), place))

        if tid == 0:
            ring.init()
            if halo is not None:
                init_rings(ring)
        if zero_words > 0:
            # The zeroed piece a half last K block's MMA reads (K 8 mod 16, 8-column A
            # pieces): written once, made visible to the async proxy (wgmma) before the
            # barrier below that every consumer passes.
            a_zero = T.decl_buffer((zero_words,), "uint32", dyn.data,
                                   elem_offset=cfg.a_zero_start // 4)
            for i in T.serial((zero_words + cfg.threads - 1) // cfg.threads):
                if i * cfg.threads + tid < zero_words:
                    a_zero[i * cfg.threads + tid] = T.uint32(0)
            T.ptx.fence.proxy.async_.shared__cta()
        if cluster > 1:
            # Every barrier of the cluster exists before any CTA multicasts into a peer.
            T.ptx.fence.mbarrier_init.release.cluster()
            T.cuda.cluster_sync()
        else:
            T.cuda.cta_sync()
        # A dependent launch (kernels/launch.py) may have started this CTA while the
        # previous kernel on the stream still ran: no thread touches global memory before
        # that kernel has completed.
        if not waited:
            T.ptx.griddepcontrol.wait()

        if warpgroup == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGISTERS)
            if tid == 0:
                if work is not None:
                    work.produce(ring, a_loads, b_ring, A, B, groups, (worker, rank, place))
                elif stream_k or tail:
                    # Whole tiles first (rounds 0 .. dp_rounds - 1, the plain order), then
                    # stream-K's run, tile by tile (ring use dp_rounds * k_steps + (step -
                    # first)), or the tail split's one part of a tile left over (ring uses
                    # from dp_rounds * k_steps on).
                    if dp_rounds > 0:
                        for j in T.serial(dp_rounds):
                            mb, nb, part = T.meta_var(whole_tile(j))
                            load_unit(ring, a_loads, b_ring, A, B, j, mb, nb, part, rank, place)
                    if stream_k:
                        first, end, lo, hi = T.meta_var(stream_k_walk(cfg, worker))
                        for t in T.serial(lo, hi):
                            it0, kb, ke, mb, nb = T.meta_var(
                                stream_k_run_tile(cfg, t, first, end, place))
                            load_steps(ring, a_loads, b_ring, A, B, it0, kb, ke - kb, mb, nb,
                                       rank, place)
                    elif worker < tail_units:
                        t, part = T.meta_var(tail_unit(cfg, worker))
                        kb, count = T.meta_var(tail_steps(cfg, part))
                        mb, nb = T.meta_var(stream_k_tile_coordinates(cfg, t, place))
                        load_steps(ring, a_loads, b_ring, A, B, dp_steps, kb, count, mb, nb,
                                   rank, place)
                else:
                    for j in T.serial(n_rounds):
                        unit = T.meta_var(unit_of(cfg, worker, j))
                        if unit < units:
                            mb, nb, part = T.meta_var(unit_coordinates(cfg, unit, place))
                            load_unit(ring, a_loads, b_ring, A, B, j, mb, nb, part, rank, place)
            elif halo is not None:
                if tid >= FIRST_TRANSPOSER:
                    # Warps 1-3: each tile's raw halo into its channel planes.
                    for j in T.serial(n_rounds):
                        if unit_of(cfg, worker, j) < units:
                            transpose(ring, raw_words_buf, plane_words_buf, j,
                                      tid - FIRST_TRANSPOSER)
        elif not idle_warpgroups or warpgroup <= cfg.consumers:
            # (Decided while parsed but in a kernel of more warpgroups than this tiling's.)
            T.ptx.setmaxnreg.inc.sync.aligned.u32(cfg.consumer_registers)
            consumer = T.meta_var(warpgroup - 1)
            # The first row of the tile this consumer computes (cooperative schedules).
            row0 = T.meta_var(consumer * cfg.consumer_rows)
            if fp8:
                # The per-tensor scales, once per thread for the whole launch: the epilogue
                # multiplies every accumulator by their product as it rounds it to bf16.
                scale_a, scale_b = T.meta_var(scales)
                scale[0] = scale_a[0] * scale_b[0]
            if work is not None:
                work.consume(ring, a_ring, b_ring, c_tile, acc, desc_a, desc_b, C, groups,
                             (worker, rank, place), consumer, lane, tid)
            elif stream_k or tail:
                # Whole tiles first; then each tile of stream-K's run: its K steps here,
                # then either publish them (a tile this run did not start) or gather the
                # peers' and store the tile; or the tail split's part of a tile left over,
                # stored in order (part 0 stores, the others add after it).
                if dp_rounds > 0:
                    for j in T.serial(dp_rounds):
                        mb, nb, part = T.meta_var(whole_tile(j))
                        mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, part,
                                 row0, lane)
                        store_unit(C, c_tile, acc, 0, row0, mb, nb, lane, 1,
                                   tid == WARPGROUP, scale, None)
                if stream_k:
                    first, end, lo, hi = T.meta_var(stream_k_walk(cfg, worker))
                    for t in T.serial(lo, hi):
                        it0, kb, ke, mb, nb = T.meta_var(
                            stream_k_run_tile(cfg, t, first, end, place))
                        mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, it0, kb, ke - kb,
                                  row0, lane)
                        if kb > 0:
                            publish(partials, flags, acc, worker, place, tid - WARPGROUP)
                        else:
                            if ke < k_steps:
                                gather(partials, flags, acc, flag, worker, place,
                                       t * k_steps + k_steps, tid - WARPGROUP)
                            store_unit(C, c_tile, acc, 0, row0, mb, nb, lane, 1,
                                       tid == WARPGROUP, scale, None)
                elif worker < tail_units:
                    t, part = T.meta_var(tail_unit(cfg, worker))
                    kb, count = T.meta_var(tail_steps(cfg, part))
                    mb, nb = T.meta_var(stream_k_tile_coordinates(cfg, t, place))
                    mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, dp_steps, kb, count,
                              row0, lane)
                    store_tail(C, c_tile, acc, 0, row0, mb, nb, lane, 1,
                               tid == WARPGROUP, scale, (flags, flag, part))
            elif pingpong:
                # Each warpgroup takes every other unit of this CTA, whole; the mainloops
                # take turns (named barrier 3 + c: "warpgroup c may start its mainloop"),
                # so one warpgroup's epilogue overlaps the other's MMAs.
                for j in T.serial(n_rounds):
                    unit = T.meta_var(unit_of(cfg, worker, j))
                    if j % 2 == consumer and unit < units:
                        mb, nb, part = T.meta_var(unit_coordinates(cfg, unit, place))
                        if j > 0:
                            T.ptx.bar.sync(T.Cast("uint32", 3 + consumer), 2 * WARPGROUP)
                        mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, part, 0, lane)
                        if unit + workers < units:
                            T.ptx.bar.arrive(T.Cast("uint32", 4 - consumer), 2 * WARPGROUP)
                        store_unit(C, c_tile, acc, consumer, 0, mb, nb, lane, 1 + consumer,
                                   lane == 0, scale, (flags, flag, part) if ordered else None)
            else:
                for j in T.serial(n_rounds):
                    unit = T.meta_var(unit_of(cfg, worker, j))
                    if unit < units:
                        mb, nb, part = T.meta_var(unit_coordinates(cfg, unit, place))
                        mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, part,
                                 row0, lane)
                        store_unit(C, c_tile, acc, 0, row0, mb, nb, lane, 1,
                                   tid == WARPGROUP, scale,
                                   (flags, flag, part) if ordered else None, None, j % 2)
            if lane == 0:
                T.ptx.cp.async_.bulk.wait_group.read(0)
        if cluster > 1:
            # No CTA exits while a peer may still multicast into it or arrive on its barriers.
            T.cuda.cluster_sync()
    # fmt: on
    return cta
