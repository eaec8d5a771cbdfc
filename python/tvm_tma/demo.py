"""``python -m tvm_tma demo``: the seed program, planned, encoded, assembled and run.

One thread TMA-loads an 8 x 256 float16 tile into a 128B-swizzled shared buffer, waits on
an mbarrier, and TMA-stores it to a second tensor. On a Hopper GPU the result is checked
bit for bit; elsewhere the CUDA is still assembled for the requested arch.
"""

from __future__ import annotations

import re

import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from .intrin.host import encode_arguments
from .planner import plan

ROWS, COLS, DTYPE = 8, 256, "float16"
TILE_BYTES = ROWS * COLS * 2


def swizzled_tile_layout():
    """TVM's GEMM-operand shared layout: rows of 128-byte swizzle atoms."""
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

    return mma_shared_layout(DTYPE, 3, (ROWS, COLS))


def demo_kernel():
    layout = swizzled_tile_layout()

    # fmt: off
    @T.prim_func
    def tma_roundtrip(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), DTYPE, layout=TileLayout(S[ROWS, COLS]))
        B = T.match_buffer(B_ptr, (ROWS, COLS), DTYPE, layout=TileLayout(S[ROWS, COLS]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), DTYPE, dyn.data, elem_offset=0, layout=layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            Tx.copy_async(tile[:, :], A[:, :], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE_BYTES))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        if tid == 0:
            Tx.copy_async(B[:, :], tile[:, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return tma_roundtrip


def demo_plan():
    layout = swizzled_tile_layout()
    shared = tvm.tirx.decl_buffer((ROWS, COLS), DTYPE, "tile", layout=layout,
                                  scope="shared.dyn")
    glob = tvm.tirx.decl_buffer((ROWS, COLS), DTYPE, "A", layout=TileLayout(S[ROWS, COLS]))
    whole = [tvm.ir.Range.from_min_extent(0, ROWS), tvm.ir.Range.from_min_extent(0, COLS)]
    return plan(tvm.tirx.BufferRegion(shared, whole), tvm.tirx.BufferRegion(glob, whole))


def hopper_available() -> bool:
    try:
        device = tvm.cuda(0)
        return bool(device.exist) and device.compute_version.startswith("9")
    except Exception:
        return False


def run(arch: str) -> int:
    copy_plan = demo_plan()
    spec = copy_plan.tensor_map
    print(f"plan: {copy_plan.num_issues} issue(s) of {copy_plan.bytes_per_issue} bytes, "
          f"rank {spec.rank}, swizzle mode {spec.swizzle}")
    print(f"  global dims {spec.global_dims}, byte strides {spec.global_strides}, "
          f"box {spec.box_dims}, coordinates {copy_plan.coordinates}")
    print("encode: tvm_tma.encode_tiled(map, " +
          ", ".join(str(a) for a in encode_arguments(spec, "A.data")) + ")")

    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    executable = tvm.compile(tvm.IRModule({"main": demo_kernel()}), target=target,
                             tir_pipeline="tirx")
    cuda = executable.mod.imports[0].inspect_source()
    for line in re.findall(r'asm volatile\("(cp\.async\.bulk\.tensor[^"]*)"', cuda):
        print(f"ptx: {line}")
    with target:
        cubin = tvm.support.nvcc.compile_cuda(cuda, target_format="cubin", arch=arch,
                                              compiler="nvcc")
    print(f"assembled for {arch}: {len(cubin)} bytes of cubin")

    if not hopper_available():
        print("no Hopper GPU here: compiled and assembled only")
        return 0
    rng = np.random.default_rng(2026)
    source = rng.integers(0, 1 << 16, size=(ROWS, COLS), dtype=np.uint16).view(np.float16)
    poison = np.full((ROWS, COLS), 0xA5A5, dtype=np.uint16).view(np.float16)
    device = tvm.cuda(0)
    a, b = tvm.runtime.tensor(source, device), tvm.runtime.tensor(poison, device)
    executable["main"](a, b)
    device.sync()
    same = np.array_equal(b.numpy().view(np.uint16), source.view(np.uint16))
    print(f"GPU run: {'bit-exact' if same else 'MISMATCH'} ({ROWS * COLS} elements)")
    return 0 if same else 1
