"""Host-side tensor maps for kernels that use the intrinsics directly.

Written before ``T.device_entry()`` (host code), ``T.meta_var(T.tma.encode_tiled(...))``
binds a 128-byte stack slot, encodes it with the rule-checking C++ runtime, and returns the
variable; used in device code (``T.address_of(map)``) it becomes a
``const __grid_constant__ CUtensorMap`` kernel parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..dispatch.descriptors import bind_encoded_map
from ..planner.plan_types import TensorMapSpec


def encode_tiled(buffer, dtype: str, dims: Sequence, strides: Sequence, box: Sequence, *,
                 element_strides: Sequence | None = None, swizzle: int = 0,
                 interleave: int = 0, l2_promotion: int = 2, oob_fill: int = 0,
                 name: str | None = None):
    """Encode a tiled map over ``buffer``'s data (driver order: innermost dimension first)."""
    spec = TensorMapSpec(
        dtype=dtype, global_dims=tuple(dims), global_strides=tuple(strides),
        box_dims=tuple(box),
        element_strides=tuple(element_strides) if element_strides else (1,) * len(box),
        swizzle=swizzle, interleave=interleave, l2_promotion=l2_promotion, oob_fill=oob_fill,
    )
    return bind_encoded_map(spec, buffer, name)
