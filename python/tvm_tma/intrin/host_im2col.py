"""Host side of im2col maps: the encode call the dispatch emits for a convolution's view.

A load from a convolution's GEMM view (:mod:`tvm_tma.planner.im2col`) reads through a map
born on the host from ``cuTensorMapEncodeIm2col`` (no device mutator touches the im2col
fields, so that is its only birth). The runtime's ``tvm_tma.encode_im2col`` takes the
driver's arguments in the driver's order, checks every rule by name, and caches one
descriptor per distinct map.
"""

from __future__ import annotations

from tvm.script import tirx as T

from ..planner.plan_types import Im2colMapSpec
from .host import map_base

#: The runtime's im2col encoder (src/tensormap_encode.cc).
ENCODE_IM2COL_FUNCTION = "tvm_tma.encode_im2col"


def encode_im2col_arguments(spec: Im2colMapSpec, base) -> list:
    """The flat packed-call arguments after the map itself (driver order throughout)."""
    return [
        spec.dtype,
        spec.rank,
        base,
        *spec.global_dims,
        *spec.global_strides,
        *spec.lower_corner,
        *spec.upper_corner,
        spec.channels_per_pixel,
        spec.pixels_per_column,
        *spec.element_strides,
        spec.interleave,
        spec.swizzle,
        spec.l2_promotion,
        spec.oob_fill,
    ]


def bind_encoded_im2col_map(spec: Im2colMapSpec, buffer, name: str | None = None,
                            base_bytes=0):
    """Emit (into the statement being built) a tensor-map stack slot and its im2col encode
    over ``buffer``'s data plus ``base_bytes``; returns the map variable."""
    tensor_map = T.Var(name or f"{buffer.name}_im2col_tensormap", ty=T.handle("tensormap").ty)
    T.Bind(T.tvm_stack_alloca("tensormap", 1), var=tensor_map)
    T.evaluate(T.call_packed(ENCODE_IM2COL_FUNCTION, tensor_map,
                             *encode_im2col_arguments(spec, map_base(buffer, base_bytes))))
    return tensor_map
