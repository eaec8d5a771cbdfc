"""Stream-K's fix-up: finishing a tile whose K steps several CTAs computed.

With ``GemmConfig(stream_k=True)`` every worker (a CTA, or a cluster whose CTAs run
vertically adjacent tiles together) computes one run of the problem's K steps
(:func:`.scheduler.stream_k_run`), so a tile may be cut between runs: worker ``b``
computes its K steps ``0 .. e`` at the end of its run, workers ``b + 1 ..`` the rest, each
at the start of its own. The worker holding K step 0 (the tile's *owner*) finishes it,
because it reaches the tile last: the others computed their parts first thing, while it
was still on its earlier tiles, so it rarely waits. In a cluster each CTA hands over and
gathers its own row block: slot ``worker * cluster + rank``.

* A **peer** (a run that starts inside a tile) writes its fp32 accumulators to its slot of
  the workspace ``partials[cta, :]`` (``block_m * block_n`` floats; register ``i`` of
  consumer thread ``t`` at ``i * consumer_threads + t``, so each register's stores are
  coalesced), meets the other consumers at a named barrier, and one thread publishes the
  slot: ``st.release.gpu`` of 1 into ``flags[cta]``. A CTA publishes at most one slot per
  launch (only its first tile can be one it did not start).
* The **owner**, after its own K steps, takes the peers in order: one thread spins on
  ``ld.acquire.gpu`` of the peer's flag until it reads 1 and sets it back to 0 for the
  next launch; a named barrier hands the acquire to the other consumer threads, which add
  the peer's slot into their accumulators. Then the tile's ordinary epilogue runs.

Each peer's run starts at ``stream_k_start(peer)``; the peers of the tile ending at step
``tile_end`` are the workers after the owner whose runs start before it (at most
:attr:`~.gemm_config.GemmConfig.stream_k_peers`). Waiting is safe because a worker
publishes before it ever waits, and waits only on workers after it: the persistent grid
(``ctas`` at most the SM count, one CTA per SM) has them all resident, and even without
that the lowest-numbered waiting worker's peers can always finish their first tile.

The flags start at zero (:func:`workspace` allocates them so) and every launch leaves them
at zero, so back-to-back launches need no reset.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tvm.script import tirx as T

from .gemm_config import WARPGROUP, GemmConfig
from .residency import resident_ctas, resident_on_device

#: Named barrier the fix-up's consumer threads meet at (the cooperative epilogue's: the
#: same threads, in the same order).
FIXUP_BARRIER = 1


def workspace_shapes(cfg: GemmConfig) -> tuple[tuple[int, int], tuple[int]]:
    """Shapes of the fp32 partial-tile slots (one per CTA) and the int32 flags (one per
    CTA; ordered split-K's: one per output tile, :mod:`.split_k`, and no slots)."""
    if cfg.order_waits:
        return (0, 0), (cfg.order_flags,)
    return (cfg.ctas, cfg.partial_floats), (cfg.ctas,)


def workspace(cfg: GemmConfig, device) -> list:
    """The two extra kernel arguments of a stream-K launch on ``device``: the partial-tile
    slots (contents never read before written) and the flags (zeros; every launch leaves
    them zero). Empty for any other configuration. Keep them for later launches of the
    same configuration: reusing them is what a benchmark should time. Refuses a grid
    larger than ``device`` holds at once, as its driver answers for the kernel's cluster,
    threads and shared memory (:func:`check_resident`)."""
    import tvm

    if not (cfg.stream_k or cfg.order_waits):
        return []
    check_resident(cfg, device.multi_processor_count,
                   resident_on_device(device.index, cfg.cluster_size, cfg.threads,
                                      cfg.shared_bytes))
    slots, flags = workspace_shapes(cfg)
    flag_tensor = tvm.runtime.tensor(np.zeros(flags, dtype=np.int32), device)
    if cfg.order_waits:
        return [flag_tensor]
    return [tvm.runtime.tensor(np.zeros(slots, dtype=np.float32), device), flag_tensor]


def check_resident(cfg: GemmConfig, sm_count: int | None, resident: int | None = None
                   ) -> None:
    """Refuse a stream-K (or ordered split-K) grid larger than the GPU holds at once: its
    owners spin on flags that other CTAs set, so every CTA must be resident at once (one
    per SM: the ring fills shared memory; in clusters of 4, 120 of 132 SMs). ``resident``:
    the CTAs the device's driver keeps resident in ``cfg``'s clusters
    (:func:`.residency.resident_on_device`), else the measured count
    (:func:`.residency.resident_ctas`). ``sm_count`` None (no device) checks nothing."""
    waits = ("stream_k" if cfg.stream_k else "split_k_ordered" if cfg.split_k_ordered
             else "tail_split" if cfg.tail_split > 1 else "")
    if waits:
        refuse_grid_past_gpu(waits, cfg.ctas, sm_count, cfg.cluster_size, resident)


def refuse_grid_past_gpu(waits: str, ctas: int, sm_count: int | None,
                         cluster_size: int = 1, resident: int | None = None) -> None:
    """Refuse ``ctas`` CTAs that wait on each other (``waits`` names the option) on a GPU
    of ``sm_count`` SMs in clusters of ``cluster_size``, of which ``resident`` CTAs run at
    once (None: the measured count): they must all be resident at once. ``sm_count`` None
    checks nothing."""
    if sm_count is None:
        return
    if resident is None:
        resident = resident_ctas(sm_count, cluster_size)
    if resident is None:
        raise ValueError(f"{waits} in clusters of {cluster_size} CTAs on a GPU of "
                         f"{sm_count} SMs: its CTAs wait on each other, so every CTA must "
                         f"be resident at once, and how many clusters of {cluster_size} "
                         f"this GPU holds at once is not known here")
    if ctas > resident:
        where = ("the SM count" if resident == sm_count else
                 f"{resident}: a GPC holds whole clusters of {cluster_size} CTAs")
        raise ValueError(f"{waits} with ctas={ctas} on a GPU of {sm_count} SMs: its CTAs "
                         f"wait on each other, so every CTA must be resident at once "
                         f"(ctas at most {where})")


def check_workspace_left_clean(cfg: GemmConfig, arguments: list) -> None:
    """Raise if a stream-K launch left a flag set (the next launch's owners would then
    take a stale slot for a fresh one): every published slot must have been gathered; or
    an ordered split-K launch did (the next launch's adders would not wait for its
    store)."""
    if cfg.order_waits:
        flags = arguments[0].numpy()
        if flags.any():
            option = "split_k_ordered" if cfg.split_k_ordered else "tail_split"
            raise RuntimeError(f"ordered K parts ({option}) left flags set at tiles "
                               f"{np.flatnonzero(flags).tolist()}: a part-0 store was not "
                               f"followed by every other part's add")
        return
    if cfg.stream_k:
        check_stream_k_flags_clear(arguments[1].numpy())


def check_stream_k_flags_clear(flags: np.ndarray) -> None:
    """Raise if a stream-K launch left a CTA's flag set: a published partial tile that no
    owner gathered (the next launch's owner would take it for a fresh one)."""
    if flags.any():
        raise RuntimeError(f"stream-K left flags set at CTAs {np.flatnonzero(flags).tolist()}: "
                           f"a published partial tile was never gathered")


def make_fixup(cfg: GemmConfig) -> tuple[Callable[..., None], Callable[..., None]]:
    """``(publish, gather)``:

    * ``publish(partials, flags, acc, worker, rank, thread)``: a peer's part of a tile
      into its CTA's slot (``worker * cluster + rank``), then the flag;
    * ``gather(partials, flags, acc, flag, worker, rank, tile_end, thread, run=None)``: the
      owner adds the slot of rank ``rank`` of every peer worker of the tile ending at K
      step ``tile_end`` into ``acc`` (in a cluster, each CTA gathers its own row block's).

    ``thread`` numbers the consumer threads from 0; ``flag`` is a one-element int32 local.
    ``run`` = (first step of the runs, steps they share, most peers of a tile): worker
    ``w``'s run starts at ``first + w * steps // workers``. None takes ``cfg``'s
    (:meth:`~.gemm_config.GemmConfig.stream_k_start`, ``stream_k_peers``), constants of
    the problem; a kernel whose tile count is known only on the device (a grouped GEMM)
    passes expressions of it.
    """
    consumer_threads = WARPGROUP * cfg.consumers
    registers = cfg.accumulators
    workers, cluster = cfg.workers, cfg.cluster

    def run_of(run):
        if run is None:
            return cfg.stream_k_dp_tiles * cfg.k_steps, cfg.iterations, cfg.stream_k_peers
        return run

    # fmt: off
    @T.inline
    def publish(partials, flags, acc, worker, rank, thread):
        slot = T.meta_var(worker * cluster + rank)
        for i in T.unroll(registers):
            partials[slot, i * consumer_threads + thread] = acc[i]
        # Every consumer's stores precede the release of the flag.
        T.ptx.bar.sync(T.Cast("uint32", FIXUP_BARRIER), consumer_threads)
        if thread == 0:
            T.ptx.st.release.gpu.global_.b32(flags.ptr_to([slot]), 1)

    @T.inline
    def gather(partials, flags, acc, flag, worker, rank, tile_end, thread, run=None):
        first, steps, peers = T.meta_var(run_of(run))
        for p in T.serial(peers):
            peer = T.meta_var(worker + 1 + p)
            slot = T.meta_var((worker + 1 + p) * cluster + rank)
            if peer < workers and first + peer * steps // workers < tile_end:
                if thread == 0:
                    flag[0] = 0
                    while flag[0] == 0:
                        T.ptx.ld.acquire.gpu.global_.b32(flag[0], flags.ptr_to([slot]))
                    flags[slot] = 0
                # The acquire precedes every consumer's loads of the slot.
                T.ptx.bar.sync(T.Cast("uint32", FIXUP_BARRIER), consumer_threads)
                for i in T.unroll(registers):
                    acc[i] = acc[i] + partials[slot, i * consumer_threads + thread]
    # fmt: on
    return publish, gather
