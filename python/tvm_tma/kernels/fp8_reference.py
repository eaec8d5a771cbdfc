"""What an FP8 GEMM's output must be: inputs, the scaled fp32 reference, and the bound terms
that FP8 adds to :func:`.reference.error_bound`.

An FP8 GEMM computes ``C = bf16(scale_a * scale_b * (A @ B^T))`` from e4m3/e5m2 A and B.
Its fp32 reference decodes the inputs exactly (every FP8 value is an fp32 value, and every
product of two is exact in fp32) and multiplies by the scales as the kernel does
(:func:`scaled_reference`). Two things make the kernel's output differ from it:

* The rounding to bf16 (and with split-K the roundings and reduce-adds of each part), the
  terms :func:`.reference.error_bound` already has for a bf16 output, plus the fp32
  roundings of ``scale_a * scale_b`` and of the product with the accumulator (2^-24
  relative each, on both sides: :data:`SCALE_EPS` covers them).
* The tensor core's accumulation. Hopper's FP8 wgmma does not keep fp32 precision while it
  accumulates: measurements (the PyTorch blog "Some matrix multiplication engines are not
  as accurate as we thought", DeepSeek-V3 section 3.3.2) find 13 fraction bits (an e8m13
  accumulator) with truncation, where the 16-bit wgmma keeps fp32's 23.
  :func:`accumulation_terms` bounds that from the exact partial sums, k32 instruction by
  k32 instruction (:data:`ACCUMULATION_EPS`).

The second term is the large one for arbitrary data, and it rests on that measured model.
The tests do not need it: :func:`fp8_random` draws "exact" inputs, signed values from
{0.5, 1, 1.5, 2}, whose products are multiples of 1/4 of at most 4 in magnitude, so every
partial sum the tensor core forms is a multiple of 1/4; while every one stays below
:data:`EXACT_LIMIT` (2^11: 13 bits above the 1/4 place, which an accumulator of 13
fraction bits holds exactly whatever it aligns to) the accumulation is exact in any order
and the output is off by its bf16 rounding alone. :func:`accumulation_terms` returns the
largest partial sum, so the claim is checked on the data, not assumed. The benchmark's
normal-distributed inputs take the accumulation term.
"""

from __future__ import annotations

import numpy as np

from .wgmma import MMA_K_BYTES

#: The FP8 input types as ml_dtypes names them (the same names as TVM's).
FP8_NUMPY = ("float8_e4m3fn", "float8_e5m2")
#: Magnitudes of the "exact" inputs: in both FP8 formats, with products on the 1/4 grid.
EXACT_VALUES = (0.5, 1.0, 1.5, 2.0)
#: Partial sums of exact inputs below this are held exactly by a 13-fraction-bit
#: accumulator (2^11 is 13 bits above the 1/4 place of the products).
EXACT_LIMIT = 2.0**11
#: K of one FP8 wgmma instruction (k32: 32 one-byte elements): the accumulator is
#: rounded once per instruction.
MMA_K = MMA_K_BYTES
#: Per-instruction error of the FP8 accumulation, relative to the magnitude of what the
#: instruction adds up: twice the 2^-13 of truncation to 13 fraction bits.
ACCUMULATION_EPS = 2.0**-12
#: The fp32 roundings of the scales' product and of the accumulator times it (kernel),
#: and the same two in the reference: 4 x 2^-24 relative.
SCALE_EPS = 2.0**-22


def fp8_random(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
               values: str = "exact") -> np.ndarray:
    """Random nonzero FP8 inputs of ``dtype`` (an ml_dtypes array): ``values="exact"``
    draws signed values from :data:`EXACT_VALUES` (exactly accumulable, see the module
    docstring), ``"normal"`` a standard normal rounded to the FP8 type."""
    import ml_dtypes

    np_type = getattr(ml_dtypes, dtype)
    if values == "exact":
        magnitudes = rng.choice(np.array(EXACT_VALUES, dtype=np.float32), size=shape)
        signs = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=shape)
        return (magnitudes * signs).astype(np_type)
    if values == "normal":
        return rng.standard_normal(shape).astype(np.float32).astype(np_type)
    raise ValueError(f"values={values!r}: 'exact' or 'normal'")


def random_scales(rng: np.random.Generator) -> tuple[np.float32, np.float32]:
    """Per-tensor scales in [0.5, 2): not 1, so a kernel that skips one fails."""
    scale_a, scale_b = rng.uniform(0.5, 2.0, size=2).astype(np.float32)
    return scale_a, scale_b


def scale_product(scale_a, scale_b) -> np.float32:
    """``scale_a * scale_b`` rounded to fp32, as the kernel forms it."""
    return np.float32(scale_a) * np.float32(scale_b)


def scaled_reference(a: np.ndarray, b: np.ndarray, scale_a, scale_b
                     ) -> tuple[np.ndarray, np.ndarray]:
    """fp32 ``scale_a * scale_b * (A @ B^T)`` (B as N x K) from the decoded FP8 inputs,
    and ``scale_a * scale_b * (|A| @ |B^T|)``."""
    scale = scale_product(scale_a, scale_b)
    a32, b_kn = a.astype(np.float32), b.astype(np.float32).T
    return (a32 @ b_kn) * scale, (np.abs(a32) @ np.abs(b_kn)) * scale


def accumulation_terms(a32, b_kn32) -> tuple[float, object]:
    """(largest ``|partial sum|``, accumulation bound) of ``A @ B`` (unscaled fp32 arrays,
    numpy or torch; ``b_kn32`` is K x N) accumulated k32 instruction by instruction.

    Instruction ``s`` adds the products of K columns ``32 s .. 32 s + 31`` to the
    accumulator; with a 13-fraction-bit accumulator its result is off by less than
    ``2^-13 (|D_{s-1}| + sum_s |products|)``. ``D_{s-1}`` is the exact prefix sum
    ``P_{s-1}`` for a tile computed whole, and ``P_{s-1} - P_t`` for a run that starts at
    instruction ``t`` (split-K parts, stream-K runs), so ``|D_{s-1}| <= |P_{s-1}| +
    R_{s-1}`` with ``R`` the running maximum of ``|P|``. The bound is
    ``ACCUMULATION_EPS * sum_s (|P_{s-1}| + R_{s-1} + |A_s| @ |B_s|)`` per element.
    """
    k = a32.shape[1]
    prefix = abs(a32[:, :0] @ b_kn32[:0])  # zeros of the output's shape and array type
    largest = 0.0 * prefix
    bound = 0.0 * prefix
    for k0 in range(0, k, MMA_K):
        a_s, b_s = a32[:, k0:k0 + MMA_K], b_kn32[k0:k0 + MMA_K]
        bound = bound + abs(prefix) + largest + abs(a_s) @ abs(b_s)
        prefix = prefix + a_s @ b_s
        largest = _maximum(largest, abs(prefix))
    return float(largest.max()), ACCUMULATION_EPS * bound


def _maximum(x, y):
    """Elementwise maximum of two numpy arrays or two torch tensors."""
    return x.maximum(y) if hasattr(x, "maximum") else np.maximum(x, y)
