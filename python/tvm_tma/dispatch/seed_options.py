"""The seed features as options of ``copy_async(..., dispatch="tma")``: cluster multicast,
tensor reductions, L2 prefetch and the map's L2 promotion.

Each is read and checked here, where the copy's direction and the kernel's cluster are
known; what they change in the plan is the planner's (``planner/multicast.py`` splits a
multicast tile among the cluster's CTAs, ``reduce`` keeps the tensor's element type).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm

from ..planner.errors import refuse
from ..planner.proofs import Prover, as_int
from ..planner.reductions import REDUCE_OPS

#: ``l2_promotion=`` values (bytes the L2 fetches per miss) -> the driver's enum.
L2_PROMOTION = {"none": 0, 0: 0, 64: 1, 128: 2, 256: 3}
#: A cluster holds at most 16 CTAs: the multicast mask is 16 bits.
MAX_CLUSTER = 16


@dataclass(frozen=True)
class Multicast:
    """Where a load lands: every CTA of ``mask``. ``rank``/``ctas``: the tile is split among
    the cluster's ``ctas`` CTAs and this CTA issues slice ``rank`` (None: the whole tile)."""

    mask: object  # a Python int or a 16-bit expression
    ctas: int | None = None
    rank: object | None = None


def _plain(value):
    if isinstance(value, tvm.ir.StringImm):
        return value.value
    if type(value).__name__ == "IntImm":
        return int(value.value)
    return value


def read_multicast(value, direction: str, cluster_ranks: tuple, prover: Prover
                   ) -> Multicast | None:
    """``multicast=``: the CTA's rank in a 1-D cluster (split the tile among the cluster),
    a static mask of CTAs (every issuing CTA sends the whole tile to them), or a 16-bit mask
    expression."""
    if value is None:
        return None
    if direction != "g2s":
        raise refuse("multicast", "multicast is for global->shared loads (a store writes one "
                     "tensor)")
    if not cluster_ranks:
        raise refuse("multicast", f"multicast={value} needs a cluster kernel: declare "
                     "rank = T.cta_id_in_cluster([n]) (and T.cluster_id(...)) first")
    value = _plain(value)
    sizes = [_cluster_size(rank, prover) for rank in cluster_ranks]
    cluster = 1
    for size in sizes:
        cluster = cluster * size if size is not None and cluster is not None else None
    if isinstance(value, tvm.tirx.Var) and any(value.same_as(r) for r in cluster_ranks):
        if len(cluster_ranks) != 1:
            raise refuse("multicast", f"multicast={value} splits the tile along one axis of a "
                         f"{len(cluster_ranks)}-D cluster; pass a mask of the CTAs instead")
        if sizes[0] is None or not 2 <= sizes[0] <= MAX_CLUSTER:
            raise refuse("multicast", f"multicast={value}: the cluster size {sizes[0]} must be "
                         f"static and 2..{MAX_CLUSTER}")
        _check_every_cta_issues(value, sizes[0], prover)
        return Multicast((1 << sizes[0]) - 1, sizes[0], value)
    if isinstance(value, tvm.ir.expr.Expr) and as_int(prover.simplify(value)) is not None:
        value = as_int(prover.simplify(value))  # a constant expression is a static mask
    if isinstance(value, bool) or isinstance(value, (float, str)):
        raise refuse("multicast", f"multicast={value!r} is neither a CTA mask nor the CTA's "
                     "rank in the cluster (T.cta_id_in_cluster)")
    if isinstance(value, int):
        if cluster is not None and not 0 < value < 1 << cluster:
            raise refuse("multicast", f"multicast mask {value:#b} names CTAs outside the "
                         f"{cluster}-CTA cluster (bits 0..{cluster - 1})")
        if not 0 < value <= 0xFFFF:
            raise refuse("multicast", f"multicast mask {value:#x} must be 1..0xffff")
        return Multicast(value)
    dtype = str(getattr(getattr(value, "ty", None), "dtype", ""))
    if dtype not in ("uint16", "int16", "uint32", "int32"):
        raise refuse("multicast", f"multicast={value} of type {dtype or type(value).__name__} "
                     "is not a CTA mask (an integer of at most 16 bits of CTAs)")
    return Multicast(value)


def _check_every_cta_issues(rank, size: int, prover: Prover) -> None:
    """A tile dealt out among the cluster arrives only if every CTA issues its share: a copy
    under a guard that leaves some rank out would leave every CTA's mbarrier short of the
    tile's bytes, waiting forever."""
    if prover.unreachable:
        return
    for excluded in range(size):
        if prover.prove(rank != excluded):
            raise refuse("multicast", f"multicast={rank} deals the tile out among all {size} "
                         f"CTAs of the cluster, but this copy never runs where {rank} == "
                         f"{excluded} (its guards exclude it): that share would never arrive "
                         "and every CTA would wait on its mbarrier forever; issue the copy "
                         "from every CTA, or pass a mask and load the whole tile from one CTA")


def cluster_shape(cluster_ranks: tuple, prover: Prover) -> tuple:
    """``((rank var, size or None), ...)``: the kernel's CTA-in-cluster ids and their extents
    (None where the extent is not a static ``[0, n)``)."""
    return tuple((rank, _cluster_size(rank, prover)) for rank in cluster_ranks)


def _cluster_size(rank, prover: Prover) -> int | None:
    rng = prover.ranges.get(rank)
    if rng is None:
        return None
    return as_int(rng.extent) if as_int(rng.min) == 0 else None


def read_reduce(config, direction: str) -> str | None:
    """``reduce=<op>`` (or apache-tvm's spelling ``use_tma_reduce=<op>``) on a store."""
    values = {key: _plain(config.get(key)) for key in ("reduce", "use_tma_reduce")
              if config.get(key) is not None}
    if not values:
        return None
    if len(set(values.values())) > 1:
        raise refuse("reduce", f"reduce={values['reduce']!r} and use_tma_reduce="
                     f"{values['use_tma_reduce']!r} disagree")
    (key, op), *_ = values.items()
    if direction != "s2g":
        raise refuse("reduce", f"{key}={op!r}: a reduction combines shared data into global "
                     "memory, so it is for shared->global copies")
    if op not in REDUCE_OPS:
        raise refuse("reduce", f"{key}={op!r} is not one of {list(REDUCE_OPS)}")
    return op


def read_prefetch(value, direction: str, mbar) -> bool:
    """``prefetch=True``: bring the region into L2 instead of loading it (the shared tile
    only shapes the boxes; nothing is written there and nothing completes)."""
    value = _plain(value)
    if value is None or value is False or value == 0:
        return False
    if value is not True and value != 1:
        raise refuse("config", f"prefetch={value!r} must be True or False")
    if direction != "g2s":
        raise refuse("config", "prefetch=True is for global->shared copies (it prefetches "
                     "the global region into L2)")
    if mbar is not None:
        raise refuse("config", "a prefetch writes no shared memory and completes on nothing: "
                     "drop mbar= (a later load of the same region takes it)")
    return True


def read_l2_promotion(value) -> int:
    """``l2_promotion=``: "none", 64, 128 (the default) or 256 bytes per L2 fill."""
    value = _plain(value)
    if value is None:
        return L2_PROMOTION[128]
    key = value.lower() if isinstance(value, str) else value
    if isinstance(key, str) and key.endswith("b") and key[:-1].isdigit():
        key = int(key[:-1])
    if isinstance(key, bool) or key not in L2_PROMOTION:
        raise refuse("config", f"l2_promotion={value!r} must be one of 'none', 64, 128, 256")
    return L2_PROMOTION[key]
