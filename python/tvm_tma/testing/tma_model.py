"""A numpy model of what the TMA engine does with a tile-mode tensor map.

For one issue, the box walks ``ceil(box[i] / element_strides[i])`` positions along each
dimension ``i`` (dimension 0 fastest), at global coordinates ``coords[i] + j *
element_strides[i]``. The elements land densely in shared memory from the issue's shared
address; the swizzle then XORs address bits ``[7, 7+m)`` into bits ``[4, 4+m)`` of the
*absolute* shared address (m = 1, 2, 3 for 32/64/128B). Out-of-bounds elements read as zero
(or as the float type's NaN with NaN fill) and are not written by stores or reductions.
Shared addresses are byte offsets into a 1024-byte-aligned arena.

Measured on the H100 and modelled here: with a swizzle, every row of the box occupies the
whole swizzle span even when the inner box is narrower; a store writes out-of-bounds
elements of dimension 0 up to the next 16-byte boundary of that dimension.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from ..planner.plan_types import TensorMapSpec, TmaPlan
from .layout_eval import evaluate

#: The fill pattern of OOB elements under NaN fill, per descriptor element type (bytes LE).
#: Measured on the H100: every 16-bit half-word of an out-of-bounds element is 0x7FF7
#: (float16 and bfloat16 0x7FF7, float32 0x7FF77FF7 -- all quiet NaNs).
NAN_FILL: dict[str, bytes] = {
    "float16": bytes.fromhex("f77f"),
    "bfloat16": bytes.fromhex("f77f"),
    "float32": bytes.fromhex("f77ff77f"),
    "float64": bytes.fromhex("f77ff77ff77ff77f"),
}


def swizzle_bytes(address: np.ndarray, mode: int) -> np.ndarray:
    """The hardware swizzle of absolute shared byte addresses."""
    if mode == 0:
        return address
    mask = ((1 << mode) - 1) << 4
    return address ^ ((address >> 3) & mask)


def traversal_shape(spec: TensorMapSpec) -> tuple[int, ...]:
    """Elements moved along each dimension (driver order)."""
    return tuple(-(-b // e) for b, e in zip(spec.box_dims, spec.element_strides))


def shared_footprint(spec: TensorMapSpec) -> int:
    """Bytes of shared memory one issue spans (rows padded to the swizzle span)."""
    shape = traversal_shape(spec)
    row_bytes = shape[0] * spec.element_bytes
    if spec.swizzle:
        row_bytes = max(row_bytes, 16 << spec.swizzle)
    rows = 1
    for extent in shape[1:]:
        rows *= extent
    return rows * row_bytes


def box_addresses(spec: TensorMapSpec, coords, smem_byte_address: int, global_dims=None,
                  store: bool = False, base_byte: int = 0):
    """(global byte offsets, shared byte addresses, in-bounds mask), one per moved element.

    Global offsets count from the allocation the model holds; the map's base is
    ``base_byte`` into it.
    """
    rank = spec.rank
    dims = [int(d) for d in (global_dims if global_dims is not None else spec.global_dims)]
    if store:  # stores bound dimension 0 at its next 16-byte boundary
        dims[0] = -(-dims[0] * spec.element_bytes // 16) * 16 // spec.element_bytes
    shape = traversal_shape(spec)
    grid = np.indices(tuple(reversed(shape)), dtype=np.int64).reshape(rank, -1)[::-1]
    strides = [spec.element_bytes, *[int(s) for s in spec.global_strides]]
    inside = np.ones(grid.shape[1], dtype=bool)
    global_offset = np.full(grid.shape[1], base_byte, dtype=np.int64)
    for k in range(rank):
        position = int(coords[k]) + grid[k] * spec.element_strides[k]
        inside &= (position >= 0) & (position < dims[k])
        global_offset += position * strides[k]
    row_bytes = shape[0] * spec.element_bytes
    if spec.swizzle:
        row_bytes = max(row_bytes, 16 << spec.swizzle)  # rows fill the swizzle span
    row_index = np.zeros(grid.shape[1], dtype=np.int64)
    for k in range(rank - 1, 0, -1):
        row_index = row_index * shape[k] + grid[k]
    linear = row_index * row_bytes + grid[0] * spec.element_bytes
    shared = swizzle_bytes(smem_byte_address + linear, spec.swizzle)
    return global_offset, shared, inside


def _byte_index(offsets: np.ndarray, width: int) -> np.ndarray:
    return (offsets[:, None] + np.arange(width, dtype=np.int64)).ravel()


def load_tile(spec: TensorMapSpec, coords, smem_byte_address: int, global_bytes: np.ndarray,
              shared_bytes: np.ndarray, global_dims=None, base_byte: int = 0) -> None:
    """``cp.async.bulk.tensor`` global -> shared, in place on ``shared_bytes``."""
    width = spec.element_bytes
    g_off, s_addr, inside = box_addresses(spec, coords, smem_byte_address, global_dims,
                                          base_byte=base_byte)
    shared_bytes[_byte_index(s_addr[inside], width)] = global_bytes[
        _byte_index(g_off[inside], width)]
    outside = _byte_index(s_addr[~inside], width)
    if spec.oob_fill == 1 and spec.dtype in NAN_FILL:
        pattern = np.frombuffer(NAN_FILL[spec.dtype], dtype=np.uint8)
        shared_bytes[outside] = np.tile(pattern, outside.size // width)
    else:
        shared_bytes[outside] = 0


def store_tile(spec: TensorMapSpec, coords, smem_byte_address: int, global_bytes: np.ndarray,
               shared_bytes: np.ndarray, global_dims=None, base_byte: int = 0) -> None:
    """``cp.async.bulk.tensor`` shared -> global; out-of-bounds elements are dropped."""
    width = spec.element_bytes
    g_off, s_addr, inside = box_addresses(spec, coords, smem_byte_address, global_dims,
                                          store=True, base_byte=base_byte)
    global_bytes[_byte_index(g_off[inside], width)] = shared_bytes[
        _byte_index(s_addr[inside], width)]


def _reduce_values(op: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    # Every float add rounds to nearest even and keeps subnormal inputs and results: measured
    # on the H200 for the f32 tensor reduction too (1e-39 + 0 stays 1e-39, 1.5 * 2**-126 -
    # 2**-126 gives the subnormal 2**-127), whatever the ISA says of f32 adds elsewhere.
    if op == "add":
        return (old + new).astype(old.dtype)
    if op == "min":
        return np.minimum(old, new)
    if op == "max":
        return np.maximum(old, new)
    if op == "and":
        return old & new
    if op == "or":
        return old | new
    if op == "xor":
        return old ^ new
    if op == "inc":  # PTX: old >= new ? 0 : old + 1 (unsigned)
        return np.where(old >= new, 0, old + 1).astype(old.dtype)
    if op == "dec":  # PTX: (old == 0 || old > new) ? new : old - 1 (unsigned)
        return np.where((old == 0) | (old > new), new, old - 1).astype(old.dtype)
    raise ValueError(f"unknown reduction {op!r}")


def reduce_tile(op: str, spec: TensorMapSpec, coords, smem_byte_address: int,
                global_bytes: np.ndarray, shared_bytes: np.ndarray, numpy_dtype,
                global_dims=None, base_byte: int = 0) -> None:
    """``cp.reduce.async.bulk.tensor``: ``global = op(global, shared)`` for in-bounds elements.

    ``numpy_dtype`` is the element type the reduction computes in (float adds round as IEEE
    arithmetic of that type, subnormals kept, like the hardware's).
    """
    width = spec.element_bytes
    g_off, s_addr, inside = box_addresses(spec, coords, smem_byte_address, global_dims,
                                          base_byte=base_byte)
    g_idx = _byte_index(g_off[inside], width)
    s_idx = _byte_index(s_addr[inside], width)
    old = global_bytes[g_idx].view(numpy_dtype)
    new = shared_bytes[s_idx].view(numpy_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        global_bytes[g_idx] = _reduce_values(op, old, new).view(np.uint8)


def numpy_type(dtype: str):
    """The numpy type of a map element type (bfloat16 from ml_dtypes)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype).type


def bound_spec(spec: TensorMapSpec, env: Mapping) -> TensorMapSpec:
    """``spec`` with its global dims and strides evaluated under ``env``: a map the device
    rebinds (a device-side view's) has expressions there, which the model runs at the
    values the launch gives them."""
    return replace(spec, global_dims=tuple(int(evaluate(d, env)) for d in spec.global_dims),
                   global_strides=tuple(int(evaluate(s, env)) for s in spec.global_strides))


def execute_plan(
    plan: TmaPlan,
    global_bytes: np.ndarray,
    shared_bytes: np.ndarray,
    element_bytes: int,
    env: Mapping | None = None,
    *,
    reduce: str | None = None,
    cta: int | None = None,
) -> None:
    """Run every issue of ``plan`` on byte arrays, in place (``env`` binds symbolic values).

    ``reduce`` makes a store the tensor reduction of that name (computed in the map's
    element type); ``cta`` runs only that CTA's slice of a plan split among a cluster.
    """
    env = env or {}
    spec = bound_spec(plan.tensor_map, env)
    dims = list(spec.global_dims)
    base = int(evaluate(plan.base_offset, env)) * element_bytes
    for issue in plan.issues(cta):
        coords = [int(evaluate(c, env)) for c in issue.coordinates]
        smem = int(evaluate(issue.smem_offset, env)) * element_bytes
        if reduce is not None:
            reduce_tile(reduce, spec, coords, smem, global_bytes, shared_bytes,
                        numpy_type(spec.dtype), dims, base_byte=base)
        elif plan.direction == "g2s":
            load_tile(spec, coords, smem, global_bytes, shared_bytes, dims, base_byte=base)
        else:
            store_tile(spec, coords, smem, global_bytes, shared_bytes, dims, base_byte=base)


def execute_multicast(
    plan: TmaPlan,
    global_bytes: np.ndarray,
    images: list[np.ndarray],
    element_bytes: int,
    env: Mapping | None = None,
    *,
    mask: int | None = None,
    issuers: tuple[int, ...] | None = None,
) -> None:
    """A multicast load in a cluster of ``len(images)`` CTAs, in place on every CTA's shared
    image: each CTA of ``issuers`` (default: all) makes its issues (its slice of a split
    plan), and every box lands at the same shared address in each CTA of ``mask``
    (default: all of them)."""
    if plan.direction != "g2s":
        raise ValueError("only loads multicast")
    count = len(images)
    mask = (1 << count) - 1 if mask is None else mask
    receivers = [images[r] for r in range(count) if mask >> r & 1]
    for rank in issuers if issuers is not None else range(count):
        for image in receivers:
            execute_plan(plan, global_bytes, image, element_bytes, env, cta=rank)
