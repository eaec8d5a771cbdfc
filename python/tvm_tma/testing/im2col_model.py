"""A numpy model of what the TMA engine does with an im2col tensor map (rank 4, NHWC).

One im2col load moves ``pixelsPerColumn`` pixels of ``channelsPerPixel`` channels each. The
pixels are positions of a bounding box drawn around the tensor by the map's corners:
along W the positions ``lower_w, lower_w + v, ...`` below ``W + upper_w`` (``v`` the W
element stride), along H likewise with ``u``, then along N. The instruction's coordinates
``(c, w, h, n)`` name the first position; the load walks the box from there, W fastest,
wrapping to the next row and the next image, and reads each position at ``(h + off_h,
w + off_w)``, the instruction's tap offsets added. A position read outside the tensor (the
padding halo, an image past N, channels past C) fills with zeros, or NaN under NaN fill.
Pixel ``i`` lands densely as row ``i`` of the box in shared memory (rows padded to the
swizzle span), swizzled on absolute shared address bits like a tiled box.

This is the reading of the PTX ISA's im2col mode (tensor coordinates, bounding box,
traversal stride) that the GPU validates (tests/python/test_im2col.py runs every case here
against the H100 bit for bit).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..planner.plan_types import Im2colMapSpec, TmaPlan
from .layout_eval import evaluate
from .tma_model import NAN_FILL, swizzle_bytes


def pixel_positions(spec: Im2colMapSpec, start: tuple[int, int, int]) -> list[tuple]:
    """(n, h, w) of the ``pixelsPerColumn`` positions a load walks from ``start`` (n, h, w),
    before the tap offsets are added."""
    _, width, height, _ = (int(d) for d in spec.global_dims)
    (lower_w, lower_h), (upper_w, upper_h) = spec.lower_corner, spec.upper_corner
    step_w, step_h = spec.element_strides[1], spec.element_strides[2]
    n, h, w = start
    positions = []
    for _ in range(spec.pixels_per_column):
        positions.append((n, h, w))
        w += step_w
        if w >= width + upper_w:
            w = lower_w
            h += step_h
            if h >= height + upper_h:
                h = lower_h
                n += 1
    return positions


def load_im2col(spec: Im2colMapSpec, coords, offsets, smem_byte_address: int,
                global_bytes: np.ndarray, shared_bytes: np.ndarray, base_byte: int = 0) -> None:
    """One ``cp.async.bulk.tensor.4d...im2col`` load, in place on ``shared_bytes``."""
    channels, width, height, batch = (int(d) for d in spec.global_dims)
    stride_w, stride_h, stride_n = (int(s) for s in spec.global_strides)
    c0, w0, h0, n0 = (int(c) for c in coords)
    off_w, off_h = (int(o) for o in offsets)
    elem = spec.element_bytes
    row_bytes = spec.channels_per_pixel * elem
    if spec.swizzle:
        row_bytes = max(row_bytes, 16 << spec.swizzle)
    fill = (np.frombuffer(NAN_FILL[spec.dtype], dtype=np.uint8)
            if spec.oob_fill == 1 and spec.dtype in NAN_FILL else np.zeros(elem, np.uint8))
    # Every (pixel row, channel) element of the load at once: its swizzled shared bytes,
    # and where it reads from when the pixel and the channel lie inside the tensor.
    n, h, w = (np.array(axis, np.int64)
               for axis in zip(*pixel_positions(spec, (n0, h0, w0))))
    y, x = h + off_h, w + off_w
    pixel_inside = (0 <= n) & (n < batch) & (0 <= y) & (y < height) & (0 <= x) & (x < width)
    channel = c0 + np.arange(spec.channels_per_pixel, dtype=np.int64)
    channel_inside = (0 <= channel) & (channel < channels)
    rows = np.arange(len(n), dtype=np.int64)
    address = smem_byte_address + rows[:, None] * row_bytes + (channel - c0)[None, :] * elem
    lanes = np.arange(elem, dtype=np.int64)
    target = swizzle_bytes(address, spec.swizzle)[..., None] + lanes
    source = (base_byte + n * stride_n + y * stride_h + x * stride_w)[:, None] + channel * elem
    inside = pixel_inside[:, None] & channel_inside[None, :]
    shared_bytes[target[inside]] = global_bytes[source[inside][:, None] + lanes]
    shared_bytes[target[~inside]] = fill


def execute_im2col(plan: TmaPlan, global_bytes: np.ndarray, shared_bytes: np.ndarray,
                   element_bytes: int, env: Mapping | None = None) -> None:
    """Run every issue of an im2col ``plan`` on byte arrays, in place."""
    env = env or {}
    spec = plan.tensor_map
    if not isinstance(spec, Im2colMapSpec):
        raise TypeError("execute_im2col runs im2col plans")
    offsets = [int(evaluate(o, env)) for o in plan.im2col_offsets]
    base = int(evaluate(plan.base_offset, env)) * element_bytes
    for issue in plan.issues():
        coords = [int(evaluate(c, env)) for c in issue.coordinates]
        smem = int(evaluate(issue.smem_offset, env)) * element_bytes
        load_im2col(spec, coords, offsets, smem, global_bytes, shared_bytes, base_byte=base)


def conv_gemm_view(x: np.ndarray, filter_hw: tuple[int, int], stride: tuple[int, int],
                   padding: tuple[int, int], dilation: tuple[int, int] = (1, 1)) -> np.ndarray:
    """The im2col matrix of an NHWC array, computed directly from the convolution's
    definition (independent of the TMA model): ``A[(n, p, q), (r, s, c)]``."""
    n_, h_, w_, c_ = x.shape
    (r_, s_), (u, v), (ph, pw), (dh, dw) = filter_hw, stride, padding, dilation
    p_ = (h_ + 2 * ph - dh * (r_ - 1) - 1) // u + 1
    q_ = (w_ + 2 * pw - dw * (s_ - 1) - 1) // v + 1
    padded = np.zeros((n_, h_ + 2 * ph, w_ + 2 * pw, c_), dtype=x.dtype)
    padded[:, ph:ph + h_, pw:pw + w_, :] = x
    out = np.empty((n_, p_, q_, r_, s_, c_), dtype=x.dtype)
    for r in range(r_):
        for s in range(s_):
            rows = slice(r * dh, r * dh + u * (p_ - 1) + 1, u)
            cols = slice(s * dw, s * dw + v * (q_ - 1) + 1, v)
            out[:, :, :, r, s, :] = padded[:, rows, cols, :]
    return out.reshape(n_ * p_ * q_, r_ * s_ * c_)


def pad_taps(matrix: np.ndarray, tap_channels: int, tap_columns: int) -> np.ndarray:
    """An im2col matrix (rows, taps x ``tap_channels``) with each tap's channels followed
    by zeros to ``tap_columns``: what loads from the 3-D view (pixels, taps, channels)
    read in K blocks past a tap's channels."""
    rows = matrix.shape[0]
    padded = np.zeros((rows, matrix.shape[1] // tap_channels, tap_columns), matrix.dtype)
    padded[:, :, :tap_channels] = matrix.reshape(rows, -1, tap_channels)
    return padded.reshape(rows, -1)
