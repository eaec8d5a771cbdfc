"""Probe every (reduction, map element type) pair on the GPU, each in its own process.

Usage: python tools/probe_reduce_types.py [--raw]  (one line per pair, then a summary)

Each pair runs ``cp.reduce.async.bulk.tensor.<op>`` through a tensor map of the type the
dispatch would encode for it (``reduction_map_dtype``; ``--raw``: the tensor's own type) (built
with ``T.tma.encode_tiled`` / ``T.tma.reduce``, below the dispatch, which refuses the
pairs PTX leaves undefined) on random data and reports

* ``MATCH``: global memory equals numpy's ``op(old, new)`` in that type;
* ``UNCHANGED``: the reduction left global memory as it was;
* ``DIFFERENT``: neither (the hardware did something else);
* ``FAULT``: the launch or the synchronization failed (the process is discarded).

It is how ``tvm_tma.planner.reductions.REDUCE_TYPES`` was checked against the hardware: the
pairs PTX defines must MATCH, and the others show why they are refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
DTYPES = ("uint8", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
          "float32", "float64")

WORKER = r"""
import json, sys
import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout
import tvm_tma  # noqa: F401

op, dtype, map_dtype = sys.argv[1], sys.argv[2], sys.argv[3]
ROWS, COLS = 8, 64
width = tvm.DataType(dtype).bits // 8


@T.prim_func
def probe(G_ptr: T.handle, X_ptr: T.handle):
    G = T.match_buffer(G_ptr, (ROWS, COLS), dtype, layout=TileLayout(S[ROWS, COLS]))
    X = T.match_buffer(X_ptr, (ROWS, COLS), dtype, layout=TileLayout(S[ROWS, COLS]))
    gmap = T.meta_var(T.tma.encode_tiled(G, map_dtype, [COLS, ROWS], [COLS * width],
                                         [COLS, ROWS]))
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([128])
    tile = T.alloc_buffer((ROWS, COLS), dtype, scope="shared.dyn", align=128,
                          layout=TileLayout(S[ROWS, COLS]))
    for i in T.serial(tid, ROWS * COLS, step=128):
        tile[i // COLS, i % COLS] = X[i // COLS, i % COLS]
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    if tid == 0:
        T.tma.reduce(op, T.address_of(gmap), [0, 0], tile.ptr_to([0, 0]))
        T.tma.commit_group()
        T.tma.wait_group(0)


def data(rng):
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        kind = np.float32 if dtype == "bfloat16" else np.dtype(dtype)
        values = (rng.standard_normal((ROWS, COLS)) * 8).astype(kind)
        if dtype == "bfloat16":
            import ml_dtypes
            values = values.astype(ml_dtypes.bfloat16)
        return values
    info = np.iinfo(np.dtype(dtype))
    return rng.integers(info.min, info.max, size=(ROWS, COLS), dtype=np.dtype(dtype),
                        endpoint=True)


def reference(old, new):
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    with np.errstate(over="ignore", invalid="ignore"):
        if op == "add":
            wide = np.float32 if old.dtype.kind == "V" or dtype == "bfloat16" else old.dtype
            return (old.astype(wide) + new.astype(wide)).astype(old.dtype)
        if op in ("min", "max"):
            return (np.minimum if op == "min" else np.maximum)(old, new)
        if op in ("and", "or", "xor"):
            fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
            return fn(old.view(bits), new.view(bits)).view(old.dtype)
        u_old, u_new = old.view(bits), new.view(bits)
        if op == "inc":
            return np.where(u_old >= u_new, 0, u_old + 1).astype(bits).view(old.dtype)
        return np.where((u_old == 0) | (u_old > u_new), u_new, u_old - 1).astype(bits).view(
            old.dtype)


rng = np.random.default_rng(7)
old, new = data(rng), data(rng)
target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
executable = tvm.compile(tvm.IRModule({"main": probe}), target=target, tir_pipeline="tirx")
device = tvm.cuda(0)
g, x = tvm.runtime.tensor(old, device), tvm.runtime.tensor(new, device)
try:
    executable["main"](g, x)
    device.sync()
except Exception as error:  # a launch error poisons the context: report and leave
    print(json.dumps({"verdict": "FAULT", "detail": str(error).splitlines()[-1][:160]}))
    sys.exit(0)
result = g.numpy().view(np.uint8)
if np.array_equal(result, reference(old, new).view(np.uint8)):
    verdict = "MATCH"
elif np.array_equal(result, old.view(np.uint8)):
    verdict = "UNCHANGED"
else:
    verdict = "DIFFERENT"
differing = int(np.count_nonzero(result != reference(old, new).view(np.uint8)))
print(json.dumps({"verdict": verdict, "detail": f"{differing} bytes differ from numpy"}))
"""


def _probe(worker: Path, pair: tuple[str, str], map_dtype: str
           ) -> tuple[str, str, str, str]:
    op, dtype = pair
    run = subprocess.run([sys.executable, str(worker), op, dtype, map_dtype],
                         capture_output=True, text=True, timeout=300)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (run.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return op, dtype, "FAULT", tail
    found = json.loads(lines[-1])
    return op, dtype, found["verdict"], found["detail"]


def main() -> int:
    from tvm_tma.planner.reductions import REDUCE_TYPES, reduction_map_dtype

    raw = "--raw" in sys.argv  # every map in the tensor's own type, as PTX names it

    pairs = [(op, dtype) for op in OPS for dtype in DTYPES]
    with tempfile.TemporaryDirectory() as directory:
        worker = Path(directory) / "reduce_probe_worker.py"  # TVMScript parses its source
        worker.write_text(WORKER)
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda pair: _probe(
                worker, pair, pair[1] if raw else reduction_map_dtype(*pair)), pairs))
    surprises = 0
    for op, dtype, verdict, detail in results:
        defined = dtype in REDUCE_TYPES[op]
        expected = verdict == "MATCH" if defined else verdict != "MATCH"
        surprises += not expected
        mark = "defined  " if defined else "undefined"
        print(f"{op:4} {dtype:9} {mark} {verdict:9} {detail}{'' if expected else '  <-- !'}")
    print(f"{len(results)} pairs, {surprises} where the hardware disagrees with REDUCE_TYPES")
    return 0


if __name__ == "__main__":
    sys.exit(main())
