"""Multicast needs a cluster launch: refused when the kernel being written declares none."""

from __future__ import annotations

import pytest
from tvm.script import tirx as T

from tvm_tma.intrin import IntrinError


def _kernel(cluster: bool, bulk: bool):
    # fmt: off
    @T.prim_func
    def k(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (1024,), "uint8")
        T.device_entry()
        if cluster:
            T.cluster_id([1])
            T.cta_id_in_cluster([2])
        else:
            T.cta_id([2])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((1024,), "uint8", scope="shared.dyn")
        buf = T.decl_buffer((1024,), "uint8", dyn.data)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=64)
        if tid == 0:
            if bulk:
                T.tma.bulk_load(buf.ptr_to([0]), A.ptr_to([0]), 256, mbar.ptr_to([0]),
                                multicast_mask=3)
            else:
                T.tma.load(buf.ptr_to([0]), A.ptr_to([0]), [0, 0], mbar.ptr_to([0]),
                           multicast_mask=3)
    # fmt: on
    return k


@pytest.mark.parametrize("bulk", [False, True])
def test_multicast_without_a_cluster_is_refused(bulk):
    with pytest.raises(Exception) as info:
        _kernel(cluster=False, bulk=bulk)
    assert "[cluster-launch]" in str(info.value)
    assert ("bulk load" if bulk else "tensor load") in str(info.value)


@pytest.mark.parametrize("bulk", [False, True])
def test_multicast_inside_a_cluster_is_accepted(bulk):
    text = _kernel(cluster=True, bulk=bulk).script()
    assert "multicast=1" in text


def test_rule_is_a_verifier_rule():
    error = IntrinError("cluster-launch", "x")
    assert error.rule == "cluster-launch"
