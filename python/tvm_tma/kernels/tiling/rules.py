"""The default tiling: the model's choice (:func:`.model.modelled`) through the measured
refinements in order (:data:`REFINEMENTS`), and the L2 fill of weight-streaming problems."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .c_stages import C_STAGE_CHOICES, with_alternating_c_stages
from .few_columns import few_columns_tiling, on_few_columns
from .model import (
    TALL_256,
    TILING_CHOICES,
    WEIGHT_STREAM_PROMOTION,
    MakeTiling,
    Tiling,
    modelled,
    sixteen_bit_nk,
    streams_weights,
)
from .one_wave import in_gemm_fullest_narrow_wave
from .short import fitted_k_block, in_one_step_pingpong, in_short_pingpong, in_short_wave
from .swap import on_swapped_operands, swapped
from .unswapped import UNSWAPPED_RULES


def choose(make: MakeTiling, m: int, n: int, k: int, **options) -> Tiling:
    """:func:`choose_for_k_block` on one K block of 16 or 32 where K fits it
    (:func:`.short.fitted_k_block`) for 16-bit inputs with B as N x K, unless the caller
    chose ``block_k`` or 256-row tiles (measured on 64-wide blocks only): every rule
    then weighs that block's ring slots."""
    chosen = choose_for_k_block(make, m, n, k, **options)
    if "block_k" in options or options.get("block_m") == 256 or not sixteen_bit_nk(chosen):
        return chosen
    fitted = fitted_k_block(k)
    if fitted == chosen.block_k:
        return chosen
    return choose_for_k_block(make, m, n, k, **options, block_k=fitted)


def choose_for_k_block(make: MakeTiling, m: int, n: int, k: int, **options) -> Tiling:
    """The default configuration of ``GemmConfig.for_problem``: ordered split-K on
    ping-pong 128 x 128 tiles where those tiles fill at most half the SMs (on one column
    block of tiles as wide as N for few columns and a long K: :func:`modelled`), else the
    cheapest candidate of :func:`ranked` (the caller's options laid over the default
    tiling when none of the candidates runs, so that ``check`` names what is wrong); 128 x
    128 tiles as 64 x 128 ones where M is at most 64 or a short problem's tiles are few
    (:func:`on_half_rows`, unless the caller chose the tile, schedule, ring or split), and
    the other :func:`refinements`; with 256-byte L2 fills where M is one row block
    (:func:`streams_weights`). Where the caller asks for 256-row tiles, the plain
    :data:`.model.TALL_256` tiling under its options."""
    if options.get("block_m") == 256:
        # 256-row tiles run plain: :data:`.model.TALL_256` under the caller's options.
        return make(m, n, k, **{**TALL_256, **options})
    if options.get("swap_ab") and not TILING_CHOICES & set(options):
        # The caller asked for C^T = B A^T and nothing else: the swapped tiling of the
        # problem (where the kernel runs one): of few rows, or else of few columns.
        plain = make(m, n, k, **{**options, "swap_ab": False})
        forced = swapped(plain) or few_columns_tiling(plain)
        if forced is not None:
            return forced
    chosen = modelled(make, m, n, k, **options)
    for _, refined in refinements(chosen, options):
        chosen = refined
    if "l2_promotion" not in options and streams_weights(chosen):
        chosen = replace(chosen, l2_promotion=WEIGHT_STREAM_PROMOTION)
    return chosen


def refinements(chosen: Tiling, options: dict) -> list[tuple[str, Tiling]]:
    """The rules that change ``chosen`` after the model picked it (none where the caller
    chose the tile, schedule, ring or split), each with the configuration it leaves:
    C^T = B A^T for few rows (:func:`on_swapped_operands`), 64-row tiles
    (:func:`on_half_rows`), the trim (:func:`trimmed`), 64 x 256 tiles for a
    few row blocks (:func:`on_wide_half_rows`), 2x2 clusters (:func:`in_two_by_two`), one
    wave of tiles dividing N exactly (:func:`in_one_exact_wave`), A shared in clusters of
    4 (:func:`sharing_a_in_fours`); then, on whatever they leave but clusters and
    swaps, the fullest wave of narrow 64-row tiles of whole K
    (:func:`in_gemm_fullest_narrow_wave`), and C^T = B A^T for few columns where its
    tiles keep more of the SMs busy (:func:`.few_columns.on_few_columns`); last, two
    alternating C stages where C is stored in pieces
    (:func:`.c_stages.with_alternating_c_stages`), but not where one row block streams B
    (:func:`.model.streams_weights`); and last of all, on a problem of a few K steps, the
    smallest plain tiles of one wave (:func:`.short.in_short_wave`, on the model's CTAs:
    the GPU's SMs, where clusters of 4 leave fewer), or where no such wave is, ping-pong
    tiles for one K step in place of two rounds of clusters
    (:func:`.short.in_one_step_pingpong`) and ping-pong 128 x 128 tiles for 4 to 8 K steps
    (:func:`.short.in_short_pingpong`), unless the caller chose the swap.
    ``benchmarks/gemm.py --explain`` prints them. The caller's ``swap_ab`` decides the
    swap (:func:`on_swapped_operands` and :func:`.few_columns.on_few_columns` are skipped;
    with True, none applies: they were measured on A @ B^T's tiles)."""
    if TILING_CHOICES & set(options) or options.get("swap_ab"):
        return []
    steps = []
    # The GPU's SMs: the model's choice is on all of them (clusters of 4 leave fewer).
    ctas = chosen.ctas
    # The caller's swap_ab decides the swaps; a swapped tiling skips the rules measured on
    # A @ B^T's tiles (the narrow wave and the few-columns swap keep a swapped one as is).
    swaps = (on_swapped_operands, on_few_columns) if "swap_ab" in options else (
        # (The few-columns tiles replace the caller's C stages.)
        (on_few_columns,) if C_STAGE_CHOICES & set(options) else ())
    for rule in (*REFINEMENTS, in_gemm_fullest_narrow_wave, on_few_columns):
        if rule in swaps or (chosen.swap_ab and rule in UNSWAPPED_RULES):
            continue
        refined = rule(chosen)
        if refined != chosen:
            steps.append((rule.__name__, refined))
            chosen = refined
    # Not where one row block streams B: its ring depth is what keeps B's bytes coming,
    # and those problems were not measured with two C stages.
    alternating = with_alternating_c_stages(chosen)
    if (alternating != chosen and not C_STAGE_CHOICES & set(options)
            and not streams_weights(chosen)):
        steps.append((with_alternating_c_stages.__name__, alternating))
        chosen = alternating
    if "swap_ab" not in options:
        for rule in (in_short_wave, in_one_step_pingpong, in_short_pingpong):
            short = rule(chosen, ctas)
            if short != chosen:
                steps.append((rule.__name__, short))
                chosen = short
    return steps


#: The rules applied after the model's choice, in order (:func:`refinements`): the swap,
#: then the rules measured on A @ B^T's tiles (:data:`.unswapped.UNSWAPPED_RULES`).
REFINEMENTS: tuple[Callable[[Tiling], Tiling], ...] = (on_swapped_operands, *UNSWAPPED_RULES)
