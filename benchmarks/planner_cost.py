"""Planner + lowering cost: dispatch="tma" vs apache-tvm's own tma_auto on the same copies.

Each copy of the matrix (tests/python/copy_matrix.py, widened to 100 by moving the region)
is built once per dispatch; the timed step is TVM's LowerTIRx pass, which runs the dispatch
(plan, host encode, issue loop) for every copy_async. Calling upstream here is fine: this is a
benchmark, never the package. Prints per-dispatch median milliseconds and the ratio.

Usage: python benchmarks/planner_cost.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import tvm

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.testing.copy_cases import build_kernel
from tvm_tma.testing.scripts import load_script

# The copy matrix is the tests' (tests/python is not a package): its module of views
# first, which it imports by name.
TESTS = Path(__file__).resolve().parents[1] / "tests" / "python"
load_script(TESTS / "copy_matrix_views.py")
CASES = load_script(TESTS / "copy_matrix.py").CASES

SM90A = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def hundred_cases():
    """The matrix's cases, then shifted copies of them, up to 100 distinct copies."""
    cases = list(CASES)
    shift = 0
    while len(cases) < 100:
        shift += 1
        for case in CASES:
            if len(cases) == 100:
                break
            rows = case.global_shape[0] + shift * case.global_extent[0]
            cases.append(dataclasses.replace(case, name=f"{case.name}+{shift}",
                                             global_shape=(rows, *case.global_shape[1:])))
    return cases


def module_for(case, dispatch: str):
    return tvm.IRModule({"main": build_kernel(case, dispatch=dispatch)})


def lower_seconds(module) -> float:
    with SM90A:
        start = time.perf_counter()
        tvm.tirx.transform.LowerTIRx()(module)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cases = hundred_cases()
    results = {}
    for dispatch in ("tma", "tma_auto"):
        modules, refused = [], 0
        for case in cases:
            module = module_for(case, dispatch)
            try:
                lower_seconds(module)
                modules.append(module)
            except Exception:  # noqa: BLE001 - a dispatch that refuses a copy is counted
                refused += 1
        totals = [sum(lower_seconds(m) for m in modules) for _ in range(args.repeat)]
        results[dispatch] = (statistics.median(totals), len(modules), refused)
    for dispatch, (seconds, count, refused) in results.items():
        print(f"{dispatch:9s} {count:3d} copies lowered ({refused} refused): "
              f"{seconds * 1e3:8.1f} ms total, {seconds / max(count, 1) * 1e3:6.2f} ms/copy")
    ours, theirs = results["tma"], results["tma_auto"]
    print(f"ratio tma / tma_auto per copy: "
          f"{(ours[0] / max(ours[1], 1)) / (theirs[0] / max(theirs[1], 1)):.2f}")


if __name__ == "__main__":
    main()
