"""The persistent tile loop in every spelling a kernel author writes (issue 21).

Each kernel copies an (M, N) tensor A to B through shared memory, tile by tile: ``ctas``
CTAs walk the ``(M / TILE) * (N / TILE)`` tiles, tile ``t`` at rows ``t // cols * TILE`` and
columns ``t % cols * TILE``, with one TMA load and one TMA store per tile and no ``oob=``:
every tile lies inside the tensor, and the planner must prove it from what the loop states.

Safe forms (:data:`SAFE_FORMS`):

* ``let_guard``: ``t = cta + i * ctas`` (a local scalar), ``if t < n:``
* ``meta_guard``: the same tile index as ``T.meta_var`` (the guard is ``cta + i * ctas < n``)
* ``exact_extent``: ``for i in T.serial((n - cta + ctas - 1) // ctas)``: this CTA's tiles only
* ``strided``: ``for t in T.serial(cta, n, step=ctas)``
* ``while_counter``: ``cur[0] = cta; while cur[0] < n: ...; cur[0] = cur[0] + ctas``
* ``inner_loop``: ``let_guard``, then a loop over the tile's two column halves (K steps)

Unsafe neighbours (:data:`UNSAFE_FORMS`), each executing a tile past the tensor's end:
``one_round_long`` (``exact_extent`` with ``(n - cta + ctas) // ctas`` rounds), ``le_guard``
(``if t <= n``), ``stop_plus_one`` (``strided`` up to ``n + 1``) and ``after_advance`` (the
``while`` loop's copy placed after ``cur[0]`` was advanced).

``ring_kernel`` runs ``exact_extent`` and ``strided`` through a multi-stage ring
(:class:`tvm_tma.pipeline.TmaPipeline` drained by the thread's own TMA stores): the refill of
a slot loads a tile ``stages`` rounds ahead under its own guard.
"""

from __future__ import annotations

from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tvm_tma.pipeline import TmaPipeline

M, N, TILE, CTAS = 4096, 2048, 128, 132
DTYPE = "float16"

SAFE_FORMS = ("let_guard", "meta_guard", "exact_extent", "strided", "while_counter",
              "inner_loop")
UNSAFE_FORMS = ("one_round_long", "le_guard", "stop_plus_one", "after_advance")


def tile_layout(shape: tuple[int, ...], swizzle: bool):
    """Row-major, or TVM's 128B-swizzled MMA operand layout."""
    if not swizzle:
        return TileLayout(S[shape])
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

    return mma_shared_layout(DTYPE, 3, shape)


def tile_copy_kernel(form: str, swizzle: bool = False, m: int = M, n: int = N,
                     tile: int = TILE, ctas: int = CTAS):
    """A whole-tensor copy whose tile loop is spelled as ``form`` (see the module doc)."""
    cols = n // tile
    tiles = (m // tile) * cols
    rounds = (tiles + ctas - 1) // ctas
    half = tile // 2
    width = half if form == "inner_loop" else tile
    nbytes = tile * width * 2
    layout = tile_layout((tile, width), swizzle)

    # fmt: off
    @T.inline
    def move(A, B, smem, mbar, phase, t, c0):
        # Load tile t's block at column c0 into shared memory, wait for it, store it to B.
        r0 = T.meta_var(t // cols * tile)
        c = T.meta_var(t % cols * tile + c0)
        Tx.copy_async(smem[:, :], A[r0:r0 + tile, c:c + width], dispatch="tma",
                      mbar=mbar.ptr_to([0]))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(nbytes))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), phase[0])
        phase[0] = phase[0] ^ 1
        Tx.copy_async(B[r0:r0 + tile, c:c + width], smem[:, :], dispatch="tma")
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (m, n), DTYPE, layout=TileLayout(S[m, n]))
        B = T.match_buffer(B_ptr, (m, n), DTYPE, layout=TileLayout(S[m, n]))
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((nbytes + 1024,), "uint8", scope="shared.dyn")
        smem = T.decl_buffer((tile, width), DTYPE, dyn.data, layout=layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=nbytes // 8)
        phase = T.alloc_buffer((1,), "int32", scope="local")
        cur = T.alloc_buffer((1,), "int32", scope="local")
        phase[0] = 0
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
        if tid == 0:
            if form == "let_guard":
                for i in T.serial(rounds):
                    t = cta + i * ctas
                    if t < tiles:
                        move(A, B, smem, mbar, phase, t, 0)
            elif form == "meta_guard":
                for i in T.serial(rounds):
                    t = T.meta_var(cta + i * ctas)
                    if t < tiles:
                        move(A, B, smem, mbar, phase, t, 0)
            elif form == "le_guard":
                for i in T.serial(rounds):
                    t = cta + i * ctas
                    if t <= tiles:
                        move(A, B, smem, mbar, phase, t, 0)
            elif form == "exact_extent":
                for i in T.serial((tiles - cta + ctas - 1) // ctas):
                    move(A, B, smem, mbar, phase, cta + i * ctas, 0)
            elif form == "one_round_long":
                for i in T.serial((tiles - cta + ctas) // ctas):
                    move(A, B, smem, mbar, phase, cta + i * ctas, 0)
            elif form == "strided":
                for t in T.serial(cta, tiles, step=ctas):
                    move(A, B, smem, mbar, phase, t, 0)
            elif form == "stop_plus_one":
                for t in T.serial(cta, tiles + 1, step=ctas):
                    move(A, B, smem, mbar, phase, t, 0)
            elif form == "while_counter":
                cur[0] = cta
                while cur[0] < tiles:
                    move(A, B, smem, mbar, phase, cur[0], 0)
                    cur[0] = cur[0] + ctas
            elif form == "after_advance":
                cur[0] = cta
                while cur[0] < tiles:
                    cur[0] = cur[0] + ctas
                    move(A, B, smem, mbar, phase, cur[0], 0)
            elif form == "inner_loop":
                for i in T.serial(rounds):
                    t = cta + i * ctas
                    if t < tiles:
                        for k in T.serial(2):
                            move(A, B, smem, mbar, phase, t, k * half)
    # fmt: on
    if form not in SAFE_FORMS + UNSAFE_FORMS:
        raise ValueError(f"unknown loop form {form!r}")
    return kernel


def ring_kernel(form: str, swizzle: bool = False, stages: int = 3, m: int = M, n: int = N,
                tile: int = TILE, ctas: int = CTAS):
    """``exact_extent`` or ``strided`` through a ``stages``-slot ring: the loads of a CTA's
    first ``stages`` tiles, then for each tile: wait, store, and refill the slot with the
    tile ``stages`` rounds ahead when there is one (its own guard)."""
    if form not in ("exact_extent", "strided"):
        raise ValueError(f"ring_kernel spells exact_extent or strided, not {form!r}")
    cols = n // tile
    tiles = (m // tile) * cols
    nbytes = tile * tile * 2
    layout = tile_layout((stages, tile, tile), swizzle)
    ahead = stages * ctas

    # fmt: off
    @T.inline
    def load(ring, A, slots, it, t):
        r0 = T.meta_var(t // cols * tile)
        c0 = T.meta_var(t % cols * tile)
        ring.producer_acquire(it, pending_stores=0)
        Tx.copy_async(slots[ring.slot(it), :, :], A[r0:r0 + tile, c0:c0 + tile],
                      dispatch="tma", mbar=ring.full_barrier(it))
        ring.producer_commit(it, nbytes)

    @T.inline
    def store(ring, B, slots, it, t):
        r0 = T.meta_var(t // cols * tile)
        c0 = T.meta_var(t % cols * tile)
        ring.consumer_wait(it)
        Tx.copy_async(B[r0:r0 + tile, c0:c0 + tile], slots[ring.slot(it), :, :],
                      dispatch="tma")
        T.ptx.cp.async_.bulk.commit_group()

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (m, n), DTYPE, layout=TileLayout(S[m, n]))
        B = T.match_buffer(B_ptr, (m, n), DTYPE, layout=TileLayout(S[m, n]))
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((stages * nbytes + 1024,), "uint8", scope="shared.dyn")
        full = T.decl_buffer((stages,), "uint64", dyn.data)
        slots = T.decl_buffer((stages, tile, tile), DTYPE, dyn.data, elem_offset=1024 // 2,
                              layout=layout)
        ring = T.meta_var(TmaPipeline(full, None, stages))
        if tid == 0:
            ring.init()
            T.ptx.fence.proxy.async_.shared__cta()
            if form == "exact_extent":
                for i in T.serial(T.min(stages, (tiles - cta + ctas - 1) // ctas)):
                    load(ring, A, slots, i, cta + i * ctas)
                for i in T.serial((tiles - cta + ctas - 1) // ctas):
                    store(ring, B, slots, i, cta + i * ctas)
                    if i + stages < (tiles - cta + ctas - 1) // ctas:
                        load(ring, A, slots, i + stages, cta + (i + stages) * ctas)
            else:
                for t in T.serial(cta, T.min(tiles, cta + ahead), step=ctas):
                    load(ring, A, slots, (t - cta) // ctas, t)
                for t in T.serial(cta, tiles, step=ctas):
                    store(ring, B, slots, (t - cta) // ctas, t)
                    if t + ahead < tiles:
                        load(ring, A, slots, (t - cta) // ctas + stages, t + ahead)
            T.ptx.cp.async_.bulk.wait_group.read(0)
    # fmt: on
    return kernel
