"""The implicit-GEMM conv2d (tvm_tma.kernels.conv2d): its tiling, the plans of its copies
(the A tile an im2col load, B and C tiled), CUDA text and sm_90a assembly for the
benchmark's layers and small ragged / padded / strided ones, its refusals, the reference,
and (on a Hopper GPU) every output element against numpy and torch within the bound."""

from __future__ import annotations

import argparse
import functools
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tvm_tma
from tvm_tma.conv import Conv2dGeometry
from tvm_tma.kernels import conv2d_tiling as conv2d_module
from tvm_tma.kernels.conv2d import (
    check_config,
    conv2d_config,
    conv2d_error_bound,
    conv2d_kernel,
    conv2d_reference,
    random_inputs,
    run,
)
from tvm_tma.kernels.conv2d_tiling import (
    COVERING_SHARE,
    HALF_ROWS_MAX_STEPS,
    IM2COL_NARROW_WAVE_MAX_STEPS,
    K_STEP_COLUMNS,
    MAX_STAGES,
    NARROW_TALL_WIDTH,
    RESIDENT_MAX_STEPS,
    RESIDENT_SHALLOW_ROUNDS,
    RESIDENT_TILES_AHEAD,
    SHORT_K_STEPS,
    STORE_BOUND_BLOCK_K,
    STORE_BOUND_STAGES,
    WIDE_HALF_ROWS_MIN_STEPS,
    covering_width,
    stream_k_shares_thin_round,
)
from tvm_tma.kernels.gemm_config import MAX_SHARED, GemmConfig
from tvm_tma.kernels.halo import halo_tiling
from tvm_tma.kernels.reference import error_bound
from tvm_tma.kernels.tiling import (
    ALTERNATING_MIN_STAGES,
    FEW_COLUMNS_MIN_GAIN,
    NARROW_WAVE_MAX_LOAD_RATIO,
    NARROW_WAVE_MIN_FILL,
    NARROW_WAVE_MIN_STEPS,
    NARROW_WAVE_MIN_WIDTH,
    NARROW_WAVE_PINGPONG_FILL,
    NARROW_WAVE_WIDTH_STEP,
    STEP_COST,
    busy_share,
    estimate,
    fullest_narrow_wave,
    in_fullest_narrow_wave,
    leaves_thin_round,
    unit_load_bytes,
)
from tvm_tma.kernels.wgmma import unrolled
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


BENCHMARK = load_script(REPO / "benchmarks" / "conv2d.py", "conv2d_benchmark")


def _layer(n, h, w, c, k, r=3, s=3, stride=1, pad=1, dilation=1):
    return Conv2dGeometry(n, h, w, c, k, r, s, stride=(stride, stride), padding=(pad, pad),
                          dilation=(dilation, dilation))


def _chosen_before_narrow_wave(geometry, chosen, options):
    """conv2d._narrow_wave that keeps the tiling the rules before it chose."""
    return chosen


@pytest.fixture
def before_conv_narrow_wave(monkeypatch):
    """conv2d_config without its last tiling rule (the fullest narrow wave,
    ``test_a_pointwise_layer_takes_the_fullest_wave_of_narrow_whole_k_tiles`` and
    ``test_an_im2col_layer_of_few_k_steps_takes_the_fullest_narrow_wave``), for the tests
    of the rules before it: that rule replaces their choice on some layers, but they still
    choose for every layer it leaves; nor the swap for few columns after it (its tests:
    ``test_few_output_channels_run_swapped_where_that_fills_the_sms``). (conftest's
    ``before_narrow_wave`` is the GEMM's.)"""
    monkeypatch.setattr(conv2d_module, "_narrow_wave", _chosen_before_narrow_wave)
    monkeypatch.setattr(conv2d_module, "_few_columns", _unswapped)


def _unswapped(cfg, options):
    """conv2d._few_columns that keeps the unswapped tiling."""
    return cfg


def config_before_narrow_wave(layer: Conv2dGeometry) -> GemmConfig:
    """``conv2d_config(layer)`` as the rules before the narrow wave leave it (and the swap
    for few columns after it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conv2d_module, "_narrow_wave", _chosen_before_narrow_wave)
        patch.setattr(conv2d_module, "_few_columns", _unswapped)
        return conv2d_config(layer)


#: Small layers, each with what it exercises: (id, geometry, conv2d_config options).
#: 16-wide K blocks in 8-column pieces, where the default pads each tap (C of 24 and more).
PIECES = {"block_k": 16, "a_copy_k": 8}
SMALL = [
    # M = 504: the last of 4 row blocks has 120 rows (rows past M read zeros, stores skip);
    # by default the same layer takes 8 tiles of 64 rows, the last 56 (few tiles, 9 K
    # steps: conv2d._half_rows).
    ("ragged-8x9x7x64-k64", _layer(8, 9, 7, 64, 64), {"block_m": 128}),
    # Y^T = F X^T for few output channels (tiling.on_few_columns): 128 channels in 2 row
    # blocks of 64 by 288 pixels in 2 column blocks of 144, the activation's tiled copies
    # into the B ring; and, asked for, an im2col layer's 162 pixels in column blocks of 88
    # (the last 74: pixels past M read zeros and store nothing).
    ("few-columns-2x12x12x64-k128-1x1-ctas4", _layer(2, 12, 12, 64, 128, 1, 1, pad=0),
     {"ctas": 4}),
    ("swapped-im2col-2x9x9x64-k64-ctas2", _layer(2, 9, 9, 64, 64),
     {"ctas": 2, "swap_ab": True, "block_m": 64, "block_n": 88}),
    ("ragged-half-rows-8x9x7x64-k64", _layer(8, 9, 7, 64, 64), {}),
    # 8 row blocks on 3 CTAs: the ring's phases run across tiles (persistent loop), with
    # cooperative tiles and with the ping-pong ones its 9 K steps take by default.
    ("persistent-4x16x16x64-k128-ctas3", _layer(4, 16, 16, 64, 128),
     {"ctas": 3, "schedule": "cooperative"}),
    ("persistent-pingpong-4x16x16x64-k128-ctas3", _layer(4, 16, 16, 64, 128), {"ctas": 3}),
    # Stride 2, C = 128 (two channel blocks per tap), M = 112: one partial tile.
    ("stride2-2x15x13x128-k64", _layer(2, 15, 13, 128, 64, stride=2), {}),
    ("1x1-4x10x10x64-k128", _layer(4, 10, 10, 64, 128, 1, 1, pad=0), {}),
    # A ResNet bottleneck's 1x1 layer at small size: 4 K steps on ping-pong 128 x 128
    # tiles (M = 300 ragged, two column blocks), on 64-row tiles (5 row blocks, the last
    # 44 rows: the half-rows rule's tiles), and by default on 80 tiles of 64 x 16 (the
    # fullest narrow wave: 16 column blocks of each row block).
    ("1x1-short-k-3x10x10x256-k256", _layer(3, 10, 10, 256, 256, 1, 1, pad=0),
     {"block_n": 128, "schedule": "pingpong"}),
    ("1x1-short-k-half-rows-3x10x10x256-k256", _layer(3, 10, 10, 256, 256, 1, 1, pad=0),
     {"block_m": 64, "block_n": 64, "schedule": "cooperative"}),
    ("1x1-narrow-wave-3x10x10x256-k256", _layer(3, 10, 10, 256, 256, 1, 1, pad=0), {}),
    # The same rule on im2col layers of at most 18 K steps: 20 tiles of 64 x 16 on 20 CTAs
    # (M = 300: the last row block 44 rows; 5 of 64 x 64 without the rule), and a stride-2
    # layer of two channel blocks per tap (18 K steps) on 6 tiles of 64 x 16 (M = 60, one
    # ragged row block; 2 ping-pong 128 x 64 tiles without).
    ("im2col-narrow-wave-3x10x10x64-k64-ctas20", _layer(3, 10, 10, 64, 64), {"ctas": 20}),
    ("im2col-narrow-wave-stride2-2x11x9x128-k96-ctas12", _layer(2, 11, 9, 128, 96, stride=2),
     {"ctas": 12}),
    # 32 K steps on 64-row tiles in 8 ordered parts (M = 98: the second row block 34 rows).
    ("half-rows-ordered-2x7x7x2048-k256", _layer(2, 7, 7, 2048, 256, 1, 1, pad=0), {}),
    ("1x1-stride2-2x16x16x128-k64", _layer(2, 16, 16, 128, 64, 1, 1, stride=2, pad=0), {}),
    # Pointwise layers whose C is no multiple of 64: 64-wide K blocks, the last past C
    # zero-filled (C = 200: 3 whole blocks and 8 channels; C = 24: one block, 24 of 64),
    # K = 40 ragged in its one column block.
    ("pointwise-bk64-c200-2x9x9x200-k64", _layer(2, 9, 9, 200, 64, 1, 1, pad=0), {}),
    ("pointwise-bk64-c24-3x7x9x24-k40", _layer(3, 7, 9, 24, 40, 1, 1, pad=0), {}),
    # K = 320 on 9 CTAs: only 128 x 64 tiles (10, two rounds) give half the CTAs one; the
    # wave model takes 4 tiles of 128 x 160 in one round instead (conv2d._measured_tiling).
    ("widest-one-round-1x16x16x320-k320-ctas9", _layer(1, 16, 16, 320, 320), {"ctas": 9}),
    # 192-row tiles (three consumer warpgroups): by default where they save a round (M =
    # 320 on 2 CTAs: 2 tiles of 192 rows, the second 128, against 3 of 128 rows), and
    # pinned over a ragged M = 242 (the second row block 50 rows). (swap_ab=False: on 2
    # CTAs the layer now runs as Y^T = F X^T by default, _few_columns.)
    ("tall-5x8x8x128-k128-ctas2", _layer(5, 8, 8, 128, 128), {"ctas": 2, "swap_ab": False}),
    # Narrow K in one tile exactly K wide (conv2d.covering_width), then 192 rows
    # (_narrow_and_tall): a 3x3 layer of K = 80 on 192 x 80 tiles, a pointwise one of
    # C = 144 (the last K block past C) on 192 x 24; 64 x 40 tiles of 32-wide K blocks
    # (two column blocks: _split_covering), 64 x 112 ones of one K step (not split); K =
    # 192 on one row block split three times (8 tiles of 64 x 24), and K = 320 on 64 x 160
    # tiles (the exact width, 64 rows: _half_rows).
    ("narrow-tall-3x12x12x64-k80-ctas3", _layer(3, 12, 12, 64, 80), {"ctas": 3}),
    ("narrow-tall-pointwise-3x16x16x144-k24-ctas4", _layer(3, 16, 16, 144, 24, 1, 1, pad=0),
     {"ctas": 4}),
    ("covering-2x7x7x96-k80", _layer(2, 7, 7, 96, 80, 1, 1, pad=0), {}),
    ("covering-quarter-1x9x9x40-k112-ctas4", _layer(1, 9, 9, 40, 112, 1, 1, pad=0),
     {"ctas": 4}),
    ("covering-split-again-1x7x7x672-k192", _layer(1, 7, 7, 672, 192, 1, 1, pad=0), {}),
    ("half-rows-exact-2x9x9x64-k320", _layer(2, 9, 9, 64, 320), {}),
    ("tall-ragged-2x11x11x64-k128", _layer(2, 11, 11, 64, 128), {"block_m": 192,
                                                                  "block_n": 128}),
    # 16 K steps, 4 tiles of 128 x 128 on 3 CTAs: by default the tile past the full wave
    # runs in 3 ordered K parts (4 + 6 + 6 steps: part 0 the short one) on cooperative
    # tiles; the 1x1 layer's A tiles are tiled loads of X (a pointwise view).
    ("tail-split-1x1-2x10x10x1024-k256-ctas3", _layer(2, 10, 10, 1024, 256, 1, 1, pad=0),
     {"ctas": 3}),
    # One exact wave of a pointwise layer (in_one_exact_wave): 64 x 80 tiles of 20 K steps
    # on 20 CTAs (M = 600: the last row block 24 rows; 64 x 160 in 2 K parts without the
    # rule), 128 x 80 on 40 (M = 544, the last 32 rows; ping-pong 128 x 128 without).
    ("exact-wave-64x80-2x15x20x1280-k160-ctas20", _layer(2, 15, 20, 1280, 160, 1, 1, pad=0),
     {"ctas": 20}),
    ("exact-wave-128x80-2x17x16x320-k640-ctas40", _layer(2, 17, 16, 320, 640, 1, 1, pad=0),
     {"ctas": 40}),
    # A pointwise layer of 16 channels in (one K step): two alternating C stages
    # (conv2d._stores_overlapped), 192 x 96 tiles persistent on 5 CTAs (M = 1800: 10 row
    # blocks, the last 72 rows; 2 rounds each), C in 32-column stages, the filter resident
    # in a ring of 2 stages.
    ("stores-overlapped-2x30x30x16-k96-ctas5", _layer(2, 30, 30, 16, 96, 1, 1, pad=0),
     {"ctas": 5}),
    # A C stage the whole tile wide, two of them alternating from tile to tile: 10 tiles
    # of 128 x 64 on 3 CTAs (4 rounds on 2 ring slots; M = 1200, the last row block 48
    # rows). (By default the layer now runs as Y^T = F X^T: swap_ab=False keeps these.)
    ("whole-c-stages-3x20x20x64-k64-ctas3", _layer(3, 20, 20, 64, 64, 1, 1, pad=0),
     {"ctas": 3, "swap_ab": False}),
    # C = 24 in one 32-wide K block (zero-filled past C): 192 x 144 tiles in 2x1 clusters
    # (conv2d._padded_k_in_pairs), two whole-tile C stages: 7 row blocks on 2 clusters
    # (the last cluster's second CTA has none in its last round; the last block 48 rows),
    # and 5 on one cluster (3 rounds, the last block 114 rows).
    ("padded-k-pairs-3x20x20x24-k144-ctas4", _layer(3, 20, 20, 24, 144, 1, 1, pad=0),
     {"ctas": 4}),
    ("padded-k-pairs-2x21x21x24-k144-ctas2", _layer(2, 21, 21, 24, 144, 1, 1, pad=0),
     {"ctas": 2}),
    # The filter resident in the ring (conv2d._resident_filter): 12 tiles of 192 x 16 on
    # 2 CTAs (6 rounds on 2 ring slots: the last four reuse B), and C = 24 on one CTA (no
    # cluster): 14 tiles of 128 x 64 (M = 1725, the last 61 rows).
    ("resident-filter-4x24x24x32-k16-ctas2", _layer(4, 24, 24, 32, 16, 1, 1, pad=0),
     {"ctas": 2}),
    ("resident-filter-3x25x23x24-k64-ctas1", _layer(3, 25, 23, 24, 64, 1, 1, pad=0),
     {"ctas": 1}),
    # The same on one 2x1 cluster: 7 rounds a CTA on 2 slots, each CTA multicasting half
    # of the filter on a slot's first use.
    ("resident-filter-pairs-3x25x23x24-k64-ctas2", _layer(3, 25, 23, 24, 64, 1, 1, pad=0),
     {"ctas": 2}),
    # A resident filter of several K steps, each slot holding one step's B: C = 144 in 3
    # K blocks of 64 (the last past C), 14 tiles of 128 x 24 on 2 CTAs (7 rounds on 6
    # slots; M = 1725, the last 61 rows), and C = 104 in 2 (4 slots), 7 tiles of 128 x 40
    # on 3 CTAs (M = 800, the last 32 rows).
    ("resident-filter-3-steps-3x25x23x144-k24-ctas2",
     _layer(3, 25, 23, 144, 24, 1, 1, pad=0), {"ctas": 2}),
    ("resident-filter-2-steps-2x20x20x104-k40-ctas3",
     _layer(2, 20, 20, 104, 40, 1, 1, pad=0), {"ctas": 3}),
    # Two whole-tile C stages beside the resident filter's 2 ring stages
    # (conv2d._second_whole_c_stage): 10 tiles of 192 x 144 on 3 CTAs (4 rounds, M =
    # 1800: the last row block 72 rows), and of 192 x 112 on one 2x1 cluster (C = 56).
    ("second-c-stage-2x30x30x48-k144-ctas3", _layer(2, 30, 30, 48, 144, 1, 1, pad=0),
     {"ctas": 3}),
    ("second-c-stage-pairs-2x30x30x56-k112-ctas2", _layer(2, 30, 30, 56, 112, 1, 1, pad=0),
     {"ctas": 2}),
    # K = 320 in 192-wide tiles: the second column block is ragged (128 of 192 columns).
    ("k320-bn192-2x8x8x64", _layer(2, 8, 8, 64, 320), {"block_n": 192}),
    # K = 320 by the default rule: two 160-wide tiles per row block, C staged 32 columns at
    # a time (64B swizzle); M = 162 (two row blocks, the second 34 rows).
    ("k320-bn160-2x9x9x64", _layer(2, 9, 9, 64, 320), {}),
    # K = 160: one 160-wide column block, 2x1 clusters multicasting 80 filter rows each.
    ("k160-bn160-cluster-3x8x8x128", _layer(3, 8, 8, 128, 160), {"cluster": 2, "ctas": 4}),
    ("bn256-2x8x8x64-k256", _layer(2, 8, 8, 64, 256), {"block_n": 256}),
    # Ping-pong warpgroups in 2x1 clusters multicasting the filter, 5 row blocks (the last
    # cluster's second CTA has none), 2 rounds per cluster.
    ("pingpong-cluster-4x12x12x128-k128", _layer(4, 12, 12, 128, 128),
     {"schedule": "pingpong", "cluster": 2, "ctas": 4}),
    ("dilation2-fp16-2x10x10x64-k64", _layer(2, 10, 10, 64, 64, pad=2, dilation=2),
     {"dtype": "float16"}),
    # A 7x7 stride-2 stem with padding 3 (49 taps, 49 K steps).
    ("7x7-stride2-2x16x16x64-k64", _layer(2, 16, 16, 64, 64, 7, 7, stride=2, pad=3), {}),
    # Asymmetric padding over a non-square image.
    ("pad2x1-3x6x10x64-k64", Conv2dGeometry(3, 6, 10, 64, 64, 3, 3, padding=(2, 1)), {}),
    # M = 189 output pixels (3 x 9 x 7): no multiple of 8; a 7x7 layer at batch 1 (M = 49).
    ("m189-3x9x7x64-k64", _layer(3, 9, 7, 64, 64), {}),
    ("m49-1x7x7x512-k512", _layer(1, 7, 7, 512, 512), {}),
    # C no multiple of 64: K blocks of the widest of 32 and 16 channels dividing C, so each
    # im2col load still reads one tap (64B / 32B-swizzled slots of 64- / 32-byte rows).
    # C = 32 (one 32-block per tap), C = 16 with M = 126 (ragged), C = 96 (three 32-blocks
    # per tap), C = 48 in fp16 with asymmetric padding (three 16-blocks per tap), and
    # C = 96 stride 2 in 2x1 clusters (each CTA multicasts half of the 32-column B tile).
    ("c32-bk32-2x8x8x32-k64", _layer(2, 8, 8, 32, 64), {}),
    ("c16-bk16-2x9x7x16-k64", _layer(2, 9, 7, 16, 64), {}),
    ("c96-bk32-2x8x8x96-k128", _layer(2, 8, 8, 96, 128), {}),
    ("c48-bk16-fp16-pad2x1-3x6x10x48-k64", Conv2dGeometry(3, 6, 10, 48, 64, 3, 3,
                                                        padding=(2, 1)),
     {"dtype": "float16", "block_k": 16}),
    ("c96-bk32-stride2-cluster-4x12x12x96-k128", _layer(4, 12, 12, 96, 128, stride=2),
     {"cluster": 2, "ctas": 4}),
    # C 8 mod 16: 16-wide K blocks copied in two 8-column pieces (each inside one tap) into
    # unswizzled slots. C = 24 with a 3x3 filter (K = 216: the last K block is one piece,
    # the MMA reads zeros for the other), C = 8 in fp16 with 32 output channels (a ragged
    # 64-wide tile), C = 40 with a 2x2 stride-2 filter (K = 160: no half block, pieces
    # straddling taps), C = 24 in 2x1 clusters and with stream-K (runs ending mid-tile).
    # (C = 8 takes pieces by default; C of 24 and more pads its taps, below, unless asked.)
    ("c24-pieces-2x9x7x24-k64", _layer(2, 9, 7, 24, 64), PIECES),
    ("c8-pieces-fp16-3x8x8x8-k32", _layer(3, 8, 8, 8, 32), {"dtype": "float16"}),
    ("c40-pieces-2x2-stride2-2x9x9x40-k48", _layer(2, 9, 9, 40, 48, 2, 2, stride=2, pad=0),
     PIECES),
    ("c24-pieces-cluster-4x12x12x24-k64", _layer(4, 12, 12, 24, 64),
     {"cluster": 2, "ctas": 4, **PIECES}),
    ("c24-pieces-streamk-2x7x7x24-k128", _layer(2, 7, 7, 24, 128),
     {"block_n": 128, "stream_k": True, "ctas": 5, **PIECES}),
    # Each tap's channels padded to whole K blocks (tap_columns): A and B read as (rows,
    # taps, channels), one load a tap, zeros past its channels. C = 24 in 32 columns
    # (ragged M), C = 40 stride 2 in 64, C = 80 in three 32-wide blocks (96), C = 56 in
    # 64, C = 8 in one 16-wide block (told: no pieces); with stream-K (runs ending
    # mid-tap) and in 1x2 clusters sharing A.
    # (These four take halo tiles by default: halo=False keeps their im2col loads.)
    ("taps32-c24-2x9x7x24-k64", _layer(2, 9, 7, 24, 64), {"halo": False}),
    ("taps64-c40-stride2-2x12x12x40-k40", _layer(2, 12, 12, 40, 40, stride=2), {}),
    ("taps96-c80-2x9x9x80-k80", _layer(2, 9, 9, 80, 80), {"ctas": 8, "halo": False}),
    ("taps64-c56-2x9x9x56-k112", _layer(2, 9, 9, 56, 112), {"ctas": 8, "halo": False}),
    ("taps16-c8-2x16x16x8-k32", _layer(2, 16, 16, 8, 32),
     {"block_k": 16, "a_copy_k": 0, "halo": False}),
    # Halo tiles (kernels/halo.py): by default for 40 channels (one 64-wide K block a
    # tap), 10 output rows of 13 a tile on 192 rows, 4 tiles on 2 CTAs (both halo slots
    # in turn); asked for on 128 rows at dilation 2 (150 columns and the filter's reach
    # pass 128 rows), segments of 6 rows by 12 columns (halo width 16), 13 tiles on 3
    # CTAs.
    ("halo-c40-2x20x13x40-k48-ctas2", _layer(2, 20, 13, 40, 48), {"ctas": 2}),
    ("halo-segments-dil2-1x6x150x16-k32", _layer(1, 6, 150, 16, 32, pad=2, dilation=2),
     {"halo": True, "block_m": 128, "ctas": 3}),
    # By default segments of several output rows where a row is wider than a tile: 5
    # rows of 22 columns (halo width 24: each row's part of the C stage on a whole
    # swizzle period), stored a row at a time; 28 tiles on 6 CTAs, ragged columns
    # (136 = 6 x 22 + 4) and rows (10 = 2 x 5).
    ("halo-row-segments-2x10x136x24-k32-ctas6", _layer(2, 10, 136, 24, 32), {"ctas": 6}),
    # By default one-row tiles of a 112-wide image with the filter resident: 10 tiles on
    # 4 CTAs (the ring one slot a K step, loaded once a CTA).
    ("halo-one-row-resident-2x5x112x24-k32-ctas4", _layer(2, 5, 112, 24, 32), {"ctas": 4}),
    # K folded over the taps (the default above) in a mainloop too long to unroll: a 7x7
    # filter over 24 channels, K = 1176 in 19 steps of 64 (each k16 step's operand
    # computed at run time; the last live one pairs tap 48's plane 2 with the zeroed
    # region, the two after it run no MMA); 6 rows of 12 a tile, 4 tiles on 4 CTAs. And
    # the padded layout, asked for, on the row-segments layer.
    ("halo-folded-rolled-7x7-2x12x12x24-k256-ctas4", _layer(2, 12, 12, 24, 256, 7, 7, pad=3),
     {"ctas": 4}),
    ("halo-padded-2x10x136x24-k32-ctas6", _layer(2, 10, 136, 24, 32),
     {"ctas": 6, "halo": "padded"}),
    # Channels the im2col loads do not pad take halo tiles by default too (K folded): 32
    # of them in whole rows (6 of 12, 4 tiles on 4 CTAs), 16 in segments of 5 rows by 22
    # with the filter resident (14 tiles on 6 CTAs) and in one-row tiles of 120 (18 on 4).
    ("halo-c32-2x12x12x32-k64-ctas4", _layer(2, 12, 12, 32, 64), {"ctas": 4}),
    ("halo-c16-segments-1x10x140x16-k32-ctas6", _layer(1, 10, 140, 16, 32), {"ctas": 6}),
    ("halo-c16-one-row-2x9x120x16-k16-ctas4", _layer(2, 9, 120, 16, 16), {"ctas": 4}),
    # A whole row whose slots do not fit (three halo rows of 98 pixels of 88 channels:
    # 52 KB raw and 56 KB of planes a slot) takes segments of several rows instead: 8
    # rows of 22 on 192 rows (halo width 24), ragged columns (96 = 4 x 22 + 8), the
    # filter streamed, 10 tiles on 4 CTAs.
    ("halo-c88-segments-for-a-whole-row-2x8x96x88-k64-ctas4", _layer(2, 8, 96, 88, 64),
     {"halo": True, "block_m": 192, "ctas": 4}),
    ("taps32-c24-streamk-2x14x14x24-k128", _layer(2, 14, 14, 24, 128),
     {"block_n": 128, "stream_k": True, "ctas": 8}),
    ("taps32-c24-cluster1x2-4x12x12x24-k128", _layer(4, 12, 12, 24, 128),
     {"block_n": 64, "cluster_n": 2, "ctas": 4}),
    # 1xN clusters multicasting the activation: each CTA loads its own rows of the A tile
    # (one im2col load of 32 or 64 pixels from its own first pixel) into every CTA. The
    # 7x7x512 layer at batch 3 in 1x4 clusters (M = 147, ragged; 128-wide tiles, the
    # cheapest filling width on 8 CTAs), K = 160 in 1x4 clusters of 64-wide tiles (3
    # column blocks: the last CTA of each cluster past K), C = 24 pieces in 1x2 clusters.
    ("cluster1x4-3x7x7x512-k512", _layer(3, 7, 7, 512, 512), {"cluster_n": 4, "ctas": 8}),
    ("cluster1x4-ragged-n-3x8x8x64-k160", _layer(3, 8, 8, 64, 160),
     {"block_n": 64, "cluster_n": 4, "ctas": 8}),
    ("c24-pieces-cluster1x2-4x12x12x24-k128", _layer(4, 12, 12, 24, 128),
     {"block_n": 64, "cluster_n": 2, "ctas": 4, **PIECES}),
    # Stream-K: the 7x7x512 layer at batch 2 (M = 98, 4 tiles of 72 K steps on 132 CTAs:
    # each tile cut into ~33 runs), and in 2x1 clusters at batch 3 (M = 147: the last
    # cluster's second CTA past M) with 128-wide tiles on 20 CTAs.
    ("streamk-2x7x7x512-k512", _layer(2, 7, 7, 512, 512), {"block_n": 128,
                                                            "stream_k": True}),
    ("streamk-cluster-3x7x7x256-k256", _layer(3, 7, 7, 256, 256),
     {"block_n": 128, "stream_k": True, "cluster": 2, "ctas": 20}),
    # Ordered K parts that do not divide the 9 K steps: part 0 takes 4, part 1 5 (one unit
    # per CTA); and 5 tiles in 2 parts on 4 CTAs, each CTA always on the same part (ring
    # uses j * count over 3 rounds), cooperative and ping-pong.
    ("ordered-short-part0-2x8x8x64-k64", _layer(2, 8, 8, 64, 64),
     {"split_k": 2, "split_k_ordered": True}),
    ("ordered-rounds-4x12x12x64-k128", _layer(4, 12, 12, 64, 128),
     {"block_n": 128, "split_k": 2, "split_k_ordered": True, "ctas": 4}),
    ("ordered-rounds-pingpong-4x12x12x64-k128", _layer(4, 12, 12, 64, 128),
     {"block_n": 128, "split_k": 2, "split_k_ordered": True, "ctas": 4,
      "schedule": "pingpong"}),
    # Two alternating C stages (conv2d._alternating_c_stages takes them by default on the
    # narrower stages of ordered parts, clusters, 64- and 192-row tiles above) where
    # stream-K runs end mid-tile, and in a tail split (one full round of 4 tiles, the
    # fifth in 2 ordered parts).
    ("streamk-two-c-stages-2x7x7x512-k512", _layer(2, 7, 7, 512, 512),
     {"block_n": 128, "stream_k": True, "epilogue_n": 64, "epilogue_buffers": 2}),
    ("tail-two-c-stages-4x12x12x64-k128", _layer(4, 12, 12, 64, 128),
     {"block_n": 128, "tail_split": 2, "ctas": 4, "epilogue_n": 64,
      "epilogue_buffers": 2}),
    # Patch layers (filter = stride, no padding), folded (Conv2dGeometry.patches_folded):
    # a ViT's 16 x 16 patches of 8 channels (one 16-row tap of 128 channels a folded
    # pixel: 64-wide K blocks straddling the unfolded taps; M = 30), of RGB (C = 3: 48
    # channels a folded pixel, padded to one 64-wide K block), and 2 x 2 stride 2 over 9
    # rows (the last row left over: W folds, 48 channels padded to 64; H keeps stride 2).
    ("patches-16x16-stride16-2x48x80x8-k64", _layer(2, 48, 80, 8, 64, 16, 16, stride=16,
                                                    pad=0), {}),
    ("patches-rgb-16x16-stride16-2x32x32x3-k64", _layer(2, 32, 32, 3, 64, 16, 16,
                                                        stride=16, pad=0), {}),
    ("patches-w-only-2x2-stride2-2x9x8x24-k32", _layer(2, 9, 8, 24, 32, 2, 2, stride=2,
                                                       pad=0), {}),
    # C 8 mod 16 on 192-row tiles (conv2d._tall_pairs_of_pieces): a 7x7 stride-2 stem over
    # 8 channels in 2x1 clusters (5 tiles on 4 CTAs, M = 800: the last 32 rows; 25 K steps
    # of two 8-column pieces), and a 3x3 layer of 24 channels, 24 wide: no cluster.
    ("tall-pairs-pieces-stem-2x40x40x8-k64-ctas4", _layer(2, 40, 40, 8, 64, 7, 7, stride=2,
                                                          pad=3), {"ctas": 4}),
    ("tall-pieces-2x20x20x24-k24-ctas2", _layer(2, 20, 20, 24, 24), {"ctas": 2, **PIECES}),
    # 16-channel K blocks (conv2d._narrow_blocks_in_pairs): 192 x 64 tiles in one 2x1
    # cluster, 9 tiles (M = 1600: the last 64 rows) on 2 CTAs, 9 K steps (the im2col
    # loads kept: by default the layer takes halo tiles).
    ("narrow-blocks-pairs-4x20x20x16-k64-ctas2", _layer(4, 20, 20, 16, 64),
     {"ctas": 2, "halo": False}),
    # 72 K steps on 64 x 256 tiles (conv2d_tiling._wide_half_rows): 3 tiles on 4 CTAs, M
    # = 192 (the last tile's rows past none), two C stages of 128 columns alternating
    # (swap_ab=False: by default Y^T = F X^T on 4 tiles of 64 x 192, _few_columns).
    ("wide-half-rows-3x8x8x512-k256-ctas4", _layer(3, 8, 8, 512, 256),
     {"ctas": 4, "swap_ab": False}),
]
DEFAULT = [(name, geometry, {}) for name, geometry, _ in BENCHMARK.PROBLEMS]


def _config(geometry: Conv2dGeometry, options: dict) -> GemmConfig:
    options = dict(options)
    return conv2d_config(geometry, options.pop("dtype", "bfloat16"), **options)


@pytest.fixture(scope="module", params=DEFAULT + SMALL, ids=[c[0] for c in DEFAULT + SMALL])
def built(request):
    _, geometry, options = request.param
    cfg = _config(geometry, options)
    kernel = conv2d_kernel(geometry, cfg)
    return geometry, cfg, kernel, compile_kernel(kernel)


def test_default_layers_get_the_documented_tiling():
    """conv2d_config's rule on the benchmark's layers (132 CTAs): (block_m, block_n, C
    stage columns, C stages, ring stages, cluster shape, tiles). Two C stages alternate
    wherever one is narrower than a cooperative tile and 4 ring stages still fit beside
    them (_alternating_c_stages)."""
    want = {
        "resnet50-56x56x64": (128, 64, 64, 1, 8, (1, 1), 784),  # K = 64: one column block
        # 196 tiles of 128 rows leave a wave 48% full; 131 of 192 rows fill one.
        "resnet50-28x28x128": (192, 128, 64, 2, 4, (1, 1), 131),
        # Y^T = F X^T (_few_columns): K = 256 in 4 row blocks of 64, the 6272 pixels in
        # 33 column blocks of 192: 132 tiles (98 of 128 x 128 before: 1.10x on the H200).
        "resnet50-14x14x256": (64, 192, 192, 1, 6, (1, 1), 132),
        # 13 row blocks: 256 wide leaves 26 tiles, whose K is cut into 5 ordered parts.
        # (Two C stages would leave 3 ring stages.)
        "resnet50-7x7x512": (128, 256, 128, 1, 4, (1, 1), 26),
        # No whole-atom width >= 128 divides 320: two 160-wide tiles, C 32 columns at a
        # time (64B swizzle), no cluster.
        "unet-64x64x320": (128, 160, 32, 2, 5, (1, 1), 512),
        "unet-32x32x640": (128, 160, 32, 2, 5, (1, 1), 256),  # four 160-wide: 1.18x 128-wide
        "vae-256x256x256": (128, 256, 128, 1, 4, (1, 1), 512),  # the GEMM's default tiling
        "resnet50-56x56x128-stride2": (192, 128, 64, 2, 4, (1, 1), 131),
    }
    got = {}
    for name, geometry, _ in BENCHMARK.PROBLEMS:
        cfg = conv2d_config(geometry)
        assert cfg.block_k == 64
        assert cfg.schedule == "cooperative"
        # K in ordered parts only where the widest tiles are too few for the SMs.
        assert (cfg.split_k, cfg.split_k_ordered) == (
            (5, True) if name == "resnet50-7x7x512" else (1, False))
        got[name] = (cfg.block_m, cfg.block_n, cfg.epilogue_cols, cfg.epilogue_buffers,
                     cfg.stages, (cfg.cluster, cfg.cluster_n), cfg.num_tiles)
    assert got == want


def test_few_wide_tiles_take_as_many_ordered_k_parts_as_the_ctas_hold():
    """Where the widest tiles leave at most half the SMs a tile, K is cut into ordered
    parts (Y = conv: part 0 stores): as many as the CTAs hold with one unit each, each at
    least 4 K steps, and where they do not divide the K steps part 0 is the short one (no
    part runs past R*S*C)."""
    stride2 = conv2d_config(_layer(2, 8, 8, 128, 128, stride=2))  # 1 row block, 18 K steps
    # 18 // 4 = 4 parts: 5 steps each but part 0's 3; 4 units of 128 x 128 tiles give
    # too few CTAs one, so the tiles are 64 wide (see the test below).
    assert (stride2.block_n, stride2.split_k, stride2.split_k_ordered) == (64, 4, True)
    assert [stride2.part_steps(p) for p in range(4)] == [(0, 3), (3, 5), (8, 5), (13, 5)]
    seven = conv2d_config(_layer(32, 7, 7, 512, 512))  # 26 tiles, 72 K steps
    assert (seven.block_n, seven.split_k, seven.work_units) == (256, 5, 130)
    assert (seven.part_shortfall, seven.part_steps(0), seven.part_steps(4)) == (3, (0, 12),
                                                                                (57, 15))
    # 8 tiles: 132 // 8 = 16 parts would leave the last none (15 x 5 = 75 steps); 15 do.
    small = conv2d_config(_layer(8, 7, 7, 512, 512))
    assert (small.num_tiles, small.split_k, small.part_steps(0)) == (8, 15, (0, 2))
    # 13 tiles of 128 x 256 would take 9 parts of 4 K steps (36): the steps, not the
    # CTAs, cap them, so 26 of 128 x 128 take 5 parts, part 0 the short one.
    fourteen = conv2d_config(_layer(8, 14, 14, 256, 256))
    assert (fourteen.block_n, fourteen.num_tiles, fourteen.split_k) == (128, 26, 5)
    assert [fourteen.part_steps(p) for p in range(5)] == [(0, 4), (4, 8), (12, 8), (20, 8),
                                                           (28, 8)]
    # 2 K steps (a 1x1 filter over 128 channels): too few to cut.
    assert conv2d_config(_layer(4, 10, 10, 128, 128, 1, 1, pad=0)).split_k == 1
    # A chosen cluster or split is kept as given.
    assert conv2d_config(_layer(32, 7, 7, 512, 512), cluster_n=2).split_k == 1


def test_batch_one_layers_halve_the_tile_where_the_widest_give_few_ctas_a_unit(
        before_conv_narrow_wave):
    """Where the widest tiles in ordered parts give at most a quarter of the CTAs a unit
    (tiles x parts), or where the K steps (4 a part) rather than the CTAs cap their
    parts, tiles half as wide do (measured on the H100, kernels/conv2d.py)."""
    cases = {  # layer: (block_n, parts, units); the widest had 18, 36, 30, 28, 117, 117
        (1, 14, 14, 256, 256, 3, 1): (128, 9, 36),
        (2, 14, 14, 256, 256, 3, 1): (128, 9, 72),  # 4 tiles: 9 parts, not 16
        (1, 7, 7, 512, 512, 3, 1): (128, 15, 60),
        (1, 28, 28, 128, 128, 3, 1): (64, 4, 56),
        (8, 14, 14, 256, 256, 3, 1): (128, 5, 130),  # 13 tiles: 9 parts, not 10
        (8, 28, 28, 256, 256, 3, 2): (128, 5, 130),  # its stride-2 twin
    }
    for (n, h, w, c, k, r, stride), want in cases.items():
        cfg = conv2d_config(_layer(n, h, w, c, k, r, r, stride=stride, pad=r // 2))
        assert (cfg.block_n, cfg.split_k, cfg.num_tiles * cfg.split_k) == want
        assert cfg.split_k_ordered and cfg.schedule == "cooperative" and cfg.block_m == 128
    # More units, the CTAs capping the parts: the widest stay (120 units of 128 x 256 at
    # N=8 7x7x512, 15 parts where the CTAs hold 16; 130 at N=32, 5 of 5; N=32 7x7x2048
    # -> 512 1x1, 5 of 5).
    for layer, want in ((_layer(8, 7, 7, 512, 512), (256, 15)),
                        (_layer(32, 7, 7, 512, 512), (256, 5)),
                        (_layer(32, 7, 7, 2048, 512, 1, 1, pad=0), (256, 5))):
        cfg = conv2d_config(layer)
        assert (cfg.block_n, cfg.split_k) == want
    # A width the caller chose is kept.
    assert conv2d_config(_layer(1, 14, 14, 256, 256), block_n=256).block_n == 256


def test_a_thin_last_round_of_tiles_is_shared_out_with_stream_k():
    """Stream-K on a conv layer's tiles where their last round is at most half full, they
    have at least 27 K steps and the wave model prices the fix-ups below the round saved:
    320 tiles of 128 x 256 (2.4 rounds on 132 SMs) with 180 K steps are; FPN's 850 of 128
    x 256 (6.44 rounds, 36 K steps, runs of 15: 3 peers) and N=32 80x80x192 s2's 400 of
    128 x 192 (3.03 rounds, 27 steps, the last full round joining: 1 peer) too; a last
    round 52-88% full, runs so short a tile has 6 to 53 peers, a cluster or split the
    caller chose are not."""
    sd = conv2d_config(_layer(8, 32, 32, 1280, 1280))
    assert (sd.block_n, sd.num_tiles, sd.k_steps, sd.stream_k, sd.split_k) == (
        256, 320, 180, True, 1)
    fpn = conv2d_config(_layer(2, 200, 272, 256, 256))
    assert (fpn.block_m, fpn.block_n, fpn.num_tiles, fpn.k_steps, fpn.stream_k) == (
        128, 256, 850, 36, True)
    assert 850 % 132 == 58 <= 132 // 2
    strided = conv2d_config(_layer(32, 80, 80, 192, 192, stride=2))
    assert (strided.block_n, strided.num_tiles, strided.k_steps, strided.stream_k) == (
        192, 400, 27, True)
    assert stream_k_shares_thin_round(replace(strided, stream_k=False))
    assert (fpn.stream_k_dp_tiles, fpn.iterations, fpn.stream_k_peers) == (792, 58 * 36, 3)
    assert (strided.stream_k_dp_tiles, strided.iterations // 132,
            strided.stream_k_peers) == (264, 27, 1)
    # Runs of 1 to 5 K steps, whose fix-ups the wave model prices above the round they
    # save: 4 tiles of 54 steps over 132 CTAs (53 peers, held out 0.90x the plain
    # waves), 8 of 36 (18 peers, 0.90x), 25 of 27 (6 peers, 0.96x).
    for layer, want in ((_layer(8, 80, 80, 384, 192), (192, 400, 54, 1, 53)),
                        (_layer(2, 160, 160, 256, 256), (128, 800, 36, 2, 18)),
                        (_layer(8, 136, 136, 192, 192, stride=2), (192, 289, 27, 5, 6))):
        cfg = conv2d_config(layer)
        assert (cfg.block_n, cfg.num_tiles, cfg.k_steps, cfg.iterations // cfg.workers,
                cfg.stream_k_peers) == want
        assert leaves_thin_round(cfg) and not cfg.stream_k
        assert estimate(replace(cfg, stream_k=True)).cost > estimate(cfg).cost
        assert not stream_k_shares_thin_round(cfg)
    # Runs of 7: 26 tiles of 36 steps (5 peers), priced 1.05x cheaper (ran 1.05x).
    small = conv2d_config(_layer(1, 136, 136, 256, 256))
    assert (small.block_n, small.num_tiles, small.stream_k, small.stream_k_peers) == (
        128, 290, True, 5)
    # 26 K steps: under the fewest measured.
    assert not stream_k_shares_thin_round(replace(strided, k=strided.k * 26 // 27,
                                                  stream_k=False))
    # Last rounds 88%, 52% and 61% full: plain waves (the 52% ones ran 0.91-1.02x with
    # stream-K, N=2 100x136x256 0.94x).
    for layer, tiles in ((_layer(1, 256, 256, 256, 256), 512), (_layer(8, 40, 40, 320, 320), 200),
                         (_layer(2, 100, 136, 256, 256), 213)):
        cfg = conv2d_config(layer)
        assert (cfg.num_tiles, cfg.stream_k) == (tiles, False)
    assert not conv2d_config(_layer(8, 32, 32, 1280, 1280), cluster=1).stream_k
    assert not conv2d_config(_layer(8, 32, 32, 1280, 1280), stream_k=False).stream_k
    assert not conv2d_config(_layer(2, 200, 272, 256, 256), split_k=1).stream_k


def test_whole_rounds_of_192_row_tiles_beat_stream_k_over_a_thin_round():
    """196 tiles of 128 x 256 (a last round 48% full) that stream-K would share out take
    264 tiles of 192 x 128 in two whole rounds where the wave model prices those below the
    plain waves (VGG N=16 28x28x512: 1.12x stream-K, H100); 196 of 128 x 128 at N=2
    56x56x512 take 132 in one round (1.34x)."""
    vgg = conv2d_config(_layer(16, 28, 28, 512, 512))
    assert (vgg.block_m, vgg.block_n, vgg.num_tiles, vgg.stream_k, vgg.schedule) == (
        192, 128, 264, False, "cooperative")
    small = conv2d_config(_layer(2, 56, 56, 512, 512))
    assert (small.block_m, small.block_n, small.num_tiles, small.stream_k) == (
        192, 128, 132, False)
    # The caller's 128-row tiles take stream-K over their thin round.
    kept = conv2d_config(_layer(16, 28, 28, 512, 512), block_m=128)
    assert (kept.block_n, kept.num_tiles, kept.stream_k) == (256, 196, True)


def test_the_width_is_the_cheapest_by_the_wave_model_among_those_filling_the_sms(
        before_conv_narrow_wave):
    """Among exact widths >= 128 whose tiles give at least half the SMs one (and the widest
    in ordered K parts where it does not), the wave model (kernels/tiling: rounds x K
    steps x STEP_COST, stream-K where it pays, the parts' price) picks: K =
    1280 over 16 row blocks is 80 tiles of 128 x 256 (a wave 61% full, cost 180 x 1.0)
    or 128 of 128 x 160 (one wave, 180 x 0.66): 160 (measured 1.16-1.17x cuDNN on the
    H100, 256-wide 0.83x)."""
    sd = conv2d_config(_layer(8, 16, 16, 1280, 1280))
    assert (sd.block_n, sd.num_tiles, sd.stream_k, sd.split_k) == (160, 128, False, 1)
    # Two alternating 64B-swizzled C stages, as UNet's.
    assert (sd.epilogue_cols, sd.epilogue_buffers, sd.stages) == (32, 2, 5)
    # Half as many rows: 80 tiles of 128 x 128 fill 61% of the SMs in one round of 180 K
    # steps (180 x 0.57 = 102.6); the widest, 40 of 128 x 256, fill too few, and in 3
    # ordered parts of 60 steps (120 units) are priced 60 x 1.19 + 2 x 1.5 = 74.4: those
    # (measured 1.35x cuDNN, the 128-wide 0.95-0.97x).
    quarter = conv2d_config(_layer(4, 16, 16, 1280, 1280))
    assert (quarter.block_n, quarter.split_k, quarter.split_k_ordered, quarter.work_units) == (
        256, 3, True, 120)
    assert quarter.steps_per_unit == 60 and quarter.part_shortfall == 0
    # Not where the caller chose how the work is split, nor on ping-pong tiles.
    assert conv2d_config(_layer(4, 16, 16, 1280, 1280), cluster=1).split_k == 1
    assert conv2d_config(_layer(4, 16, 16, 1280, 1280), schedule="pingpong").split_k == 1
    # 14x14x256 at N=32: 98 tiles of 128 x 128 (36 K steps) against 49 of 128 x 256 in
    # 2 parts of 18, under the 32 a part needs: plain waves (measured 1.06-1.10x against
    # 1.02-1.05x).
    assert conv2d_config(_layer(32, 14, 14, 256, 256)).split_k == 1
    # 320 tiles of 128 x 256 with stream-K (2.4 waves shared out) cost less than 512 of
    # 128 x 160 in 3.9 rounds.
    assert conv2d_config(_layer(8, 32, 32, 1280, 1280)).block_n == 256
    # Where only 64-wide tiles give half the SMs one, the widest exact ones in one round
    # are priced against them (a 64-wide K step at STEP_COST 0.45): N=1 UNet 64x64x320
    # takes 64 tiles of 128 x 160 (45 x 0.72 = 32.4) over 160 of 128 x 64 (2 x 45 x
    # 0.45 = 40.5): measured 1.02x cuDNN against 0.75x (H100).
    assert STEP_COST[64] == 0.45
    unet = conv2d_config(_layer(1, 64, 64, 320, 320))
    assert (unet.block_n, unet.num_tiles, unet.split_k, unet.stream_k) == (160, 64, 1, False)
    assert conv2d_config(_layer(1, 64, 64, 640, 320, 1, 1, pad=0)).block_n == 160
    # K = 64 has no wider exact tile; a caller's split keeps the 64-wide tiles.
    assert conv2d_config(_layer(1, 64, 64, 64, 64)).block_n == 64
    assert conv2d_config(_layer(1, 64, 64, 320, 320), cluster=1).block_n == 64


def test_a_layer_of_few_k_steps_takes_ping_pong_128_wide_tiles(before_conv_narrow_wave):
    """At most SHORT_K_STEPS K steps (ResNet's 1x1 layers) and 128 dividing K: ping-pong
    128 x 128 tiles, no split, no cluster, where they fill more than half the CTAs (64-row
    tiles where they do not, the tail in K parts or 192-row tiles where those pay: the
    tests below); not where the caller chose the tile, the schedule or the split, nor past
    16 K steps or for K = 64."""
    assert SHORT_K_STEPS == 16
    for layer in [_layer(32, 28, 28, 512, 256, 1, 1, pad=0),  # 8 K steps, 392 tiles
                  _layer(32, 7, 7, 512, 2048, 1, 1, pad=0),  # 128 x 256 before
                  _layer(32, 14, 14, 1024, 256, 1, 1, pad=0)]:  # 16 K steps
        cfg = conv2d_config(layer)
        assert cfg.k_steps <= 16
        assert (cfg.schedule, cfg.block_n, cfg.split_k, cfg.cluster_size, cfg.stream_k) == (
            "pingpong", 128, 1, 1, False)
        assert (cfg.epilogue_cols, cfg.stages) == (64, 6)
    seven = conv2d_config(_layer(32, 7, 7, 2048, 512, 1, 1, pad=0))  # 32 K steps
    assert (seven.schedule, seven.block_n, seven.split_k) == ("cooperative", 256, 5)
    assert conv2d_config(_layer(32, 56, 56, 64, 64, 1, 1, pad=0)).block_n == 64
    short = _layer(32, 28, 28, 512, 128, 1, 1, pad=0)
    assert conv2d_config(short, schedule="cooperative").schedule == "cooperative"
    assert conv2d_config(short, block_n=64).schedule == "cooperative"
    assert conv2d_config(short, cluster=2).schedule == "cooperative"


def test_a_short_layer_with_a_small_partial_wave_cuts_its_tail_into_k_parts():
    """16 K steps and 294 tiles of 128 x 128 on 132 CTAs (N=32 14x14x1024 -> 768): the 30
    past the full waves (at most half the CTAs) run in 4 ordered K parts of 4 steps, on
    cooperative tiles (the GEMM's wave model's tail split of these tiles); with 98 tiles
    (no full wave) or 8 K steps (under TAIL_MIN_STEPS) a layer keeps its ping-pong tiles, a
    caller's schedule is kept, and where 192-row tiles save a round they take the layer
    instead (14x14x1024 -> 512: the next test)."""
    layer = _layer(32, 14, 14, 1024, 768, 1, 1, pad=0)
    cfg = conv2d_config(layer)
    assert (cfg.schedule, cfg.block_m, cfg.block_n, cfg.num_tiles, cfg.k_steps) == (
        "cooperative", 128, 128, 294, 16)
    assert (cfg.tail_split, cfg.tail_tiles, cfg.split_k, cfg.reduction_parts) == (4, 30, 1, 4)
    assert (cfg.epilogue_cols, cfg.stages) == (128, 6)  # the whole tile in one C stage
    for other in (_layer(32, 14, 14, 1024, 256, 1, 1, pad=0),  # 98 tiles
                  _layer(32, 28, 28, 512, 256, 1, 1, pad=0)):  # 8 K steps
        # (swap_ab=False: the 98 tiles run as Y^T = F X^T after these rules, _few_columns.)
        kept = conv2d_config(other, swap_ab=False)
        assert (kept.schedule, kept.tail_split) == ("pingpong", 1)
    pinned = conv2d_config(layer, schedule="pingpong")
    assert (pinned.schedule, pinned.tail_split) == ("pingpong", 1)


def test_a_long_layer_on_one_wave_of_128x128_tiles_takes_64x256_ones():
    """72 K steps on one wave of 128 x 128 tiles: 64 x 256 tiles, as many, still one wave
    (conv2d_tiling._wide_half_rows); not at 36 K steps, not where one wave does not hold
    them, not past the caller's choices, not where ordered K parts were taken."""
    assert WIDE_HALF_ROWS_MIN_STEPS == 64
    for layer, tiles in ((_layer(16, 14, 14, 512, 512), 98), (_layer(12, 14, 14, 512, 512), 74),
                         (_layer(1, 64, 64, 512, 512), 128), (_layer(32, 7, 7, 512, 768), 75)):
        cfg = conv2d_config(layer)
        assert (cfg.schedule, cfg.block_m, cfg.block_n, cfg.num_tiles, cfg.split_k) == (
            "cooperative", 64, 256, tiles, 1), layer
    # 36 K steps (swap_ab=False: by default the layer runs as Y^T = F X^T, _few_columns)
    short = conv2d_config(_layer(8, 28, 28, 256, 256), swap_ab=False)
    assert (short.block_m, short.block_n, short.k_steps) == (128, 128, 36)
    # 130 tiles of 128 x 128 on 132 CTAs, 125 of 64 x 256: on 128 CTAs neither is one wave.
    assert conv2d_config(_layer(4, 20, 20, 512, 1280), ctas=128).block_m == 128
    assert conv2d_config(_layer(4, 20, 20, 512, 1280)).block_m == 64
    kept = conv2d_config(_layer(16, 14, 14, 512, 512), block_n=128)
    assert (kept.block_m, kept.block_n) == (128, 128)
    parts = conv2d_config(_layer(2, 28, 28, 512, 512))
    assert (parts.block_m, parts.block_n, parts.split_k) == (128, 256, 5)


def test_a_layer_whose_192_row_tiles_save_a_round_takes_them():
    """192 x 128 cooperative tiles (three consumer warpgroups, 512 threads, 4 ring stages
    beside two alternating 64-column C stages) where 128-row tiles leave a partial wave
    that 192-row ones fill: the wave model with a 192-row K step at 1.57 of a 128-row one.
    Kept elsewhere (more rounds, or a wave no fuller), and never over a caller's tile,
    schedule or split."""
    for layer, tiles in ((_layer(32, 28, 28, 128, 128), 131),  # 3x3: 196 of 128 rows
                         (_layer(32, 56, 56, 128, 128, stride=2), 131),
                         (_layer(32, 28, 28, 512, 128, 1, 1, pad=0), 131),
                         (_layer(32, 14, 14, 1024, 512, 1, 1, pad=0), 132)):
        cfg = conv2d_config(layer)
        assert (cfg.block_m, cfg.block_n, cfg.schedule, cfg.num_tiles) == (
            192, 128, "cooperative", tiles)
        assert (cfg.consumers, cfg.threads, cfg.consumer_registers) == (3, 512, 152)
        assert (cfg.stages, cfg.epilogue_cols, cfg.epilogue_buffers, cfg.tail_split,
                cfg.split_k) == (4, 64, 2, 1, 1)
        assert cfg.shared_bytes <= MAX_SHARED
    for layer in (_layer(32, 28, 28, 512, 256, 1, 1, pad=0),  # 262 tiles: 2 rounds of 3
                  _layer(32, 7, 7, 512, 2048, 1, 1, pad=0),  # 144 tiles > 132
                  _layer(32, 14, 14, 256, 256),  # 66 tiles: no fuller than 98 of 128 rows
                  _layer(32, 56, 56, 64, 64)):  # K = 64
        assert conv2d_config(layer).block_m != 192
    layer = _layer(32, 28, 28, 128, 128)
    assert conv2d_config(layer, block_n=128).block_m == 128
    assert conv2d_config(layer, schedule="cooperative").block_m == 128
    assert conv2d_config(layer, tail_split=2).block_m == 128


def test_192_row_tiles_are_cooperative_and_keep_their_registers():
    """Three consumer warpgroups share 152 registers a thread (setmaxnreg), 96 of them at
    most for accumulators: 192 x 128 and 192 x 192 tiles, not 192 x 256; no ping-pong (a
    warpgroup would hold 192 rows) and no stream-K (its fix-up is two warpgroups')."""
    ok = GemmConfig(6272, 512, 1024, block_m=192, block_n=192, stages=4, epilogue_n=64)
    ok.check()
    assert (ok.accumulators, ok.max_accumulators) == (96, 96)
    for fields, words in (
            (dict(block_n=256, stages=3), "64x256 outputs, 128 fp32 registers per thread (at "
                                          "most 96 of its 152 beside 2 other consumer "
                                          "warpgroups)"),
            (dict(schedule="pingpong"), "192 cooperative (three consumer warpgroups"),
            (dict(stream_k=True), "stream_k with block_m=192")):
        with pytest.raises(ValueError, match=re.escape(words)):
            GemmConfig(6272, 512, 1024, **{"block_m": 192, "block_n": 128, "stages": 5,
                                           "epilogue_n": 64, **fields}).check()


def test_few_tiles_of_few_k_steps_take_64_row_tiles(before_conv_narrow_wave):
    """A layer of at most HALF_ROWS_MAX_STEPS K steps whose 128-row tiles fill at most half
    the CTAs takes 64-row tiles (cooperative: one consumer warpgroup each): plain where it
    has at most 16 and they fit one wave (64 x 64 where 64 x 128 ones still fill at most
    half and the 64 x 64 ones fit a wave), in ordered K parts past that where they still
    fill at most half (and the 128-row tiles were at least 128 wide). Measured on the
    H100 (kernels/conv2d.py, kernels/tiling)."""
    assert HALF_ROWS_MAX_STEPS == 32
    # (64 x 128 tiles stage C in two alternating 64-column stages: 8 ring stages.)
    cases = {  # layer (n, h, c, k, r): (block_n, tiles, parts, stages)
        (8, 14, 1024, 512, 1): (128, 100, 1, 8),  # 16 K steps; 52 of 128 rows before
        (8, 28, 512, 128, 1): (128, 98, 1, 8),  # 49 of 128 rows before
        # M = 49: one row block either way; 16 tiles of 64 x 128 are 32 of 64 x 64
        # (tiling.narrow_half_rows: at most half the CTAs had a 64 x 128 tile).
        (1, 7, 512, 2048, 1): (64, 32, 1, 12),
        (1, 14, 1024, 512, 1): (64, 32, 1, 12),
        (1, 28, 512, 256, 1): (64, 52, 1, 12),
        (8, 14, 1024, 256, 1): (64, 100, 1, 12),
        (1, 56, 64, 64, 3): (64, 49, 1, 12),  # K = 64: 64 x 64 tiles
        (8, 7, 2048, 512, 1): (128, 28, 4, 8),  # 32 K steps: 4 parts of 8
        (1, 7, 2048, 512, 1): (128, 4, 8, 8),  # 8 parts of 4
        (4, 7, 2048, 512, 1): (128, 16, 8, 8),
    }
    for (n, h, c, k, r), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k, r, r, pad=r // 2))
        assert (cfg.block_m, cfg.schedule, cfg.cluster_size, cfg.stream_k) == (
            64, "cooperative", 1, False)
        assert (cfg.block_n, cfg.num_tiles, cfg.split_k, cfg.stages) == want
        assert cfg.split_k_ordered == (cfg.split_k > 1)
    # 16 K steps whose 64-row tiles would still fill at most half: plain, no parts.
    assert conv2d_config(_layer(1, 14, 14, 1024, 256, 1, 1, pad=0)).split_k == 1
    # 128-row tiles that fill more than half the CTAs stay: 392 tiles (ping-pong), 98
    # (18 K steps, in 2 parts), and N=32 7x7x2048 -> 512 (26 of 128 x 256 in 5 parts:
    # 100 plain 64-row tiles of 32 K steps measured slower).
    for layer in (_layer(32, 28, 28, 512, 256, 1, 1, pad=0), _layer(8, 28, 28, 128, 128),
                  _layer(32, 7, 7, 2048, 512, 1, 1, pad=0)):
        assert conv2d_config(layer).block_m == 128
    # Past 32 K steps (N=1 7x7x512 3x3: 72), and 128 x 64 tiles of 18 K steps: 128 rows.
    assert conv2d_config(_layer(1, 7, 7, 512, 512)).block_m == 128
    assert conv2d_config(_layer(1, 28, 28, 128, 128)).block_m == 128
    # K = 320 in two column blocks of 160: 64 x 160 tiles too (N=1 64x64x640 -> 320 1x1:
    # 128 of them against 64 of 128 x 160, 1.06-1.09x cuDNN against 0.73-0.75x, H200).
    for layer, tiles in ((_layer(2, 9, 9, 64, 320), 6),
                         (_layer(1, 64, 64, 640, 320, 1, 1, pad=0), 128)):
        cfg = conv2d_config(layer)
        assert (cfg.block_m, cfg.block_n, cfg.num_tiles, cfg.stages, cfg.epilogue_cols) == (
            64, 160, tiles, 7, 32)
    # The caller's tile, schedule or split is kept.
    short = _layer(8, 14, 14, 1024, 512, 1, 1, pad=0)
    assert conv2d_config(short, block_m=128).block_m == 128
    assert conv2d_config(short, block_n=128).block_m == 128
    assert conv2d_config(short, schedule="pingpong").block_m == 128
    assert conv2d_config(short, split_k=2, split_k_ordered=True).block_m == 128


def test_a_pointwise_layer_takes_one_wave_of_tiles_dividing_k_exactly(before_conv_narrow_wave):
    """A 1x1 layer whose tiles leave SMs idle or cut K into parts, where tiles of 128 (else
    64) rows and a width dividing K exactly (a multiple of 16, at least 80) make one wave
    95-100% full, takes them: cooperative, no split, no cluster (tiling.in_one_exact_wave,
    measured on SD UNet's 1x1 layers on the H200). Not past 20 K steps on 128 rows or 32
    on 64, not under 512 rows or 5 K steps, not for an im2col layer, not over the
    caller's choices."""
    def picked(layer, **options):
        cfg = conv2d_config(layer, **options)
        return (cfg.schedule, cfg.block_m, cfg.block_n, cfg.num_tiles, cfg.split_k,
                cfg.cluster_size, cfg.stages, cfg.epilogue_cols)

    pointwise = functools.partial(_layer, r=1, s=1, pad=0)
    # N=1 32x32x1280 -> 640 (1024 x 640 x 1280): 32 tiles of 128 x 160 in 4 K parts before.
    assert picked(pointwise(1, 32, 32, 1280, 640)) == (
        "cooperative", 64, 80, 128, 1, 1, 12, 80)
    # N=2 (2048 rows): 128 x 80, 7 stages beside the whole 80-column C stage.
    assert picked(pointwise(2, 32, 32, 1280, 640)) == (
        "cooperative", 128, 80, 128, 1, 1, 7, 80)
    # N=2 32x32x640 -> 1280: 16 row blocks of 8 column blocks of 160 (C in two
    # alternating 32-column stages).
    assert picked(pointwise(2, 32, 32, 640, 1280)) == (
        "cooperative", 128, 160, 128, 1, 1, 5, 32)
    # 30 K steps: 64 x 80 tiles (N=2 16x16x1920 -> 1280), not 128 x 80 ones (N=2
    # 32x32x1920 -> 640 keeps 80 tiles of 128 x 128).
    assert picked(pointwise(2, 16, 16, 1920, 1280))[1:4] == (64, 80, 128)
    assert picked(pointwise(2, 32, 32, 1920, 640))[1:4] == (128, 128, 80)
    # Tiles already one full wave (N=1 64x64x640 -> 320: 128 of 64 x 160) stay; so do
    # the layers no exact width fills (ResNet-50's N=8 14x14x1024 -> 512).
    assert picked(pointwise(1, 64, 64, 640, 320))[1:4] == (64, 160, 128)
    assert picked(pointwise(8, 14, 14, 1024, 512))[1:3] == (64, 128)
    # An im2col layer (stride 2, or 3x3) keeps its tiles; so does the caller's choice.
    assert picked(_layer(2, 64, 64, 1280, 640, 1, 1, stride=2, pad=0))[1:3] != (128, 80)
    for options in ({"block_n": 128}, {"schedule": "pingpong"}, {"stages": 4},
                    {"split_k": 2, "split_k_ordered": True}, {"cluster": 2}):
        assert picked(pointwise(2, 32, 32, 1280, 640), **options)[1:3] != (128, 80)
    # Under 512 rows: not taken (2x15x15x320 -> 640 on 32 CTAs, 450 rows: 20 tiles of
    # 128 x 128 stay). The exact-wave tilings of the GPU cases, on few CTAs.
    assert picked(pointwise(2, 15, 15, 320, 640), ctas=32)[1:4] == (128, 128, 20)
    assert picked(pointwise(2, 15, 20, 1280, 160), ctas=20)[1:5] == (64, 80, 20, 1)
    assert picked(pointwise(2, 17, 16, 320, 640), ctas=40)[1:4] == (128, 80, 40)


def test_a_pointwise_layer_takes_the_fullest_wave_of_narrow_whole_k_tiles():
    """A 1x1 layer takes cooperative 64-row tiles with the whole K each, of the width (a
    multiple of 8, at least 16, dividing K) whose tiles make the fullest wave of half to
    all the CTAs, where they are more than the earlier rules' tiles (tiling.
    in_fullest_narrow_wave, measured on the H200: RESULTS.md 6x). Not for one K step, a
    near-full wave of ping-pong tiles, tiles loading over 3x a unit of the earlier tiling,
    a mainloop past the unroll budget, an im2col layer, or over the caller's choices."""
    assert (NARROW_WAVE_MIN_WIDTH, NARROW_WAVE_WIDTH_STEP, NARROW_WAVE_MIN_FILL) == (16, 8, 0.5)
    assert (NARROW_WAVE_MIN_STEPS, NARROW_WAVE_PINGPONG_FILL,
            NARROW_WAVE_MAX_LOAD_RATIO) == (2, 0.75, 3.0)
    pointwise = functools.partial(_layer, r=1, s=1, pad=0)

    cases = {  # (n, h, c, k): (block_n, tiles, K steps, stages), (block_m, block_n, units) before
        (32, 7, 1152, 320): ((64, 125, 18, 12), (64, 160, 100)),  # 2 ordered parts before
        (32, 7, 1152, 192): ((48, 100, 18, 12), (64, 192, 100)),  # 4 parts; 64 x 64: 75
        (32, 7, 160, 960): ((192, 125, 3, 6), (128, 160, 78)),
        (8, 7, 960, 320): ((32, 70, 15, 12), (64, 160, 14)),
        (1, 14, 112, 672): ((24, 112, 2, 12), (64, 224, 12)),
        (1, 7, 232, 1392): ((16, 87, 4, 12), (128, 192, 8)),  # 1392 = 87 x 16
        (32, 7, 2048, 512): ((128, 100, 32, 8), (128, 256, 130)),  # 64 x 128 steps unrolled
        (8, 8, 2560, 768): ((48, 128, 40, 12), (128, 128, 120)),
    }
    for (n, h, c, k), (want, was) in cases.items():
        layer = pointwise(n, h, h, c, k)
        cfg, old = conv2d_config(layer), config_before_narrow_wave(layer)
        assert (cfg.block_m, cfg.schedule, cfg.cluster_size, cfg.stream_k) == (
            64, "cooperative", 1, False)
        assert (cfg.split_k, cfg.tail_split, cfg.reduction_parts) == (1, 1, 1)
        assert (cfg.block_n, cfg.num_tiles, cfg.k_steps, cfg.stages) == want, (n, h, c, k)
        assert cfg.n % cfg.block_n == 0 and cfg.num_tiles <= cfg.ctas
        assert (old.block_m, old.block_n, old.num_tiles * old.reduction_parts) == was
        assert cfg.num_tiles > old.num_tiles
        assert unit_load_bytes(cfg) <= NARROW_WAVE_MAX_LOAD_RATIO * unit_load_bytes(old)
    # The guards: one K step (N=8 14x14x64 -> 384 keeps 75 tiles of 64 x 128); 105
    # ping-pong tiles of 128 x 64 (N=16 7x7x160 -> 960, 80% of a wave); 128 tiles of 64 x
    # 16 would load 3.3x a unit of 64 x 128 in 8 parts (N=4 7x7x2048 -> 512); 64 x 8
    # tiles are too narrow (N=1 14x14x672 -> 192 keeps 32 of 64 x 24); 64 x 160 tiles of
    # 30 K steps would be a rolled loop (N=2 32x32x1920 -> 640 keeps 80 of 128 x 128);
    # tiles already the fullest (N=32 14x14x480 -> 80: 98 of 64 x 80).
    for (n, h, c, k) in ((8, 14, 64, 384), (16, 7, 160, 960), (4, 7, 2048, 512),
                         (1, 14, 672, 192), (2, 32, 1920, 640), (32, 14, 480, 80)):
        layer = pointwise(n, h, h, c, k)
        assert conv2d_config(layer) == config_before_narrow_wave(layer), (n, h, c, k)
    assert unrolled(30, replace(conv2d_config(pointwise(2, 32, 32, 1920, 640)),
                                block_m=64, block_n=160)) is False
    # The caller's choices keep their tiles (im2col layers:
    # test_an_im2col_layer_of_few_k_steps_takes_the_fullest_narrow_wave).
    layer = pointwise(32, 7, 7, 1152, 320)
    for options in ({"block_n": 160}, {"stages": 6}, {"schedule": "cooperative"},
                    {"split_k": 2, "split_k_ordered": True}):
        assert conv2d_config(layer, **options).num_tiles < 125
    # The candidate itself, on any GEMM problem: the most tiles of any width.
    wave = fullest_narrow_wave(GemmConfig(1568, 320, 1152, b_layout="nk"))
    assert (wave.block_m, wave.block_n, wave.num_tiles, wave.split_k) == (64, 64, 125, 1)
    assert unit_load_bytes(wave) == 18 * (64 + 64) * 64 * 2
    assert fullest_narrow_wave(GemmConfig(64, 24, 1152, b_layout="nk")) is None  # 1 tile


def test_an_im2col_layer_of_few_k_steps_takes_the_fullest_narrow_wave():
    """An im2col layer (3x3, or a strided 1x1) takes the fullest wave of narrow whole-K
    tiles as a pointwise one does, up to IM2COL_NARROW_WAVE_MAX_STEPS K steps: 40 3x3
    layers measured 0.99-1.53x within it and 12 of 18 slower past it; 14 held out within
    it 1.04-1.59x (H200)."""
    assert IM2COL_NARROW_WAVE_MAX_STEPS == 18  # 3x3 over 128 channels, 64 a K step
    cases = {  # layer: (block_n, tiles, K steps), (block_m, block_n, units) before
        # 4 x 1024 rows on 64 x 128 tiles in 2 parts; 64 x 64 ones are as many, whole K.
        (4, 32, 128, 128, 3, 1): ((64, 128, 18), (64, 128, 128)),
        (24, 24, 128, 256, 3, 2): ((128, 108, 18), (128, 256, 108)),  # 4 parts before
        (16, 10, 128, 64, 3, 1): ((16, 100, 18), (128, 64, 13)),  # 13 whole-K tiles
        (1, 64, 64, 64, 3, 1): ((32, 128, 9), (64, 64, 64)),
        (32, 14, 1152, 320, 1, 2): ((64, 125, 18), (64, 160, 100)),  # ResNet's strided 1x1
    }
    for (n, h, c, k, r, stride), (want, was) in cases.items():
        layer = _layer(n, h, h, c, k, r, r, stride=stride, pad=r // 2)
        assert not layer.is_pointwise
        # (swap_ab=False: N=24 24x24x128 -> 256 then runs as Y^T = F X^T, _few_columns.)
        cfg, old = conv2d_config(layer, swap_ab=False), config_before_narrow_wave(layer)
        assert (cfg.block_m, cfg.schedule, cfg.split_k, cfg.reduction_parts) == (
            64, "cooperative", 1, 1)
        assert (cfg.block_n, cfg.num_tiles, cfg.k_steps) == want, (n, h, c, k, r, stride)
        assert (old.block_m, old.block_n, old.num_tiles * old.reduction_parts) == was
        assert cfg.num_tiles > old.num_tiles
    # Past 18 K steps an im2col layer keeps its tiles: N=8 14x14x256 (36 steps) stays in
    # 5 ordered parts of 128 x 128, though 64 x 64 whole-K tiles would make 100.
    deep = _layer(8, 14, 14, 256, 256)
    assert in_fullest_narrow_wave(config_before_narrow_wave(deep)).num_tiles == 100
    assert conv2d_config(deep) == config_before_narrow_wave(deep)
    assert (conv2d_config(deep).block_n, conv2d_config(deep).split_k) == (128, 5)
    assert conv2d_config(_layer(32, 7, 7, 512, 512)).block_n == 256  # 72 steps
    # The caller's tile keeps it.
    assert conv2d_config(_layer(4, 32, 32, 128, 128), block_n=128).block_n == 128


def test_a_narrow_k_no_width_divides_is_covered_by_one_tile_unless_it_idles_sms(
        before_conv_narrow_wave):
    """Where no measured width divides K (at most 256), a tile exactly K wide spans it
    (any multiple of 8 is a width), so each A tile is read once, not once per 64-wide
    column block; not where its tiles (after the 64-row rule) are fewer than 90% of the
    64-wide ones' (or of a wave), nor where they give fewer than half the CTAs one with
    more than 16 K steps. 64-row tiles that still leave most SMs idle split K into column
    blocks of half the width (a multiple of 8), again while the halves still do (the 64 x
    128 -> 64 x 64 rule's analogue). Measured on the H100 and H200."""
    assert COVERING_SHARE == 0.9
    for k, width in {24: 24, 40: 40, 64: 64, 80: 80, 96: 96, 112: 112, 144: 144, 200: 200,
                     256: 256, 264: None, 320: None}.items():
        assert covering_width(GemmConfig(100, k, 64, b_layout="nk")) == width
    cases = {  # (n, h, c, k, r): (block_m, block_n, tiles)
        (32, 14, 480, 80, 1): (64, 80, 98),  # 49 of 128 x 80 -> 64 rows
        (8, 14, 576, 96, 1): (64, 24, 100),  # 25 of 64 x 96 -> 50 of 48 -> 100 of 24
        (32, 14, 672, 112, 1): (64, 112, 98),
        (1, 14, 672, 112, 1): (64, 32, 16),  # 4 of 64 x 112 -> 8 of 56 -> 16 of 32
        (32, 7, 960, 160, 1): (64, 40, 100),  # exact 160, 25 of 64 rows -> 50 -> 100
        (32, 7, 672, 192, 1): (64, 48, 100),
        (1, 7, 672, 192, 1): (64, 24, 8),  # one row block: 96, 48, 24 wide
        (32, 56, 64, 96, 3): (192, 96, 523),  # then 192 rows (below)
        (32, 56, 24, 144, 1): (192, 144, 523),
        (8, 112, 16, 96, 1): (192, 96, 523),
        # 192 rows, then 128 with the filter's 3 K steps resident (_resident_filter).
        (32, 56, 144, 24, 1): (128, 24, 784),
    }
    for (n, h, c, k, r), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k, r, r, pad=r // 2))
        assert (cfg.block_m, cfg.block_n, cfg.num_tiles) == want, (n, h, c, k, r)
        # (24 channels in a 32-wide K block: 2x1 clusters, _padded_k_in_pairs.)
        paired = c % 16 == 8 and cfg.k_steps == 1 and cfg.num_tiles > cfg.ctas
        assert (cfg.schedule, cfg.cluster_size) == ("cooperative", 1 + paired)
        assert cfg.n_blocks == -(-k // cfg.block_n) <= 8
        assert cfg.block_n % 8 == 0 and cfg.n_blocks * cfg.block_n - k < 8 * cfg.n_blocks
        assert cfg.epilogue_cols == (cfg.block_n if cfg.block_n % 32 else cfg.epilogue_cols)
    # Fewer tiles than the 64-wide ones kept busy: 98 of 128 x 96 against 196 of 128 x 64
    # (a wave of 132); and one K step, whose 64-row tiles do not split (49 of 64 x 144
    # against 75 ping-pong tiles of 128 x 64).
    cfg = conv2d_config(_layer(1, 112, 112, 16, 96, 1, 1, pad=0))
    assert (cfg.block_n, cfg.num_tiles) == (64, 196)
    cfg = conv2d_config(_layer(1, 56, 56, 24, 144, 1, 1, pad=0))
    assert (cfg.block_n, cfg.num_tiles, cfg.schedule, cfg.k_steps) == (64, 75, "pingpong", 1)
    # 49 tiles of 128 x 80 with 18 K steps (no plain 64-row tiles): the 64-wide tiles in
    # 1x2 clusters as before.
    cfg = conv2d_config(_layer(8, 28, 28, 128, 80))
    assert (cfg.block_n, cfg.schedule, cfg.cluster_n) == (64, "pingpong", 2)
    # A caller's width is kept.
    assert conv2d_config(_layer(32, 14, 14, 480, 80, 1, 1, pad=0), block_n=64).block_n == 64


def test_narrow_tiles_padded_past_k_take_192_rows_where_they_fill_a_wave():
    """128-row tiles of one column block at most 160 wide, K not a multiple of 64, take
    192 rows (three cooperative consumer warpgroups) where those fill at least 90% of a
    wave: in any number of rounds. Not for K a multiple of 64 (measured even at 64 wide,
    slower at 128), 64-row tiles, or a caller's tile, schedule or split."""
    assert NARROW_TALL_WIDTH == 160
    cases = {  # (n, h, c, k, r): (block_n, block_k, tiles, stages)
        (32, 28, 240, 40, 1): (40, 64, 131, 7),
        (32, 28, 192, 32, 1): (32, 64, 131, 7),
        (32, 112, 16, 96, 1): (96, 16, 2091, 2),  # 2: the resident filter's ring
        (32, 28, 96, 144, 3): (144, 32, 131, 8),
        (32, 28, 128, 80, 3): (80, 64, 131, 5),
    }
    for (n, h, c, k, r), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k, r, r, pad=r // 2))
        assert (cfg.block_m, cfg.schedule, cfg.consumers, cfg.threads) == (
            192, "cooperative", 3, 512)
        assert (cfg.block_n, cfg.block_k, cfg.num_tiles, cfg.stages) == want, (n, h, c, k)
        assert cfg.shared_bytes <= MAX_SHARED
    for layer in (_layer(32, 56, 56, 256, 64, 1, 1, pad=0),  # K = 64
                  _layer(32, 56, 56, 64, 64),
                  _layer(32, 112, 112, 128, 128),  # K = 128 (VGG)
                  _layer(8, 28, 28, 32, 192, 1, 1, pad=0),  # 64 x 192 tiles
                  _layer(1, 56, 56, 24, 144, 1, 1, pad=0)):  # 64-row tiles
        assert conv2d_config(layer).block_m != 192
    narrow = _layer(32, 56, 56, 144, 24, 1, 1, pad=0)
    # Its filter loaded each K step (the caller's choice): 192 rows, 8 stages.
    loaded = conv2d_config(narrow, b_resident=False)
    assert (loaded.block_m, loaded.num_tiles, loaded.stages) == (192, 523, 8)
    assert conv2d_config(narrow, block_m=128).block_m == 128
    assert conv2d_config(narrow, schedule="cooperative").block_m == 128
    assert conv2d_config(narrow, split_k=2, split_k_ordered=True).block_m == 128


def test_a_one_step_pointwise_layer_overlaps_its_stores():
    """A pointwise layer of one K step on cooperative tiles, of 16 channels or with its C
    stage the whole tile, takes two alternating C stages and 4 ring stages, the widest C
    stage beside them (_stores_overlapped; a resident filter of more than two rounds a
    CTA then takes the ring to 2 stages); not a layer whose C stages are pieces
    alternating already, a 3x3 one, or where the caller chose the ring, the C stage or
    the tile. Measured on the H200."""
    assert (STORE_BOUND_BLOCK_K, STORE_BOUND_STAGES) == (16, 4)
    cases = {  # (n, h, c, k): (block_m, block_n, epilogue_cols, stages)
        (32, 112, 16, 96): (192, 96, 32, 2),
        (4, 112, 16, 96): (192, 96, 32, 4),  # 262 tiles: two rounds
        (32, 28, 16, 96): (192, 96, 32, 4),  # 131 tiles: one round, not resident
        (32, 56, 16, 64): (128, 64, 64, 2),
        # Whole-tile C stages, alternating from tile to tile.
        (32, 112, 32, 16): (192, 16, 16, 2),
        (32, 56, 24, 144): (192, 144, 144, 2),
        (32, 56, 64, 64): (128, 64, 64, 2),
        # 196 tiles (N=8 takes Y^T = F X^T after this rule: on 131 tiles of 64 x 192,
        # _few_columns; swap_ab=False keeps the tiles of the rules before it).
        (8, 56, 64, 64): (128, 64, 64, 4),
    }
    for (n, h, c, k), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k, 1, 1, pad=0), swap_ab=False)
        assert (cfg.block_m, cfg.block_n, cfg.epilogue_cols, cfg.stages) == want, (n, h, c, k)
        assert (cfg.k_steps, cfg.epilogue_buffers) == (1, 2)
        # The ring stays 4 deep with the filter loaded each tile.
        loaded = conv2d_config(_layer(n, h, h, c, k, 1, 1, pad=0), b_resident=False,
                               swap_ab=False)
        assert (loaded.stages, loaded.epilogue_buffers) == (4, 2)
        assert cfg.shared_bytes <= MAX_SHARED
    # N=32 28x28x32 -> 192 stages C in 64-column pieces that alternate already
    # (_alternating_c_stages, beside 9 ring stages): a whole stage on 4 lost there.
    pieces = conv2d_config(_layer(32, 28, 28, 32, 192, 1, 1, pad=0))
    assert (pieces.epilogue_cols, pieces.epilogue_buffers, pieces.stages) == (64, 2, 9)
    # Two whole 192 x 120 stages leave no room for 4 ring stages: one stays.
    wide = conv2d_config(_layer(32, 28, 28, 40, 120, 1, 1, pad=0))
    assert (wide.block_m, wide.block_n, wide.epilogue_buffers) == (192, 120, 1)
    assert conv2d_config(_layer(32, 56, 56, 16, 64)).epilogue_buffers == 1  # 3x3: 9 K steps
    layer = _layer(32, 112, 112, 16, 96, 1, 1, pad=0)
    assert conv2d_config(layer, stages=6).epilogue_buffers == 1
    assert conv2d_config(layer, epilogue_n=32).stages == 12
    # The caller's tile: the deepest ring, C still in two alternating 32-column stages
    # (_alternating_c_stages, the rule for every layer).
    chosen = conv2d_config(layer, block_m=128)
    assert (chosen.stages, chosen.epilogue_cols, chosen.epilogue_buffers) == (12, 32, 2)
    whole = conv2d_config(_layer(32, 56, 56, 24, 144, 1, 1, pad=0), block_m=192)
    assert (whole.epilogue_buffers, whole.stages) == (1, 8)


def test_a_one_step_layer_of_c_8_mod_16_takes_2x1_clusters():
    """A pointwise layer of one K step whose C is 8 mod 16 (24 channels in a 32-wide
    block, 40 or 56 in a 64-wide one), more tiles than CTAs on cooperative tiles: 2x1
    clusters sharing the B tile (_padded_k_in_pairs); not one tile per CTA, C = 48 or a
    K block all C, more K steps, or where the caller chose a cluster or the tile.
    Measured on the H200."""
    cases = {  # (n, h, c, k): (block_m, block_n, block_k, tiles)
        (32, 56, 24, 144): (192, 144, 32, 523),
        (16, 56, 24, 144): (192, 144, 32, 262),
        (32, 28, 40, 240): (128, 240, 64, 196),
        (16, 28, 40, 240): (128, 128, 64, 196),
        (32, 56, 40, 80): (192, 80, 64, 523),
        (16, 112, 56, 112): (192, 112, 64, 1046),
        (32, 56, 8, 144): (192, 144, 16, 523),
    }
    for (n, h, c, k), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k, 1, 1, pad=0))
        assert (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_tiles) == want, (n, h, c, k)
        assert (cfg.cluster, cfg.cluster_n, cfg.k_steps) == (2, 1, 1)
        assert c % 16 == 8 and c < cfg.block_k
    unpaired = [
        _layer(8, 56, 56, 24, 144, 1, 1, pad=0),  # 131 tiles on 132 CTAs
        _layer(32, 56, 56, 64, 64, 1, 1, pad=0),  # the K block is all C
        _layer(16, 56, 56, 48, 144, 1, 1, pad=0),  # 96-byte rows
        _layer(16, 28, 28, 48, 72, 1, 1, pad=0),
        _layer(32, 112, 112, 32, 16, 1, 1, pad=0),
        _layer(32, 56, 56, 144, 24, 1, 1, pad=0),  # 3 K steps, the last past C
        _layer(32, 56, 56, 24, 72, 1, 1, pad=0),  # 36 B rows per CTA: no whole 8-row groups
    ]
    for layer in unpaired:
        assert conv2d_config(layer).cluster == 1, layer
    layer = _layer(32, 56, 56, 24, 144, 1, 1, pad=0)
    assert conv2d_config(layer, cluster=1).cluster == 1
    assert conv2d_config(layer, block_m=128).cluster == 1
    # With more tiles than ring slots the filter stays resident in the clusters too.
    many = conv2d_config(_layer(32, 112, 112, 24, 64, 1, 1, pad=0))
    assert (many.cluster, many.b_resident, many.num_tiles) == (2, True, 3136)


def test_a_one_column_filter_stays_resident_where_a_cta_takes_more_than_one_tile():
    """One column block, cooperative tiles, more tiles than CTAs, alone or in 2x1
    clusters: b_resident (each ring slot loads its K step of the filter once). Past two
    rounds a CTA the ring holds two tiles of K steps (2 stages for one step, 6 for three)
    and a filter of 2 or 3 K steps, resident only then, takes 128-row tiles for 192-row
    ones where the busiest CTA takes no more rows. Not one tile per CTA, K in two column
    blocks, 4 K steps or more, or where the caller chose it, the ring, a cluster or the
    tile. Measured on the H200."""
    assert (RESIDENT_MAX_STEPS, RESIDENT_TILES_AHEAD, RESIDENT_SHALLOW_ROUNDS) == (3, 2, 2)
    cases = {  # (n, h, c, k): (block_m, block_n, tiles, k_steps, stages)
        (32, 112, 32, 16): (192, 16, 2091, 1, 2),
        (32, 112, 16, 96): (192, 96, 2091, 1, 2),
        (32, 56, 64, 64): (128, 64, 784, 1, 2),
        (32, 112, 40, 192): (128, 192, 3136, 1, 2),  # in 2x1 clusters: C = 40
        (32, 56, 24, 144): (192, 144, 523, 1, 2),  # the same
        # Two rounds or fewer: the ring as it was.
        (32, 28, 32, 192): (128, 192, 196, 1, 9),
        (4, 112, 32, 16): (192, 16, 262, 1, 4),
        # Several K steps: 6 rounds of 128 rows against 4 of 192 (768 rows both), and N=64
        # 12 against 8 (1536); N=24 5 of 128 (640) against 3 of 192 (576): 192 rows.
        (32, 56, 144, 24): (128, 24, 784, 3, 6),
        (32, 56, 128, 24): (128, 24, 784, 2, 4),
        (64, 56, 144, 40): (128, 40, 1568, 3, 6),
        (24, 56, 192, 48): (192, 48, 392, 3, 6),
    }
    for (n, h, c, k), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k, 1, 1, pad=0))
        assert (cfg.block_m, cfg.block_n, cfg.num_tiles, cfg.k_steps, cfg.stages) == want, (
            n, h, c, k)
        assert (cfg.b_resident, cfg.n_blocks) == (True, 1)
        assert cfg.stages % cfg.k_steps == 0
        assert cfg.cluster_size == 1 + (c % 16 == 8 and cfg.k_steps == 1)
        assert cfg.shared_bytes <= MAX_SHARED
    for layer in (_layer(8, 56, 56, 24, 144, 1, 1, pad=0),  # 131 tiles on 132 CTAs
                  _layer(16, 28, 28, 40, 240, 1, 1, pad=0),  # 2 column blocks
                  _layer(32, 56, 56, 256, 64, 1, 1, pad=0),  # 4 K steps
                  _layer(16, 56, 56, 144, 24, 1, 1, pad=0),  # 3 K steps, 262 tiles
                  _layer(32, 56, 56, 64, 64)):  # 3x3: 9 K steps
        assert not conv2d_config(layer).b_resident, layer
    layer = _layer(32, 112, 112, 32, 16, 1, 1, pad=0)
    for options in ({"b_resident": False}, {"cluster": 1}, {"block_m": 192}):
        assert not conv2d_config(layer, **options).b_resident, options
    # The caller's ring: kept, the filter loaded each tile.
    chosen = conv2d_config(_layer(32, 56, 56, 144, 24, 1, 1, pad=0), stages=6)
    assert (chosen.b_resident, chosen.block_m, chosen.stages) == (False, 192, 6)


def test_a_whole_c_stage_gets_a_second_beside_the_shallow_ring_of_a_resident_filter():
    """A one-step layer whose lone C stage is the whole tile, its filter resident on the
    2-stage ring (past two rounds a CTA): a second whole C stage, the two alternating from
    tile to tile (_second_whole_c_stage); not at two rounds or fewer (the ring of 4 leaves
    no room), nor where the caller chose the C stage. Measured on the H200."""
    cases = {  # (n, h, c, k): (block_m, block_n, cluster, tiles)
        (8, 112, 56, 112): (192, 112, 2, 523),
        (32, 56, 48, 144): (192, 144, 1, 523),
        (32, 56, 56, 112): (192, 112, 2, 523),
        (64, 28, 40, 240): (128, 240, 2, 392),
    }
    for (n, h, c, k), want in cases.items():
        layer = _layer(n, h, h, c, k, 1, 1, pad=0)
        cfg = conv2d_config(layer)
        assert (cfg.block_m, cfg.block_n, cfg.cluster, cfg.num_tiles) == want, (n, h, c, k)
        assert (cfg.b_resident, cfg.stages, cfg.epilogue_cols, cfg.epilogue_buffers) == (
            True, 2, cfg.block_n, 2)
        assert cfg.shared_bytes <= MAX_SHARED
        # Without it: one stage (two do not fit beside the ring of 3 or 4).
        loaded = conv2d_config(layer, b_resident=False)
        assert loaded.stages >= 3 and loaded.epilogue_buffers == 1
        assert replace(loaded, epilogue_buffers=2).shared_bytes > MAX_SHARED
        chosen = conv2d_config(layer, epilogue_buffers=1)
        assert (chosen.b_resident, chosen.epilogue_buffers) == (True, 1)
    few = conv2d_config(_layer(16, 56, 56, 48, 144, 1, 1, pad=0))  # 262 tiles: two rounds
    assert (few.b_resident, few.stages, few.epilogue_buffers) == (True, 4, 1)


def test_a_k_no_width_divides_and_too_few_covering_tiles_take_two_128_wide_blocks():
    """K of 193 to 256 that no exact width divides (240, 232, 216, 200), where one tile K
    wide leaves SMs idle: two 128-wide column blocks, not 192-wide ones in 2x1 clusters
    (whose second block was mostly padding: 1.10-1.41x on the H200). K past 256 keeps
    them; K of 129 to 192 its 64-wide tiles (a second 128-wide block would be mostly
    padding); covering tiles that fill the SMs stay."""
    pointwise = functools.partial(_layer, r=1, s=1, pad=0)
    for c, k in ((40, 240), (48, 232), (64, 216), (40, 200)):
        # (48 and 64 channels then run as Y^T = F X^T, _few_columns: swap_ab=False here.)
        cfg = conv2d_config(pointwise(16, 28, 28, c, k), swap_ab=False)
        # (C = 40 in one 64-wide K block: 2x1 clusters, _padded_k_in_pairs.)
        assert (cfg.block_m, cfg.block_n, cfg.cluster_size, cfg.num_tiles) == (
            128, 128, 1 + (c == 40), 196), k
    assert conv2d_config(pointwise(4, 56, 56, 40, 240)).block_n == 128
    # Enough covering tiles: one 240-wide column block.
    assert conv2d_config(pointwise(32, 28, 28, 40, 240)).block_n == 240
    assert conv2d_config(pointwise(1, 56, 56, 24, 144), swap_ab=False).block_n == 64
    # K = 288: 192-wide tiles in 2x1 clusters, as before.
    wide = conv2d_config(pointwise(16, 28, 28, 48, 288))
    assert (wide.block_n, wide.cluster) == (192, 2)


def test_few_output_channels_run_swapped_where_that_fills_the_sms():
    """A layer of at most 256 output channels runs as Y^T = F X^T where the GEMM's rule
    (tiling.on_few_columns) takes it: K in 64-row blocks of the MMAs' M, the pixels in as
    many column blocks as fill the SMs' rounds (X's tiled or im2col copies fill the B
    ring); not over padded taps, in clusters, past 256 channels, or past the caller's
    tile or swap. H200, same runs: 43 pointwise layers 1.07-1.62x, 16 3x3 layers
    1.08-1.45x (RESULTS.md 6z8)."""
    pointwise = functools.partial(_layer, r=1, s=1, pad=0)
    cases = {  # layer: (block_n, tiles, stages, C stage rows), tiles before
        (32, 17, 768, 192): ((216, 129, 5, 216), 73),  # Inception: 0.80x -> 1.19x cuDNN
        (32, 14, 480, 128): ((96, 132, 10, 96), 98),  # DenseNet
        (32, 35, 192, 64): ((152, 258, 7, 152), 307),  # two rounds
        (8, 56, 64, 64): ((192, 131, 6, 192), 196),  # one K step, the filter resident before
        (8, 56, 64, 64, 3): ((192, 131, 6, 192), 196),  # 3x3: X's im2col copies, 9 K steps
        (32, 14, 256, 256, 3): ((192, 132, 6, 192), 98),  # ResNet-50's: 1.10x
        (24, 24, 128, 256, 3, 2): ((112, 124, 9, 112), 108),  # stride 2
    }
    for (n, h, c, k, *r_stride), (want, before) in cases.items():
        r, stride = (r_stride + [1, 1])[:2]
        layer = _layer(n, h, h, c, k, r, r, stride=stride, pad=r // 2)
        cfg, old = conv2d_config(layer), conv2d_config(layer, swap_ab=False)
        assert (cfg.swap_ab, cfg.schedule, cfg.block_m, cfg.cluster_size, cfg.split_k,
                cfg.b_resident) == (True, "cooperative", 64, 1, 1, False), (n, h, c, k)
        assert (cfg.block_n, cfg.num_tiles, cfg.stages, cfg.epilogue_cols) == want
        assert not old.swap_ab and old.num_tiles == before
        assert busy_share(cfg) >= busy_share(old) + FEW_COLUMNS_MIN_GAIN
        check_config(layer, cfg)
    # Kept: 40 channels in 2x1 clusters (one 64-wide K block over 40); 24 channels in
    # padded taps; a near-full round (N=32 28x28x128 3x3: 131 tiles of 192 x 128); more
    # than 256 output channels; the caller's tile or swap.
    inception = pointwise(32, 17, 17, 768, 192)
    for layer, options in [(pointwise(16, 28, 28, 40, 240), {}),
                           (_layer(16, 56, 56, 24, 64), {}),
                           (_layer(32, 28, 28, 128, 128), {}),
                           (pointwise(32, 17, 17, 768, 320), {}),
                           (inception, {"block_n": 192}), (inception, {"swap_ab": False}),
                           (inception, {"epilogue_buffers": 2}),
                           (pointwise(8, 56, 56, 64, 64), {"b_resident": True})]:
        assert not conv2d_config(layer, **options).swap_ab, (layer.describe(), options)
    # swap_ab=True alone asks for the few-columns tiling (the default's, where it swaps);
    # padded taps cannot run swapped (refused by name).
    assert conv2d_config(inception, swap_ab=True) == conv2d_config(inception)
    forced = conv2d_config(pointwise(16, 28, 28, 40, 240), swap_ab=True)
    assert (forced.swap_ab, forced.block_m, forced.cluster_size) == (True, 64, 1)
    with pytest.raises(ValueError, match="tap_columns=32: .* no swap_ab"):
        conv2d_config(_layer(16, 56, 56, 24, 64), swap_ab=True)
    # Asked for with its tile, a layer runs swapped: X's im2col copies of 88 pixels.
    asked = conv2d_config(_layer(2, 9, 9, 64, 64), ctas=2, swap_ab=True, block_m=64,
                          block_n=88)
    assert (asked.swap_ab, asked.num_tiles, asked.epilogue_cols) == (True, 2, 88)


def test_a_c_stage_narrower_than_a_cooperative_tile_alternates_with_a_second():
    """Where C is staged in several stores a tile, two C stages alternate (each store
    drains while the next piece is staged) with as many ring stages as fit beside them,
    unless fewer than ALTERNATING_MIN_STAGES do; a whole-width stage, ping-pong tiles (two
    stages of their own) and the caller's ring or C stage are left as they are."""
    assert ALTERNATING_MIN_STAGES == 4
    pointwise = functools.partial(_layer, r=1, s=1, pad=0)

    def staging(cfg: GemmConfig) -> tuple:
        return (cfg.block_m, cfg.block_n, cfg.epilogue_cols, cfg.epilogue_buffers,
                cfg.stages)

    # N=32 1x1 28x28x32 -> 192: 64-column pieces of 192, one ring stage fewer (10 -> 9).
    assert staging(conv2d_config(pointwise(32, 28, 28, 32, 192))) == (128, 192, 64, 2, 9)
    # SD UNet 3x3 N=8 32x32x320 -> 640: 32-column pieces of 160 (6 -> 5 stages).
    assert staging(conv2d_config(_layer(8, 32, 32, 320, 640))) == (128, 160, 32, 2, 5)
    # 128 x 256 in 128-column halves would keep 3 ring stages: one C stage, 4 stages.
    assert staging(conv2d_config(_layer(1, 256, 256, 256, 256))) == (128, 256, 128, 1, 4)
    # A C stage the tile's whole width: one (but on a layer of one K step, two alternating
    # from tile to tile: _stores_overlapped).
    assert staging(conv2d_config(pointwise(32, 56, 56, 256, 64))) == (128, 64, 64, 1, 8)
    assert staging(conv2d_config(pointwise(32, 56, 56, 64, 64))) == (128, 64, 64, 2, 2)
    layer = pointwise(32, 28, 28, 32, 192)
    assert conv2d_config(layer, schedule="pingpong", block_n=64).epilogue_buffers == 1
    for options in ({"stages": 6}, {"epilogue_n": 64}, {"epilogue_buffers": 1}):
        cfg = conv2d_config(layer, **options)
        assert cfg.epilogue_buffers == 1, options
        assert cfg.shared_bytes <= MAX_SHARED
    for cfg in (conv2d_config(layer), conv2d_config(_layer(8, 32, 32, 320, 640))):
        assert cfg.shared_bytes <= MAX_SHARED
        assert replace(cfg, stages=cfg.stages + 1).shared_bytes > MAX_SHARED


def test_options_are_kept_and_the_rest_fits_them():
    g = _layer(8, 64, 64, 320, 320)
    cfg = conv2d_config(g, block_n=128, schedule="pingpong", ctas=114)
    # Ping-pong keeps two C stages: 64-column ones leave room for a sixth ring stage.
    assert (cfg.block_n, cfg.schedule, cfg.ctas, cfg.epilogue_cols, cfg.stages) == (
        128, "pingpong", 114, 64, 6)
    assert conv2d_config(g, stages=3).stages == 3
    # Given stages, the widest C stage that fits beside them: 4 x 48 KiB leave room for a
    # 128-column C stage, 3 for the whole 256 columns.
    vae = _layer(1, 256, 256, 256, 256)
    assert [conv2d_config(vae, stages=s).epilogue_cols for s in (3, 4)] == [256, 128]
    # Ping-pong warpgroups hold whole 128-row tiles: at most 128 columns of accumulators.
    assert conv2d_config(g, schedule="pingpong").block_n <= 128
    assert conv2d_config(_layer(2, 8, 8, 64, 64), cluster=1).cluster == 1


def test_the_k_block_moves_the_fewest_columns_padding_each_tap_to_whole_blocks():
    """Each K block is one im2col load at one filter tap: of 64, 32 and 16 columns the
    one of fewest columns moved (a K step counting 16 besides its own; ties to fewer
    columns), each tap's C padded to whole blocks (tap_columns) where the block does not
    divide it; 8 channels in 8-column pieces of 16-wide blocks. (halo=False: the layers
    of padded taps take halo tiles by default, whose K is folded.)"""
    got = {}
    for c in (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 240, 320):
        cfg = conv2d_config(_layer(2, 8, 8, c, 64), halo=False)
        got[c] = (cfg.block_k, cfg.a_copy_k, cfg.tap_columns)
        assert cfg.k == 9 * (cfg.tap_columns or c)
    assert got == {8: (16, 8, 0), 16: (16, 0, 0), 24: (32, 0, 32), 32: (32, 0, 0),
                   40: (64, 0, 64), 48: (64, 0, 64), 56: (64, 0, 64), 64: (64, 0, 0),
                   80: (32, 0, 96), 96: (32, 0, 0), 112: (64, 0, 128), 128: (64, 0, 0),
                   144: (32, 0, 160), 160: (32, 0, 0), 240: (64, 0, 256),
                   320: (64, 0, 0)}
    # A given block pads the taps to it; pieces, or no padding, where asked for.
    assert conv2d_config(_layer(2, 8, 8, 24, 64), block_k=16).tap_columns == 32
    pieces = conv2d_config(_layer(2, 8, 8, 24, 64), block_k=16, a_copy_k=8)
    assert (pieces.tap_columns, pieces.k) == (0, 216)
    with pytest.raises(ValueError, match=re.escape(
            "tap_columns=64: each filter tap's C=24 channels padded to whole K blocks of 32 "
            "columns (32)")):
        conv2d_config(_layer(2, 8, 8, 24, 64), block_k=32, tap_columns=64)
    # Narrow K blocks have small slots: the ring fills shared memory up to MAX_STAGES, with
    # the widest C stage (the whole tile here).
    narrow = conv2d_config(_layer(2, 8, 8, 16, 256), block_n=256)
    assert (narrow.block_k, narrow.stages, narrow.epilogue_cols) == (16, MAX_STAGES, 256)
    assert narrow.shared_bytes <= MAX_SHARED
    # A narrower K block than the widest is kept when given.
    assert conv2d_config(_layer(2, 8, 8, 64, 64), block_k=32).block_k == 32


def test_a_pointwise_layer_takes_64_wide_k_blocks_whatever_c():
    """A 1x1, stride-1, unpadded layer's A is X as an (N*H*W, C) matrix (a tiled load):
    its K blocks need not divide C, the last one zero-filled past C (no tap to stay
    inside): the block of fewest columns moved, a step counting K_STEP_COLUMNS (16)
    besides its own, ties to the wider; the other layers keep blocks dividing C.
    MobileNetV2's 56x56x144 -> 24 ran 9 steps of 16 channels at 0.39x cuDNN, 3 of 64 at
    0.60x; 56x56x96 -> 24 3 of 32 faster than 2 of 64 (H100)."""
    assert K_STEP_COLUMNS == 16
    for c, (block_k, steps) in {8: (16, 1), 24: (32, 1), 40: (64, 1), 96: (32, 3),
                                144: (64, 3), 200: (64, 4), 240: (64, 4), 480: (64, 8),
                                672: (64, 11), 960: (64, 15)}.items():
        cfg = conv2d_config(_layer(2, 8, 8, c, 64, 1, 1, pad=0))
        assert (cfg.block_k, cfg.a_copy_k, cfg.k_steps) == (block_k, 0, steps), c
    # Strided or padded 1x1 layers load A in im2col mode: K blocks inside a tap, its
    # channels padded to whole blocks (tap_columns).
    for layer, (block_k, columns) in (
            (_layer(2, 16, 16, 144, 64, 1, 1, stride=2, pad=0), (32, 160)),
            (_layer(2, 9, 7, 40, 24, 1, 1, stride=2, pad=0), (64, 64)),
            (_layer(2, 8, 8, 144, 64, 1, 1, pad=1), (32, 160))):
        cfg = conv2d_config(layer)
        assert (cfg.block_k, cfg.a_copy_k, cfg.tap_columns) == (block_k, 0, columns)
    # A pointwise layer's given K block need not divide C, and pads nothing; a 3x3
    # layer's pads each tap (or, told not to, is refused).
    wide = conv2d_config(_layer(2, 8, 8, 96, 64, 1, 1, pad=0), block_k=64)
    assert (wide.block_k, wide.tap_columns, wide.k) == (64, 0, 96)
    assert conv2d_config(_layer(2, 8, 8, 96, 64), block_k=64).tap_columns == 128
    with pytest.raises(ValueError, match="must lie inside one filter tap"):
        conv2d_config(_layer(2, 8, 8, 96, 64), block_k=64, tap_columns=0)


@pytest.mark.parametrize("geometry, options, copied", [
    (_layer(2, 8, 8, 96, 64), {"block_k": 64, "a_copy_k": 0}, 64),
    (_layer(2, 8, 8, 48, 64), {"block_k": 32, "a_copy_k": 0}, 32),
    # C = 24 copied in whole 16-column K blocks: the block at K 16 straddles taps 0 and 1.
    (_layer(2, 8, 8, 24, 64), {"block_k": 16, "a_copy_k": 0}, 16),
], ids=["c96-bk64", "c48-bk32", "c24-whole-bk16"])
def test_conv2d_refuses_a_k_block_that_straddles_taps(geometry, options, copied):
    message = (f"block_k={options['block_k']}, a_copy_k=0: each A copy ({copied} columns) "
               f"must lie inside one filter tap's C={geometry.c} channels")
    with pytest.raises(ValueError, match=re.escape(message)):
        conv2d_config(geometry, tap_columns=0, **options)
    with pytest.raises(ValueError, match=re.escape(message)):
        conv2d_kernel(geometry, GemmConfig(geometry.gemm_m, geometry.k, geometry.gemm_k,
                                           **options))


@pytest.mark.parametrize("geometry, dtype, message", [
    (_layer(2, 8, 8, 12, 64), "bfloat16",
     "C=12: the input channels must be a multiple of 8: each A copy (a K block of 64, 32 or "
     "16 columns, or an 8-column piece of one) must lie inside one filter tap (r, s), since "
     "one im2col load reads at one tap offset, and its rows must be 16 bytes at least"),
    (_layer(2, 8, 8, 4, 64), "bfloat16", "C=4: the input channels must be a multiple of 8"),
    (_layer(2, 8, 8, 64, 60), "bfloat16", "K=60: the output channels must be a multiple of 8"),
    (_layer(2, 8, 8, 64, 64), "float32", "dtype='float32': conv2d takes 'bfloat16' or "
                                         "'float16'"),
    # RGB in 4 x 4 patches: 12 channels a folded pixel, still no multiple of 8.
    (_layer(2, 16, 16, 3, 64, 4, 4, stride=4, pad=0), "bfloat16",
     "C=3: the input channels must be a multiple of 8"),
    # Stride 16 with padding: no patch axis, no im2col map.
    (_layer(2, 36, 36, 8, 64, 16, 16, stride=16, pad=2), "bfloat16",
     "stride (16, 16): an im2col load walks pixels at a stride of at most 8; only a patch "
     "axis (filter = stride, no padding or dilation, a whole number of patches) folds"),
], ids=["c12", "c4", "k60", "float32", "rgb-4x4-patches", "stride16-padded"])
def test_conv2d_refuses_what_it_does_not_handle(geometry, dtype, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        conv2d_config(geometry, dtype)
    with pytest.raises(ValueError, match=re.escape(message)):
        conv2d_kernel(geometry, GemmConfig(geometry.gemm_m, geometry.k, geometry.gemm_k,
                                           dtype=dtype))


def test_a_patch_layer_takes_its_k_blocks_from_the_folded_channels():
    """A ViT patch embedding over 8 channels (16 x 16 patches at stride 16) is read as one
    16-row tap of 128 channels a folded pixel: 64-wide K blocks in whole copies, where
    unfolded 8 channels a tap would take 16-wide blocks in 8-column pieces (and stride 16
    no im2col map at all); RGB folds to 48 channels, padded to one 64-wide block a tap
    row."""
    vit = _layer(32, 224, 224, 8, 768, 16, 16, stride=16, pad=0)
    assert vit.patches_folded() == Conv2dGeometry(448, 16, 14, 128, 768, 16, 1)
    cfg = conv2d_config(vit)
    assert (cfg.m, cfg.n, cfg.k, cfg.block_k, cfg.a_copy_k) == (6272, 768, 2048, 64, 0)
    rgb = conv2d_config(_layer(32, 224, 224, 3, 768, 16, 16, stride=16, pad=0))
    assert (rgb.k, rgb.block_k, rgb.a_copy_k, rgb.tap_columns) == (16 * 64, 64, 0, 64)
    # A ConvNeXt stem (4 x 4, stride 4) over 8 channels: 32 channels a folded pixel.
    stem = conv2d_config(_layer(8, 224, 224, 8, 96, 4, 4, stride=4, pad=0))
    assert (stem.block_k, stem.a_copy_k) == (32, 0)
    # Not a patch axis (padding; an image of no whole number of patches): unfolded.
    for layer in (_layer(2, 16, 16, 8, 64, 2, 2, stride=2, pad=1),
                  _layer(2, 9, 9, 8, 64, 2, 2, stride=2, pad=0)):
        assert layer.patches_folded() is layer
        assert (conv2d_config(layer).block_k, conv2d_config(layer).a_copy_k) == (16, 8)


def test_a_layer_of_8_channel_pieces_takes_192_row_tiles_in_pairs():
    """An im2col layer whose C is 8 mod 16 (16-byte pixels, L2-request bound) on 128-row
    tiles takes 192-row cooperative ones in 2x1 clusters (the filter multicast), 192 rows
    alone where the tile does not halve into 8-row groups; not a pointwise layer, nor
    where the caller chose the tile, the schedule or a cluster."""
    stem = conv2d_config(_layer(32, 224, 224, 8, 64, 7, 7, stride=2, pad=3))
    assert (stem.block_m, stem.block_n, stem.cluster, stem.schedule, stem.a_copy_k,
            stem.num_tiles) == (192, 64, 2, "cooperative", 8, 2091)
    # Ping-pong 128 x 128 before (a layer of 5 K steps): cooperative 192 x 128 now.
    vae = conv2d_config(_layer(1, 512, 512, 8, 128))
    assert (vae.block_m, vae.cluster, vae.schedule) == (192, 2, "cooperative")
    narrow = conv2d_config(_layer(16, 56, 56, 24, 24))
    assert (narrow.block_m, narrow.block_n, narrow.cluster) == (192, 24, 1)
    for layer, options in ((_layer(32, 224, 224, 8, 64, 7, 7, stride=2, pad=3),
                            {"block_m": 128}),
                           (_layer(32, 224, 224, 8, 64, 7, 7, stride=2, pad=3),
                            {"cluster": 1}),
                           (_layer(32, 224, 224, 8, 64, 7, 7, stride=2, pad=3),
                            {"schedule": "pingpong"}),
                           (_layer(32, 56, 56, 24, 144, 1, 1, pad=0), {}),  # pointwise
                           (_layer(32, 56, 56, 64, 64), {})):  # whole 64-channel blocks
        chosen = conv2d_config(layer, **options)
        assert not (chosen.block_m == 192 and chosen.a_copy_k), (layer, options)
    assert conv2d_config(_layer(32, 224, 224, 8, 64, 7, 7, stride=2, pad=3),
                         cluster=1).block_m == 128


def test_a_layer_of_narrow_k_blocks_takes_tall_tiles_and_pairs_past_two_rounds():
    """An im2col layer of 16- or 32-channel K blocks: 64-wide tiles of one column block
    take 192 rows where those fill a wave, and 2x1 clusters where a CTA takes more than
    two rounds of tiles; not at two rounds or fewer, not for 64-channel blocks. (These
    stride-1 layers take halo tiles by default: halo=False keeps the im2col loads.)"""
    paired = conv2d_config(_layer(32, 56, 56, 16, 64), halo=False)  # 784 tiles of 128
    assert (paired.block_m, paired.block_n, paired.block_k, paired.cluster,
            paired.num_tiles) == (192, 64, 16, 2, 523)
    tall = conv2d_config(_layer(32, 28, 28, 32, 64), halo=False)  # 131 of 192: one round
    assert (tall.block_m, tall.cluster, tall.num_tiles) == (192, 1, 131)
    wide = conv2d_config(_layer(32, 112, 112, 32, 32), halo=False)  # 192 rows already
    assert (wide.block_m, wide.cluster) == (192, 2)
    assert conv2d_config(_layer(32, 56, 56, 16, 64, stride=2)).halo is None  # stride 2
    assert conv2d_config(_layer(32, 28, 28, 112, 112)).cluster == 1  # 131 tiles
    assert conv2d_config(_layer(32, 56, 56, 64, 64)).cluster == 1  # 64-channel blocks
    chosen = conv2d_config(_layer(32, 56, 56, 16, 64), block_m=128)
    assert (chosen.block_m, chosen.cluster) == (128, 1)


def _plausible_layer(rng) -> Conv2dGeometry | None:
    """A layer a user might run: batch 1..64, common and odd image sizes, 8..2048
    channels, 1x1 to 7x7 filters at stride 1 or 2 with same or no padding, or (15%) a
    patch layer of 2..16 pixels over 8 or 16 channels, or RGB in 8- or 16-pixel patches.
    None where it is no layer."""
    n = rng.choice([1, 1, 2, 4, 8, 16, 32, 64])
    hw = rng.choice([7, 14, 28, 56, 112, 224, 13, 17, 19, 33, 38, 64, 80, 100, 128, 160])
    h, w = hw, rng.choice([hw, hw, hw + rng.randint(1, 9), max(1, hw // 2)])
    c = rng.choice([8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 192, 240,
                    256, 320, 384, 512, 640, 1024, 1280, 2048])
    k = rng.choice([8, 16, 24, 32, 40, 48, 64, 80, 96, 112, 128, 144, 160, 192, 240, 256,
                    320, 384, 512, 640, 1024, 1152, 1280, 2048])
    if rng.random() < 0.15:
        c = rng.choice([3, 8, 16])
        r = rng.choice([8, 16] if c == 3 else [2, 4, 8, 14, 16])  # RGB: 24 or 48 folded
        h = w = r * rng.choice([2, 7, 14])
        stride, pad = r, 0
    else:
        r = rng.choice([1, 1, 3, 3, 3, 5, 7])
        stride, pad = rng.choice([1, 1, 1, 2]), rng.choice([r // 2, r // 2, 0])
    try:
        layer = Conv2dGeometry(n, h, w, c, k, r, r, (stride, stride), (pad, pad))
    except ValueError:
        return None
    return layer if layer.gemm_m * layer.k * layer.gemm_k <= 2 ** 36 else None


def test_the_default_configuration_of_plausible_layers_plans_every_copy():
    """Forty layers drawn as a user might write them (patch layers, RGB, odd images,
    8-channel pieces and narrow blocks among them): conv2d_config's choice builds and the
    dispatch plans every copy of it (A, B, the store, a split's reduce) with no refusal.
    (1,500 such layers did, off CI.)"""
    import random

    rng = random.Random(20261128)
    planned = 0
    while planned < 40:
        layer = _plausible_layer(rng)
        if layer is None:
            continue
        cfg = conv2d_config(layer)
        refused = [c for c in tvm_tma.explain(conv2d_kernel(layer, cfg)).copies
                   if not c.planned]
        assert not refused, (layer.describe(), refused[0].rule, refused[0].detail)
        planned += 1


def test_conv2d_refuses_a_configuration_that_is_not_its_gemm():
    g = _layer(2, 8, 8, 64, 64)
    cfg = conv2d_config(g)
    for bad, message in ((replace(cfg, m=256), "m=256: the GEMM of N=2 8x8x64 -> K=64"),
                         (replace(cfg, k=640), "k=640"),
                         (replace(cfg, n=128), "n=128"),
                         (replace(cfg, b_layout="kn"), "b_layout='kn'"),
                         (replace(cfg, split_k=2), "split_k=2: conv2d computes Y = conv(X, "
                                                   "F); plain split-K adds into Y (Y +=): "
                                                   "take split_k_ordered=True"),
                         (replace(cfg, block_n=84), "block_n=84: a multiple of 8 from 8 to 256"),
                         (replace(cfg, block_n=160, epilogue_n=64),
                          "epilogue_n=64 (64 columns): whole 64-column atoms")):
        with pytest.raises(ValueError, match=re.escape(message)):
            conv2d_kernel(g, bad)
    # 9 K steps (3x3 taps of 64 channels) do not cut into 2 equal parts, and of 3 workers
    # one takes units of both parts (a short part 0 would then shift its ring uses).
    g4 = _layer(4, 8, 8, 64, 64)
    with pytest.raises(ValueError, match=re.escape(
            "split_k=2: the 9 K steps of N=4 8x8x64 -> K=64, 3x3, stride 1, pad 1 must divide "
            "into equal parts, or into a shorter part 0 and equal others with at most one "
            "unit per worker (4 units on 3 workers)")):
        conv2d_kernel(g4, replace(conv2d_config(g4, block_m=128), split_k=2,
                                  split_k_ordered=True, ctas=3))
    # The same 9 steps in 2 parts with a unit per worker: part 0 takes 4, part 1 takes 5.
    two = replace(cfg, split_k=2, split_k_ordered=True)
    assert (two.part_shortfall, two.part_steps(0), two.part_steps(1)) == (1, (0, 4), (4, 5))
    assert two.part_bounds() == [(0, 256), (256, 576)]
    with pytest.raises(ValueError, match=re.escape("m=8: set by the geometry")):
        conv2d_config(g, m=8)
    with pytest.raises(ValueError, match=re.escape("block_x: not a GemmConfig field")):
        conv2d_config(g, block_x=8)
    with pytest.raises(ValueError, match=re.escape("5 stages of 128x256x64 tiles need")):
        conv2d_config(g, block_n=256, epilogue_n=0, stages=5)


def test_a_padding_beyond_the_im2col_corner_range_is_refused_by_the_planner():
    """What only the im2col map decides is the planner's to refuse, when the kernel is
    planned: a corner of -130 does not fit a rank-4 map's 8 bits."""
    g = Conv2dGeometry(1, 4, 300, 64, 64, 1, 1, padding=(0, 130))
    load = tvm_tma.explain(conv2d_kernel(g, conv2d_config(g))).copies[0]
    assert load.rule == "im2col" and "corner -130" in load.detail


def test_conv2d_copies_plan_as_one_a_load_and_tiled_loads_and_stores(built):
    geometry, cfg, kernel, _ = built
    copies = list(tvm_tma.explain(kernel).copies)
    if cfg.tail_split > 1:
        # The tail's mainloop loads A and B again (planned alike); its parts store through
        # two copies, a plain store (part 0) and a reduce-add, after the whole tiles' store.
        assert len(copies) == 7
        assert [c.plan.tensor_map for c in copies[:6]] == [c.plan.tensor_map for c in
                                                          copies[:2] * 2 + [copies[4]] * 2]
        copies = copies[:2] + [copies[4], copies[6]]
    # Ordered split-K stores through two copies, a plain store (part 0) and a reduce-add.
    # Swapped (Y^T = F X^T) the filter is the MMAs' A: its copy comes first.
    a_load, b_load, store, *reduce = copies
    if cfg.swap_ab:
        a_load, b_load = b_load, a_load
    pixels = cfg.block_n if cfg.swap_ab else cfg.a_share_rows  # the activation box's
    assert len(reduce) == (1 if cfg.split_k_ordered or cfg.tail_split > 1 else 0)
    g = geometry.patches_folded()  # the layer as its map walks it (patch axes folded)
    swizzle = {64: 3, 32: 2, 16: 1}[cfg.block_k]
    if cfg.halo is not None:
        _check_halo_plans(g, cfg, a_load, b_load, store)
        return
    if g.is_pointwise:
        # 1x1, stride 1, no padding: A is X as an (N*H*W, C) matrix, one tiled 2-D load
        # of each CTA's block_m / cluster_n rows.
        assert a_load.planned and not a_load.plan.is_im2col, a_load.detail
        assert a_load.encoder == "cuTensorMapEncodeTiled" and a_load.plan.num_issues == 1
        spec = a_load.plan.tensor_map
        assert (spec.global_dims, spec.box_dims, spec.swizzle) == (
            (g.c, g.gemm_m), (cfg.block_k, pixels), swizzle)
        assert a_load.plan.notes[-1].startswith("pointwise convolution (filter 1x1")
        assert a_load.instruction == ("cp.async.bulk.tensor.2d.shared::cluster.global"
                                      ".mbarrier::complete_tx::bytes"
                                      + (".multicast::cluster" if cfg.cluster_n > 1 else ""))
        return
    assert a_load.planned and a_load.plan.is_im2col, a_load.detail
    assert a_load.encoder == "cuTensorMapEncodeIm2col"
    spec = a_load.plan.tensor_map
    (u, v), (ph, pw), (dh, dw) = g.stride, g.padding, g.dilation
    assert spec.global_dims == (g.c, g.w, g.h, g.n)
    assert spec.lower_corner == (-pw, -ph)
    assert spec.upper_corner == (pw - dw * (g.s - 1), ph - dh * (g.r - 1))
    assert spec.element_strides == (1, v, u, 1)
    # block_k channels of one tap per pixel, swizzled as the slot's rows: 128, 64 or 32
    # bytes (3, 2, 1: the 128B, 64B, 32B swizzle); the filter tile the same.
    # C 8 mod 16: 8 channels per copy, unswizzled (the slot is wgmma core matrices).
    assert (spec.channels_per_pixel, spec.swizzle) == (
        (8, 0) if cfg.a_copy_k else (cfg.block_k, swizzle))
    assert b_load.plan.tensor_map.swizzle == swizzle
    assert b_load.plan.tensor_map.box_dims[0] == cfg.block_k
    assert a_load.plan.num_issues == 1
    # A cluster along N: each CTA its own block_m / cluster_n pixels, to every CTA.
    assert spec.pixels_per_column == pixels
    assert a_load.instruction == ("cp.async.bulk.tensor.4d.shared::cluster.global.im2col"
                                  ".mbarrier::complete_tx::bytes"
                                  + (".multicast::cluster" if cfg.cluster_n > 1 else ""))
    for copy in (b_load, store):
        assert copy.planned and not copy.plan.is_im2col, copy.detail
        assert copy.encoder == "cuTensorMapEncodeTiled"
    if cfg.tap_columns:
        # (rows, taps, channels) views: past a tap's C the copies' edge (map dim 0).
        assert b_load.plan.tensor_map.global_dims == (g.c, g.k, g.gemm_k // g.c)
        assert 0 in a_load.plan.edge_dims and 0 in b_load.plan.edge_dims
        assert spec.channels_per_pixel == cfg.block_k > g.c % cfg.block_k
    else:
        assert b_load.plan.tensor_map.global_dims == (g.gemm_k, g.k)
    # The output (N*P*Q, K): 2-D, or 3-D where the C stage's 64-column atoms go in one box
    # (K cut into 64-channel pieces); where one tile spans K whole, an unswizzled C stage
    # of whole rows the planner may store as wider elements of the same bytes.
    spec = store.plan.tensor_map
    element = {"uint64": 8, "uint32": 4}.get(spec.dtype, 2)
    assert math.prod(spec.global_dims) * element == g.gemm_m * g.k * 2
    if cfg.block_n % 32 == 0 or cfg.swap_ab:  # swapped: C stages of 64-column atoms
        assert g.gemm_m in spec.global_dims
    else:
        assert spec.swizzle == 0
    assert b_load.instruction.endswith(".multicast::cluster") == (cfg.cluster > 1)
    assert re.fullmatch(r"cp\.async\.bulk\.tensor\.[23]d\.global\.shared::cta\.bulk_group",
                        store.instruction)


def _check_halo_plans(g, cfg, a_load, b_load, store) -> None:
    """Halo tiles (kernels/halo.py): A is one tiled load a tile of the activation itself,
    its box the halo's rows of ``width`` pixels (the padding the box's edges): a pixel a
    box row (C, W, H, N), or where a halo row fits one box row (at most 256 elements of
    the widest type dividing it) the row's W x C bytes merged into one (a 40-channel
    halo row of 15 pixels: 150 uint64 from 10 before the image's row of 130); B the
    filter's (C, K, taps) view where taps are padded; C stored as the tile's pixels."""
    halo = cfg.halo
    spec = a_load.plan.tensor_map
    element = {"uint64": 8, "uint32": 4}.get(spec.dtype, 2)
    assert a_load.encoder == "cuTensorMapEncodeTiled" and a_load.plan.num_issues == 1
    assert math.prod(spec.global_dims) * element == g.n * g.h * g.w * g.c * 2
    assert math.prod(spec.box_dims) * element == halo.load_bytes
    row = halo.width * g.c * 2
    if row <= 256 * element and spec.box_dims[0] * element == row:  # W x C merged
        assert spec.global_dims[:2] == (g.w * g.c * 2 // element, g.h)
        assert spec.box_dims[:2] == (row // element, halo.halo_rows)
        assert {0, 1} <= set(a_load.plan.edge_dims)
    else:  # a pixel a box row
        assert spec.global_dims[:3] == (g.c, g.w, g.h)
        assert spec.box_dims[:3] == (g.c, halo.width, halo.halo_rows)
        assert {1, 2} <= set(a_load.plan.edge_dims)
    assert spec.swizzle == 0
    assert halo.rows * halo.width <= cfg.block_m and halo.tiles * cfg.block_m == cfg.m
    assert a_load.instruction == (f"cp.async.bulk.tensor.{len(spec.global_dims)}d.shared::"
                                  "cluster.global.mbarrier::complete_tx::bytes")
    bspec = b_load.plan.tensor_map
    if cfg.tap_columns > g.c:
        assert bspec.global_dims == (g.c, g.k, g.r * g.s)
    else:
        assert bspec.global_dims == (g.gemm_k, g.k)
    assert bspec.box_dims[:2] == (cfg.block_k, cfg.block_n)
    sspec = store.plan.tensor_map
    element = {"uint64": 8, "uint32": 4}.get(sspec.dtype, 2)
    assert math.prod(sspec.global_dims) * element == g.gemm_m * g.k * 2
    # (A C stage of more than one 128-byte swizzle span is stored a box a span.)
    assert (math.prod(sspec.box_dims) * element * store.plan.num_issues
            == halo.stored_rows * cfg.epilogue_cols * 2)
    assert re.fullmatch(r"cp\.async\.bulk\.tensor\.[234]d\.global\.shared::cta"
                        r"\.bulk_group", store.instruction)


def test_conv2d_assembles_for_sm90a_with_the_expected_instructions(built):
    geometry, cfg, _, kernel = built
    src = kernel.cuda_source
    ptx_type = "bf16" if cfg.dtype == "bfloat16" else "f16"
    assert (f"wgmma.mma_async.sync.aligned.m64n{cfg.block_n}k16.f32.{ptx_type}.{ptx_type}"
            in src)
    if cfg.halo is not None:
        # A halo tile's pixels: a tiled load (no im2col map); the transposers' 16-byte
        # copies into the planes, fenced for wgmma; unswizzled wgmma descriptors (core
        # matrices 128 bytes apart along M) encoded once a K step with no leading offset,
        # each k16 step adding its operand's start and leading offset (bits 16-29).
        assert ".im2col." not in src and "X_tensormap" in src
        assert re.search(r"cp\.async\.bulk\.tensor\.[2-4]d\.shared::cluster\.global\."
                         r"mbarrier::complete_tx::bytes \[", src)
        assert "uint4" in src and "fence.proxy.async.shared::cta" in src
        assert src.count(", 0, 8, 0);") >= 1
        _check_halo_operands_in_source(cfg, src)
        assert kernel.tensormap_params == 3
        assert len(assemble(src)) > 0
        return
    if geometry.is_pointwise:  # A is X as an (N*H*W, C) matrix: a tiled 2-D load
        assert ".im2col." not in src
        assert ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                f"{'.multicast::cluster' if cfg.cluster_n > 1 else ''} [") in src
    else:
        assert ("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx"
                "::bytes [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};"
                if cfg.cluster_n == 1 else
                "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx"
                "::bytes.multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8}, %9;"
                ) in src
    assert re.search(r"cp\.async\.bulk\.tensor\.[23]d\.global\.shared::cta\.bulk_group", src)
    # The filter: 2-D, or (K, taps, channels) where each tap's C is padded to whole blocks.
    assert (f"cp.async.bulk.tensor.{3 if cfg.tap_columns else 2}d.shared::cluster.global"
            ".mbarrier::complete_tx::bytes"
            f"{'.multicast::cluster' if cfg.cluster > 1 else ''} [") in src
    # Three maps: the activation's im2col (pointwise: tiled) map, the filter's and the
    # output's tiled maps.
    assert kernel.tensormap_params == 3
    signature = next(line for line in src.splitlines() if "__global__" in line)
    assert ("X_tensormap" if geometry.is_pointwise else "X_im2col_tensormap") in signature
    # 232 registers a consumer thread beside one other consumer warpgroup, 152 beside two.
    assert f"setmaxnreg.inc.sync.aligned.u32 {232 if cfg.consumers <= 2 else 152};" in src
    assert f"__launch_bounds__({cfg.threads})" in src
    assert len(assemble(src)) > 0


def _halo_operand_constants(cfg) -> set[int]:
    """What each k16 step of an unrolled halo mainloop adds to the A descriptor, from the
    layout's definition: 8-channel group (tap t, plane c) at ``c * plane_pixels +
    offset(t)`` pixels (16-byte rows) of the slot, the step's two groups consecutive in
    K (padded taps: ``tap_columns / 8`` groups a tap, its padding planes zeroed; folded:
    C / 8 a tap, a group crossing into the next tap read from the copy of plane 0 after
    the last plane, one past K from the zeroed region after the planes); the start in
    bits 0-13, the second group's distance (the leading byte offset) in bits 16-29, and
    64 rows a 64-row sub-tile."""
    halo = cfg.halo
    pitch = halo.plane_pixels

    def offset(t):
        return (t // halo.taps_s * halo.dilation[0] * halo.width
                + t % halo.taps_s * halo.dilation[1])

    per_tap = halo.planes
    order = [(t, c) for t in range(halo.taps) for c in range(per_tap)]
    copy_plane = halo.folded and per_tap % 2 == 1
    zero_region = (per_tap + copy_plane) * pitch
    found = set()
    for k16 in range(cfg.k_steps * cfg.block_k // 16):
        if 2 * k16 >= len(order):
            continue  # wholly past K: no MMA
        t, c = order[2 * k16]
        start = c * pitch + offset(t)
        if 2 * k16 + 1 == len(order):
            second = zero_region
        else:
            t2, c2 = order[2 * k16 + 1]
            second = (per_tap if t2 != t else c2) * pitch + offset(t2)
        for mi in range(cfg.consumer_rows // 64):
            found.add(start + (second - start) * (1 << 16) + mi * 64)
    return found


def _check_halo_operands_in_source(cfg, src: str) -> None:
    """An unrolled halo mainloop adds exactly the operands of
    :func:`_halo_operand_constants` to the A descriptor (a rolled one computes them)."""
    from tvm_tma.kernels.tiling import UNROLLED_ACCUMULATOR_STEPS, unrolled

    added = {int(v) for v in re.findall(r"desc_a_ptr\[0\] \+ \(uint64_t\)(\d+)ULL\)", src)}
    if unrolled(cfg.k_steps, cfg, UNROLLED_ACCUMULATOR_STEPS):
        assert added == _halo_operand_constants(cfg)
    else:
        assert not added


def test_halo_operands_of_24_channels_folded_and_padded():
    """The k16 operands of a 3x3, 24-channel layer's halo tiles (8 x 14 outputs, a 16-wide
    halo of 10 rows: 160 pixels a plane), written out: folded K reads tap 0's planes 0-1,
    then its plane 2 with tap 1's plane 0 from the copy (plane 3, one pixel further: a
    leading offset of 161), ... 14 steps in all, the last tap 8's plane 2 with the zeroed
    region (plane 4); padded taps (32 columns) read planes 0-1 and 2-3 of every tap, 18
    steps."""
    folded = conv2d_config(_layer(1, 224, 224, 24, 48), halo="folded")
    padded = conv2d_config(_layer(1, 224, 224, 24, 48), halo="padded")
    assert (folded.halo.planes, folded.halo.stored_planes, folded.halo.plane_pixels,
            folded.k, folded.block_k, folded.k_steps) == (3, 4, 160, 216, 64, 4)
    operands = [folded.halo.mma_operand(s, kk, 64) for s in range(4) for kk in range(4)]
    assert [(start, lead) for start, lead, live in operands if live][:6] == [
        (0, 160), (320, 161), (161, 160), (2, 160), (322, 174), (176, 160)]
    assert operands[13][:2] == (2 * 160 + 34, 4 * 160 - (2 * 160 + 34))  # tap 8 = (2, 2)
    assert [live for _, _, live in operands] == [True] * 14 + [False] * 2
    assert (padded.halo.planes, padded.k, padded.block_k, padded.k_steps) == (4, 288, 32, 9)
    assert [padded.halo.mma_operand(1, kk, 32)[:2] for kk in range(2)] == [
        (1, 160), (1 + 320, 160)]
    for cfg, steps in ((folded, 14), (padded, 18)):
        assert len(_halo_operand_constants(cfg)) == steps


@pytest.mark.parametrize("case", SMALL, ids=[c[0] for c in SMALL])
def test_every_a_tile_the_kernel_loads_is_its_im2col_block_on_the_tma_model(case):
    """The A copy's im2col plan (a pointwise layer's tiled plan), evaluated for every
    (worker, cluster rank, round, K step) the producer runs and executed on the numpy TMA
    model, lands in its ring slot exactly the block of the im2col matrix (built from the
    convolution's definition) that the tile order assigns to that work unit, zeros past
    the last output pixel; every output tile is loaded once (stream-K: every K step of
    every tile, once over all the runs; a tail split: the tail's A copy, every K part of
    the tiles left over after the full waves)."""
    import tvm
    from tvm.sym import Analyzer

    from tvm_tma.kernels.scheduler import (
        rounds,
        stream_k_tile_coordinates,
        tail_unit,
        tile_coordinates,
        unit_coordinates,
    )
    from tvm_tma.kernels.wgmma import a_slot_layout, swizzled_layout
    from tvm_tma.testing.im2col_model import conv_gemm_view, execute_im2col, pad_taps
    from tvm_tma.testing.layout_eval import layout_offsets
    from tvm_tma.testing.tma_model import execute_plan

    _, g, options = case
    cfg = _config(g, options)
    if cfg.halo is not None:
        pytest.skip("halo tiles: test_every_halo_tile_holds_its_pixels_on_the_tma_model")
    copies = tvm_tma.explain(conv2d_kernel(g, cfg)).copies
    # The whole tiles' A copy, and with a tail split the tail mainloop's (the third copy).
    # Swapped (Y^T = F X^T), the activation is the second copy, into the B ring: its
    # block_n pixels are the tile's column block of the product.
    swapped = cfg.swap_ab
    plans = ([copies[1 if swapped else 0].plan]
             + ([copies[2].plan] if cfg.tail_split > 1 else []))
    plan = plans[0]
    assert plan.is_im2col != g.is_pointwise
    execute = execute_im2col if plan.is_im2col else execute_plan

    def variables(plan) -> dict:
        found = {}
        for expr in (*plan.coordinates, *plan.im2col_offsets, plan.smem_offset):
            if not isinstance(expr, int):
                found.update({str(v): v for v in tvm.tirx.analysis.undefined_vars(expr)})
        return found

    names = {name: var for p in plans for name, var in variables(p).items()}
    # p: the piece of a K block copied in 8-column pieces.
    # In a cluster, cta: the CTA index (worker * cluster size + rank, what the tile
    # arithmetic reads) beside rank (the scope id the multicast copies name).
    assert set(names) <= {"worker", "cta", "rank", "t" if cfg.stream_k else "j", "ks",
                          "p"}, names
    x = np.random.default_rng(5).integers(1, 1 << 16, size=g.argument_shape, dtype=np.uint16)
    # Columns past K (a pointwise layer's last K block past C) are zeros: the copy's edge.
    view = conv_gemm_view(x, (g.r, g.s), g.stride, g.padding, g.dilation)
    if cfg.tap_columns:  # each tap's channels, then zeros to tap_columns
        view = pad_taps(view, g.tap_channels, cfg.tap_columns)
    rows = cfg.block_n if swapped else cfg.block_m  # pixels a slot holds
    blocks = cfg.n_blocks if swapped else cfg.m_blocks * cfg.cluster
    matrix = np.zeros((blocks * rows + rows, max(cfg.k, cfg.k_steps * cfg.block_k)),
                      np.uint16)
    matrix[:g.gemm_m, :cfg.k] = view
    slot_layout = (swizzled_layout(cfg.dtype, (cfg.stages, rows, cfg.block_k)) if swapped
                   else a_slot_layout(cfg))
    slots = layout_offsets(slot_layout, (cfg.stages, rows, cfg.block_k))
    a_start = (cfg.b_ring_start if swapped else cfg.a_ring_start) // cfg.element_bytes
    analyzer = Analyzer()
    loaded = []

    def check_slot(values: dict, it: int, mb: int, k_step: int, plan=plan) -> None:
        # mb: the block of pixels (swapped: the product's column block).
        # Each copy of the slot (one, or one per 8-column piece that starts before K); in
        # a cluster along N every CTA of the cluster sends its rows of it.
        width = cfg.a_copy_k or cfg.block_k
        senders = [values] if cfg.cluster_n == 1 else [
            {**values, "rank": rank} for rank in range(cfg.cluster_n)]
        for p in range(cfg.a_pieces):
            k0 = k_step * cfg.block_k + p * width
            if k0 >= cfg.k:
                continue
            arena = np.full(cfg.shared_bytes, 0xA5, np.uint8)
            for sender in senders:
                sender = {**sender, "p": p,
                          "cta": sender["worker"] * cfg.cluster_size + sender["rank"]}
                env = {var: sender[name] for name, var in variables(plan).items()}
                execute(plan, x.reshape(-1).view(np.uint8), arena, 2, env)
            piece = slots[it % cfg.stages][:, p * width:(p + 1) * width]
            got = arena.view(np.uint16)[a_start + piece]
            want = matrix[mb * rows:(mb + 1) * rows, k0:k0 + width]
            assert np.array_equal(got, want), {**values, "p": p}

    if cfg.stream_k:
        # Each worker's run, tile by tile (ring use = K step of the problem - run start).
        assert cfg.stream_k_dp_tiles == 0, "these layers have fewer tiles than CTAs"
        steps, covered = cfg.k_steps, []
        for worker in range(cfg.workers):
            first, end = cfg.stream_k_start(worker), cfg.stream_k_start(worker + 1)
            for t in range(first // steps, (end + steps - 1) // steps):
                begin, stop = max(first - t * steps, 0), min(end - t * steps, steps)
                for rank in range(cfg.cluster):
                    mb, nb = (int(analyzer.simplify(tvm.tirx.const(0) + v))
                              for v in stream_k_tile_coordinates(cfg, t, rank))
                    for ks in range(stop - begin):
                        check_slot({"worker": worker, "rank": rank, "t": t, "ks": ks},
                                   t * steps + begin + ks - first, mb, begin + ks)
                        covered.append((mb, nb, begin + ks))
        every = {(mb, nb, k) for mb in range(cfg.m_groups * cfg.cluster)
                 for nb in range(cfg.n_blocks) for k in range(steps)}
        assert sorted(covered) == sorted(every)
        return
    whole_rounds = cfg.tail_rounds if cfg.tail_split > 1 else rounds(cfg)
    for worker in range(cfg.workers):
        for rank in range(cfg.cluster_size):
            for j in range(whole_rounds):
                unit = worker + j * cfg.workers
                if unit >= cfg.work_units:
                    continue
                mb, nb, part = (int(analyzer.simplify(tvm.tirx.const(0) + v))
                                for v in unit_coordinates(cfg, unit, rank))
                loaded.append((mb, nb, part))
                first, count = cfg.part_steps(part)
                for ks in range(count):
                    # (ordered split-K: part p holds K steps part_steps(p); every unit of
                    # a worker has the same length, so round j starts at ring use j * count)
                    check_slot({"worker": worker, "rank": rank, "j": j, "ks": ks},
                               j * count + ks, nb if swapped else mb, first + ks)
    if cfg.tail_split > 1:
        # The last round: adjacent workers take the K parts of one tile left over, its
        # ring uses after the full rounds' (tail_rounds * k_steps of them).
        assert cfg.cluster_size == 1 and cfg.split_k == 1
        for worker in range(cfg.tail_tiles * cfg.tail_split):
            tile, part = (int(analyzer.simplify(tvm.tirx.const(0) + v))
                          for v in tail_unit(cfg, worker))
            mb, nb = (int(analyzer.simplify(tvm.tirx.const(0) + v)) for v in
                      tile_coordinates(tile, cfg.m_groups, cfg.n_groups, cfg.group_m))
            if part == 0:
                loaded.append((mb, nb, 0))
            first, count = cfg.tail_part_steps(part)
            for ks in range(count):
                check_slot({"worker": worker, "rank": 0, "ks": ks},
                           cfg.tail_rounds * cfg.k_steps + ks, mb, first + ks, plans[1])
    tiles = {(mb, nb, part) for mb in range(cfg.m_blocks) for nb in range(cfg.n_blocks)
             for part in range(cfg.split_k)}
    assert sorted(t for t in loaded
                  if t[0] < cfg.m_blocks and t[1] < cfg.n_blocks) == sorted(tiles)


HALO_SMALL = [c for c in SMALL if _config(c[1], c[2]).halo is not None]


@pytest.mark.parametrize("case", HALO_SMALL, ids=[c[0] for c in HALO_SMALL])
def test_every_halo_tile_holds_its_pixels_on_the_tma_model(case):
    """Halo tiles: the A copy's plan, evaluated for every (worker, round) the producer
    runs and executed on the numpy TMA model, fills its raw slot with the halo's pixels,
    which copied into channel planes (each pixel's 16-byte chunk c to plane c; with K
    folded and C/8 odd, chunk 0 again into the plane after the last; past C, or after
    the planes with K folded, zeros) make what each k16 step's wgmma operand addresses
    -- 16-byte rows ``start + i`` and ``start + lead + i`` of the slot -- for every row
    ``i`` of a stored output pixel that pixel's 16 columns of the im2col matrix (built
    from the convolution's definition: each tap padded with zeros to ``tap_columns``, or
    with K folded the taps as they are and zeros past K); every tile loaded once. Both K
    layouts of each case's tiling are checked."""
    from tvm_tma.kernels.conv2d_tiling import with_halo_k

    _, g, options = case
    default = _config(g, options)
    for cfg in (default, with_halo_k(g, default, not default.halo.folded)):
        _check_halo_operands_on_the_model(g, cfg)


def _check_halo_operands_on_the_model(g, cfg) -> None:
    import tvm
    from tvm.sym import Analyzer

    from tvm_tma.kernels.halo import HALO_STAGES
    from tvm_tma.kernels.scheduler import rounds, unit_coordinates
    from tvm_tma.testing.im2col_model import conv_gemm_view, pad_taps
    from tvm_tma.testing.tma_model import execute_plan

    halo = cfg.halo
    plan = tvm_tma.explain(conv2d_kernel(g, cfg)).copies[0].plan
    names = {str(v): v for expr in (*plan.coordinates, plan.smem_offset)
             if not isinstance(expr, int) for v in tvm.tirx.analysis.undefined_vars(expr)}
    assert set(names) <= {"worker", "j"}, names
    x = np.random.default_rng(7).integers(1, 1 << 16, size=g.argument_shape, dtype=np.uint16)
    view = conv_gemm_view(x, (g.r, g.s), g.stride, g.padding, g.dilation)
    if cfg.tap_columns:
        view = pad_taps(view, g.c, cfg.tap_columns)
    # K steps past K read zeros (the filter's too): the folded view padded to whole steps.
    view = np.pad(view, ((0, 0), (0, cfg.k_steps * cfg.block_k - view.shape[1])))
    real = g.c // 8
    analyzer = Analyzer()
    loaded = []
    for worker in range(cfg.workers):
        for j in range(rounds(cfg)):
            unit = worker + j * cfg.workers
            if unit >= cfg.work_units:
                continue
            mb, _, _ = (int(analyzer.simplify(tvm.tirx.const(0) + v))
                        for v in unit_coordinates(cfg, unit, 0))
            loaded.append(mb)
            arena = np.full(cfg.shared_bytes, 0xA5, np.uint8)
            env = {var: {"worker": worker, "j": j}[name] for name, var in names.items()}
            execute_plan(plan, x.reshape(-1).view(np.uint8), arena, 2, env)
            # The raw slot is the halo pixel-major; the transposers copy its chunks into
            # the stored planes and zero what no tile writes.
            raw_at = (cfg.halo_raw_start + j % HALO_STAGES * halo.raw_slot_bytes) // 2
            raw = arena.view(np.uint16)[raw_at:raw_at + halo.load_bytes // 2]
            raw = raw.reshape(halo.plane_pixels, real, 8)
            image = np.full(cfg.shared_bytes // 2, 0xA5A5, np.uint16)
            slot = (cfg.a_ring_start + j % HALO_STAGES * halo.slot_bytes) // 2
            planes = raw.transpose(1, 0, 2)
            if halo.folded:
                planes = np.concatenate([planes, planes[:1]] if real % 2 else [planes])
                zeros = np.zeros((cfg.block_m, 8), np.uint16)
            else:
                planes = np.concatenate(
                    [planes, np.zeros((halo.planes - real, halo.plane_pixels, 8), np.uint16)])
                zeros = np.zeros((0, 8), np.uint16)
            stored = np.concatenate([planes.reshape(-1, 8), zeros])
            image[slot:slot + stored.size] = stored.reshape(-1)
            n, p0, q0 = (int(analyzer.simplify(tvm.tirx.const(0) + v))
                         for v in halo.coordinates(mb))
            for i in range(cfg.block_m):
                a, b = divmod(i, halo.width)
                if a >= halo.rows or b >= halo.cols or p0 + a >= g.p or q0 + b >= g.q:
                    continue  # a garbage row: computed, never stored
                pixel = (n * g.p + p0 + a) * g.q + q0 + b
                for k_step in range(cfg.k_steps):
                    for kk in range(cfg.block_k // 16):
                        start, lead, live = halo.mma_operand(k_step, kk, cfg.block_k)
                        column = k_step * cfg.block_k + kk * 16
                        want = view[pixel, column:column + 16]
                        if not live:  # past K: no MMA (the view is zeros there)
                            assert column >= g.gemm_k and not want.any()
                            continue
                        assert lead > 0
                        rows = slot + (np.array([start, start + lead]) + i) * 8
                        got = image[(rows[:, None] + np.arange(8)[None, :]).reshape(-1)]
                        assert np.array_equal(got, want), (worker, j, i, k_step, kk)
    assert sorted(loaded) == list(range(halo.tiles))


def test_halo_tiles_take_padded_taps_of_whole_output_rows():
    """The halo rule (conv2d_tiling._halo_tiles): stride 1, undilated, C of at most 96
    padded in its taps, at most 256 output channels; tiles of at least two whole output
    rows, the height loading the fewest halo rows a CTA; else one-row tiles with the
    filter resident where it fits. H200 (RESULTS.md 6z9). K folded over the taps (64-wide
    K blocks, no tap padding: tap_columns 0) unless the caller chose the K blocks."""
    cases = {  # layer: (rows, block_m, block_k, tap_columns, tiles, resident)
        (16, 56, 24, 24): (3, 192, 64, 0, 304, False),
        (16, 28, 80, 80): (4, 128, 64, 0, 112, False),
        (2, 56, 24, 64): (2, 128, 64, 0, 56, False),
        (16, 112, 24, 64): (1, 128, 64, 0, 1792, True),  # one row of 112 a tile
        (8, 112, 40, 40): (1, 128, 64, 0, 896, True),
    }
    for (n, h, c, k), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k))
        halo = cfg.halo
        assert (halo.rows, cfg.block_m, cfg.block_k, cfg.tap_columns, cfg.num_tiles,
                cfg.b_resident) == want, (n, h, c, k)
        assert (halo.cols, cfg.schedule, cfg.block_n, cfg.cluster_size) == (
            h, "cooperative", k, 1)
        if cfg.b_resident:  # one slot a K step, as many sets as fit
            assert cfg.stages % cfg.k_steps == 0 and cfg.shared_bytes <= 227 * 1024
    # Rows wider than a tile: segments of several rows, the fewest halo pixels (N=1
    # 224x224x24 -> 48: 8 rows of 14, halo 10 x 16 for 112 outputs against 3 x 114 for
    # 112 on one-row tiles; H200 1.16x, RESULTS.md 6z11), stored a row at a time.
    wide = conv2d_config(_layer(1, 224, 224, 24, 48)).halo
    assert (wide.rows, wide.cols, wide.width, wide.row_stores, wide.stored_rows) == (
        8, 14, 16, 8, 14)
    inception = conv2d_config(_layer(32, 35, 35, 48, 64, 5, 5, pad=2))
    assert (inception.halo.rows, inception.block_k, inception.tap_columns) == (3, 64, 0)
    # C of 16 or 32 (taps the im2col loads do not pad), K folded: halo tiles where they
    # fill 3/4 of their rounds of CTAs (RESULTS.md 6z18): N=32 56x56x32 3 rows of 56 on
    # 192 rows, 608 tiles (0.92); N=1 320x320x16 -> 32 segments of 8 x 14, the filter
    # resident (0.97); N=16 28x28x32 -> 64 112 tiles on 132 CTAs (0.85); not N=2 64x64x32
    # -> 64 (64 tiles: 0.48, 0.78x measured) nor N=1 128x128x32 -> 96 (160: 0.61, 0.77x),
    # not C = 64, not a 1x1 filter, not asked for K blocks.
    for layer, want in [(_layer(32, 56, 56, 32, 32), (3, 56, 192, False, 608)),
                        (_layer(1, 320, 320, 16, 32), (8, 14, 128, True, 920)),
                        (_layer(16, 28, 28, 32, 64), (4, 28, 128, False, 112))]:
        cfg = conv2d_config(layer)
        assert (cfg.halo.rows, cfg.halo.cols, cfg.block_m, cfg.b_resident,
                cfg.num_tiles) == want, layer.describe()
        assert (cfg.halo.folded, cfg.tap_columns, cfg.block_k) == (True, 0, 64)
    for layer, options in [(_layer(2, 64, 64, 32, 64), {}), (_layer(1, 128, 128, 32, 96), {}),
                           (_layer(8, 80, 80, 64, 64), {}),
                           (_layer(32, 56, 56, 32, 32, 1, 1, pad=0), {}),
                           (_layer(32, 56, 56, 32, 32), {"block_k": 32})]:
        assert conv2d_config(layer, **options).halo is None, (layer.describe(), options)
    # A K block the caller gives keeps each tap padded to it (the halo as before).
    given = conv2d_config(_layer(16, 56, 56, 24, 24), block_k=32)
    assert (given.halo.folded, given.block_k, given.tap_columns) == (False, 32, 32)
    # Not: aligned or wide C, a filter too big to stay beside one-row halos (N=4
    # 112x112x56 -> 112), stride 2, the caller's tile, halo=False; halo=True asks for them
    # (a stride refused by name).
    for layer, options in [(_layer(32, 56, 56, 64, 64), {}),
                           (_layer(8, 28, 28, 112, 112), {}),
                           (_layer(4, 112, 112, 56, 112), {}),
                           (_layer(16, 56, 56, 24, 24, stride=2), {}),
                           (_layer(16, 56, 56, 24, 24), {"block_n": 24}),
                           (_layer(16, 56, 56, 24, 24), {"halo": False})]:
        assert conv2d_config(layer, **options).halo is None, (layer.describe(), options)
    forced = conv2d_config(_layer(32, 56, 56, 64, 64), halo=True)
    assert (forced.halo.rows, forced.halo.cols, forced.b_resident) == (3, 56, False)
    with pytest.raises(ValueError, match=r"halo tiles with stride \(2, 2\): stride 1 only"):
        conv2d_config(_layer(16, 56, 56, 24, 24, stride=2), halo=True)


def test_halo_segments_where_whole_row_slots_do_not_fit():
    """Where no tile height holds a whole row's slots (the halo rows of a wide image of 72
    to 88 channels), halo tiles are segments of several rows (halo.halo_tiling's
    ``segments``); the rule (conv2d_tiling._resident_else_streamed) keeps the filter
    resident at the height of the fewest halo pixels a CTA, else at the other height,
    else, for C of at least 72, streams it on segments whose ring holds 4 K steps. H100,
    same run (RESULTS.md 6z19): every one of these faster than the im2col loads."""
    cases = {  # layer: (rows, cols, block_m, resident, tiles, stages)
        (2, 96, 88, 64): (12, 14, 192, False, 112, 4),  # 2.69x the im2col loads
        (4, 96, 88, 88): (8, 14, 128, False, 336, 7),  # 192 rows hold 2 ring stages
        (8, 120, 72, 72): (8, 14, 128, True, 1080, 11),  # resident on 128, not on 192
        (16, 96, 88, 24): (12, 14, 192, True, 896, 13),
        (1, 160, 80, 160): (8, 14, 128, False, 240, 5),  # a row wider than 128 rows
    }
    for (n, h, c, k), want in cases.items():
        cfg = conv2d_config(_layer(n, h, h, c, k))
        halo = cfg.halo
        assert (halo.rows, halo.cols, cfg.block_m, cfg.b_resident, cfg.num_tiles,
                cfg.stages) == want, (n, h, c, k)
        assert halo.width % 8 == 0 and halo.rows * halo.width <= cfg.block_m
        assert cfg.shared_bytes <= 227 * 1024
    # The whole row on 128 rows (98 pixels: 52 KB raw, 56 KB of planes a slot) does not
    # fit: halo=True on 128 rows gives segments, the same tiles as asked on 192.
    wide = _layer(2, 96, 96, 88, 64)
    assert halo_tiling(wide, 128, 0).cols == 96
    assert conv2d_config(wide, halo=True, block_m=128).halo.cols == 14
    assert halo_tiling(wide, 192, 0, segments=True).rows == 12
    # Not streamed: one-row tiles (unmeasured: N=2 64x64x88 -> 64, one row of 64 a tile),
    # C under 72 (N=4 112x112x56 -> 112); the im2col loads stay.
    for layer in (_layer(2, 64, 64, 88, 64), _layer(4, 112, 112, 56, 112)):
        assert conv2d_config(layer).halo is None, layer.describe()
    with pytest.raises(ValueError, match="no segment of several rows"):
        halo_tiling(_layer(1, 1, 96, 88, 64), 192, 0, segments=True)


def test_reference_is_the_convolution():
    """conv2d_reference against the convolution's definition, element by element (stride,
    padding and dilation in both directions); the magnitude bounds the reference."""
    g = Conv2dGeometry(2, 7, 6, 4, 3, 3, 2, stride=(2, 1), padding=(1, 2), dilation=(1, 2))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(g.argument_shape).astype(np.float32)
    f = rng.standard_normal((g.k, g.r, g.s, g.c)).astype(np.float32)
    ref, magnitude = conv2d_reference(x, f, g)
    direct = np.zeros((g.n, g.p, g.q, g.k))
    (u, v), (ph, pw), (dh, dw) = g.stride, g.padding, g.dilation
    for n in range(g.n):
        for p in range(g.p):
            for q in range(g.q):
                for r in range(g.r):
                    for s in range(g.s):
                        h, w = p * u + r * dh - ph, q * v + s * dw - pw
                        if 0 <= h < g.h and 0 <= w < g.w:
                            direct[n, p, q] += f[:, r, s, :].astype(np.float64) @ x[n, h, w]
    assert ref.shape == magnitude.shape == g.output_shape
    np.testing.assert_allclose(ref, direct.reshape(g.output_shape), rtol=1e-5, atol=1e-5)
    assert (magnitude >= np.abs(ref) - 1e-5).all()


def test_error_bound_is_the_gemms_with_k_taps_times_channels():
    g = _layer(2, 8, 8, 64, 64)
    x, f = random_inputs(g, "bfloat16", seed=1)
    ref, magnitude = conv2d_reference(x, f, g)
    bound = conv2d_error_bound(ref, magnitude, g, "bfloat16")
    assert np.array_equal(bound, error_bound(ref, magnitude, 576, "bfloat16"))
    # The output's own rounding to bf16 stays inside; an error of 2^-6 |Y| does not.
    import ml_dtypes

    rounded = ref.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert (np.abs(rounded - ref) <= bound).all()
    assert not (np.abs(ref * 2.0**-6) <= bound).all()


def test_benchmark_compile_only_assembles_every_default_layer(capsys):
    """What CI runs of benchmarks/conv2d.py: the default kernel of each of the issue's eight
    layers, built and assembled for sm_90a."""
    assert BENCHMARK.main(["--compile-only"]) == 0
    out = capsys.readouterr().out
    assert "8 kernels assembled" in out
    for name, _, _ in BENCHMARK.PROBLEMS:
        assert f"{name} (" in out


def test_benchmark_sweep_and_problem_options(tmp_path, capsys):
    """``--problem`` parses N,H,W,C,K,R,S,stride,pad; ``--sweep`` builds every tiling of a
    layer; ``--dump-cuda`` writes one source per kernel."""
    g = BENCHMARK.parse_problem("2,8,8,128,128,3,3,2,1")[1]
    assert g == _layer(2, 8, 8, 128, 128, stride=2)
    configs = BENCHMARK.configs_for(g, "bfloat16", True, 132)
    assert configs[0] == conv2d_config(g, ctas=132) and len(set(configs)) == len(configs)
    assert {cfg.block_n for cfg in configs} == {64, 128}  # no tile wider than K needs
    assert {(cfg.schedule, cfg.cluster) for cfg in configs} == {
        ("cooperative", 1), ("cooperative", 2), ("pingpong", 1), ("pingpong", 2)}
    # Clusters along N only where there are column blocks to pair (64-wide tiles of K = 128:
    # two, so 1x2; a 1x4 cluster's last two CTAs would hold padding only).
    assert {(cfg.block_n, cfg.cluster_n) for cfg in configs} == {(64, 1), (64, 2), (128, 1)}
    # One wave of tiles dividing K exactly, where the rule's 20 K steps on 128 rows stop it
    # (SD's N=2 32x32x1920 -> 640: 128 tiles of 128 x 80 at 30 K steps).
    long_k = BENCHMARK.configs_for(_layer(2, 32, 32, 1920, 640, 1, 1, pad=0), "bfloat16",
                                   True, 132)
    assert long_k[0].block_n == 128
    assert any((cfg.block_m, cfg.block_n, cfg.num_tiles) == (128, 80, 128) for cfg in long_k)
    # One wave of narrow 64-row tiles of whole K (N=32 1x1 7x7x1152 -> 192: 25 row
    # blocks; 64 x 48 100 tiles, 64 x 64 75): the default is the fullest of them
    # (in_fullest_narrow_wave), and the sweep times the other beside it.
    few = BENCHMARK.configs_for(_layer(32, 7, 7, 1152, 192, 1, 1, pad=0), "bfloat16", True,
                                132)
    assert (few[0].block_m, few[0].block_n, few[0].split_k) == (64, 48, 1)
    narrow = {(cfg.block_n, cfg.num_tiles) for cfg in few
              if cfg.block_m == 64 and cfg.split_k == 1 and not cfg.stream_k
              and cfg.tail_split == 1}
    assert {(64, 75), (48, 100)} <= narrow
    # The whole sweep built and assembled, one source dumped per kernel, on a layer of 64
    # output channels (8 tilings: the 128-channel layer's 19 took CI two minutes; their
    # schedules -- ping-pong, clusters along M and N, ordered split-K -- are the small
    # layers' cases assembled above).
    small = BENCHMARK.configs_for(_layer(2, 8, 8, 64, 64, stride=2), "bfloat16", True, 132)
    assert 1 < len(small) < len(configs)
    assert BENCHMARK.main(["--compile-only", "--sweep", "--problem", "2,8,8,64,64,3,3,2,1",
                           "--dump-cuda", str(tmp_path)]) == 0
    assert f"{len(small)} kernels assembled" in capsys.readouterr().out
    assert len(list(tmp_path.glob("*.cu"))) == len(small)


def test_benchmark_halo_k_times_the_default_tiling_in_each_k_layout():
    """``--halo-k``: a layer on halo tiles in its default tiling with K folded, with each
    tap padded, or both (the default's first; the sweep takes both); the same tiles
    either way (rows, columns, height, resident filter), the K layout and its K blocks
    alone differing. A layer on im2col loads keeps its one tiling."""
    g = _layer(4, 150, 150, 24, 24)
    default = conv2d_config(g, ctas=132)
    both = BENCHMARK.configs_for(g, "bfloat16", False, 132, "both")
    assert both[0] == default and [c.halo.folded for c in both] == [True, False]
    padded = both[1]
    assert padded == BENCHMARK.configs_for(g, "bfloat16", False, 132, "padded")[0]
    assert (padded.halo.rows, padded.halo.cols, padded.block_m, padded.b_resident) == (
        default.halo.rows, default.halo.cols, default.block_m, default.b_resident)
    assert (padded.tap_columns, padded.block_k, padded.k, default.k) == (32, 32, 288, 216)
    swept = BENCHMARK.configs_for(g, "bfloat16", True, 132)
    assert swept[:2] == both
    plain = _layer(2, 8, 8, 64, 64, stride=2)
    assert BENCHMARK.configs_for(plain, "bfloat16", False, 132, "both", True) == [
        conv2d_config(plain, ctas=132)]
    # --against-im2col: the halo default, then the im2col loads.
    against = BENCHMARK.configs_for(g, "bfloat16", False, 132, against_im2col=True)
    assert against == [default, conv2d_config(g, ctas=132, halo=False)]
    assert against[1].halo is None and against[1].tap_columns == 32


def test_benchmark_variants_time_option_sets_after_the_default(capsys):
    """``--variant 'key=value;...'``: the layer's conv2d_config with those options after
    its default, in order, a repeat of one already listed dropped and a refused one said
    and skipped (VGG N=16 28x28x512: the default 192 x 128, then 128 x 256 stream-K)."""
    assert BENCHMARK.parse_variant("block_m=128; stream_k=true;halo=folded") == {
        "block_m": 128, "stream_k": True, "halo": "folded"}
    with pytest.raises(argparse.ArgumentTypeError, match="key=value"):
        BENCHMARK.parse_variant("block_m")
    g = _layer(16, 28, 28, 512, 512)
    variants = ({"block_m": 128}, {"block_m": 128, "stream_k": True}, {"halo": True},
                {"block_m": 128, "stream_k": False})
    found = BENCHMARK.configs_for(g, "bfloat16", False, 132, variants=variants)
    assert [(c.block_m, c.block_n, c.stream_k) for c in found] == [
        (192, 128, False), (128, 256, True), (128, 256, False)]
    assert "variant {'halo': True} refused: halo tiles with K=512" in capsys.readouterr().out


def test_example_builds_and_assembles(capsys):
    example = load_script(REPO / "examples" / "conv2d_hopper.py", "conv2d_example")
    assert example.main() == 0
    out = capsys.readouterr().out
    assert "cuTensorMapEncodeIm2col" in out and "bytes of sm_90a cubin" in out


def _torch_reference(torch, x: np.ndarray, f: np.ndarray, g: Conv2dGeometry) -> np.ndarray:
    """``torch.nn.functional.conv2d`` of the same inputs as channels_last float64 tensors
    (CPU), as (N*P*Q, K)."""
    x_nchw = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    w_kcrs = torch.from_numpy(f.astype(np.float64)).permute(0, 3, 1, 2)
    assert x_nchw.is_contiguous(memory_format=torch.channels_last)
    y = torch.nn.functional.conv2d(x_nchw, w_kcrs, stride=g.stride, padding=g.padding,
                                   dilation=g.dilation)
    return y.permute(0, 2, 3, 1).reshape(g.output_shape).numpy()


def test_torch_reference_agrees_with_numpy():
    """The torch check of the GPU test compares against the same convolution (where torch
    is installed)."""
    torch = pytest.importorskip("torch")
    _, g, _ = SMALL[2]
    x, f = random_inputs(g, "bfloat16", seed=2)
    ref, magnitude = conv2d_reference(x, f, g)
    bound = conv2d_error_bound(ref, magnitude, g, "bfloat16")
    assert (np.abs(_torch_reference(torch, x, f, g) - ref) <= bound).all()


@pytest.mark.gpu
@pytest.mark.parametrize("case", SMALL, ids=[c[0] for c in SMALL])
def test_conv2d_matches_numpy_and_torch_on_the_gpu(case):
    _, geometry, options = case
    cfg = _config(geometry, options)
    result = run(geometry, cfg, seed=geometry.gemm_m + geometry.k)
    assert np.isfinite(result.y).all(), "elements left unwritten (NaN poison survived)"
    assert result.ok, result.worst_element()
    try:
        import torch
    except ImportError:
        return
    expected = _torch_reference(torch, result.x, result.f, geometry)
    error = np.abs(result.y - expected)
    assert (error <= result.bound).all(), (
        f"against torch: worst error/bound {float(np.max(error / result.bound)):.3f}")
