"""The numpy TMA model against the hardware: random tensor maps, bit-exact (issue 4).

On a Hopper GPU: >= 200 random loads (all swizzles, OOB edges with zero and NaN fill,
element strides, ranks 1..5, four dtypes, shared bases on and off the swizzle period) plus
random stores. In CI every validation kernel is assembled for sm_90a.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tvm_tma.testing import hw_validation as hv
from tvm_tma.testing.runner import assemble

KERNELS = [(rank, dtype, direction) for direction in ("load", "store")
           for rank in range(1, 6) for dtype in hv.DTYPES]
LOAD_CASES = 250
STORE_CASES = 80


@functools.lru_cache(maxsize=None)
def _kernel(rank: int, dtype: str, direction: str):
    return hv.compile_kernel(rank, dtype, direction)


@pytest.mark.parametrize("rank,dtype,direction", KERNELS)
def test_validation_kernel_assembles(rank, dtype, direction):
    source = _kernel(rank, dtype, direction).mod.imports[0].inspect_source()
    assert len(assemble(source)) > 0


def _cases(count: int, seed: int):
    rng = np.random.default_rng(seed)
    return [(1 + i % 5, hv.DTYPES[(i // 5) % len(hv.DTYPES)]) for i in range(count)], rng


def _run(direction: str, count: int, seed: int):
    shapes, rng = _cases(count, seed)
    failures, swizzles, off_period, nan_fill, oob = [], set(), 0, 0, 0
    for rank, dtype in shapes:
        case = hv.random_case(rng, rank, dtype, direction)
        problems = hv.run_case(_kernel(rank, dtype, direction), case, direction, rng)
        if problems:
            failures.append(f"{case}: {'; '.join(problems)}")
        swizzles.add(case.spec.swizzle)
        period = {0: 1, 1: 256, 2: 512, 3: 1024}[case.spec.swizzle]
        off_period += case.spec.swizzle > 0 and case.smem_offset % period != 0
        nan_fill += case.spec.oob_fill
        oob += any(c < 0 or c + b > d for c, b, d in
                   zip(case.coords, case.spec.box_dims, case.spec.global_dims))
    print(f"{direction}: {count} random maps, {len(failures)} mismatches; swizzles "
          f"{sorted(swizzles)}, {off_period} swizzled bases off the period, {nan_fill} NaN "
          f"fill, {oob} with out-of-bounds elements")
    assert swizzles == {0, 1, 2, 3} and off_period > 0 and nan_fill > 0 and oob > 0
    assert not failures, f"{len(failures)} of {count} differ:\n" + "\n".join(failures[:10])


@pytest.mark.gpu
def test_model_matches_hardware_loads():
    _run("load", LOAD_CASES, seed=404)


@pytest.mark.gpu
def test_model_matches_hardware_stores():
    _run("store", STORE_CASES, seed=405)
