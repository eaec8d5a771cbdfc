"""Streaming-copy bandwidth of ``dispatch="tma"`` kernels against torch ``copy_``.

For each problem (16384x8192 float16, 8192x8192 float32, 32768x4096 bfloat16) one run
measures, on the same GPU and in the same process:

- ``copy_``: torch's device-to-device copy, the ceiling;
- ``persistent``: tvm_tma.kernels.pipelined_copy, a fixed grid (2 CTAs per SM), each CTA a
  ring of shared stages (TMA loads on mbarriers, TMA stores through bulk groups), fed by
  the dynamic tile scheduler (a global atomic counter);
- ``one-tile``: one CTA per 16 KiB tile (load, wait, store), with shared memory padded so
  that at most 3 CTAs share an SM;
- ``persistent-swizzled``: the persistent kernel with the 128B-swizzled GEMM-operand
  shared layout (2 CTAs per SM as well);
- ``persistent-static``: the persistent kernel with static round-robin tiles (reference).

The defaults are the best points of ``--sweep`` on an H100 (RESULTS.md).

Every kernel's output is poisoned, produced once and compared bit for bit with the input
before it is timed. Timing: CUDA events around each launch, warm-up first, median of
``--runs`` launches; bandwidth counts bytes read plus bytes written.

``--compile-only`` builds every kernel and assembles it for sm_90a with nvcc, without a
GPU (CI runs it through tests/python/test_pipelined_copy.py).

Usage: python benchmarks/copy_bandwidth.py [--compile-only] [--runs 50] [--json out.json]
       [--sweep]   (also times other tiles, stages, producers, CTAs per SM, schedules, hints)
       [--match one-tile --match swizzle]   (only the kernels whose names contain these)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.kernels.pipelined_copy import PipelineShape, pipelined_copy_kernel
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.timing import per_launch_median

H100_SMS = 132
#: Shared memory of an H100 SM, and what the hardware reserves of it per resident CTA.
SM_SHARED_BYTES = 228 * 1024
CTA_RESERVED_SHARED_BYTES = 1024


@dataclass(frozen=True)
class Problem:
    rows: int
    cols: int
    dtype: str

    @property
    def element_bytes(self) -> int:
        return tvm.DataType(self.dtype).bits // 8

    @property
    def one_tile(self) -> tuple[int, int]:
        """The one-tile kernel's tile: 16 KiB, 64 rows of 256 bytes (with at most
        :data:`ONE_TILE_CTAS_PER_SM` CTAs per SM, the best one-tile point of the sweep)."""
        return (ONE_TILE_BYTES // 256, 256 // self.element_bytes)

    @property
    def name(self) -> str:
        return f"{self.rows}x{self.cols} {self.dtype}"

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * tvm.DataType(self.dtype).bits // 8


ONE_TILE_BYTES = 16384
#: The one-tile kernel's occupancy cap: 3 x 16 KiB in flight per SM. Uncapped, 13 CTAs fit
#: and the extra bytes in flight cost 1.5 to 2 points (RESULTS.md).
ONE_TILE_CTAS_PER_SM = 3

PROBLEMS = (
    Problem(16384, 8192, "float16"),
    Problem(8192, 8192, "float32"),
    Problem(32768, 4096, "bfloat16"),
)

#: Share of torch copy_ each kernel must reach (issue 5).
TARGETS = {"persistent": 0.99, "one-tile": 0.98, "persistent-swizzled": 0.97}


def one_tile_kernel(problem: Problem, tile: tuple[int, int] | None = None,
                    load_hint: str | None = None, store_hint: str | None = None,
                    chunks: int = 1, per_sm: int = 0):
    """One CTA per tile: a single thread loads it, waits, stores it and waits for the store.

    With ``chunks > 1`` the tile moves as that many row bands, each loaded on its own
    mbarrier and stored as soon as it has arrived, so the CTA's store overlaps the rest of
    its load instead of waiting for the whole tile.

    ``per_sm > 0`` pads each CTA's shared memory so that at most that many CTAs fit on an
    SM (228 KiB of shared memory, 1 KiB of it reserved per CTA), capping the bytes in flight.
    """
    rows, cols, dtype = problem.rows, problem.cols, problem.dtype
    tm, tn = tile or problem.one_tile
    if tm % chunks:
        raise ValueError(f"chunks={chunks} does not divide the tile's {tm} rows")
    band = tm // chunks
    per_row = cols // tn
    num_tiles = (rows // tm) * per_row
    tile_bytes = tm * tn * tvm.DataType(dtype).bits // 8
    band_bytes = tile_bytes // chunks
    smem_bytes = tile_bytes + 128
    if per_sm:
        smem_bytes = max(smem_bytes, SM_SHARED_BYTES // per_sm - CTA_RESERVED_SHARED_BYTES)

    # fmt: off
    @T.prim_func
    def one_tile_copy(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (rows, cols), dtype, layout=TileLayout(S[rows, cols]))
        B = T.match_buffer(B_ptr, (rows, cols), dtype, layout=TileLayout(S[rows, cols]))
        T.device_entry()
        cta = T.cta_id([num_tiles])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((smem_bytes,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((tm, tn), dtype, dyn.data, elem_offset=0,
                             layout=TileLayout(S[tm, tn]))
        mbar = T.decl_buffer((chunks,), "uint64", dyn.data, elem_offset=tile_bytes // 8)
        r0 = T.meta_var(cta // per_row * tm)
        c0 = T.meta_var(cta % per_row * tn)
        if tid == 0:
            for c in T.unroll(chunks):
                T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([c]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            for c in T.unroll(chunks):
                Tx.copy_async(tile[c * band:c * band + band, :],
                              A[r0 + c * band:r0 + c * band + band, c0:c0 + tn],
                              dispatch="tma", mbar=mbar.ptr_to([c]), cache_hint=load_hint)
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([c]),
                                                           T.uint32(band_bytes))
            for c in T.unroll(chunks):
                T.cuda.mbarrier_wait(mbar.ptr_to([c]), 0)
                Tx.copy_async(B[r0 + c * band:r0 + c * band + band, c0:c0 + tn],
                              tile[c * band:c * band + band, :], dispatch="tma",
                              cache_hint=store_hint)
                T.ptx.cp.async_.bulk.commit_group()
            # Only shared memory must outlive the store: waiting for its reads (not its
            # global writes) frees the CTA's slot sooner; the writes complete with the grid.
            T.ptx.cp.async_.bulk.wait_group.read(0)
    # fmt: on
    return one_tile_copy


def persistent_shape(problem: Problem, ctas: int, **overrides) -> PipelineShape:
    return replace(PipelineShape(problem.rows, problem.cols, problem.dtype, ctas=ctas),
                   **overrides)


def default_persistent(problem: Problem, sms: int) -> PipelineShape:
    """The best row-major configuration of the sweep on an H100 (benchmarks/RESULTS.md):
    the dynamic tile scheduler, 8 KiB tiles of 32 rows x 256 bytes, 3 stages, 2 CTAs per SM."""
    elem = problem.element_bytes
    return persistent_shape(problem, 2 * sms, tile_rows=32, tile_cols=256 // elem, stages=3,
                            schedule="dynamic")


def static_persistent(problem: Problem, sms: int) -> PipelineShape:
    """The best static round-robin configuration (the previous default), for reference:
    16 KiB tiles of 64 rows x 256 bytes, 2 stages, 2 CTAs per SM."""
    elem = problem.element_bytes
    return persistent_shape(problem, 2 * sms, tile_rows=64, tile_cols=256 // elem, stages=2)


def default_swizzled(problem: Problem, sms: int) -> PipelineShape:
    """The best 128B-swizzled configuration of the sweep: the dynamic scheduler, 8 KiB
    tiles of 16 rows x 4 swizzle atoms (512 bytes), 3 stages, 2 CTAs per SM."""
    elem = problem.element_bytes
    return persistent_shape(problem, 2 * sms, tile_rows=16, tile_cols=512 // elem, stages=3,
                            swizzle=True, schedule="dynamic")


@dataclass
class Variant:
    name: str
    build: Callable[[], object]  # () -> PrimFunc
    detail: str
    #: The kernel takes a third argument: the dynamic scheduler's two zeroed int32 counters.
    workspace: bool = False
    executable: object = field(default=None, repr=False)


def persistent_variant(name: str, shape: PipelineShape) -> Variant:
    return Variant(name, lambda: pipelined_copy_kernel(shape), _describe(shape),
                   workspace=shape.schedule == "dynamic")


def variants(problem: Problem, sms: int, sweep: bool) -> list[Variant]:
    persistent, swizzled = default_persistent(problem, sms), default_swizzled(problem, sms)
    found = [
        persistent_variant("persistent", persistent),
        Variant("one-tile", lambda: one_tile_kernel(problem, per_sm=ONE_TILE_CTAS_PER_SM),
                f"tile {problem.one_tile[0]}x{problem.one_tile[1]}, one CTA per tile, "
                f"<= {ONE_TILE_CTAS_PER_SM} CTAs/SM"),
        persistent_variant("persistent-swizzled", swizzled),
        persistent_variant("persistent-static", static_persistent(problem, sms)),
    ]
    if sweep:
        for shape in _sweep_shapes(persistent_shape(problem, sms)):
            found.append(persistent_variant(f"persistent[{_describe(shape)}]", shape))
        elem = problem.element_bytes
        for point in ONE_TILE_SWEEP:
            cols = point.row_bytes // elem if point.row_bytes else problem.cols
            tile = (point.tile_bytes // (cols * elem), cols)
            if tile[0] % point.chunks:
                continue
            detail = (f"tile {tile[0]}x{tile[1]}, one CTA per tile"
                      f"{f', {point.chunks} chunks' if point.chunks > 1 else ''}"
                      f"{f', <= {point.per_sm} CTAs/SM' if point.per_sm else ''}"
                      f"{_describe_hints(point.load_hint, point.store_hint)}")
            found.append(Variant(f"one-tile[{detail}]",
                                 lambda t=tile, p=point: one_tile_kernel(
                                     problem, t, p.load_hint, p.store_hint, p.chunks,
                                     p.per_sm),
                                 detail))
    return found


@dataclass(frozen=True)
class SweepPoint:
    """One persistent configuration of ``--sweep`` (tile sizes in bytes, grid per SM)."""

    row_bytes: int  # bytes per tile row; 0: the whole tensor row
    tile_bytes: int
    stages: int
    per_sm: int = 2  # CTAs per SM
    producers: int = 1
    swizzle: bool = False
    schedule: str = "static"
    load_hint: str | None = None
    store_hint: str | None = None


_FIRST = "evict_first"

#: The sweep: tile shape, stages, CTAs per SM, schedule and L2 hints around the defaults.
SWEEP = (
    # The static round-robin at the dynamic default's tile and stages, and with hints.
    SweepPoint(256, 8192, 3),
    SweepPoint(256, 16384, 2, load_hint=_FIRST),
    # The dynamic scheduler over tile shapes, stages and CTAs per SM.
    SweepPoint(256, 16384, 2, schedule="dynamic"),
    SweepPoint(256, 16384, 3, schedule="dynamic"),
    SweepPoint(256, 16384, 4, per_sm=1, schedule="dynamic"),
    SweepPoint(256, 32768, 3, per_sm=1, schedule="dynamic"),
    SweepPoint(256, 8192, 2, schedule="dynamic"),
    SweepPoint(256, 8192, 4, schedule="dynamic"),
    SweepPoint(256, 8192, 2, per_sm=4, schedule="dynamic"),
    SweepPoint(256, 8192, 3, per_sm=3, schedule="dynamic"),
    SweepPoint(512, 16384, 2, schedule="dynamic"),
    SweepPoint(0, 16384, 2, schedule="dynamic"),
    SweepPoint(256, 16384, 3, producers=2, per_sm=1, schedule="dynamic"),
    SweepPoint(256, 8192, 3, schedule="dynamic", load_hint=_FIRST),
    SweepPoint(256, 8192, 3, schedule="dynamic", load_hint=_FIRST, store_hint=_FIRST),
    # 128B-swizzled rings.
    SweepPoint(512, 16384, 2, swizzle=True),
    SweepPoint(512, 16384, 2, swizzle=True, schedule="dynamic", load_hint=_FIRST),
    SweepPoint(512, 16384, 2, swizzle=True, schedule="dynamic"),
    SweepPoint(512, 16384, 3, swizzle=True, schedule="dynamic"),
    SweepPoint(256, 8192, 3, swizzle=True, schedule="dynamic"),
    SweepPoint(128, 8192, 3, swizzle=True, schedule="dynamic"),
    SweepPoint(512, 8192, 2, per_sm=4, swizzle=True, schedule="dynamic"),
    SweepPoint(128, 16384, 2, swizzle=True, schedule="dynamic"),
)

@dataclass(frozen=True)
class OneTilePoint:
    """One configuration of the one-tile kernel in ``--sweep``."""

    row_bytes: int  # bytes per tile row; 0: the whole tensor row
    tile_bytes: int
    chunks: int = 1
    per_sm: int = 0  # at most this many CTAs per SM (0: as many as fit)
    load_hint: str | None = None
    store_hint: str | None = None


ONE_TILE_SWEEP = (
    OneTilePoint(256, 16384), OneTilePoint(256, 16384, per_sm=4),
    OneTilePoint(256, 16384, per_sm=6), OneTilePoint(0, 32768, per_sm=2),
    OneTilePoint(0, 32768, per_sm=3), OneTilePoint(0, 32768), OneTilePoint(256, 32768),
    OneTilePoint(256, 8192, per_sm=6), OneTilePoint(256, 8192),
    OneTilePoint(256, 16384, per_sm=3, load_hint=_FIRST),
    OneTilePoint(256, 32768, chunks=4), OneTilePoint(256, 65536, chunks=8),
)


def _sweep_shapes(base: PipelineShape) -> list[PipelineShape]:
    """The persistent kernel at each point of :data:`SWEEP` that fits the problem."""
    elem = tvm.DataType(base.dtype).bits // 8
    shapes = []
    for point in SWEEP:
        tile_cols = (point.row_bytes // elem) if point.row_bytes else base.cols
        tile_rows = point.tile_bytes // (tile_cols * elem)
        shape = replace(base, tile_rows=tile_rows, tile_cols=tile_cols, stages=point.stages,
                        producers=point.producers, ctas=point.per_sm * base.ctas,
                        swizzle=point.swizzle, schedule=point.schedule,
                        load_hint=point.load_hint, store_hint=point.store_hint)
        try:
            shape.check()
        except ValueError:
            continue
        shapes.append(shape)
    return shapes


def _describe_hints(load_hint: str | None, store_hint: str | None) -> str:
    hints = [f"{what} {hint}" for what, hint in (("loads", load_hint), ("stores", store_hint))
             if hint]
    return "".join(f", {hint}" for hint in hints)


def _describe(shape: PipelineShape) -> str:
    return (f"tile {shape.tile_rows}x{shape.tile_cols}, {shape.stages} stages x "
            f"{shape.producers} producers, {shape.ctas} CTAs"
            f"{', 128B swizzle' if shape.swizzle else ''}"
            f"{', dynamic' if shape.schedule == 'dynamic' else ''}"
            f"{_describe_hints(shape.load_hint, shape.store_hint)}")


def compile_variant(variant: Variant, arch: str) -> tuple[object, str]:
    built = compile_kernel(variant.build(), arch)
    return built.executable, built.cuda_source


# ---------------------------------------------------------------------------------------
# Measuring (needs torch and a Hopper GPU)
# ---------------------------------------------------------------------------------------


def _torch_dtype(torch, dtype: str):
    return {"float16": torch.float16, "bfloat16": torch.bfloat16,
            "float32": torch.float32}[dtype]


def _bits(torch, tensor):
    return tensor.view(torch.int16 if tensor.element_size() == 2 else torch.int32)


def random_tensor(torch, problem: Problem, seed: int):
    """Random bit patterns (every value, NaNs included): the check compares bits."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    int_type = torch.int16 if tvm.DataType(problem.dtype).bits == 16 else torch.int32
    info = torch.iinfo(int_type)
    bits = torch.randint(info.min, info.max, (problem.rows, problem.cols), dtype=int_type,
                         device="cuda", generator=generator)
    return bits.view(_torch_dtype(torch, problem.dtype))


def measure(problem: Problem, found: list[Variant], runs: int, warmup: int) -> list[dict]:
    import torch

    source = random_tensor(torch, problem, seed=problem.rows + problem.cols)
    target = torch.empty_like(source)
    moved = 2 * problem.nbytes  # read + written

    def gbps(ms: float) -> float:
        return moved / (ms * 1e-3) / 1e9

    rows = []
    ceiling_ms = per_launch_median(torch, lambda: target.copy_(source), runs, warmup)
    rows.append({"problem": problem.name, "kernel": "copy_", "ms": ceiling_ms,
                 "GB/s": gbps(ceiling_ms), "of_copy": 1.0, "detail": "torch baseline",
                 "correct": True})
    a = tvm.runtime.from_dlpack(source)
    b = tvm.runtime.from_dlpack(target)
    for variant in found:
        func = variant.executable["main"]
        args = (a, b)
        if variant.workspace:  # the dynamic scheduler's counters: zero, left zero
            work = torch.zeros(2, dtype=torch.int32, device="cuda")
            args = (a, b, tvm.runtime.from_dlpack(work))
        _bits(torch, target).fill_(0x5A5A)  # poison
        func(*args)
        torch.cuda.synchronize()
        correct = bool(torch.equal(_bits(torch, target), _bits(torch, source)))
        if variant.workspace:
            correct = correct and not bool(work.any())
        row = {"problem": problem.name, "kernel": variant.name, "detail": variant.detail,
               "correct": correct}
        if correct:
            ms = per_launch_median(torch, lambda f=func, x=args: f(*x), runs, warmup)
            row.update({"ms": ms, "GB/s": gbps(ms), "of_copy": ceiling_ms / ms})
        rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    print("| problem | kernel | GB/s | % of copy_ | target | ms |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        target = TARGETS.get(row["kernel"])
        if not row["correct"]:
            print(f"| {row['problem']} | {row['kernel']} | WRONG RESULT | | | |")
            continue
        mark = "" if target is None else (
            f"{target:.0%} {'met' if row['of_copy'] >= target else 'MISSED'}")
        print(f"| {row['problem']} | {row['kernel']} | {row['GB/s']:.0f} | "
              f"{100 * row['of_copy']:.1f}% | {mark} | {row['ms']:.4f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile-only", action="store_true",
                        help="build and assemble every kernel for --arch; no GPU needed")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--sms", type=int, default=0,
                        help="SMs to size persistent grids for (default: the GPU's, 132 offline)")
    parser.add_argument("--sweep", action="store_true",
                        help="also time other tiles / stage counts of the persistent kernel")
    parser.add_argument("--match", action="append", default=[],
                        help="only kernels whose name contains this (repeatable)")
    parser.add_argument("--json", type=Path, help="write the measured rows here")
    args = parser.parse_args(argv)

    sms = args.sms or (H100_SMS if args.compile_only else _sm_count())
    all_rows: list[dict] = []
    failures = 0
    for problem in PROBLEMS:
        found = [variant for variant in variants(problem, sms, args.sweep)
                 if not args.match or any(part in variant.name for part in args.match)]
        for variant in list(found):
            try:
                variant.executable, cuda = compile_variant(variant, args.arch)
            except Exception as error:  # a sweep point the planner refuses is reported, not fatal
                print(f"{problem.name:24} {variant.name}: not built: "
                      f"{str(error).strip().splitlines()[-1][:200]}")
                found.remove(variant)
                failures += variant.name in TARGETS
                continue
            if args.compile_only:
                size = len(assemble(cuda, args.arch))
                tma_ops = cuda.count("cp.async.bulk.tensor")
                print(f"{problem.name:24} {variant.name:22} assembled for {args.arch}: "
                      f"{size} bytes of cubin, {tma_ops} TMA instruction templates")
        if args.compile_only:
            continue
        rows = measure(problem, found, args.runs, args.warmup)
        failures += sum(not row["correct"] for row in rows)
        all_rows += rows
    if not args.compile_only:
        print_table(all_rows)
        if args.json:
            args.json.write_text(json.dumps(all_rows, indent=1))
    return 1 if failures else 0


def _sm_count() -> int:
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count


if __name__ == "__main__":
    sys.exit(main())

