"""The implicit-GEMM conv2d of tvm_tma.kernels.conv2d (TMA im2col loads, WGMMA) against cuDNN.

Every layer is first checked, every output element, against ``torch.nn.functional.conv2d``
within the bound below; then the TMA kernel and cuDNN (``torch.nn.functional.conv2d`` on
channels_last bf16 tensors, ``torch.backends.cudnn.benchmark = True``, warmed up) are timed
in the same run, the same way: ``--launches`` back-to-back launches captured in a CUDA
graph, whose replay is timed between two CUDA events, the best of ``--repetitions``
replays (ms per launch), after 300 ms of replays that let the clock settle under the
power cap (``tvm_tma.testing.timing``); beside it the same launches issued back to back
from the host ("host"), and the median of ``--runs`` launches each timed with its own pair
of events. The graph keeps host launch cost out of both: torch's dispatcher and cuDNN's host code
take longer per convolution than cuDNN's kernel takes on the small layers (ResNet 7x7x512:
a 17-18 us kernel timed at 28 us from the host on an H100), which flattered the TMA kernel
by up to 1.6x before. TFLOP/s count 2 * N*P*Q * K * R*S*C flops (the padding's zero
products included, as cuDNN's counts are); "x cuDNN" is the TMA kernel's rate over
cuDNN's, both from graph replays.

``--compile-only`` builds and assembles every kernel for sm_90a (no GPU, no torch);
``--sweep`` times a few tilings per layer (tile width, ping-pong against cooperative
warpgroups, 2x1 clusters multicasting the filter, 1x2 and 1x4 clusters multicasting the
activation on narrow tiles, 64- and 192-row tiles, one ring stage fewer, stream-K,
ordered split-K, the tiles past the last full wave in ordered K parts);
``--block-m``, ``--block-n``, ``--block-k``, ``--stages``, ``--epilogue-n``,
``--schedule``, ``--cluster``, ``--cluster-n``, ``--stream-k``, ``--split-k`` and
``--ctas`` set one tiling;
``--problem N,H,W,C,K,R,S,stride,pad`` replaces the default layers (repeatable);
``--halo-k folded|padded|both`` times a layer on halo tiles in those K layouts of its
default tiling, ``--against-im2col`` such a layer on the im2col loads too;
``--variant 'key=value;...'`` (repeatable) times each layer with those GemmConfig options
too, after its default in the same run (``stream_k=true``, ``halo=false``, ...);
``--dump-cuda DIR`` writes each kernel's CUDA source; ``--json FILE`` the rows.

Correctness bound (``tvm_tma.kernels.conv2d.conv2d_error_bound``, the GEMM's): Y is rounded
to bf16/fp16 from an fp32 accumulation of R*S*C products, so each element may differ from
the exact convolution by its own rounding (2^-8 relative for bf16, 2^-11 for fp16) plus
the difference between two fp32 summation orders, at most about R*S*C * 2^-24 of the sum of
|products|; the check is ``|Y - ref| <= 2 * eps_out * |ref| + 2 * R*S*C * 2^-24 *
conv(|X|, |F|) + 1e-6`` for every element. The reference ``ref`` and ``conv(|X|, |F|)``
are ``torch.nn.functional.conv2d`` of the same bf16 inputs in float64 (an fp32 cuDNN
convolution may run in TF32, or through Winograd or FFT, whose errors the bound does not
model; float64 leaves only the kernel's error to the bound).

Default layers (cuDNN on an H100, TFLOP/s, as the issue's author measured it, in the
"issue cuDNN" column): the ResNet-50 3x3 layers at batch 32, the UNet 3x3 ones at batch 8,
a VAE decoder 3x3 at batch 1, and ResNet-50's stride-2 3x3; all 3x3 with padding 1.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import tvm

import tvm_tma  # noqa: F401  (registers dispatch="tma")
from tvm_tma.conv import Conv2dGeometry
from tvm_tma.kernels.conv2d import (
    DTYPES,
    conv2d_config,
    conv2d_error_bound,
    conv2d_kernel,
)
from tvm_tma.kernels.conv2d_tiling import STORE_BOUND_STAGES, with_halo_k
from tvm_tma.kernels.gemm_config import GemmConfig
from tvm_tma.kernels.stream_k import check_workspace_left_clean, workspace
from tvm_tma.kernels.tiling import exact_wave, in_tail_parts
from tvm_tma.testing.runner import assemble, compile_kernel
from tvm_tma.testing.timing import kernel_times


def _layer(n, hw, c, k, stride=1):
    return Conv2dGeometry(n, hw, hw, c, k, 3, 3, stride=(stride, stride), padding=(1, 1))


#: (name, geometry, cuDNN TFLOP/s on an H100 as measured by the issue's author).
PROBLEMS = [
    ("resnet50-56x56x64", _layer(32, 56, 64, 64), 280),
    ("resnet50-28x28x128", _layer(32, 28, 128, 128), 326),
    ("resnet50-14x14x256", _layer(32, 14, 256, 256), 308),
    ("resnet50-7x7x512", _layer(32, 7, 512, 512), 297),
    ("unet-64x64x320", _layer(8, 64, 320, 320), 636),
    ("unet-32x32x640", _layer(8, 32, 640, 640), 628),
    ("vae-256x256x256", _layer(1, 256, 256, 256), 729),
    ("resnet50-56x56x128-stride2", _layer(32, 56, 128, 128, stride=2), 310),
]

#: The sweep's tilings: (block_n, schedule, (cluster, cluster_n)); conv2d_config fills in
#: the C stage and the ring depth, and refuses what does not fit (ping-pong takes tiles up
#: to 128 wide). Clusters along N (sharing A) for the narrow tiles, where A is most of a
#: K step's bytes.
SWEEP = [(block_n, schedule, shape) for block_n in (64, 128, 160, 192, 256)
         for schedule in ("cooperative", "pingpong")
         for shape in ((1, 1), (2, 1)) + (((1, 2), (1, 4)) if block_n <= 128 else ())]


def parse_problem(text: str) -> tuple[str, Conv2dGeometry, None]:
    """``N,H,W,C,K,R,S,stride,pad`` (stride and padding apply to both H and W)."""
    values = [int(v) for v in text.split(",")]
    if len(values) != 9:
        raise argparse.ArgumentTypeError(f"{text!r}: N,H,W,C,K,R,S,stride,pad (9 integers)")
    n, h, w, c, k, r, s, stride, pad = values
    try:
        geometry = Conv2dGeometry(n, h, w, c, k, r, s, stride=(stride, stride),
                                  padding=(pad, pad))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
    return f"{n}x{h}x{w}x{c}-k{k}-{r}x{s}-s{stride}-p{pad}", geometry, None


#: ``--halo-k``: the K layouts a layer on halo tiles is timed in (its default tiling;
#: ``kernels/halo.py``: K folded over the taps, or each tap's channels padded).
HALO_K_CHOICES = ("folded", "padded", "both")


def halo_layouts(geometry: Conv2dGeometry, cfg: GemmConfig, halo_k: str | None
                 ) -> list[GemmConfig]:
    """``cfg``, or where it takes halo tiles the same tiling in the K layouts ``halo_k``
    names (:data:`HALO_K_CHOICES`; ``both``: the default's first), those that fit."""
    if halo_k is None or cfg.halo is None:
        return [cfg]
    folds = {"folded": [True], "padded": [False],
             "both": [cfg.halo.folded, not cfg.halo.folded]}[halo_k]
    found = [cfg if fold == cfg.halo.folded else with_halo_k(geometry, cfg, fold)
             for fold in folds]
    return [c for c in found if c is not None]


def parse_variant(text: str) -> dict:
    """``--variant``: ``key=value;key=value`` :class:`GemmConfig` options (integers, or
    ``true`` / ``false``; ``halo`` also ``folded`` / ``padded``), the layer's
    :func:`conv2d_config` with them timed after the default in the same run."""
    def value(raw: str):
        lowered = raw.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        return int(raw) if raw.strip().lstrip("-").isdigit() else raw.strip()
    try:
        return {key.strip(): value(raw) for key, raw in
                (item.split("=", 1) for item in text.split(";") if item.strip())}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: key=value;key=value") from None


def configs_for(geometry: Conv2dGeometry, dtype: str, sweep: bool, ctas: int,
                halo_k: str | None = None, against_im2col: bool = False,
                variants: tuple[dict, ...] = (), **options) -> list[GemmConfig]:
    """The default configuration (:func:`conv2d_config`), or (``sweep``) it and the tilings
    of :data:`SWEEP` that fit (no wider than K rounded up to 64: a wider tile only adds
    padding), plus the default with one ring stage fewer, with its C stages doubled on 4
    ring stages (or single, where the default doubled them), stream-K, ordered split-K and
    the wave model's tail split (:func:`~tvm_tma.kernels.tiling.in_tail_parts`) of 64- and
    128-row tiles, one wave of narrow 64-row tiles of whole K (the two widest dividing K
    that give half the CTAs or more one each), and one wave of tiles dividing K exactly
    (:func:`~tvm_tma.kernels.tiling.exact_wave`); and the layer on halo tiles, or on im2col
    loads where the default takes halo tiles (``halo=True`` / ``False``), and its halo
    tiles in the other K layout (:func:`halo_layouts`). ``halo_k``: the default in the
    K layouts it names instead (:data:`HALO_K_CHOICES`); ``against_im2col``: where the
    default takes halo tiles, the im2col loads after it (``halo=False``); ``variants``:
    the layer with each option set of :func:`parse_variant` after them, swept or not
    (:func:`with_variants`)."""
    base = conv2d_config(geometry, dtype, ctas=ctas, **options)
    if not sweep:
        found = halo_layouts(geometry, base, halo_k)
        if against_im2col and base.halo is not None:
            found.append(conv2d_config(geometry, dtype, ctas=ctas, **{**options, "halo": False}))
        return with_variants(found, geometry, dtype, ctas, variants, options)
    found = halo_layouts(geometry, base, halo_k or "both")
    widest = -(-geometry.k // 64) * 64

    def add(block_n: int, **chosen) -> None:
        """The tiling of ``chosen`` if it fits and is new (no column block, and no CTA of
        a cluster, with padding only)."""
        if block_n > widest:
            return
        try:
            cfg = conv2d_config(geometry, dtype, ctas=ctas,
                                **{**options, "block_n": block_n, **chosen})
        except ValueError:
            return
        if cfg.cluster_n > cfg.n_blocks:
            return  # CTAs of the cluster past K would hold tiles of padding only
        if cfg not in found:
            found.append(cfg)

    for block_n, schedule, (cluster, cluster_n) in SWEEP:
        add(block_n, schedule=schedule, cluster=cluster, cluster_n=cluster_n)
    for block_n in (64, 128, 256):
        # 64-row tiles (one consumer warpgroup each): the default for short layers whose
        # 128-row tiles are few (conv2d._half_rows).
        add(block_n, block_m=64, schedule="cooperative")
    for block_n in (64, 128, 192):
        # 192-row tiles (three consumer warpgroups): the default where they save a round
        # (conv2d._tall_tiles).
        add(block_n, block_m=192, schedule="cooperative")
    if base.stages > 2:
        found.append(replace(base, stages=base.stages - 1))
    # The default's tile with two alternating C stages on 4 ring stages (the default of a
    # pointwise layer of one K step, conv2d._stores_overlapped), or with one C
    # stage and the deepest ring where the default took two.
    overlapped = base.epilogue_buffers == 1
    add(base.block_n, block_m=base.block_m, schedule=base.schedule,
        epilogue_buffers=2 if overlapped else 1,
        **({"stages": STORE_BOUND_STAGES} if overlapped else {}))
    for block_n, cluster in [(w, c) for w in (64, 128, 256) for c in (1, 2)]:
        # Stream-K: every worker an equal run of the K steps, whatever the tile count.
        add(block_n, schedule="cooperative", cluster=cluster, stream_k=True)
    for block_m, block_n in [(m, w) for m in (64, 128) for w in (128, 256)]:
        # The tiles past the last full wave in the wave model's ordered K parts
        # (tail_split), where the tiles leave a partial wave at most half full.
        try:
            plain = conv2d_config(geometry, dtype, ctas=ctas, **{
                **options, "block_m": block_m, "block_n": block_n, "schedule": "cooperative"})
        except ValueError:
            continue
        tail = in_tail_parts(plain) if block_n <= widest else None
        if tail is not None and tail not in found:
            found.append(tail)
    for block_n, parts in [(w, p) for w in (128, 256) for p in (2, 4)]:
        # Ordered split-K (part 0 stores, the others add), where the parts divide K's
        # steps and the work units still fit the CTAs.
        tiles = conv2d_config(geometry, dtype, ctas=ctas, block_n=block_n).num_tiles
        if parts * tiles <= ctas:
            add(block_n, schedule="cooperative", split_k=parts, split_k_ordered=True)
    rows = -(-geometry.gemm_m // 64)
    narrow = [w for w in range(min(widest, 256), 7, -8)
              if geometry.k % w == 0 and ctas // 2 <= rows * (geometry.k // w) <= ctas]
    for block_n in narrow[:2]:
        # One wave of narrow 64-row tiles of whole K, the widest two dividing K that give
        # half the CTAs or more one each: since the mainloop is unrolled (wgmma.k_loop)
        # they beat the wide tiles in K parts the rules pick on some layers of few tiles
        # (N=32 1x1 7x7x1152 -> 192 on 64 x 48: 1.29x; benchmarks/RESULTS.md 6w).
        add(block_n, block_m=64, schedule="cooperative", split_k=1)
    wave = exact_wave(base)
    if wave is not None:
        # One wave of tiles dividing K exactly (tiling.in_one_exact_wave, a pointwise
        # layer's default within its bounds), for any layer and K.
        add(wave.block_n, block_m=wave.block_m, schedule="cooperative")
    for halo in (True, False):
        # Halo tiles (kernels/halo.py; stride 1) where the default loads im2col tiles,
        # and the im2col loads where it takes halo tiles.
        try:
            cfg = conv2d_config(geometry, dtype, ctas=ctas, **{**options, "halo": halo})
        except ValueError:
            continue
        if cfg not in found:
            found.append(cfg)
    return with_variants(found, geometry, dtype, ctas, variants, options)


def with_variants(found: list[GemmConfig], geometry: Conv2dGeometry, dtype: str, ctas: int,
                  variants: tuple[dict, ...], options: dict) -> list[GemmConfig]:
    """``found`` and after it the layer's :func:`conv2d_config` with each option set of
    ``variants`` (:func:`parse_variant`) not already listed; a refused one is said."""
    for variant in variants:
        try:
            cfg = conv2d_config(geometry, dtype, ctas=ctas, **{**options, **variant})
        except ValueError as error:
            print(f"{geometry.describe()}: variant {variant} refused: {error}")
            continue
        if cfg not in found:
            found.append(cfg)
    return found


def describe(cfg: GemmConfig) -> str:
    halo = cfg.halo
    layout = ("K folded " if halo.folded else "taps padded ") if halo else ""
    return (f"{f'halo tiles of {halo.rows}x{halo.cols} pixels, {layout}' if halo else ''}"
            f"{'(filter resident) ' if cfg.b_resident else ''}"
            f"{cfg.schedule} {cfg.block_m}x{cfg.block_n}x{cfg.block_k}"
            f"{f' (taps of {cfg.tap_columns} columns)' if cfg.tap_columns else ''} "
            f"C{cfg.epilogue_cols} "
            f"stages={cfg.stages} cluster={cfg.cluster}x{cfg.cluster_n} ctas={cfg.ctas}"
            f"{f' {cfg.split_k} ordered K parts' if cfg.split_k > 1 else ''}"
            f"{' stream-K' if cfg.stream_k else ''}"
            f"{f' tail in {cfg.tail_split} parts' if cfg.tail_split > 1 else ''}")


def kernel_label(name: str, cfg: GemmConfig) -> str:
    halo = cfg.halo
    layout = ("f" if halo.folded else "p") if halo else ""
    return (f"{name}-{cfg.dtype}{f'-halo{halo.rows}x{halo.cols}{layout}' if halo else ''}"
            f"-{cfg.schedule}-{cfg.block_m}x{cfg.block_n}x{cfg.block_k}"
            f"{f'-taps{cfg.tap_columns}' if cfg.tap_columns else ''}"
            f"-e{cfg.epilogue_cols}"
            f"-s{cfg.stages}-x{cfg.cluster}{'' if cfg.cluster_n == 1 else f'x{cfg.cluster_n}'}"
            f"-c{cfg.ctas}{f'-k{cfg.split_k}' if cfg.split_k > 1 else ''}"
            f"{'-sk' if cfg.stream_k else ''}"
            f"{f'-t{cfg.tail_split}' if cfg.tail_split > 1 else ''}")


def build(name: str, geometry: Conv2dGeometry, cfg: GemmConfig, dump: Path | None):
    built = compile_kernel(conv2d_kernel(geometry, cfg))
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{kernel_label(name, cfg)}.cu").write_text(built.cuda_source)
    return built


def torch_reference(torch, x_nchw, w_kcrs, geometry: Conv2dGeometry):
    """(reference, conv(|X|, |F|)) as (N*P*Q, K) float64, from float64 convolutions of the
    same inputs (NCHW, contiguous)."""
    import torch.nn.functional as F

    g = geometry

    def conv(x, w):
        y = F.conv2d(x.double().contiguous(), w.double().contiguous(), stride=g.stride,
                     padding=g.padding, dilation=g.dilation)
        return y.permute(0, 2, 3, 1).reshape(g.gemm_m, g.k)

    return conv(x_nchw, w_kcrs), conv(x_nchw.abs(), w_kcrs.abs())


def worst_over_bound(torch, y, reference, bound) -> tuple[bool, float]:
    """(every element finite and inside its bound, largest |y - ref| / bound)."""
    y = y.double()
    ratio = ((y - reference).abs() / bound).max().item()
    return bool(torch.isfinite(y).all().item()) and ratio <= 1.0, ratio


def measure(problems, dtype: str, sweep: bool, launches: int, repetitions: int, runs: int,
            dump: Path | None, halo_k: str | None = None, against_im2col: bool = False,
            variants: tuple[dict, ...] = (), **options) -> list[dict]:
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    ctas = options.pop("ctas", None) or torch.cuda.get_device_properties(0).multi_processor_count
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    rows = []
    for name, g, issue_tflops in problems:
        gen = torch.Generator(device="cuda").manual_seed(g.gemm_m + g.k + g.gemm_k)
        # NHWC and KRSC, contiguous: the TMA kernel's X and F (as (K, R*S*C)). Permuted
        # to NCHW / KCRS they are channels_last tensors, cuDNN's.
        x = torch.randn(g.argument_shape, device="cuda", dtype=torch_dtype, generator=gen)
        f = torch.randn((g.k, g.r, g.s, g.c), device="cuda", dtype=torch_dtype, generator=gen)
        x_nchw, w_kcrs = x.permute(0, 3, 1, 2), f.permute(0, 3, 1, 2)
        assert x_nchw.is_contiguous(memory_format=torch.channels_last)
        assert w_kcrs.is_contiguous(memory_format=torch.channels_last)
        reference, magnitude = torch_reference(torch, x_nchw, w_kcrs, g)
        bound = conv2d_error_bound(reference, magnitude, g, dtype)
        # Ordered split-K rounds each part before adding it: its own, wider bound.
        split_bounds = {1: bound}

        def cudnn(x_nchw=x_nchw, w_kcrs=w_kcrs, g=g):
            return F.conv2d(x_nchw, w_kcrs, stride=g.stride, padding=g.padding,
                            dilation=g.dilation)

        y_cudnn = cudnn()
        _, cudnn_worst = worst_over_bound(
            torch, y_cudnn.permute(0, 2, 3, 1).reshape(g.gemm_m, g.k), reference, bound)
        cudnn_ms, cudnn_host_ms, cudnn_median = kernel_times(torch, cudnn, launches,
                                                            repetitions, runs, 5)
        filter_2d = f.reshape(g.filter_shape)
        for cfg in configs_for(g, dtype, sweep, ctas, halo_k, against_im2col, variants,
                               **options):
            executable = build(name, g, cfg, dump).executable["main"]
            y = torch.full(g.output_shape, float("nan"), device="cuda", dtype=torch_dtype)
            args = [tvm.runtime.from_dlpack(t) for t in (x, filter_2d, y)]
            args += workspace(cfg, tvm.cuda(0))
            executable(*args)
            torch.cuda.synchronize()
            parts = cfg.reduction_parts
            if parts not in split_bounds:
                split_bounds[parts] = conv2d_error_bound(reference, magnitude, g, dtype, parts)
            bound = split_bounds[parts]
            ok, worst = worst_over_bound(torch, y, reference, bound)
            ms, host_ms, median = kernel_times(torch, lambda args=args: executable(*args),
                                              launches, repetitions, runs, 5)
            # Y again after the timed launches (a stream-K run reuses its workspace), and
            # the workspace's flags left clean.
            torch.cuda.synchronize()
            ok_after, worst_after = worst_over_bound(torch, y, reference, bound)
            check_workspace_left_clean(cfg, args[3:])
            ok, worst = ok and ok_after, max(worst, worst_after)
            rows.append({
                "layer": name, "geometry": g.describe(), "dtype": dtype,
                "gemm": f"{g.gemm_m}x{g.k}x{g.gemm_k}",
                "schedule": cfg.schedule, "block_m": cfg.block_m, "block_n": cfg.block_n,
                "block_k": cfg.block_k, "tap_columns": cfg.tap_columns,
                "epilogue_n": cfg.epilogue_cols, "stages": cfg.stages,
                "cluster": cfg.cluster, "cluster_n": cfg.cluster_n, "ctas": cfg.ctas,
                "tiles": cfg.num_tiles,
                "halo": f"{cfg.halo.rows}x{cfg.halo.cols}" if cfg.halo else None,
                "halo_k": ("folded" if cfg.halo.folded else "padded") if cfg.halo else None,
                "b_resident": cfg.b_resident,
                "stream_k": cfg.stream_k, "split_k": cfg.split_k,
                "tail_split": cfg.tail_split, "correct": ok,
                "worst_error_over_bound": round(worst, 4),
                "ms": round(ms, 5), "host_launched_ms": round(host_ms, 5),
                "median_ms": round(median, 5),
                "tflops": round(g.flops / ms / 1e9, 1),
                "host_launched_tflops": round(g.flops / host_ms / 1e9, 1),
                "median_tflops": round(g.flops / median / 1e9, 1),
                "cudnn_ms": round(cudnn_ms, 5), "cudnn_host_launched_ms": round(cudnn_host_ms, 5),
                "cudnn_median_ms": round(cudnn_median, 5),
                "cudnn_tflops": round(g.flops / cudnn_ms / 1e9, 1),
                "cudnn_host_launched_tflops": round(g.flops / cudnn_host_ms / 1e9, 1),
                "x_cudnn": round(cudnn_ms / ms, 3),
                "x_cudnn_host_launched": round(cudnn_host_ms / ms, 3),
                "cudnn_worst_error_over_bound": round(cudnn_worst, 4),
                "issue_cudnn_tflops": issue_tflops,
            })
            print(json.dumps(rows[-1]), flush=True)
        del reference, bound
    return rows


def compile_only(problems, dtype: str, sweep: bool, dump: Path | None,
                 halo_k: str | None = None, against_im2col: bool = False,
                 variants: tuple[dict, ...] = (), **options) -> int:
    count = 0
    for name, g, _ in problems:
        for cfg in configs_for(g, dtype, sweep, halo_k=halo_k, against_im2col=against_im2col,
                               variants=variants, **{"ctas": 132, **options}):
            cubin = assemble(build(name, g, cfg, dump).cuda_source)
            count += 1
            print(f"{name} ({g.describe()}; GEMM {g.gemm_m}x{g.k}x{g.gemm_k}) {dtype} "
                  f"{describe(cfg)}: {len(cubin)} bytes of sm_90a cubin", flush=True)
    print(f"{count} kernels assembled")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", action="append", default=[], type=parse_problem,
                        help="N,H,W,C,K,R,S,stride,pad (repeatable); default: the issue's "
                             "eight layers")
    parser.add_argument("--compile-only", action="store_true",
                        help="build and assemble every kernel for sm_90a; no GPU")
    parser.add_argument("--sweep", action="store_true",
                        help="a few tilings per layer (width, schedule, cluster, stages)")
    parser.add_argument("--dump-cuda", type=Path, metavar="DIR")
    parser.add_argument("--json", type=Path, metavar="FILE")
    parser.add_argument("--dtype", default="bfloat16", choices=DTYPES)
    parser.add_argument("--launches", type=int, default=20,
                        help="back-to-back launches between two events")
    parser.add_argument("--repetitions", type=int, default=5,
                        help="runs of --launches; the best is reported")
    parser.add_argument("--runs", type=int, default=50,
                        help="launches timed one by one (median)")
    parser.add_argument("--block-m", type=int, choices=(64, 128, 192))
    parser.add_argument("--block-n", type=int)
    parser.add_argument("--stages", type=int)
    parser.add_argument("--epilogue-n", type=int, help="columns of C per TMA store stage")
    parser.add_argument("--block-k", type=int, choices=(16, 32, 64),
                        help="K block (must divide C)")
    parser.add_argument("--schedule", choices=("cooperative", "pingpong"))
    parser.add_argument("--cluster", type=int, choices=(1, 2),
                        help="CTAs per cluster along M (sharing B)")
    parser.add_argument("--cluster-n", type=int, choices=(1, 2, 4),
                        help="CTAs per cluster along N (sharing A)")
    parser.add_argument("--stream-k", action="store_true", default=None,
                        help="every CTA an equal run of the K steps (stream-K)")
    parser.add_argument("--split-k", type=int,
                        help="K in ordered parts (part 0 stores, the others add after it)")
    parser.add_argument("--tail-split", type=int,
                        help="K parts each tile past the last full wave is cut into "
                             "(ordered, one last round)")
    parser.add_argument("--ctas", type=int, help="persistent CTAs (default: one per SM; "
                                                 "132 with --compile-only)")
    parser.add_argument("--halo-k", choices=HALO_K_CHOICES,
                        help="a layer on halo tiles in these K layouts (folded over the "
                             "taps, or each tap padded; both: the default's first)")
    parser.add_argument("--against-im2col", action="store_true",
                        help="where the default takes halo tiles, the im2col loads too")
    parser.add_argument("--variant", action="append", default=[], type=parse_variant,
                        metavar="KEY=VALUE;...",
                        help="GemmConfig options the layer is also timed with, after its "
                             "default in the same run (repeatable; e.g. 'stream_k=true', "
                             "'block_m=192;block_n=128;stream_k=false', 'halo=true')")
    args = parser.parse_args(argv)
    options = {name: value for name, value in (("block_m", args.block_m),
                                                ("block_n", args.block_n),
                                                ("stages", args.stages),
                                                ("epilogue_n", args.epilogue_n),
                                                ("block_k", args.block_k),
                                                ("schedule", args.schedule),
                                                ("cluster", args.cluster),
                                                ("cluster_n", args.cluster_n),
                                                ("stream_k", args.stream_k),
                                                ("split_k", args.split_k),
                                                ("split_k_ordered",
                                                 True if args.split_k else None),
                                                ("tail_split", args.tail_split),
                                                ("ctas", args.ctas))
               if value is not None}
    problems = args.problem or PROBLEMS
    if args.compile_only:
        compile_only(problems, args.dtype, args.sweep, args.dump_cuda, args.halo_k,
                     args.against_im2col, tuple(args.variant), **options)
        return 0
    rows = measure(problems, args.dtype, args.sweep, args.launches, args.repetitions,
                   args.runs, args.dump_cuda, args.halo_k, args.against_im2col,
                   tuple(args.variant), **options)
    # TFLOP/s from graph replays (no host between launches); "host" columns: the same
    # launched back to back from the host (cuDNN's host code can be slower than its kernel).
    print(f"{'layer':27} {'tiling':44} {'ok':5} {'err/bd':>6} {'TFLOP/s':>8} {'host':>7} "
          f"{'median':>7} {'cuDNN':>7} {'host':>7} {'x cuDNN':>7} {'issue':>6}")
    for row in rows:
        tiling = (f"{'sk' if row['stream_k'] else row['schedule'][:4]}"
                  f"{'/' + str(row['split_k']) if row['split_k'] > 1 else ''}"
                  f"{'/t' + str(row['tail_split']) if row.get('tail_split', 1) > 1 else ''} "
                  f"{row['block_m']}x{row['block_n']}x{row['block_k']}"
                  f"{'/' + str(row['tap_columns']) if row.get('tap_columns') else ''} "
                  f"C{row['epilogue_n']} st{row['stages']} "
                  f"x{row['cluster']}x{row['cluster_n']} "
                  f"({row['tiles']} tiles)"
                  f"{' halo ' + row['halo'] + row['halo_k'][0] if row.get('halo') else ''}")
        print(f"{row['layer']:27} {tiling:44} {row['correct']!s:5} "
              f"{row['worst_error_over_bound']:6.3f} {row['tflops']:8.1f} "
              f"{row['host_launched_tflops']:7.1f} {row['median_tflops']:7.1f} "
              f"{row['cudnn_tflops']:7.1f} {row['cudnn_host_launched_tflops']:7.1f} "
              f"{row['x_cudnn']:7.3f} {row['issue_cudnn_tflops'] or '':>6}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(row["correct"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
