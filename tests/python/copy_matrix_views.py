"""Copies as kernel authors write them (issue 11): views at an offset, reshaping copies,
global dims laid out as several strided pieces, whole runs folded before the box rules, and
edge tiles with ``oob=``. Shared by the CI tests and the GPU tests through copy_matrix.

Every expected fact is derived by hand from the rules (the comment says how), never from
the planner. Dims, strides, boxes and coordinates are in driver order (innermost first).
A view at an offset is declared in the kernel over the flat allocation, with 256 bytes of
allocation after it, so the GPU test sees any byte written or read past the view.
"""

from __future__ import annotations

from tvm_tma.testing.copy_cases import CopyCase

# ---- views at an offset --------------------------------------------------------------
# The view G.sub[16:512, 8:72] of a (512, 128) tensor: shape (496, 64), strides (128, 1),
# offset 16 * 128 + 8. The offset folds into coordinates (16 rows, 8 columns): the map's
# dims grow to (64 + 8, 496 + 16), so its upper edges are the view's.
SUB = dict(global_shape=(496, 64), global_strides=(128, 1), global_offset=16 * 128 + 8)

VIEWS = [
    CopyCase("view-sub-g2s", "float16", "g2s", global_start=(0, 0), global_extent=(64, 64),
             shared_shape=(64, 64), **SUB,
             expect=dict(rank=2, global_dims=(72, 512), global_strides=(256,),
                         box_dims=(64, 64), coordinates=(8, 16), base_offset=0,
                         num_issues=1)),
    CopyCase("view-sub-s2g", "bfloat16", "s2g", global_start=(100, 0), global_extent=(32, 64),
             shared_shape=(32, 64), **SUB,
             expect=dict(rank=2, global_dims=(72, 512), box_dims=(64, 32),
                         coordinates=(8, 116), num_issues=1)),
    # T.decl_buffer((64, 64), "float16", A.data, elem_offset=8): folding 8 columns would make
    # rows of 72 overlap rows 64 apart, so the base is data + 8 halves (16 bytes, aligned).
    # The view is one run of 4096 halves: cut at 1024 (promoted to 256 uint64) x 4.
    CopyCase("view-offset-8-base", "float16", "g2s", (64, 64), (0, 0), (64, 64), (64, 64),
             global_offset=8,
             expect=dict(rank=2, dtype="uint64", global_dims=(256, 4),
                         global_strides=(2048,), box_dims=(256, 4), coordinates=(0, 0),
                         base_offset=8, num_issues=1)),
    # A flat sub-range A[4096:8192] viewed as (64, 64) float32: offset 4096 = 64 whole rows,
    # so rows grow to 128 (start 8 + 64); the whole rows merge into one run of 8192 floats
    # from 72 * 64 = 4608, 1024 long: cut at 512 (4608 = 9 * 512), promoted to 256 uint64.
    CopyCase("view-flat-subrange", "float32", "g2s", (64, 64), (8, 0), (16, 64), (16, 64),
             global_offset=4096,
             expect=dict(rank=2, dtype="uint64", global_dims=(256, 16),
                         global_strides=(2048,), box_dims=(256, 2), coordinates=(0, 9),
                         base_offset=0, num_issues=1)),
    # A view 3 elements (6 bytes) past an aligned pointer cannot be a map base; its offset
    # folds into coordinates and columns 5.. of the view start at column 8 of the map.
    CopyCase("view-misaligned-folds", "bfloat16", "g2s", (64, 64), (0, 5), (16, 56),
             (16, 56), global_strides=(128, 1), global_offset=3,
             expect=dict(rank=2, global_dims=(67, 64), box_dims=(56, 16), coordinates=(8, 0),
                         base_offset=0, num_issues=1)),
    # Edge tiles of views stop at the view: rows 32..48 of a 40-row view (offset 16 rows,
    # 32 columns into 128-wide rows): the map has 16 + 40 rows; rows 40.. are zeros.
    CopyCase("view-edge-rows-zero", "float16", "g2s", (40, 64), (32, 0), (16, 64), (16, 64),
             global_strides=(128, 1), global_offset=16 * 128 + 32, oob="zero",
             expect=dict(rank=2, global_dims=(96, 56), box_dims=(64, 16),
                         coordinates=(32, 48), edge_dims=(1,), num_issues=1)),
    CopyCase("view-edge-rows-skip", "float32", "s2g", (40, 32), (36, 0), (8, 32), (8, 32),
             global_strides=(64, 1), global_offset=8 * 64 + 16, oob="skip",
             expect=dict(rank=2, global_dims=(48, 48), global_strides=(256,),
                         box_dims=(32, 8), coordinates=(16, 44), edge_dims=(1,),
                         num_issues=1)),
    # Columns 32..96 of a 64-wide view (columns 8..72 of the allocation): the map's dim 0
    # ends at 72, so columns 64.. of the view are NaN, not the neighbour's data.
    CopyCase("view-edge-cols-nan", "float16", "g2s", (32, 64), (0, 32), (8, 64), (8, 64),
             global_strides=(128, 1), global_offset=8, oob="nan",
             expect=dict(rank=2, global_dims=(72, 32), box_dims=(64, 8), coordinates=(40, 0),
                         edge_dims=(0,), oob_fill=1, num_issues=1)),
    # The store crosses the view's column end: 72 bf16 = 144 bytes, on 16 bytes, so nothing
    # past it is written.
    CopyCase("view-edge-cols-skip", "bfloat16", "s2g", (32, 64), (4, 32), (8, 64), (8, 64),
             global_strides=(128, 1), global_offset=8, oob="skip",
             expect=dict(rank=2, global_dims=(72, 32), box_dims=(64, 8), coordinates=(40, 4),
                         edge_dims=(0,), num_issues=1)),
    # A load that starts 4 rows before the view: the offset cannot fold (the map would then
    # reach the rows before the view), so the base is data + 16 * 128 + 64 (aligned) and
    # the first coordinate is -4.
    CopyCase("view-edge-before-start", "float16", "g2s", (32, 64), (-4, 0), (8, 64), (8, 64),
             global_strides=(128, 1), global_offset=16 * 128 + 64, oob="zero",
             expect=dict(rank=2, global_dims=(64, 32), box_dims=(64, 8), coordinates=(0, -4),
                         base_offset=16 * 128 + 64, edge_dims=(1,), num_issues=1)),
]

# ---- reshaping copies (elements pair in row-major order) ------------------------------
RESHAPES = [
    # FlashAttention's Q tile: 32 heads x 4 rows x 128 of a (2, 32, 64, 128) tensor into a
    # 128B-swizzled (128, 128) tile. Global: d is whole and merges with the rows (8192 per
    # head, from 8 * 128, 512 long); heads are whole and merge with the batch (64 from 32).
    # Shared: 64-half spans, 2 atoms (8192 apart), 128 rows (64 apart). Common axes: span 64,
    # atom 2, row 4 (pieces of the 8192 run), head 32 -> box (64, 4, 32, 2) at (0, 8, 32, 0).
    CopyCase("reshape-fa-q", "float16", "g2s", (2, 32, 64, 128), (1, 0, 8, 0), (1, 32, 4, 128),
             (128, 128), "swizzle:3",
             expect=dict(rank=4, global_dims=(64, 64, 64, 2), box_dims=(64, 4, 32, 2),
                         coordinates=(0, 8, 32, 0), num_issues=1)),
    # A (64,) vector from an 8 x 8 corner of a (16, 16) float32 tensor.
    CopyCase("reshape-vector-from-8x8", "float32", "g2s", (16, 16), (0, 8), (8, 8), (64,),
             expect=dict(rank=2, global_dims=(16, 16), global_strides=(64,), box_dims=(8, 8),
                         coordinates=(8, 0), num_issues=1)),
    # An (8, 64) tile stored to a (4, 2, 64) region of (4, 8, 64): d merges with the middle
    # dim (512 from 128, 128 long); the outer dim stays (stride 512).
    CopyCase("reshape-store-4x2x64", "bfloat16", "s2g", (4, 8, 64), (0, 2, 0), (4, 2, 64),
             (8, 64),
             expect=dict(rank=2, global_dims=(512, 4), global_strides=(1024,),
                         box_dims=(128, 4), coordinates=(128, 0), num_issues=1)),
    # An (8, 64) tile from 512 contiguous halves of a flat tensor: one box of 512, promoted
    # to 256 uint32 at 1024 / 2.
    CopyCase("reshape-tile-from-flat", "float16", "g2s", (4096,), (1024,), (512,), (8, 64),
             expect=dict(rank=1, dtype="uint32", global_dims=(2048,), box_dims=(256,),
                         coordinates=(512,), num_issues=1)),
]

# ---- global dims laid out as several strided pieces -----------------------------------
# Rows in blocks of 8, 576 halves apart (8 * 64 + 64 padding).
TILED_ROWS = ((8, 8, 64), (576, 64, 1))
PIECES = [
    # Rows 8..24 cover blocks 1 and 2 whole: rows-in-block x columns merge into runs of 512
    # halves (promoted to 256 uint32), blocks stay a dim of stride 576.
    CopyCase("pieces-tiled-rows", "float16", "g2s", (64, 64), (8, 0), (16, 64), (16, 64),
             global_tiles=TILED_ROWS,
             expect=dict(rank=2, dtype="uint32", global_dims=(256, 8),
                         global_strides=(1152,), box_dims=(256, 2), coordinates=(0, 1),
                         num_issues=1)),
    # Rows 16..20 lie inside block 2: 4 rows x 64 of the block's 512-half run, block 2.
    CopyCase("pieces-rows-in-one-block", "float16", "s2g", (64, 64), (16, 0), (4, 64),
             (4, 64), global_tiles=TILED_ROWS,
             expect=dict(rank=2, global_dims=(512, 8), global_strides=(1152,),
                         box_dims=(256, 1), coordinates=(0, 2), num_issues=1)),
    # Columns stored as two planes of 64 (2048 halves apart): columns 64..128 are plane 1;
    # plane (stride 2048) folds into the rows (32 x 64), so it is a rank-2 map at row 32.
    CopyCase("pieces-interleaved-cols", "float16", "g2s", (32, 128), (0, 64), (32, 64),
             (32, 64), global_tiles=((32, 2, 64), (64, 2048, 1)),
             expect=dict(rank=2, global_dims=(64, 64), global_strides=(128,),
                         box_dims=(64, 32), coordinates=(0, 32), num_issues=1)),
]

# ---- whole runs fold before the 16-byte and 256-element rules --------------------------
FOLDS = [
    # A whole uint8 (64, 8) tensor is 512 contiguous bytes (rows of 8 bytes alone would
    # break the 16-byte inner-box rule): one box of 256 uint16.
    CopyCase("fold-uint8-64x8", "uint8", "g2s", (64, 8), (0, 0), (64, 8), (64, 8),
             expect=dict(rank=1, dtype="uint16", global_dims=(256,), box_dims=(256,),
                         num_issues=1)),
    CopyCase("fold-int8-16x4-store", "int8", "s2g", (16, 4), (0, 0), (16, 4), (16, 4),
             expect=dict(rank=1, dtype="uint8", global_dims=(64,), box_dims=(64,),
                         num_issues=1)),
    CopyCase("fold-fp8-32x16", "float8_e5m2", "g2s", (32, 16), (0, 0), (32, 16), (32, 16),
             expect=dict(rank=1, dtype="uint16", global_dims=(256,), box_dims=(256,),
                         num_issues=1)),
    # Rows 8..16 of a (16, 4) float16 tensor: whole rows of 8 bytes are 64 halves from 32.
    CopyCase("fold-f16-rows-of-8-bytes", "float16", "g2s", (16, 4), (8, 0), (8, 4), (8, 4),
             expect=dict(rank=1, global_dims=(64,), box_dims=(32,), coordinates=(32,),
                         num_issues=1)),
]

# ---- edge tiles -----------------------------------------------------------------------
PADDED_1000 = (1024, 1)  # rows of 1000 elements, 1024 apart: the padding shows any overrun
EDGES = [
    CopyCase("edge-g2s-zero-dim0", "float16", "g2s", (64, 1000), (8, 960), (8, 64), (8, 64),
             global_strides=PADDED_1000, oob="zero",
             expect=dict(rank=2, global_dims=(1000, 64), global_strides=(2048,),
                         box_dims=(64, 8), coordinates=(960, 8), edge_dims=(0,),
                         num_issues=1)),
    # Rows 960..1024 of a dense (1000, 64) tensor: whole rows are one run of 64000 halves
    # from 61440; the cut must divide 64000 so the outer dim ends where the tensor does:
    # 512 (125 rows of 512), promoted to 256 uint32, 8 at 120.
    CopyCase("edge-g2s-zero-outer", "float16", "g2s", (1000, 64), (960, 0), (64, 64),
             (64, 64), oob="zero",
             expect=dict(rank=2, dtype="uint32", global_dims=(256, 125),
                         global_strides=(1024,), box_dims=(256, 8), coordinates=(0, 120),
                         edge_dims=(1,), num_issues=1)),
    CopyCase("edge-g2s-zero-both", "float16", "g2s", (1000, 1000), (960, 960), (64, 64),
             (64, 64), global_strides=PADDED_1000, oob="zero",
             expect=dict(rank=2, global_dims=(1000, 1000), box_dims=(64, 64),
                         coordinates=(960, 960), edge_dims=(0, 1), num_issues=1)),
    # Stores may cross dim 0's end when it is on 16 bytes: 1000 halves = 2000 bytes.
    CopyCase("edge-s2g-skip-dim0", "float16", "s2g", (64, 1000), (8, 960), (8, 64), (8, 64),
             global_strides=PADDED_1000, oob="skip",
             expect=dict(rank=2, global_dims=(1000, 64), box_dims=(64, 8),
                         coordinates=(960, 8), edge_dims=(0,), num_issues=1)),
    # Rows 960..1024 of a dense (1000, 32) float32 tensor: a run of 32000 floats cut at 256
    # (32000 = 125 * 256; 512 does not divide it), 8 rows of cuts at 120.
    CopyCase("edge-s2g-skip-outer", "float32", "s2g", (1000, 32), (960, 0), (64, 32),
             (64, 32), oob="skip",
             expect=dict(rank=2, dtype="float32", global_dims=(256, 125),
                         global_strides=(1024,), box_dims=(256, 8), coordinates=(0, 120),
                         edge_dims=(1,), num_issues=1)),
    CopyCase("edge-s2g-skip-both", "bfloat16", "s2g", (1000, 1000), (960, 960), (64, 64),
             (64, 64), global_strides=PADDED_1000, oob="skip",
             expect=dict(rank=2, global_dims=(1000, 1000), box_dims=(64, 64),
                         coordinates=(960, 960), edge_dims=(0, 1), num_issues=1)),
    # 3-D, crossing the middle (rows 96..104 of 100) and the outer dim (2..4 of 3); NaN
    # keeps float32 (no promotion); columns 0..32 of 40 stay inside.
    CopyCase("edge-g2s-nan-3d", "float32", "g2s", (3, 100, 40), (2, 96, 0), (2, 8, 32),
             (2, 8, 32), global_strides=(4096, 40, 1), oob="nan",
             expect=dict(rank=3, dtype="float32", global_dims=(40, 100, 3),
                         global_strides=(160, 16384), box_dims=(32, 8, 2),
                         coordinates=(0, 96, 2), edge_dims=(1, 2), oob_fill=1,
                         num_issues=1)),
    # Whole rows of 64 merge with the middle dim (3200 from 3072, 512 long; both dims
    # crossed): promoted to uint32 (3200 is even), dim 0 (1600 uint32 = 6400 bytes) is on
    # 16 bytes, so the store may cross it.
    CopyCase("edge-s2g-skip-3d", "float16", "s2g", (4, 50, 64), (3, 48, 0), (2, 8, 64),
             (2, 8, 64), oob="skip",
             expect=dict(rank=2, dtype="uint32", global_dims=(1600, 4),
                         global_strides=(6400,), box_dims=(256, 2), coordinates=(1536, 3),
                         edge_dims=(0, 1), num_issues=1)),
    # 128B swizzle over 128 columns crossing column 1000: 1000 is no multiple of the 64-half
    # span, so the columns stay one map dim and the 2 spans are 2 issues (+64 each).
    CopyCase("edge-swizzle-g2s-zero-both", "float16", "g2s", (1000, 1000), (960, 896),
             (64, 128), (64, 128), "swizzle:3", global_strides=PADDED_1000, oob="zero",
             expect=dict(rank=2, swizzle=3, global_dims=(1000, 1000), box_dims=(64, 64),
                         coordinates=(896, 960), edge_dims=(0, 1), num_issues=2)),
    CopyCase("edge-swizzle-s2g-skip-both", "bfloat16", "s2g", (1000, 1000), (960, 896),
             (64, 128), (64, 128), "swizzle:3", global_strides=PADDED_1000, oob="skip",
             expect=dict(rank=2, swizzle=3, global_dims=(1000, 1000), box_dims=(64, 64),
                         coordinates=(896, 960), edge_dims=(0, 1), num_issues=2)),
    CopyCase("edge-swizzle-g2s-nan-dim0", "float16", "g2s", (256, 1000), (64, 960), (64, 64),
             (64, 64), "swizzle:3", global_strides=PADDED_1000, oob="nan",
             expect=dict(rank=2, swizzle=3, global_dims=(1000, 256), box_dims=(64, 64),
                         coordinates=(960, 64), edge_dims=(0,), oob_fill=1, num_issues=1)),
    # GEMM operands with M = N = K = 1000 and 128 x 64 / 64 x 128 tiles (dense rows of 2000
    # bytes), the last tile of each: A's (rows 896.., columns 960..) in one box; B's two
    # spans as two issues; C's 128 x 128 float32 tile stored, skipping what lies outside.
    CopyCase("edge-gemm-a-tile", "float16", "g2s", (1000, 1000), (896, 960), (128, 64),
             (128, 64), "swizzle:3", oob="zero",
             expect=dict(rank=2, global_dims=(1000, 1000), global_strides=(2000,),
                         box_dims=(64, 128), coordinates=(960, 896), edge_dims=(0, 1),
                         num_issues=1)),
    CopyCase("edge-gemm-b-tile", "float16", "g2s", (1000, 1000), (960, 896), (64, 128),
             (64, 128), "swizzle:3", oob="zero",
             expect=dict(rank=2, global_dims=(1000, 1000), box_dims=(64, 64),
                         coordinates=(896, 960), edge_dims=(0, 1), num_issues=2)),
    CopyCase("edge-gemm-c-store", "float32", "s2g", (1000, 1000), (896, 896), (128, 128),
             (128, 128), oob="skip",
             expect=dict(rank=2, global_dims=(1000, 1000), global_strides=(4000,),
                         box_dims=(128, 128), coordinates=(896, 896), edge_dims=(0, 1),
                         num_issues=1)),
    # A halo load that starts 2 rows before the tensor.
    CopyCase("edge-g2s-before-start", "float16", "g2s", (64, 128), (-2, 0), (8, 64), (8, 64),
             oob="zero",
             expect=dict(rank=2, global_dims=(128, 64), box_dims=(64, 8), coordinates=(0, -2),
                         edge_dims=(1,), num_issues=1)),
    CopyCase("edge-rank1-nan", "bfloat16", "g2s", (1000,), (960,), (64,), (64,), oob="nan",
             expect=dict(rank=1, dtype="bfloat16", global_dims=(1000,), box_dims=(64,),
                         coordinates=(960,), edge_dims=(0,), oob_fill=1, num_issues=1)),
]

CASES = VIEWS + RESHAPES + PIECES + FOLDS + EDGES
