"""A tiled kernel whose TMA copies plan (input of test_explain.py)."""

from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

ROWS, TILE = 8448, 64
NB = TILE * TILE * 2


# fmt: off
@T.prim_func
def row_tiles(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (ROWS, TILE), "float16", layout=TileLayout(S[ROWS, TILE]))
    B = T.match_buffer(B_ptr, (ROWS, 2 * TILE), "float16", layout=TileLayout(S[ROWS, 2 * TILE]))
    T.device_entry()
    cta = T.cta_id([ROWS // TILE])
    tid = T.thread_id([128])
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((TILE, TILE), "float16", dyn.data,
                         layout=mma_shared_layout("float16", 3, (TILE, TILE)))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    if tid == 0:
        Tx.copy_async(tile[:, :], A[cta * TILE:cta * TILE + TILE, :], dispatch="tma",
                      mbar=mbar.ptr_to([0]))
        for part in range(2):
            Tx.copy_async(B[cta * TILE:cta * TILE + TILE, part * TILE:part * TILE + TILE],
                          tile[:, :], dispatch="tma", cache_hint="evict_first")


def builder(rows: int = 128):
    """A kernel built by a function, as examples do (explained with --func builder)."""
    @T.prim_func
    def whole(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (rows, TILE), "float16", layout=TileLayout(S[rows, TILE]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((rows * TILE * 2 + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((rows, TILE), "float16", dyn.data, layout=TileLayout(S[rows, TILE]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=rows * TILE * 2 // 8)
        if tid == 0:
            Tx.copy_async(tile[:, :], A[:, :], dispatch="tma", mbar=mbar.ptr_to([0]))
    return whole
# fmt: on
