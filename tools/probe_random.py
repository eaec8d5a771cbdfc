"""Run random validation maps on the GPU, each case in its own process.

Usage: python tools/probe_random.py N SEED. Kernels are compiled once and exported; every
case loads them in a fresh process, so a faulting map is reported (with its parameters)
instead of poisoning the CUDA context for the rest. Also prints the NaN fill patterns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

WORKER = r"""
import json, sys, numpy as np, tvm
import tvm_tma
from tvm_tma.planner.plan_types import TensorMapSpec
from tvm_tma.testing import hw_validation as hv
d = json.loads(sys.argv[1])
spec = TensorMapSpec(dtype=d["dtype"], global_dims=tuple(d["dims"]),
                     global_strides=tuple(d["strides"]), box_dims=tuple(d["box"]),
                     element_strides=tuple(d["estrides"]), swizzle=d["swizzle"],
                     oob_fill=d["oob"])
case = hv.MapCase(spec, tuple(d["coords"]), d["offset"])
ex = tvm.runtime.load_module(d["lib"])
problems = hv.run_case(ex, case, d["direction"], np.random.default_rng(d["seed"]))
print("MISMATCH " + "; ".join(problems) if problems else "OK")
"""


def main() -> None:
    import tvm_tma  # noqa: F401
    from tvm_tma.testing import hw_validation as hv

    count, seed = int(sys.argv[1]), int(sys.argv[2])
    workdir = tempfile.mkdtemp()
    rng = np.random.default_rng(seed)
    jobs = []
    libs = {}
    for i in range(count):
        rank, dtype = 1 + i % 5, hv.DTYPES[(i // 5) % len(hv.DTYPES)]
        direction = "load" if i % 4 else "store"
        key = (rank, dtype, direction)
        if key not in libs:
            path = os.path.join(workdir, f"k_{rank}_{dtype}_{direction}.so")
            hv.compile_kernel(rank, dtype, direction).export_library(path)
            libs[key] = path
        case = hv.random_case(rng, rank, dtype, direction)
        s = case.spec
        jobs.append(dict(dtype=dtype, dims=list(s.global_dims), strides=list(s.global_strides),
                         box=list(s.box_dims), estrides=list(s.element_strides),
                         swizzle=s.swizzle, oob=s.oob_fill, coords=list(case.coords),
                         offset=case.smem_offset, direction=direction, lib=libs[key], seed=i))

    def run(job):
        result = subprocess.run([sys.executable, "-c", WORKER, json.dumps(job)],
                                capture_output=True, text=True, timeout=120)
        last = (result.stdout.strip().splitlines() or [""])[-1]
        if result.returncode != 0 or not last:
            return "FAULT " + ((result.stderr.strip().splitlines() or ["?"])[-1])[:120]
        return last

    with ThreadPoolExecutor(max_workers=12) as pool:
        outcomes = list(pool.map(run, jobs))
    tally = Counter(o.split(" ")[0] for o in outcomes)
    print("tally", dict(tally))
    for job, outcome in zip(jobs, outcomes):
        if not outcome.startswith("OK"):
            brief = {k: v for k, v in job.items() if k not in ("lib", "seed")}
            print(outcome[:150], json.dumps(brief))


if __name__ == "__main__":
    main()
