"""The fuzzer's device-side views: a view whose offset and rows the kernel reads from an
argument (``CopyCase.device_view``, :mod:`tvm_tma.testing.device_view_case`).

The generator draws a few of them without disturbing the other cases; the planner-only path
plans the same view and facts as the dispatch does for the kernel; the model runs the
device-born plan at the case's own launch and at another one against numpy's copy; the
oracle catches a map bound to the static view and a refusal no rule explains; the kernels
assemble for sm_90a, and on a GPU every byte of both buffers is compared at each launch.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter

import numpy as np
import pytest
from plan_fields import plan_fields

import tvm_tma
from tvm_tma.planner import RULES, PlanError
from tvm_tma.planner.errors import refuse
from tvm_tma.testing import fuzz, fuzz_cases, fuzz_checks, fuzz_oracle, runner
from tvm_tma.testing.copy_cases import CopyCase, build_kernel, expected_after, global_storage
from tvm_tma.testing.device_view_case import (
    DEVICE_VIEW_RULES,
    DeviceClamp,
    device_clamp,
    device_eligible,
    launch_values,
    launches,
    relaunched,
)
from tvm_tma.testing.layout_eval import evaluate
from tvm_tma.testing.runner import assemble, compile_case, inputs, plans_of, run_model

SEED = fuzz.DEFAULT_SEED

#: (case, status, rule): fixed device-view cases, each a view the kernel reads from ``V``.
DEVICE_CASES = [
    # Rows 32..48 of a 40-row view 8 rows and 16 columns into a padded parent (an aligned
    # offset): the load fills the rows past the device's last row with zeros.
    (CopyCase("dv-load-oob", "float16", "g2s", (40, 64), (32, 0), (16, 64), (16, 64),
              "swizzle:3", global_strides=(72, 1), global_offset=8 * 72 + 16, oob="zero",
              device_view=True), "accepted", None),
    # A store of rows 8..24 of a 20-row view 256 bytes in: nothing lands past its end.
    (CopyCase("dv-store-cross", "float32", "s2g", (20, 32), (8, 0), (16, 32), (16, 32),
              global_offset=64, oob="skip", device_view=True), "accepted", None),
    # A reduction over padded rows crossing the view's end.
    (CopyCase("dv-reduce-cross", "float32", "s2g", (24, 32), (16, 0), (16, 32), (16, 32),
              global_strides=(40, 1), global_offset=3 * 40, oob="skip", reduce="add",
              device_view=True), "accepted", None),
    # A copy inside the view (the kernel's clamp keeps at least 24 rows), two stages.
    (CopyCase("dv-load-inside-staged", "bfloat16", "g2s", (64, 64), (8, 0), (8, 64),
              (2, 8, 64), "swizzle:3", stages=2, global_offset=8 * 64, device_view=True),
     "accepted", None),
    # 6 bytes past a 16-byte boundary: the device-side base cannot be aligned (the static
    # case folds the offset into coordinates; the device's offset is no host value).
    (CopyCase("dv-misaligned", "float16", "g2s", (64, 64), (0, 0), (16, 64), (16, 64),
              global_offset=3, device_view=True), "refused", "global-address-align"),
]
NAMES = [case.name for case, _, _ in DEVICE_CASES]
CASES = {case.name: (case, status, rule) for case, status, rule in DEVICE_CASES}
ACCEPTED = [name for name in NAMES if CASES[name][1] == "accepted"]


# --------------------------------------------------------------------------------------------
# The fixed cases on the model
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_fixed_cases_are_exact_or_refused_by_rule(name):
    case, status, rule = CASES[name]
    outcome = fuzz.check_case(case)
    assert (outcome.status, outcome.rule) == (status, rule), outcome
    assert fuzz.valid_case(case)


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_plan_is_device_born_and_exact_at_every_launch(name):
    """The map's base and rows are the device's values (``device_view``); bound to the
    case's own launch the model leaves numpy's copy of the static case, and at another
    launch (the view elsewhere, shorter) numpy's copy of the case that launch performs."""
    case = CASES[name][0]
    for copy_plan, env in plans_of(case):
        assert copy_plan.device_view
        assert not isinstance(copy_plan.base_offset, int)  # data + the device's offset
        assert evaluate(copy_plan.base_offset, env) == case.global_offset
    assert len(launches(case)) == 2
    for launch in launches(case):
        truth = relaunched(case, launch)
        global_in, shared_in = inputs(truth, seed=3)
        want_global, want_shared = expected_after(truth, global_in, shared_in)
        got_global, got_shared = run_model(truth, global_in, shared_in,
                                           plans=plans_of(case, launch))
        np.testing.assert_array_equal(got_global.view(np.uint8), want_global.view(np.uint8))
        np.testing.assert_array_equal(got_shared.view(np.uint8), want_shared.view(np.uint8))


def test_the_clamp_and_the_launches():
    """``V`` is the offset in 16-byte units and the rows; a copy that stays inside keeps
    the rows it needs, one that may cross the end keeps at least one."""
    load = CASES["dv-load-oob"][0]
    assert device_clamp(load) == DeviceClamp(unit=8, max_units=74, remainder=0, min_rows=1,
                                             max_rows=40)
    assert launches(load) == ((74, 40), (37, 33))  # the other ends one row into the region
    staged = CASES["dv-load-inside-staged"][0]
    assert (device_clamp(staged).min_rows, launches(staged)[1]) == (24, (32, 24))
    misaligned = CASES["dv-misaligned"][0]
    assert (device_clamp(misaligned).remainder, device_clamp(misaligned).max_units) == (3, 0)
    assert relaunched(load, launches(load)[0]) == dataclasses.replace(load, device_view=False)


# --------------------------------------------------------------------------------------------
# The kernel: the dispatch plans what the planner-only path plans; it assembles
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_kernel_plans_the_same_view(name):
    """The dispatch sees the kernel's clamps as facts and plans the view as plans_of does
    (or refuses it by the same rule)."""
    case, status, rule = CASES[name]
    (copy,) = tvm_tma.explain(build_kernel(case)).copies
    if status == "refused":
        assert copy.rule == rule, copy.detail
        return
    assert copy.planned and copy.plan.device_view
    assert plan_fields(copy.plan) == plan_fields(plans_of(case)[0][0])


def test_the_stream_s_kernels_plan_what_plans_of_plans():
    """For the stream's device views the planner-only path is the dispatch's reading of the
    kernel: the same plan, or the same device-side rule."""
    compared = Counter()
    for index in range(4000):
        case = fuzz.random_case(SEED, index)
        if not case.device_view or not fuzz.kernel_compatible(case):
            continue
        try:
            planned, rule = plans_of(case)[0][0], None
        except PlanError as error:
            planned, rule = None, error.rule
        if planned is None and rule not in DEVICE_VIEW_RULES:
            continue  # refused for the static case's reasons (its kernel may name another)
        (copy,) = tvm_tma.explain(build_kernel(case)).copies
        if planned is None:
            assert copy.rule == rule, (index, copy.detail)
        else:
            assert copy.planned and plan_fields(copy.plan) == plan_fields(planned), index
        compared["planned" if planned is not None else "refused"] += 1
    assert compared["planned"] >= 8 and compared["refused"] >= 2, compared


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_kernel_rebinds_its_map_and_assembles_for_sm90a(name):
    case = CASES[name][0]
    built = compile_case(case)
    body = built.cuda_source[built.cuda_source.rindex("__global__ void"):]
    assert built.tma_call_sites == 1 and built.tensormap_params == 1
    assert "tvm_tma_rebind_" in body and "W_ptr" in body  # the map rebound into W
    assert len(assemble(built.cuda_source)) > 0


# --------------------------------------------------------------------------------------------
# The generator and the oracle
# --------------------------------------------------------------------------------------------


def test_the_generator_draws_a_few_device_views_and_nothing_else_changes(monkeypatch):
    cases = [fuzz.random_case(SEED, index) for index in range(3000)]
    device = [case for case in cases if case.device_view]
    eligible = [case for case in cases if device_eligible(case)]
    assert 0.04 * len(eligible) <= len(device) <= 0.14 * len(eligible)
    assert all(device_eligible(case) for case in device)
    assert {case.direction for case in device} == {"g2s", "s2g"}
    keys = Counter(key for case in device for key in fuzz.coverage_keys(case))
    assert keys["device-view"] == len(device) and keys["oob=zero"] + keys["oob=skip"] > 0
    monkeypatch.setattr(fuzz_cases, "DEVICE_VIEW_SHARE", 0.0)
    for index, case in enumerate(cases[:1500]):  # the flag is the only draw they add
        assert fuzz.random_case(SEED, index) == dataclasses.replace(case, device_view=False)


def test_saved_cases_keep_their_digests():
    """A static case's digest leaves the new field out (the regression files' names)."""
    good = CopyCase("good", "float16", "g2s", (32, 256), (8, 64), (16, 128), (16, 128),
                    "swizzle:3")
    assert fuzz.case_digest(good) == "ad48cccf3c6e"
    case = CASES["dv-load-oob"][0]
    assert fuzz.case_digest(case) != fuzz.case_digest(dataclasses.replace(case,
                                                                          device_view=False))
    assert "device_view=True" in fuzz.case_source(case)


def test_the_stream_s_device_views_are_exact_or_refused_by_a_named_rule():
    """Every device-view case of a sample: accepted (plans device-born where their map
    reads the device's values, exact at both launches) or refused by a rule of device-side
    views, the static twin's, or oob for a store crossing the device-side end."""
    device = [case for case in (fuzz.random_case(SEED, i) for i in range(5000))
              if case.device_view]
    outcomes = Counter()
    for case in device:
        outcome = fuzz.check_case(case)
        assert outcome.status != "mismatch", (case, outcome)
        outcomes[outcome.status] += 1
        if outcome.status == "refused":
            assert outcome.rule in RULES
    assert outcomes["accepted"] >= 10 and outcomes["refused"] >= 10, outcomes


def _patch_plans(monkeypatch, edit):
    """Edit every plan the oracle sees, at every launch (``plans_of`` is looked up in
    fuzz_oracle for the case's own launch and in fuzz_checks for the others)."""
    real = runner.plans_of

    def edited(case, launch=None):
        return [(edit(case, p, env), env) for p, env in real(case, launch)]

    monkeypatch.setattr(fuzz_oracle, "plans_of", edited)
    monkeypatch.setattr(fuzz_checks, "plans_of", edited)


def _bound_to_the_static_view(case, copy_plan, env):
    """The plan with its map bound to the case's own launch: a host-born map of the static
    view, as if the device's values were ignored (``env``: the scalars of this plan's view,
    rebound to the case's own values)."""
    own = dict(zip(("units", "rows"), launch_values(case)))
    env = {var: own[var.name] for var in env}
    spec = copy_plan.tensor_map
    spec = dataclasses.replace(
        spec, global_dims=tuple(int(evaluate(d, env)) for d in spec.global_dims),
        global_strides=tuple(int(evaluate(s, env)) for s in spec.global_strides))
    return dataclasses.replace(copy_plan, tensor_map=spec, device_view=False,
                               base_offset=int(evaluate(copy_plan.base_offset, env)))


@pytest.mark.parametrize("name", ["dv-load-oob", "dv-store-cross"])
def test_a_map_bound_to_the_static_view_is_caught_at_the_other_launch(monkeypatch, name):
    _patch_plans(monkeypatch, _bound_to_the_static_view)
    outcome = fuzz.check_case(CASES[name][0])
    assert (outcome.status, outcome.kind) == ("mismatch", "bytes"), outcome
    assert outcome.problem.startswith("launch V=")


def test_a_device_born_plan_must_say_so(monkeypatch):
    _patch_plans(monkeypatch, lambda case, p, env: dataclasses.replace(p, device_view=False))
    outcome = fuzz.check_case(CASES["dv-load-oob"][0])
    assert (outcome.status, outcome.kind) == ("mismatch", "invariant:device-view"), outcome


def test_a_refusal_no_rule_explains_is_a_mismatch(monkeypatch):
    """A device-view case refused by a rule that is neither a device-side view's nor its
    static twin's (which plans) is a mismatch; a device-side rule is a refusal."""
    real = runner.plans_of

    def refusing(rule):
        def plans(case, launch=None):
            if case.device_view:
                raise refuse(rule, "made up")
            return real(case, launch)
        return plans

    case = CASES["dv-load-oob"][0]
    monkeypatch.setattr(fuzz_oracle, "plans_of", refusing("swizzle-span"))
    outcome = fuzz.check_case(case)
    assert (outcome.status, outcome.kind) == ("mismatch", "device-view-refusal"), outcome
    for rule in DEVICE_VIEW_RULES:
        monkeypatch.setattr(fuzz_oracle, "plans_of", refusing(rule))
        assert fuzz.check_case(case).rule == rule


def test_the_shrinker_makes_the_view_static():
    case = CASES["dv-store-cross"][0]

    def fails(candidate: CopyCase) -> bool:  # "4-byte stores fail"
        return candidate.element_bytes == 4 and candidate.direction == "s2g"

    small = fuzz.shrink(case, fails)
    assert fails(small) and fuzz.valid_case(small) and not small.device_view
    with pytest.raises(ValueError, match="device-side view"):
        dataclasses.replace(case, global_offset=0)  # no view in the kernel: no device view


def test_the_gpu_worker_builds_a_device_view_kernel(tmp_path):
    path, _, error = fuzz._compile_worker(CASES["dv-load-oob"][0], str(tmp_path))
    assert error == "" and os.path.getsize(path) > 0, error


def test_plans_of_refuses_what_the_kernel_refuses():
    with pytest.raises(PlanError) as error:
        plans_of(CASES["dv-misaligned"][0])
    assert error.value.rule == "global-address-align" and "device-side" in str(error.value)


# --------------------------------------------------------------------------------------------
# On the GPU
# --------------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", ACCEPTED)
def test_the_fixed_device_views_are_exact_on_gpu(name):
    """Every byte of the allocation and of shared memory, at each launch (``V``)."""
    case = CASES[name][0]
    ok, problem = runner.run_on_gpu(case, compile_case(case), seed=5)
    assert ok, problem


@pytest.mark.gpu
def test_the_stream_s_device_views_are_exact_on_gpu():
    chosen = [(i, case) for i, case in ((i, fuzz.random_case(SEED, i)) for i in range(10000))
              if case.device_view and fuzz.kernel_compatible(case)
              and fuzz.check_case(case).status == "accepted"][:24]
    assert len(chosen) >= 10
    gpu = fuzz.run_gpu(chosen, jobs=max(1, min(os.cpu_count() or 1, 8)))
    assert gpu.kernels == len(chosen) and gpu.mismatches == 0, gpu.failures[:5]


def test_global_storage_pads_a_relaunched_view_to_the_case_s_allocation():
    """A launch at another view runs in the case's allocation: the truth is the relaunched
    case's storage, padded to the case's size."""
    case = CASES["dv-load-oob"][0]
    truth = relaunched(case, launches(case)[1])
    logical = inputs(truth)[0]
    storage = global_storage(truth, logical, case.global_storage_elems)
    assert storage.size == case.global_storage_elems > truth.global_storage_elems
