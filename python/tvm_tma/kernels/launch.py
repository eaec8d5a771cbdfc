"""Programmatic dependent launch (PDL) for the package's persistent kernels.

A kernel launched right after another on a stream normally starts once the earlier one
has finished and its writes are flushed: the launch, the CTAs' rasterisation and the
kernel's prologue (mbarrier init, register split) then run while every SM is idle. With
CUDA's programmatic stream serialisation the launch may overlap the earlier kernel's
tail: this kernel's CTAs start on SMs as the earlier kernel's CTAs leave them, run their
prologue, and wait in ``griddepcontrol.wait`` until the earlier grid has completed and
its memory is visible, before their first global access. The kernels of this package
issue that wait in every thread right after the barriers are initialised
(:func:`.gemm.make_kernel_body`), so what they read and write is ordered after every
earlier kernel exactly as without the overlap; the instruction returns at once where the
launch allowed no overlap.

TVM launches a kernel that way when its ``tirx.kernel_launch_params`` carry the tag
:data:`DEPENDENT_LAUNCH` (TVM's spelling). Measured on an H200, same run, graph replays of
back-to-back launches: 0.2-0.6 us less a launch, 1.05-1.17x on eight conv2d layers of 3-11
us and 1.05-1.11x on GEMMs of 3-8 us, nothing on long ones (benchmarks/RESULTS.md 6l).

Cluster kernels launch so too. TVM derives a kernel's thread and cluster launch
parameters itself and keeps the tags of ``tirx.kernel_launch_params`` (a cluster kernel's
come out as ``clusterCtaIdx.x, blockIdx.x, threadIdx.x`` and the tags); TVM 0.27's CUDA
launcher then sets the cluster shape and, where the tag is present, the programmatic
serialisation attribute on the same ``cuLaunchKernelEx``. The CTAs of a cluster kernel
wait after the cluster barrier that publishes their mbarrier initialisation, so nothing
they share is touched before the earlier grid is done either.
"""

from __future__ import annotations

import tvm

#: The launch-parameter tag TVM's CUDA runtime reads as "launch with programmatic stream
#: serialisation allowed" (``cudaLaunchAttributeProgrammaticStreamSerialization``).
DEPENDENT_LAUNCH = "tirx.use_programtic_dependent_launch"
#: The launch parameters TVM derives for a one-dimensional grid of CTAs with dynamic
#: shared memory, the shape of every kernel here; the dependent-launch tag goes before the
#: dynamic shared memory one, which must be last.
GRID_LAUNCH_PARAMS = ("blockIdx.x", "threadIdx.x")
DYNAMIC_SHARED = "tirx.use_dyn_shared_memory"


def with_dependent_launch(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    """``func`` launched with programmatic dependent launch, in clusters or not (see the
    module docstring)."""
    return func.with_attr("tirx.kernel_launch_params",
                          [*GRID_LAUNCH_PARAMS, DEPENDENT_LAUNCH, DYNAMIC_SHARED])
