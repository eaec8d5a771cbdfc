"""64-row tiles, the refinements of the model's choice for problems of few rows or few
tiles: 64 x 128 (and 64 x 64) tiles where 128-row ones waste or starve the SMs, 64-row
tiles of any width where M is at most 64, ping-pong 64 x 256 tiles for a few row blocks,
and 2x1 clusters sharing B between the short problems' 64 x 128 tiles. Each rule names the
problems it was measured on (:mod:`.model` says how the rules follow the model)."""

from __future__ import annotations

from dataclasses import replace

from .model import (
    Tiling,
    kernel_runs,
    rows_straddle_sectors,
    sixteen_bit_nk,
    with_most_stages,
)

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
#: Fewest K steps of the short problems' 64 x 128 tiles that run in 2x1 clusters
#: (:func:`_half_rows_sharing_b`; at 10 to 12 the clusters were as fast, at 14 to 16
#: faster).
HALF_ROWS_SHARED_MIN_STEPS = 14
#: The 64 x 64 tiling :func:`narrow_half_rows` takes where even 64 x 128 tiles leave most
#: SMs idle: 12 ring stages of 16 KiB beside one 64-column C stage (as many as conv2d's
#: ``MAX_STAGES`` allows; a short problem's whole K is then in flight at once).
QUARTER_TILES = {"block_n": 64, "stages": 12, "epilogue_n": 64}


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
    if rows_straddle_sectors(cfg):
        return cfg
    half = replace(cfg, **WIDE_HALF_ROWS, cluster=1, cluster_n=1, split_k=1,
                   split_k_ordered=False, stream_k=False, tail_split=1)
    if not WIDE_HALF_ROWS_MIN_FILL * half.ctas <= half.num_tiles <= half.ctas:
        return cfg
    return half if kernel_runs(half) else cfg


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
    if not rows_straddle_sectors(half):
        return half
    if half.m_blocks < 2 or half.ctas % 2:
        return half
    shared = replace(half, cluster=2)
    return shared if kernel_runs(shared) else half


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
    half = with_most_stages(replace(cfg, block_m=64))
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
