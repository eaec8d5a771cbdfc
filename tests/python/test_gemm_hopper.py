"""The warp-specialized WGMMA GEMM (tvm_tma.kernels.gemm): CUDA text, sm_90a assembly, and
(on a Hopper GPU) every element of C against an fp32 numpy reference within
``error_bound``."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gemm_kernels import built_fixture, explained_gemm, mainloop_step_copies, parsed_gemm

import tvm_tma
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import MAX_SHARED, GemmConfig
from tvm_tma.kernels.operands import AOperand
from tvm_tma.kernels.reference import run
from tvm_tma.kernels.tiling import (
    HALF_ROWS_SHORT_STEPS,
    QUARTER_TILES,
    TRIM_MAX_STAGES,
    TRIM_MIN_STAGES,
    modelled,
    narrow_half_rows,
    on_half_rows,
)
from tvm_tma.kernels.wgmma import mma_columns
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.scripts import load_script

REPO = Path(__file__).resolve().parents[2]

#: Every shape class of the benchmark at small sizes: whole tiles, ragged edges in M, N and
#: K at once, a K shorter than one step, more tiles than CTAs (persistent loop), both B
#: layouts, both dtypes, both tile widths.
CASES = [
    GemmConfig(256, 512, 256),
    GemmConfig(1, 256, 256),  # M = 1: one row, the rest of the row block zeros
    GemmConfig(1001, 520, 136),  # M odd: no TMA stride depends on it
    GemmConfig(49, 512, 1152, block_n=64, stages=8, epilogue_n=0, b_layout="kn"),
    GemmConfig(256, 512, 256, stages=3, epilogue_n=0),
    GemmConfig.for_problem(1000, 2000, 3000),
    GemmConfig.for_problem(300, 128, 2048),  # 3 tiles: 8 ordered K parts, ping-pong
    GemmConfig.for_problem(7, 1000, 2048),  # one row block: ordered parts, 256B L2 fills
    # (on 64 x 128 tiles: M <= 64), and 16 K steps whose 40 tiles of 128 rows become 72 of
    # 64 (M, N and K ragged) in 2x1 clusters sharing B (its 2000-byte rows straddle
    # sectors): 9 row blocks, so the last cluster's second CTA has no rows of A or C.
    GemmConfig.for_problem(520, 1000, 1000),
    # The wave model's 128 x 192 tiles (C in 64-column stages): filling one wave, in 2x1
    # clusters where the rows straddle L2 lines (K = 1000, N = 4040 ragged), and with
    # stream-K sharing the last wave's 60 tiles.
    GemmConfig.for_problem(768, 4096, 1024),
    GemmConfig.for_problem(700, 4040, 1000),
    GemmConfig(1536, 3072, 520, block_n=192, stages=5, epilogue_n=64, stream_k=True),
    # Stream-K sharing the last full wave with the partial one (stream_k_waves=2): 15
    # tiles on 9 CTAs all cut into runs; and 32 cluster tiles on 7 clusters (4 past 4 full
    # waves: 11 shared).
    GemmConfig(520, 648, 1000, stream_k=True, stream_k_waves=2, ctas=9),
    GemmConfig(1000, 2000, 3000, cluster=2, stream_k=True, stream_k_waves=2, ctas=14),
    GemmConfig(200, 136, 328),
    # The tail split: the tiles past the last full wave cut into ordered K parts, one
    # last round. 64 tiles on 20 CTAs (3 waves, 4 left over in 5 parts of 47 ragged K
    # steps: a short part 0 of 7, then four of 10); 2x1 clusters (6 cluster tiles left
    # over on 13 clusters, 2 parts each); the K x N B in fp16 (3 tiles left over after a
    # wave of 12, in 4 parts); and the model's own before 192-row tiles took the problem,
    # 64 of 196 tiles of 128 x 128 in 2 parts of 8 K steps (its default now: 132 tiles
    # of 192 x 128, one wave).
    GemmConfig(1000, 2000, 3000, tail_split=5, ctas=20),
    GemmConfig(1000, 2000, 3000, cluster=2, tail_split=2, ctas=26),
    GemmConfig(520, 648, 776, b_layout="kn", dtype="float16", tail_split=4, ctas=12),
    GemmConfig(6272, 512, 1024, block_n=128, stages=6, epilogue_n=0, tail_split=2),
    GemmConfig.for_problem(6272, 512, 1024),
    GemmConfig(1000, 2000, 3000, ctas=16),
    # One K block as narrow as a K of at most 32 (tiling.fitted_k_block): K = 8 in a block
    # of 16 (its last 8 columns zero-filled) on ping-pong 64 x 256 tiles (in place of two
    # rounds of 2x1 clusters: tiling.in_one_step_pingpong), K = 24 in one of 32 on 128 x
    # 144 tiles in 2x1 clusters, K = 16 on a swap of few rows; and K = 56 in one block of
    # 64 on ping-pong 128 x 128 tiles (273 of them, 2 to 3 a CTA).
    GemmConfig.for_problem(303, 8680, 8),
    GemmConfig.for_problem(2756, 824, 24),
    GemmConfig.for_problem(46, 6120, 16),
    GemmConfig.for_problem(770, 4928, 56),
    GemmConfig(128, 256, 40, b_layout="kn"),
    GemmConfig(384, 768, 512, b_layout="kn", ctas=5),
    GemmConfig(264, 520, 136, dtype="float16"),
    GemmConfig(264, 520, 136, dtype="float16", b_layout="kn"),
    GemmConfig(512, 384, 1024, block_n=128, stages=4, group_m=2, ctas=7),
    GemmConfig(192, 320, 200, block_n=128, stages=5, b_layout="kn", dtype="float16"),
    GemmConfig(520, 648, 520, ctas=9),
    GemmConfig(256, 264, 192, stages=4, epilogue_n=64, b_layout="kn"),
    # Tiles a multiple of 32 but not of 64 wide (B as N x K): C staged 32 columns at a time
    # in 64B-swizzled stages. Ragged M and K (the UNet K = 320 layer's 160-wide tiles),
    # ragged N with split-K reduce-adds, fp16 in 2x1 clusters (each CTA multicasts 112 of
    # the 224 B rows), ping-pong 64-row tiles (two 64B-swizzled C stages).
    GemmConfig(1000, 320, 520, block_n=160, epilogue_n=32, stages=5),
    GemmConfig(264, 136, 136, block_n=96, epilogue_n=32, split_k=2),
    GemmConfig(200, 448, 200, block_n=224, epilogue_n=32, dtype="float16", cluster=2, ctas=4),
    GemmConfig(200, 320, 136, block_m=64, block_n=160, epilogue_n=32, schedule="pingpong",
               ctas=3),
    # Widths no multiple of 32 (any multiple of 8, B as N x K): the whole tile's C staged
    # unswizzled, 16 columns per stmatrix .x4 and an 8-column tail through .x2. Ragged M, N
    # and K at 104 (the model's trimmed width for N = 296); 24 wide (under 64); 152 with
    # split-K reduce-adds; ping-pong and 192-row tiles at 104; 2x1 clusters at 112 (56 B
    # rows a CTA) and 1x2 at 104; the model's own (3000 x 296 x 512: 3 blocks of 104).
    GemmConfig(300, 248, 200, block_n=104, stages=6, epilogue_n=0),
    GemmConfig(130, 24, 64, block_n=24, stages=8, epilogue_n=0),
    GemmConfig(257, 456, 512, block_n=152, stages=5, epilogue_n=0, split_k=2, ctas=7),
    GemmConfig(300, 248, 200, block_n=104, stages=6, epilogue_n=0, schedule="pingpong"),
    GemmConfig(500, 248, 200, block_m=192, block_n=104, stages=5, epilogue_n=0, ctas=5),
    GemmConfig(512, 224, 256, block_n=112, stages=6, epilogue_n=0, cluster=2, ctas=4),
    GemmConfig(512, 208, 256, block_n=104, stages=6, epilogue_n=0, cluster_n=2, ctas=4),
    GemmConfig.for_problem(3000, 296, 512),
    GemmConfig(300, 8, 200, block_n=8, stages=8, epilogue_n=0),  # one .x2 a slice
    # 16-wide tiles (N = 8) in 2x1 clusters on 32-byte rows (the model's choice until rows
    # of whole sectors ran faster without the cluster).
    GemmConfig(136, 8, 16, block_n=16, stages=12, epilogue_n=0, cluster=2),
    # Ping-pong: each consumer warpgroup takes whole 128 x 128 tiles, in turns; ragged,
    # persistent (several tiles per warpgroup), both layouts.
    GemmConfig(1000, 2000, 3000, block_n=128, stages=5, epilogue_n=64, schedule="pingpong"),
    GemmConfig(520, 648, 520, block_n=128, stages=6, epilogue_n=64, schedule="pingpong",
               b_layout="kn", dtype="float16", ctas=5),
    GemmConfig(200, 520, 136, block_m=64, block_n=256, stages=4, schedule="pingpong",
               ctas=3),
    # 2x1 clusters multicasting B: an odd number of row blocks (the last cluster's second
    # CTA has no rows of A or C), persistent clusters, both layouts, with ping-pong.
    GemmConfig(1000, 2000, 3000, cluster=2),
    GemmConfig(384, 768, 512, b_layout="kn", cluster=2, ctas=4),
    GemmConfig(1000, 2000, 3000, block_n=128, stages=5, epilogue_n=64, schedule="pingpong",
               cluster=2, ctas=6, dtype="float16"),
    # 1xN clusters multicasting A (each CTA its share of the rows): 1x4 with a ragged
    # column count (9 column blocks: the last cluster's last 3 CTAs are past N), ping-pong
    # 1x2 with the K x N B, 1x4 on 64-row tiles (16-row shares), 1x2 with 8-column pieces.
    GemmConfig(1000, 576, 520, block_n=64, stages=8, epilogue_n=0, cluster_n=4, ctas=8),
    GemmConfig(520, 648, 520, block_n=128, stages=5, epilogue_n=64, schedule="pingpong",
               b_layout="kn", cluster_n=2, ctas=6, dtype="float16"),
    GemmConfig(200, 520, 136, block_m=64, block_n=128, stages=6, cluster_n=4, ctas=4),
    GemmConfig(264, 256, 200, block_k=16, a_copy_k=8, block_n=64, stages=8, epilogue_n=0,
               cluster_n=2, ctas=4),
    # 2x2 and 2x4 clusters, each CTA sending its share of A to its row and of B to its
    # column: ragged M and N (5 row blocks and 9 column blocks: the last clusters' CTAs
    # past M or N), persistent clusters (several tiles each), 112-wide tiles (56-row
    # halves of B), ping-pong, the tail split in ordered parts, and the model's choice on
    # 120 CTAs (straddled rows of a wide problem).
    GemmConfig(600, 2200, 520, block_n=256, cluster=2, cluster_n=2, ctas=8),
    GemmConfig(520, 1000, 264, block_n=112, stages=6, epilogue_n=0, cluster=2, cluster_n=4,
               ctas=8),
    GemmConfig(1000, 2000, 520, block_n=128, stages=5, epilogue_n=64, schedule="pingpong",
               cluster=2, cluster_n=2, ctas=8, dtype="float16"),
    GemmConfig(1300, 1000, 520, cluster=2, cluster_n=2, tail_split=2, ctas=20),
    GemmConfig.for_problem(600, 2224, 3000),
    # The model's ping-pong 64 x 256 tiles for a few row blocks (300 rows: 5 of 64, the
    # last 44 rows; one tile a CTA, 115 of them).
    GemmConfig.for_problem(300, 5680, 2224),
    # A shared in clusters of 4 along N (sharing_a_in_fours): 100 rows (one row block, 28
    # rows past M), 24 column blocks, rows of 14000 bytes (straddled lines) in 5 ordered
    # K parts of 22 K steps, ping-pong, on 120 CTAs.
    GemmConfig.for_problem(100, 3072, 7000),
    # 64-row tiles of another width where M is at most 64 (on_half_rows): 40 rows (24 past
    # M), N = 17000 in 107 column blocks of 160 (the last 40 wide), K = 1000 (15.6 steps),
    # 7 stages, C in 32-column stages.
    GemmConfig.for_problem(40, 17000, 1000),
    # One exact wave (in_one_exact_wave): 1000 rows in 16 row blocks of 64 (the last 40
    # rows) by 8 column blocks of 80 (C staged whole), 20 K steps each on a ring of 8
    # stages (with_narrow_ring), on 128 CTAs.
    GemmConfig.for_problem(1000, 640, 1280),
    # A short problem's smallest plain tiles of one wave (in_short_wave): 131 rows in 3
    # row blocks of 64 (the last 3 rows), N = 1320 in 21 column blocks of 64 (the last 40
    # wide), K = 136 (3 steps, the last 8 wide): 63 tiles of 64 x 64 on 132 CTAs, where
    # 2x2 clusters took 22 of 128 x 128.
    GemmConfig.for_problem(131, 1320, 136),
    # 192-row tiles, three consumer warpgroups of 64 rows: ragged M, N and K (1000 rows:
    # 6 row blocks, the last 40 rows) on 5 CTAs (two rounds), the K x N B in fp16 at 192
    # columns (96 accumulators a thread), and the tail split (12 tiles on 9 CTAs: 3 left
    # over, each in 3 ordered K parts: 4, 6 and 6 of its 16 K steps).
    GemmConfig(1000, 520, 520, block_m=192, block_n=128, stages=5, epilogue_n=64, ctas=5),
    GemmConfig(520, 384, 264, block_m=192, block_n=192, stages=4, epilogue_n=64,
               b_layout="kn", dtype="float16", ctas=3),
    GemmConfig(1000, 256, 1024, block_m=192, block_n=128, stages=5, epilogue_n=64,
               tail_split=3, ctas=9),
    # 256-row tiles, two consumer warpgroups of 128 rows (two m64 sub-tiles each, B read
    # once for 256 rows): ragged M (3 row blocks, the last 188 rows), N (5 column blocks
    # of 128, the last 8 wide) and K (4.1 K steps) on 2 CTAs; fp16 with the K x N B at 64
    # columns in 32-column C stages (4 row blocks, the last 232 rows; 3.1 K steps).
    GemmConfig(700, 520, 264, block_m=256, block_n=128, stages=4, epilogue_n=64, ctas=2),
    GemmConfig(1000, 512, 200, block_m=256, block_n=64, stages=4, epilogue_n=32,
               b_layout="kn", dtype="float16", ctas=3),
    # 192-row tiles in 2x1 clusters (the model's where rows straddle L2 lines), each CTA
    # multicasting half of B: 160 wide (80-row halves, C in 32-column stages) with ragged
    # M (6 row blocks, the last 40 rows), N (the last block 120 wide) and K (520: 8.1 K
    # steps); 192 wide (96-row halves) with 4 row blocks, the last 124 rows, and N = 1000
    # in 6 blocks, the last 40 wide.
    GemmConfig(1000, 600, 520, block_m=192, block_n=160, stages=4, epilogue_n=32,
               cluster=2, ctas=6),
    GemmConfig(700, 1000, 520, block_m=192, block_n=192, stages=4, epilogue_n=64, cluster=2,
               ctas=8),
    # Tiles wider than wgmma's N: two m64n160 (or n144) MMAs a k16 step, 160 accumulators
    # a consumer thread, 3 ring stages: ragged M (6 row blocks, the last 60 rows), N (4
    # column blocks of 320, the last 40 wide) and K (8.1 K steps), C in 64-column stages;
    # 288 wide in 32-column C stages; 320 in 2x1 clusters (160-row halves of B). The
    # first (the model's form) in two alternating C stages, its last column block's four
    # stores past N skipped; so 128 x 256 tiles of N = 600, the last block's last two.
    GemmConfig(700, 1000, 520, block_n=320, stages=3, epilogue_n=64, epilogue_buffers=2,
               ctas=4),
    GemmConfig(300, 600, 264, block_n=256, stages=4, epilogue_n=64, epilogue_buffers=2,
               ctas=3),
    # Two C stages each the whole 128 x 128 tile, alternating from tile to tile: 8 row
    # blocks (the last 104 rows) by 2 column blocks on 3 CTAs, 6 rounds.
    GemmConfig(1000, 256, 64, block_n=128, stages=4, epilogue_n=0, epilogue_buffers=2,
               ctas=3),
    # A resident B (one 128 x 56 tile, K = 56 past the block's 64 zero-filled): 8 row
    # blocks on 2 CTAs, 4 rounds on 3 ring slots (the fourth reuses slot 0's B); and
    # K x N with 104 rows in the last block, on 5 slots.
    GemmConfig(1000, 128, 56, block_n=128, stages=3, epilogue_n=0, epilogue_buffers=2,
               b_resident=True, ctas=2),
    GemmConfig(1000, 64, 64, b_layout="kn", block_n=64, stages=5, epilogue_n=64,
               b_resident=True, ctas=1),
    # ... and shared in one 2x1 cluster (4 rounds a CTA on 3 slots).
    GemmConfig(1000, 128, 56, block_n=128, stages=3, epilogue_n=0, epilogue_buffers=2,
               b_resident=True, cluster=2, ctas=2),
    # A resident B of 3 K steps on 6 slots (slot s holds step s % 3): K = 40 in 16-wide
    # blocks copied 8 columns at a time (the last block's second piece past K, never
    # loaded), 6 row blocks (the last 60 rows) on 2 CTAs; and K = 200 in 4 K steps of 64
    # (the last 8 columns of K) on 4 slots, K x N, in one 2x1 cluster.
    GemmConfig(700, 40, 40, block_m=128, block_n=40, block_k=16, a_copy_k=8, stages=6,
               epilogue_n=0, b_resident=True, ctas=2),
    GemmConfig(1000, 64, 200, b_layout="kn", block_n=64, stages=4, epilogue_n=64,
               b_resident=True, cluster=2, ctas=2),
    GemmConfig(300, 576, 200, block_n=288, stages=3, epilogue_n=32, ctas=2),
    GemmConfig(520, 640, 264, block_n=320, stages=3, epilogue_n=32, cluster=2, ctas=4),
    # Split-K through reduce-add stores (C += A @ B): even parts, a last part shorter than
    # the others (5 K steps in 3 parts of 2), with a cluster.
    GemmConfig(1000, 2000, 3000, split_k=2),
    GemmConfig(256, 264, 320, split_k=3, b_layout="kn", dtype="float16", ctas=7),
    GemmConfig(520, 648, 1000, split_k=2, cluster=2, ctas=10),
    # 32- and 16-wide K blocks: K-major slots of 64- or 32-byte rows (64B / 32B swizzle, 2
    # or 1 k16 MMAs per K step): ragged M and K (K = 200: a last step of 8 columns), fp16
    # 128-wide tiles, 160-wide tiles (32-column C stage) behind a ring of 10 stages, the
    # K x N B (block_k rows of 64-column 128B atoms) with ping-pong 128-row tiles (two
    # 64-row A sub-tiles of 64-byte rows) and in 2x1 clusters (each CTA multicasts a 16-row
    # half of a 16 x 256 B tile: 2 of its 4 atoms).
    GemmConfig(264, 256, 200, block_k=32),
    GemmConfig(200, 320, 136, block_k=16, block_n=128, dtype="float16"),
    GemmConfig(1000, 320, 520, block_n=160, epilogue_n=32, block_k=16, stages=10),
    GemmConfig(264, 256, 200, block_k=32, block_n=128, stages=8, epilogue_n=64,
               schedule="pingpong", b_layout="kn", ctas=3),
    GemmConfig(384, 768, 520, block_k=16, stages=8, b_layout="kn", cluster=2, ctas=4,
               dtype="float16"),
    # A in two 8-column pieces per 16-wide K block (unswizzled core-matrix slots, what a
    # conv2d with C 8 mod 16 takes): K = 200 ends on a half block, whose MMA reads zeros
    # for the missing piece; ping-pong 128-row tiles (two 64-row sub-tiles) in clusters.
    GemmConfig(264, 256, 200, block_k=16, a_copy_k=8, stages=8),
    GemmConfig(520, 128, 136, block_k=16, a_copy_k=8, block_n=128, stages=8,
               schedule="pingpong", cluster=2, ctas=4, dtype="float16"),
    # Ordered split-K (C = A @ B: part 0 stores, the other parts add after it): 3 parts
    # of a ragged problem, ping-pong 128 x 128 tiles on 6 CTAs (two rounds), 2x1 clusters
    # with the K x N B in fp16.
    GemmConfig(1000, 520, 1000, split_k=3, split_k_ordered=True),
    GemmConfig(520, 128, 1000, block_n=128, stages=5, epilogue_n=64, schedule="pingpong",
               split_k=2, split_k_ordered=True, ctas=6),
    GemmConfig(264, 256, 520, b_layout="kn", dtype="float16", cluster=2, split_k=2,
               split_k_ordered=True, ctas=4),
    # The wave model's ordered parts of wide cooperative tiles: 6 tiles of 128 x 192 (N
    # ragged) in 2 parts on 12 CTAs; 15 of 128 x 256 in 3 parts of 32, 32 and 30 K steps
    # (part 0 the short one) over 3 rounds on 18 CTAs, M ragged.
    GemmConfig.for_problem(256, 512, 4096, ctas=12),
    GemmConfig(264, 1280, 6000, split_k=3, split_k_ordered=True, ctas=18),
    # The wave model's 128 x 160 tiles (C staged 32 columns at a time, 64B swizzle): in
    # 2x1 clusters (K = 200: rows straddle L2 lines, M ragged), with stream-K (6 tiles on
    # 4 CTAs), and in 2 ordered K parts (4 tiles on 8 CTAs).
    GemmConfig.for_problem(200, 320, 200, ctas=4),
    GemmConfig.for_problem(264, 320, 4096, ctas=4),
    GemmConfig.for_problem(200, 320, 4096, ctas=8),
    # A short problem on 64 x 64 tiles (tiling.narrow_half_rows: 15 tiles of 64 x 128 on
    # 132 CTAs become 25), M and N ragged (300 rows: the last row block 44; 320 columns).
    GemmConfig.for_problem(300, 320, 512),
    # Stream-K: every CTA an equal run of K steps; tiles cut between runs are finished by
    # the CTA holding their K step 0. Many tiles per run (ctas=7), a tile shared by four
    # runs (ctas=20, K x N B, fp16), each tile cut into ~17 runs (M = 49, 8 tiles for 132
    # CTAs: the ResNet 7x7x512 shape at one image), the 1000x2000x3000 problem, and one
    # with whole tiles before the runs (81 tiles of 128 x 256 on 20 CTAs: 60 tiles
    # in the plain order; the partial wave, one tile of 9 K steps, is too short for 20
    # runs, so the last full wave joins it: 21 tiles cut into runs).
    GemmConfig(520, 648, 520, stream_k=True, ctas=7),
    GemmConfig(256, 264, 4096, block_n=128, stages=6, epilogue_n=0, b_layout="kn",
               dtype="float16", stream_k=True, ctas=20),
    GemmConfig(49, 512, 4608, block_n=64, stages=8, epilogue_n=0, stream_k=True),
    GemmConfig(1000, 2000, 3000, block_n=128, stages=6, epilogue_n=0, stream_k=True),
    GemmConfig(1152, 2304, 520, stream_k=True, ctas=20),
    # Stream-K in 2x1 clusters (each CTA hands over its own row block; B multicast): an
    # odd number of row blocks (the last cluster's second CTA is past M), and 128 x 256.
    GemmConfig(300, 264, 1024, block_n=128, stages=6, epilogue_n=0, cluster=2,
               stream_k=True, ctas=8),
    GemmConfig(1568, 512, 4608, cluster=2, stream_k=True),
    # C^T = B A^T (swap_ab: B's rows the MMAs' M, A's their N, C stored transposed through
    # stmatrix .trans): the default for 16 rows (64 tiles of 128 x 16 in 2 ordered K
    # parts); 20 rows in 24-wide tiles (4 padding columns, whose rows of C the stores
    # skip) on 5 CTAs (two rounds), C staged 8 rows at a time in two alternating stages;
    # 200 rows on 64-row tiles in 3 reduce-add parts, C in 40-row stages; ping-pong 128 x
    # 40 tiles; three consumer warpgroups of 64 (192 x 8 tiles, 1 row); stream-K; 2x1
    # clusters sharing A's 32 rows (16 each).
    GemmConfig.for_problem(16, 8192, 2048),
    # Past 256 rows, A's 264 rows in 2 column blocks of 136 (the last 128 rows, 8 padding
    # rows skipped by the store), 16 tiles of N in 4 ordered K parts.
    GemmConfig.for_problem(264, 2048, 4096),
    GemmConfig(20, 1000, 1000, swap_ab=True, block_n=24, epilogue_n=8, epilogue_buffers=2,
               stages=8, ctas=5),
    GemmConfig(200, 1000, 520, swap_ab=True, block_m=64, block_n=200, epilogue_n=40,
               split_k=3, stages=4, ctas=12),
    GemmConfig(40, 2000, 1000, swap_ab=True, schedule="pingpong", block_n=40, epilogue_n=0,
               stages=6, ctas=7),
    GemmConfig(1, 1000, 264, swap_ab=True, block_m=192, block_n=8, epilogue_n=0, stages=6,
               ctas=3),
    GemmConfig(24, 1000, 1000, swap_ab=True, block_n=24, epilogue_n=0, stages=8,
               stream_k=True, ctas=6),
    GemmConfig(32, 1000, 520, swap_ab=True, block_n=32, epilogue_n=0, cluster=2,
               stages=8, ctas=4),
    # Swapped with the tail split (24 tiles of 128 x 40 on 10 CTAs: two full rounds, 4
    # tiles left in 2 ordered parts) and in 1x2 clusters sharing the MMAs' A tile (B's
    # rows) between the two column blocks of A's 100 rows (56 wide, the second 44 rows).
    GemmConfig(40, 3000, 2000, swap_ab=True, block_n=40, epilogue_n=0, tail_split=2,
               stages=8, ctas=10),
    GemmConfig(100, 2000, 1000, swap_ab=True, block_n=56, epilogue_n=0, cluster_n=2,
               stages=8, ctas=8),
    # Few columns (tiling.on_few_columns): N = 192 in 3 row blocks of 64 by M = 1000 in 4
    # column blocks of 256 (the last 232 rows), the default on 12 CTAs.
    GemmConfig.for_problem(1000, 192, 320, ctas=12),
    # One column block in ordered K parts (tiling.in_one_column_block): 9 row blocks of
    # 128 x 72 tiles (the last 76 rows; C staged whole, unswizzled), 64 K steps in 13
    # parts on 132 CTAs (part 0 of 4 steps, the others of 5).
    GemmConfig.for_problem(1100, 72, 4096),
]


def _name(cfg: GemmConfig) -> str:
    return (f"{cfg.m}x{cfg.n}x{cfg.k}-{cfg.dtype}-{cfg.b_layout}-bm{cfg.block_m}"
            f"-bn{cfg.block_n}{f'-bk{cfg.block_k}' if cfg.block_k not in (64, 128) else ''}"
            f"-s{cfg.stages}-e{cfg.epilogue_cols}-c{cfg.ctas}"
            f"-{cfg.schedule}-x{cfg.cluster}x{cfg.cluster_n}-k{cfg.split_k}"
            f"{'-sk' if cfg.stream_k else ''}{'2' if cfg.stream_k_waves == 2 else ''}"
            f"{'-ordered' if cfg.split_k_ordered else ''}"
            f"{f'-tail{cfg.tail_split}' if cfg.tail_split > 1 else ''}"
            f"{f'-pieces{cfg.a_copy_k}' if cfg.a_copy_k else ''}"
            f"{'-swap' if cfg.swap_ab else ''}")


built = built_fixture(CASES, _name)


def test_gemm_assembles_for_sm90a(built):
    cfg, kernel = built
    assert len(assemble(kernel.cuda_source)) > 0


def test_gemm_issues_the_expected_instructions(built):
    cfg, kernel = built
    src = kernel.cuda_source
    ptx_type = "bf16" if cfg.dtype == "bfloat16" else "f16"
    # One MMA a k16 step per 64-row sub-tile, or on a tile wider than 256 two of half the
    # width, the second on B's rows from the half on (its descriptor's start that many
    # 16-byte units further) into the second half of the accumulators.
    half = cfg.block_n // 2
    columns = [(0, cfg.block_n)] if cfg.block_n <= 256 else [(0, half), (half, half)]
    assert mma_columns(cfg) == columns
    for _, width in columns:
        assert f"wgmma.mma_async.sync.aligned.m64n{width}k16.f32.{ptx_type}.{ptx_type}" in src
    if cfg.block_n > 256:
        assert f"m64n{cfg.block_n}k" not in src
        row_bytes = cfg.block_k * cfg.element_bytes
        for kk in range(cfg.block_k // 16):
            assert f"desc_b_ptr[0] + (uint64_t){half * row_bytes // 16 + 2 * kk}ULL)" in src
    # block_k / 16 k16 MMAs per K step (4, 2 or 1) for each 64-row sub-tile a warpgroup
    # computes, the transpose bit set only for the K x N B; a mainloop unrolled spells out
    # every step (mainloop_step_copies).
    # A stream-K kernel with whole tiles before its runs has two mainloops (and two sets
    # of load and store call sites): the whole tiles' and the runs'.
    # So has a tail split with full waves before its parts.
    trans_b = 1 if cfg.b_layout == "kn" else 0
    copies = mainloop_step_copies(cfg)
    loops = len(copies)
    per_step = cfg.block_k // 16 * sum(copies)
    for sub in range(cfg.consumer_rows // 64):
        for first, _ in columns:
            assert src.count(f"_1_1_0_{trans_b}(acc_ptr[{(sub * cfg.block_n + first) // 2}]"
                             ) == per_step
    assert src.count(f"_1_1_0_{trans_b}(acc_ptr[") == (per_step * cfg.consumer_rows // 64
                                                      * len(columns))
    # The descriptors: K-major rows of block_k elements in 8-row atoms (stride byte offset
    # 8 rows, in 16-byte units) with the swizzle of the row (3, 2, 1: 128B, 64B, 32B, as the
    # A and B copies' tensor maps have it); the K x N B: 64-column 128B atoms block_k rows
    # of 128 bytes apart.
    row_bytes = cfg.block_k * cfg.element_bytes
    swizzle = {128: 3, 64: 2, 32: 1}[row_bytes]
    descriptors = re.findall(r"ptx_wgmma_encode_matrix_descriptor\(\(&\(desc_(\w)_ptr\[0\]\)\)"
                             r", .*, ([^,]+), (\d+), (\d+)\);", src)
    k_major = ("1", str(8 * row_bytes // 16), str(swizzle))
    b_fields = ((str(cfg.block_k * 128 // 16), "64", "3") if cfg.b_layout == "kn"
                else k_major)
    assert {tuple(fields) for name, *fields in descriptors if name == "b"} == {b_fields}
    a_descriptors = {tuple(fields) for name, *fields in descriptors if name == "a"}
    if not cfg.a_copy_k:
        assert a_descriptors == {k_major}
    else:
        # Unswizzled (0) core matrices of 8 rows x 16 bytes, 128 bytes apart along M
        # (stride 8), the next 8-column piece block_m x 16 bytes on (leading offset).
        assert {fields[1:] for fields in a_descriptors} == {("8", "0")}
        leads = {fields[0] for fields in a_descriptors}
        if not cfg.a_zero_bytes:
            assert leads == {str(cfg.block_m)}
    if cfg.a_zero_bytes:
        # Where K ends on a half block, the last step's leading offset reaches the zeroed
        # piece after the ring instead: its distance from the step's slot. A rolled
        # mainloop picks it at run time; an unrolled one writes the last step's (a
        # constant where the slot is, an expression of the round where it is not).
        zero_lead = (cfg.a_zero_start - cfg.a_ring_start) // 16
        slot_units = cfg.a_tile_bytes // 16
        if 1 in mainloop_step_copies(cfg):
            assert leads == {re.search(r"condval_\d+", src).group()}
            # (the ring slot: the use number modulo the stages, masked for a power of 2)
            slot = rf"[\w()*+ ]+ (% {cfg.stages}|& {cfg.stages - 1})"
            assert re.search(rf"condval_\d+ = \({zero_lead} - \(\({slot}\) \* "
                             rf"{slot_units}\)\);", src)
        else:
            last = leads - {str(cfg.block_m)}
            assert str(cfg.block_m) in leads and len(last) == 1
            (lead,) = last
            # (an expression: a slot's offset less a multiple of the slot, the slot
            # folded where the K steps divide the stages: 1536 - ((3j + 2) % 6) * 256 is
            # 1024 - (j & 1) * 768)
            offsets = {zero_lead - s * slot_units for s in range(cfg.stages)}
            folded = re.fullmatch(r"\((\d+) - \(.* \* (\d+)\)\)", lead)
            assert str(lead) in {str(o) for o in offsets} or (
                folded and int(folded[1]) in offsets and int(folded[2]) % slot_units == 0)
    a_copy, b_copy = explained_gemm(cfg).copies[:2]
    assert a_copy.plan.tensor_map.swizzle == (0 if cfg.a_copy_k else swizzle)
    assert b_copy.plan.tensor_map.swizzle == (3 if cfg.b_layout == "kn" else swizzle)
    # The producer gives registers back; each consumer takes 232 beside one other
    # consumer warpgroup, 152 beside two (192-row tiles: 4 warpgroups, 512 threads).
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in src
    assert f"setmaxnreg.inc.sync.aligned.u32 {232 if cfg.consumers <= 2 else 152};" in src
    assert f"__launch_bounds__({cfg.threads})" in src
    assert cfg.threads == 128 * (1 + cfg.consumers)
    # One TMA load call site for A, one for B; N-wide tiles (the K x N B slot, the C tile)
    # go in one 3-D box or, where an N edge keeps the 64-column swizzle atoms from folding
    # into one dim, one box per atom.
    # A copied in 8-column pieces: one call site per piece (the piece loop is unrolled).
    loads = len(re.findall(r"tvm_tma_load_\w+\(\(", src))
    a_sites = cfg.a_pieces
    steps = sum(copies)
    # An unrolled mainloop's last K step of one 8-column piece (K 8 mod 16) has no copy of
    # the second piece (a rolled one skips it at run time).
    missing = sum(count > 1 for count in copies) if cfg.a_zero_bytes else 0
    assert loads + missing in (((a_sites + 1) * steps, (a_sites + cfg.block_n // 64) * steps)
                               if cfg.b_layout == "kn" else ((a_sites + 1) * steps,))
    store = "reduce" if cfg.split_k > 1 else "store"
    stores = len(re.findall(rf"tvm_tma_{store}_\w+\(\(", src))
    stages = cfg.block_n // cfg.epilogue_cols  # the epilogue loop over C stages is unrolled
    # (A swapped tile's stage is block_m of C's columns: whole 64-column atoms.)
    stage_columns = cfg.block_m if cfg.swap_ab else cfg.epilogue_cols
    per_site = (stages, stages * max(1, stage_columns // 64))
    assert stores in ({a + b for a in per_site for b in per_site} if loops == 2 else per_site)
    if cfg.tail_split > 1:
        # The parts of a tile left over add into C (one reduce-add site per C stage).
        assert len(re.findall(r"tvm_tma_reduce_\w+\(\(", src)) in per_site
    if cfg.order_waits:
        # Part 0 stores (a plain store site per C stage beside the reduce-add one), after
        # its stores complete (wait_group 0, not .read) and a proxy fence it releases the
        # tile's flag; the other parts acquire it, fence, add, and count themselves out
        # with atom.inc bounded by the parts - 1 (the last one wraps the flag to 0). A tail
        # split's whole tiles have store sites of their own.
        if cfg.split_k_ordered:
            assert len(re.findall(r"tvm_tma_store_\w+\(\(", src)) in per_site
        for ptx in ("ld.acquire.gpu.global.b32 %0, [%1];", "cp.async.bulk.wait_group 0;",
                    "fence.proxy.async.global;", "st.release.gpu.global.b32 [%0], %1;",
                    "atom.gpu.global.inc.u32 _, [%0], %1;"):
            assert ptx in src, ptx
        assert re.search(rf"atom_bitbucket_gpu_global_inc_u32\(.*flags_ptr.*\(uint\)"
                         rf"{cfg.reduction_parts - 1}\);", src)
        release = src.index("tvm_builtin_ptx_st_release_gpu_global_b32((&(flags_ptr")
        assert (src.rindex("cp_async_bulk_wait_group_async_bulk_wait_group_0()", 0, release)
                < src.rindex("fence_proxy_proxy_async_global", 0, release))
    # The C stage is whole 64-column atoms with the 128B swizzle, or (a tile no multiple of
    # 64 wide) 32 columns of 64-byte rows with the 64B swizzle: the store's tensor map
    # carries the stage's swizzle and its inner box is one swizzle span. A width no
    # multiple of 32 is one unswizzled stage, stored by one box holding the whole tile
    # (where the tile spans whole rows of C the planner may fold them into a wider box).
    store_map = explained_gemm(cfg).copies[-1].plan.tensor_map
    if cfg.swap_ab:
        # C^T's tile transposed: epilogue_cols of C's rows by block_m of its columns, in
        # 128B-swizzled 64-column atoms.
        assert (store_map.swizzle, store_map.box_dims[0]) == (3, 64)
        assert store_map.box_dims[1] == cfg.epilogue_cols
    elif cfg.block_n % 32:
        # (in the store's element type: whole rows of C may be planned as wider elements)
        element = {"uint64": 8, "uint32": 4}.get(store_map.dtype, cfg.out_bytes)
        assert store_map.swizzle == 0
        assert math.prod(store_map.box_dims) * element == (
            cfg.block_m * cfg.block_n * cfg.out_bytes)
    else:
        want = (3, 64) if cfg.epilogue_cols % 64 == 0 else (2, 32)
        assert (store_map.swizzle, store_map.box_dims[0]) == want
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global"
                          r"\.mbarrier::complete_tx::bytes", src)) >= 1
    if cfg.reduction_parts > 1:
        assert re.search(r"cp\.reduce\.async\.bulk\.tensor\.[23]d\.global\.shared::cta"
                         r"\.add\.bulk_group", src)
        assert ("tvm_tma_store_" in src) == cfg.order_waits
    else:
        assert re.search(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared::cta\.bulk_group", src)
    # B is multicast exactly in clusters along M (each CTA its slice of the tile, the
    # planner's split); A exactly in clusters along N, each CTA its own rows of the tile
    # to every CTA of the cluster (the mask of all of them: the last call argument). A slot
    # is then released in every CTA of the cluster (lane r of each consumer warpgroup
    # arrives on CTA r), with the CTA-scope semantics of a plain arrive and wait.
    multicast = r"complete_tx::bytes\.multicast::cluster \["
    # (One template: a 2-D cluster's A and B loads are the same instruction form.)
    assert len(re.findall(multicast, src)) == (cfg.cluster_size > 1)
    rank = "((int)tvm_builtin_cluster_ctaid_x())"
    if cfg.cluster_n > 1 and cfg.cluster == 1:
        a_site = re.search(r"tvm_tma_load_\w+\(\(&\(\(\(\w+\*\)dyn_ptr\)\[(.*)\]\)\),"
                           r" .*, \(ushort\)(\d+)\);", src)
        assert a_site.group(2) == str((1 << cfg.cluster_n) - 1)
        # The CTA's rows start cluster_ctarank * share rows into the slot.
        row_elems = cfg.a_share_rows * (cfg.a_copy_k or cfg.block_k)
        assert f"{rank} * {row_elems})" in a_site.group(1)
    elif cfg.cluster_n > 1:
        # A 2-D cluster: CTA r is row r % 2 and column r // 2 of the cluster's tiles. It
        # sends its share r // 2 of the A tile to the CTAs of its row (bits r % 2 + 2j)
        # and its half r % 2 of the B tile to those of its column (bits 2 (r // 2) + i).
        row_ctas = sum(1 << (2 * j) for j in range(cfg.cluster_n))
        a_elems = cfg.a_share_rows * cfg.block_k
        b_elems = cfg.b_share_rows * cfg.block_k
        loads = [line.strip() for line in src.splitlines()
                 if line.strip().startswith("tvm_tma_load_")]
        assert loads == [load for load in loads if "(ushort)" in load]
        a_slot, b_slot = f"(({rank} >> 1) * {a_elems})", f"(({rank} & 1) * {b_elems})"
        a_loads = [a_slot in load and load.endswith(f"((ushort)({row_ctas} << ({rank} & 1))));")
                   for load in loads].count(True)
        b_loads = [b_slot in load and load.endswith(f"((ushort)(3 << (({rank} >> 1) * 2))));")
                   for load in loads].count(True)
        # (One pair per load loop: two with the tail split's.)
        assert a_loads == b_loads == len(loads) // 2 >= 1
    clustered = cfg.cluster_size > 1
    assert ("mbarrier.arrive.shared::cluster.b64 _, [%0];" in src) == clustered
    assert "arrive.release.cluster" not in src and "wait.parity.acquire.cluster" not in src
    assert ("barrier.cluster.arrive" in src) == clustered
    # Ping-pong warpgroups take turns through named barriers; cooperative ones never do.
    rounds = math.ceil(cfg.work_units / cfg.workers)
    assert ("bar.arrive %0, %1;" in src) == (cfg.schedule == "pingpong" and rounds > 1)
    # The full barriers expect both tiles' bytes; the empty ones one arrival per consumer
    # warpgroup that reads a slot, in every CTA of the cluster.
    # A half last K block (8-column pieces, K 8 mod 16) expects one piece less; its zeroed
    # piece is written once and fenced for the async proxy before any MMA reads it.
    tile_bytes = cfg.a_tile_bytes + cfg.b_tile_bytes
    if cfg.a_zero_bytes:
        half = tile_bytes - cfg.a_tile_bytes // cfg.a_pieces
        if cfg.b_resident:  # B's bytes on a slot's first use, less the piece last
            assert f"condval = {tile_bytes};" in src
            assert f"condval = {cfg.a_tile_bytes};" in src
            assert re.search(rf"\(\(uint\)\(condval_\d+ - {tile_bytes - half}\)\)", src)
        elif 1 in mainloop_step_copies(cfg):  # a rolled mainloop picks it at run time
            assert f"condval = {tile_bytes};" in src and f"condval = {half};" in src
        else:  # an unrolled one announces each step's bytes as a constant
            assert f"(uint){tile_bytes})" in src and f"(uint){half})" in src
        assert re.search(rf"\(\(uint\*\)dyn_ptr\)\[\(.*\) \+ {cfg.a_zero_start // 4}\)\] = "
                         r"\(uint\)0;", src)
        assert "fence.proxy.async.shared::cta;" in src
    elif cfg.b_resident and cfg.work_units * cfg.k_steps > cfg.workers * cfg.stages:
        # A resident B: both tiles' bytes on a slot's first use, A's alone after.
        assert f"condval = {tile_bytes};" in src
        assert f"condval = {cfg.a_tile_bytes};" in src
    else:
        assert f"(uint){tile_bytes})" in src
    init = (r"mbarrier_init_init_shared_b64\(tvm_builtin_cuda_cvta_generic_to_shared"
            r"\(\(&\(\(\(uint64_t\*\)dyn_ptr\)\[(\d+)\]\)\)\), \(uint\)(\d+)\);")
    inits = dict(re.findall(init, src))
    arrivals = cfg.ring_consumers * cfg.cluster_size
    assert inits == {**{str(s): "1" for s in range(cfg.stages)},
                     **{str(cfg.stages + s): str(arrivals) for s in range(cfg.stages)}}


def test_epilogue_rounds_accumulator_pairs_and_stores_whole_matrices(built):
    """The epilogue rounds two neighbouring columns' accumulators into one register
    (``cvt.rn.bf16x2.f32`` / ``.f16x2``, the higher column in the upper half) and writes
    the C stage with ``stmatrix .x4`` (four 8 x 8 blocks per instruction, eight
    accumulators per thread), never one 16-bit element at a time."""
    cfg, kernel = built
    src = kernel.cuda_source
    packed = "bf16x2" if cfg.out_dtype == "bfloat16" else "f16x2"
    assert f'"cvt.rn.{packed}.f32 %0, %1, %2;"' in src
    pairs = re.findall(rf"cvt_{packed}_f32_rn_{packed}_f32\(words_ptr\w*\[(\d)\], "
                       r"acc_ptr\[(\d+)\], acc_ptr\[(\d+)\]\);", src)
    # Within each 64-row slice's block_n / 2 accumulators, register pair 4j + q of eight
    # goes to word q (stmatrix matrix q).
    slice_regs = cfg.block_n // 2
    # (Counted from the stage's first register: a stage of epilogue_cols columns holds
    # epilogue_cols / 2 of them, 8 mod 16 columns ending on a pair of words.)
    stage_regs = cfg.epilogue_cols // 2
    assert pairs and all(int(high) == int(low) + 1
                         and int(low) % slice_regs % stage_regs % 8 == 2 * int(word)
                         for word, high, low in pairs)
    rounded = Counter(int(low) for _, _, low in pairs)
    assert set(rounded) == set(range(0, cfg.accumulators, 2))
    sites = set(rounded.values())  # one epilogue per mainloop (two with stream-K runs)
    assert len(sites) == 1
    # One .x4 per 16 columns of each 64-row slice, one .x2 for an 8-column remainder.
    stores = sites.pop()
    slices = cfg.accumulators // slice_regs
    # C^T's tile (swap_ab) is written transposed: .trans.
    trans = ".trans" if cfg.swap_ab else ""
    x4 = (f"stmatrix_sync_aligned_m8n8_x4{trans.replace('.', '_')}_shared_b16("
          "tvm_builtin_cuda_cvta_generic_to_shared(")
    x2 = (f"stmatrix_sync_aligned_m8n8_x2{trans.replace('.', '_')}_shared_b16("
          "tvm_builtin_cuda_cvta_generic_to_shared(")
    pieces = cfg.block_n // cfg.epilogue_cols
    assert src.count(x4) == slices * pieces * (cfg.epilogue_cols // 16) * stores
    assert src.count(x2) == slices * pieces * (cfg.epilogue_cols % 16 // 8) * stores
    if cfg.epilogue_cols >= 16:
        assert f'"stmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 [%0], {{%1, %2, %3, %4}};"' in src
    if cfg.epilogue_cols % 16:
        assert f'"stmatrix.sync.aligned.m8n8.x2{trans}.shared.b16 [%0], {{%1, %2}};"' in src
    assert ("m8n8.x4.shared" in src or "m8n8.x2.shared" in src) == (not cfg.swap_ab)
    assert not re.search(r"\((nv_bfloat16|half)\)\(?acc_ptr\[", src)  # no scalar rounding


def test_stream_k_publishes_with_release_and_gathers_with_acquire(built):
    """A stream-K kernel hands partial tiles over through the workspace: a peer's consumer
    threads store their accumulators, meet at named barrier 1 and one thread releases the
    flag at GPU scope; the owner spins on an acquire load of it, resets it, and meets the
    others at the same barrier before they read the slot. Ordered split-K and tail-split
    kernels take the flags alone (and synchronize through them, above); other kernels take
    neither extra argument nor any GPU-scope synchronization."""
    cfg, kernel = built
    src = kernel.cuda_source
    waits = cfg.stream_k or cfg.order_waits
    assert ("st.release.gpu.global.b32 [%0], %1;" in src) == waits
    assert ("ld.acquire.gpu.global.b32 %0, [%1];" in src) == waits
    assert ("partials_ptr" in src) == cfg.stream_k and ("flags_ptr" in src) == waits
    if not cfg.stream_k:
        return
    body = src[src.index("tvm_builtin_ptx_setmaxnreg_inc_sync_aligned_u32_232();"):]
    publish = body.index("tvm_builtin_ptx_st_release_gpu_global_b32(")
    barrier = body.rindex("tvm_builtin_ptx_bar_sync_count_sync((uint)1, (uint)256);", 0,
                          publish)
    assert body.rindex("partials_ptr[", 0, barrier) > body.rindex("wait_group_sync_aligned_0",
                                                                  0, barrier)
    spin = body.index("tvm_builtin_ptx_ld_acquire_gpu_global_b32_s32(flag_ptr[0], (&(flags_ptr[")
    after_spin = body[spin:]
    reset = after_spin.index("flags_ptr[", len("tvm_builtin_ptx_ld_acquire"))
    gather_barrier = after_spin.index("tvm_builtin_ptx_bar_sync_count_sync((uint)1, (uint)256);")
    first_read = after_spin.index("partials_ptr[")
    assert reset < gather_barrier < first_read


def test_stream_k_refuses_a_grid_larger_than_the_gpu():
    """Owners spin on flags later CTAs set: a grid that cannot be resident at once could
    hang, so the workspace helper (what every launch goes through) refuses it by name."""
    from tvm_tma.kernels.stream_k import check_resident

    cfg = GemmConfig(1000, 2000, 3000, block_n=128, stages=6, epilogue_n=0, stream_k=True)
    check_resident(cfg, 132)
    check_resident(cfg, None)
    check_resident(GemmConfig(256, 256, 256), 7)  # not stream-K: nothing to check
    with pytest.raises(ValueError, match=re.escape(
            "stream_k with ctas=132 on a GPU of 114 SMs: its CTAs wait on each other, so "
            "every CTA must be resident at once")):
        check_resident(cfg, 114)
    ordered = GemmConfig(4096, 128, 4096, block_n=128, stages=5, split_k=2,
                         split_k_ordered=True, schedule="pingpong")
    with pytest.raises(ValueError, match=re.escape("split_k_ordered with ctas=132 on a GPU "
                                                   "of 114 SMs")):
        check_resident(ordered, 114)


def test_ordered_parts_in_clusters_of_four_fit_the_clusters_a_gpu_holds():
    """A GPC holds whole clusters: 132 SMs hold 30 clusters of 4 CTAs (120 CTAs), not 33.
    A grid of waiting parts in 2x2 or 1x4 clusters on 132 CTAs would leave 3 clusters
    waiting for SMs that their peers' spins never free, so it is refused by name; on 120
    CTAs it runs; clusters of 8 (never measured) are refused."""
    from tvm_tma.kernels.stream_k import check_resident

    square = GemmConfig(4000, 4000, 2048, cluster=2, cluster_n=2, tail_split=2)
    assert (square.cluster_size, square.workers) == (4, 33)
    with pytest.raises(ValueError, match=re.escape(
            "tail_split with ctas=132 on a GPU of 132 SMs: its CTAs wait on each other, so "
            "every CTA must be resident at once (ctas at most 120: a GPC holds whole "
            "clusters of 4 CTAs)")):
        check_resident(square, 132)
    check_resident(replace(square, ctas=120), 132)
    check_resident(GemmConfig(4000, 4000, 2048, cluster=2, cluster_n=2), 132)  # no waits
    row = GemmConfig(1000, 4096, 4096, block_n=128, stages=6, cluster_n=4, split_k=2,
                     split_k_ordered=True, ctas=128)
    with pytest.raises(ValueError, match=re.escape("split_k_ordered with ctas=128 on a GPU "
                                                   "of 132 SMs")):
        check_resident(row, 132)
    with pytest.raises(ValueError, match=re.escape(
            "split_k_ordered in clusters of 4 CTAs on a GPU of 114 SMs")):
        check_resident(replace(row, ctas=100), 114)
    with pytest.raises(ValueError, match=re.escape(
            "tail_split in clusters of 8 CTAs on a GPU of 132 SMs")):
        check_resident(replace(square, cluster_n=4, ctas=128), 132)
    # What the device's driver answers wins over the measured table (a chip whose GPCs
    # hold 29 clusters of 4), and makes clusters of 8 checkable.
    with pytest.raises(ValueError, match=re.escape("(ctas at most 116: a GPC holds whole "
                                                   "clusters of 4 CTAs)")):
        check_resident(replace(square, ctas=120), 132, resident=116)
    check_resident(replace(square, cluster_n=4, ctas=128), 132, resident=128)


def _stream_k_runs(cfg: GemmConfig) -> list[tuple[int, int]]:
    return [(cfg.stream_k_start(b), cfg.stream_k_start(b + 1)) for b in range(cfg.workers)]


@pytest.mark.parametrize("cfg", [c for c in CASES if c.stream_k] + [
    GemmConfig(1568, 512, 4608, block_n=128, stages=6, epilogue_n=0, stream_k=True),
    GemmConfig(300, 64, 640, block_n=64, epilogue_n=0, stream_k=True, ctas=7),
    GemmConfig(8192, 8192, 8192, stream_k=True),
    GemmConfig(3000, 5000, 2000, stream_k=True, cluster=2)], ids=_name)
def test_stream_k_runs_cover_every_k_step_once_and_each_tile_has_one_owner(cfg):
    """The runs of :func:`stream_k_run` tile the problem's K steps; a run holds at most one
    tile it did not start (its first: it publishes at most once per launch), and the
    workers the owner gathers from (``peer * iterations // ctas < tile_end``, at most
    ``stream_k_peers`` of them) are exactly the ones that computed a part of its tile."""
    cfg.check()
    runs = _stream_k_runs(cfg)
    tiles, steps = cfg.m_groups * cfg.n_blocks, cfg.k_steps
    # Whole tiles first, round-robin over the workers, then the runs over the rest.
    assert cfg.stream_k_dp_tiles % cfg.workers == 0
    dp = sorted(b + j * cfg.workers for b in range(cfg.workers)
                for j in range(cfg.stream_k_dp_rounds))
    assert dp == list(range(cfg.stream_k_dp_tiles))
    assert runs[0][0] == cfg.stream_k_dp_tiles * steps and runs[-1][1] == tiles * steps
    assert tiles - cfg.stream_k_dp_tiles in range(2 * cfg.workers)
    assert all(end > first for first, end in runs)
    assert all(runs[b][1] == runs[b + 1][0] for b in range(cfg.workers - 1))
    for owner, (first, end) in enumerate(runs):
        for tile in range(first // steps, (end + steps - 1) // steps):
            begin = max(first - tile * steps, 0)
            if begin > 0:
                assert tile == first // steps, "a run starts inside only its first tile"
                continue
            tile_end = tile * steps + steps
            computed = {b for b, (f, e) in enumerate(runs) if f < tile_end and e > tile * steps}
            # The kernel gathers only when the run ends inside the tile.
            gathered = set() if end >= tile_end else {
                owner + 1 + p for p in range(cfg.stream_k_peers)
                if owner + 1 + p < cfg.workers and cfg.stream_k_start(owner + 1 + p) < tile_end}
            assert gathered == computed - {owner}


def test_two_c_stages_alternate_and_wait_for_all_but_the_newest_store():
    """epilogue_buffers=2: the cooperative C stage doubles (one more stage of shared
    memory), stores alternate between the two, and a store waits for all but the newest
    store's reads (wait_group.read 1) where it is stored, for all of them (read 0) before a
    tile's first store and past N or M; one stage waits for all every time."""
    one = GemmConfig(300, 600, 264, block_n=256, stages=4, epilogue_n=64, ctas=3)
    two = replace(one, epilogue_buffers=2)
    assert (one.c_stages, two.c_stages) == (1, 2)
    assert two.shared_bytes - one.shared_bytes == 128 * 64 * 2
    for cfg, waits in ((one, {"0"}), (two, {"0", "1"})):
        src = compile_kernel(parsed_gemm(cfg)).cuda_source
        assert set(re.findall(r"bulk_wait_group_read_(\d)\(\);", src)) == waits
        assert ("cp.async.bulk.wait_group.read 1;" in src) == (cfg.c_stages == 2)
    with pytest.raises(ValueError, match="epilogue_buffers=2 with schedule='pingpong'"):
        replace(one, schedule="pingpong", block_n=128, epilogue_buffers=2).check()
    with pytest.raises(ValueError, match="epilogue_buffers=3"):
        replace(one, epilogue_buffers=3).check()
    # The model's 128 x 320 tiles take two.
    assert GemmConfig.for_problem(640, 8192, 1000).epilogue_buffers == 2


def test_a_resident_b_is_loaded_on_each_slots_first_use_only():
    """b_resident (one B tile: one column block, one K step): the B copy runs only while
    the unit's ring use is a slot's first (j < stages), and the slot's barrier expects
    A's and B's bytes then, A's alone after; N x K and K x N alike. Without it every unit
    loads both."""
    for layout in ("nk", "kn"):
        cfg = GemmConfig(1000, 64, 64, b_layout=layout, block_n=64, stages=4, epilogue_n=64,
                         b_resident=True, ctas=1)
        assert (cfg.a_tile_bytes, cfg.b_tile_bytes, cfg.num_tiles) == (16384, 8192, 8)
        lines = [line.strip() for line in
                 compile_kernel(parsed_gemm(cfg)).cuda_source.splitlines()
                 if "__device__" not in line]
        commit = next(i for i, line in enumerate(lines) if "arrive_expect_tx" in line)
        assert lines[commit - 5:commit] == ["if (j < 4) {", "condval = 24576;",
                                            "} else {", "condval = 16384;", "}"]
        assert "((uint)condval)" in lines[commit]
        assert "A_tensormap" in lines[commit + 1]
        assert lines[commit + 2] == "if (j < 4) {" and "B_tensormap" in lines[commit + 3]
        loaded = compile_kernel(gemm_kernel(replace(cfg, b_resident=False))).cuda_source
        assert "(uint)24576);" in loaded and "condval" not in loaded
    # In a 2x1 cluster each CTA multicasts its half of B (rows 64 * rank ..) on a slot's
    # first use; every CTA's slot still expects the whole B tile's bytes then.
    paired = GemmConfig(1000, 128, 56, block_n=128, stages=3, epilogue_n=0,
                        epilogue_buffers=2, b_resident=True, cluster=2, ctas=2)
    lines = [line.strip() for line in
             compile_kernel(gemm_kernel(paired)).cuda_source.splitlines()
             if "__device__" not in line]
    commit = next(i for i, line in enumerate(lines) if "arrive_expect_tx" in line)
    assert lines[commit - 5:commit] == ["if (j < 3) {", "condval = 32768;", "} else {",
                                        "condval = 16384;", "}"]
    assert lines[commit + 2] == "if (j < 3) {"
    assert "tvm_builtin_cluster_ctaid_x()) * 4096)" in lines[commit + 3]
    assert "B_tensormap" in lines[commit + 3]


def test_a_resident_b_of_several_k_steps_keeps_one_step_in_each_slot():
    """b_resident with 3 K steps on 6 slots: slot s always holds K step s % 3, so each
    step's B copy (columns 0, 16, 32 of K) runs only in the first two rounds (j < 2), and
    its slot expects A's and B's bytes then, A's alone after; the last K step, whose
    second 8-column piece lies past K = 40, expects that piece's bytes less in both."""
    cfg = GemmConfig(700, 40, 40, block_m=128, block_n=40, block_k=16, a_copy_k=8,
                     stages=6, epilogue_n=0, b_resident=True, ctas=2)
    assert (cfg.k_steps, cfg.a_tile_bytes, cfg.b_tile_bytes, cfg.a_zero_bytes) == (
        3, 4096, 1280, 2048)
    lines = [line.strip() for line in compile_kernel(parsed_gemm(cfg)).cuda_source.splitlines()
             if "__device__" not in line]
    commits = [i for i, line in enumerate(lines) if "arrive_expect_tx" in line]
    assert len(commits) == 3
    for step, commit in enumerate(commits):
        name = "condval" if step == 0 else f"condval_{step}"
        assert lines[commit - 5:commit] == ["if (j < 2) {", f"{name} = 5376;", "} else {",
                                            f"{name} = 4096;", "}"]
        expected = f"((uint)({name} - 2048))" if step == 2 else f"((uint){name})"
        assert lines[commit].endswith(f"{expected});"), lines[commit]
        b_copy = next(i for i in range(commit, len(lines)) if "B_tensormap" in lines[i])
        assert lines[b_copy - 1] == "if (j < 2) {"
        assert f"(&(B_tensormap))), {16 * step}, 0," in lines[b_copy]
    with pytest.raises(ValueError, match="the K steps must divide the stages"):
        replace(cfg, stages=4).check()


def test_whole_tile_c_stages_alternate_from_one_tile_to_the_next():
    """Two C stages each the tile's whole width: a plain cooperative loop stores round j's
    tile from stage j % 2 (every stmatrix and the TMA store's source at (j & 1) times a
    stage of 128 x 128) and waits for all but the newest store's reads (read 1); a loop
    that does not count its tiles in rounds (stream-K's) keeps to stage 0 and waits for
    all of them (read 0), as one stage does."""
    two = GemmConfig(1000, 128, 64, block_n=128, stages=4, epilogue_n=0, epilogue_buffers=2,
                     ctas=3)
    assert (two.epilogue_cols, two.c_stages, two.num_tiles) == (128, 2, 8)
    stage = re.compile(r"\((\w+) & 1\) \* 16384\)")
    src = compile_kernel(gemm_kernel(two)).cuda_source
    assert set(re.findall(r"bulk_wait_group_read_(\d)\(\);", src)) == {"0", "1"}
    stmatrix = [line for line in src.splitlines()
                if "tvm_builtin_ptx_stmatrix_sync_aligned_m8n8_x4_shared_b16(" in line
                and "__device__" not in line]
    assert len(stmatrix) == 8 and all(stage.search(line) for line in stmatrix)
    assert {stage.search(line).group(1) for line in stmatrix} == {"j_1"}
    store = [line for line in src.splitlines() if "tvm_tma_store_" in line
             and "__device__" not in line]
    assert store and all(stage.search(line) for line in store)
    for cfg in (replace(two, epilogue_buffers=1), replace(two, stream_k=True)):
        src = compile_kernel(parsed_gemm(cfg)).cuda_source
        assert set(re.findall(r"bulk_wait_group_read_(\d)\(\);", src)) == {"0"}
        assert not stage.search(src)


@pytest.mark.parametrize("bad, rule", [
    (dict(n=1001), "n=1001: N and K must be positive multiples of 8"),
    (dict(k=12), "k=12: N and K must be positive multiples of 8"),
    (dict(m=0), "m=0: at least one row"),
    (dict(block_n=80), "epilogue_n=128 with block_n=80: 0 (a width no multiple of 32 is "
                       "staged whole, unswizzled)"),
    (dict(block_n=304), "block_n=304: at most 256 (wgmma N), or one of (288, 320) (two "
                        "MMAs of half the width a k16 step)"),
    (dict(block_n=320, stages=3, epilogue_n=64, schedule="pingpong"),
     "block_n=320: a width past 256 takes cooperative 128-row tiles of 16-bit inputs with B "
     "as N x K (schedule='pingpong'"),
    (dict(block_n=320, stages=3, epilogue_n=64, block_m=192),
     "block_n=320: a width past 256 takes cooperative 128-row tiles"),
    (dict(block_n=320, stages=3, epilogue_n=64, b_layout="kn"),
     "block_n=320: a multiple of 64 from 64 to 256 with b_layout='kn'"),
    (dict(block_n=320, stages=4, epilogue_n=64),
     "4 stages of 128x320x64 tiles need"),
    (dict(block_n=84, epilogue_n=0), "block_n=84: a multiple of 8 from 8 to 256"),
    (dict(block_n=104, epilogue_n=0, cluster=2), "cluster=2 with block_n=104: each CTA's "
                                                 "share of the B tile must be whole 8-row "
                                                 "groups"),
    (dict(block_n=104, epilogue_n=0, dtype="float8_e4m3fn", block_k=128),
     "block_n=104: a multiple of 32 from 64 to 256 with FP8 inputs"),
    (dict(block_n=104, epilogue_n=0, stages=7), "7 stages of 128x104x64 tiles need 235520 "
                                                "bytes"),
    (dict(block_n=160, b_layout="kn"), "block_n=160: a multiple of 64 from 64 to 256 with "
                                       "b_layout='kn'"),
    (dict(block_n=96, epilogue_n=48), "epilogue_n=48 (48 columns): whole 64-column atoms "
                                      "(128B swizzle) or exactly 32 columns"),
    (dict(block_n=160, epilogue_n=0), "epilogue_n=0 (160 columns): whole 64-column atoms"),
    (dict(block_n=192, epilogue_n=128), "epilogue_n=128 (128 columns): whole 64-column "
                                        "atoms (128B swizzle) or exactly 32 columns (one "
                                        "64-byte row, the 64B swizzle's widest box), "
                                        "dividing block_n=192"),
    (dict(stages=5), "5 stages of 128x256x64 tiles need"),
    (dict(block_k=48), "block_k=48: 64, 32 or 16 (a K-major slot row of 128, 64 or 32 "
                       "bytes"),
    (dict(block_k=128), "block_k=128: 64, 32 or 16"),
    (dict(block_k=16, stages=19), "19 stages of 128x256x16 tiles need"),
    (dict(a_copy_k=8), "a_copy_k=8 with block_k=64: 0 (one A copy per K block) or 8 with "
                       "block_k 16 (two 8-column pieces of one k16 wgmma step, in an "
                       "unswizzled slot)"),
    (dict(block_k=16, a_copy_k=4), "a_copy_k=4 with block_k=16"),
    (dict(b_layout="mn"), "b_layout='mn'"),
    (dict(dtype="float32"), "dtype='float32'"),
    (dict(schedule="pingpong"), "pingpong: a consumer warpgroup computes 128x256 outputs, "
                                "256 fp32 registers per thread"),
    (dict(schedule="stream"), "schedule='stream'"),
    (dict(cluster=4), "cluster=4: 1 or 2"),
    (dict(cluster=2, ctas=133), "ctas=133: a multiple of the cluster's 2 CTAs"),
    (dict(cluster_n=4, ctas=130), "ctas=130: a multiple of the cluster's 4 CTAs"),
    (dict(cluster_n=3), "cluster_n=3: 1, 2 or 4 CTAs (1x3, sharing A)"),
    (dict(cluster=2, cluster_n=2, b_layout="kn"), "cluster=2 with cluster_n=2 and b_layout="
                                                  "'kn': a two-dimensional cluster takes B "
                                                  "as N x K"),
    (dict(cluster=2, cluster_n=2, block_n=104, epilogue_n=0),
     "cluster=2 with block_n=104: each CTA's share of the B tile must be whole 8-row groups"),
    (dict(cluster=2, cluster_n=4, ctas=132), "ctas=132: a multiple of the cluster's 8 CTAs"),
    (dict(cluster=2, cluster_n=2, stream_k=True), "stream_k with cluster_n=2: stream-K runs "
                                                  "clusters along M only"),
    (dict(cluster_n=2, stream_k=True), "stream_k with cluster_n=2: stream-K runs clusters "
                                       "along M only"),
    (dict(split_k_ordered=True), "split_k_ordered with split_k=1: there are no parts to "
                                 "order"),
    (dict(split_k=2, split_k_ordered=True, ctas=1), "split_k_ordered with split_k=2 on 1 "
                                                    "workers: a tile's parts wait for its "
                                                    "part 0"),
    (dict(k=320, split_k=4), "split_k=4: 1 up to the point where every part keeps at least "
                             "one of the 5 K steps"),
    (dict(block_n=128, schedule="pingpong", stream_k=True),
     "stream_k with schedule='pingpong': stream-K shares K steps between CTAs of the "
     "cooperative schedule only"),
    (dict(k=320, stream_k=True, split_k=2), "stream_k with split_k=2: stream-K is its own K "
                                            "split"),
    (dict(stream_k=True, cluster=2), "stream_k: 4 K steps for 66 workers (ctas=132, "
                                     "cluster=2): every worker needs at least one"),
    # The tail split: parts of the tiles left over after whole waves, one last round.
    (dict(tail_split=0), "tail_split=0: 1 (none) or at least 2 parts"),
    (dict(block_n=128, schedule="pingpong", tail_split=2, ctas=3),
     "tail_split with schedule='pingpong': the cooperative schedule only"),
    (dict(split_k=2, tail_split=2, ctas=3), "tail_split with split_k=2, stream_k=False: "
                                            "the tail split is its own K split"),
    (dict(m=512, tail_split=3, ctas=4), "tail_split=3: the 4 worker tiles fill whole waves "
                                        "of 4 workers; there is no tile left over to cut"),
    (dict(m=640, tail_split=2, ctas=3), "tail_split=2: 2 tiles left over in 2 parts are 4 "
                                        "units for 3 workers (at most one round)"),
    (dict(tail_split=5, ctas=10), "tail_split=5: every part keeps at least one of the 4 K "
                                  "steps"),
    # C^T = B A^T: K-major operands, A's rows as wgmma N, C staged by whole rows of C.
    (dict(swap_ab=True, b_layout="kn"), "swap_ab with b_layout='kn': C^T = B A^T takes B "
                                        "as N x K"),
    (dict(swap_ab=True, block_n=12, epilogue_n=0),
     "swap_ab with block_n=12: a multiple of 8 from 8 to 256 (A's rows are wgmma N)"),
    (dict(swap_ab=True, block_n=40, epilogue_n=20),
     "swap_ab with epilogue_n=20 (20 of C's rows a stage): a multiple of 8 dividing "
     "block_n=40"),
    (dict(swap_ab=True, block_n=24, epilogue_n=0, cluster=2),
     "cluster=2 with block_n=24: each CTA's share of the B tile must be whole 8-row groups"),
    # A resident B: the only B tile, whole units, this CTA's own loads.
    (dict(n=512, b_resident=True), "b_resident with n=512: B must be one column block "
                                   "(n <= block_n=256)"),
    (dict(b_resident=True, stages=3), "b_resident with 4 K steps (k=256, block_k=64) on stages=3: "
                            "the K steps must divide the stages, so each slot holds one K "
                            "step's B"),
    (dict(n=128, k=64, block_n=128, b_resident=True, stream_k=True, ctas=2),
     "b_resident with split_k, stream_k or tail_split: every unit a whole tile"),
    (dict(n=128, k=64, block_n=128, b_resident=True, cluster_n=2),
     "b_resident with a 1x2 cluster or swap_ab=False: B loaded by this CTA or shared in a "
     "2x1 cluster, unswapped"),
    (dict(block_m=256, schedule="pingpong", block_n=128),
     "block_m=256 with schedule='pingpong': 64 or 128"),
    (dict(block_m=256, block_n=128, stages=4, epilogue_n=64, cluster=2),
     "block_m=256 with cluster=2: 256-row tiles run plain"),
    (dict(block_m=256, block_n=128, stages=4, epilogue_n=64, stream_k=True),
     "block_m=256 with stream_k=True: 256-row tiles run plain"),
    (dict(block_m=256, block_n=128, stages=3, epilogue_n=64, epilogue_buffers=2),
     "block_m=256 with epilogue_buffers=2: 256-row tiles run plain"),
    (dict(block_m=256, block_n=160, stages=3, epilogue_n=32),
     "cooperative: a consumer warpgroup computes 128x160 outputs, 160 fp32 registers"),
])
def test_gemm_refuses_configurations_it_cannot_run(bad, rule):
    params = dict(m=256, n=256, k=256) | bad
    with pytest.raises(ValueError, match=re.escape(rule)):
        gemm_kernel(GemmConfig(**params))


def test_swapped_operands_load_b_into_the_mma_a_slot_and_store_c_transposed():
    """swap_ab: the MMAs' A slot holds B's rows (its tensor map is B's, K x N in TMA's
    order), the B slot A's (K x M), the accumulator tile is C^T's (block_m of N by block_n
    of M, one m64n{block_n} MMA a k16 step), and the epilogue's stage is C's rows: stored
    into C (N x M in TMA's order) by boxes of 64 of its columns by epilogue_n of its rows.
    An A view (a conv2d's activation) is the B slot's operand: the trivial view plans the
    same maps as the plain A."""
    cfg = GemmConfig(20, 1000, 1000, swap_ab=True, block_n=24, epilogue_n=8,
                     epilogue_buffers=2, stages=8, ctas=5)
    assert (cfg.product_m, cfg.product_n, cfg.m_blocks, cfg.n_blocks) == (1000, 20, 8, 1)
    copies = explained_gemm(cfg).copies
    a_map, b_map, c_map = (c.plan.tensor_map for c in (copies[0], copies[1], copies[-1]))
    assert tuple(a_map.global_dims) == (1000, 1000) and tuple(a_map.box_dims) == (64, 128)
    assert tuple(b_map.global_dims) == (1000, 20) and tuple(b_map.box_dims) == (64, 24)
    assert tuple(c_map.global_dims) == (1000, 20) and tuple(c_map.box_dims) == (64, 8)
    assert c_map.swizzle == 3
    src = compile_kernel(parsed_gemm(cfg)).cuda_source
    assert "wgmma.mma_async.sync.aligned.m64n24k16.f32.bf16.bf16" in src
    # (A stage of 8 of C's rows is 8 columns of the tile: one .x2 pair of 8 x 8 blocks a
    # warp, written transposed.)
    assert "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in src
    assert "m8n8.x4" not in src and "m8n8.x2.shared" not in src
    view = AOperand.row_major(20, 1000)
    viewed = tvm_tma.explain(gemm_kernel(cfg, a_operand=view)).copies
    assert [c.plan.tensor_map for c in viewed] == [c.plan.tensor_map for c in copies]


def test_the_default_trims_padded_columns_off_the_last_column_block():
    """Where N leaves the last column block partly empty, the model's cooperative 128-row
    tiles narrow to the fewest columns keeping the same blocks and cluster (tiling.trimmed):
    a multiple of 8, of 16 in 2x1 clusters; C staged whole and unswizzled where the width
    is no multiple of 32; as many ring stages as fit, at least 4. Measured on the H100."""
    assert (TRIM_MIN_STAGES, TRIM_MAX_STAGES) == (4, 12)
    cases = {  # problem: (block_n, stages, cluster, column blocks)
        (5000, 296, 3000): (112, 6, 2, 3),  # 128 wide before; 16-wide steps in 2x1 clusters
        (5000, 296, 4000): (104, 6, 1, 3),  # rows of whole sectors: no cluster, 8-wide steps
        (8192, 200, 4096): (104, 6, 1, 2),
        (4096, 600, 4096): (152, 5, 1, 4),  # 160
        (4096, 296, 4096): (152, 5, 1, 2),  # 160, in 2 ordered K parts
        (4000, 712, 2048): (184, 4, 1, 4),  # 192
        (5000, 600, 3000): (208, 4, 2, 3),  # 256
    }
    for problem, want in cases.items():
        cfg = GemmConfig.for_problem(*problem)
        assert (cfg.block_n, cfg.stages, cfg.cluster, cfg.n_blocks) == want, problem
        assert (cfg.block_m, cfg.schedule, cfg.epilogue_n, cfg.epilogue_cols) == (
            128, "cooperative", 0, cfg.block_n)
        assert cfg.shared_bytes <= MAX_SHARED
        assert cfg.block_n - (-cfg.n % cfg.block_n) < 8 * cfg.cluster + cfg.block_n
        assert (cfg.n_blocks - 1) * cfg.block_n < cfg.n <= cfg.n_blocks * cfg.block_n
    # Kept: N a whole number of blocks, a trim that would leave 3 stages (248 or 240 wide
    # beside a whole C stage), a 2x1 cluster's width rounding back up (N = 4040 in 192-wide
    # blocks: 184 is no multiple of 16), 64-row tiles, and a caller's width, stages or C
    # stage.
    for problem, width in (((4096, 4096, 4096), 256), ((2048, 1000, 4096), 128),
                           ((1234, 5680, 2048), 256), ((4096, 1400, 4096), 256),
                           ((700, 4040, 1000), 192), ((4000, 200, 1024), 128)):
        assert GemmConfig.for_problem(*problem).block_n == width, problem
    assert GemmConfig.for_problem(5000, 296, 4000, block_n=128).block_n == 128
    assert GemmConfig.for_problem(5000, 296, 4000, stages=4).block_n == 128
    assert GemmConfig.for_problem(5000, 296, 4000, epilogue_n=64).block_n == 128


def test_default_tiling_keeps_every_sm_busy():
    assert GemmConfig.for_problem(8192, 8192, 8192).block_n == 256
    assert GemmConfig.for_problem(8192, 1024, 8192).block_n == 256  # 256 tiles >= 132
    ragged = GemmConfig.for_problem(1000, 2000, 3000)  # 64 wide tiles for 132 SMs
    assert (ragged.block_n, ragged.num_tiles, ragged.stages) == (128, 128, 6)
    assert (ragged.cluster, ragged.workers, ragged.work_units) == (2, 66, 64)
    # One row block leaves a cluster's second CTA nothing to share; an odd grid cannot
    # be cut into pairs.
    assert GemmConfig.for_problem(128, 2048, 512).cluster == 1
    assert GemmConfig.for_problem(1000, 2000, 3000, ctas=131).cluster == 1
    assert GemmConfig.for_problem(1000, 2000, 3000, cluster=1).cluster == 1
    # A last wave at most half full is cut into ordered K parts, one last round (2048 x
    # 7168: 3 waves and 52 tiles in 2 parts); a fuller one (4096^3: 116 of 132; 8192 x
    # 1024: 124) or an explicit choice of the split stays as it is.
    assert GemmConfig.for_problem(2048, 7168, 4096).tail_split == 2
    assert not GemmConfig.for_problem(2048, 7168, 4096).stream_k
    assert GemmConfig.for_problem(4096, 4096, 4096).tail_split == 1
    assert GemmConfig.for_problem(8192, 1024, 8192).tail_split == 1
    assert GemmConfig.for_problem(2048, 7168, 4096, stream_k=False).tail_split == 1
    assert GemmConfig.for_problem(2048, 7168, 4096, stream_k=True).stream_k
    assert GemmConfig.for_problem(2048, 7168, 4096, schedule="pingpong").tail_split == 1
    # 128 x 128 tiles filling at most half the SMs: K cut into ordered parts (C = A @ B),
    # as many as the CTAs hold (at most 16, each at least 4 K steps), on ping-pong tiles.
    skinny = GemmConfig.for_problem(4096, 128, 4096)  # 32 tiles: 4 parts
    assert (skinny.schedule, skinny.block_n, skinny.stages, skinny.cluster) == (
        "pingpong", 128, 5, 1)
    assert (skinny.split_k, skinny.split_k_ordered, skinny.work_units) == (4, True, 128)
    assert GemmConfig.for_problem(16, 8192, 8192).split_k == 2  # 64 tiles
    # 8 K steps: 2 parts (on 128-row tiles; by default 64-row ones, the test below).
    assert GemmConfig.for_problem(128, 2048, 512, block_m=128).split_k == 2
    # 8 tiles of 128 K steps: 16 parts of 8; 3 tiles of 32 steps: 8 parts of 4.
    assert GemmConfig.for_problem(128, 1024, 8192).split_k == 16
    assert GemmConfig.for_problem(300, 128, 2048).split_k == 8
    # 1 tile of 61 K steps: at most 15 parts (61 // 4), whose longest would be 5 steps;
    # 13 parts already make it 5 (12 x 5, and part 0 the one left over), 12 would make it 6.
    one = GemmConfig.for_problem(104, 104, 61 * 64)
    assert (one.split_k, one.part_steps(0), one.part_steps(1), one.part_steps(12)) == (
        13, (0, 1), (1, 5), (56, 5))
    assert GemmConfig.for_problem(256, 256, 256).split_k == 1  # 4 K steps
    assert GemmConfig.for_problem(512, 4096, 4096).split_k == 1  # 128 tiles
    assert GemmConfig.for_problem(4096, 128, 4096, cluster=1).split_k == 1  # chosen


def test_64_row_tiles_where_m_is_at_most_64_or_short_tiles_are_few():
    """tiling.on_half_rows: 128 x 128 tiles become 64 x 128 ones (cooperative, 9 stages, a
    64-column C stage) where M is at most 64 (keeping the K split; M = 64 here: fewer rows
    swap the operands, tiling.on_swapped_operands), or where a problem of
    at most 16 K steps has 128-row tiles filling at most half the SMs and 64-row ones fit
    a wave (plain); 16-bit inputs with B as N x K; not where the caller chose the tile,
    schedule, ring or split. Measured on the H100 (kernels/tiling)."""
    assert HALF_ROWS_SHORT_STEPS == 16
    half = {"block_m": 64, "block_n": 128, "schedule": "cooperative", "stages": 9,
            "epilogue_n": 64}
    cases = {  # (m, n, k): (split_k, tiles, l2_promotion)
        (64, 8192, 8192): (2, 64, 256),  # M <= 64: the ordered parts kept
        (64, 4096, 14336): (4, 32, 256),
        (64, 14336, 4096): (1, 112, 256),  # was 128 x 128 in plain waves
        (1024, 1024, 1024): (1, 128, 128),  # 16 K steps, 64 tiles of 128 rows
        (4096, 256, 1024): (1, 128, 128),
    }
    for (m, n, k), (split, tiles, promotion) in cases.items():
        cfg = GemmConfig.for_problem(m, n, k)
        cfg.check()
        # The short problems' (M > 64) C stage alternates with a second after
        # (tiling.with_alternating_c_stages), one ring stage fewer; M <= 64 streams B and
        # keeps its ring.
        streaming = m <= 64
        assert cfg.epilogue_buffers == (1 if streaming else 2)
        assert {name: getattr(cfg, name) for name in half} == {
            **half, "stages": 9 if streaming else 8}
        assert (cfg.split_k, cfg.num_tiles, cfg.l2_promotion) == (split, tiles, promotion)
        assert cfg.split_k_ordered == (split > 1)
    # 128-row tiles stay: past 16 K steps with M > 64, 128 x 128 tiles filling more than
    # half the SMs, 64-row ones past a wave, FP8, B as K x N, and any tile, schedule or
    # split the caller chose.
    for (m, n, k), options in [((300, 128, 2048), {}), ((2048, 2048, 512), {}),
                               ((1024, 2048, 1024), {}),
                               ((16, 8192, 8192), {"dtype": "float8_e4m3fn"}),
                               ((16, 8192, 8192), {"b_layout": "kn"}),
                               ((512, 512, 512), {"block_n": 128}),
                               ((512, 512, 512), {"schedule": "pingpong"}),
                               ((512, 512, 512), {"stages": 5}),
                               ((16, 8192, 8192), {"split_k": 2, "split_k_ordered": True})]:
        assert GemmConfig.for_problem(m, n, k, **options).block_m == 128, (m, n, k, options)


def test_64_row_tiles_of_every_width_where_m_is_at_most_64(before_narrow_wave):
    """tiling.on_half_rows for widths other than 128 (_half_of_wide_rows): where M is at
    most 64 the model's cooperative 128 x 256 (or 192, 160) tiles become 64-row ones of
    the same width with the most ring stages that fit; not past M = 64, not for a tail
    split or a caller's tile. Measured on the H200 (kernels/tiling)."""
    def picked(m, n, k, **options):
        cfg = GemmConfig.for_problem(m, n, k, **options)
        cfg.check()
        return (cfg.schedule, cfg.block_m, cfg.block_n, cfg.stages, cfg.num_tiles,
                cfg.split_k)

    assert picked(64, 28672, 4096) == ("cooperative", 64, 256, 5, 112, 1)  # was 128 x 256
    assert picked(64, 32000, 4096) == ("cooperative", 64, 256, 5, 125, 1)
    assert picked(64, 24576, 2048) == ("cooperative", 64, 192, 6, 128, 1)  # was 128 x 192
    # (Fewer rows swap the operands, but where the swapped tiles, 133 of 128 x 40 here,
    # would leave a last round of one: tiling.on_swapped_operands.)
    assert picked(40, 17000, 1000) == ("cooperative", 64, 160, 7, 107, 1)
    # M past 64, a tail split in ordered parts, the caller's tile or rows: 128 rows.
    assert picked(128, 28672, 4096)[1] == 128
    # (A tail split's 128-row tiles stay whole; for 64 rows they pad half of each, so the
    # default swaps the operands: tiling.on_swapped_operands.)
    tail = on_half_rows(modelled(GemmConfig, 64, 28672, 14336))
    assert tail.tail_split > 1 and (tail.block_m, tail.block_n) == (128, 192)
    assert picked(64, 28672, 14336)[1:3] == (128, 64)
    assert GemmConfig.for_problem(64, 28672, 14336).swap_ab
    assert picked(8, 28672, 4096, block_n=256)[1] == 128
    assert picked(8, 28672, 4096, block_m=128)[1] == 128
    assert picked(8, 28672, 4096, b_layout="kn")[1] == 128


def test_64_by_64_tiles_where_even_64_row_tiles_are_few(before_narrow_wave):
    """tiling.narrow_half_rows: a short problem's plain 64 x 128 tiles become 64 x 64 ones
    (12 stages, one 64-column C stage) where at most half the CTAs get a 64 x 128 tile and
    the 64 x 64 ones fit a wave; not where M is at most 64 (the K split is kept), nor
    where the 64 x 128 tiles already fill more than half the SMs."""
    assert QUARTER_TILES == {"block_n": 64, "stages": 12, "epilogue_n": 64}
    quarter = {"block_m": 64, "block_n": 64, "schedule": "cooperative", "stages": 12,
               "epilogue_n": 64, "split_k": 1}
    cases = {  # (m, n, k): tiles of 64 x 64 (the 64 x 128 tiles they replace: half)
        (512, 512, 512): 64,
        (256, 2048, 512): 128,
        (512, 1024, 1024): 128,
        (196, 512, 1024): 32,
        (784, 256, 512): 52,
        (1568, 256, 1024): 100,
    }
    for (m, n, k), tiles in cases.items():
        cfg = GemmConfig.for_problem(m, n, k)
        cfg.check()
        assert {name: getattr(cfg, name) for name in quarter} == quarter, (m, n, k)
        assert cfg.num_tiles == tiles and cfg.shared_bytes <= 227 * 1024
    # 64 x 128 stays: 64 of them on 132 CTAs or more (1024^3: 128; 192 x 3000 x 800: 72).
    for m, n, k in [(1024, 1024, 1024), (192, 3000, 800), (64, 8192, 8192)]:
        assert GemmConfig.for_problem(m, n, k).block_n == 128, (m, n, k)
    # The rule on its own: plain 64 x 128 tiles only.
    half = GemmConfig(512, 512, 512, block_m=64, block_n=128, stages=9, epilogue_n=64)
    assert narrow_half_rows(half).block_n == 64
    assert narrow_half_rows(replace(half, split_k=2, split_k_ordered=True)) == replace(
        half, split_k=2, split_k_ordered=True)
    assert narrow_half_rows(replace(half, m=4096)) == replace(half, m=4096)  # 256 tiles


@pytest.mark.parametrize("options", [{}, {"cluster": 2}, {"cluster_n": 2}, {"cluster": 1},
                                     {"schedule": "pingpong", "block_n": 128},
                                     {"split_k": 2}, {"dtype": "float16", "b_layout": "kn"},
                                     {"block_m": 256}, {"block_m": 256, "block_n": 64}],
                         ids=str)
def test_the_default_tiling_honours_every_option_it_is_given(options):
    """Whatever a caller fixes, for_problem fills in the rest with a configuration the
    kernel runs (stream-K is not added to a cluster along N, which it does not take)."""
    for m, n, k in [(3000, 5000, 2000), (2048, 7168, 4096), (4096, 128, 4096),
                    (16, 8192, 8192), (1000, 2000, 3000), (8192, 8192, 8192)]:
        cfg = GemmConfig.for_problem(m, n, k, **options)
        cfg.check()
        assert all(getattr(cfg, name) == value for name, value in options.items())


def test_benchmark_compile_only_assembles_every_variant(capsys):
    """What CI runs of benchmarks/gemm.py: the default kernel of a square and the ragged
    problem for both dtypes and both B layouts, assembled for sm_90a."""
    benchmark = load_script(REPO / "benchmarks" / "gemm.py", "gemm_benchmark")

    assert benchmark.main(["--compile-only", "--problem", "8192x8192x8192",
                           "--problem", "1000x2000x3000"]) == 0
    assert "8 kernels assembled" in capsys.readouterr().out


def test_benchmark_explain_names_the_fitted_k_block(capsys):
    """``--explain`` says when the rules ran on a K block fitted to a short K, and
    ``--block-k`` chooses the block (then no such line)."""
    benchmark = load_script(REPO / "benchmarks" / "gemm.py", "gemm_benchmark")
    assert benchmark.main(["--explain", "--problem", "303x8680x8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("303x8680x8: pingpong 64x256 block_k=16 ")
    assert lines[1] == "  on K blocks of 16 (tiling.fitted_k_block)"
    assert benchmark.main(["--explain", "--problem", "303x8680x8", "--block-k", "64"]) == 0
    out = capsys.readouterr().out
    assert "block_k=64" in out.splitlines()[0] and "fitted_k_block" not in out


def test_benchmark_table_takes_ratios_from_graph_replays(capsys):
    """A row carries graph-replay times (what the ratio is), host-launched ones and the
    per-launch median; the table prints one column pair per baseline, not one per way of
    timing it (a torch.matmul of a 5 us GEMM takes 12 us to launch from the host)."""
    benchmark = load_script(REPO / "benchmarks" / "gemm.py", "gemm_benchmark")
    row = {"problem": "1024x640x1280", "b": "nk", "schedule": "cooperative", "block_m": 64,
           "block_n": 80, "stages": 12, "cluster": 1, "cluster_n": 1, "split_k": 1,
           "split_k_ordered": False, "stream_k": False, "tail_split": 1, "correct": True,
           "tflops": 255.0, "host_launched_tflops": 254.0, "median_tflops": 200.0,
           "torch_tflops": 328.0, "torch_host_launched_tflops": 135.0,
           "percent_of_torch": 77.7, "percent_of_torch_host_launched": 188.1}
    benchmark.print_table([row])
    header, line = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[-3:] == ["torch", "%", "torch"]
    assert line.split()[-2:] == ["328.0", "77.7"]


def test_benchmark_sweep_pairs_blocks_only_where_there_are_two():
    """The sweep tries 2x1 clusters (B multicast), 1x2 ones (A multicast), 2x2 ones (both)
    and 1x4 ones (A shared by four; these two on the 120 CTAs 132 SMs hold in clusters of
    4, every other shape on all 132), but no cluster whose second CTA would always hold a
    block of padding; and swapped tiles of half of M in pairs where M is 65 to 512."""
    benchmark = load_script(REPO / "benchmarks" / "gemm.py", "gemm_benchmark")
    square = benchmark.configs_for(1000, 2000, 3000, "bfloat16", "nk", True, 132)
    shapes = {(cfg.cluster, cfg.cluster_n, cfg.ctas) for cfg in square}
    assert shapes == {(1, 1, 132), (2, 1, 132), (1, 2, 132), (2, 2, 120), (1, 4, 120)}
    # (A default of 2x2 clusters on 120 CTAs does not shrink the others' grid.)
    assert GemmConfig.for_problem(600, 2224, 3000).ctas == 120
    wide = benchmark.configs_for(600, 2224, 3000, "bfloat16", "nk", True, 132)
    assert {cfg.ctas for cfg in wide if cfg.cluster_size != 4} == {132}
    assert any((cfg.schedule, cfg.block_m, cfg.block_n, cfg.stages) == ("pingpong", 64, 256, 5)
               for cfg in wide)
    skinny = benchmark.configs_for(16, 8192, 8192, "bfloat16", "nk", True, 132)
    assert {(cfg.cluster, cfg.cluster_n) for cfg in skinny} == {(1, 1), (1, 2), (1, 4)}
    # The 64-row tiles of any width the default takes where M is at most 64, and the
    # default itself: C^T = B A^T on 128 x 16 tiles (the only swapped one).
    assert any((cfg.schedule, cfg.block_m, cfg.block_n) == ("cooperative", 64, 256)
               for cfg in skinny)
    assert [cfg for cfg in skinny if cfg.swap_ab] == [GemmConfig.for_problem(16, 8192, 8192)]
    narrow = benchmark.configs_for(4096, 128, 4096, "bfloat16", "nk", True, 132)
    assert all(cfg.cluster_n <= cfg.n_blocks for cfg in narrow)
    # C^T = B A^T on 64-row blocks of few columns (tiling.few_columns_tiling): the default
    # of 9248 x 192 x 768, once, beside the unswapped grid.
    few = benchmark.configs_for(9248, 192, 768, "bfloat16", "nk", True, 132)
    assert [cfg for cfg in few if cfg.swap_ab] == [GemmConfig.for_problem(9248, 192, 768)]
    assert [(cfg.block_m, cfg.block_n) for cfg in few if cfg.swap_ab] == [(64, 216)]
    # C^T = B A^T on M in two column blocks paired in 1x2 clusters sharing B (cuBLAS's
    # shape on problems of 65 to 512 rows), 128 and 192 rows of B.
    weights = benchmark.configs_for(153, 8288, 1608, "bfloat16", "nk", True, 132)
    pairs = [(cfg.block_m, cfg.block_n, cfg.cluster, cfg.cluster_n, cfg.split_k)
             for cfg in weights if cfg.swap_ab and cfg.cluster_n == 2]
    assert pairs == [(128, 80, 1, 2, 1), (192, 80, 1, 2, 1)]
    assert benchmark.swapped_pairs(64, 8192, 1024, 128) is None  # (M at most 64)
    # One wave of tiles dividing N exactly, past the rule's 20 K steps too.
    long_k = benchmark.configs_for(2048, 640, 1920, "bfloat16", "nk", True, 132)
    assert GemmConfig.for_problem(2048, 640, 1920).block_n == 128
    assert any((cfg.block_m, cfg.block_n, cfg.split_k) == (128, 80, 1) for cfg in long_k)


@pytest.mark.parametrize("cfg", [GemmConfig(256, 512, 256),
                                 GemmConfig.for_problem(1000, 2000, 3000, b_layout="kn")],
                         ids=_name)
def test_a_view_operand_reads_a_as_the_plain_argument_does(cfg):
    """A kernel whose A is declared through an AOperand (the way the conv2d kernel passes
    the im2col view of its activation) plans and assembles; with the trivial operand (the
    row-major (M, K) argument viewed as itself) its device code is the default kernel's but
    for the argument's name (X: the tensor map is the argument's, and kernel parameters
    are ordered by name)."""
    plain = compile_kernel(parsed_gemm(cfg)).cuda_source
    viewed = compile_kernel(gemm_kernel(cfg, AOperand.row_major(cfg.m, cfg.k))).cuda_source
    assert len(assemble(viewed)) > 0
    assert "X_tensormap" in viewed and "A_tensormap" not in viewed

    def body(src: str) -> list[str]:
        return [line for line in src.replace("X_tensormap", "A_tensormap").splitlines()
                if "__global__" not in line]

    assert body(viewed) == body(plain)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CASES, ids=_name)
def test_gemm_matches_numpy_on_the_gpu(cfg):
    c, ref, bound = run(cfg, seed=cfg.m + cfg.n + cfg.k)
    assert np.isfinite(c).all(), "elements left unwritten (NaN poison survived)"
    error = np.abs(c - ref)
    worst = np.unravel_index(np.argmax(error / bound), error.shape)
    assert (error <= bound).all(), (
        f"C{list(worst)} = {c[worst]} vs {ref[worst]} (bound {bound[worst]})")
