"""Copy cases of the two variants: a multicast load in a cluster (``cluster=N``) and a
reducing store (``reduce=op``): their truth (``expected_after``, checked here against values
worked out by hand), the plans and the model, the kernels (CUDA, ptxas) and, on a GPU, the
bytes.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from tvm_tma.testing.copy_cases import (
    POISON_BYTE,
    CopyCase,
    expected_after,
    reduction_array,
)
from tvm_tma.testing.runner import (
    assemble,
    compile_case,
    inputs,
    plans_of,
    run_model,
    run_on_gpu,
)

U32 = np.uint32


def _reduced(op: str, dtype, old, new) -> np.ndarray:
    """The global tensor after reducing ``new`` into all of ``old`` (rank 1) with ``op``."""
    old, new = np.array(old, dtype=dtype), np.array(new, dtype=dtype)
    case = CopyCase("r", np.dtype(dtype).name, "s2g", old.shape, (0,), old.shape, old.shape,
                    reduce=op)
    glob, shared = expected_after(case, old, new)
    np.testing.assert_array_equal(shared, new)  # a store leaves shared memory alone
    return glob


#: (op, dtype, old, new, result), each result worked out by hand from the PTX ISA's
#: definition of the tensor reduction.
HAND_CASES = [
    ("add", np.int32, [1, -5, 2**31 - 1, 0], [2, 3, 1, -1], [3, -2, -2**31, -1]),
    ("add", U32, [2**32 - 1, 7, 0, 2**31], [2, 1, 0, 2**31], [1, 8, 0, 0]),
    ("add", np.uint64, [2**64 - 1, 5], [3, 6], [2, 11]),
    ("min", np.int32, [-3, 5, -2**31, 7], [2, -8, 0, 7], [-3, -8, -2**31, 7]),
    ("max", np.int32, [-3, 5, -2**31, 7], [2, -8, 0, 7], [2, 5, 0, 7]),
    ("min", U32, [2**32 - 1, 0, 9], [1, 4, 9], [1, 0, 9]),  # unsigned: 0xffffffff is big
    ("max", U32, [2**32 - 1, 0, 9], [1, 4, 9], [2**32 - 1, 4, 9]),
    ("min", np.int64, [-2**63, 4, -1], [0, -2**40, 2**40], [-2**63, -2**40, -1]),
    ("max", np.int64, [-2**63, 4, -1], [0, -2**40, 2**40], [0, 4, 2**40]),
    # inc: old >= new ? 0 : old + 1 (counts up to new, then wraps to 0)
    ("inc", U32, [0, 5, 7, 3, 9, 10], [0, 5, 3, 10, 10, 10], [0, 0, 0, 4, 10, 0]),
    # dec: old == 0 || old > new ? new : old - 1 (counts down to 0, then wraps to new)
    ("dec", U32, [0, 5, 7, 3, 1, 0], [10, 5, 3, 10, 10, 0], [10, 4, 3, 2, 0, 0]),
    ("and", np.int32, [-1, 0x0F0F0F0F, -2**31], [0x0F0F0F0F, 0x00FF00FF, -1],
     [0x0F0F0F0F, 0x000F000F, -2**31]),
    ("or", np.int32, [-2**31, 0x0F0F0F0F, 0], [1, 0x00FF00FF, 0], [-2**31 + 1, 0x0FFF0FFF, 0]),
    ("xor", np.int32, [-1, 0x0F0F0F0F, 5], [0x0F0F0F0F, 0x0F0F0F0F, 3], [-0x0F0F0F10, 0, 6]),
    ("xor", np.uint64, [2**64 - 1, 1], [2**63, 1], [2**63 - 1, 0]),
]


@pytest.mark.parametrize("op, dtype, old, new, want", HAND_CASES,
                         ids=[f"{c[0]}-{np.dtype(c[1]).name}-{i}"
                              for i, c in enumerate(HAND_CASES)])
def test_expected_reduction_matches_the_hand_computed_values(op, dtype, old, new, want):
    got = _reduced(op, dtype, old, new)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.array(want, dtype=dtype))


def test_half_precision_adds_round_to_nearest_even():
    # 2048 + 1 lies halfway between the float16 neighbours 2048 and 2050: the even one wins;
    # 2048 + 3 lies halfway between 2050 and 2052: 2052.
    got = _reduced("add", np.float16, [2048, 2048, 1.5, -0.25], [1, 3, 2.25, 0.25])
    np.testing.assert_array_equal(got, np.array([2048, 2052, 3.75, 0], np.float16))
    bf16 = ml_dtypes.bfloat16  # 8 significant bits: 256 + 1 ties to 256, 256 + 3 to 260
    got = _reduced("add", bf16, [256, 256, 1], [1, 3, 1])
    np.testing.assert_array_equal(got.astype(np.float32), [256, 256 + 4, 2])


def test_float32_add_keeps_subnormals():
    """Values measured on the H200 (cp.reduce.async.bulk.tensor .add on a FLOAT32 map): no
    flush to zero of inputs or results, round to nearest even, zeros keep IEEE signs."""
    tiny = np.finfo(np.float32).smallest_normal  # 2**-126; below it: subnormal
    old = [1e-39, -1e-39, 1.5 * tiny, -1.5 * tiny, 1.0, 1e-39, 0.0, -0.0, 3 * tiny, 2e-39]
    new = [0.0, 0.0, -tiny, tiny, 1e-39, -2e-39, -0.0, -0.0, -2 * tiny, 3e-39]
    want = [0x000AE398, 0x800AE398, 0x00400000, 0x80400000, 0x3F800000, 0x800AE398,
            0x00000000, 0x80000000, 0x00800000, 0x003671F8]
    got = _reduced("add", np.float32, old, new)
    np.testing.assert_array_equal(got.view(U32), np.array(want, U32))


def test_a_reduction_changes_only_its_region():
    case = CopyCase("region", "int32", "s2g", (3, 4), (1, 1), (1, 2), (1, 2), reduce="max")
    glob = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)  # row 1 is [-2, -1, 0, 1]
    shared = np.array([[5, -7]], dtype=np.int32)
    got, _ = expected_after(case, glob, shared)
    want = glob.copy()
    want[1, 1:3] = [5, 0]
    np.testing.assert_array_equal(got, want)


def test_every_cta_of_a_cluster_ends_with_the_one_cta_image():
    one = CopyCase("one", "float16", "g2s", (16, 64), (4, 0), (8, 64), (8, 64), "swizzle:3")
    cluster = dataclasses.replace(one, cluster=4)
    glob, images = inputs(cluster, seed=3)
    assert images.shape == (4, 8, 64)
    assert (images.view(np.uint8) == POISON_BYTE).all()
    _, want = expected_after(one, glob, images[0])
    got_global, got = expected_after(cluster, glob, images)
    np.testing.assert_array_equal(got_global, glob)
    for image in got:
        np.testing.assert_array_equal(image.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("changes", [dict(cluster=2, direction="s2g"), dict(cluster=1),
                                     dict(cluster=5), dict(reduce="add")])
def test_a_variant_of_the_wrong_direction_is_not_a_case(changes):
    with pytest.raises(ValueError):
        dataclasses.replace(CopyCase("g", "float32", "g2s", (8, 8), (0, 0), (8, 8), (8, 8)),
                            **changes)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int32", "uint32",
                                   "int64", "uint64"])
def test_reduction_operands_are_finite_and_reach_the_turning_points(dtype):
    values = reduction_array((4096,), dtype, np.random.default_rng(5))
    if values.dtype.kind in "iu":
        info = np.iinfo(values.dtype)
        assert (values == 0).any() and (values == info.max).any()
        assert (values == info.min).any() and len(np.unique(values)) > 1000
    else:
        wide = values.astype(np.float64)
        assert np.isfinite(wide).all() and (wide < 0).any() and (wide > 0).any()


# --------------------------------------------------------------------------------------------
# Cases of the variants: plans, the model, the kernels
# --------------------------------------------------------------------------------------------

#: (case, issues per CTA) of multicast loads; the split deals the plan's boxes out evenly.
MULTICAST_CASES = [
    (CopyCase("mc2-swizzle128", "float16", "g2s", (64, 64), (16, 0), (16, 64), (16, 64),
              "swizzle:3", cluster=2), 1),
    (CopyCase("mc4-rows", "float32", "g2s", (64, 32), (0, 0), (32, 32), (32, 32),
              cluster=4), 1),
    (CopyCase("mc2-stages", "bfloat16", "g2s", (64, 64), (8, 0), (16, 64), (3, 16, 64),
              "swizzle:3", stages=3, cluster=2), 1),
    (CopyCase("mc2-edge-zero", "float16", "g2s", (40, 64), (32, 0), (16, 64), (16, 64),
              "swizzle:3", oob="zero", cluster=2), 1),
    (CopyCase("mc2-padded", "uint8", "g2s", (32, 256), (4, 128), (8, 128), (8, 128),
              "padded:128", cluster=2), 4),
]
REDUCE_CASES = [
    CopyCase("red-add-f32", "float32", "s2g", (32, 64), (8, 32), (8, 32), (8, 32),
             reduce="add"),
    CopyCase("red-add-bf16-swizzle", "bfloat16", "s2g", (32, 128), (8, 64), (16, 64), (16, 64),
             "swizzle:3", reduce="add"),
    CopyCase("red-min-i32", "int32", "s2g", (16, 64), (4, 0), (8, 64), (8, 64), reduce="min"),
    CopyCase("red-max-i64", "int64", "s2g", (16, 32), (0, 0), (8, 32), (8, 32), reduce="max"),
    CopyCase("red-inc-u32", "uint32", "s2g", (16, 64), (0, 0), (16, 64), (16, 64),
             reduce="inc"),
    CopyCase("red-dec-u32-stages", "uint32", "s2g", (32, 32), (0, 0), (8, 32), (2, 8, 32),
             stages=2, reduce="dec"),
    CopyCase("red-xor-u64-edge", "uint64", "s2g", (12, 16), (8, 0), (8, 16), (8, 16),
             oob="skip", reduce="xor"),
    CopyCase("red-add-f16", "float16", "s2g", (16, 64), (0, 0), (16, 64), (16, 64),
             reduce="add"),
]
VARIANT_CASES = [case for case, _ in MULTICAST_CASES] + REDUCE_CASES
IDS = [case.name for case in VARIANT_CASES]


@pytest.mark.parametrize("case, per_cta", MULTICAST_CASES,
                         ids=[case.name for case, _ in MULTICAST_CASES])
def test_multicast_plans_deal_out_every_box(case, per_cta):
    for copy_plan, env in plans_of(case):
        assert copy_plan.cluster_split == case.cluster
        assert copy_plan.issues_per_cta == per_cta
        assert copy_plan.issues_per_cta * case.cluster == copy_plan.num_issues
        assert copy_plan.bytes_per_issue * copy_plan.num_issues == case.copy_bytes


@pytest.mark.parametrize("case", REDUCE_CASES, ids=[case.name for case in REDUCE_CASES])
def test_reducing_plans_keep_the_element_type(case):
    for copy_plan, _ in plans_of(case):
        assert copy_plan.tensor_map.dtype == case.dtype and copy_plan.cluster_split is None


@pytest.mark.parametrize("case", VARIANT_CASES, ids=IDS)
def test_model_matches_the_expected_bytes(case):
    global_in, shared_in = inputs(case, seed=11)
    want_global, want_shared = expected_after(case, global_in, shared_in)
    got_global, got_shared = run_model(case, global_in, shared_in)
    np.testing.assert_array_equal(got_global.view(np.uint8), want_global.view(np.uint8))
    np.testing.assert_array_equal(got_shared.view(np.uint8), want_shared.view(np.uint8))
    if case.reduce is not None:  # the reduction changed the region (not a plain store)
        plain = dataclasses.replace(case, reduce=None)
        assert not np.array_equal(expected_after(plain, global_in, shared_in)[0], want_global)


@pytest.mark.parametrize("case", VARIANT_CASES, ids=IDS)
def test_variant_kernels_assemble(case):
    built = compile_case(case)
    lines = built.tma_asm_lines
    assert len(lines) == 1, lines
    if case.cluster:
        assert ".multicast::cluster" in lines[0]
        assert "tvm_builtin_cuda_cluster_sync" in built.cuda_source
    else:
        assert lines[0].startswith(f"cp.reduce.async.bulk.tensor.{plans_of(case)[0][0].rank}d")
        assert f".{case.reduce}." in lines[0]
    assert len(assemble(built.cuda_source)) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("case", VARIANT_CASES, ids=IDS)
def test_variant_is_bit_exact_on_gpu(case):
    built = compile_case(case)
    for seed in (1, 2):
        ok, problems = run_on_gpu(case, built, seed=seed)
        assert ok, f"{case.name} (seed {seed}): {problems}"
