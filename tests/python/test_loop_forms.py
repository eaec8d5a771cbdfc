"""The persistent tile loop in every natural spelling plans without oob= (issue 21).

Each form copies a 4096 x 2048 float16 tensor through 128 x 128 tiles on 132 CTAs; the
planner proves every tile inside the tensor from what the loop states. The unsafe
neighbours execute a tile past the end and are refused with ``region-bounds``.
"""

from __future__ import annotations

import numpy as np
import pytest
from loop_form_kernels import SAFE_FORMS, UNSAFE_FORMS, M, N, ring_kernel, tile_copy_kernel

import tvm_tma
from tvm_tma.testing.runner import assemble, compile_kernel

SWIZZLES = (False, True)


def _facts(copy) -> list[str]:
    return [f"{fact.what}: {fact.condition} [from {'; '.join(fact.using)}]"
            for fact in copy.established if fact.what.startswith("region-bounds")]


@pytest.mark.parametrize("swizzle", SWIZZLES, ids=("plain", "swizzle128"))
@pytest.mark.parametrize("form", SAFE_FORMS)
def test_safe_form_plans_without_oob_and_assembles(form, swizzle):
    explained = tvm_tma.explain(tile_copy_kernel(form, swizzle))
    assert [copy.direction for copy in explained.copies] == ["g2s", "s2g"]
    for copy in explained.copies:
        assert copy.planned, (form, copy.rule, copy.detail)
        assert copy.plan.tensor_map.oob_fill == 0
    built = compile_kernel(tile_copy_kernel(form, swizzle))
    assert built.tma_call_sites == 2
    assemble(built.cuda_source)


#: The facts each form's row bound rests on, as ``explain`` prints them.
ROW_BOUND_FACTS = {
    "let_guard": "i in [0, 4); cta in [0, 132); t == cta + i * 132; t < 512",
    "meta_guard": "i in [0, 4); cta in [0, 132); cta + i * 132 < 512",
    "exact_extent": "cta in [0, 132); i in [0, (643 - cta) // 132)",
    "strided": "cta in [0, 132); t in [cta, 512)",
    "while_counter": "cta in [0, 132); cur < 512; cur >= cta",
    "inner_loop": "i in [0, 4); cta in [0, 132); t == cta + i * 132; t < 512",
}


@pytest.mark.parametrize("form", SAFE_FORMS)
def test_explain_names_the_facts_behind_each_bound(form):
    load = tvm_tma.explain(tile_copy_kernel(form)).copies[0]
    row_bound = _facts(load)[0]
    assert row_bound.startswith("region-bounds (global dimension 0): ")
    assert row_bound.endswith(f"[from {ROW_BOUND_FACTS[form]}]")


@pytest.mark.parametrize("swizzle", SWIZZLES, ids=("plain", "swizzle128"))
@pytest.mark.parametrize("form", UNSAFE_FORMS)
def test_unsafe_neighbour_is_refused(form, swizzle):
    explained = tvm_tma.explain(tile_copy_kernel(form, swizzle))
    for copy in explained.copies:
        assert copy.rule == "region-bounds", (form, copy.rule, copy.detail)
        assert "is not provably inside [0, 4096)" in copy.detail


@pytest.mark.parametrize("swizzle", SWIZZLES, ids=("plain", "swizzle128"))
@pytest.mark.parametrize("form", ("exact_extent", "strided"))
def test_ring_versions_plan_and_assemble(form, swizzle):
    explained = tvm_tma.explain(ring_kernel(form, swizzle))
    assert [copy.planned for copy in explained.copies] == [True, True, True]
    built = compile_kernel(ring_kernel(form, swizzle))
    assert built.tma_call_sites == 3
    assemble(built.cuda_source)


def _run_copy(kernel) -> None:
    import torch

    executable = compile_kernel(kernel).executable
    bits = np.random.default_rng(21).integers(-(1 << 15), 1 << 15, size=(M, N), dtype=np.int16)
    source = torch.from_numpy(bits).cuda()
    out = torch.full_like(source, 0x5A5A)  # poison: a tile never written shows
    executable["main"](source.view(torch.float16), out.view(torch.float16))
    torch.cuda.synchronize()
    wrong = (out != source).sum().item()
    assert wrong == 0, f"{wrong} of {M * N} elements differ"


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", SWIZZLES, ids=("plain", "swizzle128"))
@pytest.mark.parametrize("form", SAFE_FORMS)
def test_safe_form_is_bit_exact_on_gpu(form, swizzle):
    _run_copy(tile_copy_kernel(form, swizzle))


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", SWIZZLES, ids=("plain", "swizzle128"))
@pytest.mark.parametrize("form", ("exact_extent", "strided"))
def test_ring_version_is_bit_exact_on_gpu(form, swizzle):
    _run_copy(ring_kernel(form, swizzle))



def test_a_refusal_names_what_the_proof_was_missing():
    """``after_advance`` copies after the counter moved: the loop's condition no longer
    bounds it, and explain shows the facts the bound was tried under."""
    load = tvm_tma.explain(tile_copy_kernel("after_advance")).copies[0]
    (missing,) = load.unproven
    assert missing.what == "region-bounds (global dimension 0)"
    assert missing.condition == "cur // 16 * 128 >= 0 and cur // 16 * 128 + 128 <= 4096"
    assert missing.using == ("cta in [0, 132)", "cur >= cta")  # no "cur < 512"
