"""The grouped GEMM (tvm_tma.kernels.grouped_gemm): torch._grouped_mm semantics on the GEMM's
pieces, each group's A and C rows through maps rebound on the device.

CI: every kernel assembles for sm_90a; the copies are planned as intended (A and C
device-born, B[g] host-born when N is a multiple of the tile and device-born when it is
not); the tile walk's obligations are proven from what the kernel states; the config
refusals. GPU: groups of every awkward size (empty, one row, fewer rows than a tile,
ending mid-tile, rows past the last group), both schedules, ragged N; every element
against the fp32 reference within the GEMM's bound, rows outside the groups untouched.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tvm_tma
from tvm_tma.kernels.gemm_config import MAX_SHARED, GemmConfig
from tvm_tma.kernels.grouped_gemm import (
    DECODE_ROWS,
    DECODE_TILES,
    SHORT_TILES,
    SLOT_PAIRS,
    GroupedGemmConfig,
    check_workspace_left_clean,
    grouped_gemm_kernel,
    takes_short,
    with_tiling,
    workspace,
)
from tvm_tma.kernels.grouped_reference import (
    group_ends,
    grouped_reference,
    matches,
    run,
    uneven_sizes,
)
from tvm_tma.testing.runner import assemble, compile_kernel, ptxas_usage
from tvm_tma.testing.scripts import load_script

REPO = Path(__file__).resolve().parents[2]

#: name -> (config, group sizes). Sizes: empty groups, a one-row group, groups shorter
#: than a tile and ending mid-tile, one spanning several tiles, rows after the last group.
CASES = {
    "cooperative": (GroupedGemmConfig.for_problem(5, 1024, 512, 256),
                    [0, 1, 100, 300, 0]),
    "pingpong-ragged-n": (GroupedGemmConfig.for_problem(4, 640, 320, 192, schedule="pingpong",
                                                        block_n=128, epilogue_n=64),
                          [129, 0, 257, 17]),
    "one-group": (GroupedGemmConfig.for_problem(1, 512, 256, 128), [512]),
    "many-small": (GroupedGemmConfig.for_problem(16, 768, 256, 128, block_n=128, stages=6),
                   [16, 48, 0, 7, 1, 64, 33, 0, 128, 16, 5, 99, 0, 2, 200, 50]),
    # A decode step (at most 16 rows an expert): the default's 64 x 128 tiles, ragged N.
    "decode-64-row": (GroupedGemmConfig.for_problem(12, 160, 320, 256),
                      [16, 0, 1, 33, 16, 0, 0, 40, 16, 7, 15, 16]),
    # Stream-K on few CTAs, so the device's split cuts tiles: 10 tiles of 4 K steps on 8
    # CTAs are one whole wave, then the other 2 tiles' 8 steps in runs of one (a tile in
    # four runs: an owner and three peers); on 16 CTAs no tile is whole (40 steps in runs
    # of 2 or 3). Ragged N on 5 CTAs: 14 tiles, 10 whole, 4 tiles' 12 steps in runs of 2
    # or 3, B[g] rebound too.
    "stream-k-8-ctas": (GroupedGemmConfig.for_problem(5, 1024, 512, 256, ctas=8,
                                                      stream_k=True), [0, 1, 100, 300, 0]),
    "stream-k-16-ctas": (GroupedGemmConfig.for_problem(5, 1024, 512, 256, ctas=16,
                                                       stream_k=True), [0, 1, 100, 300, 0]),
    "stream-k-ragged-n": (GroupedGemmConfig.for_problem(4, 640, 320, 192, block_n=128,
                                                        epilogue_n=64, ctas=5,
                                                        stream_k=True), [129, 0, 257, 17]),
    # Weight-streaming steps (17 to 128 rows an expert): the kernel holds 128 x 256 and
    # 64 x 256 tiles and picks on the device. On 4 CTAs: 5 groups of one 128-row block
    # (10 tiles, 3 rounds) are 6 of 64 rows (12 tiles, 3 rounds): the short tiles; 4
    # groups of one 128-row block (8 tiles, 2 rounds) are 7 of 64 (14 tiles, 4 rounds):
    # the tall ones. Empty and one-row groups, groups ending mid-tile in both.
    "two-heights-short": (GroupedGemmConfig.for_problem(6, 384, 512, 256, ctas=4),
                          [64, 0, 1, 63, 100, 37]),
    "two-heights-tall": (GroupedGemmConfig.for_problem(5, 384, 512, 256, ctas=4),
                         [120, 128, 0, 70, 1]),
    # The same groups with a ragged N (320: B[g] rebound too, in each tiling's own slots).
    "two-heights-ragged-n-short": (GroupedGemmConfig.for_problem(6, 384, 320, 192, ctas=4),
                                   [64, 0, 1, 63, 100, 37]),
    "two-heights-ragged-n-tall": (GroupedGemmConfig.for_problem(5, 384, 320, 192, ctas=4),
                                  [120, 128, 0, 70, 1]),
    # 2x1 clusters: pairs of row blocks of one group share B[g] (multicast). Groups of an
    # odd number of row blocks (1 row, 100, 300: the last pair's second CTA computes the
    # last row block again and stores nothing), empty groups, rows after the last group;
    # on 4 CTAs (2 clusters, many rounds), and with a ragged N (B[g] rebound, each CTA
    # loading its half through its own slots).
    "cluster-pairs": (GroupedGemmConfig.for_problem(5, 1024, 512, 256, cluster=2),
                      [0, 1, 100, 300, 0]),
    "cluster-pairs-4-ctas": (GroupedGemmConfig.for_problem(6, 768, 512, 128, ctas=4,
                                                           cluster=2),
                             [64, 0, 1, 263, 300, 140]),
    "cluster-pairs-ragged-n": (GroupedGemmConfig.for_problem(4, 640, 320, 192, block_n=128,
                                                             epilogue_n=64, cluster=2),
                               [129, 0, 257, 17]),
}


class _BuiltOnFirstUse(dict):
    """The cases' kernels, each built when a test first asks for it: a test worker builds
    only the kernels of the tests it runs (twelve builds took 35 s a worker)."""

    def __missing__(self, name: str):
        self[name] = compile_kernel(grouped_gemm_kernel(CASES[name][0]))
        return self[name]


@pytest.fixture(scope="module")
def built_kernels():
    return _BuiltOnFirstUse()


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_grouped_kernel_assembles_for_sm90a(name, built_kernels):
    assert len(assemble(built_kernels[name].cuda_source)) > 0


def _planned(gcfg):
    """(rule, device_view) of every copy of the kernel, in source order."""
    report = tvm_tma.explain(grouped_gemm_kernel(gcfg))
    return [(copy.rule, copy) for copy in report.copies]


def test_a_and_c_are_rebound_on_the_device_and_b_is_host_born_when_it_fits(built_kernels):
    source = built_kernels["cooperative"].cuda_source
    body = source[source.rindex("__global__ void"):]
    # Two template parameters (A's and C's) and B's own host map: three tensor maps.
    assert built_kernels["cooperative"].tensormap_params == 3
    # A's rebind: the group's rows of 256 columns, 512-byte rows. C's: its 512 columns as
    # 8 chunks of 64 (one 128B-swizzled box each), rows 1024 bytes apart; one call site per
    # half of the 256-wide tile (the epilogue's two 128-column stages: the second finds
    # its tag current and does not rebind).
    assert "(uint)256, ((uint)rows_ptr[0]), (uint64_t)512ULL);" in body
    assert ("(uint)64, ((uint)rows_ptr_1[0]), (uint)8, (uint64_t)1024ULL, "
            "(uint64_t)128ULL);") in body
    # B[g] is inside B (N a multiple of the tile): no rebind, its 3-D map at (g, n, k).
    # The producer's loop of K = 256 (4 steps) is unrolled (wgmma.k_loop): one A load, so
    # one rebind site, a step.
    assert body.count("tvm_tma_rebind_") == 4 + 2
    for rule, _ in _planned(CASES["cooperative"][0]):
        assert rule is None


def test_a_ragged_n_rebinds_b_too(built_kernels):
    source = built_kernels["pingpong-ragged-n"].cuda_source
    body = source[source.rindex("__global__ void"):]
    # A, B[g] (N = 320 is not a multiple of the 128-wide tile: its edge tile crosses B[g]'s
    # end, which only B[g]'s own map bounds) and C of each consumer warpgroup; A's and
    # B[g]'s at each of the 3 K steps the unrolled producer loop spells out.
    assert body.count("tvm_tma_rebind_") == 3 * 2 + 2
    assert "(uint)192, (uint)320, (uint64_t)384ULL);" in body  # B[g]: 320 rows of 192


def test_the_config_refuses_what_the_kernel_does_not_do():
    for options, what in ((dict(cluster_n=2), "cluster_n"), (dict(split_k=2), "split_k"),
                          (dict(cluster=2, stream_k=True), "cluster=2 with stream_k=True"),
                          (dict(cluster=2, schedule="pingpong", block_n=128, epilogue_n=64),
                           "schedule='pingpong': a 2x1 cluster walks whole pairs of tiles of "
                           "one cooperative tiling"),
                          (dict(dtype="float8_e4m3fn"), "dtype"),
                          (dict(schedule="pingpong", block_n=128, epilogue_n=64,
                                stream_k=True),
                           "stream_k with schedule='pingpong'"),
                          (dict(block_m=256, block_n=128, stages=4, epilogue_n=64),
                           "block_m=256: the grouped GEMM takes tiles of 64, 128 or 192")):
        with pytest.raises(ValueError, match=what):
            GroupedGemmConfig.for_problem(4, 512, 256, 128, **options).check()
    with pytest.raises(ValueError, match="at least one group"):
        GroupedGemmConfig.for_problem(0, 512, 256, 128).check()
    # The GEMM's own stream-K (host-split) is not the grouped walk's.
    gemm_stream_k = GroupedGemmConfig(4, replace(CASES["cooperative"][0].gemm, stream_k=True))
    with pytest.raises(ValueError, match="the GEMM's stream-K"):
        gemm_stream_k.check()
    # Step numbers past 32 bits: 1M rows in 128-row tiles, 2^17 K steps.
    with pytest.raises(ValueError, match="overflow the kernel's 32-bit step numbers"):
        GroupedGemmConfig.for_problem(2, 1 << 20, 256, 1 << 23, stream_k=True).check()


def test_stream_k_takes_the_partials_and_flags_and_refuses_a_grid_past_the_gpu():
    gcfg = CASES["stream-k-8-ctas"][0]
    maps, partials, flags = workspace(gcfg, sm_count=132)
    assert maps.shape == (8, 4, 256) and maps.dtype == np.uint8
    assert partials.shape == (8, 128 * 256) and partials.dtype == np.float32
    assert flags.shape == (8,) and flags.dtype == np.int32 and not flags.any()
    assert [x.shape for x in workspace(CASES["cooperative"][0])] == [(132, 4, 256)]
    with pytest.raises(ValueError, match="ctas=8 on a GPU of 4 SMs"):
        workspace(gcfg, sm_count=4)
    check_workspace_left_clean(gcfg, flags)
    with pytest.raises(RuntimeError, match=r"flags set at CTAs \[3\]"):
        check_workspace_left_clean(gcfg, np.array([0, 0, 0, 1, 0, 0, 0, 0], np.int32))


def test_the_stream_k_kernel_splits_on_the_device_and_fixes_up_in_order(built_kernels):
    """The split is computed from the tile count the kernel reads from ``offs``: the full
    waves, less one where the partial wave has fewer K steps than CTAs (8 here), then runs
    of ``shared * w // 8``; a peer publishes its part with a release, the owner acquires
    each peer's flag, clears it and adds the slot of 128 x 256 floats."""
    built = built_kernels["stream-k-8-ctas"]
    source = built.cuda_source
    body = source[source.rindex("__global__ void"):]
    signature = body[:body.index("{")]
    assert "float* __restrict__ partials_ptr" in signature
    assert "int* __restrict__ flags_ptr" in signature
    # The split, from the tile count: whole waves of 8 CTAs, one fewer where the rest has
    # fewer K steps (4 a tile) than CTAs; everything whole where too few steps are left.
    assert "whole_ptr[0] = ((total_ptr[0] >> 3) * 8);" in body
    assert "whole_ptr[0] = (whole_ptr[0] - 8);" in body
    assert "shared_ptr[0] = ((total_ptr[0] * 4) - (whole_ptr[0] * 4));" in body
    assert "whole_ptr[0] = total_ptr[0];" in body
    # One release (a peer's slot), one acquire (the owner's wait); every consumer thread
    # writes or adds its 128 accumulators (128 x 256 floats over 256 threads).
    assert body.count("st_release_gpu_global_b32(") == 1
    assert body.count("ld_acquire_gpu_global_b32_s32(") == 1
    assert body.count("partials_ptr[") == 2 * 128
    # The same copies in both walks: A rebound for its group, B[g] in B's host-born map
    # (the segment's K steps are stated inside the tile), C rebound: three maps. The
    # whole tiles' producer loop (4 K steps) is unrolled, the segments' (a count known on
    # the device only) is a loop: an A and a B load site for each.
    assert body.count("tvm_tma_load_") == 2 * (4 + 1) and built.tensormap_params == 3
    for rule, _ in _planned(CASES["stream-k-8-ctas"][0]):
        assert rule is None


def test_uneven_sizes_cover_m_in_multiples_of_16():
    rng = np.random.default_rng(3)
    for groups, m in ((8, 8128), (64, 1040), (64, 15888)):
        sizes = uneven_sizes(rng, groups, m)
        assert sum(sizes) == m and all(s % 16 == 0 and s >= 0 for s in sizes)
        assert len(set(sizes)) > 1
    assert list(group_ends([3, 0, 5])) == [3, 3, 8]


def test_the_reference_leaves_rows_outside_the_groups_nan_and_matches_rejects_writes():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((10, 4)).astype(np.float32)
    b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    ref, magnitude = grouped_reference(a, b, group_ends([4, 3]))
    np.testing.assert_allclose(ref[:4], a[:4] @ b[0].T, rtol=1e-6)
    np.testing.assert_allclose(ref[4:7], a[4:7] @ b[1].T, rtol=1e-6)
    assert np.isnan(ref[7:]).all() and np.isnan(magnitude[7:]).all()
    bound = np.full_like(ref, 1e-3)
    assert matches(ref.copy(), ref, bound)
    written = ref.copy()
    written[8] = 0.0  # a store past the last group
    assert not matches(written, ref, bound)


def test_benchmark_compile_only_assembles_a_problem(capsys):
    module = load_script(REPO / "benchmarks" / "grouped_gemm.py", "grouped_benchmark")
    assert module.main(["--compile-only", "--problem", "4,256,256,128"]) == 0
    assert "grouped_4x256x256x128_cooperative_128x256x64_s4_l2256" in capsys.readouterr().out


def test_benchmark_against_plain_assembles_the_plain_gemm_of_the_rows_too(capsys):
    module = load_script(REPO / "benchmarks" / "grouped_gemm.py", "grouped_benchmark")
    assert module.main(["--compile-only", "--against-plain", "--problem",
                        "8,2048,1024,512"]) == 0
    kernels = [json.loads(line)["kernel"] for line in capsys.readouterr().out.splitlines()
               if line.startswith("{")]
    plain = GemmConfig.for_problem(2048, 1024, 512)
    assert kernels[0] == f"plain_2048x1024x512_{plain.block_m}x{plain.block_n}"
    assert kernels[1].startswith("grouped_8x2048x1024x512_")


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_grouped_gemm_is_exact_on_gpu(name):
    gcfg, sizes = CASES[name]
    maps = []
    c, expected, bound = run(gcfg, sizes, maps_out=maps)
    assert matches(c, expected, bound)
    if gcfg.short is not None:
        # The tiling the device chose rebound its own slot pairs; the other's stayed zero.
        written = maps[0].any(axis=(0, 2))
        short = takes_short(gcfg, sizes)
        assert written[SLOT_PAIRS:].any() == short
        assert written[:SLOT_PAIRS].any() == (not short)
        if gcfg.gemm.n % gcfg.gemm.block_n:
            # B[g]'s own map (ragged N) in the chosen tiling's fourth pair.
            assert written[SLOT_PAIRS * short + 3]


def test_the_example_builds_and_assembles(capsys):
    """``examples/grouped_gemm_hopper.py``: built and assembled (and on a Hopper GPU run and
    checked: the same script is the sanitizer's target)."""
    module = load_script(REPO / "examples" / "grouped_gemm_hopper.py", "grouped_example")
    assert module.main() == 0
    out = capsys.readouterr().out
    assert "map rebound on the device, dims ['512', 'rows']" in out
    assert "map encoded on the host" in out and "bytes of sm_90a cubin" in out


def test_the_default_fills_l2_256_bytes_only_where_weights_stream():
    """256-byte L2 fills where the groups average at most one row block (the decode step,
    bandwidth-bound), the GEMM's 128 elsewhere (measured both ways on the H100)."""
    assert GroupedGemmConfig.for_problem(64, 1040, 2048, 7168).gemm.l2_promotion == 256
    assert GroupedGemmConfig.for_problem(64, 15888, 2048, 7168).gemm.l2_promotion == 128
    assert GroupedGemmConfig.for_problem(8, 8128, 14336, 4096).gemm.l2_promotion == 128


def test_many_experts_take_a_ring_of_3_stages():
    """256 experts or more: 3 stages (each expert's row blocks stay in step and read B
    once); fewer: 4 (measured both ways on the H100, GroupedGemmConfig.for_problem)."""
    assert GroupedGemmConfig.for_problem(256, 16384, 2048, 7168).gemm.stages == 3
    assert GroupedGemmConfig.for_problem(256, 16384, 7168, 2048).gemm.stages == 3
    assert GroupedGemmConfig.for_problem(128, 8192, 1536, 5120).gemm.stages == 4
    assert GroupedGemmConfig.for_problem(64, 4096, 2048, 7168).gemm.stages == 4
    assert GroupedGemmConfig.for_problem(256, 16384, 2048, 7168, stages=4).gemm.stages == 4


def test_a_decode_step_takes_64_by_128_tiles():
    """At most 16 rows an expert (M / E) and fewer than 256 experts: cooperative 64 x 128
    tiles with 8 ring stages (measured on the H100: the Qwen-like decode step 84-87% of
    the copy rate against 70%, the 128-expert one a tie). Not at 64 rows an
    expert, with 256 experts, with stream-K or where the caller chose the tile."""
    assert (DECODE_ROWS, DECODE_TILES) == (16, {"block_m": 64, "block_n": 128, "stages": 8})
    for problem in ((60, 960, 1408, 2048), (128, 2048, 2048, 7168), (64, 1024, 2048, 7168)):
        cfg = GroupedGemmConfig.for_problem(*problem).gemm
        assert (cfg.block_m, cfg.block_n, cfg.stages, cfg.schedule, cfg.l2_promotion) == (
            64, 128, 8, "cooperative", 256), problem
        assert cfg.shared_bytes <= MAX_SHARED
    # 1040 rows on 64 experts are 16.25 an expert (measured a tie: 95.1 / 95.5).
    for problem, options in (((8, 512, 14336, 4096), {}), ((256, 4096, 2048, 7168), {}),
                             ((64, 1040, 2048, 7168), {}),
                             ((128, 2048, 2048, 7168), {"stream_k": True}),
                             ((128, 2048, 2048, 7168), {"block_n": 256}),
                             ((128, 2048, 2048, 7168), {"stages": 4})):
        assert GroupedGemmConfig.for_problem(*problem, **options).gemm.block_m == 128


def test_weights_past_2_to_the_31_elements_are_indexed_in_64_bits():
    """256 experts of 2048 x 7168 (DeepSeek-V3-like): B holds 3.76e9 elements, so B[g]'s
    offset is computed in 64 bits, the planner's spans do not wrap (B's bytes end at
    7516192768, not at a negative number), and the map's coordinates are narrowed to the
    instruction's 32 bits where they provably fit (g * 2048 + n0 < 2^19 here)."""
    import tvm

    from tvm_tma.planner.proofs import Prover
    from tvm_tma.planner.views import buffer_span

    weights = tvm.tirx.decl_buffer((256, 2048, 7168), "bfloat16", "B")
    assert buffer_span(weights, Prover()) == (0, 7516192768)
    gcfg = GroupedGemmConfig.for_problem(256, 16384, 2048, 7168)
    source = compile_kernel(grouped_gemm_kernel(gcfg)).cuda_source
    body = source[source.rindex("__global__ void"):]
    # B's map merges experts and rows (524288 rows of 7168): row g * 2048 + n0, computed in
    # 64 bits and narrowed (proven below 2^31) for the instruction.
    assert ("(ks * 64), ((int)((((int64_t)g_ptr[0]) * (int64_t)2048) + "
            "(((int64_t)nb_ptr[0]) * (int64_t)256)))") in body
    assert len(assemble(source)) > 0


def test_a_32_bit_view_offset_that_may_wrap_is_refused_by_name():
    """Expert ``g`` of 256 at ``g * 2048 * 7168`` in 32 bits passes 2^31 for g >= 147: the
    kernel would wrap while the proofs (over the integers) would call the view inside B."""
    import tvm
    from tvm.tirx.layout import S, TileLayout

    from tvm_tma.planner import PlanError, plan
    from tvm_tma.planner.proofs import Prover

    g = tvm.tirx.Var("g", "int32")
    weights = tvm.tirx.decl_buffer((256, 2048, 7168), "bfloat16", "B")
    tile = tvm.tirx.decl_buffer((256, 64), "bfloat16", "tile", scope="shared.dyn",
                                layout=TileLayout(S[256, 64]))

    def region(buffer, extents):
        return tvm.tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, e)
                                              for e in extents])

    for offset, refused in ((g * (2048 * 7168), True),
                            (tvm.tirx.Cast("int64", g) * (2048 * 7168), False)):
        expert = tvm.tirx.decl_buffer((2048, 7168), "bfloat16", "Bg", data=weights.data,
                                      elem_offset=offset, layout=TileLayout(S[2048, 7168]))
        prover = Prover({g: tvm.ir.Range(0, 256)})
        if refused:
            with pytest.raises(PlanError, match=r"\[global-view-bounds\].*32-bit offset"):
                plan(region(tile, (256, 64)), region(expert, (256, 64)), prover=prover,
                     argument=weights)
        else:
            copy = plan(region(tile, (256, 64)), region(expert, (256, 64)), prover=prover,
                        argument=weights)
            assert not copy.device_view  # B[g] lies inside B: its host map at row g * 2048


def test_a_weight_streaming_step_holds_64_row_tiles_beside_its_128_row_ones():
    """From 17 to 128 rows an expert (and fewer than 256 experts) the kernel also holds
    64 x 256 tiles (SHORT_TILES: 5 ring stages, the shared memory of the tall tiles' 4),
    the same columns, CTAs and L2 fills; not where the decode tiles, 3 stages, stream-K or
    a chosen tiling apply, nor past 128 rows an expert (compute-bound: the 64-row tiles'
    rounds would always be twice the others')."""
    assert SHORT_TILES == {"block_m": 64, "stages": 5}
    for problem in ((8, 512, 14336, 4096), (8, 384, 4096, 14336), (16, 1024, 6144, 4096),
                    (60, 3840, 1408, 2048), (64, 1040, 2048, 7168), (8, 1024, 14336, 4096)):
        gcfg = GroupedGemmConfig.for_problem(*problem)
        tall, short = gcfg.gemm, gcfg.short
        assert (tall.block_m, tall.block_n, tall.stages) == (128, 256, 4), problem
        assert short == replace(tall, block_m=64, stages=5), problem
        assert (short.consumers, short.threads, tall.threads) == (1, 256, 384)
        assert max(tall.shared_bytes, short.shared_bytes) <= MAX_SHARED
        gcfg.check()
    for problem, options in (((8, 8128, 14336, 4096), {}), ((64, 15888, 2048, 7168), {}),
                             ((8, 1032, 14336, 4096), {}), ((60, 960, 1408, 2048), {}),
                             ((256, 16384, 2048, 7168), {}), ((8, 512, 14336, 4096),
                                                              {"stream_k": True}),
                             ((8, 512, 14336, 4096), {"stages": 4}),
                             ((8, 512, 14336, 4096), {"short": False})):
        assert GroupedGemmConfig.for_problem(*problem, **options).short is None, problem
    # A sweep's changed tiling holds itself alone; an unchanged one keeps the short tiles.
    base = GroupedGemmConfig.for_problem(8, 512, 14336, 4096)
    assert with_tiling(base).short == base.short
    assert with_tiling(base, block_m=64, stages=5).short is None
    assert with_tiling(base, short=False) == replace(base, short=None)
    # The two tilings keep their own map slots: twice the workspace.
    assert workspace(base)[0].shape == (132, 2 * SLOT_PAIRS, 256)


def test_a_short_tiling_of_another_problem_is_refused():
    base = GroupedGemmConfig.for_problem(8, 512, 14336, 4096)
    for short, what in ((replace(base.short, ctas=66), "'ctas'"),
                        (replace(base.short, block_n=128), "'block_n'"),
                        (replace(base.short, l2_promotion=128), "'l2_promotion'"),
                        (replace(base.gemm), r"a 128-row tiling differing in \[\]")):
        with pytest.raises(ValueError, match=what):
            replace(base, short=short).check()


def test_the_height_follows_the_rounds_each_makes_of_the_groups():
    """The device takes the 64-row tiles where their rounds on 132 CTAs are at most 4/3 of
    the 128-row tiles' (make_height_choice): on the benchmark's uneven group sizes of the
    problems measured on the H200 (benchmarks/RESULTS.md 9g) that is the measured winner
    of each problem where one won by more than 2 points of the copy rate."""
    bench = load_script(REPO / "benchmarks" / "grouped_gemm.py", "grouped_benchmark")
    measured = {(8, 512, 14336, 4096): True, (8, 384, 4096, 14336): True,
                (16, 1024, 6144, 4096): False, (8, 256, 14336, 4096): True,
                (60, 3840, 1408, 2048): True}
    for problem, short in measured.items():
        gcfg = GroupedGemmConfig.for_problem(*problem)
        assert takes_short(gcfg, bench.sizes_for(problem)) == short, problem
    # Ties go to the short tiles; one-tiling kernels never take them.
    gcfg = GroupedGemmConfig.for_problem(6, 384, 512, 256, ctas=4)
    assert takes_short(gcfg, [64, 64, 64]) and not takes_short(gcfg, [128] * 4)
    assert not takes_short(CASES["cooperative"][0], [0, 1, 100, 300, 0])


def test_the_two_height_kernel_chooses_after_the_previous_kernel_and_idles_a_warpgroup(
        built_kernels):
    """One entry (384 threads, the larger shared memory), ``offs`` read only after
    griddepcontrol.wait, both tile counts, the rounds compared (3 x short <= 4 x tall),
    then one tiling's CTA: the short one's second consumer warpgroup idles. Five maps:
    A's 128-row and 64-row templates, B's, and C's of each tiling."""
    built = built_kernels["two-heights-short"]
    source = built.cuda_source
    body = source[source.rindex("__global__ void"):]
    assert "__launch_bounds__(384)" in source
    assert built.tensormap_params == 5
    first_wait = body.index("tvm_builtin_ptx_griddepcontrol_wait();")
    assert first_wait < body.index("offs_ptr[")
    # One pass over the 6 groups counts both heights; the chosen walk takes its count.
    assert body.count("for (int g = 0; g < 6; ++g) {") == 1
    taken = re.findall(r"total_ptr\w*\[0\] = (\w+)_tiles_ptr\[0\];", body)
    assert taken == ["short", "short", "tall", "tall"]  # producer, consumers of each
    assert ("use_short_ptr[0] = ((int)((((short_tiles_ptr[0] + 3) >> 2) * 3) <= "
            "(((tall_tiles_ptr[0] + 3) >> 2) * 4)));") in body
    branch = body.index("if (use_short_ptr[0] == 1) {")
    assert first_wait < branch
    # Each tiling initialises its ring (5 and 4 stages) and passes the CTA barrier.
    assert body.count("mbarrier_init_init_shared_b64(") == 2 * 5 + 2 * 4
    assert body.count("setmaxnreg_inc_sync_aligned_u32_232();") == 2
    # The short tiling's consumers: warpgroup 1 only (threads 128 .. 255).
    assert body[branch:].count("if (((int)threadIdx.x) <= 255) {") == 1
    usage = ptxas_usage(source)
    assert (usage.spill_store_bytes, usage.spill_load_bytes) == (0, 0)


def test_a_cluster_pair_multicasts_b_and_only_a_live_tile_stores(built_kernels):
    gcfg, _ = CASES["cluster-pairs"]
    assert (gcfg.gemm.cluster, gcfg.gemm.workers, gcfg.short) == (2, 66, None)
    # Units are pairs of row blocks: 1024 rows in 256-row pairs plus one partial pair a
    # group, 2 column blocks each; 66 clusters take them round-robin.
    assert gcfg.max_tiles == (4 + 5) * 2 and gcfg.rounds == 1
    src = built_kernels["cluster-pairs"].cuda_source
    # Each CTA loads half of the B[g] tile (128 of its 256 rows) into both CTAs' slots.
    assert ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            ".multicast::cluster") in src
    b_loads = re.findall(r"B_tensormap\)\)\), (\d+), \(\(\(g_ptr\[0\] \* 512\) \+ \(nb_ptr\[0\] "
                         r"\* 256\)\) \+ \(\(\(int\)tvm_builtin_cluster_ctaid_x\(\)\) \* 128\)\), "
                         r".*\(ushort\)3\);", src)
    assert b_loads == ["0", "64", "128", "192"]  # K = 256: four steps, unrolled
    # Every CTA rebinds maps in slots of its own (a row of the workspace per CTA, not per
    # cluster), and stores only where its row block is inside the group.
    assert "maps_ptr[(((int)blockIdx.x) * 1024)]" in src
    assert "((((int)threadIdx.x) == 128) && (live_ptr_1[0] == 1))" in src
    assert "live_ptr_1[0] = ((int)((mb_ptr_1[0] * 128) < rows_ptr_1[0]));" in src
