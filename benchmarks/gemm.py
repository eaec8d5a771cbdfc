"""The warp-specialized WGMMA GEMM of tvm_tma.kernels.gemm against ``torch.matmul``.

Every problem is first checked against torch (fp32 reference, relative error bound below),
then both are timed in the same run: ``--launches`` back-to-back launches between two CUDA
events, best of ``--repetitions`` (what the ratio is taken from), and beside it the median
of ``--runs`` launches each timed with its own pair of events. The output is checked again
after the timed launches. ``--compile-only`` builds and assembles every kernel for sm_90a (no GPU);
``--sweep`` times tilings, ping-pong against cooperative warpgroups, 2x1 clusters with B
multicast, and split-K per problem; ``--schedule``, ``--cluster`` and ``--split-k`` set
them for the default tiling.

Correctness bound (``tvm_tma.kernels.reference.error_bound``): C is rounded to bf16/fp16
from an fp32 accumulation of K products, so each element may differ from the fp32
reference by its own rounding (2^-8 relative for bf16, 2^-11 for fp16) plus the difference
between two fp32 summation orders, at most about K * 2^-24 of the sum of |products|. The
check is
``|C - ref| <= 2 * eps_out * |ref| + 2 * K * 2^-24 * (|A| @ |B|) + 1e-6`` for every element.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import tvm

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.kernels.reference import OUTPUT_EPS, error_bound
from tvm_tma.kernels.stream_k import check_workspace_left_clean, workspace
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.timing import back_to_back, per_launch_median

# The timing helper of the sibling benchmark (this directory is not a package).

#: (M, N, K) of the issue: square, LLM projections, and a ragged one.
PROBLEMS = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096),
            (4096, 4096, 14336), (8192, 1024, 8192), (1000, 2000, 3000)]


#: The sweep's tilings: (schedule, block_m, block_n, stages, epilogue_n). Cooperative
#: warpgroups share a 128-row tile; ping-pong ones each take whole tiles in turns.
SWEEP_TILINGS = [("cooperative", 128, 256, 4, 128), ("cooperative", 128, 256, 3, 0),
                 ("cooperative", 128, 128, 6, 0), ("pingpong", 128, 128, 6, 64),
                 ("pingpong", 128, 128, 5, 128), ("pingpong", 64, 256, 4, 128)]


def configs_for(m: int, n: int, k: int, dtype: str, b_layout: str, sweep: bool,
                ctas: int, **options) -> list[GemmConfig]:
    """The default configuration, or (``sweep``) the grid around it: tiling and schedule,
    cluster 1 or 2 (B multicast), and split-K 2 where the tiles alone leave SMs idle."""
    base = GemmConfig.for_problem(m, n, k, dtype=dtype, b_layout=b_layout, ctas=ctas,
                                  **options)
    if not sweep:
        return [base]
    found = []
    for schedule, block_m, block_n, stages, epilogue_n in SWEEP_TILINGS:
        for cluster in (1, 2):
            tiling = replace(base, schedule=schedule, block_m=block_m, block_n=block_n,
                             stages=stages, epilogue_n=epilogue_n, cluster=cluster)
            splits = (1, 2) if tiling.num_tiles < 2 * ctas else (1,)
            for split_k in splits:
                cfg = replace(tiling, split_k=split_k)
                try:
                    cfg.check()
                except ValueError:
                    continue
                found.append(cfg)
        if schedule == "cooperative" and block_m == 128:
            # Stream-K: the same tiles, every CTA an equal run of K steps.
            streamed = replace(base, schedule=schedule, block_m=block_m, block_n=block_n,
                               stages=stages, epilogue_n=epilogue_n, cluster=1, split_k=1,
                               stream_k=True)
            try:
                streamed.check()
            except ValueError:
                continue
            found.append(streamed)
    return found


def check(torch, c, a, b_kn, reference, magnitude, cfg: GemmConfig) -> tuple[bool, float]:
    """Every element inside ``error_bound``; returns (ok, worst error / bound). A split-K
    launch adds its K parts into a C of zeros."""
    if cfg.split_k == 1:
        bound = error_bound(reference, magnitude, cfg.k, cfg.dtype)
    else:
        width = cfg.steps_per_unit * cfg.block_k
        parts = sum((a[:, k0:k0 + width].float() @ b_kn[k0:k0 + width].float()).abs()
                    for k0 in range(0, cfg.k, width))
        bound = error_bound(reference, magnitude, cfg.k, cfg.dtype, cfg.split_k, parts,
                            torch.zeros_like(reference))
    ratio = ((c.float() - reference).abs() / bound).max().item()
    return bool(torch.isfinite(c.float()).all().item()) and ratio <= 1.0, ratio


def measure(problems, dtype: str, b_layout: str, sweep: bool, timing: dict,
            dump: Path | None, **options) -> list[dict]:
    import torch

    device = tvm.cuda(0)
    ctas = options.pop("ctas", None) or torch.cuda.get_device_properties(0).multi_processor_count
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    launches, repetitions, runs = timing["launches"], timing["repetitions"], timing["runs"]
    rows = []
    for m, n, k in problems:
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn(m, k, device="cuda", dtype=torch_dtype, generator=gen)
        b = torch.randn(*((n, k) if b_layout == "nk" else (k, n)), device="cuda",
                        dtype=torch_dtype, generator=gen)
        b_kn = b.t() if b_layout == "nk" else b
        reference = a.float() @ b_kn.float()
        magnitude = a.float().abs() @ b_kn.float().abs()

        def matmul(a=a, b_kn=b_kn):
            return torch.matmul(a, b_kn)

        torch_ms = back_to_back(torch, matmul, launches, repetitions, 5)
        torch_median = per_launch_median(torch, matmul, runs, 5)
        flops = 2 * m * n * k
        for cfg in configs_for(m, n, k, dtype, b_layout, sweep, ctas, **options):
            built = compile_kernel(gemm_kernel(cfg))
            if dump is not None:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / f"{kernel_label(m, n, k, cfg)}.cu").write_text(built.cuda_source)
            executable = built.executable["main"]
            # Split-K adds into C: it starts at zero, and every timed launch zeroes it
            # first (the memset is part of the time). Otherwise C starts as NaN poison.
            fill = 0.0 if cfg.split_k > 1 else float("nan")
            c = torch.full((m, n), fill, device="cuda", dtype=torch_dtype)
            args = [tvm.runtime.from_dlpack(t) for t in (a, b, c)] + workspace(cfg, device)
            executable(*args)
            device.sync()
            ok, worst = check(torch, c, a, b_kn, reference, magnitude, cfg)

            def launch(args=args, c=c, split=cfg.split_k > 1):
                if split:
                    c.zero_()
                executable(*args)

            ms = back_to_back(torch, launch, launches, repetitions, 5)
            median = per_launch_median(torch, launch, runs, 5)
            # C again after the timed launches (stream-K reuses its workspace), and the
            # workspace's flags left clean.
            device.sync()
            ok_after, worst_after = check(torch, c, a, b_kn, reference, magnitude, cfg)
            check_workspace_left_clean(cfg, args[3:])
            rows.append({
                "problem": f"{m}x{n}x{k}", "dtype": dtype, "b": b_layout,
                "schedule": cfg.schedule, "block_m": cfg.block_m, "block_n": cfg.block_n,
                "stages": cfg.stages, "group_m": cfg.group_m,
                "epilogue_n": cfg.epilogue_cols, "cluster": cfg.cluster,
                "split_k": cfg.split_k, "stream_k": cfg.stream_k, "tiles": cfg.num_tiles,
                "correct": ok and ok_after,
                "worst_error_over_bound": round(max(worst, worst_after), 4),
                "ms": round(ms, 5), "median_ms": round(median, 5),
                "tflops": round(flops / ms / 1e9, 1),
                "median_tflops": round(flops / median / 1e9, 1),
                "torch_ms": round(torch_ms, 5), "torch_median_ms": round(torch_median, 5),
                "torch_tflops": round(flops / torch_ms / 1e9, 1),
                "percent_of_torch": round(100 * torch_ms / ms, 1),
            })
            print(json.dumps(rows[-1]), flush=True)
    return rows


def kernel_label(m: int, n: int, k: int, cfg: GemmConfig) -> str:
    return (f"{m}x{n}x{k}-{cfg.dtype}-{cfg.b_layout}-{cfg.schedule}-{cfg.block_m}x"
            f"{cfg.block_n}-s{cfg.stages}-x{cfg.cluster}-k{cfg.split_k}"
            f"{'-sk' if cfg.stream_k else ''}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--runs", type=int, default=50,
                        help="launches timed one by one (median)")
    parser.add_argument("--launches", type=int, default=20,
                        help="back-to-back launches between two events")
    parser.add_argument("--repetitions", type=int, default=7,
                        help="runs of --launches; the best is reported")
    parser.add_argument("--dump-cuda", type=Path, metavar="DIR")
    parser.add_argument("--dtype", default="bfloat16", choices=sorted(OUTPUT_EPS))
    parser.add_argument("--b-layout", default="nk", choices=("nk", "kn"))
    parser.add_argument("--problem", action="append", default=[],
                        help="MxNxK (repeatable); default: the six of the issue")
    parser.add_argument("--schedule", choices=("cooperative", "pingpong"))
    parser.add_argument("--block-m", type=int, choices=(64, 128))
    parser.add_argument("--block-n", type=int)
    parser.add_argument("--stages", type=int)
    parser.add_argument("--epilogue-n", type=int)
    parser.add_argument("--cluster", type=int, choices=(1, 2))
    parser.add_argument("--split-k", type=int)
    parser.add_argument("--stream-k", action="store_true", default=None,
                        help="every CTA an equal run of the problem's K steps")
    parser.add_argument("--ctas", type=int, help="persistent CTAs (default: one per SM)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    options = {name: value for name, value in (("schedule", args.schedule),
                                                ("block_m", args.block_m),
                                                ("block_n", args.block_n),
                                                ("stages", args.stages),
                                                ("epilogue_n", args.epilogue_n),
                                                ("cluster", args.cluster),
                                                ("split_k", args.split_k),
                                                ("stream_k", args.stream_k),
                                                ("ctas", args.ctas))
               if value is not None}
    problems = ([tuple(int(x) for x in p.split("x")) for p in args.problem]
                or PROBLEMS)
    if args.compile_only:
        count = 0
        for m, n, k in problems:
            for dtype in sorted(OUTPUT_EPS):
                for b_layout in ("nk", "kn"):
                    for cfg in configs_for(m, n, k, dtype, b_layout, args.sweep,
                                           **{"ctas": 132, **options}):
                        source = compile_kernel(gemm_kernel(cfg)).cuda_source
                        if args.dump_cuda is not None:
                            args.dump_cuda.mkdir(parents=True, exist_ok=True)
                            (args.dump_cuda / f"{kernel_label(m, n, k, cfg)}.cu").write_text(
                                source)
                        cubin = assemble(source)
                        count += 1
                        print(f"{m}x{n}x{k} {dtype} {b_layout} {cfg.schedule} "
                              f"{cfg.block_m}x{cfg.block_n} stages={cfg.stages} "
                              f"cluster={cfg.cluster} split_k={cfg.split_k} "
                              f"stream_k={cfg.stream_k}: "
                              f"{len(cubin)} bytes of sm_90a cubin")
        print(f"{count} kernels assembled")
        return 0
    timing = {"launches": args.launches, "repetitions": args.repetitions, "runs": args.runs}
    rows = measure(problems, args.dtype, args.b_layout, args.sweep, timing, args.dump_cuda,
                   **options)
    print(f"{'problem':16} {'B':3} {'schedule':11} {'tile':>7} {'st':>3} {'x':>2} "
          f"{'split':>5} {'ok':5} {'TFLOP/s':>8} {'median':>8} {'torch':>8} {'% torch':>8}")
    for row in rows:
        tile = f"{row['block_m']}x{row['block_n']}"
        split = "sk" if row["stream_k"] else str(row["split_k"])
        print(f"{row['problem']:16} {row['b']:3} {row['schedule']:11} {tile:>7} "
              f"{row['stages']:3} {row['cluster']:2} {split:>5} "
              f"{row['correct']!s:5} {row['tflops']:8.1f} {row['median_tflops']:8.1f} "
              f"{row['torch_tflops']:8.1f} {row['percent_of_torch']:8.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(row["correct"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
