"""The copy matrix shared by the CI tests and the GPU tests.

Expected plan facts are derived by hand from the TMA rules (comments say how), never taken
from the planner or from upstream TVM.
"""

from __future__ import annotations

from copy_matrix_views import CASES as AUTHOR_CASES

from tvm_tma.testing.copy_cases import CopyCase

DTYPES = ("float16", "bfloat16", "float32", "int8", "uint8", "float8_e4m3fn", "float8_e5m2")
WIDTH = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "uint8": 1,
         "float8_e4m3fn": 1, "float8_e5m2": 1}


def _swizzled_tile(dtype: str, mode: int, direction: str) -> CopyCase:
    """An 8-row tile two swizzle spans wide, at rows 8.., columns span.. of a larger tensor.

    The span (16 << mode bytes) splits each row into 2 atoms, so the map is rank 3:
    (span elements, 32 rows, 8 atom columns), box (span, 8, 2), coordinates (0, 8, 1),
    byte strides (row pitch, span bytes).
    """
    width = WIDTH[dtype]
    span = (16 << mode) // width
    cols = 8 * span
    return CopyCase(
        name=f"{dtype}-{direction}-swizzle{16 << mode}B",
        dtype=dtype,
        direction=direction,
        global_shape=(32, cols),
        global_start=(8, span),
        global_extent=(8, 2 * span),
        shared_shape=(8, 2 * span),
        shared_layout=f"swizzle:{mode}",
        expect=dict(
            rank=3, swizzle=mode, global_dims=(span, 32, 8),
            global_strides=(cols * width, span * width), box_dims=(span, 8, 2),
            coordinates=(0, 8, 1), num_issues=1,
        ),
    )


def _row_tile(dtype: str, direction: str) -> CopyCase:
    """A 16 x 64-byte row-major tile at (4, 64 bytes) of a 64 x 256-byte tensor: rank 2."""
    width = WIDTH[dtype]
    cols, tile = 256 // width, 64 // width
    return CopyCase(
        name=f"{dtype}-{direction}-rowmajor",
        dtype=dtype,
        direction=direction,
        global_shape=(64, cols),
        global_start=(4, tile),
        global_extent=(16, tile),
        shared_shape=(16, tile),
        expect=dict(rank=2, swizzle=0, global_dims=(cols, 64), global_strides=(256,),
                    box_dims=(tile, 16), coordinates=(tile, 4), num_issues=1),
    )


SPECIAL = [
    # The seed demo: 8 x 256 float16 into a 128B-swizzled tile -> one rank-3 issue.
    CopyCase("seed-demo", "float16", "g2s", (8, 256), (0, 0), (8, 256), (8, 256), "swizzle:3",
             expect=dict(rank=3, global_dims=(64, 8, 4), global_strides=(512, 128),
                         box_dims=(64, 8, 4), coordinates=(0, 0, 0), num_issues=1)),
    # Rank 1: a contiguous run of 512 float32 = 2 KiB; box 512 > 256 -> promoted to 8-byte
    # elements: box 256, dims 4096/2, coordinate 256/2.
    CopyCase("rank1-float32-promoted", "float32", "g2s", (4096,), (256,), (512,), (512,),
             expect=dict(rank=1, dtype="uint64", global_dims=(2048,), box_dims=(256,),
                         coordinates=(128,), num_issues=1)),
    CopyCase("rank1-uint8-store", "uint8", "s2g", (8192,), (1024,), (256,), (256,),
             expect=dict(rank=1, dtype="uint8", global_dims=(8192,), box_dims=(256,),
                         coordinates=(1024,), num_issues=1)),
    # int8 rows of 512: box 512 > 256 -> uint16 elements (box 256), rows stay a dim.
    CopyCase("int8-promoted-rows", "int8", "g2s", (64, 1024), (8, 512), (8, 512), (8, 512),
             expect=dict(rank=2, dtype="uint16", global_dims=(512, 64),
                         global_strides=(1024,), box_dims=(256, 8), coordinates=(256, 8),
                         num_issues=1)),
    CopyCase("fp8-promoted-store", "float8_e4m3fn", "s2g", (16, 2048), (4, 1024), (4, 1024),
             (4, 1024),
             expect=dict(rank=2, dtype="uint32", box_dims=(256, 4), coordinates=(256, 4),
                         num_issues=1)),
    # A whole 512 x 64 float16 tensor is one run of 32768 halves: cut into rows of 1024
    # halves (2 KiB), promoted to 256 uint64 -> a (256, 32) box, one issue.
    CopyCase("f16-512x64-block", "float16", "g2s", (512, 64), (0, 0), (512, 64), (512, 64),
             expect=dict(rank=2, dtype="uint64", global_dims=(256, 32),
                         global_strides=(2048,), box_dims=(256, 32), num_issues=1)),
    # Whole rows 8..520 of a 1024 x 64 tensor: one run of 32768 halves starting at half 512;
    # the widest cut the start sits on is 512 halves (1 KiB rows, promoted to 256 uint32)
    # x 64 rows, at (0, 1).
    CopyCase("f16-512x64-at-row-8", "float16", "s2g", (1024, 64), (8, 0), (512, 64),
             (512, 64), expect=dict(rank=2, dtype="uint32", box_dims=(256, 64),
                                    coordinates=(0, 1), num_issues=1)),
    # Padded shared rows (pitch 128 elements = 256 B): rows are not dense, so each row is one
    # 128-byte issue stepping the shared address by 256 B. The global tensor is contiguous
    # (row pitch 128 = its width), so rows fold into one dimension of 32 * 128 elements:
    # coordinate 3 * 128 + 64 = 448, stepped by 128 per issue.
    CopyCase("f16-padded-rows-issue-loop", "float16", "g2s", (32, 128), (3, 64), (8, 64),
             (8, 64), "padded:64",
             expect=dict(rank=1, global_dims=(4096,), box_dims=(64,), coordinates=(448,),
                         num_issues=8)),
    CopyCase("f32-padded-rows-store", "float32", "s2g", (32, 64), (5, 32), (4, 32), (4, 32),
             "padded:32", expect=dict(rank=1, box_dims=(32,), coordinates=(352,),
                                      num_issues=4)),
    # Rank 4: batch of 2 swizzled 16 x 128 float16 tiles (128B swizzle splits 128 into 2 x 64).
    CopyCase("rank4-batched-swizzle", "float16", "g2s", (4, 32, 256), (1, 16, 128),
             (2, 16, 128), (2, 16, 128), "swizzle:3",
             expect=dict(rank=4, global_dims=(64, 32, 4, 4), box_dims=(64, 16, 2, 2),
                         coordinates=(0, 16, 2, 1), num_issues=1)),
    # Rank 5: two batch dims, rows, and the 2 swizzle atoms of each row; nothing folds
    # because no inner dimension is boxed whole.
    CopyCase("rank5-store", "bfloat16", "s2g", (3, 3, 32, 256), (1, 1, 8, 64), (2, 2, 8, 128),
             (2, 2, 8, 128), "swizzle:3",
             expect=dict(rank=5, global_dims=(64, 32, 4, 3, 3), box_dims=(64, 8, 2, 2, 2),
                         coordinates=(0, 8, 1, 1, 1), num_issues=1)),
    CopyCase("rank5-g2s", "float16", "g2s", (2, 3, 32, 256), (0, 1, 8, 64), (2, 2, 8, 128),
             (2, 2, 8, 128), "swizzle:3",
             expect=dict(rank=5, box_dims=(64, 8, 2, 2, 2), coordinates=(0, 8, 1, 1, 0),
                         num_issues=1)),
    # Unit batch indices fold into the rows: (3, 2, 32, 256)[1, 1, 8:16, 64:192] is rank 3
    # with rows of size 3 * 2 * 32 at coordinate (1 * 2 + 1) * 32 + 8.
    CopyCase("unit-dim-folds", "bfloat16", "s2g", (3, 2, 32, 256), (1, 1, 8, 64),
             (1, 1, 8, 128), (8, 128), "swizzle:3",
             expect=dict(rank=3, global_dims=(64, 192, 4), box_dims=(64, 8, 2),
                         coordinates=(0, 104, 1), num_issues=1)),
    # A stage of a 3-stage buffer, walked by a loop variable on both sides.
    CopyCase("stages-g2s", "float16", "g2s", (64, 256), (8, 0), (8, 256), (3, 8, 256),
             "swizzle:3", stages=3, expect=dict(rank=3, box_dims=(64, 8, 4), num_issues=1)),
    CopyCase("stages-s2g", "float32", "s2g", (32, 64), (0, 0), (8, 32), (2, 8, 32),
             "swizzle:3", stages=2, expect=dict(rank=2, box_dims=(32, 8), num_issues=1)),
    # The tile sits 2 KiB into the arena (on the 1024-byte swizzle period).
    CopyCase("smem-offset", "bfloat16", "g2s", (16, 128), (0, 64), (8, 64), (8, 64),
             "swizzle:3", smem_elem_offset=1024, expect=dict(rank=2, num_issues=1)),
    # The packed 16-byte-atom layout TVM uses for unswizzled MMA operands: inner box 16 B.
    CopyCase("f16-mma-interleaved", "float16", "g2s", (32, 64), (8, 0), (8, 64), (8, 64),
             "swizzle:0", expect=dict(rank=3, box_dims=(8, 8, 8), num_issues=1)),
    # A whole 16 x 32 float32 tensor is one run of 512 floats: 256 uint64 in one box.
    CopyCase("f32-full-tensor-store", "float32", "s2g", (16, 32), (0, 0), (16, 32), (16, 32),
             expect=dict(rank=1, dtype="uint64", global_dims=(256,), box_dims=(256,),
                         num_issues=1)),
    # L2 cache hints: the plan is unchanged; every issue carries .L2::cache_hint and one
    # createpolicy per copy builds the policy (before the 8-step issue loop, not in it).
    CopyCase("f16-padded-rows-evict-first", "float16", "g2s", (32, 128), (3, 64), (8, 64),
             (8, 64), "padded:64", cache_hint="evict_first",
             expect=dict(rank=1, box_dims=(64,), coordinates=(448,), num_issues=8)),
    CopyCase("f32-store-evict-last", "float32", "s2g", (16, 32), (0, 0), (16, 32), (16, 32),
             cache_hint="evict_last", expect=dict(rank=1, box_dims=(256,), num_issues=1)),
    CopyCase("stages-g2s-evict-normal", "float16", "g2s", (64, 256), (8, 0), (8, 256),
             (3, 8, 256), "swizzle:3", stages=3, cache_hint="evict_normal",
             expect=dict(rank=3, box_dims=(64, 8, 4), num_issues=1)),
]

CASES = (
    [_swizzled_tile(d, m, "g2s") for d in DTYPES for m in (1, 2, 3)]
    + [_swizzled_tile(d, 3, "s2g") for d in DTYPES]
    + [_row_tile(d, "g2s") for d in DTYPES[:3]]
    + [_row_tile(d, "s2g") for d in DTYPES[3:]]
    + SPECIAL
    + AUTHOR_CASES
)
