"""``assemble`` goes through nvcc once per distinct source in a run (its cubin cache)."""

from __future__ import annotations

import os

import tvm

from tvm_tma.testing import runner

SOURCE = 'extern "C" __global__ void noop(int* out) { out[threadIdx.x] = %d; }\n'


def test_the_session_cache_is_set_for_every_worker():
    # conftest's controller made it before the workers started; they inherit it.
    assert os.path.isdir(os.environ[runner.ASSEMBLE_CACHE_ENV])


def test_a_source_assembled_twice_goes_through_nvcc_once(tmp_path, monkeypatch):
    monkeypatch.setenv(runner.ASSEMBLE_CACHE_ENV, str(tmp_path))
    calls = []
    compile_cuda = tvm.support.nvcc.compile_cuda

    def counted(source, **kwargs):
        calls.append((source, kwargs["arch"]))
        return compile_cuda(source, **kwargs)

    monkeypatch.setattr(tvm.support.nvcc, "compile_cuda", counted)
    first = runner.assemble(SOURCE % 1)
    assert runner.assemble(SOURCE % 1) == first and len(calls) == 1
    assert first[:4] == b"\x7fELF"
    # Another source or another architecture is compiled afresh, each under its own key.
    other = runner.assemble(SOURCE % 2)
    runner.assemble(SOURCE % 1, arch="sm_90")
    assert calls == [(SOURCE % 1, "sm_90a"), (SOURCE % 2, "sm_90a"), (SOURCE % 1, "sm_90")]
    assert other != first and len(list(tmp_path.glob("*.cubin"))) == 3
    # Without the variable nothing is kept.
    monkeypatch.delenv(runner.ASSEMBLE_CACHE_ENV)
    runner.assemble(SOURCE % 3)
    assert len(calls) == 4 and len(list(tmp_path.glob("*.cubin"))) == 3
