"""A TMA-fed, warp-specialized WGMMA GEMM for Hopper, written in TVMScript.

``C = A @ B^T`` (B given as N x K, cuBLAS's "TN") or ``C = A @ B`` (B given as K x N), with
A row-major M x K, bf16 or fp16 inputs, fp32 accumulation and C in the input type.

Run it: ``python examples/gemm_hopper.py`` builds the kernels, assembles them for sm_90a
and, on a Hopper GPU, checks a ragged problem against numpy.

How the kernel works
--------------------
The grid is persistent: ``ctas`` CTAs (one per SM) walk the ``ceil(M / BM) x ceil(N / BN)``
output tiles (the work units; more with split-K); CTA ``b`` takes units ``b, b + ctas,
b + 2 ctas, ...`` (clusters of CTAs take them the same way). Tile numbers map to
(row block, column block) in groups of ``group_m`` row blocks (:func:`tile_coordinates`),
so the CTAs running at one moment share A row blocks and B column blocks in L2.

Each CTA has three warpgroups (384 threads):

* **Producer** (warpgroup 0): gives registers back (``setmaxnreg.dec`` to 40) and one
  thread issues, for every K step of every tile, the TMA loads of an A tile (BM x BK) and a
  B tile (BN x BK, or BK x BN) into the next slot of a ring of ``stages`` 128B-swizzled
  slots (:class:`tvm_tma.pipeline.TmaPipeline`: it waits for the slot's "empty" barrier,
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
* ``split_k=S``: K is cut into S parts, each its own work unit, and each unit adds its
  product into C with a TMA reduce-add store (``reduce="add"``): the kernel computes
  ``C += A @ B``. The last part's K steps past K load zeros, so every unit runs the same
  number of ring uses.

The kernel's pieces are the helpers of :func:`gemm_kernel`: ``load_unit`` (producer),
``mma_unit`` (a consumer's mainloop), ``release`` and ``store_unit`` (epilogue).

The barrier phases are counted, not tracked: producer and consumers both number their uses
of the ring ``it = j * steps + k`` (the CTA's work unit ordinal j, K step k), so slot and
parity are ``it % stages`` and ``it // stages % 2`` on both sides (see
:mod:`tvm_tma.pipeline` for the protocol drawn out step by step); a ping-pong warpgroup
skips the other's units without touching a barrier.

The WGMMA operand descriptors follow the slot layout the TMA wrote
(``mma_shared_layout(dtype, 3, ...)``): K-major tiles (A; B as N x K) have 128-byte rows
in 8-row, 1024-byte swizzle atoms (stride byte offset 1024); the N-major B tile (B as
K x N) is 64-column atoms stacked along N, 8 KiB apart (leading byte offset), read with
the transpose bit. Each k16 step moves the descriptor's start address by 32 bytes
(K-major) or 16 rows of 128 bytes (N-major).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tvm_tma.demo import hopper_available  # importing tvm_tma registers dispatch="tma"
from tvm_tma.pipeline import TmaPipeline

#: Bytes at the front of dynamic shared memory for the ring's mbarriers; the tiles start
#: right after, on the 1024-byte period of the 128B swizzle.
BARRIER_BYTES = 1024
#: Warpgroup size, and the register budgets of the producer and the consumers
#: (2 x 128 x 232 + 128 x 40 = 64512 of the SM's 65536 registers).
WARPGROUP = 128
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232
#: K extent of one wgmma instruction for 16-bit inputs.
MMA_K = 16
#: Largest dynamic shared memory a Hopper CTA may use.
MAX_SHARED = 227 * 1024


@dataclass(frozen=True)
class GemmConfig:
    """One GEMM problem and how the kernel cuts it up."""

    m: int
    n: int
    k: int
    dtype: str = "bfloat16"
    #: "nk": B is given as N x K (C = A @ B^T, cuBLAS "TN"); "kn": B is K x N (C = A @ B).
    b_layout: str = "nk"
    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    stages: int = 4
    #: Row blocks per group of the tile order (L2 reuse); 1 is plain row-major order.
    group_m: int = 8
    #: Columns of C staged in shared memory per TMA store (0: the whole block_n). A
    #: narrower C stage leaves room for one more ring slot.
    epilogue_n: int = 128
    ctas: int = 132
    #: "cooperative": both consumer warpgroups work on one tile (64 rows each);
    #: "pingpong": each consumer warpgroup takes every other tile whole (block_m rows), and
    #: one's epilogue runs while the other's MMAs do.
    schedule: str = "cooperative"
    #: CTAs per cluster (1 or 2). With 2, the CTAs of a cluster compute vertically adjacent
    #: tiles of one column block and multicast the B tile they share: each loads half.
    cluster: int = 1
    #: Parts K is cut into. With more than one, each part's product is added into C with a
    #: TMA reduce-add store: the kernel computes C += A @ B (C must hold zeros for C = A @ B).
    split_k: int = 1

    @classmethod
    def for_problem(cls, m: int, n: int, k: int, **options) -> GemmConfig:
        """The default tiling for a problem: cooperative 128 x 256 tiles (4 stages, C staged
        128 columns at a time), or, when 128 x 256 tiles would leave SMs idle, 128 x 128
        tiles (6 stages) in 2x1 clusters that multicast B.

        From the sweep in benchmarks/RESULTS.md (H200): cooperative 128 x 256 x 64 with 4
        stages is fastest wherever there are at least as many tiles as SMs (ping-pong 128 x
        128 reaches 90% of it at 8192^3; clusters change nothing there). A 1000 x 2000
        problem has only 64 such tiles for 132 SMs: 128 x 128 tiles in clusters run it
        1.5x faster (97% of cuBLAS against 64%), the cluster alone being worth 1.23x.
        """
        wide = cls(m, n, k, **options)
        if wide.num_tiles >= wide.ctas:
            return wide
        narrow = {"block_n": 128, "stages": 6, "epilogue_n": 0}
        if wide.m_blocks >= 2 and wide.ctas % 2 == 0:
            narrow["cluster"] = 2
        return cls(m, n, k, **{**narrow, **options})

    @property
    def consumers(self) -> int:
        """Consumer warpgroups: 64 rows of the tile each (cooperative), or two that take
        turns (ping-pong)."""
        return 2 if self.schedule == "pingpong" else self.block_m // 64

    @property
    def consumer_rows(self) -> int:
        """Rows of a tile one consumer warpgroup computes."""
        return self.block_m if self.schedule == "pingpong" else 64

    @property
    def accumulators(self) -> int:
        """fp32 accumulator registers per consumer thread (its rows x block_n / 128)."""
        return self.consumer_rows * self.block_n // WARPGROUP

    @property
    def ring_consumers(self) -> int:
        """Arrivals per CTA that release a ring slot: every consumer warpgroup reads every
        slot (cooperative), or one does (ping-pong)."""
        return 1 if self.schedule == "pingpong" else self.consumers

    @property
    def c_stages(self) -> int:
        """C stages in shared memory: one shared, or one per ping-pong warpgroup."""
        return 2 if self.schedule == "pingpong" else 1

    @property
    def workers(self) -> int:
        """Persistent workers: CTAs, or clusters of CTAs."""
        return self.ctas // self.cluster

    @property
    def m_groups(self) -> int:
        """Row blocks as the tile order sees them: ``cluster`` adjacent ones together."""
        return math.ceil(self.m_blocks / self.cluster)

    @property
    def work_units(self) -> int:
        """(cluster of tiles, K part) pairs the workers walk."""
        return self.m_groups * self.n_blocks * self.split_k

    @property
    def steps_per_unit(self) -> int:
        """K steps of one work unit (the last part's trailing ones lie past K: TMA fills
        them with zeros, so every unit runs the same number of ring uses)."""
        return math.ceil(self.k_steps / self.split_k)

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    @property
    def element_bytes(self) -> int:
        return tvm.DataType(self.dtype).bits // 8

    @property
    def a_tile_bytes(self) -> int:
        return self.block_m * self.block_k * self.element_bytes

    @property
    def b_tile_bytes(self) -> int:
        return self.block_n * self.block_k * self.element_bytes

    @property
    def epilogue_cols(self) -> int:
        return self.epilogue_n or self.block_n

    @property
    def c_tile_bytes(self) -> int:
        return self.block_m * self.epilogue_cols * self.element_bytes

    @property
    def shared_bytes(self) -> int:
        return (BARRIER_BYTES + self.stages * (self.a_tile_bytes + self.b_tile_bytes)
                + self.c_stages * self.c_tile_bytes)

    @property
    def m_blocks(self) -> int:
        return math.ceil(self.m / self.block_m)

    @property
    def n_blocks(self) -> int:
        return math.ceil(self.n / self.block_n)

    @property
    def k_steps(self) -> int:
        return math.ceil(self.k / self.block_k)

    @property
    def num_tiles(self) -> int:
        return self.m_blocks * self.n_blocks

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k

    def check(self) -> None:
        """Refuse configurations the kernel does not handle, naming the offending value."""
        if self.dtype not in ("bfloat16", "float16"):
            raise ValueError(f"dtype={self.dtype!r}: 'bfloat16' or 'float16'")
        if self.b_layout not in ("nk", "kn"):
            raise ValueError(f"b_layout={self.b_layout!r}: 'nk' (N x K) or 'kn' (K x N)")
        for name, extent in (("m", self.m), ("n", self.n), ("k", self.k)):
            if extent < 8 or extent % 8:
                raise ValueError(f"{name}={extent}: GEMM extents must be positive multiples "
                                 f"of 8 (16-byte rows for TMA)")
        if self.block_m not in (64, 128):
            raise ValueError(f"block_m={self.block_m}: 64 or 128 (one or two consumer "
                             f"warpgroups of 64 rows)")
        if self.block_n % 64 or not 64 <= self.block_n <= 256:
            raise ValueError(f"block_n={self.block_n}: a multiple of 64 up to 256 "
                             f"(wgmma N, whole 128-byte swizzle atoms)")
        if self.block_k != 64:
            raise ValueError(f"block_k={self.block_k}: 64 (one 128-byte swizzle row)")
        if self.stages < 2:
            raise ValueError(f"stages={self.stages}: the ring needs at least 2 slots")
        if self.epilogue_cols % 64 or self.block_n % self.epilogue_cols:
            raise ValueError(f"epilogue_n={self.epilogue_n}: whole 64-column atoms that "
                             f"divide block_n={self.block_n}")
        if self.schedule not in ("cooperative", "pingpong"):
            raise ValueError(f"schedule={self.schedule!r}: 'cooperative' or 'pingpong'")
        if self.accumulators > 128:
            raise ValueError(f"{self.schedule}: a consumer warpgroup computes "
                             f"{self.consumer_rows}x{self.block_n} outputs, "
                             f"{self.accumulators} fp32 registers per thread (at most 128 of "
                             f"its {CONSUMER_REGISTERS})")
        if self.cluster not in (1, 2):
            raise ValueError(f"cluster={self.cluster}: 1 or 2 CTAs (2x1, sharing B)")
        if self.ctas % self.cluster:
            raise ValueError(f"ctas={self.ctas}: a multiple of cluster={self.cluster}")
        if self.split_k < 1 or (self.split_k - 1) * self.steps_per_unit >= self.k_steps:
            raise ValueError(f"split_k={self.split_k}: 1 up to the point where every part "
                             f"keeps at least one of the {self.k_steps} K steps")
        if self.group_m < 1 or self.ctas < 1:
            raise ValueError(f"group_m={self.group_m}, ctas={self.ctas}: both at least 1")
        if self.shared_bytes > MAX_SHARED:
            raise ValueError(f"{self.stages} stages of {self.block_m}x{self.block_n}x"
                             f"{self.block_k} tiles need {self.shared_bytes} bytes of shared "
                             f"memory (> {MAX_SHARED})")


def tile_coordinates(tile, m_blocks: int, n_blocks: int, group_m: int):
    """(row block, column block) of output tile ``tile`` in grouped order.

    Tiles go column by column within a group of ``group_m`` row blocks, group after group,
    so consecutive tiles (run by neighbouring CTAs at the same moment) reuse the group's A
    row blocks and each B column block ``group_m`` times while they are in L2.
    """
    per_group = group_m * n_blocks
    first = tile // per_group * group_m
    rows = T.min(m_blocks - first, group_m)
    within = tile % per_group
    return first + within % rows, within // rows


def gemm_kernel(cfg: GemmConfig):
    """The persistent warp-specialized GEMM of ``cfg`` as a TVMScript PrimFunc.

    The pipeline's stages are the helpers below: ``load_unit`` (producer), ``mma_unit``
    (one consumer warpgroup's mainloop over a work unit, handing slots back through
    ``release``) and ``store_unit`` (its epilogue); ``gemm`` wires them to the warpgroups.
    """
    cfg.check()
    m, n, k, dtype = cfg.m, cfg.n, cfg.k, cfg.dtype
    bm, bn, bk, stages = cfg.block_m, cfg.block_n, cfg.block_k, cfg.stages
    ctas, cluster, split_k, steps = cfg.ctas, cfg.cluster, cfg.split_k, cfg.steps_per_unit
    workers, units, m_groups = cfg.workers, cfg.work_units, cfg.m_groups
    n_blocks, group_m = cfg.n_blocks, cfg.group_m
    rounds = math.ceil(units / workers)
    pingpong = cfg.schedule == "pingpong"
    consumers, m_sub = cfg.consumers, cfg.consumer_rows // 64
    elem = cfg.element_bytes
    kn = cfg.b_layout == "kn"
    b_shape = (k, n) if kn else (n, k)
    b_slot = (bk, bn) if kn else (bn, bk)
    acc_regs = cfg.accumulators
    ptx_type = "bf16" if dtype == "bfloat16" else "f16"
    mma = T.ptx[f"wgmma.mma_async.sync.aligned.m64n{bn}k{MMA_K}.f32.{ptx_type}.{ptx_type}"]
    # Descriptor fields in 16-byte units: K-major tiles have 1024-byte 8-row atoms; the
    # N-major B tile has 64-column atoms bk rows of 128 bytes apart.
    a_lead, a_stride = 1, 1024 // 16
    b_lead, b_stride = ((bk * 128 // 16, 1024 // 16) if kn else (1, 1024 // 16))
    a_step = MMA_K * elem // 16  # descriptor advance per k16: 32 bytes along a 128-byte row
    b_step = MMA_K * 128 // 16 if kn else a_step  # N-major: 16 rows of 128 bytes
    a_sub = 64 * bk * elem // 16  # descriptor advance per 64-row A sub-tile
    a_offset = BARRIER_BYTES // elem
    b_offset = (BARRIER_BYTES + stages * cfg.a_tile_bytes) // elem
    c_offset = (BARRIER_BYTES + stages * (cfg.a_tile_bytes + cfg.b_tile_bytes)) // elem
    tile_bytes = cfg.a_tile_bytes + cfg.b_tile_bytes
    en, c_stages = cfg.epilogue_cols, cfg.c_stages
    # Threads that meet at an epilogue barrier: every consumer (cooperative: they share one
    # C stage) or one warpgroup (ping-pong: each has its own).
    epilogue_threads = WARPGROUP * (1 if pingpong else consumers)
    reduce = "add" if split_k > 1 else None

    def unit_coordinates(unit, rank):
        """(row block, column block, K part) of work unit ``unit`` for cluster rank ``rank``:
        the CTAs of a cluster take vertically adjacent row blocks of one column block."""
        tile, part = unit // split_k, unit % split_k
        mg, nb = tile_coordinates(tile, m_groups, n_blocks, group_m)
        return mg * cluster + rank, nb, part

    # fmt: off
    @T.inline
    def load_unit(ring, a_ring, b_ring, A, B, j, mb, nb, part, rank):
        # Producer: the unit's K steps, one ring slot each (A tile and B tile).
        for ks in T.serial(steps):
            it = T.meta_var(j * steps + ks)
            s = T.meta_var(ring.slot(it))
            k0 = T.meta_var((part * steps + ks) * bk)
            ring.producer_acquire(it)
            ring.producer_commit(it, tile_bytes)
            Tx.copy_async(a_ring[s, :, :], A[mb * bm:mb * bm + bm, k0:k0 + bk],
                          dispatch="tma", mbar=ring.full_barrier(it), oob="zero")
            if cluster > 1:
                # The cluster's CTAs share the B tile: each loads 1/cluster of it into all.
                if kn:
                    Tx.copy_async(b_ring[s, :, :], B[k0:k0 + bk, nb * bn:nb * bn + bn],
                                  dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                                  multicast=rank)
                else:
                    Tx.copy_async(b_ring[s, :, :], B[nb * bn:nb * bn + bn, k0:k0 + bk],
                                  dispatch="tma", mbar=ring.full_barrier(it), oob="zero",
                                  multicast=rank)
            elif kn:
                Tx.copy_async(b_ring[s, :, :], B[k0:k0 + bk, nb * bn:nb * bn + bn],
                              dispatch="tma", mbar=ring.full_barrier(it), oob="zero")
            else:
                Tx.copy_async(b_ring[s, :, :], B[nb * bn:nb * bn + bn, k0:k0 + bk],
                              dispatch="tma", mbar=ring.full_barrier(it), oob="zero")

    @T.inline
    def release(ring, it, lane):
        # One arrival per warpgroup: from lane 0, or in a cluster from lanes 0 .. cluster-1,
        # lane r on CTA r's barrier (the arrivals travel in parallel).
        if cluster > 1:
            if lane < cluster:
                ring.consumer_release(it, rank=lane)
        elif lane == 0:
            ring.consumer_release(it)

    @T.inline
    def mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, row0, lane):
        # One consumer warpgroup's mainloop: wait for each slot, run its MMAs, and release
        # the previous slot once the group that read it has retired.
        for ks in T.serial(steps):
            it = T.meta_var(j * steps + ks)
            s = T.meta_var(ring.slot(it))
            ring.consumer_wait(it)
            T.cuda.wgmma.encode_matrix_descriptor(
                T.address_of(desc_a[0]), a_ring.ptr_to([s, row0, 0]), a_lead, a_stride, 3)
            T.cuda.wgmma.encode_matrix_descriptor(
                T.address_of(desc_b[0]), b_ring.ptr_to([s, 0, 0]), b_lead, b_stride, 3)
            T.ptx.wgmma.fence.sync.aligned()
            for kk in T.unroll(bk // MMA_K):
                for mi in T.unroll(m_sub):
                    mma(*[acc[mi * (bn // 2) + i] for i in range(bn // 2)],
                        desc_a[0] + T.uint64(mi * a_sub + kk * a_step),
                        desc_b[0] + T.uint64(kk * b_step),
                        T.Or(ks > 0, kk > 0), 1, 1, 0, 1 if kn else 0)
            T.ptx.wgmma.commit_group.sync.aligned()
            # At most this step's group in flight: the previous one has read its slot.
            T.ptx.wgmma.wait_group.sync.aligned(1)
            if ks > 0:
                release(ring, it - 1, lane)
        T.ptx.wgmma.wait_group.sync.aligned(0)
        release(ring, j * steps + steps - 1, lane)

    @T.inline
    def store_unit(C, c_tile, acc, cs, row0, mb, nb, lane, barrier, storer):
        # Epilogue, en columns at a time: round the accumulators into the C stage, then one
        # thread stores it with TMA; the previous store must have read the stage first.
        warp = T.meta_var(lane // 32)
        for h in T.unroll(bn // en):
            if storer:
                T.ptx.cp.async_.bulk.wait_group.read(0)
            T.ptx.bar.sync(T.Cast("uint32", barrier), epilogue_threads)
            for mi in T.unroll(m_sub):
                for i in T.unroll(en // 2):
                    # wgmma m64nN f32 fragment: register r of lane l of warp w holds row
                    # 16w + l/4 + 8*((r/2)%2), column 8*(r/4) + 2*(l%4) + r%2; this stage
                    # holds registers h*en/2 .. (h+1)*en/2 - 1 of each 64-row sub-tile.
                    c_tile[cs, row0 + mi * 64 + warp * 16 + lane % 32 // 4 + i // 2 % 2 * 8,
                           i // 4 * 8 + lane % 4 * 2 + i % 2] = T.Cast(
                               dtype, acc[mi * (bn // 2) + h * (en // 2) + i])
            T.ptx.fence.proxy.async_.shared__cta()
            T.ptx.bar.sync(T.Cast("uint32", barrier), epilogue_threads)
            n0 = T.meta_var(nb * bn + h * en)
            if storer and mb * bm < m and n0 < n:
                if split_k > 1:
                    Tx.copy_async(C[mb * bm:mb * bm + bm, n0:n0 + en], c_tile[cs, :, :],
                                  dispatch="tma", oob="skip", reduce=reduce)
                else:
                    Tx.copy_async(C[mb * bm:mb * bm + bm, n0:n0 + en], c_tile[cs, :, :],
                                  dispatch="tma", oob="skip")
                T.ptx.cp.async_.bulk.commit_group()

    @T.prim_func
    def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
        A = T.match_buffer(A_ptr, (m, k), dtype, layout=TileLayout(S[m, k]))
        B = T.match_buffer(B_ptr, b_shape, dtype, layout=TileLayout(S[b_shape]))
        C = T.match_buffer(C_ptr, (m, n), dtype, layout=TileLayout(S[m, n]))
        T.device_entry()
        if cluster > 1:
            worker = T.cluster_id([workers])
            rank = T.cta_id_in_cluster([cluster])
        else:
            worker = T.cta_id([ctas])
            rank = T.meta_var(0)
        tid = T.thread_id([cfg.threads])
        dyn = T.alloc_buffer((cfg.shared_bytes,), "uint8", scope="shared.dyn")
        full = T.decl_buffer((stages,), "uint64", dyn.data, elem_offset=0)
        empty = T.decl_buffer((stages,), "uint64", dyn.data, elem_offset=stages)
        a_ring = T.decl_buffer((stages, bm, bk), dtype, dyn.data, elem_offset=a_offset,
                               layout=mma_shared_layout(dtype, 3, (stages, bm, bk)))
        b_ring = T.decl_buffer((stages, *b_slot), dtype, dyn.data, elem_offset=b_offset,
                               layout=mma_shared_layout(dtype, 3, (stages, *b_slot)))
        c_tile = T.decl_buffer((c_stages, bm, en), dtype, dyn.data, elem_offset=c_offset,
                               layout=mma_shared_layout(dtype, 3, (c_stages, bm, en)))
        acc = T.alloc_local((acc_regs,), "float32")
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")
        ring = TmaPipeline(full, empty, stages, consumers=cfg.ring_consumers,
                           cluster=cluster)
        warpgroup = T.meta_var(tid // WARPGROUP)
        lane = T.meta_var(tid % WARPGROUP)

        if tid == 0:
            ring.init()
        if cluster > 1:
            # Every barrier of the cluster exists before any CTA multicasts into a peer.
            T.ptx.fence.mbarrier_init.release.cluster()
            T.cuda.cluster_sync()
        else:
            T.cuda.cta_sync()

        if warpgroup == 0:
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGISTERS)
            if tid == 0:
                for j in T.serial(rounds):
                    unit = T.meta_var(worker + j * workers)
                    if unit < units:
                        mb, nb, part = T.meta_var(unit_coordinates(unit, rank))
                        load_unit(ring, a_ring, b_ring, A, B, j, mb, nb, part, rank)
        else:
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGISTERS)
            consumer = T.meta_var(warpgroup - 1)
            if pingpong:
                # Each warpgroup takes every other unit of this CTA, whole; the mainloops
                # take turns (named barrier 3 + c: "warpgroup c may start its mainloop"),
                # so one warpgroup's epilogue overlaps the other's MMAs.
                for j in T.serial(rounds):
                    unit = T.meta_var(worker + j * workers)
                    if j % 2 == consumer and unit < units:
                        mb, nb, part = T.meta_var(unit_coordinates(unit, rank))
                        if j > 0:
                            T.ptx.bar.sync(T.Cast("uint32", 3 + consumer), 2 * WARPGROUP)
                        mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, 0, lane)
                        if unit + workers < units:
                            T.ptx.bar.arrive(T.Cast("uint32", 4 - consumer), 2 * WARPGROUP)
                        store_unit(C, c_tile, acc, consumer, 0, mb, nb, lane, 1 + consumer,
                                   lane == 0)
            else:
                for j in T.serial(rounds):
                    unit = T.meta_var(worker + j * workers)
                    if unit < units:
                        mb, nb, part = T.meta_var(unit_coordinates(unit, rank))
                        mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, consumer * 64,
                                 lane)
                        store_unit(C, c_tile, acc, 0, consumer * 64, mb, nb, lane, 1,
                                   tid == WARPGROUP)
            if lane == 0:
                T.ptx.cp.async_.bulk.wait_group.read(0)
        if cluster > 1:
            # No CTA exits while a peer may still multicast into it or arrive on its barriers.
            T.cuda.cluster_sync()
    # fmt: on
    return gemm


#: Relative rounding of one output element (C is rounded from fp32 to the input type).
OUTPUT_EPS = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


def reference(a: np.ndarray, b: np.ndarray, b_layout: str) -> tuple[np.ndarray, np.ndarray]:
    """fp32 ``A @ B`` (``B`` as given: N x K for "nk", K x N for "kn"), and ``|A| @ |B|``."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    b_kn = b32.T if b_layout == "nk" else b32
    return a32 @ b_kn, np.abs(a32) @ np.abs(b_kn)


def part_magnitude(a: np.ndarray, b: np.ndarray, cfg: GemmConfig) -> np.ndarray:
    """``sum_p |A_p @ B_p|`` over the K parts of a split-K launch: how large the partial
    products are that the kernel rounds and adds into C one by one."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    b_kn = b32.T if cfg.b_layout == "nk" else b32
    width = cfg.steps_per_unit * cfg.block_k
    return sum(np.abs(a32[:, k0:k0 + width] @ b_kn[k0:k0 + width])
               for k0 in range(0, cfg.k, width))


def error_bound(ref, magnitude, k: int, dtype: str, split_k: int = 1, parts=None,
                initial=None):
    """How far each element of C may be from the fp32 reference ``ref``.

    C is the fp32 sum of K products, rounded once to bf16/fp16: its own rounding is at most
    ``eps_out * |C|`` (2^-8 for bf16, 2^-11 for fp16), and two fp32 summation orders of the
    same K products differ by at most about ``K * 2^-24 * sum |products|`` (``magnitude`` is
    ``|A| @ |B|``). The bound takes twice each, plus 1e-6 for exact zeros.

    With ``split_k`` parts, C starts at ``initial`` and each part's product P_p is rounded
    to the output type and added into C by a reduce-add store, which rounds again: in any
    order, the S roundings of the P_p are at most ``eps_out * parts`` (``parts`` is
    ``sum_p |P_p|``) and the S additions each at most ``eps_out * (|initial| + parts)``;
    the bound takes twice their sum. Works on numpy arrays and torch tensors alike.
    """
    summation = 2 * k * 2.0**-24 * magnitude + 1e-6
    eps = OUTPUT_EPS[dtype]
    if split_k == 1:
        return 2 * eps * abs(ref) + summation
    return 2 * eps * ((split_k + 1) * parts + split_k * abs(initial)) + summation


def run(cfg: GemmConfig, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Build and launch ``cfg`` on random data; returns (C, fp32 reference, bound).

    C starts as NaN poison, so an element the kernel never writes fails the check; with
    split-K (which computes C += A @ B) it starts as random values instead, and the
    reference includes them.
    """
    import ml_dtypes

    from tvm_tma.testing.runner import compile_kernel

    np_type = ml_dtypes.bfloat16 if cfg.dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((cfg.m, cfg.k)).astype(np_type)
    b_shape = (cfg.n, cfg.k) if cfg.b_layout == "nk" else (cfg.k, cfg.n)
    b = rng.standard_normal(b_shape).astype(np_type)
    if cfg.split_k > 1:
        initial = rng.standard_normal((cfg.m, cfg.n)).astype(np_type)
    else:
        initial = np.full((cfg.m, cfg.n), np.nan, dtype=np_type)
    device = tvm.cuda(0)
    c = tvm.runtime.tensor(initial, device)
    kernel = compile_kernel(gemm_kernel(cfg)).executable["main"]
    kernel(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c)
    device.sync()
    ref, magnitude = reference(a, b, cfg.b_layout)
    if cfg.split_k == 1:
        return c.numpy().astype(np.float32), ref, error_bound(ref, magnitude, cfg.k,
                                                              cfg.dtype)
    initial32 = initial.astype(np.float32)
    bound = error_bound(ref, magnitude, cfg.k, cfg.dtype, cfg.split_k,
                        part_magnitude(a, b, cfg), initial32)
    return c.numpy().astype(np.float32), ref + initial32, bound


def main() -> int:
    from tvm_tma.testing.runner import assemble, compile_kernel

    cfg = GemmConfig.for_problem(1000, 2000, 3000)  # ragged: no extent a multiple of a tile
    cubin = assemble(compile_kernel(gemm_kernel(cfg)).cuda_source)
    print(f"{cfg}: {len(cubin)} bytes of sm_90a cubin")
    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    c, ref, bound = run(cfg)
    worst = float(np.max(np.abs(c - ref) / bound))
    ok = bool(np.isfinite(c).all()) and worst <= 1.0
    print(f"C = A @ B^T, {cfg.m}x{cfg.n}x{cfg.k} {cfg.dtype}: "
          f"{'every element within' if ok else 'OUTSIDE'} the bound (worst error/bound "
          f"{worst:.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
