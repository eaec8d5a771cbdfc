"""The fuzzer's GPU mode: build accepted cases' kernels in workers and run them on GPU 0.

It exists apart from the model-only fuzzer because it is the one part that needs TVM's CUDA
build and a GPU (imported only when :func:`run_gpu` runs), and because its cost is different:
kernels compile in spawned workers (:func:`_compile_worker` exports each to a shared object)
while this process loads and launches them as they arrive, comparing every byte of both
buffers with numpy's copy. A loop case's kernel (:mod:`.loop_kernel`) launches its CTAs over
every tile of its loop; ``D`` then holds every tile's shared image, and the whole global
allocation is compared after the last tile.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import dataclass, field

from .copy_cases import CopyCase
from .fuzz_oracle import arena_offsets
from .fuzz_run import spawn_pool
from .fuzz_save import case_digest

#: The dynamic shared memory one kernel may use (H100: 227 KiB per block).
MAX_KERNEL_SMEM = 200 * 1024


def kernel_compatible(case: CopyCase) -> bool:
    """The test kernel can express the case: the copy op's two regions hold as many elements
    (the dispatch's gate; they pair in row-major order, so reshapes pass) and the arena
    fits."""
    if math.prod(case.global_extent) != math.prod(case.s_extent):
        return False
    arena = (int(arena_offsets(case).max()) + 1) * case.element_bytes
    return arena + 16 <= MAX_KERNEL_SMEM


def _compile_worker(case: CopyCase, directory: str) -> tuple[str, float, str]:
    """(library path, seconds, error) for one case: compile, then export to a shared object."""
    start = time.perf_counter()
    try:
        from .runner import compile_case

        built = compile_case(case)
        path = os.path.join(directory, f"{case_digest(case)}.so")
        built.executable.export_library(path)
        return path, time.perf_counter() - start, ""
    except Exception as error:  # noqa: BLE001
        return "", time.perf_counter() - start, f"{type(error).__name__}: {error}"


@dataclass
class GpuSummary:
    """What the GPU mode did: kernels built and run, mismatches, and where the time went."""

    kernels: int = 0
    ran: int = 0
    mismatches: int = 0
    compile_seconds: float = 0.0  # summed over the workers
    run_seconds: float = 0.0  # load + launch + compare, in this process
    wall_seconds: float = 0.0
    failures: list[tuple[int, CopyCase, str]] = field(default_factory=list)  # index, case, why


def run_gpu(cases: list[tuple[int, CopyCase]], jobs: int, data_seed: int = 0,
            log: Callable[[str], object] = print) -> GpuSummary:
    """Build every case's kernel in ``jobs`` workers; run each on GPU 0 as it arrives."""
    import tempfile
    from types import SimpleNamespace

    import tvm

    from .runner import run_on_gpu

    summary = GpuSummary()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tvm_tma_fuzz_") as directory, \
            spawn_pool(max(1, jobs)) as pool:
        futures = {pool.submit(_compile_worker, case, directory): (index, case)
                   for index, case in cases}
        for future in as_completed(futures):
            index, case = futures[future]
            path, seconds, error = future.result()
            summary.kernels += 1
            summary.compile_seconds += seconds
            if error:
                problem = f"build failed: {error}"
            else:
                launched = time.perf_counter()
                try:
                    module = tvm.runtime.load_module(path)
                    ok, problem = run_on_gpu(case, SimpleNamespace(executable=module),
                                             seed=data_seed)
                    summary.ran += 1
                    problem = "" if ok else problem
                except Exception as error:  # noqa: BLE001
                    problem = f"run failed: {type(error).__name__}: {error}"
                summary.run_seconds += time.perf_counter() - launched
            if problem:
                summary.mismatches += 1
                summary.failures.append((index, case, problem))
                log(f"GPU MISMATCH case {index} ({case.name}): {problem[:500]}")
            if summary.kernels % 100 == 0:
                log(f"gpu: {summary.kernels}/{len(cases)} kernels, {summary.mismatches} "
                    f"mismatches, {time.perf_counter() - start:.0f} s")
    summary.wall_seconds = time.perf_counter() - start
    return summary
