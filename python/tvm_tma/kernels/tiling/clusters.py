"""Clusters of 4 CTAs, refinements of the model's 2x1 clusters and plain tiles: 2x2
clusters (each CTA loads half of A's rows and half of B's) and clusters of 4 along N sharing
a skinny problem's A, both on the CTAs a GPU keeps resident in clusters of 4
(:mod:`..residency`)."""

from __future__ import annotations

from dataclasses import replace

from ..residency import resident_ctas
from .model import Tiling, kernel_runs, rows_straddle_lines, sixteen_bit_nk

#: :func:`sharing_a_in_fours`: CTAs along N that share A's rows, the tile width it takes
#: and the most row blocks of 128 (what was measured).
A_SHARING_CLUSTER = 4
A_SHARING_BLOCK_N = 128
A_SHARING_MAX_ROW_BLOCKS = 2
#: :func:`sharing_a_in_fours`: the fewest column blocks (5 lost: 8 CTAs a row block, 3 idle).
A_SHARING_MIN_COLUMN_BLOCKS = 12
#: :func:`sharing_a_in_fours`: the fewest K steps a work unit (what was measured).
A_SHARING_MIN_STEPS = 16


def in_two_by_two(cfg: Tiling) -> Tiling:
    """``cfg``'s 2x1 clusters as 2x2 ones (each CTA then loads half of A's rows and half of
    B's a K step, where a 2x1 cluster loads all of A's: 128 x 128 tiles 128 rows against
    192) on as many CTAs as a GPU of ``cfg.ctas`` SMs keeps resident in clusters of 4
    (:func:`.residency.resident_ctas`: 120 of 132, and not where the count was not
    measured; a grid of 33 such clusters runs 3 after the others, 10000 x 1000 x 1000 59 us
    against 39 us for 2x1 clusters on 132 CTAs), where the operands' rows straddle L2 lines, the
    problem is at least as wide as it is tall (column blocks at least the row blocks), and
    both run their tiles in one round. Cooperative tiles of 128 or 192 rows of 16-bit
    inputs with B as N x K (what was measured; the 64-row tiles of
    :func:`_half_rows_sharing_b` keep their 2x1 clusters).

    H200, same runs, 2x2 / 2x1 time: 600 x 2224 x 3000 0.76-0.86, 600 x 5680 x 3000 0.84,
    384 x 5680 x 5680 0.85-0.89, 256 x 5000 x 3000 0.87-0.89, 500 x 3000 x 3000 0.88,
    384 x 3072 x 1000 0.91-0.96, 700 x 5000 x 1112 0.96-0.99, and 0.98-1.05 (as fast, within
    the runs' noise) on nine more: 1200 x 2224 x 4000, 1200 x 3000 x 1000 and 4000, 900 x
    3336 x 4000, 500 x 7000 x 5680, 1000 x 2224 x 2000, 384 x 11520 x 1112, 300 x 11520 x
    5680, 777 x 3336 x 1112. Taller problems lost (1536 x 1024 x 2000 1.035, 2500 x 600 x
    3000 1.05: 12 and 20 row blocks on 8 and 5 column blocks), so they keep 2x1."""
    if (cfg.cluster, cfg.cluster_n) != (2, 1) or cfg.schedule != "cooperative":
        return cfg
    if cfg.block_m < 128:
        return cfg
    if cfg.split_k != 1 or cfg.stream_k or cfg.tail_split != 1 or cfg.work_units > cfg.workers:
        return cfg
    if not sixteen_bit_nk(cfg) or not rows_straddle_lines(cfg):
        return cfg
    if cfg.n_blocks < cfg.m_blocks:
        return cfg
    square = _in_resident_clusters(cfg, cluster=2, cluster_n=2)
    return square if square is not None else cfg


def _in_resident_clusters(cfg: Tiling, cluster: int, cluster_n: int) -> Tiling | None:
    """``cfg`` in ``cluster`` x ``cluster_n`` clusters on the CTAs the GPU keeps resident
    in clusters of that size (:func:`.residency.resident_ctas`), where that count was
    measured, the kernel runs it and its work units still take one round; else None (the
    2x2 and 1x4 rules, :func:`in_two_by_two` and :func:`sharing_a_in_fours`)."""
    resident = resident_ctas(cfg.ctas, cluster * cluster_n)
    if resident is None:
        return None
    clustered = replace(cfg, cluster=cluster, cluster_n=cluster_n, ctas=resident)
    if clustered.work_units > clustered.workers or not kernel_runs(clustered):
        return None
    return clustered


def sharing_a_in_fours(cfg: Tiling) -> Tiling:
    """``cfg``'s 128 x 128 tiles in clusters of 4 along N (each CTA loads a quarter of A's
    rows and multicasts them, :data:`A_SHARING_CLUSTER`) on as many CTAs as the GPU keeps
    resident in clusters of 4 (:func:`.residency.resident_ctas`: 120 of 132). A skinny
    problem's few row blocks of A are read again by every column block: a 128 x 128 tile's
    K step loads as many bytes of A as of B, and the cluster cuts A's to a quarter (what
    cuBLAS's 4x1 clusters do on these shapes). Taken where M is at most
    :data:`A_SHARING_MAX_ROW_BLOCKS` row blocks, N at least
    :data:`A_SHARING_MIN_COLUMN_BLOCKS` column blocks, a unit at least
    :data:`A_SHARING_MIN_STEPS` K steps, the rows straddle 128-byte L2 lines, and the units
    run in one round both without a cluster and in clusters of 4; cooperative or ping-pong
    tiles of 16-bit inputs with B as N x K (what was measured).

    H200, same runs, time without / with the clusters: 100 x 10000 x 1000 1.17-1.30, 200 x
    3000 x 3000 1.23-1.24, 112 x 5000 x 3000 1.22, 200 x 1536 x 5000 1.21-1.24, 100 x 5000 x
    3000 1.14-1.20 (the rule written after these); held out, 12 problems all 0.99x or
    faster, 1.15-1.18x geomean (80 x 10000 x 3000 1.35-1.46, 100 x 12000 x 5680 1.26-1.40).
    Left out because they lost: units past one round of the clusters (96 x 8192 x 4096,
    128 x 4096 x 4096, 128 x 8192 x 8192, 256 x 4096 x 4096: 128 units, 0.56-0.73), rows of
    whole lines (80 x 1536 x 2048, 256 x 3000 x 2048, 128 x 12000 x 2048, 200 x 5120 x
    1536, 128 x 5120 x 5120, 80 x 400 x 2048: 0.87-0.97; one won, 80 x 12288 x 4096 1.37),
    5 column blocks (80 x 640 x 3000: 8 CTAs a row block, 3 idle, 0.82-0.87)."""
    if cfg.block_m != 128 or cfg.block_n != A_SHARING_BLOCK_N or not sixteen_bit_nk(cfg):
        return cfg
    if (cfg.cluster, cfg.cluster_n) != (1, 1) or cfg.stream_k or cfg.tail_split != 1:
        return cfg
    if not rows_straddle_lines(cfg) or cfg.steps_per_unit < A_SHARING_MIN_STEPS:
        return cfg
    if cfg.m_blocks > A_SHARING_MAX_ROW_BLOCKS or cfg.n_blocks < A_SHARING_MIN_COLUMN_BLOCKS:
        return cfg
    if cfg.work_units > cfg.workers:
        return cfg
    shared = _in_resident_clusters(cfg, cluster=1, cluster_n=A_SHARING_CLUSTER)
    return shared if shared is not None else cfg
