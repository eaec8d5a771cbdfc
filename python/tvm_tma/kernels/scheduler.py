"""Which output tile, and which part of K, a persistent worker computes next.

The grid is persistent: ``cfg.workers`` workers (CTAs, or clusters of
``cfg.cluster_size`` CTAs)
walk the work units, worker ``w`` taking units ``w, w + workers, w + 2 workers, ...``
(:func:`unit_of`, :func:`rounds`). A work unit is a (cluster of output tiles, K part) pair:
with ``split_k`` parts each tile is ``split_k`` units, adjacent in the order, so the parts
of one tile run at the same time and their reduce-add stores meet in L2.

Tiles are numbered in grouped order (:func:`tile_coordinates`), so the workers running at
one moment share A row blocks and B column blocks in L2; the CTAs of a cluster along M take
vertically adjacent row blocks of one column block (:func:`unit_coordinates`), the ones that
need the same B tile, which they then load once and multicast; those of a cluster along N
take horizontally adjacent column blocks of one row block, which share the A tile.

With ``stream_k`` the workers first take whole tiles as above, every full wave
(:attr:`~.gemm_config.GemmConfig.stream_k_dp_tiles`); the K steps of the remaining tiles
(tile after tile in the same grouped order) are cut into one run per worker
(:func:`stream_k_run`), and a worker walks the tiles its run touches
(:func:`stream_k_tiles`), computing the K steps of each that are in its run
(:func:`stream_k_segment`). A tile cut between runs is finished by the worker whose run
holds its K step 0 (:mod:`.stream_k`).

Producer and consumers call the same functions on the same unit numbers, which is what
keeps their ring counters (``it = j * steps + k``, :func:`unit_steps`) in step without any
communication. The
functions are TVMScript expression builders: called inside a ``@T.prim_func`` (through
``T.meta_var``) on loop variables, they return TIR expressions; a kernel with another
order (a grouped GEMM's problem table) writes its own with the same signatures.
"""

from __future__ import annotations

import math

from tvm.script import tirx as T

from .gemm_config import GemmConfig


def rounds(cfg: GemmConfig) -> int:
    """Units a worker takes at most: ``ceil(work_units / workers)``; a worker's last round
    may find no unit (``unit_of(...) >= cfg.work_units``) and skip it."""
    return math.ceil(cfg.work_units / cfg.workers)


def unit_of(cfg: GemmConfig, worker, j):
    """The work unit of round ``j`` of worker ``worker`` (round-robin over the workers)."""
    return worker + j * cfg.workers


def unit_steps(cfg: GemmConfig, j, part):
    """(first ring use, first K step, K steps) of a worker's round-``j`` unit, which holds
    K part ``part``: part 0 runs :attr:`~.gemm_config.GemmConfig.part_shortfall` steps
    fewer than the others and starts at step 0, part ``p > 0`` starts at ``p * steps -
    shortfall``. Every unit of one worker has the same length when the shortfall is not
    0 (one unit per worker, or one part per worker), so round ``j``'s ring uses start at
    ``j * count``; with equal parts that is ``j * steps`` as ever."""
    first, count = part_range(cfg.steps_per_unit, cfg.part_shortfall, part)
    return j * count, first, count


def part_range(steps: int, short: int, part):
    """(first K step, K steps) of K part ``part`` (an expression) when every part runs
    ``steps`` K steps but part 0, which runs ``short`` fewer (the device twin of
    :func:`.gemm_config.short_part_first`): plain products where the parts are equal."""
    if short == 0:
        return part * steps, steps
    return T.max(part * steps - short, 0), T.if_then_else(part == 0, steps - short, steps)


def tile_coordinates(tile, m_blocks: int, n_blocks: int, group_m: int):
    """(row block, column block) of output tile ``tile`` in grouped order.

    Tiles go column by column within a group of ``group_m`` row blocks, group after group,
    so consecutive tiles (run by neighbouring CTAs at the same moment) reuse the group's A
    row blocks and each B column block ``group_m`` times while they are in L2.
    """
    per_group = group_m * n_blocks
    first = tile // per_group * group_m
    rows = T.min(m_blocks - first, group_m)
    within = tile % per_group
    return first + within % rows, within // rows


def unit_coordinates(cfg: GemmConfig, unit, rank):
    """(row block, column block, K part) of work unit ``unit`` for cluster rank ``rank``:
    the CTAs of a cluster along M take vertically adjacent row blocks of one column block,
    those of a cluster along N horizontally adjacent column blocks of one row block (the
    last cluster's later CTAs may get a block past M or N: their loads read zeros, their
    stores are skipped)."""
    split_k = cfg.split_k
    tile, part = unit // split_k, unit % split_k
    mb, nb = cluster_block(cfg, *tile_coordinates(tile, cfg.m_groups, cfg.n_groups,
                                                  cfg.group_m), rank)
    return mb, nb, part


def cluster_block(cfg: GemmConfig, mg, ng, rank):
    """(row block, column block) of cluster rank ``rank`` in the cluster tile (``mg``,
    ``ng``) of the tile order (whose blocks are ``cluster`` rows by ``cluster_n``
    columns): rank ``r`` is row ``r % cluster`` and column ``r // cluster`` of it
    (:func:`cluster_place`)."""
    if cfg.cluster_n == 1:
        return mg * cfg.cluster + rank, ng
    if cfg.cluster == 1:
        return mg, ng * cfg.cluster_n + rank
    row, column = cluster_place(cfg, rank)
    return mg * cfg.cluster + row, ng * cfg.cluster_n + column


def cluster_place(cfg: GemmConfig, rank):
    """(row, column) of cluster rank ``rank`` among the cluster's ``cluster`` x
    ``cluster_n`` tiles: the CTAs of one row share A tiles, those of one column B
    tiles."""
    return rank % cfg.cluster, rank // cfg.cluster


def tail_unit(cfg: GemmConfig, worker):
    """(worker tile, K part) of worker ``worker``'s last-round unit with
    :attr:`~.gemm_config.GemmConfig.tail_split` (the unit exists where ``worker <
    tail_tiles * tail_split``): the ``tail_split`` parts of a tile left over are adjacent
    workers, the tiles in the grouped order after the full waves."""
    parts = cfg.tail_split
    return cfg.tail_rounds * cfg.workers + worker // parts, worker % parts


def tail_steps(cfg: GemmConfig, part):
    """(first K step, K steps) of K part ``part`` of a tile left over (the device twin of
    :meth:`~.gemm_config.GemmConfig.tail_part_steps`: part 0 the short one)."""
    return part_range(cfg.tail_steps_per_part, cfg.tail_shortfall, part)


def stream_k_run(cfg: GemmConfig, worker):
    """(first, end) K steps of worker ``worker``'s stream-K run, numbered over the whole
    problem (step ``g`` is K step ``g % k_steps`` of worker tile ``g // k_steps``): the
    stream-K tail's :attr:`~.gemm_config.GemmConfig.iterations` cut into one run per
    worker, runs differing by at most one step. Before it the worker computes its
    :attr:`~.gemm_config.GemmConfig.stream_k_dp_rounds` whole tiles in the plain order."""
    return cfg.stream_k_start(worker), cfg.stream_k_start(worker + 1)


def stream_k_tiles(cfg: GemmConfig, first, end):
    """The range of worker tiles a stream-K run ``first .. end - 1`` touches (its first
    and last may be partial)."""
    steps = cfg.k_steps
    return first // steps, (end + steps - 1) // steps


def stream_k_segment(cfg: GemmConfig, tile, first, end):
    """(begin, end) K steps of ``tile`` inside the run ``first .. end - 1``: the whole tile
    (0, k_steps) but at the run's two ends."""
    steps = cfg.k_steps
    return T.max(first - tile * steps, 0), T.min(end - tile * steps, steps)


def stream_k_walk(cfg: GemmConfig, worker):
    """(first, end, lo, hi): worker ``worker``'s stream-K run (:func:`stream_k_run`) and the
    range of worker tiles it touches (:func:`stream_k_tiles`), what its producer and its
    consumers both walk."""
    first, end = stream_k_run(cfg, worker)
    return (first, end, *stream_k_tiles(cfg, first, end))


def stream_k_run_tile(cfg: GemmConfig, tile, first, end, rank):
    """(first ring use, first K step, end K step, row block, column block) of ``tile`` in
    the stream-K run ``first .. end - 1`` for cluster rank ``rank``: what the producer
    loads and the consumers compute of it (:func:`stream_k_segment`,
    :func:`stream_k_tile_coordinates`). The run's ring uses follow the worker's whole
    tiles: ``stream_k_dp_rounds * k_steps + (step - first)``."""
    kb, ke = stream_k_segment(cfg, tile, first, end)
    it0 = cfg.stream_k_dp_rounds * cfg.k_steps + tile * cfg.k_steps + kb - first
    return (it0, kb, ke, *stream_k_tile_coordinates(cfg, tile, rank))


def stream_k_tile_coordinates(cfg: GemmConfig, tile, rank):
    """(row block, column block) of cluster rank ``rank`` in stream-K worker tile
    ``tile``: the grouped order of :func:`tile_coordinates` over cluster row groups, the
    cluster's CTAs on vertically adjacent row blocks (as :func:`unit_coordinates`)."""
    return cluster_block(cfg, *tile_coordinates(tile, cfg.m_groups, cfg.n_groups,
                                                 cfg.group_m), rank)
