"""Compile a copy case, check what was generated, and (on a GPU) run it bit-exactly."""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm

from ..planner import TmaPlan, plan
from .copy_cases import (
    POISON_BYTE,
    CopyCase,
    build_kernel,
    global_offsets,
    global_storage,
    planner_regions,
    shared_layout_of,
    storage_argument,
)
from .copy_expected import expected_after, numpy_dtype, random_array, reduction_array
from .device_view_case import (
    WORKSPACE_BYTES,
    Launch,
    launch_array,
    launches,
    planner_view,
    relaunched,
)
from .layout_eval import layout_offsets
from .loop_kernel import build_loop_kernel, run_loop_on_gpu
from .tma_model import execute_multicast, execute_plan

SM90A = {"kind": "cuda", "arch": "sm_90a"}
_CALL_SITE = re.compile(r"^\s+tvm_tma_(?:load|store|reduce)_\w+\(", re.MULTILINE)


@dataclass(frozen=True)
class Built:
    executable: object
    cuda_source: str
    host_source: str

    @property
    def tma_call_sites(self) -> int:
        return len(_CALL_SITE.findall(self.cuda_source))

    @property
    def tma_asm_lines(self) -> list[str]:
        return re.findall(r'asm volatile\("(cp\.(?:reduce\.)?async\.bulk\.tensor[^"]*)"',
                          self.cuda_source)

    @property
    def tensormap_params(self) -> int:
        signature = next(line for line in self.cuda_source.splitlines()
                         if line.startswith('extern "C" __global__'))
        return signature.count("const __grid_constant__ CUtensorMap")


def compile_kernel(func, arch: str = "sm_90a") -> Built:
    """Build a TVMScript kernel for ``arch`` through the TIRx pipeline (CUDA source only:
    nvcc runs when the module loads, or in ``assemble``)."""
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    executable = tvm.compile(tvm.IRModule({"main": func}), target=target, tir_pipeline="tirx")
    cuda = executable.mod.imports[0].inspect_source()
    return Built(executable, cuda, executable.mod.inspect_source())


def compile_case(case: CopyCase, arch: str = "sm_90a") -> Built:
    """The case's kernel built for ``arch`` (a loop case's: its persistent loop kernel)."""
    kernel = build_kernel(case) if case.loop is None else build_loop_kernel(case)
    return compile_kernel(kernel, arch)


#: Environment variable naming a directory where :func:`assemble` keeps each cubin under
#: the hash of its source, the architecture, TVM's version and nvcc's. The test session sets
#: it (tests/python/conftest.py), so a kernel that two tests build -- a benchmark's default
#: layer and the same layer's own test -- goes through nvcc once a run.
ASSEMBLE_CACHE_ENV = "TVM_TMA_ASSEMBLE_CACHE"


@functools.cache
def _nvcc_version() -> str:
    return subprocess.run(["nvcc", "--version"], capture_output=True, text=True,
                          check=True).stdout


def assemble(cuda_source: str, arch: str = "sm_90a") -> bytes:
    """ptxas (through nvcc) must accept the kernel for ``arch``: its cubin, compiled as
    TVM compiles a module (``tvm.support.nvcc.compile_cuda``), or the one compiled from the
    same source earlier in the run (:data:`ASSEMBLE_CACHE_ENV`)."""
    cache = os.environ.get(ASSEMBLE_CACHE_ENV)
    cached = None
    if cache:
        key = "\0".join((tvm.__version__, _nvcc_version(), arch, cuda_source))
        cached = Path(cache) / f"{hashlib.sha256(key.encode()).hexdigest()}.cubin"
        if cached.is_file():
            return cached.read_bytes()
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    with target:
        cubin = tvm.support.nvcc.compile_cuda(cuda_source, target_format="cubin", arch=arch,
                                              compiler="nvcc")
    if cached is not None:
        partial = cached.with_name(f"{cached.name}.{os.getpid()}")
        partial.write_bytes(cubin)
        os.replace(partial, cached)  # whole or absent, for a worker reading it meanwhile
    return cubin


@dataclass(frozen=True)
class PtxasUsage:
    """What ptxas reports for a kernel: registers a thread, bytes spilled to local memory."""

    registers: int
    spill_store_bytes: int
    spill_load_bytes: int


def ptxas_usage(cuda_source: str, arch: str = "sm_90a") -> PtxasUsage:
    """Assemble ``cuda_source`` with ``nvcc -Xptxas -v`` and read ptxas's report. A kernel
    that spills runs, and passes every data test, only slower: an unrolled mainloop of
    128 x 128 ping-pong tiles spilled 548 bytes at the 168 registers a 384-thread kernel
    gets and ran 1.21-1.32x slower (benchmarks/RESULTS.md 6z), so tests check it here."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.cu"
        source.write_text(cuda_source)
        report = subprocess.run(
            ["nvcc", "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", str(source), "-o",
             str(Path(folder) / "kernel.cubin")], capture_output=True, text=True, check=True)
    text = report.stdout + report.stderr
    registers = re.search(r"Used (\d+) registers", text)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if registers is None or spills is None:
        raise RuntimeError(f"no ptxas resource report in nvcc's output:\n{text}")
    return PtxasUsage(int(registers.group(1)), int(spills.group(1)), int(spills.group(2)))


def plans_of(case: CopyCase, launch: Launch | None = None) -> list[tuple[TmaPlan, dict]]:
    """The plan of every stage, with the variable binding that selects the stage (split
    among the cluster's CTAs in a cluster case, reducing in a reduce case).

    A device-view case is planned as its kernel's copy is (the view over the kernel
    argument, with the facts of its clamps: :func:`~.device_view_case.planner_view`); its
    binding also gives the view's local scalars the values a launch with ``V = launch``
    (default: the case's own) leaves in them."""
    options = dict(oob=case.oob, reduce=case.reduce, multicast_ctas=case.cluster or None)
    device, env = None, {}
    if case.device_view:
        device = planner_view(case, storage_argument(case), launch)
        options.update(facts=device.facts, argument=device.storage)
        env = dict(device.env)
    if not case.stages:
        return [(plan(*planner_regions(case, device=device), **options), env)]
    stage = tvm.tirx.Var("stage", "int32")
    ranges = {stage: tvm.ir.Range.from_min_extent(0, case.stages)}
    staged = plan(*planner_regions(case, stage, device), var_ranges=ranges, **options)
    return [(staged, {**env, stage: value}) for value in range(case.stages)]


def _arena_offsets(case: CopyCase) -> np.ndarray:
    """Arena element index of every logical shared element (TVM's layout, swizzle included)."""
    return case.smem_elem_offset + layout_offsets(shared_layout_of(case), case.shared_shape)


def _element_bytes(offsets: np.ndarray, width: int) -> np.ndarray:
    """Byte index of every byte of the elements at ``offsets`` (element order, then lanes)."""
    return (offsets.reshape(-1, 1) * width + np.arange(width)).ravel()


def model_buffers(case: CopyCase, global_logical: np.ndarray, shared_logical: np.ndarray,
                  arena_offsets: np.ndarray | None = None, storage_elems: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(global allocation, shared arena) as flat bytes holding the two logical arrays.

    The allocation's bytes outside the view are padding (``GLOBAL_PAD_BYTE``); the arena's
    bytes that no logical shared element occupies (the elem_offset prefix, padded rows) are
    poison, so a copy that touches either shows in a byte comparison of the whole buffers.
    A cluster case has one arena per CTA: the rows of a 2-D array. ``storage_elems`` sizes
    the allocation (default: the case's; a device-view kernel relaunched at another view
    runs in its own case's).
    """
    offsets = _arena_offsets(case) if arena_offsets is None else arena_offsets
    images = shared_logical.reshape(-1, *case.shared_shape)
    arenas = np.stack([_arena(offsets, case.element_bytes, image) for image in images])
    return global_storage(case, global_logical, storage_elems).view(np.uint8), (
        arenas if case.cluster else arenas[0])


def _arena(offsets: np.ndarray, width: int, logical: np.ndarray) -> np.ndarray:
    """One shared arena: poison, with the logical elements at their offsets."""
    arena = np.full((int(offsets.max()) + 1) * width, POISON_BYTE, dtype=np.uint8)
    arena[_element_bytes(offsets, width)] = logical.reshape(-1).view(np.uint8)
    return arena


def run_model_buffers(case: CopyCase, global_in: np.ndarray, shared_in: np.ndarray,
                      plans=None, arena_offsets: np.ndarray | None = None,
                      storage_elems: int | None = None):
    """Execute the planned issues on the numpy TMA model over whole buffers.

    Returns the (global allocation, shared arena) bytes after the copy, see
    :func:`model_buffers`; ``plans`` defaults to :func:`plans_of`. A cluster case runs
    every CTA's share of each plan as a multicast into every CTA's arena; a reduce case
    reduces into the global allocation.
    """
    global_bytes, arena = model_buffers(case, global_in, shared_in, arena_offsets,
                                        storage_elems)
    width = case.element_bytes
    for copy_plan, env in plans if plans is not None else plans_of(case):
        if case.cluster:
            execute_multicast(copy_plan, global_bytes, list(arena), width, env)
        else:
            execute_plan(copy_plan, global_bytes, arena, width, env, reduce=case.reduce)
    return global_bytes, arena


def run_model(case: CopyCase, global_in: np.ndarray, shared_in: np.ndarray, plans=None):
    """Execute the planned issues (``plans``, default :func:`plans_of`) on the numpy TMA
    model; returns (global, shared) after (shared: one image per CTA in a cluster case)."""
    offsets = _arena_offsets(case)
    global_bytes, arena = run_model_buffers(case, global_in, shared_in, plans, offsets)
    shared_out = np.ascontiguousarray(arena[..., _element_bytes(offsets, case.element_bytes)])
    shared_out = shared_out.view(shared_in.dtype).reshape(shared_in.shape)
    global_out = global_bytes.view(global_in.dtype)[global_offsets(case).reshape(-1)]
    return global_out.reshape(global_in.shape), shared_out


def inputs(case: CopyCase, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random global data; shared data random (s2g) or poison (g2s, one image per CTA in a
    cluster case). A reduction's operands are values it computes on, not random bits
    (:func:`~.copy_expected.reduction_array`)."""
    rng = np.random.default_rng(seed)
    draw = random_array if case.reduce is None else reduction_array
    global_in = draw(case.global_shape, case.dtype, rng)
    if case.direction == "g2s":
        count = math.prod(case.images_shape) * case.element_bytes
        shared_in = np.full(count, POISON_BYTE, np.uint8).view(numpy_dtype(case.dtype))
        shared_in = shared_in.reshape(case.images_shape)
    else:
        shared_in = draw(case.shared_shape, case.dtype, rng)
    return global_in, shared_in


def device_view_arguments(launch: Launch | None) -> tuple:
    """The kernel's arguments after ``A`` and ``D``: for a device-view case's ``launch``,
    ``V`` (the view's offset in 16-byte units and its rows) and the zeroed map workspace
    ``W`` (torch allocations start at least 256-byte aligned, and the slots need 128);
    none for the other cases (``launch`` None)."""
    if launch is None:
        return ()
    import torch

    values = torch.from_numpy(launch_array(launch)).cuda()
    return values, torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")


def run_on_gpu(case: CopyCase, built: Built, seed: int = 0) -> tuple[bool, str]:
    """Run on device 0; compare every byte of both buffers with the expected result.

    The global side is the view's whole allocation (:func:`global_storage`, padding
    included): the kernel gets a strided view of it when the view is not dense. The shared
    side is ``D``: every CTA's image in a cluster case. A device-view case's kernel runs at
    each of its :func:`~.device_view_case.launches` (``V`` and ``W``:
    :func:`device_view_arguments`), each judged as the static case it performs.
    ``built`` needs only an ``executable`` with a ``"main"`` function. A loop case runs its
    persistent kernel (:func:`~.loop_kernel.run_loop_on_gpu`: ``D`` holds every tile's image).
    """
    if case.loop is not None:
        return run_loop_on_gpu(case, built, seed)
    if not case.device_view:
        problems = _run_once(case, built, seed, None)
    else:
        problems = [f"launch V={launch}: {problem}" for launch in launches(case)
                    for problem in _run_once(case, built, seed, launch)]
    return not problems, "; ".join(problems)


def _run_once(case: CopyCase, built: Built, seed: int, launch: Launch | None) -> list[str]:
    """One launch of ``case``'s kernel (with ``V = launch`` for a device-view case, which
    then copies as :func:`~.device_view_case.relaunched` says, in the case's allocation);
    the differences from the truth, buffer by buffer."""
    import torch

    truth = case if launch is None else relaunched(case, launch)
    size = case.global_storage_elems
    global_in, shared_in = inputs(truth, seed)
    want_global, want_shared = expected_after(truth, global_in, shared_in)
    want_global = global_storage(truth, want_global, size)

    def to_device(array):
        raw = torch.from_numpy(array.reshape(-1).view(np.uint8).copy())
        return raw.view(getattr(torch, case.dtype)).reshape(array.shape).cuda()

    glob = to_device(global_storage(truth, global_in, size))
    shared = to_device(shared_in)
    if case.view_in_kernel:
        view = glob  # the kernel declares the view over the whole allocation
    elif case.global_is_dense:
        view = glob.reshape(case.global_shape)
    else:
        view = glob.as_strided(case.global_shape, case.g_strides, case.global_offset)
    built.executable["main"](view, shared, *device_view_arguments(launch))
    torch.cuda.synchronize()

    def to_bytes(tensor):
        return tensor.cpu().contiguous().view(torch.uint8).numpy().reshape(-1)

    problems = []
    for label, got, want in (("global", glob, want_global), ("shared", shared, want_shared)):
        got_bytes, want_bytes = to_bytes(got), want.reshape(-1).view(np.uint8)
        wrong = np.flatnonzero(got_bytes != want_bytes)
        if wrong.size:
            problems.append(f"{label}: {wrong.size} bytes differ, first at byte {wrong[0]}")
    return problems
