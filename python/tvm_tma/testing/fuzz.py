"""Differential fuzzer: random copies -> the planner -> the numpy TMA model -> numpy's copy.

Each case is a random :class:`CopyCase`: a global view (rank 1..5, random shape, region at
random starts, padded or permuted strides; or a view declared in the kernel at an offset, or
laid out as strided pieces), a region that may cross the view's edges with ``oob=``, a shared
buffer (plain, padded rows, row blocks, TVM's MMA swizzle atoms, multi-stage, at aligned or
misaligned offsets, a sub-region or the whole buffer), often of another shape than the global
region, one of seven dtypes and either direction. About one case in twelve is a multicast load
split among a cluster of 2 or 4 CTAs (``multicast=rank``), and as many are stores that reduce
with a random op (``reduce=``), mostly on a dtype PTX defines the op for, sometimes not
(:mod:`.fuzz_variants`). About one in ten is a persistent tile loop around a plain copy
(:mod:`.fuzz_loops`): one of the loop forms kernel authors write (guarded rounds with the
tile index a meta variable or a local scalar, exact rounds, a strided loop, a while loop over
a counter, an inner K loop) or an unsafe neighbour that runs a tile past the tensor, on a
tensor that holds whole tiles or cuts the last one (with ``oob=``). About one in twelve views
declared in the one-CTA kernel is device-side (:mod:`.device_view_case`): the kernel reads its
offset and rows from an argument and clamps them, the dispatch rebinds its map on the device;
the planner sees the same view and facts, the model runs the plan at the launch's values (the
static case's, then a view placed elsewhere and shorter), and a refusal names a rule of
device-side views or the static case's. The planner must either
refuse with a rule of
:data:`~tvm_tma.planner.RULES`, or return plans that satisfy the hardware invariants (checked
in :mod:`.fuzz_oracle` independently of the planner's own rules) and that, run on the TMA
model over the whole global allocation and the whole shared arena, give exactly the bytes
numpy's copy gives. For the variants the oracle also checks, apart from the planner: a split
plan's issues are dealt out exactly (``issues_per_cta * N == num_issues``, each issue made by
one CTA, every piece 128-byte aligned; off the swizzle period is fine, the hardware swizzles
absolute addresses) and every CTA's image on the model (``execute_multicast``) is the one-CTA
copy; a reduction keeps its element type, is refused with rule ``reduce`` exactly when PTX does
not define its (op, dtype) pair, and leaves numpy's reduction in global memory (computed in
:func:`~.copy_expected.reduce_elements`, not by the model). A loop case is planned through
the real pipeline (its TVMScript kernel parsed and explained, facts and all); an accepted plan
whose loop runs a region outside the tensor without ``oob=`` is a mismatch of kind
``unsound-accept``, and otherwise the plan is checked on the model at every tile the loop runs
(:mod:`.fuzz_loop_oracle`). A refused safe loop is no mismatch: the run prints, per form, how
many safe, edge and unsafe loops were accepted and refused.

A failing case is minimized (:func:`shrink`) and saved as a regression test
(:func:`save_regression`). ``--gpu`` builds the accepted cases' kernels in worker processes and
runs them on the GPU, comparing every byte of both buffers: a multicast case's kernel runs one
cluster and checks every CTA's image, a reduce case's kernel reduces on the hardware, a loop
case's kernel runs its CTAs over every tile (every image and the whole allocation), and a
device-view case's kernel runs at each of its launches (``V``: its own view, then one placed
elsewhere and shorter; ``W``: the map workspace). ``--gpu-feature KEY`` runs only the
accepted cases with that coverage key (``device-view``, ``multicast``, ...).

    python -m tvm_tma.testing.fuzz --cases 10000 --seed 1 [--jobs 2] [--gpu] [--save-failures D]
                                   [--coverage] [--gpu-feature KEY] [--gpu-limit N]

prints ``seed S`` first and ``N cases, A accepted, R refused, M mismatches`` last, and exits 1
on any mismatch (an invariant violation, a crash or a refusal without a known rule count as
mismatches).

The fuzzer lives in one module per job: :mod:`.fuzz_cases` (the case generator, with
:mod:`.fuzz_views` for the global views, :mod:`.fuzz_variants` for the variants and
:mod:`.fuzz_loops` for the loops),
:mod:`.fuzz_oracle` (one case: refusal rule, plan invariants, model bytes; the checks live in
:mod:`.fuzz_checks`, and persistent loop cases are judged by :mod:`.fuzz_loop_oracle`),
:mod:`.fuzz_run` (many cases in worker processes), :mod:`.fuzz_shrink` (minimization),
:mod:`.fuzz_save` (regression files) and :mod:`.fuzz_gpu` (kernels on the GPU). This module
is the command line and the facade that re-exports their public names, so ``from
tvm_tma.testing.fuzz import check_case`` (the saved regression tests) and ``fuzz.<name>`` keep
working. To monkeypatch a name, patch it in the
module that uses it (``fuzz_oracle.plans_of``, ``fuzz_run.check_case``, ...): rebinding it
here changes nothing the fuzzer calls.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .fuzz_cases import (
    ALL_DTYPES,
    DEFAULT_SEED,
    DTYPES,
    MAX_GLOBAL_ELEMS,
    MAX_RANK,
    MAX_TILE_BYTES,
    random_case,
)
from .fuzz_gpu import MAX_KERNEL_SMEM, GpuSummary, kernel_compatible, run_gpu
from .fuzz_gpu import _compile_worker as _compile_worker  # re-exported for the tests
from .fuzz_loops import loop_table
from .fuzz_oracle import (
    CASE_TIMEOUT,
    MAX_BOX,
    SMEM_ALIGN,
    CaseTimeout,
    Outcome,
    check_case,
    model_mismatch,
    plan_invariants,
    plans_of,
    split_invariants,
    variant_invariants,
)
from .fuzz_run import Summary, coverage_keys, run_fuzz
from .fuzz_save import (
    REGRESSION_DIR,
    case_digest,
    case_source,
    regression_source,
    save_regression,
)
from .fuzz_shrink import minimize_failure, shrink, valid_case

__all__ = [
    "ALL_DTYPES", "CASE_TIMEOUT", "DEFAULT_SEED", "DTYPES", "MAX_BOX", "MAX_GLOBAL_ELEMS",
    "MAX_KERNEL_SMEM", "MAX_RANK", "MAX_TILE_BYTES", "REGRESSION_DIR", "SMEM_ALIGN", "CaseTimeout",
    "GpuSummary", "Outcome", "Summary", "case_digest", "case_source", "check_case",
    "coverage_keys", "kernel_compatible", "loop_table", "main", "minimize_failure",
    "model_mismatch", "plan_invariants", "plans_of", "random_case", "regression_source",
    "run_fuzz", "run_gpu", "save_regression", "shrink", "split_invariants", "valid_case",
    "variant_invariants",
]


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _histogram(summary: Summary) -> list[str]:
    lines = ["refusals by rule:"]
    for rule, count in sorted(summary.rules.items(), key=lambda item: (-item[1], item[0])):
        lines.append(f"  {rule:22s} {count:7d}  {100 * count / max(summary.cases, 1):5.1f}%")
    return lines


def _coverage(summary: Summary) -> list[str]:
    """Cases, accepted and refused per feature key (:func:`coverage_keys`)."""
    lines = ["coverage by feature (cases, accepted, refused):"]
    for key in sorted({key for key, _ in summary.coverage}):
        counts = [summary.coverage[(key, status)] for status in ("accepted", "refused")]
        total = sum(counts) + summary.coverage[(key, "mismatch")]
        lines.append(f"  {key:22s} {total:7d} {counts[0]:7d} {counts[1]:7d}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tvm_tma.testing.fuzz",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=None,
                        help="case stream (default: TVM_TMA_FUZZ_SEED or a fixed seed)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--gpu", action="store_true",
                        help="also build and run every accepted case's kernel on GPU 0")
    parser.add_argument("--gpu-limit", type=int, default=None,
                        help="at most this many kernels in --gpu mode")
    parser.add_argument("--gpu-loops-first", action="store_true",
                        help="in --gpu mode, take the accepted loop cases first, then the "
                        "others (up to --gpu-limit)")
    parser.add_argument("--gpu-feature", default=None, metavar="KEY",
                        help="in --gpu mode, take only the accepted cases with this coverage "
                        "key (e.g. device-view, multicast, reduce; see --coverage)")
    parser.add_argument("--save-failures", type=Path, default=None, metavar="DIR",
                        help="minimize each mismatch and save it as DIR/test_case_<hash>.py "
                        f"(the suite collects {REGRESSION_DIR})")
    parser.add_argument("--shrink-budget", type=int, default=400)
    parser.add_argument("--coverage", action="store_true",
                        help="also print the cases, accepted and refused of every feature")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(
        os.environ.get("TVM_TMA_FUZZ_SEED", DEFAULT_SEED))

    print(f"seed {seed}", flush=True)
    summary = run_fuzz(args.cases, seed, jobs=args.jobs)
    print(f"model: {summary.cases} cases in {summary.seconds:.1f} s "
          f"({1000 * summary.seconds / max(summary.cases, 1):.2f} ms/case wall, "
          f"{args.jobs} jobs), {summary.issues} issues modelled, slowest case "
          f"{summary.slowest[1]} ({summary.slowest[0]:.2f} s)")
    lines = _histogram(summary) + loop_table(summary.loops)
    for line in lines + (_coverage(summary) if args.coverage else []):
        print(line)
    for index, outcome in summary.failures[:50]:
        print(f"MISMATCH case {index}: {outcome.kind}: {outcome.problem[:500]}")
        print(f"  reproduce: random_case({seed}, {index})")
    if args.save_failures is not None:
        seen = set()
        for index, outcome in summary.failures[:20]:
            small, small_outcome = minimize_failure(random_case(seed, index), outcome,
                                                    budget=args.shrink_budget)
            if case_digest(small) in seen:
                continue
            seen.add(case_digest(small))
            path = save_regression(small, small_outcome if small_outcome.kind else outcome,
                                   args.save_failures, f"random_case({seed}, {index})")
            print(f"  minimized case {index} -> {path}")

    mismatches = summary.mismatches
    if args.gpu:
        accepted = [(index, random_case(seed, index)) for index in summary.accepted_indices]
        if args.gpu_loops_first:
            accepted.sort(key=lambda item: item[1].loop is None)  # stable: index order kept
        if args.gpu_feature is not None:
            accepted = [(i, case) for i, case in accepted
                        if args.gpu_feature in coverage_keys(case)]
        chosen = []
        for index, case in accepted:
            if args.gpu_limit is not None and len(chosen) >= args.gpu_limit:
                break
            if kernel_compatible(case):
                chosen.append((index, case))
        loops = sum(case.loop is not None for _, case in chosen)
        print(f"gpu: building {len(chosen)} kernels ({loops} loop kernels) with {args.jobs} "
              "jobs", flush=True)
        gpu = run_gpu(chosen, args.jobs)
        per_kernel = gpu.compile_seconds / max(gpu.kernels, 1)
        print(f"gpu: {gpu.kernels} kernels built, {gpu.ran} run, {gpu.mismatches} mismatches; "
              f"{per_kernel:.2f} s compile per kernel (in a worker), "
              f"{gpu.run_seconds / max(gpu.ran, 1):.3f} s load+run per kernel, "
              f"{gpu.wall_seconds:.0f} s wall")
        mismatches += gpu.mismatches
        if args.save_failures is not None:
            for index, case, problem in gpu.failures[:20]:
                outcome = Outcome("mismatch", kind="gpu", problem=problem)
                path = save_regression(case, outcome, args.save_failures,
                                       f"random_case({seed}, {index}) on the GPU")
                print(f"  saved GPU failure {index} -> {path}")
    print(f"{summary.cases} cases, {summary.accepted} accepted, {summary.refused} refused, "
          f"{mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
