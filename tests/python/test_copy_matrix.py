"""The copy matrix in CI: exact plan facts, the plan's bytes, the generated CUDA, ptxas."""

from __future__ import annotations

import re

import numpy as np
import pytest
from copy_matrix import CASES
from copy_matrix_views import CASES as AUTHOR_CASES

from tvm_tma.testing.copy_cases import expected_after
from tvm_tma.testing.runner import assemble, compile_case, inputs, plans_of, run_model

IDS = [case.name for case in CASES]


def _facts(copy_plan):
    spec = copy_plan.tensor_map
    return dict(rank=spec.rank, swizzle=spec.swizzle, dtype=spec.dtype,
                global_dims=tuple(spec.global_dims), global_strides=tuple(spec.global_strides),
                box_dims=spec.box_dims, coordinates=tuple(copy_plan.coordinates),
                num_issues=copy_plan.num_issues, base_offset=copy_plan.base_offset,
                edge_dims=copy_plan.edge_dims, oob_fill=spec.oob_fill)


def test_matrix_covers_the_acceptance_grid():
    dtypes = {case.dtype for case in CASES}
    assert dtypes == {"float16", "bfloat16", "float32", "int8", "uint8", "float8_e4m3fn",
                      "float8_e5m2"}
    ranks = {case.expect["rank"] for case in CASES}
    assert ranks == {1, 2, 3, 4, 5}
    swizzles = {case.shared_layout for case in CASES}
    assert {"row", "swizzle:1", "swizzle:2", "swizzle:3"} <= swizzles
    assert {case.direction for case in CASES} == {"g2s", "s2g"}
    assert any(case.stages for case in CASES)
    assert any(case.expect.get("num_issues", 1) > 1 for case in CASES)
    assert any("dtype" in case.expect and case.expect["dtype"] != case.dtype for case in CASES)
    assert len(CASES) >= 40


def test_matrix_covers_the_author_forms():
    """Issue 11: views, reshapes, pieces, folds and edge tiles, 30 cases or more; edge
    tiles cross dim 0, an outer dim and both, in 2-D, 3-D and swizzled layouts, with every
    oob= option."""
    assert len(AUTHOR_CASES) >= 30
    names = {case.name.split("-")[0] for case in AUTHOR_CASES}
    assert names == {"view", "reshape", "pieces", "fold", "edge"}
    edges = [case for case in AUTHOR_CASES if case.oob]
    assert {case.oob for case in edges} == {"zero", "nan", "skip"}
    crossed = {case.expect["edge_dims"] for case in edges}
    assert {(0,), (1,), (0, 1)} <= crossed
    assert any(len(case.global_shape) == 3 for case in edges)
    assert any(case.shared_layout.startswith("swizzle") for case in edges)
    assert {case.direction for case in edges if case.global_offset} == {"g2s", "s2g"}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_plan_fields(case):
    copy_plan, _ = plans_of(case)[0]
    facts = _facts(copy_plan)
    assert {key: facts[key] for key in case.expect} == case.expect
    spec = copy_plan.tensor_map
    assert 1 <= spec.rank <= 5 and all(1 <= b <= 256 for b in spec.box_dims)
    assert spec.element_strides == (1,) * spec.rank
    assert (spec.interleave, spec.l2_promotion) == (0, 2)
    assert spec.oob_fill == (1 if case.oob == "nan" else 0)
    assert bool(copy_plan.edge_dims) == (case.oob is not None)
    assert copy_plan.bytes_per_issue * copy_plan.num_issues == case.copy_bytes


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_plan_moves_exactly_the_region(case):
    """The planned issues, run on the TMA model, equal the copy TVM's layouts define."""
    global_in, shared_in = inputs(case, seed=7)
    want_global, want_shared = expected_after(case, global_in, shared_in)
    got_global, got_shared = run_model(case, global_in, shared_in)
    np.testing.assert_array_equal(got_global.view(np.uint8), want_global.view(np.uint8))
    np.testing.assert_array_equal(got_shared.view(np.uint8), want_shared.view(np.uint8))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kernel_ir_and_ptxas(case):
    copy_plan, _ = plans_of(case)[0]
    built = compile_case(case)
    assert built.tma_call_sites == copy_plan.num_issues
    rank = copy_plan.rank
    hint = ".L2::cache_hint" if case.cache_hint else ""
    coords = ", ".join(f"%{i}" for i in range(2, 2 + rank))
    if case.direction == "g2s":
        policy = f", %{3 + rank}" if case.cache_hint else ""
        line = (f"cp.async.bulk.tensor.{rank}d.shared::cluster.global"
                f".mbarrier::complete_tx::bytes{hint} [%0], [%1, {{{coords}}}], "
                f"[%{2 + rank}]{policy};")
    else:
        policy = f", %{2 + rank}" if case.cache_hint else ""
        coords = ", ".join(f"%{i}" for i in range(1, 1 + rank))
        line = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group{hint} "
                f"[%0, {{{coords}}}], [%{1 + rank}]{policy};")
    assert built.tma_asm_lines == [line]
    policies = re.findall(r'"createpolicy\.fractional\.L2::(\w+)\.b64 %0;"', built.cuda_source)
    assert policies == ([case.cache_hint] if case.cache_hint else [])
    # One policy per copy call site, built before (not inside) its issue loop.
    policy_calls = [line for line in built.cuda_source.splitlines()
                    if "createpolicy" in line and line.strip().startswith("tvm_builtin_ptx")]
    assert len(policy_calls) == (1 if case.cache_hint else 0)
    if case.cache_hint:
        load_or_store = [line for line in built.cuda_source.splitlines()
                         if line.strip().startswith(("tvm_tma_load_", "tvm_tma_store_"))]
        assert all(line.rstrip().endswith("l2_policy_ptr[0]);") for line in load_or_store)
    assert built.tensormap_params == 1
    assert built.host_source.count("load ptr, ptr @.tvm_func.tvm_tma.encode_tiled") == 1
    assert len(assemble(built.cuda_source)) > 0
