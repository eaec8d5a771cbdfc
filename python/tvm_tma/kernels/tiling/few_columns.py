"""C^T = B A^T for few columns: the refinement that runs a problem of many rows and at most
256 columns swapped, N in 64-row blocks of the MMAs' M and M cut into as many column blocks
as fill the SMs' rounds, where that keeps more of the SMs busy than the tiling it replaces.

Unswapped, the tiles of such a problem are 64, 128 or 192 rows of M by N rounded up to a
wgmma width: M comes in whole blocks of 64 rows, so the tiles' count steps in coarse
increments (9248 rows: 73 tiles of 128 or 145 of 64 on 132 SMs) and a narrow N pads the
width (64 columns on 128-wide tiles). Swapped, N is the MMAs' M in blocks of 64 (every
N a multiple of 64 without padding) and M their N, any multiple of 8 up to 256: the
width can be chosen so that the tiles fill the SMs' rounds almost exactly. cuBLAS runs
these shapes so (9248 x 192 x 768 with A @ B^T: ``nvjet_sm90_tst_64x224_64x5_1x2``,
tiles of 64 columns by 224 rows, 126 of them).
"""

from __future__ import annotations

import math

from .model import Tiling, sixteen_bit_nk
from .swap import swapped_tile, with_widest_c_rows

#: :func:`on_few_columns`: the most columns (N) it swaps: four 64-row blocks of C^T.
FEW_COLUMNS_MAX_N = 256
#: :func:`on_few_columns`: the swapped tile's rows of C^T (N): one consumer warpgroup.
FEW_COLUMNS_BLOCK_M = 64
#: :func:`on_few_columns`: the most rounds of swapped tiles it takes (M up to this many
#: times the columns a round holds times 256).
FEW_COLUMNS_MAX_ROUNDS = 2
#: :func:`on_few_columns`: the narrowest swapped tile (M rows a tile) it takes.
FEW_COLUMNS_MIN_WIDTH = 64
#: :func:`on_few_columns`: how much more of the rounds' work the swapped tiles must hold
#: (:func:`busy_share`).
FEW_COLUMNS_MIN_GAIN = 0.1


def busy_share(cfg: Tiling) -> float:
    """The share of the work the CTAs' rounds hold that is the problem's: M x N x K over
    the rounds times the CTAs times a work unit's tile and K columns (padding rows and
    columns, and the CTAs idle in a partial last round, are the rest). Stream-K and a
    tail split share the last round's K steps out, so only their padding counts."""
    tile = cfg.block_m * cfg.block_n * cfg.block_k
    if cfg.stream_k or cfg.tail_split > 1:
        held = math.ceil(cfg.num_tiles * cfg.k_steps / cfg.ctas) * cfg.ctas * tile
    else:
        rounds = math.ceil(cfg.work_units / cfg.workers)
        held = rounds * cfg.ctas * cfg.steps_per_unit * tile
    return cfg.m * cfg.n * cfg.k / held


def few_columns_tiling(cfg: Tiling) -> Tiling | None:
    """``cfg``'s problem as ``C^T = B A^T`` on cooperative :data:`FEW_COLUMNS_BLOCK_M` x
    ``width`` tiles, ``width`` the multiple of 8 that cuts M into as many column blocks
    as the fewest rounds (at most :data:`FEW_COLUMNS_MAX_ROUNDS`) of the CTAs hold
    beside N's row blocks, at most 256; with the widest C stage and the most ring stages
    that fit. None where N is wider than :data:`FEW_COLUMNS_MAX_N`, K walks filter taps
    or 8-column pieces (a conv2d's padded taps: the swapped kernel runs neither), the
    CTAs are fewer than N's row blocks, the width would be under
    :data:`FEW_COLUMNS_MIN_WIDTH` or over 256, or nothing fits."""
    if cfg.n > FEW_COLUMNS_MAX_N or cfg.tap_columns or cfg.a_copy_k:
        return None
    columns = cfg.ctas // math.ceil(cfg.n / FEW_COLUMNS_BLOCK_M)
    if columns == 0:  # fewer CTAs than N's row blocks
        return None
    for rounds in range(1, FEW_COLUMNS_MAX_ROUNDS + 1):
        width = math.ceil(cfg.m / (columns * rounds) / 8) * 8
        if width <= 256:
            break
    else:
        return None
    if width < FEW_COLUMNS_MIN_WIDTH:
        return None
    return with_widest_c_rows(swapped_tile(cfg, FEW_COLUMNS_BLOCK_M, width))


def on_few_columns(cfg: Tiling) -> Tiling:
    """``C^T = B A^T`` (:func:`few_columns_tiling`) for a 16-bit problem with B as N x K
    and N at most :data:`FEW_COLUMNS_MAX_N`, where the swapped tiles hold at least
    :data:`FEW_COLUMNS_MIN_GAIN` more of their rounds' work than ``cfg``'s
    (:func:`busy_share`); not on a K walked over filter taps or in 8-column pieces (a
    conv2d's padded taps), nor where ``cfg`` is swapped already or runs in clusters (the
    rules that take them share an operand across straddled rows; not measured swapped).

    H200, same runs, graph replays of back-to-back launches, ``cfg`` / the swapped tiles
    (the rule written after these; % of cuBLAS or cuDNN after): GEMMs 9248 x 192 x 768
    (73 tiles of 128 x 192, 55% busy; 129 of 64 x 216, 98%) 1.48x (117%), 25088 x 64 x
    256 (131 tiles of 192 x 128, half of them N's padding; 131 of 64 x 192) 1.42x (127%),
    4096 x 192 x 8192 (64 ping-pong tiles in 2 ordered parts, 73%; 129 of 64 x 96) 1.27x
    (91%; since taken by :func:`.model.in_one_column_block`, 1.43x these, 118-122%),
    6272 x 128 x 480 1.17x (123%), 3136 x 256 x 1024 1.14x (136%); conv2d 1x1
    layers at N=32: Inception's 17x17x768 -> 192 1.48x (0.80x cuDNN to 1.19x), 35x35x192
    -> 64 (two rounds of 64 x 152) 1.17x, DenseNet's 14x14x480 -> 128 1.18x. Left: 16384
    x 128 x 4096 (128 tiles of 128 x 128, 97% busy; swapped 0.96-0.98x). Held out: 14
    GEMMs 1.05-1.50x (1.25x geomean); conv2d, 43 pointwise layers 1.07-1.62x (1.28x
    geomean) and 16 3x3 ones 1.08-1.45x; none slower (RESULTS.md 6z8)."""
    if cfg.swap_ab or not sixteen_bit_nk(cfg) or cfg.cluster_size > 1:
        return cfg
    candidate = few_columns_tiling(cfg)
    if candidate is None or busy_share(candidate) < busy_share(cfg) + FEW_COLUMNS_MIN_GAIN:
        return cfg
    return candidate
