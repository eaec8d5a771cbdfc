"""Facts only the whole loop vouches for (dispatch/loop_facts.py): what is kept, what is not.

Each kernel copies row block ``v`` of a 27-block tensor under a guard; whether the copy plans
depends only on whether the facts about ``v`` survive the code around the copy.
"""

from __future__ import annotations

import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma
from tvm_tma.dispatch.facts import FACTS_KEY
from tvm_tma.dispatch.loop_facts import complete_facts, copy_paths, derived_facts

BLOCKS, ROWS = 27, 64
NB = ROWS * 64 * 2


def _single_copy(kernel):
    (copy,) = tvm_tma.explain(kernel).copies
    return copy


# fmt: off
@T.prim_func
def counter_in_while(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (BLOCKS * ROWS, 64), "float16",
                       layout=TileLayout(S[BLOCKS * ROWS, 64]))
    T.device_entry()
    cta = T.cta_id([8])
    tid = T.thread_id([1])  # noqa: F841
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((ROWS, 64), "float16", dyn.data, layout=TileLayout(S[ROWS, 64]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    v = T.alloc_buffer((1,), "int32", scope="local")
    v[0] = cta * 3
    while v[0] < BLOCKS:
        Tx.copy_async(tile[:, :], A[v[0] * ROWS:v[0] * ROWS + ROWS, :], dispatch="tma",
                      mbar=mbar.ptr_to([0]))
        v[0] = v[0] + 8


@T.prim_func
def counter_capped_by_a_parameter(A_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (BLOCKS * ROWS, 64), "float16",
                       layout=TileLayout(S[BLOCKS * ROWS, 64]))
    T.device_entry()
    cta = T.cta_id([8])
    tid = T.thread_id([1])  # noqa: F841
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((ROWS, 64), "float16", dyn.data, layout=TileLayout(S[ROWS, 64]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    v = T.alloc_buffer((1,), "int32", scope="local")
    v[0] = cta
    while v[0] < n:
        # v may wrap past 2^31 before the test fails (n is any int32): no lower bound
        if v[0] < BLOCKS:
            Tx.copy_async(tile[:, :], A[v[0] * ROWS:v[0] * ROWS + ROWS, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]))
        v[0] = v[0] + 8


@T.prim_func
def counter_stepped_by_a_variable(A_ptr: T.handle, step: T.int32):
    A = T.match_buffer(A_ptr, (BLOCKS * ROWS, 64), "float16",
                       layout=TileLayout(S[BLOCKS * ROWS, 64]))
    T.device_entry()
    cta = T.cta_id([8])
    tid = T.thread_id([1])  # noqa: F841
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((ROWS, 64), "float16", dyn.data, layout=TileLayout(S[ROWS, 64]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    v = T.alloc_buffer((1,), "int32", scope="local")
    v[0] = cta
    while v[0] < BLOCKS:
        Tx.copy_async(tile[:, :], A[v[0] * ROWS:v[0] * ROWS + ROWS, :], dispatch="tma",
                      mbar=mbar.ptr_to([0]))
        v[0] = v[0] + step  # step may be negative


@T.prim_func
def counter_moved_in_an_inner_loop(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (BLOCKS * ROWS, 64), "float16",
                       layout=TileLayout(S[BLOCKS * ROWS, 64]))
    T.device_entry()
    cta = T.cta_id([8])
    tid = T.thread_id([1])  # noqa: F841
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((ROWS, 64), "float16", dyn.data, layout=TileLayout(S[ROWS, 64]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    v = T.alloc_buffer((2,), "int32", scope="local")
    v[0] = cta
    while v[0] < BLOCKS:
        Tx.copy_async(tile[:, :], A[v[0] * ROWS:v[0] * ROWS + ROWS, :], dispatch="tma",
                      mbar=mbar.ptr_to([0]))
        v[1] = v[0] - 100
        v[0] = v[1] + 108  # the same advance, through the other element: not a step


@T.prim_func
def guard_then_loop_that_changes_it(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (BLOCKS * ROWS, 64), "float16",
                       layout=TileLayout(S[BLOCKS * ROWS, 64]))
    T.device_entry()
    cta = T.cta_id([8])
    tid = T.thread_id([1])  # noqa: F841
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((ROWS, 64), "float16", dyn.data, layout=TileLayout(S[ROWS, 64]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    for i in T.serial(4):
        t = cta + i * 8
        if t < BLOCKS:
            for k in T.serial(2):
                Tx.copy_async(tile[:, :], A[t * ROWS:t * ROWS + ROWS, :], dispatch="tma",
                              mbar=mbar.ptr_to([0]))
                t = t + 1  # the second round copies block t + 1, which may be block 27
# fmt: on


def test_a_counter_a_while_loop_advances_is_bounded_by_its_start():
    copy = _single_copy(counter_in_while)
    assert copy.planned
    (bound,) = [f for f in copy.established if f.what.startswith("region-bounds")]
    assert bound.using == ("cta in [0, 8)", "v < 27", "v >= cta * 3")


def test_the_derived_facts_land_in_the_copy_config():
    completed = complete_facts(counter_in_while)
    ((op, _),) = copy_paths(completed)
    assert [str(fact) for fact in op.config[FACTS_KEY]] == [
        "0 <= cta and cta < 8", "0 <= tid and tid < 1", "v < 27", "v >= cta * 3"]
    # Nothing to add: the function comes back as it was.
    assert complete_facts(completed).same_as(completed)


def test_a_counter_that_could_wrap_has_no_lower_bound():
    copy = _single_copy(counter_capped_by_a_parameter)
    assert copy.rule == "region-bounds" and "v * 64" in copy.detail


def test_a_counter_stepped_by_a_variable_has_no_lower_bound():
    copy = _single_copy(counter_stepped_by_a_variable)
    assert copy.rule == "region-bounds"
    assert copy.unproven[0].using == ("v < 27",)


def test_a_counter_changed_other_than_by_a_constant_step_has_no_lower_bound():
    assert _single_copy(counter_moved_in_an_inner_loop).rule == "region-bounds"


def test_a_guard_does_not_hold_inside_a_loop_that_changes_its_scalar():
    copy = _single_copy(guard_then_loop_that_changes_it)
    assert copy.rule == "region-bounds"
    ((_, path),) = copy_paths(guard_then_loop_that_changes_it)
    assert not any("t" in str(fact) for fact in derived_facts(path))


def test_the_lowering_completes_facts_before_dispatch():
    """tvm.compile runs the completion right before LowerTIRx (the pipelines look it up in
    tvm.tirx.transform), so the while-loop kernel lowers exactly as explain planned it."""
    from tvm_tma.testing.runner import assemble, compile_kernel

    assert getattr(tvm.tirx.transform.LowerTIRx, "_tvm_tma_original", None) is not None
    built = compile_kernel(counter_in_while)
    assert built.tma_call_sites == 1
    assemble(built.cuda_source)
