"""Kernels that use the seed options of ``Tx.copy_async(..., dispatch="tma")`` (issue 12):
cluster multicast with box splitting, tensor reductions, L2 prefetch and L2 promotion.

Each is written as a kernel author writes it; the CPU tests check their PTX and assemble them,
the GPU tests run them bit-exactly against numpy.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

THREADS = 128


def tile_layout(dtype: str, rows: int, cols: int, swizzle: int):
    """Row-major, or TVM's GEMM-operand shared layout with the given swizzle mode."""
    if not swizzle:
        return TileLayout(S[rows, cols])
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

    return mma_shared_layout(dtype, swizzle, (rows, cols))


def element_bytes(dtype: str) -> int:
    return tvm.DataType(dtype).bits // 8


def multicast_kernel(rows: int, cols: int, ctas: int, clusters: int = 2, swizzle: int = 0,
                     dtype: str = "float16", split: bool = True):
    """Cluster ``c`` of ``clusters`` (each of ``ctas`` CTAs) loads rows ``[c*rows, (c+1)*rows)``
    of A into every CTA's tile; CTA ``r`` writes its tile to ``Out[c, r]``.

    ``split``: every CTA issues its share with ``multicast=rank`` (box splitting). Otherwise
    CTA 0 alone loads the whole tile for all of them with the static mask of the cluster.
    """
    return multicast_issuers_kernel("split" if split else "one", ctas, swizzle, rows, cols,
                                    clusters, dtype)


def multicast_issuers_kernel(mode: str, ctas: int = 2, swizzle: int = 0, rows: int = 64,
                             cols: int = 64, clusters: int = 2, dtype: str = "float16"):
    """Cluster ``c`` (of ``ctas`` CTAs) loads rows ``[c*rows, (c+1)*rows)`` of A into every
    CTA's tile, each CTA's mbarrier armed for the whole tile; CTA ``r`` writes its tile to
    ``Out[c, r]``. Who issues what:

    * ``"one"``: CTA 0 alone, the whole tile with the mask of the cluster;
    * ``"slices"``: every CTA its own ``rows / ctas`` rows (from global and into its own rows
      of the tile), with the mask of the cluster;
    * ``"split"``: ``multicast=rank`` (the dispatch deals the boxes out);
    * ``"duplicate"``: every CTA the whole tile with the mask (refused).
    """
    layout = tile_layout(dtype, rows, cols, swizzle)
    tile_bytes = rows * cols * element_bytes(dtype)
    everyone = (1 << ctas) - 1
    part = rows // ctas
    split, slices, duplicate = mode == "split", mode == "slices", mode == "duplicate"

    # fmt: off
    @T.prim_func
    def multicast(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (clusters * rows, cols), dtype,
                           layout=TileLayout(S[clusters * rows, cols]))
        Out = T.match_buffer(Out_ptr, (clusters, ctas, rows, cols), dtype,
                             layout=TileLayout(S[clusters, ctas, rows, cols]))
        T.device_entry()
        cluster = T.cluster_id([clusters])
        rank = T.cta_id_in_cluster([ctas])
        tid = T.thread_id([THREADS])
        dyn = T.alloc_buffer((tile_bytes + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((rows, cols), dtype, dyn.data, layout=layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=tile_bytes // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        # Every CTA's mbarrier is initialised before any CTA multicasts into it.
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        if tid == 0:
            # Each CTA receives the whole tile, whoever issues which part of it.
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(tile_bytes))
            first = T.meta_var(cluster * rows)
            mine = T.meta_var(rank * part)
            if split:
                Tx.copy_async(tile[:, :], A[first:first + rows, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]), multicast=rank)
            elif slices:
                Tx.copy_async(tile[mine:mine + part, :],
                              A[first + mine:first + mine + part, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]), multicast=everyone)
            elif duplicate:
                Tx.copy_async(tile[:, :], A[first:first + rows, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]), multicast=everyone)
            elif rank == 0:
                Tx.copy_async(tile[:, :], A[first:first + rows, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]), multicast=everyone)
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for i in T.serial(tid, rows * cols, step=THREADS):
            Out[cluster, rank, i // cols, i % cols] = tile[i // cols, i % cols]
        # No CTA exits while a peer may still write into its shared memory.
        T.cuda.cluster_sync()
    # fmt: on
    return multicast


def reduce_kernel(op: str, dtype: str, rows: int = 16, cols: int = 64, ctas: int = 2,
                  shared_target: bool = False, alias: bool = False):
    """CTA ``c`` stages ``X[c]`` in shared memory and reduces it into ``G`` with ``op``:
    into its own rows ``[c*rows, (c+1)*rows)`` of G, or, ``shared_target``, every CTA into
    the same rows (split-K accumulation). ``alias`` spells the option as apache-tvm does."""
    option = {"use_tma_reduce" if alias else "reduce": op}
    g_rows = rows if shared_target else ctas * rows

    # fmt: off
    @T.prim_func
    def reduce(G_ptr: T.handle, X_ptr: T.handle):
        G = T.match_buffer(G_ptr, (g_rows, cols), dtype, layout=TileLayout(S[g_rows, cols]))
        X = T.match_buffer(X_ptr, (ctas, rows, cols), dtype,
                           layout=TileLayout(S[ctas, rows, cols]))
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([THREADS])
        tile = T.alloc_buffer((rows, cols), dtype, scope="shared.dyn", align=128,
                              layout=TileLayout(S[rows, cols]))
        for i in T.serial(tid, rows * cols, step=THREADS):
            tile[i // cols, i % cols] = X[cta, i // cols, i % cols]
        # The generic-proxy writes must be visible to the TMA (async proxy) before it reads.
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            first = T.meta_var(0 if shared_target else cta * rows)
            Tx.copy_async(G[first:first + rows, :], tile[:, :], dispatch="tma", **option)
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return reduce


def prefetch_kernel(rows: int = 64, cols: int = 64, tiles: int = 4, dtype: str = "float16"):
    """CTA ``t`` prefetches tile ``t`` of A into L2, then loads it and writes it to Out."""
    tile_bytes = rows * cols * element_bytes(dtype)

    # fmt: off
    @T.prim_func
    def prefetch(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (tiles * rows, cols), dtype,
                           layout=TileLayout(S[tiles * rows, cols]))
        Out = T.match_buffer(Out_ptr, (tiles * rows, cols), dtype,
                             layout=TileLayout(S[tiles * rows, cols]))
        T.device_entry()
        t = T.cta_id([tiles])
        tid = T.thread_id([THREADS])
        dyn = T.alloc_buffer((tile_bytes + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((rows, cols), dtype, dyn.data, layout=TileLayout(S[rows, cols]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=tile_bytes // 8)
        if tid == 0:
            # Warm L2 with the tile while the mbarrier is set up (no shared write, no mbar).
            Tx.copy_async(tile[:, :], A[t * rows:t * rows + rows, :], dispatch="tma",
                          prefetch=True)
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(tile_bytes))
            Tx.copy_async(tile[:, :], A[t * rows:t * rows + rows, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for i in T.serial(tid, rows * cols, step=THREADS):
            Out[t * rows + i // cols, i % cols] = tile[i // cols, i % cols]
    # fmt: on
    return prefetch


def promotion_kernel(first, second, rows: int = 32, cols: int = 64):
    """Two loads of A's halves with ``l2_promotion=first`` / ``second`` (None: the default),
    written to Out."""
    dtype = "float16"
    half_bytes = rows * cols * 2
    options = [{} if p is None else {"l2_promotion": p} for p in (first, second)]

    # fmt: off
    @T.prim_func
    def promotion(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (2 * rows, cols), dtype, layout=TileLayout(S[2 * rows, cols]))
        Out = T.match_buffer(Out_ptr, (2 * rows, cols), dtype,
                             layout=TileLayout(S[2 * rows, cols]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([THREADS])
        dyn = T.alloc_buffer((2 * half_bytes + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((2 * rows, cols), dtype, dyn.data,
                             layout=TileLayout(S[2 * rows, cols]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=2 * half_bytes // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]),
                                                       T.uint32(2 * half_bytes))
            Tx.copy_async(tile[0:rows, :], A[0:rows, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]), **options[0])
            Tx.copy_async(tile[rows:2 * rows, :], A[rows:2 * rows, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]), **options[1])
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for i in T.serial(tid, 2 * rows * cols, step=THREADS):
            Out[i // cols, i % cols] = tile[i // cols, i % cols]
    # fmt: on
    return promotion


# ---- data and the numpy reference of reductions ------------------------------------------

def numpy_type(dtype: str):
    if dtype == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def reduce_data(dtype: str, shape, rng: np.random.Generator) -> np.ndarray:
    """Random values of ``dtype``: finite floats of both signs (a NaN never meets a NaN),
    integers over their whole range (adds wrap, comparisons see both signs), with zeros
    sprinkled in (dec's ``old == 0`` case)."""
    if dtype.startswith(("float", "bfloat")):
        return (rng.standard_normal(shape) * 8).astype(numpy_type(dtype))
    info = np.iinfo(np.dtype(dtype))
    values = rng.integers(info.min, info.max, size=shape, dtype=np.dtype(dtype),
                          endpoint=True)
    values[rng.random(shape) < 0.05] = 0
    return values


def reduce_reference(op: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``op(old, new)`` as the tensor reduction computes it (inc/dec wrap like atom.inc/dec;
    float adds round once to nearest even and keep subnormals, f32 included: measured on the
    H200 by the fuzzer's GPU run)."""
    with np.errstate(over="ignore"):
        if op == "add":
            if old.dtype.name in ("float16", "bfloat16"):
                return (old.astype(np.float32) + new.astype(np.float32)).astype(old.dtype)
            return old + new
        if op in ("min", "max"):
            return (np.minimum if op == "min" else np.maximum)(old, new)
        if op in ("and", "or", "xor"):
            return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](
                old, new)
        if op == "inc":
            return np.where(old >= new, np.uint32(0), old + np.uint32(1)).astype(np.uint32)
        if op == "dec":
            return np.where((old == 0) | (old > new), new, old - np.uint32(1)).astype(np.uint32)
    raise ValueError(op)
