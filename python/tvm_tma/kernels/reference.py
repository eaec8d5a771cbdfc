"""What the GEMM's output must be: the fp32 reference, the error bound, and a GPU run.

The kernel rounds C from fp32 to bf16/fp16 (and with split-K rounds and adds each part), so
its output is compared against an fp32 reference with a per-element bound derived from the
roundings and the summation order (:func:`error_bound`), never with a blanket tolerance: an
element the kernel got wrong is outside the bound, and one it never wrote is NaN.
The benchmark checks against torch with the same bound; the tests and the example run
:func:`run`.
"""

from __future__ import annotations

import numpy as np
import tvm

from .gemm import gemm_kernel
from .gemm_config import GemmConfig
from .stream_k import check_workspace_left_clean, workspace

#: Relative rounding of one output element (C is rounded from fp32 to the input type).
OUTPUT_EPS = {"bfloat16": 2.0**-8, "float16": 2.0**-11}


def reference(a: np.ndarray, b: np.ndarray, b_layout: str) -> tuple[np.ndarray, np.ndarray]:
    """fp32 ``A @ B`` (``B`` as given: N x K for "nk", K x N for "kn"), and ``|A| @ |B|``."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    b_kn = b32.T if b_layout == "nk" else b32
    return a32 @ b_kn, np.abs(a32) @ np.abs(b_kn)


def part_magnitude(a: np.ndarray, b: np.ndarray, cfg: GemmConfig) -> np.ndarray:
    """``sum_p |A_p @ B_p|`` over the K parts of a split-K launch: how large the partial
    products are that the kernel rounds and adds into C one by one."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    b_kn = b32.T if cfg.b_layout == "nk" else b32
    width = cfg.steps_per_unit * cfg.block_k
    return sum(np.abs(a32[:, k0:k0 + width] @ b_kn[k0:k0 + width])
               for k0 in range(0, cfg.k, width))


def error_bound(ref, magnitude, k: int, dtype: str, split_k: int = 1, parts=None,
                initial=None):
    """How far each element of C may be from the fp32 reference ``ref``.

    C is the fp32 sum of K products, rounded once to bf16/fp16: its own rounding is at most
    ``eps_out * |C|`` (2^-8 for bf16, 2^-11 for fp16), and two fp32 summation orders of the
    same K products differ by at most about ``K * 2^-24 * sum |products|`` (``magnitude`` is
    ``|A| @ |B|``). The bound takes twice each, plus 1e-6 for exact zeros.

    With ``split_k`` parts, C starts at ``initial`` and each part's product P_p is rounded
    to the output type and added into C by a reduce-add store, which rounds again: in any
    order, the S roundings of the P_p are at most ``eps_out * parts`` (``parts`` is
    ``sum_p |P_p|``) and the S additions each at most ``eps_out * (|initial| + parts)``;
    the bound takes twice their sum. Works on numpy arrays and torch tensors alike.
    """
    summation = 2 * k * 2.0**-24 * magnitude + 1e-6
    eps = OUTPUT_EPS[dtype]
    if split_k == 1:
        return 2 * eps * abs(ref) + summation
    return 2 * eps * ((split_k + 1) * parts + split_k * abs(initial)) + summation


def run(cfg: GemmConfig, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Build and launch ``cfg`` on random data; returns (C, fp32 reference, bound).

    C starts as NaN poison, so an element the kernel never writes fails the check; a
    stream-K configuration is launched twice (other data first) on one workspace, whose
    flags must be left at zero; with split-K (which computes C += A @ B) C starts as
    random values instead, and the reference includes them.
    """
    import ml_dtypes

    from tvm_tma.testing.runner import compile_kernel

    np_type = ml_dtypes.bfloat16 if cfg.dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((cfg.m, cfg.k)).astype(np_type)
    b_shape = (cfg.n, cfg.k) if cfg.b_layout == "nk" else (cfg.k, cfg.n)
    b = rng.standard_normal(b_shape).astype(np_type)
    if cfg.split_k > 1:
        initial = rng.standard_normal((cfg.m, cfg.n)).astype(np_type)
    else:
        initial = np.full((cfg.m, cfg.n), np.nan, dtype=np_type)
    device = tvm.cuda(0)
    c = tvm.runtime.tensor(initial, device)
    kernel = compile_kernel(gemm_kernel(cfg)).executable["main"]
    extra = workspace(cfg, device)
    if cfg.stream_k:
        # A first launch on other data: the checked one then reuses a workspace that a
        # launch has left behind, as back-to-back launches do.
        other = [rng.standard_normal(x.shape).astype(np_type) for x in (a, b)]
        kernel(*[tvm.runtime.tensor(x, device) for x in other],
               tvm.runtime.tensor(initial, device), *extra)
    kernel(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c, *extra)
    device.sync()
    check_workspace_left_clean(cfg, extra)
    ref, magnitude = reference(a, b, cfg.b_layout)
    if cfg.split_k == 1:
        return c.numpy().astype(np.float32), ref, error_bound(ref, magnitude, cfg.k,
                                                              cfg.dtype)
    initial32 = initial.astype(np.float32)
    bound = error_bound(ref, magnitude, cfg.k, cfg.dtype, cfg.split_k,
                        part_magnitude(a, b, cfg), initial32)
    return c.numpy().astype(np.float32), ref + initial32, bound
