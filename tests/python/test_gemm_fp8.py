"""The GEMM with FP8 inputs (e4m3 / e5m2 A and B, per-tensor scales, bf16 C): its
configuration rules, the k32 wgmma and the 1-byte TMA descriptors in the generated code,
sm_90a assembly, the reference and its bound, and (on a Hopper GPU) every element of C
against the scaled fp32 reference."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from gemm_kernels import built_fixture, explained_gemm, mainloop_step_copies, parsed_gemm
from plan_fields import plan_fields

import tvm_tma
from tvm_tma.kernels.fp8_reference import (
    EXACT_LIMIT,
    accumulation_terms,
    fp8_random,
    scaled_reference,
)
from tvm_tma.kernels.gemm import gemm_kernel
from tvm_tma.kernels.gemm_config import MAX_SHARED, GemmConfig
from tvm_tma.kernels.reference import error_bound, expected_output, fp8_error_bound, run
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
E4, E5 = "float8_e4m3fn", "float8_e5m2"
PTX = {E4: "e4m3", E5: "e5m2"}

#: The issue's shapes, for both FP8 types, with the default tiling: M = 1, M = 77 (no
#: multiple of 8) with ragged N and K (520 = 2 x 256 + 8, 272 = 2 x 128 + 16), a skinny
#: problem (16 rows: C^T = B A^T on 32 tiles of 128 x 16 in 4 ordered K parts), a ragged
#: one (2x1 clusters multicasting B, K = 23.6 K blocks: 3024-byte rows straddle 32-byte
#: sectors) and a multi-wave one (512 tiles on 132 CTAs).
SHAPES = {"m1": (1, 256, 256), "m77-ragged-nk": (77, 520, 272), "skinny": (16, 4096, 4096),
          "ragged": (1000, 2000, 3024), "multiwave": (4096, 4096, 1024)}
DEFAULT_CASES = [GemmConfig.for_problem(*shape, dtype=dtype)
                 for shape in SHAPES.values() for dtype in (E4, E5)]
#: The kernel's other paths with FP8 inputs, and the two mixes torch._scaled_mm takes.
FEATURE_CASES = [
    GemmConfig(77, 520, 272, dtype=E4, b_dtype=E5),
    GemmConfig(264, 520, 400, dtype=E5, b_dtype=E4, ctas=3),
    # Stream-K: many tiles per run, and 2x1 clusters (odd row blocks, B multicast) with
    # whole tiles before the runs.
    GemmConfig(520, 648, 1008, dtype=E4, stream_k=True, ctas=7),
    GemmConfig(300, 264, 2048, dtype=E5, block_n=128, stages=6, epilogue_n=0, cluster=2,
               stream_k=True, ctas=8),
    # Split-K: 8 K blocks in 3 parts (a short last one), bf16 reduce-adds of scaled parts.
    GemmConfig(256, 264, 1024, dtype=E5, b_dtype=E4, split_k=3, ctas=7),
    # Ordered split-K (part 0 stores the scaled bf16 part, the other adds after it).
    GemmConfig(264, 520, 1024, dtype=E4, split_k=2, split_k_ordered=True, ctas=8),
    # Ping-pong: whole 128 x 128 tiles in turns (two 64-row A sub-tiles per MMA step), and
    # 64-row tiles.
    GemmConfig(520, 648, 1008, dtype=E4, block_n=128, stages=6, epilogue_n=64,
               schedule="pingpong", ctas=5),
    GemmConfig(200, 520, 144, dtype=E4, block_m=64, stages=4, schedule="pingpong", ctas=3),
    # 160-wide tiles: C staged 32 columns at a time (64B swizzle).
    GemmConfig(200, 320, 144, dtype=E5, block_n=160, epilogue_n=32, stages=5),
    # The default 128 x 192 tiles of a problem whose 128 x 256 ones leave a wave a quarter
    # empty (C in two alternating 64-column stages, 4 ring stages:
    # tiling.with_alternating_c_stages).
    GemmConfig.for_problem(768, 4096, 1024, dtype=E4),
    GemmConfig(520, 648, 1008, dtype=E5, stream_k=True, stream_k_waves=2, ctas=9),
    # The tail split: 3 waves of 20, 4 tiles left over in 3 ordered parts of 24 ragged K
    # blocks (8 each), scaled bf16 part 0 stored, the others added after it.
    GemmConfig(1000, 2000, 3008, dtype=E4, tail_split=3, ctas=20),
    # C^T = B A^T (swap_ab): the mix's types swap slots (wgmma .e5m2.e4m3 for e4m3 A and
    # e5m2 B), 20 rows on 24-wide tiles in 2 ordered parts, C in two 8-row stages; 1 row.
    GemmConfig(20, 1000, 1024, dtype=E4, b_dtype=E5, swap_ab=True, block_n=24,
               epilogue_n=8, epilogue_buffers=2, split_k=2, split_k_ordered=True, stages=6,
               ctas=16),
    GemmConfig(1, 520, 2048, dtype=E5, swap_ab=True, block_n=8, epilogue_n=0, stages=8,
               ctas=3),
]
CASES = DEFAULT_CASES + FEATURE_CASES


def _name(cfg: GemmConfig) -> str:
    a, b = (PTX[t] for t in cfg.input_dtypes)
    return (f"{cfg.m}x{cfg.n}x{cfg.k}-{a}x{b}-bm{cfg.block_m}-bn{cfg.block_n}-s{cfg.stages}"
            f"-e{cfg.epilogue_cols}-c{cfg.ctas}-{cfg.schedule}-x{cfg.cluster}-k{cfg.split_k}"
            f"{'-sk' if cfg.stream_k else ''}{'2' if cfg.stream_k_waves == 2 else ''}"
            f"{'-ordered' if cfg.split_k_ordered else ''}"
            f"{f'-tail{cfg.tail_split}' if cfg.tail_split > 1 else ''}"
            f"{'-swap' if cfg.swap_ab else ''}")


# ---------------------------------------------------------------------------------------
# Configuration


def test_fp8_config_sizes_and_types():
    """1-byte A and B, 2-byte C: an FP8 tile holds twice the K of a 16-bit one in the same
    bytes (128-byte rows), and the C stage is bf16."""
    cfg = GemmConfig(256, 512, 256, dtype=E4)
    assert (cfg.fp8, cfg.input_dtypes, cfg.out_dtype) == (True, (E4, E4), "bfloat16")
    assert (cfg.block_k, cfg.element_bytes, cfg.out_bytes) == (128, 1, 2)
    assert (cfg.a_tile_bytes, cfg.b_tile_bytes, cfg.c_tile_bytes) == (16384, 32768, 32768)
    # Barriers, 4 x (A + B), one 128 x 128 bf16 C stage.
    assert cfg.shared_bytes == 1024 + 4 * 49152 + 32768 == 230400
    mixed = GemmConfig(256, 512, 256, dtype=E5, b_dtype=E4)
    assert mixed.input_dtypes == (E5, E4) and mixed.out_dtype == "bfloat16"
    # 16-bit configurations are unchanged: block_k 64, C in the input type.
    plain = GemmConfig(256, 512, 256, dtype="float16")
    assert (plain.fp8, plain.input_dtypes, plain.out_dtype) == (
        False, ("float16", "float16"), "float16")
    assert (plain.block_k, plain.element_bytes, plain.out_bytes) == (64, 2, 2)
    assert plain.shared_bytes == cfg.shared_bytes
    assert GemmConfig(256, 512, 256, block_k=32).block_k == 32


@pytest.mark.parametrize("bad, rule", [
    (dict(b_layout="kn"), "b_layout='kn' with FP8 inputs: wgmma reads 8-bit operands "
                          "K-major only (B as N x K, 'nk')"),
    (dict(k=264), "k=264: FP8 K must be a positive multiple of 16 (rows of K one-byte "
                  "elements are 16-byte multiples for TMA)"),
    (dict(k=8), "k=8: FP8 K must be a positive multiple of 16"),
    (dict(block_k=64), "block_k=64: FP8 takes 128 (one 128-byte row of the 128B swizzle, "
                       "four k32 MMA steps)"),
    (dict(block_k=256), "block_k=256: FP8 takes 128"),
    (dict(b_dtype="bfloat16"), "b_dtype='bfloat16' with dtype='float8_e4m3fn': FP8 A takes "
                               "an FP8 B, 'float8_e4m3fn' or 'float8_e5m2'"),
    (dict(n=1004), "n=1004: N and K must be positive multiples of 8"),
    (dict(stages=5), "5 stages of 128x256x128 tiles need 279552 bytes of shared memory "
                     "(> 232448)"),
    (dict(dtype="float8_e4m3fnuz"), "dtype='float8_e4m3fnuz': 'bfloat16' or 'float16', or "
                                    "FP8 'float8_e4m3fn' or 'float8_e5m2'"),
])
def test_fp8_refuses_configurations_it_cannot_run(bad, rule):
    params = dict(m=256, n=256, k=256, dtype=E4) | bad
    with pytest.raises(ValueError, match=re.escape(rule)):
        gemm_kernel(GemmConfig(**params))


def test_sixteen_bit_inputs_refuse_a_second_type():
    with pytest.raises(ValueError, match=re.escape(
            "b_dtype='float8_e4m3fn' with dtype='bfloat16': 16-bit A and B have one type "
            "(b_dtype is for FP8 mixes)")):
        GemmConfig(256, 256, 256, b_dtype=E4).check()
    GemmConfig(256, 256, 256, b_dtype="bfloat16").check()  # the same type, spelled out


@pytest.mark.parametrize("dtype", [E4, E5])
def test_fp8_default_tiling(dtype):
    """The 16-bit defaults with K blocks of 128 (same slot bytes): the most stages that fit
    beside the C stage, and the same wave rules for the tail split and the narrow tiles."""
    square = GemmConfig.for_problem(8192, 8192, 8192, dtype=dtype)
    assert (square.block_m, square.block_n, square.block_k, square.stages,
            square.epilogue_cols, square.cluster, square.stream_k) == (
                128, 256, 128, 4, 128, 1, False)
    ragged = GemmConfig.for_problem(1000, 2000, 3024, dtype=dtype)
    assert (ragged.block_n, ragged.block_k, ragged.stages, ragged.epilogue_cols,
            ragged.cluster) == (128, 128, 6, 128, 2)
    # Rows of whole 32-byte sectors (3008 bytes) share nothing (tiling.pairs_share_b).
    assert GemmConfig.for_problem(1000, 2000, 3008, dtype=dtype).cluster == 1
    # The tiles left over in ordered K parts, as for bf16: 16 tiles of 128 x 192 past two
    # waves, 80 K blocks of 128 in 8 parts; a last wave 88% full (4096^3) stays whole.
    long_k = GemmConfig.for_problem(2560, 2560, 10240, dtype=dtype)
    assert (long_k.block_n, long_k.tail_split, long_k.stream_k) == (192, 8, False)
    assert GemmConfig.for_problem(4096, 4096, 4096, dtype=dtype).tail_split == 1
    for cfg in (square, ragged):
        assert cfg.shared_bytes <= MAX_SHARED < replace(cfg, stages=cfg.stages + 1).shared_bytes
    mixed = GemmConfig.for_problem(8192, 8192, 8192, dtype=E4, b_dtype=E5)
    assert mixed.input_dtypes == (E4, E5) and mixed.block_k == 128


# ---------------------------------------------------------------------------------------
# Generated code


built = built_fixture(CASES, _name)


def test_fp8_gemm_assembles_for_sm90a(built):
    _, kernel = built
    assert len(assemble(kernel.cuda_source)) > 0


def test_fp8_mma_is_k32_on_both_types_with_no_transpose(built):
    """One wgmma form, m64n{block_n}k32 with A's and B's PTX types and only the two scale
    immediates (the 8-bit forms have no transpose); per K step of each mainloop, four
    MMAs per 64-row A sub-tile, each 32 bytes (2 in the descriptor's 16-byte units) further
    along the 128-byte row, the next sub-tile 64 rows (512 units) down."""
    cfg, kernel = built
    src = kernel.cuda_source
    # (The MMAs' slots: B's type first where the kernel computes C^T = B A^T.)
    a_type, b_type = (PTX[t] for t in cfg.mma_dtypes)
    forms = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(\w+)\.f32\.(\w+)\.(\w+) "
                       r"\{[^}]*\}, %\d+, %\d+, ps0, ([^;]*); \}", src)
    assert set(forms) == {(f"m64n{cfg.block_n}k32", a_type, b_type, "1, 1")}
    assert "k16" not in src
    calls = re.findall(r"tvm_builtin_ptx_wgmma_fp8_ss_\w+\(acc_ptr\[(\d+)\], [^;]*?"
                       r"(desc_a_ptr\[0\]|\(desc_a_ptr\[0\] \+ \(uint64_t\)\d+ULL\)), "
                       r"(desc_b_ptr\[0\]|\(desc_b_ptr\[0\] \+ \(uint64_t\)\d+ULL\)), "
                       r"(\(0 < ks_\d+\)|\(bool\)[01])\);", src)

    def offset(text: str) -> int:
        found = re.search(r"\(uint64_t\)(\d+)ULL", text)
        return int(found.group(1)) if found else 0

    # A mainloop is one step's MMAs in a loop, or (unrolled: wgmma.k_loop) each step's in
    # turn; either way every step is this pattern, in this order.
    step = [(mi * cfg.block_n // 2, mi * 512 + 2 * kk, 2 * kk)
            for kk in range(4) for mi in range(cfg.consumer_rows // 64)]
    assert calls and len(calls) % len(step) == 0
    steps = [calls[i:i + len(step)] for i in range(0, len(calls), len(step))]
    for mmas in steps:
        assert [(int(acc), offset(a), offset(b)) for acc, a, b, _ in mmas] == step
        # Only a step's first k32 MMAs may overwrite (scale-d 0) the accumulators.
        assert all(pred == "(bool)1" for *_, pred in mmas[cfg.consumer_rows // 64:])
    # Each mainloop overwrites them at its first step only: the rolled loop's "0 < ks"
    # step, or the unrolled loop's first, written out (bool)0.
    firsts = [mmas[0][3] for mmas in steps if mmas[0][3] != "(bool)1"]
    assert len(firsts) == len(mainloop_step_copies(cfg))


def test_fp8_descriptors_and_tma_maps(built):
    """Both wgmma descriptors are K-major 128-byte rows in 8-row 1024-byte atoms (leading
    offset 1, stride 64 in 16-byte units, 128B swizzle); the A and B loads are UINT8 tensor
    maps of K-long rows (K bytes apart) with 128-element (128-byte) inner boxes and the
    128B swizzle, landing in shared memory typed as the FP8 types; the C store is the bf16
    map the 16-bit kernel of the same tiling has."""
    cfg, kernel = built
    src = kernel.cuda_source
    descriptors = re.findall(r"ptx_wgmma_encode_matrix_descriptor\(\(&\(desc_(\w)_ptr\[0\]\)\)"
                             r", .*, (\d+), (\d+), (\d+)\);", src)
    assert {(name, *map(int, fields)) for name, *fields in descriptors} == {
        ("a", 1, 64, 3), ("b", 1, 64, 3)}
    loads = re.findall(r"tvm_tma_load_\w+\(\(&\(\(\(__nv_fp8_(e4m3|e5m2)\*\)dyn_ptr\)", src)
    a_type, b_type = (PTX[t] for t in cfg.mma_dtypes)
    assert loads[:2] == [a_type, b_type] and len(loads) == 2 * sum(mainloop_step_copies(cfg))
    assert f"(uint){cfg.a_tile_bytes + cfg.b_tile_bytes})" in src
    copies = explained_gemm(cfg).copies
    a_map, b_map = copies[0].plan.tensor_map, copies[1].plan.tensor_map
    # The MMAs' A slot loads the product's rows (B's with swap_ab), the B slot its columns.
    rows, columns = cfg.product_m, cfg.product_n
    if rows > 1:  # one row: the planner gives the unit dim stride 0
        assert (a_map.dtype, a_map.global_dims, a_map.global_strides, a_map.box_dims) == (
            "uint8", (cfg.k, rows), (cfg.k,), (128, cfg.block_m))
    if columns > 1:
        assert (b_map.dtype, b_map.global_dims, b_map.global_strides, b_map.box_dims) == (
            "uint8", (cfg.k, columns), (cfg.k,), (128, cfg.block_n // cfg.cluster))
    promotion = {128: 2, 256: 3}[cfg.l2_promotion]  # CU_TENSOR_MAP_L2_PROMOTION_L2_128B/256B
    for tensor_map in (a_map, b_map):
        assert (tensor_map.element_strides, tensor_map.swizzle, tensor_map.interleave,
                tensor_map.l2_promotion, tensor_map.oob_fill) == ((1, 1), 3, 0, promotion, 0)
    sixteen = replace(cfg, dtype="bfloat16", b_dtype=None, block_k=64)
    same_store = tvm_tma.explain(gemm_kernel(sixteen)).copies[-1].plan
    assert plan_fields(copies[-1].plan) == plan_fields(same_store)


def test_fp8_runtime_accepts_the_maps_as_uint8():
    """The C++ runtime takes the A and B maps' fields as planned (UINT8 elements, 128-byte
    swizzled inner boxes), and the host passes "uint8" for them."""
    import tvm_ffi

    from tvm_tma import _runtime

    _runtime.load_runtime()
    validate_tiled = tvm_ffi.get_global_func("tvm_tma.validate_tiled")
    cfg = GemmConfig(1000, 2000, 3008, dtype=E4, b_dtype=E5, ctas=8)
    built = compile_kernel(parsed_gemm(cfg))
    assert '"uint8' in built.host_source
    for copy in explained_gemm(cfg).copies[:2]:
        spec = copy.plan.tensor_map
        validate_tiled(spec.dtype, spec.rank, 0x10000, *spec.global_dims,
                       *spec.global_strides, *spec.box_dims, *spec.element_strides,
                       spec.interleave, spec.swizzle, spec.l2_promotion, spec.oob_fill)


def test_fp8_epilogue_scales_every_accumulator_once(built):
    """The consumers read ``scale_a * scale_b`` once (after taking their registers, before
    their first MMA) and every accumulator goes to the bf16 C stage times it; the kernel
    takes the scales after C (the host signature)."""
    cfg, kernel = built
    src = kernel.cuda_source
    read = "scale_ptr[0] = (scale_a_ptr[0] * scale_b_ptr[0]);"
    assert src.count(read) == 1
    consumer = src.index("tvm_builtin_ptx_setmaxnreg_inc_sync_aligned_u32_232();")
    assert consumer < src.index(read) < src.index("tvm_builtin_ptx_wgmma_fp8_ss_", consumer)
    # Rounded two at a time (cvt.rn.bf16x2.f32: the higher column first), each scaled.
    pairs = re.findall(r"cvt_bf16x2_f32_rn_bf16x2_f32\(words_ptr\w*\[\d\], \(acc_ptr\[(\d+)\] "
                       r"\* scale_ptr\[0\]\), \(acc_ptr\[(\d+)\] \* scale_ptr\[0\]\)\);", src)
    rounded = Counter(int(i) for pair in pairs for i in pair)  # once per epilogue site
    assert set(rounded) == set(range(cfg.accumulators)) and len(set(rounded.values())) == 1
    assert all(int(high) == int(low) + 1 for high, low in pairs)
    assert src.count("cvt_bf16x2_f32_rn_bf16x2_f32(") == len(pairs) + 1  # + its definition
    a, b = cfg.input_dtypes
    tail = (f", partials: Tensor([{cfg.ctas}, {cfg.partial_floats}], float32), flags: "
            f"Tensor([{cfg.ctas}], int32)" if cfg.stream_k else
            f", flags: Tensor([{cfg.order_flags}], int32)" if cfg.order_waits else "")
    b_rows = f"[{cfg.n}, {cfg.k}]"
    assert (f'c"gemm(A: Tensor([{cfg.m}, {cfg.k}], {a}), B: Tensor({b_rows}, {b}), '
            f'C: Tensor([{cfg.m}, {cfg.n}], bfloat16), scale_a: Tensor([1], float32), '
            f'scale_b: Tensor([1], float32){tail})\\00"') in kernel.host_source


def test_sixteen_bit_kernels_read_no_scale():
    src = compile_kernel(gemm_kernel(GemmConfig(256, 512, 256))).cuda_source
    assert "scale_a" not in src and "scale_ptr" not in src and "wgmma_fp8" not in src


def test_benchmark_compile_only_assembles_fp8_kernels(capsys):
    """``benchmarks/gemm.py --compile-only --dtype <fp8>``: every FP8 kernel of the run
    (B as N x K only), a mix through --b-dtype; --b-layout kn is refused for FP8."""
    benchmark = load_script(REPO / "benchmarks" / "gemm.py", "gemm_benchmark_fp8")
    assert benchmark.main(["--compile-only", "--dtype", E4, "--problem", "8192x8192x8192",
                           "--problem", "1000x2000x3024"]) == 0
    out = capsys.readouterr().out
    assert "2 kernels assembled" in out
    assert ("1000x2000x3024 float8_e4m3fn nk cooperative 128x128 block_k=128 stages=6 "
            "cluster=2") in out
    assert benchmark.main(["--compile-only", "--dtype", E5, "--b-dtype", E4,
                           "--problem", "77x520x272"]) == 0
    assert "77x520x272 float8_e5m2xfloat8_e4m3fn nk" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        benchmark.main(["--compile-only", "--dtype", E4, "--b-layout", "kn"])
    assert "FP8 B is N x K" in capsys.readouterr().err


def test_example_builds_an_fp8_kernel(capsys):
    """``examples/gemm_hopper.py --dtype float8_e5m2``: built and assembled (and on a Hopper
    GPU, run and checked)."""
    example = load_script(REPO / "examples" / "gemm_hopper.py", "gemm_example_fp8")
    assert example.main(["--dtype", E5]) == 0
    out = capsys.readouterr().out
    assert "k=3008, dtype='float8_e5m2'" in out and "bytes of sm_90a cubin" in out


# ---------------------------------------------------------------------------------------
# Reference and bound (no GPU)


def test_exact_inputs_accumulate_exactly_and_the_bound_is_the_rounding():
    """Exact inputs: signed 0.5 .. 2 in both formats, every partial sum on the 1/4 grid
    below 2^11 (checked), so the bound is the bf16 rounding of the scaled reference
    alone; a C 2% off at its largest element, or missing one K block's contribution,
    falls outside it."""
    rng = np.random.default_rng(0)
    cfg = GemmConfig(77, 520, 4608, dtype=E4, b_dtype=E5)
    a = fp8_random(rng, (cfg.m, cfg.k), E4)
    b = fp8_random(rng, (cfg.n, cfg.k), E5)
    assert set(np.unique(np.abs(a.astype(np.float32)))) == {0.5, 1.0, 1.5, 2.0}
    assert set(np.unique(np.abs(b.astype(np.float32)))) == {0.5, 1.0, 1.5, 2.0}
    peak, _ = accumulation_terms(a.astype(np.float32), b.astype(np.float32).T)
    assert 0 < peak < EXACT_LIMIT
    scales = (np.float32(1.25), np.float32(0.75))
    ref, bound = expected_output(cfg, a, b, None, scales, exact=True)
    assert np.array_equal(bound, fp8_error_bound(*scaled_reference(a, b, *scales), cfg.k))
    assert np.allclose(bound, 2 * 2.0**-8 * np.abs(ref) + 2.0**-22 * scaled_reference(
        a, b, *scales)[1] + 1e-6, rtol=1e-6)
    c = ref.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert (np.abs(c - ref) <= bound).all()
    worst = np.unravel_index(np.argmax(np.abs(ref)), ref.shape)
    off = c.copy()
    off[worst] *= 1.02  # 2% off: the rounding is at most 2^-9, the bound 2^-7
    assert not (np.abs(off - ref) <= bound).all()
    a_short = a.astype(np.float32)
    a_short[:, :128] = 0  # one K block left out
    short = (a_short @ b.astype(np.float32).T) * scales[0] * scales[1]
    assert not (np.abs(short - ref) <= bound).all()


def test_exact_inputs_refuse_sums_too_large_to_be_exact():
    rng = np.random.default_rng(0)
    cfg = GemmConfig(8, 8, 8192, dtype=E4)
    a = np.full((cfg.m, cfg.k), 2.0, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)
    b = fp8_random(rng, (cfg.n, cfg.k), E4)
    b = np.abs(b.astype(np.float32)).astype(b.dtype)  # every product positive: sums grow
    with pytest.raises(ValueError, match="inputs not exactly accumulable: a partial sum "
                                         "reaches"):
        expected_output(cfg, a, b, None, (np.float32(1), np.float32(1)), exact=True)


def test_accumulation_term_follows_the_prefix_sums():
    """The accumulation term is ``2^-12 sum_s (|P_{s-1}| + max_{t<s} |P_t| +
    |A_s| @ |B_s|)`` over the k32 instructions: worked out for one element."""
    a = np.array([[1.0] * 32 + [-1.0] * 32 + [2.0] * 16], dtype=np.float32)
    b = np.ones((80, 1), dtype=np.float32)
    peak, bound = accumulation_terms(a, b)
    # Prefix sums after each instruction: 32, 0, 32; instruction magnitudes 32, 32, 32.
    assert peak == 32.0
    assert bound[0, 0] == 2.0**-12 * ((0 + 0 + 32) + (32 + 32 + 32) + (0 + 32 + 32))


def test_fp8_bound_for_normal_inputs_takes_accumulation_and_summation():
    rng = np.random.default_rng(1)
    cfg = GemmConfig(64, 128, 1024, dtype=E4)
    a = fp8_random(rng, (cfg.m, cfg.k), E4, "normal")
    b = fp8_random(rng, (cfg.n, cfg.k), E4, "normal")
    scales = (np.float32(1.5), np.float32(0.625))
    ref, bound = expected_output(cfg, a, b, None, scales, exact=False)
    ref2, magnitude = scaled_reference(a, b, *scales)
    _, accumulation = accumulation_terms(a.astype(np.float32), b.astype(np.float32).T)
    rounding = error_bound(ref2, magnitude, cfg.k, "bfloat16")
    assert np.array_equal(ref, ref2)
    assert np.allclose(bound, rounding + 2.0**-22 * magnitude
                       + np.float32(scales[0] * scales[1]) * accumulation, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# On the GPU


def _check(c: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> None:
    assert np.isfinite(c).all(), "elements left unwritten (NaN poison survived)"
    error = np.abs(c - ref)
    worst = np.unravel_index(np.argmax(error / bound), error.shape)
    assert (error <= bound).all(), (
        f"C{list(worst)} = {c[worst]} vs {ref[worst]} (bound {bound[worst]})")


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CASES, ids=_name)
def test_fp8_gemm_matches_numpy_on_the_gpu(cfg):
    """Exactly accumulable inputs, scales in [0.5, 2), NaN-poisoned C: every element is
    the scaled reference rounded to bf16 (within its rounding)."""
    _check(*run(cfg, seed=cfg.m + cfg.n + cfg.k))


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [
    GemmConfig.for_problem(77, 520, 4096, dtype=E4),
    GemmConfig.for_problem(1000, 2000, 3008, dtype=E5, b_dtype=E4),
    GemmConfig(520, 648, 4096, dtype=E4, stream_k=True, ctas=7),
], ids=_name)
def test_fp8_gemm_within_the_accumulation_bound_on_normal_inputs(cfg):
    """Normal-distributed inputs: the tensor core's 13-fraction-bit accumulation is the
    bound's large term (fp8_reference.accumulation_terms); this checks that model of the
    hardware on the hardware."""
    _check(*run(cfg, seed=cfg.m + cfg.n + cfg.k, fp8_values="normal"))
