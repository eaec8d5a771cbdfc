"""Test configuration: the ``gpu`` marker and its clean skip on machines without a GPU;
one cubin cache a run for ``tvm_tma.testing.runner.assemble``."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tvm_tma.testing.runner import ASSEMBLE_CACHE_ENV


def _has_cuda_gpu() -> bool:
    try:
        import tvm

        return bool(tvm.cuda(0).exist)
    except Exception:
        return False


def pytest_configure(config):
    # The controller (or a run without workers) makes the run's cubin cache before any
    # worker starts; workers inherit it through the environment.
    if not hasattr(config, "workerinput") and ASSEMBLE_CACHE_ENV not in os.environ:
        config.tvm_tma_cubins = tempfile.mkdtemp(prefix="tvm_tma_cubins_")
        os.environ[ASSEMBLE_CACHE_ENV] = config.tvm_tma_cubins
    config.addinivalue_line("markers", "gpu: needs an NVIDIA Hopper GPU (skipped without one)")
    config.addinivalue_line("markers", "fuzz: the 10,000-case differential fuzz run")


def pytest_unconfigure(config):
    cubins = getattr(config, "tvm_tma_cubins", None)
    if cubins is not None:
        os.environ.pop(ASSEMBLE_CACHE_ENV, None)
        shutil.rmtree(cubins, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if _has_cuda_gpu():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def before_narrow_wave(monkeypatch):
    """The GEMM's default tiling without its last tiling rules (the fullest wave of narrow
    tiles, tiling.in_gemm_fullest_narrow_wave, C^T = B A^T for few columns,
    tiling.on_few_columns, and the short problems' tilings, tiling.in_short_wave and
    tiling.in_short_pingpong; their tests are in test_tiling.py), for the tests of the
    rules before them: those replace their choice on some problems, but they still choose
    for every problem they leave."""
    from tvm_tma.kernels.tiling import rules

    monkeypatch.setattr(rules, "in_gemm_fullest_narrow_wave", lambda cfg: cfg)
    monkeypatch.setattr(rules, "on_few_columns", lambda cfg: cfg)
    monkeypatch.setattr(rules, "in_short_wave", lambda cfg, ctas: cfg)
    monkeypatch.setattr(rules, "in_short_pingpong", lambda cfg, ctas: cfg)
