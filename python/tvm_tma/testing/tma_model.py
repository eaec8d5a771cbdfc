"""A numpy model of what the TMA engine does with a tile-mode tensor map.

For one issue: box element ``(i0, i1, ...)`` (``i0`` fastest) is global element
``coords + i``; it lands densely in shared memory at ``smem + esize * linear(i)``, and the
swizzle then XORs address bits ``[7, 7+m)`` into bits ``[4, 4+m)`` of the *absolute* shared
address (m = 1, 2, 3 for 32/64/128B). Out-of-bounds elements read as zero and are not
written by stores. Shared addresses are relative to a 1024-byte-aligned arena.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..planner.plan_types import TensorMapSpec, TmaPlan
from .layout_eval import evaluate


def swizzle_bytes(address: np.ndarray, mode: int) -> np.ndarray:
    """The hardware swizzle of absolute shared byte addresses."""
    if mode == 0:
        return address
    mask = ((1 << mode) - 1) << 4
    return address ^ ((address >> 3) & mask)


def box_addresses(spec: TensorMapSpec, coords, smem_byte_address: int, global_dims):
    """(global byte offsets, shared byte addresses, in-bounds mask), one per box element."""
    rank = spec.rank
    grid = np.indices(tuple(reversed(spec.box_dims)), dtype=np.int64).reshape(rank, -1)[::-1]
    strides = [spec.element_bytes, *[int(s) for s in spec.global_strides]]
    inside = np.ones(grid.shape[1], dtype=bool)
    global_offset = np.zeros(grid.shape[1], dtype=np.int64)
    for k in range(rank):
        position = grid[k] + int(coords[k])
        inside &= (position >= 0) & (position < int(global_dims[k]))
        global_offset += position * strides[k]
    linear = np.arange(grid.shape[1], dtype=np.int64) * spec.element_bytes
    shared = swizzle_bytes(smem_byte_address + linear, spec.swizzle)
    return global_offset, shared, inside


def execute_plan(
    plan: TmaPlan,
    global_bytes: np.ndarray,
    shared_bytes: np.ndarray,
    element_bytes: int,
    env: Mapping | None = None,
) -> None:
    """Run every issue of ``plan`` on byte arrays, in place (``env`` binds symbolic values)."""
    env = env or {}
    spec = plan.tensor_map
    dims = [int(evaluate(d, env)) for d in spec.global_dims]
    width = spec.element_bytes
    lanes = np.arange(width, dtype=np.int64)
    for issue in plan.issues():
        coords = [int(evaluate(c, env)) for c in issue.coordinates]
        smem = int(evaluate(issue.smem_offset, env)) * element_bytes
        g_off, s_addr, inside = box_addresses(spec, coords, smem, dims)
        g_idx = (g_off[inside][:, None] + lanes).ravel()
        s_idx = (s_addr[inside][:, None] + lanes).ravel()
        if plan.direction == "g2s":
            shared_bytes[s_idx] = global_bytes[g_idx]
            zeros = (s_addr[~inside][:, None] + lanes).ravel()
            shared_bytes[zeros] = 0
        else:
            global_bytes[g_idx] = shared_bytes[s_idx]
