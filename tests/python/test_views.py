"""Global views written the way kernel authors write them (issue 11, items 1 and 7).

Each kernel copies global -> shared -> global through ``dispatch="tma"`` with the view forms
TVM offers: ``A.sub[...]`` (a static view, its last tile crossing the view's end), per-CTA
views ``A.sub[c * 64:...]`` and ``A.tile(0, (8, -1))[c, :]`` (a CTA-dependent offset: the
map is over the argument), a flat sub-range ``.view(64, 64)`` and ``T.decl_buffer(...,
elem_offset=8)`` (the map's base). CI checks the plans, the generated code and ptxas; the
GPU tests poison the output, run, and compare every element of it, including those right
past each view (which must keep their poison).
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma
from tvm_tma.testing.runner import assemble, compile_kernel

ROWS, COLS, TILE = 512, 128, 64
NB = TILE * TILE * 2
#: What the output holds before the kernel runs, by element bits.
POISON = {16: 0x5A5A, 32: 0x5A5A5A5A}


def _arena():
    """(arena bytes, mbarrier slot) of one 64 x 64 float16 tile and its mbarrier."""
    return NB + 64, NB // 8


def sub_view_kernel():
    """Tiles of the static view A.sub[16:512, 8:72] (496 x 64) go to the same view of B, one
    tile per CTA; tile 7 (rows 448..512 of 496) crosses the view's end: its load fills zeros
    there and its store skips them, so nothing past the view moves."""
    arena, slot = _arena()

    # fmt: off
    @T.prim_func
    def sub_view(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        B = T.match_buffer(B_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        T.device_entry()
        cta = T.cta_id([8])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((arena,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((TILE, TILE), "float16", dyn.data, layout=TileLayout(S[TILE, TILE]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=slot)
        src = A.sub[16:512, 8:72]
        dst = B.sub[16:512, 8:72]
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[:, :], src[cta * TILE:cta * TILE + TILE, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]), oob="zero")
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(NB))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(dst[cta * TILE:cta * TILE + TILE, :], tile[:, :], dispatch="tma",
                          oob="skip")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return sub_view


def per_cta_view_kernel(form: str):
    """Each CTA takes its 64-row band as a view (``sub``: A.sub[c * 64:c * 64 + 64, :];
    ``tile``: A.tile(0, (8, -1))[c, :]) and copies its columns 32..96 to the same place of
    B. The view's offset depends on the CTA, so the map is over the argument A."""
    arena, slot = _arena()

    def band(buffer, cta):
        if form == "sub":
            return buffer.sub[cta * TILE:cta * TILE + TILE, :]
        return buffer.tile(0, (ROWS // TILE, -1))[cta, :]

    # fmt: off
    @T.prim_func
    def per_cta_view(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        B = T.match_buffer(B_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        T.device_entry()
        cta = T.cta_id([ROWS // TILE])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((arena,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((TILE, TILE), "float16", dyn.data, layout=TileLayout(S[TILE, TILE]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=slot)
        src = band(A, cta)
        dst = band(B, cta)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[:, :], src[:, 32:96], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(NB))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(dst[:, 32:96], tile[:, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return per_cta_view


FLAT = 16384


def flat_view_kernel():
    """A flat float32 sub-range A[4096:8192] viewed as (64, 64): rows 8..24 go to the same
    rows of the same view of B (the offset is 64 whole rows of the view)."""
    arena = 16 * 64 * 4 + 64
    slot = 16 * 64 * 4 // 8

    # fmt: off
    @T.prim_func
    def flat_view(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (FLAT,), "float32", layout=TileLayout(S[FLAT]))
        B = T.match_buffer(B_ptr, (FLAT,), "float32", layout=TileLayout(S[FLAT]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((arena,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((16, 64), "float32", dyn.data, layout=TileLayout(S[16, 64]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=slot)
        src = A.sub[4096:8192].view(64, 64)
        dst = B.sub[4096:8192].view(64, 64)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[:, :], src[8:24, :], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(4096))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(dst[8:24, :], tile[:, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return flat_view


def decl_view_kernel():
    """T.decl_buffer((64, 64), "float16", A.data, elem_offset=8): a row-major 64 x 64 tensor
    starting 8 halves (16 bytes) into A, copied whole to the same view of B."""
    arena, slot = _arena()

    # fmt: off
    @T.prim_func
    def decl_view(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4160,), "float16", layout=TileLayout(S[4160]))
        B = T.match_buffer(B_ptr, (4160,), "float16", layout=TileLayout(S[4160]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((arena,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((TILE, TILE), "float16", dyn.data, layout=TileLayout(S[TILE, TILE]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=slot)
        src = T.decl_buffer((TILE, TILE), "float16", A.data, elem_offset=8,
                            layout=TileLayout(S[TILE, TILE]))
        dst = T.decl_buffer((TILE, TILE), "float16", B.data, elem_offset=8,
                            layout=TileLayout(S[TILE, TILE]))
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[:, :], src[:, :], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(NB))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(dst[:, :], tile[:, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return decl_view


def _expected_sub_view(source: np.ndarray, poison: int) -> np.ndarray:
    want = np.full_like(source, poison)
    want[16:512, 8:72] = source[16:512, 8:72]
    return want


def _expected_per_cta(source: np.ndarray, poison: int) -> np.ndarray:
    want = np.full_like(source, poison)
    want[:, 32:96] = source[:, 32:96]
    return want


def _expected_flat(source: np.ndarray, poison: int) -> np.ndarray:
    want = np.full_like(source, poison)
    start = 4096 + 8 * 64
    want[start:start + 16 * 64] = source[start:start + 16 * 64]
    return want


def _expected_decl(source: np.ndarray, poison: int) -> np.ndarray:
    want = np.full_like(source, poison)
    want[8:8 + 4096] = source[8:8 + 4096]
    return want


#: name -> (kernel builder, element bits, shape of A and B, expected B from A)
KERNELS = {
    "sub-view-edge": (sub_view_kernel, 16, (ROWS, COLS), _expected_sub_view),
    "per-cta-sub": (lambda: per_cta_view_kernel("sub"), 16, (ROWS, COLS), _expected_per_cta),
    "per-cta-tile": (lambda: per_cta_view_kernel("tile"), 16, (ROWS, COLS), _expected_per_cta),
    "flat-subrange-view": (flat_view_kernel, 32, (FLAT,), _expected_flat),
    "decl-elem-offset": (decl_view_kernel, 16, (4160,), _expected_decl),
}


def _copies(name):
    return tvm_tma.explain(KERNELS[name][0]()).copies


def test_static_sub_view_folds_its_offset_and_stops_at_its_end():
    load, store = _copies("sub-view-edge")
    for copy in (load, store):
        assert copy.planned
        # offset 16 * 128 + 8 folds into (8, 16): the map's edges are the view's (72, 512)
        assert copy.plan.tensor_map.global_dims == (72, 512)
        assert copy.plan.base_offset == 0 and copy.plan.edge_dims == (1,)
        assert [str(c) for c in copy.plan.coordinates] == ["8", "cta * 64 + 16"]


@pytest.mark.parametrize("name", ["per-cta-sub", "per-cta-tile"])
def test_per_cta_view_is_a_map_over_the_argument(name):
    for copy in _copies(name):
        assert copy.planned
        # the map is A itself (128 x 512); the band's offset becomes the row coordinate
        assert copy.plan.tensor_map.global_dims == (128, 512)
        assert [str(c) for c in copy.plan.coordinates] == ["32", "cta * 64"]


def test_flat_subrange_view_and_decl_buffer_view():
    (load, _), (decl, _) = _copies("flat-subrange-view"), _copies("decl-elem-offset")
    # rows 8..24 of the view: 64 rows in, one run of 1024 floats from 72 * 64 = 4608
    assert load.plan.base_offset == 0 and load.plan.coordinates == (0, 9)
    # rows of 72 would overlap rows 64 apart: the view's own base, 16 bytes in
    assert decl.plan.base_offset == 8 and decl.plan.tensor_map.global_dims == (256, 4)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_view_kernel_encodes_over_the_argument_and_assembles(name):
    built = compile_kernel(KERNELS[name][0]())
    assert built.tma_call_sites == 2 and built.tensormap_params == 2
    assert built.host_source.count("load ptr, ptr @.tvm_func.tvm_tma.encode_tiled") == 2
    assert len(assemble(built.cuda_source)) > 0


def _edge_of_band(slots: bool):
    """An edge copy of a per-CTA band ``A.sub[cta * 64:cta * 64 + 48, :]`` (oob: the copy
    crosses the band's end), with or without tensor-map slots."""
    arena, slot = _arena()

    # fmt: off
    @T.prim_func
    def edge_of_band(A_ptr: T.handle, W_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        maps = T.match_buffer(W_ptr, (8, 256), "uint8")
        T.device_entry()
        cta = T.cta_id([8])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((arena,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((TILE, TILE), "float16", dyn.data, layout=TileLayout(S[TILE, TILE]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=slot)
        band = A.sub[cta * TILE:cta * TILE + 48, :]
        if tid == 0:
            if slots:
                Tx.copy_async(tile[:, :], band[0:64, 0:64], dispatch="tma",
                              mbar=mbar.ptr_to([0]), oob="zero", tensormap=maps.ptr_to([cta, 0]))
            else:
                Tx.copy_async(tile[:, :], band[0:64, 0:64], dispatch="tma",
                              mbar=mbar.ptr_to([0]), oob="zero")
    # fmt: on
    return edge_of_band


def test_an_edge_copy_of_a_per_cta_view_needs_a_map_rebound_on_the_device():
    """The host cannot bound a view whose offset depends on the CTA: with oob= (the copy may
    cross the view's edge) the map must be the view's own, rebound on the device, so the
    copy needs tensor-map slots (refused without them, named) and plans with them."""
    (copy,) = tvm_tma.explain(_edge_of_band(slots=False)).copies
    assert copy.rule == "tensormap-slot" and "tensormap=" in copy.detail
    built = compile_kernel(_edge_of_band(slots=True))
    body = built.cuda_source[built.cuda_source.index("__global__"):]
    # The band's base (row cta * 64 of A: 16384 bytes per CTA), its 128 columns and 48 rows
    # and its 256-byte row stride are what the rebind writes.
    assert ("(reinterpret_cast<uint64_t>(A_ptr) + ((uint64_t)(((int)blockIdx.x) * 16384))), "
            "(uint)128, (uint)48, (uint64_t)256ULL);") in body
    assert len(assemble(built.cuda_source)) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_view_kernel_is_exact_on_gpu(name):
    import torch

    builder, bits, shape, expected = KERNELS[name]
    executable = compile_kernel(builder()).executable
    word, signed = {16: (np.uint16, np.int16), 32: (np.uint32, np.int32)}[bits]
    torch_dtype, raw = {16: (torch.float16, torch.int16), 32: (torch.float32, torch.int32)}[bits]
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        source = rng.integers(0, 1 << bits, size=shape, dtype=np.uint64).astype(word)
        a = torch.from_numpy(source.view(signed)).cuda().view(torch_dtype)
        b = torch.from_numpy(np.full(shape, POISON[bits], word).view(signed)).cuda()
        executable["main"](a, b.view(torch_dtype))
        torch.cuda.synchronize()
        got = b.cpu().numpy().view(word)
        wrong = np.flatnonzero(got != expected(source, POISON[bits]))
        assert wrong.size == 0, (f"{name} seed {seed}: {wrong.size} elements differ, first at "
                                 f"flat index {wrong[:5]}")
