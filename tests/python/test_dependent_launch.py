"""Programmatic dependent launch (tvm_tma.kernels.launch): which kernels carry TVM's tag,
and where their CUDA waits for the previous grid (before any global access)."""

from __future__ import annotations

import re

import pytest
import tvm
from tvm.tirx.build import split_host_device_mods

from tvm_tma.conv import Conv2dGeometry
from tvm_tma.kernels.conv2d import conv2d_config, conv2d_kernel
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.kernels.grouped_gemm import GroupedGemmConfig, grouped_gemm_kernel
from tvm_tma.kernels.launch import DEPENDENT_LAUNCH, with_dependent_launch
from tvm_tma.testing.runner import assemble, compile_kernel

PDL_PARAMS = ["blockIdx.x", "threadIdx.x", "tirx.use_programtic_dependent_launch",
              "tirx.use_dyn_shared_memory"]
_WAIT = "tvm_builtin_ptx_griddepcontrol_wait();"
_GLOBAL_ACCESS = re.compile(r"tvm_tma_(?:load|store|reduce)_\w+\(|tensormap|atomic|ld\.global")


def _launch_params(func):
    params = func.attrs.get("tirx.kernel_launch_params") if func.attrs else None
    return None if params is None else [str(p) for p in params]


def _kernel_body(cuda: str) -> str:
    start = cuda.index('extern "C" __global__ void __launch_bounds__')
    return cuda[cuda.index("{", cuda.index(")", start)):]


def test_the_tag_is_tvms_spelling_and_goes_before_dynamic_shared_memory():
    assert DEPENDENT_LAUNCH == "tirx.use_programtic_dependent_launch"
    func = gemm_kernel(GemmConfig(512, 512, 512))
    assert _launch_params(func) == PDL_PARAMS
    assert _device_launch_params(func) == PDL_PARAMS
    assert _launch_params(with_dependent_launch(func.without_attr(
        "tirx.kernel_launch_params"))) == PDL_PARAMS


@pytest.mark.parametrize("make", [
    lambda: gemm_kernel(GemmConfig.for_problem(300, 320, 512)),
    lambda: gemm_kernel(GemmConfig(1000, 2000, 3000, split_k=3, split_k_ordered=True)),
    lambda: gemm_kernel(GemmConfig(1000, 2000, 3000, stream_k=True, ctas=20)),
    lambda: conv2d_kernel(Conv2dGeometry(2, 9, 9, 64, 128, 3, 3, padding=(1, 1)),
                          conv2d_config(Conv2dGeometry(2, 9, 9, 64, 128, 3, 3,
                                                       padding=(1, 1)))),
    lambda: grouped_gemm_kernel(GroupedGemmConfig.for_problem(4, 1024, 256, 256)),
], ids=["gemm-64x64", "gemm-ordered-split", "gemm-stream-k", "conv2d", "grouped"])
def test_kernels_without_a_cluster_launch_dependent_and_wait_before_global_memory(make):
    func = make()
    assert _launch_params(func) == PDL_PARAMS
    cuda = compile_kernel(func).cuda_source
    body = _kernel_body(cuda)
    assert body.count(_WAIT) == 1
    wait = body.index(_WAIT)
    # Only the barrier init and the CTA barrier come first: no TMA copy, tensor-map
    # access or global load before the wait.
    assert "__syncthreads" in cuda and "tvm_builtin_cuda_cta_sync();" in body[:wait]
    assert not _GLOBAL_ACCESS.search(body[:wait]), _GLOBAL_ACCESS.search(body[:wait])
    assert re.search(r"griddepcontrol\.wait;", cuda)
    assemble(cuda)


def _device_launch_params(func) -> list[str]:
    """The launch parameters of the device kernel TVM splits ``func`` into: the ones the
    CUDA launcher reads (thread and cluster extents TVM derives, then the tags)."""
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}).with_host("llvm")
    mod = tvm.tirx.transform.BindTarget(target)(tvm.IRModule({"main": func}))
    pipeline, _, finalize_device = tvm.tirx.get_tir_pipeline("tirx")
    _, devices = split_host_device_mods(pipeline(mod))
    (device,) = devices.values()
    (kernel,) = finalize_device()(device).functions.values()
    return [str(p) for p in kernel.attrs["tirx.kernel_launch_params"]]


@pytest.mark.parametrize("cfg", [GemmConfig(1000, 2000, 3000, cluster=2),
                                 GemmConfig(256, 4096, 1024, cluster_n=4, ctas=128)],
                         ids=["2x1", "1x4"])
def test_cluster_kernels_launch_dependent_in_their_clusters(cfg):
    func = gemm_kernel(cfg)
    assert _launch_params(func) == PDL_PARAMS
    # TVM puts the cluster extent first and keeps the tags: its launcher sets the cluster
    # shape and the programmatic serialisation on one cuLaunchKernelEx.
    assert _device_launch_params(func) == ["clusterCtaIdx.x", *PDL_PARAMS]
    body = _kernel_body(compile_kernel(func).cuda_source)
    wait = body.index(_WAIT)
    assert "tvm_builtin_cuda_cluster_sync();" in body[:wait]
    assert not _GLOBAL_ACCESS.search(body[:wait])


def test_a_two_height_grouped_kernel_waits_once_before_it_reads_the_group_ends():
    """A grouped kernel holding two tilings reads ``offs`` to choose one before it lays out
    shared memory: its one wait is then the first statement, before that read, and neither
    tiling's CTA waits again."""
    gcfg = GroupedGemmConfig.for_problem(4, 256, 256, 256)
    assert gcfg.short is not None
    func = grouped_gemm_kernel(gcfg)
    assert _launch_params(func) == PDL_PARAMS
    cuda = compile_kernel(func).cuda_source
    body = _kernel_body(cuda)
    assert body.count(_WAIT) == 1
    wait = body.index(_WAIT)
    assert wait < body.index("offs_ptr[") < body.index("tvm_builtin_cuda_cta_sync();")
    assert not _GLOBAL_ACCESS.search(body[:wait])
    assemble(cuda)
