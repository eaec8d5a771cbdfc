"""Bounds from enclosing guards, T.assume and tile variables (issue 11, item 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma
from tvm_tma.explainer import load_module
from tvm_tma.testing.runner import assemble, compile_kernel

INPUTS = Path(__file__).parent / "explain_inputs"


@pytest.fixture(scope="module")
def guarded():
    return tvm_tma.explain(load_module(INPUTS / "guards.py").guarded)


def _facts(copy) -> list[str]:
    return [f"{fact.what}: {fact.condition} [from {'; '.join(fact.using)}]"
            for fact in copy.established]


def test_guarded_tile_index_plans(guarded):
    first, else_branch = guarded.copies[0], guarded.copies[1]
    for copy in (first, else_branch):
        assert copy.planned
        assert _facts(copy) == [
            "region-bounds (global dimension 0): t * 64 >= 0 and t * 64 + 64 <= 1728 "
            "[from i in [0, 4); cta in [0, 8); t == cta + i * 8; t < 27]"]
        # Whole rows are one run, cut into 1024-half rows (promoted to 256 uint64): t * 4.
        assert str(copy.plan.coordinates[1]) == "t * 4"


def test_unsound_facts_are_dropped(guarded):
    changed, unguarded, across_loop = guarded.copies[2], guarded.copies[4], guarded.copies[5]
    assert (changed.rule, changed.detail) == (
        "region-bounds", "global dimension 0: region [u * 64, u * 64 + 64) is not provably "
        'inside [0, 1728); a tile that may cross the tensor\'s edge needs oob="zero" or "nan"')
    assert unguarded.rule == "region-bounds"
    # A counter set before a loop that only adds to it is bounded below by its start
    # (an induction over the loop, dispatch/loop_facts.py); the guard bounds it above.
    assert across_loop.planned
    assert _facts(across_loop)[0] == (
        "region-bounds (global dimension 0): v * 64 >= 0 and v * 64 + 64 <= 1728 "
        "[from cta in [0, 8); v < 27; v >= cta * 2]")


def test_assume_bounds_a_symbolic_extent(guarded):
    store = guarded.copies[6]
    assert store.planned and store.plan.direction == "s2g"
    assert ("region-bounds (global dimension 0): cta * 64 >= 0 and cta * 64 + 64 <= m "
            "[from cta in [0, 8); m >= 512]") in _facts(store)


def test_dead_code_plans_with_vacuous_bounds(guarded):
    """A copy under a guard its loop never satisfies (i >= ROUNDS inside range(ROUNDS)):
    the facts contradict, so no launch reaches it and its bounds hold vacuously; the map
    itself is still planned from the ranges alone."""
    dead = guarded.copies[3]
    assert dead.planned
    assert dead.plan.tensor_map.global_dims == (256, 108)
    (bounds,) = [fact for fact in dead.established if fact.what.startswith("region-bounds")]
    assert bounds.using[0] == "unreachable: the facts at the copy contradict each other"
    assert "i >= 4" in bounds.using


TILES, TILE, CTAS = 37, 64, 8
ROUNDS = (TILES + CTAS - 1) // CTAS


def persistent_copy():
    """The persistent tile loop as a kernel author writes it: no clamps."""
    nb = TILE * TILE * 2

    # fmt: off
    @T.prim_func
    def persistent(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (TILES * TILE, TILE), "float16",
                           layout=TileLayout(S[TILES * TILE, TILE]))
        B = T.match_buffer(B_ptr, (TILES * TILE, TILE), "float16",
                           layout=TileLayout(S[TILES * TILE, TILE]))
        T.device_entry()
        cta = T.cta_id([CTAS])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((nb + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((TILE, TILE), "float16", dyn.data, layout=TileLayout(S[TILE, TILE]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=nb // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
        for i in T.serial(ROUNDS):
            t = cta + i * CTAS
            if t < TILES:
                if tid == 0:
                    Tx.copy_async(tile[:, :], A[t * TILE:t * TILE + TILE, :], dispatch="tma",
                                  mbar=mbar.ptr_to([0]))
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]),
                                                               T.uint32(nb))
                    T.cuda.mbarrier_wait(mbar.ptr_to([0]), i % 2)
                    Tx.copy_async(B[t * TILE:t * TILE + TILE, :], tile[:, :], dispatch="tma")
                    T.ptx.cp.async_.bulk.commit_group()
                    T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return persistent


def test_natural_persistent_loop_plans_and_assembles():
    built = compile_kernel(persistent_copy())
    assert built.tma_call_sites == 2 and built.tensormap_params == 2
    assemble(built.cuda_source)


@pytest.mark.gpu
def test_natural_persistent_loop_is_bit_exact_on_gpu():
    import torch

    executable = compile_kernel(persistent_copy()).executable
    bits = np.random.default_rng(11).integers(-(1 << 15), 1 << 15, size=(TILES * TILE, TILE),
                                              dtype=np.int16)
    source = torch.from_numpy(bits).cuda()
    out = torch.full_like(source, 0x5A5A)
    executable["main"](source.view(torch.float16), out.view(torch.float16))
    torch.cuda.synchronize()
    assert torch.equal(out, source)


def test_a_guard_the_ranges_alone_refute_marks_the_copy_unreachable():
    """A ring's refill guard ``k + stages < steps`` when a problem has ``steps == stages``:
    ``k < 0`` with ``k`` in [0, 4). The analyzer folds it to false only before the facts'
    scope is entered (inside, the bound of ``k`` is an empty intersection it leaves alone)."""
    import tvm

    from tvm_tma.planner.proofs import Prover

    k = tvm.tirx.Var("k", "int32")
    ring = {k: tvm.ir.Range(0, 4)}
    assert Prover(ring, [k + 4 < 4]).unreachable
    assert not Prover(ring, [k + 4 < 5]).unreachable
    assert Prover(ring, [k >= 4]).unreachable


def test_a_fact_over_a_one_round_loop_bounds_its_other_variable():
    """``tile = cta + j * ctas`` under ``if tile < num_tiles`` in a loop of one round (a
    small GEMM on a persistent grid): the fact is ``cta < num_tiles``, which is what bounds
    the tile's coordinates (``cta // 16`` is 0)."""
    from tvm_tma.planner.proofs import Prover

    cta, j = tvm.tirx.Var("cta", "int32"), tvm.tirx.Var("j", "int32")
    prover = Prover({cta: tvm.ir.Range(0, 132), j: tvm.ir.Range(0, 1)},
                    facts=[cta + j * 132 < 4])
    assert prover.prove(cta // 16 == 0)
    assert not Prover({cta: tvm.ir.Range(0, 132), j: tvm.ir.Range(0, 2)},
                      facts=[cta + j * 132 < 4]).prove(cta // 16 == 1)


def test_a_warpgroup_indexed_copy_in_an_else_branch_plans():
    """Warpgroup 0 produces, the others each store their own slice: the else branch's
    ``slices[tid // 128 - 1]`` is inside the buffer only through the branch's fact
    ``tid // 128 != 0`` (the ranges alone allow ``-1``)."""
    rows = 64

    # fmt: off
    @T.prim_func
    def consumers_store(B_ptr: T.handle):
        B = T.match_buffer(B_ptr, (2 * rows, 64), "float16", layout=TileLayout(S[2 * rows, 64]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([384])
        dyn = T.alloc_buffer((2 * rows * 64 * 2,), "uint8", scope="shared.dyn")
        slices = T.decl_buffer((2, rows, 64), "float16", dyn.data,
                               layout=TileLayout(S[2, rows, 64]))
        if tid // 128 == 0:
            T.cuda.cta_sync()
        else:
            consumer = T.meta_var(tid // 128 - 1)
            if tid % 128 == 0:
                Tx.copy_async(B[consumer * rows:consumer * rows + rows, :],
                              slices[consumer, :, :], dispatch="tma")
                T.ptx.cp.async_.bulk.commit_group()
                T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    built = compile_kernel(consumers_store)
    assert built.tma_call_sites == 1
    assemble(built.cuda_source)
