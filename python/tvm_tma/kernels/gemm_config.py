"""The GEMM problem and how the kernel cuts it up: :class:`GemmConfig`.

A configuration is plain data (a frozen dataclass) so the pieces of the kernel
(:mod:`.scheduler`, :mod:`.wgmma`, :mod:`.epilogue`, :mod:`.gemm`) can each derive what they
need from it, and so a kernel that is a GEMM in disguise (conv2d as implicit GEMM: M = N * P
* Q output pixels, K = R * S * C) reuses it with its own extents. :meth:`GemmConfig.check`
refuses, naming the value, every configuration the kernel does not handle, before any
TVMScript is built; :meth:`GemmConfig.for_problem` picks the measured default tiling.

Inputs are 16-bit (bf16 or fp16, C in the same type) or FP8 (e4m3 or e5m2 A and B, each its
own type, C in bf16 scaled by per-tensor fp32 scales): :attr:`GemmConfig.input_dtypes` and
:attr:`GemmConfig.out_dtype` say which, and every byte size derives from them. An FP8 tile
is the 16-bit tile with twice the K block in the same bytes (a 128-byte row of 128
elements), so the FP8 defaults share the 16-bit ones' shared-memory budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm

from .halo import HALO_STAGES, HaloTiling
from .tiling import choose

#: Bytes at the front of dynamic shared memory for the ring's mbarriers; the tiles start
#: right after, on the 1024-byte period of the 128B swizzle.
BARRIER_BYTES = 1024
#: Most ring stages beside halo tiles' two raw and two plane slots: each stage and each
#: halo slot a "full" and an "empty" mbarrier of 8 bytes in :data:`BARRIER_BYTES`.
HALO_MAX_STAGES = (BARRIER_BYTES // 8 - 4 * HALO_STAGES) // 2
#: Warpgroup size, and the register budgets of the producer and the consumers
#: (2 x 128 x 232 + 128 x 40 = 64512 of the SM's 65536 registers).
WARPGROUP = 128
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232
#: The consumers' budget where three share the SM (192-row cooperative tiles):
#: 3 x 128 x 152 + 128 x 40 = 63488 (``setmaxnreg`` counts in multiples of 8).
THREE_CONSUMER_REGISTERS = 152
#: Registers a consumer thread needs beside its accumulators (descriptors, addresses, the
#: epilogue's words): 232 - 128 leaves 104; 152 leaves 56 beside 96 accumulators.
MIN_SPARE_REGISTERS = 56
#: Widths past wgmma's N of 256 (cooperative 128-row tiles of 16-bit inputs, B as N x K):
#: each consumer warpgroup issues two m64 MMAs of half the width per k16 step, and holds
#: 144 or 160 accumulators a thread (of its 232 registers; the MMAs of one k16 step write
#: disjoint halves of them, in the fragment order one m64n{block_n} MMA would have).
WIDE_BLOCK_NS = (288, 320)
#: Accumulators a consumer thread may hold on a wide tile: 160 (a 64 x 320 slice) of 232.
WIDE_MAX_ACCUMULATORS = 160
#: Tile heights: one, two or three cooperative consumer warpgroups of 64 rows (ping-pong
#: warpgroups take 64- or 128-row tiles whole).
BLOCK_MS = (64, 128, 192, 256)
#: Rows of a 256-row cooperative tile each of its two consumer warpgroups computes (two
#: m64 sub-tiles, as a ping-pong warpgroup's 128-row tile): A's rows shared by both
#: through one ring, B's read once for 256 rows.
TALL_CONSUMER_ROWS = 128
#: Fields a 256-row tile keeps at their defaults so far: it runs plain (no cluster, split,
#: stream-K, tail parts, swap, convolution view, resident B or second C stage), with
#: 16-bit inputs (the GPU cases and their sanitizer runs: benchmarks/RESULTS.md 6z14).
PLAIN_256_REFUSED = ("cluster", "cluster_n", "split_k", "split_k_ordered", "stream_k",
                     "tail_split", "swap_ab", "tap_columns", "a_copy_k", "halo", "b_resident",
                     "epilogue_buffers")
#: Largest dynamic shared memory a Hopper CTA may use.
MAX_SHARED = 227 * 1024
#: K block widths (16-bit elements): one 128-, 64- or 32-byte swizzle row of 4, 2 or 1 k16
#: wgmma steps.
K_BLOCKS = (64, 32, 16)
#: 16-bit input types: C is written in the input type.
DTYPES_16 = ("bfloat16", "float16")
#: FP8 input types (A and B may differ: wgmma takes every e4m3/e5m2 pairing); C is bf16.
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
#: The output type of an FP8 GEMM.
FP8_OUT_DTYPE = "bfloat16"
#: The one K block of FP8 inputs: a 128-byte row (128B swizzle) of four k32 wgmma steps.
FP8_BLOCK_K = 128
#: Most K parts the default tiling cuts a problem of few tiles into (ordered split-K): the
#: most the H100 runs measured (16 parts of 8 K steps: 128 x 1024 x 8192 at 1.6x 4 parts).
MAX_ORDERED_SPLIT = 16
#: Fewest K steps an ordered part keeps (:attr:`GemmConfig.ordered_parts`).
PART_STEPS_FLOOR = 4


def short_part_first(steps: int, short: int, part: int) -> tuple[int, int]:
    """(first K step, K steps) of K part ``part`` when every part runs ``steps`` K steps
    but part 0, which runs ``short`` fewer: ordered split-K's parts and the tail split's
    (the device twin is :func:`.scheduler.part_range`)."""
    if part == 0:
        return 0, steps - short
    return part * steps - short, steps


@dataclass(frozen=True)
class GemmConfig:
    """One GEMM problem and how the kernel cuts it up."""

    m: int
    n: int
    k: int
    #: Element type of A, and of B unless ``b_dtype`` says otherwise: "bfloat16" or
    #: "float16" (C in the same type), or FP8 "float8_e4m3fn" / "float8_e5m2" (C in bf16,
    #: ``C = scale_a * scale_b * (A @ B^T)``).
    dtype: str = "bfloat16"
    #: "nk": B is given as N x K (C = A @ B^T, cuBLAS "TN"); "kn": B is K x N (C = A @ B).
    b_layout: str = "nk"
    block_m: int = 128
    #: Columns of C per tile: a multiple of 32 from 64 to 256 (wgmma N) with B as N x K, a
    #: multiple of 64 with B as K x N (its slot is 64-column swizzle atoms).
    block_n: int = 256
    #: Columns of K per ring slot: 64, 32 or 16 (16-bit inputs), 128 (FP8). K-major slots
    #: (A; B as N x K) have rows of 128, 64 or 32 bytes with the 128B, 64B or 32B swizzle;
    #: the K x N B slot is block_k rows of 64-column 128B atoms whatever block_k. None (the
    #: default) is one 128-byte row: 64 16-bit or 128 FP8 elements.
    block_k: int | None = None
    stages: int = 4
    #: Row blocks per group of the tile order (L2 reuse); 1 is plain row-major order.
    group_m: int = 8
    #: Columns of C staged in shared memory per TMA store (0: the whole block_n): whole
    #: 64-column atoms (128B swizzle), or 32 (64B swizzle: what a block_n that is no
    #: multiple of 64 takes). A narrower C stage leaves room for one more ring slot.
    epilogue_n: int = 128
    #: C stages the cooperative epilogue alternates between: 1, or 2 so that rounding one
    #: stage into shared memory overlaps the TMA store still reading the other (a tile's
    #: ``block_n / epilogue_n`` stores no longer wait for each other's reads).
    epilogue_buffers: int = 1
    ctas: int = 132
    #: "cooperative": both consumer warpgroups work on one tile (64 rows each);
    #: "pingpong": each consumer warpgroup takes every other tile whole (block_m rows), and
    #: one's epilogue runs while the other's MMAs do.
    schedule: str = "cooperative"
    #: CTAs per cluster along M (1 or 2). With 2, the CTAs of a cluster compute vertically
    #: adjacent tiles of one column block and multicast the B tile they share: each loads
    #: half.
    cluster: int = 1
    #: CTAs per cluster along N (1, 2 or 4). With more than one, the CTAs of a cluster
    #: compute horizontally adjacent tiles of one row block and multicast the A tile they
    #: share: each loads ``block_m / cluster_n`` of its rows into every CTA. A is the larger
    #: operand of a narrow tile (128 x 64: two thirds of each K step's bytes), so this is
    #: the cluster of problems with few, narrow tiles. With ``cluster`` 2 too the cluster
    #: is two-dimensional (2x2, 2x4; B as N x K): CTA rank ``r`` computes row ``r %
    #: cluster`` and column ``r // cluster`` of the cluster's tiles, sends its share of A
    #: to the CTAs of its row and its share of B to those of its column, so each K step a
    #: CTA loads ``block_m / cluster_n + block_n / cluster`` rows (2x2 on 128 x 256 tiles:
    #: 192, against 256 in 2x1 clusters).
    cluster_n: int = 1
    #: Parts K is cut into. With more than one, each part's product is added into C with a
    #: TMA reduce-add store: the kernel computes C += A @ B (C must hold zeros for C = A @ B).
    split_k: int = 1
    #: With ``split_k`` parts: False, every part adds into C with a reduce-add store (the
    #: kernel computes C += A @ B, so C must hold zeros for C = A @ B); True, the tile's
    #: part 0 stores its product and the other parts add theirs once that store is
    #: complete (C = A @ B, whatever C held), ordered through one flag per output tile in
    #: a workspace (:mod:`.split_k`).
    split_k_ordered: bool = False
    #: Stream-K: the K steps of every tile of the problem are cut into equal runs, one per
    #: worker (CTA or cluster: a cluster's CTAs run vertically adjacent tiles together and
    #: multicast B, as without stream-K), tile after tile, so every SM has the same work
    #: whatever the tile count (no wave quantization). A tile whose K steps fall to
    #: several workers is finished by the one that started it (its K step 0), which adds
    #: the others' fp32 partial tiles from a workspace (:mod:`.stream_k`) before the
    #: epilogue.
    stream_k: bool = False
    #: With ``stream_k``, the trailing waves of tiles it shares out: 1, the partial last
    #: wave only (the full waves before it run data-parallel); 2, the last full wave too.
    #: A partial wave of few tiles (1536 x 3072 x 4096: 144 tiles of 128 x 256 on 132
    #: workers, 12 past one wave) cut alone gives each of its tiles ~11 runs, whose
    #: partials the tile's owner then reads one after another; shared with the full wave
    #: before it, a tile has at most two or three.
    stream_k_waves: int = 1
    #: Parts the tiles past the last full wave are cut into (1: none). The full waves run
    #: data-parallel, tile by tile; each of the few tiles left over is cut into
    #: ``tail_split`` K parts of equal length (part 0 the short one where they do not
    #: divide), one per worker, all in the last round, and the parts are ordered as with
    #: ``split_k_ordered``: part 0 stores, the others add into C once its store is
    #: complete (one flag per tile). Unlike stream-K's runs, every part of every cut tile
    #: starts at the same K step of its tile: the workers of the last round read the same
    #: K slices of A and B at once (L2 hits), and the sum is made in L2 by the TMA
    #: reduce-add, not by one CTA reading every partial (:meth:`tail_part_steps`).
    tail_split: int = 1
    #: Columns of K one A copy covers: 0, the whole K block (one copy per slot into a
    #: swizzled slot); or 8, the 16-column K block in two 8-column pieces, each its own copy
    #: into an unswizzled K-major slot (wgmma core matrices of 8 rows x 16 bytes, the two
    #: pieces ``block_m x 16`` bytes apart). A conv2d whose C is 8 mod 16 needs it: a copy
    #: of its im2col view reads one filter tap, and a 16-column K block there can straddle
    #: two taps, while every 8-column piece lies inside one. Where K is 8 mod 16 the last
    #: K block has one piece: its MMA reads the second from a zeroed region of shared
    #: memory (:attr:`a_zero_bytes`), not from a copy past K.
    a_copy_k: int = 0
    #: B's element type where it differs from A's (None: ``dtype``). Only FP8 mixes differ:
    #: e4m3 A with e5m2 B or the other way round (``torch._scaled_mm`` takes those two and
    #: e4m3 x e4m3, not e5m2 x e5m2; the kernel takes all four).
    b_dtype: str | None = None
    #: Bytes the L2 fetches per miss of the operand loads (the maps' L2 promotion: 64, 128
    #: or 256). 256 suits a stream of weights read once (a grouped GEMM's decode step).
    l2_promotion: int = 128
    #: Compute ``C^T = B A^T`` (B as N x K, 16-bit or FP8): B's rows are the MMAs' M (the
    #: tile's ``block_m``, 64 to 192 of C's columns) and A's rows their N (``block_n``: any
    #: multiple of 8 from 8, of C's rows), and the epilogue writes each accumulator tile
    #: transposed (``stmatrix .trans``) into a C stage laid out as C's rows, which a TMA
    #: store then writes as with ``C = A B^T``. For a problem of few rows (a decode step's
    #: M of 1 to 64 against N in the thousands) the MMA's M, at least 64, would otherwise
    #: be mostly padding rows that the ring loads (zeros) and the tensor cores multiply;
    #: swapped, a tile is 64 or 128 of N by M rounded up to 8. The tiles, the work order,
    #: the splits and every derived count are those of the product's ``product_m x
    #: product_n`` (N x M).
    swap_ab: bool = False
    #: Load the B tile into each ring slot once, on the slot's first use, and leave it
    #: there: where B is one column block (a pointwise conv2d's filter, ``n <= block_n``)
    #: of one K step, or of K steps dividing the stages (slot ``s`` then always holds K
    #: step ``s % k_steps``), the later uses of a slot load only A. The slot's barrier
    #: then expects A's bytes alone.
    b_resident: bool = False
    #: 0: K is one run of columns (A and B as (rows, K) matrices). Else K walks filter taps
    #: of this many columns each (a conv2d whose K blocks are wider than a tap's channels):
    #: the A and B loads read 3-D views (rows, taps, channels), K block ``k0`` from tap
    #: ``k0 // tap_columns`` at channel ``k0 % tap_columns``, and the columns past a tap's
    #: channels read zeros in both (the copies' edge, ``oob="zero"``), so one load reads a
    #: whole tap of 24 channels as 32 columns instead of three 8-column pieces. K is the
    #: taps times ``tap_columns``; the kernel's B argument is (N, taps x channels), the
    #: operand's view ``(M, taps, channels)`` (``a_operand.view_shape``).
    tap_columns: int = 0
    #: None: the A operand is loaded a K block a ring slot. Else a stride-1 conv2d's
    #: halo tiles (:mod:`.halo`): one TMA load per tile brings the tile's input rows into
    #: a raw slot, the producer warpgroup's idle warps copy them into channel planes, and
    #: each K step's A tile is the planes at the step's tap offset (the ring slots hold B
    #: alone). M is then the halo tiles times ``block_m`` and ``tap_columns`` the planes'
    #: channels, or 0 where K is folded over the taps (``halo.folded``: R * S * C, each
    #: k16 step its own operand offsets).
    halo: HaloTiling | None = None

    def __post_init__(self) -> None:
        if self.block_k is None:
            # One 128-byte swizzle row of the input type (set on the frozen instance once).
            object.__setattr__(self, "block_k",
                               FP8_BLOCK_K if self.dtype in FP8_DTYPES else K_BLOCKS[0])

    @classmethod
    def for_problem(cls, m: int, n: int, k: int, **options) -> GemmConfig:
        """The default tiling for a problem (:func:`.tiling.choose`, where the model and its
        measurements are explained): cooperative 128-row tiles 256, 192, 160 or 128 wide,
        whichever the wave count makes fastest, data-parallel or with a last wave at most
        half full cut into ordered K parts (``tail_split``; stream-K where no tiling can
        be cut so); 2x1 clusters multicasting B where the operands' rows
        straddle 128-byte L2 lines; where 128 x 128 tiles fill at most half the SMs, K
        cut into ordered parts on ping-pong tiles (:attr:`ordered_parts`), or for N of 64
        to 256 and a long K on cooperative tiles as wide as N
        (:func:`.tiling.in_one_column_block`: 4096 x 192 x 8192 1.43x); and 64 x 128
        tiles where M is at most 64, or where a problem of at most 16 K steps has too few
        128-row tiles (:func:`.tiling.on_half_rows`); 192-row tiles 128, 160 or 192
        wide (three consumer warpgroups) where they fill one wave
        (:func:`.tiling.fills_one_wave`; in 2x1 clusters on straddled rows), or two full
        rounds where the other tilings leave a thin last round
        (:func:`.tiling.leaves_thin_round`); and the
        chosen 128-row tiles narrowed to the fewest columns that keep their column blocks
        where N leaves the last one partly empty (:func:`.tiling.trimmed`: N = 296 in
        blocks of 112, 328 of 168); ping-pong 64 x 256 tiles where M is 65 to 512 (no
        multiple of 128), the rows are whole 32-byte sectors and those tiles fill most of
        one wave (:func:`.tiling.on_wide_half_rows`); and 2x2 clusters on the CTAs the GPU
        keeps resident in clusters of 4 (120 of 132) where a wide problem's straddled rows
        run one round (:func:`.tiling.in_two_by_two`); and C^T = B A^T (:attr:`swap_ab`)
        where the tiles would pad a problem of few rows: under 256 (FP8: 128) on 128 x
        ceil8(M) tiles, 256 to 511 (16-bit) in 2 or 3 column blocks of M
        (:func:`.tiling.on_swapped_operands`; ``swap_ab=False`` keeps the other rules,
        ``swap_ab=True`` asks for the swapped tiling: of few rows, else of few columns);
        and last, unless the tiles are in
        clusters or swapped, the fullest one wave of cooperative 64-row tiles of whole K
        (2 to 40 K steps, unrolled) where they are more than the tiles chosen
        (:func:`.tiling.in_gemm_fullest_narrow_wave`: 1568 x 640 x 1280 on 125 tiles of 64 x
        128, 1.54x the 128 x 128 ping-pong tiles in 2 parts); C^T = B A^T for few
        columns (N at most 256 in 64-row blocks of the MMAs' M, M in as many column blocks
        as fill one or two rounds of the CTAs) where those tiles keep at least a tenth more
        of the SMs' rounds busy (:func:`.tiling.on_few_columns`: 9248 x 192 x 768 on 129
        tiles of 64 x 216, 1.48x the 73 of 128 x 192); then two alternating C stages
        where a cooperative tile stores C in pieces and 4 ring stages still fit, but not
        where one row block streams B (:func:`.tiling.with_alternating_c_stages`: 1200 x
        512 x 1000 on 64 x 128 tiles 1.03x, 600 x 7000 x 2048 on 128 x 192 1.05x); and
        for a problem of at most 8 K steps, the smallest plain tiles (64 x 64, 64 x 128,
        128 x 128, ping-pong 64 x 256) that make one wave where those before are in
        clusters, swapped for few rows, or fewer (:func:`.tiling.in_short_wave`: 131 x
        1320 x 136 on 63 tiles of 64 x 64, 1.56x the 2x2 clusters of 22), else for 4 to 8
        K steps ping-pong 128 x 128 tiles in place of cooperative 128 x 192 or 128 x 256
        ones (:func:`.tiling.in_short_pingpong`: 2048 x 8192 x 256 1.22x), and for one K
        step ping-pong tiles in place of two rounds of 2x1 clusters
        (:func:`.tiling.in_one_step_pingpong`: 261 x 8840 x 8 1.58x). All of it on one K
        block of 16 or 32 where K fits it (:func:`.tiling.fitted_k_block`: 2004 x 752 x 8
        1.33x).

        Every option the caller gives is kept; the model fills in the rest. FP8 inputs take
        the same tiles with a K block of 128: their slots have the 16-bit slots' bytes
        (128-byte rows), so the same stage counts are the most that fit beside the bf16 C
        stage, and the same costs apply (measured on 16-bit inputs).
        """
        return choose(cls, m, n, k, **options)

    @property
    def ordered_parts(self) -> int:
        """Ordered split-K parts for this tiling when its tiles fill at most half the SMs
        (1: no split): as many as the CTAs hold with one unit each (``ctas // tiles``), at
        most :data:`MAX_ORDERED_SPLIT`, each part at least 4 K steps; of those, the fewest
        that make the longest part shortest, every part keeping a step (where they do not
        divide the K steps part 0 is the short one, :attr:`part_shortfall`).
        ``for_problem`` takes them on ping-pong 128 x 128 tiles unless the caller chose the
        schedule, a cluster or a K split; ``conv2d_config`` on a layer's widest tiles.

        More parts kept winning while each kept a few K steps (H100, same runs, TFLOP/s
        for 4 / 8 / 16 parts): 128 x 1024 x 8192 128 / 178 / 202, 256 x 512 x 8192 137 /
        152 / 200, 32 x 1024 x 4096 21 / 27 / 32; 4 / 6 / 8 parts: 64 x 2048 x 16384 109 /
        134 / 144 (78.5% -> 104% of cuBLAS), 512 x 512 x 4096 171 / 208 / 206. ResNet
        7x7x512 at N=32 (26 tiles of 128 x 256, 72 K steps) ran at 387-392 in 4 parts
        (0.97-0.99x cuDNN) and 469-473 in 5 (1.17-1.24x); at N=8 (8 tiles) 105, 133, 155
        and 192 in 4, 8, 12 and 15 parts. Each part is rounded to the output type before it
        is added (:func:`.reference.error_bound` grows with the parts)."""
        if 2 * self.num_tiles > self.ctas:
            return 1
        steps = self.k_steps
        most = max(1, min(MAX_ORDERED_SPLIT, self.ctas // self.num_tiles,
                          steps // PART_STEPS_FLOOR))
        # The shortest longest part, then the fewest parts (the fewest adds into C).
        return min((p for p in range(1, most + 1) if (p - 1) * math.ceil(steps / p) < steps),
                   key=lambda p: (math.ceil(steps / p), p))

    @property
    def consumers(self) -> int:
        """Consumer warpgroups: 64 rows of the tile each (cooperative), or two that take
        turns (ping-pong)."""
        return 2 if self.schedule == "pingpong" else self.block_m // self.consumer_rows

    @property
    def consumer_registers(self) -> int:
        """Registers a consumer thread takes with ``setmaxnreg.inc``: 232 beside one
        producer and two consumer warpgroups, 152 beside three."""
        return CONSUMER_REGISTERS if self.consumers <= 2 else THREE_CONSUMER_REGISTERS

    @property
    def max_accumulators(self) -> int:
        """fp32 accumulators a consumer thread may hold: at most 128 (a 64 x 256 slice),
        and :data:`MIN_SPARE_REGISTERS` under its budget (96 with three consumers)."""
        if self.block_n in WIDE_BLOCK_NS:
            return WIDE_MAX_ACCUMULATORS
        return min(128, self.consumer_registers - MIN_SPARE_REGISTERS)

    @property
    def consumer_rows(self) -> int:
        """Rows of a tile one consumer warpgroup computes: the ping-pong warpgroup's whole
        tile, :data:`TALL_CONSUMER_ROWS` of a 256-row cooperative one, else 64."""
        if self.schedule == "pingpong":
            return self.block_m
        return TALL_CONSUMER_ROWS if self.block_m == 256 else 64

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
        """C stages in shared memory: ``epilogue_buffers`` shared by the cooperative
        consumers, or one per ping-pong warpgroup."""
        return 2 if self.schedule == "pingpong" else self.epilogue_buffers

    @property
    def cluster_size(self) -> int:
        """CTAs per cluster: ``cluster`` along M times ``cluster_n`` along N."""
        return self.cluster * self.cluster_n

    @property
    def workers(self) -> int:
        """Persistent workers: CTAs, or clusters of CTAs."""
        return self.ctas // self.cluster_size

    @property
    def a_share_rows(self) -> int:
        """Rows of the A tile each CTA of a cluster along N loads and multicasts."""
        return self.block_m // self.cluster_n

    @property
    def b_share_rows(self) -> int:
        """Rows of the B tile (N x K) each CTA of a cluster along M loads and
        multicasts."""
        return self.block_n // self.cluster

    @property
    def m_groups(self) -> int:
        """Row blocks as the tile order sees them: ``cluster`` adjacent ones together."""
        return math.ceil(self.m_blocks / self.cluster)

    @property
    def n_groups(self) -> int:
        """Column blocks as the tile order sees them: ``cluster_n`` adjacent ones together."""
        return math.ceil(self.n_blocks / self.cluster_n)

    @property
    def work_units(self) -> int:
        """(cluster of tiles, K part) pairs the workers walk."""
        if self.tail_split > 1:
            return self.tail_rounds * self.workers + self.tail_tiles * self.tail_split
        return self.m_groups * self.n_groups * self.split_k

    @property
    def steps_per_unit(self) -> int:
        """K steps of the longest work unit: ``ceil(k_steps / split_k)`` (every part but
        part 0, which runs :attr:`part_shortfall` fewer)."""
        return math.ceil(self.k_steps / self.split_k)

    @property
    def part_shortfall(self) -> int:
        """K steps part 0 of a split-K tile runs fewer than the other parts, where
        ``split_k`` does not divide the K steps (72 steps in 5 parts: 12, then 15, 15, 15,
        15).

        The short part is part 0 because with ordered split-K it is the one the others
        wait for: it finishes its MMAs first and its store is in C when they come to add.
        The producer and the consumers number their ring uses ``j * count`` for a worker's
        round ``j`` (:func:`.scheduler.unit_steps`), which holds only if the units of one
        worker all have the same length: one unit per worker (``work_units <= workers``,
        what the default tilings pick), or one part per worker (``workers`` a multiple of
        ``split_k``). Otherwise (0 here) every part runs ``steps_per_unit`` steps and the
        last one's trailing steps lie past K, where TMA fills the tile with zeros: wasted
        work, but correct for a GEMM (a convolution refuses it: a step past R*S*C would
        read another filter tap's pixels)."""
        short = self.split_k * self.steps_per_unit - self.k_steps
        if short and (self.work_units <= self.workers or self.workers % self.split_k == 0):
            return short
        return 0

    def part_steps(self, part: int) -> tuple[int, int]:
        """(first K step, K steps) of K part ``part`` of every tile (host-side twin of
        :func:`.scheduler.unit_steps`)."""
        return short_part_first(self.steps_per_unit, self.part_shortfall, part)

    def part_bounds(self) -> list[tuple[int, int]]:
        """The K columns ``(begin, end)`` each K part sums (the last may reach past K); with
        ``tail_split``, those of a tile left over."""
        if self.tail_split > 1:
            steps = map(self.tail_part_steps, range(self.tail_split))
        else:
            steps = map(self.part_steps, range(self.split_k))
        return [(self.block_k * first, self.block_k * (first + count))
                for first, count in steps]

    @property
    def stream_k_dp_tiles(self) -> int:
        """Worker tiles stream-K leaves to the plain data-parallel order: every full wave
        (none when there are fewer tiles than workers). The workers take those first, tile
        by tile in the grouped order, so the tiles running at one moment share A and B in
        L2 as without stream-K; only the partial last wave is cut into runs, one per
        worker. (Cutting the last full wave too, as a first version did, spread the tiles
        in flight over twice as many blocks: 4096^3 lost 20%, its L2 hit rate falling from
        73% to 58%.) Where the partial wave has fewer K steps than there are workers, the
        last full wave joins it, so every run has at least one; with ``stream_k_waves`` 2
        it always does."""
        tiles, workers = self.m_groups * self.n_groups, self.workers
        whole = tiles // workers * workers
        few_steps = 0 < (tiles - whole) * self.k_steps < workers
        if whole >= workers and (self.stream_k_waves == 2 or few_steps):
            whole -= workers
        return whole

    @property
    def stream_k_dp_rounds(self) -> int:
        """Data-parallel tiles each worker computes before its stream-K run."""
        return self.stream_k_dp_tiles // self.workers

    @property
    def iterations(self) -> int:
        """K steps of the stream-K tail (the worker tiles after
        :attr:`stream_k_dp_tiles`): what stream-K shares out among the workers."""
        return (self.m_groups * self.n_groups - self.stream_k_dp_tiles) * self.k_steps

    def stream_k_start(self, worker):
        """First K step of worker ``worker``'s stream-K run, numbered over the whole
        problem (step ``g`` is K step ``g % k_steps`` of worker tile ``g // k_steps``); it
        computes steps ``stream_k_start(worker) .. stream_k_start(worker + 1) - 1``. Takes
        an int or a TIR expression (the kernel's worker index)."""
        return (self.stream_k_dp_tiles * self.k_steps
                + worker * self.iterations // self.workers)

    @property
    def stream_k_peers(self) -> int:
        """Most workers besides the one that starts a tile that may each compute a part of
        it (a run is at least ``iterations // workers`` steps, and the starter has at least
        one of the tile's ``k_steps``)."""
        shortest = self.iterations // self.workers
        return min(self.workers - 1, math.ceil((self.k_steps - 1) / shortest))

    @property
    def tail_rounds(self) -> int:
        """With ``tail_split``: the full waves of tiles each worker computes whole before
        its part of a tile left over."""
        return self.m_groups * self.n_groups // self.workers

    @property
    def tail_tiles(self) -> int:
        """With ``tail_split``: the worker tiles past the last full wave (each cut into
        ``tail_split`` ordered parts)."""
        return self.m_groups * self.n_groups - self.tail_rounds * self.workers

    @property
    def tail_parts_held(self) -> int:
        """Most parts the tiles left over after the full waves can each be cut into: as
        many as the workers hold, at most :data:`MAX_ORDERED_SPLIT`, each at least
        :data:`PART_STEPS_FLOOR` K steps (the bounds of :attr:`ordered_parts`); 0 with no
        tile left over. :func:`.tiling.in_tail_parts` picks among 2 .. this many."""
        if self.tail_tiles == 0:
            return 0
        return min(MAX_ORDERED_SPLIT, self.workers // self.tail_tiles,
                   self.k_steps // PART_STEPS_FLOOR)

    @property
    def tail_steps_per_part(self) -> int:
        """K steps of each part of a tile left over but part 0: ``ceil(k_steps /
        tail_split)``."""
        return math.ceil(self.k_steps / self.tail_split)

    @property
    def tail_shortfall(self) -> int:
        """K steps part 0 of a tile left over runs fewer than the other parts (it finishes
        first, so its store is in C when the others come to add)."""
        return self.tail_split * self.tail_steps_per_part - self.k_steps

    def tail_part_steps(self, part: int) -> tuple[int, int]:
        """(first K step, K steps) of K part ``part`` of a tile left over with
        ``tail_split`` (host-side twin of :func:`.scheduler.tail_steps`)."""
        return short_part_first(self.tail_steps_per_part, self.tail_shortfall, part)

    @property
    def reduction_parts(self) -> int:
        """K parts whose products meet in C: ``split_k``, or ``tail_split`` for the tiles
        left over (the error bound takes the larger for every tile)."""
        return max(self.split_k, self.tail_split)

    @property
    def order_waits(self) -> bool:
        """Whether the kernel orders K parts through per-tile flags (ordered split-K, or
        the tail split): it then takes the flags workspace and its CTAs wait on each
        other."""
        return self.split_k_ordered or self.tail_split > 1

    @property
    def partial_floats(self) -> int:
        """fp32 values of one CTA's partial tile in the stream-K workspace."""
        return self.block_m * self.block_n

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    @property
    def fp8(self) -> bool:
        """FP8 inputs: k32 wgmma, bf16 C, per-tensor scales (kernel arguments)."""
        return self.dtype in FP8_DTYPES

    @property
    def input_dtypes(self) -> tuple[str, str]:
        """(A's, B's) element types."""
        return self.dtype, self.b_dtype or self.dtype

    @property
    def mma_dtypes(self) -> tuple[str, str]:
        """The element types of the MMAs' A and B slots: (A's, B's), or (B's, A's) with
        :attr:`swap_ab` (an FP8 mix's wgmma names them in that order)."""
        a_type, b_type = self.input_dtypes
        return (b_type, a_type) if self.swap_ab else (a_type, b_type)

    @property
    def out_dtype(self) -> str:
        """C's element type: the input type, or bf16 for FP8 inputs."""
        return FP8_OUT_DTYPE if self.fp8 else self.dtype

    @property
    def element_bytes(self) -> int:
        """Bytes of an A or B element (both have the same width: :meth:`check`)."""
        return tvm.DataType(self.dtype).bits // 8

    @property
    def out_bytes(self) -> int:
        """Bytes of a C element."""
        return tvm.DataType(self.out_dtype).bits // 8

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
        return self.block_m * self.epilogue_cols * self.out_bytes

    @property
    def a_ring_start(self) -> int:
        """Byte offset of the A ring in dynamic shared memory: right after the barriers."""
        return BARRIER_BYTES

    def _check_tap_columns(self) -> None:
        taps = self.tap_columns
        if taps < 0 or taps % self.block_k or self.k % taps:
            raise ValueError(f"tap_columns={taps}: a whole number of K blocks "
                             f"(block_k={self.block_k}) that divides K={self.k} (the taps "
                             f"times their padded channels)")
        if self.a_copy_k or self.b_layout != "nk" or self.swap_ab or self.fp8:
            raise ValueError(f"tap_columns={taps}: a 16-bit conv2d's K blocks over filter "
                             f"taps (one A copy per K block, B as N x K, no swap_ab); got "
                             f"a_copy_k={self.a_copy_k}, b_layout={self.b_layout!r}, "
                             f"swap_ab={self.swap_ab}, dtype={self.dtype!r}")

    @property
    def a_pieces(self) -> int:
        """A copies per ring slot: 1, or 2 with ``a_copy_k`` 8 (one per 8-column piece)."""
        return self.block_k // self.a_copy_k if self.a_copy_k else 1

    @property
    def a_zero_bytes(self) -> int:
        """Bytes of the zeroed piece the MMA of a last, half K block reads in place of its
        missing second piece (``a_copy_k`` 8 with K 8 mod 16: ``block_m`` rows of 16
        bytes, right after the A ring); 0 otherwise."""
        if self.a_copy_k and self.k % self.block_k:
            return self.block_m * self.a_copy_k * self.element_bytes
        return 0

    @property
    def a_ring_bytes(self) -> int:
        """Bytes of the A ring: ``stages`` slots of A tiles, or the halo slots."""
        if self.halo is not None:
            return HALO_STAGES * (self.halo.slot_bytes + self.halo.raw_slot_bytes)
        return self.stages * self.a_tile_bytes

    @property
    def halo_raw_start(self) -> int:
        """Byte offset of the raw halo slots: after the plane slots (:mod:`.halo`)."""
        return self.a_ring_start + HALO_STAGES * self.halo.slot_bytes

    @property
    def a_step_bytes(self) -> int:
        """Bytes of A a ring slot's K step brings: the A tile, none with halo tiles."""
        return 0 if self.halo is not None else self.a_tile_bytes

    @property
    def a_zero_start(self) -> int:
        """Byte offset of the zeroed piece: after the A ring's ``stages`` slots."""
        return self.a_ring_start + self.a_ring_bytes

    @property
    def b_ring_start(self) -> int:
        """Byte offset of the B ring: after the A ring's ``stages`` slots (and the zeroed
        piece, where there is one)."""
        return self.a_zero_start + self.a_zero_bytes

    @property
    def c_stage_start(self) -> int:
        """Byte offset of the C stage(s): after the B ring's ``stages`` slots."""
        return self.b_ring_start + self.stages * self.b_tile_bytes

    @property
    def shared_bytes(self) -> int:
        return self.c_stage_start + self.c_stages * self.c_tile_bytes

    @property
    def product_m(self) -> int:
        """Rows of the product the tiles cut: M, or N with :attr:`swap_ab` (C^T's rows)."""
        return self.n if self.swap_ab else self.m

    @property
    def product_n(self) -> int:
        """Columns of the product the tiles cut: N, or M with :attr:`swap_ab`."""
        return self.m if self.swap_ab else self.n

    @property
    def m_blocks(self) -> int:
        return math.ceil(self.product_m / self.block_m)

    @property
    def n_blocks(self) -> int:
        return math.ceil(self.product_n / self.block_n)

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
        if self.dtype not in DTYPES_16 + FP8_DTYPES:
            raise ValueError(f"dtype={self.dtype!r}: 'bfloat16' or 'float16', or FP8 "
                             f"'float8_e4m3fn' or 'float8_e5m2'")
        if self.b_layout not in ("nk", "kn"):
            raise ValueError(f"b_layout={self.b_layout!r}: 'nk' (N x K) or 'kn' (K x N)")
        if self.fp8:
            self._check_fp8()
        elif self.b_dtype not in (None, self.dtype):
            raise ValueError(f"b_dtype={self.b_dtype!r} with dtype={self.dtype!r}: 16-bit "
                             f"A and B have one type (b_dtype is for FP8 mixes)")
        if self.m < 1:
            raise ValueError(f"m={self.m}: at least one row")
        # N and K are the lengths of rows TMA moves (A and B are K long, C is N long): their
        # byte strides must be multiples of 16. No stride depends on M: a last row block
        # that runs past M loads zeros and stores nothing there (oob=).
        for name, extent in (("n", self.n), ("k", self.k)):
            if extent < 8 or extent % 8:
                raise ValueError(f"{name}={extent}: N and K must be positive multiples of 8 "
                                 f"(16-byte rows for TMA); M may be anything")
        if self.block_m not in BLOCK_MS or (self.block_m in (192, 256)
                                            and self.schedule != "cooperative"):
            raise ValueError(f"block_m={self.block_m} with schedule={self.schedule!r}: 64 or "
                             f"128 (one or two consumer warpgroups of 64 rows, or ping-pong "
                             f"warpgroups each taking a tile whole), 192 cooperative "
                             f"(three consumer warpgroups of 64 rows) or 256 cooperative "
                             f"(two of 128)")
        if self.block_m == 256:
            self._check_plain_256()
        if self.b_layout == "kn" and (self.block_n % 64 or not 64 <= self.block_n <= 256):
            raise ValueError(f"block_n={self.block_n}: a multiple of 64 from 64 to 256 with "
                             f"b_layout='kn' (the N-major B slot is whole 64-column 128-byte "
                             f"swizzle atoms)")
        if self.block_n > 256:
            self._check_wide()
        elif (self.block_n % 32 or not 64 <= self.block_n <= 256) and not self.swap_ab:
            self._check_odd_width()
        if not self.fp8 and self.block_k not in K_BLOCKS:
            raise ValueError(f"block_k={self.block_k}: 64, 32 or 16 (a K-major slot row of "
                             f"128, 64 or 32 bytes: one 128B, 64B or 32B swizzle span, "
                             f"a whole number of k16 MMA steps)")
        if self.a_copy_k not in (0, 8) or (self.a_copy_k and self.block_k != 16):
            raise ValueError(f"a_copy_k={self.a_copy_k} with block_k={self.block_k}: 0 (one "
                             f"A copy per K block) or 8 with block_k 16 (two 8-column pieces "
                             f"of one k16 wgmma step, in an unswizzled slot)")
        if self.tap_columns:
            self._check_tap_columns()
        if self.halo is not None:
            self._check_halo()
        if self.stages < 2:
            raise ValueError(f"stages={self.stages}: the ring needs at least 2 slots")
        whole_odd = self.block_n % 32 and self.epilogue_cols == self.block_n
        if self.swap_ab:
            self._check_swap_ab()
        elif self.block_n % self.epilogue_cols or (self.epilogue_cols % 64
                                                    and self.epilogue_cols != 32
                                                    and not whole_odd):
            raise ValueError(f"epilogue_n={self.epilogue_n} ({self.epilogue_cols} columns): "
                             f"whole 64-column atoms (128B swizzle) or exactly 32 columns "
                             f"(one 64-byte row, the 64B swizzle's widest box), dividing "
                             f"block_n={self.block_n}")
        if self.schedule not in ("cooperative", "pingpong"):
            raise ValueError(f"schedule={self.schedule!r}: 'cooperative' or 'pingpong'")
        if self.epilogue_buffers not in (1, 2) or (self.epilogue_buffers == 2
                                                   and self.schedule != "cooperative"):
            raise ValueError(f"epilogue_buffers={self.epilogue_buffers} with schedule="
                             f"{self.schedule!r}: 1, or 2 with the cooperative schedule (a "
                             f"ping-pong warpgroup has a C stage of its own)")
        if self.accumulators > self.max_accumulators:
            raise ValueError(f"{self.schedule}: a consumer warpgroup computes "
                             f"{self.consumer_rows}x{self.block_n} outputs, "
                             f"{self.accumulators} fp32 registers per thread (at most "
                             f"{self.max_accumulators} of its {self.consumer_registers} beside "
                             f"{self.consumers - 1} other consumer warpgroup"
                             f"{'s' if self.consumers > 2 else ''})")
        if self.cluster not in (1, 2):
            raise ValueError(f"cluster={self.cluster}: 1 or 2 CTAs (2x1, sharing B)")
        if self.cluster_n not in (1, 2, 4):
            raise ValueError(f"cluster_n={self.cluster_n}: 1, 2 or 4 CTAs ({self.cluster}x"
                             f"{self.cluster_n}, sharing A)")
        if self.cluster_n > 1:
            self._check_cluster_n()
        if self.ctas % self.cluster_size:
            raise ValueError(f"ctas={self.ctas}: a multiple of the cluster's "
                             f"{self.cluster_size} CTAs")
        if self.split_k < 1 or (self.split_k - 1) * self.steps_per_unit >= self.k_steps:
            raise ValueError(f"split_k={self.split_k}: 1 up to the point where every part "
                             f"keeps at least one of the {self.k_steps} K steps")
        if self.stream_k_waves not in (1, 2) or (self.stream_k_waves == 2
                                                  and not self.stream_k):
            raise ValueError(f"stream_k_waves={self.stream_k_waves}: 1, or 2 with stream_k "
                             f"(the trailing waves stream-K shares out)")
        if self.stream_k:
            self._check_stream_k()
        if self.split_k_ordered:
            self._check_split_k_ordered()
        if self.tail_split != 1:
            self._check_tail_split()
        if self.b_resident:
            self._check_b_resident()
        if self.l2_promotion not in (64, 128, 256):
            raise ValueError(f"l2_promotion={self.l2_promotion}: 64, 128 or 256 bytes per L2 "
                             "fill")
        if self.group_m < 1 or self.ctas < 1:
            raise ValueError(f"group_m={self.group_m}, ctas={self.ctas}: both at least 1")
        if self.shared_bytes > MAX_SHARED:
            raise ValueError(f"{self.stages} stages of {self.block_m}x{self.block_n}x"
                             f"{self.block_k} tiles need {self.shared_bytes} bytes of shared "
                             f"memory (> {MAX_SHARED})")

    def _check_halo(self) -> None:
        """Halo tiles (:mod:`.halo`): a 16-bit conv2d's K over taps (``tap_columns``
        the planes' channels), B as N x K, whole tiles on the cooperative schedule in no
        cluster and unswapped (each halo slot serves one tile's K steps), M the halo
        tiles times ``block_m`` and every tile's rows within it."""
        halo = self.halo
        columns = 0 if halo.folded else halo.planes * 8
        if (self.tap_columns != columns or self.fp8 or self.b_layout != "nk"
                or self.a_copy_k):
            raise ValueError(f"halo tiles: a 16-bit conv2d's K over taps with tap_columns="
                             f"{columns} (the planes' channels; 0: K folded over the taps) "
                             f"and B as N x K; got tap_columns={self.tap_columns}, dtype="
                             f"{self.dtype!r}, b_layout={self.b_layout!r}, a_copy_k="
                             f"{self.a_copy_k}")
        if (self.schedule != "cooperative" or self.cluster_size > 1 or self.swap_ab
                or self.split_k != 1 or self.stream_k or self.tail_split != 1):
            raise ValueError(f"halo tiles: whole tiles on the cooperative schedule, no "
                             f"cluster, unswapped (schedule={self.schedule!r}, cluster="
                             f"{self.cluster}x{self.cluster_n}, swap_ab={self.swap_ab}, "
                             f"split_k={self.split_k}, stream_k={self.stream_k}, "
                             f"tail_split={self.tail_split})")
        if halo.block_m != self.block_m or self.m != halo.tiles * self.block_m:
            raise ValueError(f"halo tiles of {halo.block_m} rows, {halo.tiles} of them: "
                             f"block_m={self.block_m} and m={self.m} must be "
                             f"{halo.block_m} and {halo.tiles * halo.block_m}")
        if self.stages > HALO_MAX_STAGES:
            raise ValueError(f"stages={self.stages}: at most {HALO_MAX_STAGES} with halo "
                             f"tiles (the ring's and the halo slots' barriers share "
                             f"{BARRIER_BYTES} bytes)")

    def _check_plain_256(self) -> None:
        """A 256-row tile runs plain so far (:data:`PLAIN_256_REFUSED`), 16-bit."""
        fields = self.__dataclass_fields__
        taken = [f"{name}={getattr(self, name)!r}" for name in PLAIN_256_REFUSED
                 if getattr(self, name) != fields[name].default]
        if self.fp8 or taken:
            what = ", ".join(taken + (["fp8"] if self.fp8 else []))
            raise ValueError(f"block_m=256 with {what}: 256-row tiles run plain (no "
                             f"cluster, split, stream-K, tail parts, swap, convolution "
                             f"view, resident B or second C stage) with 16-bit inputs")

    def _check_swap_ab(self) -> None:
        """``C^T = B A^T``: both operands K-major (B as N x K), a tile width of any
        multiple of 8 from 8 to 256 (A's rows as wgmma N), and C staged ``epilogue_n`` of
        A's rows at a time, a multiple of 8 dividing ``block_n``: the stage is that many of
        C's rows by ``block_m`` of its columns, whole 64-column atoms of the 128B swizzle,
        whose 8-row period each ``stmatrix .trans`` block fills. A view of A (a
        convolution's activation, tiled or im2col) fills the B ring as a plain A does;
        not over padded taps (:attr:`tap_columns`)."""
        if self.b_layout != "nk":
            raise ValueError(f"swap_ab with b_layout={self.b_layout!r}: C^T = B A^T takes "
                             f"B as N x K ('nk'), both operands K-major")
        if self.block_n % 8 or not 8 <= self.block_n <= 256:
            raise ValueError(f"swap_ab with block_n={self.block_n}: a multiple of 8 from 8 to "
                             f"256 (A's rows are wgmma N)")
        if self.block_n % self.epilogue_cols or self.epilogue_cols % 8:
            raise ValueError(f"swap_ab with epilogue_n={self.epilogue_n} "
                             f"({self.epilogue_cols} of C's rows a stage): a multiple of 8 "
                             f"dividing block_n={self.block_n}")
        self._check_b_share()

    def _check_fp8(self) -> None:
        """FP8 wgmma reads both operands K-major from shared memory (its PTX form has no
        transpose immediates), in k32 steps of 32 bytes along 128-byte 128B-swizzled rows;
        A's and B's rows are K bytes long, which TMA needs in multiples of 16."""
        if self.b_dtype is not None and self.b_dtype not in FP8_DTYPES:
            raise ValueError(f"b_dtype={self.b_dtype!r} with dtype={self.dtype!r}: FP8 A "
                             f"takes an FP8 B, 'float8_e4m3fn' or 'float8_e5m2'")
        if self.b_layout != "nk":
            raise ValueError(f"b_layout={self.b_layout!r} with FP8 inputs: wgmma reads 8-bit "
                             f"operands K-major only (B as N x K, 'nk')")
        if self.k < 16 or self.k % 16:
            raise ValueError(f"k={self.k}: FP8 K must be a positive multiple of 16 (rows of "
                             f"K one-byte elements are 16-byte multiples for TMA)")
        if self.block_k != FP8_BLOCK_K:
            raise ValueError(f"block_k={self.block_k}: FP8 takes {FP8_BLOCK_K} (one "
                             f"128-byte row of the 128B swizzle, four k32 MMA steps)")

    def _check_wide(self) -> None:
        """A tile wider than wgmma's N (:data:`WIDE_BLOCK_NS`): two MMAs of half the width
        per k16 step, on cooperative 128-row tiles (one 64-row slice a consumer warpgroup)
        of 16-bit inputs with B as N x K, C in 32- or 64-column stages."""
        if self.block_n not in WIDE_BLOCK_NS:
            raise ValueError(f"block_n={self.block_n}: at most 256 (wgmma N), or one of "
                             f"{WIDE_BLOCK_NS} (two MMAs of half the width a k16 step)")
        if (self.schedule, self.block_m) != ("cooperative", 128) or self.fp8 or (
                self.b_layout != "nk"):
            raise ValueError(f"block_n={self.block_n}: a width past 256 takes cooperative "
                             f"128-row tiles of 16-bit inputs with B as N x K (schedule="
                             f"{self.schedule!r}, block_m={self.block_m}, dtype="
                             f"{self.dtype!r}, b_layout={self.b_layout!r})")
        self._check_b_share()

    def _check_b_share(self) -> None:
        """In a cluster along M each CTA loads ``block_n / cluster`` rows of the B tile:
        whole 8-row groups of the 128B swizzle (a width no multiple of 32, or past 256)."""
        if self.block_n % (8 * self.cluster):
            raise ValueError(f"cluster={self.cluster} with block_n={self.block_n}: each CTA's "
                             f"share of the B tile must be whole 8-row groups")

    def _check_odd_width(self) -> None:
        """A tile width that is no multiple of 32 (or under 64): any multiple of 8 from 8 to
        256 (wgmma N), for 16-bit inputs with B as N x K (its slot is whole 8-row groups of
        the 128B swizzle), C staged whole (``epilogue_n`` 0 or ``block_n``: an unswizzled
        stage of ``block_n``-column rows, the TMA store's box), and a cluster along M only
        where each CTA's share of B is whole 8-row groups."""
        if self.block_n % 8 or not 8 <= self.block_n <= 256:
            raise ValueError(f"block_n={self.block_n}: a multiple of 8 from 8 to 256 (wgmma N)")
        if self.fp8 or self.b_layout != "nk":
            raise ValueError(f"block_n={self.block_n}: a multiple of 32 from 64 to 256 with "
                             f"{'FP8 inputs' if self.fp8 else 'b_layout=' + repr(self.b_layout)}"
                             f" (other widths: 16-bit inputs, B as N x K)")
        if self.epilogue_cols != self.block_n:
            raise ValueError(f"epilogue_n={self.epilogue_n} with block_n={self.block_n}: 0 "
                             f"(a width no multiple of 32 is staged whole, unswizzled)")
        self._check_b_share()

    def _check_cluster_n(self) -> None:
        """A cluster along N shares A: each CTA loads ``block_m / cluster_n`` rows of it (16
        at the fewest, so every share starts on a whole 8-row group of the slot: the 128B
        swizzle's 1024-byte period, a wgmma core matrix's 8 rows). A two-dimensional
        cluster (``cluster`` 2 too) sends each CTA's B rows to the CTAs of its column with
        a mask, which the K x N slot (64-column atoms split by columns) does not take."""
        if self.cluster > 1 and self.b_layout != "nk":
            raise ValueError(f"cluster={self.cluster} with cluster_n={self.cluster_n} and "
                             f"b_layout={self.b_layout!r}: a two-dimensional cluster takes B "
                             f"as N x K ('nk'; each CTA multicasts whole rows of B)")
        if self.stream_k:
            raise ValueError(f"stream_k with cluster_n={self.cluster_n}: stream-K runs "
                             f"clusters along M only (cluster_n=1)")

    def _check_split_k_ordered(self) -> None:
        """The later parts of a tile wait for its part 0's store: the parts must run on
        distinct workers (adjacent units of the round-robin order are, with at least
        ``split_k`` workers), all resident (``ctas`` at most the SM count:
        :func:`.stream_k.check_resident`)."""
        if self.split_k < 2:
            raise ValueError(f"split_k_ordered with split_k={self.split_k}: there are no "
                             f"parts to order (split_k at least 2)")
        if self.workers < self.split_k:
            raise ValueError(f"split_k_ordered with split_k={self.split_k} on {self.workers} "
                             f"workers: a tile's parts wait for its part 0, so they need a "
                             f"worker each (at least split_k workers)")

    def _check_b_resident(self) -> None:
        """A resident B must be the whole of B in the ring: one column block, and one K
        step or K steps dividing the ring's stages (slot ``s`` then always holds K step
        ``s % k_steps``), every unit whole (no split, stream-K or tail parts), loaded by
        this CTA or shared along M in a 2x1 cluster (each CTA multicasting its half; not
        a 1xN cluster, whose CTAs' B tiles differ), unswapped."""
        if self.n_blocks != 1:
            raise ValueError(f"b_resident with n={self.n}: B must be one column block "
                             f"(n <= block_n={self.block_n})")
        if self.stages % self.k_steps:
            raise ValueError(f"b_resident with {self.k_steps} K steps (k={self.k}, "
                             f"block_k={self.block_k}) on stages={self.stages}: the K steps "
                             f"must divide the stages, so each slot holds one K step's B")
        if self.split_k != 1 or self.stream_k or self.tail_split != 1:
            raise ValueError("b_resident with split_k, stream_k or tail_split: every unit a "
                             "whole tile")
        if self.cluster_n != 1 or self.swap_ab:
            raise ValueError(f"b_resident with a {self.cluster}x{self.cluster_n} cluster or "
                             f"swap_ab={self.swap_ab}: B loaded by this CTA or shared in "
                             f"a 2x1 cluster, unswapped")

    def _check_tail_split(self) -> None:
        """The tail split cuts the tiles past the last full wave of the cooperative
        schedule into parts that all run in one last round (one per worker), each keeping
        a K step; it is its own K split."""
        parts = self.tail_split
        if parts < 2:
            raise ValueError(f"tail_split={parts}: 1 (none) or at least 2 parts")
        if self.schedule != "cooperative":
            raise ValueError(f"tail_split with schedule={self.schedule!r}: the cooperative "
                             f"schedule only")
        if self.split_k != 1 or self.stream_k:
            raise ValueError(f"tail_split with split_k={self.split_k}, stream_k="
                             f"{self.stream_k}: the tail split is its own K split")
        if self.tail_tiles == 0:
            raise ValueError(f"tail_split={parts}: the {self.m_groups * self.n_groups} "
                             f"worker tiles fill whole waves of {self.workers} workers; "
                             f"there is no tile left over to cut")
        if self.tail_tiles * parts > self.workers:
            raise ValueError(f"tail_split={parts}: {self.tail_tiles} tiles left over in "
                             f"{parts} parts are {self.tail_tiles * parts} units for "
                             f"{self.workers} workers (at most one round)")
        if (parts - 1) * math.ceil(self.k_steps / parts) >= self.k_steps:
            raise ValueError(f"tail_split={parts}: every part keeps at least one of the "
                             f"{self.k_steps} K steps")

    @property
    def order_flags(self) -> int:
        """Flags of an ordered split-K (one per output tile, padding blocks of the last
        cluster included): ``m_groups * cluster`` row blocks by ``n_groups * cluster_n``
        column blocks."""
        return self.m_groups * self.cluster * self.n_groups * self.cluster_n

    def _check_stream_k(self) -> None:
        """Stream-K runs the cooperative schedule over whole K (it is its own K split), and
        needs at least one K step per worker; its step numbers are 32-bit."""
        if self.schedule != "cooperative":
            raise ValueError(f"stream_k with schedule={self.schedule!r}: stream-K shares "
                             f"K steps between CTAs of the cooperative schedule only")
        if self.consumers > 2:
            raise ValueError(f"stream_k with block_m={self.block_m}: stream-K's fix-up "
                             f"(fp32 partial tiles) runs on one or two consumer warpgroups "
                             f"(block_m 64 or 128)")
        if self.split_k != 1:
            raise ValueError(f"stream_k with split_k={self.split_k}: stream-K is its own K "
                             f"split (split_k=1)")
        if 0 < self.iterations < self.workers:
            raise ValueError(f"stream_k: {self.iterations} K steps for {self.workers} "
                             f"workers (ctas={self.ctas}, cluster={self.cluster}): every "
                             f"worker needs at least one (use fewer CTAs)")
        if self.iterations * self.workers >= 2**31:
            raise ValueError(f"stream_k: {self.iterations} K steps times {self.workers} "
                             f"workers overflows the kernel's 32-bit run arithmetic")
