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
* **Stream-K, split on the device** (:attr:`GroupedGemmConfig.stream_k`, an option): the
  whole waves as above, then the K steps of the remaining tiles cut into one run per CTA,
  the split computed by every thread from the tile count it has just read from ``offs``,
  and the GEMM's fix-up (:mod:`.stream_k`) finishing a tile cut between runs. Measured on
  the H100 it is not what limits the weight-streaming problems (benchmarks/RESULTS.md
  section 9c), so it is not the default.
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

* **2x1 clusters** (``gemm.cluster`` = 2, an option; cooperative tiles of one height,
  without stream-K): a unit is a pair of vertically adjacent row blocks of one group and
  column block, the two CTAs sharing each B[g] tile (each loads half of it into both:
  multicast); a group of an odd number of row blocks leaves the last pair's second CTA
  its partner's row block to recompute, its store skipped (:func:`make_locate`).
  Measured on the H200 (benchmarks/RESULTS.md 9j) it is not the default: within 2% of
  one CTA a tile on the Mixtral-like problems, 0.67-0.75x of the default on decode
  steps, whose groups of one row block idle half of each pair.

* **Two tile heights, chosen on the device** (:attr:`GroupedGemmConfig.short`): a
  weight-streaming step (17 to 128 rows an expert) runs fastest on 64-row tiles or on
  128-row ones depending on how the groups' tiles fill the rounds of CTAs -- which only
  ``offs`` tells. The kernel then holds both tilings behind one entry (384 threads, the
  larger shared memory; :func:`.gemm.make_cta_body` is what one CTA of a tiling does), and
  every thread counts the tiles at both heights and takes the same branch
  (:func:`make_height_choice`).

The tensor-map slots are a workspace the caller passes (:func:`workspace_shape`: 1 KiB
per CTA, 2 KiB with two tilings): per CTA two slots for A and two for each storing
consumer warpgroup's C, per tiling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout

from .epilogue import make_store_unit
from .gemm import make_cta_body, make_kernel_body, make_load_steps
from .gemm_config import WARPGROUP, GemmConfig
from .launch import with_dependent_launch
from .scheduler import unit_of, unit_steps
from .stream_k import check_stream_k_flags_clear, make_fixup, refuse_grid_past_gpu
from .stream_k import workspace_shapes as stream_k_workspace_shapes
from .wgmma import make_mma_steps, make_mma_unit

#: Input/output element types (16-bit, as ``torch._grouped_mm`` takes them).
DTYPES = ("bfloat16", "float16")
#: Slot pairs per CTA in the tensor-map workspace: A, C of consumer 0, C of consumer 1,
#: and one spare (B[g] is host-born when it lies inside B, which the kernel states).
SLOT_PAIRS = 4
#: Bytes of one slot pair (two 128-byte tensor maps).
SLOT_PAIR_BYTES = 256
#: Experts from which the default ring has 3 stages (:meth:`GroupedGemmConfig.for_problem`).
MANY_GROUPS = 256
#: Rows per expert at most (on average: M / E) of a decode step the default gives 64 x
#: 128 tiles (:meth:`GroupedGemmConfig.for_problem`).
DECODE_ROWS = 16
#: The decode step's tiles: cooperative 64 x 128 (one consumer warpgroup a tile), 8 ring
#: stages beside a 128-column C stage.
DECODE_TILES = {"block_m": 64, "block_n": 128, "stages": 8}
#: The short tiling a weight-streaming kernel of 128 x 256 tiles also holds and takes on the
#: device where its rounds are few enough (:data:`SHORT_ROUND_COST`): 64 x 256 tiles, one
#: consumer warpgroup, 5 ring stages (the shared memory of the 128-row tiles' 4).
SHORT_TILES = {"block_m": 64, "stages": 5}
#: A round of short tiles costs at most this fraction of a round of 128-row tiles on a
#: weight stream: the kernel takes the short tiles where ``short rounds * 3 <= tall rounds
#: * 4`` (:func:`make_height_choice`).
SHORT_ROUND_COST = (3, 4)


@dataclass(frozen=True)
class GroupedGemmConfig:
    """A grouped GEMM: ``groups`` experts over a (``gemm.m`` x ``gemm.k``) A, N = ``gemm.n``,
    tiled as ``gemm`` (its block sizes, stages, schedule, CTAs)."""

    groups: int
    gemm: GemmConfig
    #: Stream-K over the tail: the CTAs take whole tiles in every full wave, and the K
    #: steps of the tiles left over (the partial last wave; with it the full wave before,
    #: where the partial one has fewer K steps than there are CTAs) are cut into one run
    #: per CTA, the GEMM's stream-K (:mod:`.stream_k`) with the split computed on the
    #: device: the tile count is the groups', read from ``offs``. So a problem of 3.4
    #: waves of tiles keeps every SM streaming weights to the end instead of running its
    #: last wave on 40% of them. The kernel then takes the stream-K workspace
    #: (:func:`workspace_shapes`).
    stream_k: bool = False
    #: The short tiling (:data:`SHORT_TILES`) the kernel holds beside ``gemm``'s and takes
    #: where the groups' tiles fill its rounds better (:func:`make_height_choice`): the
    #: group sizes that decide it are in ``offs``, so only the device can choose. None: the
    #: kernel holds ``gemm``'s tiling alone.
    short: GemmConfig | None = None

    @classmethod
    def for_problem(cls, groups: int, m: int, n: int, k: int, dtype: str = "bfloat16",
                    **options) -> GroupedGemmConfig:
        """The default tiling: cooperative 128 x 256 tiles (both consumer warpgroups on one
        tile, 64 rows each), the GEMM's tiling for large problems. Where the groups
        average at most one row block (a decode step: the weights are a stream read once,
        the problem is bandwidth-bound) L2 fills 256 bytes per miss: on the H100 the decode
        step (64 experts, 1040 rows) ran 7% faster so (0.309-0.315 ms against 0.332-0.338),
        while a DeepSeek-like prefill (248 rows per expert) ran 4% slower, and the Mixtral
        shapes did not change.

        With :data:`MANY_GROUPS` experts or more the ring has 3 stages, not 4: on the H100
        (same runs, % of the copy rate, 4 / 3 stages) 256 experts of 2048 x 7168 with 16384
        rows read at 85.1 / 94.6% (``ncu``: 6.63 GB read from DRAM with 4, 6.18 with 3, for
        6.11 GB of operands: the row blocks of one expert share B only while they run in
        step), with 8192 rows 92.3 / 94.3, with 32768 79.7 / 83.9,
        7168 x 2048 experts 87.7 / 90.1; while with fewer experts 4 stages read faster:
        128 experts 90.3 / 88.5, 64 experts 95.8 / 90.7 (4096 rows) and 94.4 / 93.3 (1040),
        Mixtral's 8 85.9 / 82.4, 60 (Qwen-like) 77.0 / 73.6.

        A decode step of at most :data:`DECODE_ROWS` rows per expert (and fewer than
        :data:`MANY_GROUPS` experts) takes 64 x 128 tiles (:data:`DECODE_TILES`): a
        group's one row block is mostly padding at 128 rows, and twice the column blocks
        put more CTAs on the weight stream. H100, % of the copy rate, 64 x 128 / 128 x 256:
        60 experts 960 x 1408 x 2048 (Qwen-like) 84.0-87.1 / 70.0, 128 experts 2048 x 2048
        x 7168 93.4 / 93.4; 64 experts 1040 x 2048 x 7168 (16.25 rows an expert: not
        taken) 95.1 / 95.5, at 64 rows an expert (Mixtral's decode step, 8 x 512) 74.9 /
        86.9, and with 256 experts 94.1 / 95.2.

        Between the two (more than 16 and at most 128 rows an expert: the weights still a
        stream, fewer than :data:`MANY_GROUPS` experts) the kernel also holds 64 x 256
        tiles (:attr:`short`, :data:`SHORT_TILES`) and takes them on the device where the
        groups' tiles fill its rounds better (:func:`make_height_choice`). H200, % of the
        copy rate, 128 x 256 / 64 x 256 (benchmarks/RESULTS.md 9g): Mixtral's decode step
        (8 x 512 x 14336 x 4096) 77.1 / 82.1, 8 x 384 x 4096 x 14336 71.5 / 85.3, 8 x 256
        x 14336 x 4096 72.5 / 88.5, Qwen-like 60 x 3840 x 1408 x 2048 70.4 / 74.7, 32 x
        1024 x 4096 x 2048 81.4 / 82.9, but 16 x 1024 x 6144 x 4096 91.1 / 85.9: which
        wins follows the rounds of tiles each height makes of the groups. ``short=False``
        holds the one tiling."""
        stream_k = options.pop("stream_k", False)
        short = options.pop("short", True)
        block_m = options.get("block_m", 128)
        defaults = dict(block_m=128, block_n=256, schedule="cooperative",
                        stages=3 if groups >= MANY_GROUPS else 4,
                        epilogue_n=128, l2_promotion=256 if m <= groups * block_m else 128)
        tiling = {"block_m", "block_n", "schedule", "stages", "epilogue_n", "cluster"}
        tiled = tiling & set(options)
        chosen = bool(tiled or stream_k) or groups >= MANY_GROUPS
        if m <= groups * DECODE_ROWS and not chosen:
            defaults.update(DECODE_TILES)
        defaults.update(options)
        gemm = GemmConfig(m=m, n=n, k=k, dtype=dtype, **defaults)
        weights_stream = groups * DECODE_ROWS < m <= groups * gemm.block_m
        if not (short and weights_stream and not chosen):
            return cls(groups, gemm, stream_k)
        return cls(groups, gemm, stream_k, replace(gemm, **SHORT_TILES))

    def check(self) -> None:
        cfg = self.gemm
        if self.groups < 1:
            raise ValueError(f"groups={self.groups}: a grouped GEMM has at least one group")
        if cfg.dtype not in DTYPES:
            raise ValueError(f"dtype={cfg.dtype!r}: the grouped GEMM takes {DTYPES}")
        if cfg.b_layout != "nk":
            raise ValueError("the grouped GEMM takes B as (E, N, K), K-major (b_layout='nk')")
        for name in ("cluster_n", "split_k"):
            if getattr(cfg, name) != 1:
                raise ValueError(f"{name}={getattr(cfg, name)}: the grouped GEMM runs "
                                 "one CTA per tile (or a 2x1 cluster per pair of tiles), "
                                 "unsplit")
        if cfg.cluster > 1 and (self.stream_k or self.short is not None
                                or cfg.schedule != "cooperative"):
            raise ValueError(f"cluster={cfg.cluster} with stream_k={self.stream_k}, "
                             f"short={self.short is not None}, schedule={cfg.schedule!r}: "
                             "a 2x1 cluster walks whole pairs of tiles of one cooperative "
                             "tiling")
        if cfg.stream_k or cfg.split_k_ordered or cfg.tail_split != 1 or cfg.a_copy_k:
            raise ValueError("the grouped GEMM takes neither the GEMM's stream-K (its own "
                             "is GroupedGemmConfig.stream_k), ordered split-K, the tail "
                             "split nor 8-column A pieces")
        if cfg.block_m == 256:
            raise ValueError("block_m=256: the grouped GEMM takes tiles of 64, 128 or 192 "
                             "rows (256-row tiles run in the plain GEMM only)")
        cfg.check()
        if self.stream_k:
            self._check_stream_k()
        if self.short is not None:
            self._check_short()

    def _check_short(self) -> None:
        """The short tiling shares the kernel's CTAs, problem, columns and L2 fills with
        ``gemm``'s, and shorter rows: its walk reads the same ``offs`` and maps slots."""
        cfg, short = self.gemm, self.short
        same = ("m", "n", "k", "dtype", "ctas", "block_n", "block_k", "b_layout",
                "l2_promotion")
        differ = [name for name in same if getattr(short, name) != getattr(cfg, name)]
        if differ or short.block_m >= cfg.block_m or self.stream_k:
            raise ValueError(f"short: a {short.block_m}-row tiling differing in {differ} "
                             f"from the {cfg.block_m}-row one (stream_k={self.stream_k}): "
                             "the kernel holds a shorter tiling of the same problem, "
                             "columns and CTAs, without stream-K")
        GroupedGemmConfig(self.groups, short).check()

    def _check_stream_k(self) -> None:
        """Stream-K shares K steps between the CTAs of the cooperative schedule, and its
        step numbers (tile x K step, CTA x steps shared) are 32-bit."""
        cfg = self.gemm
        if cfg.schedule != "cooperative":
            raise ValueError(f"stream_k with schedule={cfg.schedule!r}: stream-K shares K "
                             f"steps between CTAs of the cooperative schedule only")
        # The runs share at most two waves of tiles: CTA w's run starts at
        # whole * k_steps + w * shared // ctas, shared < 2 * ctas * k_steps.
        largest = max(self.max_tiles * cfg.k_steps, (cfg.ctas + 1) * 2 * cfg.ctas * cfg.k_steps)
        if largest >= 2**31:
            raise ValueError(f"stream_k: {self.max_tiles} tiles of {cfg.k_steps} K steps "
                             f"on {cfg.ctas} CTAs overflow the kernel's 32-bit step numbers")

    @property
    def max_tiles(self) -> int:
        """Work units (tiles; with a 2x1 cluster, pairs of tiles) of the worst split of M
        into groups: each group adds at most one partial unit to ``ceil(M / unit rows)``."""
        cfg = self.gemm
        return (cfg.m_groups + self.groups) * cfg.n_blocks

    @property
    def rounds(self) -> int:
        """Units a worker (a CTA, or a cluster) takes at most."""
        return math.ceil(self.max_tiles / self.gemm.workers)


def workspace_shape(gcfg: GroupedGemmConfig) -> tuple[int, int, int]:
    """The tensor-map workspace the kernel takes: (ctas, slot pairs, 256) uint8, 128-byte
    aligned (the launch checks it). A kernel holding two tilings (:attr:`GroupedGemmConfig.
    short`) gives each its own :data:`SLOT_PAIRS`: the dispatch gives each device-side map
    slots of its own, and the two tilings' A maps differ (64 and 128-row boxes)."""
    tilings = 1 if gcfg.short is None else 2
    return (gcfg.gemm.ctas, SLOT_PAIRS * tilings, SLOT_PAIR_BYTES)


def workspace_shapes(gcfg: GroupedGemmConfig) -> tuple[tuple[int, int], tuple[int]]:
    """With :attr:`GroupedGemmConfig.stream_k`, the shapes of the two more arguments the
    kernel takes after the map slots: fp32 partial tiles (one per CTA, contents never
    read before written) and int32 flags (one per CTA, zeros: every launch leaves them
    zero), as the GEMM's stream-K (:mod:`.stream_k`)."""
    return stream_k_workspace_shapes(gcfg.gemm)


def make_tiles_of(gcfg: GroupedGemmConfig):
    """``(tiles_of(offs, g), bounds(offs, g))``: group ``g``'s work units (tiles, or with a
    cluster along M its pairs of tiles), and its (first row, row end) read from ``offs``
    with clamps (``0 <= start <= end <= M`` whatever ``offs`` holds: it is data, and a bad
    one must not make a copy leave its tensor)."""
    cfg = gcfg.gemm
    m, n_blocks = cfg.m, cfg.n_blocks
    # A unit is ``cluster`` vertically adjacent row blocks of one column block (one CTA's
    # tile each; one tile without a cluster).
    unit_rows = cfg.block_m * cfg.cluster

    def end_of(offs, g):
        return T.min(T.max(offs[g], 0), m)

    def bounds(offs, g):
        end = end_of(offs, g)
        return T.min(T.if_then_else(g == 0, 0, end_of(offs, T.max(g - 1, 0))), end), end

    def tiles_of(offs, g):
        start, end = bounds(offs, g)
        return (end - start + unit_rows - 1) // unit_rows * n_blocks

    return tiles_of, bounds


def make_locate(gcfg: GroupedGemmConfig):
    """``count(offs, total)`` and ``locate(offs, walk, tile, unit)``, the tile order across
    groups (see the module docstring).

    ``count`` writes the number of units of all groups into ``total[0]``. ``locate``
    advances ``walk`` = (group, its first unit) to the group holding unit ``unit`` (units
    of one thread come in increasing order) and writes ``tile``, six one-element locals
    (group, row block, column block, first row, rows, live): one buffer each, so a fact
    about one is not lost to a store to another.

    With a cluster along M (:attr:`.gemm_config.GemmConfig.cluster` = 2) a unit is a pair
    of vertically adjacent row blocks of one column block of the group: the cluster's CTAs
    read the same B[g] tile, each loading half of it for both (multicast). CTA ``place``
    takes row block ``2 * pair + place``; where the group has an odd number of row blocks
    the last pair's second CTA has none: it computes the group's last row block again
    (its loads are its partner's, its copies inside the group) and stores nothing
    (``live`` 0), because it must still load its half of B for its partner.
    """
    cfg = gcfg.gemm
    e, bm, n_blocks, cluster = gcfg.groups, cfg.block_m, cfg.n_blocks, cfg.cluster
    tiles_of, bounds = make_tiles_of(gcfg)

    @T.inline
    def count(offs, total):
        total[0] = 0
        for g in T.serial(e):
            total[0] = total[0] + tiles_of(offs, g)

    @T.inline
    def locate(offs, walk, tile, unit, place):
        g, mb, nb, start, rows, live = T.meta_var(tile)
        while walk[0] < e - 1 and unit >= walk[1] + tiles_of(offs, walk[0]):
            walk[1] = walk[1] + tiles_of(offs, walk[0])
            walk[0] = walk[0] + 1
        g[0] = walk[0]
        first, end = T.meta_var(bounds(offs, g[0]))
        start[0] = first
        rows[0] = end - start[0]
        if cluster == 1:
            mb[0] = (unit - walk[1]) % ((rows[0] + bm - 1) // bm)
            nb[0] = (unit - walk[1]) // ((rows[0] + bm - 1) // bm)
            live[0] = 1
        else:
            pairs = T.meta_var((rows[0] + cluster * bm - 1) // (cluster * bm))
            mb[0] = (unit - walk[1]) % pairs * cluster + place
            nb[0] = (unit - walk[1]) // pairs
            live[0] = T.Cast("int32", mb[0] * bm < rows[0])
            mb[0] = T.min(mb[0], (rows[0] + bm - 1) // bm - 1)
        # What the walk guarantees for a tile below the total, stated for the dispatch.
        T.assume(0 <= g[0] and g[0] < e and 0 <= mb[0] and mb[0] * bm < rows[0]
                 and 0 <= nb[0] and nb[0] < n_blocks)

    return count, locate


def make_height_choice(gcfg: GroupedGemmConfig):
    """``choose(offs, short, tall_tiles, short_tiles)``: counts the groups' tiles at both
    heights in one pass over ``offs`` into the two one-element locals (for the chosen
    tiling's walk, which then does not count again) and sets ``short[0]`` to 1 where the
    kernel takes its short tiles (:attr:`GroupedGemmConfig.short`), 0 where it takes
    ``gemm``'s. Every thread reads them, so every thread takes the same branch.

    On a weight stream a round of tiles (one tile on every CTA) costs about as long as the
    DRAM takes to deliver what the CTAs read, and a round of 64-row tiles reads much of
    what a round of 128-row tiles does (the same B columns; half the A rows): measured
    on the H200 (benchmarks/RESULTS.md 9g), the short tiles won every problem where their
    rounds were at most 4/3 of the tall ones' (Mixtral's decode step: 5 rounds against 4,
    82.1% of the copy rate against 77.1; 8 x 256 x 14336 x 4096: 3 and 3, 88.5 / 72.5;
    Qwen-like 4 and 3, 74.7 / 70.4; 32 x 1024 x 4096 x 2048: 4 and 3, 82.9 / 81.4) and
    lost where they were more (16 x 1024 x 6144 x 4096: 5 against 3, 85.9 / 91.1). So:
    short where ``short rounds * 3 <= tall rounds * 4`` (:data:`SHORT_ROUND_COST`)."""
    tall_of, _ = make_tiles_of(gcfg)
    short_of, _ = make_tiles_of(GroupedGemmConfig(gcfg.groups, gcfg.short))
    e, ctas = gcfg.groups, gcfg.gemm.ctas
    cost, base = SHORT_ROUND_COST

    @T.inline
    def choose(offs, short, tall_tiles, short_tiles):
        tall_tiles[0] = 0
        short_tiles[0] = 0
        for g in T.serial(e):
            tall_tiles[0] = tall_tiles[0] + tall_of(offs, g)
            short_tiles[0] = short_tiles[0] + short_of(offs, g)
        short[0] = T.Cast("int32", (short_tiles[0] + ctas - 1) // ctas * cost
                          <= (tall_tiles[0] + ctas - 1) // ctas * base)

    return choose


def takes_short(gcfg: GroupedGemmConfig, sizes) -> bool:
    """Whether the kernel takes its short tiles for groups of ``sizes`` rows: the device's
    choice (:func:`make_height_choice`) computed on the host, for the tests and the
    benchmark's report. False where the kernel holds one tiling."""
    if gcfg.short is None:
        return False

    def rounds(cfg: GemmConfig) -> int:
        tiles = sum(math.ceil(rows / cfg.block_m) for rows in sizes) * cfg.n_blocks
        return math.ceil(tiles / cfg.ctas)

    cost, base = SHORT_ROUND_COST
    return rounds(gcfg.short) * cost <= rounds(gcfg.gemm) * base


def make_grouped_work(gcfg: GroupedGemmConfig, pairs: int = 0, counted: bool = False):
    """The producer's and the consumers' walks (``work=`` of :func:`.gemm.make_kernel_body`).

    Without stream-K a CTA walks the units ``worker, worker + ctas, ...`` below the tile
    count, whole tiles. With it (:attr:`GroupedGemmConfig.stream_k`) the device splits the
    work the way the GEMM's host does (:attr:`.gemm_config.GemmConfig.stream_k_dp_tiles`):
    ``whole`` tiles (the full waves, less the last one where the partial wave has fewer K
    steps than there are CTAs) walked as above, then the ``shared`` K steps of the rest
    cut into one run per CTA. Where fewer steps are left than there are CTAs (a tiny
    problem) every tile is whole.

    ``pairs``: the first of the :data:`SLOT_PAIRS` slot pairs of the CTA's workspace this
    walk's maps take (the short tiling of a two-height kernel takes the second four).
    ``counted``: the kernel has counted the tiles already (a two-height kernel, to choose
    the height): ``groups`` is then (offs, maps, a local holding the count)."""
    cfg = gcfg.gemm
    n, k = cfg.n, cfg.k
    dtype, ctas, rounds = cfg.dtype, cfg.ctas, gcfg.rounds
    k_steps = cfg.k_steps
    pingpong, stream_k = cfg.schedule == "pingpong", gcfg.stream_k
    count, locate = make_locate(gcfg)
    load_steps, mma_unit, store_unit = make_load_steps(cfg), make_mma_unit(cfg), \
        make_store_unit(cfg)
    mma_steps = make_mma_steps(cfg)
    publish, gather = make_fixup(cfg) if stream_k else (None, None)

    def slot_cta(cta):
        # The CTA's own map slots: the workspace has a row per CTA (a cluster's CTAs are
        # one worker but rebind maps of their own).
        worker, _, place = cta
        return worker * cfg.cluster + place if cfg.cluster > 1 else worker

    def stores(thread, live):
        # The storing thread, where this CTA's tile is a row block of the group (with a
        # cluster the last pair's second CTA may have none: see make_locate).
        return T.And(thread, live[0] == 1) if cfg.cluster > 1 else thread

    def b_offset(group):
        # B[g]'s first element: past 2^31 elements (256 experts of 2048 x 7168) in 64 bits.
        if gcfg.groups * n * k < 1 << 31:
            return group * (n * k)
        return T.Cast("int64", group) * (n * k)

    # fmt: off
    @T.inline
    def split(offs, total, whole, shared, tiles):
        # The tile count, and how much of it is walked whole (see the docstring above).
        if counted:
            total[0] = tiles[0]
        else:
            count(offs, total)
        if stream_k:
            whole[0] = total[0] // ctas * ctas
            partial = T.meta_var(total[0] - whole[0])
            if whole[0] >= ctas and partial > 0 and partial * k_steps < ctas:
                whole[0] = whole[0] - ctas
            shared[0] = (total[0] - whole[0]) * k_steps
            if shared[0] < ctas:
                whole[0] = total[0]
                shared[0] = 0

    @T.inline
    def each_tile(offs, worker, place, visit, context, visit_segment, tiles):
        # Every tile of this CTA, in order: walk the groups to it, then visit(context, j,
        # unit, total, tile), tile = (group, row block, column block, first row, rows,
        # live); with stream-K then every tile its run touches, visit_segment(context,
        # it0, kb, ke, t, run, tile): its K steps kb .. ke - 1 on ring uses it0 ..
        total = T.alloc_local((1,), "int32")
        walk = T.alloc_local((2,), "int32")
        g = T.alloc_local((1,), "int32")
        mb = T.alloc_local((1,), "int32")
        nb = T.alloc_local((1,), "int32")
        start = T.alloc_local((1,), "int32")
        rows = T.alloc_local((1,), "int32")
        live = T.alloc_local((1,), "int32")
        tile = T.meta_var((g, mb, nb, start, rows, live))
        if stream_k:
            whole = T.alloc_local((1,), "int32")
            shared = T.alloc_local((1,), "int32")
        else:
            whole = T.meta_var(total)
            shared = T.meta_var(None)
        split(offs, total, whole, shared, tiles)
        walk[0] = 0
        walk[1] = 0
        for j in T.serial(rounds):
            unit = T.meta_var(unit_of(cfg, worker, j))
            if unit < whole[0]:
                locate(offs, walk, tile, unit, place)
                visit(context, j, unit, whole, tile)
        if stream_k:
            if shared[0] > 0:
                # Run of this CTA: steps first .. end - 1, numbered over the problem (step
                # s is K step s % k_steps of tile s // k_steps), after its whole tiles'
                # ring uses. Each bound is a local of its own: the planner proves the
                # copies from what the walk states, and run arithmetic it can see would
                # only slow its proofs (30 s a kernel).
                first = T.alloc_local((1,), "int32")
                end = T.alloc_local((1,), "int32")
                kb = T.alloc_local((1,), "int32")
                ke = T.alloc_local((1,), "int32")
                # The segment's first ring use, a local of its own: the barrier calls that
                # read it would otherwise read kb, and the planner drops what it knows of
                # a local that a call reads (the call might write it).
                use = T.alloc_local((1,), "int32")
                base = T.meta_var(whole[0] * k_steps)
                first[0] = base + worker * shared[0] // ctas
                end[0] = base + (worker + 1) * shared[0] // ctas
                shortest = T.meta_var(shared[0] // ctas)
                run = T.meta_var((base, shared[0],
                                  T.min(ctas - 1, (k_steps - 1 + shortest - 1) // shortest)))
                for t in T.serial(first[0] // k_steps, (end[0] + k_steps - 1) // k_steps):
                    kb[0] = T.max(first[0] - t * k_steps, 0)
                    ke[0] = T.min(end[0] - t * k_steps, k_steps)
                    # What the run arithmetic guarantees, stated for the dispatch: the
                    # segment is inside the tile's K (so B[g]'s tile is inside B).
                    T.assume(0 <= kb[0] and kb[0] < ke[0] and ke[0] <= k_steps)
                    use[0] = whole[0] // ctas * k_steps + t * k_steps + kb[0] - first[0]
                    locate(offs, walk, tile, t, place)
                    visit_segment(context, use[0], kb[0], ke[0], t, run, tile)

    @T.inline
    def load_segment(context, it0, kb, ke, t, run, tile):
        # The loads of K steps kb .. ke - 1 of the tile on ring uses it0 ..: its group's
        # rows of A and B[g] as views (A's rebound on the device).
        ring, a_ring, b_ring, A, B, maps, cta = T.meta_var(context)
        worker, rank, place = T.meta_var(cta)
        g, mb, nb, start, rows, live = T.meta_var(tile)
        Ag = T.decl_buffer((rows[0], k), dtype, A.data, elem_offset=start[0] * k,
                           layout=TileLayout(S[rows[0], k]))
        Bg = T.decl_buffer((n, k), dtype, B.data, elem_offset=b_offset(g[0]),
                           layout=TileLayout(S[n, k]))
        load_steps(ring, a_ring, b_ring, Ag, Bg, it0, kb, ke - kb, mb[0], nb[0], rank, place,
                   maps.ptr_to([slot_cta(cta), pairs + 0, 0]),
                   maps.ptr_to([slot_cta(cta), pairs + 3, 0]))

    @T.inline
    def load_tile(context, j, unit, total, tile):
        it0, k_step0, steps = T.meta_var(unit_steps(cfg, j, 0))
        load_segment(context, it0, k_step0, k_step0 + steps, unit, None, tile)

    @T.inline
    def consume_tile(context, j, unit, total, tile):
        ring, a_ring, b_ring, c_tile, acc, desc_a, desc_b, C, maps, cta, consumer, lane, \
            tid, fixup = T.meta_var(context)
        g, mb, nb, start, rows, live = T.meta_var(tile)
        Cg = T.decl_buffer((rows[0], n), dtype, C.data, elem_offset=start[0] * n,
                           layout=TileLayout(S[rows[0], n]))
        if pingpong:
            # As the GEMM's ping-pong loop: every other tile, mainloops in turn.
            if j % 2 == consumer:
                if j > 0:
                    T.ptx.bar.sync(T.Cast("uint32", 3 + consumer), 2 * WARPGROUP)
                mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, 0, 0, lane)
                if unit + cfg.workers < total[0]:
                    T.ptx.bar.arrive(T.Cast("uint32", 4 - consumer), 2 * WARPGROUP)
                store_unit(Cg, c_tile, acc, consumer, 0, mb[0], nb[0], lane, 1 + consumer,
                           stores(lane == 0, live), None, None,
                           maps.ptr_to([slot_cta(cta), pairs + 1 + consumer, 0]))
        else:
            row0 = T.meta_var(consumer * cfg.consumer_rows)
            mma_unit(ring, a_ring, b_ring, acc, desc_a, desc_b, j, 0, row0, lane)
            store_unit(Cg, c_tile, acc, 0, row0, mb[0], nb[0], lane, 1,
                       stores(tid == WARPGROUP, live), None, None,
                       maps.ptr_to([slot_cta(cta), pairs + 1, 0]))

    @T.inline
    def consume_segment(context, it0, kb, ke, t, run, tile):
        # A stream-K tile's K steps kb .. ke - 1; then hand them to the tile's owner (a
        # tile this run did not start), or gather the other runs' parts and store it.
        ring, a_ring, b_ring, c_tile, acc, desc_a, desc_b, C, maps, cta, consumer, lane, \
            tid, fixup = T.meta_var(context)
        worker = T.meta_var(cta[0])
        partials, flags, flag = T.meta_var(fixup)
        g, mb, nb, start, rows, live = T.meta_var(tile)
        row0 = T.meta_var(consumer * cfg.consumer_rows)
        mma_steps(ring, a_ring, b_ring, acc, desc_a, desc_b, it0, kb, ke - kb, row0, lane)
        if kb > 0:
            publish(partials, flags, acc, worker, 0, tid - WARPGROUP)
        else:
            if ke < k_steps:
                gather(partials, flags, acc, flag, worker, 0, t * k_steps + k_steps,
                       tid - WARPGROUP, run)
            Cg = T.decl_buffer((rows[0], n), dtype, C.data, elem_offset=start[0] * n,
                               layout=TileLayout(S[rows[0], n]))
            store_unit(Cg, c_tile, acc, 0, row0, mb[0], nb[0], lane, 1,
                       tid == WARPGROUP, None, None, maps.ptr_to([worker, pairs + 1, 0]))

    @T.inline
    def produce(ring, a_ring, b_ring, A, B, groups, cta):
        offs, maps = T.meta_var(groups[:2])
        each_tile(offs, cta[0], cta[2], load_tile, (ring, a_ring, b_ring, A, B, maps, cta),
                  load_segment, groups[2] if counted else None)

    @T.inline
    def consume(ring, a_ring, b_ring, c_tile, acc, desc_a, desc_b, C, groups, cta,
                consumer, lane, tid):
        offs, maps = T.meta_var(groups[:2])
        if stream_k:
            partials, flags = T.meta_var(groups[2:4])
            flag = T.alloc_local((1,), "int32")
            fixup = T.meta_var((partials, flags, flag))
        else:
            fixup = T.meta_var(None)
        each_tile(offs, cta[0], cta[2], consume_tile, (ring, a_ring, b_ring, c_tile, acc,
                                                       desc_a, desc_b, C, maps, cta,
                                                       consumer, lane, tid, fixup),
                  consume_segment, groups[2] if counted else None)
    # fmt: on

    @dataclass(frozen=True)
    class GroupedWork:
        produce: object
        consume: object

    return GroupedWork(produce, consume)


def make_two_height_body(gcfg: GroupedGemmConfig):
    """The kernel body of a config holding two tilings (:attr:`GroupedGemmConfig.short`):
    one entry of the larger thread count and shared memory, then each CTA reads ``offs``
    (after the previous kernel on the stream completed: a dependent launch may start it
    early), chooses a height (:func:`make_height_choice`) and runs that tiling's CTA
    (:func:`.gemm.make_cta_body`). Both CTAs walk the same ``offs`` and use the same map
    slots; the short tiling's spare warpgroup idles."""
    cfg, short = gcfg.gemm, gcfg.short
    threads = max(cfg.threads, short.threads)
    shared_bytes = max(cfg.shared_bytes, short.shared_bytes)
    tall_cta = make_cta_body(cfg, make_grouped_work(gcfg, counted=True), threads, True)
    short_work = make_grouped_work(GroupedGemmConfig(gcfg.groups, short), SLOT_PAIRS, True)
    short_cta = make_cta_body(short, short_work, threads, True)
    choose = make_height_choice(gcfg)

    # fmt: off
    @T.inline
    def body(A, B, C, scales, partials, flags, groups):
        T.device_entry()
        worker = T.cta_id([cfg.ctas])
        tid = T.thread_id([threads])
        dyn = T.alloc_buffer((shared_bytes,), "uint8", scope="shared.dyn")
        use_short = T.alloc_local((1,), "int32")
        tall_tiles = T.alloc_local((1,), "int32")
        short_tiles = T.alloc_local((1,), "int32")
        T.ptx.griddepcontrol.wait()
        choose(groups[0], use_short, tall_tiles, short_tiles)
        entry = T.meta_var((worker, 0, 0, tid, dyn))
        if use_short[0] == 1:
            short_cta(A, B, C, scales, partials, flags, (*groups[:2], short_tiles), entry)
        else:
            tall_cta(A, B, C, scales, partials, flags, (*groups[:2], tall_tiles), entry)
    # fmt: on
    return body


def grouped_gemm_kernel(gcfg: GroupedGemmConfig) -> tvm.tirx.PrimFunc:
    """``grouped_gemm(A, B, offs, C, maps)``: A (M, K), B (E, N, K), offs (E,) int32 (group
    row ends), C (M, N), maps :func:`workspace_shape` uint8 (the tensor-map slots)."""
    gcfg.check()
    cfg = gcfg.gemm
    e, m, n, k, dtype = gcfg.groups, cfg.m, cfg.n, cfg.k, cfg.dtype
    slots = workspace_shape(gcfg)
    partials_shape, flags_shape = workspace_shapes(gcfg)
    if gcfg.short is None:
        body = make_kernel_body(cfg, None, make_grouped_work(gcfg))
    else:
        body = make_two_height_body(gcfg)

    # fmt: off
    @T.inline
    def matched(A_ptr, B_ptr, O_ptr, C_ptr, W_ptr, fixup):
        A = T.match_buffer(A_ptr, (m, k), dtype, layout=TileLayout(S[m, k]))
        B = T.match_buffer(B_ptr, (e, n, k), dtype, layout=TileLayout(S[e, n, k]))
        offs = T.match_buffer(O_ptr, (e,), "int32")
        C = T.match_buffer(C_ptr, (m, n), dtype, layout=TileLayout(S[m, n]))
        maps = T.match_buffer(W_ptr, slots, "uint8")
        body(A, B, C, None, None, None, (offs, maps, *fixup))

    if gcfg.stream_k:
        @T.prim_func
        def grouped_gemm(A_ptr: T.handle, B_ptr: T.handle, O_ptr: T.handle, C_ptr: T.handle,
                         W_ptr: T.handle, P_ptr: T.handle, F_ptr: T.handle):
            partials = T.match_buffer(P_ptr, partials_shape, "float32")
            flags = T.match_buffer(F_ptr, flags_shape, "int32")
            matched(A_ptr, B_ptr, O_ptr, C_ptr, W_ptr, (partials, flags))
    else:
        @T.prim_func
        def grouped_gemm(A_ptr: T.handle, B_ptr: T.handle, O_ptr: T.handle, C_ptr: T.handle,
                         W_ptr: T.handle):
            matched(A_ptr, B_ptr, O_ptr, C_ptr, W_ptr, ())
    # fmt: on
    return with_dependent_launch(grouped_gemm)


def workspace(gcfg: GroupedGemmConfig, sm_count: int | None = None) -> list[np.ndarray]:
    """The kernel's arguments after C, as zeroed host arrays to copy to the device once
    and keep for every launch: the tensor-map slots (:func:`workspace_shape`), and with
    stream-K the partial tiles and flags (:func:`workspace_shapes`). With stream-K,
    refuses a grid larger than ``sm_count`` (the owners spin on flags other CTAs set, so
    every CTA must be resident at once); None (no device to ask) checks nothing."""
    arrays = [np.zeros(workspace_shape(gcfg), dtype=np.uint8)]
    if gcfg.stream_k:
        refuse_grid_past_gpu("stream_k", gcfg.gemm.ctas, sm_count)
        partials, flags = workspace_shapes(gcfg)
        arrays += [np.zeros(partials, dtype=np.float32), np.zeros(flags, dtype=np.int32)]
    return arrays


def check_workspace_left_clean(gcfg: GroupedGemmConfig, flags: np.ndarray) -> None:
    """Raise if a stream-K launch left a flag set: a published partial tile that no owner
    gathered (the next launch's owner would take it for a fresh one)."""
    if gcfg.stream_k:
        check_stream_k_flags_clear(flags)


def with_tiling(gcfg: GroupedGemmConfig, **options) -> GroupedGemmConfig:
    """``gcfg`` with some GEMM tiling options changed (benchmark sweeps); ``stream_k``
    sets the grouped walk's. A changed tiling holds itself alone (no :attr:`short`);
    ``short=False`` drops the short tiling of an unchanged one."""
    stream_k = options.pop("stream_k", gcfg.stream_k)
    keep_short = options.pop("short", not options and stream_k == gcfg.stream_k)
    return GroupedGemmConfig(gcfg.groups, replace(gcfg.gemm, **options), stream_k,
                             gcfg.short if keep_short else None)
