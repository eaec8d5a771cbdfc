"""A view whose offset folds into coordinates, but plans only with the offset as the map's base.

Step L1 places a global view's offset in one of three ways (``planner/global_view.py``): folded
into whole coordinates (the map's base stays the data pointer), or as the map's base
(``data + offset``), or in the aliased argument's coordinates. Folding is preferred, but it
moves the region's starts: a 1-D float32 view at element 252 copying elements 768..1024 starts
at 1020 once folded, off the 32-element cut that a (8, 32) tile with a 64-byte swizzle needs,
so the copy was refused ``[smem-align-128]`` (an issue step of 64 bytes) -- fuzz case
``random_case(20251122, 1756)``, a view laid out as (136, 8):(8, 1), which planned while its
pieces kept the offset from folding, and the same copy over a plain 1-D layout. With the
offset as the map's base (1008 bytes past the data pointer, 16-byte aligned) the region
starts at 768, on the cut, and the copy is one issue. The planner now plans the folded view
first and, only when that plan is refused, the view at the base (:func:`global_placements`,
``planner/api.py``). Every other plan is unchanged; what neither placement can plan is
refused with the folded placement's rule, and a base off 16 bytes is never tried.

The 2-D analogue: columns 24..88 of a float16 matrix with rows 104 halves apart (a view that
starts mid-row), each 128-byte row filling two rows of a (64, 32) tile with a 64-byte
swizzle: folded, dimension 0 starts at 24, off the 32-half cut (``[swizzle-span]``); at the
base ``data + 24`` it starts at 0.

CI checks the plans (exact numbers), the bytes the plans move on the TMA model, the plan the
kernel's lowering makes, the prover's records and ptxas for sm_90a; the GPU test runs the
kernels and compares every byte of both buffers.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tvm
from plan_fields import plan_fields

import tvm_tma
from tvm_tma.planner import PlanError, plan
from tvm_tma.planner.proofs import Prover
from tvm_tma.testing.copy_cases import CopyCase, build_kernel, expected_after, planner_regions
from tvm_tma.testing.fuzz import check_case, random_case
from tvm_tma.testing.runner import (
    assemble,
    compile_case,
    inputs,
    plans_of,
    run_model,
    run_on_gpu,
)

#: The view's layout in fuzz case 1756: 1088 elements as 136 rows of 8.
PIECES = ((136, 8), (8, 1))


def _view_1d(direction: str, tiles=PIECES, offset: int = 252, start: int = 768,
             smem_elem_offset: int = 512, stages: int = 0) -> CopyCase:
    """256 float32 elements from ``start`` of a 1-D view at element ``offset`` of its
    allocation, to or from a (8, 32) tile with a 64-byte swizzle (staged: 1600 elements,
    stage ``s`` copying from ``start + 256 * s``)."""
    shape = ((stages,) if stages else ()) + (8, 32)
    size = 1088 if not stages else 1600
    return CopyCase(f"view-1d-{direction}", "float32", direction, (size,), (start,), (256,),
                    shape, shared_layout="swizzle:2", smem_elem_offset=smem_elem_offset,
                    stages=stages, global_offset=offset, global_tiles=tiles)


def _view_2d(direction: str, offset: int = 24) -> CopyCase:
    """Rows 16..48 of a (64, 64) float16 view whose rows are 104 halves apart, at element
    ``offset`` of its allocation (24: the view starts mid-row), to or from a (64, 32) tile
    with a 64-byte swizzle: each 64-half row of the view fills two rows of the tile."""
    return CopyCase(f"view-2d-{direction}", "float16", direction, (64, 64), (16, 0), (32, 64),
                    (64, 32), shared_layout="swizzle:2", global_strides=(104, 1),
                    global_offset=offset)


def _spec(dtype, dims, strides, box, swizzle=2) -> dict:
    return dict(dtype=dtype, global_dims=dims, global_strides=strides, box_dims=box,
                element_strides=(1,) * len(box), swizzle=swizzle, interleave=0,
                l2_promotion=2, oob_fill=0)


#: The 1-D view at the base: 16 elements x 34 rows of 128 bytes (1088 elements: the view's
#: own bound) x the tile's two 64-byte halves; row 24 is element 768.
SPEC_1D = _spec("float32", (16, 34, 2), (128, 64), (16, 8, 2))
#: The 2-D view at the base: 32 halves x the row's two halves (64 bytes apart) x 64 rows of
#: 208 bytes; the region starts at row 16.
SPEC_2D = _spec("float16", (32, 2, 64), (64, 208), (32, 2, 32))

#: name -> (case, expected tensor map, coordinates, shared offset, base offset).
CASES = {
    "1d-pieces-s2g": (_view_1d("s2g"), SPEC_1D, (0, 24, 0), 512, 252),
    "1d-pieces-g2s": (_view_1d("g2s"), SPEC_1D, (0, 24, 0), 512, 252),
    "1d-plain-s2g": (_view_1d("s2g", tiles=None), SPEC_1D, (0, 24, 0), 512, 252),
    "1d-plain-g2s": (_view_1d("g2s", tiles=None), SPEC_1D, (0, 24, 0), 512, 252),
    "2d-mid-row-g2s": (_view_2d("g2s"), SPEC_2D, (0, 0, 16), 0, 24),
    "2d-mid-row-s2g": (_view_2d("s2g"), SPEC_2D, (0, 0, 16), 0, 24),
    # the offset 8 rows further down is placed whole at the base too (8 * 104 + 24)
    "2d-row-8-mid-row-g2s": (_view_2d("g2s", 8 * 104 + 24), SPEC_2D, (0, 0, 16), 0, 856),
}
NAMES = sorted(CASES)



def _folded_refusal(case: CopyCase) -> PlanError:
    """The refusal of the folded placement alone (the planner before the fallback)."""
    from tvm_tma.planner import api

    placements = api.global_placements
    api.global_placements = lambda *args: placements(*args)[:1]
    try:
        with pytest.raises(PlanError) as error:
            plans_of(case)
    finally:
        api.global_placements = placements
    return error.value


def test_fuzz_case_1756_plans_again():
    case = random_case(20251122, 1756)
    assert (case.global_shape, case.global_tiles, case.global_offset) == (
        (1088,), PIECES, 252)
    assert check_case(case).status == "accepted"
    (copy_plan, _), = plans_of(case)
    assert plan_fields(copy_plan) == plan_fields(plans_of(_view_1d("s2g"))[0][0])


@pytest.mark.parametrize("name", NAMES)
def test_view_plans_with_the_map_base_at_its_offset(name):
    case, spec, coordinates, smem_offset, base = CASES[name]
    (copy_plan, _), = plans_of(case)
    fields = plan_fields(copy_plan)
    assert fields["tensor_map"] == spec
    assert (fields["coordinates"], fields["smem_offset"], fields["base_offset"]) == (
        coordinates, smem_offset, base)
    assert (fields["issue_axes"], fields["edge_dims"], fields["host_checks"]) == ((), (), ())
    assert fields["direction"] == case.direction and copy_plan.num_issues == 1
    assert (base * case.element_bytes) % 16 == 0


@pytest.mark.parametrize("name", NAMES)
def test_the_folded_placement_alone_is_refused(name):
    """What the planner answered before the fallback (and still tries first)."""
    error = _folded_refusal(CASES[name][0])
    if name.startswith("1d"):
        assert error.rule == "smem-align-128"
        assert "steps the shared address by 64 bytes" in error.detail
    else:
        assert error.rule == "swizzle-span"


@pytest.mark.parametrize("name", NAMES)
def test_plans_move_exactly_the_region(name):
    case = CASES[name][0]
    for seed in (1, 2):
        global_in, shared_in = inputs(case, seed=seed)
        want_global, want_shared = expected_after(case, global_in, shared_in)
        got_global, got_shared = run_model(case, global_in, shared_in)
        np.testing.assert_array_equal(got_global.view(np.uint8), want_global.view(np.uint8))
        np.testing.assert_array_equal(got_shared.view(np.uint8), want_shared.view(np.uint8))
    assert check_case(case).status == "accepted"  # the oracle's invariants and bytes


@pytest.mark.parametrize("name", NAMES)
def test_kernel_lowers_the_same_plan_and_assembles(name):
    """The dispatch plans the view against the kernel argument it aliases, as plans_of does
    without it; the map is encoded at data + offset and ptxas accepts the kernel."""
    case = CASES[name][0]
    copies = tvm_tma.explain(build_kernel(case)).copies
    assert len(copies) == 1 and copies[0].planned
    assert plan_fields(copies[0].plan) == plan_fields(plans_of(case)[0][0])
    built = compile_case(case)
    assert built.tma_call_sites == 1 and built.tensormap_params == 1
    assert len(assemble(built.cuda_source)) > 0


def test_the_folded_placement_stays_preferred():
    """Where folding plans, the map keeps the data pointer as its base: the view at element
    256 copying 768..1024 starts at 1024, on the cut (as before the fallback)."""
    (copy_plan, _), = plans_of(_view_1d("g2s", offset=256, smem_elem_offset=0))
    fields = plan_fields(copy_plan)
    assert fields["tensor_map"] == _spec("float32", (16, 42, 2), (128, 64), (16, 8, 2))
    assert (fields["coordinates"], fields["base_offset"]) == ((0, 32, 0), 0)
    wide = _view_2d("g2s")
    wide = dataclasses.replace(wide, global_extent=(32, 64), shared_shape=(32, 64))
    (copy_plan, _), = plans_of(wide)
    assert copy_plan.base_offset == 0 and copy_plan.coordinates == (24, 16)
    assert copy_plan.tensor_map.global_dims == (88, 64)


def test_a_base_off_16_bytes_is_never_tried():
    """At element 250 the base would be 1000 bytes past the data pointer: the folded
    placement's refusal stands."""
    case = _view_1d("g2s", offset=250)
    with pytest.raises(PlanError) as error:
        plans_of(case)
    assert error.value.rule == "inner-coordinate-16B"
    assert str(error.value) == str(_folded_refusal(case))


def test_both_refused_raises_the_folded_refusal_and_its_records():
    """Elements 776.. (staged): neither 1028 (folded) nor 776 (at the base) is on the cut.
    The refusal, and the facts the prover reports (``explain``), are the folded plan's."""
    case = _view_1d("g2s", tiles=None, start=776, smem_elem_offset=0, stages=2)
    stage = tvm.tirx.Var("stage", "int32")
    prover = Prover({stage: tvm.ir.Range.from_min_extent(0, 2)})
    with pytest.raises(PlanError) as error:
        plan(*planner_regions(case, stage), prover=prover)
    assert str(error.value) == str(_folded_refusal(case))
    assert error.value.rule == "smem-align-128"
    conditions = [fact.condition for fact in prover.established + prover.unproven]
    assert "(stage * 1024 + 4112) % 16 == 0" in conditions  # 1028 * 4 bytes: folded
    assert not any("3104" in condition for condition in conditions)  # 776 * 4: at the base


def test_the_fallback_plan_rests_on_its_own_facts():
    """Staged, the folded attempt proved an inner-coordinate fact at 1020 * 4 bytes before it
    was refused; the plan returned is the base's, and so are the facts recorded for it."""
    case = _view_1d("g2s", tiles=None, smem_elem_offset=0, stages=2)
    stage = tvm.tirx.Var("stage", "int32")
    prover = Prover({stage: tvm.ir.Range.from_min_extent(0, 2)})
    copy_plan = plan(*planner_regions(case, stage), prover=prover)
    assert copy_plan.base_offset == 252 and str(copy_plan.coordinates[1]) == "stage * 8 + 24"
    assert copy_plan.tensor_map.global_dims == (16, 50, 2)
    assert [fact.what for fact in prover.established] == [
        "shared-bounds (smem dimension 0)", "region-bounds (global dimension 0)",
        "smem-align-128"]
    assert prover.unproven == []
    assert not any("4080" in fact.condition for fact in prover.established)


@pytest.mark.parametrize("scale, aligned", [(4, True), (1, False)])
def test_a_symbolic_offset_falls_back_to_its_base(scale, aligned):
    """A view at ``v * scale + 252`` (``v >= 0`` known) folds, is refused, and plans at the
    base: 16-byte aligned when ``scale`` is 4, else left to the encoder's check of the base
    address at launch, as for any base the analyzer cannot decide."""
    v = tvm.tirx.Var("v", "int32")
    dst, src = planner_regions(_view_1d("g2s", tiles=None, smem_elem_offset=0))
    view = tvm.tirx.decl_buffer((1088,), "float32", "A", data=src.source.data,
                                elem_offset=v * scale + 252)
    region = tvm.tirx.BufferRegion(view, [tvm.ir.Range.from_min_extent(768, 256)])
    copy_plan = plan(dst, region, facts=[v >= 0])
    assert str(copy_plan.base_offset) == (f"v * {scale} + 252" if scale != 1 else "v + 252")
    assert copy_plan.coordinates == (0, 24, 0) and copy_plan.host_checks == ()
    assert plan_fields(copy_plan.tensor_map) == SPEC_1D
    prover = Prover(facts=[v >= 0])
    assert prover.prove(tvm.tirx.floormod(copy_plan.base_offset * 4, 16) == 0) == aligned


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_view_at_the_base_is_exact_on_gpu(name):
    case = CASES[name][0]
    built = compile_case(case)
    for seed in (1, 2):
        ok, problems = run_on_gpu(case, built, seed=seed)
        assert ok, f"{name} (seed {seed}): {problems}"
