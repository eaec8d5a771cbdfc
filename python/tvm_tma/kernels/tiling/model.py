"""The default tiling of a GEMM problem: a wave-quantization cost model over measured tilings.

A persistent kernel runs its tiles in waves of ``workers`` at a time, and a problem's time is
its number of waves times the time of one tile. A tiling that fills 97% of one wave with
128 x 256 tiles (2048^3: 128 tiles on 132 SMs) beats one that fills two waves with 128 x 128
tiles, whose K steps each do half the products for two thirds of the bytes; a tiling that
leaves a quarter of a wave empty (768 x 4096: 96 tiles of 128 x 256) loses to 128 x 192
tiles that fill it (132 tiles). :func:`.rules.choose` estimates each candidate's time in units of
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
mean 1.18x (section 6n). They are a candidate in two rounds each at least
:data:`TALL_MIN_FILL` full (:func:`fills_two_rounds`) only where the cheapest other
candidate ends in a round at most :data:`THIN_ROUND` full or cuts its tail into K parts
(:func:`leaves_thin_round`): 2443 x 3720 x 592 runs 260 of 192 x 192 where 300 of 128 x
256 left 36 in a third round, 1.22x (H200, settled clocks, section 6z13; 13 held-out
problems 1.10x geometric mean, 11 faster, two within 1%); against tiles whose last round
was 73-97% full they lost (0.93-1.00x).

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

After the model's choice come the refinements (all of them, in order, in
:data:`.rules.REFINEMENTS`); among them two measured on problems of a few row blocks:
ping-pong 64 x 256 tiles where M is 65 to 512 and no multiple of 128, the rows are whole
32-byte sectors and those tiles fill 80-100% of one wave
(:func:`.half_rows.on_wide_half_rows`: 1.02-1.43x), and 2x2 clusters on the CTAs a GPU keeps
resident in clusters of 4 where straddled rows of a problem at least as wide as tall run one
round (:func:`.clusters.in_two_by_two`: 1.03x geometric mean on an H200, 1.075x on an H100,
22 problems).

Problems whose 128 x 128 tiles fill at most half the SMs keep the rule of
:meth:`~.gemm_config.GemmConfig.ordered_parts` (ping-pong 128 x 128 tiles, K cut into
ordered parts), which the model is not asked about; where N is 64 to 256 and K long, on
one column block of cooperative tiles as wide as N instead (:func:`in_one_column_block`).
A caller's options always win: the candidates are the measured tilings with the caller's
fields laid over them, and those the kernel cannot run
(:meth:`~.gemm_config.GemmConfig.check`) are dropped.

The costs are measurements (H100, benchmarks/RESULTS.md section 6d), not a roofline, and
:func:`ranked` lists every candidate's estimate so ``benchmarks/gemm.py --sweep`` can set
them beside measured times.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol


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
    b_resident: bool
    a_copy_k: int
    tap_columns: int

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
    def cluster_size(self) -> int: ...
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
    @property
    def accumulators(self) -> int: ...
    @property
    def a_tile_bytes(self) -> int: ...
    @property
    def b_tile_bytes(self) -> int: ...
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
#: :func:`in_one_column_block`: the narrowest N, the fewest rows and the shortest K it was
#: measured on.
ONE_BLOCK_MIN_N = 64
ONE_BLOCK_MIN_M = 1024
ONE_BLOCK_MIN_K = 4096
#: :func:`in_one_column_block`: the most ordered parts it takes where the ping-pong 128 x
#: 128 tiles pad no column (N = 256): 1024 x 256 x 12288 in 16 parts ran 0.88x of them,
#: 2048 x 256 x 16384 in 8 1.11x.
ONE_BLOCK_UNPADDED_PARTS = 8
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
#: The tiling of 256-row cooperative tiles (two consumer warpgroups of 128 rows; B read
#: once for 256 rows), which the model offers only where the caller asks for 256 rows
#: (``block_m=256``): 128 columns (128 accumulators a consumer thread, the most beside two
#: warpgroups) and 4 ring stages of 48 KiB beside a 64-column C stage. Measured against
#: the default's 128 x 256 on large problems it ran 2-5% slower (H200, settled clocks:
#: 8192^3 0.97x, 4096^3 0.98x, 4096 x 14336 x 4096 0.97x, 8192 x 1024 x 8192 0.95x;
#: benchmarks/RESULTS.md 6z14), so no default takes it; it runs plain
#: (:data:`.gemm_config.PLAIN_256_REFUSED`).
TALL_256 = {"block_n": 128, "stages": 4, "epilogue_n": 64, "schedule": "cooperative"}
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
#: Fullest a tiling's last round may be for two full rounds of 192-row tiles to be a
#: candidate against it (:func:`fills_two_rounds`, :func:`leaves_thin_round`). H200,
#: settled clocks (RESULTS.md 6z13), the two rounds of 192-row tiles against the default
#: before: 1.08-1.21x where it left a round at most half full or cut its tail in K parts
#: (724 x 12072 x 1128: 288 tiles of 128 x 256 in 2x1, 12 in 3 parts, 1.09x; 912 x 6496
#: x 1392 1.21x; 12518 x 488 x 688: 196 of 128 x 256, 1.17x), 0.93-1.00x against 128 x
#: 144 to 192 tiles whose last round was 73-97% full.
THIN_ROUND = 0.5
#: The ping-pong tiling (a caller's ``schedule="pingpong"``, and ordered split-K): each
#: warpgroup its own 128 x 128 tile and 64-column C stage, leaving room for 5 ring stages.
PINGPONG = {"block_n": 128, "stages": 5, "epilogue_n": 64, "schedule": "pingpong"}
#: Bytes of an L2 sector: rows that are whole sectors straddle 128-byte lines without
#: costing a load a sector more (:func:`on_wide_half_rows`).
SECTOR_BYTES = 32
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
#: Alignment, in bytes, of the rows TMA reads best: one L2 line.
LINE_BYTES = 128
#: Fields that, given by the caller, say how the work is split: the model adds neither a
#: cluster nor stream-K over them (and, with ``schedule``, no ordered split-K either).
SPLIT_FIELDS = frozenset({"cluster", "cluster_n", "split_k", "split_k_ordered", "stream_k",
                          "stream_k_waves", "tail_split"})
#: Most accumulator-steps (K steps x fp32 accumulators per consumer thread) a mainloop of
#: a known length is unrolled for (:func:`~tvm_tma.kernels.wgmma.k_loop`; the rules that
#: price unrolled steps ask :func:`unrolled`). nvcc's time grows faster than the code: 64
#: x 48 tiles of 32 steps (768) 1.9 s, 64 x 128 of 32 (2048) 8.8 s, a 3x3 conv of 36 steps
#: on 128 x 128 tiles (2304) 9.4 s, 3600 24 s, 128 x 256 tiles of 64 steps (8192) 85 s,
#: against 0.6-1.8 s rolled.
UNROLLED_ACCUMULATOR_STEPS = 2304
#: Most K steps a ping-pong mainloop of 128 x 128 tiles (128 accumulators a consumer
#: thread) is unrolled for where its CTAs take two rounds of tiles (:func:`unrolled`).
#: nvcc then unrolls the loop over the two tiles as well, and past 12 steps the code
#: spills at the 168 registers a 384-thread kernel gets (ptxas: 16 steps 548 bytes, 18
#: steps 280; 12 steps none): 1x1 layers of 16 steps ran 1.21-1.26x slower unrolled
#: (H200, same runs: N=32 14x14x1024 -> 2048 stride 2 18.3-18.7 us against 15.0-15.1
#: rolled, N=16 14x14x1024 -> 1024 17.2 / 13.7, N=16 28x28x1024 -> 1024 stride 2 17.9 /
#: 14.7; held out, 1.22-1.32x on four more: N=1 56x56x1024 -> 1024, N=8 14x14x1024 ->
#: 2048, N=32 7x7x1024 -> 2048, N=64 14x14x1024 -> 1024 stride 2). One round is all
#: constants (no spill; N=32 14x14x1024 -> 256 7.8 us unrolled against 8.1), and from
#: three rounds the tile loop stays a loop (60 bytes spilled outside the steps) and
#: unrolled ran 1.01-1.08x faster on seven layers of 392 to 1568 tiles.
PINGPONG_UNROLLED_STEPS = 12
#: The options by which a caller chooses the tiling itself (tile, schedule, ring, cluster,
#: split): no rule after the model's choice overrides them (:func:`refinements`, conv2d's
#: exact and narrow waves).
TILING_CHOICES = SPLIT_FIELDS | {"block_m", "block_n", "schedule", "stages", "epilogue_n"}


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


def rows_straddle_sectors(cfg: Tiling) -> bool:
    """Whether a K-major row (K x element bytes) is no whole number of 32-byte L2 sectors:
    then each 128-byte piece of it a load reads costs a sector more than its bytes (the
    2x1 clusters of :func:`pairs_share_b` and the short problems' 64-row tiles halve those
    loads; the 64 x 256 tiles of ``on_wide_half_rows`` lose on them)."""
    return cfg.k * cfg.element_bytes % SECTOR_BYTES != 0


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
    return rows_straddle_sectors(cfg)


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
    return stream_k_estimated_cheaper(cfg, STREAM_K_MARGIN)


def stream_k_estimated_cheaper(cfg: Tiling, margin: float = 0.0) -> bool:
    """Whether the wave model prices ``cfg``'s tiles with stream-K (its fix-ups included)
    at least ``margin`` (a share) below ``cfg`` as it is: the GEMM's rule
    (:func:`stream_k_pays`) asks :data:`STREAM_K_MARGIN`, the conv layer's thin-round rule
    nothing."""
    streamed = replace(cfg, stream_k=True)
    return estimate(streamed).cost <= (1 - margin) * estimate(cfg).cost


def sixteen_bit_nk(cfg: Tiling) -> bool:
    """Whether ``cfg`` has 16-bit inputs with B as N x K: the operands every rule after the
    wave model (and the 192-row, 320-wide and 160-wide candidates) was measured on."""
    return cfg.element_bytes == 2 and cfg.b_layout == "nk"


def fills_two_rounds(cfg: Tiling) -> bool:
    """Whether ``cfg``'s 192-row tiles run in two rounds, each at least
    :data:`TALL_MIN_FILL` full (16-bit inputs, B as N x K): a candidate only against
    tilings that leave a thin last round (:func:`leaves_thin_round`; :func:`candidates`)."""
    return (sixteen_bit_nk(cfg)
            and (1 + TALL_MIN_FILL) * cfg.workers <= cfg.work_units <= 2 * cfg.workers)


def leaves_thin_round(cfg: Tiling) -> bool:
    """Whether ``cfg`` ends in a round at most :data:`THIN_ROUND` full, or cuts the tiles
    past its last full round into K parts (what :func:`fills_two_rounds`' tiles beat)."""
    partial = cfg.work_units % cfg.workers
    return cfg.tail_split > 1 or 0 < partial <= THIN_ROUND * cfg.workers


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
                         or not rows_straddle_lines(plain)) and kernel_runs(plain)):
                found.append(plain)
            continue
        cfg = plain
        if free and pairs_share_b(cfg) and cfg.m_blocks >= 2 and cfg.ctas % 2 == 0:
            cfg = replace(cfg, cluster=2)
        if tiling in TALL_TILINGS:
            # One wave or two full rounds, or not at all (:data:`TALL_MIN_FILL`).
            if (free and cfg.block_m == 192 and (fills_one_wave(cfg) or fills_two_rounds(cfg))
                    and kernel_runs(cfg) and cfg not in found):
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
            if kernel_runs(variant) and variant not in found:
                found.append(variant)
    two_rounds = [cfg for cfg in found if cfg.block_m == 192 and not fills_one_wave(cfg)]
    others = [cfg for cfg in found if cfg.block_m != 192]
    if two_rounds and others and not leaves_thin_round(
            min(others, key=lambda cfg: estimate(cfg).cost)):
        # Two rounds of 192-row tiles lost to 128-row tiles whose last round was full
        # (:data:`THIN_ROUND`).
        found = [cfg for cfg in found if cfg not in two_rounds]
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


def modelled(make: MakeTiling, m: int, n: int, k: int, **options) -> Tiling:
    """The model's choice before :func:`refinements`: ordered split-K on ping-pong 128 x
    128 tiles where those tiles fill at most half the SMs (on one column block of tiles
    as wide as N where :func:`in_one_column_block` takes the problem), else the cheapest
    candidate of :func:`ranked` (the caller's options over the default tiling where none
    runs)."""
    wide = make(m, n, k, **options)
    narrow = PINGPONG if wide.schedule == "pingpong" else TILINGS[-1]
    split = (1 if (SPLIT_FIELDS | {"schedule"}) & set(options) else
             make(m, n, k, **{**options, **narrow}).ordered_parts)
    if split > 1:
        chosen = in_one_column_block(make, m, n, k, options) or make(
            m, n, k, **{**PINGPONG, "split_k": split, "split_k_ordered": True, **options})
    else:
        best = ranked(make, m, n, k, **options)
        chosen = best[0].config if best else wide
    return chosen


def in_one_column_block(make: MakeTiling, m: int, n: int, k: int,
                        options: dict) -> Tiling | None:
    """Where :func:`modelled` cuts K into ordered parts (128 x 128 tiles fill at most half
    the SMs), cooperative 128-row tiles as wide as N (one column block, N rounded up to 8
    columns; the C stage that leaves the most ring stages) in their own ordered
    parts, in place of the ping-pong 128 x 128 tiles: for 16-bit inputs with B as N x K,
    N from :data:`ONE_BLOCK_MIN_N` to 256 but not 121 to 128 (the same tile), M at least
    :data:`ONE_BLOCK_MIN_M`, K at least :data:`ONE_BLOCK_MIN_K`, and no tiling (or swap)
    the caller chose; else None.

    A ping-pong 128 x 128 tile pads N = 64 to twice its columns and cuts N = 192 into a
    full column block and a half-empty one; a tile as wide as N loads each row of A once
    per K step and reads more products a byte (128 x 192: 77 flops a byte loaded against
    the swapped 64 x 96 tiles' 38, which :func:`.few_columns.on_few_columns` took for M of
    3000 and more). Where N = 256 (no padding to save) at most
    :data:`ONE_BLOCK_UNPADDED_PARTS` parts.

    H200, same runs, graph replays (``benchmarks/RESULTS.md`` 6z10), the tiles before /
    these, % of cuBLAS after: fit on 4096 x 192 x 8192 (129 swapped 64 x 96 tiles -> 32 of
    128 x 192 in 4 parts) 1.43x (118-122%), 4096 x 64 x 16384 1.21x (112%), 1024 x 192 x
    8192 1.29x (115%), 2048 x 128 x 16384 the same tile either way (1.00x); held out, 16
    drawn from the 395 problems of M 1024-8192, N 64-256, K 4096-16384 it changes: 15
    faster, 1.03-2.62x (1500 x 136 x 8192 2.05x, 2500 x 136 x 8192 2.62x, 2048 x 160 x
    16384 1.73x, 3000 x 256 x 16384 1.69x), one slower (1024 x 256 x 12288 in 16 parts,
    0.88x: hence the limit on parts at N = 256); on the final rule, 12 of odd sizes all
    faster, 1.04-1.78x (1.33x geomean)."""
    if (TILING_CHOICES & set(options) or options.get("swap_ab")
            or not ONE_BLOCK_MIN_N <= n <= 256 or m < ONE_BLOCK_MIN_M or k < ONE_BLOCK_MIN_K):
        return None
    width = math.ceil(n / 8) * 8
    if width == PINGPONG["block_n"]:
        return None
    tile = make(m, n, k, **{**options, "block_n": width, "epilogue_n": width, "stages": 4})
    if not sixteen_bit_nk(tile) or tile.ordered_parts == 1:
        return None
    if n % PINGPONG["block_n"] == 0 and tile.ordered_parts > ONE_BLOCK_UNPADDED_PARTS:
        return None
    tile = replace(tile, split_k=tile.ordered_parts, split_k_ordered=True)
    staged = [cfg for rows in c_stage_widths(width)
              if (cfg := with_most_stages(replace(tile, epilogue_n=rows))) is not None]
    # The most ring stages, then the widest C stage (c_stage_widths: widest first).
    return max(staged, key=lambda cfg: cfg.stages, default=None)


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
    staged = with_most_stages(narrow)
    return staged if staged is not None else cfg


def unrolled(count: int, cfg: Tiling, budget: int = UNROLLED_ACCUMULATOR_STEPS) -> bool:
    """Whether the kernel unrolls a mainloop of ``count`` (a constant) K steps of ``cfg``'s
    tiles: ``count`` times the accumulators at most ``budget``
    (:data:`UNROLLED_ACCUMULATOR_STEPS`), and at most :data:`PINGPONG_UNROLLED_STEPS`
    steps of 128 x 128 ping-pong tiles taken in two rounds."""
    if count * cfg.accumulators > budget:
        return False
    two_rounds = math.ceil(cfg.work_units / cfg.workers) == 2
    return not (cfg.schedule == "pingpong" and cfg.accumulators >= 128 and two_rounds
                and count > PINGPONG_UNROLLED_STEPS)


def with_most_stages(cfg: Tiling) -> Tiling | None:
    """``cfg`` with the most ring stages the kernel runs it with, from
    :data:`TRIM_MIN_STAGES` to :data:`TRIM_MAX_STAGES` (a tile reshaped by
    :func:`trimmed` or :func:`exact_wave`); None where not even the fewest fit."""
    fitting = [s for s in range(TRIM_MIN_STAGES, TRIM_MAX_STAGES + 1)
               if kernel_runs(replace(cfg, stages=s))]
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


def kernel_runs(cfg: Tiling) -> bool:
    """Whether the kernel runs ``cfg`` (:meth:`~.gemm_config.GemmConfig.check`)."""
    try:
        cfg.check()
    except ValueError:
        return False
    return True


def streams_weights(cfg: Tiling) -> bool:
    """Whether the problem reads B once from DRAM with little reuse: M is a single tile
    of rows (a decode step's GEMM, a GEMV; with ``swap_ab``, one tile of the product's
    columns), so the kernel is bound by B's bytes, and the L2 fetching 256 bytes per miss
    rather than 128 serves the streaming rows better (as for the grouped GEMM's decode
    problems)."""
    return (cfg.n_blocks if cfg.swap_ab else cfg.m_blocks) == 1
