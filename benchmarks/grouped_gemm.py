"""The grouped GEMM of tvm_tma.kernels.grouped_gemm against ``torch._grouped_mm`` and the loop
of ``torch.matmul`` per group (bf16, mixture-of-experts shapes).

A problem ``E,M,N,K`` is E groups (experts) over M stacked rows: A (M, K), B (E, N, K), C
(M, N), ``C[rows of g] = A[rows of g] @ B[g]^T``. The group sizes are drawn unevenly (a
router's spread: ``tvm_tma.kernels.grouped_reference.uneven_sizes``, seeded by the
problem), each a multiple of 16 as torch's kernel needs, now and then 0. ``offs`` (the
group ends) lives on the GPU: neither kernel reads it on the host.

Every problem is first checked against an fp32 reference computed on the GPU with the
GEMM's bound (``tvm_tma.kernels.reference.error_bound``): each element within
``2 * 2^-8 * |ref| + 2 * K * 2^-24 * (|A| @ |B|) + 1e-6`` of the fp32 product of its group;
C starts as NaN, so an element never written fails. Then the kernel, ``torch._grouped_mm(A,
B.transpose(1, 2), offs=offs)`` and the loop of ``torch.matmul`` per group are timed in the
same run: ``--launches`` back-to-back launches between two CUDA events, best of
``--repetitions`` (the ratios), each side after 300 ms of launches that let the clock
settle under the power cap (``tvm_tma.testing.timing``), with the median of ``--runs``
launches each between its own events beside it; the output is checked again after the
timed launches.

Bandwidth: a problem whose weights dominate (decode: few rows per expert) is judged by the
bytes it must read (the groups' rows of A and B[g] of every non-empty group) per second
against ``torch.Tensor.copy_``'s rate (bytes read plus written per second) on a buffer of
B's size, measured in the same run.

``--against-plain`` also times the same rows as one plain GEMM against B[0] in the same
run, ours (``GemmConfig.for_problem(M, N, K)``, its output checked like a group's) and
``torch.matmul``: what the grouped walk costs over the GEMM's (benchmarks/RESULTS.md 9j).

``--compile-only`` builds and assembles every kernel for sm_90a (no GPU); ``--dump-cuda
DIR`` writes each kernel's CUDA source; ``--json`` prints the rows as one JSON list.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.kernels.grouped_gemm import (
    GroupedGemmConfig,
    check_workspace_left_clean,
    grouped_gemm_kernel,
    takes_short,
    with_tiling,
    workspace,
)
from tvm_tma.kernels.grouped_reference import group_ends, uneven_sizes
from tvm_tma.kernels.reference import error_bound
from tvm_tma.kernels.stream_k import workspace as gemm_workspace
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.timing import HEAT_MS, back_to_back, per_launch_median

#: E, M, N, K: Mixtral-like up- and down-projections, DeepSeek-like, and a decode step.
DEFAULT_PROBLEMS = [(8, 8128, 14336, 4096), (8, 8144, 4096, 14336), (64, 15888, 2048, 7168),
                    (64, 1040, 2048, 7168)]
#: Tilings ``--sweep`` tries beside the default (GemmConfig options; ``short=False``: the
#: default's tall tiles alone, where it also holds short ones).
SWEEP = [dict(), dict(short=False), dict(l2_promotion=128), dict(l2_promotion=256),
         dict(block_m=64, stages=5),
         dict(block_m=64, schedule="pingpong", stages=5, epilogue_n=64),
         dict(block_m=64, block_n=128, stages=8), dict(block_k=32, stages=8),
         dict(schedule="pingpong", block_n=128, epilogue_n=64), dict(block_n=128, stages=6),
         dict(stream_k=False), dict(stream_k=True), dict(cluster=2)]


def parse_problem(text: str) -> tuple[int, int, int, int]:
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 4 or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--problem takes E,M,N,K (positive), got {text!r}")
    return values


def sizes_for(problem) -> list[int]:
    e, m, _, _ = problem
    return uneven_sizes(np.random.default_rng(sum(problem)), e, m)


def configs_for(problem, sweep: bool, ctas: int) -> list[GroupedGemmConfig]:
    e, m, n, k = problem
    base = GroupedGemmConfig.for_problem(e, m, n, k, ctas=ctas)
    if not sweep:
        return [base]
    out = []
    for options in SWEEP:
        try:
            gcfg = with_tiling(base, **options)
            gcfg.check()
        except ValueError:
            continue
        if gcfg not in out:
            out.append(gcfg)
    return out


def label(gcfg: GroupedGemmConfig) -> str:
    cfg = gcfg.gemm
    return (f"grouped_{gcfg.groups}x{cfg.m}x{cfg.n}x{cfg.k}_{cfg.schedule}_{cfg.block_m}x"
            f"{cfg.block_n}x{cfg.block_k}_s{cfg.stages}_l2{cfg.l2_promotion}"
            f"{'_sk' if gcfg.stream_k else ''}"
            f"{f'_or{gcfg.short.block_m}' if gcfg.short is not None else ''}"
            f"{f'_cl{cfg.cluster}' if cfg.cluster > 1 else ''}")


def plain_config(problem) -> GemmConfig:
    """The plain GEMM of the problem's rows against one expert (``--against-plain``)."""
    _, m, n, k = problem
    return GemmConfig.for_problem(m, n, k)


def compile_only(problems, sweep: bool, dump: Path | None,
                 against_plain: bool = False) -> list[dict]:
    rows = []
    for problem in problems:
        if against_plain:
            cfg = plain_config(problem)
            cubin = assemble(compile_kernel(gemm_kernel(cfg)).cuda_source)
            rows.append({"kernel": f"plain_{cfg.m}x{cfg.n}x{cfg.k}_{cfg.block_m}x{cfg.block_n}",
                         "cubin_bytes": len(cubin)})
            print(json.dumps(rows[-1]), flush=True)
        for gcfg in configs_for(problem, sweep, 132):
            built = compile_kernel(grouped_gemm_kernel(gcfg))
            if dump is not None:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / f"{label(gcfg)}.cu").write_text(built.cuda_source)
            cubin = assemble(built.cuda_source)
            rows.append({"kernel": label(gcfg), "cubin_bytes": len(cubin)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def check(torch, c, a, b, offs_list, k: int) -> tuple[bool, float]:
    """Every element of every group within the bound of its fp32 product, every other row
    untouched (NaN); returns (ok, worst error over bound)."""
    worst, ok, start = 0.0, True, 0
    for g, end in enumerate(offs_list):
        if end > start:
            a32, b32 = a[start:end].float(), b[g].float()
            ref = a32 @ b32.T
            bound = error_bound(ref, a32.abs() @ b32.abs().T, k, "bfloat16")
            err = (c[start:end].float() - ref).abs()
            ok = ok and bool(torch.all(err <= bound))  # NaN compares False: not written
            worst = max(worst, float((err / bound).nan_to_num(float("inf")).max()))
        start = end
    if start < c.shape[0]:
        ok = ok and bool(torch.all(torch.isnan(c[start:])))
    return ok, worst


def time_plain(torch, tvm, problem, a, b, timing: dict) -> dict:
    """``--against-plain``: the problem's rows as one plain GEMM against B[0], ours (every
    element checked, as one group of all the rows) and ``torch.matmul``, in ms."""
    _, m, n, k = problem
    device = tvm.cuda(0)
    cfg = plain_config(problem)
    kernel = compile_kernel(gemm_kernel(cfg)).executable["main"]
    b0 = b[0].contiguous()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    args = [tvm.runtime.from_dlpack(t) for t in (a, b0, c)] + gemm_workspace(cfg, device)
    kernel(*args)
    device.sync()
    ok, _ = check(torch, c, a, b0[None], [m], k)
    out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    launches, repetitions = timing["launches"], timing["repetitions"]
    ms = back_to_back(torch, lambda: kernel(*args), launches, repetitions, 3, HEAT_MS)
    device.sync()
    ok_after, _ = check(torch, c, a, b0[None], [m], k)
    cublas_ms = back_to_back(torch, lambda: torch.matmul(a, b0.T, out=out), launches,
                             repetitions, 3, HEAT_MS)
    return {"plain_tile": f"{cfg.block_m}x{cfg.block_n}", "plain_correct": ok and ok_after,
            "plain_ms": round(ms, 5), "cublas_plain_ms": round(cublas_ms, 5)}


def measure(problems, sweep: bool, timing: dict, dump: Path | None) -> list[dict]:
    import torch
    import tvm

    device = tvm.cuda(0)
    ctas = torch.cuda.get_device_properties(0).multi_processor_count
    launches, repetitions, runs = timing["launches"], timing["repetitions"], timing["runs"]
    rows = []
    for problem in problems:
        e, m, n, k = problem
        sizes = sizes_for(problem)
        offs_list = [int(x) for x in group_ends(sizes)]
        gen = torch.Generator(device="cuda").manual_seed(sum(problem))
        a = torch.randn((m, k), device="cuda", generator=gen).to(torch.bfloat16)
        b = torch.randn((e, n, k), device="cuda", generator=gen).to(torch.bfloat16)
        offs = torch.tensor(offs_list, device="cuda", dtype=torch.int32)
        flops = 2 * sum(sizes) * n * k
        # What the kernel must read: the groups' rows of A and the weights of every expert
        # that has rows (an empty group's B[g] is never read).
        read_bytes = 2 * (sum(sizes) * k + sum(1 for s in sizes if s) * n * k)

        def grouped_mm():
            return torch._grouped_mm(a, b.transpose(1, 2), offs=offs)

        out_loop = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)

        def matmul_loop():
            start = 0
            for g, end in enumerate(offs_list):
                torch.matmul(a[start:end], b[g].T, out=out_loop[start:end])
                start = end

        scratch = torch.empty_like(b)

        def copy():
            scratch.copy_(b)

        baselines = {"grouped_mm": grouped_mm, "matmul_loop": matmul_loop}
        base = {name: (back_to_back(torch, fn, launches, repetitions, 3, HEAT_MS),
                       per_launch_median(torch, fn, runs, 3)) for name, fn in baselines.items()}
        copy_ms = back_to_back(torch, copy, launches, repetitions, 3, HEAT_MS)
        copy_rate = 2 * b.numel() * 2 / copy_ms / 1e6  # bytes read + written, GB/s
        plain = time_plain(torch, tvm, problem, a, b, timing) if timing.get("against_plain") \
            else None
        for gcfg in configs_for(problem, sweep, ctas):
            built = compile_kernel(grouped_gemm_kernel(gcfg))
            if dump is not None:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / f"{label(gcfg)}.cu").write_text(built.cuda_source)
            kernel = built.executable["main"]
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            extra = [torch.from_numpy(x).cuda() for x in workspace(gcfg, ctas)]
            args = [tvm.runtime.from_dlpack(t) for t in (a, b, offs, c, *extra)]
            kernel(*args)
            device.sync()
            ok, worst = check(torch, c, a, b, offs_list, k)

            def launch(args=args):
                kernel(*args)

            ms = back_to_back(torch, launch, launches, repetitions, 3, HEAT_MS)
            median = per_launch_median(torch, launch, runs, 3)
            device.sync()
            ok_after, worst_after = check(torch, c, a, b, offs_list, k)
            check_workspace_left_clean(gcfg, extra[-1].cpu().numpy())
            cfg = gcfg.gemm
            row = {"problem": f"{e},{m},{n},{k}", "groups": sizes,
                   "schedule": cfg.schedule, "block_m": cfg.block_m, "block_n": cfg.block_n,
                   "block_k": cfg.block_k, "stages": cfg.stages,
                   "l2_promotion": cfg.l2_promotion, "stream_k": gcfg.stream_k,
                   "short_block_m": gcfg.short.block_m if gcfg.short is not None else None,
                   "short_taken": takes_short(gcfg, sizes), "cluster": cfg.cluster,
                   "correct": ok and ok_after,
                   "worst_error_over_bound": round(max(worst, worst_after), 4),
                   "ms": round(ms, 5), "median_ms": round(median, 5),
                   "tflops": round(flops / ms / 1e9, 1),
                   "read_gbps": round(read_bytes / ms / 1e6, 1),
                   "copy_gbps": round(copy_rate, 1),
                   "percent_of_copy_rate": round(100 * read_bytes / ms / 1e6 / copy_rate, 1)}
            for name, (base_ms, base_median) in base.items():
                row.update({f"{name}_ms": round(base_ms, 5),
                            f"{name}_median_ms": round(base_median, 5),
                            f"{name}_tflops": round(flops / base_ms / 1e9, 1),
                            f"percent_of_{name}": round(100 * base_ms / ms, 1)})
            if plain is not None:
                # The plain GEMM's rows are all M rows (the groups' may stop short of M).
                row.update(plain)
                row["correct"] = row["correct"] and plain["plain_correct"]
                row["percent_of_plain"] = round(100 * plain["plain_ms"] / ms, 1)
                row["percent_of_cublas_plain"] = round(100 * plain["cublas_plain_ms"] / ms, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", type=parse_problem, action="append",
                        help="E,M,N,K (repeatable; default: the four MoE problems)")
    parser.add_argument("--compile-only", action="store_true",
                        help="build and assemble every kernel for sm_90a, no GPU")
    parser.add_argument("--dump-cuda", type=Path, help="write each kernel's CUDA source here")
    parser.add_argument("--json", action="store_true", help="print all rows as one JSON list")
    parser.add_argument("--sweep", action="store_true", help="time several tilings")
    parser.add_argument("--against-plain", action="store_true",
                        help="also time the rows as one plain GEMM against B[0] (ours, cuBLAS)")
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    problems = args.problem or DEFAULT_PROBLEMS
    if args.compile_only:
        rows = compile_only(problems, args.sweep, args.dump_cuda, args.against_plain)
    else:
        timing = dict(launches=args.launches, repetitions=args.repetitions, runs=args.runs,
                      against_plain=args.against_plain)
        rows = measure(problems, args.sweep, timing, args.dump_cuda)
    if args.json:
        print(json.dumps(rows))
    return 0 if all(row.get("correct", True) for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
