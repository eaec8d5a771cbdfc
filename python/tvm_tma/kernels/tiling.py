"""The default tiling of a GEMM problem: a wave-quantization cost model over measured tilings.

A persistent kernel runs its tiles in waves of ``workers`` at a time, and a problem's time is
its number of waves times the time of one tile. A tiling that fills 97% of one wave with
128 x 256 tiles (2048^3: 128 tiles on 132 SMs) beats one that fills two waves with 128 x 128
tiles, whose K steps each do half the products for two thirds of the bytes; a tiling that
leaves a quarter of a wave empty (768 x 4096: 96 tiles of 128 x 256) loses to 128 x 192
tiles that fill it (132 tiles). :func:`choose` estimates each candidate's time in units of
one K step of a 128 x 256 tile and takes the cheapest:

* **Data-parallel**: ``rounds x steps_per_unit x step_cost`` (``STEP_COST[block_n]``, or
  where rows straddle L2 lines at least :func:`straddled_step_cost`).
* **Tail split** (tiles of at least :data:`TAIL_MIN_STEPS` K steps, a partial last wave of
  at most half the workers): the full waves as above, then the tiles left over cut into
  ``tail_split`` ordered K parts, one per worker, all in one last round
  (:func:`in_tail_parts`), priced as ordered K parts are (below). Every part of every cut
  tile starts on the same K step of its tile, so the last round's loads share L2 as a full
  wave's do, and the parts meet in C through TMA reduce-adds. Where it applies it replaces
  stream-K for every tiling (a problem with a tail split has no stream-K candidate), which
  measured 5-42% slower on the same problems (H100, same runs: 1536 x 3072 x 4096 94.8-96.1%
  of cuBLAS against 80.4-81.6%, 2048 x 7168 x 4096 98.6-99.2% against 93.8-94.5%, 5120^3
  102.7-103.6% against 98.9-99.0%, 296 x 16384 x 8192 84.4% against 59.4%, 8192 x 640 x 8192
  90.2% for 128 x 160 plain waves against 82.1% for stream-K's 128 x 128); it also takes the
  straddled problems whose 128 x 256 tiles in 2x1 clusters leave a partial wave (10000 x
  1024 x 3000 1.12x, 1000 x 10000 x 3000 1.13x, 3000^3 1.15x, 12000 x 512 x 2000 1.13x the
  plain waves: benchmarks/RESULTS.md section 6i).
* **Stream-K** (tiles of at least :data:`STREAM_K_MIN_STEPS` K steps, a partial last wave
  too full for the tail split in every tiling): the full waves as above, then the partial
  wave's K steps shared out (``iterations / workers``), plus the fix-up: a tile cut into
  ``pieces`` runs costs its peers a write and its owner a read of one fp32 partial tile per
  peer (:data:`FIXUP_COST_PER_BYTE` per byte). It is a candidate only where it is estimated
  :data:`STREAM_K_MARGIN` cheaper than the same tiles in plain waves: where it gains little
  it loses what the model does not see (4096^3's L2 hit rate fell from 73% to 58%). Sharing
  the last full wave as well (``stream_k_waves=2``, each tile in about two pieces) is
  estimated cheaper still on a partial wave of few tiles but measured slower on every
  problem but one (RESULTS.md section 6d), so the model never takes it.
* **Ordered K parts** (a tiling whose tiles fill at most half the SMs, each part at least
  :data:`MIN_PART_STEPS` K steps, M more than one row block): the data-parallel estimate
  of the parts, their K steps dearer by :data:`SPLIT_STEP_FACTOR`, plus
  :data:`ORDERED_PART_COST` for each part after the first. So 1024 x 1280 x 11520 runs 40
  tiles of 128 x 256 in 3 parts (120 units) rather than 80 tiles of 128 x 128 (61% of the
  SMs), 1.35x faster.

192-row tiles (three consumer warpgroups of 64 rows, :data:`TALL_TILINGS`: 128, 160 or 192
wide) are a candidate only where they make one wave at least :data:`TALL_MIN_FILL` full
(:func:`fills_one_wave`), in 2x1 clusters where the rows straddle L2 lines (as the
128-row tiles are), priced at :data:`ROWS_STEP_FACTOR` 1.57 K steps of a 128-row tile of
the same width: 6272 x 512 x K runs 132 of 192 x 128 where 128 x 128 tiles made 196 (the
last 64 in K parts), 1.03-1.23x faster (H100, same runs, RESULTS.md section 6j); 5680 x
640 x 3000 120 of 192 x 160 in 2x1 clusters, 1.26-1.27x the 128 x 160 tiles with 26 past a
wave in parts (106% of cuBLAS against 83%), and 35 problems more at 0.99-1.60x, geometric
mean 1.18x (section 6n).

Where the rows of a K-major operand are not whole 128-byte lines (K x element bytes not a
multiple of 128: K = 2000, 3000, 5000, 6000 in 16-bit elements), every 128-byte box row TMA
fetches straddles two L2 lines, and 2x1 clusters that multicast B (each CTA fetching half of
it) were faster in every measured case (12000 x 1000 x 5000: 129% of cuBLAS against 83%;
1000 x 2000 x 3000 96% against 74%), while on aligned rows they were slower in every one
(2048^3 82% against 92%, 512 x 4096 x 4096 88% against 95%). So the cluster follows the row
alignment, not the tile count; and since the twenty-second session the finer alignment: rows
of whole 32-byte sectors (K = 400, 1200, 2000, 2224, 2400, 4000, 5680, ...) straddle lines
without costing a load a sector more, and ran faster without the cluster in 21 of 22
held-out problems, 1.00-1.81x (:func:`pairs_share_b`). Those straddled loads also bound
the time, so there a K step costs at least its share of a CTA's bytes against a 128 x 256
tile's (:func:`straddled_step_cost`): the narrow tiles, loading the most bytes per product, lose
the edge :data:`STEP_COST` (measured on whole lines) gives them, and 10000 x 1024 x 3000
runs 128 x 256 tiles, 1.17x faster than the 128 x 128 ones the model took before.

After the model's choice, two rules measured on problems of a few row blocks: ping-pong
64 x 256 tiles where M is 65 to 512 and no multiple of 128, the rows are whole 32-byte
sectors and those tiles fill 80-100% of one wave (:func:`on_wide_half_rows`: 1.02-1.43x),
and 2x2 clusters on the CTAs a GPU keeps resident in clusters of 4 where straddled rows of a
problem at least as wide as tall run one round (:func:`in_two_by_two`: 1.03x geometric mean
on an H200, 1.075x on an H100, 22 problems).

Problems whose 128 x 128 tiles fill at most half the SMs keep the rule of
:meth:`~.gemm_config.GemmConfig.ordered_parts` (ping-pong 128 x 128 tiles, K cut into
ordered parts), which the model is not asked about. A caller's options always win: the
candidates are the measured tilings with the caller's fields laid over them, and those the
kernel cannot run (:meth:`~.gemm_config.GemmConfig.check`) are dropped.

The costs are measurements (H100, benchmarks/RESULTS.md section 6d), not a roofline, and
:func:`ranked` lists every candidate's estimate so ``benchmarks/gemm.py --sweep`` can set
them beside measured times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from .residency import resident_ctas


class Tiling(Protocol):
    """What the model reads of a configuration (:class:`~.gemm_config.GemmConfig`, which
    calls the model from ``for_problem``: the model takes the class as an argument rather
    than importing it, so the two modules import one way)."""

    m: int
    n: int
    k: int
    block_m: int
    block_n: int
    block_k: int
    b_layout: str
    schedule: str
    cluster: int
    cluster_n: int
    ctas: int
    stream_k: bool
    stream_k_waves: int
    split_k: int
    tail_split: int
    swap_ab: bool

    @property
    def element_bytes(self) -> int: ...
    @property
    def m_blocks(self) -> int: ...
    @property
    def n_blocks(self) -> int: ...
    @property
    def k_steps(self) -> int: ...
    @property
    def work_units(self) -> int: ...
    @property
    def workers(self) -> int: ...
    @property
    def steps_per_unit(self) -> int: ...
    @property
    def stream_k_dp_rounds(self) -> int: ...
    @property
    def iterations(self) -> int: ...
    @property
    def stream_k_peers(self) -> int: ...
    @property
    def partial_floats(self) -> int: ...
    @property
    def ordered_parts(self) -> int: ...
    @property
    def tail_rounds(self) -> int: ...
    @property
    def tail_tiles(self) -> int: ...
    @property
    def tail_parts_held(self) -> int: ...
    def check(self) -> None: ...


#: Builds a configuration from (m, n, k, **fields): the GemmConfig class.
MakeTiling = Callable[..., Tiling]

#: Time of one K step of a 128-row tile of each width, in K steps of a 128 x 256 tile
#: (H100, same-run ratios of the tilings on problems of equal wave counts: 128 x 192
#: 0.81-0.83 over 3000 x 5000 x 2000, 2048 x 4096 x 2048, 4096 x 2048 x 2048 and 768 x
#: 4096 x 4096; 128 x 128 0.54-0.64 over 2048^3, 1024 x 2048 x 4096, 512 x 4096 x 4096 and
#: 2048 x 4096 x 2048). 128 x 160 0.72, the median of nine pairs 0.67-0.82: against 128 x
#: 256 on 10000 x 1536 x 1024 0.77 and 8192 x 5680 x 2048 0.74, against 128 x 192 on 3000
#: x 1536 x 2048 0.71, 640 x 4096 x 1024 0.72 and 1536 x 1536 x 512 0.75, against 128 x
#: 128 on 16384 x 640 x 8192 0.69, and conv2d's UNet 32x32x640 0.67, 8x16x16x1280 0.72,
#: 4x16x16x1280 0.82. The wider the tile, the more products per byte loaded.
#: 128 x 64 0.45, near its loads' share (24 KB a step against 128 x 128's 32 KB), not its
#: products': conv2d N=1 UNet 64x64x320 3x3, 160 tiles of 128 x 64 in 2 rounds against 64
#: of 128 x 160 in one (45 K steps), ran at 0.49 (H100, same run; 0.31-0.37 on a 10-step
#: 1x1 layer, where fixed costs weigh more).
#: 128 x 320 (:data:`WIDE`) 1.33: 130 tiles of 128 K steps in one wave ran as fast as
#: the 128 x 256 tiles with 28 past a wave in 4 parts, estimated 170.6 (640 x 8192 x 8192),
#: 2048 x 2560 x 4096 and 512 x 10000 x 4096 the same within 3%.
STEP_COST = {320: 1.33, 256: 1.0, 192: 0.81, 160: 0.72, 128: 0.57, 64: 0.45}
#: Time of one K step of a tile of ``block_m`` rows against a 128-row tile of the same width,
#: where it is not ``block_m / 128``: a 192 x 128 K step (three consumer warpgroups) 1.57x
#: a cooperative 128 x 128 one, 5% more than its products (H100, conv2d, same runs of
#: equal K steps: 28x28x512 -> 256 1x1 in 2 rounds of 192-row tiles against 3 of 128-row
#: ones 410 / 432 TFLOP/s, 28x28x128 3x3 in 1 against 2 529 / 415).
ROWS_STEP_FACTOR = {192: 1.57}
#: Bytes one K step of a 128 x 256 tile loads (16-bit A and B tiles of 64 columns): the
#: unit the fix-up's partial tiles are priced in (each SM's loads run at about the same
#: rate whatever they carry, RESULTS.md section 8).
STEP_BYTES = (128 + 256) * 64 * 2
#: Cost of moving one byte of a stream-K partial tile (written by a peer, read by the
#: owner), in 128 x 256 K steps.
FIXUP_COST_PER_BYTE = 1.0 / STEP_BYTES
#: Fewest K steps a tile needs for stream-K to be a candidate: each piece of a cut tile
#: pays a ring fill and an epilogue of its own, and the owner waits for its peers, none
#: of which the model prices. H100, same runs: with 12 K steps (2304 x 4608 x 768) 71% of
#: cuBLAS against 98-102% for plain waves of 128 x 128 tiles; with 32 (640 x 8192 x 2048,
#: 8192 x 640 x 2048) 77.3% and 79.0% against 82.6% and 80.5% in plain waves; with 64 and
#: more it won every time it was estimated clearly cheaper (2048 x 7168 x 4096 93.6-94.8%
#: against 88.9-89.5%, 1536 x 3072 x 4096 79.0% against 69.7%, 2560 x 2560 x 10240).
STREAM_K_MIN_STEPS = 64
#: How much cheaper than the same tiles in plain waves stream-K must be estimated to be:
#: it loses what the model does not see (L2 hits, the owners' waits) where it gains
#: little. 4096^3 (116 of 132 tiles in the last wave, estimated 1% cheaper) ran at 88.9%
#: of cuBLAS with stream-K against 99.5% without; 2048 x 7168 x 4096 (52 of 132, 10%
#: cheaper) 93.6-94.8% against 88.9-89.5%; 2560 x 2560 x 10240 (68 of 132, 21% cheaper)
#: 106.5% against 91.9%.
STREAM_K_MARGIN = 0.05
#: A tile cut into ordered K parts: each K step costs :data:`SPLIT_STEP_FACTOR` times a
#: whole tile's, and each part after the first :data:`ORDERED_PART_COST` K steps of a
#: 128 x 256 tile (scaled by the tile's area: its wait for the part before it and its add
#: into C). Fit to same-run pairs of 128 x 128 tiles in plain waves against 128 x 256 tiles
#: in ordered parts filling as many SMs or more (H100; the estimate of the parts against
#: the time the pair implies, in those units): 512 x 4096 x 4096 and 1024 x 2048 x 4096 in
#: 2 parts 39.6 / 39.7 and 40.2 (the plain waves 9-10% faster), 6272 x 256 x 2304 22.9 /
#: 23.0, conv2d 14x14x256 22.9 / 21.4; 1024 x 1280 x 11520 in 3 parts 74.4 / 75.9 (1.35x
#: faster than 80 tiles of 128 x 128 filling 61% of the SMs), conv2d 4x16x16x1280 74.4 /
#: 73.2; and ResNet 7x7x512's 26 tiles in 5 parts (15 K steps) 1.22x faster than in 4 (18).
SPLIT_STEP_FACTOR = 1.19
ORDERED_PART_COST = 1.5
#: Fewest K steps a part needs for ordered parts to be a candidate of the model: each pays
#: a ring fill and an epilogue the estimate does not see. H100, same runs: parts of 32
#: steps 1.07x (1024 x 1536 x 4096, 128 x 192 tiles in 2 parts against 128 x 128 in plain
#: waves), 64 1.07-1.15x (256 x 6144 x 8192, 768 x 2048 x 8192), 43 and 60 1.32-1.35x
#: (768 x 1536 x 8192, 1024 x 1280 x 11520, 128 x 256 in 3); of 12 and 8 0.88x
#: (1024 x 1536 x 1536, 768 x 2048 x 1000).
MIN_PART_STEPS = 32
#: Fewest K steps a tile needs for the tail split to be a candidate of the model
#: (:func:`in_tail_parts`). H100, same runs, against the default before it: with 16 K steps
#: it won or tied (7000 x 3000 x 1000 in 4 parts 1.03-1.05x, 10000 x 1000 x 1000 1.02x,
#: 1234 x 8192 x 1000 1.03x, 6272 x 512 x 1024 0.97-1.00x, 640 x 8192 x 1000 1.00x); with
#: 12 (2304 x 4608 x 768: 128 x 256 tiles in 2 parts of 6 against 128 x 128 tiles in plain
#: waves) it lost 12-14%: a short tile's epilogue, which the model does not price, is a
#: larger share of a wide tile's time.
TAIL_MIN_STEPS = 16
#: The measured tilings, widest first (ties go to the wider): cooperative 128-row tiles,
#: each with the most ring stages that fit beside its C stage. 128 x 160 (C staged 32
#: columns at a time, 64B swizzle) covers N = 640 in 4 column blocks where 128 x 192
#: leaves the fourth a third full (4096 x 640 x 4096: 1.51x, 8192 x 640 x 2048 1.31x); it
#: was measured with B as N x K in 16-bit types only, and is offered only there.
TILINGS = (
    {"block_n": 256, "stages": 4, "epilogue_n": 128},
    {"block_n": 192, "stages": 5, "epilogue_n": 64},
    {"block_n": 160, "stages": 6, "epilogue_n": 32},
    {"block_n": 128, "stages": 6, "epilogue_n": 0},
)
#: The 192-row tilings (three cooperative consumer warpgroups of 64 rows), widest first, each
#: with the most ring stages that fit beside its C stage (192 x 128: 5 of 40 KiB; 160 and
#: 192 wide: 4), offered only where their tiles make one wave at least
#: :data:`TALL_MIN_FILL` full (:func:`fills_one_wave`): what was measured. Wider than
#: 192 the accumulators do not fit beside three warpgroups (64 x 224 is 112 registers a
#: thread of the 96 the kernel leaves them).
TALL_TILINGS = (
    {"block_m": 192, "block_n": 192, "stages": 4, "epilogue_n": 64},
    {"block_m": 192, "block_n": 160, "stages": 4, "epilogue_n": 32},
    {"block_m": 192, "block_n": 128, "stages": 5, "epilogue_n": 64},
)
#: The tiling wider than wgmma's N (two MMAs of 160 columns a k16 step, 160 accumulators a
#: consumer thread; 3 ring stages of 56 KiB beside two 64-column C stages, so that each of
#: its five stores overlaps the rounding of the next: 8192 x 640 x 1000, 2048 x 2560 x
#: 1000 and 16384 x 296 x 1000 1.01-1.04x one stage, H100, same run): what cuBLAS runs
#: as 320 x 128 tiles on 640 x 8192 x K. Offered only where its tiles make one wave at
#: least :data:`TALL_MIN_FILL` full without a cluster (:func:`fills_one_wave`), no
#: 192-row tiling does, and (on rows that straddle L2 lines) K has at most
#: :data:`WIDE_STRADDLED_MAX_STEPS` steps. H100, same runs, % of cuBLAS against the default
#: before: 640 x 8192 x 1000 (130 tiles) 95.5-98.1 / 71.3-71.7, 512 x 10000 x 1000 86.3-86.6
#: / 73.2-74.7, 2048 x 2560 x 1000 87.7-91.9 / 77.4-77.7, 1024 x 5000 x 2000 95.6-97.1 /
#: 82.3-83.8, 8192 x 640 x 1000 82.1-82.4 / 74.2-76.8, 16384 x 296 x 1000 77.6-80.3 /
#: 73.3-75.3, 8192 x 640 x 14336 87.8-94.3 / 79.1-88.3; 0.99-1.03x on five more (K 2048 to
#: 8192). Lost: against 192 x 192 tiles in one wave (768 x 6144 x 1000 and 4096, 1536 x 3000
#: x 2048: 0.85-0.93x), on straddled rows of 47 K steps against 2x1 clusters (1234 x 4096 x
#: 3000: 0.86-0.87x), in more than one wave (3 stages hide less of a long K: 4096^3 0.70-0.80x,
#: 1234 x 8192 x 2048 0.94x) and in 2x1 clusters (54%).
WIDE = {"block_n": 320, "stages": 3, "epilogue_n": 64, "epilogue_buffers": 2}
#: Most K steps a :data:`WIDE` tiling takes where the operands' rows straddle L2 lines: there
#: the 2x1 clusters the other tilings take halve B's straddled loads, and past this they
#: bound the time (1234 x 4096 x 3000, 47 steps: 0.86x; 1024 x 5000 x 2000, 32: 1.16x).
WIDE_STRADDLED_MAX_STEPS = 32
#: Fewest of the workers one wave of 192-row tiles must fill for the model to offer them.
#: H100 / H200, conv2d's layers as GEMMs, 192 x 128 in one wave against the default's
#: 128-row tiles in the same runs: 6272 x 512 x 1024 (132 tiles) 1.24-1.26x, 25088 x 128 x
#: 1152 (131) 1.20-1.23x, 25088 x 128 x 512 (131) 1.14-1.15x; in two rounds (25088 x 256 x
#: 512, 262 tiles) 0.87x, over a wave (1568 x 2048 x 512, 144) 0.67x, and not measured in
#: a wave partly empty.
TALL_MIN_FILL = 0.9
#: The ping-pong tiling (a caller's ``schedule="pingpong"``, and ordered split-K): each
#: warpgroup its own 128 x 128 tile and 64-column C stage, leaving room for 5 ring stages.
PINGPONG = {"block_n": 128, "stages": 5, "epilogue_n": 64, "schedule": "pingpong"}
#: The 64-row tiling :func:`on_half_rows` takes: cooperative (one consumer warpgroup a
#: 64 x 128 tile), 9 ring stages of 24 KiB beside a 64-column C stage.
HALF_ROWS = {"block_m": 64, "block_n": 128, "stages": 9, "epilogue_n": 64,
             "schedule": "cooperative"}
#: K steps at most of a problem whose too few 128-row tiles give way to plain 64-row ones
#: (the GEMM's :func:`on_half_rows`, conv2d's ``_half_rows``).
HALF_ROWS_SHORT_STEPS = 16
#: The 64-row tiling :func:`on_wide_half_rows` takes: ping-pong (each consumer warpgroup a
#: 64 x 256 tile; in one wave, one tile a CTA), 5 ring stages of 40 KiB beside two
#: 64-column C stages.
WIDE_HALF_ROWS = {"block_m": 64, "block_n": 256, "stages": 5, "epilogue_n": 64,
                  "schedule": "pingpong"}
#: Most rows of a problem :func:`on_wide_half_rows` takes 64-row tiles for (8 row blocks).
WIDE_HALF_ROWS_MAX_M = 512
#: Fewest of the CTAs one wave of :data:`WIDE_HALF_ROWS` tiles must fill.
WIDE_HALF_ROWS_MIN_FILL = 0.8
#: Bytes of an L2 sector: rows that are whole sectors straddle 128-byte lines without
#: costing a load a sector more (:func:`on_wide_half_rows`).
SECTOR_BYTES = 32
#: Fewest K steps of the short problems' 64 x 128 tiles that run in 2x1 clusters
#: (:func:`_half_rows_sharing_b`; at 10 to 12 the clusters were as fast, at 14 to 16
#: faster).
HALF_ROWS_SHARED_MIN_STEPS = 14
#: :func:`in_one_exact_wave`: its tiles at least this share of the CTAs, and none over.
EXACT_WAVE_MIN_FILL = 0.95
#: :func:`in_one_exact_wave`: tile widths, multiples of this from the widest (256) down to
#: :data:`EXACT_WAVE_MIN_WIDTH` (64 x 40 tiles, half that, ran 1024 x 640 x 1280 at 0.50x
#: cuDNN against 0.77x for 64 x 80, H200).
EXACT_WAVE_WIDTH_STEP = 16
EXACT_WAVE_MIN_WIDTH = 80
#: :func:`in_one_exact_wave`: the most K steps a one-wave tiling of 128 / 64 rows was
#: measured to win at (128 x 80 tiles at 30 steps ran 0.88-0.89x the default; 64 x 80 at
#: 30 steps 0.99-1.13x).
EXACT_WAVE_MAX_STEPS = {128: 20, 64: 32}
#: :func:`in_one_exact_wave`: the fewest rows and K steps it was measured on (512 x 1280 x
#: 1280; N=1 64x64x320 -> 640, 5 K steps). A row block or two of a weight-streaming GEMM,
#: or a K of a step or two, is another regime (not measured).
EXACT_WAVE_MIN_M = 512
EXACT_WAVE_MIN_STEPS = 5
#: The 64 x 64 tiling :func:`narrow_half_rows` takes where even 64 x 128 tiles leave most
#: SMs idle: 12 ring stages of 16 KiB beside one 64-column C stage (as many as conv2d's
#: ``MAX_STAGES`` allows; a short problem's whole K is then in flight at once).
QUARTER_TILES = {"block_n": 64, "stages": 12, "epilogue_n": 64}
#: Fewest ring stages a trimmed tiling (:func:`trimmed`) must keep beside its whole C
#: stage: 3 lost on a short K (1234 x 5680 x 2048, 248 wide: 0.90x the 256-wide tiles).
TRIM_MIN_STAGES = 4
#: Most ring stages a trimmed tiling takes (as many as fit up to this).
TRIM_MAX_STAGES = 12
#: L2 fill of the operand loads where the problem streams B (:func:`streams_weights`).
#: H100, same runs: 16 x 8192 x 8192 92.9% -> 94.5% of cuBLAS (92.3% -> 94.2% in another
#: session), 1 x 16384 x 16384 90.8% -> 93.5%, 128 x 8192 x 8192 96.8% -> 97.1% (94.7% ->
#: 96.3%), 64 x 16384 x 4096 98.6% -> 98.2%; where M spans row blocks it was mixed
#: (512 x 4096 x 4096 95.2% -> 94.4%, 1024 x 2048 x 4096 93.4% -> 95.3%).
WEIGHT_STREAM_PROMOTION = 256
#: :func:`sharing_a_in_fours`: CTAs along N that share A's rows, the tile width it takes
#: and the most row blocks of 128 (what was measured).
A_SHARING_CLUSTER = 4
A_SHARING_BLOCK_N = 128
A_SHARING_MAX_ROW_BLOCKS = 2
#: :func:`sharing_a_in_fours`: the fewest column blocks (5 lost: 8 CTAs a row block, 3 idle).
A_SHARING_MIN_COLUMN_BLOCKS = 12
#: :func:`sharing_a_in_fours`: the fewest K steps a work unit (what was measured).
A_SHARING_MIN_STEPS = 16
#: Alignment, in bytes, of the rows TMA reads best: one L2 line.
LINE_BYTES = 128
#: Fields that, given by the caller, say how the work is split: the model adds neither a
#: cluster nor stream-K over them (and, with ``schedule``, no ordered split-K either).
SPLIT_FIELDS = frozenset({"cluster", "cluster_n", "split_k", "split_k_ordered", "stream_k",
                          "stream_k_waves", "tail_split"})
#: The options by which a caller chooses the tiling itself (tile, schedule, ring, cluster,
#: split): no rule after the model's choice overrides them (:func:`refinements`, conv2d's
#: exact wave).
TILING_CHOICES = SPLIT_FIELDS | {"block_m", "block_n", "schedule", "stages", "epilogue_n"}
#: :func:`on_swapped_operands`: problems of fewer rows than this (A's rows are the swapped
#: tile's wgmma N, at most 256).
SWAP_MAX_M = 256
#: :func:`on_swapped_operands`: the most rows of an FP8 problem it swaps (H200, same runs:
#: to 96 rows it won every one of 17, 1.16-1.98x; past 128 it won 136 x 5120 x 2048
#: 1.13-1.43x, 180 x 2000 x 6000 1.19-1.26x and 200 x 3072 x 2224 1.20-1.30x, and lost 160 x
#: 8192 x 1024 0.82x and 250 x 4096 x 4096 0.86-0.87x).
SWAP_MAX_M_FP8 = 128
#: :func:`on_swapped_operands` past :data:`SWAP_MAX_M` rows (:func:`_swapped_in_column_blocks`):
#: the rows it swaps below, the fewest of C's rows a C stage may hold (a tile of 232 rows
#: staged 8 at a time ran 0.64x), and the least share of padded rows it must save.
SWAP_MAX_M_BLOCKS = 512
SWAP_MIN_STAGE_ROWS = 32
SWAP_MIN_PADDING_SAVED = 0.08
#: :func:`on_swapped_operands`: the fewest columns (N) it was measured on (24 x 1024 x 4096,
#: 1.24-1.27x); a narrow N is few swapped tiles of mostly padding rows.
SWAP_MIN_N = 1024
#: :func:`on_swapped_operands`: the swapped tile's rows of C^T (N), cooperative: two
#: consumer warpgroups of 64 (64-row tiles lost where they made more than a wave: 16 x 8192
#: x 2048 0.90x, 100 x 7000 x 2000 0.91x, 1 x 16384 x 16384 0.97x the 128-row ones).
SWAP_BLOCK_M = 128


@dataclass(frozen=True)
class Estimate:
    """One candidate tiling and its estimated time (K steps of a 128 x 256 tile)."""

    config: Tiling
    cost: float
    #: How the cost was made up, for a person reading ``ranked``.
    why: str


def rows_straddle_lines(cfg: Tiling) -> bool:
    """Whether the pieces of rows the operand loads straddle 128-byte L2 lines: a K-major
    row (A's, and B's as N x K; K long) is read ``block_k`` elements at a time, so its
    pieces sit inside lines where the row pitch is a multiple of one piece (at most a
    line: conv2d's 32- and 64-byte K blocks of 96 or 160 channels do); a K x N B row (N
    long) in whole lines."""
    piece = min(cfg.block_k * cfg.element_bytes, LINE_BYTES)
    row = cfg.k * cfg.element_bytes
    if row % piece:
        return True
    return cfg.b_layout != "nk" and cfg.n * cfg.element_bytes % LINE_BYTES != 0


def pairs_share_b(cfg: Tiling) -> bool:
    """Whether the model's tiles run in 2x1 clusters multicasting B: where the rows straddle
    128-byte L2 lines (:func:`rows_straddle_lines`) and, where the loads read whole 128-byte
    pieces of K-major rows (16-bit K blocks of 64, FP8 ones of 128), 32-byte sectors too.
    Rows of whole sectors that straddle lines ran as fast or faster without the cluster
    (H200, same runs, two repetitions, time with / without: 6000 x 3000 x 2000 1.01-1.08,
    2048 x 4096 x 2400 1.03-1.04, 3000 x 3000 x 4000 1.01-1.04, 5000 x 5000 x 1200
    1.01-1.03, 4096 x 4096 x 1200 1.02, 8192 x 2048 x 1200 1.01, 1500 x 4096 x 4000
    1.00-1.02, 4096 x 4096 x 2000 0.98-1.02; e4m3: 1000 x 2000 x 3008 1.12-1.15, 2048 x
    2048 x 2400 1.08, 2048 x 8192 x 2080 1.01-1.02, 8192 x 1024 x 4064 0.99-1.01, 4096 x
    4096 x 3008 0.96-1.01), while rows straddling sectors kept their clusters' lead (4096 x
    4096 x 3000 0.81-0.84, 2048 x 4096 x 1000 0.83-0.85, e4m3 3000 x 3000 x 2000 0.86): a
    row piece that straddles sectors costs its load a sector more, and the multicast halves
    those loads. Narrower pieces (conv2d's 32- and 64-byte K blocks) and K x N B rows keep
    the line rule they were measured with. Held out, the 16-bit defaults before / after on
    35 problems whose default it changes (the cluster dropped, 2x2 clusters of
    :func:`in_two_by_two` with it, and the tiles the model or the later rules then take):
    1.00-1.81x, one repetition of 1280 x 960 x 2224 0.89 and its other 1.07
    (benchmarks/RESULTS.md section 6v)."""
    if not rows_straddle_lines(cfg):
        return False
    whole_line_pieces = cfg.block_k * cfg.element_bytes >= LINE_BYTES
    if not whole_line_pieces or cfg.b_layout != "nk":
        return True
    return cfg.k * cfg.element_bytes % SECTOR_BYTES != 0


def step_cost(cfg: Tiling) -> float:
    """One K step of ``cfg``'s tile, in K steps of a 128 x 256 tile (by area where the
    width was not measured), at least :func:`straddled_step_cost` where the operands'
    rows straddle L2 lines."""
    rows = ROWS_STEP_FACTOR.get(cfg.block_m, cfg.block_m / 128)
    cost = STEP_COST.get(cfg.block_n, cfg.block_n / 256) * rows
    if rows_straddle_lines(cfg):
        cost = max(cost, straddled_step_cost(cfg))
    return cost


def straddled_step_cost(cfg: Tiling) -> float:
    """A K step's share of the bytes a CTA loads, against a 128 x 256 tile's in the same
    cluster shape (A's rows shared by ``cluster_n`` CTAs, B's by ``cluster``): where the
    rows straddle L2 lines every row costs two lines' requests, the loads bound the time,
    and a narrow tile, loading the most bytes per product, loses the edge its
    :data:`STEP_COST` (measured on whole lines) gives it. In 2x1 clusters a 128 x 128 K
    step costs 0.75 of a 128 x 256 one (24 KB against 32 KB), not 0.57.

    Fit to same-run sweeps of twelve straddled problems (H100), then checked on sixteen
    it changes, new default against old in the same run (TFLOP/s ratios, geometric mean
    1.07): 128 x 256 tiles for 128 x 128 on 10000 x 1024 x 3000 1.17-1.21, 1000 x 10000
    x 3000 1.16, 1234 x 8192 x 1000 1.15, 10000 x 1000 x 1000 1.14-1.17, 1800 x 7000 x
    1200 1.09-1.12, 2048 x 5000 x 2000 1.04, 10000 x 1024 x 1200 1.03, 1234 x 10000 x 1200
    1.02, 5000 x 2048 x 296 1.01, 5680 x 1024 x 3504 0.99, 5680 x 1000 x 2000 0.97; for
    128 x 192 on 5680 x 5680 x 296 1.13, 3000 x 5680 x 296 1.09, 3000 x 5680 x 2000 1.02;
    128 x 256 in 2 ordered parts for 128 x 128 on 1024 x 2000 x 4000 1.07 and 2048 x 1000
    x 4000 1.06. Pricing partial rounds by their share instead (the other reading of
    these sweeps) lost 12-21% where 128 x 192 tiles or ordered parts were right (3000^3,
    2000 x 3000 x 4000, 640 x 3000 x 4000)."""
    rows = cfg.block_m / cfg.cluster_n + cfg.block_n / cfg.cluster
    return rows / (128 / cfg.cluster_n + 256 / cfg.cluster)


def ordered_adds(cfg: Tiling, parts: int) -> float:
    """What the later ``parts - 1`` ordered K parts of a tile cost beyond their K steps
    (:data:`ORDERED_PART_COST` each, scaled by the tile's area)."""
    return (parts - 1) * ORDERED_PART_COST * cfg.block_m * cfg.block_n / (128 * 256)


def estimate(cfg: Tiling) -> Estimate:
    """The estimated time of ``cfg`` (data-parallel, in K parts, with the tiles left over
    in parts, or stream-K)."""
    step = step_cost(cfg)
    if cfg.tail_split > 1:
        whole = cfg.tail_rounds * cfg.k_steps * step
        part = math.ceil(cfg.k_steps / cfg.tail_split) * step * SPLIT_STEP_FACTOR
        adds = ordered_adds(cfg, cfg.tail_split)
        return Estimate(cfg, whole + part + adds,
                        f"{cfg.tail_rounds} rounds x {cfg.k_steps} steps x {step:.2f}, then "
                        f"{cfg.tail_tiles} tiles in {cfg.tail_split} parts: "
                        f"{part:.1f} + later K parts {adds:.1f}")
    if not cfg.stream_k:
        rounds = math.ceil(cfg.work_units / cfg.workers)
        adds = 0.0
        if cfg.split_k > 1:
            step *= SPLIT_STEP_FACTOR
            adds = ordered_adds(cfg, cfg.split_k)
        why = f"{rounds} rounds x {cfg.steps_per_unit} steps x {step:.2f}"
        if adds:
            why += f" + {cfg.split_k - 1} later K part(s) {adds:.1f}"
        return Estimate(cfg, rounds * cfg.steps_per_unit * step + adds, why)
    dp_rounds = cfg.stream_k_dp_rounds
    run = cfg.iterations / cfg.workers
    pieces = min(cfg.k_steps / run + 1, cfg.stream_k_peers + 1) if run else 1
    fixup = 2 * (pieces - 1) * cfg.partial_floats * 4 * FIXUP_COST_PER_BYTE
    cost = (dp_rounds * cfg.k_steps + run) * step + fixup
    return Estimate(cfg, cost, f"stream-K over {cfg.stream_k_waves} wave(s): {dp_rounds} "
                               f"rounds x {cfg.k_steps} steps + a run of {run:.1f}, x "
                               f"{step:.2f}; fix-up {fixup:.1f} ({pieces:.1f} pieces a tile)")


def has_partial_wave(cfg: Tiling) -> bool:
    """Whether ``cfg``'s data-parallel tiles fill at least one wave and leave a partial
    one: what stream-K shares out."""
    return cfg.work_units > cfg.workers and cfg.work_units % cfg.workers > 0


def stream_k_pays(cfg: Tiling) -> bool:
    """Whether stream-K is a candidate for ``cfg``'s tiles: at least
    :data:`STREAM_K_MIN_STEPS` K steps a tile, a partial last wave, and an estimate
    :data:`STREAM_K_MARGIN` cheaper than the plain waves."""
    if cfg.k_steps < STREAM_K_MIN_STEPS or not has_partial_wave(cfg):
        return False
    streamed = replace(cfg, stream_k=True)
    return estimate(streamed).cost <= (1 - STREAM_K_MARGIN) * estimate(cfg).cost


def sixteen_bit_nk(cfg: Tiling) -> bool:
    """Whether ``cfg`` has 16-bit inputs with B as N x K: the operands every rule after the
    wave model (and the 192-row, 320-wide and 160-wide candidates) was measured on."""
    return cfg.element_bytes == 2 and cfg.b_layout == "nk"


def fills_one_wave(cfg: Tiling) -> bool:
    """Whether ``cfg``'s 192-row (or :data:`WIDE`) tiles run in one wave at least
    :data:`TALL_MIN_FILL` full (16-bit inputs, B as N x K: what was measured)."""
    return (sixteen_bit_nk(cfg)
            and TALL_MIN_FILL * cfg.workers <= cfg.work_units <= cfg.workers)


def measured_width(cfg: Tiling) -> bool:
    """Whether the model may offer ``cfg``'s tile width: 128 x 160 (no multiple of 64) was
    measured with B as N x K in 16-bit types only (:data:`TILINGS`)."""
    return cfg.block_n % 64 == 0 or sixteen_bit_nk(cfg)


def in_ordered_parts(cfg: Tiling) -> Tiling | None:
    """``cfg``'s tiles with K cut into ordered parts where they fill at most half the
    SMs (:meth:`~.gemm_config.GemmConfig.ordered_parts`) and each part keeps at least
    :data:`MIN_PART_STEPS` K steps, else None: what a tiling too wide for the problem
    offers against narrower tiles in plain waves (1024 x 1280 x 11520: 40 tiles of 128 x
    256 in 3 parts, 1.34-1.35x the 80 tiles of 128 x 128). Not where M is one row block:
    there B's bytes bound the time, and more busy SMs do not read them faster (64 x 11520
    x 4096 in 2 parts of 128 x 192 tiles: 0.97x)."""
    parts = cfg.ordered_parts
    if parts == 1 or streams_weights(cfg):
        return None
    split = replace(cfg, split_k=parts, split_k_ordered=True)
    return split if split.steps_per_unit >= MIN_PART_STEPS else None


def in_tail_parts(cfg: Tiling) -> Tiling | None:
    """``cfg``'s tiles with those past the last full wave cut into ordered K parts
    (``tail_split``), else None (fewer than :data:`TAIL_MIN_STEPS` K steps, no full wave,
    none left over, or too many left over for two parts each). The parts are as many as
    the workers hold, at most :data:`~.gemm_config.MAX_ORDERED_SPLIT`, each at least
    :data:`~.gemm_config.PART_STEPS_FLOOR` K steps
    (:attr:`~.gemm_config.GemmConfig.tail_parts_held`); of those, the cheapest estimate
    (each later part costs :data:`ORDERED_PART_COST`)."""
    if cfg.schedule != "cooperative" or cfg.split_k != 1 or cfg.stream_k:
        return None
    if cfg.k_steps < TAIL_MIN_STEPS or not has_partial_wave(cfg):
        return None
    most = cfg.tail_parts_held
    if most < 2:
        return None
    return min((replace(cfg, tail_split=parts) for parts in range(2, most + 1)),
               key=lambda split: estimate(split).cost)


def candidates(make: MakeTiling, m: int, n: int, k: int, options: dict) -> list[Tiling]:
    """The measured tilings, with the caller's options over them, that the kernel runs:
    each data-parallel, with the tiles past its last full wave in ordered K parts (else
    with stream-K where that is clearly cheaper), and in ordered K parts where its tiles
    fill at most half the SMs; in 2x1 clusters where the operands'
    rows straddle L2 lines (unless the caller chose how the work is split)."""
    free = not (SPLIT_FIELDS & set(options))
    found: list[Tiling] = []
    tilings = ((PINGPONG,) if options.get("schedule") == "pingpong"
               else (WIDE, *TILINGS, *TALL_TILINGS))
    for tiling in tilings:
        plain = make(m, n, k, **{**tiling, **options})
        if not measured_width(plain):
            continue
        if tiling is WIDE:
            # Plain and one wave, or not at all.
            if (free and plain.block_n == WIDE["block_n"] and fills_one_wave(plain)
                    and (plain.k_steps <= WIDE_STRADDLED_MAX_STEPS
                         or not rows_straddle_lines(plain)) and _runs(plain)):
                found.append(plain)
            continue
        cfg = plain
        if free and pairs_share_b(cfg) and cfg.m_blocks >= 2 and cfg.ctas % 2 == 0:
            cfg = replace(cfg, cluster=2)
        if tiling in TALL_TILINGS:
            # One wave, or not at all (:data:`TALL_MIN_FILL`).
            if (free and cfg.block_m == 192 and fills_one_wave(cfg) and _runs(cfg)
                    and cfg not in found):
                found.append(cfg)
            continue
        variants = [cfg]
        tail = in_tail_parts(cfg) if free else None
        if tail is not None:
            variants.append(tail)
        elif (free and cfg.schedule == "cooperative" and cfg.cluster_n == 1
                and stream_k_pays(cfg)):
            variants.append(replace(cfg, stream_k=True))
        parts = in_ordered_parts(plain) if free and plain.schedule == "cooperative" else None
        if parts is not None:
            variants.append(parts)
        for variant in variants:
            if _runs(variant) and variant not in found:
                found.append(variant)
    if any(cfg.block_m == 192 for cfg in found):
        # 192-row tiles filling a wave ran faster than the wide ones in every pair.
        found = [cfg for cfg in found if cfg.block_n != WIDE["block_n"]]
    if free and any(cfg.tail_split > 1 for cfg in found):
        # Where a tiling's tiles left over can be cut in parts, stream-K is no candidate
        # for any tiling: it measured slower than the tail split on every problem both
        # were run on (the module docstring's pairs).
        found = [cfg for cfg in found if not cfg.stream_k]
    return found


def ranked(make: MakeTiling, m: int, n: int, k: int, **options) -> list[Estimate]:
    """Every candidate of :func:`candidates` with its estimate, cheapest first (a stable
    sort: equal costs keep the wider tile first). :data:`WIDE` tiles only where they are
    cheaper than every other candidate as :func:`choose` would run it (trimmed): 8192 x
    600 x 4096 keeps 256 tiles of 128 x 152 (76.0) over 128 of 128 x 320 (80.0)."""
    found = candidates(make, m, n, k, options)
    others = [estimate(trimmed(cfg)).cost for cfg in found if cfg.block_n != WIDE["block_n"]]
    return sorted((estimate(cfg) for cfg in found
                   if cfg.block_n != WIDE["block_n"] or all(estimate(cfg).cost < cost
                                                            for cost in others)),
                  key=lambda e: e.cost)


def choose(make: MakeTiling, m: int, n: int, k: int, **options) -> Tiling:
    """The default configuration of ``GemmConfig.for_problem``: ordered split-K on
    ping-pong 128 x 128 tiles where those tiles fill at most half the SMs, else the
    cheapest candidate of :func:`ranked` (the caller's options laid over the default
    tiling when none of the candidates runs, so that ``check`` names what is wrong); 128 x
    128 tiles as 64 x 128 ones where M is at most 64 or a short problem's tiles are few
    (:func:`on_half_rows`, unless the caller chose the tile, schedule, ring or split), and
    the other :func:`refinements`; with 256-byte L2 fills where M is one row block
    (:func:`streams_weights`)."""
    if options.get("swap_ab") and not TILING_CHOICES & set(options):
        # The caller asked for C^T = B A^T and nothing else: the swapped tiling of the
        # problem (where the kernel runs one).
        plain = make(m, n, k, **{**options, "swap_ab": False})
        forced = swapped(plain)
        if forced is not None:
            return forced
    chosen = modelled(make, m, n, k, **options)
    for _, refined in refinements(chosen, options):
        chosen = refined
    if "l2_promotion" not in options and streams_weights(chosen):
        chosen = replace(chosen, l2_promotion=WEIGHT_STREAM_PROMOTION)
    return chosen


def refinements(chosen: Tiling, options: dict) -> list[tuple[str, Tiling]]:
    """The rules that change ``chosen`` after the model picked it (none where the caller
    chose the tile, schedule, ring or split), each with the configuration it leaves:
    C^T = B A^T for few rows (:func:`on_swapped_operands`), 64-row tiles
    (:func:`on_half_rows`), the trim (:func:`trimmed`), 64 x 256 tiles for a
    few row blocks (:func:`on_wide_half_rows`), 2x2 clusters (:func:`in_two_by_two`), one
    wave of tiles dividing N exactly (:func:`in_one_exact_wave`), A shared in clusters of
    4 (:func:`sharing_a_in_fours`).
    ``benchmarks/gemm.py --explain`` prints them. The caller's ``swap_ab`` decides the
    swap (:func:`on_swapped_operands` is skipped; with True, none applies: they were
    measured on A @ B^T's tiles)."""
    if TILING_CHOICES & set(options) or options.get("swap_ab"):
        return []
    steps = []
    for rule in REFINEMENTS:
        if rule is on_swapped_operands and "swap_ab" in options:
            continue
        refined = rule(chosen)
        if refined != chosen:
            steps.append((rule.__name__, refined))
            chosen = refined
        if chosen.swap_ab:
            # The rules after it were measured on A @ B^T's tiles.
            break
    return steps


def modelled(make: MakeTiling, m: int, n: int, k: int, **options) -> Tiling:
    """The model's choice before :func:`refinements`: ordered split-K on ping-pong 128 x
    128 tiles where those tiles fill at most half the SMs, else the cheapest candidate of
    :func:`ranked` (the caller's options over the default tiling where none runs)."""
    wide = make(m, n, k, **options)
    narrow = PINGPONG if wide.schedule == "pingpong" else TILINGS[-1]
    split = (1 if (SPLIT_FIELDS | {"schedule"}) & set(options) else
             make(m, n, k, **{**options, **narrow}).ordered_parts)
    if split > 1:
        chosen = make(m, n, k, **{**PINGPONG, "split_k": split, "split_k_ordered": True,
                                  **options})
    else:
        best = ranked(make, m, n, k, **options)
        chosen = best[0].config if best else wide
    return chosen


def trimmed(cfg: Tiling) -> Tiling:
    """``cfg``'s tiles narrowed to the fewest columns that keep its column blocks, where N
    leaves the last one partly empty: N = 296 in three blocks of 112 rather than 128 (2x1
    clusters), 600 in four of 152 rather than 160, or three of 208 rather than 256. The tile
    count, the waves and the cluster stay; every K step loads and multiplies fewer padded
    columns. The width is a multiple of 8 (wgmma N), of 16 in 2x1 clusters (each CTA's half
    of B whole 8-row groups); one no multiple of 32 is staged whole in C (unswizzled,
    :func:`~.epilogue.c_stage_layout`), and the ring keeps as many stages as fit, at least
    :data:`TRIM_MIN_STAGES`. Cooperative 128-row tiles of 16-bit inputs, B as N x K (what
    was measured). H100, same runs, % of cuBLAS trimmed / untrimmed: 5000 x 600 x 3000 75.0
    / 57.3 (208 / 256 wide, 2x1), 8192 x 200 x 4096 93.7-95.6 / 71.9 (104 / 128), 4096 x 296
    x 4096 99.2 / 84.9 (152 / 160, 2 ordered parts), 4096 x 600 x 4096 97.0 / 95.4, 6000 x
    712 x 2048 96.0 / 89.9 (184 / 192, 4 stages), 2560 x 2560 x 10240 100.6 / 98.6 (184 /
    192, tail in 8 parts), 3000 x 1096 x 4096 98.5 / 90.3 (224 / 256, C in 32-column
    stages), 8192 x 328 x 8192 93.9 / 49.0 (168 / 256), 5000 x 296 x 4000 67.1 / 61-63 (112
    / 128, 2x1; 104 without the cluster 73.7-73.8). Not taken where 3 stages would be left:
    1234 x 5680 x 2048 82.9 / 91.9 (248 / 256)."""
    if (cfg.block_m != 128 or cfg.schedule != "cooperative" or cfg.block_n < 128
            or not sixteen_bit_nk(cfg)):
        return cfg
    step = 8 * cfg.cluster
    width = math.ceil(cfg.n / cfg.n_blocks / step) * step
    if width >= cfg.block_n:
        return cfg
    stage = c_stage_widths(width)[-1]
    narrow = replace(cfg, block_n=width, epilogue_n=0 if stage == width else stage)
    staged = _most_stages(narrow)
    return staged if staged is not None else cfg


def in_two_by_two(cfg: Tiling) -> Tiling:
    """``cfg``'s 2x1 clusters as 2x2 ones (each CTA then loads half of A's rows and half of
    B's a K step, where a 2x1 cluster loads all of A's: 128 x 128 tiles 128 rows against
    192) on as many CTAs as a GPU of ``cfg.ctas`` SMs keeps resident in clusters of 4
    (:func:`.residency.resident_ctas`: 120 of 132, and not where the count was not
    measured; a grid of 33 such clusters runs 3 after the others, 10000 x 1000 x 1000 59 us
    against 39 us for 2x1 clusters on 132 CTAs), where the operands' rows straddle L2 lines, the
    problem is at least as wide as it is tall (column blocks at least the row blocks), and
    both run their tiles in one round. Cooperative tiles of 128 or 192 rows of 16-bit
    inputs with B as N x K (what was measured; the 64-row tiles of
    :func:`_half_rows_sharing_b` keep their 2x1 clusters).

    H200, same runs, 2x2 / 2x1 time: 600 x 2224 x 3000 0.76-0.86, 600 x 5680 x 3000 0.84,
    384 x 5680 x 5680 0.85-0.89, 256 x 5000 x 3000 0.87-0.89, 500 x 3000 x 3000 0.88,
    384 x 3072 x 1000 0.91-0.96, 700 x 5000 x 1112 0.96-0.99, and 0.98-1.05 (as fast, within
    the runs' noise) on nine more: 1200 x 2224 x 4000, 1200 x 3000 x 1000 and 4000, 900 x
    3336 x 4000, 500 x 7000 x 5680, 1000 x 2224 x 2000, 384 x 11520 x 1112, 300 x 11520 x
    5680, 777 x 3336 x 1112. Taller problems lost (1536 x 1024 x 2000 1.035, 2500 x 600 x
    3000 1.05: 12 and 20 row blocks on 8 and 5 column blocks), so they keep 2x1."""
    if (cfg.cluster, cfg.cluster_n) != (2, 1) or cfg.schedule != "cooperative":
        return cfg
    if cfg.block_m < 128:
        return cfg
    if cfg.split_k != 1 or cfg.stream_k or cfg.tail_split != 1 or cfg.work_units > cfg.workers:
        return cfg
    if not sixteen_bit_nk(cfg) or not rows_straddle_lines(cfg):
        return cfg
    if cfg.n_blocks < cfg.m_blocks:
        return cfg
    square = _in_resident_clusters(cfg, cluster=2, cluster_n=2)
    return square if square is not None else cfg


def _in_resident_clusters(cfg: Tiling, cluster: int, cluster_n: int) -> Tiling | None:
    """``cfg`` in ``cluster`` x ``cluster_n`` clusters on the CTAs the GPU keeps resident
    in clusters of that size (:func:`.residency.resident_ctas`), where that count was
    measured, the kernel runs it and its work units still take one round; else None (the
    2x2 and 1x4 rules, :func:`in_two_by_two` and :func:`sharing_a_in_fours`)."""
    resident = resident_ctas(cfg.ctas, cluster * cluster_n)
    if resident is None:
        return None
    clustered = replace(cfg, cluster=cluster, cluster_n=cluster_n, ctas=resident)
    if clustered.work_units > clustered.workers or not _runs(clustered):
        return None
    return clustered


def on_wide_half_rows(cfg: Tiling) -> Tiling:
    """``cfg`` as 64 x 256 ping-pong tiles without a cluster (:data:`WIDE_HALF_ROWS`) where
    M is at most :data:`WIDE_HALF_ROWS_MAX_M` and no multiple of 128, those tiles make one
    wave at least
    :data:`WIDE_HALF_ROWS_MIN_FILL` full, and the operands' rows are whole 32-byte sectors
    (16-bit inputs, B as N x K: what was measured). A few row blocks of 128 leave the SMs
    fewer, larger tiles (300 x 5680: 3 x 30 of 128 x 192, a quarter of them rows past M, in
    2x2 clusters of 120 CTAs) where 64-row ones put one 64 x 256 tile on almost every SM.

    H200, same runs, time of the default / of 64 x 256 tiles: 300 x 6400 x 5680 1.40,
    350 x 5000 x 2000 1.40, 300 x 5680 x 2224 1.15-1.30, 300 x 6400 x 1024 1.18, 333 x 4440
    x 2224 1.17, 200 x 8192 x 2224 1.09, 400 x 4608 x 2224 1.08, 500 x 4096 x 4000 1.08,
    300 x 5680 x 10000 1.05, 250 x 7000 x 4000 1.03, 350 x 5000 x 8192 1.02, 250 x 7000 x
    2048 0.99. Lost: rows that straddle 32-byte sectors (K = 1000, 1112, 3000: 0.81-0.97,
    each 128-byte row piece one sector more, and a 64-row tile loads the most bytes per
    product), M of 600 and more (600 x 3200 x 2224 0.87, 700 x 2816 x 1024 0.91, 600 x 3200
    x 8192 0.89: ten or more row blocks re-read B), and one wave half full (296 x 10000 x
    5680's 200 tiles in two rounds, 256 x 5000 x 3000's 80 tiles).

    Checked on 24 problems it changed that were not in the list above (same runs, best of
    two repetitions): where M is no multiple of 128, 300 x 5680 x 16384 1.43, 400 x 4096
    x 400 1.39, 200 x 7000 x 16384 1.08, 300 x 5680 x 3072 1.08, 500 x 4096 x 16384 1.04,
    100 x 16384 x 1024 1.03, 400 x 4096 x 128 1.01, 200 x 8192 x 12000 0.92 (two ordered
    parts of 128 x 256 before), 100 x 16384 x 128 0.93 (two K steps); where it is one (no
    rows past M in 128-row tiles) 0.94-1.36, six of fifteen 3-6% slower (256 x 8192 x 3072
    0.94, 256 x 8192 x 256 0.95, 512 x 4096 x 5680 0.95), so those keep 128-row tiles."""
    if cfg.block_m != 128 or not sixteen_bit_nk(cfg):
        return cfg
    if not 64 < cfg.m <= WIDE_HALF_ROWS_MAX_M or cfg.m % 128 == 0:
        return cfg
    if cfg.k * cfg.element_bytes % SECTOR_BYTES:
        return cfg
    half = replace(cfg, **WIDE_HALF_ROWS, cluster=1, cluster_n=1, split_k=1,
                   split_k_ordered=False, stream_k=False, tail_split=1)
    if not WIDE_HALF_ROWS_MIN_FILL * half.ctas <= half.num_tiles <= half.ctas:
        return cfg
    return half if _runs(half) else cfg


def in_one_exact_wave(cfg: Tiling) -> Tiling:
    """``cfg`` as cooperative tiles that divide N exactly and make one wave, at least
    :data:`EXACT_WAVE_MIN_FILL` of the CTAs with none over: 128 rows where some width
    does, else 64, the widest multiple of :data:`EXACT_WAVE_WIDTH_STEP` dividing N (at
    least :data:`EXACT_WAVE_MIN_WIDTH`), of :data:`EXACT_WAVE_MIN_STEPS` to
    :data:`EXACT_WAVE_MAX_STEPS` K steps and at least :data:`EXACT_WAVE_MIN_M` rows.
    Where ``cfg``'s own tiles already make such a wave (no split) it is kept, and so are
    tiles in clusters (not measured).

    A problem of a few hundred to two thousand rows and a few hundred columns has too few
    128 x 128 tiles for the SMs; the alternatives each pay: K cut into ordered parts waits
    on the part before and adds its partial sums, and a partial wave idles SMs. Tiles as
    narrow as N / 8 put one on every SM with the whole K each (cuBLAS takes the same
    tiles: 80 x 64 and 80 x 128 on SD's 1x1 layers). H200, conv2d 1x1 (the GEMM of X and
    the filter: 16-bit, B as N x K), same runs, x cuDNN, this / the rule before, two runs:
    N=1 32x32x1280 -> 640 (1024 x 640 x 1280, 20 K steps, 128 tiles of 64 x 80 against 32
    of 128 x 160 in 4 parts) 0.77 / 0.59, 32x32x640 -> 640 1.18-1.19 / 1.03, 32x32x960
    -> 640 0.93-0.94 / 0.82, 32x32x640 -> 1280 (128 x 80) 1.17-1.18 / 0.92; N=2
    32x32x1280 -> 640 0.96-1.12 / 0.84, 32x32x640 -> 640 1.15-1.17 / 0.91, 16x16x1280
    -> 1280 (64 x 80) 0.81-0.82 / 0.77, 16x16x1920 -> 1280 (30 steps) 0.73-0.74 / 0.65,
    32x32x640 -> 1280 (128 x 160) 1.07-1.09 / 0.96, 16x16x640 -> 1280 1.20-1.21 / 0.99-1.01;
    N=4 32x32x640 -> 640 1.07-1.09 / 0.94-0.96, 16x16x1280 -> 1280 1.10-1.12 / 0.84-0.86,
    32x32x960 -> 640 1.04-1.05 / 0.92, 16x16x640 -> 1280 1.14-1.16 / 0.91-0.92; N=8
    8x8x1280 -> 1280 0.82 / 0.78, 16x16x640 -> 1280 1.08-1.10 / 0.96. Lost: N=2
    32x32x960 -> 640 (128 x 80, 15 steps) 0.81-0.84 / 0.85-0.87; at 30 K steps 128 x 80
    tiles (N=2 32x32x1920 -> 640, N=4 16x16x1920 -> 1280: 0.67 / 0.74-0.76) are left out
    by the step bound, and N=1 32x32x1920 -> 640 (64 x 80, 0.69-0.70 / 0.69-0.70) gains
    nothing. The GEMMs of the same shapes (H200, same run, time before / after, two runs):
    1024 x 640 x 1280 1.13-1.18 (ping-pong 128 x 128 in 3 parts before), 2048 x 640 x
    1280 1.12-1.14, 1024 x 1280 x 1280 1.32-1.33, 2048 x 640 x 640 1.25, 512 x 1280 x 1280
    1.11, 1024 x 1280 x 640 1.29-1.41, 1024 x 640 x 960 1.13-1.14, 1024 x 640 x 640
    0.98-1.00; held out (the rule written, then measured): 2048 x 512 x 1280 (64 x 128
    against 128 x 128 in 2 ordered parts) 1.19-1.33, 2048 x 512 x 2048 1.16-1.17, 1000 x
    1024 x 1280 1.07-1.17, 4096 x 256 x 1536 1.23-1.25, 512 x 1536 x 1280 (64 x 96)
    1.15-1.17, 960 x 1536 x 1280 (128 x 96) 1.12-1.17, 512 x 3072 x 1024 1.09-1.16, and
    2000 x 640 x 960 (128 x 80, 15 K steps, as conv2d's N=2 32x32x960 -> 640) 0.90-1.01.
    Cooperative 16-bit tiles with B as N x K (what was measured)."""
    if not sixteen_bit_nk(cfg) or cfg.cluster_size > 1 or cfg.m < EXACT_WAVE_MIN_M:
        return cfg
    if cfg.k_steps < EXACT_WAVE_MIN_STEPS:
        return cfg
    if (cfg.split_k == 1 and not cfg.stream_k
            and EXACT_WAVE_MIN_FILL * cfg.ctas <= cfg.num_tiles <= cfg.ctas):
        return cfg
    wave = exact_wave(cfg)
    if wave is None or cfg.k_steps > EXACT_WAVE_MAX_STEPS[wave.block_m]:
        return cfg
    return wave


def exact_wave(cfg: Tiling) -> Tiling | None:
    """The one-wave tiling of :func:`in_one_exact_wave` for ``cfg``'s problem, whatever
    its K steps, rows, operands or tiles (the sweeps' candidate): cooperative tiles of
    128 rows where a width does, else 64, the widest multiple of
    :data:`EXACT_WAVE_WIDTH_STEP` (at least :data:`EXACT_WAVE_MIN_WIDTH`) dividing N whose
    tiles fill :data:`EXACT_WAVE_MIN_FILL` to all of ``cfg.ctas``, with the widest C stage
    and as many ring stages as fit (at least :data:`TRIM_MIN_STAGES`); None where no
    width does."""
    for rows in EXACT_WAVE_MAX_STEPS:  # 128 rows, then 64
        row_blocks = math.ceil(cfg.m / rows)
        widest = min(cfg.n, 256) // EXACT_WAVE_WIDTH_STEP * EXACT_WAVE_WIDTH_STEP
        for width in range(widest, EXACT_WAVE_MIN_WIDTH - 1, -EXACT_WAVE_WIDTH_STEP):
            tiles = row_blocks * (cfg.n // width)
            if cfg.n % width or not EXACT_WAVE_MIN_FILL * cfg.ctas <= tiles <= cfg.ctas:
                continue
            stage = c_stage_widths(width)[0]
            wave = replace(cfg, block_m=rows, block_n=width, schedule="cooperative",
                           epilogue_n=0 if stage == width else stage, cluster=1,
                           cluster_n=1, split_k=1, split_k_ordered=False, stream_k=False,
                           tail_split=1)
            return _most_stages(wave)
    return None


def _most_stages(cfg: Tiling) -> Tiling | None:
    """``cfg`` with the most ring stages the kernel runs it with, from
    :data:`TRIM_MIN_STAGES` to :data:`TRIM_MAX_STAGES` (a tile reshaped by
    :func:`trimmed` or :func:`exact_wave`); None where not even the fewest fit."""
    fitting = [s for s in range(TRIM_MIN_STAGES, TRIM_MAX_STAGES + 1)
               if _runs(replace(cfg, stages=s))]
    return replace(cfg, stages=fitting[-1]) if fitting else None


def c_stage_widths(block_n: int) -> list[int]:
    """The C stage widths a tile ``block_n`` wide may take, widest first (the rule
    :meth:`~.gemm_config.GemmConfig.check` names): whole 64-column atoms dividing it (128B
    swizzle), else 32 columns (a multiple of 32: the 64B swizzle's widest box), else the
    whole width (a multiple of 8, staged unswizzled). :func:`trimmed` takes the narrowest
    (the most room for ring stages), conv2d the widest that costs no stage."""
    if block_n % 32:
        return [block_n]
    if block_n % 64:
        return [32]
    return [w for w in range(block_n, 0, -64) if block_n % w == 0]


def _runs(cfg: Tiling) -> bool:
    """Whether the kernel runs ``cfg`` (:meth:`~.gemm_config.GemmConfig.check`)."""
    try:
        cfg.check()
    except ValueError:
        return False
    return True


def on_half_rows(cfg: Tiling) -> Tiling:
    """``cfg``'s 128 x 128 tiles as 64 x 128 ones (:data:`HALF_ROWS`: cooperative, one
    consumer warpgroup a tile, 9 ring stages) where 128-row tiles waste or starve, and
    128-row tiles of other widths as 64-row ones where M is at most 64
    (:func:`_half_of_wide_rows`), 16-bit inputs with B as N x K (what was measured):

    * **M at most 64**: a 128-row tile's second half is all padding; the 64-row tile
      keeps the K split. H100, % of cuBLAS, same run, 64-row / the 128-row default:
      64 x 14336 x 4096 98.1 / 94.5, 16 x 8192 x 8192 96.1 / 94.6 (2 parts), 1 x 8192 x
      8192 94.6 / 91.3, 64 x 4096 x 1024 246 / 199 (4 parts); 32 x 4096 x 14336 99.7 /
      102.1 and 1 x 4096 x 14336 99.8 / 100.6 (4 parts) within a run's noise.
    * **At most 16 K steps, the 128-row tiles filling at most half the SMs** (where the
      model takes them in ordered parts) and the 64-row ones fitting one wave: those,
      plain. A short problem is latency as much as MMAs, and twice the tiles put twice
      the SMs on it without a later part's wait and add: 512 x 512 x 512 294 / 207%,
      256 x 2048 x 512 268 / 168, 512 x 1024 x 1024 295 / 217, 128 x 4096 x 1024 307 /
      257, 256 x 1024 x 1024 223 / 187, 200 x 3000 x 800 197 / 157, 1024^3 167 / 142
      (conv2d's short layers take the same rule, kernels/conv2d.py). Where the rows
      straddle L2 sectors, those 64 x 128 tiles of 14 to 16 K steps run in 2x1 clusters
      (:func:`_half_rows_sharing_b`).
    """
    if cfg.block_m != 128 or cfg.cluster_size > 1 or cfg.stream_k or cfg.tail_split > 1:
        return cfg
    if not sixteen_bit_nk(cfg):
        return cfg
    if cfg.block_n != 128:
        return _half_of_wide_rows(cfg)
    half = replace(cfg, **HALF_ROWS)
    if cfg.m <= 64:
        return half
    if cfg.k_steps <= HALF_ROWS_SHORT_STEPS and half_rows_fill(replace(cfg, split_k=1), half):
        return _half_rows_sharing_b(narrow_half_rows(replace(half, split_k=1,
                                                             split_k_ordered=False)))
    return cfg


def _half_rows_sharing_b(half: Tiling) -> Tiling:
    """``half``'s short-problem 64 x 128 tiles in 2x1 clusters where the rows straddle
    32-byte L2 sectors and a tile takes at least :data:`HALF_ROWS_SHARED_MIN_STEPS` K
    steps: the two CTAs of a cluster take adjacent row blocks of one column block, and
    each loads half of B's 128 rows (the larger of the tile's two operands, each of its
    128-byte row pieces a sector more than its bytes) and multicasts it into both, what
    cuBLAS runs there (1000^3 on ``128x64_64x8_1x2``).

    H200, same runs, graph replays, two repetitions, time without / with the cluster (both
    with programmatic dependent launch). Taken: 1000^3 1.12 (84% of cuBLAS to 94-95%), 600 x
    1200 x 1000 1.19-1.27, 1500 x 640 x 1000 1.13-1.14, 800 x 1000 x 1000 1.09-1.18 (the
    first rule was written from these four and 1200 x 768 x 600), and held out 1200 x 512 x
    1000 1.13-1.18, 2000 x 384 x 1000 1.08-1.10 (64 x 96 tiles before), 3000 x 256 x 1000
    1.10-1.29, 384 x 1536 x 1000 1.04-1.05, 500 x 2048 x 1000 1.11, 200 x 3000 x 1000
    1.12-1.29 (swapped 128 x 200 tiles before), 1000 x 1000 x 904 1.06, 2000 x 384 x 904
    1.04-1.07. Rows of whole sectors lost (K = 800, 672, 928, 992: 1024 x 1000 x 800
    0.84-0.86, 2048 x 512 x 800 0.85, 300 x 2000 x 800 0.81-0.88, 1000 x 1000 x 672
    0.82-0.91, 1000 x 1000 x 928 0.85-0.88, 1000 x 1000 x 992 0.78-0.80, 1500 x 640 x 928
    0.83-0.86, 500 x 2048 x 992 0.73); 10 to 12 K steps were even (1200 x 768 x 600
    1.05-1.07, 4096 x 200 x 600 1.01-1.04, 1000 x 1000 x 648 1.00-1.03, 1500 x 640 x 712
    0.99-1.13, 256 x 4096 x 600 0.99-1.01, 512 x 1536 x 600 0.94-0.98, 1500 x 384 x 600
    0.91-0.95, 500 x 2048 x 648 0.90-0.94). Not on the 64 x 64 tiles of
    :func:`narrow_half_rows`, whose halved B is as small as A (700 x 768 x 1000 0.73-0.75,
    256 x 1000 x 600 0.89-0.92, 500 x 1000 x 600 0.93-0.94, 256 x 2000 x 1000 1.00, 384 x
    1200 x 1000 1.03-1.07), nor on the 64 x 80 and 64 x 96 tiles other rules take (1000 x
    640 x 2000 0.83-0.90, 1000 x 768 x 1200 0.86). 2x2 clusters of these tiles
    (:func:`in_two_by_two` leaves 64-row tiles) were measured once: 384 x 1536 x 1000
    1.05-1.06x the 2x1 ones, 500 x 2048 x 1000 (two rounds of clusters of 4) 0.61."""
    if half.block_n != HALF_ROWS["block_n"] or half.k_steps < HALF_ROWS_SHARED_MIN_STEPS:
        return half
    if half.k * half.element_bytes % SECTOR_BYTES == 0:
        return half
    if half.m_blocks < 2 or half.ctas % 2:
        return half
    shared = replace(half, cluster=2)
    return shared if _runs(shared) else half


def _half_of_wide_rows(cfg: Tiling) -> Tiling:
    """``cfg``'s cooperative 128-row tiles of another width as 64-row ones with the most
    ring stages that fit, where M is at most 64 (the model takes 128 x 256 tiles where N
    alone makes enough of them: a decode step's GEMM with N of 17000 and more, an LM
    head): the second half of each 128-row tile is padding its loads fill with zeros and
    its warpgroup multiplies. H200, same runs, time of the 128-row / the 64-row tiles
    (two repetitions): 8 x 28672 x 4096 1.26-1.28 (70% of cuBLAS to 89-90%), the rule
    written after it; held out 1 x 28672 x 4096 1.26-1.29, 16 x 28672 x 8192 1.25-1.27,
    64 x 28672 x 4096 1.08-1.09, 1 x 32000 x 4096 1.22-1.27 (76-78% to 96%), 32 x 128256 x
    4096 1.13-1.21 (to 101-102%), 8 x 24576 x 2048 (64 x 192) 1.22-1.23 (to 103-106%), 4 x
    65536 x 1024 1.19-1.20 (to 100%)."""
    if cfg.m > 64 or cfg.schedule != "cooperative":
        return cfg
    half = _most_stages(replace(cfg, block_m=64))
    return half if half is not None else cfg


def narrow_half_rows(half: Tiling) -> Tiling:
    """``half``'s plain 64 x 128 tiles as 64 x 64 ones (:data:`QUARTER_TILES`) where they
    too leave most SMs idle: at most half the CTAs get a 64 x 128 tile and the 64 x 64
    tiles still fit one wave (:func:`half_rows_fill`). A problem this small is the latency
    of each CTA's loads: a 64 x 64 K step carries two thirds of a 64 x 128 one's bytes,
    and twice the SMs pull them. H100, x cuDNN, same runs, graph replays, 64 x 64 / 64 x
    128: conv2d 1x1 N=1 14x14x1024 -> 512 (32 tiles) 1.00 / 0.75, N=1 28x28x512 -> 256
    (52) 0.96 / 0.78, N=8 14x14x1024 -> 256 (100) 0.95 / 0.75. Shared by the GEMM's
    :func:`on_half_rows` and conv2d's ``_half_rows``."""
    narrow = replace(half, **QUARTER_TILES)
    if half.block_n == 128 and half.split_k == 1 and half_rows_fill(half, narrow):
        return narrow
    return half


def half_rows_fill(whole: Tiling, half: Tiling) -> bool:
    """Whether ``whole``'s tiles are too few for the SMs (at most half the CTAs get one)
    and ``half``'s smaller tiles of the problem still fit one wave: where a short problem
    (or conv2d layer) takes 64-row tiles for 128-row ones, and 64 x 64 ones for those
    (:func:`narrow_half_rows`)."""
    return 2 * whole.num_tiles <= whole.ctas and half.num_tiles <= half.ctas


def sharing_a_in_fours(cfg: Tiling) -> Tiling:
    """``cfg``'s 128 x 128 tiles in clusters of 4 along N (each CTA loads a quarter of A's
    rows and multicasts them, :data:`A_SHARING_CLUSTER`) on as many CTAs as the GPU keeps
    resident in clusters of 4 (:func:`.residency.resident_ctas`: 120 of 132). A skinny
    problem's few row blocks of A are read again by every column block: a 128 x 128 tile's
    K step loads as many bytes of A as of B, and the cluster cuts A's to a quarter (what
    cuBLAS's 4x1 clusters do on these shapes). Taken where M is at most
    :data:`A_SHARING_MAX_ROW_BLOCKS` row blocks, N at least
    :data:`A_SHARING_MIN_COLUMN_BLOCKS` column blocks, a unit at least
    :data:`A_SHARING_MIN_STEPS` K steps, the rows straddle 128-byte L2 lines, and the units
    run in one round both without a cluster and in clusters of 4; cooperative or ping-pong
    tiles of 16-bit inputs with B as N x K (what was measured).

    H200, same runs, time without / with the clusters: 100 x 10000 x 1000 1.17-1.30, 200 x
    3000 x 3000 1.23-1.24, 112 x 5000 x 3000 1.22, 200 x 1536 x 5000 1.21-1.24, 100 x 5000 x
    3000 1.14-1.20 (the rule written after these); held out, 12 problems all 0.99x or
    faster, 1.15-1.18x geomean (80 x 10000 x 3000 1.35-1.46, 100 x 12000 x 5680 1.26-1.40).
    Left out because they lost: units past one round of the clusters (96 x 8192 x 4096,
    128 x 4096 x 4096, 128 x 8192 x 8192, 256 x 4096 x 4096: 128 units, 0.56-0.73), rows of
    whole lines (80 x 1536 x 2048, 256 x 3000 x 2048, 128 x 12000 x 2048, 200 x 5120 x
    1536, 128 x 5120 x 5120, 80 x 400 x 2048: 0.87-0.97; one won, 80 x 12288 x 4096 1.37),
    5 column blocks (80 x 640 x 3000: 8 CTAs a row block, 3 idle, 0.82-0.87)."""
    if cfg.block_m != 128 or cfg.block_n != A_SHARING_BLOCK_N or not sixteen_bit_nk(cfg):
        return cfg
    if (cfg.cluster, cfg.cluster_n) != (1, 1) or cfg.stream_k or cfg.tail_split != 1:
        return cfg
    if not rows_straddle_lines(cfg) or cfg.steps_per_unit < A_SHARING_MIN_STEPS:
        return cfg
    if cfg.m_blocks > A_SHARING_MAX_ROW_BLOCKS or cfg.n_blocks < A_SHARING_MIN_COLUMN_BLOCKS:
        return cfg
    if cfg.work_units > cfg.workers:
        return cfg
    shared = _in_resident_clusters(cfg, cluster=1, cluster_n=A_SHARING_CLUSTER)
    return shared if shared is not None else cfg


def on_swapped_operands(cfg: Tiling) -> Tiling:
    """``C^T = B A^T`` (:attr:`~.gemm_config.GemmConfig.swap_ab`) where A has fewer than
    :data:`SWAP_MAX_M` rows (FP8: at most :data:`SWAP_MAX_M_FP8`), the tiles the other
    rules would take pad M (192 rows on 128-row tiles; not 64 on 64-row ones), N is at
    least :data:`SWAP_MIN_N` and B is N x K: cooperative tiles of :data:`SWAP_BLOCK_M`
    of N by M rounded up to 8 (:func:`swapped`), in ordered K parts where those tiles fill
    at most half the SMs, the most ring stages that fit; taken where their work units run
    in one round or leave the last round at least half full (40 x 17000 x 1000: 133 tiles
    on 132 SMs, 0.94x, stays). The default's tiles are 64 rows (FP8: 128) of M, and each of
    their wgmma's rows past M is a padding row: its loads fill zeros, its MMAs multiply
    them. Swapped, A's rows are the MMA's N, padded to 8. Not where the other rules would
    run clusters: against :func:`sharing_a_in_fours` swapped tiles lost six of nine (80 x
    10000 x 3000 0.88-0.91x, 112 x 5000 x 3000 0.91x, 100 x 5000 x 3000 0.93x, 100 x 3072 x
    7000 0.94x, 200 x 1536 x 5000 0.94-0.96x, 100 x 12000 x 5680 0.93-1.01x) and won three
    (200 x 3072 x 2224 1.16-1.19x, 100 x 7000 x 2000 1.12-1.15x, 200 x 3000 x 3000 1.08x).

    bf16, H100, same runs, graph replays, time of the default / swapped (two repetitions):
    16 x 8192 x 2048 1.35-1.40 (67-69% of cuBLAS to 91-97%), 32 x 28672 x 4096 1.02-1.03, 8
    x 4096 x 14336 1.02, 1 x 16384 x 16384 1.01-1.02: the rule written after these. Held
    out, 23 problems, geometric mean 1.20x: 136 x 5120 x 2048 1.51-1.64 (55-62% of cuBLAS
    to 91-93%), 1 x 4096 x 4096 1.49-1.58, 72 x 8192 x 2048 1.45-1.53 (70-75% to
    107-109%), 180 x 2000 x 6000 1.50-1.51, 8 x 2048 x 8192 1.44-1.45, 12 x 3072 x 3072
    1.36-1.44, 96 x 4096 x 4096 1.35, 88 x 4096 x 2048 1.25-1.30, 5 x 5120 x 1536 1.23-1.29
    (77% to 95-99%), 24 x 1024 x 4096 1.24-1.27, 16 x 4096 x 1024 1.16-1.27, 36 x 6144 x
    2048 1.16-1.21, 40 x 2048 x 2048 1.14-1.15, 30 x 9000 x 3000 1.10-1.11, 160 x 8192 x
    1024 1.09-1.12, 120 x 3000 x 3000 1.04-1.05; even: 200 x 8192 x 4096 1.01-1.02, 48 x
    5120 x 5120 1.00-1.03, 4 x 14336 x 4096 1.01, 24 x 8192 x 4096 1.01, 2 x 65536 x 1024
    1.00-1.01, 56 x 12288 x 4096 0.97-0.99 and 250 x 4096 x 4096 0.96-1.01 (the same tile
    count, each K step's bytes within 4%).

    e4m3, H200, same runs (the FP8 default's 128-row tiles against the swapped ones): 1
    to 96 rows, 17 problems, 1.16-1.98x (1 x 4096 x 4096 1.76-1.98, 8 x 2048 x 8192 1.88,
    48 x 5120 x 5120 1.84-1.87, 16 x 8192 x 2048 1.67 (57% of ``torch._scaled_mm`` to
    96-98%), 1 x 16384 x 16384 1.56-1.66, 88 x 4096 x 2048 1.16); past 128 rows see
    :data:`SWAP_MAX_M_FP8`; 64 rows, which the FP8 default pads to 128: 64 x 8192 x 2048
    1.38-1.42, 64 x 4096 x 4096 1.31-1.33, 64 x 14336 x 4096 1.24.

    192 rows on the default's 128-row tiles (bf16, H200): 192 x 3072 x 4096 1.26-1.67x,
    192 x 4096 x 4096 1.16-1.54x, 192 x 8192 x 2048 1.06-1.15x, 192 x 12288 x 4096
    0.98-1.02x, 192 x 6144 x 1024 0.86-0.87x (16 K steps in 2 parts against 96 whole
    tiles)."""
    if cfg.swap_ab or cfg.b_layout != "nk" or cfg.n < SWAP_MIN_N:
        return cfg
    few_rows = cfg.m < SWAP_MAX_M and (cfg.element_bytes == 2 or cfg.m <= SWAP_MAX_M_FP8)
    if not few_rows and (cfg.m >= SWAP_MAX_M_BLOCKS or cfg.element_bytes != 2):
        return cfg
    unswapped = _unswapped(cfg)
    if unswapped.cluster_size > 1:
        # The other rules share an operand in clusters (sharing_a_in_fours: each CTA loads
        # a quarter of A's rows a K step, fewer bytes than a swapped tile's whole A).
        return cfg
    if not few_rows:
        return _swapped_in_column_blocks(cfg, unswapped)
    if unswapped.m % unswapped.block_m == 0:
        # The other rules' tiles cover M exactly (64 rows of 64, 128 of 128): no padding
        # rows to save (bf16, H200: 64 x 8192 x 2048 1.00-1.04x swapped, 64 x 4096 x 14336
        # 1.00-1.01x, 128 x 8192 x 2048 1.00-1.05x, 128 x 5120 x 5120 0.98-1.00x).
        return cfg
    candidate = swapped(cfg)
    if candidate is None:
        return cfg
    units, workers = candidate.work_units, candidate.workers
    if units > workers and 0 < units % workers < workers / 2:
        return cfg
    return candidate


def _swapped_in_column_blocks(cfg: Tiling, unswapped: Tiling) -> Tiling:
    """``cfg`` swapped past :data:`SWAP_MAX_M` rows (to :data:`SWAP_MAX_M_BLOCKS`, 16-bit
    inputs; ``unswapped``: the tiling the other rules give it): A's rows in 2 or 3 column
    blocks of the product (:func:`swapped`), the count whose tiles run the most units in
    one round, each C stage at least
    :data:`SWAP_MIN_STAGE_ROWS` of C's rows; taken where it pads at least
    :data:`SWAP_MIN_PADDING_SAVED` fewer of its rows than the tiles the other rules would
    take, which were already near cuBLAS where they padded few. H200, same runs, the
    default / the swapped tiles (the rule written after these 16): 260 x 8192 x 2048
    1.42-1.44 (2 blocks of 136, against 129 tiles of 128 x 192: 68% of cuBLAS to 96-98%),
    270 x 3072 x 3072 1.42-1.45, 333 x 4440 x 2224 1.26-1.30 (3 of 112), 400 x 8192 x 2048
    1.18, 300 x 4096 x 4096 1.16-1.18, 420 x 7168 x 2048 1.14-1.15, 400 x 4096 x 4096
    1.03-1.06, 440 x 5120 x 3072 1.03-1.05; left as they are: 360 x 6144 x 2048 (0.90x
    swapped, 4% fewer padded rows), 460 x 4096 x 2048 (0.89x, 6%), 500 x 4096 x 4096
    (0.89x, none), 300 x 12288 x 4096 and 290 x 14336 x 4096 (no count in one round:
    0.84-0.88x, 1.02-1.03x), and, forgone, 480 x 8192 x 1024 (1.03x, 6%), 350 x 5000 x
    2000 (1.07-1.11x, 6%), 300 x 5680 x 2224 (1.07-1.15x, 5%). Held out, the 9 of 18
    problems it swaps, geometric mean 1.14x: 264 x 2048 x 4096 1.44-1.72 (51-67% of
    cuBLAS to 88-96%), 260 x 5120 x 5120 1.25-1.26, 390 x 8192 x 4096 1.18-1.20, 296 x 4096
    x 8192 1.14-1.25, 310 x 8192 x 2048 1.12-1.18, 300 x 3000 x 5000 1.07-1.08, 280 x 6144
    x 4096 1.00-1.03, 330 x 3072 x 4096 1.00-1.02, and one loss, 430 x 6144 x 1024 0.93
    (16 K steps)."""
    candidates = [c for c in (swapped(cfg, blocks) for blocks in (2, 3))
                  if c is not None and c.work_units <= c.workers
                  and c.epilogue_cols >= SWAP_MIN_STAGE_ROWS]
    if not candidates:
        return cfg
    best = max(candidates, key=lambda c: c.work_units)
    saved = _padded_share(cfg.m, unswapped.block_m) - _padded_share(cfg.m, best.block_n)
    return best if saved >= SWAP_MIN_PADDING_SAVED else cfg


def _unswapped(cfg: Tiling) -> Tiling:
    """``cfg`` through every refinement but :func:`on_swapped_operands`: the tiling the
    problem takes unswapped."""
    for rule in REFINEMENTS:
        if rule is not on_swapped_operands:
            cfg = rule(cfg)
    return cfg


def _padded_share(rows: int, block: int) -> float:
    """The share of ``rows`` rounded up to whole blocks of ``block`` that is padding."""
    whole = math.ceil(rows / block) * block
    return (whole - rows) / whole


def swapped(cfg: Tiling, column_blocks: int = 1) -> Tiling | None:
    """``cfg``'s problem as ``C^T = B A^T`` on cooperative :data:`SWAP_BLOCK_M` x
    ceil8(M / column_blocks) tiles (the caller's CTAs, no cluster), in the model's ordered
    K parts
    (:attr:`~.gemm_config.GemmConfig.ordered_parts`) where the tiles fill at most half
    the SMs, with the widest C stage (C's rows, a multiple of 8 dividing the width) that
    leaves :data:`TRIM_MIN_STAGES` ring stages, and the most stages that fit; None where
    none does."""
    width = math.ceil(cfg.m / column_blocks / 8) * 8
    tile = replace(cfg, swap_ab=True, block_m=SWAP_BLOCK_M, block_n=width,
                   schedule="cooperative", epilogue_buffers=1, cluster=1, cluster_n=1,
                   split_k=1, split_k_ordered=False, stream_k=False, stream_k_waves=1,
                   tail_split=1)
    parts = tile.ordered_parts
    if parts > 1:
        tile = replace(tile, split_k=parts, split_k_ordered=True)
    for rows in range(width, 0, -8):
        if width % rows == 0:
            staged = _most_stages(replace(tile, epilogue_n=rows))
            if staged is not None:
                return staged
    return None


def streams_weights(cfg: Tiling) -> bool:
    """Whether the problem reads B once from DRAM with little reuse: M is a single tile
    of rows (a decode step's GEMM, a GEMV; with ``swap_ab``, one tile of the product's
    columns), so the kernel is bound by B's bytes, and the L2 fetching 256 bytes per miss
    rather than 128 serves the streaming rows better (as for the grouped GEMM's decode
    problems)."""
    return (cfg.n_blocks if cfg.swap_ab else cfg.m_blocks) == 1


#: The rules applied after the model's choice, in order (:func:`refinements`): each
#: measured on the problems its docstring names, each keeping what it does not apply to.
REFINEMENTS: tuple[Callable[[Tiling], Tiling], ...] = (
    on_swapped_operands, on_half_rows, trimmed, on_wide_half_rows, in_two_by_two,
    in_one_exact_wave, sharing_a_in_fours)
