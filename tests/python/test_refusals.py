"""Every refusal names its rule and the offending value (planner and dispatch level)."""

from __future__ import annotations

import pytest
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import ComposeLayout, S, TileLayout

from tvm_tma.planner import PlanError, plan
from tvm_tma.testing.copy_cases import CopyCase, planner_regions

SM90A = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def _ranges(starts, extents):
    return [tvm.ir.Range.from_min_extent(s, e) for s, e in zip(starts, extents)]


def _global(shape, dtype="float16", strides=None):
    layout = TileLayout(S[tuple(shape)] if strides is None else S[tuple(shape) : tuple(strides)])
    return tvm.tirx.decl_buffer(shape, dtype, "A", layout=layout)


def _shared(shape, dtype="float16", layout=None, elem_offset=0):
    layout = layout if layout is not None else TileLayout(S[tuple(shape)])
    return tvm.tirx.decl_buffer(shape, dtype, "smem", elem_offset=elem_offset, layout=layout,
                                scope="shared.dyn")


def _refusal(dst, src, **kwargs) -> PlanError:
    with pytest.raises(PlanError) as info:
        plan(dst, src, **kwargs)
    return info.value


def _whole(buffer):
    return tvm.tirx.BufferRegion(buffer, _ranges([0] * len(buffer.shape), buffer.shape))


def test_rank_over_5_after_shrinking():
    # Six padded (non-contiguous) dims: no dimension can fold into another, even boxed as 1.
    shape = (2, 2, 2, 2, 8, 64)
    strides, step = [], 1
    for extent in reversed(shape):
        strides.insert(0, step)
        step = step * extent + 64
    error = _refusal(_whole(_shared(shape)), _whole(_global(shape, strides=strides)))
    assert error.rule == "rank"
    assert "rank-6" in str(error)


def test_shrinking_the_chain_makes_room():
    # 6-D tensor with padded rows (pitch 72): rows and columns cannot merge, so the full
    # chain needs rank 6; boxing the outermost batch as 1 lets it fold into the next batch
    # dim (rank 5) at the cost of a 2-step issue loop.
    shape = (3, 3, 3, 3, 32, 64)
    strides, step = [72, 1], 72 * 32
    for extent in reversed(shape[:4]):
        strides.insert(0, step)
        step *= extent
    glob = _global(shape, strides=strides)
    g = tvm.tirx.BufferRegion(glob, _ranges([0, 0, 0, 0, 0, 0], [2, 2, 2, 2, 8, 64]))
    copy = plan(_whole(_shared((2, 2, 2, 2, 8, 64))), g)
    assert copy.rank == 5
    assert copy.num_issues == 2
    assert copy.tensor_map.box_dims == (64, 8, 2, 2, 2)


def test_global_stride_not_16_bytes():
    glob = _global((8, 100))  # rows of 200 bytes
    g = tvm.tirx.BufferRegion(glob, _ranges([0, 0], [8, 64]))
    error = _refusal(_whole(_shared((8, 64))), g)
    assert error.rule == "global-stride"
    assert "200 bytes" in str(error)


def test_inner_box_wider_than_swizzle_span():
    # 96 float16 = 192 bytes per row (of a 256-wide tensor) cannot be cut into whole
    # 128-byte swizzle spans.
    layout = ComposeLayout(3, 3, 3, TileLayout(S[8, 96]))
    g = tvm.tirx.BufferRegion(_global((8, 256)), _ranges([0, 0], [8, 96]))
    error = _refusal(_whole(_shared((8, 96), layout=layout)), g)
    assert error.rule == "swizzle-span"
    assert "192 bytes" in str(error) and "128-byte" in str(error)


def test_inner_box_narrower_than_swizzle_span():
    layout = ComposeLayout(3, 3, 3, TileLayout(S[8, 32]))
    g = tvm.tirx.BufferRegion(_global((8, 256)), _ranges([0, 64], [8, 32]))
    error = _refusal(_whole(_shared((8, 32), layout=layout)), g)
    assert error.rule == "swizzle-span"
    assert "64 bytes" in str(error)


@pytest.mark.parametrize("shape", [(8, 96), (8, 32), (4, 64), (2, 8, 32)])
def test_whole_contiguous_tensor_is_one_run_of_swizzle_spans(shape):
    """A whole tensor is one contiguous run on both sides, and TMA swizzles by shared address
    (as TVM's swizzle does by offset): rows of 96 or 32 halves are no obstacle, the run is
    cut into 128-byte rows. Checked on the TMA model against TVM's layout."""
    import numpy as np

    from tvm_tma.testing.layout_eval import layout_offsets
    from tvm_tma.testing.tma_model import execute_plan

    layout = ComposeLayout(3, 3, 3, TileLayout(S[shape]))
    copy = plan(_whole(_shared(shape, layout=layout)), _whole(_global(shape)))
    count = 1
    for extent in shape:
        count *= extent
    assert copy.tensor_map.box_dims == (64, count // 64) and copy.num_issues == 1
    data = np.random.default_rng(3).integers(0, 1 << 16, count, dtype=np.uint16)
    offsets = layout_offsets(layout, shape).reshape(-1)
    arena = np.zeros(4096, dtype=np.uint16)
    execute_plan(copy, data.view(np.uint8).copy(), arena.view(np.uint8), 2)
    np.testing.assert_array_equal(arena[offsets], data)


def test_shared_address_not_128_byte_aligned():
    error = _refusal(_whole(_shared((8, 64), elem_offset=32)), _whole(_global((8, 64))))
    assert error.rule == "smem-align-128"
    assert "64 bytes" in str(error)


def test_shared_address_alignment_unprovable_for_a_free_variable():
    row = tvm.tirx.Var("row", "int32")
    smem = _shared((64, 32))  # rows of 64 bytes: row * 64 is 128-aligned only for even rows
    s = tvm.tirx.BufferRegion(smem, _ranges([row, 0], [1, 32]))
    g = tvm.tirx.BufferRegion(_global((64, 32)), _ranges([0, 0], [1, 32]))
    error = _refusal(s, g, var_ranges={row: tvm.ir.Range.from_min_extent(0, 64)})
    assert error.rule == "smem-align-128"
    assert "row" in str(error)


def test_swizzled_base_off_the_pattern_period():
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

    layout = mma_shared_layout("float16", 3, (8, 64))
    smem = _shared((8, 64), layout=layout, elem_offset=64)  # 128 B: aligned, off 1024 B
    error = _refusal(_whole(smem), _whole(_global((8, 64))))
    assert error.rule == "swizzle-base-period"
    assert "128 bytes" in str(error) and "1024-byte" in str(error)


def test_region_past_the_tensor():
    g = tvm.tirx.BufferRegion(_global((8, 256)), _ranges([4, 0], [8, 256]))
    error = _refusal(_whole(_shared((8, 256))), g)
    assert error.rule == "region-bounds"
    assert "[4, 4 + 8)" in str(error) and "[0, 8)" in str(error)


def test_region_bound_unprovable():
    block = tvm.tirx.Var("bx", "int32")
    g = tvm.tirx.BufferRegion(_global((100, 64)), _ranges([block * 8, 0], [8, 64]))
    error = _refusal(_whole(_shared((8, 64))), g,
                     var_ranges={block: tvm.ir.Range.from_min_extent(0, 13)})
    assert error.rule == "region-bounds"


def test_region_bound_proven_from_the_launch_range():
    block = tvm.tirx.Var("bx", "int32")
    g = tvm.tirx.BufferRegion(_global((104, 64)), _ranges([block * 8, 0], [8, 64]))
    copy = plan(_whole(_shared((8, 64))), g,
                var_ranges={block: tvm.ir.Range.from_min_extent(0, 13)})
    # Whole rows merge into one run; 512 halves promote to 256 uint32 at bx * 256.
    assert copy.rank == 1 and str(copy.coordinates[0]) == "bx * 256"


def test_dtype_mismatch():
    error = _refusal(_whole(_shared((8, 64), dtype="bfloat16")), _whole(_global((8, 64))))
    assert error.rule == "dtype"
    assert "bfloat16" in str(error) and "float16" in str(error)


def test_transposed_copy_has_no_contiguous_inner_box():
    glob = _global((64, 8), strides=(1, 64))  # column-major: rows are contiguous
    g = tvm.tirx.BufferRegion(glob, _ranges([0, 0], [64, 8]))
    error = _refusal(_whole(_shared((64, 8))), g)
    assert error.rule == "innermost-stride"


def test_not_global_shared():
    a = _shared((8, 64))
    b = _shared((8, 64))
    error = _refusal(_whole(a), _whole(b))
    assert error.rule == "direction"


def test_matrix_case_helper_agrees_with_direct_regions():
    case = CopyCase("x", "float16", "g2s", (8, 128), (0, 0), (8, 64), (8, 64))
    assert plan(*planner_regions(case)).rank == 2


# ---- dispatch level: the error surfaces from tvm.compile with the rule name ----------

NB = 8 * 64 * 2


def _kernel(options: str, *, in_thread: bool = True, shared_dtype: str = "float16"):
    """A small kernel with one copy_async written with ``options`` (a Python source suffix)."""
    scope = "Tx" if in_thread else "Tx.cta"
    copy_g2s = scope + ".copy_async(S_[:, :], A[:, :], dispatch='tma'" + options + ")"
    env = {}
    body = f"""
@T.prim_func
def k(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, 64), "float16", layout=TileLayout(S[8, 64]))
    T.device_entry(); T.cta_id([1]); tid = T.thread_id([128])
    dyn = T.alloc_buffer((NB + 64,), "uint8", scope="shared.dyn")
    S_ = T.decl_buffer((8, 64), "{shared_dtype}", dyn.data, elem_offset=0,
                       layout=TileLayout(S[8, 64]))
    mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=NB // 8)
    if tid == 0:
        {copy_g2s}
"""
    import textwrap

    namespace = dict(T=T, Tx=Tx, TileLayout=TileLayout, S=S, NB=NB)
    source = textwrap.dedent(body)
    path = f"/tmp/tvm_tma_refusal_{abs(hash(source))}.py"
    with open(path, "w") as handle:
        handle.write("from tvm.script import tirx as T\n" + source)
    import importlib.util

    spec = importlib.util.spec_from_file_location("refusal_kernel", path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(namespace)
    spec.loader.exec_module(module)
    env["k"] = module.k
    return env["k"]


def _compile_error(func) -> str:
    with pytest.raises(Exception) as info:
        tvm.compile(tvm.IRModule({"main": func}), target=SM90A, tir_pipeline="tirx")
    return str(info.value)


def test_cta_group_1_is_accepted_and_2_refused():
    """Kernels written for upstream's variants pass cta_group=1 (one CTA): a no-op here."""
    from tvm_tma.testing.runner import assemble, compile_kernel

    built = compile_kernel(_kernel(", mbar=mbar.ptr_to([0]), cta_group=1"))
    assert built.tma_call_sites == 1 and len(assemble(built.cuda_source)) > 0
    message = _compile_error(_kernel(", mbar=mbar.ptr_to([0]), cta_group=2"))
    assert "[config]" in message and "cta_group=2" in message


def test_oob_option_is_read_by_the_dispatch():
    message = _compile_error(_kernel(", mbar=mbar.ptr_to([0]), oob='skip'"))
    assert "[oob]" in message and "oob='skip'" in message and "shared->global" in message


def test_missing_mbar_on_g2s():
    message = _compile_error(_kernel(""))
    assert "[config]" in message and "needs mbar" in message


def test_unknown_option():
    message = _compile_error(_kernel(", mbar=mbar.ptr_to([0]), multicast_mask=3"))
    assert "[config]" in message and "multicast_mask" in message


def test_cache_hint_that_is_not_an_eviction_priority():
    message = _compile_error(_kernel(", mbar=mbar.ptr_to([0]), cache_hint='evict_sometimes'"))
    assert "[cache-hint]" in message and "'evict_sometimes'" in message
    assert "evict_first" in message  # the message lists the accepted names


def test_cache_hint_integer_is_an_encoded_policy():
    from tvm_tma.dispatch.config import read_options

    options = read_options({"cache_hint": 0x12F0000000000000}, "s2g")
    assert str(options.cache_hint.ty) == "uint64"
    assert int(options.cache_hint.value) == 0x12F0000000000000
    with pytest.raises(PlanError, match=r"\[cache-hint\] cache_hint=-1 does not fit"):
        read_options({"cache_hint": -1}, "s2g")


def test_cache_hint_narrower_than_a_policy():
    # A 32-bit value cannot hold a 64-bit createpolicy cookie; it is refused, not widened.
    message = _compile_error(_kernel(", mbar=mbar.ptr_to([0]), cache_hint=T.uint32(7)"))
    assert "[cache-hint]" in message and "uint32" in message


def test_multi_thread_scope():
    message = _compile_error(_kernel(", mbar=mbar.ptr_to([0])", in_thread=False))
    assert "single_thread" in message and "[scope]" in message


def test_dtype_mismatch_in_dispatch():
    message = _compile_error(_kernel(", mbar=mbar.ptr_to([0])", shared_dtype="bfloat16"))
    assert "validate_copy_op" in message and "[dtype]" in message


def test_inner_coordinate_not_16_bytes():
    # Columns 3..67 of float16 rows: the box would start 6 bytes into a 16-byte unit.
    g = tvm.tirx.BufferRegion(_global((8, 128)), _ranges([0, 3], [8, 64]))
    error = _refusal(_whole(_shared((8, 64))), g)
    assert error.rule == "inner-coordinate-16B"
    assert "6 bytes" in str(error)


def test_inner_coordinate_unprovable_for_a_free_variable():
    col = tvm.tirx.Var("col", "int32")
    g = tvm.tirx.BufferRegion(_global((8, 1024)), _ranges([0, col], [8, 64]))
    error = _refusal(_whole(_shared((8, 64))), g,
                     var_ranges={col: tvm.ir.Range.from_min_extent(0, 960)})
    assert error.rule == "inner-coordinate-16B"


def test_inner_coordinate_proven_for_aligned_steps():
    col = tvm.tirx.Var("col", "int32")
    g = tvm.tirx.BufferRegion(_global((8, 1024)), _ranges([0, col * 8], [8, 64]))
    copy = plan(_whole(_shared((8, 64))), g,
                var_ranges={col: tvm.ir.Range.from_min_extent(0, 120)})
    assert copy.coordinates[0].same_as(col * 8) or str(copy.coordinates[0]) == "col * 8"


def test_shared_layout_smaller_than_its_buffer_is_a_layout_refusal():
    """A (2, 8, 64) layout on a (4, 8, 64) buffer: TVM's slice raises an InternalError,
    which must come back as the planner's 'layout' rule, not as an exception of TVM's."""
    smem = _shared((4, 8, 64), layout=TileLayout(S[2, 8, 64]))
    error = _refusal(tvm.tirx.BufferRegion(smem, _ranges([3, 0, 0], [1, 8, 64])),
                     _whole(_global((8, 64))))
    assert error.rule == "layout"
    assert "does not fit buffer smem of shape [4, 8, 64]" in str(error)


# ---- mbar=: an 8-byte aligned address in shared memory (issue 10) -------------------

@pytest.mark.parametrize("operand, expected", [
    ("5", "[mbar] mbar=5 is a constant; it must be the shared-memory address of an mbarrier"),
    ("T.uint64(4096)", "[mbar] mbar=T.uint64(4096) is a constant"),
    ("A.ptr_to([0, 0])", "[mbar] mbar=T.address_of(A[0, 0]) points into 'global' memory"),
    ("dyn.ptr_to([NB + 4])", "[mbar] mbar=T.address_of(dyn[1028]) is 1028 bytes into its "
     "shared allocation, not a multiple of 8"),
    ("S_.ptr_to([0, 3])", "[mbar] mbar=T.address_of(S_[0, 3]) is 6 bytes into its shared "
     "allocation, not a multiple of 8"),
    ("dyn.ptr_to([NB + 8 * tid + 2])", "[mbar] mbar=T.address_of(dyn[1024 + 8 * tid + 2]) "
     "is tid * 8 + 1026 bytes into its shared allocation, not a multiple of 8"),
    ("tid", "[mbar] mbar=tid has type int32; it must be a pointer to an mbarrier"),
    ("T.float32(1.5)", "[mbar] mbar=T.float32(1.5) has type float32"),
])
def test_mbar_that_is_not_a_shared_barrier_address(operand, expected):
    message = _compile_error(_kernel(f", mbar={operand}"))
    assert expected in message


@pytest.mark.parametrize("operand", [
    "mbar.ptr_to([0])",          # a uint64 buffer in shared.dyn
    "dyn.ptr_to([NB + 8])",      # a byte offset that is a multiple of 8
    "dyn.ptr_to([NB + 8 * tid])",  # provably aligned for every thread
    "dyn.ptr_to([NB + tid])",    # alignment unknown: not provably wrong, so it plans
])
def test_mbar_in_shared_memory_plans(operand):
    from tvm_tma.testing.runner import assemble, compile_kernel

    built = compile_kernel(_kernel(f", mbar={operand}"))
    assert built.tma_call_sites == 1
    assemble(built.cuda_source)


# ---- issue 11: oob=, views and layout pieces -------------------------------------------


def _edge_regions(direction="g2s", start=(960, 0), shape=(1000, 64), extent=(64, 64),
                  dtype="float16", strides=None):
    glob = _global(shape, dtype=dtype, strides=strides)
    g = tvm.tirx.BufferRegion(glob, _ranges(start, extent))
    s = _whole(_shared(extent, dtype=dtype))
    return (s, g) if direction == "g2s" else (g, s)


def test_region_crossing_the_end_names_the_oob_option():
    error = _refusal(*_edge_regions())
    assert error.rule == "region-bounds"
    assert "[960, 960 + 64) is not provably inside [0, 1000)" in error.detail
    assert 'needs oob="zero" or "nan"' in error.detail
    store = _refusal(*_edge_regions("s2g"))
    assert 'needs oob="skip"' in store.detail


@pytest.mark.parametrize("direction, oob, hint", [
    ("g2s", "skip", "that one is for shared->global copies"),
    ("g2s", "clamp", "it takes ['zero', 'nan']"),
    ("s2g", "bogus", "it takes ['skip', 'zero', 'nan']"),
])
def test_oob_option_must_fit_the_direction(direction, oob, hint):
    error = _refusal(*_edge_regions(direction), oob=oob)
    assert error.rule == "oob" and f"oob={oob!r}" in error.detail and hint in error.detail


@pytest.mark.parametrize("oob", ["skip", "zero", "nan"])
def test_every_oob_value_means_skip_on_a_store(oob):
    """A store writes nothing outside the tensor whatever fill it is told; upstream's kernels
    pass "zero" or "nan" on stores. The map keeps no fill (and may promote)."""
    copy = plan(*_edge_regions("s2g"), oob=oob)
    assert copy.edge_dims == (1,) and copy.tensor_map.oob_fill == 0


@pytest.mark.parametrize("direction, dtype", [("g2s", "float8_e4m3fn"), ("g2s", "int32"),
                                              ("s2g", "int8")])
def test_nan_fill_needs_a_floating_point_type(direction, dtype):
    error = _refusal(*_edge_regions(direction, dtype=dtype, shape=(1000, 64)), oob="nan")
    assert error.rule == "oob" and "floating-point" in error.detail and dtype in error.detail


def test_a_store_may_not_start_before_the_tensor():
    error = _refusal(*_edge_regions("s2g", start=(-8, 0)), oob="skip")
    assert error.rule == "region-bounds"
    assert "may start before the tensor" in error.detail and "[-8, -8 + 64)" in error.detail


def test_a_store_crossing_dim0_needs_its_end_on_16_bytes():
    # Rows of 100 halves (200 bytes) 104 apart: a store past column 100 would write up to
    # byte 208, into the padding that follows each row.
    error = _refusal(*_edge_regions("s2g", start=(0, 96), shape=(64, 100), extent=(8, 16),
                                    strides=(104, 1)), oob="skip")
    assert error.rule == "oob" and "200 bytes" in error.detail
    # The same load is fine: loads fill exactly, element by element.
    copy = plan(*_edge_regions("g2s", start=(0, 96), shape=(64, 100), extent=(8, 16),
                               strides=(104, 1)), oob="zero")
    assert copy.edge_dims == (0,)


def test_nan_fill_keeps_the_float_type_instead_of_promoting():
    # 512 contiguous halves crossing the end of a 1000-half tensor: zero fill would promote
    # to 256 uint32; NaN must stay float16, so two 256-half boxes.
    glob = _global((1000,))
    g = tvm.tirx.BufferRegion(glob, _ranges([768], [512]))
    zero = plan(_whole(_shared((512,))), g, oob="zero")
    nan = plan(_whole(_shared((512,))), g, oob="nan")
    assert zero.tensor_map.dtype == "uint32" and zero.tensor_map.box_dims == (256,)
    # float16 boxes of at most 256: the run is cut where 1000 is cut too (8 x 125), so the
    # outer dim still ends exactly at the tensor's end
    assert nan.tensor_map.dtype == "float16" and nan.tensor_map.oob_fill == 1
    assert nan.tensor_map.global_dims == (8, 125) and nan.tensor_map.box_dims == (8, 64)


def test_layout_piece_cut_partially():
    # Rows in blocks of 8: rows 4..12 straddle two blocks.
    layout = TileLayout(S[(8, 8, 64) : (576, 64, 1)])
    glob = tvm.tirx.decl_buffer((64, 64), "float16", "A", layout=layout)
    g = tvm.tirx.BufferRegion(glob, _ranges([4, 0], [8, 64]))
    error = _refusal(_whole(_shared((8, 64))), g)
    assert error.rule == "layout"
    assert "cuts its layout piece of 8 elements (stride 64) partially" in error.detail


def test_misaligned_view_base_that_cannot_fold():
    # A view 1 row + 3 halves into its data, loaded from 4 rows before its start: the row
    # part cannot fold (the map would lose the view's first row as its edge), and 262 bytes
    # is no base for a map.
    glob = tvm.tirx.decl_buffer((32, 64), "float16", "V", elem_offset=131,
                                layout=TileLayout(S[(32, 64) : (128, 1)]))
    g = tvm.tirx.BufferRegion(glob, _ranges([-4, 8], [8, 48]))
    error = _refusal(_whole(_shared((8, 48))), g, oob="zero")
    assert error.rule == "global-address-align" and "262 bytes" in error.detail
    # Columns 5.. of a view 3 halves in fold to column 8 of the data: that plans.
    view = tvm.tirx.decl_buffer((32, 64), "float16", "W", elem_offset=3,
                                layout=TileLayout(S[(32, 64) : (128, 1)]))
    copy = plan(_whole(_shared((8, 56))),
                tvm.tirx.BufferRegion(view, _ranges([-4, 5], [8, 56])), oob="zero")
    assert copy.coordinates == (8, -4) and copy.base_offset == 0
