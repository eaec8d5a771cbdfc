"""Two alternating C stages where a cooperative tile stores its C in pieces: the last
refinement of the GEMM's default tiling and of conv2d's (``GemmConfig.epilogue_buffers``).

A C stage narrower than the tile (128 x 192 in 64-column pieces, 128 x 160 in 32-column
ones, 64 x 128 in 64) makes the epilogue store C piece by piece, and with one stage each
piece waits until the store before it has read the stage: the tile's epilogue is its
stores one after another. With two, a piece is staged while the one before drains. That
matters most where a tile has few K steps to hide its epilogue behind, and still paid on
long ones; it costs the ring a stage or none.

Measured on the H200 (graph replays, same runs, one stage -> two; benchmarks/RESULTS.md
6z2): 39 conv layers 1.08x geomean (1x1 and 3x3, 1 to 90 K steps; N=32 1x1 28x28x32 ->
192 0.94x cuDNN -> 1.15x), one 0.97x (192 x 128 tiles of 16 K steps left 4 ring stages
of 5); 10 GEMMs 1.00-1.05x, none slower (1200 x 512 x 1000 on 64 x 128 tiles 91.8% of
cuBLAS -> 94.9%, 600 x 7000 x 2048 on 128 x 192 86.7% -> 91.3%). Where it would leave 3
ring stages (128 x 256 tiles in 128-column halves) it tied (0.995-0.996x): not taken.
FP8 GEMMs on 128 x 192 tiles (ABBA): 600 x 7000 x 2048 1.07x, 1200 x 2048 x 1024 1.05x,
1000 x 7000 x 4096 1.05x, 600 x 4096 x 2048 1.03x, 384 x 7000 x 2048 0.995x. Swapped tiles
were not measured: left at one stage; so were GEMMs whose one row block streams B
(:func:`.rules.refinements` leaves them).
"""

from __future__ import annotations

from dataclasses import replace

from .model import Tiling, kernel_runs

#: Fewest ring stages two alternating C stages may leave.
ALTERNATING_MIN_STAGES = 4
#: The options by which a caller chose the ring or the C stage (the rule then keeps them).
C_STAGE_CHOICES = frozenset({"stages", "epilogue_n", "epilogue_buffers"})


def with_alternating_c_stages(cfg: Tiling) -> Tiling:
    """``cfg`` with two alternating C stages and the most ring stages that fit beside them
    (never more than it had), where its C stage is narrower than a cooperative unswapped
    tile and at least :data:`ALTERNATING_MIN_STAGES` ring stages fit; else ``cfg``."""
    if (cfg.schedule != "cooperative" or cfg.epilogue_buffers == 2 or cfg.swap_ab
            or cfg.epilogue_cols >= cfg.block_n):
        return cfg
    alternating = replace(cfg, epilogue_buffers=2)
    fitting = [s for s in range(ALTERNATING_MIN_STAGES, cfg.stages + 1)
               if kernel_runs(replace(alternating, stages=s))]
    return replace(alternating, stages=fitting[-1]) if fitting else cfg
