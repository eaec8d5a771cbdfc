"""The differential fuzzer: the 10,000-case CI run, the generator's coverage, the oracle, the
shrinker and the regression-test writer.

Select the big run alone with ``-m fuzz`` (or ``-k fuzz_10k``); its seed is printed and can be
overridden with ``TVM_TMA_FUZZ_SEED``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from tvm_tma.planner import RULES
from tvm_tma.planner.plan_types import IssueAxis
from tvm_tma.testing import fuzz, fuzz_oracle, fuzz_run, fuzz_shrink
from tvm_tma.testing.copy_cases import CopyCase

CI_CASES = 10_000


def _seed() -> int:
    return int(os.environ.get("TVM_TMA_FUZZ_SEED", fuzz.DEFAULT_SEED))


@pytest.mark.fuzz
def test_fuzz_10k_cases_have_no_mismatch(capsys):
    seed = _seed()
    jobs = max(1, min(os.cpu_count() or 1, 4))
    with capsys.disabled():  # the seed and the counts always reach the CI log
        print(f"\nfuzz: seed {seed} (TVM_TMA_FUZZ_SEED overrides), {CI_CASES} cases", flush=True)
    summary = fuzz.run_fuzz(CI_CASES, seed, jobs=jobs)
    with capsys.disabled():
        print(f"fuzz: {summary.line} ({summary.seconds:.1f} s, {jobs} jobs)")
    print("\n".join(fuzz._histogram(summary)))
    details = "\n".join(
        f"  random_case({seed}, {index}): {outcome.kind}: {outcome.problem[:300]}"
        for index, outcome in summary.failures[:20]
    )
    for index, outcome in summary.failures[:3]:  # the smallest versions, ready to paste
        small, _ = fuzz.minimize_failure(fuzz.random_case(seed, index), outcome, budget=150)
        details += f"\nrandom_case({seed}, {index}) minimized:\n{fuzz.case_source(small)}"
    assert summary.cases == CI_CASES
    assert summary.mismatches == 0, (
        f"seed {seed}: {summary.line}\n{details}\nminimize and save them with "
        f"python -m tvm_tma.testing.fuzz --cases {CI_CASES} --seed {seed} "
        "--save-failures tests/python/fuzz_regressions"
    )
    assert set(summary.rules) <= set(RULES)


# --------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------


def test_generator_covers_the_grid():
    cases = [fuzz.random_case(1, index) for index in range(1500)]
    keys = Counter(key for case in cases for key in fuzz.coverage_keys(case))
    assert {case.dtype for case in cases} == set(fuzz.DTYPES)
    assert {len(case.global_shape) for case in cases} == {1, 2, 3, 4, 5}
    layouts = {key for key in keys if key.startswith("layout=")}
    assert layouts == {"layout=row", "layout=padded", "layout=blocked", "layout=swizzle:0",
                       "layout=swizzle:1", "layout=swizzle:2", "layout=swizzle:3"}
    assert keys["direction=g2s"] > 500 and keys["direction=s2g"] > 500
    for feature in ("stages", "strided-global", "global-offset", "smem-offset",
                    "shared-subregion"):
        assert keys[feature] >= 20, feature
    assert any(c.smem_elem_offset * c.element_bytes % 128 for c in cases)  # misaligned too
    assert any(c.global_start[-1] * c.element_bytes % 16 for c in cases)  # unaligned starts
    assert any(c.global_strides and c.global_strides[0] * c.element_bytes % 16 for c in cases)
    assert all(fuzz.valid_case(case) for case in cases[:300])


def test_generator_is_deterministic_per_case():
    assert fuzz.random_case(7, 123) == fuzz.random_case(7, 123)
    assert fuzz.random_case(7, 123) != fuzz.random_case(8, 123)


def test_a_sample_mixes_accepts_and_refusals_with_rules():
    summary = fuzz.run_fuzz(600, seed=2)
    assert summary.cases == 600
    assert summary.accepted >= 0.35 * summary.cases, summary.line
    assert set(summary.rules) <= set(RULES)
    assert len(summary.rules) >= 8, summary.rules
    assert summary.coverage[("layout=swizzle:3", "accepted")] > 0
    assert summary.coverage[("stages", "accepted")] > 0
    assert summary.coverage[("strided-global", "accepted")] > 0
    assert summary.issues > summary.accepted  # some plans need issue loops


# --------------------------------------------------------------------------------------------
# The oracle catches wrong plans
# --------------------------------------------------------------------------------------------

GOOD = CopyCase("good", "float16", "g2s", (32, 256), (8, 64), (16, 128), (16, 128), "swizzle:3")


def _patch_plans(monkeypatch, edit):
    """Edit every plan the oracle sees (``check_case`` looks ``plans_of`` up in fuzz_oracle)."""
    real = fuzz_oracle.plans_of

    def edited(case):
        return [(edit(p), env) for p, env in real(case)]

    monkeypatch.setattr(fuzz_oracle, "plans_of", edited)


def test_a_good_case_is_accepted():
    outcome = fuzz.check_case(GOOD)
    assert outcome.status == "accepted", outcome


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
def test_a_shifted_coordinate_is_a_byte_mismatch(monkeypatch, direction):
    _patch_plans(monkeypatch, lambda p: dataclasses.replace(
        p, coordinates=(p.coordinates[0], p.coordinates[1] + 1, *p.coordinates[2:])))
    outcome = fuzz.check_case(dataclasses.replace(GOOD, direction=direction))
    assert (outcome.status, outcome.kind) == ("mismatch", "bytes"), outcome


def test_an_extra_issue_axis_breaks_an_invariant(monkeypatch):
    _patch_plans(monkeypatch, lambda p: dataclasses.replace(
        p, issue_axes=(*p.issue_axes, IssueAxis(2, 4096, 1, 8))))
    outcome = fuzz.check_case(GOOD)
    assert (outcome.status, outcome.kind) == ("mismatch", "invariant:bytes"), outcome


def test_a_misaligned_issue_breaks_an_invariant(monkeypatch):
    _patch_plans(monkeypatch, lambda p: dataclasses.replace(p, smem_offset=p.smem_offset + 8))
    outcome = fuzz.check_case(GOOD)
    assert (outcome.status, outcome.kind) == ("mismatch", "invariant:smem-align-128"), outcome


def test_crashes_and_hangs_are_mismatches(monkeypatch):
    def crash(case):
        raise RuntimeError("boom")

    monkeypatch.setattr(fuzz_oracle, "plans_of", crash)
    outcome = fuzz.check_case(GOOD)
    assert outcome.status == "mismatch" and outcome.kind == "crash:plan:RuntimeError"

    def hang(case):
        time.sleep(5)

    monkeypatch.setattr(fuzz_oracle, "plans_of", hang)
    start = time.perf_counter()
    outcome = fuzz.check_case(GOOD, timeout=0.2)
    assert (outcome.status, outcome.kind) == ("mismatch", "timeout")
    assert time.perf_counter() - start < 2


def test_refusals_carry_a_known_rule():
    too_far = dataclasses.replace(GOOD, global_start=(24, 64))  # rows 24..40 of 32
    outcome = fuzz.check_case(too_far)
    assert (outcome.status, outcome.rule) == ("refused", "region-bounds")


def test_padding_of_a_strided_view_is_checked(monkeypatch):
    """A store into the row padding of a strided global view is caught."""
    case = CopyCase("pad", "float32", "s2g", (8, 32), (0, 0), (4, 32), (4, 32),
                    global_strides=(40, 1))
    assert fuzz.check_case(case).status == "accepted"

    def wider_rows(p):  # pretend the rows are dense: the store lands in the padding
        spec = dataclasses.replace(p.tensor_map, global_strides=(128,))
        return dataclasses.replace(p, tensor_map=spec)

    _patch_plans(monkeypatch, wider_rows)
    assert fuzz.check_case(case).kind == "bytes"


# --------------------------------------------------------------------------------------------
# The shrinker and the regression tests it writes
# --------------------------------------------------------------------------------------------

BIG = CopyCase(
    name="big", dtype="bfloat16", direction="s2g", global_shape=(40, 3, 24, 200),
    global_start=(4, 1, 8, 32), global_extent=(8, 1, 16, 128), shared_shape=(3, 8, 16, 128),
    shared_layout="swizzle:3", smem_elem_offset=2048, stages=3,
    global_strides=(24 * 3 * 208, 24 * 208, 208, 1),
)


def test_shrinker_minimizes_a_synthetic_failure():
    assert fuzz.valid_case(BIG)

    def fails(case: CopyCase) -> bool:  # "wide 2-byte rows fail"
        return case.element_bytes == 2 and case.global_extent[-1] >= 64

    small = fuzz.shrink(BIG, fails)
    assert fails(small) and fuzz.valid_case(small)
    assert small.stages == 0 and small.global_strides is None
    assert small.smem_elem_offset == 0 and small.shared_layout == "row"
    assert small.dtype == "float16" and small.direction == "g2s"
    assert small.global_extent == (64,) and small.global_shape == (64,)
    assert small.global_start == (0,)
    assert small.shared_shape == (64,)


def test_shrinker_keeps_the_failure_kind():
    """A predicate that only the original satisfies leaves the case as it is."""
    assert fuzz.shrink(BIG, lambda case: case == BIG) == BIG


def test_regression_file_round_trip(tmp_path):
    outcome = fuzz.Outcome("mismatch", kind="bytes", problem="global: 3 bytes differ")
    path = fuzz.save_regression(GOOD, outcome, tmp_path, origin="random_case(1, 2)")
    assert re.fullmatch(r"test_case_[0-9a-f]{12}\.py", path.name)
    assert path.name == f"test_case_{fuzz.case_digest(GOOD)}.py"
    spec = importlib.util.spec_from_file_location("fuzz_regression_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.CASE == GOOD
    tests = [getattr(module, name) for name in dir(module) if name.startswith("test_")]
    assert len(tests) == 1
    tests[0]()  # GOOD is exact, so the regression test passes
    assert "random_case(1, 2)" in path.read_text()


def test_digest_ignores_the_name():
    assert fuzz.case_digest(GOOD) == fuzz.case_digest(dataclasses.replace(GOOD, name="x"))
    assert fuzz.case_digest(GOOD) != fuzz.case_digest(dataclasses.replace(GOOD, stages=2))


# --------------------------------------------------------------------------------------------
# The command line and the GPU mode's build step
# --------------------------------------------------------------------------------------------


def test_command_line_prints_seed_and_counts(capsys):
    assert fuzz.main(["--cases", "40", "--seed", "3", "--jobs", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "seed 3"
    assert re.fullmatch(r"40 cases, \d+ accepted, \d+ refused, 0 mismatches", lines[-1])
    assert "refusals by rule:" in lines


def test_command_line_fails_on_a_mismatch(capsys, monkeypatch, tmp_path):
    real = fuzz.check_case

    def broken(case, data_seed=0, timeout=fuzz.CASE_TIMEOUT):
        outcome = real(case, data_seed, timeout)
        if outcome.status == "accepted" and case.direction == "g2s":
            return fuzz.Outcome("mismatch", kind="synthetic", problem="planted")
        return outcome

    for module in (fuzz_run, fuzz_shrink):  # the batch driver and the shrinker call it
        monkeypatch.setattr(module, "check_case", broken)
    code = fuzz.main(["--cases", "30", "--seed", "3", "--jobs", "1", "--shrink-budget", "20",
                      "--save-failures", str(tmp_path)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert code == 1
    assert re.fullmatch(r"30 cases, \d+ accepted, \d+ refused, [1-9]\d* mismatches", last)
    assert list(tmp_path.glob("test_case_*.py"))


def test_gpu_worker_builds_a_loadable_library(tmp_path):
    case = fuzz.random_case(1, next(i for i in range(50)
                                    if fuzz.check_case(fuzz.random_case(1, i)).status
                                    == "accepted" and fuzz.kernel_compatible(
                                        fuzz.random_case(1, i))))
    path, seconds, error = fuzz._compile_worker(case, str(tmp_path))
    assert error == "" and os.path.getsize(path) > 0, error
    assert seconds > 0


@pytest.mark.gpu
def test_fuzzed_kernels_are_bit_exact_on_gpu():
    seed = _seed()
    summary = fuzz.run_fuzz(120, seed)
    chosen = [(i, fuzz.random_case(seed, i)) for i in summary.accepted_indices]
    chosen = [(i, case) for i, case in chosen if fuzz.kernel_compatible(case)][:40]
    gpu = fuzz.run_gpu(chosen, jobs=max(1, min(os.cpu_count() or 1, 8)))
    assert gpu.kernels == len(chosen) and gpu.mismatches == 0, gpu.failures[:5]


# --------------------------------------------------------------------------------------------
# The fuzzer's own layout
# --------------------------------------------------------------------------------------------

MAX_MODULE_LINES = 400


def test_fuzz_modules_stay_small():
    """Each fuzzer module keeps one job: none grows past MAX_MODULE_LINES lines."""
    testing = Path(fuzz.__file__).parent
    modules = sorted(testing.glob("fuzz*.py"))
    assert testing / "fuzz.py" in modules and len(modules) > 1
    sizes = {path.name: len(path.read_text().splitlines()) for path in modules}
    assert all(lines <= MAX_MODULE_LINES for lines in sizes.values()), sizes
