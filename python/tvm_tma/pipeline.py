"""A TMA producer/consumer ring as a TVMScript building block (CUTLASS's ``PipelineTmaAsync``).

A ring of ``stages`` shared-memory slots carries tiles from a producer thread, which fills
them with TMA loads, to consumers, which read them (WGMMA, or plain loads). Two mbarriers
per slot tell each side when it may go on:

* ``full[s]``: "slot s holds data". Initialised with one arrival. The producer arrives on it
  with ``arrive.expect_tx(bytes)`` and the TMA unit completes the transaction bytes as the
  boxes land; the phase flips once both happened.
* ``empty[s]``: "slot s may be overwritten". Initialised with ``consumers`` arrivals; each
  consumer arrives once it has finished reading the slot.

Both sides count their uses of the ring with one integer, ``it`` (the producer's k-th load,
the consumer's k-th read, over every tile the CTA works on); slot and phase follow from it:
``s = it % stages`` and ``use = it // stages``. An mbarrier's phase parity flips each time
it completes, so ``full[s]`` completes its ``use``-th time with parity ``use % 2``. The
protocol, step by step, for use ``u`` of slot ``s``::

    producer                                      consumer
    --------                                      --------
    acquire(it): wait empty[s], parity (u+1)%2    wait(it): wait full[s], parity u%2
       (u = 0 passes at once: a fresh barrier       (returns once the TMA bytes of this
        counts its "previous" phase, parity 1,       use have landed)
        as complete)                              ... read slot s ...
    commit(it, bytes): arrive.expect_tx on        release(it): arrive on empty[s]
       full[s]                                       (the consumers' arrivals complete
    TMA loads into slot s, mbar=full_barrier(it)     empty[s]'s use u; the producer's
                                                     acquire of use u+1 waits for it)

The producer waits for use ``u - 1`` of ``empty[s]`` before it overwrites slot ``s`` for use
``u``; the consumers wait for use ``u`` of ``full[s]``. Neither side can lap the other by
two uses, which is what keeps one parity bit enough.

Counting uses with a plain integer keeps every index an expression the dispatch can bound
(``full_barrier(it)`` is ``full[first + it % stages]``, provably inside the barrier buffer),
and lets a consumer that skips tiles (a ping-pong schedule) jump its counter without
touching a barrier.

Three variations of the same ring:

* **Several rings in one barrier buffer** (``first=``): ring ``p`` uses barriers
  ``first .. first + stages - 1`` (one ring per producer thread in the streaming copy).
* **A ring drained by TMA stores** (``empty=None``): when the thread that fills the slots
  also empties them with TMA stores, a slot may be refilled once the store that read it
  has finished reading; that is the thread's bulk async-group, not an mbarrier.
  ``producer_acquire(it, pending_stores=n)`` waits with ``cp.async.bulk.wait_group.read n``
  (at most ``n`` newer store groups may still be reading), the role CUTLASS's
  ``PipelineTmaStore`` plays.
* **A ring shared by a cluster** (``cluster=2``): with multicast loads, CTA ``r``'s TMA
  also writes the peer's copy of slot ``s``, so a slot is empty only once the consumers of
  *every* CTA released it. ``empty[s]`` then counts ``consumers * cluster`` arrivals and
  ``consumer_release`` arrives on ``empty[s]`` of every CTA of the cluster (``mapa`` +
  ``mbarrier.arrive.shared::cluster``).
  The kernel must make every CTA's barriers visible before the first multicast
  (``fence.mbarrier_init`` + cluster barrier) and keep every CTA alive until its peers
  stopped arriving (a cluster barrier before exit).

The class is a ``T.meta_class``: construct it inside a ``@T.prim_func`` from two
``(stages,)`` uint64 shared buffers; its methods expand inline.
"""

from __future__ import annotations

from tvm.script import tirx as T


@T.meta_class
class TmaPipeline:
    """Full/empty mbarrier ring of ``stages`` slots between one TMA producer and consumers.

    ``full`` and ``empty`` are uint64 buffers in shared memory holding this ring's barriers
    at ``first .. first + stages - 1`` (``empty`` is None for a ring drained by the
    producer's own TMA stores); ``consumers`` is the number of arrivals per CTA that
    release a slot (one per consumer warpgroup in the GEMM); ``cluster`` the CTAs that
    share every slot through multicast. ``init`` must run on one thread, and be followed by
    a CTA barrier (``fence.mbarrier_init`` and a cluster barrier in a cluster) before use.
    """

    def __init__(self, full, empty, stages: int, consumers: int = 1, first=0,
                 cluster: int = 1):
        if stages < 2:
            raise ValueError(f"stages={stages}: a ring needs at least 2 slots")
        if consumers < 1:
            raise ValueError(f"consumers={consumers}: a slot needs at least one reader")
        if cluster < 1 or cluster > 16:
            raise ValueError(f"cluster={cluster}: 1..16 CTAs")
        if empty is None and cluster > 1:
            raise ValueError("a ring drained by TMA stores (empty=None) is one CTA's: "
                             f"cluster={cluster} needs empty barriers")
        self.full = full
        self.empty = empty
        self.stages = stages
        self.consumers = consumers
        self.first = first
        self.cluster = cluster

    def slot(self, it):
        """The slot (index into the ring's tile buffer) of ring use ``it``."""
        return self.first + it % self.stages

    def phase(self, it):
        """Parity of the barrier phase that use ``it`` of its slot completes."""
        return it // self.stages % 2

    def full_barrier(self, it):
        """The mbarrier the TMA loads of ring use ``it`` complete on (``mbar=`` of the copy)."""
        return self.full.ptr_to([self.slot(it)])

    @T.inline
    def init(self):
        for s in T.unroll(self.stages):
            T.ptx.mbarrier.init.shared.b64(self.full.ptr_to([self.first + s]), T.uint32(1))
            if self.empty is not None:
                T.ptx.mbarrier.init.shared.b64(self.empty.ptr_to([self.first + s]),
                                               T.uint32(self.consumers * self.cluster))

    def producer_acquire(self, it, pending_stores=None):
        """Wait until slot ``slot(it)`` may be overwritten by use ``it``.

        With empty barriers: use ``u = it // stages`` may start once use ``u - 1`` was
        released (parity ``(u + 1) % 2``; a fresh barrier passes ``u = 0`` at once). A ring
        drained by TMA stores instead waits until at most ``pending_stores`` bulk groups
        committed after the store of use ``it - stages`` are still reading shared memory.

        In a cluster too the wait is the plain (CTA-scope acquire) one, as in CUTLASS's
        ``ClusterBarrier``: a release only says "finished reading"; the consumers wrote
        nothing the producer's TMA must see.
        """
        if self.empty is None:
            if pending_stores is None:
                raise ValueError("a ring drained by TMA stores acquires with "
                                 "pending_stores=<store groups committed since>")
            T.evaluate(T.ptx.cp.async_.bulk.wait_group.read(pending_stores))
        elif pending_stores is not None:
            raise ValueError("pending_stores= is for rings drained by TMA stores (empty=None)")
        else:
            T.evaluate(T.cuda.mbarrier_wait(self.empty.ptr_to([self.slot(it)]),
                                            (it // self.stages + 1) % 2))

    @T.inline
    def producer_commit(self, it, nbytes):
        # Announce the bytes the loads of this use will deliver; the TMA unit counts them down.
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(self.full_barrier(it), T.uint32(nbytes))

    @T.inline
    def consumer_wait(self, it):
        T.cuda.mbarrier_wait(self.full_barrier(it), self.phase(it))

    def consumer_release(self, it, rank=None):
        """Tell the producer(s) slot ``slot(it)`` has been read (one arrival per consumer).

        In a cluster every CTA's copy of the slot is written by every CTA's multicast, so
        each consumer releases it in all of them: from this thread (``rank=None``, one
        ``mapa`` and arrive per CTA in turn) or, as CUTLASS does, spread over threads: the
        thread that passes ``rank=r`` arrives on CTA ``r``'s barrier only, and threads
        ``0 .. cluster - 1`` together release the slot everywhere at once.
        """
        if self.empty is None:
            raise ValueError("a ring drained by TMA stores has no empty barriers to arrive "
                             "on: its producer acquires with pending_stores=")
        barrier = self.empty.ptr_to([self.slot(it)])
        if self.cluster == 1:
            T.evaluate(T.ptx.mbarrier.arrive.shared.b64(barrier, T.uint32(1)))
            return
        # mapa writes into a register declared here.
        mapped = T.alloc_local([1], "uint32")
        shared_address = T.cuda.cvta_generic_to_shared(barrier)
        for peer in range(self.cluster) if rank is None else (rank,):
            T.evaluate(T.ptx.mapa.shared__cluster.u32(mapped[0], shared_address,
                                                      T.Cast("uint32", peer)))
            T.evaluate(T.ptx.mbarrier.arrive.shared__cluster.b64(mapped[0]))
