"""Host side: one ``tvm_tma.encode_tiled`` (or ``encode_im2col``) call per distinct tensor
map per kernel.

The encode runs in the kernel's host function (``sctx.add_init_stmt(..., host=True)``) into
a stack slot that becomes a ``const __grid_constant__ CUtensorMap`` kernel parameter. Two
copies that need the same map over the same buffer share one descriptor: the cache key is
the encode arguments, and the buffer object is compared by identity (in TVM 0.27
``buffer.data`` builds a fresh expression on every access, so it cannot serve as identity).
"""

from __future__ import annotations

import dataclasses

from tvm.script import tirx as T

from ..intrin.host import bind_encoded_map
from ..intrin.host_im2col import bind_encoded_im2col_map
from ..planner.plan_types import Im2colMapSpec, TensorMapSpec
from .build import build_prim_func


def _cache_key(spec: TensorMapSpec | Im2colMapSpec, buffer_name: str, base_bytes,
               slot: int) -> str:
    # Every field of the spec, and its kind: a tiled and an im2col map over the same memory
    # are different maps.
    fields = (type(spec).__name__, *(getattr(spec, f.name) for f in dataclasses.fields(spec)),
              base_bytes)
    return "tvm_tma.tensormap:" + buffer_name + ":" + ":".join(map(str, fields)) + f"#{slot}"


def tensor_map_for(spec: TensorMapSpec | Im2colMapSpec, global_buffer, sctx, base_bytes=0):
    """The kernel-parameter variable holding ``spec`` over ``global_buffer``'s data plus
    ``base_bytes`` (encoded once per kernel); ``global_buffer`` must be visible on the host
    (a kernel argument)."""
    slot = 0
    while True:
        key = _cache_key(spec, global_buffer.name, base_bytes, slot)
        cached = sctx.cache_get(key)
        if cached is None:
            break
        cached_buffer, cached_map = cached[0], cached[1]
        if cached_buffer.same_as(global_buffer):
            return cached_map
        slot += 1  # another buffer with the same name and map: it needs its own descriptor
    bound = []

    def encode():
        bind = bind_encoded_im2col_map if isinstance(spec, Im2colMapSpec) else bind_encoded_map
        bound.append(bind(spec, global_buffer, base_bytes=base_bytes))
        T.evaluate(T.tvm_kernel_replace_point())

    host_stmt = build_prim_func(encode).body
    tensor_map = bound[0]
    sctx.add_init_stmt(host_stmt, host=True)
    sctx.cache_set(key, [global_buffer, tensor_map])
    return tensor_map
