"""im2col through the dispatch: a convolution's GEMM view planned as TMA im2col loads."""

from __future__ import annotations

import numpy as np
import pytest

import tvm_tma
from tvm_tma.conv import Conv2dGeometry
from tvm_tma.testing.fuzz_im2col import check_im2col_case, random_im2col_case
from tvm_tma.testing.im2col_kernel import Im2colCase, im2col_kernel, run_on_gpu
from tvm_tma.testing.im2col_model import conv_gemm_view, pixel_positions
from tvm_tma.testing.runner import assemble, compile_kernel

RESNET_3X3 = Conv2dGeometry(2, 8, 8, 64, 64, 3, 3, padding=(1, 1))

#: Convolutions a user runs, in small: 3x3 same, stride 2, 1x1 (plain and strided), 7x7
#: stride 2 with padding 3 (a stem), dilation 2, ragged pixel counts, odd image sizes.
CASES = [
    Im2colCase(RESNET_3X3, 64, 64, swizzle=3),
    Im2colCase(RESNET_3X3, 128, 64, swizzle=0),
    Im2colCase(Conv2dGeometry(2, 8, 8, 128, 64, 3, 3, padding=(1, 1)), 128, 128, swizzle=3),
    Im2colCase(Conv2dGeometry(3, 9, 7, 32, 64, 3, 3, stride=(2, 2), padding=(1, 1)), 64, 32,
               swizzle=2),
    Im2colCase(Conv2dGeometry(2, 7, 7, 64, 64, 1, 1), 64, 64, swizzle=3),
    Im2colCase(Conv2dGeometry(2, 9, 9, 64, 64, 1, 1, stride=(2, 2)), 32, 64, swizzle=3),
    Im2colCase(Conv2dGeometry(1, 14, 14, 16, 64, 7, 7, stride=(2, 2), padding=(3, 3)), 32, 16,
               swizzle=1),
    Im2colCase(Conv2dGeometry(2, 10, 10, 32, 64, 3, 3, padding=(2, 2), dilation=(2, 2)), 64,
               32, swizzle=2, dtype="bfloat16"),
    Im2colCase(Conv2dGeometry(3, 5, 6, 32, 64, 3, 3, padding=(2, 1)), 64, 32),
    # Patch layers, folded: 16 x 16 patches at stride 16 (a ViT's, 8 channels: 128 a
    # folded pixel, 64-wide blocks across the unfolded taps), and 2 x 2 at stride 2 over
    # 9 rows (W folds to 48 channels; H, a row left over, keeps stride 2).
    Im2colCase(Conv2dGeometry(2, 64, 80, 8, 16, 16, 16, stride=(16, 16)), 32, 64, swizzle=3),
    Im2colCase(Conv2dGeometry(2, 9, 8, 24, 16, 2, 2, stride=(2, 2)), 64, 16, swizzle=1),
    # The 3-D view (pixels, taps, channels), each tap's channels padded to whole K blocks
    # (the loads past them read zeros): 24 channels in one 32-wide load, 40 at stride 2
    # in one 64-wide, 80 in three 32-wide (the last half past C), RGB in 16 x 16 patches
    # (48 channels a folded pixel) in one 64-wide.
    Im2colCase(Conv2dGeometry(2, 9, 7, 24, 16, 3, 3, padding=(1, 1)), 64, 32, swizzle=2,
               tap_columns=32),
    Im2colCase(Conv2dGeometry(1, 6, 6, 40, 16, 3, 3, stride=(2, 2), padding=(1, 1)), 32, 64,
               swizzle=3, tap_columns=64),
    Im2colCase(Conv2dGeometry(1, 6, 6, 80, 16, 3, 3, padding=(1, 1)), 32, 32, swizzle=2,
               tap_columns=96),
    Im2colCase(Conv2dGeometry(2, 32, 32, 3, 16, 16, 16, stride=(16, 16)), 32, 64, swizzle=3,
               tap_columns=64),
]
IDS = [f"{c.geometry.describe()}-{c.block_m}x{c.block_k}-sw{c.swizzle}"
       + (f"-taps{c.tap_columns}" if c.tap_columns else "") for c in CASES]


def _load(case: Im2colCase):
    return tvm_tma.explain(im2col_kernel(case)).copies[0]


def test_a_3x3_view_plans_as_one_im2col_load():
    """Rows 64..127 are image 1 (P * Q = 64); columns 256..319 are tap 4 = (r 1, s 1)."""
    load = _load(Im2colCase(RESNET_3X3, 64, 64, swizzle=3))
    plan = load.plan
    assert plan.is_im2col and load.encoder == "cuTensorMapEncodeIm2col"
    spec = plan.tensor_map
    assert (spec.dtype, spec.global_dims, spec.global_strides) == (
        "float16", (64, 8, 8, 2), (128, 1024, 8192))
    assert (spec.lower_corner, spec.upper_corner) == ((-1, -1), (-1, -1))
    assert (spec.channels_per_pixel, spec.pixels_per_column, spec.element_strides) == (
        64, 64, (1, 1, 1, 1))
    assert spec.swizzle == 3 and plan.num_issues == 1
    assert [str(c) for c in plan.coordinates] == ["0", "-1", "-1", "mb"]
    assert [str(o) for o in plan.im2col_offsets] == ["kb % 3", "kb // 3"]
    assert load.instruction == ("cp.async.bulk.tensor.4d.shared::cluster.global.im2col"
                                ".mbarrier::complete_tx::bytes")


def test_a_3d_view_reads_a_tap_past_its_channels_as_zeros():
    """24 channels a tap, read as one 32-wide load from the (pixels, taps, channels) view:
    the map keeps C = 24 and loads 32 channels a pixel (the last 8 past C: the hardware's
    fill, the copy's edge along map dim 0); M = 126 runs past in the last row block
    (dim 3). Tap kb is the load's offsets, as from the 2-D view."""
    case = Im2colCase(Conv2dGeometry(2, 9, 7, 24, 16, 3, 3, padding=(1, 1)), 64, 32,
                      swizzle=2, tap_columns=32)
    load = _load(case)
    plan, spec = load.plan, load.plan.tensor_map
    assert plan.is_im2col and load.encoder == "cuTensorMapEncodeIm2col"
    assert (spec.global_dims, spec.global_strides) == ((24, 7, 9, 2), (48, 336, 3024))
    assert (spec.channels_per_pixel, spec.pixels_per_column, spec.swizzle) == (32, 64, 2)
    assert (spec.lower_corner, spec.upper_corner) == ((-1, -1), (-1, -1))
    assert [str(c) for c in plan.coordinates] == ["0", "mb - 1", "-1", "mb"]
    assert [str(o) for o in plan.im2col_offsets] == ["kb % 3", "kb // 3"]
    assert plan.edge_dims == (0, 3) and plan.num_issues == 1
    assert check_im2col_case(case) == ("accepted", "")


def _one_load(geometry: Conv2dGeometry, view_shape: tuple, block_k: int, region,
              oob: str | None = "zero", store: bool = False):
    """The plan of one load of 32 pixels from a view of ``geometry``'s activation (2-D,
    or 3-D: pixels, taps, channels), or with ``store`` a store into it: ``region(A)`` is
    the global side."""
    from tvm.script import tirx as T
    from tvm.script.tirx import tile as Tx
    from tvm.tirx.layout import S, TileLayout

    g, nbytes = geometry, 32 * block_k * 2
    options = {"oob": oob} if oob else {}

    @T.prim_func
    def load(X_ptr: T.handle):
        X = T.match_buffer(X_ptr, g.argument_shape, "float16", layout=g.argument_layout)
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((nbytes + 64,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((32, block_k), "float16", dyn.data,
                             layout=TileLayout(S[32, block_k]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=nbytes // 8)
        A = T.decl_buffer(view_shape, "float16", X.data, elem_offset=g.view_elem_offset,
                          layout=g.view_layout)
        if tid == 0:
            if store:
                Tx.copy_async(region(A), tile[:, :], dispatch="tma")
            else:
                Tx.copy_async(tile[:, :], region(A), dispatch="tma", mbar=mbar.ptr_to([0]),
                              **options)

    return tvm_tma.explain(load).copies[0]


@pytest.mark.parametrize("view_shape, block_k, region, oob, rule, detail", [
    # Past a tap's channels only with a fill.
    ((32, 9, 24), 32, lambda A: A[0:32, 4, 0:32], None, "im2col",
     "columns [0, 0 + 32) of tap 4 must lie in one filter tap's 24 channels; channels past "
     "them read zeros only with oob=\"zero\" or \"nan\""),
    # One tap a load.
    ((32, 9, 24), 32, lambda A: A[0:32, 0:2, 0:16], "zero", "im2col",
     "a load reads one filter tap; the region takes 2 of them"),
    ((32, 9, 24), 32, lambda A: A[0:32, 9, 0:32], "zero", "region-bounds",
     "tap 9 is not provably inside [0, 9)"),
], ids=["no-oob", "two-taps", "tap-past-the-filter"])
def test_a_3d_view_load_is_refused_past_what_it_may_read(view_shape, block_k, region, oob,
                                                        rule, detail):
    load = _one_load(Conv2dGeometry(1, 4, 8, 24, 16, 3, 3, padding=(1, 1)), view_shape,
                        block_k, region, oob)
    assert not load.planned and load.rule == rule and detail in load.detail, load.detail


@pytest.mark.parametrize("shape, region, tile, dims, box, coordinates", [
    # X (2, 8, 8, 64) as (N*H, W, C): rows 2..5, pixels 2..5, every channel.
    ((16, 8, 64), lambda V: V[2:6, 2:6, 0:64], (4, 4, 64), (512, 16), (256, 4), ["128", "2"]),
    # As (N*H*W, C), the layout TVM keeps as one piece of 128 rows: rows 32..63.
    ((128, 64), lambda V: V[32:64, 0:64], (32, 64), (256, 8), (256, 2), ["0", "2"]),
    # As (N*H, W*C): rows 4..7, columns 128..255.
    ((16, 512), lambda V: V[4:8, 128:256], (4, 128), (512, 16), (128, 4), ["128", "4"]),
], ids=["nh-w-c", "nhw-c", "nh-wc"])
def test_a_plain_reshape_view_of_an_nhwc_tensor_is_a_tiled_copy(shape, region, tile, dims,
                                                                 box, coordinates):
    """A reshape of a 4-D argument reads like a convolution's view (a piece of stride C)
    whose numbers make none; at offset 0 it means no padding, so it is the plain view the
    tiled planner copies (moved as 32-bit elements here), not a refusal: exact on the
    model."""
    from tvm.script import tirx as T
    from tvm.script.tirx import tile as Tx
    from tvm.tirx.layout import S, TileLayout

    from tvm_tma.testing.tma_model import execute_plan

    nbytes, whole = int(np.prod(tile)) * 2, tuple(slice(0, e) for e in tile)

    @T.prim_func
    def copy(X_ptr: T.handle):
        X = T.match_buffer(X_ptr, (2, 8, 8, 64), "float16", layout=TileLayout(S[2, 8, 8, 64]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((nbytes + 64,), "uint8", scope="shared.dyn")
        shared = T.decl_buffer(tile, "float16", dyn.data, layout=TileLayout(S[tile]))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=nbytes // 8)
        V = T.decl_buffer(shape, "float16", X.data)
        if tid == 0:
            Tx.copy_async(shared[whole], region(V), dispatch="tma", mbar=mbar.ptr_to([0]))

    load = tvm_tma.explain(copy).copies[0]
    assert load.planned and not load.plan.is_im2col, load.detail
    spec = load.plan.tensor_map
    assert (spec.global_dims, spec.box_dims) == (dims, box)
    assert [str(c) for c in load.plan.coordinates] == coordinates
    x = np.random.default_rng(1).integers(0, 1 << 16, size=(2, 8, 8, 64), dtype=np.uint16)
    arena = np.zeros(nbytes, np.uint8)
    execute_plan(load.plan, x.reshape(-1).view(np.uint8), arena, 2, {})
    assert np.array_equal(arena.view(np.uint16).reshape(tile), region(x.reshape(shape)))


def test_a_folded_patch_view_pads_the_folded_pixel_not_the_unfolded_one():
    """4 x 4 patches at stride 4 over 8 channels fold W: a tap is 32 channels a folded
    pixel. The 3-D view (pixels, 4 tap rows, 32) may read 64 of them (the last 32 zeros);
    the view (pixels, 16 taps, 8) keeps each load inside one unfolded pixel's 8 channels,
    since past them the folded map reads the next pixel, not zeros."""
    g = Conv2dGeometry(1, 4, 8, 8, 16, 4, 4, stride=(4, 4))
    folded = _one_load(g, (2, 4, 32), 64, lambda A: A[0:32, 1, 0:64])
    assert folded.planned and folded.plan.tensor_map.global_dims == (32, 2, 4, 1)
    assert folded.plan.tensor_map.channels_per_pixel == 64 and 0 in folded.plan.edge_dims
    assert [str(o) for o in folded.plan.im2col_offsets] == ["0", "1"]
    inside = _one_load(g, (2, 16, 8), 8, lambda A: A[0:32, 5, 0:8])
    assert inside.planned and inside.plan.tensor_map.channels_per_pixel == 8
    assert [str(c) for c in inside.plan.coordinates][0] == "8"  # pixel 1 of the patch row
    assert [str(o) for o in inside.plan.im2col_offsets] == ["0", "1"]
    past = _one_load(g, (2, 16, 8), 16, lambda A: A[0:32, 5, 0:16])
    assert not past.planned and past.rule == "im2col"
    assert ("channels [0, 0 + 16) of a 8-channel pixel must lie inside it: the W patch axis "
            "folds (32 channels a tap)") in past.detail


def test_stride_dilation_and_padding_become_corners_and_traversal_strides():
    load = _load(CASES[7])  # 3x3, padding 2, dilation 2 over 10x10: 10x10 outputs
    spec = load.plan.tensor_map
    assert (spec.lower_corner, spec.upper_corner) == ((-2, -2), (-2, -2))
    assert [str(o) for o in load.plan.im2col_offsets] == ["kb % 3 * 2", "kb // 3 * 2"]
    stem = _load(CASES[6]).plan.tensor_map  # 7x7 stride 2 padding 3
    assert (stem.lower_corner, stem.upper_corner, stem.element_strides) == (
        (-3, -3), (-3, -3), (1, 2, 2, 1))


def test_a_patch_layer_folds_its_patches_into_pixels_and_images():
    """16 x 16 patches at stride 16 of two 8-channel 64 x 80 images: each run of 16
    pixels is one pixel of 128 channels (W: 5 of them, 256 bytes apart) and each band of
    16 rows one image of 16 rows (8 images: 2 x 4 bands, 16 rows of 1280 bytes apart),
    read by a 16-row filter at its one output row (upper corner -15): traversal strides 1
    where unfolded they would be 16 (no im2col map has them). Row block mb starts at
    output pixel 32 * mb: folded image 32 * mb // 5, column 32 * mb % 5 (mb is 0 or 1:
    6 * mb and 2 * mb); column block kb
    (64 channels) is tap row kb // 2, channels kb % 2 * 64 of the folded pixel."""
    load = _load(CASES[9])
    plan = load.plan
    spec = plan.tensor_map
    assert (spec.global_dims, spec.global_strides) == ((128, 5, 16, 8), (256, 1280, 20480))
    assert (spec.lower_corner, spec.upper_corner) == ((0, 0), (0, -15))
    assert (spec.channels_per_pixel, spec.pixels_per_column, spec.element_strides) == (
        64, 32, (1, 1, 1, 1))
    assert [str(c) for c in plan.coordinates] == ["kb % 2 * 64", "mb * 2", "0", "mb * 6"]
    assert [str(o) for o in plan.im2col_offsets] == ["0", "kb // 2"]
    assert plan.notes[-1].endswith("folded W in patches of 16 pixels (128 channels a pixel)"
                                   "; folded H in patches of 16 rows (8 images of 16 rows)")
    w_only = _load(CASES[10]).plan.tensor_map
    assert (w_only.global_dims, w_only.element_strides, w_only.upper_corner) == (
        (48, 4, 9, 2), (1, 1, 2, 1), (0, -1))


def test_a_stride_above_8_that_is_no_patch_axis_is_refused():
    load = _refusal(Conv2dGeometry(1, 36, 36, 8, 8, 16, 16, stride=(16, 16),
                                   padding=(2, 2)), 32, 8)
    assert load.rule == "im2col"
    assert "stride 16 along H (filter 16x16, padding 2x2) is above the im2col traversal " \
        "stride's 8" in load.detail


def test_wide_channel_blocks_are_issued_per_swizzle_span():
    plan = _load(CASES[2]).plan  # 128 channels under 128B swizzle: two 64-channel loads
    assert plan.tensor_map.channels_per_pixel == 64 and plan.num_issues == 2
    (axis,) = plan.issue_axes
    assert (axis.extent, axis.coord_dim, axis.coord_step, axis.smem_stride) == (2, 0, 64,
                                                                                128 * 64)


def test_the_model_walks_the_box_row_by_row_and_image_by_image():
    spec = _load(Im2colCase(RESNET_3X3, 64, 64)).plan.tensor_map
    # The box holds positions -1..6 along H and W (the first tap of every output pixel):
    # the last one of image 0 is followed by the first of image 1.
    assert pixel_positions(spec, (0, 6, 6))[:3] == [(0, 6, 6), (1, -1, -1), (1, -1, 0)]
    assert pixel_positions(spec, (0, -1, 5))[:3] == [(0, -1, 5), (0, -1, 6), (0, 0, -1)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_model_moves_exactly_the_im2col_matrix(case):
    assert check_im2col_case(case) == ("accepted", "")


def test_a_stream_of_random_convolutions_matches_the_definition():
    outcomes = [check_im2col_case(random_im2col_case(20261124, i), seed=i)[0]
                for i in range(40)]
    assert "mismatch" not in outcomes and outcomes.count("accepted") >= 30


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kernel_assembles(case):
    built = compile_kernel(im2col_kernel(case))
    # A pointwise layer's view is the activation itself: a tiled 2-D load (next test).
    mode = ".2d.shared::cluster.global" if case.geometry.is_pointwise else ".im2col"
    assert f"{mode}.mbarrier::complete_tx::bytes" in built.cuda_source
    assert built.tensormap_params == 2  # the im2col map over X and the tiled map over D
    assemble(built.cuda_source)


def test_conv_gemm_view_is_the_convolution():
    """The reference matrix times a filter is numpy's convolution, computed directly."""
    rng = np.random.default_rng(3)
    g = Conv2dGeometry(2, 6, 5, 8, 4, 3, 2, stride=(2, 1), padding=(1, 0))
    x = rng.standard_normal(g.argument_shape)
    f = rng.standard_normal((g.k, g.r, g.s, g.c))
    y = conv_gemm_view(x, (g.r, g.s), g.stride, g.padding) @ f.reshape(g.k, -1).T
    direct = np.zeros((g.n, g.p, g.q, g.k))
    padded = np.pad(x, ((0, 0), (1, 1), (0, 0), (0, 0)))
    for p in range(g.p):
        for q in range(g.q):
            window = padded[:, 2 * p:2 * p + 3, q:q + 2, :]
            direct[:, p, q, :] = np.einsum("nrsc,krsc->nk", window, f)
    assert np.allclose(y.reshape(direct.shape), direct)


def _refusal(geometry: Conv2dGeometry, block_m: int, block_k: int, swizzle: int = 0):
    return _load(Im2colCase(geometry, block_m, block_k, swizzle=swizzle))


def test_a_block_straddling_two_taps_is_refused():
    from tvm_tma.testing import im2col_kernel as module

    case = Im2colCase(Conv2dGeometry(1, 8, 8, 32, 64, 3, 3, padding=(1, 1)), 64, 64)
    load = tvm_tma.explain(module.im2col_kernel(case)).copies[0]
    assert load.rule == "im2col" and "one filter tap's 32 channels" in load.detail


def test_corners_outside_the_rank_4_range_are_refused():
    load = _refusal(Conv2dGeometry(1, 4, 300, 8, 8, 1, 1, padding=(0, 130)), 32, 8)
    assert load.rule == "im2col"
    assert "corner -130" in load.detail and "8-bit range of a rank-4 im2col map" in load.detail


def test_a_ragged_last_block_needs_oob():
    """Rows past the last output pixel run into a batch that does not exist: only a load
    that says how to fill them (oob="zero") may read them."""
    g = Conv2dGeometry(1, 5, 5, 16, 8, 3, 3, padding=(1, 1))  # 25 output pixels
    load = _one_load(g, g.view_shape, 16, lambda A: A[0:32, 0:16], oob=None)
    assert load.rule == "region-bounds" and "rows [0, 0 + 32)" in load.detail
    assert "[0, 25)" in load.detail and 'oob="zero"' in load.detail


def test_a_store_into_the_view_is_refused():
    load = _one_load(RESNET_3X3, RESNET_3X3.view_shape, 64, lambda A: A[0:32, 0:64],
                     oob=None, store=True)
    assert load.rule == "im2col" and "read by loads only" in load.detail


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_im2col_loads_are_bit_exact_on_gpu(case):
    ok, why = run_on_gpu(case, compile_kernel(im2col_kernel(case)).executable)
    assert ok, why


def test_a_view_that_reads_as_two_convolutions_is_refused():
    """With W = 1 a step along H and a step along W are the same bytes, so a 1x5 filter
    padded 2x2 and a 5x1 filter padded 4x0 have the same view but not the same padding: the
    planner cannot tell which elements are zeros, and says so."""
    g = Conv2dGeometry(3, 7, 1, 64, 16, 1, 5, stride=(2, 2), padding=(2, 2))
    load = _load(Im2colCase(g, 128, 32))
    assert load.rule == "im2col" and "reads as 2 different convolutions" in load.detail
    assert "filter 1x5, padding 2x2" in load.detail and "filter 5x1, padding 4x0" in load.detail


def test_a_one_dimensional_convolution_plans():
    """A 1-D convolution as an (N, 1, W, C) image with a 1x3 filter: H = 1 makes a step
    along H the size of an image, but only the batch reading fits the view's shape."""
    load = _load(Im2colCase(Conv2dGeometry(2, 1, 9, 32, 16, 1, 3, padding=(0, 1)), 32, 32))
    assert load.planned and load.plan.tensor_map.lower_corner == (-1, 0)
    assert check_im2col_case(Im2colCase(Conv2dGeometry(2, 1, 9, 32, 16, 1, 3,
                                                       padding=(0, 1)), 32, 32)) == (
        "accepted", "")


def test_the_im2col_load_instruction_text():
    """Exact PTX of the load: .im2col before .L2::cache_hint, coordinates as 32-bit ``r``,
    the two tap offsets as 16-bit ``h`` operands after the mbarrier."""
    case = Im2colCase(RESNET_3X3, 64, 64, swizzle=3, cache_hint="evict_last")
    source = compile_kernel(im2col_kernel(case)).cuda_source
    assert ('"cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes'
            '.L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8}, %9;"') in source
    assert '"h"((unsigned short)(a7)), "h"((unsigned short)(a8)), "l"(' in source
    assemble(source)


POINTWISE = Conv2dGeometry(2, 7, 7, 64, 64, 1, 1)


def test_a_pointwise_view_plans_as_a_tiled_load_of_the_activation():
    """1x1, stride 1, no padding: row (n, p, q) of the view is pixel (n, p, q) of X, so the
    view is X as a (98, 64) matrix; its 64-row blocks move as one tiled 2-D issue each
    (the last one past row 98 zero-filled), not as an im2col pixel walk."""
    load = _load(Im2colCase(POINTWISE, 64, 64, swizzle=3))
    plan = load.plan
    assert not plan.is_im2col and load.encoder == "cuTensorMapEncodeTiled"
    spec = plan.tensor_map
    assert (spec.global_dims, spec.global_strides, spec.box_dims, spec.swizzle) == (
        (64, 98), (128,), (64, 64), 3)
    assert [str(c) for c in plan.coordinates] == ["0", "mb * 64"]
    assert plan.num_issues == 1 and plan.edge_dims == (1,) and plan.im2col_offsets == ()
    assert load.instruction == ("cp.async.bulk.tensor.2d.shared::cluster.global"
                                ".mbarrier::complete_tx::bytes")
    assert plan.notes == ("pointwise convolution (filter 1x1, stride 1x1, padding 0x0): A is "
                          "the activation as a (98, 64) matrix, loaded in tiled mode (1 issue "
                          "against the im2col load's 1)",)


def test_a_strided_or_padded_1x1_layer_keeps_its_im2col_load():
    """Stride 2 skips pixels and padding adds a halo: neither view is a matrix over X."""
    strided = _load(Im2colCase(Conv2dGeometry(2, 9, 9, 64, 64, 1, 1, stride=(2, 2)), 32, 64,
                               swizzle=3)).plan
    padded = _load(Im2colCase(Conv2dGeometry(2, 6, 6, 64, 64, 1, 1, padding=(1, 1)), 64, 64,
                              swizzle=3)).plan
    assert strided.is_im2col and strided.tensor_map.element_strides == (1, 2, 2, 1)
    assert padded.is_im2col and padded.tensor_map.lower_corner == (-1, -1)


def _cropped_pointwise_kernel(n=2, h=7, w=7, c=64, stored_w=8, bm=64, bk=64):
    """A 1x1 layer over a crop: X is W = 7 columns of an image stored 8 wide, so a run of
    64 output pixels is no run of memory (every 7 pixels skip one)."""
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout
    from tvm.script import tirx as T
    from tvm.script.tirx import tile as Tx
    from tvm.tirx.layout import S, TileLayout

    rows = n * h * w
    strides = (h * stored_w * c, stored_w * c, c, 1)

    # fmt: off
    @T.prim_func
    def load(X_ptr: T.handle):
        X = T.match_buffer(X_ptr, (n, h, w, c), "float16",
                           layout=TileLayout(S[(n, h, w, c):strides]))
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        dyn = T.alloc_buffer((bm * bk * 2 + 1024,), "uint8", scope="shared.dyn")
        tile = T.decl_buffer((bm, bk), "float16", dyn.data,
                             layout=mma_shared_layout("float16", 3, (bm, bk)))
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=bm * bk * 2 // 8)
        A = T.decl_buffer((rows, c), "float16", X.data,
                          layout=TileLayout(S[(n, h, w, c):strides]))
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
            for mb in T.serial(-(-rows // bm)):
                Tx.copy_async(tile[:, :], A[mb * bm:mb * bm + bm, 0:bk], dispatch="tma",
                              mbar=mbar.ptr_to([0]), oob="zero")
    # fmt: on
    return load


def test_a_pointwise_view_over_a_cropped_image_keeps_its_im2col_load():
    """The tiled planner cannot box 64 pixels that skip a column every 7; the im2col map
    walks them with X's own strides, as for any convolution."""
    load = tvm_tma.explain(_cropped_pointwise_kernel()).copies[0]
    assert load.plan.is_im2col and load.plan.num_issues == 1
    spec = load.plan.tensor_map
    assert (spec.global_dims, spec.global_strides) == ((64, 7, 7, 2), (128, 1024, 7168))
    assert load.plan.notes == ("im2col: filter 1x1, stride 1x1, padding 0x0, dilation 1x1, "
                               "output 7x7",)


def _planner_regions(geometry: Conv2dGeometry, rows: int = 128, cols: int = 64):
    """(tile, view) BufferRegions of a load of the view's first rows x cols block into a
    128B-swizzled tile, and X (the argument the view aliases), as the dispatch sees them."""
    import tvm
    from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

    x = tvm.tirx.decl_buffer(geometry.argument_shape, "float16", "X",
                             layout=geometry.argument_layout)
    view = tvm.tirx.decl_buffer(geometry.view_shape, "float16", "A", data=x.data,
                                elem_offset=geometry.view_elem_offset,
                                layout=geometry.view_layout)
    tile = tvm.tirx.decl_buffer((rows, cols), "float16", "tile", scope="shared.dyn",
                                layout=mma_shared_layout("float16", 3, (rows, cols)))

    def region(buffer):
        return tvm.tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, e)
                                              for e in (rows, cols)])

    return region(tile), region(view), x


def test_a_pointwise_view_takes_a_multicast_split_that_an_im2col_load_refuses():
    """A load split among 2 CTAs of a cluster (each issues half the rows, to both): the
    pointwise view's tiled plan makes 2 issues of 64 rows, CTA r the r-th; a 3x3 view's
    im2col load is refused by name."""
    from tvm_tma.planner import PlanError, plan

    tile, view, x = _planner_regions(Conv2dGeometry(2, 8, 8, 64, 64, 1, 1))
    split = plan(tile, view, argument=x, multicast_ctas=2)
    assert not split.is_im2col and split.cluster_split == 2
    assert (split.num_issues, split.issues_per_cta, split.tensor_map.box_dims) == (2, 1,
                                                                                   (64, 64))
    assert split.notes == ("pointwise convolution (filter 1x1, stride 1x1, padding 0x0): A "
                           "is the activation as a (128, 64) matrix, loaded in tiled mode "
                           "(2 issues)",)
    tile, view, x = _planner_regions(Conv2dGeometry(2, 8, 8, 64, 64, 3, 3, padding=(1, 1)))
    with pytest.raises(PlanError) as refused:
        plan(tile, view, argument=x, multicast_ctas=2)
    assert refused.value.rule == "multicast" and "im2col load is not split" in str(
        refused.value)
