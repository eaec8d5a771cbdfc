"""Random tensor maps run on the GPU and in the numpy model, compared byte for byte.

One kernel per (rank, dtype, direction) takes every tensor-map field, the coordinates and
the shared offset as scalar arguments, so hundreds of random descriptors cost a handful of
compilations. A load fills a poisoned 32 KiB shared arena and dumps it whole; a store writes
a random arena's box into a random global buffer. Every byte of both is compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import tvm
from tvm.script import tirx as T

from ..intrin.host import bind_encoded_map
from ..planner.plan_types import DESCRIPTOR_DTYPE_BYTES, SWIZZLE_GEOMETRY, TensorMapSpec
from .tma_model import load_tile, shared_footprint, store_tile, traversal_shape

ARENA = 32768
MAX_BOX_BYTES = 16384
POISON = 0xA5
DTYPES = ("uint8", "float16", "bfloat16", "float32")


@dataclass(frozen=True)
class MapCase:
    spec: TensorMapSpec
    coords: tuple[int, ...]
    smem_offset: int  # bytes into the arena, a multiple of 128

    @property
    def moved_bytes(self) -> int:
        return math.prod(traversal_shape(self.spec)) * self.spec.element_bytes

    @property
    def footprint(self) -> int:
        spec = self.spec
        strides = [spec.element_bytes, *spec.global_strides]
        return spec.element_bytes + sum((d - 1) * s for d, s in zip(spec.global_dims, strides))


def validation_kernel(rank: int, dtype: str, direction: str):
    """``main(G, D, d0..d4, s1..s4, b0..b4, e0..e4, c0..c4, swizzle, oob, offset, nbytes)``."""
    load = direction == "load"

    # fmt: off
    @T.prim_func
    def main(G_ptr: T.handle, D_ptr: T.handle,
             d0: T.int64, d1: T.int64, d2: T.int64, d3: T.int64, d4: T.int64,
             s1: T.int64, s2: T.int64, s3: T.int64, s4: T.int64,
             b0: T.int64, b1: T.int64, b2: T.int64, b3: T.int64, b4: T.int64,
             e0: T.int64, e1: T.int64, e2: T.int64, e3: T.int64, e4: T.int64,
             c0: T.int32, c1: T.int32, c2: T.int32, c3: T.int32, c4: T.int32,
             swizzle: T.int64, oob: T.int64, offset: T.int32, nbytes: T.int32):
        size = T.int64()
        G = T.match_buffer(G_ptr, (size,), "uint8")
        D = T.match_buffer(D_ptr, (ARENA,), "uint8")
        tmap = T.meta_var(_encode(G, dtype, rank, [d0, d1, d2, d3, d4], [s1, s2, s3, s4],
                                  [b0, b1, b2, b3, b4], [e0, e1, e2, e3, e4], swizzle, oob))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((ARENA + 64,), "uint8", scope="shared.dyn")
        arena = T.decl_buffer((ARENA,), "uint8", dyn.data)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=ARENA // 8)
        for i in T.serial(tid, ARENA, step=128):
            arena[i] = D[i]
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            if load:
                T.tma.load(arena.ptr_to([offset]), T.address_of(tmap),
                           [c0, c1, c2, c3, c4][:rank], mbar.ptr_to([0]))
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]),
                                                           T.cast(nbytes, "uint32"))
            else:
                T.tma.store(T.address_of(tmap), [c0, c1, c2, c3, c4][:rank],
                            arena.ptr_to([offset]))
                T.tma.commit_group()
                T.tma.wait_group(0)
        if load:
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            for i in T.serial(tid, ARENA, step=128):
                D[i] = arena[i]
    # fmt: on
    return main


def _encode(buffer, dtype, rank, dims, strides, box, estrides, swizzle, oob):
    """The map over ``buffer`` with every field a kernel argument (run-time values)."""
    spec = TensorMapSpec(dtype=dtype, global_dims=tuple(dims[:rank]),
                         global_strides=tuple(strides[: rank - 1]), box_dims=tuple(box[:rank]),
                         element_strides=tuple(estrides[:rank]), swizzle=swizzle,
                         oob_fill=oob)
    return bind_encoded_map(spec, buffer)


def kernel_arguments(case: MapCase) -> list[int]:
    spec = case.spec

    def pad(values, n, fill):
        return [int(v) for v in values] + [fill] * (n - len(values))

    return (pad(spec.global_dims, 5, 1) + pad(spec.global_strides, 4, 16)
            + pad(spec.box_dims, 5, 1) + pad(spec.element_strides, 5, 1)
            + pad(case.coords, 5, 0)
            + [spec.swizzle, spec.oob_fill, case.smem_offset, case.moved_bytes])


def random_case(rng: np.random.Generator, rank: int, dtype: str,
                direction: str = "load") -> MapCase:
    """A legal random map: OOB edges, swizzles, element strides, bases on/off the period."""
    width = DESCRIPTOR_DTYPE_BYTES[dtype]
    swizzle = int(rng.choice([0, 0, 1, 2, 3]))
    limit = SWIZZLE_GEOMETRY[swizzle][0] if swizzle else min(256 * width, 512)
    inner_bytes = 16 * int(rng.integers(1, limit // 16 + 1))
    box = [inner_bytes // width]
    estrides = [1]
    for _ in range(1, rank):
        box.append(int(rng.choice([1, 2, 3, 4, 5, 8])))
        estrides.append(int(rng.choice([1, 1, 1, 2, 3])))
    def footprint() -> int:
        probe = TensorMapSpec(dtype=dtype, global_dims=tuple(box), global_strides=(),
                              box_dims=tuple(box), element_strides=tuple(estrides),
                              swizzle=swizzle)
        return shared_footprint(probe)

    while footprint() > MAX_BOX_BYTES and max(box[1:], default=1) > 1:
        index = int(np.argmax(box[1:])) + 1
        box[index] = max(1, box[index] // 2)
    dims = [int(rng.integers(1, 2 * b + 3)) for b in box]
    dims[0] = max(dims[0], 1)
    strides, previous = [], dims[0] * width
    for k in range(1, rank):
        stride = -(-previous // 16) * 16 + 16 * int(rng.integers(0, 3))
        strides.append(stride)
        previous = stride * dims[k]
    coords = [int(rng.integers(-b, d + 1)) if rng.random() < 0.35 else
              int(rng.integers(0, max(1, d - b + 1))) for b, d in zip(box, dims)]
    unit = 16 // width  # dimension 0 must start on a 16-byte boundary (else the H100 faults)
    coords[0] = coords[0] // unit * unit
    if direction == "store":  # a store starting before the tensor faults on the H100
        coords = [max(0, c) for c in coords]
    oob = int(dtype != "uint8" and rng.random() < 0.4)
    spec = TensorMapSpec(dtype=dtype, global_dims=tuple(dims), global_strides=tuple(strides),
                         box_dims=tuple(box), element_strides=tuple(estrides),
                         swizzle=swizzle, oob_fill=oob)
    period = SWIZZLE_GEOMETRY[swizzle][1] if swizzle else 1024
    slots = (ARENA - shared_footprint(spec) - 1024) // 128
    offset = 128 * int(rng.integers(0, max(1, slots)))
    if rng.random() < 0.5:
        offset = offset // period * period  # on the pattern period half of the time
    return MapCase(spec, tuple(coords), offset)


def model_result(case: MapCase, global_bytes: np.ndarray, arena: np.ndarray, direction: str):
    glob, shared = global_bytes.copy(), arena.copy()
    move = load_tile if direction == "load" else store_tile
    move(case.spec, case.coords, case.smem_offset, glob, shared)
    return glob, shared


def run_case(executable, case: MapCase, direction: str, rng: np.random.Generator):
    """Run one case on device 0; return a description of every difference (empty: exact)."""
    import torch

    size = case.footprint + 256
    global_bytes = rng.integers(0, 256, size=size, dtype=np.uint8)
    if direction == "load":
        arena = np.full(ARENA, POISON, dtype=np.uint8)
    else:
        arena = rng.integers(0, 256, size=ARENA, dtype=np.uint8)
    want_global, want_arena = model_result(case, global_bytes, arena, direction)
    g = torch.from_numpy(global_bytes.copy()).cuda()
    d = torch.from_numpy(arena.copy()).cuda()
    executable["main"](g, d, *kernel_arguments(case))
    torch.cuda.synchronize()
    problems = []
    for label, got, want in (("global", g.cpu().numpy(), want_global),
                             ("shared", d.cpu().numpy(), want_arena)):
        wrong = np.flatnonzero(got != want)
        if wrong.size:
            at = wrong[0] - wrong[0] % 4
            problems.append(f"{label}: {wrong.size} bytes differ, first at {wrong[0]} "
                            f"(got {got[at:at + 8].tobytes().hex()}, model "
                            f"{want[at:at + 8].tobytes().hex()})")
    return problems


def compile_kernel(rank: int, dtype: str, direction: str, arch: str = "sm_90a"):
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    return tvm.compile(tvm.IRModule({"main": validation_kernel(rank, dtype, direction)}),
                       target=target, tir_pipeline="tirx")
