"""The warp-specialized WGMMA GEMM of tvm_tma.kernels.gemm against ``torch.matmul`` (bf16,
fp16) or ``torch._scaled_mm`` (FP8).

Every problem is first checked against torch (fp32 reference, relative error bound below),
then both are timed in the same run: replays of a CUDA graph of ``--launches`` back-to-back
launches between two CUDA events, best of ``--repetitions`` (what the ratio is taken from:
the kernels with no host in between, so a baseline slower to launch than to run is not
charged its launch; each side first replayed for ``--heat-ms``, so that both are timed
at the clock the power cap settles to whichever ran before: RESULTS.md 6z13), the same
launched from the host (``host_launched_ms``, the ratio before the nineteenth session),
and the median of ``--runs`` launches each timed with its own pair of events. The output
is checked again after the timed launches. ``--compile-only`` builds and assembles every
kernel for sm_90a (no GPU); ``--sweep`` times tilings, ping-pong against cooperative
warpgroups, 2x1 clusters with B multicast, and split-K per problem; ``--schedule``,
``--cluster`` and ``--split-k`` set them for the default tiling.

Correctness bound (``tvm_tma.kernels.reference.error_bound``): C is rounded to bf16/fp16
from an fp32 accumulation of K products, so each element may differ from the fp32
reference by its own rounding (2^-8 relative for bf16, 2^-11 for fp16) plus the difference
between two fp32 summation orders, at most about K * 2^-24 of the sum of |products|. The
check is
``|C - ref| <= 2 * eps_out * |ref| + 2 * K * 2^-24 * (|A| @ |B|) + 1e-6`` for every element.

FP8 (``--dtype float8_e4m3fn`` or ``float8_e5m2``, B as N x K; ``--b-dtype`` for a mix):
A and B are a standard normal rounded to the FP8 types, the per-tensor scales random in
[0.5, 2), C bf16 ``scale_a * scale_b * (A @ B^T)``. The bound
(``tvm_tma.kernels.reference.fp8_error_bound``) adds to the bf16 terms the scales'
roundings and the tensor core's accumulation term
(``tvm_tma.kernels.fp8_reference.accumulation_terms``: Hopper's FP8 wgmma keeps 13
fraction bits per k32 instruction, not fp32's 23). The baseline is
``torch._scaled_mm(A, B.t(), scale_a, scale_b, out_dtype=torch.bfloat16)`` as called by
default (``use_fast_accum=False``: cuBLAS adds the tensor core's partial sums in fp32 on the
CUDA cores) and with ``use_fast_accum=True`` (accumulating in the tensor core, as this
kernel does), both timed in the same run. torch refuses e5m2 x e5m2: there the baseline is
e5m2 x e4m3 (B converted), and the row says so (``torch_pairing``). ``torch._scaled_mm``
also needs N and K multiples of 16; a problem it refuses gets no baseline (``torch_note``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import tvm

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.kernels.fp8_reference import accumulation_terms
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import (
    BLOCK_MS,
    DTYPES_16,
    FP8_BLOCK_K,
    FP8_DTYPES,
    K_BLOCKS,
    GemmConfig,
)
from tvm_tma.kernels.reference import error_bound, fp8_error_bound
from tvm_tma.kernels.residency import resident_ctas
from tvm_tma.kernels.stream_k import check_workspace_left_clean, workspace
from tvm_tma.kernels.tiling import (
    busy_share,
    estimate,
    exact_wave,
    few_columns_tiling,
    in_tail_parts,
    modelled,
    ranked,
    refinements,
    swapped,
)
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.timing import HEAT_MS, kernel_times

# The timing helper of the sibling benchmark (this directory is not a package).

#: (M, N, K) of the issue: square, LLM projections, and a ragged one.
PROBLEMS = [(8192, 8192, 8192), (4096, 4096, 4096), (4096, 14336, 4096),
            (4096, 4096, 14336), (8192, 1024, 8192), (1000, 2000, 3000)]
#: The same for FP8, whose K must be a multiple of 16 (torch._scaled_mm's N too): the
#: ragged problem's K is 3008 (23.5 K blocks of 128).
FP8_PROBLEMS = [*PROBLEMS[:-1], (1000, 2000, 3008)]


#: The sweep's tilings: (schedule, block_m, block_n, stages, epilogue_n, epilogue_buffers),
#: the model's among them (128 x 160: C in 32-column 64B-swizzled stages; 192-row tiles of
#: three warpgroups; 128 x 320 as two MMAs a k16 step, with two C stages; ping-pong 64 x
#: 256 with 5 stages: tiling.on_wide_half_rows). Cooperative warpgroups share a tile (a
#: 64-row one is one warpgroup's: tiling.on_half_rows); ping-pong ones each take whole
#: tiles in turns.
SWEEP_TILINGS = [("cooperative", 128, 320, 3, 64, 2), ("cooperative", 128, 256, 4, 128, 1),
                 ("cooperative", 128, 256, 3, 0, 1), ("cooperative", 128, 192, 5, 64, 1),
                 ("cooperative", 128, 160, 6, 32, 1), ("cooperative", 128, 128, 6, 0, 1),
                 ("cooperative", 192, 192, 4, 64, 1), ("cooperative", 192, 160, 4, 32, 1),
                 ("cooperative", 192, 128, 5, 64, 1), ("cooperative", 64, 128, 9, 64, 1),
                 ("pingpong", 128, 128, 6, 64, 1), ("pingpong", 128, 128, 5, 128, 1),
                 ("pingpong", 64, 256, 4, 128, 1), ("pingpong", 64, 256, 5, 64, 1),
                 ("cooperative", 64, 256, 5, 128, 1)]
#: The sweep's cluster shapes (CTAs along M, along N): 2x2 and 1x4 clusters run on the CTAs
#: the GPU keeps resident in clusters of 4 (kernels/residency.py: 120 of 132 SMs).
SWEEP_CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2), (1, 4))


def configs_for(m: int, n: int, k: int, dtype: str, b_layout: str, sweep: bool,
                ctas: int, **options) -> list[GemmConfig]:
    """The default configuration, or (``sweep``) the grid around it: tiling and schedule,
    no cluster, 2x1 clusters (B multicast), 1x2 ones (A multicast), 2x2 ones (both) or 1x4
    ones (A shared by four; these two on the CTAs clusters of 4 keep resident) where there
    are row or column blocks to pair,
    split-K 2 where the tiles alone leave SMs idle, stream-K, the tiles past the last
    full wave in ordered parts (``tail_split``), and one wave of tiles dividing N exactly
    (``tiling.exact_wave``). FP8 tiles
    have the same bytes as 16-bit ones (K blocks of 128), so the grid is the same."""
    base = GemmConfig.for_problem(m, n, k, dtype=dtype, b_layout=b_layout, ctas=ctas,
                                  **options)
    if not sweep:
        return [base]
    # The grid's tiles are A @ B^T's; C^T = B A^T's (tiling.swapped) joins them below.
    base = replace(base, swap_ab=False)
    found = []
    for schedule, block_m, block_n, stages, epilogue_n, buffers in SWEEP_TILINGS:
        for cluster, cluster_n in SWEEP_CLUSTERS:
            grid = resident_ctas(ctas, cluster * cluster_n)
            if grid is None:
                continue
            tiling = replace(base, schedule=schedule, block_m=block_m, block_n=block_n,
                             stages=stages, epilogue_n=epilogue_n, epilogue_buffers=buffers,
                             cluster=cluster, cluster_n=cluster_n, ctas=grid,
                             stream_k=False, stream_k_waves=1, tail_split=1)
            if tiling.cluster > tiling.m_blocks or tiling.cluster_n > tiling.n_blocks:
                continue  # a CTA of every cluster would hold padding only
            splits = (1, 2) if tiling.num_tiles < 2 * ctas else (1,)
            for split_k in splits:
                # Split-K both ways: adding into a zeroed C, and ordered (C = A @ B).
                for ordered in (False, True) if split_k > 1 else (False,):
                    cfg = replace(tiling, split_k=split_k, split_k_ordered=ordered)
                    try:
                        cfg.check()
                    except ValueError:
                        continue
                    found.append(cfg)
        if schedule == "cooperative" and block_m == 128:
            # Stream-K: the same tiles, every CTA an equal run of K steps (sharing the
            # partial wave, or the last full wave too).
            for waves in (1, 2):
                streamed = replace(base, schedule=schedule, block_m=block_m,
                                   block_n=block_n, stages=stages, epilogue_n=epilogue_n,
                                   epilogue_buffers=buffers, cluster=1, cluster_n=1,
                                   ctas=ctas, split_k=1, stream_k=True,
                                   stream_k_waves=waves, tail_split=1)
                try:
                    streamed.check()
                except ValueError:
                    continue
                if streamed not in found:
                    found.append(streamed)
            # The tiles past the last full wave in ordered K parts (the model's count).
            for cluster in (1, 2):
                tail = in_tail_parts(replace(base, schedule=schedule, block_m=block_m,
                                             block_n=block_n, stages=stages,
                                             epilogue_n=epilogue_n,
                                             epilogue_buffers=buffers, cluster=cluster,
                                             cluster_n=1, ctas=ctas, split_k=1,
                                             split_k_ordered=False,
                                             stream_k=False, stream_k_waves=1, tail_split=1))
                if tail is not None and tail not in found:
                    try:
                        tail.check()
                    except ValueError:
                        continue
                    found.append(tail)
    # One wave of tiles dividing N exactly (tiling.in_one_exact_wave), past the rule's
    # bounds too (its K steps, rows and operands are what was measured).
    wave = exact_wave(replace(base, ctas=ctas))
    if wave is not None and wave not in found:
        found.append(wave)
    # C^T = B A^T on tiles of M rounded up to 8 (tiling.swapped: None where the kernel
    # runs none), the default's own where it swapped.
    flipped = swapped(replace(base, ctas=ctas))
    if flipped is not None and flipped not in found:
        found.append(flipped)
    # C^T = B A^T on 64-row blocks of N filling the rounds (tiling.few_columns_tiling).
    few = few_columns_tiling(replace(base, ctas=ctas))
    if few is not None and few not in found:
        found.append(few)
    # C^T = B A^T on M in two column blocks, each row block's pair sharing B in a 1x2
    # cluster: what cuBLAS runs on problems of 65 to 512 rows (RESULTS.md 6z17).
    for pair_rows in SWAPPED_PAIR_ROWS:
        pairs = swapped_pairs(m, n, k, pair_rows, dtype=dtype, b_layout=b_layout, ctas=ctas)
        if pairs is not None and pairs not in found:
            found.append(pairs)
    return found


#: :func:`swapped_pairs`: the swapped tiles' rows of B (N) it builds, two or three
#: consumer warpgroups of 64.
SWAPPED_PAIR_ROWS = (128, 192)


def swapped_pairs(m: int, n: int, k: int, block_m: int, **options) -> GemmConfig | None:
    """``C^T = B A^T`` on ``block_m`` x ceil8(M / 2) tiles, the two column blocks of each
    row block of B in a 1x2 cluster sharing its B tile (multicast), no K split, the
    model's ring and C stage (its C stage the whole tile where the model's does not
    divide it): the shape of cuBLAS's kernels on 153 x 8288 x 1608 (128 x 80, 1x2) and
    134 x 8456 x 3208 (192 x 72), RESULTS.md 6z17. None outside 65 to 512 rows, or where
    the kernel runs no such tiling (16-bit inputs, B as N x K)."""
    if not 64 < m <= 512:
        return None
    pair = {"swap_ab": True, "block_m": block_m, "block_n": (m + 15) // 16 * 8,
            "cluster": 1, "cluster_n": 2, "schedule": "cooperative", "split_k": 1}
    for stage in ({}, {"epilogue_n": pair["block_n"]}):
        try:
            cfg = GemmConfig.for_problem(m, n, k, **options, **pair, **stage)
            cfg.check()
        except ValueError:
            continue
        return cfg
    return None


class Operands:
    """One problem's kernel inputs and what its output must be, on the GPU. (A plain
    class: the tests load this script without registering it as a module, which a
    dataclass's annotations need.)"""

    def __init__(self, a, b, extra: list, out_dtype, reference, magnitude,
                 part_magnitude: Callable[[list], object], accumulation=None) -> None:
        self.a, self.b = a, b
        #: Kernel arguments after C (the FP8 scales), as TVM tensors.
        self.extra = extra
        #: C's torch dtype.
        self.out_dtype = out_dtype
        #: fp32 reference and ``|A| @ |B|`` (FP8: times the scales' product).
        self.reference, self.magnitude = reference, magnitude
        #: ``bounds -> sum_p |A_p @ B_p|`` over the K parts' column ranges
        #: (``GemmConfig.part_bounds``: split-K's bound).
        self.part_magnitude = part_magnitude
        #: FP8: the tensor core's accumulation term, scaled (None for 16-bit inputs).
        self.accumulation = accumulation
        #: Baselines timed beside the kernel: name -> launch.
        self.baselines: dict[str, Callable[[], object]] = {}
        #: What the baselines are where that differs from the problem, or why none ran.
        self.notes: dict[str, str] = {}


def to_tvm(torch, tensor):
    """A TVM tensor sharing ``tensor``'s memory. FP8 goes through a uint8 view (DLPack
    export of float8 is not in every torch) re-typed on the TVM side."""
    fp8 = {torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2"}
    if tensor.dtype in fp8:
        raw = tvm.runtime.from_dlpack(tensor.view(torch.uint8))
        return raw._create_view(tuple(tensor.shape), fp8[tensor.dtype])
    return tvm.runtime.from_dlpack(tensor)


def sixteen_bit_operands(torch, m: int, n: int, k: int, dtype: str, b_layout: str,
                         gen) -> Operands:
    """Standard normal A and B and ``torch.matmul`` as the baseline."""
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    a = torch.randn(m, k, device="cuda", dtype=torch_dtype, generator=gen)
    b = torch.randn(*((n, k) if b_layout == "nk" else (k, n)), device="cuda",
                    dtype=torch_dtype, generator=gen)
    b_kn = b.t() if b_layout == "nk" else b

    def parts(bounds: list):
        return sum((a[:, k0:k1].float() @ b_kn[k0:k1].float()).abs() for k0, k1 in bounds)

    operands = Operands(a, b, [], torch_dtype, a.float() @ b_kn.float(),
                        a.float().abs() @ b_kn.float().abs(), parts)
    operands.baselines["torch"] = lambda: torch.matmul(a, b_kn)
    return operands


def fp8_operands(torch, m: int, n: int, k: int, a_dtype: str, b_dtype: str,
                 gen) -> Operands:
    """A and B a standard normal rounded to the FP8 types, scales in [0.5, 2), and
    ``torch._scaled_mm`` as the baseline, by default and with ``use_fast_accum``."""
    a_type, b_type = getattr(torch, a_dtype), getattr(torch, b_dtype)
    a = torch.randn(m, k, device="cuda", generator=gen).to(a_type)
    b = torch.randn(n, k, device="cuda", generator=gen).to(b_type)
    scales = 0.5 + 1.5 * torch.rand(2, device="cuda", generator=gen)
    scale_a, scale_b = scales[0:1].clone(), scales[1:2].clone()
    scale = scale_a * scale_b  # fp32, as the kernel forms it
    a32, b_kn32 = a.float(), b.float().t()
    _, accumulation = accumulation_terms(a32, b_kn32)

    def parts(bounds: list):
        return scale * sum((a32[:, k0:k1] @ b_kn32[k0:k1]).abs() for k0, k1 in bounds)

    operands = Operands(a, b, [tvm.runtime.from_dlpack(t) for t in (scale_a, scale_b)],
                        torch.bfloat16, (a32 @ b_kn32) * scale,
                        (a32.abs() @ b_kn32.abs()) * scale, parts, scale * accumulation)
    # torch takes 0-d scales everywhere (views of the kernel's one-element ones).
    sa, sb = scale_a.reshape(()), scale_b.reshape(())

    def scaled_mm(b_torch, fast: bool):
        return torch._scaled_mm(a, b_torch.t(), scale_a=sa, scale_b=sb,
                                out_dtype=torch.bfloat16, use_fast_accum=fast)

    b_torch = b
    try:
        scaled_mm(b, False)
    except (RuntimeError, ValueError) as error:  # torch raises either, by version
        if a_dtype != "float8_e5m2" or b_dtype != "float8_e5m2":
            operands.notes["torch_note"] = f"torch._scaled_mm refused: {error}"
            return operands
        # cuBLASLt has no e5m2 x e5m2: time the nearest pairing torch takes.
        b_torch = b.float().to(torch.float8_e4m3fn)
        operands.notes["torch_pairing"] = (
            f"float8_e5m2 x float8_e4m3fn (torch._scaled_mm refused e5m2 x e5m2: "
            f"{str(error).splitlines()[0]})")
    operands.baselines = {"torch": lambda: scaled_mm(b_torch, False),
                          "torch_fast_accum": lambda: scaled_mm(b_torch, True)}
    return operands


def check(torch, c, operands: Operands, cfg: GemmConfig) -> tuple[bool, float]:
    """Every element inside ``error_bound`` (FP8: ``fp8_error_bound``); returns (ok, worst
    error / bound). A split-K launch adds its K parts into a C of zeros."""
    reference, magnitude = operands.reference, operands.magnitude
    split = {}
    if cfg.reduction_parts > 1:
        split = dict(split_k=cfg.reduction_parts,
                     parts=operands.part_magnitude(cfg.part_bounds()),
                     initial=torch.zeros_like(reference))
    if cfg.fp8:
        bound = fp8_error_bound(reference, magnitude, cfg.k, operands.accumulation, **split)
    else:
        bound = error_bound(reference, magnitude, cfg.k, cfg.dtype, **split)
    ratio = ((c.float() - reference).abs() / bound).max().item()
    return bool(torch.isfinite(c.float()).all().item()) and ratio <= 1.0, ratio


def measure(problems, dtype: str, b_layout: str, sweep: bool, timing: dict,
            dump: Path | None, b_dtype: str | None = None, **options) -> list[dict]:
    import torch

    device = tvm.cuda(0)
    ctas = options.pop("ctas", None) or torch.cuda.get_device_properties(0).multi_processor_count
    if dtype in FP8_DTYPES:
        options["b_dtype"] = b_dtype
    launches, repetitions, runs = timing["launches"], timing["repetitions"], timing["runs"]
    heat = timing.get("heat_ms", HEAT_MS)
    rows = []
    for m, n, k in problems:
        gen = torch.Generator(device="cuda").manual_seed(m + n + k)
        if dtype in FP8_DTYPES:
            operands = fp8_operands(torch, m, n, k, dtype, b_dtype or dtype, gen)
        else:
            operands = sixteen_bit_operands(torch, m, n, k, dtype, b_layout, gen)
        baseline_ms = {name: kernel_times(torch, launch, launches, repetitions, runs, 5,
                                            heat)
                       for name, launch in operands.baselines.items()}
        flops = 2 * m * n * k
        for cfg in configs_for(m, n, k, dtype, b_layout, sweep, ctas, **options):
            built = compile_kernel(gemm_kernel(cfg))
            if dump is not None:
                dump.mkdir(parents=True, exist_ok=True)
                (dump / f"{kernel_label(m, n, k, cfg)}.cu").write_text(built.cuda_source)
            executable = built.executable["main"]
            # Split-K adds into C: it starts at zero, and every timed launch zeroes it
            # first (the memset is part of the time). Otherwise (ordered split-K
            # included: its part 0 stores) C starts as NaN poison.
            adds = cfg.split_k > 1 and not cfg.split_k_ordered
            fill = 0.0 if adds else float("nan")
            c = torch.full((m, n), fill, device="cuda", dtype=operands.out_dtype)
            args = ([to_tvm(torch, t) for t in (operands.a, operands.b, c)]
                    + operands.extra + workspace(cfg, device))
            executable(*args)
            device.sync()
            ok, worst = check(torch, c, operands, cfg)

            def launch(args=args, c=c, split=adds):
                if split:
                    c.zero_()
                executable(*args)

            ms, host_ms, median = kernel_times(torch, launch, launches, repetitions, runs, 5,
                                               heat)
            # C again after the timed launches (stream-K reuses its workspace), and the
            # workspace's flags left clean.
            device.sync()
            ok_after, worst_after = check(torch, c, operands, cfg)
            check_workspace_left_clean(cfg, args[3 + len(operands.extra):])
            row = {
                "problem": f"{m}x{n}x{k}", "dtype": dtype, "b": b_layout, "heat_ms": heat,
                "schedule": cfg.schedule, "block_m": cfg.block_m, "block_n": cfg.block_n,
                "block_k": cfg.block_k, "stages": cfg.stages, "group_m": cfg.group_m,
                "epilogue_n": cfg.epilogue_cols, "cluster": cfg.cluster,
                "cluster_n": cfg.cluster_n,
                "split_k": cfg.split_k, "split_k_ordered": cfg.split_k_ordered,
                "stream_k": cfg.stream_k, "stream_k_waves": cfg.stream_k_waves,
                "tail_split": cfg.tail_split, "l2_promotion": cfg.l2_promotion,
                "swap_ab": cfg.swap_ab, "tiles": cfg.num_tiles,
                "model_cost": round(estimate(cfg).cost, 1),
                "correct": ok and ok_after,
                "worst_error_over_bound": round(max(worst, worst_after), 4),
                "ms": round(ms, 5), "host_launched_ms": round(host_ms, 5),
                "median_ms": round(median, 5),
                "tflops": round(flops / ms / 1e9, 1),
                "host_launched_tflops": round(flops / host_ms / 1e9, 1),
                "median_tflops": round(flops / median / 1e9, 1),
            }
            if cfg.fp8:
                row["b_dtype"] = cfg.input_dtypes[1]
            for name, (base_ms, base_host_ms, base_median) in baseline_ms.items():
                row.update({f"{name}_ms": round(base_ms, 5),
                            f"{name}_host_launched_ms": round(base_host_ms, 5),
                            f"{name}_median_ms": round(base_median, 5),
                            f"{name}_tflops": round(flops / base_ms / 1e9, 1),
                            f"percent_of_{name}": round(100 * base_ms / ms, 1),
                            f"percent_of_{name}_host_launched":
                                round(100 * base_host_ms / host_ms, 1)})
            row.update(operands.notes)
            rows.append(row)
            print(json.dumps(rows[-1]), flush=True)
    return rows


def kernel_label(m: int, n: int, k: int, cfg: GemmConfig) -> str:
    types = cfg.dtype if cfg.b_dtype in (None, cfg.dtype) else f"{cfg.dtype}x{cfg.b_dtype}"
    return (f"{m}x{n}x{k}-{types}-{cfg.b_layout}-{cfg.schedule}-{cfg.block_m}x"
            f"{cfg.block_n}x{cfg.block_k}-s{cfg.stages}-x{cfg.cluster}"
            f"{'' if cfg.cluster_n == 1 else f'x{cfg.cluster_n}'}-k{cfg.split_k}"
            f"{'o' if cfg.split_k_ordered else ''}"
            f"{'-sk' if cfg.stream_k else ''}"
            f"{f'-t{cfg.tail_split}' if cfg.tail_split > 1 else ''}"
            f"{'-swap' if cfg.swap_ab else ''}")


def explain(m: int, n: int, k: int, **options) -> None:
    """What ``GemmConfig.for_problem`` chose for one problem, the rules that changed the
    model's choice (``tiling.refinements``), and the model's estimate of every candidate (K
    steps of a 128 x 256 tile), cheapest first."""
    chosen = GemmConfig.for_problem(m, n, k, **options)
    print(f"{m}x{n}x{k}: {describe(chosen)}")
    if "block_k" not in options and chosen.block_k != GemmConfig(m, n, k, **{
            key: value for key, value in options.items() if key == "dtype"}).block_k:
        # The rules below ran on one K block of 16 or 32 (K fits it).
        print(f"  on K blocks of {chosen.block_k} (tiling.fitted_k_block)")
        options = {**options, "block_k": chosen.block_k}
    modelled_choice = modelled(GemmConfig, m, n, k, **options)
    for rule, refined in refinements(modelled_choice, options):
        print(f"  then tiling.{rule}: {describe(refined)}")
    for candidate in ranked(GemmConfig, m, n, k, **options):
        print(f"  {candidate.cost:9.1f}  {describe(candidate.config)}: {candidate.why}")


def describe(cfg: GemmConfig) -> str:
    return (f"{cfg.schedule} {cfg.block_m}x{cfg.block_n} block_k={cfg.block_k} "
            f"stages={cfg.stages} "
            f"cluster={cfg.cluster}x{cfg.cluster_n} split_k={cfg.split_k}"
            f"{' ordered' if cfg.split_k_ordered else ''} stream_k={cfg.stream_k}"
            f"{f' ({cfg.stream_k_waves} waves)' if cfg.stream_k else ''}"
            f"{f' tail_split={cfg.tail_split}' if cfg.tail_split > 1 else ''}"
            f"{' swap_ab (C^T = B A^T)' if cfg.swap_ab else ''}"
            f" busy={busy_share(cfg):.2f}")


def compile_only(problems, dtypes: list[tuple[str, str | None]], sweep: bool,
                 dump: Path | None, **options) -> int:
    """Build and assemble (sm_90a) every kernel a run of ``dtypes`` ((A, B) pairs, B None
    for A's type) would time, both B layouts for 16-bit inputs (FP8: B as N x K); returns
    how many."""
    count = 0
    for m, n, k in problems:
        for dtype, b_dtype in dtypes:
            fp8 = dtype in FP8_DTYPES
            for b_layout in ("nk",) if fp8 else ("nk", "kn"):
                extra = {"b_dtype": b_dtype} if fp8 else {}
                for cfg in configs_for(m, n, k, dtype, b_layout, sweep,
                                       **{"ctas": 132, **options, **extra}):
                    source = compile_kernel(gemm_kernel(cfg)).cuda_source
                    if dump is not None:
                        dump.mkdir(parents=True, exist_ok=True)
                        (dump / f"{kernel_label(m, n, k, cfg)}.cu").write_text(source)
                    cubin = assemble(source)
                    count += 1
                    types = "x".join(dict.fromkeys(cfg.input_dtypes))
                    print(f"{m}x{n}x{k} {types} {b_layout} {describe(cfg)}: "
                          f"{len(cubin)} bytes of sm_90a cubin")
    return count


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
    parser.add_argument("--heat-ms", type=float, default=HEAT_MS,
                        help="replays before the timed ones, each side (0: time from "
                             "whatever clock the GPU is at)")
    parser.add_argument("--dump-cuda", type=Path, metavar="DIR")
    parser.add_argument("--dtype", choices=(*DTYPES_16, *FP8_DTYPES),
                        help="input type (A's, and B's unless --b-dtype); default bfloat16 "
                             "(--compile-only: both 16-bit types)")
    parser.add_argument("--b-dtype", choices=FP8_DTYPES,
                        help="B's FP8 type where it differs from A's (an e4m3/e5m2 mix)")
    parser.add_argument("--b-layout", default="nk", choices=("nk", "kn"))
    parser.add_argument("--problem", action="append", default=[],
                        help="MxNxK (repeatable); default: the six of the issue")
    parser.add_argument("--schedule", choices=("cooperative", "pingpong"))
    parser.add_argument("--block-m", type=int, choices=BLOCK_MS)
    parser.add_argument("--block-n", type=int)
    parser.add_argument("--block-k", type=int, choices=(*K_BLOCKS, FP8_BLOCK_K),
                        help="K per ring slot (16-bit: 64, 32 or 16; FP8: 128); default: "
                             "one block of 16 or 32 where K fits it, else 64")
    parser.add_argument("--stages", type=int)
    parser.add_argument("--epilogue-n", type=int)
    parser.add_argument("--cluster", type=int, choices=(1, 2),
                        help="CTAs per cluster along M (sharing B)")
    parser.add_argument("--cluster-n", type=int, choices=(1, 2, 4),
                        help="CTAs per cluster along N (sharing A)")
    parser.add_argument("--split-k", type=int)
    parser.add_argument("--l2-promotion", type=int, choices=(64, 128, 256),
                        help="bytes the L2 fetches per miss of the operand loads")
    parser.add_argument("--split-k-ordered", action="store_true", default=None,
                        help="with --split-k: part 0 stores, the others add after it "
                             "(C = A @ B, no memset)")
    parser.add_argument("--stream-k", action="store_true", default=None,
                        help="every CTA an equal run of the problem's K steps")
    parser.add_argument("--stream-k-waves", type=int, choices=(1, 2),
                        help="with --stream-k: the trailing waves it shares out")
    parser.add_argument("--tail-split", type=int,
                        help="K parts each tile past the last full wave is cut into "
                             "(ordered, one last round)")
    parser.add_argument("--ctas", type=int, help="persistent CTAs (default: one per SM)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--explain", action="store_true",
                        help="print the tiling model's candidates per problem, cheapest "
                             "first (tvm_tma.kernels.tiling; no GPU) and exit")
    args = parser.parse_args(argv)
    options = {name: value for name, value in (("schedule", args.schedule),
                                                ("block_m", args.block_m),
                                                ("block_n", args.block_n),
                                                ("block_k", args.block_k),
                                                ("stages", args.stages),
                                                ("epilogue_n", args.epilogue_n),
                                                ("cluster", args.cluster),
                                                ("cluster_n", args.cluster_n),
                                                ("split_k", args.split_k),
                                                ("split_k_ordered", args.split_k_ordered),
                                                ("stream_k", args.stream_k),
                                                ("stream_k_waves", args.stream_k_waves),
                                                ("tail_split", args.tail_split),
                                                ("l2_promotion", args.l2_promotion),
                                                ("ctas", args.ctas))
               if value is not None}
    fp8 = args.dtype in FP8_DTYPES
    if args.b_dtype is not None and not fp8:
        parser.error(f"--b-dtype {args.b_dtype}: only with an FP8 --dtype")
    if fp8 and args.b_layout != "nk":
        parser.error(f"--b-layout {args.b_layout} with --dtype {args.dtype}: FP8 B is N x K "
                     f"('nk')")
    problems = ([tuple(int(x) for x in p.replace(",", "x").split("x")) for p in args.problem]
                or (FP8_PROBLEMS if fp8 else PROBLEMS))
    if args.explain:
        for m, n, k in problems:
            explain(m, n, k, **options, **({"dtype": args.dtype} if args.dtype else {}),
                    b_layout=args.b_layout)
        return 0
    if args.compile_only:
        dtypes = ([(args.dtype, args.b_dtype)] if args.dtype is not None
                  else [(dtype, None) for dtype in DTYPES_16])
        count = compile_only(problems, dtypes, args.sweep, args.dump_cuda, **options)
        print(f"{count} kernels assembled")
        return 0
    timing = {"launches": args.launches, "repetitions": args.repetitions, "runs": args.runs,
              "heat_ms": args.heat_ms}
    rows = measure(problems, args.dtype or "bfloat16", args.b_layout, args.sweep, timing,
                   args.dump_cuda, args.b_dtype, **options)
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(row["correct"] for row in rows) else 1


def print_table(rows: list[dict]) -> None:
    """The rows as a table: our TFLOP/s (best graph replay, per-launch median) and each
    baseline's, with our percentage of it; then the notes on the baselines."""
    names = list(dict.fromkeys(key[:-len("_tflops")] for row in rows for key in row
                               if key.endswith("_tflops") and not key.startswith("median")
                               and "host_launched" not in key))
    print(f"{'problem':16} {'B':3} {'schedule':11} {'tile':>7} {'st':>3} {'x':>3} "
          f"{'split':>5} {'ok':5} {'TFLOP/s':>8} {'median':>8}"
          + "".join(f" {name:>16} {'% ' + name:>18}" for name in names))
    for row in rows:
        tile = f"{row['block_m']}x{row['block_n']}"
        split = ("sk" if row["stream_k"] else f"t{row['tail_split']}"
                 if row.get("tail_split", 1) > 1 else
                 f"{row['split_k']}{'o' if row.get('split_k_ordered') else ''}")
        print(f"{row['problem']:16} {row['b']:3} {row['schedule']:11} {tile:>7} "
              f"{row['stages']:3} {row['cluster']}x{row['cluster_n']} {split:>5} "
              f"{row['correct']!s:5} {row['tflops']:8.1f} {row['median_tflops']:8.1f}"
              + "".join(f" {row.get(name + '_tflops', float('nan')):16.1f}"
                        f" {row.get('percent_of_' + name, float('nan')):18.1f}"
                        for name in names))
    for note in sorted({f"{key}: {row[key]}" for row in rows
                        for key in ("torch_pairing", "torch_note") if key in row}):
        print(note)


if __name__ == "__main__":
    raise SystemExit(main())
