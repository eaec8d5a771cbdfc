"""The GEMM's default tiling (tvm_tma.kernels.tiling): the wave model's estimates, its
choices on the shapes it was measured on, the row-alignment rule for clusters, and the
caller's options winning."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from tvm_tma.kernels.gemm_config import MAX_SHARED, GemmConfig
from tvm_tma.kernels.tiling import (
    ALTERNATING_MIN_STAGES,
    EXACT_WAVE_MAX_STEPS,
    EXACT_WAVE_MIN_FILL,
    EXACT_WAVE_MIN_M,
    EXACT_WAVE_MIN_STEPS,
    EXACT_WAVE_MIN_WIDTH,
    EXACT_WAVE_WIDTH_STEP,
    FEW_COLUMNS_BLOCK_M,
    FEW_COLUMNS_MAX_N,
    FEW_COLUMNS_MAX_ROUNDS,
    FEW_COLUMNS_MIN_GAIN,
    FEW_COLUMNS_MIN_WIDTH,
    MIN_PART_STEPS,
    NARROW_WAVE_MAX_STEPS,
    ORDERED_PART_COST,
    ROWS_STEP_FACTOR,
    SHORT_MAX_STEPS,
    SHORT_ORDERED_MAX_STEPS,
    SHORT_PINGPONG_STEPS,
    SPLIT_STEP_FACTOR,
    STEP_BYTES,
    STEP_COST,
    TAIL_MIN_STEPS,
    TALL_MIN_FILL,
    TALL_TILINGS,
    THIN_ROUND,
    WIDE,
    WIDE_STRADDLED_MAX_STEPS,
    busy_share,
    c_stage_widths,
    candidates,
    choose,
    estimate,
    exact_wave,
    few_columns_tiling,
    fills_two_rounds,
    fitted_k_block,
    fullest_narrow_wave,
    in_gemm_fullest_narrow_wave,
    in_one_column_block,
    in_one_exact_wave,
    in_one_step_pingpong,
    in_ordered_parts,
    in_short_pingpong,
    in_short_wave,
    in_tail_parts,
    in_two_by_two,
    leaves_thin_round,
    modelled,
    on_few_columns,
    on_half_rows,
    on_swapped_operands,
    on_wide_half_rows,
    pairs_share_b,
    ranked,
    refinements,
    rows_straddle_lines,
    sharing_a_in_fours,
    short_wave,
    step_cost,
    straddled_step_cost,
    streams_weights,
    trimmed,
    with_alternating_c_stages,
)
from tvm_tma.kernels.tiling import rules as rules_module


def picker(*names: str):
    """A function of ``(m, n, k, **options)`` giving those fields of the default tiling."""
    def picked(m: int, n: int, k: int, **options) -> tuple:
        cfg = GemmConfig.for_problem(m, n, k, **options)
        return tuple(getattr(cfg, name) for name in names)
    return picked


def before_the_short_wave(m: int, n: int, k: int, **options) -> GemmConfig:
    """``GemmConfig.for_problem`` without its last rules (the short problems' one wave or
    ping-pong tiles)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rules_module, "in_short_wave", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_one_step_pingpong", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_short_pingpong", lambda cfg, ctas: cfg)
        return GemmConfig.for_problem(m, n, k, **options)


def before_the_narrow_wave(m: int, n: int, k: int, **options) -> GemmConfig:
    """``GemmConfig.for_problem`` without its last four rules, the fullest narrow wave and
    the swap for few columns (as conftest's ``before_narrow_wave`` fixture), and the
    alternating C stages and the short problems' one wave after them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rules_module, "in_short_wave", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_one_step_pingpong", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_short_pingpong", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_gemm_fullest_narrow_wave", lambda cfg: cfg)
        patch.setattr(rules_module, "on_few_columns", lambda cfg: cfg)
        patch.setattr(rules_module, "with_alternating_c_stages", lambda cfg: cfg)
        return GemmConfig.for_problem(m, n, k, **options)


def before_the_few_columns(m: int, n: int, k: int, **options) -> GemmConfig:
    """``GemmConfig.for_problem`` without the swap for few columns and the alternating C
    stages and the short problems' one wave after it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rules_module, "in_short_wave", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_one_step_pingpong", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_short_pingpong", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "on_few_columns", lambda cfg: cfg)
        patch.setattr(rules_module, "with_alternating_c_stages", lambda cfg: cfg)
        return GemmConfig.for_problem(m, n, k, **options)


def before_the_c_stages(m: int, n: int, k: int, **options) -> GemmConfig:
    """``GemmConfig.for_problem`` without its last two rules (the alternating C stages and
    the short problems' one wave)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rules_module, "in_short_wave", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_one_step_pingpong", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "in_short_pingpong", lambda cfg, ctas: cfg)
        patch.setattr(rules_module, "with_alternating_c_stages", lambda cfg: cfg)
        return GemmConfig.for_problem(m, n, k, **options)


def shape(cfg: GemmConfig) -> tuple:
    return (cfg.schedule, cfg.block_n, cfg.stages, cfg.cluster, cfg.stream_k, cfg.split_k,
            cfg.tail_split)


def test_a_data_parallel_estimate_is_rounds_times_steps_times_the_step_cost():
    # 2048^3 in 128 x 256 tiles: 16 x 8 = 128 tiles on 132 CTAs, one round of 32 K steps.
    wide = GemmConfig(2048, 2048, 2048)
    assert estimate(wide).cost == 32 * STEP_COST[256] == 32.0
    # The same in 128 x 128 tiles: 256 tiles, two rounds.
    narrow = GemmConfig(2048, 2048, 2048, block_n=128, stages=6, epilogue_n=0)
    assert estimate(narrow).cost == pytest.approx(2 * 32 * STEP_COST[128])
    # In 2x1 clusters the rounds count cluster units over clusters: 64 units / 66.
    clustered = GemmConfig(2048, 2048, 2048, cluster=2)
    assert estimate(clustered).cost == 32.0


def test_a_stream_k_estimate_adds_the_shared_run_and_the_fix_up():
    # 2048 x 7168 x 4096: 16 x 28 = 448 tiles, 3 full waves and 52 tiles of 64 K steps.
    cfg = GemmConfig(2048, 7168, 4096, stream_k=True)
    run = 52 * 64 / 132
    pieces = 64 / run + 1
    fixup = 2 * (pieces - 1) * 128 * 256 * 4 / STEP_BYTES
    assert estimate(cfg).cost == pytest.approx(3 * 64 + run + fixup)
    assert "stream-K" in estimate(cfg).why


def test_an_ordered_parts_estimate_prices_the_cut_steps_and_each_later_part():
    # 1024 x 1280 x 11520: 40 tiles of 128 x 256 in 3 parts of 60 K steps, 120 units.
    cfg = GemmConfig(1024, 1280, 11520, split_k=3, split_k_ordered=True)
    assert estimate(cfg).cost == pytest.approx(60 * SPLIT_STEP_FACTOR + 2 * ORDERED_PART_COST)
    assert "2 later K part(s)" in estimate(cfg).why
    # A 128 x 192 tile's part pays three quarters of a 128 x 256 one's.
    narrow = GemmConfig(768, 2048, 8192, block_n=192, split_k=2, split_k_ordered=True)
    assert estimate(narrow).cost == pytest.approx(
        64 * STEP_COST[192] * SPLIT_STEP_FACTOR + 0.75 * ORDERED_PART_COST)


def test_a_tail_split_costs_its_full_waves_then_one_part_and_the_later_parts_adds():
    # 1536 x 3072 x 4096 in 128 x 192 tiles: 12 x 16 = 192 tiles, one wave of 132, 60 left
    # over in 2 parts of 32 K steps (120 units for 132 workers).
    cfg = GemmConfig(1536, 3072, 4096, block_n=192, stages=5, epilogue_n=64, tail_split=2)
    assert (cfg.tail_rounds, cfg.tail_tiles, cfg.work_units) == (1, 60, 252)
    assert [cfg.tail_part_steps(p) for p in range(2)] == [(0, 32), (32, 32)]
    step = STEP_COST[192]
    assert estimate(cfg).cost == pytest.approx(
        64 * step + 32 * step * SPLIT_STEP_FACTOR + 0.75 * ORDERED_PART_COST)
    assert "then 60 tiles in 2 parts" in estimate(cfg).why
    # Parts that do not divide the K steps: part 0 is the short one.
    ragged = GemmConfig(1000, 2000, 3000, tail_split=5, ctas=20)
    assert [ragged.tail_part_steps(p) for p in range(5)] == [
        (0, 7), (7, 10), (17, 10), (27, 10), (37, 10)]
    assert ragged.part_bounds() == [(0, 448), (448, 1088), (1088, 1728), (1728, 2368),
                                    (2368, 3008)]


def test_the_tail_split_takes_the_cheapest_parts_the_workers_hold():
    # 12 tiles of 128 x 256 past one wave: at most 11 parts (132 // 12), each at least 4
    # of the 64 K steps; the estimate is lowest at 8 (8 steps and 7 adds).
    tail = in_tail_parts(GemmConfig(1536, 3072, 4096))
    assert (tail.tail_split, tail.tail_tiles) == (8, 12)
    # No partial wave (4096 x 4096 x 4096 in 128 x 128 tiles: 1024 of 132 leave 100, too
    # many for 2 parts each), no full wave, a whole number of waves, or too few K steps.
    assert in_tail_parts(GemmConfig(4096, 4096, 4096, block_n=128)) is None
    assert in_tail_parts(GemmConfig(1024, 2048, 4096)) is None  # 64 tiles: no full wave
    assert in_tail_parts(GemmConfig(4224, 2048, 4096)) is None  # 264 tiles: 2 waves
    assert TAIL_MIN_STEPS == 16
    assert in_tail_parts(GemmConfig(2304, 4608, 768)) is None  # 12 K steps
    assert in_tail_parts(GemmConfig(2304, 4608, 1024)).tail_split == 2
    # Only the cooperative schedule, and not over another K split.
    assert in_tail_parts(GemmConfig(1536, 3072, 4096, block_n=128, schedule="pingpong",
                                    stages=5, epilogue_n=64)) is None
    assert in_tail_parts(GemmConfig(1536, 3072, 4096, split_k=2)) is None


def test_a_tail_split_replaces_stream_k_unless_the_caller_asks_for_it():
    found = candidates(GemmConfig, 1536, 3072, 4096, {})
    assert any(cfg.tail_split > 1 for cfg in found)
    assert not any(cfg.stream_k for cfg in found)
    # 2560 x 2560 x 10240: 68 tiles of 128 x 256 past one wave are too many to cut, but
    # 128 x 192 tiles can be: no stream-K candidate either.
    assert not any(cfg.stream_k for cfg in candidates(GemmConfig, 2560, 2560, 10240, {}))
    # A caller's choice of how to split is kept, and no tail split is added to it.
    streamed = GemmConfig.for_problem(1536, 3072, 4096, stream_k=True)
    assert (streamed.stream_k, streamed.tail_split) == (True, 1)
    assert GemmConfig.for_problem(1536, 3072, 4096, cluster=1).tail_split == 1
    assert GemmConfig.for_problem(1536, 3072, 4096, tail_split=4).tail_split == 4


def test_tiles_too_few_for_the_sms_are_offered_in_ordered_parts_of_enough_steps():
    parts = in_ordered_parts(GemmConfig(1024, 1280, 11520))
    assert (parts.split_k, parts.split_k_ordered, parts.steps_per_unit) == (3, True, 60)
    # 128 x 128 tiles of 1024 x 1280 fill more than half the SMs: no parts.
    assert in_ordered_parts(GemmConfig(1024, 1280, 11520, block_n=128)) is None
    # 1024 x 1536 x 1536: 64 tiles of 128 x 192 in 2 parts would keep 12 K steps each.
    assert GemmConfig(1024, 1536, 1536, block_n=192).ordered_parts == 2
    assert in_ordered_parts(GemmConfig(1024, 1536, 1536, block_n=192)) is None
    assert MIN_PART_STEPS == 32
    # One row block streams B: no parts (64 x 11520 x 4096 ran 0.97x in them).
    assert GemmConfig(64, 11520, 4096, block_n=192).ordered_parts == 2
    assert in_ordered_parts(GemmConfig(64, 11520, 4096, block_n=192)) is None


def test_long_k_of_few_columns_runs_one_column_block_in_ordered_parts():
    """Where 128 x 128 tiles fill at most half the SMs and N is 64 to 256, K at least 4096
    and M at least 1024: cooperative 128-row tiles as wide as N (a multiple of 8) in
    their own ordered parts, the C stage that leaves the most ring stages."""
    def tiling(m, n, k, **options):
        cfg = GemmConfig.for_problem(m, n, k, **options)
        return (cfg.schedule, cfg.block_m, cfg.block_n, cfg.split_k, cfg.split_k_ordered,
                cfg.epilogue_cols, cfg.stages, cfg.swap_ab)

    # 32 tiles of 128 x 192 in 4 parts (129 swapped tiles of 64 x 96 before: 1.43x).
    assert tiling(4096, 192, 8192) == ("cooperative", 128, 192, 4, True, 64, 4, False)
    # N = 64 on 64-wide tiles, not ping-pong 128 x 128 half padding.
    assert tiling(4096, 64, 16384) == ("cooperative", 128, 64, 4, True, 64, 8, False)
    # 8 row blocks of 128 x 200 (C staged whole): as many parts as the CTAs hold, 16.
    assert tiling(1024, 200, 8192) == ("cooperative", 128, 200, 16, True, 200, 4, False)
    # Ragged M (9 row blocks): 13 parts of 5 steps, part 0 of 4.
    ragged = GemmConfig.for_problem(1100, 72, 4096)
    assert (ragged.block_n, ragged.split_k, ragged.steps_per_unit) == (72, 13, 5)
    # Not taken: N = 128 (the ping-pong tile is as wide), N = 256 in more than 8 parts
    # (1024 x 256 x 12288 ran 0.88x), N under 64, M under 1024, K under 4096, 8-bit
    # inputs, B as K x N, or a tiling or swap the caller chose.
    for m, n, k, options in [(2048, 128, 16384, {}), (1024, 256, 12288, {}),
                             (4096, 32, 16384, {}), (1000, 192, 8192, {}),
                             (4096, 192, 2048, {}), (4096, 192, 8192, {"dtype": "float8_e4m3fn"}),
                             (4096, 192, 8192, {"b_layout": "kn"}),
                             (4096, 192, 8192, {"stages": 5}),
                             (4096, 192, 8192, {"swap_ab": True})]:
        assert in_one_column_block(GemmConfig, m, n, k, options) is None, (m, n, k, options)
    assert in_one_column_block(GemmConfig, 2048, 256, 16384, {}).split_k == 8
    assert in_one_column_block(GemmConfig, 4096, 192, 8192, {"ctas": 66}).split_k == 2


@pytest.mark.parametrize(("problem", "expected"), [
    # One wave of 128 x 256 tiles 97% full beats two of 128 x 128 (H100: 99.7% of cuBLAS
    # against 92.4%; the 2x1-cluster tiles it had before, 80-82%).
    ((2048, 2048, 2048), ("cooperative", 256, 4, 1, False, 1, 1)),
    ((1024, 4096, 4096), ("cooperative", 256, 4, 1, False, 1, 1)),
    # 96 tiles of 128 x 256 leave a wave a quarter empty; 132 of 128 x 192 fill it
    # (100.9% against 83.6%).
    ((768, 4096, 4096), ("cooperative", 192, 4, 1, False, 1, 1)),
    # 64 wide tiles, 88 of 192, 128 of 128: the narrow ones fill the wave (95-97%); the
    # wide ones in 2 ordered parts fill it too but ran 9-10% slower.
    ((512, 4096, 4096), ("cooperative", 128, 6, 1, False, 1, 1)),
    ((1024, 2048, 4096), ("cooperative", 128, 6, 1, False, 1, 1)),
    # 80 tiles of 128 x 128 fill 61% of the SMs: 40 of 128 x 256 in 3 ordered parts
    # (120 units) ran 1.34-1.35x faster (107-111% of cuBLAS against 78-83%); 96 of 128 x
    # 128 against 64 of 128 x 192 in 2 parts: 1.15x at K = 8192, 1.07x at 4096.
    ((1024, 1280, 11520), ("cooperative", 256, 4, 1, False, 3, 1)),
    ((768, 2048, 8192), ("cooperative", 192, 4, 1, False, 2, 1)),
    ((1024, 1536, 4096), ("cooperative", 192, 4, 1, False, 2, 1)),
    # Parts of 12 K steps ran 0.88x the plain waves: not offered; 72 tiles of 128 x 128
    # are the model's, and 128 of 64 x 192 (24 K steps, the fullest narrow wave) ran
    # 1.22x them (H200, RESULTS.md 6x).
    ((1024, 1536, 1536), ("cooperative", 192, 6, 1, False, 1, 1)),
    # 128 x 160 tiles where they cover N with less waste or fill the waves better than
    # 128 x 192 (N = 640: 4 column blocks, 1.31-1.51x; 640 x 4096 x 1024 1.13x); not in
    # many waves, where 128 x 256 does more per byte (10000 x 1536 x 1024: 160 0.87x,
    # 8192 x 5680 x 2048 0.90x). 3000 x 1536 x 2048 ran 128 x 192 tiles with the 60 past a
    # wave in 2 parts (1.13x the 160-wide plain waves) until 192 x 192 tiles in one wave
    # took it (test_192_row_tiles_are_offered_where_they_fill_one_wave).
    ((4096, 640, 4096), ("cooperative", 160, 5, 1, False, 1, 1)),
    # Since 128 x 320 tiles: 8192 x 640 x K in one wave of 128 of them (K = 1000 and 4096
    # measured: 1.07-1.10x and 1.02-1.03x the 256 of 128 x 160).
    ((8192, 640, 2048), ("cooperative", 320, 3, 1, False, 1, 1)),
    ((3000, 1536, 2048), ("cooperative", 192, 4, 1, False, 1, 1)),
    ((640, 4096, 1024), ("cooperative", 160, 5, 1, False, 1, 1)),
    ((10000, 1536, 1024), ("cooperative", 256, 4, 1, False, 1, 1)),
    ((8192, 5680, 2048), ("cooperative", 256, 4, 1, False, 1, 4)),
    # K = 3000 and 5000: rows of 6000 and 10000 bytes straddle L2 lines: 2x1 clusters
    # (96% against 74%; 129% against 83%).
    ((1000, 2000, 3000), ("cooperative", 128, 6, 2, False, 1, 1)),
    ((12000, 1000, 5000), ("cooperative", 256, 4, 2, False, 1, 1)),
    # Straddled rows price a K step by its bytes (straddled_step_cost): 128 x 256 tiles
    # where 128 x 128 ones had been the model's (1.17x, 1.14-1.17x, 1.07x, H100 same
    # runs), the tiles left over in ordered parts (10000 x 1024 x 3000 1.12x the plain
    # waves, 10000 x 1000 x 1000 1.02x); 3000^3's 128 x 256 tiles in 2x1 clusters, the
    # 12 cluster tiles left over in 5 parts, ran 1.15x the 128 x 192 ones it had.
    ((10000, 1024, 3000), ("cooperative", 256, 4, 2, False, 1, 2)),
    ((10000, 1000, 1000), ("cooperative", 256, 4, 2, False, 1, 2)),
    ((1024, 2000, 4000), ("cooperative", 256, 4, 1, False, 2, 1)),
    ((3000, 3000, 3000), ("cooperative", 256, 4, 2, False, 1, 5)),
    # 12 K steps: stream-K's fix-up costs more than a fifth round of narrow tiles
    # (95.8% against 71%), and so did 128 x 256 tiles with their 60 left over in 2 parts
    # of 6 steps (0.86-0.88x): no tail split under TAIL_MIN_STEPS.
    ((2304, 4608, 768), ("cooperative", 128, 6, 1, False, 1, 1)),
    # A last wave of 52 of 132 tiles: those in 2 ordered parts, one last round (98.6-99.2%
    # against 93.8-94.5% for stream-K, 88.9% for plain waves); 1536 x 3072 x 4096's 60
    # tiles of 128 x 192 past one wave the same (94.8-96.1% against stream-K's 80-82%).
    ((2048, 7168, 4096), ("cooperative", 256, 4, 1, False, 1, 2)),
    ((1536, 3072, 4096), ("cooperative", 192, 4, 1, False, 1, 1)),  # 192 x 192, 1.06x
    # 5120^3: 8 tiles of 128 x 256 past 6 waves, in 8 parts (102.7-103.6% against 99%
    # for 128 x 192 tiles with stream-K). 2560 x 2560 x 10240's 68 tiles of 128 x 256
    # past one wave are too many to cut: 16 of 128 x 192 past 2 waves, in 8 parts.
    ((5120, 5120, 5120), ("cooperative", 256, 4, 1, False, 1, 8)),
    ((2560, 2560, 10240), ("cooperative", 184, 4, 1, False, 1, 8)),  # trimmed from 192
    # A last wave 88% full (stream-K estimated 1% cheaper), and the big squares: plain
    # waves of wide tiles.
    ((4096, 4096, 4096), ("cooperative", 256, 4, 1, False, 1, 1)),
    ((8192, 8192, 8192), ("cooperative", 256, 4, 1, False, 1, 1)),
    ((8192, 1024, 8192), ("cooperative", 256, 4, 1, False, 1, 1)),
    # Few tiles: ordered split-K on ping-pong 128 x 128 tiles (the rule before the model).
    # M at most 64 takes them as 64 x 128 tiles (on_half_rows: cooperative, 9 stages; one
    # row block streams B: one C stage);
    # M = 16 swaps the operands (on_swapped_operands: C^T = B A^T on 128 x 16 tiles).
    ((4096, 128, 4096), ("pingpong", 128, 5, 1, False, 4, 1)),
    ((64, 8192, 8192), ("cooperative", 128, 9, 1, False, 2, 1)),
    ((16, 8192, 8192), ("cooperative", 16, 12, 1, False, 2, 1)),
    # 8 tiles of 128 K steps: 16 parts (1.6x 4 parts in one H100 run), 16 tiles of 256: 8.
    ((128, 1024, 8192), ("pingpong", 128, 5, 1, False, 16, 1)),
    ((64, 2048, 16384), ("cooperative", 128, 9, 1, False, 8, 1)),
], ids=str)
def test_the_default_tiling_on_the_measured_shapes(problem, expected):
    assert shape(GemmConfig.for_problem(*problem)) == expected


def test_160_wide_tiles_are_offered_only_where_they_were_measured():
    """128 x 160 tiles (C in 32-column 64B-swizzled stages) were measured with B as N x K
    in 16-bit types: B as K x N and FP8 get the other tilings."""
    widths = {cfg.block_n for cfg in candidates(GemmConfig, 4096, 640, 4096, {})}
    assert 160 in widths
    for options in ({"b_layout": "kn"}, {"dtype": "float8_e4m3fn"}):
        found = candidates(GemmConfig, 4096, 640, 4096, options)
        assert found and 160 not in {cfg.block_n for cfg in found}
        assert GemmConfig.for_problem(4096, 640, 4096, **options).block_n != 160


def test_192_row_tiles_are_offered_where_they_fill_one_wave():
    """192-row tiles (three consumer warpgroups) 128, 160 or 192 wide are candidates only
    in one wave at least 90% full, for 16-bit inputs with B as N x K; in 2x1 clusters
    where the rows straddle L2 lines, as the 128-row tiles are. 6272 x 512 x K takes 192 x
    128 (132 tiles; the 196 of 128 x 128 left 64 past a wave), 3000 x 1024 x K too (128);
    N = 600 and 640 take 192 x 160 (4 column blocks), 5680 x 640 x 3000 in 2x1 clusters
    (H100, same run: 1.26-1.27x the 128 x 160 tiles with 26 past a wave in 2 parts);
    768 x 5680 x 2048 takes 192 x 192 (120 tiles, 1.11-1.12x 128 x 192 with a tail in
    parts). A K step of a 192-row tile is priced at 1.57 of a 128-row one's."""
    for problem, width, tiles in (((6272, 512, 1024), 128, 132), ((3000, 1024, 4096), 128, 128),
                                  ((6144, 600, 8192), 160, 128), ((768, 5680, 2048), 192, 120)):
        cfg = GemmConfig.for_problem(*problem)
        # 192 x 128 in two alternating 64-column C stages (with_alternating_c_stages) and
        # 4 ring stages; 160 and 192 wide keep one C stage (two would leave 3 ring stages).
        stages, c_stage = {128: (4, 64), 160: (4, 32), 192: (4, 64)}[width]
        assert (cfg.block_m, cfg.block_n, cfg.stages, cfg.epilogue_cols) == (
            192, width, stages, c_stage), problem
        assert (cfg.num_tiles, cfg.tail_split, cfg.split_k, cfg.cluster_size) == (tiles, 1, 1,
                                                                                   1)
        assert estimate(cfg).cost == pytest.approx(cfg.k_steps * STEP_COST[width]
                                                   * ROWS_STEP_FACTOR[192])
    assert ROWS_STEP_FACTOR == {192: 1.57} and TALL_MIN_FILL == 0.9
    assert [(t["block_m"], t["block_n"]) for t in TALL_TILINGS] == [(192, 192), (192, 160),
                                                                    (192, 128)]
    # Straddled rows (6000-byte rows of K = 3000): the 192 x 160 tiles in 2x1 clusters,
    # 60 cluster units on 66 workers.
    straddled = GemmConfig.for_problem(5680, 640, 3000)
    assert (straddled.block_m, straddled.block_n, straddled.stages, straddled.cluster) == (
        192, 160, 4, 2)
    assert (straddled.num_tiles, straddled.work_units, straddled.workers) == (120, 60, 66)
    for problem, options in (((6272, 256, 4096), {}),  # 66 tiles: half a wave
                             ((25088, 256, 512), {}),  # 262 tiles: two rounds
                             ((6272, 512, 1024), {"b_layout": "kn"}),
                             ((6272, 512, 1024), {"dtype": "float8_e4m3fn"}),
                             ((6272, 512, 1024), {"tail_split": 2})):
        assert all(cfg.block_m != 192 for cfg in candidates(GemmConfig, *problem, options))
        assert GemmConfig.for_problem(*problem, **options).block_m != 192
    assert GemmConfig.for_problem(6272, 512, 1024, block_m=128).block_m == 128


def test_two_full_rounds_of_192_row_tiles_replace_a_thin_last_round():
    """192-row tiles in two rounds, each at least 90% full, are a candidate only where the
    cheapest other one ends in a round at most half full or cuts its tail into K parts
    (H200, settled clocks, RESULTS.md 6z13: 1.03-1.22x on 11 of 13 held-out problems, 0.99
    on two; 0.93-1.00x against 128-row tiles whose last round was 73-97% full)."""
    assert THIN_ROUND == 0.5
    for problem, tiling, tiles, cluster in (
            ((2443, 3720, 592), (192, 192), 260, 1),    # was 300 of 128 x 256: 1.22x
            ((2491, 2552, 1232), (192, 128), 260, 1),   # was 320 of 128 x 160: 1.14x
            ((724, 12072, 1128), (192, 192), 252, 2),   # was 288 of 128 x 256, tail in 3
            ((3604, 2080, 5192), (192, 160), 247, 2)):  # was 261 of 128 x 256, tail in 7
        cfg = GemmConfig.for_problem(*problem)
        assert ((cfg.block_m, cfg.block_n), cfg.num_tiles, cfg.cluster) == (
            tiling, tiles, cluster), problem
        assert fills_two_rounds(cfg) and not (cfg.work_units <= cfg.workers)
        assert (cfg.tail_split, cfg.split_k, cfg.stream_k) == (1, 1, False)
        others = [c for c in candidates(GemmConfig, *problem, {}) if c.block_m != 192]
        assert leaves_thin_round(min(others, key=lambda c: estimate(c).cost)), problem
    # The 128-row tiles' last round full enough: 4002 x 2296 x 792 keeps 384 of 128 x 192
    # in 2x1 clusters (192 units on 66 workers, the third round 91% full; 0.95x for 252
    # of 192 x 192); 25088 x 256 x 512 keeps its 128-row tiles (0.87x for 262 of 192 x
    # 128, section 6j).
    for problem in ((4002, 2296, 792), (2384, 3456, 168), (25088, 256, 512)):
        found = candidates(GemmConfig, *problem, {})
        assert all(cfg.block_m != 192 for cfg in found), problem
        assert not leaves_thin_round(min(found, key=lambda c: estimate(c).cost)), problem
    kept = GemmConfig.for_problem(4002, 2296, 792)
    assert (kept.block_m, kept.block_n, kept.num_tiles, kept.cluster) == (128, 192, 384, 2)
    # Two rounds: at least 1.9 and at most 2 waves of work units.
    one = GemmConfig.for_problem(2443, 3720, 592)
    assert not fills_two_rounds(replace(one, ctas=one.ctas * 2))  # one wave
    assert not fills_two_rounds(replace(one, ctas=120))           # 260 units on 120: three
    # Not where the caller chose the tile, nor for other inputs than the measured ones.
    assert GemmConfig.for_problem(2443, 3720, 592, block_m=128).block_m == 128
    for options in ({"b_layout": "kn"}, {"dtype": "float8_e4m3fn"}):
        assert GemmConfig.for_problem(2443, 3720, 592, **options).block_m != 192


def test_320_wide_tiles_are_offered_where_they_alone_fill_one_wave():
    """128 x 320 tiles (two m64n160 MMAs a k16 step, 3 stages, two C stages) are a candidate
    only plain, in one wave at least 90% full, where no 192-row tiling fills one, and on
    straddled rows with at most 32 K steps; ranked only where cheaper than every other
    candidate trimmed.
    640 x 8192 x 1000 runs 130 of them (95.5-98.1% of cuBLAS against 71.3-71.7% for 128 x
    256 tiles with 30 past a wave in 2 parts); each K step priced at 1.33."""
    assert (WIDE, WIDE_STRADDLED_MAX_STEPS, STEP_COST[320]) == (
        {"block_n": 320, "stages": 3, "epilogue_n": 64, "epilogue_buffers": 2}, 32, 1.33)
    for problem in ((640, 8192, 1000), (1024, 5000, 2000), (8192, 640, 4096),
                    (512, 10000, 4096)):
        cfg = GemmConfig.for_problem(*problem)
        assert (cfg.block_m, cfg.block_n, cfg.stages, cfg.epilogue_cols, cfg.c_stages) == (
            128, 320, 3, 64, 2)
        assert (cfg.cluster_size, cfg.tail_split, cfg.split_k, cfg.stream_k) == (1, 1, 1,
                                                                                  False)
        assert 0.9 * cfg.workers <= cfg.num_tiles <= cfg.workers
        assert estimate(cfg).cost == pytest.approx(cfg.k_steps * 1.33)
    # 192 x 192 tiles fill the wave (0.85-0.93x for 128 x 320); straddled rows of 47 K
    # steps (0.86x against 128 x 256 in 2x1 clusters); 256 tiles (two waves); the trimmed
    # 128 x 152 tiles cheaper (76.0 against 80.0); a caller's split or a schedule other than
    # the cooperative one.
    for problem, options in (((768, 6144, 1000), {}), ((1536, 3000, 2048), {}),
                             ((1234, 4096, 3000), {}), ((4096, 4096, 4096), {}),
                             ((8192, 600, 4096), {}), ((640, 8192, 1000), {"cluster": 1}),
                             ((640, 8192, 1000), {"schedule": "pingpong"})):
        assert GemmConfig.for_problem(*problem, **options).block_n != 320, problem
    assert all(cfg.block_n != 320 for cfg in candidates(GemmConfig, 1234, 4096, 3000, {}))


def test_clusters_follow_the_row_alignment():
    assert not rows_straddle_lines(GemmConfig(512, 4096, 4096))
    assert rows_straddle_lines(GemmConfig(512, 4096, 3000))  # 6000-byte rows
    assert rows_straddle_lines(GemmConfig(512, 4096, 3008, dtype="float8_e4m3fn"))
    assert not rows_straddle_lines(GemmConfig(512, 4096, 4096, dtype="float8_e4m3fn"))
    # B as K x N: its rows are N long.
    assert rows_straddle_lines(GemmConfig(512, 4040, 4096, b_layout="kn"))
    assert not rows_straddle_lines(GemmConfig(512, 4040, 4096))
    # Straddling rows but one row block: nothing to pair; an odd grid: no pairs.
    assert GemmConfig.for_problem(128, 16384, 3000).cluster == 1
    assert GemmConfig.for_problem(1000, 2000, 3000, ctas=131).cluster == 1
    assert GemmConfig.for_problem(2048, 2048, 2048 + 8).cluster == 2


def test_one_wave_64_row_tiles_of_80_or_96_columns_run_on_8_ring_stages():
    """The one-wave 64 x 80 and 64 x 96 tiles (in_one_exact_wave) of at least 20 K steps
    take 8 ring stages, not the 11-12 that fit (one_wave.with_narrow_ring, measured on the
    H200; why 8 is unexplained)."""
    picked = picker("block_m", "block_n", "stages", "cluster", "split_k")
    assert picked(1024, 640, 1280) == (64, 80, 8, 1, 1)     # 20 K steps
    assert picked(1000, 768, 1280) == (64, 96, 8, 1, 1)
    # 16 steps: as many as fit beside two alternating 32-column C stages.
    assert picked(512, 1536, 1024) == (64, 96, 10, 1, 1)
    assert picked(1024, 640, 640) == (64, 80, 12, 1, 1)     # 10 steps
    assert picked(1024, 640, 1280, stages=12)[2] == 12      # the caller's ring stays


def test_pairs_share_b_where_rows_straddle_sectors(before_narrow_wave):
    """2x1 clusters multicast B where the K-major rows' 128-byte pieces straddle 32-byte
    sectors; rows of whole sectors that straddle lines run without (measured on the
    H200, 16-bit and FP8); narrower pieces and K x N B keep the line rule."""
    sector_straddled = GemmConfig(2048, 4096, 3000)   # 6000-byte rows
    whole_sectors = GemmConfig(2048, 4096, 2000)      # 4000-byte rows: 31.25 lines
    assert rows_straddle_lines(whole_sectors) and not pairs_share_b(whole_sectors)
    assert pairs_share_b(sector_straddled)
    assert not pairs_share_b(GemmConfig(2048, 4096, 4096))
    # 64-byte K pieces (a conv2d's K blocks of 32 channels) keep the line rule.
    assert pairs_share_b(GemmConfig(2048, 4096, 2000, block_k=32, stages=4))
    assert pairs_share_b(GemmConfig(2048, 4040, 4096, b_layout="kn"))
    assert not pairs_share_b(GemmConfig(2048, 4096, 3008, dtype="float8_e4m3fn"))
    assert pairs_share_b(GemmConfig(2048, 4096, 3024, dtype="float8_e4m3fn"))
    picked = picker("block_m", "block_n", "cluster", "cluster_n")
    assert picked(4096, 4096, 3000)[2:] == (2, 1)
    for k in (400, 1200, 2000, 2400, 4000):
        assert picked(4000, 2000, k)[2:] == (1, 1), k
    assert picked(640, 2400, 2224) == (128, 128, 1, 1)     # 2x2 clusters before
    assert picked(512, 640, 400)[:3] == (64, 64, 1)         # 128 x 128 in 2x2 before


def test_wide_straddled_problems_of_one_round_take_2x2_clusters_on_the_resident_ctas():
    """Where the rows straddle L2 lines, the problem has at least as many column blocks as
    row blocks, and the chosen 2x1 clusters run one round that 2x2 clusters on the 120
    CTAs 132 SMs hold in clusters of 4 also run in one, the default takes the 2x2 clusters
    (each CTA loads half of A's rows and half of B's). Measured on the H200."""
    picked = picker("block_m", "block_n", "cluster", "cluster_n", "ctas", "work_units")

    assert picked(600, 2224, 3000) == (128, 128, 2, 2, 120, 27)   # 5 x 18 blocks
    assert picked(600, 5680, 3000) == (192, 192, 2, 2, 120, 30)   # 4 x 30
    assert picked(1024, 2224, 5000) == (128, 160, 2, 2, 120, 28)  # 8 x 14
    assert picked(700, 5000, 1112) == (128, 256, 2, 2, 120, 30)
    # Taller than wide (20 row blocks on 5 column blocks): 2x1, 132 CTAs.
    assert picked(2500, 600, 3000) == (128, 128, 2, 1, 132, 50)
    assert picked(1536, 1024, 3000) == (128, 128, 2, 1, 132, 48)
    # Whole lines (K = 3072): no cluster to widen.
    assert picked(600, 2224, 3072)[2:4] == (1, 1)
    # 2x2 clusters would take two rounds (9999 x 1000 x 3000 runs a tail split in 2x1).
    assert picked(9999, 1000, 3000)[2:5] == (2, 1, 132)
    # A GPU whose residency in clusters of 4 was not measured keeps 2x1 clusters.
    assert picked(600, 2224, 3000, ctas=114)[2:5] == (2, 1, 114)
    # Only 2x1 clusters of one round are widened; the caller's split stays.
    two = GemmConfig(600, 2224, 3000, block_n=128, stages=6, epilogue_n=0, cluster=2)
    assert (in_two_by_two(two).cluster_n, in_two_by_two(two).ctas) == (2, 120)
    assert in_two_by_two(replace(two, cluster=1)) == replace(two, cluster=1)
    assert in_two_by_two(replace(two, b_layout="kn")) == replace(two, b_layout="kn")
    assert GemmConfig.for_problem(600, 2224, 3000, cluster=2).cluster_n == 1


def test_short_problems_on_sector_straddling_rows_share_b_between_64_row_tiles():
    """The short problems' 64 x 128 tiles (``on_half_rows``) run in 2x1 clusters where the
    rows straddle 32-byte sectors and a tile has 14 to 16 K steps; measured on the H200
    (``tiling._half_rows_sharing_b``)."""
    picked = picker("block_m", "block_n", "cluster", "cluster_n", "ctas", "split_k")

    assert picked(1000, 1000, 1000) == (64, 128, 2, 1, 132, 1)   # 2000-byte rows
    assert picked(1000, 1000, 904) == (64, 128, 2, 1, 132, 1)    # 15 K steps
    assert picked(2000, 384, 1000) == (64, 128, 2, 1, 132, 1)    # 64 x 96 without it
    # Wider than tall: the 2x1 clusters stay (2x2 is a rule of 128- and 192-row tiles).
    assert picked(600, 1200, 1000) == (64, 128, 2, 1, 132, 1)
    # Whole sectors (1600- and 1984-byte rows) or 10 to 13 K steps: no cluster.
    assert picked(1024, 1000, 800)[2] == 1
    assert picked(1000, 1000, 992)[2] == 1
    assert picked(1200, 768, 600)[2] == 1
    assert picked(1000, 1000, 648)[2] == 1
    # The 64 x 64 tiles of narrower problems share nothing; nor does an odd grid.
    assert picked(700, 768, 1000)[:3] == (64, 64, 1)
    assert picked(1000, 1000, 1000, ctas=131)[2] == 1
    half = GemmConfig(1000, 1000, 1000, block_m=64, block_n=128, stages=9, epilogue_n=64)
    assert in_two_by_two(replace(half, cluster=2)).cluster_n == 1


def test_skinny_problems_with_straddled_rows_share_a_in_clusters_of_four():
    """128 x 128 tiles of at most two row blocks, at least 12 column blocks and 16 K steps
    a unit, whose rows straddle L2 lines, in one round without a cluster and still in
    clusters of 4 along N on 120 CTAs: those clusters, each CTA multicasting a quarter of
    A's rows (sharing_a_in_fours). Measured on the H200."""
    picked = picker("schedule", "block_m", "block_n", "cluster", "cluster_n", "ctas",
                    "split_k", "work_units")

    # 40 column blocks in 3 ordered K parts: 10 clusters x 3 parts on 30 workers.
    assert picked(100, 5000, 3000) == ("pingpong", 128, 128, 1, 4, 120, 3, 30)
    # Cooperative, whole K: 79 column blocks in 20 clusters (the last CTA past N).
    assert picked(100, 10000, 1000) == ("cooperative", 128, 128, 1, 4, 120, 1, 20)
    # Two row blocks: 2 x 24 column blocks in 2 parts.
    assert picked(200, 3000, 3000) == ("pingpong", 128, 128, 1, 4, 120, 2, 24)
    # Whole lines (K = 3072, 4096): no cluster (96 x 8192 x 4096 lost in clusters).
    assert picked(100, 5000, 3072)[3:6] == (1, 1, 132)
    assert picked(80, 12288, 4096)[3:6] == (1, 1, 132)
    # Too few column blocks (80 x 640 x 3000: 5, 3 of 8 CTAs past N) or K steps a unit
    # (100 x 3072 x 3000: 10 in each of 5 parts) or units for 30 clusters (200 x 1600 x
    # 5000: 130); three row blocks of 128 (384 x 5000 x 3000).
    assert picked(80, 640, 3000)[3:6] == (1, 1, 132)
    assert picked(100, 3072, 3000)[3:6] == (1, 1, 132)
    assert picked(200, 1600, 5000)[3:6] == (1, 1, 132)
    assert picked(384, 5000, 3000)[4] != 4
    # A GPU whose residency in clusters of 4 was not measured, K x N B, FP8: unchanged.
    assert picked(100, 5000, 3000, ctas=114)[3:6] == (1, 1, 114)
    assert picked(100, 5000, 3000, b_layout="kn")[4] == 1
    assert GemmConfig.for_problem(100, 5000, 3008, dtype="float8_e4m3fn").cluster_n == 1
    # Only tilings without a cluster; the caller's choice stays.
    one = GemmConfig.for_problem(100, 5000, 3000, cluster_n=1)
    assert one.cluster_n == 1 and sharing_a_in_fours(one).cluster_n == 4
    paired = replace(one, cluster=2, ctas=132)
    assert sharing_a_in_fours(paired) == paired
    assert sharing_a_in_fours(replace(one, block_n=256)) == replace(one, block_n=256)


def test_a_few_row_blocks_take_64_x_256_tiles_where_they_fill_one_wave():
    """M of 65 to 512 and no multiple of 128, rows of whole 32-byte sectors, and 64 x 256
    tiles filling at least 80% of one wave: ping-pong 64 x 256 tiles, no cluster, no K
    split (on_wide_half_rows). Measured on the H200."""
    picked = picker("schedule", "block_m", "block_n", "stages", "cluster_size", "split_k",
                    "ctas", "num_tiles")

    wide_half = ("pingpong", 64, 256, 5, 1, 1, 132)
    assert picked(300, 5680, 2224) == (*wide_half, 115)  # was 128 x 192 in 2x2 clusters
    # (333 x 4440 x 2224's 108 such tiles pad 51 of 384 rows: it swaps the operands,
    # on_swapped_operands, 3 column blocks of 112.)
    half = on_wide_half_rows(modelled(GemmConfig, 333, 4440, 2224))
    assert (half.schedule, half.block_m, half.block_n, half.num_tiles) == ("pingpong", 64,
                                                                           256, 108)
    assert picked(500, 4096, 4000) == (*wide_half, 128)  # was 128 x 256 in 2 K parts
    assert picked(350, 5000, 8192) == (*wide_half, 120)
    # Rows straddling 32-byte sectors (K = 3000, 1000), M of 600, M = 256 (a multiple of
    # 128), 80 tiles (61% of a wave), 200 tiles (two rounds): not taken.
    assert picked(300, 4096, 3000)[:3] == ("cooperative", 128, 128)
    assert picked(400, 4608, 1000)[1] == 128
    assert picked(600, 3200, 2224)[1] == 128
    assert picked(256, 8192, 3072)[1] == 128
    assert picked(256, 5000, 2048)[1] == 128
    assert picked(296, 10000, 5680)[1] != 64
    # The caller's tile or split stays.
    assert picked(300, 5680, 2224, block_n=192)[1:3] == (128, 192)
    assert picked(300, 5680, 2224, cluster=2)[1] == 128
    chosen = GemmConfig(300, 5680, 2224, block_n=192, stages=5, epilogue_n=64, cluster=2)
    assert on_wide_half_rows(replace(chosen, dtype="float8_e4m3fn")).block_m == 128


def test_few_tiles_become_one_wave_of_tiles_dividing_n_exactly(before_narrow_wave):
    """Where the model's tiles leave SMs idle or cut K into parts, cooperative tiles of 128
    (else 64) rows whose width divides N exactly (a multiple of 16, at least 80) and that
    fill 95-100% of one wave take the whole K each (in_one_exact_wave): from 5 to 20 K
    steps on 128 rows, 32 on 64, at least 512 rows, no cluster, 16-bit with B as N x K.
    Measured on the H200 (GEMMs and SD UNet's 1x1 conv layers)."""
    assert (EXACT_WAVE_MIN_FILL, EXACT_WAVE_MIN_WIDTH, EXACT_WAVE_WIDTH_STEP) == (0.95, 80, 16)
    assert (EXACT_WAVE_MAX_STEPS, EXACT_WAVE_MIN_M, EXACT_WAVE_MIN_STEPS) == (
        {128: 20, 64: 32}, 512, 5)

    picked = picker("schedule", "block_m", "block_n", "stages", "epilogue_cols", "split_k",
                    "cluster_size", "num_tiles")

    # 1024 x 640 x 1280: ping-pong 128 x 128 in 3 ordered parts before; 128 rows would
    # need 40-wide tiles, so 64 x 80 (C staged whole: 80 is no multiple of 32).
    assert picked(1024, 640, 1280) == ("cooperative", 64, 80, 8, 80, 1, 1, 128)
    assert picked(2048, 640, 1280) == ("cooperative", 128, 80, 7, 80, 1, 1, 128)
    assert picked(960, 1536, 1280) == ("cooperative", 128, 96, 7, 32, 1, 1, 128)
    assert picked(2048, 512, 2048) == ("cooperative", 64, 128, 8, 128, 1, 1, 128)
    # Not taken: past 20 K steps on 128 rows (2048 x 640 x 1920 keeps 80 tiles of 128 x
    # 128), under 512 rows or 5 K steps, no exact width filling the wave (4096^3), fp8,
    # B as K x N, the caller's tile or split.
    assert picked(2048, 640, 1920)[1:3] == (128, 128)
    assert picked(512, 2560, 1280)[1:3] == (128, 80)
    assert picked(500, 2560, 1280)[1:3] == (128, 128)
    assert picked(2048, 640, 320)[1:3] == (128, 80)
    assert picked(2048, 640, 256)[1:3] == (128, 128)
    assert picked(4096, 4096, 4096)[1:3] == (128, 256)
    assert picked(2048, 640, 1280, dtype="float8_e4m3fn")[1:3] != (128, 80)
    assert picked(2048, 640, 1280, b_layout="kn")[1:3] != (128, 80)
    assert picked(2048, 640, 1280, block_n=128)[1:3] == (128, 128)
    assert picked(1024, 640, 1280, split_k=3, split_k_ordered=True)[1:3] != (64, 80)
    # Tiles already one full wave, or in clusters, stay as they are.
    wave = GemmConfig(4096, 640, 640, block_n=160, stages=6, epilogue_n=32, b_layout="nk")
    assert wave.num_tiles == 128 and in_one_exact_wave(wave) == wave
    clustered = replace(GemmConfig(2048, 640, 1280, b_layout="nk"), cluster=2)
    assert in_one_exact_wave(clustered) == clustered
    # The candidate itself (the sweeps'), past the rule's bounds: 128 x 80 at 30 K steps;
    # none where no width of at least 80 fills the wave, or the kernel would refuse it
    # (an 80-wide K x N B tile).
    wave = exact_wave(GemmConfig(2048, 640, 1920, b_layout="nk"))
    assert (wave.block_m, wave.block_n, wave.stages, wave.epilogue_n, wave.num_tiles) == (
        128, 80, 7, 0, 128)
    assert exact_wave(GemmConfig(4096, 4096, 4096)) is None
    assert exact_wave(GemmConfig(2048, 640, 1920, b_layout="kn")) is None


def test_short_problems_take_the_fullest_wave_of_narrow_whole_k_tiles():
    """The last rule (tiling.in_gemm_fullest_narrow_wave): cooperative 64-row tiles with the
    whole K each, of the width (a multiple of 8, at least 16, dividing N) whose tiles make
    the fullest wave of half to all the CTAs, where they are more than the tiles before,
    with 2 to NARROW_WAVE_MAX_STEPS K steps in an unrolled mainloop and at most 3x a unit's
    bytes; not over clusters or swaps, FP8, B as K x N, or the caller's choices (measured
    on 100 GEMMs on the H200: 1.15x geomean, RESULTS.md 6x)."""
    assert NARROW_WAVE_MAX_STEPS == 40
    cases = {  # (m, n, k): (block_n, tiles, K steps, stages, C stage), (tiling, units) before
        (1568, 640, 1280): ((128, 125, 20, 8, 128), ("pingpong", 128, 130)),  # 2 parts
        (3136, 192, 1152): ((96, 98, 18, 10, 32), ("pingpong", 128, 100)),  # 2 C stages
        (1024, 1536, 1536): ((192, 128, 24, 6, 192), ("cooperative", 128, 96)),
        (500, 2560, 1280): ((160, 128, 20, 7, 32), ("cooperative", 128, 80)),
        (256, 1024, 2048): ((32, 128, 32, 12, 32), ("pingpong", 128, 128)),  # 8 parts
        (64, 1280, 960): ((16, 80, 15, 12, 16), ("cooperative", 128, 30)),  # 64 x 128, 3 parts
    }
    for (m, n, k), (want, was) in cases.items():
        # (The swap for few columns takes 3136 x 192 x 1152 after this rule; swap_ab=False
        # stops it: test_few_columns_run_swapped_where_that_keeps_more_sms_busy.)
        cfg = GemmConfig.for_problem(m, n, k, swap_ab=False)
        old = before_the_narrow_wave(m, n, k)
        assert (cfg.schedule, cfg.block_m, cfg.split_k, cfg.tail_split, cfg.stream_k,
                cfg.cluster_size, cfg.swap_ab) == ("cooperative", 64, 1, 1, False, 1, False)
        assert (cfg.block_n, cfg.num_tiles, cfg.k_steps, cfg.stages,
                cfg.epilogue_cols) == want, (m, n, k)
        assert (old.schedule, old.block_n, old.num_tiles * old.reduction_parts) == was
        assert n % cfg.block_n == 0 and old.num_tiles < cfg.num_tiles <= cfg.ctas
        narrow = with_alternating_c_stages(in_gemm_fullest_narrow_wave(old))
        assert narrow == replace(cfg, l2_promotion=old.l2_promotion)
    # Kept: 64 K steps (768 x 384 x 4096: 18 tiles in 7 parts ran 1.54x the narrow wave);
    # 2x1 clusters sharing B over straddled rows (128 x 6144 x 1000); C^T = B A^T (16 x 8192
    # x 2560, 136 x 5120 x 2048); FP8; B as K x N; the caller's tile, ring or schedule.
    for m, n, k, options in [(768, 384, 4096, {}), (128, 6144, 1000, {}),
                             (16, 8192, 2560, {}), (136, 5120, 2048, {}),
                             (1568, 640, 1280, {"dtype": "float8_e4m3fn"}),
                             (1568, 640, 1280, {"b_layout": "kn"}),
                             (1568, 640, 1280, {"block_n": 128}),
                             (1568, 640, 1280, {"stages": 6}),
                             (1568, 640, 1280, {"schedule": "cooperative"})]:
        # (128 x 6144 x 1000's 64 x 128 tiles take two C stages after, as any.)
        cfg = GemmConfig.for_problem(m, n, k, **options)
        assert cfg == with_alternating_c_stages(before_the_narrow_wave(m, n, k, **options)), (
            m, n, k, options)
        assert not (cfg.block_m == 64 and cfg.num_tiles > 100 and cfg.split_k == 1)
    clustered = GemmConfig.for_problem(128, 6144, 1000)
    assert clustered.cluster_size == 2 and in_gemm_fullest_narrow_wave(clustered) == clustered
    swapped = GemmConfig.for_problem(136, 5120, 2048)
    assert swapped.swap_ab and in_gemm_fullest_narrow_wave(swapped) == swapped


def test_the_rules_after_the_model_are_listed_in_the_order_they_apply():
    """``choose`` is the model's pick (``modelled``) through ``refinements``, which names
    each rule that changed it (what ``benchmarks/gemm.py --explain`` prints)."""
    def rules(m, n, k, **options):
        # (On the K block for_problem fits to a short K, as gemm.py --explain runs them.)
        options = {"block_k": GemmConfig.for_problem(m, n, k, **options).block_k, **options}
        steps = refinements(modelled(GemmConfig, m, n, k, **options), options)
        if steps:
            assert steps[-1][1] == replace(GemmConfig.for_problem(m, n, k, **options),
                                           l2_promotion=steps[-1][1].l2_promotion)
        return [name for name, _ in steps]

    assert rules(300, 5680, 2224) == ["on_wide_half_rows"]
    assert rules(1024, 640, 1280) == ["in_one_exact_wave"]
    assert rules(600, 2224, 3000) == ["in_two_by_two"]
    assert rules(100, 5000, 3000) == ["sharing_a_in_fours"]
    assert rules(8192, 328, 8192) == ["trimmed"]
    assert rules(512, 512, 512) == ["on_half_rows", "in_gemm_fullest_narrow_wave"]
    assert rules(1000, 1280, 256) == ["in_gemm_fullest_narrow_wave",
                                      "with_alternating_c_stages"]
    assert rules(16, 8192, 2048) == ["on_swapped_operands"]
    assert rules(9248, 192, 768) == ["on_few_columns"]
    assert rules(6272, 128, 480) == ["on_half_rows", "on_few_columns"]
    assert rules(9248, 192, 768, swap_ab=False) == ["with_alternating_c_stages"]
    assert rules(131, 1320, 136) == ["in_two_by_two", "in_short_wave"]
    assert rules(2048, 8192, 256) == ["in_short_pingpong"]
    assert rules(303, 8680, 8) == ["with_alternating_c_stages", "in_one_step_pingpong"]
    assert rules(334, 4248, 88) == ["in_two_by_two", "with_alternating_c_stages",
                                    "in_short_wave"]
    assert rules(4096, 4096, 4096) == []
    assert rules(300, 5680, 2224, block_n=192) == []


def test_few_rows_swap_the_operands(before_narrow_wave):
    """on_swapped_operands: M under 256 (FP8: at most 128) that the other rules' tiles pad,
    N at least 1024, B as N x K: C^T = B A^T on cooperative 128 x ceil8(M) tiles, in the model's
    ordered K parts where those tiles fill at most half the SMs, the widest C stage that
    leaves 4 ring stages and the most stages that fit (at most 12); not where the other
    rules run clusters, nor where the swapped units leave a last round under half full.
    Measured on the H100 (kernels/tiling)."""
    picked = picker("swap_ab", "schedule", "block_m", "block_n", "stages", "epilogue_n",
                    "split_k", "split_k_ordered", "ctas", "l2_promotion")
    # 64 tiles of 128 x 16: two ordered parts (128 units), 12 stages of 18 KiB.
    assert picked(16, 8192, 2048) == (True, "cooperative", 128, 16, 12, 16, 2, True, 132,
                                      256)
    # 40 tiles of 128 x 136 in 3 parts; 200 rows: 5 parts of 24 tiles, 4 stages.
    assert picked(136, 5120, 2048) == (True, "cooperative", 128, 136, 5, 136, 3, True, 132,
                                       256)
    assert picked(200, 8192, 4096)[3:7] == (200, 4, 200, 2)
    # 250 rows: 256 wide; a whole 256-row C stage would leave 3 ring stages, 128 rows 4.
    assert picked(250, 4096, 4096)[3:7] == (256, 4, 128, 4)
    # 1 row: 128 x 8 tiles, one wave of 128 (no parts); 224 (1.7 waves) still swapped.
    assert picked(1, 16384, 16384)[:7] == (True, "cooperative", 128, 8, 12, 8, 1)
    assert picked(32, 28672, 4096)[:4] == (True, "cooperative", 128, 32)
    # FP8 the same tiles (K blocks of 128: the same bytes a K step) up to 128 rows, 64
    # too: the FP8 default's tiles are 128 rows (the 16-bit one's 64 cover 64 rows).
    assert picked(16, 8192, 2048, dtype="float8_e4m3fn") == picked(16, 8192, 2048)
    assert picked(64, 8192, 2048, dtype="float8_e4m3fn")[:4] == (True, "cooperative", 128, 64)
    # 192 rows on 128-row tiles pad 64 of 256: swapped (192 x 4096 x 4096 in 4 parts).
    assert picked(192, 4096, 4096)[:7] == (True, "cooperative", 128, 192, 4, 192, 4)
    assert picked(96, 4096, 4096, dtype="float8_e5m2")[:4] == (True, "cooperative", 128, 96)
    # Not swapped: M covered by the other rules' tiles (64 rows on 64 x 128 tiles, 128 on
    # 128-row ones: no padding rows), 256 rows and more (FP8: past 128), N under 1024, A
    # shared in clusters of 4 (sharing_a_in_fours), a last round of one tile (133 of 128 x
    # 40), B as K x N, and any tiling the caller chose.
    for m, n, k, options in [(64, 8192, 2048, {}), (128, 8192, 2048, {}),
                             (256, 8192, 2048, {}),
                             (20, 1000, 1000, {}), (100, 5000, 3000, {}),
                             (40, 17000, 1000, {}),
                             (136, 5120, 2048, {"dtype": "float8_e4m3fn"}),
                             (16, 8192, 2048, {"b_layout": "kn"}),
                             (16, 8192, 2048, {"block_m": 64}),
                             (16, 8192, 2048, {"stages": 4}),
                             (16, 8192, 2048, {"swap_ab": False})]:
        assert not GemmConfig.for_problem(m, n, k, **options).swap_ab, (m, n, k, options)
    # Past 256 rows (16-bit): A's rows in 2 or 3 column blocks, the count with the most
    # units in one round, where that pads at least 8% fewer rows than the tiles the other
    # rules take (333 rows: 3 blocks of 112, 105 tiles, against ping-pong 64 x 256 tiles
    # padding 51 of 384; 264 rows: 2 of 136 in 4 parts), not where it pads about as few
    # (500 rows: 64 x 256 tiles pad 12), leaves no count in one round (300 x 12288: 192
    # or 288 tiles), or 512 rows and more, or FP8.
    blocks = picker("swap_ab", "block_n", "work_units", "split_k", "epilogue_n")
    assert blocks(333, 4440, 2224) == (True, 112, 105, 1, 112)
    assert blocks(264, 2048, 4096) == (True, 136, 128, 4, 136)
    assert blocks(400, 8192, 2048)[:3] == (True, 200, 128)
    for m, n, k, options in [(500, 4096, 4096, {}), (300, 12288, 4096, {}),
                             (360, 6144, 2048, {}), (512, 8192, 2048, {}),
                             (600, 8192, 2048, {}), (333, 4440, 2224, {"dtype": "float16",
                                                                       "b_layout": "kn"}),
                             (333, 4440, 2240, {"dtype": "float8_e4m3fn"})]:
        assert not GemmConfig.for_problem(m, n, k, **options).swap_ab, (m, n, k, options)
    assert GemmConfig.for_problem(333, 4440, 2224, dtype="float16").swap_ab
    # The rule's own guards, on the model's choice.
    chosen = modelled(GemmConfig, 40, 17000, 1000)
    assert on_swapped_operands(chosen) == chosen
    # swap_ab=False keeps the other rules (64-row tiles for 16 rows: on_half_rows).
    kept = GemmConfig.for_problem(16, 8192, 2048, swap_ab=False)
    assert (kept.swap_ab, kept.block_m, kept.block_n, kept.split_k) == (False, 64, 128, 2)
    # The caller's swap_ab=True takes the swapped tiling whatever the rule says.
    forced = GemmConfig.for_problem(20, 1000, 1000, swap_ab=True)
    assert (forced.swap_ab, forced.block_m, forced.block_n, forced.split_k) == (True, 128, 24,
                                                                              4)


def test_straddled_rows_price_a_k_step_by_the_bytes_it_loads():
    """Where rows straddle L2 lines a K step costs at least its bytes against a 128 x 256
    tile's in the same cluster shape."""
    def tile(block_n: int, k: int, **fields) -> GemmConfig:
        stages = {128: 6, 160: 6, 192: 5, 256: 4}[block_n]
        return GemmConfig(10000, 1024, k, block_n=block_n, stages=stages,
                          epilogue_n={128: 0, 160: 32, 192: 64, 256: 128}[block_n], **fields)
    # 2x1 clusters share B: 128 + 128/2 rows against 128 + 256/2.
    assert straddled_step_cost(tile(128, 3000, cluster=2)) == 0.75
    assert straddled_step_cost(tile(192, 3000, cluster=2)) == 0.875
    assert straddled_step_cost(tile(160, 3000, cluster=2)) == 0.8125
    assert straddled_step_cost(tile(256, 3000, cluster=2)) == 1.0
    # No cluster: 256 rows against 384; 1x2 clusters share A: 64 + 128 against 64 + 256.
    assert straddled_step_cost(tile(128, 3000)) == pytest.approx(2 / 3)
    assert straddled_step_cost(tile(128, 3000, cluster_n=2)) == 0.6
    # The step cost is the larger of that and the measured one, and only where the rows
    # straddle: whole lines keep STEP_COST.
    assert step_cost(tile(128, 3000, cluster=2)) == 0.75
    assert step_cost(tile(192, 3000)) == max(STEP_COST[192], 40 / 48)
    assert step_cost(tile(128, 3072, cluster=2)) == STEP_COST[128]
    # 10000 x 1024 x 3000 in 2x1 clusters: 40 x 8 cluster units of 128 x 128 over 66
    # clusters, 5 rounds of 47 K steps at 0.75, against 40 x 4 of 128 x 256 in 3 rounds.
    assert estimate(tile(128, 3000, cluster=2)).cost == 5 * 47 * 0.75
    assert estimate(tile(256, 3000, cluster=2)).cost == 3 * 47 * 1.0


def test_rows_straddle_lines_by_the_pieces_the_loads_read():
    """A K-major row is read block_k elements at a time: its pieces sit inside 128-byte
    lines where the pitch is a multiple of one piece (at most a line)."""
    assert rows_straddle_lines(GemmConfig(512, 512, 1000))  # 2000-byte rows, 128-byte pieces
    assert not rows_straddle_lines(GemmConfig(512, 512, 1024))
    # 864 columns (a 3x3 filter of 96 channels): 1728-byte rows read in 64-byte pieces
    # (32-wide K blocks) stay inside lines; in 128-byte pieces they straddle.
    assert not rows_straddle_lines(GemmConfig(512, 512, 864, block_k=32, stages=8))
    assert rows_straddle_lines(GemmConfig(512, 512, 864))


def test_every_candidate_runs_and_the_choice_is_the_cheapest():
    for m, n, k in [(2048, 2048, 2048), (768, 4096, 4096), (1536, 3072, 4096),
                    (1000, 2000, 3000), (6000, 6000, 6000)]:
        found = candidates(GemmConfig, m, n, k, {})
        assert found and len(found) == len(set(found))
        for cfg in found:
            cfg.check()
        best = ranked(GemmConfig, m, n, k)
        assert [e.cost for e in best] == sorted(e.cost for e in best)
        # (Then the C stages: with_alternating_c_stages, which the model does not price.)
        assert GemmConfig.for_problem(m, n, k) == choose(GemmConfig, m, n, k) == (
            with_alternating_c_stages(best[0].config))


@pytest.mark.parametrize("options", [{"cluster": 1}, {"stream_k": False}, {"block_n": 128},
                                     {"schedule": "pingpong"}, {"split_k": 2},
                                     {"dtype": "float16", "b_layout": "kn"},
                                     {"ctas": 114}], ids=str)
def test_the_model_keeps_what_the_caller_chose(options):
    for m, n, k in [(768, 4096, 4096), (1000, 2000, 3000), (2048, 7168, 4096),
                    (2304, 4608, 768)]:
        cfg = GemmConfig.for_problem(m, n, k, **options)
        cfg.check()
        assert all(getattr(cfg, name) == value for name, value in options.items())
        if "cluster" in options or "split_k" in options:
            assert not cfg.stream_k


def test_the_default_runs_on_any_problem():
    """Random M, N, K from 1 (M) and 8 (N, K) to 16384, 16-bit and FP8: the choice always
    passes check and is one the model ranked (or the ordered split-K rule's), or its
    64-row form (on_half_rows) of one."""
    extents = [1, 7, 8, 16, 77, 128, 136, 520, 1000, 2048, 3000, 4096, 5000, 16384]
    for m, n, k in itertools.islice(itertools.product(extents, repeat=3), 0, None, 7):
        n, k = max(8, n // 8 * 8), max(16, k // 16 * 16)
        for dtype in ("bfloat16", "float8_e4m3fn"):
            cfg = GemmConfig.for_problem(m, n, k, dtype=dtype)
            cfg.check()
            # First the K block that pads a short K least (16-bit), every rule below on it.
            assert cfg.block_k == (fitted_k_block(k) if dtype == "bfloat16" else 128)
            assert cfg == GemmConfig.for_problem(m, n, k, dtype=dtype, block_k=cfg.block_k)
            options = {"dtype": dtype, "block_k": cfg.block_k}
            # Last, the short problems' one wave or ping-pong tiles, of the tiling before.
            before_short = before_the_short_wave(m, n, k, **options)
            assert cfg == replace(in_short_pingpong(in_one_step_pingpong(
                in_short_wave(before_short, 132), 132), 132), l2_promotion=cfg.l2_promotion)
            cfg = before_short
            # Then the alternating C stages of the tiling before them.
            plain = before_the_c_stages(m, n, k, **options)
            assert cfg == (plain if streams_weights(plain) else with_alternating_c_stages(plain))
            cfg = plain
            unswapped = before_the_few_columns(m, n, k, **options)
            if cfg != unswapped:
                # C^T = B A^T for few columns, of the tiling before it.
                assert replace(cfg, l2_promotion=128) == replace(
                    on_few_columns(unswapped), l2_promotion=128)
                cfg = unswapped
            before = before_the_narrow_wave(m, n, k, **options)
            if cfg != before:
                # The fullest wave of narrow tiles of the tiling before it.
                assert replace(cfg, l2_promotion=128) == replace(
                    fullest_narrow_wave(before), l2_promotion=128)
                cfg = before
            if cfg.swap_ab:
                # C^T = B A^T: the swapped form of the model's choice.
                chosen = modelled(GemmConfig, m, n, k, **options)
                assert replace(cfg, l2_promotion=128) == on_swapped_operands(chosen)
                continue
            if cfg.block_m == 64:
                # The 64-row forms of the 128-row choice: on_half_rows', or
                # on_wide_half_rows' (after the trim).
                whole = GemmConfig.for_problem(m, n, k, **options, block_m=128)
                halves = (on_half_rows(whole), on_wide_half_rows(trimmed(whole)))
                assert cfg in [replace(h, l2_promotion=cfg.l2_promotion) for h in halves]
                cfg = whole
            if cfg.split_k == 1:
                ranked_as = replace(cfg, l2_promotion=128)  # 256 where M is one row block
                ranked = candidates(GemmConfig, m, n, k, options)
                # ... or its trimmed form (tiling.trimmed): the same blocks, narrower; and
                # that in 2x2 clusters (tiling.in_two_by_two).
                trims = [trimmed(c) for c in ranked]
                assert ranked_as in ranked + trims + [in_two_by_two(c) for c in trims]


def test_stream_k_over_two_waves_shares_the_last_full_wave_too():
    # 1536 x 3072 x 4096: 12 x 12 = 144 tiles of 128 x 256 on 132 CTAs.
    one = GemmConfig(1536, 3072, 4096, stream_k=True)
    two = replace(one, stream_k_waves=2)
    assert (one.stream_k_dp_tiles, one.iterations) == (132, 12 * 64)
    assert (two.stream_k_dp_tiles, two.iterations) == (0, 144 * 64)
    # One wave: a tile's 64 steps over runs of 5 or 6 (up to 13 peers); two: runs of 69
    # or 70 (one).
    assert (one.stream_k_peers, two.stream_k_peers) == (13, 1)
    # Measured slower (1536 x 3072 x 4096: 70.8% of cuBLAS against 79.8% for 128 x 192
    # tiles sharing the partial wave alone), so the model never takes it (nor, there,
    # stream-K at all: the tiles left over in ordered parts ran 94.8-96.1%, and 128 tiles
    # of 192 x 192 in one wave 101%).
    chosen = GemmConfig.for_problem(1536, 3072, 4096)
    assert not chosen.stream_k and chosen.stream_k_waves == 1
    assert not any(cfg.stream_k for cfg in candidates(GemmConfig, 1536, 3072, 4096, {}))
    for bad in ({"stream_k_waves": 2}, {"stream_k_waves": 3, "stream_k": True}):
        with pytest.raises(ValueError, match="stream_k_waves="):
            GemmConfig(1536, 3072, 4096, **bad).check()


def test_one_row_block_streams_b_with_256_byte_l2_fills():
    for m, n, k in [(16, 8192, 8192), (1, 16384, 16384), (128, 8192, 8192)]:
        assert GemmConfig.for_problem(m, n, k).l2_promotion == 256
        assert GemmConfig.for_problem(m, n, k, dtype="float8_e4m3fn").l2_promotion == 256
    for m, n, k in [(300, 8192, 8192), (512, 4096, 4096), (8192, 8192, 8192)]:
        assert GemmConfig.for_problem(m, n, k).l2_promotion == 128
    # C^T = B A^T: M is the product's columns, one block of 136 (tiling.streams_weights).
    swapped = GemmConfig.for_problem(129, 8192, 8192)
    assert (swapped.swap_ab, swapped.n_blocks, swapped.l2_promotion) == (True, 1, 256)
    assert GemmConfig.for_problem(16, 8192, 8192, l2_promotion=128).l2_promotion == 128


def test_c_stage_widths_follow_the_swizzle_rule():
    """Whole 64-column atoms dividing the width (widest first), else 32 columns (a multiple
    of 32), else the whole width (a multiple of 8): what GemmConfig.check accepts; trimmed
    takes the narrowest, conv2d the widest that costs no ring stage."""
    assert c_stage_widths(256) == [256, 128, 64]
    assert c_stage_widths(192) == [192, 64]
    assert c_stage_widths(320) == [320, 64]
    assert c_stage_widths(160) == [32]
    assert c_stage_widths(104) == [104]
    for width in (64, 96, 104, 128, 152, 160, 184, 192, 224, 256, 320):
        for stage in c_stage_widths(width):
            GemmConfig(1024, 1024, 1024, block_n=width, stages=2,
                       epilogue_n=0 if stage == width else stage).check()


def test_a_c_stage_narrower_than_a_cooperative_tile_alternates_with_a_second():
    """with_alternating_c_stages, the last rule: two C stages where a cooperative
    unswapped tile (16-bit or FP8) stores C in pieces, with the most ring stages that fit
    beside them (at most as many as before, at least ALTERNATING_MIN_STAGES); else the
    tiling as it was.
    Measured on the H200 (RESULTS.md 6z2): 1200 x 512 x 1000 on 64 x 128 tiles 91.8% of
    cuBLAS with one, 94.9% with two."""
    assert ALTERNATING_MIN_STAGES == 4

    def staged(cfg: GemmConfig) -> tuple:
        return (cfg.epilogue_cols, cfg.epilogue_buffers, cfg.stages)

    low = GemmConfig.for_problem(1200, 512, 1000)
    assert (low.block_m, low.block_n, low.schedule) == (64, 128, "cooperative")
    assert staged(low) == (64, 2, 8)
    assert staged(before_the_c_stages(1200, 512, 1000)) == (64, 1, 9)
    assert staged(GemmConfig.for_problem(600, 7000, 2048)) == (64, 2, 4)  # 128 x 192: 5 -> 4
    # 128 x 256 in 128-column halves: two would leave 3 ring stages.
    wide = GemmConfig(4096, 4096, 4096, epilogue_n=128, stages=4)
    assert with_alternating_c_stages(wide) == wide
    # A whole-width C stage, ping-pong tiles (two C stages of their own), C^T = B A^T.
    for kept in (GemmConfig(4096, 4096, 4096, block_n=128, epilogue_n=128, stages=6),
                 GemmConfig(4096, 4096, 4096, block_n=128, schedule="pingpong",
                            epilogue_n=64, stages=5),
                 GemmConfig(16, 8192, 2048, swap_ab=True, block_n=16, epilogue_n=8,
                            stages=12)):
        kept.check()
        assert with_alternating_c_stages(kept) == kept
    two = with_alternating_c_stages(GemmConfig(1024, 1536, 1024, block_n=192, epilogue_n=64,
                                               stages=5))
    assert staged(two) == (64, 2, 4) and two.shared_bytes <= MAX_SHARED
    assert replace(two, stages=5).shared_bytes > MAX_SHARED
    # One row block streaming B keeps its ring (64 x 8192 x 8192: 9 stages, one C stage).
    assert staged(GemmConfig.for_problem(64, 8192, 8192)) == (64, 1, 9)
    # FP8 too: 600 x 7000 x 2048 on 128 x 192 tiles, 5 ring stages -> 4 (1.07x, ABBA).
    fp8 = GemmConfig.for_problem(600, 7000, 2048, dtype="float8_e4m3fn")
    assert (fp8.block_n, *staged(fp8)) == (192, 64, 2, 4)
    # The caller's ring or C stage stays.
    for options in ({"epilogue_buffers": 1}, {"stages": 9}, {"epilogue_n": 64}):
        assert GemmConfig.for_problem(1200, 512, 1000, **options).epilogue_buffers == 1


def test_few_columns_run_swapped_where_that_keeps_more_sms_busy():
    """tiling.on_few_columns: a 16-bit problem of at most 256 columns (B as N x K) runs as
    C^T = B A^T on cooperative 64 x width tiles, N in 64-row blocks and M cut into as many
    column blocks as the fewest rounds (at most 2) of the CTAs hold, where those tiles hold
    at least 0.1 more of their rounds' work (busy_share) than the tiling before; measured
    on the H200 (RESULTS.md 6z8): 19 GEMMs 1.05-1.50x."""
    assert (FEW_COLUMNS_MAX_N, FEW_COLUMNS_BLOCK_M, FEW_COLUMNS_MAX_ROUNDS,
            FEW_COLUMNS_MIN_WIDTH, FEW_COLUMNS_MIN_GAIN) == (256, 64, 2, 64, 0.1)
    # 9248 x 192 x 768 (Inception's 1x1 at N=32): 73 tiles of 128 x 192 on 132 CTAs, one
    # round of 12 K steps: 9248 x 192 of the 132 x 128 x 192 the round holds.
    before = before_the_few_columns(9248, 192, 768)
    assert (before.block_m, before.block_n, before.num_tiles, before.swap_ab) == (
        128, 192, 73, False)
    assert busy_share(before) == pytest.approx(9248 / (132 * 128))
    # Swapped: 3 row blocks of N, 132 // 3 = 44 column blocks of ceil8(9248 / 44) = 216.
    cfg = GemmConfig.for_problem(9248, 192, 768)
    assert (cfg.swap_ab, cfg.schedule, cfg.block_m, cfg.block_n, cfg.num_tiles, cfg.stages,
            cfg.epilogue_cols, cfg.split_k, cfg.cluster_size) == (
        True, "cooperative", 64, 216, 129, 5, 216, 1, 1)
    assert busy_share(cfg) == pytest.approx(9248 * 192 / (132 * 64 * 216))
    assert cfg == on_few_columns(before) == few_columns_tiling(before)
    # (4096 x 192 x 8192, swapped here before, runs one column block in ordered parts now:
    # test_long_k_of_few_columns_runs_one_column_block_in_ordered_parts.)
    cases = {  # (m, n, k): (width, tiles, stages), (block_m, block_n, units) before
        (25088, 64, 256): ((192, 131, 6), (192, 128, 131)),  # half the columns padding
        (6272, 128, 480): ((96, 132, 10), (64, 128, 98)),  # on_half_rows: 64 x 128
        (3136, 256, 1024): ((96, 132, 10), (64, 128, 98)),
        (39200, 64, 192): ((152, 258, 7), (128, 64, 307)),  # two rounds
        (10669, 192, 256): ((248, 132, 5), (128, 192, 84)),
    }
    for (m, n, k), (want, was) in cases.items():
        cfg, old = GemmConfig.for_problem(m, n, k), before_the_few_columns(m, n, k)
        assert cfg.swap_ab and (cfg.block_m, cfg.schedule) == (64, "cooperative"), (m, n, k)
        assert (cfg.block_n, cfg.num_tiles, cfg.stages) == want, (m, n, k)
        assert (old.block_m, old.block_n, old.num_tiles * old.reduction_parts) == was
        assert busy_share(cfg) >= busy_share(old) + FEW_COLUMNS_MIN_GAIN
        cfg.check()
    # Kept: a near-full round (16384 x 128 x 4096: 128 tiles of 128 x 128, 0.96-0.98x
    # swapped); 2x1 clusters over straddled rows (9248 x 192 x 1000, 0.92x swapped); more
    # than 256 columns; FP8; B as K x N; the caller's tile or swap.
    for m, n, k, options in [(16384, 128, 4096, {}), (9248, 192, 1000, {}),
                             (9248, 320, 768, {}),
                             (9248, 192, 768, {"dtype": "float8_e4m3fn"}),
                             (9248, 192, 768, {"b_layout": "kn"}),
                             (9248, 192, 768, {"block_n": 192}),
                             (9248, 192, 768, {"swap_ab": False}),
                             (9248, 192, 768, {"epilogue_buffers": 2})]:
        cfg = GemmConfig.for_problem(m, n, k, **options)
        assert not cfg.swap_ab, (m, n, k, options)
    assert GemmConfig.for_problem(9248, 192, 1000).cluster == 2
    # swap_ab=True alone asks for the swapped tiling: of few rows, else of few columns.
    assert GemmConfig.for_problem(9248, 192, 768, swap_ab=True) == GemmConfig.for_problem(
        9248, 192, 768)
    forced = GemmConfig.for_problem(9248, 192, 1000, swap_ab=True)
    assert (forced.swap_ab, forced.block_m, forced.block_n, forced.cluster_size) == (
        True, 64, 216, 1)
    # No swapped tiling: M past two rounds of 256-wide column blocks (100352 rows of 64
    # columns), or under 64 a column block (2000 rows of 128: 66 blocks of 32).
    assert few_columns_tiling(GemmConfig(100352, 64, 576)) is None
    assert few_columns_tiling(GemmConfig(2000, 128, 1024)) is None
    assert few_columns_tiling(GemmConfig(2000, 256, 1024, ctas=3)) is None  # 4 row blocks


def test_short_problems_take_the_smallest_plain_tiles_of_one_wave():
    """in_short_wave: a problem of at most SHORT_MAX_STEPS K steps (16-bit, B as N x K)
    whose tiles are in clusters, swapped for few rows, or fewer than those of the first
    plain tiling of SHORT_TILINGS (64 x 64, 64 x 128, 128 x 128, ping-pong 64 x 256) that
    makes one wave on all the SMs, takes that tiling. Measured on the H200 (kernels/tiling/
    short.py, RESULTS.md 6z12)."""
    picked = picker("block_m", "block_n", "schedule", "stages", "epilogue_n", "cluster",
                    "cluster_n", "swap_ab", "ctas", "epilogue_buffers", "num_tiles")
    # 2x2 clusters of 22 tiles of 128 x 128 (on 120 CTAs) before: 63 of 64 x 64 on 132.
    assert before_the_short_wave(131, 1320, 136).cluster_size == 4
    assert picked(131, 1320, 136) == (64, 64, "cooperative", 12, 64, 1, 1, False, 132, 1, 63)
    # 2x1 clusters of 54 tiles of 128 x 128 before: 64 x 64 make 187 (two rounds), so the
    # 102 of 64 x 128.
    assert before_the_short_wave(1074, 688, 40).cluster == 2
    # (Two alternating C stages: 8 ring stages beside them.)
    assert picked(1074, 688, 40) == (64, 128, "cooperative", 8, 64, 1, 1, False, 132, 2, 102)
    # Swapped for few rows (35 tiles of 128 x 240) before: 70 of 128 x 128.
    assert before_the_short_wave(237, 4480, 64).swap_ab
    assert picked(237, 4480, 64) == (128, 128, "cooperative", 5, 64, 1, 1, False, 132, 2,
                                     70)
    # Only 64 x 256 tiles make one wave: 123 of them, ping-pong.
    assert picked(134, 10320, 8) == (64, 256, "pingpong", 5, 64, 1, 1, False, 132, 1, 123)
    # A swap of at most 64 rows on 15 tiles (under a quarter of the CTAs) gives way ...
    assert before_the_short_wave(3, 1912, 24).swap_ab
    assert picked(3, 1912, 24)[:2] == (64, 64)
    # ... but not on 85 (4 x 10832 x 8 ran 0.80x on 64 x 128 tiles), nor the swap for
    # few columns (its 64-row tiles measured on short problems too).
    for problem in [(4, 10832, 8), (6272, 128, 480)]:
        assert GemmConfig.for_problem(*problem).swap_ab
        assert GemmConfig.for_problem(*problem) == before_the_short_wave(*problem)
    # Kept: a plain tiling with as many tiles (468 x 3568 x 32: 112 of 64 x 256 against
    # 112 of 128 x 128); 15 K steps without ordered parts; no tiling of the four in one
    # wave (529 x 6664 x 216: 243 tiles of 64 x 256); FP8; B as K x N; the caller's tile
    # or swap.
    for problem, options in [((468, 3568, 32), {}), ((1191, 608, 928), {}),
                             ((529, 6664, 216), {}), ((131, 1320, 128),
                                                      {"dtype": "float8_e4m3fn"}),
                             ((131, 1320, 136), {"b_layout": "kn"}),
                             ((131, 1320, 136), {"block_n": 128}),
                             ((237, 4480, 64), {"swap_ab": True}),
                             ((237, 4480, 64), {"swap_ab": False})]:
        cfg = GemmConfig.for_problem(*problem, **options)
        assert cfg == before_the_short_wave(*problem, **options), (problem, options)
    assert short_wave(GemmConfig.for_problem(529, 6664, 216), 132) is None
    plain = GemmConfig.for_problem(1191, 608, 928)
    assert plain.k_steps > SHORT_MAX_STEPS and not plain.split_k_ordered
    # Up to 16 K steps where the tiles before run in ordered K parts (SHORT_ORDERED_MAX_
    # STEPS): 167 x 2176 x 672 (11 steps) swapped on 17 tiles of 128 x 168 in 2 parts
    # before, now 102 of 64 x 64 with the whole K each.
    ordered = before_the_short_wave(167, 2176, 672)
    assert (ordered.swap_ab, ordered.split_k, ordered.split_k_ordered) == (True, 2, True)
    assert picked(167, 2176, 672) == (64, 64, "cooperative", 12, 64, 1, 1, False, 132, 1, 102)
    assert GemmConfig.for_problem(167, 2176, 672).k_steps <= SHORT_ORDERED_MAX_STEPS
    # The rule weighs the GPU's SMs, not the 120 CTAs clusters of 4 leave.
    clustered = before_the_short_wave(131, 1320, 136)
    assert clustered.ctas == 120
    assert in_short_wave(clustered, 132).ctas == 132


def test_short_multi_wave_problems_run_pingpong_128_by_128_tiles():
    """in_short_pingpong: where no plain tiling makes one wave, a problem of 4 to 8 K
    steps (16-bit, B as N x K) on cooperative 128 x 192 or 128 x 256 tiles without a
    cluster, swap or K split takes ping-pong 128 x 128 tiles (SHORT_PINGPONG), whose C
    stores run under the other warpgroup's MMAs. Measured on the H200 (RESULTS.md 6z12)."""
    picked = picker("block_m", "block_n", "schedule", "stages", "epilogue_n", "cluster",
                    "num_tiles")
    for problem, tiles in [((2048, 8192, 256), 1024), ((4096, 4096, 512), 1024),
                           ((13663, 2872, 288), 2461), ((6000, 3000, 384), 1128)]:
        before = before_the_short_wave(*problem)
        assert (before.schedule, before.block_m, before.cluster) == ("cooperative", 128, 1)
        assert before.block_n in (192, 256) and before.num_tiles > before.ctas
        assert picked(*problem) == (128, 128, "pingpong", 5, 64, 1, tiles), problem
        assert GemmConfig.for_problem(*problem).k_steps in SHORT_PINGPONG_STEPS
    # Kept: 3, 9 and 16 K steps; 2x1 clusters (straddled rows: 9316 x 10416 x 264 ran 0.64x
    # on ping-pong tiles); one wave (455 x 6640 x 976: 104 tiles); FP8; the caller's tile.
    for problem, options in [((4096, 2048, 192), {}), ((9301, 704, 544), {}),
                             ((8192, 2048, 1024), {}),
                             ((9316, 10416, 264), {}), ((455, 6640, 976), {}),
                             ((4096, 4096, 512), {"dtype": "float8_e4m3fn"}),
                             ((4096, 4096, 512), {"block_n": 256})]:
        cfg = GemmConfig.for_problem(*problem, **options)
        assert cfg == before_the_short_wave(*problem, **options), (problem, options)
        assert cfg.schedule == "cooperative", (problem, options)
    assert GemmConfig.for_problem(9316, 10416, 264).cluster == 2


def test_a_k_of_at_most_32_takes_one_k_block_as_narrow():
    """``fitted_k_block``: one block of 16 or 32 where K fits it, else 64; ``for_problem``
    takes it for 16-bit inputs with B as N x K unless the caller chose the block or 256-row
    tiles."""
    ks = (1, 8, 16, 17, 24, 32, 33, 40, 64, 80, 216, 4096)
    assert [fitted_k_block(k) for k in ks] == [16, 16, 16, 32, 32, 32, 64, 64, 64, 64, 64, 64]
    short = GemmConfig.for_problem(303, 8680, 8)
    assert (short.block_k, short.k_steps) == (16, 1)
    assert GemmConfig.for_problem(281, 3496, 24).block_k == 32
    assert GemmConfig.for_problem(529, 6664, 216).block_k == 64
    assert GemmConfig.for_problem(303, 8680, 8, block_k=64).block_k == 64
    assert GemmConfig.for_problem(303, 8680, 8, block_m=256).block_k == 64
    assert GemmConfig.for_problem(303, 8680, 8, b_layout="kn").block_k == 64
    assert GemmConfig.for_problem(303, 8680, 16, dtype="float8_e4m3fn").block_k == 128
    assert GemmConfig.for_problem(4096, 4096, 4096).block_k == 64


def test_one_k_step_in_two_rounds_of_clusters_takes_pingpong_tiles():
    """``in_one_step_pingpong``: 64 x 256 ping-pong tiles on a K block of 16 or 32, 128 x
    128 ones on 64, where the default's 2x1 clusters take two rounds and the 64 x 256 tiles
    fit one round of warpgroups; one round of clusters, or more K steps, stay."""
    wide = GemmConfig.for_problem(303, 8680, 8)
    assert (wide.schedule, wide.block_m, wide.block_n, wide.block_k, wide.cluster) == (
        "pingpong", 64, 256, 16, 1)
    square = GemmConfig.for_problem(770, 4928, 56)
    assert (square.schedule, square.block_m, square.block_n, square.block_k) == (
        "pingpong", 128, 128, 64)
    clustered = before_the_short_wave(770, 4928, 56)
    assert clustered.cluster == 2 and clustered.work_units > clustered.workers
    assert in_one_step_pingpong(clustered, 132) == square
    one_round = GemmConfig.for_problem(2756, 824, 24)  # 132 tiles in 66 clusters
    assert one_round.cluster == 2 and in_one_step_pingpong(one_round, 132) == one_round
    # 64 x 256 tiles past two a CTA (765 x 9200: 432) keep the clusters.
    many = GemmConfig.for_problem(765, 9200, 8)
    assert many.cluster == 2 and many.schedule == "cooperative"
    # Two K steps keep the clusters.
    assert in_one_step_pingpong(replace(clustered, k=100), 132).cluster == 2
