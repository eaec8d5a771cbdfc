"""The copy matrix on a Hopper GPU: every byte of both buffers, outputs poisoned first."""

from __future__ import annotations

import pytest
from copy_matrix import CASES

from tvm_tma.testing.runner import compile_case, run_on_gpu


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_copy_is_bit_exact_on_gpu(case):
    built = compile_case(case)
    for seed in (1, 2):
        ok, problems = run_on_gpu(case, built, seed=seed)
        assert ok, f"{case.name} (seed {seed}): {problems}"
