"""How many CTAs of one SM each a GPU keeps resident at once, by cluster size.

A cluster's CTAs run on one GPC, so a GPU holds fewer CTAs in clusters than it has SMs
where its GPCs do not divide into whole clusters. Two things depend on the count: a grid
whose CTAs wait on each other (stream-K, ordered K parts) hangs unless every CTA is
resident (:func:`.stream_k.check_resident`), and a persistent grid larger than the count
runs its last clusters after the others (:func:`.tiling.in_two_by_two` sizes its grid
to it).
"""

from __future__ import annotations

#: CTAs (of one SM each: the GEMM's ring fills shared memory) that clusters of 4 CTAs
#: keep resident, by SM count: the H100's and H200's 132 SMs hold 30 such clusters
#: (``cudaOccupancyMaxActiveClusters`` at 200 and 227 KiB of shared memory a CTA, and a
#: launch of 33 that started 12 CTAs late; 66 clusters of 2).
RESIDENT_IN_CLUSTERS_OF_4 = {132: 120}


def resident_ctas(sm_count: int, cluster_size: int) -> int | None:
    """CTAs of one SM each resident at once in clusters of ``cluster_size`` on a GPU of
    ``sm_count`` SMs: every SM for clusters of 1 or 2, the measured count for 4
    (:data:`RESIDENT_IN_CLUSTERS_OF_4`), None where it was not measured."""
    if cluster_size <= 2:
        return sm_count
    if cluster_size == 4:
        return RESIDENT_IN_CLUSTERS_OF_4.get(sm_count)
    return None
