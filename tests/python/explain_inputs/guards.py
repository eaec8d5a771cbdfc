"""Copies whose bounds follow from enclosing guards, assumptions and tile variables
(input of test_guards.py)."""

from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

TILE, CTAS, ROUNDS, NUM_TILES = 64, 8, 4, 27
NB = TILE * TILE * 2


# fmt: off
@T.prim_func
def guarded(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
    A = T.match_buffer(A_ptr, (NUM_TILES * TILE, TILE), "float16",
                       layout=TileLayout(S[NUM_TILES * TILE, TILE]))
    B = T.match_buffer(B_ptr, (m, TILE), "float16", layout=TileLayout(S[m, TILE]))
    T.device_entry()
    cta = T.cta_id([CTAS])
    tid = T.thread_id([128])
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((TILE, TILE), "float16", dyn.data, layout=TileLayout(S[TILE, TILE]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    for i in range(ROUNDS):
        t = cta + i * CTAS
        if t < NUM_TILES:
            if tid == 0:
                # 1: the persistent loop written naturally: tile t, guarded
                Tx.copy_async(tile[:, :], A[t * TILE:t * TILE + TILE, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]))
        if t >= NUM_TILES:
            T.evaluate(0)
        else:
            if tid == 0:
                # 2: the else branch of the opposite test
                Tx.copy_async(tile[:, :], A[t * TILE:t * TILE + TILE, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]))
        u = cta + i * CTAS
        if i % 2 == 1:
            u = u + 1
        if u < NUM_TILES:
            if tid == 0:
                # 3: refused: u was changed after its value was known, so u >= 0 is lost
                Tx.copy_async(tile[:, :], A[u * TILE:u * TILE + TILE, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]))
        if i >= ROUNDS:
            if tid == 0:
                # 7: planned: dead code (i < ROUNDS always), so its bounds hold vacuously
                Tx.copy_async(tile[:, :], A[(t + 64) * TILE:(t + 64) * TILE + TILE, :],
                              dispatch="tma", mbar=mbar.ptr_to([0]))
        if tid == 0:
            # 4: refused: no guard at all (t reaches 31 > 26)
            Tx.copy_async(tile[:, :], A[t * TILE:t * TILE + TILE, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]))
    v = cta * 2
    for j in range(2):
        if v < NUM_TILES:
            if tid == 0:
                # 5: planned: v starts at cta * 2 and the loop only adds to it (v >= cta * 2),
                # and the guard is tested again before every copy (v < 27)
                Tx.copy_async(tile[:, :], A[v * TILE:v * TILE + TILE, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]))
            v = v + 13
    T.assume(m >= CTAS * TILE)
    if tid == 0:
        # 6: T.assume bounds the symbolic extent of B
        Tx.copy_async(B[cta * TILE:cta * TILE + TILE, :], tile[:, :], dispatch="tma")
# fmt: on
