"""The warp-specialized WGMMA GEMM of examples/gemm_hopper.py against ``torch.matmul``.

Every problem is first checked against torch (fp32 reference, relative error bound below),
then both are timed in the same run: median of ``--runs`` launches, each with its own pair
of CUDA events. ``--compile-only`` builds and assembles every kernel for sm_90a (no GPU);
``--sweep`` times tile width, stage count and tile-group size per problem.

Correctness bound (``gemm_hopper.error_bound``): C is rounded to bf16/fp16 from an fp32
accumulation of K products, so each element may differ from the fp32 reference by its own
rounding (2^-8 relative for bf16, 2^-11 for fp16) plus the difference between two fp32
summation orders, at most about K * 2^-24 of the sum of |products|. The check is
``|C - ref| <= 2 * eps_out * |ref| + 2 * K * 2^-24 * (|A| @ |B|) + 1e-6`` for every element.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import tvm

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.testing.runner import assemble, compile_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from copy_bandwidth import time_launches  # noqa: E402
from gemm_hopper import OUTPUT_EPS, GemmConfig, error_bound, gemm_kernel  # noqa: E402

#: (M, N, K) of the issue: square, LLM projections, and a ragged one.
PROBLEMS = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096),
            (4096, 4096, 14336), (8192, 1024, 8192), (1000, 2000, 3000)]


def configs_for(m: int, n: int, k: int, dtype: str, b_layout: str, sweep: bool,
                ctas: int) -> list[GemmConfig]:
    """The default configuration, or (``sweep``) the grid around it."""
    base = GemmConfig.for_problem(m, n, k, dtype=dtype, b_layout=b_layout, ctas=ctas)
    if not sweep:
        return [base]
    found = []
    for block_n, stages, epilogue_n in ((256, 3, 0), (256, 4, 128), (256, 4, 64),
                                        (128, 4, 0), (128, 6, 0), (128, 7, 64)):
        for group_m in (4, 8, 16):
            cfg = replace(base, block_n=block_n, stages=stages, group_m=group_m,
                          epilogue_n=epilogue_n)
            try:
                cfg.check()
            except ValueError:
                continue
            found.append(cfg)
    return found


def check(torch, c, reference, magnitude, k: int, dtype: str) -> tuple[bool, float]:
    """Every element inside ``error_bound``; returns (ok, worst error / bound)."""
    bound = error_bound(reference, magnitude, k, dtype)
    ratio = ((c.float() - reference).abs() / bound).max().item()
    return bool(torch.isfinite(c.float()).all().item()) and ratio <= 1.0, ratio


def measure(problems, dtype: str, b_layout: str, sweep: bool, runs: int) -> list[dict]:
    import torch

    device = tvm.cuda(0)
    ctas = torch.cuda.get_device_properties(0).multi_processor_count
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    rows = []
    for m, n, k in problems:
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn(m, k, device="cuda", dtype=torch_dtype, generator=gen)
        b = torch.randn(*((n, k) if b_layout == "nk" else (k, n)), device="cuda",
                        dtype=torch_dtype, generator=gen)
        b_kn = b.t() if b_layout == "nk" else b
        reference = a.float() @ b_kn.float()
        magnitude = a.float().abs() @ b_kn.float().abs()
        torch_ms = time_launches(torch, lambda a=a, b_kn=b_kn: torch.matmul(a, b_kn), runs, 5)
        flops = 2 * m * n * k
        for cfg in configs_for(m, n, k, dtype, b_layout, sweep, ctas):
            executable = compile_kernel(gemm_kernel(cfg)).executable["main"]
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch_dtype)
            args = [tvm.runtime.from_dlpack(t) for t in (a, b, c)]
            executable(*args)
            device.sync()
            ok, worst = check(torch, c, reference, magnitude, k, dtype)
            ms = time_launches(torch, lambda args=args: executable(*args), runs, 5)
            rows.append({
                "problem": f"{m}x{n}x{k}", "dtype": dtype, "b": b_layout,
                "block_n": cfg.block_n, "stages": cfg.stages, "group_m": cfg.group_m,
                "epilogue_n": cfg.epilogue_cols,
                "correct": ok, "worst_error_over_bound": round(worst, 4),
                "ms": round(ms, 4), "tflops": round(flops / ms / 1e9, 1),
                "torch_ms": round(torch_ms, 4),
                "torch_tflops": round(flops / torch_ms / 1e9, 1),
                "percent_of_torch": round(100 * torch_ms / ms, 1),
            })
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(OUTPUT_EPS))
    parser.add_argument("--b-layout", default="nk", choices=("nk", "kn"))
    parser.add_argument("--problem", action="append", default=[],
                        help="MxNxK (repeatable); default: the six of the issue")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    problems = ([tuple(int(x) for x in p.split("x")) for p in args.problem]
                or PROBLEMS)
    if args.compile_only:
        count = 0
        for m, n, k in problems:
            for dtype in sorted(OUTPUT_EPS):
                for b_layout in ("nk", "kn"):
                    for cfg in configs_for(m, n, k, dtype, b_layout, args.sweep, 132):
                        cubin = assemble(compile_kernel(gemm_kernel(cfg)).cuda_source)
                        count += 1
                        print(f"{m}x{n}x{k} {dtype} {b_layout} block_n={cfg.block_n} "
                              f"stages={cfg.stages}: {len(cubin)} bytes of sm_90a cubin")
        print(f"{count} kernels assembled")
        return 0
    rows = measure(problems, args.dtype, args.b_layout, args.sweep, args.runs)
    print(f"{'problem':16} {'B':3} {'BN':>4} {'st':>3} {'grp':>4} {'ok':5} {'TFLOP/s':>8} "
          f"{'torch':>8} {'% torch':>8}")
    for row in rows:
        print(f"{row['problem']:16} {row['b']:3} {row['block_n']:4} {row['stages']:3} "
              f"{row['group_m']:4} {row['correct']!s:5} {row['tflops']:8.1f} "
              f"{row['torch_tflops']:8.1f} {row['percent_of_torch']:8.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(row["correct"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
