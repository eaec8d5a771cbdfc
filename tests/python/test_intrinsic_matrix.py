"""Every intrinsic variant renders its exact PTX, round-trips through TVMScript, and
assembles with ptxas (sm_90a for every Hopper form; sm_100a for all forms)."""

from __future__ import annotations

import re

import pytest
import tvm
from intrinsic_variants import VARIANTS, Operands
from test_dispatch import _local_gpu_is_not_blackwell
from tvm.script import tirx as T

from tvm_tma.testing.runner import assemble


def _emit_all(calls):
    for call in calls:
        T.evaluate(call)


def _kernel(variants):
    def calls(A, arena, mbar):
        operands = Operands(desc=A.ptr_to([0]), smem=arena.ptr_to([0]),
                            sdesc=arena.ptr_to([1024]), mbar=mbar.ptr_to([0]),
                            glob=A.ptr_to([256]))
        return [variant.build(operands) for variant in variants]

    # fmt: off
    @T.prim_func
    def matrix(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4096,), "uint8")
        T.device_entry()
        T.cluster_id([1])
        T.cta_id_in_cluster([2])  # multicast forms need a cluster launch
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((4096,), "uint8", scope="shared.dyn")
        arena = T.decl_buffer((4096,), "uint8", dyn.data)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=384)
        if tid == 0:
            _emit_all(calls(A, arena, mbar))
    # fmt: on
    return matrix


def _cuda(func, arch):
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    executable = tvm.compile(tvm.IRModule({"main": func}), target=target, tir_pipeline="tirx")
    return executable.mod.imports[0].inspect_source()


def _asm_lines(cuda: str) -> list[str]:
    return re.findall(r'asm volatile\("([^"]*)"', cuda)


HOPPER = [v for v in VARIANTS if v.arch == 90]


def test_matrix_size_and_families():
    assert len(VARIANTS) >= 150
    families = {v.label.split("-")[0] for v in VARIANTS}
    assert families == {"load", "store", "reduce", "prefetch", "prefetch_descriptor",
                        "bulk_load", "bulk_store", "bulk_copy_cluster", "commit_group",
                        "wait_group", "replace_address", "replace_dim", "replace_stride",
                        "rebind", "fence_acquire", "fence_release", "cp_fenceproxy", "seed"}


def test_every_variant_renders_its_exact_ptx_and_assembles_for_sm90a():
    cuda = _cuda(_kernel(HOPPER), "sm_90a")
    lines = _asm_lines(cuda)
    for variant in HOPPER:
        assert list(variant.ptx) == _sequence_in(lines, variant.ptx), variant.label
    assert len(assemble(cuda, "sm_90a")) > 0


def _sequence_in(lines: list[str], wanted: tuple[str, ...]) -> list[str]:
    """``wanted`` if it occurs as consecutive asm lines (one helper), else what was found."""
    for start in range(len(lines) - len(wanted) + 1):
        if tuple(lines[start:start + len(wanted)]) == wanted:
            return list(wanted)
    return [line for line in lines if line.split(" ")[0] == wanted[0].split(" ")[0]]


@pytest.mark.skipif(_local_gpu_is_not_blackwell(),
                    reason="TVM builds sm_100a CUDA eagerly for the local non-Blackwell GPU")
def test_every_variant_assembles_for_sm100a():
    cuda = _cuda(_kernel(VARIANTS), "sm_100a")
    lines = _asm_lines(cuda)
    for variant in VARIANTS:
        assert list(variant.ptx) == _sequence_in(lines, variant.ptx), variant.label
    assert len(assemble(cuda, "sm_100a")) > 0


def test_printed_kernel_round_trips():
    func = _kernel(VARIANTS)
    text = func.script()
    assert text.count("T.tma.") == len(VARIANTS)
    reparsed = tvm.script.from_source(text)
    tvm.ir.assert_structural_equal(func, reparsed)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_90"])
def test_newer_forms_are_refused_when_the_kernel_is_compiled(arch):
    """Built outside any target, an sm_100a-only (or sm_90a-only) form still cannot reach a
    Hopper (or plain sm_90) binary: the CUDA compiler stops with the rule's name."""
    newer = [v for v in VARIANTS if v.arch == 100] if arch == "sm_90a" else [
        v for v in VARIANTS if v.label.startswith("rebind")]
    with pytest.raises(Exception, match=r"tvm_tma \[arch\]: .* needs sm_(100|90)a"):
        assemble(_cuda(_kernel(newer[:1]), arch), arch)
