"""How the conv2d kernel tiles a layer: what it runs (:func:`check_geometry`,
:func:`check_config`) and the configuration :func:`conv2d_config` picks, rule by rule, each
rule with the measurements that chose it.

The layer is seen as its im2col loads read it (:meth:`~tvm_tma.conv.Conv2dGeometry.
patches_folded`): the GEMM M = N*P*Q, N = K, K = R*S*C with B the filter as N x K, whose
K blocks must each lie in one filter tap (one im2col load reads at one tap offset; a tap's
C may be padded to whole K blocks, :func:`tap_columns`).
:mod:`.conv2d` builds, references and runs the kernel; it re-exports what is here.
"""

from __future__ import annotations

import contextlib
from dataclasses import fields, replace

from ..conv import Conv2dGeometry
from ..planner.im2col import MAX_TRAVERSAL_STRIDE
from .gemm_config import (
    HALO_MAX_STAGES,
    K_BLOCKS,
    MAX_ORDERED_SPLIT,
    MAX_SHARED,
    PART_STEPS_FLOOR,
    GemmConfig,
)
from .halo import HaloTiling, halo_tiling
from .tiling import (
    C_STAGE_CHOICES,
    HALF_ROWS_SHORT_STEPS,
    SPLIT_FIELDS,
    TALL_MIN_FILL,
    TILING_CHOICES,
    c_stage_widths,
    estimate,
    few_columns_tiling,
    half_rows_fill,
    has_partial_wave,
    in_fullest_narrow_wave,
    in_one_exact_wave,
    in_ordered_parts,
    in_tail_parts,
    leaves_thin_round,
    narrow_half_rows,
    on_few_columns,
    stream_k_estimated_cheaper,
    stream_k_pays,
    with_alternating_c_stages,
)

#: Input/output element types the kernel takes (the GEMM's: 16-bit, one 128-, 64- or
#: 32-byte swizzle row per 64-, 32- or 16-column K block).
DTYPES = ("bfloat16", "float16")
#: Channels C must be a multiple of: the narrowest A copy (8 columns, one 16-byte piece of
#: a 16-column K block), which must lie inside one filter tap's C channels.
CHANNEL_BLOCK = 8
#: Columns of the pieces a K block is copied in where C is 8 mod 16 (``a_copy_k``).
PIECE = 8
#: Stages conv2d_config fills shared memory with, at most: narrow K blocks have small slots
#: (128 x 256 x 16: 12 KiB), and more stages past this only narrow the C stage.
MAX_STAGES = 12
#: K steps (filter taps x channels / block_k) at most of a layer that takes ping-pong
#: 128 x 128 tiles (:func:`conv2d_config`): the 1x1 layers of a ResNet bottleneck.
SHORT_K_STEPS = 16
#: K steps at most of a layer whose too few 128-row tiles give way to 64-row ones
#: (:func:`_half_rows`): a 1x1 layer of 2048 channels (32 steps) gains, a 3x3 layer of
#: 512 (72) loses.
HALF_ROWS_MAX_STEPS = 32
#: Share of the narrower tiles' count (or of a wave) that tiles covering a narrow K must
#: keep to be taken (:func:`_covering_unless_idle`): 25 tiles against 26 is a rounding of
#: the same rows; 98 against a wave of 132 (0.74) lost 4-7%.
COVERING_SHARE = 0.9
#: :func:`_stores_overlapped`: the K block of the layers it takes whatever their C stage
#: (at most 16 channels in, one K step; other one-step layers: where C is staged whole)
#: and their ring depth.
STORE_BOUND_BLOCK_K = 16
STORE_BOUND_STAGES = 4
#: :func:`_resident_filter`: the most K steps of a filter it keeps in the ring (3 measured:
#: 1x1 layers of 72 to 192 channels in), the tiles of K steps its ring then holds (the
#: tile being multiplied and the next: deeper rings of a resident filter ran slower) and
#: the rounds of tiles a CTA must take past which it does so (at two or fewer the
#: shallow ring was even or lost).
RESIDENT_MAX_STEPS = 3
RESIDENT_TILES_AHEAD = 2
RESIDENT_SHALLOW_ROUNDS = 2
#: Most K steps of an im2col layer's tiles in :func:`_narrow_wave` (3x3 over 128 channels:
#: 18 steps of 64; 25 to 36 steps were mixed, 12 of 18 layers slower).
IM2COL_NARROW_WAVE_MAX_STEPS = 18
#: :func:`_narrow_blocks_in_pairs`: the widest K block it takes (32 channels: 64-byte
#: pixels) and the rounds of tiles a CTA must take past which it pairs CTAs in clusters.
NARROW_PAIRS_BLOCK_K = 32
NARROW_PAIRS_ROUNDS = 2
#: Widest tile :func:`_narrow_and_tall` gives 192 rows (the widest measured: 160).
NARROW_TALL_WIDTH = 160
#: Fewest K steps a tile needs for the conv layer's stream-K rule
#: (:func:`stream_k_shares_thin_round`): the fewest it was measured to win with (N=32
#: 80x80x192 stride 2, 27 K steps of 128 x 192 tiles, 1.09x the plain waves). The GEMM's
#: bound (:data:`~.tiling.STREAM_K_MIN_STEPS`, 64) was fit on GEMMs whose tiles stream-K
#: nearly all cuts; a conv layer of several rounds shares out only its last ones.
THIN_ROUND_MIN_STEPS = 27
#: K steps from which a layer of one wave of 128 x 128 tiles takes 64 x 256 ones
#: (:func:`_wide_half_rows`): 72 steps gained 1.06-1.16x, 36 steps 0.99x.
WIDE_HALF_ROWS_MIN_STEPS = 64
#: Options that say how the work is split (the GEMM's :data:`~.tiling.SPLIT_FIELDS`, but
#: ``stream_k_waves``, which alone shapes only a stream-K the caller did not ask for):
#: given any, conv2d_config keeps them and adds no split, stream-K or short-K schedule.
_SPLIT_CHOICES = SPLIT_FIELDS - {"stream_k_waves"}
#: GemmConfig fields that follow from the geometry, not from options.
_FROM_GEOMETRY = ("m", "n", "k", "dtype", "b_layout")


def check_geometry(geometry: Conv2dGeometry, dtype: str = "bfloat16") -> None:
    """Refuse, naming the value, a layer the kernel does not handle yet (see the module
    docstring). The planner refuses at build time what only the im2col map decides (a
    padding outside the 8-bit corner range of a rank-4 im2col map, for one)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}: conv2d takes 'bfloat16' or 'float16' (16-bit "
                         f"inputs, fp32 accumulation)")
    g, folded = geometry, geometry.patches_folded()
    if folded.c % CHANNEL_BLOCK:
        raise ValueError(f"C={g.c}: the input channels must be a multiple of "
                         f"{CHANNEL_BLOCK}: each A copy (a K block of 64, 32 or 16 columns, "
                         f"or an 8-column piece of one) must lie inside one filter tap "
                         f"(r, s), since one im2col load reads at one tap offset, and its "
                         f"rows must be 16 bytes at least (a patch axis, filter = stride "
                         f"without padding over whole patches, folds its taps into the "
                         f"channels: Conv2dGeometry.patches_folded)")
    u, v = folded.stride
    if max(u, v) > MAX_TRAVERSAL_STRIDE:
        raise ValueError(f"stride {g.stride}: an im2col load walks pixels at a stride of at "
                         f"most {MAX_TRAVERSAL_STRIDE}; only a patch axis (filter = stride, no "
                         f"padding or dilation, a whole number of patches) folds to stride 1 "
                         f"(Conv2dGeometry.patches_folded)")
    if g.k % 8:
        raise ValueError(f"K={g.k}: the output channels must be a multiple of 8 (16-byte rows "
                         f"of the NPQK output and of the KRSC filter for TMA)")


#: What one K step costs a pointwise layer besides its own columns, in columns: the
#: price :func:`channel_block` weighs fewer steps against the zeros of a last block past
#: C with. H100, same run, x cuDNN, 64-wide blocks against blocks dividing C: N=32 1x1
#: 56x56x144 -> 24 3 steps against 9 of 16 1.53x (0.60 / 0.39), 28x28x240 -> 40 4 against
#: 15 of 16 1.47x, 14x14x480 -> 80 8 against 15 of 32 1.07x, 14x14x672 -> 112 11 against
#: 21 of 32 1.13x; 56x56x96 -> 24 2 against 3 of 32 0.88x and at N=8 0.91-0.92x. A step
#: worth more than 8 columns (144) and less than 32 (96): 16. An im2col layer's taps
#: padded to whole blocks (:func:`tap_columns`) take the same price: H200, same run, the
#: block it picks against 16-wide blocks, N=32 3x3 14x14x144 (32 in 160) 2.12x, N=8
#: 28x28x112 (64 in 128) 2.10x, N=16 28x28x80 (32 in 96; 64 in 128 measured 0.94x of it)
#: 1.19x.
K_STEP_COLUMNS = 16


def pointwise_k_blocks(geometry: Conv2dGeometry) -> bool:
    """Whether a K block may run past C: a pointwise layer (1x1, stride 1, no padding,
    :attr:`~tvm_tma.conv.Conv2dGeometry.is_pointwise`), whose A view is X itself as an
    (N*H*W, C) matrix that the planner loads in tiled mode. K is C, and the columns of a
    K block past it read zeros (the copy's edge, ``oob="zero"``) in A and B alike: no K
    block has another tap's channels to avoid. (An im2col load, a strided or padded 1x1
    layer's, keeps each K block inside C: the planner's ``im2col`` rule.)"""
    return geometry.is_pointwise


def _columns_moved(channels: int, width: int) -> int:
    """What K blocks of ``width`` columns cost ``channels`` channels, in columns: their
    columns and :data:`K_STEP_COLUMNS` a block."""
    return -(-channels // width) * (K_STEP_COLUMNS + width)


def channel_block(geometry: Conv2dGeometry) -> int:
    """The K block of a layer (seen folded, :meth:`~tvm_tma.conv.Conv2dGeometry.
    patches_folded`): of 64, 32 and 16 columns, the one of fewest columns moved over a
    tap's C channels, a K step counting :data:`K_STEP_COLUMNS` columns besides its own
    (ties to fewer columns, then the wider). A block that does not divide C pads each
    tap's channels to whole blocks (:func:`tap_columns`: one load reads a tap's 24
    channels as 32 columns, the last 8 zeros). Where C is 8: 16 in two 8-column pieces
    (:func:`a_copy_k`), each a tap's channels. A pointwise layer's K blocks need not
    divide C either (:func:`pointwise_k_blocks`: the last one is zero-filled past C):
    the same price, ties to the wider."""
    c = geometry.c
    if pointwise_k_blocks(geometry):
        return min(K_BLOCKS, key=lambda w: (_columns_moved(c, w), -w))
    if c < K_BLOCKS[-1]:
        return K_BLOCKS[-1]
    return min(K_BLOCKS, key=lambda w: (_columns_moved(c, w), -(-c // w) * w, -w))


def a_copy_k(geometry: Conv2dGeometry) -> int:
    """``GemmConfig.a_copy_k`` of a layer: :data:`PIECE` where C is 8 (a 16-column K
    block is two taps' 8-channel pieces), else 0 (one copy per K block; every K block of
    a pointwise layer, every block of a tap, padded or not)."""
    return 0 if pointwise_k_blocks(geometry) or geometry.c >= K_BLOCKS[-1] else PIECE


def tap_columns(geometry: Conv2dGeometry, block_k: int, copy_k: int = 0) -> int:
    """``GemmConfig.tap_columns`` of an im2col layer (seen folded) in K blocks of
    ``block_k`` (and copies of ``copy_k``): 0 where the blocks divide C (or are 8-column
    pieces), else C padded to whole blocks. The A loads then read the view as (pixels,
    taps, channels) and B the filter as (K, taps, channels), one tap a load, zeros past
    its channels; a tap is one load where it was three (C = 24 in 32 columns) or five (C
    = 40 in 64). H200, same run, TFLOP/s of a layer against the padded-to width's (time
    x the padded layer's): N=16 3x3 112x112x24 -> 64 103 against 32 channels 308 (2.2x
    faster padded), 56x56x24 -> 24 2.4x, 112x112x40 -> 40 against 64 channels 2.8x,
    against 48 (three 16-wide loads) 1.6x; 28x28x80 -> 80 against 96 1.25x, against 128
    1.18x (the cheaper model choice, 96, measured faster)."""
    if pointwise_k_blocks(geometry) or copy_k or geometry.c % block_k == 0:
        return 0
    return -(-geometry.c // block_k) * block_k


def gemm_k(geometry: Conv2dGeometry, columns: int) -> int:
    """K of the GEMM the kernel runs for a layer (seen folded) with ``tap_columns``
    ``columns``: R*S*C, or the taps times ``columns``."""
    return geometry.gemm_k // geometry.c * columns if columns else geometry.gemm_k


def _check_block_k(geometry: Conv2dGeometry, cfg: GemmConfig) -> None:
    if cfg.halo is not None:
        return  # the halo load reads whole pixels; K blocks address its planes
    if cfg.tap_columns:
        c, bk = geometry.c, cfg.block_k
        if pointwise_k_blocks(geometry) or not c <= cfg.tap_columns < c + bk:
            raise ValueError(f"tap_columns={cfg.tap_columns}: each filter tap's C={c} "
                             f"channels padded to whole K blocks of {bk} columns "
                             f"({-(-c // bk) * bk}), and not for a pointwise layer (its K "
                             f"blocks run past C as they are: tap_columns=0)")
        return
    copied = cfg.a_copy_k or cfg.block_k
    if cfg.block_k in K_BLOCKS and geometry.c % copied and not pointwise_k_blocks(geometry):
        raise ValueError(f"block_k={cfg.block_k}, a_copy_k={cfg.a_copy_k}: each A copy "
                         f"({copied} columns) must lie inside one filter tap's "
                         f"C={geometry.c} channels (one im2col load reads at one tap "
                         f"offset): a K block of 64, 32 or 16 dividing C, 16 in "
                         f"8-column pieces, or tap_columns padding C to whole K blocks "
                         f"(block_k={channel_block(geometry)}, a_copy_k="
                         f"{a_copy_k(geometry)}, tap_columns="
                         f"{tap_columns(geometry, channel_block(geometry), a_copy_k(geometry))}"
                         f" here)")


def _epilogue_and_stages(cfg: GemmConfig, options: dict) -> GemmConfig:
    """``cfg`` with the C stage width and the ring depth: as many stages as shared memory
    holds (at most :data:`MAX_STAGES`), with the widest C stage (a whole number of 64-column
    atoms dividing block_n) that costs no stage; a block_n that is no multiple of 64 (160)
    is staged 32 columns at a time (64B swizzle, the one width :meth:`GemmConfig.check`
    allows it), one no multiple of 32 (24) whole. Either one given in ``options`` is kept
    (given stages, the widest C stage that fits beside them)."""
    widths = c_stage_widths(cfg.block_n)
    if "epilogue_n" in options:
        widths = [cfg.epilogue_cols]
    candidates = []
    for width in widths:
        shaped = replace(cfg, epilogue_n=0 if width == cfg.block_n else width)
        if "stages" not in options:
            ring = MAX_SHARED - replace(shaped, stages=0).shared_bytes
            slot = shaped.a_step_bytes + shaped.b_tile_bytes
            shaped = replace(shaped, stages=min(MAX_STAGES, max(2, ring // slot)))
        candidates.append(shaped)
    # Fits first, then the most stages, then the widest C stage (max keeps the first).
    return max(candidates,
               key=lambda c: (c.shared_bytes <= MAX_SHARED, c.stages))


def conv2d_config(geometry: Conv2dGeometry, dtype: str = "bfloat16",
                  **options) -> GemmConfig:
    """The GEMM configuration of a conv2d layer: M = N*P*Q, N = K, K = R*S*C, B as N x K.

    ``options`` are :class:`GemmConfig` fields (``block_n``, ``block_k``, ``stages``,
    ``epilogue_n``, ``schedule``, ``cluster``, ``ctas``, ...); each one given is kept, the
    rest chosen:

    * **block_k**: of 64, 32 and 16, the one of fewest columns moved over a tap's C
      (:func:`channel_block`: C = 96: 32, three K blocks a tap; 64: 64), and where it does
      not divide C, **tap_columns**: each tap's C padded to whole blocks
      (:func:`tap_columns`: 24 in one 32-wide block, 40 and 48 in one 64-wide, 80 in three
      32-wide; each K block one im2col load inside one tap, zeros past its channels; a
      given block_k pads alike unless ``tap_columns=0`` is given). Where C is 8: 16, with
      **a_copy_k** 8 (two taps' 8-column copies per K block, :func:`a_copy_k`). A pointwise
      layer (one tap, X loaded as a matrix) takes the block of fewest columns moved
      whether it divides C or not (:data:`K_STEP_COLUMNS`; C = 144: 64, three K blocks,
      the last zero-filled past C).
    * **block_n** (output channels per tile), **cluster**, **split_k**, **stream_k**, as
      the H100 sweeps measured (benchmarks/RESULTS.md section 8): of the widths dividing
      K exactly (multiples of 32 from 256 down to 128) whose tiles give at least half
      the CTAs one, the cheapest by the GEMM's wave model (kernels/tiling), the widest
      in ordered K parts a candidate too where its tiles are fewer, and stream-K (last of
      the tiling rules) where at least 27 K steps a tile end in a round at most half
      full where the wave model prices its fix-ups below the round saved
      (:func:`stream_k_shares_thin_round`: FPN N=2 200x272x256 1.08x the plain waves,
      held-out layers 0.98-1.09x, runs of 1-2 K steps 0.90-0.97x) or the GEMM's rule
      takes it: 14x14x256 128 (98 tiles); UNet 64x64x320 and 32x32x640 160;
      8x16x16x1280 160 (128 tiles in one wave, 1.4x the 80 of 128 x 256); 4x16x16x1280
      40 tiles of 128 x 256 in 3 ordered parts (1.4x the 80 of 128 x 128). No cluster
      (one cost 14x14x256 24% and 7x7x512 20%), but 2x1 clusters for a pointwise layer
      of one K step whose C is 8 mod 16, more tiles than CTAs (:func:`_padded_k_in_pairs`:
      N=32 56x56x24 -> 144 1.29x, 112x112x24 -> 64 1.49x). Where no such width divides a K of at
      most 256 channels, one tile exactly K wide spans it (:func:`covering_width`: 24,
      80, 112, 144), so A is read once, unless that leaves idle SMs the 64-wide tiles
      would fill (:func:`_covering_unless_idle`: N=32 1x1 14x14x480 -> 80 0.85x cuDNN
      against 0.63x, 3x3 56x56x64 -> 96 1.08 / 0.67), where a K of 193 to 256 takes two
      128-wide column blocks (N=16 28x28x40 -> 240 1.14x the 192-wide ones); wider K,
      two 192-wide tiles in 2x1 clusters; else 64-wide tiles. Where
      only 64-wide tiles give half the CTAs one, the widest exact tiles in one round where
      the wave model prices them cheaper (N=1 UNet 64x64x320: 64 tiles of 128 x 160,
      1.02x cuDNN, against 160 of 128 x 64, 0.75x).
    * **schedule**: ping-pong 128 x 128 tiles for a layer of at most
      :data:`SHORT_K_STEPS` K steps (ResNet's 1x1 layers: 1.04-1.86x the cooperative
      tiles), but cooperative ones with the tiles past the last full wave in ordered K
      parts where the GEMM's wave model offers that (:func:`_short_k_tiles`: N=32
      14x14x1024 -> 768 1.13-1.15x the ping-pong tiles); ping-pong too where a layer
      of more than 64 output channels falls back to 64-wide tiles with at most one per
      CTA (in 1x2 clusters sharing A where the column blocks pair up).
    * **split_k** where even the widest exact tile leaves at most half the SMs a tile
      and K has the steps: that tile is kept and K cut into ordered parts
      (``split_k_ordered``: part 0 stores, the others add after it; as many parts as the
      CTAs hold with one unit each, each at least 4 K steps, part 0 the short one where
      they do not divide the K steps: :attr:`GemmConfig.ordered_parts`): 7x7x512 in 26
      tiles of 128 x 256 and 5 parts ran at 1.17-1.24x cuDNN, in 4 parts 0.97-0.99x,
      against 0.84x for the 64-wide tiles in clusters (H100, same runs); on tiles half
      as wide where those parts are too few or capped by the K steps
      (:func:`_enough_units`).
    * **epilogue_n / stages**: as many ring stages as shared memory holds (227 KiB), with
      the widest C stage that costs no stage (128 x 256: C in 128-column halves, 4 stages,
      the GEMM's measured default; 128 x 128: 6; 128 x 64: 8; 128 x 192: 64-column C, 5;
      128 x 160: 32-column 64B-swizzled C, 6), at most :data:`MAX_STAGES` (the small
      slots of 32- and 16-wide K blocks); a pointwise layer of one K step on
      cooperative tiles, of at most 16 channels in or with a C stage the whole tile: 4
      stages and two alternating C stages, a whole-tile one alternating from tile to tile
      (:func:`_stores_overlapped`: N=32 112x112x16 -> 96 0.96-0.98x cuDNN against
      0.79-0.81x, N=4 1.23 against 0.96; 112x112x32 -> 16 1.23x one stage); and
      wherever the C stage is narrower than a cooperative tile, two of them alternating,
      unless that leaves fewer than
      :data:`~.tiling.ALTERNATING_MIN_STAGES` ring stages (:func:`_alternating_c_stages`: N=32
      1x1 28x28x32 -> 192 1.15x cuDNN against 0.94x, 14x14x96 -> 576 1.09 / 0.89,
      SD UNet N=8 3x3 32x32x320 -> 640 1.54 / 1.45).
    * **block_m**: 128, but 64 (cooperative, one consumer warpgroup a tile) for a layer of
      at most :data:`HALF_ROWS_MAX_STEPS` K steps whose 128-row tiles fill at most half
      the CTAs (in ordered parts past 16; :func:`_half_rows`): the 1x1
      layers of small batches, N=1 7x7x512 -> 2048 1.29-1.68x cuDNN against 0.99-1.24x;
      64 x 64 where even 64 x 128 tiles fill at most half the CTAs
      (:func:`~.tiling.narrow_half_rows`: N=1 14x14x1024 -> 512 1.09x cuDNN against
      0.78x, N=8 14x14x1024 -> 256 1.52 / 1.24); and 192 x 128 (cooperative, three
      consumer warpgroups) where 128-row tiles leave a partial wave that 192-row ones
      fill whole (:func:`_tall_tiles`: N=32 28x28x128 3x3 1.20-1.23x the 128 x 128
      tiles, 1x1 14x14x1024 -> 512 1.24-1.26x), and for narrow tiles padded past K
      wherever they fill a wave (:func:`_narrow_and_tall`: N=32 3x3 28x28x96 -> 144
      1.40x cuDNN against 1.03, 1x1 56x56x144 -> 24 0.71 / 0.61); and 192-row tiles in
      2x1 clusters for an im2col layer of 8-channel pieces (C 8 mod 16: 16-byte pixels,
      L2-request bound; :func:`_tall_pairs_of_pieces`: the ResNet stem over 8 channels at
      N=32 1.43x, 0.70 -> 1.00x cuDNN); for one of 16- or 32-channel K blocks, 192 rows
      on 64-wide tiles where they fill a wave and 2x1 clusters past two rounds
      (:func:`_narrow_blocks_in_pairs`: N=64 56x56x16 -> 64 3x3 1.29x); 64 x 256 tiles
      for a layer of at least :data:`WIDE_HALF_ROWS_MIN_STEPS` K steps on one wave of
      128 x 128 tiles that one wave of them still holds (:func:`_wide_half_rows`: 3x3
      over 512 channels, N=16 14x14 -> 512 1.14x; 13 layers 1.03-1.23x).
    * **one exact wave** (a pointwise layer): where the tiles above leave SMs idle or cut
      K into parts, cooperative tiles of 128 (else 64) rows whose width divides K exactly
      and that make one wave 95-100% full, whole K each (:func:`_exact_wave`, the GEMM's
      :func:`~.tiling.in_one_exact_wave`): SD UNet's N=1 32x32x1280 -> 640 on 128 tiles
      of 64 x 80 (0.77x cuDNN against 0.59x), N=2 on 128 x 80 (0.96-1.12x against 0.84x).
    * **the fullest narrow wave** (last; an im2col layer only up to
      :data:`IM2COL_NARROW_WAVE_MAX_STEPS` K steps): cooperative 64-row tiles of whole
      K, of the width dividing K whose tiles make the fullest wave of half to all the
      CTAs, where they are more than the tiles above (:func:`_narrow_wave`, the GEMM's
      :func:`~.tiling.in_fullest_narrow_wave`: N=32 7x7x1152 -> 320 on 125 tiles of
      64 x 64, 1.25x cuDNN against 0.68x; 89 held-out 1x1 layers 1.17x geomean, 14
      held-out 3x3 layers 1.20x).
    * **b_resident**: where the filter is one column block of at most 3 K steps and a
      CTA takes more than one tile, each ring slot loads its K step of it on its first
      use only (:func:`_resident_filter`: N=32 1x1 112x112x32 -> 16 1.17x, 112x112x40 ->
      192 1.37x; in the 2x1 clusters above 1.04-1.10x more); past two rounds a CTA on a
      ring of two tiles' K steps (1.068x geomean on 35 one-step layers), 128-row tiles
      for 2-3 K steps where the busiest CTA takes no more rows (N=32 56x56x144 -> 24
      1.23x), and a second whole-tile C stage beside that ring
      (:func:`_second_whole_c_stage`: N=32 56x56x56 -> 112 1.13x).
    * **swap_ab** (last): a layer of at most 256 output channels as ``Y^T = F X^T`` on
      cooperative 64 x width tiles, K in 64-row blocks and the pixels in as many column
      blocks as fill one or two rounds of the CTAs, where they keep at least a tenth more
      of the rounds busy (:func:`_few_columns`, the GEMM's
      :func:`~.tiling.on_few_columns`: Inception's N=32 17x17x768 -> 192 1x1 on 129 tiles
      of 64 x 216, 0.80x cuDNN to 1.19x; 43 pointwise layers 1.07-1.62x, 16 3x3 ones
      1.08-1.45x); not past clusters, padded taps, 8-channel pieces or the caller's
      choices. ``swap_ab=True`` alone asks for these tiles wherever the kernel runs them
      (a layer over padded taps is refused by name).
    * **halo** (last): a stride-1, undilated layer whose taps the im2col loads pad (C
      at most :data:`HALO_MAX_CHANNELS`), or of 16 or 32 channels where the halo tiles
      fill 3/4 of their rounds, of at most 256 output channels, on halo tiles
      (:func:`_halo_tiles`, :mod:`.halo`: each pixel loaded once, each k16 step a
      descriptor into the planes, K folded over the taps): at least two whole output rows
      a tile, else one-row tiles with the filter resident where it fits (N=16 28x28x80
      2.46x, N=8 112x112x40 2.42x, 23 held-out layers 1.33x geomean; K folded 1.30x more,
      16/32 channels 1.51x the im2col loads). ``halo=True`` asks for halo tiles at stride 1
      whatever the rows (refused by name elsewhere; ``"folded"`` / ``"padded"`` name the
      K layout), ``halo=False`` keeps the im2col loads.
    * **ctas**, **group_m**: the GEMM's defaults (132 CTAs: pass ``ctas=`` the GPU's SM
      count).

    The wave model was fit mostly on GEMMs: ``benchmarks/conv2d.py --sweep``
    times the alternatives (widths, stages, clusters, ping-pong).
    """
    check_geometry(geometry, dtype)
    for name in _FROM_GEOMETRY:
        if name in options:
            raise ValueError(f"{name}={options[name]!r}: set by the geometry (M = N*P*Q, "
                             f"N = K, K = R*S*C, B as N x K) and the dtype argument")
    known = {f.name for f in fields(GemmConfig)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not a GemmConfig field")
    # The rules below see the layer as its im2col loads read it: patch axes folded into
    # the channels (the same GEMM; a ViT's 16 x 16 stride-16 patches of 8 channels are one
    # 16-row tap of 128 channels a folded pixel, so 64-wide K blocks).
    folded = geometry.patches_folded() != geometry
    geometry = geometry.patches_folded()
    # halo=True asks for halo tiles (refused by name where the kernel runs none), False
    # keeps the im2col loads; absent, the rule of :func:`_halo_tiles` decides (not over
    # a folded patch axis: the halo load reads the activation as it is).
    wants_halo = options.pop("halo", None)
    if wants_halo not in (None, False, *HALO_K_LAYOUTS):
        raise ValueError(f"halo={wants_halo!r}: True, False, 'folded' or 'padded' (halo "
                         f"tiles with K folded over the taps or each tap padded)")
    if wants_halo and folded:
        raise ValueError(f"halo={wants_halo!r} with {geometry.describe()} folded from "
                         f"patches: halo tiles read the activation unfolded (stride 1 only)")
    if wants_halo:
        forced = halo_tiles(geometry, conv2d_config(geometry, dtype, **options),
                            whole_rows=False,
                            block_ms=(options["block_m"],) if "block_m" in options
                            else HALO_BLOCK_MS, folded=HALO_K_LAYOUTS[wants_halo])
        check_config(geometry, forced)
        return forced
    if options.get("swap_ab") and not TILING_CHOICES & set(options):
        # Y^T = F X^T asked for and nothing else: the few-columns swapped tiling of the
        # layer, where the kernel runs one (else the rules below on a swapped base).
        forced = few_columns_tiling(conv2d_config(geometry, dtype,
                                                  **{**options, "swap_ab": False}))
        if forced is not None:
            check_config(geometry, forced)
            return forced
    # K blocks the caller chose keep a halo tiling's taps padded to them (_halo_tiles).
    k_blocks_chosen = bool(K_BLOCK_CHOICES & set(options))
    options.setdefault("block_k", channel_block(geometry))
    options.setdefault("a_copy_k", a_copy_k(geometry))
    options.setdefault("tap_columns", tap_columns(geometry, options["block_k"],
                                                  options["a_copy_k"]))
    base = GemmConfig(geometry.gemm_m, geometry.k, gemm_k(geometry, options["tap_columns"]),
                      dtype=dtype, b_layout="nk", **options)
    _check_block_k(geometry, base)
    if _short_k(base, options):
        # A layer of few K steps is its epilogues as much as its MMAs: two warpgroups on
        # 128 x 128 tiles of their own overlap one's epilogue with the other's MMAs. H100,
        # same runs, ping-pong against the cooperative default (x cuDNN): 1x1 layers at
        # N=32 56x56x256->128 (4 K steps) 1.17 / 1.06, 28x28x128->512 (2) 1.25 / 1.12,
        # 14x14x256->1024 (4) 1.11 / 1.07, 28x28x512->128 (8) 0.96-0.98 / 0.91, 7x7x512
        # ->2048 (8) 0.97 / 0.87, 14x14x1024->256 (16) 1.04 / 1.02; N=8 28x28x512->128
        # 1.17 / 0.63 (in 2 ordered parts of 4 K steps); 56x56x64->256 (1) 1.17 / 1.16.
        chosen = _short_k_tiles(base)
    else:
        chosen = _covering_unless_idle(base, options)
    chosen = _wide_half_rows(_tall_tiles(_half_rows(chosen, options), options), options)
    chosen = _narrow_wave(geometry, _exact_wave(geometry, chosen, options), options)
    chosen = _narrow_blocks_in_pairs(geometry, _tall_pairs_of_pieces(geometry, chosen,
                                                                     options), options)
    chosen = _stream_k_last_round(chosen, options)
    best = _epilogue_and_stages(chosen, options)
    best = _stores_overlapped(geometry, best, options)
    best = _padded_k_in_pairs(geometry, best, options)
    best = _alternating_c_stages(best, options)
    best = _resident_filter(best, options)
    best = _few_columns(best, options)
    if wants_halo is None and not folded:
        best = _halo_tiles(geometry, best, options, folded=not k_blocks_chosen)
    check_config(geometry, best)
    return best


#: Widest tap (C) the halo rule takes: the layers it was measured on (24 to 88 channels;
#: 112 and 128 ran slower on halo tiles, 6z9).
HALO_MAX_CHANNELS = 96
#: Widest C the halo rule takes where the im2col loads do not pad the taps (16 and 32
#: channels; 8 takes 8-column pieces), and the least fill of the halo tiles' rounds of
#: CTAs (tiles over rounds times CTAs) it takes them at there. H100, same runs, halo
#: tiles (K folded) against the im2col loads (benchmarks/RESULTS.md 6z18): 22 such 3x3
#: layers; the 19 filling their rounds to 0.77 or more all faster, 1.04-2.02x (1.51x geomean)
#: (N=1 320x320x16 -> 32 15.72 -> 7.79 us, N=1 512x512x16 1.96x, N=16 56x56x16 -> 32
#: 1.91x, N=32 112x112x32 1.40x, N=16 28x28x32 -> 64 1.04x); slower N=2 64x64x32 -> 64
#: (0.78x: 64 tiles on 132 CTAs, fill 0.48) and N=1 128x128x32 -> 96 (0.77x: 160 tiles,
#: fill 0.61), even N=4 80x80x32 -> 128 (1.00x, fill 0.61). The fill was set after the
#: second set of 12 had run (on the first rule, one round's fill), so it is fit on all 22;
#: held out on the final rule, 16 layers it takes (YOLO-, UNet- and SR-like, N = 1-32):
#: all faster, 1.13-2.50x, 1.61x geomean (N=1 270x480x16 2.33x, N=8 160x160x16 2.16x).
#: C = 64 keeps the im2col loads (N=8 80x80x64 0.80x, N=16 56x56x64 0.93x; 6z9 too).
HALO_UNPADDED_MAX_CHANNELS = 32
HALO_UNPADDED_FILL = 0.75
#: :func:`_resident_else_streamed`: the least C of halo tiles not of whole rows with the
#: filter streamed (where it stays resident at no height: the filter then moves fewer
#: bytes a tile than the halo; measured on 72 to 88 channels), and the least ring stages
#: of their height.
HALO_STREAMED_MIN_CHANNELS = 72
HALO_STREAMED_MIN_STAGES = 4
#: Tile heights halo tiles are tried on (two and three cooperative consumer warpgroups).
HALO_BLOCK_MS = (128, 192)
#: Whether halo tiles fold K over the taps (:attr:`.halo.HaloTiling.folded`: R * S * C
#: columns, ceil(R * S * C / 16) k16 steps a tile) rather than pad each tap's channels to
#: whole K blocks (C = 24 in 32 columns: 18 steps for a 3x3 filter where folded K takes
#: 14; 40 in 64: 36 against 23). ``halo="folded"`` / ``"padded"`` chooses. H100, same
#: runs, the same tiles (benchmarks/RESULTS.md 6z18): of 25 layers 24 faster folded,
#: 1.04-1.63x, one even (N=2 48x48x56 -> 112 0.99x), 1.30x geomean (N=1 224x224x24 ->
#: 48 12.87 -> 8.10 us, N=4 150x150x24 -> 24 19.25 -> 12.79, N=2 128x128x40 -> 40 11.22
#: -> 8.38), all 25 above cuDNN after (1.09-2.29x; 9 of them were under it padded).
HALO_FOLDS_K = True
#: Options that choose the im2col loads' K blocks: given, halo tiles keep each tap padded
#: to them.
K_BLOCK_CHOICES = frozenset({"block_k", "tap_columns", "a_copy_k"})
#: The values of the ``halo`` option: halo tiles with K folded or padded, or either.
HALO_K_LAYOUTS = {"folded": True, "padded": False, True: None}


def _halo_rows_a_cta(cfg: GemmConfig) -> int:
    """Halo pixels a CTA loads into its plane slots: rounds of tiles times a tile's."""
    return -(-cfg.num_tiles // cfg.ctas) * cfg.halo.plane_pixels


def halo_tiles(geometry: Conv2dGeometry, base: GemmConfig, whole_rows: bool = True,
               block_ms: tuple[int, ...] = HALO_BLOCK_MS,
               folded: bool | None = None) -> GemmConfig | None:
    """``base`` (the layer's im2col tiling) on halo tiles (:mod:`.halo`): cooperative
    tiles of 128 or 192 rows, whichever loads the fewest halo rows per CTA (rounds times
    a tile's halo rows x columns; the shorter on a tie), one column block of all K
    output channels, the ring as deep as fits. K is ``folded`` over the taps (R * S * C
    columns in 64-wide blocks, :attr:`.halo.HaloTiling.folded`) or each tap's channels
    padded as ``base`` pads them (whole K blocks); None: :data:`HALO_FOLDS_K`.
    ``whole_rows``: only tiles of at least two whole output rows (None where there are
    none); else any. ``block_ms``: the tile heights tried (the caller's ``block_m``
    where ``halo=True`` comes with one). Raises ValueError, naming the value, where the
    kernel runs no halo tiles (a stride, more than 256 output channels, C no multiple of
    8)."""
    if geometry.stride != (1, 1):
        raise ValueError(f"halo tiles with stride {geometry.stride}: stride 1 only (a "
                         f"stride would read every other halo pixel)")
    if geometry.k > 256:
        raise ValueError(f"halo tiles with K={geometry.k}: at most 256 output channels "
                         f"(one column block)")
    if folded is None:
        folded = HALO_FOLDS_K
    if folded:
        # Every k16 step reads the next two 8-channel groups of (tap, channel): K blocks
        # need not meet the taps, and the widest takes the fewest ring steps (a step
        # wholly past K runs no MMA).
        columns, block_k = 0, max(K_BLOCKS)
    else:
        columns = base.tap_columns or geometry.c
        columns += columns % 16  # whole k16 steps: two 8-channel planes
        block_k = max(b for b in K_BLOCKS if columns % b == 0)
    width = -(-geometry.k // 8) * 8

    def on(tiling: HaloTiling) -> GemmConfig | None:
        """The GEMM of ``tiling``'s tiles, its ring as deep as fits; None where none fits."""
        cfg = GemmConfig(tiling.tiles * tiling.block_m, geometry.k,
                         gemm_k(geometry, columns), dtype=base.dtype, b_layout="nk",
                         block_m=tiling.block_m, block_n=width, block_k=block_k,
                         ctas=base.ctas, tap_columns=columns, halo=tiling,
                         l2_promotion=base.l2_promotion)
        cfg = _epilogue_and_stages(cfg, {})
        if cfg.shared_bytes > MAX_SHARED or cfg.accumulators > cfg.max_accumulators:
            return None
        return cfg

    tilings = [halo_tiling(geometry, block_m, columns) for block_m in block_ms]
    if whole_rows:
        tilings = [t for t in tilings if t.rows >= 2 and t.cols == geometry.q]
    found = [cfg for cfg in map(on, tilings) if cfg is not None]
    if not found and not whole_rows:
        # No height fits a whole row's slots (the halo rows of a wide image of many
        # channels): segments of several rows load fewer pixels into smaller slots.
        for block_m in block_ms:
            with contextlib.suppress(ValueError):
                found.append(on(halo_tiling(geometry, block_m, columns, segments=True)))
        found = [cfg for cfg in found if cfg is not None]
    if not found:
        if whole_rows:
            return None
        raise ValueError(f"halo tiles of {geometry.describe()}: no tile height of "
                         f"{block_ms} fits shared memory and the registers")
    return min(found, key=lambda cfg: (_halo_rows_a_cta(cfg), cfg.block_m))


def with_halo_k(geometry: Conv2dGeometry, cfg: GemmConfig, folded: bool) -> GemmConfig | None:
    """``cfg``'s halo tiles (the same tile height, so the same rows and columns) with K
    ``folded`` over the taps or each tap's channels padded, the filter resident where
    ``cfg``'s is: the same tiling in the other K layout (``benchmarks/conv2d.py``'s
    ``--halo-k``). None where it does not fit shared memory."""
    base = conv2d_config(geometry, cfg.dtype, halo=False, ctas=cfg.ctas)
    other = halo_tiles(geometry, base, whole_rows=False, block_ms=(cfg.block_m,),
                       folded=folded)
    return resident_halo_filter(other) if cfg.b_resident else other


def resident_halo_filter(cfg: GemmConfig) -> GemmConfig | None:
    """Halo tiles ``cfg`` with the filter resident (``b_resident``): the ring one slot a
    K step, as many whole sets of them as fit (at most
    :data:`~.gemm_config.HALO_MAX_STAGES`);
    None where one set does not fit. A halo tile's only other load is one box, so the
    filter's per-step tiles were most of its TMA rows (N=16 112x112x24 -> 64, one-row
    tiles: 61.2 us streamed, 31.8 resident)."""
    if cfg.n_blocks != 1:
        return None
    steps = cfg.k_steps
    ring = MAX_SHARED - replace(cfg, stages=0).shared_bytes
    sets = min(HALO_MAX_STAGES, ring // cfg.b_tile_bytes) // steps
    if sets < 1:
        return None
    return replace(cfg, stages=sets * steps, b_resident=True)


def _resident_else_streamed(geometry: Conv2dGeometry, base: GemmConfig, tiles: GemmConfig,
                            folded: bool) -> GemmConfig | None:
    """Halo tiles not of whole rows (one-row tiles or segments, ``tiles`` the height of
    the fewest halo pixels a CTA): with the filter resident at that height
    (:func:`resident_halo_filter`), else at another where it fits there; else, for C of
    at least :data:`HALO_STREAMED_MIN_CHANNELS`, segments of several rows (as measured;
    not one-row tiles) with the filter streamed, on the height of the fewest halo pixels
    a CTA among those whose ring holds :data:`HALO_STREAMED_MIN_STAGES` K steps. None: no
    halo tiles (the im2col loads).

    H100, same run (benchmarks/RESULTS.md 6z19), C of 72 to 88 on images whose whole-row
    slots do not fit (segments of 8 x 14 on 128 rows, 12 x 14 on 192): the im2col loads
    ran 0.54-0.99x cuDNN there; resident segments 1.43-2.61x (N=16 96x96x88 -> 24 3.05x
    the im2col loads, N=4 112x112x72 -> 64 2.87x), resident on 128 rows where 192 had no
    room (N=8 120x120x72 -> 72: 32.3 us against 36.5 streamed on 192 and 108.1 on
    im2col), streamed 1.19-2.65x (N=2 96x96x88 -> 64 2.69x the im2col loads, N=2
    100x100x72 -> 144 2.48x, N=8 96x96x88 -> 64 1.84x); 192 rows of two ring stages lost
    to 128 rows each time (N=4 96x96x88 -> 88: 21.5 us against 20.0)."""
    resident = resident_halo_filter(tiles)
    if resident is not None:
        return resident
    heights = {}
    for block_m in HALO_BLOCK_MS:
        with contextlib.suppress(ValueError):
            heights[block_m] = halo_tiles(geometry, base, whole_rows=False,
                                          block_ms=(block_m,), folded=folded)
    resident = [r for r in map(resident_halo_filter, heights.values()) if r is not None]
    if resident:
        return min(resident, key=_halo_rows_a_cta)
    if geometry.c < HALO_STREAMED_MIN_CHANNELS:
        return None
    streamed = [t for t in heights.values()
                if t.stages >= HALO_STREAMED_MIN_STAGES and t.halo.rows > 1]
    return min(streamed, key=lambda t: (_halo_rows_a_cta(t), t.block_m), default=None)


def _halo_tiles(geometry: Conv2dGeometry, cfg: GemmConfig, options: dict,
                folded: bool = True) -> GemmConfig:
    """Halo tiles (:func:`halo_tiles`) for a stride-1, undilated layer whose taps the im2col
    loads pad (C of at most :data:`HALO_MAX_CHANNELS` no K block divides: 24, 40, 48, 56, 72,
    80, 88), of at most 256 output channels: there the im2col loads are L2-request bound (6z6,
    6z8) and a halo reads each pixel once. With K folded also a filter of several taps over C of
    16 or 32 (:data:`HALO_UNPADDED_MAX_CHANNELS`), where the halo tiles fill
    :data:`HALO_UNPADDED_FILL` of their rounds. Tiles of at least two whole output rows where
    they fit; else (a wide image) one-row tiles, or segments of several rows where a row is
    wider than a tile or no height holds a whole row's slots, with the filter resident
    (:func:`resident_halo_filter`) where it fits, or streamed on segments of 72 channels or more
    (:func:`_resident_else_streamed`). Not where the caller chose the tiling. H200, same runs,
    halo tiles against the im2col loads (6z9): N=16 28x28x80 2.46x, N=32 35x35x48 -> 64 5x5
    1.89x, N=16 56x56x24 -> 24 1.42x; one-row tiles, resident: N=8 112x112x40 2.42x, N=16
    112x112x24 -> 64 1.59x. K is ``folded`` over the taps (:data:`HALO_FOLDS_K`) unless the
    caller chose the K blocks (:data:`K_BLOCK_CHOICES`): H100, same runs, folded against padded
    taps on the same tiles (benchmarks/RESULTS.md 6z18), 24 of 25 layers 1.04-1.63x, one 0.99x."""
    if (TILING_CHOICES | C_STAGE_CHOICES | {"swap_ab", "b_resident", "cluster",
                                            "cluster_n"}) & set(options):
        return cfg
    g = geometry
    folded = folded and HALO_FOLDS_K
    padded = cfg.tap_columns > g.c
    # Channels the im2col loads do not pad (16, 32), K folded: each pixel's 32 or 64
    # bytes read once, not once a tap (HALO_UNPADDED_MAX_CHANNELS).
    unpadded = (not padded and folded and g.c <= HALO_UNPADDED_MAX_CHANNELS
                and g.r * g.s > 1)
    if (g.stride != (1, 1) or g.dilation != (1, 1) or g.k > 256 or g.c > HALO_MAX_CHANNELS
            or cfg.a_copy_k or not (padded or unpadded)):
        return cfg
    chosen = halo_tiles(geometry, cfg, folded=folded)
    if chosen is None:
        try:
            one_row = halo_tiles(geometry, cfg, whole_rows=False, folded=folded)
        except ValueError:  # no tile height fits (a wide image of 5x5 taps, say)
            return cfg
        chosen = _resident_else_streamed(geometry, cfg, one_row, folded)
        if chosen is None:
            return cfg
    rounds = -(-chosen.num_tiles // chosen.ctas)
    if unpadded and chosen.num_tiles < HALO_UNPADDED_FILL * rounds * chosen.ctas:
        return cfg
    return chosen


def _few_columns(cfg: GemmConfig, options: dict) -> GemmConfig:
    """A layer of at most 256 output channels as ``Y^T = F X^T`` where that keeps more of
    the SMs busy (the GEMM's :func:`~.tiling.on_few_columns`: K in 64-row blocks of the
    MMAs' M, the pixels in as many column blocks as fill the rounds; X's copies, tiled or
    im2col, then fill the B ring), unless the caller chose the tile, schedule, ring, a
    cluster, a split, the C stages, a resident filter or the swap (the swapped tiles
    replace them all); not over padded taps or 8-channel pieces. H200, same runs: 43
    pointwise layers 1.07-1.62x, 16 3x3 layers 1.08-1.45x (ResNet-like, N=1-32, stride 1
    and 2), none slower."""
    if (TILING_CHOICES | C_STAGE_CHOICES | {"swap_ab", "b_resident"}) & set(options):
        return cfg
    # Against the tiles in plain waves where stream-K came from the thin-round rule: the
    # swapped tiles were measured before it took layers of fewer than 64 K steps; the
    # GEMM's stream-K (64 and more) keeps its layers, as it did.
    plain = replace(cfg, stream_k=False)
    if cfg.stream_k and stream_k_pays(plain):
        return cfg
    swapped = on_few_columns(plain)
    return swapped if swapped.swap_ab else cfg


def _alternating_c_stages(cfg: GemmConfig, options: dict) -> GemmConfig:
    """Two alternating C stages where a cooperative tile's C stage is narrower than the
    tile, with as many ring stages as fit beside them, unless fewer than
    :data:`~.tiling.ALTERNATING_MIN_STAGES` do or the caller chose the ring or the C stage
    (:func:`~.tiling.with_alternating_c_stages`, the GEMM's last refinement too).

    H200, graph replays, x cuDNN, same runs (one stage -> two): 1x1 N=32 28x28x32 ->
    192 (1 K step) 0.94 -> 1.15, 14x14x64 -> 384 (1) 0.93 -> 1.07, 14x14x96 -> 576 (3)
    0.89 -> 1.09, 14x14x112 -> 672 (2) 1.43 -> 1.71, 64x64x640 -> 320 (10) 0.85 -> 0.92,
    N=8 32x32x1280 -> 640 (20) 0.98 -> 1.06, N=32 7x7x2048 -> 512 (32) 1.26 -> 1.30; 3x3
    N=8 32x32x320 -> 640 (45) 1.45 -> 1.54, N=4 64x64x320 1.69 -> 1.76, N=32 28x28x128
    (18) 1.48 -> 1.52. Of the 39 layers it takes, 1.08x geomean, one lost: N=32 1x1
    14x14x1024 -> 512 (192 x 128, 16 K steps, 5 ring stages -> 4) 1.04 -> 1.01. 128 x
    256 tiles (4 stages -> 3) tied (N=1 3x3 256x256x256 1.050 / 1.045, N=32 56x56x256
    1.045 / 1.041): not taken. A C stage the whole tile wide alternates nothing within a
    tile (N=32 1x1 56x56x64 -> 64: 1.21 / 1.19): not taken."""
    if C_STAGE_CHOICES & set(options):
        return cfg
    return with_alternating_c_stages(cfg)


def _stores_overlapped(geometry: Conv2dGeometry, cfg: GemmConfig,
                       options: dict) -> GemmConfig:
    """A pointwise layer of one K step on cooperative tiles, of at most 16 input channels
    or with its C stage the whole tile: two alternating C stages (``epilogue_buffers=2``:
    a tile's store drains while the next tile's accumulators are staged; a whole-tile
    stage alternates from one tile to the next) and :data:`STORE_BOUND_STAGES` ring
    stages (its loads, one K block a tile, are a small part of its stores, and a deep
    ring of them runs many tiles ahead of the stores), with the widest C stage beside
    them. Unless the caller chose the ring, the C stage or the tile.

    H200, x cuDNN, same runs (graph replays), default -> this: N=32 112x112x16 -> 96
    0.79-0.81 -> 0.96-0.98, N=16 0.84 -> 1.02, N=8 0.82 -> 0.93, N=4 0.96 -> 1.23, N=2
    1.47 -> 1.78 (192 x 96 tiles), N=32 28x28x16 -> 96 1.08 -> 1.30, N=32 56x56x16 -> 64
    (128 x 64) 0.82 -> 0.88, N=8 1.70 -> 1.76, N=1 (64 x 64) 1.54 -> 1.59; one loss, N=1
    112x112x16 -> 96 (128 x 64) 0.98 -> 0.95 (3.38 against 3.48 us). Whole-tile C stages
    (ABBA, time one stage / two): N=32 112x112x32 -> 16 (192 x 16, 2091 tiles) 1.23x,
    56x56x24 -> 144 (192 x 144) 1.10x, 56x56x64 -> 64 (128 x 64) 1.04x; at N=8 and 1
    (a round or two of tiles) within 2%. Where C is staged in pieces that alternate
    already, a whole stage on 4 ring stages lost (N=32 28x28x32 -> 192, 128 x 192: 0.95x
    the 64-column pieces on 9): left to :func:`_alternating_c_stages`."""
    if not geometry.is_pointwise or cfg.k_steps != 1:
        return cfg
    if cfg.block_k != STORE_BOUND_BLOCK_K and cfg.epilogue_cols != cfg.block_n:
        return cfg
    if cfg.schedule != "cooperative" or (C_STAGE_CHOICES | TILING_CHOICES) & set(options):
        return cfg
    overlapped = replace(cfg, epilogue_buffers=2, stages=STORE_BOUND_STAGES)
    overlapped = _epilogue_and_stages(overlapped, {"stages": STORE_BOUND_STAGES})
    return overlapped if overlapped.shared_bytes <= MAX_SHARED else cfg


def _padded_k_in_pairs(geometry: Conv2dGeometry, cfg: GemmConfig,
                       options: dict) -> GemmConfig:
    """A pointwise layer of one K step whose C is 8 mod 16 (rows of X and of the filter
    an odd number of 16-byte chunks: 24, 40 or 56 channels, each K block zero-filled past
    C by the TMA) on cooperative tiles, more than one per CTA: 2x1 clusters, each CTA
    loading half of the B tile (the filter, one tile for every CTA where K is one column
    block) and multicasting it to both. Unless the caller chose a cluster or the tile.

    H200, graph replays, ABBA, time one CTA / 2x1 cluster (x cuDNN after): N=32 56x56x24
    -> 144 (523 tiles of 192 x 144) 1.29x (1.13-1.14x cuDNN), N=16 1.26x (1.26); N=32
    28x28x40 -> 240 (196 of 128 x 240) 1.15x (1.10-1.13), N=16 (128 x 128) 1.16x (0.89);
    held out: N=32 112x112x24 -> 64 1.49x (0.96), 112x112x40 -> 192 1.49x (0.93), 56x56x40
    -> 80 1.28x, N=8 112x112x40 -> 80 1.25x, N=16 112x112x56 -> 112 1.16x, N=32
    112x112x56 -> 256 1.08x, 56x56x8 -> 144 1.13x, N=16 56x56x40 -> 48 1.13x; N=4
    56x56x40 -> 240 0.99x. Not taken: one tile per CTA (N=8 56x56x24 -> 144, 131 tiles:
    0.95x); C = 48 (96-byte rows), 4 of 5 slower (N=16 28x28x48 -> 72 0.85x, 56x56x48 ->
    16 0.84x, -> 144 0.93x, -> 256 0.97x; N=32 56x56x48 -> 240 1.08x); whole 32- and
    64-channel blocks (N=32 56x56x64 -> 64 0.82x, 28x28x32 -> 192 0.93x, 112x112x32 ->
    16 1.08x, 112x112x16 -> 96 1.09x). The filter then stays in the ring too where a CTA
    takes more tiles than the ring has slots (:func:`_resident_filter`)."""
    if (not geometry.is_pointwise or cfg.k_steps != 1 or geometry.c % 16 != 8
            or cfg.schedule != "cooperative" or cfg.cluster != 1 or cfg.cluster_n != 1):
        return cfg
    if ({"cluster", "cluster_n"} | TILING_CHOICES) & set(options):
        return cfg
    if cfg.num_tiles <= cfg.ctas:
        return cfg
    paired = replace(cfg, cluster=2)
    try:
        paired.check()
    except ValueError:
        return cfg
    return paired


def _tall_pairs_of_pieces(geometry: Conv2dGeometry, chosen: GemmConfig,
                          options: dict) -> GemmConfig:
    """An im2col layer in 8-channel pieces (each 16-column K block two 8-channel im2col
    copies of 16-byte pixels: a stem over RGB padded to 8 channels; 3x3 layers of 24 or 40
    channels where pieces are asked for) on 128-row tiles takes 192-row cooperative tiles
    in 2x1 clusters, each CTA
    loading half of the B tile and multicasting it to both; 192 rows alone where the
    width does not halve into 8-row groups (24, 40). Such a layer is bound by L2 requests,
    not by its MMAs: a 16-byte pixel is one request, and `ncu` of N=8 224x224x8 -> 64 7x7
    stride 2 (H100) shows L2 68% busy, 6.96 M requests for 240 MB, the SMs 12% busy. A
    192-row tile serves a third more rows a B tile, and the cluster halves B's requests.

    H100, graph replays, ABBA, time 128-row tiles / this (x cuDNN after): N=32 224x224x8
    -> 64 7x7 stride 2 1.43x (0.70 -> 1.00), N=8 1.33x (0.74 -> 0.98), N=32 224x224x8 ->
    32 3x3 stride 2 1.68x (0.68 -> 1.15), N=8 1.38x, N=32 112x112x8 -> 32 3x3 1.59x, N=4
    256x256x8 -> 64 1.61x, N=1 512x512x8 -> 128 (against ping-pong 128 x 128) 1.49x, N=1
    640x640x8 -> 16 stride 2 1.25x, N=8 640x640x8 -> 32 6x6 stride 2 1.13x, N=1 224x224x8
    -> 64 7x7 (66 tiles, fewer than the SMs) 1.03x; 192 rows alone: N=16 56x56x24 -> 24
    3x3 1.18x, N=8 112x112x40 -> 40 1.12x (still 0.53-0.63x cuDNN there: a 24- or 40-wide
    tile is mostly loads); the cluster alone 1.00-1.50x, 192 rows alone 1.07-1.23x. Not
    where the caller chose the tile, the schedule, a cluster or a split."""
    if (geometry.is_pointwise or chosen.a_copy_k != PIECE or chosen.block_m != 128
            or not _reshapeable(chosen, options)):
        return chosen
    tall = replace(chosen, block_m=192, schedule="cooperative")
    return next((candidate for candidate in (replace(tall, cluster=2), tall)
                 if _shapes(candidate, options)), chosen)


def _narrow_blocks_in_pairs(geometry: Conv2dGeometry, chosen: GemmConfig,
                           options: dict) -> GemmConfig:
    """An im2col layer of 16- or 32-channel K blocks (32- or 64-byte pixels: C below 64
    or no multiple of 32) is, like the 8-channel pieces of :func:`_tall_pairs_of_pieces`,
    more loads than MMAs: its 64-wide tiles of one column block take 192 rows where those
    fill a wave (:data:`~.tiling.TALL_MIN_FILL`; :func:`_narrow_and_tall` takes the
    widths that are no multiple of 64), and where a CTA takes more than
    :data:`NARROW_PAIRS_ROUNDS` rounds of tiles its tiles go in 2x1 clusters sharing the
    filter. H200, graph replays, ABBA, x the default before (x cuDNN after): N=32 3x3
    56x56x16 -> 64 1.28x (1.57), 56x56x32 -> 64 1.15x (1.35); in clusters alone N=8
    112x112x16 -> 32 1.08x, N=16 56x56x48 -> 48 (262 tiles) 1.11x, N=4 128x128x80 -> 80
    1.09x, N=16 112x112x32 -> 32 1.05x; at two rounds or fewer the clusters lost (N=32
    28x28x112 -> 112 and N=8 112x112x48 -> 96, 131 tiles, 0.96x; N=16 56x56x16 -> 16, 262
    tiles 16 wide, 0.93x). Not where the caller chose the tile, the schedule, a cluster or
    a split."""
    if (geometry.is_pointwise or chosen.a_copy_k or chosen.block_k > NARROW_PAIRS_BLOCK_K
            or chosen.schedule != "cooperative" or not _reshapeable(chosen, options)):
        return chosen
    tall = replace(chosen, block_m=192)
    if (chosen.block_m == 128 and chosen.block_n == 64 and chosen.n_blocks == 1
            and tall.num_tiles >= TALL_MIN_FILL * chosen.ctas and _shapes(tall, options)):
        chosen = tall
    paired = replace(chosen, cluster=2)
    if chosen.num_tiles > NARROW_PAIRS_ROUNDS * chosen.ctas and _shapes(paired, options):
        return paired
    return chosen


def _reshapeable(chosen: GemmConfig, options: dict) -> bool:
    """Whether a rule may give ``chosen`` other rows or a cluster: the caller chose none
    of the tile's rows, the schedule, a cluster or a split, and the rules before chose
    no cluster, stream-K or K split."""
    if ({"block_m", "schedule", "cluster", "cluster_n"} | _SPLIT_CHOICES) & set(options):
        return False
    return not (chosen.cluster_size > 1 or chosen.stream_k or chosen.split_k > 1
                or chosen.tail_split > 1)


def _shapes(candidate: GemmConfig, options: dict) -> bool:
    """Whether ``candidate`` is a valid configuration once conv2d_config gives it its C
    stage and ring (:func:`_epilogue_and_stages`)."""
    try:
        _epilogue_and_stages(candidate, options).check()
    except ValueError:
        return False
    return True


def _resident_filter(cfg: GemmConfig, options: dict) -> GemmConfig:
    """Where the filter is one column block and a CTA takes more than one tile:
    ``b_resident``, each ring slot loading its K step of the filter on its first use only
    (in a 2x1 cluster each CTA its half, multicast), so each later K step is one TMA load
    (A), not two. Where a CTA takes more than :data:`RESIDENT_SHALLOW_ROUNDS` tiles the
    ring holds only :data:`RESIDENT_TILES_AHEAD` tiles of K steps (2 stages for one K
    step, 6 for three), and a filter of 2 to :data:`RESIDENT_MAX_STEPS` K steps (kept
    resident only then) takes 128-row tiles where the rules above gave 192 and the
    busiest CTA takes no more rows of them (:func:`_rows_a_cta_takes`). Unless the
    caller chose it, the ring, a cluster or the tile.

    H200, graph replays, ABBA, time loaded / resident (4 ring stages both): one CTA, N=32
    1x1 112x112x32 -> 16 (2091 tiles of 192 x 16) 1.17x, 112x112x16 -> 96 1.14x,
    112x112x40 -> 192 1.37x; in 2x1 clusters (C = 8 mod 16), N=32 112x112x24 -> 64 1.09x
    the one-CTA resident tiles, 112x112x40 -> 192 1.10x, N=16 112x112x40 -> 80 1.08x,
    112x112x56 -> 112 1.04x. The ring then, 4 stages -> 2, on 35 one-step layers of more
    than two rounds (MobileNet/EfficientNet pointwise, N=8 to 64; 14 of them held out):
    1.068x geomean, N=8 112x112x40 -> 80 1.19x (0.81 -> 0.97x cuDNN), N=8 112x112x16 -> 96
    1.18x (0.97 -> 1.15x), N=48 56x56x8 -> 144 1.14x, N=32 56x56x16 -> 64 1.19x; four lost
    2-6% (N=48 112x112x24 -> 64 0.94x, N=32 0.97x); at two rounds or fewer (N=4, N=16
    56x56) 0.955-1.01x: not taken there. Three K steps (1x1 56x56x96 to 192 channels -> 24
    to 48), against 192-row tiles loading the filter on 6 to 12 stages: 128-row resident
    tiles on 6 stages 1.109x geomean at N=32 (56x56x144 -> 24 and -> 40 1.23x: 0.95 ->
    1.17x cuDNN), 192-row ones 1.072x; held out N=64 56x56x144 -> 24 1.05x, 56x56x128 -> 24
    (2 steps) 1.05x, N=48 56x56x96 -> 32 1.22x, N=32 56x56x128 -> 24 1.14x; 128-row tiles
    of more rows a CTA lost (N=24 56x56x192 -> 48, 5 rounds of 128 rows against 3 of 192:
    0.92x), as did a layer of 1.5 rounds (N=48 28x28x120 -> 48: 0.95x)."""
    if cfg.n_blocks != 1 or cfg.k_steps > RESIDENT_MAX_STEPS or cfg.num_tiles <= cfg.ctas:
        return cfg
    if cfg.schedule != "cooperative" or cfg.cluster_n != 1 or cfg.b_resident:
        return cfg
    if ({"b_resident", "cluster", "cluster_n"} | TILING_CHOICES) & set(options):
        return cfg
    resident = replace(cfg, b_resident=True)
    if cfg.num_tiles > RESIDENT_SHALLOW_ROUNDS * cfg.ctas:
        resident = replace(resident, stages=RESIDENT_TILES_AHEAD * cfg.k_steps)
        shorter = replace(resident, block_m=128)
        if cfg.k_steps > 1 and cfg.block_m == 192 and _rows_a_cta_takes(
                shorter) <= _rows_a_cta_takes(resident):
            resident = shorter
        resident = _second_whole_c_stage(resident, options)
    elif cfg.k_steps > 1:
        return cfg
    try:
        resident.check()
    except ValueError:
        return cfg
    return resident if resident.shared_bytes <= MAX_SHARED else cfg


def _second_whole_c_stage(cfg: GemmConfig, options: dict) -> GemmConfig:
    """A one-step layer's lone C stage the tile's whole width, beside the shallow ring of
    a resident filter: a second one, the two alternating from tile to tile (as
    :func:`_stores_overlapped` gives where 4 ring stages fit beside them), where it fits,
    unless the caller chose the C stage.

    H200, graph replays, ABBA, one whole stage / two (2 ring stages both): N=8 1x1
    112x112x56 -> 112 (523 tiles of 192 x 112) 1.125x, N=32 56x56x48 -> 144 (523 of 192 x
    144) 1.153x; held out, 12 layers 1.057x geomean: N=32 56x56x56 -> 112 1.13x (0.87 ->
    0.99x cuDNN), N=64 28x28x40 -> 240 1.12x, N=32 56x56x48 -> 120 1.11x, 112x112x56 ->
    112 at N=16 to 64 1.00-1.02x, one lost (N=64 56x56x48 -> 144 0.985x)."""
    if cfg.k_steps != 1 or cfg.epilogue_buffers != 1 or cfg.epilogue_cols != cfg.block_n:
        return cfg
    if C_STAGE_CHOICES & set(options):
        return cfg
    second = replace(cfg, epilogue_buffers=2)
    return second if second.shared_bytes <= MAX_SHARED else cfg


def _rows_a_cta_takes(cfg: GemmConfig) -> int:
    """The rows of the busiest CTA's tiles (its rounds times the tile's rows): what a
    layer of one column block costs, each round a tile's rows of A loaded and C stored."""
    return -(-cfg.work_units // cfg.workers) * cfg.block_m


def _exact_wave(geometry: Conv2dGeometry, chosen: GemmConfig, options: dict) -> GemmConfig:
    """A pointwise layer's tiles as one wave of tiles dividing K exactly, 128 or 64 rows
    (:func:`~.tiling.in_one_exact_wave`, measured on SD UNet's 1x1 layers at N=1 to 8:
    N=1 32x32x1280 -> 640 on 64 x 80 tiles 0.77x cuDNN against 0.59x, N=2 on 128 x 80
    0.96-1.12x against 0.84x), unless the caller chose the tile, schedule, ring, cluster
    or split. An im2col layer keeps its tiles (not measured)."""
    if not geometry.is_pointwise or TILING_CHOICES & set(options):
        return chosen
    return in_one_exact_wave(chosen)


def _narrow_wave(geometry: Conv2dGeometry, chosen: GemmConfig, options: dict) -> GemmConfig:
    """A pointwise layer's tiles as the fullest one wave of narrow 64-row tiles with the
    whole K each, where they are more than the tiles chosen
    (:func:`~.tiling.in_fullest_narrow_wave`, measured on 113 1x1 layers of MobileNets,
    EfficientNets, ResNet-50 and SD UNet at N=1 to 64: 1.17x geomean on the 89 held out),
    unless the caller chose the tile, schedule, ring, cluster or split. An im2col layer
    takes them only up to :data:`IM2COL_NARROW_WAVE_MAX_STEPS` K steps: on 40 3x3 layers
    the 17 within it gained 0.99-1.53x (1.18x geomean) and 12 of the 18 past it lost; 14
    held out within it gained 1.04-1.59x (1.20x geomean; RESULTS.md 6x, 6y)."""
    if TILING_CHOICES & set(options):
        return chosen
    wave = in_fullest_narrow_wave(chosen)
    if not geometry.is_pointwise and wave.k_steps > IM2COL_NARROW_WAVE_MAX_STEPS:
        return chosen
    return wave


def _short_k(base: GemmConfig, options: dict) -> bool:
    """Whether the layer takes ping-pong 128 x 128 tiles for its few K steps (at most
    :data:`SHORT_K_STEPS`; 128 a width dividing K), the caller having chosen neither the
    tile, the schedule nor the split."""
    chosen = (_SPLIT_CHOICES | {"block_n", "schedule"}) & set(options)
    return not chosen and base.k_steps <= SHORT_K_STEPS and base.n % 128 == 0


def _short_k_tiles(base: GemmConfig) -> GemmConfig:
    """128 x 128 tiles for a layer of few K steps: ping-pong, or cooperative with the tiles
    past the last full wave cut into ordered K parts where the GEMM's wave model offers
    that (:func:`~.tiling.in_tail_parts`: at least 16 K steps, the tiles left over at most
    half the CTAs). N=32 1x1 14x14x1024 -> 512 (196 tiles, 16 K steps: 64 left over, in 2
    parts) ran at 0.81-0.87x cuDNN against 0.75-0.79x on ping-pong tiles (H100, three
    runs, graph replays; the GEMM 6272 x 512 x 1024's default too); that layer now takes
    192-row tiles (:func:`_tall_tiles`: 0.98x), and 14x14x1024 -> 768 keeps the tail."""
    tail = in_tail_parts(replace(base, block_n=128, schedule="cooperative"))
    return tail if tail is not None else replace(base, block_n=128, schedule="pingpong")


def _covering_unless_idle(base: GemmConfig, options: dict) -> GemmConfig:
    """The tiling of :func:`_by_width`, whose tile spans all of a narrow K where no width
    divides it (:func:`covering_width`), unless the narrower tiles it replaces kept more SMs
    busy: after the 64-row rule (:func:`_half_rows`) the covering tiles must be at least
    :data:`COVERING_SHARE` as many as those, or as a wave. H100, x cuDNN, same run: N=1 1x1
    56x56x24 -> 144 49 tiles of 64 x 160 0.60-0.64 against 75 of 128 x 64 0.98-1.03, N=1
    112x112x16 -> 96 98 of 128 x 96 1.31-1.41 against 196 of 128 x 64 1.40-1.44; at (nearly)
    equal counts the covering tiles win (N=32 14x14x480 -> 80, 98 of 64 x 96 0.85 against 98
    of 128 x 64 0.63; N=8 the same, 25 against 26, 1.02-1.12 / 0.85-0.89)."""
    covering = _by_width(base, options)
    narrow = _by_width(base, options, cover=False)
    if covering == narrow:
        return covering
    spread = _half_rows(covering, options).num_tiles
    if spread >= COVERING_SHARE * min(_half_rows(narrow, options).num_tiles, base.ctas):
        return covering
    return narrow


def _by_width(base: GemmConfig, options: dict, cover: bool = True) -> GemmConfig:
    """The tile width, cluster, split and schedule of a layer by the measured rules of
    :func:`conv2d_config` (the wave model's pick of the exact widths, ordered K parts of
    the widest tiles where they are too few, the 64-wide ping-pong fallback)."""
    width, cluster, split = _measured_tiling(base, options, cover)
    chosen = replace(base, block_n=width)
    if "cluster" not in options:
        chosen = replace(chosen, cluster=cluster if chosen.ctas % cluster == 0 else 1)
    fallback = ("schedule" not in options and "block_n" not in options and width == 64
                and chosen.num_tiles <= chosen.ctas and base.n > 64 and not chosen.stream_k)
    caller_chose = {"split_k", "split_k_ordered", "cluster", "cluster_n"} & set(options)
    exact = _exact_widths(base)
    widest = replace(base, block_n=exact[0]) if fallback and exact else None
    if widest is not None and not caller_chose:
        widest = _enough_units(widest, exact)
    parts = widest.ordered_parts if widest is not None and not caller_chose else 1
    if split > 1:
        # The widest tiles in ordered parts priced below narrower ones in plain waves by
        # the wave model (4x16x16x1280: 40 tiles of 128 x 256 in 3 parts, 1.35x cuDNN,
        # against 80 of 128 x 128 at 0.95-0.97x, H100, same runs).
        chosen = replace(chosen, split_k=split, split_k_ordered=True)
    elif parts > 1:
        # A layer whose wide tiles are too few (7x7x512: 26 of 128 x 256) keeps them and
        # cuts K into ordered parts instead of falling back to 64-wide tiles: 4 parts
        # ran 7x7x512 at 381.7 TFLOP/s against 326 for the 64-wide tiles in 1x2 clusters
        # (0.95x and 0.84x cuDNN in the same run, H100); 5 parts (12 + 4 x 15 K steps)
        # at 469-473.
        chosen = replace(widest, split_k=parts, split_k_ordered=True)
    elif fallback:
        # A layer left on 64-wide tiles because wider ones are too few (7x7x512): each
        # CTA has at most one tile, and one warpgroup computing it whole ran 4-6% faster
        # than two sharing it (289.5 / 291.8 against 278.3 / 274.6 TFLOP/s, H100).
        chosen = replace(chosen, schedule="pingpong")
        if ("cluster" not in options and "cluster_n" not in options
                and chosen.n_blocks % 2 == 0 and chosen.ctas % 2 == 0):
            # Two CTAs of adjacent column blocks share each A tile (two thirds of a
            # 128x64x64 K step's bytes): 7x7x512 326-331 against 267-291 TFLOP/s
            # without (H100; 1x4 clusters no faster than 1x2).
            chosen = replace(chosen, cluster_n=2)
    return chosen


def _stream_k_last_round(chosen: GemmConfig, options: dict) -> GemmConfig:
    """The tiles the rules above chose, with stream-K where the GEMM's rule takes it
    (:func:`~.tiling.stream_k_pays`: at least 64 K steps, the wave model 5% cheaper; on
    GEMMs it won up to a last round 52% full) or :func:`stream_k_shares_thin_round` does
    (27 K steps and more, a last round at most half full, the model's fix-ups cheaper):
    cooperative 128-row tiles of whole K, no cluster, the caller having chosen neither the
    split, the cluster nor stream-K. Last of the tiling rules, so that the 192-row, 64-row,
    swapped and one-wave tilings they measured keep their layers. UNet-like 8x32x32x1280 (320
    tiles of 128 x 256, 180 K steps): 789.5 TFLOP/s against 716.7 in plain waves, 1.05x
    and 0.95x cuDNN (H100, same run)."""
    if _SPLIT_CHOICES & set(options):
        return chosen
    if (chosen.block_m != 128 or chosen.schedule != "cooperative" or chosen.cluster_size > 1
            or chosen.tail_split > 1):
        return chosen
    if stream_k_pays(chosen) or stream_k_shares_thin_round(chosen):
        return replace(chosen, stream_k=True)
    return chosen


def stream_k_shares_thin_round(cfg: GemmConfig) -> bool:
    """Whether a conv layer's tiles take stream-K: at least :data:`THIN_ROUND_MIN_STEPS` K
    steps a tile, at least one full round, a last round at most
    :data:`~.tiling.THIN_ROUND` full (:func:`~.tiling.leaves_thin_round`), and the wave
    model's estimate of stream-K, fix-ups included, below the plain waves'. Plain waves
    leave more than half a round idle there, which stream-K's fix-ups cost less than
    unless the thin round's K steps, shared out over every CTA, make runs of a few steps:
    then each tile's owner waits for and adds many partial tiles one after another (4
    tiles of 54 steps over 132 CTAs: runs of 1 step, 53 peers a tile). The model's
    fix-up term (two fp32 partial tiles' bytes a peer, :data:`~.tiling.FIXUP_COST_PER_BYTE`,
    fit on GEMMs) tells those apart; its gain is overstated where the last round is fuller
    (N=2 160x160x192 -> 384 s2 estimated 1.07x cheaper, ran 0.91x), so the thin round is
    asked too. No margin: on these layers of 27 to 63 K steps, which the GEMM's rule
    (:func:`~.tiling.stream_k_pays`, 64 and more, 5% cheaper) leaves alone, the model
    understates the gain of a thin round (FPN estimated 3% cheaper, ran 8%).

    H100, same runs, stream-K against the same tiles in plain waves (time ratio; runs and
    peers; the model's plain / stream-K): taken, FPN N=2 200x272x256 (850 tiles of 128 x
    256, 36 K steps, runs of 15, 3 peers; 1.03) 1.08x, N=32 80x80x192 s2 and two held-out
    layers of the same 400 tiles of 128 x 192 (27 steps, the last full round joining: 1
    peer; 1.25) 1.06-1.09x, N=8 100x100x640 -> 320 (1250 of 128 x 160, 3 peers; 1.04)
    1.09x, N=1 136x136x256 (290 of 128 x 128, 5 peers; 1.05) 1.05x, N=4 136x136x320 s2
    (6 peers; 1.10) 1.04x, three more held out 0.98-1.02x; not taken, the eight whose
    runs of 1-5 steps the model prices dearer (6-53 peers; 0.66-0.97) 0.90-1.01x, a last
    round 52-74% full 0.91-1.06x (benchmarks/RESULTS.md 6z20, 6z21)."""
    return (cfg.k_steps >= THIN_ROUND_MIN_STEPS and has_partial_wave(cfg)
            and cfg.split_k == 1 and leaves_thin_round(cfg)
            and stream_k_estimated_cheaper(replace(cfg, stream_k=False)))


def _enough_units(widest: GemmConfig, exact: list[int]) -> GemmConfig:
    """The widest exact tiles (to be cut into ordered K parts), or tiles half as wide
    where the widest are too few for their parts to fill the SMs:

    * where the widest, even in parts, give at most a quarter of the CTAs a unit: a
      layer of one or two row blocks (batch 1) has so few tiles that the parts' K steps,
      capped at 4 a part, leave most SMs idle, and twice the tiles run twice the units.
      H100, x cuDNN, half as wide / the widest, two runs of each (graph replays): N=1
      14x14x256 36 units of 128 x 128 1.26-1.29 / 18 of 128 x 256 0.93; N=1 7x7x512 60 /
      30 units 1.95-1.98 / 1.43-1.45; N=2 7x7x512 2.01-2.05 / 1.49-1.51; N=1 7x7x2048 ->
      512 1x1 32 / 16 units 0.86-0.90 / 0.66-0.68; N=4 the same 1.05-1.09 / 0.76-0.79;
      N=1 28x28x128 56 units of 128 x 64 1.22-1.24 / 28 of 128 x 128 1.07.
    * where the K steps, not the CTAs, cap the widest tiles' parts (4 steps a part
      leave fewer parts than the CTAs hold): half-width tiles are as many units in fewer,
      longer parts, each later part a wait and an add fewer. H100, x cuDNN, same runs:
      N=8 14x14x256 3x3 (13 tiles of 128 x 256, 36 K steps: 9 parts) 26 tiles of 128 x
      128 in 5 parts 1.23-1.36 against 0.84-0.94, its stride-2 twin 1.35 / 0.92; N=8
      7x7x2048 -> 512 1x1 (8 tiles, 32 steps) 16 in 8 parts 0.86 against 0.63. Where the
      CTAs cap them the widest stay: N=8 7x7x512 3x3 (8 tiles in 15 parts) 1.23 against
      1.19 for 16 of 128 x 128 in 8; N=32 7x7x2048 -> 512 (26 tiles in 5) 1.02 against
      0.85 for 52 in 2."""
    units = widest.num_tiles * widest.ordered_parts
    steps_cap = (widest.k_steps // PART_STEPS_FLOOR
                 < min(MAX_ORDERED_SPLIT, widest.ctas // widest.num_tiles))
    half = widest.block_n // 2
    if (4 * units <= widest.ctas or steps_cap) and half in exact:
        return replace(widest, block_n=half)
    return widest


def _tall_tiles(chosen: GemmConfig, options: dict) -> GemmConfig:
    """192 x 128 tiles (three consumer warpgroups of 64 rows) in place of 128-row ones
    where the wave model prices them cheaper: a layer whose 128-row tiles leave a partial
    wave that 192-row tiles fill whole. Each 192-row K step costs 1.57 of a 128 x 128 one
    (:data:`~.tiling.ROWS_STEP_FACTOR`), so they win only where they save a round. H100,
    same runs, x cuDNN, 192 x 128 against the rule before (graph replays): N=32 28x28x128
    3x3 131 tiles in one wave 1.33 against 196 of 128 x 128 1.05; its stride-2 twin
    56x56x128 1.29 / 1.06; 1x1 14x14x1024 -> 512 0.98 against 0.82 (128 x 128, the tail in
    2 parts); 1x1 28x28x512 -> 128 1.09 / 0.95 (ping-pong). The model keeps the layers
    where they lost: 28x28x512 -> 256 (262 tiles, two rounds against three of 128 x 128:
    0.82 / 0.95), 7x7x512 -> 2048 (144 tiles: 0.65 / 0.96), 14x14x256 3x3 (66 tiles: 0.80 /
    1.01). Only for K blocks of 64 channels and widths of 128 dividing K (what was
    measured), not where the caller chose the tile, the schedule or the split. Before
    stream-K (:func:`_stream_k_last_round`), whose gain the model prices too high on a conv
    layer (1.22x estimated, 1.04-1.14x run): 192 x 128 tiles in whole rounds against 196
    tiles of 128 x 256 or 128 x 128 with stream-K (72 K steps;
    H100, same runs, time ratio): N=16 28x28x512 1.12x, N=32 14x14x512 -> 1024 1.13x, N=2
    56x56x512 (132 tiles, one round) 1.34x, N=8 56x56x512 s2 1.29x, N=4 56x56x512 1.14x,
    N=1 112x112x512 1.17x, N=8 28x28x1024 (144 K steps) 1.00x (RESULTS.md 6z20)."""
    if ({"block_m", "block_n", "schedule"} | _SPLIT_CHOICES) & set(options):
        return chosen
    if _narrow_and_tall(chosen):
        return replace(chosen, block_m=192, schedule="cooperative")
    if (chosen.block_m != 128 or chosen.block_k != 64 or chosen.a_copy_k or chosen.n % 128
            or chosen.cluster_size > 1 or chosen.stream_k or chosen.split_k > 1):
        return chosen
    tall = replace(chosen, block_m=192, block_n=128, schedule="cooperative", tail_split=1)
    return tall if estimate(tall).cost < estimate(chosen).cost else chosen


def _wide_half_rows(chosen: GemmConfig, options: dict) -> GemmConfig:
    """64 x 256 tiles (cooperative: one consumer warpgroup on m64n256 MMAs) for a layer
    of at least :data:`WIDE_HALF_ROWS_MIN_STEPS` K steps on one wave of 128 x 128 tiles,
    where those are as many and one wave still holds them: the same MMAs a tile, on half
    the rows and twice the columns, with a sixth less shared memory read per MMA (A and
    B once per k16 step, not B twice beside two halves of A). H200, graph replays, ABBA, x the
    128 x 128 tiles (x cuDNN after): 3x3 over 512 channels (72 K steps), N=16 14x14 ->
    512 1.14x (1.30), N=4 28x28 1.14x (1.11), N=8 20x20 1.16x (1.10), N=12 14x14 (76
    tiles) 1.12x (1.09), N=1 64x64 (128 tiles) 1.06x (1.12); at 36 K steps (N=8 28x28x256
    -> 256) 0.99x. Where the rules took ordered K parts on wider tiles, they keep them
    (N=2 28x28x512: 64 x 256 on 50 tiles 0.59x). Not where the caller chose the tile,
    the schedule, a cluster or a split."""
    if ({"block_m", "block_n", "schedule", "cluster", "cluster_n"} | _SPLIT_CHOICES) \
            & set(options):
        return chosen
    wide = replace(chosen, block_m=64, block_n=256)
    if ((chosen.block_m, chosen.block_n, chosen.schedule) != (128, 128, "cooperative")
            or chosen.n % 256 or chosen.k_steps < WIDE_HALF_ROWS_MIN_STEPS
            or chosen.cluster_size > 1 or chosen.stream_k or chosen.split_k > 1
            or chosen.tail_split > 1 or chosen.num_tiles > chosen.ctas
            or wide.num_tiles > chosen.ctas or not _shapes(wide, options)):
        return chosen
    return wide


def _narrow_and_tall(chosen: GemmConfig) -> bool:
    """Whether 128-row tiles of one column block at most :data:`NARROW_TALL_WIDTH` wide,
    padded past K (K not a multiple of 64), take 192 rows (three consumer warpgroups), their
    192-row tiles at least a wave :data:`~.tiling.TALL_MIN_FILL` full. A narrow tile's K
    step is mostly its A tile, and its MMAs are small: a third more rows a tile is a third
    fewer tiles, each B tile and epilogue serving more rows, and three warpgroups issuing
    MMAs. H100, x cuDNN, 192 / 128 rows, same runs: 3x3 N=8 56x56x64 -> 96 1.54-1.56 /
    1.08-1.10, N=32 1.25-1.28 / 1.08-1.09, N=32 28x28x128 -> 80 1.25-1.35 / 0.92-0.98, N=32
    28x28x96 -> 144 1.40-1.41 / 1.03-1.04; 1x1 N=32 56x56x144 -> 24 0.70-0.72 / 0.61, N=32
    28x28x240 -> 40 1.00 / 0.89-0.91, N=8 56x56x24 -> 144 0.94-0.95 / 0.66-0.79, N=32
    112x112x16 -> 96 0.92 / 0.84-0.85, N=32 112x112x32 -> 16 1.00-1.01 / 0.87-0.88, N=32
    28x28x192 -> 32 1.00-1.05 / 0.89-0.92. Where K is a multiple of 64 they were measured
    too and are not taken: 64 wide at N=32 even (56x56x256 -> 64 1x1 1.04-1.05 / 1.07-1.09,
    56x56x64 3x3 1.19-1.20 / 1.20-1.21), 128 wide slower (VGG 112x112x128 3x3 N=32 0.90-0.92
    / 0.93-0.94, VAE 512x512x128 0.85-0.89 / 0.95-0.96; :func:`_tall_tiles` prices those)."""
    return (chosen.block_m == 128 and chosen.n_blocks == 1 and chosen.n % 64
            and chosen.block_n <= NARROW_TALL_WIDTH and not chosen.a_copy_k
            and chosen.cluster_size == 1 and not chosen.stream_k and chosen.split_k == 1
            and chosen.tail_split == 1
            and replace(chosen, block_m=192).num_tiles >= TALL_MIN_FILL * chosen.ctas)


def _half_rows(chosen: GemmConfig, options: dict) -> GemmConfig:
    """64-row tiles (one consumer warpgroup each) for a layer of few K steps whose 128-row
    tiles (128 wide where 128 divides K, else the width the layer took: 64, one spanning
    K, :func:`covering_width`, or an exact one such as K = 320's 160) fill at most half
    the CTAs:

    * at most :data:`~.tiling.HALF_ROWS_SHORT_STEPS` K steps (the GEMM's bound): 64-row
      tiles where they fit in one wave (:func:`~.tiling.half_rows_fill`). A short layer
      is latency as much as MMAs; a 64-row K step is half the MMAs, and a layer of a few
      images has rows for twice the tiles (or, under 64 rows, wastes half as many).
      H100, x cuDNN, 64-row tiles / the 128-row default, same runs: N=8
      14x14x1024 -> 512 1x1 1.12-1.35 / 0.75-0.91, N=8 14x14x1024 -> 256 0.86-1.22 /
      0.56-0.83, N=8 7x7x512 -> 2048 0.98 / 0.79, N=1 7x7x512 -> 2048 (49 rows) 1.36-1.68
      / 0.99-1.24, N=1 14x14x256 -> 1024 1.24-1.51 / 0.93-1.18, N=1 28x28x512 -> 128
      1.18-1.23 / 0.92-0.95, N=1 56x56x64 3x3 64 x 64 tiles 1.23-1.44 / 0.92-1.09, and
      eleven more 1x1 layers at N=1 and 8 (benchmarks/RESULTS.md section 8); SD UNet's
      N=1 64x64x640 -> 320 1x1, 128 tiles of 64 x 160, 1.06-1.09 / 0.73-0.75 (H200).
    * at most :data:`HALF_ROWS_MAX_STEPS`: 64-row tiles in ordered K parts
      (:attr:`GemmConfig.ordered_parts`), where they still fill at most half the CTAs
      and the 128-row tiles are at least 128 wide: 7x7x2048 -> 512 1x1 (32 K steps) at
      N=8 in 4 parts 0.95-0.99 against 128 x 128 in 8 0.86, at N=4 1.08 / 0.90, at N=1
      0.97 / 0.88. N=32 of it keeps its 26 tiles of 128 x 256 in 5 parts (100 64-row
      tiles 0.90 against 1.02), and N=1 28x28x128 3x3 its 128 x 64 tiles (1.24 against
      1.16 for 64 x 128).
    Longer layers keep 128-row tiles (N=1 7x7x512 3x3, 72 K steps: 64 x 128 in 8 parts
    1.77 against 2.05)."""
    if ({"block_m", "block_n", "schedule"} | _SPLIT_CHOICES) & set(options):
        return chosen
    if chosen.k_steps > HALF_ROWS_MAX_STEPS or chosen.stream_k or chosen.cluster_size > 1:
        return chosen
    if chosen.block_n == 64:
        width = 64
    elif chosen.n % 128 == 0:
        width = 128
    else:
        # One tile spanning K (24, 80, 160 or 192 channels, say), or the exact width the
        # layer took (K = 320 in two column blocks of 160).
        width = chosen.block_n
    whole = replace(chosen, block_m=128, block_n=width, schedule="cooperative",
                    split_k=1, split_k_ordered=False)
    half = replace(whole, block_m=64)
    if not half_rows_fill(whole, half):
        return chosen
    if half.k_steps <= HALF_ROWS_SHORT_STEPS:
        return narrow_half_rows(half) if width == 128 else _split_covering(half)
    parts = half.ordered_parts
    if parts > 1 and chosen.block_n >= 128:
        return replace(half, split_k=parts, split_k_ordered=True)
    return chosen


def _split_covering(half: GemmConfig) -> GemmConfig:
    """64-row tiles spanning a narrow K (:func:`covering_width`) as column blocks of half
    the width (a multiple of 8), and again, while the tiles before each halving leave most
    SMs idle: the rule of :func:`~.tiling.narrow_half_rows` (64 x 128 as 64 x 64) for the
    widths it does not take, each halving under :func:`~.tiling.half_rows_fill`. A layer
    this small is each CTA's loads: half the width is fewer bytes a CTA, and twice the
    CTAs pull them. N=1 1x1 14x14x672 -> 112: 8 tiles of 64 x 56 where 64 x 112 made 4 (64
    x 64 tiles, the rule before exact widths, ran it at 1.39-1.44x cuDNN against
    0.84-0.86x for 4 tiles of 128 x 64, H100). Halving again (H200, same run, x cuDNN,
    again / once): N=32 7x7x672 -> 192 100 of 64 x 48 0.98-1.02 / 0.81-0.84, N=8 14x14x480
    -> 112 64 x 32 1.83-1.91 / 1.65-1.70, N=8 14x14x576 -> 96 64 x 24 1.09-1.15 /
    1.01-1.04, N=8 and N=1 7x7x672 -> 192 64 x 24 0.90-0.96 / 0.84-0.90, and five more
    layers at N=1 and 8 by 2-8%; it lost 3-5% on five (N=1, 8 and 32 7x7x960 -> 160 on 64
    x 40, 0.73-0.79 / 0.75-0.81; N=1 and 8 14x14x672 -> 112 on 64 x 32, 0.89-0.93 /
    0.93-0.98). Not for a layer of one K step, whose tile is mostly its epilogue: N=1
    56x56x24 -> 144 ran 98 split tiles of 64 x 72 at 0.91-0.94x against 1.05-1.07x for the
    ping-pong 128 x 64 tiles it keeps (H100, same run)."""
    if half.n_blocks > 1 or half.block_n <= 64 or half.k_steps < 2:
        return half
    split = half
    while True:
        blocks = 2 * split.n_blocks
        narrower = replace(split, block_n=-(-half.n // (8 * blocks)) * 8)
        if narrower.n_blocks != blocks or not half_rows_fill(split, narrower):
            return split
        split = narrower


def _exact_widths(base: GemmConfig) -> list[int]:
    """Tile widths that divide K exactly, widest first: multiples of 32 from 256 down to
    128, then 64 (whose accumulators fit a consumer warpgroup)."""
    return [w for w in (*range(256, 127, -32), 64)
            if base.n % w == 0 and replace(base, block_n=w).accumulators <= 128]


def _measured_tiling(base: GemmConfig, options: dict,
                     cover: bool = True) -> tuple[int, int, int]:
    """(block_n, cluster, ordered K parts) by the measured rule of :func:`conv2d_config`
    (``cover``: the covering width a candidate, see :func:`_covering_unless_idle`)."""
    if "block_n" in options:
        return base.block_n, 1, 1

    def holds(width: int) -> bool:
        return replace(base, block_n=width).accumulators <= 128

    exact = _exact_widths(base)
    filling = [w for w in exact if 2 * replace(base, block_n=w).num_tiles >= base.ctas]
    wide = [w for w in filling if w >= 128]
    if wide:
        # The cheapest by the GEMM's wave model (ties to the wider): 8x16x16x1280 takes
        # 128 tiles of 128 x 160 (one wave) over 80 of 128 x 256 (a wave 61% full); and
        # where the widest tiles are too few to fill the SMs, they in ordered K parts
        # are a candidate too (the GEMM's, kernels/tiling).
        tilings = [replace(base, block_n=w) for w in wide]
        if (exact[0] not in wide and base.schedule == "cooperative"
                and not _SPLIT_CHOICES & set(options)):
            parts = in_ordered_parts(replace(base, block_n=exact[0]))
            tilings += [parts] if parts is not None else []
        best = min(tilings, key=_wave_cost)
        return best.block_n, 1, best.split_k
    if filling and exact[0] >= 128 and not _SPLIT_CHOICES & set(options):
        # Only 64-wide tiles give half the CTAs one: the widest exact tiles in one round
        # are a candidate too, where the wave model prices them cheaper (a 64-wide K step
        # costs nearly a 128-wide one's loads: tiling.STEP_COST). N=1 UNet 64x64x320 3x3:
        # 64 tiles of 128 x 160 1.02x cuDNN against 160 of 128 x 64 0.75x (H100, same run).
        narrow, widest = (replace(base, block_n=w) for w in (filling[-1], exact[0]))
        if _wave_cost(widest) < _wave_cost(narrow):
            return widest.block_n, 1, 1
    if filling or exact:
        return (filling or exact)[-1], 1, 1
    covering = covering_width(base) if cover else None
    if covering is not None and holds(covering) and (
            2 * replace(base, block_n=covering).num_tiles >= base.ctas
            or base.k_steps <= HALF_ROWS_SHORT_STEPS):
        # No width divides K, but one tile spans all of it: each A tile is read once,
        # not once per column block. H100, x cuDNN, same run, against the 64-wide tiles
        # (two or three column blocks): N=32 1x1 14x14x480 -> 80 0.85 / 0.63, 14x14x576
        # -> 96 1.65 / 1.16, 14x14x672 -> 112 0.90 / 0.75 (then 64-row tiles,
        # _half_rows), 56x56x24 -> 144 0.62 / 0.54 (128 x 160).
        return covering, 1, 1
    # No such width divides K: two 128-wide column blocks where K is 193 to 256 (the
    # covering tiles too few), the second more than half full, where 192-wide ones in 2x1
    # clusters left it mostly padding (H200, same run, ABBA, time 192 / 128: N=16 1x1 28x28 K =
    # 240 1.14x, 232 1.29x, 200 1.17x, 216 1.41x; N=4 56x56x40 -> 240 1.10x; N=2 14x14x40
    # -> 240 1.84x, its 128 x 128 tiles becoming 64 x 64 ones by the rules after);
    if 192 < base.n <= 256 and holds(128):
        return 128, 1, 1
    # padded 192-wide tiles in 2x1 clusters where K is wider (measured on K = 320 before
    # 160-wide tiles existed).
    if base.n > 192 and holds(192):
        return 192, 2, 1
    return 64, 1, 1


def covering_width(base: GemmConfig) -> int | None:
    """The tile width that spans all K output channels in one column block, where K is at
    most 256: K itself (a multiple of 8, any of which is a tile width; one no multiple of
    32 stages C whole); else None. H100, x cuDNN, same run, K wide against the multiple of
    32 (at least 64) this rule took before: N=32 1x1 56x56x144 -> 24 0.96-0.97 / 0.70,
    56x56x96 -> 24 1.34-1.38 / 0.95-1.00, 112x112x32 -> 16 0.95-0.99 / 0.74-0.77, 28x28x192
    -> 32 1.14-1.20 / 0.98-1.01, 28x28x240 -> 40 1.19 / 1.00-1.02, 14x14x480 -> 80 1.65-1.67
    / 1.36-1.40, 14x14x672 -> 112 0.93-0.94 / 0.79-0.81, 56x56x24 -> 144 0.83-0.85 /
    0.69-0.72, 3x3 28x28x128 -> 80 1.50-1.51 / 1.30-1.34; N=8 56x56x144 -> 24 1.59-1.62 /
    1.23-1.26. Taken where its tiles give half the CTAs one, or the layer is short enough
    for plain 64-row tiles (:func:`_half_rows`) to spread them."""
    return base.n if base.n <= 256 else None


def _wave_cost(cfg: GemmConfig) -> float:
    """The wave model's estimate of ``cfg``'s tiles (kernels/tiling): in plain waves or
    K parts, or with stream-K where :func:`~.tiling.stream_k_pays` would take it. Not
    where only :func:`stream_k_shares_thin_round` does: the model prices stream-K's gain
    on a conv layer wrongly (1.02-1.24x estimated where 0.91-1.09x ran, RESULTS.md 6z20),
    and would pick widths for it: N=1 UNet 64x64x320 (45 K steps) keeps 64 tiles of 128 x
    160 (1.02x cuDNN) over 160 of 128 x 64 with stream-K."""
    cost = estimate(cfg).cost
    if cfg.split_k == 1 and stream_k_pays(cfg):
        cost = min(cost, estimate(replace(cfg, stream_k=True)).cost)
    return cost


def check_config(geometry: Conv2dGeometry, cfg: GemmConfig) -> None:
    """Refuse a configuration that is not the GEMM of ``geometry`` (or one the kernel does
    not run as a convolution), naming the value."""
    check_geometry(geometry, cfg.dtype)
    k = gemm_k(geometry.patches_folded(), cfg.tap_columns)
    m = geometry.gemm_m
    if cfg.halo is not None:
        _check_halo(geometry, cfg)
        m = cfg.halo.tiles * cfg.block_m
    for name, want in (("m", m), ("n", geometry.k), ("k", k)):
        if getattr(cfg, name) != want:
            raise ValueError(f"{name}={getattr(cfg, name)}: the GEMM of {geometry.describe()} "
                             f"has {name} = {want} (M = N*P*Q, N = K, K = R*S*C"
                             + (f" with each tap's C padded to {cfg.tap_columns}"
                                if cfg.tap_columns else "") + ")")
    if cfg.b_layout != "nk":
        raise ValueError(f"b_layout={cfg.b_layout!r}: the KRSC filter is the GEMM's B as "
                         f"N x K ('nk')")
    if cfg.split_k != 1 and not cfg.split_k_ordered:
        raise ValueError(f"split_k={cfg.split_k}: conv2d computes Y = conv(X, F); plain "
                         f"split-K adds into Y (Y +=): take split_k_ordered=True (part 0 "
                         f"stores, the other parts add after it)")
    if cfg.k_steps % cfg.split_k and not cfg.part_shortfall:
        raise ValueError(f"split_k={cfg.split_k}: the {cfg.k_steps} K steps of "
                         f"{geometry.describe()} must divide into equal parts, or into a "
                         f"shorter part 0 and equal others with at most one unit per worker "
                         f"({cfg.work_units} units on {cfg.workers} workers) or one part per "
                         f"worker (a part cannot run past K = R*S*C: its im2col copies read "
                         f"inside the filter's taps)")
    cfg.check()
    _check_block_k(geometry.patches_folded(), cfg)


def _check_halo(geometry: Conv2dGeometry, cfg: GemmConfig) -> None:
    """Halo tiles (:mod:`.halo`) are ``geometry``'s: a stride-1 layer's, of its extents."""
    halo = cfg.halo
    if geometry.stride != (1, 1):
        raise ValueError(f"halo tiles with stride {geometry.stride}: stride 1 only (a "
                         f"stride would read every other halo pixel)")
    want = halo_tiling(geometry, halo.block_m, 0 if halo.folded else halo.planes * 8)
    if replace(want, rows=halo.rows, cols=halo.cols) != halo:
        raise ValueError(f"halo tiles {halo}: not those of {geometry.describe()}")
