"""Test configuration: the ``gpu`` marker and its clean skip on machines without a GPU."""

from __future__ import annotations

import pytest


def _has_cuda_gpu() -> bool:
    try:
        import tvm

        return bool(tvm.cuda(0).exist)
    except Exception:
        return False


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA Hopper GPU (skipped without one)")
    config.addinivalue_line("markers", "fuzz: the 10,000-case differential fuzz run")


def pytest_collection_modifyitems(config, items):
    if _has_cuda_gpu():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def before_narrow_wave(monkeypatch):
    """The GEMM's default tiling without its last rule (the fullest wave of narrow tiles,
    tiling.in_gemm_fullest_narrow_wave; its tests are in test_tiling.py), for the tests of
    the rules before it: that rule replaces their choice on some short problems, but they
    still choose for every problem it leaves."""
    from tvm_tma.kernels.tiling import rules

    monkeypatch.setattr(rules, "in_gemm_fullest_narrow_wave", lambda cfg: cfg)
