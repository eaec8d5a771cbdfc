"""Parsing kernels leaves nothing behind in the package: facts travel in the IR (issue 10)."""

from __future__ import annotations

import gc
import sys

from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from tvm_tma.dispatch.facts import FACTS_KEY
from tvm_tma.explainer.collect import tma_copies

KERNELS = 300  # a leak of one object a kernel shows as 300, ten times the bound


def _parse_one(ctas: int):
    """A CTA-dependent TMA copy, parsed afresh on every call (a new kernel each time)."""

    # fmt: off
    @T.prim_func
    def tiled(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (64 * ctas, 64), "float16",
                           layout=TileLayout(S[64 * ctas, 64]))
        T.device_entry()
        cta = T.cta_id([ctas])
        tid = T.thread_id([128])
        dyn = T.alloc_buffer((8192 + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=1024)
        if tid == 0:
            Tx.copy_async(tile[:, :], A[cta * 64:cta * 64 + 64, :], dispatch="tma",
                          mbar=mbar.ptr_to([0]))
    # fmt: on
    return tiled


def _package_state() -> int:
    """Entries held by every module-level container of the package."""
    total = 0
    for name, module in list(sys.modules.items()):
        if not (name == "tvm_tma" or name.startswith("tvm_tma.")) or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, (dict, list, set, tuple)) and not isinstance(value, type):
                total += len(value)
    return total


def test_scope_id_ranges_travel_in_the_copy():
    func = _parse_one(7)
    (site,) = tma_copies(func)
    facts = [str(f) for f in site.op.config[FACTS_KEY]]
    assert facts == ["0 <= cta and cta < 7", "0 <= tid and tid < 128", "tid == 0"]


def test_parsing_three_hundred_kernels_leaves_no_entries_behind():
    for ctas in range(1, 21):  # warm every cache the parser and TVM keep for themselves
        _parse_one(ctas)
    gc.collect()
    state, objects = _package_state(), len(gc.get_objects())
    for index in range(KERNELS):
        _parse_one(1 + index % 200)
    gc.collect()
    assert _package_state() == state
    # nothing per kernel survives anywhere in Python: fewer than one object per 10 kernels
    assert len(gc.get_objects()) - objects < KERNELS // 10
