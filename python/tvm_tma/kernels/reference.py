"""What the GEMM's output must be: the fp32 reference, the error bound, and a GPU run.

The kernel rounds C from fp32 to bf16/fp16 (and with split-K rounds and adds each part), so
its output is compared against an fp32 reference with a per-element bound derived from the
roundings and the summation order (:func:`error_bound`), never with a blanket tolerance: an
element the kernel got wrong is outside the bound, and one it never wrote is NaN.
The benchmark checks against torch with the same bound; the tests and the example run
:func:`run`. FP8 GEMMs (bf16 C, per-tensor scales) have their reference and the terms
their accumulation adds in :mod:`.fp8_reference`, and their bound in
:func:`fp8_error_bound`.
"""

from __future__ import annotations

import numpy as np
import tvm

from .fp8_reference import (
    EXACT_LIMIT,
    SCALE_EPS,
    accumulation_terms,
    fp8_random,
    random_scales,
    scale_product,
    scaled_reference,
)
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
    return sum(np.abs(a32[:, k0:k1] @ b_kn[k0:k1]) for k0, k1 in cfg.part_bounds())


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
    return _rounding(ref, dtype, split_k, parts, initial) + summation


def _rounding(ref, dtype: str, split_k: int, parts, initial):
    """The output roundings of :func:`error_bound`: C's own, or split-K's part by part."""
    eps = OUTPUT_EPS[dtype]
    if split_k == 1:
        return 2 * eps * abs(ref)
    return 2 * eps * ((split_k + 1) * parts + split_k * abs(initial))


def fp8_error_bound(ref, magnitude, k: int, accumulation=None, split_k: int = 1, parts=None,
                    initial=None):
    """How far each bf16 element of an FP8 GEMM may be from the scaled fp32 reference
    ``ref`` (:func:`.fp8_reference.scaled_reference`; ``magnitude``, ``parts`` and
    ``initial`` scaled and given as to :func:`error_bound`).

    The bf16 roundings are :func:`error_bound`'s (twice 2^-8 relative; split-K's part by
    part), the fp32 roundings of the scales' product and of the accumulator times it
    ``SCALE_EPS * magnitude`` (4 x 2^-24), plus 1e-6 for exact zeros. ``accumulation`` is
    the tensor core's accumulation term (:func:`.fp8_reference.accumulation_terms`, times
    the scales' product), which comes with fp32's summation-order term
    ``2 * K * 2^-24 * magnitude`` (the reference's order against the kernel's, stream-K's
    fp32 fix-up adds included). None means exactly accumulable inputs: every partial sum is
    exact in the kernel and in the reference, so neither applies and the bound is the
    roundings alone. Works on numpy arrays and torch tensors alike.
    """
    bound = _rounding(ref, "bfloat16", split_k, parts, initial) + SCALE_EPS * magnitude + 1e-6
    if accumulation is None:
        return bound
    return bound + 2 * k * 2.0**-24 * magnitude + accumulation


def run(cfg: GemmConfig, seed: int = 0, fp8_values: str = "exact"
        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Build and launch ``cfg`` on random data; returns (C, fp32 reference, bound).

    C starts as NaN poison, so an element the kernel never writes fails the check; a
    stream-K or ordered split-K configuration is launched twice (other data first) on one
    workspace, whose flags must be left at zero; with plain split-K (which computes
    C += A @ B) C starts as random values instead, and the reference includes them. FP8 inputs are
    :func:`.fp8_reference.fp8_random` of ``fp8_values`` ("exact": exactly accumulable,
    the bound is the roundings alone; "normal": the bound takes the tensor core's
    accumulation term) with scales random in [0.5, 2).
    """
    import ml_dtypes

    from tvm_tma.testing.runner import compile_kernel

    out_type = ml_dtypes.bfloat16 if cfg.out_dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(seed)
    a, b = _random_operands(cfg, rng, fp8_values)
    if cfg.split_k > 1 and not cfg.split_k_ordered:
        initial = rng.standard_normal((cfg.m, cfg.n)).astype(out_type)
    else:
        initial = np.full((cfg.m, cfg.n), np.nan, dtype=out_type)
    scales = random_scales(rng) if cfg.fp8 else ()
    device = tvm.cuda(0)
    c = tvm.runtime.tensor(initial, device)
    kernel = compile_kernel(gemm_kernel(cfg)).executable["main"]
    scale_args = [tvm.runtime.tensor(np.array([s], dtype=np.float32), device) for s in scales]
    extra = workspace(cfg, device)
    if cfg.stream_k or cfg.order_waits:
        # A first launch on other data: the checked one then reuses a workspace that a
        # launch has left behind, as back-to-back launches do.
        other = _random_operands(cfg, rng, fp8_values)
        kernel(*[tvm.runtime.tensor(x, device) for x in other],
               tvm.runtime.tensor(initial, device), *scale_args, *extra)
    kernel(tvm.runtime.tensor(a, device), tvm.runtime.tensor(b, device), c, *scale_args,
           *extra)
    device.sync()
    check_workspace_left_clean(cfg, extra)
    # Ordered split-K overwrites C (part 0 stores into it): its parts add up from zero.
    start = np.zeros_like(initial) if cfg.order_waits else initial
    expected, bound = expected_output(cfg, a, b, start, scales, fp8_values == "exact")
    return c.numpy().astype(np.float32), expected, bound


def _random_operands(cfg: GemmConfig, rng: np.random.Generator, fp8_values: str):
    """Random A (M x K) and B (N x K or K x N) of ``cfg``'s input types."""
    import ml_dtypes

    a_shape = (cfg.m, cfg.k)
    b_shape = (cfg.n, cfg.k) if cfg.b_layout == "nk" else (cfg.k, cfg.n)
    if cfg.fp8:
        a_type, b_type = cfg.input_dtypes
        return (fp8_random(rng, a_shape, a_type, fp8_values),
                fp8_random(rng, b_shape, b_type, fp8_values))
    np_type = ml_dtypes.bfloat16 if cfg.dtype == "bfloat16" else np.float16
    return (rng.standard_normal(a_shape).astype(np_type),
            rng.standard_normal(b_shape).astype(np_type))


def expected_output(cfg: GemmConfig, a: np.ndarray, b: np.ndarray, initial: np.ndarray,
                    scales: tuple = (), exact: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(fp32 reference, bound) of ``cfg`` on inputs ``a`` and ``b`` (split-K adds into
    ``initial``; FP8 multiplies by ``scales``). ``exact``: the FP8 inputs are exactly
    accumulable, which is checked (every partial sum below ``EXACT_LIMIT``)."""
    if not cfg.fp8:
        ref, magnitude = reference(a, b, cfg.b_layout)
        if cfg.reduction_parts == 1:
            return ref, error_bound(ref, magnitude, cfg.k, cfg.dtype)
        initial32 = initial.astype(np.float32)
        bound = error_bound(ref, magnitude, cfg.k, cfg.dtype, cfg.reduction_parts,
                            part_magnitude(a, b, cfg), initial32)
        return ref + initial32, bound
    scale = scale_product(*scales)
    ref, magnitude = scaled_reference(a, b, *scales)
    peak, accumulation = accumulation_terms(a.astype(np.float32), b.astype(np.float32).T)
    if exact and peak >= EXACT_LIMIT:
        raise ValueError(f"inputs not exactly accumulable: a partial sum reaches {peak} "
                         f"(at least {EXACT_LIMIT}); use a shorter K or normal inputs")
    accumulation = None if exact else scale * accumulation
    if cfg.reduction_parts == 1:
        return ref, fp8_error_bound(ref, magnitude, cfg.k, accumulation)
    initial32 = initial.astype(np.float32)
    bound = fp8_error_bound(ref, magnitude, cfg.k, accumulation, cfg.reduction_parts,
                            scale * part_magnitude(a, b, cfg), initial32)
    return ref + initial32, bound
