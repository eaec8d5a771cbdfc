"""What the fuzz oracle checks of an accepted plan, and the record of one case's verdict.

It exists apart from :mod:`.fuzz_oracle` (which plans a case and decides its verdict) so that
every oracle judges plans by the same checks: the one-copy cases of :mod:`.fuzz_oracle` and
the persistent loops of :mod:`.fuzz_loop_oracle`, which plan a whole kernel and check its
plan at every tile the loop runs. The checks are the hardware invariants an accepted plan
must satisfy on concrete values (:func:`plan_invariants`, with the variants' own promises)
and the bytes the plans move on the TMA model against numpy's copy (:func:`model_mismatch`;
for a device-side view also at another launch of its kernel, :func:`relaunch_mismatch`).
"""

from __future__ import annotations

import traceback
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..planner.plan_types import DESCRIPTOR_DTYPE_BYTES, SWIZZLE_GEOMETRY
from .copy_cases import CopyCase, shared_layout_of
from .copy_expected import expected_after
from .device_view_case import launches, mentions_device_values, relaunched
from .fuzz_cases import MAX_RANK
from .layout_eval import evaluate, layout_offsets
from .runner import inputs, model_buffers, plans_of, run_model_buffers
from .tma_model import bound_spec, box_addresses

if TYPE_CHECKING:
    from ..planner import TmaPlan
    from ..planner.plan_types import Issue

MAX_BOX = 256
SMEM_ALIGN = 128


@dataclass
class Outcome:
    """What one case did. ``kind`` names the failure class (the shrinker keeps it fixed)."""

    status: str  # "accepted", "refused" or "mismatch"
    rule: str | None = None
    kind: str = ""
    problem: str = ""
    issues: int = 0


class CaseTimeout(Exception):
    """A case ran past its time limit (a planner that does not terminate, say)."""



def crash_outcome(stage: str, error: Exception) -> Outcome:
    """A mismatch for an exception raised while ``stage`` ran (a planner or oracle crash)."""
    where = traceback.extract_tb(error.__traceback__)[-1]
    return Outcome("mismatch", kind=f"crash:{stage}:{type(error).__name__}",
                   problem=f"{type(error).__name__}: {error} (at {where.filename}:{where.lineno})")



def _int(value: object, env: Mapping) -> int:
    return int(evaluate(value, env))


def plan_invariants(case: CopyCase, plans: list[tuple[TmaPlan, dict]]
                    ) -> list[tuple[str, str]]:
    """Every hardware invariant an accepted plan must satisfy, checked on concrete values.

    Returns (name, detail) for each violation; empty when the plans are legal.
    """
    problems: list[tuple[str, str]] = []

    def fail(name: str, detail: str) -> None:
        problems.append((name, detail))

    width = case.element_bytes
    kind, _, argument = case.shared_layout.partition(":")
    want_swizzle = int(argument) if kind == "swizzle" else 0
    arena_bytes = (int(arena_offsets(case).max()) + 1) * width
    storage_bytes = case.global_storage_elems * width
    shared_seen: list[np.ndarray] = []
    for copy_plan, env in plans:
        problems.extend(device_view_invariants(case, copy_plan))
        spec = bound_spec(copy_plan.tensor_map, env)  # a rebound map's fields at the launch
        rank = spec.rank
        if copy_plan.direction != case.direction:
            fail("direction", f"plan direction {copy_plan.direction} for a {case.direction} copy")
        if not 1 <= rank <= MAX_RANK:
            fail("rank", f"rank {rank}")
            continue
        lengths = (len(spec.global_dims), len(spec.global_strides) + 1, len(spec.box_dims),
                   len(spec.element_strides), len(copy_plan.coordinates))
        if set(lengths) != {rank}:
            fail("rank", f"field lengths {lengths} for rank {rank}")
            continue
        if any(not 1 <= b <= MAX_BOX for b in spec.box_dims):
            fail("box-dim", f"box {spec.box_dims}")
        if any(e != 1 for e in spec.element_strides):
            fail("element-strides", f"element strides {spec.element_strides}")
        if spec.dtype not in DESCRIPTOR_DTYPE_BYTES or spec.element_bytes % width:
            fail("descriptor-dtype", f"{spec.dtype} for {case.dtype}")
        if spec.swizzle != (want_swizzle if want_swizzle else 0):
            fail("swizzle", f"swizzle {spec.swizzle} for layout {case.shared_layout}")
        # NaN fill is a load's; a store never writes out-of-bounds elements, so its map's
        # fill mode is moot (a store may pass oob="nan" as upstream's kernels do).
        fills = {1} if case.direction == "g2s" else {0, 1}
        if (spec.interleave, spec.l2_promotion) != (0, 2) or spec.oob_fill not in (
                fills if case.oob == "nan" else {0}):
            fail("options", f"interleave/l2/oob {spec.interleave}/{spec.l2_promotion}/"
                            f"{spec.oob_fill}")
        inner = spec.box_dims[0] * spec.element_bytes
        if spec.swizzle:
            span, period = SWIZZLE_GEOMETRY.get(spec.swizzle, (None, None))
            if inner != span:
                fail("swizzle-span", f"inner box {inner} bytes, span {span}")
            if period is None or (case.smem_elem_offset * width) % period:
                fail("swizzle-base-period", f"buffer at byte {case.smem_elem_offset * width}")
        elif inner % 16:
            fail("inner-box-16B", f"inner box {inner} bytes")
        strides = [_int(s, env) for s in spec.global_strides]
        if any(s % 16 or not 0 <= s < (1 << 40) for s in strides):
            fail("global-stride", f"strides {strides}")
        dims = [_int(d, env) for d in spec.global_dims]
        if any(not 0 < d <= (1 << 32) for d in dims):
            fail("global-dim", f"dims {dims}")
        if copy_plan.bytes_per_issue * copy_plan.num_issues != case.copy_bytes:
            fail("bytes", f"{copy_plan.bytes_per_issue} B x {copy_plan.num_issues} issues != "
                          f"{case.copy_bytes} B")
        for axis in copy_plan.issue_axes:
            if axis.extent < 1 or not 0 <= axis.coord_dim < rank:
                fail("issue-axis", f"{axis}")
        if not problems:
            problems.extend(variant_invariants(case, copy_plan, env))
        if problems:
            continue
        for issue in copy_plan.issues():
            smem = _int(issue.smem_offset, env) * width
            coords = [_int(c, env) for c in issue.coordinates]
            if smem % SMEM_ALIGN:
                fail("smem-align-128", f"issue at shared byte {smem}")
                break
            if (coords[0] * spec.element_bytes) % 16:
                fail("inner-coordinate-16B", f"issue at {coords}: dimension 0 starts "
                                             f"{coords[0] * spec.element_bytes} bytes in")
                break
            if copy_plan.direction == "s2g" and min(coords) < 0:
                fail("store-start", f"store issue at {coords} starts before the tensor")
                break
            base = _int(copy_plan.base_offset, env) * width
            g_off, s_addr, inside = box_addresses(spec, coords, smem, dims, base_byte=base)
            if not inside.all() and case.oob is None:
                fail("out-of-bounds", f"issue at {coords} leaves the tensor {dims}")
                break
            if copy_plan.direction == "s2g" and not inside.all():
                # a store crossing dimension 0's end writes on to its next 16-byte boundary
                _, _, inside = box_addresses(spec, coords, smem, dims, store=True,
                                             base_byte=base)
            g_off = g_off[inside]
            if g_off.size and (g_off.min() < 0
                               or g_off.max() + spec.element_bytes > storage_bytes):
                fail("global-range", f"issue at {coords} reaches bytes [{g_off.min()}, "
                                     f"{g_off.max()}] of a {storage_bytes}-byte allocation")
                break
            if s_addr.min() < 0 or s_addr.max() + spec.element_bytes > arena_bytes:
                fail("shared-range", f"issue at shared byte {smem} reaches "
                                     f"[{s_addr.min()}, {s_addr.max()}] of {arena_bytes}")
                break
            shared_seen.append(s_addr)
    if not problems and shared_seen:
        every = np.concatenate(shared_seen)
        if np.unique(every).size != every.size:
            fail("overlap", "two issues write the same shared address")
    return problems


def device_view_invariants(case: CopyCase, copy_plan: TmaPlan) -> list[tuple[str, str]]:
    """A plan is device-born exactly when its map reads a device-side value (the view's
    local scalars): such a map has no host encode, so the dispatch must rebind it
    (``device_view``), and a map the host can encode must not pay for a rebind. Judged from
    the map's own fields, apart from the planner's reading of them; only a device-view case
    has such values at all."""
    spec = copy_plan.tensor_map
    fields = (copy_plan.base_offset, *spec.global_dims, *spec.global_strides)
    device_born = any(mentions_device_values(value) for value in fields)
    if device_born and not case.device_view:
        return [("device-view", "a static case's map reads a device-side value")]
    if copy_plan.device_view != device_born:
        return [("device-view", f"device_view={copy_plan.device_view} for a map whose base, "
                                f"dims and strides are {fields}")]
    return []


def variant_invariants(case: CopyCase, copy_plan: TmaPlan, env: Mapping
                       ) -> list[tuple[str, str]]:
    """What a variant's plan promises: a reduction computes on the tensor's own elements (a
    promoted map would combine the wrong numbers, :func:`_same_reduction`); only a cluster
    case's plan is split, and that one exactly (:func:`split_invariants`)."""
    problems = []
    map_dtype = copy_plan.tensor_map.dtype
    if case.reduce is not None and not _same_reduction(case.reduce, case.dtype, map_dtype):
        problems.append(("reduce-dtype", f"reduce={case.reduce!r} on {case.dtype} computes in "
                                         f"{map_dtype}"))
    if case.cluster:
        return problems + split_invariants(case.cluster, copy_plan, env, case.element_bytes)
    if copy_plan.cluster_split is not None:
        problems.append(("split-unasked", f"a one-CTA copy split among "
                                          f"{copy_plan.cluster_split} CTAs"))
    return problems


def _same_reduction(op: str, dtype: str, map_dtype: str) -> bool:
    """A map of ``map_dtype`` computes ``op`` on ``dtype`` tensors: the same type, or for the
    bitwise ops (PTX types them ``.b32``/``.b64``: bits, not numbers) any integer type of the
    same width."""
    if map_dtype == dtype:
        return True
    integers = {"int32": 4, "uint32": 4, "int64": 8, "uint64": 8}
    return (op in ("and", "or", "xor") and dtype in integers
            and integers.get(map_dtype) == integers[dtype])


def split_invariants(ctas: int, copy_plan: TmaPlan, env: Mapping, width: int
                     ) -> list[tuple[str, str]]:
    """A plan dealt out among ``ctas`` CTAs: equal runs, each issue made by exactly one CTA
    (a box made twice lands twice, a box nobody makes never arrives and every CTA's mbarrier
    waits for it forever), every piece 128-byte aligned like any issue. A piece of a swizzled
    tile need not start on the pattern's period: the hardware swizzles absolute addresses
    (measured on the H200: the 250 split fuzz kernels of seed 20251122 ran bit-exact, 37 with
    pieces off the period), so where it lands is the model's to check, byte by byte."""
    if copy_plan.cluster_split != ctas or copy_plan.issues_per_cta * ctas != copy_plan.num_issues:
        return [("split-count", f"split among {copy_plan.cluster_split} CTAs, "
                                f"{copy_plan.issues_per_cta} issue(s) each, for {ctas} CTAs and "
                                f"{copy_plan.num_issues} issue(s)")]

    def key(issue: Issue) -> tuple[int, tuple[int, ...]]:
        return _int(issue.smem_offset, env) * width, tuple(_int(c, env) for c in issue.coordinates)

    every = Counter(key(issue) for issue in copy_plan.issues())
    runs = [[key(issue) for issue in copy_plan.issues(cta=rank)] for rank in range(ctas)]
    if any(len(run) != copy_plan.issues_per_cta for run in runs):
        return [("split-count", f"runs of {[len(run) for run in runs]} issues, not "
                                f"{copy_plan.issues_per_cta} each")]
    dealt = Counter(k for run in runs for k in run)
    twice = [k for k, n in dealt.items() if n > 1]
    if twice:
        return [("split-duplicate", f"issue (shared byte, coordinates) {twice[0]} is made "
                                    f"{dealt[twice[0]]} times by the CTAs")]
    if dealt != every:
        missing = next(iter(every - dealt))
        return [("split-cover", f"no CTA makes issue (shared byte, coordinates) {missing}")]
    off = sorted(k[0] for k in every if k[0] % SMEM_ALIGN)
    if off:
        return [("split-align", f"a piece starts at shared byte {off[0]}, not "
                                f"{SMEM_ALIGN}-byte aligned")]
    return []


_OFFSETS_CACHE: dict[int, tuple[tuple, np.ndarray]] = {}


def arena_offsets(case: CopyCase) -> np.ndarray:
    """Arena element offsets of the shared buffer (one entry, keyed by what they depend on:
    a case is checked at a time, a loop case at every tile with the same shared side)."""
    key = (case.dtype, case.shared_shape, case.shared_layout, case.smem_elem_offset)
    hit = _OFFSETS_CACHE.get(0)
    if hit is not None and hit[0] == key:
        return hit[1]
    offsets = case.smem_elem_offset + layout_offsets(shared_layout_of(case), case.shared_shape)
    _OFFSETS_CACHE[0] = (key, offsets)
    return offsets


def model_mismatch(case: CopyCase, plans: list[tuple[TmaPlan, dict]], data_seed: int = 0,
                   storage_elems: int | None = None) -> str:
    """'' when the plans, run on the TMA model, move exactly the bytes numpy's copy moves
    (in an allocation of ``storage_elems`` elements, default the case's own)."""
    offsets = arena_offsets(case)
    global_in, shared_in = inputs(case, data_seed)
    want = model_buffers(case, *expected_after(case, global_in, shared_in), offsets,
                         storage_elems)
    got = run_model_buffers(case, global_in, shared_in, plans, offsets, storage_elems)
    problems = []
    for label, have, expect in zip(("global", "shared"), got, want):
        wrong = np.flatnonzero(have != expect)
        if wrong.size:
            problems.append(f"{label}: {wrong.size} bytes differ, first at byte {wrong[0]}")
    return "; ".join(problems)


def relaunch_mismatch(case: CopyCase, data_seed: int = 0) -> str:
    """'' when a device-view case's plans, run at each of its other launches (the view
    elsewhere and shorter: :func:`~.device_view_case.launches`), move on the model exactly
    the bytes of the static case that launch performs, in the case's allocation (as on the
    GPU): the map follows the device's values, not the static view's."""
    if not case.device_view:
        return ""
    for launch in launches(case)[1:]:
        problem = model_mismatch(relaunched(case, launch), plans_of(case, launch), data_seed,
                                 case.global_storage_elems)
        if problem:
            return f"launch V={launch}: {problem}"
    return ""
