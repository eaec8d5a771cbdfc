"""The built-kernel fixture the GEMM test modules share (bf16/fp16 and FP8 cases)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

import tvm_tma
from tvm_tma.kernels import wgmma
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.testing.runner import compile_kernel


@functools.cache
def parsed_gemm(cfg: GemmConfig):
    """``gemm_kernel(cfg)``, parsed once a worker: the TVMScript parse of a GEMM kernel
    (0.4-0.6 s) is most of what a test of its plans costs, and the fixture's build and the
    tests' ``explain`` read the same (immutable) PrimFunc."""
    return gemm_kernel(cfg)


@functools.cache
def explained_gemm(cfg: GemmConfig):
    """``tvm_tma.explain`` of :func:`parsed_gemm` (cached alike)."""
    return tvm_tma.explain(parsed_gemm(cfg))


def built_fixture(cases: list[GemmConfig], name: Callable[[GemmConfig], str]):
    """A module-scoped fixture ``built``: ``(cfg, compiled kernel)`` for each of ``cases``,
    named by ``name``; each kernel is compiled once per module."""

    @pytest.fixture(scope="module", params=cases, ids=name)
    def built(request):
        cfg = request.param
        return cfg, compile_kernel(parsed_gemm(cfg))

    return built


def mainloop_step_copies(cfg: GemmConfig) -> list[int]:
    """For each mainloop of ``cfg``'s kernel, how many K steps its code spells out: every
    step of a loop of a constant count whose steps x fp32 accumulators per consumer thread
    fit the unroll budget (``wgmma.UNROLLED_ACCUMULATOR_STEPS``: ``T.unroll``), else one
    (a loop). A stream-K kernel has the whole tiles' mainloop (where it has whole tiles)
    and its runs' (counts that are expressions); a tail split the whole tiles' and the
    parts' (a constant count where the parts are equal); any other one mainloop of
    ``steps_per_unit`` steps (an expression where part 0 is the short one)."""

    def copies(count: int | None) -> int:
        budget = wgmma.UNROLLED_ACCUMULATOR_STEPS
        fits = count is not None and count * cfg.accumulators <= budget
        return count if fits else 1

    if cfg.stream_k:
        return ([copies(cfg.steps_per_unit)] if cfg.stream_k_dp_rounds > 0 else []) + [1]
    if cfg.tail_split > 1:
        whole = [copies(cfg.steps_per_unit)] if cfg.tail_rounds > 0 else []
        return whole + [copies(cfg.tail_steps_per_part if cfg.tail_shortfall == 0 else None)]
    return [copies(cfg.steps_per_unit if cfg.part_shortfall == 0 else None)]
