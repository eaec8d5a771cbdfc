"""Run hand-picked tensor maps on the GPU, each in its own process (a fault stays isolated).

Usage: python tools/probe_maps.py  (prints one line per probe: OK / MISMATCH / FAULT).
Used to learn which tensor-map features the hardware accepts before fuzzing them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

PROBES = [
    # (dtype, dims, strides, box, estrides, swizzle, oob, coords, offset, direction)
    ("float32", [15], [], [8], [1], 2, 1, [1], 3072, "load"),
    ("float32", [15], [], [8], [1], 0, 0, [1], 3072, "load"),
    ("float32", [15], [], [8], [1], 0, 0, [0], 3072, "load"),
    ("float32", [16], [], [8], [1], 0, 0, [4], 3072, "load"),
    ("float32", [15], [], [8], [1], 0, 1, [0], 3072, "load"),
    ("float32", [15], [], [8], [1], 2, 0, [0], 3072, "load"),
    ("float32", [15], [], [8], [1], 0, 0, [1], 0, "load"),
    ("float32", [64], [], [8], [1], 0, 0, [1], 0, "load"),
    ("float32", [64], [], [8], [1], 0, 0, [4], 0, "load"),
    ("float32", [64], [], [8], [1], 0, 0, [-4], 0, "load"),
    ("float16", [64, 8], [128], [64, 8], [1, 1], 0, 0, [3, 0], 0, "load"),
    ("float16", [64, 8], [128], [64, 8], [1, 1], 0, 0, [8, 0], 0, "load"),
    ("float16", [64, 8], [128], [64, 8], [1, 1], 0, 0, [-8, -2], 0, "store"),
    ("uint8", [64], [], [64], [1], 0, 0, [-29], 0, "store"),
    ("uint8", [64], [], [64], [1], 0, 0, [-32], 0, "store"),
    ("float16", [64, 8], [128], [64, 8], [1, 1], 0, 1, [8, 4], 0, "load"),
    ("bfloat16", [64, 8], [128], [64, 8], [1, 1], 0, 1, [8, 4], 0, "load"),
    ("float32", [32, 8], [128], [32, 8], [1, 1], 0, 1, [8, 4], 0, "load"),
]

WORKER = r"""
import json, sys, numpy as np
import tvm_tma
from tvm_tma.planner.plan_types import TensorMapSpec
from tvm_tma.testing import hw_validation as hv
d = json.loads(sys.argv[1])
spec = TensorMapSpec(dtype=d[0], global_dims=tuple(d[1]), global_strides=tuple(d[2]),
                     box_dims=tuple(d[3]), element_strides=tuple(d[4]), swizzle=d[5],
                     oob_fill=d[6])
case = hv.MapCase(spec, tuple(d[7]), d[8])
ex = hv.compile_kernel(spec.rank, spec.dtype, d[9])
problems = hv.run_case(ex, case, d[9], np.random.default_rng(0))
print("MISMATCH " + "; ".join(problems) if problems else "OK")
"""


def run(probe) -> str:
    result = subprocess.run([sys.executable, "-c", WORKER, json.dumps(probe)],
                            capture_output=True, text=True, timeout=300)
    last = (result.stdout.strip().splitlines() or [""])[-1]
    if result.returncode != 0 or not last:
        lines = [line for line in result.stderr.splitlines() if "rror" in line]
        return f"FAULT {(lines or ['?'])[-1][:160]}"
    return last


if __name__ == "__main__":
    with ThreadPoolExecutor(max_workers=8) as pool:
        for probe, outcome in zip(PROBES, pool.map(run, PROBES)):
            print(f"{outcome[:200]:<60} {probe}")
