"""A kernel whose TMA copies each break one rule (input of test_explain.py)."""

from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

SWIZZLED = mma_shared_layout("float16", 3, (64, 64))
ARENA = 65536


# fmt: off
@T.prim_func
def bad_copies(A_ptr: T.handle, N_ptr: T.handle, P_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (256, 64), "float16", layout=TileLayout(S[256, 64]))
    N = T.match_buffer(N_ptr, (256, 64), "int16", layout=TileLayout(S[256, 64]))
    P = T.match_buffer(P_ptr, (256, 60), "float16", layout=TileLayout(S[256, 60]))
    C = T.match_buffer(C_ptr, (64, 64), "float16", layout=TileLayout(S[(64, 64):(1, 64)]))
    T.device_entry()
    cta = T.cta_id([8])
    tid = T.thread_id([128])
    dyn = T.alloc_buffer((ARENA,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((64, 64), "float16", dyn.data, elem_offset=0,
                         layout=TileLayout(S[64, 64]))
    swz = T.decl_buffer((64, 64), "float16", dyn.data, elem_offset=8192, layout=SWIZZLED)
    swz_off = T.decl_buffer((64, 64), "float16", dyn.data, elem_offset=16448, layout=SWIZZLED)
    skew = T.decl_buffer((64, 64), "float16", dyn.data, elem_offset=24608,
                         layout=TileLayout(S[64, 64]))
    narrow = T.decl_buffer((64, 32), "float16", dyn.data, elem_offset=4096 * 7,
                           layout=TileLayout(S[64, 32]))
    thin = T.decl_buffer((64, 4), "float16", dyn.data, elem_offset=4096 * 7 + 2048,
                         layout=TileLayout(S[64, 4]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=ARENA // 8 - 1)
    regs = T.alloc_buffer((64, 64), "float16", scope="local")
    if tid == 0:
        Tx.copy_async(tile[0:24, 0:32], A[0:32, 0:24], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(tile[:, :], N[0:64, :], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(tile[:, :], A[cta * 64:cta * 64 + 64, :], dispatch="tma",
                      mbar=mbar.ptr_to([0]))
        Tx.copy_async(narrow[:, :], A[0:64, 4:36], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(tile[:, :], C[:, :], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(swz[:, 0:32], A[0:64, 0:32], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(skew[:, :], A[0:64, :], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(swz_off[:, :], A[0:64, :], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(narrow[:, :], P[0:64, 0:32], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(thin[:, :], A[0:64, 0:4], dispatch="tma", mbar=mbar.ptr_to([0]))
        Tx.copy_async(tile[:, :], A[0:64, :], dispatch="tma")
        Tx.copy_async(tile[:, :], A[0:64, :], dispatch="tma", mbar=5)
        Tx.copy_async(tile[:, :], A[0:64, :], dispatch="tma", mbar=mbar.ptr_to([0]),
                      cache_hint="evict_sometimes")
        Tx.copy_async(regs[:, :], A[0:64, :], dispatch="tma", mbar=mbar.ptr_to([0]))
# fmt: on
