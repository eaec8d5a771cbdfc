"""A grouped GEMM for mixture-of-experts, ``torch._grouped_mm(A, B^T, offs=offs)``: the
GEMM kernel of :mod:`.gemm` walking the tiles of every group, each group's A and C rows
copied through tensor maps rebound on the device.

``A`` is (M, K): the rows of all groups stacked; ``B`` is (E, N, K): one N x K matrix per
group (expert); ``offs`` (E,) int32 in device memory holds the groups' row ends (group
``g`` owns rows ``offs[g - 1] .. offs[g] - 1``, group 0 from row 0); ``C`` (M, N) gets
``C[rows of g] = A[rows of g] @ B[g]^T``. bf16 (or fp16) in and out, fp32 accumulation.
A group may have any number of rows, 0 included, fewer than a tile, not a multiple of 16.

How it works
------------
The kernel is :func:`.gemm.make_kernel_body` -- shared memory, the ring
(:class:`tvm_tma.pipeline.TmaPipeline`), the producer's ``load_unit``, the WGMMA
consumers' ``mma_unit`` and the ``store_unit`` epilogue, cooperative or ping-pong --
with a different walk over the work (``work=``):

* **Tiles across groups.** Group ``g`` has ``ceil(rows_g / block_m) * ceil(N / block_n)``
  tiles; the tiles of all groups are numbered group after group and the persistent CTAs
  take them round-robin (CTA ``w``: tiles ``w, w + ctas, ...``), so a CTA never idles on
  a small group while another works through a large one. Within a group, tiles go row
  block fastest: the CTAs running at one moment share B column blocks (each B tile read
  from DRAM once per wave) while the group's A rows stay in L2. Each thread walks its
  tiles in increasing order and keeps (group, first tile of the group) in registers
  (:func:`make_locate`), so finding a tile's group costs a few loads of ``offs`` per group
  change, not a search.
* **Device-side views.** For a tile of group ``g`` the producer declares the group's rows
  of A, ``A[offs[g - 1]:offs[g], :]``, as a view whose start and extent are read from
  ``offs``, and ``B[g]`` as an (N, K) view; the epilogue declares the group's rows of C.
  The dispatch plans the A and C copies against a template map encoded on the host and
  rebinds a copy of it on the device whenever the group changes
  (:mod:`tvm_tma.dispatch.device_view`): so a tile that crosses the group's last row
  reads zeros there and its store stops at that row, in hardware. ``B[g]`` lies inside
  B whole, so its copies index B's own host-born map at (g, n, k).
* **What the kernel states.** The walk guarantees ``0 <= g < E``, ``0 <= row block`` with
  ``row block * block_m < rows_g`` and the column block inside N; the kernel states them
  with ``T.assume`` where it decodes a tile, and the dispatch proves every copy from
  them (the view inside its tensor, a non-empty group, the B tile inside B). The group
  bounds are read with clamps (``0 <= start <= end <= M``): ``offs`` is data, and a bad
  one must not make a copy leave its tensor.

The tensor-map slots are a workspace the caller passes (:func:`workspace_shape`: 1 KiB
per CTA): per CTA two slots for A and two for each storing consumer warpgroup's C.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import tvm
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout

from .epilogue import make_store_unit
from .gemm import make_kernel_body, make_load_unit
from .gemm_config import WARPGROUP, GemmConfig
from .scheduler import unit_of
from .wgmma import make_mma_unit

#: Input/output element types (16-bit, as ``torch._grouped_mm`` takes them).
DTYPES = ("bfloat16", "float16")
#: Slot pairs per CTA in the tensor-map workspace: A, C of consumer 0, C of consumer 1,
#: and one spare (B[g] is host-born when it lies inside B, which the kernel states).
SLOT_PAIRS = 4
#: Bytes of one slot pair (two 128-byte tensor maps).
SLOT_PAIR_BYTES = 256


@dataclass(frozen=True)
class GroupedGemmConfig:
    """A grouped GEMM: ``groups`` experts over a (``gemm.m`` x ``gemm.k``) A, N = ``gemm.n``,
    tiled as ``gemm`` (its block sizes, stages, schedule, CTAs)."""

    groups: int
    gemm: GemmConfig

    @classmethod
    def for_problem(cls, groups: int, m: int, n: int, k: int, dtype: str = "bfloat16",
                    **options) -> GroupedGemmConfig:
        """The default tiling: cooperative 128 x 256 tiles (both consumer warpgroups on one
        tile, 64 rows each), the GEMM's tiling for large problems. Where the groups
        average at most one row block (a decode step: the weights are a stream read once,
        the problem is bandwidth-bound) L2 fills 256 bytes per miss: on the H100 the decode
        step (64 experts, 1040 rows) ran 7% faster so (0.309-0.315 ms against 0.332-0.338),
        while a DeepSeek-like prefill (248 rows per expert) ran 4% slower, and the Mixtral
        shapes did not change."""
        block_m = options.get("block_m", 128)
        defaults = dict(block_m=128, block_n=256, schedule="cooperative", stages=4,
                        epilogue_n=128, l2_promotion=256 if m <= groups * block_m else 128)
        defaults.update(options)
        return cls(groups, GemmConfig(m=m, n=n, k=k, dtype=dtype, **defaults))

    def check(self) -> None:
        cfg = self.gemm
        if self.groups < 1:
            raise ValueError(f"groups={self.groups}: a grouped GEMM has at least one group")
        if cfg.dtype not in DTYPES:
            raise ValueError(f"dtype={cfg.dtype!r}: the grouped GEMM takes {DTYPES}")
        if cfg.b_layout != "nk":
            raise ValueError("the grouped GEMM takes B as (E, N, K), K-major (b_layout='nk')")
        for name in ("cluster", "cluster_n", "split_k"):
            if getattr(cfg, name) != 1:
                raise ValueError(f"{name}={getattr(cfg, name)}: the grouped GEMM runs "
                                 "one CTA per tile, unsplit")
        if cfg.stream_k or cfg.split_k_ordered or cfg.a_copy_k:
            raise ValueError("the grouped GEMM takes neither stream-K, ordered split-K nor "
                             "8-column A pieces")
        cfg.check()

    @property
    def max_tiles(self) -> int:
        """Tiles of the worst split of M into groups: each group adds at most one partial
        row block to ``ceil(M / block_m)``."""
        cfg = self.gemm
        return (cfg.m_blocks + self.groups) * cfg.n_blocks

    @property
    def rounds(self) -> int:
        """Tiles a CTA takes at most."""
        return math.ceil(self.max_tiles / self.gemm.ctas)


def workspace_shape(gcfg: GroupedGemmConfig) -> tuple[int, int, int]:
    """The tensor-map workspace the kernel takes: (ctas, slot pairs, 256) uint8, 128-byte
    aligned (the launch checks it)."""
    return (gcfg.gemm.ctas, SLOT_PAIRS, SLOT_PAIR_BYTES)


def make_locate(gcfg: GroupedGemmConfig):
    """``count(offs, total)`` and ``locate(offs, walk, tile, unit)``, the tile order across
    groups (see the module docstring).

    ``count`` writes the number of tiles of all groups into ``total[0]``. ``locate``
    advances ``walk`` = (group, its first tile) to the group holding tile ``unit`` (units
    of one thread come in increasing order) and writes ``tile``, five one-element locals
    (group, row block, column block, first row, rows): one buffer each, so a fact about
    one is not lost to a store to another.
    """
    cfg = gcfg.gemm
    e, m, bm, n_blocks = gcfg.groups, cfg.m, cfg.block_m, cfg.n_blocks

    def end_of(offs, g):
        return T.min(T.max(offs[g], 0), m)

    def start_of(offs, g):
        # Clamped: 0 <= start <= end <= M whatever offs holds.
        return T.min(T.if_then_else(g == 0, 0, end_of(offs, T.max(g - 1, 0))), end_of(offs, g))

    def tiles_of(offs, g):
        return (end_of(offs, g) - start_of(offs, g) + bm - 1) // bm * n_blocks

    @T.inline
    def count(offs, total):
        total[0] = 0
        for g in T.serial(e):
            total[0] = total[0] + tiles_of(offs, g)

    @T.inline
    def locate(offs, walk, tile, unit):
        g, mb, nb, start, rows = T.meta_var(tile)
        while walk[0] < e - 1 and unit >= walk[1] + tiles_of(offs, walk[0]):
            walk[1] = walk[1] + tiles_of(offs, walk[0])
            walk[0] = walk[0] + 1
        g[0] = walk[0]
        start[0] = start_of(offs, g[0])
        rows[0] = end_of(offs, g[0]) - start[0]
        mb[0] = (unit - walk[1]) % ((rows[0] + bm - 1) // bm)
        nb[0] = (unit - walk[1]) // ((rows[0] + bm - 1) // bm)
        # What the walk guarantees for a tile below the total, stated for the dispatch.
        T.assume(0 <= g[0] and g[0] < e and 0 <= mb[0] and mb[0] * bm < rows[0]
                 and 0 <= nb[0] and nb[0] < n_blocks)

    return count, locate


def make_grouped_work(gcfg: GroupedGemmConfig):
    """The producer's and the consumers' walks (``work=`` of :func:`.gemm.make_kernel_body`)."""
    cfg = gcfg.gemm
    n, k = cfg.n, cfg.k
    dtype, ctas, rounds = cfg.dtype, cfg.ctas, gcfg.rounds
    pingpong = cfg.schedule == "pingpong"
    count, locate = make_locate(gcfg)
    load_unit, mma_unit, store_unit = make_load_unit(cfg), make_mma_unit(cfg), \
        make_store_unit(cfg)

    def b_offset(group):
        # B[g]'s first element: past 2^31 elements (256 experts of 2048 x 7168) in 64 bits.
        if gcfg.groups * n * k < 1 << 31:
            return group * (n * k)
        return T.Cast("int64", group) * (n * k)

    # fmt: off
    @T.inline
    def each_tile(offs, worker, visit, context):
        # Every tile of this CTA, in order: walk the groups to it, then visit(context, j,
        # unit, total, tile), tile = (group, row block, column block, first row, rows).
        total = T.alloc_local((1,), "int32")
        walk = T.alloc_local((2,), "int32")
        g = T.alloc_local((1,), "int32")
        mb = T.alloc_local((1,), "int32")
        nb = T.alloc_local((1,), "int32")
        start = T.alloc_local((1,), "int32")
        rows = T.alloc_local((1,), "int32")
        count(offs, total)
        walk[0] = 0
        walk[1] = 0
        for j in T.serial(rounds):
            unit = T.meta_var(unit_of(cfg, worker, j))
            if unit < total[0]:
                locate(offs, walk, (g, mb, nb, start, rows), unit)
                visit(context, j, unit, total, (g, mb, nb, start, rows))

    @T.inline
    def load_tile(context, j, unit, total, tile):
        ring, a_ring, b_ring, A, B, maps, worker = T.meta_var(context)
        g, mb, nb, start, rows = T.meta_var(tile)
        Ag = T.decl_buffer((rows[0], k), dtype, A.data, elem_offset=start[0] * k,
                           layout=TileLayout(S[rows[0], k]))
        Bg = T.decl_buffer((n, k), dtype, B.data, elem_offset=b_offset(g[0]),
                           layout=TileLayout(S[n, k]))
        load_unit(ring, a_ring, b_ring, Ag, Bg, j, mb[0], nb[0], 0, 0, 0,
                  maps.ptr_to([worker, 0, 0]), maps.ptr_to([worker, 3, 0]))

    @T.inline
    def consume_tile(context, j, unit, total, tile):
        ring, a_ring, b_ring, c_tile, acc, desc_a, desc_b, C, maps, worker, consumer, lane, \
            tid = T.meta_var(context)
        g, mb, nb, start, rows = T.meta_var(tile)
        Cg = T.decl_buffer((rows[0], n), dtype, C.data, elem_offset=start[0] * n,
                           layout=TileLayout(S[rows[0], n]))
        if pingpong:
            # As the GEMM's ping-pong loop: every other tile, mainloops in turn.
            if j % 2 == consumer:
                if j > 0:
                    T.ptx.bar.sync(T.Cast("uint32", 3 + consumer), 2 * WARPGROUP)
                mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, 0, 0, lane)
                if unit + ctas < total[0]:
                    T.ptx.bar.arrive(T.Cast("uint32", 4 - consumer), 2 * WARPGROUP)
                store_unit(Cg, c_tile, acc, consumer, 0, mb[0], nb[0], lane, 1 + consumer,
                           lane == 0, None, None, maps.ptr_to([worker, 1 + consumer, 0]))
        else:
            mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, 0, consumer * 64, lane)
            store_unit(Cg, c_tile, acc, 0, consumer * 64, mb[0], nb[0], lane, 1,
                       tid == WARPGROUP, None, None, maps.ptr_to([worker, 1, 0]))

    @T.inline
    def produce(ring, a_ring, b_ring, A, B, groups, worker):
        offs, maps = T.meta_var(groups)
        each_tile(offs, worker, load_tile, (ring, a_ring, b_ring, A, B, maps, worker))

    @T.inline
    def consume(ring, a_ring, b_ring, c_tile, acc, desc_a, desc_b, C, groups, worker,
                consumer, lane, tid):
        offs, maps = T.meta_var(groups)
        each_tile(offs, worker, consume_tile, (ring, a_ring, b_ring, c_tile, acc, desc_a,
                                               desc_b, C, maps, worker, consumer, lane, tid))
    # fmt: on

    @dataclass(frozen=True)
    class GroupedWork:
        produce: object
        consume: object

    return GroupedWork(produce, consume)


def grouped_gemm_kernel(gcfg: GroupedGemmConfig) -> tvm.tirx.PrimFunc:
    """``grouped_gemm(A, B, offs, C, maps)``: A (M, K), B (E, N, K), offs (E,) int32 (group
    row ends), C (M, N), maps :func:`workspace_shape` uint8 (the tensor-map slots)."""
    gcfg.check()
    cfg = gcfg.gemm
    e, m, n, k, dtype = gcfg.groups, cfg.m, cfg.n, cfg.k, cfg.dtype
    slots = workspace_shape(gcfg)
    body = make_kernel_body(cfg, None, make_grouped_work(gcfg))

    # fmt: off
    @T.prim_func
    def grouped_gemm(A_ptr: T.handle, B_ptr: T.handle, O_ptr: T.handle, C_ptr: T.handle,
                     W_ptr: T.handle):
        A = T.match_buffer(A_ptr, (m, k), dtype, layout=TileLayout(S[m, k]))
        B = T.match_buffer(B_ptr, (e, n, k), dtype, layout=TileLayout(S[e, n, k]))
        offs = T.match_buffer(O_ptr, (e,), "int32")
        C = T.match_buffer(C_ptr, (m, n), dtype, layout=TileLayout(S[m, n]))
        maps = T.match_buffer(W_ptr, slots, "uint8")
        body(A, B, C, None, None, None, (offs, maps))
    # fmt: on
    return grouped_gemm


def with_tiling(gcfg: GroupedGemmConfig, **options) -> GroupedGemmConfig:
    """``gcfg`` with some GEMM tiling options changed (benchmark sweeps)."""
    return GroupedGemmConfig(gcfg.groups, replace(gcfg.gemm, **options))
