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
(``full_barrier(it)`` is ``full[it % stages]``, provably inside the barrier buffer), and lets
a consumer that skips tiles (a ping-pong schedule) jump its counter without touching a
barrier.

The class is a ``T.meta_class``: construct it inside a ``@T.prim_func`` from two
``(stages,)`` uint64 shared buffers; its methods expand inline.
"""

from __future__ import annotations

from tvm.script import tirx as T


@T.meta_class
class TmaPipeline:
    """Full/empty mbarrier ring of ``stages`` slots between one TMA producer and consumers.

    ``full`` and ``empty`` are ``(stages,)`` uint64 buffers in shared memory; ``consumers``
    is the number of arrivals that release a slot (one per consumer warpgroup in the GEMM,
    one per consumer thread in a plain-load kernel). ``init`` must run on one thread, and
    be followed by a CTA barrier (and ``fence.mbarrier_init`` in a cluster) before use.
    """

    def __init__(self, full, empty, stages: int, consumers: int = 1):
        if stages < 2:
            raise ValueError(f"stages={stages}: a ring needs at least 2 slots")
        if consumers < 1:
            raise ValueError(f"consumers={consumers}: a slot needs at least one reader")
        self.full = full
        self.empty = empty
        self.stages = stages
        self.consumers = consumers

    @T.inline
    def init(self):
        for s in T.unroll(self.stages):
            T.ptx.mbarrier.init.shared.b64(self.full.ptr_to([s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(self.empty.ptr_to([s]), T.uint32(self.consumers))

    def full_barrier(self, it):
        """The mbarrier the TMA loads of ring use ``it`` complete on (``mbar=`` of the copy)."""
        return self.full.ptr_to([it % self.stages])

    @T.inline
    def producer_acquire(self, it):
        # Use u = it // stages of the slot may start once use u - 1 was released.
        T.cuda.mbarrier_wait(self.empty.ptr_to([it % self.stages]),
                             (it // self.stages + 1) % 2)

    @T.inline
    def producer_commit(self, it, nbytes):
        # Announce the bytes the loads of this use will deliver; the TMA unit counts them down.
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(self.full.ptr_to([it % self.stages]),
                                                   T.uint32(nbytes))

    @T.inline
    def consumer_wait(self, it):
        T.cuda.mbarrier_wait(self.full.ptr_to([it % self.stages]), it // self.stages % 2)

    @T.inline
    def consumer_release(self, it):
        T.ptx.mbarrier.arrive.shared.b64(self.empty.ptr_to([it % self.stages]), T.uint32(1))
