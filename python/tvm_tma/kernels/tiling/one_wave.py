"""One wave of tiles dividing N exactly, the refinement of short problems whose tiles the
model leaves in a partial wave (shared with conv2d's pointwise layers, which take
:func:`exact_wave` as a candidate of their own)."""

from __future__ import annotations

import math
from dataclasses import replace

from .model import (
    Tiling,
    c_stage_widths,
    kernel_runs,
    sixteen_bit_nk,
    unrolled,
    with_most_stages,
)

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
#: :func:`with_narrow_ring`: the 64-row one-wave tile widths that run fastest on a ring
#: of :data:`NARROW_RING_STAGES` stages where a tile has at least
#: :data:`NARROW_RING_MIN_STEPS` K steps (measured on the H200).
NARROW_RING_WIDTHS = (80, 96)
NARROW_RING_STAGES = 8
NARROW_RING_MIN_STEPS = 20
#: :func:`in_fullest_narrow_wave`: tile widths, multiples of this dividing N, from the
#: widest (256) down to :data:`NARROW_WAVE_MIN_WIDTH` (64 x 8 tiles lost to the default on
#: both layers measured: N=1 7x7x160 -> 960 0.97x, 14x14x672 -> 192 0.97x, H200).
NARROW_WAVE_WIDTH_STEP = 8
NARROW_WAVE_MIN_WIDTH = 16
#: :func:`in_fullest_narrow_wave`: its tiles at least this share of the CTAs, and none over.
NARROW_WAVE_MIN_FILL = 0.5
#: :func:`in_fullest_narrow_wave`: the fewest K steps (one K step, N=8 14x14x64 -> 384:
#: 0.95x the default's 75 tiles of 64 x 128).
NARROW_WAVE_MIN_STEPS = 2
#: :func:`in_fullest_narrow_wave`: the most K steps (40 won: N=8 8x8x2560 -> 768 1x1 on 64 x
#: 48 tiles 1.15x; at 64 all three GEMMs measured lost: 768 x 384 x 4096 0.65x, 768 x 512 x
#: 4096 0.84x, 512 x 512 x 4096 0.87x the default's ordered K parts).
NARROW_WAVE_MAX_STEPS = 40
#: :func:`in_fullest_narrow_wave`: ping-pong tiles filling this share of the CTAs are kept
#: (N=16 7x7x160 -> 960: 105 of 128 x 64 ran 1.22x the 130 of 64 x 96).
NARROW_WAVE_PINGPONG_FILL = 0.75
#: :func:`in_fullest_narrow_wave`: the most bytes a CTA loads, as a multiple of what a work
#: unit of ``cfg`` loads (N=4 7x7x2048 -> 512: 128 tiles of 64 x 16 and 32 K steps load
#: 3.3x a unit of 64 x 128 in 8 ordered parts, and ran 0.90x it).
NARROW_WAVE_MAX_LOAD_RATIO = 3.0


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
            return with_narrow_ring(with_most_stages(wave))
    return None


def fullest_narrow_wave(cfg: Tiling) -> Tiling | None:
    """Cooperative 64-row tiles, each the whole K, in the fullest wave a width gives: the
    width (a multiple of :data:`NARROW_WAVE_WIDTH_STEP` dividing N, from
    :data:`NARROW_WAVE_MIN_WIDTH` to 256) whose tiles are the most of those numbering
    :data:`NARROW_WAVE_MIN_FILL` to all of ``cfg.ctas``, unswapped, with the widest C stage
    and as many ring stages as fit; None where no width gives such a wave (or no ring
    fits)."""
    row_blocks = math.ceil(cfg.m / 64)
    fullest = None
    for width in range(NARROW_WAVE_MIN_WIDTH, min(cfg.n, 256) + 1, NARROW_WAVE_WIDTH_STEP):
        tiles = row_blocks * (cfg.n // width)
        if cfg.n % width or not NARROW_WAVE_MIN_FILL * cfg.ctas <= tiles <= cfg.ctas:
            continue
        if fullest is None or tiles > fullest[1]:
            fullest = (width, tiles)
    if fullest is None:
        return None
    width = fullest[0]
    stage = c_stage_widths(width)[0]
    return with_most_stages(replace(
        cfg, block_m=64, block_n=width, schedule="cooperative", swap_ab=False,
        epilogue_n=0 if stage == width else stage, cluster=1, cluster_n=1, split_k=1,
        split_k_ordered=False, stream_k=False, tail_split=1))


def in_fullest_narrow_wave(cfg: Tiling) -> Tiling:
    """``cfg`` as the tiles of :func:`fullest_narrow_wave` where they are more than
    ``cfg``'s tiles, have :data:`NARROW_WAVE_MIN_STEPS` to :data:`NARROW_WAVE_MAX_STEPS` K
    steps in a mainloop the kernel unrolls (:func:`~.model.unrolled`: the rule rests on
    unrolled steps), and load at most :data:`NARROW_WAVE_MAX_LOAD_RATIO` times the bytes of
    one of ``cfg``'s work units a CTA; ping-pong tiles filling
    :data:`NARROW_WAVE_PINGPONG_FILL` of the CTAs are kept. 16-bit inputs with B as N x K
    (what was measured: conv2d's pointwise layers and the GEMM).

    A short problem whose wide tiles are too few for the SMs was priced, by rules fit while
    the mainloop was a rolled loop, into K parts (each a wait and an add of partial sums)
    or a partial wave; with the mainloop unrolled (:func:`~tvm_tma.kernels.wgmma.k_loop`)
    a 64-row step of a narrow tile is cheap, and tiles as narrow as N / 20 with the whole
    K each, one per SM, run faster. H200, same runs, two repetitions (graph replays),
    conv2d 1x1 layers of MobileNetV2/V3, EfficientNet-B0/B3, ResNet-50 and SD UNet at N=1
    to 64: on the 24 layers the rule was fit on, e.g. N=32 7x7x1152 -> 320 125 tiles of 64
    x 64 1.25x cuDNN against 0.68x (50 of 64 x 160 in 2 parts), 7x7x1152 -> 192 100 of 64
    x 48 1.12 / 0.84, 7x7x160 -> 960 125 of 64 x 192 1.16 / 0.77 (78 of 128 x 160); N=8
    7x7x960 -> 320 70 of 64 x 32 1.16 / 0.73; N=1 14x14x112 -> 672 112 of 64 x 24 1.80 /
    1.06. Held out (the rule written, then measured): 89 layers it changes, 1.17x geomean,
    82 faster (N=1 7x7x232 -> 1392 2.09x, 14x14x136 -> 816 2.06x, N=64 7x7x1152 -> 320
    1.55x, N=32 7x7x2048 -> 512 1.14x), 5 within 0.98-0.99x, and the two the guards since
    keep (0.82x, 0.90x); a random 90 of the 3361 synthetic 1x1 layers it changes 1.17x,
    none under 0.97x. The GEMM (:func:`in_gemm_fullest_narrow_wave`): 100 problems it takes
    1.15x geomean, 95 faster, none under 0.95x (1568 x 640 x 1280 83% of cuBLAS to 128%);
    the step bound from three of 64 K steps that lost (0.65-0.87x). RESULTS.md 6x."""
    if not sixteen_bit_nk(cfg):
        return cfg
    if (cfg.schedule == "pingpong"
            and cfg.num_tiles >= NARROW_WAVE_PINGPONG_FILL * cfg.ctas):
        return cfg
    wave = fullest_narrow_wave(cfg)
    if wave is None or wave.num_tiles <= cfg.num_tiles:
        return cfg
    if not NARROW_WAVE_MIN_STEPS <= wave.k_steps <= NARROW_WAVE_MAX_STEPS:
        return cfg
    if not unrolled(wave.k_steps, wave):
        return cfg
    if unit_load_bytes(wave) > NARROW_WAVE_MAX_LOAD_RATIO * unit_load_bytes(cfg):
        return cfg
    return wave


def in_gemm_fullest_narrow_wave(cfg: Tiling) -> Tiling:
    """The GEMM's :func:`in_fullest_narrow_wave`, on the tiling its other rules leave but
    for clusters and C^T = B A^T, which stay. Where rows straddle L2 sectors or lines the
    GEMM's rules share A or B between tiles in clusters, and narrow tiles of their own
    were mixed there (17 problems 0.85-1.56x, 1.05x geomean, 7 slower); a swap puts 128 of B's rows
    in a slot, and narrow tiles of few rows lost on weight streams (16 x 8192 x 2560
    0.59x, 1 x 6144 x 2560 0.62x, 8 x 4096 x 1024 0.73x, 136 x 5120 x 2048 0.83x, 48 x
    3072 x 1000 0.81x) while winning on small ones (49 x 1280 x 960 1.42x, 98 x 1152 x 192
    1.53x). conv2d's layers, whose clusters come from its own rules (and won: 1.07-2.09x
    on 10 layers), take :func:`in_fullest_narrow_wave`. RESULTS.md 6x."""
    if cfg.cluster_size > 1 or cfg.swap_ab:
        return cfg
    return in_fullest_narrow_wave(cfg)


def unit_load_bytes(cfg: Tiling) -> int:
    """Bytes of A and B one work unit of ``cfg`` loads (its K steps times a slot)."""
    return cfg.steps_per_unit * (cfg.a_tile_bytes + cfg.b_tile_bytes)


def with_narrow_ring(wave: Tiling | None) -> Tiling | None:
    """``wave``'s 64-row tiles of :data:`NARROW_RING_WIDTHS` columns and at least
    :data:`NARROW_RING_MIN_STEPS` K steps on a ring of :data:`NARROW_RING_STAGES` stages
    where more fit. H200, same runs, two repetitions, time with the most stages that fit
    (11-12) / with 8: 1024 x 640 x 1280 (64 x 80, 20 K steps) 1.15-1.16 (78-80% of cuBLAS
    to 90-94%), 1024 x 640 x 1920 (30 steps) 1.21, 512 x 1280 x 1280 1.16, 1000 x 640 x
    1280 1.14-1.16, 1000 x 768 x 1280 (64 x 96) 1.14-1.16; held out 512 x 1536 x 2000 (64 x
    96, 31 steps) 1.18-1.21, 1000 x 640 x 2000 1.12-1.19. Shorter K lost or tied: 512 x
    1536 x 1024 (16 steps) 0.83-0.85, 1024 x 640 x 640 (10) 0.99. Not understood: 7 stages
    ran slower than 6 and 12 (64 x 80: 7.35 against 6.4 us; 64 x 96: 7.7 against 6.8), and
    other widths peak elsewhere (64 x 64: 8 stages 0.77x the 9 or 12 that fit; 64 x 128: 8
    stages 0.86x its 9, 6 as fast as 9; 64 x 112: 7 stages 0.90x its 9, 6 as fast; 64 x
    144: its 8, the most that fit, 1.15x 5 or 6). ``ncu`` (one launch, free clocks) shows
    the same order in the SMs' active cycles (7.9K with 8 stages, 9.4K with 6, 9 or 12,
    11.1K with 7 on 1024 x 640 x 1280) for the same L2 sectors, and the form of the
    mbarrier wait (TVM's try_wait with a 10 ms suspend hint, without it, or test_wait
    spinning) changes nothing. conv2d's layers keep their own ring depth (not measured).

    Understood since (RESULTS.md 6w): the mainloop was a loop of a constant count that
    nvcc unrolled or not by its own measure, and a rolled step pays its slot arithmetic
    (a shift only for 8 or 16 stages) before its MMAs. The kernel now unrolls it
    (:func:`~tvm_tma.kernels.wgmma.k_loop`), where the ring depth is neutral (64 x 48
    tiles of 20 steps: 4.14 us with 8 stages, 4.18 with 12); a mainloop past the unroll
    budget is still a loop, where 8 stages remain the cheap ring."""
    if wave is None or wave.block_m != 64 or wave.block_n not in NARROW_RING_WIDTHS:
        return wave
    if wave.k_steps < NARROW_RING_MIN_STEPS:
        return wave
    if wave.stages <= NARROW_RING_STAGES:
        return wave
    narrow = replace(wave, stages=NARROW_RING_STAGES)
    return narrow if kernel_runs(narrow) else wave
