"""What a grouped GEMM's output must be: group sizes, the fp32 reference, and a GPU run.

Each group's rows of C are its rows of A times its B^T, rounded to the output type once
from an fp32 accumulation of K products: the bound per element is the GEMM's
(:func:`.reference.error_bound`). Rows that belong to no group (the groups may end before
M) must be left as they were: the kernel's stores stop at each group's last row. C starts
as NaN poison, so an element the kernel never wrote fails the check, and those rows are
expected to still be NaN.
"""

from __future__ import annotations

import numpy as np

from .grouped_gemm import (
    GroupedGemmConfig,
    check_workspace_left_clean,
    grouped_gemm_kernel,
    workspace,
)
from .reference import error_bound


def uneven_sizes(rng: np.random.Generator, groups: int, m: int, multiple: int = 16
                 ) -> list[int]:
    """``groups`` sizes, multiples of ``multiple``, summing to ``m`` (a multiple of it),
    drawn unevenly (as a router spreads tokens over experts): some groups large, some
    small, now and then one empty."""
    if m % multiple:
        raise ValueError(f"M={m} is not a multiple of {multiple}")
    units = m // multiple
    weights = rng.gamma(0.6, size=groups)
    cuts = np.floor(np.cumsum(weights) / weights.sum() * units).astype(int)
    cuts[-1] = units
    sizes = np.diff(np.concatenate([[0], cuts])) * multiple
    return [int(s) for s in sizes]


def group_ends(sizes) -> np.ndarray:
    """``offs``: the groups' row ends (int32), as ``torch._grouped_mm`` takes them."""
    return np.cumsum(np.asarray(sizes, dtype=np.int64)).astype(np.int32)


def grouped_reference(a: np.ndarray, b: np.ndarray, offs: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """fp32 ``C`` and ``|A| @ |B|`` per group; rows in no group are NaN in both."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = np.full((a.shape[0], b.shape[1]), np.nan, dtype=np.float32)
    magnitude = ref.copy()
    start = 0
    for g, end in enumerate(int(x) for x in offs):
        ref[start:end] = a32[start:end] @ b32[g].T
        magnitude[start:end] = np.abs(a32[start:end]) @ np.abs(b32[g]).T
        start = end
    return ref, magnitude


def expected_output(gcfg: GroupedGemmConfig, a, b, offs) -> tuple[np.ndarray, np.ndarray]:
    """(fp32 reference, bound); NaN where the kernel must not write."""
    ref, magnitude = grouped_reference(a, b, offs)
    return ref, error_bound(ref, magnitude, gcfg.gemm.k, gcfg.gemm.dtype)


def matches(c: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> bool:
    """Every written element within its bound, every element outside the groups NaN."""
    outside = np.isnan(expected)
    inside_ok = np.all(np.abs(c[~outside] - expected[~outside]) <= bound[~outside])
    return bool(inside_ok and np.all(np.isnan(c[outside])))


def run(gcfg: GroupedGemmConfig, sizes, seed: int = 0, maps_out: list | None = None
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Build and launch ``gcfg`` with groups of ``sizes`` rows (their sum at most M) on
    random data; returns (C, fp32 reference, bound). ``maps_out``: a list that receives the
    tensor-map workspace after the launches (which slots the device rebound).

    It launches twice on one slot workspace: first with other group sizes, then with
    ``sizes``, so the checked launch rebinds maps that a launch has left in the slots
    (and, with stream-K, finds the flags the first left: every one must be clear after
    it, which is checked)."""
    import ml_dtypes
    import tvm

    from tvm_tma.testing.runner import compile_kernel

    cfg = gcfg.gemm
    np_type = ml_dtypes.bfloat16 if cfg.dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((cfg.m, cfg.k)).astype(np_type)
    b = rng.standard_normal((gcfg.groups, cfg.n, cfg.k)).astype(np_type)
    offs = group_ends(sizes)
    if offs[-1] > cfg.m:
        raise ValueError(f"the groups hold {offs[-1]} rows, more than M={cfg.m}")
    device = tvm.cuda(0)
    kernel = compile_kernel(grouped_gemm_kernel(gcfg)).executable["main"]
    extra = [tvm.runtime.tensor(x, device)
             for x in workspace(gcfg, device.multi_processor_count)]
    poison = np.full((cfg.m, cfg.n), np.nan, dtype=np_type)
    other = group_ends(sorted(sizes, reverse=True))
    kernel(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device),
           tvm.runtime.tensor(other, device), tvm.runtime.tensor(poison, device), *extra)
    c = tvm.runtime.tensor(poison, device)
    kernel(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device),
           tvm.runtime.tensor(offs, device), c, *extra)
    device.sync()
    if gcfg.stream_k:
        check_workspace_left_clean(gcfg, extra[-1].numpy())
    if maps_out is not None:
        maps_out.append(extra[0].numpy())
    expected, bound = expected_output(gcfg, a, b, offs)
    return c.numpy().astype(np.float32), expected, bound
