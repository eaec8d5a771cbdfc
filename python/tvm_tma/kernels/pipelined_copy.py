"""A persistent, multi-stage TMA streaming copy written with ``Tx.copy_async(dispatch="tma")``.

The kernel lives in the package so that the example (``python examples/pipelined_copy.py``:
builds the dynamic-schedule kernel, assembles it for sm_90a and, on a Hopper GPU, copies a
random 4096 x 4096 float16 tensor and checks every element), the streaming-copy benchmark
and the tests import one copy of it.

How the kernel works
--------------------
The (rows x cols) tensor is cut into (tile_rows x tile_cols) tiles, numbered row-major.
The kernel runs ``ctas`` CTAs with ``producers`` producer threads each (lane 0 of each
warp); producer ``p`` of CTA ``b`` is *lane* ``v = b * producers + p`` of ``V`` lanes and
takes tiles ``v``, ``v + V``, ``v + 2V``, ... so that at any moment neighbouring lanes
stream neighbouring memory.

Each producer owns a ring of ``stages`` shared tiles: a
:class:`tvm_tma.pipeline.TmaPipeline` drained by TMA stores (``empty=None``: no empty
barriers, the producer's own bulk groups tell it when a slot may be refilled), built as
``TmaPipeline(full, None, stages, first=producer * stages)`` so that every producer's
slots and full mbarriers sit side by side in one buffer. The producer's k-th tile is ring
use k (slot ``first + k % stages``). One thread per pipeline is all TMA needs:

1. Prologue: ``ring.init()`` (one full mbarrier per slot), then the loads of the
   producer's first ``stages`` tiles (uses 0 .. stages - 1, nothing to wait for). Each load
   completes on ``ring.full_barrier(k)``; ``ring.producer_commit`` (``arrive.expect_tx``)
   announces its bytes right after the copy is issued.
2. Steady state, for use k: ``ring.consumer_wait(k)`` (the slot's full mbarrier, phase
   ``k // stages % 2``), then TMA-store the slot back to global memory and commit the store
   as a bulk group. The slot of the *previous* tile is refilled next, with use
   ``k - 1 + stages``: ``ring.producer_acquire(k - 1 + stages, pending_stores=1)`` is
   ``wait_group.read 1``, which waits only until the store of use k - 1 has finished
   reading shared memory (not for its global writes), while the store just issued keeps
   running. So ``stages - 1`` loads and up to two stores are in flight per producer at all
   times.
3. Epilogue: ``wait_group.read 0``: shared memory must outlive the stores' reads of it;
   their global writes complete with the kernel.

With ``schedule="dynamic"`` (:func:`dynamic_pipelined_copy_kernel`) the first ``stages``
tiles of each lane are still static, but every refill then takes the next tile from a
global atomic counter, so faster SMs copy more tiles and the grid finishes together. On an
H100 that is worth about 3 points of bandwidth (benchmarks/RESULTS.md).

Bulk groups belong to the thread that commits them, so producers never wait for each
other. The copy_async calls name only tiles and the ring; ``dispatch="tma"`` plans the
tensor maps (one per tensor, encoded once per launch on the host, cached across launches
by the runtime) and proves every box inside its tensor from the ranges of ``cta``,
``tid`` and ``k``.

With ``swizzle=True`` the ring uses the 128B-swizzled GEMM-operand layout
(``mma_shared_layout``): the copy is the same, but each tile moves as 128-byte-wide
swizzled boxes, exactly as a GEMM mainloop would load its operands.

benchmarks/copy_bandwidth.py times this kernel against torch ``copy_``; the shapes it
uses by default are the best ones its ``--sweep`` found on an H100 (RESULTS.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma  # noqa: F401  (registers dispatch="tma"; autoloaded anyway once installed)
from tvm_tma.pipeline import TmaPipeline

#: Bytes reserved at the front of dynamic shared memory for the mbarriers. The ring starts
#: right after them, on the 1024-byte period that 128B swizzle needs.
BARRIER_BYTES = 1024
#: Ring slots the barrier area holds: an 8-byte mbarrier each in its first half, and (for the
#: dynamic schedule) the 4-byte index of the tile each slot holds in its second half.
MAX_SLOTS = BARRIER_BYTES // 2 // 8


@dataclass(frozen=True)
class PipelineShape:
    """What one persistent pipelined copy moves, and how it is cut up."""

    rows: int
    cols: int
    dtype: str = "float16"
    tile_rows: int = 128
    tile_cols: int = 128
    stages: int = 4
    ctas: int = 132
    #: Producer threads per CTA (lane 0 of each warp), each with its own ``stages``.
    producers: int = 1
    swizzle: bool = False
    #: "static": lane v copies tiles v, v + V, ...; "dynamic": after its first ``stages``
    #: tiles (static), each producer takes the next tile from a global atomic counter.
    schedule: str = "static"
    #: L2 eviction priority of the loads / stores (``cache_hint=`` of copy_async), or None.
    load_hint: str | None = None
    store_hint: str | None = None

    @property
    def tiles_per_row(self) -> int:
        return self.cols // self.tile_cols

    @property
    def num_tiles(self) -> int:
        return (self.rows // self.tile_rows) * self.tiles_per_row

    @property
    def tile_bytes(self) -> int:
        return self.tile_rows * self.tile_cols * tvm.DataType(self.dtype).bits // 8

    @property
    def shared_bytes(self) -> int:
        return BARRIER_BYTES + self.producers * self.stages * self.tile_bytes

    def check(self) -> None:
        """Refuse shapes the kernel below does not handle, naming the offending value."""
        if self.tile_rows < 1 or self.tile_cols < 1:
            raise ValueError(f"tile {self.tile_rows}x{self.tile_cols} is empty")
        if self.rows % self.tile_rows or self.cols % self.tile_cols:
            raise ValueError(f"tile {self.tile_rows}x{self.tile_cols} does not divide the "
                             f"tensor {self.rows}x{self.cols}")
        if self.schedule not in ("static", "dynamic"):
            raise ValueError(f"schedule={self.schedule!r}: 'static' or 'dynamic'")
        if self.stages < 2:
            raise ValueError(f"stages={self.stages}: the ring needs at least 2 stages")
        if not 1 <= self.producers <= 32 or self.producers * self.stages > MAX_SLOTS:
            raise ValueError(f"producers={self.producers} x stages={self.stages}: at most 32 "
                             f"producers and {MAX_SLOTS} slots")
        if self.shared_bytes > 227 * 1024:
            raise ValueError(f"{self.producers * self.stages} slots of {self.tile_bytes} bytes "
                             f"need {self.shared_bytes} bytes of shared memory (> 227 KiB)")


def ring_layout(shape: PipelineShape):
    """Layout of the (stages, tile_rows, tile_cols) ring: row-major or 128B-swizzled."""
    ring = (shape.producers * shape.stages, shape.tile_rows, shape.tile_cols)
    if shape.swizzle:
        from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

        return mma_shared_layout(shape.dtype, 3, ring)
    return TileLayout(S[ring])


def make_tile_moves(shape: PipelineShape):
    """``(load_tile, store_tile)``, what both kernels do with a tile (by its index):

    * ``load_tile(ring, tiles, A, use, tile)``: TMA-load it from A into the slot of ring
      use ``use`` and announce its bytes on that use's "full" barrier (the load is issued
      first: either order is correct, the phase cannot complete before the arrival);
    * ``store_tile(ring, tiles, B, use, tile)``: wait for that use's load, TMA-store the
      slot into B and commit the store's bulk group.
    """
    tm, tn, per_row, tile_bytes = (shape.tile_rows, shape.tile_cols, shape.tiles_per_row,
                                   shape.tile_bytes)
    load_hint, store_hint = shape.load_hint, shape.store_hint

    def origin(tile):
        """(row, column) of a tile's first element."""
        return tile // per_row * tm, tile % per_row * tn

    # fmt: off
    @T.inline
    def load_tile(ring, tiles, A, use, tile):
        r0, c0 = T.meta_var(origin(tile))
        Tx.copy_async(tiles[ring.slot(use), :, :], A[r0:r0 + tm, c0:c0 + tn],
                      dispatch="tma", mbar=ring.full_barrier(use), cache_hint=load_hint)
        ring.producer_commit(use, tile_bytes)

    @T.inline
    def store_tile(ring, tiles, B, use, tile):
        r0, c0 = T.meta_var(origin(tile))
        ring.consumer_wait(use)
        Tx.copy_async(B[r0:r0 + tm, c0:c0 + tn], tiles[ring.slot(use), :, :],
                      dispatch="tma", cache_hint=store_hint)
        T.ptx.cp.async_.bulk.commit_group()
    # fmt: on
    return load_tile, store_tile


def pipelined_copy_kernel(shape: PipelineShape):
    """The persistent copy ``B[:, :] = A[:, :]`` as a TVMScript PrimFunc.

    With ``schedule="dynamic"`` the PrimFunc takes a third argument, ``work``: two int32
    counters in global memory, zero before the first launch; every launch leaves them zero.
    Launches that may run at the same time (on different streams) need one ``work`` each.
    """
    shape.check()
    if shape.schedule == "dynamic":
        return dynamic_pipelined_copy_kernel(shape)
    rows, cols, dtype = shape.rows, shape.cols, shape.dtype
    tm, tn, stages, ctas = shape.tile_rows, shape.tile_cols, shape.stages, shape.ctas
    producers, lanes = shape.producers, shape.ctas * shape.producers
    num_tiles = shape.num_tiles
    # The most tiles any lane gets; lane v gets one fewer when v >= num_tiles % lanes.
    rounds = math.ceil(num_tiles / lanes)
    layout = ring_layout(shape)
    load_tile, store_tile = make_tile_moves(shape)

    # fmt: off
    @T.prim_func
    def pipelined_copy(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (rows, cols), dtype, layout=TileLayout(S[rows, cols]))
        B = T.match_buffer(B_ptr, (rows, cols), dtype, layout=TileLayout(S[rows, cols]))
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([32 * producers])
        dyn = T.alloc_buffer((shape.shared_bytes,), "uint8", scope="shared.dyn")
        full = T.decl_buffer((producers * stages,), "uint64", dyn.data, elem_offset=0)
        tiles = T.decl_buffer((producers * stages, tm, tn), dtype, dyn.data,
                              elem_offset=BARRIER_BYTES * 8 // tvm.DataType(dtype).bits,
                              layout=layout)
        # Lane 0 of each warp is one producer with its own stages, barriers and bulk groups.
        producer = T.meta_var(tid // 32)
        lane = T.meta_var(cta * producers + producer)
        if tid % 32 == 0:
            # This producer's ring: slots and barriers producer * stages .., drained by its
            # own TMA stores. Its k-th tile (lane + k * lanes) is ring use k.
            ring = TmaPipeline(full, None, stages, first=producer * stages)
            ring.init()
            T.ptx.fence.proxy.async_.shared__cta()
            # Prologue: fill every stage (uses 0 .. stages - 1: nothing to wait for). Each
            # load is issued before producer_commit announces its bytes (either order is
            # correct: the phase cannot complete before the arrival).
            for k in T.serial(stages):
                tile = lane + k * lanes
                if tile < num_tiles:
                    load_tile(ring, tiles, A, k, tile)
            for k in T.serial(rounds):
                tile = lane + k * lanes
                if tile < num_tiles:
                    store_tile(ring, tiles, B, k, tile)
                    # Refill the previous tile's slot with use k - 1 + stages once the store
                    # of use k - 1 has read it (the one just committed may still read).
                    use = T.meta_var(k - 1 + stages)
                    refill = lane + use * lanes
                    if k >= 1 and refill < num_tiles:
                        ring.producer_acquire(use, pending_stores=1)
                        load_tile(ring, tiles, A, use, refill)
            # Shared memory must outlive the stores' reads of it; their global writes
            # complete with the kernel (as in CUTLASS's TMA epilogue).
            T.ptx.cp.async_.bulk.wait_group.read(0)
    # fmt: on
    return pipelined_copy


def dynamic_pipelined_copy_kernel(shape: PipelineShape):
    """The same ring, fed by a dynamic tile scheduler (as CUTLASS's persistent schedulers).

    A static round-robin hands every lane the same number of tiles (give or take one), so
    the kernel lasts as long as its slowest lane, and the last round runs on only some of
    them. Here each producer starts with its first ``stages`` tiles (static: no counter on
    the critical path of the prologue) and then takes tile ``stages * V + work[0]++``
    whenever it refills a stage, so an SM that runs ahead simply copies more tiles.

    - The counter's next value is fetched one refill ahead: the atomic's round trip to L2
      overlaps the wait for the current stage instead of delaying the next load.
    - Tiles are handed out in increasing order, so once a producer draws an index past the
      end, every later draw is past the end too: the ring drains and the producer stops.
    - ``work[1]`` counts finished producers; the last one resets both counters, so the next
      launch (which starts after this kernel ends) finds them zero. The ``__threadfence``
      orders each producer's last draw before its "finished" count.

    Each slot's tile index lives in the second half of the barrier area.
    """
    rows, cols, dtype = shape.rows, shape.cols, shape.dtype
    tm, tn, stages, ctas = shape.tile_rows, shape.tile_cols, shape.stages, shape.ctas
    producers, lanes = shape.producers, shape.ctas * shape.producers
    num_tiles = shape.num_tiles
    first_dynamic = stages * lanes  # tiles below this are the static prologue's
    layout = ring_layout(shape)
    load_tile, store_tile = make_tile_moves(shape)

    # fmt: off
    @T.prim_func
    def dynamic_pipelined_copy(A_ptr: T.handle, B_ptr: T.handle, work_ptr: T.handle):
        A = T.match_buffer(A_ptr, (rows, cols), dtype, layout=TileLayout(S[rows, cols]))
        B = T.match_buffer(B_ptr, (rows, cols), dtype, layout=TileLayout(S[rows, cols]))
        work = T.match_buffer(work_ptr, (2,), "int32")
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([32 * producers])
        dyn = T.alloc_buffer((shape.shared_bytes,), "uint8", scope="shared.dyn")
        full = T.decl_buffer((producers * stages,), "uint64", dyn.data, elem_offset=0)
        held = T.decl_buffer((producers * stages,), "int32", dyn.data,
                             elem_offset=BARRIER_BYTES // 2 // 4)  # tile index per slot
        tiles = T.decl_buffer((producers * stages, tm, tn), dtype, dyn.data,
                              elem_offset=BARRIER_BYTES * 8 // tvm.DataType(dtype).bits,
                              layout=layout)
        k = T.alloc_buffer((1,), "int32", scope="local")  # this producer's tile count
        tile = T.alloc_buffer((1,), "int32", scope="local")  # the tile of its k-th stage
        drawn = T.alloc_buffer((1,), "int32", scope="local")  # the next tile, drawn ahead
        producer = T.meta_var(tid // 32)
        lane = T.meta_var(cta * producers + producer)
        if tid % 32 == 0:
            # The producer's ring, as in the static kernel: its k-th tile is ring use k.
            ring = TmaPipeline(full, None, stages, first=producer * stages)
            ring.init()
            T.ptx.fence.proxy.async_.shared__cta()
            # Prologue: the first `stages` tiles of every lane are static (uses 0 ..
            # stages - 1). Loads are issued before producer_commit, as in the static kernel.
            for s in T.serial(stages):
                first_tile = lane + s * lanes
                held[ring.slot(s)] = first_tile
                if first_tile < num_tiles:
                    load_tile(ring, tiles, A, s, first_tile)
            drawn[0] = first_dynamic + T.cuda.atomic_add(work.ptr_to([0]), 1)
            k[0] = 0
            tile[0] = held[ring.slot(0)]
            while tile[0] < num_tiles:
                # Held tiles are lane + s * lanes or drawn ones: never negative.
                T.assume(tile[0] >= 0)
                store_tile(ring, tiles, B, k[0], tile[0])
                # Refill the previous tile's slot with the drawn tile (use k - 1 + stages)
                # once the store of use k - 1 has read it, and draw the one after.
                if k[0] >= 1:
                    use = T.meta_var(k[0] - 1 + stages)
                    ring.producer_acquire(use, pending_stores=1)
                    held[ring.slot(use)] = drawn[0]
                    if drawn[0] < num_tiles:
                        # An atomic counter that starts at zero: first_dynamic or later.
                        T.assume(drawn[0] >= first_dynamic)
                        load_tile(ring, tiles, A, use, drawn[0])
                        drawn[0] = first_dynamic + T.cuda.atomic_add(work.ptr_to([0]), 1)
                k[0] = k[0] + 1
                tile[0] = held[ring.slot(k[0])]
            T.ptx.cp.async_.bulk.wait_group.read(0)
            # The last producer to finish resets the counters for the next launch.
            T.cuda.thread_fence()
            if T.cuda.atomic_add(work.ptr_to([1]), 1) == lanes - 1:
                work[0] = 0
                work[1] = 0
    # fmt: on
    return dynamic_pipelined_copy
