"""C^T = B A^T for few rows: the refinement that runs a problem of fewer than 256 (FP8:
128) rows swapped, B's rows as the MMAs' M and A's rows as their N, and the swapped tiling
itself (:func:`swapped`, also a candidate of ``benchmarks/gemm.py --sweep``)."""

from __future__ import annotations

import math
from dataclasses import replace

from .model import Tiling, with_most_stages
from .unswapped import unswapped_tiling

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
    unswapped = unswapped_tiling(cfg)
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


def _padded_share(rows: int, block: int) -> float:
    """The share of ``rows`` rounded up to whole blocks of ``block`` that is padding."""
    whole = math.ceil(rows / block) * block
    return (whole - rows) / whole


def swapped(cfg: Tiling, column_blocks: int = 1) -> Tiling | None:
    """``cfg``'s problem as ``C^T = B A^T`` on cooperative :data:`SWAP_BLOCK_M` x
    ceil8(M / column_blocks) tiles (the caller's CTAs, no cluster), in the model's ordered
    K parts
    (:attr:`~.gemm_config.GemmConfig.ordered_parts`) where the tiles fill at most half
    the SMs, with the widest C stage and the most ring stages that fit
    (:func:`with_widest_c_rows`); None where none does."""
    width = math.ceil(cfg.m / column_blocks / 8) * 8
    tile = swapped_tile(cfg, SWAP_BLOCK_M, width)
    parts = tile.ordered_parts
    if parts > 1:
        tile = replace(tile, split_k=parts, split_k_ordered=True)
    return with_widest_c_rows(tile)


def swapped_tile(cfg: Tiling, block_m: int, width: int) -> Tiling:
    """``cfg``'s problem as ``C^T = B A^T`` on cooperative ``block_m`` (of N) x ``width``
    (of M) tiles, data-parallel, no cluster, one C stage, each ring slot loading both
    operands."""
    return replace(cfg, swap_ab=True, block_m=block_m, block_n=width,
                   schedule="cooperative", epilogue_buffers=1, cluster=1, cluster_n=1,
                   split_k=1, split_k_ordered=False, stream_k=False, stream_k_waves=1,
                   tail_split=1, b_resident=False)


def with_widest_c_rows(tile: Tiling) -> Tiling | None:
    """The swapped ``tile`` with the widest C stage (C's rows, a multiple of 8 dividing
    the width) that leaves :data:`TRIM_MIN_STAGES` ring stages, and the most stages that
    fit; None where none does."""
    width = tile.block_n
    for rows in range(width, 0, -8):
        if width % rows == 0:
            staged = with_most_stages(replace(tile, epilogue_n=rows))
            if staged is not None:
                return staged
    return None
