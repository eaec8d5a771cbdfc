"""Five kernels that exercise the intrinsics end to end (run bit-exactly on a Hopper GPU)."""

from __future__ import annotations

from tvm.backend.cuda.op import cuda_func_call
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout

ROWS, COLS = 8, 64
TILE_BYTES = ROWS * COLS * 2  # float16 tile
EVICT_LAST = 0x14F0000000000000  # an L2 cache policy value (CUTLASS CacheHintSm90::EVICT_LAST)


def _f16_map(buffer, rows_total: int, cols_total: int):
    """A (64 x 8) box over a row-major float16 tensor of rows_total x cols_total."""
    return T.tma.encode_tiled(buffer, "float16", [cols_total, rows_total], [cols_total * 2],
                              [COLS, ROWS])


def multicast_kernel():
    """CTA 0 of a 2-CTA cluster loads one tile with mask 0b11: both CTAs receive it."""

    # fmt: off
    @T.prim_func
    def multicast(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        Out = T.match_buffer(Out_ptr, (2, ROWS, COLS), "float16",
                             layout=TileLayout(S[2, ROWS, COLS]))
        tmap = T.meta_var(_f16_map(A, ROWS, COLS))
        T.device_entry()
        T.cluster_id([1])
        rank = T.cta_id_in_cluster([2])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data, layout=TileLayout(S[ROWS, COLS]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE_BYTES))
            if rank == 0:
                T.tma.load(tile.ptr_to([0, 0]), T.address_of(tmap), [0, 0], mbar.ptr_to([0]),
                           multicast_mask=3)
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for i in T.serial(tid, ROWS * COLS, step=128):
            Out[rank, i // COLS, i % COLS] = tile[i // COLS, i % COLS]
        T.cuda.cluster_sync()
    # fmt: on
    return multicast


def reduce_kernel():
    """Reduce-add (float32) and reduce-max (int32) of a shared tile into global data."""

    # fmt: off
    @T.prim_func
    def reduce(G_ptr: T.handle, X_ptr: T.handle, H_ptr: T.handle, Y_ptr: T.handle):
        G = T.match_buffer(G_ptr, (ROWS, COLS), "float32", layout=TileLayout(S[ROWS, COLS]))
        X = T.match_buffer(X_ptr, (ROWS, COLS), "float32", layout=TileLayout(S[ROWS, COLS]))
        H = T.match_buffer(H_ptr, (ROWS, COLS), "int32", layout=TileLayout(S[ROWS, COLS]))
        Y = T.match_buffer(Y_ptr, (ROWS, COLS), "int32", layout=TileLayout(S[ROWS, COLS]))
        gmap = T.meta_var(T.tma.encode_tiled(G, "float32", [COLS, ROWS], [COLS * 4],
                                             [COLS, ROWS]))
        hmap = T.meta_var(T.tma.encode_tiled(H, "int32", [COLS, ROWS], [COLS * 4],
                                             [COLS, ROWS]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((2 * ROWS * COLS * 4,), "uint8", scope="shared.dyn")
        xs = T.decl_buffer((ROWS, COLS), "float32", dyn.data, layout=TileLayout(S[ROWS, COLS]))
        ys = T.decl_buffer((ROWS, COLS), "int32", dyn.data, elem_offset=ROWS * COLS,
                           layout=TileLayout(S[ROWS, COLS]))
        for i in T.serial(tid, ROWS * COLS, step=128):
            xs[i // COLS, i % COLS] = X[i // COLS, i % COLS]
            ys[i // COLS, i % COLS] = Y[i // COLS, i % COLS]
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.tma.reduce("add", T.address_of(gmap), [0, 0], xs.ptr_to([0, 0]))
            T.tma.reduce("max", T.address_of(hmap), [0, 0], ys.ptr_to([0, 0]))
            T.tma.commit_group()
            T.tma.wait_group(0)
    # fmt: on
    return reduce


def prefetch_kernel():
    """L2-prefetch rows 8..16, then load them with an evict-last cache hint."""

    # fmt: off
    @T.prim_func
    def prefetch(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (2 * ROWS, COLS), "float16",
                           layout=TileLayout(S[2 * ROWS, COLS]))
        Out = T.match_buffer(Out_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        tmap = T.meta_var(_f16_map(A, 2 * ROWS, COLS))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data, layout=TileLayout(S[ROWS, COLS]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.tma.prefetch_descriptor(T.address_of(tmap))
            T.tma.prefetch(T.address_of(tmap), [0, ROWS])
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.tma.load(tile.ptr_to([0, 0]), T.address_of(tmap), [0, ROWS], mbar.ptr_to([0]),
                       cache_hint=T.uint64(EVICT_LAST))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE_BYTES))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for i in T.serial(tid, ROWS * COLS, step=128):
            Out[i // COLS, i % COLS] = tile[i // COLS, i % COLS]
    # fmt: on
    return prefetch


_COPY_DESCRIPTOR = """
__forceinline__ __device__ void tvm_tma_test_copy_descriptor(void* dst, unsigned long long src,
                                                             int lane) {
  if (lane < 16) {
    ((unsigned long long*)dst)[lane] = ((const unsigned long long*)src)[lane];
  }
}
"""


def rebind_kernel():
    """Copy A's host map into shared memory, rebind it to B (other dims and strides) on the
    device, publish it to a global slot with cp_fenceproxy, acquire, and TMA-load B's rows
    8..16 through it."""
    b_rows, b_cols = 3 * ROWS, 2 * COLS

    # fmt: off
    @T.prim_func
    def rebind(A_ptr: T.handle, B_ptr: T.handle, W_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        B = T.match_buffer(B_ptr, (b_rows, b_cols), "float16",
                           layout=TileLayout(S[b_rows, b_cols]))
        W = T.match_buffer(W_ptr, (128,), "uint8")
        Out = T.match_buffer(Out_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        tmap = T.meta_var(_f16_map(A, ROWS, COLS))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((128 + TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        slot = T.decl_buffer((128,), "uint8", dyn.data, layout=TileLayout(S[128]))
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data, elem_offset=64,
                             layout=TileLayout(S[ROWS, COLS]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=(128 + TILE_BYTES) // 8)
        T.evaluate(cuda_func_call("tvm_tma_test_copy_descriptor", slot.ptr_to([0]),
                                  T.address_of(tmap), tid, source_code=_COPY_DESCRIPTOR))
        T.cuda.cta_sync()
        if tid == 0:
            T.tma.rebind(slot.ptr_to([0]), T.reinterpret("uint64", B.ptr_to([0, 0])),
                         [b_cols, b_rows], [b_cols * 2], scope="cta")
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid < 32:
            T.tma.cp_fenceproxy(W.ptr_to([0]), slot.ptr_to([0]), "gpu")
        if tid == 0:
            T.tma.fence_acquire(W.ptr_to([0]), "gpu")
            T.tma.load(tile.ptr_to([0, 0]), W.ptr_to([0]), [0, ROWS], mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE_BYTES))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        for i in T.serial(tid, ROWS * COLS, step=128):
            Out[i // COLS, i % COLS] = tile[i // COLS, i % COLS]
    # fmt: on
    return rebind


def bulk_roundtrip_kernel():
    """Non-tensor bulk copy: 2 KiB global -> shared (mbarrier) -> global (bulk group)."""
    nbytes = 2048

    # fmt: off
    @T.prim_func
    def bulk(A_ptr: T.handle, Out_ptr: T.handle):
        A = T.match_buffer(A_ptr, (nbytes,), "uint8")
        Out = T.match_buffer(Out_ptr, (nbytes,), "uint8")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((nbytes + 64,), "uint8", scope="shared.dyn")
        buf = T.decl_buffer((nbytes,), "uint8", dyn.data, layout=TileLayout(S[nbytes]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=nbytes // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            T.tma.bulk_load(buf.ptr_to([0]), A.ptr_to([0]), nbytes, mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(nbytes))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        if tid == 0:
            T.tma.bulk_store(Out.ptr_to([0]), buf.ptr_to([0]), nbytes)
            T.tma.commit_group()
            T.tma.wait_group(0)
    # fmt: on
    return bulk


KERNELS = {
    "multicast": multicast_kernel,
    "reduce": reduce_kernel,
    "prefetch": prefetch_kernel,
    "rebind": rebind_kernel,
    "bulk": bulk_roundtrip_kernel,
}
