"""The built-kernel fixture the GEMM test modules share (bf16/fp16 and FP8 cases)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.testing.runner import compile_kernel


def built_fixture(cases: list[GemmConfig], name: Callable[[GemmConfig], str]):
    """A module-scoped fixture ``built``: ``(cfg, compiled kernel)`` for each of ``cases``,
    named by ``name``; each kernel is compiled once per module."""

    @pytest.fixture(scope="module", params=cases, ids=name)
    def built(request):
        cfg = request.param
        return cfg, compile_kernel(gemm_kernel(cfg))

    return built
