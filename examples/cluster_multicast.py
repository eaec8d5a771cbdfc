"""A 2-CTA cluster that shares its B tiles through TMA multicast, as a Hopper GEMM does.

Run it: ``python examples/cluster_multicast.py`` builds the kernel, assembles it for sm_90a
and, on a Hopper GPU, multiplies random float16 matrices and checks every element of C
against numpy (bit for bit: see "Checking" below).

What the kernel computes
------------------------
``C[M, N] = A[M, K] @ B[K, N]`` (float16 in, float32 out). Each CTA owns one BM x BN block
of C and walks K in BK-wide steps, reading an A tile (BM x BK) and a B tile (BK x BN) per
step. The two CTAs of a cluster own vertically adjacent blocks (rows ``2c*BM`` and
``(2c+1)*BM``) of the same block column, so they need the *same* B tiles.

What multicast buys
-------------------
Without it, both CTAs load every B tile from global memory: two requests for the same
bytes. With ``multicast=rank`` each CTA issues half of each B tile (the dispatch cuts the
tile in two 32-row boxes, CTA ``r`` issuing box ``r``) and the TMA engine writes every box
into *both* CTAs' shared memory, at the same offset, completing the same mbarrier offset in
each. Each CTA still receives the whole tile on its own mbarrier (``arrive.expect_tx`` stays
the whole tile's bytes), but the cluster requests B once. A is not shared and is loaded
per CTA as usual. ``benchmarks/multicast.py`` measures the difference.

The pipeline
------------
A ring of ``STAGES`` (A, B) tile pairs, a :class:`tvm_tma.pipeline.TmaPipeline` shared by
the cluster (``cluster=2``; ring use ``u`` is K step ``u``), with two mbarriers per stage:

* ``full[s]`` (count 1): thread 0 of this CTA arrives with ``expect_tx(A + B bytes)``; the
  TMA completes the A bytes (from this CTA) and the B bytes (half from each CTA).
* ``empty[s]`` (count 2): the stage is free again once *both* CTAs have finished reading
  it, because the peer's multicast writes into this CTA's copy of the stage too. Each CTA,
  after reading stage ``s``, arrives on ``empty[s]`` of both CTAs (a remote arrive through
  ``mapa``); a producer refills stage ``s`` only after its ``empty[s]`` saw both arrivals.
  A release only says "finished reading" (the readers wrote nothing the peer's TMA must
  see), so arrive and wait are the plain CTA-scope ones, as in CUTLASS's ``ClusterBarrier``.

Every mbarrier of the cluster is initialised before any CTA multicasts into a peer
(``fence.mbarrier_init`` + cluster barrier), and no CTA exits while a peer may still
arrive on its barriers (a final cluster barrier).

The compute is deliberately plain (each thread accumulates 32 outputs with CUDA-core FMAs):
this example is about moving the tiles. The WGMMA GEMM that consumes swizzled tiles like
these is the next step.

Checking
--------
Every product of two float16 values is exact in float32, so a float32 FMA chain over ``k``
in order rounds exactly like numpy's ``acc + a * b`` in float32 in the same order: the
result is compared bit for bit.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tvm_tma.demo import hopper_available  # importing tvm_tma registers dispatch="tma"
from tvm_tma.pipeline import TmaPipeline
from tvm_tma.testing.runner import assemble, compile_kernel

BM, BN, BK = 64, 64, 64  # a CTA's block of C, and the K step
STAGES = 4
CLUSTER = 2  # CTAs per cluster, stacked along M: they share each B tile
THREADS = 128
PER_THREAD = BM * BN // THREADS  # outputs each thread accumulates
A_TILE = BM * BK * 2  # bytes
B_TILE = BK * BN * 2
#: Bytes before the rings: the mbarriers (full[STAGES], empty[STAGES]); the rings start on
#: the 1024-byte period of the 128B swizzle.
BARRIER_BYTES = 1024


def gemm_kernel(m: int, n: int, k: int, multicast: bool = True):
    """``C = A @ B`` with (if ``multicast``) each B tile multicast to both CTAs of a cluster."""
    if m % (CLUSTER * BM) or n % BN or k % BK or k // BK < STAGES:
        raise ValueError(f"({m}, {n}, {k}) must be multiples of ({CLUSTER * BM}, {BN}, {BK}) "
                         f"with at least {STAGES} K steps")
    n_blocks, k_steps = n // BN, k // BK
    clusters = m // (CLUSTER * BM) * n_blocks
    # TVM's GEMM-operand layout (128B swizzle) for both rings, as a WGMMA mainloop uses.
    a_layout = mma_shared_layout("float16", 3, (STAGES, BM, BK))
    b_layout = mma_shared_layout("float16", 3, (STAGES, BK, BN))

    # fmt: off
    @T.prim_func
    def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
        A = T.match_buffer(A_ptr, (m, k), "float16", layout=TileLayout(S[m, k]))
        B = T.match_buffer(B_ptr, (k, n), "float16", layout=TileLayout(S[k, n]))
        C = T.match_buffer(C_ptr, (m, n), "float32", layout=TileLayout(S[m, n]))
        T.device_entry()
        cluster = T.cluster_id([clusters])
        rank = T.cta_id_in_cluster([CLUSTER])
        tid = T.thread_id([THREADS])
        dyn = T.alloc_buffer((BARRIER_BYTES + STAGES * (A_TILE + B_TILE),), "uint8",
                             scope="shared.dyn")
        full = T.decl_buffer((STAGES,), "uint64", dyn.data, elem_offset=0)
        empty = T.decl_buffer((STAGES,), "uint64", dyn.data, elem_offset=STAGES)
        a_ring = T.decl_buffer((STAGES, BM, BK), "float16", dyn.data,
                               elem_offset=BARRIER_BYTES // 2, layout=a_layout)
        b_ring = T.decl_buffer((STAGES, BK, BN), "float16", dyn.data,
                               elem_offset=(BARRIER_BYTES + STAGES * A_TILE) // 2,
                               layout=b_layout)
        acc = T.alloc_local((PER_THREAD,), "float32")
        # Ring use u is K step u: slot u % STAGES, released in both CTAs of the cluster.
        ring = TmaPipeline(full, empty, STAGES, cluster=CLUSTER)
        # This CTA's block of C: row block 2 * (cluster // n_blocks) + rank, column block
        # cluster % n_blocks (the same for both CTAs of the cluster).
        m0 = T.meta_var((cluster // n_blocks * CLUSTER + rank) * BM)
        n0 = T.meta_var(cluster % n_blocks * BN)
        col = T.meta_var(tid % BN)
        row0 = T.meta_var(tid // BN)

        if tid == 0:
            ring.init()
        # Every barrier of the cluster exists before any CTA multicasts into a peer.
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()

        if tid == 0:  # prologue: fill every stage
            for s in T.serial(STAGES):
                ring.producer_commit(s, A_TILE + B_TILE)
                Tx.copy_async(a_ring[s, :, :], A[m0:m0 + BM, s * BK:s * BK + BK],
                              dispatch="tma", mbar=ring.full_barrier(s))
                if multicast:
                    Tx.copy_async(b_ring[s, :, :], B[s * BK:s * BK + BK, n0:n0 + BN],
                                  dispatch="tma", mbar=ring.full_barrier(s), multicast=rank)
                else:
                    Tx.copy_async(b_ring[s, :, :], B[s * BK:s * BK + BK, n0:n0 + BN],
                                  dispatch="tma", mbar=ring.full_barrier(s))

        for i in T.unroll(PER_THREAD):
            acc[i] = T.float32(0)
        for step in T.serial(k_steps):
            s = T.meta_var(ring.slot(step))
            ring.consumer_wait(step)
            for kk in T.serial(BK):
                b = T.meta_var(T.Cast("float32", b_ring[s, kk, col]))
                for i in T.unroll(PER_THREAD):
                    acc[i] = acc[i] + T.Cast("float32", a_ring[s, row0 + 2 * i, kk]) * b
            T.cuda.cta_sync()  # every thread of this CTA is done reading stage s
            if tid == 0:
                # Release stage s in both CTAs: the peer's next B load writes here too.
                ring.consumer_release(step)
                if step + STAGES < k_steps:  # refill stage s with K step `step + STAGES`
                    kn = T.meta_var((step + STAGES) * BK)
                    ring.producer_acquire(step + STAGES)
                    ring.producer_commit(step + STAGES, A_TILE + B_TILE)
                    Tx.copy_async(a_ring[s, :, :], A[m0:m0 + BM, kn:kn + BK],
                                  dispatch="tma", mbar=ring.full_barrier(step + STAGES))
                    if multicast:
                        Tx.copy_async(b_ring[s, :, :], B[kn:kn + BK, n0:n0 + BN],
                                      dispatch="tma", mbar=ring.full_barrier(step + STAGES),
                                      multicast=rank)
                    else:
                        Tx.copy_async(b_ring[s, :, :], B[kn:kn + BK, n0:n0 + BN],
                                      dispatch="tma", mbar=ring.full_barrier(step + STAGES))
        for i in T.unroll(PER_THREAD):
            C[m0 + row0 + 2 * i, n0 + col] = acc[i]
        # No CTA exits while its peer may still arrive on its barriers.
        T.cuda.cluster_sync()
    # fmt: on
    return gemm


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 ``a @ b`` accumulated over k in order (how each GPU thread accumulates)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for kk in range(a.shape[1]):
        acc = acc + a32[:, kk:kk + 1] * b32[kk:kk + 1, :]
    return acc


def main(m: int = 512, n: int = 256, k: int = 512) -> int:
    built = compile_kernel(gemm_kernel(m, n, k))
    cubin = assemble(built.cuda_source)
    print(f"assembled for sm_90a: {len(cubin)} bytes of cubin")
    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    rng = np.random.default_rng(2026)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    device = tvm.cuda(0)
    c = tvm.runtime.tensor(np.full((m, n), np.nan, dtype=np.float32), device)
    built.executable["main"](tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c)
    device.sync()
    same = np.array_equal(c.numpy().view(np.uint32), reference(a, b).view(np.uint32))
    print(f"GPU run: {'bit-exact' if same else 'MISMATCH'} ({m * n} elements of C)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
