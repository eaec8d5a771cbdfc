"""A whole tile multicast by a mask reaches every receiving CTA once (issue 21).

With ``multicast=<mask>`` the CTA that runs the copy loads the whole tile into every CTA of
the mask. If every CTA of the cluster runs it into the same shared bytes, each receiver gets
the tile once per CTA and its mbarrier that many times the bytes it was armed for (the
tx-count underflows: undefined behaviour). Such a copy is refused with ``[multicast]``; its
neighbours plan, assemble for sm_90a and, on a Hopper GPU, deliver every element of every
CTA's tile exactly: one issuing CTA (``if rank == 0:``), each CTA sending its own slice of the
tile with the mask, and the tile dealt out with ``multicast=rank``.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tvm
from seed_kernels import multicast_issuers_kernel

import tvm_tma
from tvm_tma.explainer.report import format_kernel
from tvm_tma.testing.runner import assemble, compile_kernel

CLUSTERS = 3
POISON = 0xA5
MODES = ("one", "slices", "split")  # the legitimate neighbours of "duplicate"


def issuers_kernel(mode: str, ctas: int = 2, swizzle: int = 0, rows: int = 64,
                   cols: int = 64, clusters: int = CLUSTERS, dtype: str = "float16"):
    """:func:`seed_kernels.multicast_issuers_kernel` on this module's clusters."""
    return multicast_issuers_kernel(mode, ctas, swizzle, rows, cols, clusters, dtype)


def _load_calls(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines()
            if line.strip().startswith("tvm_tma_load_")]


# ---- the duplicate is refused, by the lowering and by explain ---------------------------

def test_every_cta_multicasting_the_same_tile_is_refused():
    kernel = issuers_kernel("duplicate")
    with pytest.raises(Exception) as info:
        compile_kernel(kernel)
    message = str(info.value)
    assert "[multicast] multicast mask 0b11" in message, message[-2000:]
    assert "rank = 0, 1" in message and "the same shared bytes" in message
    assert "multicast=rank" in message and "`if rank == 0:`" in message


def test_explain_names_the_rule_the_mask_the_ranks_and_the_fix():
    (copy,) = tvm_tma.explain(issuers_kernel("duplicate", ctas=4)).copies
    assert copy.rule == "multicast"
    assert copy.detail.startswith("multicast mask 0b1111: 4 CTAs of the cluster issue this "
                                  "load (rank = 0, 1, 2, 3;")
    assert "the CTAs where rank = 0 and rank = 1 write the same shared bytes" in copy.detail
    assert "A[cluster * 64:cluster * 64 + 64, 0:64] into tile[0:64, 0:64]" in copy.detail
    assert "tx-count underflows" in copy.detail
    assert "deal the tile out with multicast=rank, or issue the copy from one CTA: " \
        "`if rank == 0:`" in copy.detail
    assert "if rank == 0:" in copy.hint and "own slice" in copy.hint
    assert "refused [multicast]" in format_kernel(tvm_tma.explain(issuers_kernel("duplicate")))


# ---- the three neighbours plan and assemble ----------------------------------------------

NEIGHBOURS = [(mode, ctas, swizzle) for mode in MODES for ctas, swizzle in
              ((2, 0), (2, 3), (4, 0), (4, 3))]


def _ids(case) -> str:
    mode, ctas, swizzle = case
    return f"{mode}-{ctas}ctas-swizzle{swizzle}"


@pytest.mark.parametrize("case", NEIGHBOURS, ids=_ids)
def test_neighbour_plans_and_assembles(case):
    mode, ctas, swizzle = case
    kernel = issuers_kernel(mode, ctas, swizzle)
    (copy,) = tvm_tma.explain(kernel).copies
    assert copy.rule is None, copy.detail
    built = compile_kernel(kernel)
    calls = _load_calls(built.cuda_source)
    everyone = (1 << ctas) - 1
    assert calls and all(call.endswith(f"(ushort){everyone});") for call in calls)
    assert ".multicast::cluster" in built.cuda_source
    issued = len(calls) * copy.plan.bytes_per_issue
    # Per CTA: the whole tile from CTA 0, a 1/ctas slice (split or dealt out) from each.
    assert issued == (64 * 64 * 2 if mode == "one" else 64 * 64 * 2 // ctas)
    assert len(assemble(built.cuda_source)) > 0


# ---- who issues, and where: more kernels, planned as the dispatch plans them -----------

TEMPLATE = '''
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

@T.prim_func
def kernel(A_ptr: T.handle):
    K = T.int32()
    A = T.match_buffer(A_ptr, ({rows}, 128), "float16", layout=TileLayout(S[{rows}, 128]))
    T.device_entry()
    cl = T.cluster_id([2])
    {ranks} = T.cta_id_in_cluster([{shape}])
    tid = T.thread_id([128])
    dyn = T.alloc_buffer((32832,), "uint8", scope="shared.dyn")
    tile = T.decl_buffer((64, 64), "float16", dyn.data, layout=TileLayout(S[64, 64]))
    ring = T.decl_buffer((2, 64, 64), "float16", dyn.data, layout=TileLayout(S[2, 64, 64]))
    mbar = T.decl_buffer((2,), "uint64", dyn.data, elem_offset=4096)
    t = T.alloc_local((1,), "int32")
    if tid == 0:
{body}
'''


def _kernel(body: str, shape=(2,), rows="512"):
    """A kernel with one copy (``rows="K"``: A has a number of rows the host passes)."""
    ranks = "rank" if len(shape) == 1 else "rank, rank_y"
    source = TEMPLATE.format(ranks=ranks, shape=", ".join(map(str, shape)), rows=rows,
                             body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8))
    path = Path("/tmp") / f"tvm_tma_issuers_{abs(hash(source))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def _load(dst: str, src: str, mask) -> str:
    return f'Tx.copy_async({dst}, {src}, dispatch="tma", mbar=mbar.ptr_to([0]), ' \
           f'multicast={mask})'


WHOLE = _load("tile[:, :]", "A[0:64, 0:64]", "0b11")

REFUSED = {  # name: (body, cluster shape, what the detail says)
    "whole-tile-from-every-cta-of-4": (
        _load("tile[:, :]", "A[cl * 64:cl * 64 + 64, 0:64]", "0b1111"), (4,),
        "multicast mask 0b1111: 4 CTAs of the cluster issue this load (rank = 0, 1, 2, 3;"),
    "a-mask-of-one-cta-from-both": (
        _load("tile[:, :]", "A[0:64, 0:64]", "0b01"), (2,),
        "multicast mask 0b1: 2 CTAs"),
    "a-mask-of-part-of-the-cluster": (
        _load("tile[:, :]", "A[0:64, 0:64]", "0b0011"), (4,), "multicast mask 0b11: 4 CTAs"),
    "different-rows-into-the-same-shared-rows": (
        _load("tile[0:32, :]", "A[rank * 32:rank * 32 + 32, 0:64]", 3), (2,),
        "rank = 0: A[0:32, 0:64] into tile[0:32, 0:64]; rank = 1: A[32:64, 0:64] into "
        "tile[0:32, 0:64]"),
    "slices-that-overlap": (
        "if rank < 2:\n    " + _load("tile[rank * 16:rank * 16 + 32, :]",
                                     "A[rank * 32:rank * 32 + 32, 0:64]", "0b1111"), (4,),
        "2 CTAs of the cluster issue this load (rank = 0, 1; no guard leaves one issuer), and "
        "the CTAs where rank = 0 and rank = 1 write overlapping shared bytes (2048 bytes "
        "apart)"),
    "every-round-of-a-ring": (
        "for k in T.serial(4):\n    " + _load("ring[k % 2, :, :]", "A[k * 64:k * 64 + 64, 0:64]",
                                              3), (2,),
        "A[k * 64:k * 64 + 64, 0:64] into ring[k % 2:k % 2 + 1, 0:64, 0:64]"),
    "a-2d-cluster": (
        _load("tile[:, :]", "A[0:64, 0:64]", "0b1111"), (2, 2),
        "4 CTAs of the cluster issue this load ((rank, rank_y) = (0, 0), (0, 1), (1, 0), "
        "(1, 1);"),
    "a-mask-expression-two-ctas-share": (  # rank 0 sends to CTAs 0, 1; rank 1 to CTA 0
        _load("tile[:, :]", "A[0:64, 0:64]", 'T.uint16(3) >> T.Cast("uint16", rank)'), (2,),
        "(mask 0b11 where rank = 0, 0b1 where rank = 1)"),
    "an-offset-each-cta-computes-for-itself": (  # the cluster id: not proven equal in both
        _load("tile[cl % 2 * 32:cl % 2 * 32 + 32, :]", "A[0:32, 0:64]", 3), (2,),
        "shared bytes that are not provably disjoint"),
    "rounds-that-depend-on-the-rank": (  # CTA r runs k in [2r, 2r + 2): no common round
        "for k in T.serial(rank * 2, rank * 2 + 2):\n    " + _load(
            "ring[k % 2, :, :]", "A[k * 64:k * 64 + 64, 0:64]", 3), (2,),
        "shared bytes that are not provably disjoint"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_more_than_one_delivery_is_refused(name):
    body, shape, says = REFUSED[name]
    (copy,) = tvm_tma.explain(_kernel(body, shape)).copies
    assert copy.rule == "multicast", (copy.rule, copy.detail)
    assert says in copy.detail, copy.detail
    assert "issue the copy from one CTA: `if rank == 0" in copy.detail


ACCEPTED = {  # name: (body, cluster shape)
    "one-issuer-under-a-guard": ("if rank == 0:\n    " + WHOLE, (2,)),
    "one-issuer-in-a-4-cta-cluster": ("if rank == 3:\n    " + _load(
        "tile[:, :]", "A[0:64, 0:64]", "0b1111"), (4,)),
    "own-slices-of-the-same-rows": (
        _load("tile[rank * 32:rank * 32 + 32, :]", "A[0:32, 0:64]", 3), (2,)),
    "own-slices-from-two-of-four-ctas": (
        "if rank < 2:\n    " + _load("tile[rank * 32:rank * 32 + 32, :]",
                                     "A[rank * 32:rank * 32 + 32, 0:64]", "0b1111"), (4,)),
    "a-slice-through-a-local-scalar": (
        "t[0] = rank * 32\n" + _load("tile[t[0]:t[0] + 32, :]", "A[0:32, 0:64]", 3), (2,)),
    "own-slices-of-each-ring-stage": (
        "for k in T.serial(4):\n    " + _load("ring[k % 2, rank * 32:rank * 32 + 32, :]",
                                              "A[k * 64 + rank * 32:k * 64 + rank * 32 + 32, "
                                              "0:64]", 3), (2,)),
    "issuers-taking-turns": (  # one issuer per round: rank k % 2
        "for k in T.serial(4):\n    if k % 2 == rank:\n        " + _load(
            "ring[k % 2, :, :]", "A[k * 64:k * 64 + 64, 0:64]", 3), (2,)),
    "own-slices-in-a-2d-cluster": (
        _load("tile[(rank + rank_y * 2) * 16:(rank + rank_y * 2) * 16 + 16, :]",
              "A[0:16, 0:64]", "0b1111"), (2, 2)),
    "each-cta-to-itself": (
        _load("tile[:, :]", "A[0:64, 0:64]", 'T.uint16(1) << T.Cast("uint16", rank)'), (2,)),
    "pairs-of-ctas-each-slicing": (
        _load("tile[rank % 2 * 32:rank % 2 * 32 + 32, :]", "A[0:32, 0:64]",
              'T.uint16(3) << T.Cast("uint16", rank // 2 * 2)'), (4,)),
    "dealt-out-with-multicast-rank": (_load("tile[:, :]", "A[0:64, 0:64]", "rank"), (2,)),
    "own-slices-of-rounds-that-depend-on-the-rank": (  # any two stages: distinct halves
        "for k in T.serial(rank * 2, rank * 2 + 2):\n    " + _load(
            "ring[k % 2, rank * 32:rank * 32 + 32, :]", "A[k * 64:k * 64 + 32, 0:64]", 3),
        (2,)),
    "own-slices-of-a-ring-over-k-the-host-passes": (
        "for k in T.serial(K // 64):\n    " + _load(
            "ring[k % 2, rank * 32:rank * 32 + 32, :]",
            "A[k * 64 + rank * 32:k * 64 + rank * 32 + 32, 0:64]", 3), (2,), "K"),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_one_delivery_per_receiver_plans(name):
    (copy,) = tvm_tma.explain(_kernel(*ACCEPTED[name])).copies
    assert copy.rule is None, copy.detail


def test_a_whole_ring_stage_over_k_the_host_passes_is_refused():
    body = "for k in T.serial(K // 64):\n    " + _load(
        "ring[k % 2, :, :]", "A[k * 64:k * 64 + 64, 0:64]", 3)
    (copy,) = tvm_tma.explain(_kernel(body, rows="K")).copies
    assert copy.rule == "multicast" and "the same shared bytes" in copy.detail, copy.detail


@pytest.mark.parametrize("name", ["own-slices-of-each-ring-stage", "issuers-taking-turns",
                                  "own-slices-in-a-2d-cluster"])
def test_accepted_kernel_assembles(name):
    built = compile_kernel(_kernel(*ACCEPTED[name]))
    assert ".multicast::cluster" in built.cuda_source
    assert len(assemble(built.cuda_source)) > 0


# ---- on the GPU ------------------------------------------------------------------------

def _run(built, *arrays: np.ndarray) -> list[np.ndarray]:
    device = tvm.cuda(0)
    tensors = [tvm.runtime.tensor(array, device) for array in arrays]
    built.executable["main"](*tensors)
    device.sync()
    return [tensor.numpy() for tensor in tensors]


@pytest.mark.gpu
@pytest.mark.parametrize("case", NEIGHBOURS, ids=_ids)
def test_every_cta_receives_the_tile_exactly_once(case):
    """Random input, poisoned output, every element of every CTA's tile compared bit for
    bit (a CTA whose mbarrier got too few bytes would hang; one with a missing slice would
    keep the poison)."""
    mode, ctas, swizzle = case
    rows, cols = 64, 64
    built = compile_kernel(issuers_kernel(mode, ctas, swizzle))
    rng = np.random.default_rng(ctas * 10 + swizzle + MODES.index(mode))
    source = rng.integers(0, 1 << 16, size=(CLUSTERS * rows, cols),
                          dtype=np.uint16).view(np.float16)
    out = np.full((CLUSTERS, ctas, rows, cols), POISON * 0x0101, dtype=np.uint16).view(
        np.float16)
    _, result = _run(built, source, out)
    for cluster in range(CLUSTERS):
        tile = source[cluster * rows:(cluster + 1) * rows].view(np.uint16)
        for rank in range(ctas):
            got = result[cluster, rank].view(np.uint16)
            wrong = np.argwhere(got != tile)
            assert wrong.size == 0, (f"cluster {cluster}, CTA {rank}: {len(wrong)} elements "
                                     f"differ, first at {tuple(wrong[0])}")
