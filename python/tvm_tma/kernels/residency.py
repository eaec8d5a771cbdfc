"""How many CTAs of one SM each a GPU keeps resident at once, by cluster size.

A cluster's CTAs run on one GPC, so a GPU holds fewer CTAs in clusters than it has SMs
where its GPCs do not divide into whole clusters, and which SMs a chip has enabled differs
from chip to chip. Two things depend on the count: a grid whose CTAs wait on each other
(stream-K, ordered K parts) hangs unless every CTA is resident, so a launch asks the
driver (:func:`resident_on_device`, through the C++ runtime's
``tvm_tma.max_active_clusters``: ``cuOccupancyMaxActiveClusters`` for the kernel's threads
and shared memory) and :func:`.stream_k.check_resident` refuses more; and a persistent grid
larger than the count runs its last clusters after the others, so the default tiling sizes
its grid of 2x2 clusters by the measured count (:func:`resident_ctas`;
:func:`.tiling.in_two_by_two`), where no device is asked.
"""

from __future__ import annotations

#: CTAs (of one SM each: the GEMM's ring fills shared memory) that clusters of 4 CTAs
#: keep resident, by SM count, as measured (``benchmarks/cluster_residency.cu``): an
#: H200's 132 SMs hold 30 such clusters (``cudaOccupancyMaxActiveClusters`` at 200 and
#: 227 KiB of shared memory a CTA, and a launch of 33 started 12 CTAs late) and 66 of 2.
RESIDENT_IN_CLUSTERS_OF_4 = {132: 120}


def resident_ctas(sm_count: int, cluster_size: int) -> int | None:
    """CTAs of one SM each resident at once in clusters of ``cluster_size`` on a GPU of
    ``sm_count`` SMs, from the measurements (no device asked): every SM for clusters of 1
    or 2 (an SM pair is one TPC), the measured count for 4
    (:data:`RESIDENT_IN_CLUSTERS_OF_4`), None where it was not measured."""
    if cluster_size <= 2:
        return sm_count
    if cluster_size == 4:
        return RESIDENT_IN_CLUSTERS_OF_4.get(sm_count)
    return None


def resident_on_device(ordinal: int, cluster_size: int, threads: int,
                       shared_bytes: int) -> int:
    """CTAs resident at once on CUDA device ``ordinal`` in clusters of ``cluster_size``
    CTAs of ``threads`` threads and ``shared_bytes`` of dynamic shared memory each, as its
    driver answers (``cuOccupancyMaxActiveClusters`` times the cluster size)."""
    import tvm_ffi

    from .. import _runtime

    _runtime.load_runtime()
    query = tvm_ffi.get_global_func("tvm_tma.max_active_clusters")
    return int(query(ordinal, cluster_size, threads, shared_bytes)) * cluster_size
