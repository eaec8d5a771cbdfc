"""Bounds only the launch can decide are asserted by the host before the kernel starts.

The upstream hgemm pattern: ``A[0:64, k0:k0 + 64]`` of an ``(M, K)`` tensor whose ``M`` is
a kernel argument. The copy is right for ``M >= 64`` and wrong otherwise; the planner
states ``64 <= M`` and the host code checks it, so ``M = 128`` copies bit-exactly and
``M = 32`` raises a ValueError naming the rule, before anything touches the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import ComposeLayout, S, TileLayout

import tvm_tma
from tvm_tma.testing.runner import assemble, compile_kernel

K, BLK_M, BLK_K, STAGES = 256, 64, 64, 2
SWIZZLED = ComposeLayout(3, 3, 3, TileLayout(S[(STAGES, BLK_M, BLK_K):(BLK_M * BLK_K, BLK_K, 1)]))
SMEM = STAGES * BLK_M * BLK_K * 2


def symbolic_rows_kernel():
    """Two stages of the first 64 rows (columns k * 64..) of an (M, 256) tensor whose M is
    bound at launch, written back to a (2, 64, 64) output (as upstream's test writes it)."""

    # fmt: off
    @T.prim_func
    def symbolic_rows(A_ptr: T.handle, B_ptr: T.handle):
        M = T.int32()
        A = T.match_buffer(A_ptr, [M, K], "float16")
        B = T.match_buffer(B_ptr, [STAGES, BLK_M, BLK_K], "float16")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer([SMEM + 64], "uint8", scope="shared.dyn")
        A_smem = T.decl_buffer([STAGES, BLK_M, BLK_K], "float16", dyn.data, elem_offset=0,
                               layout=SWIZZLED)
        mbarrier = T.decl_buffer([1], "uint64", dyn.data, elem_offset=SMEM // 8)
        mbar = T.meta_var(mbarrier.ptr_to([0]))
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar, T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        for ks in range(STAGES):
            if tid == 0:
                Tx.copy_async(A_smem[ks, :, :], A[0:BLK_M, ks * BLK_K:(ks + 1) * BLK_K],
                              dispatch="tma", mbar=mbar)
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar, T.uint32(BLK_M * BLK_K * 2))
            T.cuda.mbarrier_wait(mbar, ks % 2)
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        if tid == 0:
            for ks in range(STAGES):
                Tx.copy_async(B[ks, :, :], A_smem[ks, :, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return symbolic_rows


def test_the_bound_is_a_launch_check():
    load, store = tvm_tma.explain(symbolic_rows_kernel()).copies
    assert load.planned and store.planned
    (check,) = load.plan.host_checks
    assert str(check.condition) == "64 <= M"
    assert check.message == ("[region-bounds] global dimension 0: the copy needs 64 <= M "
                             "(its region [0, 0 + 64))")
    assert store.plan.host_checks == ()  # B's shape is static: proven


def test_launch_check_is_compiled_once_and_assembles():
    built = compile_kernel(symbolic_rows_kernel())
    assert built.host_source.count("the copy needs 64 <= M") == 1
    assert len(assemble(built.cuda_source)) > 0


@pytest.mark.gpu
def test_launch_check_passes_and_fails_on_gpu():
    import torch

    executable = compile_kernel(symbolic_rows_kernel()).executable
    rows = np.random.default_rng(5).integers(0, 1 << 16, size=(128, K), dtype=np.uint16)
    a = torch.from_numpy(rows.view(np.int16)).cuda().view(torch.float16)
    out = torch.full((STAGES, BLK_M, BLK_K), 0x5A5A, dtype=torch.int16, device="cuda")
    executable["main"](a, out.view(torch.float16))
    torch.cuda.synchronize()
    want = np.stack([rows[:BLK_M, ks * BLK_K:(ks + 1) * BLK_K] for ks in range(STAGES)])
    np.testing.assert_array_equal(out.cpu().numpy().view(np.uint16), want)
    with pytest.raises(ValueError, match=r"\[region-bounds\].*64 <= M"):
        executable["main"](a[:32], out.view(torch.float16))
    executable["main"](a, out.view(torch.float16))  # the GPU is fine afterwards
    torch.cuda.synchronize()


def test_cta_dependent_start_checks_its_largest_value():
    """cta < 8 tiles of 64 rows need 512 <= M; a start that can be negative is refused."""
    import tvm

    from tvm_tma.planner import PlanError, plan

    m, cta = tvm.tirx.Var("M", "int32"), tvm.tirx.Var("cta", "int32")
    glob = tvm.tirx.decl_buffer((m, 64), "float16", "A", layout=TileLayout(S[m, 64]))
    smem = tvm.tirx.decl_buffer((64, 64), "float16", "smem", scope="shared.dyn",
                                layout=TileLayout(S[64, 64]))

    def region(start):
        return tvm.tirx.BufferRegion(glob, [tvm.ir.Range.from_min_extent(start, 64),
                                            tvm.ir.Range.from_min_extent(0, 64)])

    whole = tvm.tirx.BufferRegion(smem, [tvm.ir.Range(0, 64), tvm.ir.Range(0, 64)])
    ranges = {cta: tvm.ir.Range.from_min_extent(0, 8)}
    copy = plan(whole, region(cta * 64), var_ranges=ranges)
    assert [str(c.condition) for c in copy.host_checks] == ["512 <= M"]
    with pytest.raises(PlanError) as info:
        plan(whole, region(cta * 64 - 8), var_ranges=ranges)
    assert info.value.rule == "region-bounds"
