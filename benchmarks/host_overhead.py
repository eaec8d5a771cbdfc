"""Host time per launch: a kernel with two tensor maps against one with none.

Both kernels take the same arguments (two 64x64 float16 tensors) and launch one CTA:

- ``plain``: 128 threads copy A to B with ordinary loads and stores (no tensor map);
- ``tma``: one thread TMA-loads A into shared memory and TMA-stores it to B, so the host
  code encodes two tensor maps (A's and B's) before every launch.

``tma`` is measured twice in the same run: with the runtime's descriptor cache (the
default: a repeated launch replays the encoded maps) and with it switched off (every launch
calls cuTensorMapEncodeTiled twice, the behaviour before the cache).

Host time per launch = wall time of ``--launches`` back-to-back launches (no
synchronisation inside, so the GPU's own time is not counted) / ``--launches``; median of
``--rounds`` rounds. The kernels are tiny, so the GPU keeps up and the launch queue never
fills (which would make the host wait).

Usage: python benchmarks/host_overhead.py [--rounds 50] [--launches 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import tvm
import tvm_ffi
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma  # noqa: F401  (registers dispatch="tma", loads the runtime)
from tvm_tma.testing.runner import compile_kernel

ROWS, COLS = 64, 64
TILE_BYTES = ROWS * COLS * 2


def tma_kernel():
    # fmt: off
    @T.prim_func
    def tma_copy(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        B = T.match_buffer(B_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((TILE_BYTES + 128,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((ROWS, COLS), "float16", dyn.data, elem_offset=0,
                             layout=TileLayout(S[ROWS, COLS]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[:, :], A[:, :], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE_BYTES))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(B[:, :], tile[:, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return tma_copy


def plain_kernel():
    # fmt: off
    @T.prim_func
    def plain_copy(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        B = T.match_buffer(B_ptr, (ROWS, COLS), "float16", layout=TileLayout(S[ROWS, COLS]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        for i in T.serial(tid, ROWS * COLS, step=128):
            B[i // COLS, i % COLS] = A[i // COLS, i % COLS]
    # fmt: on
    return plain_copy


def host_us_per_launch(func, a, b, device, rounds: int, launches: int) -> float:
    for _ in range(launches):
        func(a, b)
    device.sync()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(launches):
            func(a, b)
        samples.append((time.perf_counter() - start) / launches * 1e6)
        device.sync()
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--limit-us", type=float, default=1.0,
                        help="target: tma (cached) at most this much above plain")
    args = parser.parse_args(argv)

    device = tvm.cuda(0)
    rng = np.random.default_rng(5)
    source = rng.integers(0, 1 << 16, (ROWS, COLS), dtype=np.uint16).view(np.float16)
    a = tvm.runtime.tensor(source, device)
    plain = compile_kernel(plain_kernel(), args.arch).executable["main"]
    tma = compile_kernel(tma_kernel(), args.arch).executable["main"]
    cache_enable = tvm_ffi.get_global_func("tvm_tma.descriptor_cache_enable")
    encode_count = tvm_ffi.get_global_func("tvm_tma.encode_count")

    for name, func in (("plain", plain), ("tma", tma)):
        b = tvm.runtime.tensor(np.zeros((ROWS, COLS), np.float16), device)
        func(a, b)
        device.sync()
        if not np.array_equal(b.numpy().view(np.uint16), source.view(np.uint16)):
            print(f"{name}: WRONG RESULT")
            return 1

    b = tvm.runtime.tensor(np.zeros((ROWS, COLS), np.float16), device)
    results = {}
    # Interleaved so that clock or load drift hits all three alike.
    for _ in range(3):
        results.setdefault("plain", []).append(
            host_us_per_launch(plain, a, b, device, args.rounds, args.launches))
        cache_enable(True)
        before = encode_count()
        results.setdefault("tma, cached maps", []).append(
            host_us_per_launch(tma, a, b, device, args.rounds, args.launches))
        cached_encodes = encode_count() - before
        cache_enable(False)
        before = encode_count()
        results.setdefault("tma, encode every launch", []).append(
            host_us_per_launch(tma, a, b, device, args.rounds, args.launches))
        uncached_encodes = encode_count() - before
        cache_enable(True)

    median = {name: statistics.median(values) for name, values in results.items()}
    launches = (args.rounds + 1) * args.launches
    print("| kernel | host us / launch | above plain | driver encodes / launch |")
    print("|---|---:|---:|---:|")
    print(f"| plain (no tensor map) | {median['plain']:.2f} | | 0 |")
    print(f"| tma, encode every launch | {median['tma, encode every launch']:.2f} | "
          f"{median['tma, encode every launch'] - median['plain']:+.2f} | "
          f"{uncached_encodes / launches:.2f} |")
    print(f"| tma, cached maps | {median['tma, cached maps']:.2f} | "
          f"{median['tma, cached maps'] - median['plain']:+.2f} | "
          f"{cached_encodes / launches:.4f} |")
    above = median["tma, cached maps"] - median["plain"]
    verdict = "met" if above <= args.limit_us else "MISSED"
    print(f"target: cached tma at most {args.limit_us} us above plain: {above:+.2f} us, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
