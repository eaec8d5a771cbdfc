"""Host-side tensor maps: the one place that spells the encode of a ``CUtensorMap``.

A tensor map is a ``T.handle("tensormap")`` stack slot in the kernel's host function,
filled by the rule-checking C++ runtime (``tvm_tma.encode_tiled``) and passed to the device
as a ``const __grid_constant__ CUtensorMap`` parameter. Three users emit it: the
``dispatch="tma"`` lowering (once per distinct map), ``T.tma.encode_tiled`` for kernels that
use the intrinsics directly, and the hardware-validation kernels. They all live above this
layer, so the emitter lives here and none of them depends on another.

Written before ``T.device_entry()`` (host code), ``T.meta_var(T.tma.encode_tiled(...))``
binds the slot, encodes it and returns the variable; used in device code
(``T.address_of(map)``) it becomes the kernel parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

import tvm
from tvm.script import tirx as T

from ..planner.plan_types import TensorMapSpec

#: The packed function of the C++ runtime that checks the rules and calls the driver.
ENCODE_FUNCTION = "tvm_tma.encode_tiled"


def encode_arguments(spec: TensorMapSpec, base) -> list:
    """The flat packed-call arguments after the map itself (driver order throughout)."""
    return [
        spec.dtype,
        spec.rank,
        base,
        *spec.global_dims,
        *spec.global_strides,
        *spec.box_dims,
        *spec.element_strides,
        spec.interleave,
        spec.swizzle,
        spec.l2_promotion,
        spec.oob_fill,
    ]


def map_base(buffer, base_bytes=0):
    """The global address a map over ``buffer`` starts at: its data pointer, plus
    ``base_bytes`` for a view whose offset is not folded into coordinates."""
    if isinstance(base_bytes, int) and base_bytes == 0:
        return buffer.data
    return tvm.tirx.handle_add_byte_offset(buffer.data, base_bytes)


def bind_encoded_map(spec: TensorMapSpec, buffer, name: str | None = None, base_bytes=0):
    """Emit (into the statement being built) a tensor-map stack slot and its encode over
    ``buffer``'s data plus ``base_bytes``.

    Returns the map variable.
    """
    tensor_map = T.Var(name or f"{buffer.name}_tensormap", ty=T.handle("tensormap").ty)
    T.Bind(T.tvm_stack_alloca("tensormap", 1), var=tensor_map)
    T.evaluate(T.call_packed(ENCODE_FUNCTION, tensor_map,
                             *encode_arguments(spec, map_base(buffer, base_bytes))))
    return tensor_map


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
