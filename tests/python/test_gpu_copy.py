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


def _launchable(func):
    import tvm

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    return tvm.compile(tvm.IRModule({"main": func}), target=target, tir_pipeline="tirx")


@pytest.mark.gpu
def test_misaligned_global_pointer_is_a_python_error_not_a_fault():
    import torch

    from tvm_tma.demo import COLS, ROWS, demo_kernel

    executable = _launchable(demo_kernel())
    storage = torch.randn(ROWS * COLS + 1, dtype=torch.float16, device="cuda")
    misaligned = storage[1:].view(ROWS, COLS)  # base pointer 2 bytes past a 16-byte boundary
    out = torch.zeros(ROWS, COLS, dtype=torch.float16, device="cuda")
    with pytest.raises(Exception, match="global-address-align"):
        executable["main"](misaligned, out)
    # The context is healthy: the same kernel on aligned data still copies bit-exactly.
    source = torch.randn(ROWS, COLS, dtype=torch.float16, device="cuda")
    executable["main"](source, out)
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.int16), source.view(torch.int16))


@pytest.mark.gpu
def test_one_encode_per_distinct_map_per_launch():
    import torch
    import tvm_ffi
    from test_dispatch import _two_stage_kernel

    encode_count = tvm_ffi.get_global_func("tvm_tma.encode_count")
    executable = _launchable(_two_stage_kernel(24))
    data = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    # An earlier test's map over a reused address would be a cache hit (no encode at all).
    tvm_ffi.get_global_func("tvm_tma.descriptor_cache_clear")()
    before = encode_count()
    executable["main"](data)
    torch.cuda.synchronize()
    assert encode_count() - before == 1


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:build is deprecated:DeprecationWarning")
@pytest.mark.parametrize("entry", ["tirx.build", "build"])
def test_demo_through_the_build_entry_points(entry):
    """tvm.build / tvm.tirx.build(pipeline="tirx") plan, encode and copy like tvm.compile."""
    import numpy as np
    import torch
    import tvm

    from tvm_tma.demo import COLS, ROWS, demo_kernel

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    build = tvm.tirx.build if entry == "tirx.build" else tvm.build
    module = build(tvm.IRModule({"main": demo_kernel()}), target=target, pipeline="tirx")
    bits = np.random.default_rng(7).integers(0, 1 << 15, size=(ROWS, COLS), dtype=np.int16)
    source = torch.from_numpy(bits).cuda().view(torch.float16)
    out = torch.full((ROWS, COLS), -1, dtype=torch.int16, device="cuda").view(torch.float16)
    module["tma_roundtrip"](source, out)
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.int16), source.view(torch.int16))
