"""The fuzzer's variants: multicast loads split among a cluster and reducing stores. The
generator draws them without disturbing the plain stream; the oracle catches broken splits
and wrong reductions; the shrinker undoes them; their kernels build for the GPU mode.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from tvm_tma.planner import api as planner_api
from tvm_tma.planner.errors import refuse
from tvm_tma.planner.plan_types import Issue, TmaPlan
from tvm_tma.planner.reductions import REDUCE_TYPES
from tvm_tma.testing import fuzz, fuzz_oracle, runner, tma_model
from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz_variants import PLAIN, PTX_REDUCE_TYPES, draw_variant
from tvm_tma.testing.runner import assemble, compile_case

SEED = fuzz.DEFAULT_SEED

# --------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------


def test_generator_draws_the_variants():
    cases = [fuzz.random_case(1, index) for index in range(2000)]
    multicast = [case for case in cases if case.cluster]
    reduce = [case for case in cases if case.reduce]
    assert 0.05 * len(cases) <= len(multicast) <= 0.12 * len(cases)
    assert 0.05 * len(cases) <= len(reduce) <= 0.12 * len(cases)
    assert {case.direction for case in multicast} == {"g2s"}
    assert {case.cluster for case in multicast} == {2, 4}
    assert {case.direction for case in reduce} == {"s2g"}
    assert {case.reduce for case in reduce} == set(PTX_REDUCE_TYPES)
    undefined = [c for c in reduce if c.dtype not in PTX_REDUCE_TYPES[c.reduce]]
    assert 0.05 * len(reduce) <= len(undefined) <= 0.25 * len(reduce)
    assert {"int32", "uint32", "int64", "uint64"} <= {case.dtype for case in reduce}
    keys = Counter(key for case in multicast for key in fuzz.coverage_keys(case))
    for feature in ("stages", "oob=zero", "shared-subregion", "layout=swizzle:3", "pieces"):
        assert keys[feature] > 0, feature  # the variants draw the whole grid
    assert all(case.dtype in fuzz.DTYPES for case in cases if not case.reduce)
    assert all(fuzz.valid_case(case) for case in multicast[:40] + reduce[:40])


#: Digests of plain cases of the default stream, taken from the generator before it drew
#: variants (and with the digest before the new fields): neither may change. Case 3's view
#: is device-side since the generator draws those (a flag from a stream of its own, on the
#: same draws: the static case is what it was).
PLAIN_DIGESTS = {0: "b99fd08b365c", 1: "a9aeac7f90ca", 2: "ada7ad89f238", 3: "3f267d9ebf5c",
                 4: "c44a766d45af", 5: "f53d78886b01"}


def test_plain_cases_are_the_cases_they_were():
    for index, digest in PLAIN_DIGESTS.items():
        assert draw_variant(SEED, index, fuzz.ALL_DTYPES) == PLAIN
        case = fuzz.random_case(SEED, index)
        assert case.device_view == (index == 3)
        static = dataclasses.replace(case, device_view=False)
        assert fuzz.case_digest(static) == digest, index
    good = CopyCase("good", "float16", "g2s", (32, 256), (8, 64), (16, 128), (16, 128),
                    "swizzle:3")
    assert fuzz.case_digest(good) == "ad48cccf3c6e"
    assert fuzz.case_digest(good) != fuzz.case_digest(dataclasses.replace(good, cluster=2))


def test_the_isa_table_and_the_planners_agree():
    """Two readings of the PTX ISA; the fuzzer judges the planner's refusals by its own."""
    assert PTX_REDUCE_TYPES == REDUCE_TYPES


# --------------------------------------------------------------------------------------------
# The oracle catches broken splits
# --------------------------------------------------------------------------------------------

#: 32 rows of a 128B-swizzled tile: one box of 4096 bytes, cut into two 16-row pieces.
MULTICAST = CopyCase("mc", "float16", "g2s", (64, 64), (16, 0), (32, 64), (32, 64), "swizzle:3",
                     cluster=2)
ONE_CTA = dataclasses.replace(MULTICAST, cluster=0)


def _patch_plans(monkeypatch, edit):
    """Edit every plan the oracle sees (``check_case`` looks ``plans_of`` up in fuzz_oracle)."""
    real = fuzz_oracle.plans_of
    monkeypatch.setattr(fuzz_oracle, "plans_of",
                        lambda case: [(edit(p), env) for p, env in real(case)])


def _dealt(plan: TmaPlan, runs) -> TmaPlan:
    """``plan`` whose CTA ``r`` makes ``runs(every issue, r, run length)`` instead."""

    class Dealt(TmaPlan):
        def issues(self, cta=None):
            every = TmaPlan.issues(self)
            return every if cta is None else runs(every, cta, self.issues_per_cta)

    return Dealt(**{f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)})


def _kind(case: CopyCase) -> tuple[str, str]:
    outcome = fuzz.check_case(case)
    return outcome.status, outcome.kind


def test_a_good_split_is_accepted():
    assert fuzz.check_case(MULTICAST).status == "accepted"
    (plan, _), = fuzz.plans_of(MULTICAST)
    assert (plan.num_issues, plan.issues_per_cta) == (2, 1)


@pytest.mark.parametrize("split", [None, 1, 4])
def test_a_wrong_cluster_split_breaks_an_invariant(monkeypatch, split):
    _patch_plans(monkeypatch, lambda p: dataclasses.replace(p, cluster_split=split))
    assert _kind(MULTICAST) == ("mismatch", "invariant:split-count")


def test_two_ctas_making_the_same_box_break_an_invariant(monkeypatch):
    _patch_plans(monkeypatch, lambda p: _dealt(p, lambda every, cta, k: every[:k]))
    assert _kind(MULTICAST) == ("mismatch", "invariant:split-duplicate")


def test_a_box_no_cta_makes_breaks_an_invariant(monkeypatch):
    def shifted(every, cta, k):  # the last CTA makes a box one row further instead of its own
        run = every[cta * k:(cta + 1) * k]
        if cta == 1:
            run = [Issue(i.smem_offset, (*i.coordinates[:-1], i.coordinates[-1] + 1))
                   for i in run]
        return run

    _patch_plans(monkeypatch, lambda p: _dealt(p, shifted))
    assert _kind(MULTICAST) == ("mismatch", "invariant:split-cover")


def test_a_piece_off_128_bytes_breaks_an_invariant(monkeypatch):
    _patch_plans(monkeypatch, lambda p: dataclasses.replace(p, smem_offset=p.smem_offset + 32))
    assert _kind(MULTICAST) == ("mismatch", "invariant:split-align")


def test_pieces_in_each_others_place_are_a_byte_mismatch(monkeypatch):
    """The two 16-row pieces swapped in shared memory: aligned, whole, misplaced."""
    def swapped(p):
        *outer, last = p.issue_axes
        back = dataclasses.replace(last, smem_stride=-last.smem_stride)
        return dataclasses.replace(p, smem_offset=p.smem_offset + last.smem_stride,
                                   issue_axes=(*outer, back))

    _patch_plans(monkeypatch, swapped)
    assert _kind(MULTICAST) == ("mismatch", "bytes")


def test_a_split_plan_for_one_cta_breaks_an_invariant(monkeypatch):
    _patch_plans(monkeypatch, lambda p: dataclasses.replace(p, cluster_split=2))
    assert _kind(ONE_CTA) == ("mismatch", "invariant:split-unasked")


def test_every_ctas_image_is_compared(monkeypatch):
    """A multicast whose boxes reach CTA 0 alone leaves CTA 1's image poisoned."""
    real = runner.execute_multicast
    monkeypatch.setattr(runner, "execute_multicast",
                        lambda *args, **kwargs: real(*args, **{**kwargs, "mask": 1}))
    status, kind = _kind(MULTICAST)
    assert (status, kind) == ("mismatch", "bytes")
    assert "shared" in fuzz.check_case(MULTICAST).problem


#: Found by the 10,000-case run (seed 20251122, cases 993 and 5447), minimized: splits whose
#: pieces start off the swizzle pattern's period (the first needs no cut: the two 128-byte
#: columns of an 11-row tile already divide by 2; the second is cut at row 3 + 8 of a
#: 128B-swizzled tile). The hardware swizzles absolute addresses, so a piece lands on the
#: tile's pattern wherever it starts: both fuzz cases ran bit-exact on an H200, and the
#: planner's split asks for 128-byte alignment only.
OFF_PERIOD = [
    CopyCase("off-period-no-cut", "float32", "g2s", (64,), (0,), (64,), (11, 64), "swizzle:3",
             shared_start=(0, 0), shared_extent=(1, 64), cluster=2),
    CopyCase("off-period-cut", "float16", "g2s", (64, 64), (0, 0), (16, 64), (32, 64),
             "swizzle:3", shared_start=(3, 0), shared_extent=(16, 64), cluster=2),
]


@pytest.mark.parametrize("case", OFF_PERIOD, ids=[case.name for case in OFF_PERIOD])
def test_split_pieces_off_the_swizzle_period_are_exact(case):
    outcome = fuzz.check_case(case)
    assert outcome.status == "accepted", f"{outcome.kind}: {outcome.problem}"
    (plan, env), = fuzz.plans_of(case)
    starts = [int(i.smem_offset) * case.element_bytes for i in plan.issues()]
    assert any(start % 1024 for start in starts) and not any(start % 128 for start in starts)


# --------------------------------------------------------------------------------------------
# The oracle catches wrong reductions
# --------------------------------------------------------------------------------------------

REDUCE = CopyCase("red", "int32", "s2g", (32, 64), (8, 0), (8, 64), (8, 64), reduce="min")


def test_a_good_reduction_is_accepted():
    assert fuzz.check_case(REDUCE).status == "accepted"


@pytest.mark.parametrize("wrong", [
    lambda op, old, new: new,  # a plain store: the old values are lost
    lambda op, old, new: np.maximum(old, new),  # max for min
    lambda op, old, new: np.where(old.view(np.uint32) < new.view(np.uint32), old, new),
], ids=["store", "max-for-min", "unsigned-min"])
def test_a_wrong_reduction_is_a_byte_mismatch(monkeypatch, wrong):
    monkeypatch.setattr(tma_model, "_reduce_values", wrong)
    assert _kind(REDUCE) == ("mismatch", "bytes")


def test_a_promoted_reduction_breaks_an_invariant(monkeypatch):
    """float16 adds through a uint32 map would add two halves as one integer."""
    def promoted(p):
        spec = p.tensor_map
        boxes = (spec.box_dims[0] // 2, *spec.box_dims[1:])
        spec = dataclasses.replace(spec, dtype="uint32", box_dims=boxes)
        return dataclasses.replace(p, tensor_map=spec)

    _patch_plans(monkeypatch, promoted)
    case = dataclasses.replace(REDUCE, dtype="float16", reduce="add")
    assert _kind(case) == ("mismatch", "invariant:reduce-dtype")


@pytest.mark.parametrize("op, dtype", [("add", "int8"), ("min", "float32"), ("inc", "int32"),
                                       ("add", "int64"), ("xor", "float16"),
                                       ("max", "float8_e4m3fn")])
def test_undefined_reductions_are_refused_with_rule_reduce(op, dtype):
    case = dataclasses.replace(REDUCE, dtype=dtype, reduce=op)
    outcome = fuzz.check_case(case)
    assert (outcome.status, outcome.rule) == ("refused", "reduce"), outcome


def test_an_undefined_reduction_that_plans_is_a_mismatch(monkeypatch):
    monkeypatch.setattr(planner_api, "check_reduction", lambda op, dtype: None)
    case = dataclasses.replace(REDUCE, dtype="float32", reduce="min")
    assert _kind(case) == ("mismatch", "reduce-accepted")


def test_a_defined_reduction_refused_as_one_is_a_mismatch(monkeypatch):
    def refusing(case):
        raise refuse("reduce", "pretend PTX has no int32 min")

    monkeypatch.setattr(fuzz_oracle, "plans_of", refusing)
    assert _kind(REDUCE) == ("mismatch", "reduce-refusal")


# --------------------------------------------------------------------------------------------
# The shrinker and the GPU mode's kernels
# --------------------------------------------------------------------------------------------


def test_shrinker_undoes_the_variants():
    big = dataclasses.replace(MULTICAST, cluster=4, stages=0)
    small = fuzz.shrink(big, lambda case: case.element_bytes == 2)
    assert small.cluster == 0
    small = fuzz.shrink(big, lambda case: case.cluster > 0)
    assert small.cluster == 2 and fuzz.valid_case(small)
    small = fuzz.shrink(REDUCE, lambda case: case.element_bytes == 4)
    assert small.reduce is None
    small = fuzz.shrink(REDUCE, lambda case: case.reduce == "min")
    assert small.direction == "s2g" and fuzz.valid_case(small)


def _accepted_variants(kind: str, count: int) -> list[CopyCase]:
    """The first ``count`` accepted, GPU-compatible cases of the default stream of a kind."""
    found = []
    for index in range(2000):
        case = fuzz.random_case(SEED, index)
        if (case.cluster > 0 if kind == "multicast" else case.reduce is not None) and \
                fuzz.kernel_compatible(case) and fuzz.check_case(case).status == "accepted":
            found.append(case)
            if len(found) == count:
                return found
    raise AssertionError(f"no {count} accepted {kind} cases")


@pytest.mark.parametrize("kind", ["multicast", "reduce"])
def test_gpu_mode_builds_the_variant_kernels(kind, tmp_path):
    """The GPU mode's kernels of the variants assemble for sm_90a (ptxas) and export."""
    first, *others = _accepted_variants(kind, 3)
    path, _, error = fuzz._compile_worker(first, str(tmp_path))
    assert error == "" and path, error
    for case in others:
        built = compile_case(case)
        line = built.tma_asm_lines[0]
        assert (".multicast::cluster" in line) if kind == "multicast" else (
            line.startswith("cp.reduce.async.bulk.tensor") and f".{case.reduce}." in line)
        assert len(assemble(built.cuda_source, "sm_90a")) > 0
