"""The rules for problems of a few K steps: one K block as narrow as a K of at most 32
(:func:`fitted_k_block`), and the last refinements: the smallest plain tiles that make one
wave (:func:`in_short_wave`), else ping-pong tiles (:func:`in_one_step_pingpong` for one K
step, :func:`in_short_pingpong` for 4 to 8)."""

from __future__ import annotations

from dataclasses import replace

from .half_rows import HALF_ROWS, QUARTER_TILES, WIDE_HALF_ROWS
from .model import Tiling, kernel_runs, sixteen_bit_nk

#: :func:`fitted_k_block`: the narrower K blocks it takes, narrowest first (16-bit
#: elements: one 32- or 64-byte swizzle row), where K fits one of them; else 64.
FITTED_K_BLOCKS = (16, 32)
#: :func:`in_short_wave`: the most K steps of a problem it applies to (K of 512 in 16-bit
#: elements; the measured problems had 1 to 8).
SHORT_MAX_STEPS = 8
#: :func:`in_short_wave`: the most K steps of a problem it applies to where the tiles
#: before run in ordered K parts (each part a wait on the one before and an add: on 20
#: problems of 9 to 16 steps, 64 x 64 tiles of the whole K ran 1.14x geomean, 18 faster;
#: held out, 18 of 18 faster, 1.38x; RESULTS.md 6z12).
SHORT_ORDERED_MAX_STEPS = 16
#: :func:`in_short_wave`: where M is at most 64, C^T = B A^T is kept on more of its 128 x
#: ceil8(M) tiles than this share of the CTAs (4 x 5984 x 32 on 47: 0.98x, 46 x 6120 x 16
#: on 48: 0.94x, 4 x 10832 x 8 on 85: 0.80x the plain tiles; on 9 to 25, 1.00-1.13x).
SHORT_SWAP_MAX_FILL = 0.25
#: :func:`in_short_wave`: the plain tilings it weighs, smallest tile first: 64 x 64, 64 x
#: 128, 128 x 128 (cooperative) and 64 x 256 (ping-pong). The 64 x 128 and 128 x 128 tiles
#: store C in 64-column pieces through two alternating C stages (8 and 5 ring stages beside
#: them), which ran faster than one on 17 of 18 short problems (0.99-1.12x, RESULTS.md
#: 6z12); the 64 x 64 tile's C stage is the whole tile.
SHORT_TILINGS: tuple[dict, ...] = (
    {**QUARTER_TILES, "block_m": 64, "schedule": "cooperative", "epilogue_buffers": 1},
    {**HALF_ROWS, "stages": 8, "epilogue_buffers": 2},
    {"block_m": 128, "block_n": 128, "stages": 5, "epilogue_n": 64,
     "schedule": "cooperative", "epilogue_buffers": 2},
    {**WIDE_HALF_ROWS, "epilogue_buffers": 1},
)
#: :func:`in_short_pingpong`: the K steps of the problems it applies to (fewer: mixed,
#: 0.86-1.11x; 9 to 12: 0.94-1.05x, about even; 16: 0.97x).
SHORT_PINGPONG_STEPS = range(4, 9)
#: :func:`in_short_pingpong`: the tiling it takes, ping-pong 128 x 128 (each consumer
#: warpgroup a whole tile, its C store under the other's MMAs).
SHORT_PINGPONG = {"block_m": 128, "block_n": 128, "stages": 5, "epilogue_n": 64,
                  "schedule": "pingpong", "epilogue_buffers": 1}


def fitted_k_block(k: int) -> int:
    """The K block for a problem of K elements: the narrowest of :data:`FITTED_K_BLOCKS`
    that holds all of K (K of at most 32: one K step as with 64), else 64, the default.
    ``GemmConfig.for_problem`` takes it for 16-bit inputs with B as N x K unless the caller
    chose ``block_k`` or 256-row tiles.

    A K block is one box row of each operand's loads and one ring slot; past K the TMA
    fills the box with zeros, and those bytes are still written to shared memory, waited
    for and multiplied: K = 8 in a 64-wide block is 8 times the operand bytes a tile needs.
    H200, graph replays, same runs, the fitted block / 64 (RESULTS.md 6z16): K of at most
    32, one K step either way, 17 problems, all faster, 1.07-1.33x (K = 8 on eleven:
    303 x 8680 x 8 1.17x, 2004 x 752 x 8 1.33x, 9790 x 4616 x 8 1.08x; K = 16 1.10x and
    1.11x, K = 24 1.07-1.18x, K = 32 1.12x). Where a narrower block adds K steps it was
    mixed: K = 40 to 48 in three blocks of 16 0.96-1.03x (six problems), 72 to 112 in five
    to seven of 16 0.72-1.03x, 136 to 224 in five to seven of 32 0.77-1.08x (the step
    count also moves the rules after the model: 6305 x 1464 x 112 left its 192 x 192
    tiles, 0.76x); so a longer K keeps 64."""
    for block in FITTED_K_BLOCKS:
        if k <= block:
            return block
    return 64


def short_wave(cfg: Tiling, ctas: int) -> Tiling | None:
    """The first tiling of :data:`SHORT_TILINGS` whose tiles of ``cfg``'s problem number at
    most ``ctas`` (one wave, no cluster, no swap, no K split), on ``ctas`` CTAs; None
    where none does."""
    for tiling in SHORT_TILINGS:
        plain = replace(cfg, **tiling, ctas=ctas, cluster=1, cluster_n=1, swap_ab=False,
                        split_k=1, split_k_ordered=False, stream_k=False, tail_split=1)
        if plain.num_tiles <= ctas and kernel_runs(plain):
            return plain
    return None


def in_short_wave(cfg: Tiling, ctas: int) -> Tiling:
    """``cfg`` as the tiles of :func:`short_wave` on ``ctas`` CTAs (the GPU's SMs, which
    clusters of 4 leave fewer of) where the problem has at most :data:`SHORT_MAX_STEPS` K
    steps (:data:`SHORT_ORDERED_MAX_STEPS` where ``cfg`` runs ordered K parts) and ``cfg``
    is in clusters, swapped for few rows, or has fewer tiles; a swap of at most 64 rows on
    more than :data:`SHORT_SWAP_MAX_FILL` of the CTAs, and the swap for few columns
    (:func:`.few_columns.on_few_columns`, measured on short problems too), stay. 16-bit
    inputs with B as N x K (what was measured).

    A problem of a few K steps runs a few microseconds: each CTA's launch, one round trip
    of its loads, a few MMAs and its C store; the more SMs share the tiles, the less each
    stores, as long as all run in one round. The rules fit on longer problems gave such
    problems fewer, larger tiles: 2x1 or 2x2 clusters where the rows straddle L2 lines
    (a cluster's launch and handshakes outlast what sharing B saves on a step or two:
    64 x 128 tiles in 2x1 clusters ran slower than alone on 20 of 21 such problems),
    C^T = B A^T on 128-row tiles of few rows, or 64 x 256 ping-pong tiles.

    H200, graph replays, same runs, the rule's tiles / the default before (RESULTS.md
    6z12). Fit, 21 problems of 1 to 10 K steps, 16 it changes: 1.20x geomean, 0.99-1.56x
    (131 x 1320 x 136: 63 tiles of 64 x 64 against 2x2 clusters of 22, 66% of cuBLAS to
    102%; 109 x 2696 x 440 1.45x, 237 x 4480 x 64 1.42x, 91 x 7792 x 8 1.31x). Held out, 34
    it then changed (before the swap guard): 1.18x, the two losses the swaps the guard now
    keeps (4 x 10832 x 8 on 85 tiles 0.80x, 46 x 6120 x 16 on 48 0.94x); the other 32
    1.00-1.55x, 1.21x geomean, 5 under 95% of cuBLAS where 17 were. Drawn on the final
    rule, 24 problems: 1.22x geomean, 22 faster, 1147 x 920 x 8 0.99x, 103 x 11400 x 136
    0.91x (a swap of 103 rows on 90 tiles). Then the 64 x 128 and 128 x 128 tiles took
    two alternating C stages (:data:`SHORT_TILINGS`), and a last draw of 16 problems it
    changes ran 1.15x geomean, 12 faster, 0.94-0.97x on three (2476 x 600 x 440: 7 K
    steps whose 2x1 clusters had shared B). Where no tiling of the four makes one wave
    (529 x 6664 x 216, 1375 x 1552 x 608) the default stays, and
    :func:`in_short_pingpong` may apply."""
    most_steps = SHORT_ORDERED_MAX_STEPS if cfg.split_k_ordered else SHORT_MAX_STEPS
    if not sixteen_bit_nk(cfg) or cfg.k_steps > most_steps:
        return cfg
    wave = short_wave(cfg, ctas)
    if wave is None:
        return cfg
    if cfg.swap_ab and cfg.m >= cfg.n:
        return cfg  # the swap for few columns (its tiles measured on short problems too)
    if cfg.swap_ab and cfg.m <= 64 and cfg.num_tiles > SHORT_SWAP_MAX_FILL * ctas:
        return cfg
    if cfg.cluster_size > 1 or cfg.swap_ab or wave.num_tiles > cfg.num_tiles:
        return wave
    return cfg


def in_one_step_pingpong(cfg: Tiling, ctas: int) -> Tiling:
    """``cfg``'s tiles of one K step in 2x1 clusters, where they take more than one round,
    as ping-pong tiles without a cluster where 64 x 256 ones fill at most one round of
    warpgroups (two a CTA, on ``ctas`` CTAs): 64 x 256 (:data:`.half_rows.WIDE_HALF_ROWS`)
    where the K block is 16 or 32 (K at most 32, :func:`fitted_k_block`), else 128 x 128
    (:data:`SHORT_PINGPONG`). 16-bit inputs with B as N x K, no swap or K split.

    With one K step a tile is its loads, four MMAs and its C store, and the store is most
    of it; the wave model's widest tiles in clusters (sharing B, which one step hardly
    reads) make two rounds of stores, ping-pong warpgroups one, each storing its tile
    while the other multiplies. Which ping-pong tile stores faster followed K: the 64 x
    256 one where the operands are a few bytes a row, the 128 x 128 one (fewer operand
    bytes a product) for K of 40 to 64. H200, graph replays, same runs, the defaults'
    time / the rule's (RESULTS.md 6z16): fit, 16 problems (M 260-820, N 4680-11248,
    K 8-56) 1.21x geomean, 0.94-1.52x (303 x 8680 x 8 1.52x); held out, 24 drawn where the
    rule applies, 1.19x, 1.05-1.58x, all faster (261 x 8840 x 8 1.58x, 80% of cuBLAS to
    126%; either tile alone there, 1.16x). Under 95% of cuBLAS before / after: 13 / 3 of
    the fit, 21 / 10 held out (K = 40 in a block of 64 the most of them)."""
    if not sixteen_bit_nk(cfg) or cfg.k_steps != 1 or cfg.cluster_size == 1:
        return cfg
    if (cfg.swap_ab or cfg.split_k > 1 or cfg.stream_k or cfg.tail_split > 1
            or cfg.work_units <= cfg.workers):
        return cfg
    wide = replace(cfg, **WIDE_HALF_ROWS, epilogue_buffers=1, ctas=ctas, cluster=1,
                   cluster_n=1)
    if wide.num_tiles > 2 * ctas:
        return cfg
    pingpong = wide if cfg.block_k <= 32 else replace(wide, **SHORT_PINGPONG)
    return pingpong if kernel_runs(pingpong) else cfg


def in_short_pingpong(cfg: Tiling, ctas: int) -> Tiling:
    """``cfg``'s cooperative tiles of 128 rows and 192 or 256 columns, without a cluster,
    swap or K split, as ping-pong 128 x 128 tiles (:data:`SHORT_PINGPONG`) where the
    problem has :data:`SHORT_PINGPONG_STEPS` K steps and more tiles than ``ctas`` (the
    GPU's SMs, as :func:`in_short_wave` takes them). 16-bit inputs with B as N x K.

    With a few K steps a tile's C store is a large share of its time, and a cooperative
    CTA stores between mainloops; ping-pong warpgroups store one tile while the other
    multiplies the next (the reason CUTLASS has the schedule). H200, same runs, graph
    replays, time of the default / of ping-pong 128 x 128 (RESULTS.md 6z12). Fit: 2048 x
    8192 x 256 1.22-1.24, 4096 x 2048 x 256 1.18-1.19, 13663 x 2872 x 288 1.09, 6000 x
    3000 x 384 (128 x 192) 1.08, 4096 x 4096 x 512 1.06, 2048 x 8192 x 512 1.04; at 10 and
    12 steps 1.05 (8434 x 8504 x 640, 3000 x 5000 x 768), at 16 0.97. Held out (drawn with
    4 to 12 steps): 1.02-1.15 on 11 of 14, 0.94-0.98 on three, two of them at 9 and 10
    steps (12140 x 1192 x 624, 9301 x 704 x 544), so the bound is 8; of the 10 at 4 to 8
    steps, 1.08x geomean, 625 x 13648 x 368 (128 x 192) 0.95. In 2x1 clusters (straddled
    rows) the defaults won (9316 x 10416 x 264 0.64x), and on 1 to 3 K steps the
    ping-pong tiles were mixed (0.86-1.11x)."""
    if not sixteen_bit_nk(cfg) or cfg.k_steps not in SHORT_PINGPONG_STEPS:
        return cfg
    if (cfg.schedule, cfg.block_m) != ("cooperative", 128) or cfg.block_n not in (192, 256):
        return cfg
    if (cfg.cluster_size > 1 or cfg.swap_ab or cfg.split_k > 1 or cfg.stream_k
            or cfg.tail_split > 1 or cfg.num_tiles <= ctas):
        return cfg
    pingpong = replace(cfg, **SHORT_PINGPONG)
    return pingpong if kernel_runs(pingpong) else cfg
