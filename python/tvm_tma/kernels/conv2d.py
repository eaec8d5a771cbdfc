"""Conv2d forward (fprop) on Hopper as an implicit GEMM: the GEMM kernel of :mod:`.gemm`
with A the im2col view of the NHWC activation, loaded by TMA im2col copies.

A convolution of an NHWC activation ``X`` (N, H, W, C) by a KRSC filter ``F`` (K, R, S, C)
into an NPQK output ``Y`` is the GEMM ``Y[(n, p, q), k] = sum over (r, s, c) of
A[(n, p, q), (r, s, c)] * F[k, (r, s, c)]``: M = N * P * Q output pixels, N = K output
channels, K = R * S * C taps times input channels, A the im2col matrix of X
(:class:`tvm_tma.conv.Conv2dGeometry` is that view, declared over X's data), B the filter
as (K, R*S*C) (N x K, K-major: ``b_layout="nk"``) and C the output as (N*P*Q, K). So
:func:`conv2d_kernel` is :func:`.gemm.gemm_kernel` with ``a_operand=geometry``: every A
tile load the producer issues, ``A[m0:m0 + 128, k0:k0 + block_k]``, is planned by the
dispatch as one TMA im2col load (``tvm_tma.planner.im2col``): 128 consecutive output
pixels, ``block_k`` channels each (``channelsPerPixel``), read at the filter tap
``k0 // C``, the padding halo and the pixels past the last image filled with zeros.
Nothing of the ring, the WGMMA mainloop or the epilogue changes: the A tile lands in shared
memory as the same swizzled K-major tile as a GEMM's of that ``block_k``.

What it handles today (:func:`check_geometry` refuses the rest, naming the value):

* **C a multiple of 8.** One im2col load reads one filter tap (one tap offset per
  instruction), so each A copy lies inside one tap. A K block (64, 32 or 16 columns: one
  128-, 64- or 32-byte swizzle row of 16-bit elements) that divides C is one copy; one
  that does not pads each tap's C to whole blocks (``GemmConfig.tap_columns``): A is read
  from the view as (pixels, taps, channels) and B from the filter as (K, taps, channels),
  one copy a tap, and the columns past C read zeros in both (the copies' edge), so K is
  the taps times the padded width (C = 24 in 32 columns, 40 in 64, 80 in 96:
  :func:`conv2d_config` takes the block of fewest columns moved). Where C is 8, a
  16-column K block (one wgmma k16 step) holds two taps, loaded as two 8-column copies
  into an unswizzled slot of wgmma core matrices (``GemmConfig.a_copy_k = 8``, also
  taken where asked for C 8 mod 16); K = R*S*C is then 8 mod 16 for an odd R*S, and the
  last K block's MMA reads its missing piece from a zeroed region of shared memory, never
  from a copy past the last tap.
* **Stride at most 8**, the im2col map's traversal stride, **or a patch axis**: a filter
  extent equal to its stride, no padding or dilation, a whole number of patches (a ViT's
  16 x 16 at stride 16). Such an axis folds into the channels (W) or the batch (H)
  (:meth:`~tvm_tma.conv.Conv2dGeometry.patches_folded`, as the planner folds the view):
  every rule here, C's above included, sees the folded layer (a ViT over 8 channels has
  128 a folded pixel: 64-wide K blocks; RGB has 48).
* **bfloat16 or float16** in and out, fp32 accumulation (the GEMM's types).
* K (output channels) a multiple of 8 (16-byte rows of the filter and the output); any
  M = N * P * Q (the last row block loads zeros past it and stores nothing there).
* **Y = conv(X, F)**, never ``Y +=`` (split-K only ordered: ``split_k_ordered``, part 0
  storing), and the filter as N x K (``"nk"``).
* **Y^T = F X^T** (``swap_ab``): the filter's rows are the MMAs' M and X's copies (tiled
  or im2col) fill the B ring, ``block_n`` pixels each; C is stored transposed as the
  GEMM's swapped tiles store it. The default for a layer of at most 256 output channels
  where it keeps more SMs busy (:func:`conv2d_config`); not over padded taps.

* **Halo tiles** (``GemmConfig.halo``, :mod:`.halo`), stride 1: one tiled load a tile of
  its input rows, which the producer warpgroup's idle warps copy into 16-byte channel
  planes, each k16 step's A a wgmma descriptor into them (each pixel read once, not once
  a tap), K folded over the taps (R*S*C columns, no tap padded); the default for layers
  of padded taps and, where they fill their rounds of CTAs, of 16 or 32 channels
  (:func:`~.conv2d_tiling._halo_tiles`).

:func:`conv2d_config` picks the tiling of a layer (:mod:`.conv2d_tiling`: each rule and the
measurements that chose it; :func:`check_geometry` and :func:`check_config` refuse what
the kernel does not run);
:func:`conv2d_reference`, :func:`conv2d_error_bound` and
:func:`run` are the numpy fp32 reference, the per-element error bound and the GPU check,
as :mod:`.reference` has them for the GEMM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm

from ..conv import Conv2dGeometry
from .conv2d_tiling import (
    DTYPES,
    a_copy_k,
    channel_block,
    check_config,
    check_geometry,
    conv2d_config,
    tap_columns,
)
from .gemm import gemm_kernel
from .gemm_config import GemmConfig
from .operands import AOperand
from .reference import OUTPUT_EPS, error_bound
from .stream_k import check_workspace_left_clean, workspace

__all__ = [
    "DTYPES",
    "OUTPUT_EPS",
    "Conv2dRun",
    "a_copy_k",
    "channel_block",
    "check_config",
    "check_geometry",
    "conv2d_config",
    "conv2d_error_bound",
    "conv2d_kernel",
    "conv2d_reference",
    "random_inputs",
    "run",
    "tap_columns",
]


def conv2d_kernel(geometry: Conv2dGeometry, cfg: GemmConfig) -> tvm.tirx.PrimFunc:
    """The implicit-GEMM conv2d of ``geometry`` as a PrimFunc ``gemm(X, F, Y)``: X the NHWC
    activation (N, H, W, C), F the filter as (K, R*S*C) (KRSC, flattened), Y the output as
    (N*P*Q, K) (NPQK, flattened), whatever ``cfg.tap_columns`` (the loads read the padded
    taps from views of X and F)."""
    check_config(geometry, cfg)
    if cfg.halo is not None:
        # Halo tiles: the loads read the activation itself (:mod:`.halo`).
        layout = geometry.argument_layout
        return gemm_kernel(cfg, a_operand=AOperand(
            geometry.argument_shape, layout, layout, 0, view_shape=geometry.argument_shape))
    if not cfg.tap_columns:
        return gemm_kernel(cfg, a_operand=geometry)
    # K over taps padded to whole K blocks: A read as (pixels, taps, channels).
    return gemm_kernel(cfg, a_operand=AOperand(
        geometry.argument_shape, geometry.argument_layout, geometry.view_layout,
        geometry.view_elem_offset, view_shape=geometry.taps_view_shape))


def conv2d_reference(x: np.ndarray, f: np.ndarray,
                     geometry: Conv2dGeometry) -> tuple[np.ndarray, np.ndarray]:
    """fp32 ``Y`` as (N*P*Q, K), and ``|A| @ |F|^T`` (the sum of |products| of every output
    element), from the convolution's definition (the im2col matrix built directly from
    X, independent of TMA: ``tvm_tma.testing.im2col_model.conv_gemm_view``). ``f`` is the
    KRSC filter, (K, R, S, C) or (K, R*S*C)."""
    from tvm_tma.testing.im2col_model import conv_gemm_view

    g = geometry
    a = conv_gemm_view(x.astype(np.float32), (g.r, g.s), g.stride, g.padding, g.dilation)
    f32 = f.astype(np.float32).reshape(g.k, -1)
    return a @ f32.T, np.abs(a) @ np.abs(f32).T


def conv2d_error_bound(reference, magnitude, geometry: Conv2dGeometry, dtype: str,
                       split_k: int = 1):
    """How far each output element may be from the fp32 reference: the GEMM's bound
    (:func:`.reference.error_bound`) with K = R*S*C products per element. Y is the fp32 sum
    of those products (the padding's are zeros), rounded once to bf16/fp16: its own rounding
    (``eps_out * |Y|``, 2^-8 for bf16, 2^-11 for fp16) plus the difference of two fp32
    summation orders (``K * 2^-24 * sum |products|``), each taken twice, plus 1e-6. With
    ``split_k`` ordered parts, each part's sum is rounded and added into Y: the split-K
    bound with Y starting at zero and the parts' magnitudes bounded by ``magnitude`` (the
    sum over the parts of |part| is at most the sum of |products|). Works on numpy arrays
    and torch tensors alike."""
    if split_k == 1:
        return error_bound(reference, magnitude, geometry.gemm_k, dtype)
    return error_bound(reference, magnitude, geometry.gemm_k, dtype, split_k, magnitude,
                       0 * reference)


@dataclass(frozen=True)
class Conv2dRun:
    """One GPU launch and what it is checked against; every array is (N*P*Q, K) fp32 but
    the inputs (``x`` NHWC, ``f`` KRSC, in the input type)."""

    y: np.ndarray
    reference: np.ndarray
    bound: np.ndarray
    x: np.ndarray
    f: np.ndarray

    @property
    def worst(self) -> float:
        """Largest ``|y - reference| / bound`` (NaN if an element was never written)."""
        return float(np.max(np.abs(self.y - self.reference) / self.bound))

    @property
    def ok(self) -> bool:
        """Every element written and inside its bound."""
        return bool(np.isfinite(self.y).all()) and bool(
            (np.abs(self.y - self.reference) <= self.bound).all())

    def worst_element(self) -> str:
        error = np.abs(self.y - self.reference) / self.bound
        error = np.where(np.isfinite(error), error, np.inf)
        row, col = np.unravel_index(np.argmax(error), error.shape)
        return (f"Y[{row}, {col}] = {self.y[row, col]} vs {self.reference[row, col]} "
                f"(bound {self.bound[row, col]})")


def random_inputs(geometry: Conv2dGeometry, dtype: str = "bfloat16",
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal X (N, H, W, C) and F (K, R, S, C) in ``dtype`` (numpy / ml_dtypes)."""
    import ml_dtypes

    np_type = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    g = geometry
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(g.argument_shape).astype(np_type)
    f = rng.standard_normal((g.k, g.r, g.s, g.c)).astype(np_type)
    return x, f


def run(geometry: Conv2dGeometry, cfg: GemmConfig, seed: int = 0) -> Conv2dRun:
    """Build and launch the conv2d of ``geometry`` with ``cfg`` on random inputs, on device
    0; returns Y, the fp32 reference and the bound (:class:`Conv2dRun`: ``.ok`` says
    whether every element is inside its bound). Y starts as NaN poison, so an element the
    kernel never writes fails the check. A stream-K configuration is launched twice (other
    data first) on one workspace, whose flags must be left at zero."""
    from tvm_tma.testing.runner import compile_kernel

    kernel = compile_kernel(conv2d_kernel(geometry, cfg)).executable["main"]
    x, f = random_inputs(geometry, cfg.dtype, seed)
    device = tvm.cuda(0)
    poison = np.full(geometry.output_shape, np.nan, dtype=x.dtype)
    y = tvm.runtime.tensor(poison, device)
    extra = workspace(cfg, device)
    if cfg.stream_k or cfg.order_waits:
        # A first launch on other data: the checked one reuses the workspace it left.
        other_x, other_f = random_inputs(geometry, cfg.dtype, seed + 1)
        kernel(tvm.runtime.tensor(other_x, device),
               tvm.runtime.tensor(np.ascontiguousarray(other_f.reshape(geometry.filter_shape)),
                                  device),
               tvm.runtime.tensor(poison, device), *extra)
    kernel(tvm.runtime.tensor(x, device),
           tvm.runtime.tensor(np.ascontiguousarray(f.reshape(geometry.filter_shape)), device),
           y, *extra)
    device.sync()
    check_workspace_left_clean(cfg, extra)
    reference, magnitude = conv2d_reference(x, f, geometry)
    bound = conv2d_error_bound(reference, magnitude, geometry, cfg.dtype, cfg.reduction_parts)
    return Conv2dRun(y.numpy().astype(np.float32), reference, bound, x, f)

