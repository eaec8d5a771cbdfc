"""The im2col fuzzer: random convolutions and tiles, the planner, the model and the GPU.

Case ``index`` of stream ``seed`` (:func:`random_im2col_case`) is a convolution (batch 1..3,
an H x W image of 1..14 pixels a side, 8..128 channels, a 1..5 filter, stride 1..3,
padding 0..2, dilation 1..2, float16 or bfloat16; or, a fifth of the time, a patch layer:
filter = stride of 1..16 a side over 1..3 patches of 8..32 channels) and a tile (32..256
output pixels by one tap's channel block, plain or 32/64/128B-swizzled; 30% of the time
from the 3-D view, each tap's channels padded to a whole number of K blocks of any width).
:func:`check_im2col_case` plans the materializing kernel's load (:mod:`.im2col_kernel`)
and runs every tile of the plan on the TMA model (:mod:`.im2col_model`) against the
im2col matrix computed from the convolution's definition; a refusal must name the
``im2col`` (or a box/swizzle) rule. On a GPU, :func:`run_im2col_fuzz` (``--gpu``) also
runs each accepted case's kernel and compares every element: the model is only trusted
as far as the hardware agrees with it.

    python -m tvm_tma.testing.fuzz_im2col --cases 300 [--gpu] [--seed N]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter

import numpy as np

from ..conv import Conv2dGeometry
from ..planner import RULES, PlanError
from .im2col_kernel import Im2colCase, expected_matrix, im2col_kernel
from .im2col_model import execute_im2col
from .layout_eval import layout_offsets
from .tma_model import execute_plan

DEFAULT_SEED = 20261124


#: Share of the cases that are patch layers (filter = stride, no padding: a ViT's or a
#: ConvNeXt's stem), which the planner folds (``planner.im2col.fold_patches``).
PATCH_SHARE = 0.2
#: Share of the cases that read a 3-D view (pixels, taps, channels) in K blocks of any
#: width, each tap's channels padded to a whole number of them (the loads past a tap's
#: channels read zeros): how the conv kernel reads 24 channels a tap in one 32-wide load.
TAP_SHARE = 0.3


def _patches(rng: random.Random) -> tuple[int, int, int, int]:
    """(r, s, h, w) of a patch layer: patches of 1 to 16 pixels a side, 1 to 3 of them,
    sometimes with a pixel left over (that axis cannot fold; above stride 8 it is
    refused)."""
    r, s = rng.choice((1, 2, 4, 8, 16)), rng.choice((1, 2, 4, 8, 16))
    h = r * rng.randint(1, 3) + (rng.random() < 0.2)
    w = s * rng.randint(1, 3) + (rng.random() < 0.2)
    return r, s, h, w


def random_im2col_case(seed: int, index: int) -> Im2colCase:
    """Case ``index`` of the stream ``seed`` (independent of every other case)."""
    rng = random.Random(f"tvm-tma-im2col:{seed}:{index}")
    while True:
        if rng.random() < PATCH_SHARE:
            r, s, h, w = _patches(rng)
            dilation, padding, stride = (1, 1), (0, 0), (r, s)
            c = rng.choice((8, 16, 32))
        else:
            r, s = rng.randint(1, 5), rng.randint(1, 5)
            dilation = (rng.choice((1, 1, 1, 2)), rng.choice((1, 1, 1, 2)))
            padding = (rng.randint(0, 2), rng.randint(0, 2))
            stride = (rng.choice((1, 1, 2, 3)), rng.choice((1, 1, 2, 3)))
            h, w = rng.randint(1, 14), rng.randint(1, 14)
            c = rng.choice((8, 16, 24, 32, 40, 64, 64, 80, 128))
        try:
            geometry = Conv2dGeometry(rng.randint(1, 3), h, w, c, 16, r, s, stride, padding,
                                      dilation)
        except ValueError:
            continue
        dtype = rng.choice(("float16", "bfloat16"))
        swizzle = rng.choice((0, 1, 2, 3))
        span = (8, 16, 32, 64)[swizzle]  # elements of a 16-bit type: a swizzled row
        tap_columns = 0
        if rng.random() < TAP_SHARE:
            block_k = rng.choice([d for d in (8, 16, 32, 64, 128) if d % span == 0])
            tap_columns = -(-geometry.tap_channels // block_k) * block_k
        else:
            choices = [d for d in (8, 16, 32, 64, 128)
                       if d <= c and c % d == 0 and d % span == 0]
            if not choices:
                continue
            block_k = rng.choice(choices)
        block_m = rng.choice((32, 64, 64, 128, 256))
        if block_m * block_k * 2 > 64 * 1024:
            continue
        return Im2colCase(geometry, block_m, block_k, dtype, swizzle, tap_columns=tap_columns)


def check_im2col_case(case: Im2colCase, seed: int = 0) -> tuple[str, str]:
    """("accepted" | "refused" | "mismatch", detail): the plan on the model against the
    convolution's definition, tile by tile."""
    import tvm_tma

    try:
        explained = tvm_tma.explain(im2col_kernel(case))
    except PlanError as error:  # pragma: no cover - explain reports refusals itself
        return "refused", error.rule
    load = explained.copies[0]
    if not load.planned:
        if load.rule not in RULES:
            return "mismatch", f"unknown rule {load.rule}"
        return "refused", load.rule
    pointwise = _reads_as_pointwise(case.geometry)
    if not load.plan.is_im2col and not pointwise:
        return "mismatch", "a convolution's view was planned as a tiled copy"
    execute = execute_im2col if load.plan.is_im2col else execute_plan
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 1 << 16, size=case.geometry.argument_shape, dtype=np.uint16)
    want = expected_matrix(case, x)
    offsets = layout_offsets(case.tile_layout(), (case.block_m, case.block_k))
    span = int(offsets.max()) + 1
    flat = x.reshape(-1).view(np.uint8)
    names = _loop_vars(load.plan)
    for mb in range(case.row_blocks):
        for kb in range(case.col_blocks):
            arena = np.full(span * 2 + 2048, 0xA5, np.uint8)
            env = {var: {"mb": mb, "kb": kb}[name] for name, var in names.items()}
            execute(load.plan, flat, arena, 2, env)
            got = arena.view(np.uint16)[offsets]
            tile = want[mb * case.block_m:(mb + 1) * case.block_m,
                        kb * case.block_k:(kb + 1) * case.block_k]
            if not np.array_equal(got, tile):
                bad = np.argwhere(got != tile)[0]
                return "mismatch", f"tile ({mb}, {kb}) differs first at {tuple(bad)}"
    return "accepted", ""


def _reads_as_pointwise(geometry: Conv2dGeometry) -> bool:
    """Whether the view is the activation as a matrix (the planner may load it tiled): a
    1x1 filter without padding once patch axes fold, each axis at stride 1 or with one
    output (whose stride the view does not show)."""
    g = geometry.patches_folded()
    return (g.r, g.s, g.padding) == (1, 1, (0, 0)) and all(
        stride == 1 or out == 1 for stride, out in zip(g.stride, (g.p, g.q)))


def _loop_vars(plan) -> dict:
    """The kernel's loop variables (``mb``, ``kb``) the plan's expressions mention."""
    import tvm

    found = {}
    for expr in (*plan.coordinates, *plan.im2col_offsets, plan.smem_offset):
        if not isinstance(expr, int):
            for var in tvm.tirx.analysis.undefined_vars(expr):
                found[str(var)] = var
    return found


def _compile_worker(case: Im2colCase, directory: str, index: int) -> tuple[str, str]:
    """(library path, error) for one case: build the kernel and export a shared object."""
    import os

    try:
        from .runner import compile_kernel

        path = os.path.join(directory, f"im2col_{index}.so")
        compile_kernel(im2col_kernel(case)).executable.export_library(path)
        return path, ""
    except Exception as error:  # noqa: BLE001
        return "", f"{type(error).__name__}: {error}"


def run_im2col_fuzz(cases: int, seed: int, gpu: bool = False, jobs: int = 1) -> Counter:
    """Check ``cases`` cases on the model; with ``gpu`` also build each accepted case's
    kernel (in ``jobs`` workers) and run it on the device."""
    counts: Counter = Counter()
    accepted = []
    for index in range(cases):
        case = random_im2col_case(seed, index)
        outcome, detail = check_im2col_case(case, seed=index)
        counts[outcome] += 1
        if outcome == "refused":
            counts[f"refused:{detail}"] += 1
        if outcome == "mismatch":
            print(f"MISMATCH case {index}: {case}: {detail}", flush=True)
        if outcome == "accepted":
            accepted.append((index, case))
    if gpu:
        counts.update(_run_on_gpu(accepted, jobs))
    return counts


def _run_on_gpu(accepted: list, jobs: int) -> Counter:
    import tempfile
    from concurrent.futures import as_completed

    import tvm

    from .fuzz_run import spawn_pool
    from .im2col_kernel import run_on_gpu

    counts: Counter = Counter()
    with tempfile.TemporaryDirectory(prefix="tvm_tma_im2col_") as directory, \
            spawn_pool(max(1, jobs)) as pool:
        futures = {pool.submit(_compile_worker, case, directory, index): (index, case)
                   for index, case in accepted}
        for future in as_completed(futures):
            index, case = futures[future]
            path, error = future.result()
            if error:
                ok, why = False, f"build failed: {error}"
            else:
                module = tvm.runtime.load_module(path)
                ok, why = run_on_gpu(case, module, index)
            counts["gpu-exact" if ok else "gpu-mismatch"] += 1
            if not ok:
                print(f"GPU MISMATCH case {index}: {case}: {why}", flush=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--gpu", action="store_true", help="also run accepted cases on the GPU")
    parser.add_argument("--jobs", type=int, default=1, help="kernel builds in parallel")
    args = parser.parse_args(argv)
    counts = run_im2col_fuzz(args.cases, args.seed, args.gpu, args.jobs)
    mismatches = counts["mismatch"] + counts["gpu-mismatch"]
    print(f"im2col fuzz: {args.cases} cases, {counts['accepted']} accepted, "
          f"{counts['refused']} refused, {mismatches} mismatches"
          + (f", {counts['gpu-exact']} bit-exact on the GPU" if args.gpu else ""))
    refusals = sorted((k, v) for k, v in counts.items() if k.startswith("refused:"))
    if refusals:
        print("  refusals: " + ", ".join(f"{k[8:]} {v}" for k, v in refusals))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
