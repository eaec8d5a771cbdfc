"""Buffers the runtime-encoder tests (tiled and im2col) hand to ``tvm_tma.encode_*``: a
host slot for the 128-byte map, and an exact-size device allocation."""

from __future__ import annotations

import ctypes

import pytest

#: Host storage for one encoded map; ``MAP`` is its 128-byte aligned address, the
#: alignment ``tensormap.replace`` needs (the driver itself asks for 64).
MAP_STORAGE = (ctypes.c_uint8 * 256)()
MAP = ctypes.c_void_p((ctypes.addressof(MAP_STORAGE) + 127) // 128 * 128)


def cuda_tensor(nbytes: int):
    """A device allocation of exactly nbytes (TVM allocates with cudaMalloc, no caching pool, so
    the driver's allocation range is the tensor itself)."""
    tvm = pytest.importorskip("tvm")
    return tvm.runtime.empty((nbytes,), "uint8", device=tvm.cuda(0))
