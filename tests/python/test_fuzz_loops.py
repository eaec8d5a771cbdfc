"""The fuzzer's persistent tile loops (issue 21): the generator draws every loop form and its
unsafe neighbours without disturbing the rest of the stream; what a loop runs is enumerated
right; the oracle plans the loop kernel through the real pipeline and catches an unsound
acceptance, a plan that ignores the tile and a plan it cannot evaluate; every form's kernel
builds and assembles; the shrinker, the regression writer and the CLI handle loop cases.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import random
from collections import Counter

import pytest
import tvm

from tvm_tma.testing import fuzz, fuzz_cases, fuzz_loop_oracle, fuzz_oracle
from tvm_tma.testing.copy_cases import CopyCase
from tvm_tma.testing.fuzz_loops import LOOP_SHARE, draw_loop, loop_keys, loop_truth
from tvm_tma.testing.fuzz_loops import loop_case as make_loop_case
from tvm_tma.testing.fuzz_variants import PLAIN, draw_variant
from tvm_tma.testing.loop_forms import FORMS, MUTATIONS, LoopForm, leaving_steps, truth
from tvm_tma.testing.loop_kernel import images_shape, loop_expected, loop_inputs
from tvm_tma.testing.runner import assemble, compile_case

SEED = fuzz.DEFAULT_SEED

# --------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------


def _loop_cases(seed: int, count: int) -> list[tuple[int, CopyCase]]:
    """The loop cases among the first ``count`` indices of stream ``seed``."""
    indices = [i for i in range(count)
               if draw_variant(seed, i, fuzz.ALL_DTYPES) == PLAIN and draw_loop(seed, i)]
    return [(i, fuzz.random_case(seed, i)) for i in indices]


def test_generator_draws_every_form_and_mutation():
    cases = [case for _, case in _loop_cases(1, 4000)]
    assert all(case.loop is not None for case in cases)
    assert 0.06 * 4000 <= len(cases) <= 0.14 * 4000, len(cases)
    pairs = Counter((case.loop.form, case.loop.mutation) for case in cases)
    for form in FORMS:
        for mutation in (None, *MUTATIONS[form]):
            assert pairs[(form, mutation)] >= 3, (form, mutation, pairs)
    truths = Counter((case.loop.form, loop_truth(case)) for case in cases)
    for form in FORMS:
        for fact in ("safe", "edge", "unsafe"):
            assert truths[(form, fact)] >= 3, (form, fact, truths)
    edges = [case for case in cases if loop_truth(case) == "edge"]
    assert {case.oob for case in edges} == {"zero", "nan", "skip"}
    assert {case.direction for case in cases} == {"g2s", "s2g"}
    assert any(case.loop.row_dim is None for case in cases)  # rank-1 views: tiles in a row
    assert {case.loop.ksteps for case in cases if case.loop.form == "ksteps"} == {1, 2, 3}
    assert {case.loop.ctas for case in cases} >= {1, 2, 3, 4, 5, 8}
    assert max(case.loop.tiles for case in cases) >= 10 and any(c.loop.cols > 1 for c in cases)
    assert any(case.global_offset for case in cases)  # views declared in the kernel too
    assert any(case.global_strides for case in cases)
    layouts = {case.shared_layout.split(":")[0] for case in cases}
    assert layouts == {"row", "padded", "blocked", "swizzle"}
    mutated = [case for case in cases if case.loop.mutation]
    biting = [case for case in mutated if leaving_steps(
        case.loop, case.global_shape, case.global_start, case.global_extent)]
    assert len(biting) >= 0.5 * len(mutated)  # most neighbours do run a tile past the end
    for case in cases:
        assert case.global_storage_elems <= fuzz.MAX_GLOBAL_ELEMS
        assert not (case.stages or case.cluster or case.reduce or case.global_tiles)
        assert case.loop.fits(len(case.global_shape)) and fuzz.valid_case(case)


def test_the_rest_of_the_stream_is_unchanged(monkeypatch):
    """A case that is not a loop case draws exactly what it drew before loops existed."""
    with_loops = {i: fuzz.random_case(SEED, i) for i in range(400)}
    monkeypatch.setattr(fuzz_cases, "draw_loop", lambda seed, index: None)
    loops = [i for i, case in with_loops.items() if case.loop is not None]
    assert loops and len(loops) < 0.2 * len(with_loops)
    for index, case in with_loops.items():
        if case.loop is None:
            assert fuzz.random_case(SEED, index) == case, index
    assert LOOP_SHARE < 0.2


def test_coverage_keys_name_form_mutation_and_truth():
    _, case = next(item for item in _loop_cases(1, 400) if item[1].loop.mutation)
    keys = fuzz.coverage_keys(case)
    loop = case.loop
    assert {"loop", f"loop={loop.form}", f"loop={loop.form}:{loop.mutation}",
            f"loop-{loop_truth(case)}"} <= set(keys)
    assert loop_keys(dataclasses.replace(case, loop=None)) == []


# --------------------------------------------------------------------------------------------
# What a loop runs, by hand
# --------------------------------------------------------------------------------------------

#: (form, mutation) -> the tiles each of 3 CTAs runs for 7 tiles, worked out by hand.
TILES_7_ON_3 = {
    ("guard-meta", None): [[0, 3, 6], [1, 4], [2, 5]],
    ("guard-meta", "le-guard"): [[0, 3, 6], [1, 4, 7], [2, 5]],
    ("guard-meta", "no-guard"): [[0, 3, 6], [1, 4, 7], [2, 5, 8]],
    ("guard-scalar", None): [[0, 3, 6], [1, 4], [2, 5]],
    ("guard-scalar", "le-guard"): [[0, 3, 6], [1, 4, 7], [2, 5]],
    ("guard-scalar", "no-guard"): [[0, 3, 6], [1, 4, 7], [2, 5, 8]],
    ("ksteps", None): [[0, 3, 6], [1, 4], [2, 5]],
    ("ksteps", "le-guard"): [[0, 3, 6], [1, 4, 7], [2, 5]],
    ("exact-rounds", None): [[0, 3, 6], [1, 4], [2, 5]],  # (7 - cta + 2) // 3 = 3, 2, 2
    ("exact-rounds", "extra-round"): [[0, 3, 6], [1, 4, 7], [2, 5]],  # (7 - cta + 3) // 3
    ("strided", None): [[0, 3, 6], [1, 4], [2, 5]],
    ("strided", "stop-plus-one"): [[0, 3, 6], [1, 4, 7], [2, 5]],
    ("while", None): [[0, 3, 6], [1, 4], [2, 5]],
    ("while", "advance-first"): [[3, 6, 9], [4, 7], [5, 8]],  # the first tile is skipped
}


@pytest.mark.parametrize("form, mutation", list(TILES_7_ON_3), ids=str)
def test_executed_tiles_by_hand(form, mutation):
    loop = LoopForm(form, ctas=3, tiles=7, cols=2, ksteps=int(form == "ksteps"),
                    mutation=mutation)
    got = [[t for t, _ in loop.tiles_of(cta)] for cta in range(3)]
    assert got == TILES_7_ON_3[(form, mutation)]
    assert [step.tile for step in loop.executed()] == sum(got, [])
    assert loop.slots() == max(sum(got, [])) + 1


def test_steps_bind_the_names_a_plan_may_mention():
    scalar = LoopForm("guard-scalar", ctas=3, tiles=7)
    assert scalar.executed()[1].names == {"i": 1, "t": 3, "cta": 0, "tid": 0}
    cursor = LoopForm("while", ctas=3, tiles=7, mutation="advance-first")
    assert cursor.executed()[0].names == {"cur": 3, "cta": 0, "tid": 0}
    ksteps = LoopForm("ksteps", ctas=2, tiles=3, ksteps=2)
    assert [(s.cta, s.tile, s.k) for s in ksteps.executed()] == [
        (0, 0, 0), (0, 0, 1), (0, 2, 0), (0, 2, 1), (1, 1, 0), (1, 1, 1)]
    assert ksteps.executed()[3].names == {"i": 1, "t": 2, "k": 1, "cta": 0, "tid": 0}


def test_tile_starts_and_the_grid():
    loop = LoopForm("guard-meta", ctas=3, tiles=7, cols=2, row_dim=0, col_dim=1)
    assert loop.grid() == (4, 2)  # tiles 0..6 in rows of 2: 4 rows
    assert loop.tile_start((0, 0), (16, 64), 5) == (32, 64)  # row 2, column 1
    assert loop.tile_start((4, 8), (16, 64), 0) == (4, 8)  # tile 0 is the case's region
    ks = LoopForm("ksteps", ctas=3, tiles=7, cols=2, ksteps=2, row_dim=0, col_dim=1)
    assert ks.grid() == (4, 4) and ks.tile_start((0, 0), (16, 64), 5, 1) == (32, 192)
    flat = LoopForm("strided", ctas=2, tiles=5, row_dim=None, col_dim=0)
    assert flat.grid() == (None, 5) and flat.tile_start((16,), (32,), 3) == (112,)
    flat_k = LoopForm("ksteps", ctas=2, tiles=5, ksteps=3, row_dim=None, col_dim=0)
    assert flat_k.tile_start((0,), (32,), 2, 1) == (7 * 32,)
    # The same arithmetic writes the kernel's index expressions.
    t = tvm.tirx.Var("t", "int32")
    row, col = loop.blocks(t)
    assert (str(row), str(col)) == ("t // 2", "t % 2")


def test_truth_of_neighbours_on_a_tight_grid():
    """``if t <= n:`` runs tile n only where a round reaches it (n % ctas != 0), and it leaves
    the tensor only where tile n starts a new row (n % cols == 0)."""
    def fact(n, mutation, form="guard-scalar", oob=None):
        loop = LoopForm(form, ctas=3, tiles=n, cols=2, mutation=mutation)
        rows, cols = loop.grid()
        return truth(loop, (rows * 16, cols * 64), (0, 0), (16, 64), oob)

    assert [fact(n, None) for n in (6, 7, 8)] == ["safe"] * 3
    assert [fact(n, "le-guard") for n in (6, 7, 8)] == ["safe", "safe", "unsafe"]
    assert fact(8, "le-guard", oob="zero") == "edge"
    assert fact(6, "extra-round", "exact-rounds") == "unsafe"
    assert fact(7, "advance-first", "while") == "unsafe"
    loop = LoopForm("guard-scalar", ctas=3, tiles=8, cols=2)
    assert truth(loop, (56, 128), (0, 0), (16, 64), None) == "unsafe"  # last row cut
    assert truth(loop, (56, 128), (0, 0), (16, 64), "zero") == "edge"


def test_a_loop_form_refuses_nonsense():
    with pytest.raises(ValueError):
        LoopForm("strided", ctas=2, tiles=4, mutation="le-guard")
    with pytest.raises(ValueError):
        LoopForm("ksteps", ctas=2, tiles=4)  # ksteps >= 1
    with pytest.raises(ValueError):
        LoopForm("while", ctas=2, tiles=4, row_dim=1, col_dim=1)
    with pytest.raises(ValueError):
        dataclasses.replace(BASE, stages=2, shared_shape=(2, 16, 64),
                            loop=LoopForm("while", 2, 4))


# --------------------------------------------------------------------------------------------
# The oracle
# --------------------------------------------------------------------------------------------

BASE = CopyCase("loop", "float16", "g2s", (64, 128), (0, 0), (16, 64), (16, 64), "swizzle:3")


def _case(form: str, mutation: str | None = None, n: int = 8, direction: str = "g2s",
          **changes) -> CopyCase:
    """BASE's copy in a loop of ``n`` tiles on 3 CTAs, 2 tiles per row, on a tight grid."""
    loop = LoopForm(form, ctas=3, tiles=n, cols=2, ksteps=2 if form == "ksteps" else 0,
                    mutation=mutation)
    rows, blocks = loop.grid()
    return dataclasses.replace(BASE, direction=direction, loop=loop,
                               global_shape=(rows * 16, blocks * 64), **changes)


MATRIX = [(form, mutation) for form in FORMS for mutation in (None, *MUTATIONS[form])]


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
def test_every_form_and_neighbour_is_judged_without_mismatch(direction):
    """The current prover on every form and neighbour (8 tiles on 3 CTAs, tiles in rows of 2:
    every neighbour runs tile 8, a row past the tensor): never a mismatch, and each unsafe
    neighbour refused with region-bounds."""
    verdicts = {}
    for form, mutation in MATRIX:
        case = _case(form, mutation, direction=direction)
        outcome = fuzz.check_case(case)
        assert outcome.status != "mismatch", (form, mutation, outcome)
        assert loop_truth(case) == ("safe" if mutation is None else "unsafe")
        if mutation is not None:
            assert (outcome.status, outcome.rule) == ("refused", "region-bounds"), outcome
        verdicts[(form, mutation)] = outcome.status
    print(f"\nsafe loops accepted ({direction}):",
          sorted(key[0] for key, status in verdicts.items() if status == "accepted"))


def _explained(case: CopyCase):
    kernel = fuzz_loop_oracle.build_loop_kernel(case)
    return fuzz_loop_oracle.explain(kernel)


def _explaining(monkeypatch, explanation):
    monkeypatch.setattr(fuzz_loop_oracle, "explain", lambda kernel: explanation)


def _with_plan(explanation, edit):
    copy = explanation.copies[0]
    copy = dataclasses.replace(copy, plan=edit(copy.plan), rule=None)
    return dataclasses.replace(explanation, copies=(copy,))


def _accepted_explanation(case: CopyCase):
    explanation = _explained(case)
    if explanation.copies[0].plan is None:  # a prover that cannot prove it yet: plan it with
        explanation = _explained(dataclasses.replace(case, oob="zero"))  # oob= instead
    assert explanation.copies[0].plan is not None
    return explanation


@pytest.mark.parametrize("form, mutation", [("guard-scalar", "le-guard"),
                                            ("exact-rounds", "extra-round"),
                                            ("strided", "stop-plus-one"),
                                            ("while", "advance-first")])
def test_an_unsound_acceptance_is_a_mismatch(monkeypatch, form, mutation):
    """The natural form's plan, handed to the oracle for its unsafe neighbour (as a prover
    that accepted the slip would): the loop runs tile 8 (and, advancing first, 9 and 10) a row
    past the tensor."""
    natural = _accepted_explanation(_case(form))
    _explaining(monkeypatch, natural)
    outcome = fuzz.check_case(_case(form, mutation))
    assert (outcome.status, outcome.kind) == ("mismatch", "unsound-accept"), outcome
    assert "outside the view (64, 128); planned without oob=" in outcome.problem


def test_an_edge_loop_with_oob_is_no_unsound_acceptance(monkeypatch):
    """The same slip with ``oob="zero"`` is legal: tile 8 loads zeros, and the model checks
    every step's bytes."""
    case = _case("strided", "stop-plus-one", oob="zero")
    assert loop_truth(case) == "edge"
    _explaining(monkeypatch, _accepted_explanation(case))
    assert fuzz.check_case(case).status == "accepted"


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
def test_a_plan_that_ignores_the_tile_is_a_byte_mismatch(monkeypatch, direction):
    """Coordinates fixed at tile 0: right for CTA 0's first tile only, so a later step's
    shared image (a load) or the global tensor after every step (a store) is wrong."""
    case = _case("guard-scalar", direction=direction)
    explanation = _accepted_explanation(case)
    _explaining(monkeypatch, _with_plan(explanation, lambda p: dataclasses.replace(
        p, coordinates=(0,) * len(p.coordinates))))
    outcome = fuzz.check_case(case)
    assert (outcome.status, outcome.kind) == ("mismatch", "bytes"), outcome
    assert ("shared:" if direction == "g2s" else "global after every step") in outcome.problem


def test_a_plan_off_by_one_row_is_caught_at_the_step(monkeypatch):
    case = _case("while")
    explanation = _accepted_explanation(case)
    _explaining(monkeypatch, _with_plan(explanation, lambda p: dataclasses.replace(
        p, coordinates=(*p.coordinates[:-1], p.coordinates[-1] + 1))))
    outcome = fuzz.check_case(case)
    assert outcome.status == "mismatch" and outcome.kind in ("bytes", "invariant:out-of-bounds")
    assert "CTA" in outcome.problem


def test_a_name_the_loop_does_not_bind_is_a_crash(monkeypatch):
    case = _case("strided")
    stranger = tvm.tirx.Var("zz", "int32")
    _explaining(monkeypatch, _with_plan(_accepted_explanation(case), lambda p: (
        dataclasses.replace(p, coordinates=(stranger, *p.coordinates[1:])))))
    outcome = fuzz.check_case(case)
    assert outcome.kind == "crash:model:KeyError" and "'zz'" in outcome.problem


def test_a_refusal_is_no_mismatch_and_an_unknown_rule_is(monkeypatch):
    case = _case("guard-meta")
    explanation = _explained(case)
    refused = dataclasses.replace(explanation.copies[0], plan=None, rule="region-bounds")
    _explaining(monkeypatch, dataclasses.replace(explanation, copies=(refused,)))
    assert (fuzz.check_case(case).status, fuzz.check_case(case).rule) == (
        "refused", "region-bounds")
    unknown = dataclasses.replace(refused, rule="no-such-rule")
    _explaining(monkeypatch, dataclasses.replace(explanation, copies=(unknown,)))
    assert fuzz.check_case(case).kind == "unknown-rule"


def test_bind_evaluates_loads_and_both_divisions():
    x = tvm.tirx.Var("x", "int32")
    names = {"x": -7}
    assert fuzz_loop_oracle.bind(tvm.tirx.floordiv(x, 2), names) == -4
    assert fuzz_loop_oracle.bind(tvm.tirx.floormod(x, 2), names) == 1
    assert fuzz_loop_oracle.bind(tvm.tirx.truncdiv(x, 2), names) == -3
    assert fuzz_loop_oracle.bind(tvm.tirx.truncmod(x, 2), names) == -1
    assert fuzz_loop_oracle.bind(tvm.tirx.Select(x < 0, x * 3, x), names) == -21
    # A local scalar's load (t[0]) takes the value of its name, as the kernel's t does.
    case = _case("guard-scalar")
    plan = _accepted_explanation(case).copies[0].plan
    step = case.loop.executed()[4]  # CTA 1, tile 4: row 2, column 0
    concrete = fuzz_loop_oracle.concrete_plan(plan, step.names)
    assert sorted(concrete.coordinates) == [0, 32]


def test_numpy_truth_of_a_store_loop_writes_every_tile_once():
    case = _case("exact-rounds", direction="s2g")
    global_in, images = loop_inputs(case, 3)
    assert images.shape == images_shape(case) == (8, 16, 64)
    after, images_after = loop_expected(case, global_in, images)
    assert (images_after.view("uint16") == images.view("uint16")).all()
    for t in range(8):  # tile t at rows t // 2 * 16, columns t % 2 * 64
        rows, cols = slice(t // 2 * 16, t // 2 * 16 + 16), slice(t % 2 * 64, t % 2 * 64 + 64)
        assert (after[rows, cols].view("uint16") == images[t].view("uint16")).all()


# --------------------------------------------------------------------------------------------
# Kernels, shrinker, regression files, CLI, GPU
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_each_forms_kernel_builds_and_assembles(form):
    """Every form's natural kernel (a load for the guarded forms, a store for the others)
    builds through the dispatch and ptxas accepts it for sm_90a."""
    direction = "g2s" if form in ("guard-meta", "guard-scalar", "ksteps") else "s2g"
    built = compile_case(_case(form, direction=direction))
    assert built.tma_call_sites == 1 and built.tensormap_params == 1
    assert len(assemble(built.cuda_source, "sm_90a")) > 0


def test_gpu_worker_builds_a_loop_case(tmp_path):
    _, case = next(item for item in _loop_cases(SEED, 2000)
                   if fuzz.kernel_compatible(item[1])
                   and fuzz.check_case(item[1]).status == "accepted")
    path, _, error = fuzz._compile_worker(case, str(tmp_path))
    assert error == "" and os.path.getsize(path) > 0, error


def test_shrinker_drops_or_shrinks_the_loop():
    case = _case("ksteps", "le-guard", direction="s2g", n=8)
    small = fuzz.shrink(case, lambda c: c.element_bytes == 2)
    assert small.loop is None and fuzz.valid_case(small)
    small = fuzz.shrink(case, lambda c: c.loop is not None and c.loop.form == "ksteps")
    assert small.loop.tiles == 1 and small.loop.ctas == 1 and small.loop.ksteps == 1
    assert small.loop.mutation is None and fuzz.valid_case(small)
    assert not fuzz.valid_case(dataclasses.replace(case, loop=dataclasses.replace(
        case.loop, col_dim=2)))


def test_minimize_and_save_a_loop_failure(monkeypatch, tmp_path):
    """A planted failure of loop cases shrinks without a crash; its regression file imports
    LoopForm and runs."""
    real = fuzz_loop_oracle.check_loop_case

    def planted(case, data_seed=0):
        outcome = real(case, data_seed)
        if case.loop.tiles > 2:
            return fuzz.Outcome("mismatch", kind="planted", problem="many tiles")
        return outcome

    monkeypatch.setattr(fuzz_oracle, "check_loop_case", planted)
    case = _case("strided", n=8)
    small, outcome = fuzz.minimize_failure(case, fuzz.check_case(case), budget=60)
    assert small.loop is not None and small.loop.tiles == 3 and outcome.kind == "planted"
    monkeypatch.undo()
    path = fuzz.save_regression(small, outcome, tmp_path, "planted")
    assert "from tvm_tma.testing.loop_forms import LoopForm" in path.read_text()
    spec = importlib.util.spec_from_file_location("loop_regression_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.CASE == small
    next(getattr(module, name) for name in dir(module) if name.startswith("test_"))()


def test_digest_of_cases_without_a_loop_is_unchanged():
    good = CopyCase("good", "float16", "g2s", (32, 256), (8, 64), (16, 128), (16, 128),
                    "swizzle:3")
    assert fuzz.case_digest(good) == "ad48cccf3c6e"
    assert fuzz.case_digest(_case("while")) != fuzz.case_digest(_case("strided"))


def test_command_line_prints_the_loop_table(capsys):
    assert fuzz.main(["--cases", "150", "--seed", "3", "--jobs", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    head = next(line for line in lines if line.startswith("loops: "))
    assert "safe refused per form [by region-bounds]: guard-meta" in head
    assert "unsafe refused by region-bounds:" in head
    table = lines[lines.index(head) + 1:lines.index(head) + 9]
    assert table[0].split() == ["form", "safe", "acc/ref", "edge", "acc/ref", "unsafe",
                                "acc/ref"]
    assert [row.split()[0] for row in table[1:]] == [*FORMS, "all"]


def test_a_drawn_case_that_cannot_loop_is_redrawn():
    staged = dataclasses.replace(BASE, stages=2, shared_shape=(2, 16, 64))
    assert make_loop_case(staged, random.Random(1), fuzz.MAX_GLOBAL_ELEMS) is None


@pytest.mark.gpu
def test_loop_kernels_are_bit_exact_on_gpu():
    chosen = [(i, case) for i, case in _loop_cases(SEED, 3000)
              if fuzz.kernel_compatible(case) and fuzz.check_case(case).status == "accepted"]
    chosen = chosen[:40]
    assert len({case.loop.form for _, case in chosen}) >= 4
    gpu = fuzz.run_gpu(chosen, jobs=max(1, min(os.cpu_count() or 1, 8)))
    assert gpu.kernels == len(chosen) and gpu.mismatches == 0, gpu.failures[:5]
