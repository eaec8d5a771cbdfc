"""Copies of device-side views: maps rebound on the device (tvm_tma.dispatch.device_view).

A view whose start or extent the kernel reads from device memory (a group's rows
``offs[g - 1]:offs[g]``) plans against a host-born template and a rebind on the device
into the copy's ``tensormap=`` slots. CI checks the exact CUDA/PTX of the sequence (its
order, fences, scopes, slot arithmetic), that no replace is ever emitted outside a fenced
rebind, each obligation's named refusal, the runtime's launch check of the workspace and
ptxas for sm_90a; the GPU test runs the kernel on groups that are empty, one row, shorter
than the tile (ending mid-tile) and longer than it, and compares every element of the
output, rows the copies must not touch included.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
import tvm_ffi
from device_view_kernels import BROKEN, GROUPS, TILE, K, M, view_copy_kernel

import tvm_tma
from tvm_tma.dispatch.device_view import CHECK_SLOTS_FUNCTION
from tvm_tma.testing.runner import assemble, compile_kernel

#: The rebind helper's instructions, in order (rank 2, slots in global memory, CTA scope):
#: acquire on the slot, address, dims 0 and 1, the stride of dim 1, release.
REBIND_LINES = (
    "fence.proxy.tensormap::generic.acquire.cta [%0], 128;",
    "tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;",
    "tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 0, %1;",
    "tensormap.replace.tile.global_dim.global.b1024.b32 [%0], 1, %1;",
    "tensormap.replace.tile.global_stride.global.b1024.b64 [%0], 0, %1;",
    "fence.proxy.tensormap::generic.release.cta;",
)


@pytest.fixture(scope="module")
def built():
    return compile_kernel(view_copy_kernel("ok"))


def _body(source: str) -> str:
    return source[source.rindex("__global__ void"):]


def _asm_lines(source: str, helper_prefix: str) -> list[list[str]]:
    """The asm templates of each helper whose name starts with ``helper_prefix``."""
    helpers = re.findall(r"__device__ void (" + helper_prefix + r"\w*)\(.*?\n(.*?)\n}",
                         source, re.S)
    return [re.findall(r'asm volatile\("([^"]*)"', text) for _, text in helpers]


def test_the_rebind_helper_is_the_seed_000_sequence(built):
    (lines,) = _asm_lines(built.cuda_source, "tvm_tma_rebind_")
    assert tuple(lines) == REBIND_LINES


def test_no_replace_is_emitted_outside_a_fenced_rebind(built):
    source = built.cuda_source
    asm = re.findall(r'asm volatile\("([^"]*)"', source)
    replaces = [line for line in asm if "tensormap.replace" in line]
    assert len(replaces) == 4  # the one rebind helper's; nowhere else
    for lines in _asm_lines(source, "tvm_tma_"):
        if any("tensormap.replace" in line for line in lines):
            assert lines[0].startswith("fence.proxy.tensormap::generic.acquire")
            assert lines[-1].startswith("fence.proxy.tensormap::generic.release")


def test_the_seed_copies_the_whole_128_byte_map_object(built):
    (lines,) = _asm_lines(built.cuda_source, "tvm_tma_seed_")
    (text,) = lines
    moves = [f"ld.v2.b64 {{lo, hi}}, [%1+{o}]; st.global.v2.b64 [%0+{o}], {{lo, hi}};"
             for o in range(0, 128, 16)]
    assert text == "{ .reg .b64 lo, hi; " + " ".join(moves) + " }"


def test_each_copy_rebinds_once_per_view_change_then_acquires_then_issues(built):
    body = _body(built.cuda_source)
    slot = ("(reinterpret_cast<uint64_t>((&(maps_ptr[(((int)blockIdx.x) * 512)]))) + "
            "((tma_view_tag_ptr[2] & (uint64_t)1ULL) * (uint64_t)128ULL))")
    address = "(reinterpret_cast<uint64_t>(A_ptr) + ((uint64_t)(start_ptr[0] * 128)))"
    test = (f"if ((tma_view_tag_ptr[0] != {address}) || "
            "(tma_view_tag_ptr[1] != ((uint64_t)rows_ptr[0]))) {")
    steps = [
        test,
        "tma_view_tag_ptr[2] = (tma_view_tag_ptr[2] + (uint64_t)1ULL);",
        f"tvm_tma_seed_6972a49d42({slot}, ((unsigned long long)(&(A_tensormap))));",
        f"({slot}, {slot}, {address}, (uint)64, ((uint)rows_ptr[0]), (uint64_t)128ULL);",
        f"tvm_tma_fence_acquire_ffcbd09dcc({slot});",
        f"tma_view_tag_ptr[0] = {address};",
        "tma_view_tag_ptr[1] = ((uint64_t)rows_ptr[0]);",
        f"(&(((half*)dyn_ptr)[0])), {slot}, 0, 0, (&(((uint64_t*)dyn_ptr)[1024])));",
    ]
    position = 0
    for step in steps:
        found = body.find(step, position)
        assert found >= 0, step
        position = found + len(step)
    # The tags start at 0 (no map's base): the first copy always rebinds.
    assert "tma_view_tag_ptr[2] = (uint64_t)0ULL;" in body
    # The fence helper acquires at CTA scope on the slot the issue names.
    (fence,) = _asm_lines(built.cuda_source, "tvm_tma_fence_acquire_")
    assert fence == ["fence.proxy.tensormap::generic.acquire.cta [%0], 128;"]


def test_the_store_rebinds_its_own_slots_and_the_templates_are_host_born(built):
    body = _body(built.cuda_source)
    assert "maps_ptr[((((int)blockIdx.x) * 512) + 256)]" in body  # B's slots: the next pair
    assert "tvm_tma_seed_6972a49d42(" in body and "&(B_tensormap)" in body
    assert built.tensormap_params == 2
    assert built.host_source.count("load ptr, ptr @.tvm_func.tvm_tma.encode_tiled") == 2
    # One launch check of the workspace (both copies use it): one packed-function load.
    assert built.host_source.count(f"load ptr, ptr @.tvm_func.{CHECK_SLOTS_FUNCTION}") == 1


def test_the_device_view_kernel_assembles_for_sm90a(built):
    assert len(assemble(built.cuda_source)) > 0


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_each_obligation_is_refused_by_name(variant):
    (load, _store) = tvm_tma.explain(view_copy_kernel(variant)).copies
    assert load.rule == BROKEN[variant], (load.rule, load.detail)


def test_the_launch_checks_the_workspace_alignment():
    check = tvm_ffi.get_global_func(CHECK_SLOTS_FUNCTION)
    with pytest.raises(ValueError, match=r"rule 'tensormap-slot'.*0x40, not on a 128-byte"):
        check(ctypes.c_void_p(64), 128, "maps")
    check(ctypes.c_void_p(256), 128, "maps")


#: Group ends: an empty group, one row, a group ending mid-tile (40 rows), one longer than
#: the tile (200 rows: its first TILE are copied); rows past the last group stay poison.
OFFS = (0, 1, 41, 241)


@pytest.mark.gpu
def test_the_device_view_copies_are_exact_on_gpu():
    import tvm

    built = compile_kernel(view_copy_kernel("ok"))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(np.float16)
    poison = np.full((M, K), np.nan, dtype=np.float16)
    device = tvm.cuda(0)
    b = tvm.runtime.tensor(poison, device)
    maps = tvm.runtime.tensor(np.zeros(GROUPS * 512, dtype=np.uint8), device)
    built.executable["main"](tvm.runtime.tensor(a, device), b,
                             tvm.runtime.tensor(np.array(OFFS, dtype=np.int32), device), maps)
    device.sync()
    expected = poison.copy()
    start = 0
    for end in OFFS:
        rows = min(end - start, TILE)
        expected[start:start + rows] = a[start:start + rows]
        start = end
    np.testing.assert_array_equal(b.numpy(), expected)


def test_a_scalar_read_from_memory_is_a_fact_about_an_unknown_value():
    """``start[0] = min(max(offs[g], 0), M)`` bounds ``start[0]`` whatever ``offs`` held: the
    fact keeps the clamps and replaces the read by a fresh variable (global memory may hold
    something else later). ``t[0] = t[0] + 1`` states nothing (it relates t's new value to
    its old one; read as a fact it would be a contradiction that proves anything)."""
    import tvm
    from tvm.script import tirx as T

    from tvm_tma.dispatch.facts import scalar_value

    start = tvm.tirx.decl_buffer((1,), "int32", "start", scope="local")
    offs = tvm.tirx.decl_buffer((4,), "int32", "offs")
    fact = scalar_value(tvm.tirx.BufferStore(start, T.min(T.max(offs[1], 0), 64), [0]))
    assert str(fact) == "start == T.min(T.max(loaded, 0), 64)"  # printed as a scalar
    assert scalar_value(tvm.tirx.BufferStore(start, start[0] + 1, [0])) is None


def test_explain_says_the_map_is_rebound_on_the_device():
    from tvm_tma.explainer.report import format_kernel

    text = format_kernel(tvm_tma.explain(view_copy_kernel("ok")))
    assert text.count("device-side view: a template encoded on the host, rebound") == 2
    assert text.count("globalDim = [64, rows]") == 2
    assert "map base: the global buffer's data + start * 64 elements" in text
    # What the plan rests on, each obligation by name.
    for obligation in ("global-dim (Ag dimension 0): rows >= 1",
                       "global-address-align (device-side base): start * 128 % 16 == 0",
                       "tensormap-slot (alignment): cta * 512 % 128 == 0"):
        assert obligation in text, obligation


def _slot_owner_check(offset_of, identities_of):
    """Run the slot-ownership proof on ``offset_of(cta, cluster, rank)`` bytes, in a kernel
    of 132 CTAs in 66 clusters of 2, with the identities ``identities_of(cta, cluster,
    rank)``."""
    import tvm

    from tvm_tma.dispatch.device_view import read_slots
    from tvm_tma.planner.proofs import Prover

    cta, cluster, rank = (tvm.tirx.Var(name, "int32") for name in ("cta", "cluster", "rank"))
    maps = tvm.tirx.decl_buffer((132 * 1024,), "uint8", name="maps")
    extents = {cta: 132, cluster: 66, rank: 2}
    prover = Prover({var: tvm.ir.Range(0, extent) for var, extent in extents.items()})
    pointer = tvm.tirx.call_intrin("handle", "tirx.address_of",
                                   tvm.tirx.BufferLoad(maps, [offset_of(cta, cluster, rank)]))
    return read_slots(pointer, prover, {var: tvm.tirx.IntImm("int32", e)
                                        for var, e in extents.items()},
                      identities_of(cta, cluster, rank))


def test_a_cluster_kernels_slots_may_be_indexed_by_the_cta_alone():
    # A cluster kernel tells CTAs apart by the CTA index alone, or by cluster and rank:
    # slots at cta * 1024 are each CTA's own (the rank is a function of the CTA index).
    assert _slot_owner_check(lambda cta, cluster, rank: cta * 1024,
                             lambda cta, cluster, rank: ((cta,), (cluster, rank)))
    assert _slot_owner_check(lambda cta, cluster, rank: cluster * 2048 + rank * 1024,
                             lambda cta, cluster, rank: ((cta,), (cluster, rank)))
    # Without the identities every index must step the offset: the CTA index alone is
    # refused (the proof the dispatch ran before it knew them).
    with pytest.raises(ValueError, match=r"tensormap-slot.*steps by 0 per (rank|cluster)"):
        _slot_owner_check(lambda cta, cluster, rank: cta * 1024, lambda *_: ())
    # The two CTAs of a cluster on one slot pair: refused whatever the identities.
    with pytest.raises(ValueError, match=r"tensormap-slot.*two CTAs may share a slot"):
        _slot_owner_check(lambda cta, cluster, rank: cluster * 1024,
                          lambda cta, cluster, rank: ((cta,), (cluster, rank)))
    with pytest.raises(ValueError, match=r"tensormap-slot.*not linear in the CTA indices"):
        _slot_owner_check(lambda cta, cluster, rank: cta // 2 * 1024,
                          lambda cta, cluster, rank: ((cta,), (cluster, rank)))


def test_the_cta_identities_of_a_cluster_kernel():
    import tvm

    from tvm_tma.dispatch.facts import CTA_KEY, cta_identities_of

    cta, cluster, rank = (tvm.tirx.Var(name, "int32") for name in ("cta", "cluster", "rank"))
    config = {CTA_KEY: [[cluster, tvm.tirx.IntImm("int32", 66), 0],
                        [cta, tvm.tirx.IntImm("int32", 132), 1],
                        [rank, tvm.tirx.IntImm("int32", 2), 2]]}
    identities = cta_identities_of(config)
    assert [[v.name for v in identity] for identity in identities] == [["cta"],
                                                                       ["cluster", "rank"]]
    # One CTA a cluster (extent 1 is no index): the CTA index alone.
    config[CTA_KEY][2][1] = tvm.tirx.IntImm("int32", 1)
    assert [[v.name for v in i] for i in cta_identities_of(config)] == [["cta"]]
    # A 2-D grid: both of its indices together, never one of them.
    bx, by = tvm.tirx.Var("bx", "int32"), tvm.tirx.Var("by", "int32")
    grid = {CTA_KEY: [[bx, tvm.tirx.IntImm("int32", 4), 1],
                      [by, tvm.tirx.IntImm("int32", 8), 1]]}
    assert [[v.name for v in i] for i in cta_identities_of(grid)] == [["bx", "by"]]


def test_a_slot_indexed_by_one_index_of_a_2d_grid_is_refused():
    import tvm

    from tvm_tma.dispatch.device_view import read_slots
    from tvm_tma.planner.proofs import Prover

    bx, by = tvm.tirx.Var("bx", "int32"), tvm.tirx.Var("by", "int32")
    maps = tvm.tirx.decl_buffer((32 * 1024,), "uint8", name="maps")
    extents = {bx: 4, by: 8}
    prover = Prover({var: tvm.ir.Range(0, extent) for var, extent in extents.items()})
    cta_vars = {var: tvm.tirx.IntImm("int32", e) for var, e in extents.items()}

    def slots(offset):
        pointer = tvm.tirx.call_intrin("handle", "tirx.address_of",
                                       tvm.tirx.BufferLoad(maps, [offset]))
        return read_slots(pointer, prover, cta_vars, ((bx, by),))

    assert slots((by * 4 + bx) * 1024)
    with pytest.raises(ValueError, match=r"tensormap-slot.*steps by 0 per by"):
        slots(bx * 1024)
