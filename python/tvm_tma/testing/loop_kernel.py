"""A loop case's kernel, its data and its truth: a persistent kernel around the case's copy.

:func:`build_loop_kernel` writes the case's :class:`~.loop_forms.LoopForm` as a kernel
author writes it, in TVMScript, so that the parser captures the facts at the copy (scope
ids, loop ranges, guards, local scalars) exactly as it does for any kernel: ``ctas`` CTAs
(``cta = T.cta_id([ctas])``), each running the loop form, and for each tile it takes the
case's copy with the global region moved to that tile. ``D`` holds one shared image per
(tile, column block): a load seeds shared memory from its image (poison), copies and dumps
the whole buffer back there; a store seeds shared memory from its image and stores it into
the tile. :func:`loop_expected` is what numpy's copy of every executed tile leaves (from
:func:`~.copy_expected.expected_after` of the one-tile case at each tile), and
:func:`run_loop_on_gpu` compares every byte of ``D`` and of the global allocation with it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from .copy_cases import (
    POISON_BYTE,
    THREADS,
    CopyCase,
    _slices,
    _unravel,
    global_layout_of,
    global_storage,
    shared_layout_of,
    shared_span,
)
from .copy_expected import expected_after, numpy_dtype, random_array
from .loop_forms import LoopForm, Step


def images_shape(case: CopyCase) -> tuple[int, ...]:
    """Shape of ``D``: one shared image per tile slot and column block."""
    loop = case.loop
    return (loop.slots() * loop.k_blocks, *case.shared_shape)


def image_index(loop: LoopForm, t, k=0):
    """The image of ``D`` that block ``k`` of tile ``t`` uses (an int or a TIR expression)."""
    return t if loop.k_blocks == 1 else t * loop.k_blocks + k


def step_case(case: CopyCase, step: Step) -> CopyCase:
    """The one-copy case a loop step performs: the case's copy at the step's tile."""
    start = case.loop.tile_start(case.global_start, case.global_extent, step.tile, step.k)
    return dataclasses.replace(case, loop=None, global_start=start)


def build_loop_kernel(case: CopyCase, dispatch: str = "tma"):
    """A kernel ``main(A, D)`` of ``case.loop.ctas`` CTAs running the case's loop form."""
    loop = case.loop
    if loop is None or not loop.fits(len(case.global_shape)):
        raise ValueError(f"{case.name}: no loop that fits the global view")
    g_shape, s_shape, dtype = case.global_shape, case.shared_shape, case.dtype
    layout = shared_layout_of(case)
    total = math.prod(s_shape)
    arena = (case.smem_elem_offset + shared_span(case)) * case.element_bytes
    mbar_slot = (arena + 7) // 8
    nbytes = case.copy_bytes
    g2s = case.direction == "g2s"
    d_shape = images_shape(case)
    g_layout = global_layout_of(case)
    g_args = {} if case.global_is_dense else dict(strides=case.g_strides)
    in_kernel = case.view_in_kernel
    arg_shape = (case.global_storage_elems,) if in_kernel else g_shape
    arg_layout = TileLayout(S[arg_shape]) if in_kernel else g_layout
    options = {} if case.oob is None else {"oob": case.oob}

    def regions(t, k, smem, glob):
        g_start = loop.tile_start(case.global_start, case.global_extent, t, k)
        s_reg = smem[_slices(case.s_start, case.s_extent)]
        g_reg = glob[_slices(g_start, case.global_extent)]
        return (s_reg, g_reg) if g2s else (g_reg, s_reg)

    def at(t, k, flat):
        return (image_index(loop, t, k), *_unravel(flat, s_shape))

    def element(flat):
        return tuple(_unravel(flat, s_shape))

    # fmt: off
    @T.inline
    def one_copy(t, k, smem, A, D, mbar, phase, tid):
        # Seed the buffer from this tile's image, copy, and (a load) dump it back there.
        for flat in T.serial(tid, total, step=THREADS):
            smem[element(flat)] = D[at(t, k, flat)]
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        dst, src = T.meta_var(regions(t, k, smem, A))
        if tid == 0:
            if g2s:
                Tx.copy_async(dst, src, dispatch=dispatch, mbar=mbar.ptr_to([0]),
                              cache_hint=case.cache_hint, **options)
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(nbytes))
            else:
                Tx.copy_async(dst, src, dispatch=dispatch, cache_hint=case.cache_hint, **options)
                T.ptx.cp.async_.bulk.commit_group()
                T.ptx.cp.async_.bulk.wait_group(0)
        if g2s:
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), phase[0])
            phase[0] = phase[0] ^ 1
            for flat in T.serial(tid, total, step=THREADS):
                D[at(t, k, flat)] = smem[element(flat)]
        T.cuda.cta_sync()  # every thread is done with the buffer before the next tile

    run = _loop_writer(loop, one_copy)

    @T.prim_func
    def main(A_ptr: T.handle, D_ptr: T.handle):
        G = T.match_buffer(A_ptr, arg_shape, dtype, layout=arg_layout,
                           **({} if in_kernel else g_args))
        D = T.match_buffer(D_ptr, d_shape, dtype, layout=TileLayout(S[tuple(d_shape)]))
        if in_kernel:  # a view at an offset inside the argument, as a kernel author writes it
            A = T.decl_buffer(g_shape, dtype, G.data, elem_offset=case.global_offset,
                              layout=g_layout)
        else:
            A = T.meta_var(G)
        T.device_entry()
        cta = T.cta_id([loop.ctas])
        tid = T.thread_id([THREADS])
        dyn = T.alloc_buffer((mbar_slot * 8 + 8,), "uint8", scope="shared.dyn")
        smem = T.decl_buffer(s_shape, dtype, dyn.data, elem_offset=case.smem_elem_offset,
                             layout=layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=mbar_slot)
        phase = T.alloc_buffer((1,), "int32", scope="local")
        phase[0] = 0
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        run(cta, smem, A, D, mbar, phase, tid)
    # fmt: on
    return main


def _loop_writer(loop: LoopForm, one_copy):
    """The loop form (and mutation) as a ``T.inline`` over ``cta`` (and the buffers), as the
    issue lists it; only the chosen one is defined, so only it is parsed."""
    form, mutation = loop.form, loop.mutation
    n, ctas, ksteps, rounds = loop.tiles, loop.ctas, loop.ksteps, loop.rounds
    # fmt: off
    if form == "guard-meta" and mutation == "no-guard":
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            for i in T.serial(rounds):
                t = T.meta_var(cta + i * ctas)
                one_copy(t, 0, smem, A, D, mbar, phase, tid)
    elif form == "guard-scalar" and mutation == "no-guard":
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            for i in T.serial(rounds):
                t = cta + i * ctas
                one_copy(t, 0, smem, A, D, mbar, phase, tid)
    elif form == "guard-meta":
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            for i in T.serial(rounds):
                t = T.meta_var(cta + i * ctas)
                if mutation == "le-guard":
                    if t <= n:
                        one_copy(t, 0, smem, A, D, mbar, phase, tid)
                else:
                    if t < n:
                        one_copy(t, 0, smem, A, D, mbar, phase, tid)
    elif form == "guard-scalar":
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            for i in T.serial(rounds):
                t = cta + i * ctas
                if mutation == "le-guard":
                    if t <= n:
                        one_copy(t, 0, smem, A, D, mbar, phase, tid)
                else:
                    if t < n:
                        one_copy(t, 0, smem, A, D, mbar, phase, tid)
    elif form == "exact-rounds":
        last = ctas if mutation == "extra-round" else ctas - 1  # (n - cta + ctas - 1) // ctas
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            for i in T.serial((n - cta + last) // ctas):
                t = T.meta_var(cta + i * ctas)
                one_copy(t, 0, smem, A, D, mbar, phase, tid)
    elif form == "strided":
        stop = n + 1 if mutation == "stop-plus-one" else n
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            for t in T.serial(cta, stop, step=ctas):
                one_copy(t, 0, smem, A, D, mbar, phase, tid)
    elif form == "while":
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            cur = T.alloc_buffer((1,), "int32", scope="local")
            cur[0] = cta
            while cur[0] < n:
                if mutation == "advance-first":
                    cur[0] = cur[0] + ctas
                    one_copy(cur[0], 0, smem, A, D, mbar, phase, tid)
                else:
                    one_copy(cur[0], 0, smem, A, D, mbar, phase, tid)
                    cur[0] = cur[0] + ctas
    else:  # ksteps: the local-scalar form with an inner loop over column blocks
        @T.inline
        def run(cta, smem, A, D, mbar, phase, tid):
            for i in T.serial(rounds):
                t = cta + i * ctas
                if mutation == "le-guard":
                    if t <= n:
                        for k in T.serial(ksteps):
                            one_copy(t, k, smem, A, D, mbar, phase, tid)
                else:
                    if t < n:
                        for k in T.serial(ksteps):
                            one_copy(t, k, smem, A, D, mbar, phase, tid)
    # fmt: on
    return run


def loop_inputs(case: CopyCase, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random global data, and ``D``: poison images (a load) or random ones (a store)."""
    rng = np.random.default_rng(seed)
    global_in = random_array(case.global_shape, case.dtype, rng)
    shape = images_shape(case)
    if case.direction == "g2s":
        count = math.prod(shape) * case.element_bytes
        images = np.full(count, POISON_BYTE, np.uint8).view(numpy_dtype(case.dtype))
        return global_in, images.reshape(shape)
    return global_in, random_array(shape, case.dtype, rng)


def loop_expected(case: CopyCase, global_in: np.ndarray, images_in: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(global view, ``D``) after the kernel: numpy's copy of every step the loop runs, in
    its order (the regions of distinct tiles are disjoint, so any order gives the same)."""
    glob, images = global_in.copy(), images_in.copy()
    for step in case.loop.executed():
        index = image_index(case.loop, step.tile, step.k)
        glob, images[index] = expected_after(step_case(case, step), glob, images[index])
    return glob, images


def run_loop_on_gpu(case: CopyCase, built, seed: int = 0) -> tuple[bool, str]:
    """Run a loop case's kernel on device 0 (``built.executable["main"]``); compare every
    byte of the global allocation (padding included) and of ``D`` with :func:`loop_expected`.
    """
    import torch

    global_in, images_in = loop_inputs(case, seed)
    want_global, want_images = loop_expected(case, global_in, images_in)
    want_global = global_storage(case, want_global)

    def to_device(array):
        raw = torch.from_numpy(array.reshape(-1).view(np.uint8).copy())
        return raw.view(getattr(torch, case.dtype)).reshape(array.shape).cuda()

    glob, images = to_device(global_storage(case, global_in)), to_device(images_in)
    if case.view_in_kernel:
        view = glob
    elif case.global_is_dense:
        view = glob.reshape(case.global_shape)
    else:
        view = glob.as_strided(case.global_shape, case.g_strides, case.global_offset)
    built.executable["main"](view, images)
    torch.cuda.synchronize()
    problems = []
    for label, got, want in (("global", glob, want_global), ("images", images, want_images)):
        got_bytes = got.cpu().contiguous().view(torch.uint8).numpy().reshape(-1)
        wrong = np.flatnonzero(got_bytes != want.reshape(-1).view(np.uint8))
        if wrong.size:
            problems.append(f"{label}: {wrong.size} bytes differ, first at byte {wrong[0]}")
    return not problems, "; ".join(problems)
