"""One global dimension written as pieces whose strides compose (issue 21).

A ``TileLayout`` may spell one logical dimension as several pieces: 384 rows as ``4 x 96``
with strides ``96 * 64`` and ``64`` are simply 384 rows of stride 64, one run of memory.
The planner folds such pieces into one dimension before it splits the region across pieces
(``planner/global_view.py``, ``_compose``), so a region that cuts a piece (rows 4..260 cross
rows 96 and 192) plans exactly as the same copy over the plain layout: the same tensor map
(every field), the same coordinates, shared offset and issues. Pieces whose strides do not
compose (96-row blocks with a gap, interleaved rows) are still separate dims, and a region
that cuts one of them is still refused ``[layout]``. The shared side gets the same check: a
tile whose rows are written as composing blocks behaves as the plain tile.

CI checks the plans (exact numbers, against the plain layout's plan too), the bytes the
plans move on the TMA model, the generated kernels and ptxas; the GPU tests run the kernels
and compare every element bit-exactly, outputs poisoned first.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from plan_fields import plan_fields
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

import tvm_tma
from tvm_tma.planner import PlanError, plan
from tvm_tma.testing.copy_cases import CopyCase, expected_after
from tvm_tma.testing.runner import (
    assemble,
    compile_case,
    compile_kernel,
    inputs,
    plans_of,
    run_model,
    run_on_gpu,
)

ROWS, COLS = 384, 64
#: ``global_tiles`` spellings of a (384, 64) float16 tensor: (piece extents, piece strides).
#: Rows as 4 x 96 and as 2 x 2 x 96: every neighbour composes (outer = inner * extent).
TWO = ((4, 96, COLS), (96 * COLS, COLS, 1))
THREE = ((2, 2, 96, COLS), (192 * COLS, 96 * COLS, COLS, 1))
COMPOSED = {"4x96": TWO, "2x2x96": THREE}
#: 96-row blocks 64 halves apart (6208 = 96 * 64 + 64): the blocks do not compose.
GAPPED = ((4, 96, COLS), (96 * COLS + 64, COLS, 1))
#: Row 96 * a + b at 64 * a + 256 * b: interleaved rows, nothing composes.
INTERLEAVED = ((4, 96, COLS), (COLS, 4 * COLS, 1))
#: 192-row blocks 512 halves apart, each block two composing 96-row pieces.
BLOCKS = ((2, 2, 96, COLS), (192 * COLS + 512, 96 * COLS, COLS, 1))
#: The same blocks written as 2 x 192 (what BLOCKS must plan as).
BLOCKS_FOLDED = ((2, 192, COLS), (192 * COLS + 512, COLS, 1))


def _case(name: str, tiles, direction: str, start, extent, shared_layout: str = "row",
          stages: int = 0) -> CopyCase:
    """A float16 copy of the (384, 64) tensor laid out as ``tiles`` (None: plain)."""
    shape = ((stages,) if stages else ()) + tuple(extent)
    return CopyCase(name, "float16", direction, (ROWS, COLS), tuple(start), tuple(extent),
                    shape, shared_layout=shared_layout, stages=stages, global_tiles=tiles)



def _spec(dims, strides, box, swizzle) -> dict:
    """The expected TensorMapSpec fields of a float16 map (no promotion, no fill)."""
    return dict(dtype="float16", global_dims=dims, global_strides=strides, box_dims=box,
                element_strides=(1,) * len(box), swizzle=swizzle, interleave=0,
                l2_promotion=2, oob_fill=0)


#: name -> (start, extent, shared layout, stages, expected plan fields). Every region cuts a
#: 96-row piece of the composed spellings (it crosses row 96).
COPIES = {
    # rows 4..260: 16384 contiguous halves from 256, as 96 runs of 256 halves (run 1 on)
    "rows-4-260-row": ((4, 0), (256, 64), "row", 0, dict(
        tensor_map=_spec((256, 96), (512,), (256, 64), 0), coordinates=(0, 1),
        smem_offset=0, issue_axes=())),
    # the same rows into a 128B-swizzled tile: 64 halves (128 bytes) x 256 rows from row 4
    "rows-4-260-swizzle128": ((4, 0), (256, 64), "swizzle:3", 0, dict(
        tensor_map=_spec((64, 384), (128,), (64, 256), 3), coordinates=(0, 4),
        smem_offset=0, issue_axes=())),
    # columns 32..64 of rows 90..154 into a 64B-swizzled tile
    "rows-90-154-cols-32-64-swizzle64": ((90, 32), (64, 32), "swizzle:2", 0, dict(
        tensor_map=_spec((64, 384), (128,), (32, 64), 2), coordinates=(32, 90),
        smem_offset=0, issue_axes=())),
    # two stages of 64 rows from row 4 (stage 1: rows 68..132), a symbolic start
    "staged-rows-swizzle128": ((4, 0), (64, 64), "swizzle:3", 2, dict(
        tensor_map=_spec((64, 384), (128,), (64, 64), 3), coordinates=(0, "stage * 64 + 4"),
        smem_offset="stage * 4096", issue_axes=())),
}


def _planplan_fields(tiles, direction: str, name: str) -> dict:
    start, extent, shared, stages, _ = COPIES[name]
    (copy_plan, _), *_ = plans_of(_case(name, tiles, direction, start, extent, shared, stages))
    return plan_fields(copy_plan)


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
@pytest.mark.parametrize("name", sorted(COPIES))
@pytest.mark.parametrize("spelling", sorted(COMPOSED))
def test_composed_pieces_plan_as_the_plain_dimension(spelling, name, direction):
    plain = _planplan_fields(None, direction, name)
    composed = _planplan_fields(COMPOSED[spelling], direction, name)
    assert composed == plain
    expected = COPIES[name][4]
    assert {key: composed[key] for key in expected} == expected
    assert composed["direction"] == direction
    assert (composed["base_offset"], composed["edge_dims"], composed["host_checks"]) == (
        0, (), ())


@pytest.mark.parametrize("name", sorted(COPIES))
def test_the_regions_cut_a_piece_and_plan(name):
    """Each region crosses a 96-row boundary mid-piece: before the fold these were refused."""
    start, extent = COPIES[name][0][0], COPIES[name][1][0]
    stages = max(COPIES[name][3], 1)
    rows = range(start, start + extent * stages)
    assert 96 in rows and start % 96 != 0
    for tiles in COMPOSED.values():
        for direction in ("g2s", "s2g"):
            fields = _planplan_fields(tiles, direction, name)  # raised PlanError [layout] before
            assert fields["tensor_map"] == COPIES[name][4]["tensor_map"]


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
@pytest.mark.parametrize("spelling", sorted(COMPOSED))
def test_composed_plans_move_exactly_the_region(spelling, direction):
    """The plans, run on the TMA model, equal the copy TVM's layouts define."""
    for name, (start, extent, shared, stages, _) in COPIES.items():
        case = _case(name, COMPOSED[spelling], direction, start, extent, shared, stages)
        global_in, shared_in = inputs(case, seed=3)
        want_global, want_shared = expected_after(case, global_in, shared_in)
        got_global, got_shared = run_model(case, global_in, shared_in)
        np.testing.assert_array_equal(got_global.view(np.uint8), want_global.view(np.uint8))
        np.testing.assert_array_equal(got_shared.view(np.uint8), want_shared.view(np.uint8))


def test_a_split_coordinate_only_dimension_plans_as_one():
    """Rows of a (24576, 7168) bfloat16 tensor spelled 4 x 6144 (strides 6144 * 7168, 7168):
    rows 6080..6208 cross row 6144, and plan as over 24576 rows of 7168."""
    layout = TileLayout(S[(4, 6144, 7168) : (6144 * 7168, 7168, 1)])
    glob = tvm.tirx.decl_buffer((24576, 7168), "bfloat16", "A", layout=layout)
    smem = tvm.tirx.decl_buffer((128, 128), "bfloat16", "smem",
                                layout=TileLayout(S[128, 128]), scope="shared.dyn")
    g = tvm.tirx.BufferRegion(glob, [tvm.ir.Range.from_min_extent(6080, 128),
                                     tvm.ir.Range.from_min_extent(0, 128)])
    s = tvm.tirx.BufferRegion(smem, [tvm.ir.Range.from_min_extent(0, 128)] * 2)
    copy = plan(s, g)
    spec = copy.tensor_map
    assert spec.rank == 2 and spec.dtype == "bfloat16"
    assert spec.global_dims == (7168, 24576) and spec.global_strides == (14336,)
    assert spec.box_dims == (128, 128) and spec.element_strides == (1, 1)
    assert spec.swizzle == 0 and copy.coordinates == (0, 6080) and copy.issue_axes == ()


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
def test_composing_pieces_inside_a_tiled_dimension_fold(direction):
    """Rows in 192-row blocks with a gap, each block two composing 96-row pieces: the two
    fold into the block (rows 4..132 cut a 96-row piece and plan, as over 2 x 192 blocks),
    while a region cutting a block is still refused."""
    start, extent = (4, 0), (128, 64)
    folded = plans_of(_case("blocks", BLOCKS, direction, start, extent, "swizzle:3"))
    plain = plans_of(_case("blocks", BLOCKS_FOLDED, direction, start, extent, "swizzle:3"))
    assert plan_fields(folded[0][0]) == plan_fields(plain[0][0])
    assert plan_fields(folded[0][0])["tensor_map"] == _spec((64, 192, 2), (128, 25600),
                                                         (64, 128, 1), 3)
    assert plan_fields(folded[0][0])["coordinates"] == (0, 4, 0)
    with pytest.raises(PlanError) as error:
        plans_of(_case("cut-block", BLOCKS, direction, (150, 0), (64, 64), "swizzle:3"))
    assert error.value.rule == "layout"
    assert "cuts its layout piece of 192 elements (stride 64) partially" in error.value.detail


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
@pytest.mark.parametrize("tiles", [GAPPED, INTERLEAVED], ids=["gapped", "interleaved"])
def test_non_composing_pieces_cut_partially_are_refused(tiles, direction):
    with pytest.raises(PlanError) as error:
        plans_of(_case("cut", tiles, direction, (4, 0), (256, 64)))
    assert error.value.rule == "layout"
    assert "cuts its layout piece of 96 elements" in error.value.detail


@pytest.mark.parametrize("direction", ["g2s", "s2g"])
@pytest.mark.parametrize("rows", [16, 32])
def test_composed_shared_blocks_plan_as_the_plain_tile(rows, direction):
    """A shared tile whose rows are written as blocks of ``rows`` with no gap (the blocks
    compose) plans as the plain tile, also for a sub-region that cuts a block."""
    for s_start in ((0, 0), (8, 0)):
        plans = []
        for layout in ("row", f"blocked:{rows}:0"):
            case = CopyCase("shared-blocks", "float16", direction, (ROWS, COLS), (4, 0),
                            (64, 64), (128, 64), shared_layout=layout, shared_start=s_start,
                            shared_extent=(64, 64), global_tiles=TWO)
            plans.append(plan_fields(plans_of(case)[0][0]))
        assert plans[0] == plans[1]
        assert plans[0]["tensor_map"] == _spec((256, 96), (512,), (256, 16), 0)
        assert plans[0]["smem_offset"] == s_start[0] * 64


# ---- kernels ---------------------------------------------------------------------------
COPY_ROWS = (4, 260)
TILE_BYTES = (COPY_ROWS[1] - COPY_ROWS[0]) * COLS * 2
POISON = 0x5A5A


def roundtrip_kernel(tiles, swizzled: bool):
    """``main(A, B)``: rows 4..260 of A (a (384, 64) float16 argument laid out as ``tiles``,
    None: plain) go to a shared tile (row-major or 128B-swizzled) and from it to the same
    rows of B, both copies with ``dispatch="tma"``."""
    layout = TileLayout(S[ROWS, COLS] if tiles is None else S[tiles[0] : tiles[1]])
    rows = COPY_ROWS[1] - COPY_ROWS[0]
    tile_layout = (mma_shared_layout("float16", 3, (rows, COLS)) if swizzled
                   else TileLayout(S[rows, COLS]))
    lo, hi = COPY_ROWS

    # fmt: off
    @T.prim_func
    def main(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (ROWS, COLS), "float16", layout=layout)
        B = T.match_buffer(B_ptr, (ROWS, COLS), "float16", layout=layout)
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((TILE_BYTES + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((rows, COLS), "float16", dyn.data, layout=tile_layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=TILE_BYTES // 8)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.proxy.async_.shared__cta()
            Tx.copy_async(tile[:, :], A[lo:hi, :], dispatch="tma", mbar=mbar.ptr_to([0]))
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(TILE_BYTES))
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            Tx.copy_async(B[lo:hi, :], tile[:, :], dispatch="tma")
            T.ptx.cp.async_.bulk.commit_group()
            T.ptx.cp.async_.bulk.wait_group(0)
    # fmt: on
    return main


KERNELS = [(spelling, swizzled) for spelling in sorted(COMPOSED) for swizzled in (False, True)]
KERNEL_IDS = [f"{spelling}-{'swizzle128' if swizzled else 'row'}"
              for spelling, swizzled in KERNELS]


@pytest.mark.parametrize("spelling, swizzled", KERNELS, ids=KERNEL_IDS)
def test_composed_kernel_plans_as_plain_and_assembles(spelling, swizzled):
    composed = tvm_tma.explain(roundtrip_kernel(COMPOSED[spelling], swizzled)).copies
    plain = tvm_tma.explain(roundtrip_kernel(None, swizzled)).copies
    assert len(composed) == 2 and all(copy.planned for copy in composed)
    assert [plan_fields(c.plan) for c in composed] == [plan_fields(c.plan) for c in plain]
    built = compile_kernel(roundtrip_kernel(COMPOSED[spelling], swizzled))
    assert built.tma_call_sites == 2 and built.tensormap_params == 2
    assert built.host_source.count("load ptr, ptr @.tvm_func.tvm_tma.encode_tiled") == 2
    assert len(assemble(built.cuda_source)) > 0


#: CopyCases the GPU runs through the generic runner (views over a flat allocation).
GPU_CASES = [
    _case(f"{spelling}-{name}-{direction}", COMPOSED[spelling], direction, *COPIES[name][:4])
    for spelling in sorted(COMPOSED) for name in ("rows-90-154-cols-32-64-swizzle64",
                                                  "staged-rows-swizzle128")
    for direction in ("g2s", "s2g")
] + [_case(f"blocks-{direction}", BLOCKS, direction, (4, 0), (128, 64), "swizzle:3")
     for direction in ("g2s", "s2g")]


@pytest.mark.parametrize("case", GPU_CASES, ids=[case.name for case in GPU_CASES])
def test_composed_copy_case_assembles(case):
    assert len(assemble(compile_case(case).cuda_source)) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("spelling, swizzled", KERNELS, ids=KERNEL_IDS)
def test_composed_kernel_is_exact_on_gpu(spelling, swizzled):
    import torch

    executable = compile_kernel(roundtrip_kernel(COMPOSED[spelling], swizzled)).executable
    lo, hi = COPY_ROWS
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        source = rng.integers(0, 1 << 16, size=(ROWS, COLS), dtype=np.uint64).astype(np.uint16)
        a = torch.from_numpy(source.view(np.int16)).cuda().view(torch.float16)
        b = torch.from_numpy(np.full((ROWS, COLS), POISON, np.uint16).view(np.int16)).cuda()
        executable["main"](a, b.view(torch.float16))
        torch.cuda.synchronize()
        got = b.cpu().numpy().view(np.uint16)
        want = np.full_like(source, POISON)
        want[lo:hi] = source[lo:hi]
        wrong = np.flatnonzero(got != want)
        assert wrong.size == 0, (f"seed {seed}: {wrong.size} elements differ, first at flat "
                                 f"index {wrong[:5]}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=[case.name for case in GPU_CASES])
def test_composed_copy_case_is_exact_on_gpu(case):
    built = compile_case(case)
    for seed in (1, 2):
        ok, problems = run_on_gpu(case, built, seed=seed)
        assert ok, f"{case.name} (seed {seed}): {problems}"
