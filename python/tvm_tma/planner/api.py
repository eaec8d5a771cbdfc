"""The planner's entry point: two buffer regions in, one :class:`TmaPlan` out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .descriptor import Context, build_plan
from .errors import PlanError, refuse
from .global_view import LOAD_OOB, STORE_OOB, GlobalView, global_placements
from .im2col import ConvView, plan_im2col, recognize
from .multicast import split_among_ctas
from .plan_types import TmaPlan
from .proofs import Prover
from .reductions import check_reduction
from .refine import refine
from .shared_space import check_in_allocation, check_region_in_buffer
from .views import buffer_span, read_shared


def copy_direction(dst, src) -> str:
    """``"g2s"`` or ``"s2g"`` from the buffers' storage scopes."""
    src_scope, dst_scope = src.source.scope(), dst.source.scope()
    if src_scope == "global" and dst_scope.startswith("shared"):
        return "g2s"
    if src_scope.startswith("shared") and dst_scope == "global":
        return "s2g"
    raise refuse(
        "direction",
        f"TMA copies global<->shared, got src scope {src_scope!r} and dst scope {dst_scope!r}",
    )


def plan(dst, src, *, var_ranges: Mapping | None = None, facts: Iterable = (),
         prover: Prover | None = None, oob: str | None = None, argument=None,
         shared_allocation=None, reduce: str | None = None, l2_promotion: int = 2,
         multicast_ctas: int | None = None) -> TmaPlan:
    """Plan ``copy(dst, src)`` between a global and a shared BufferRegion.

    ``var_ranges`` maps the kernel's variables (block ids, loop vars) to their ``Range`` and
    ``facts`` are boolean facts known at the copy (see :class:`Prover`), so alignments and
    bounds that depend on them can be proven; or pass a ready ``prover`` (it then records
    what the plan rests on). ``oob`` lets the region cross the global view's edges:
    ``"zero"``/``"nan"`` fill a load's out-of-bounds elements; a store never writes its
    (``"skip"``, or ``"zero"``/``"nan"`` as upstream's kernels write it).
    ``argument`` is the kernel argument the global buffer is a view of (if it is one), and
    ``shared_allocation`` the ``T.alloc_buffer`` holding the shared buffer's data (when
    known, the buffer must lie inside it). ``reduce`` makes a store a tensor reduction (the
    map keeps the tensor's type); ``l2_promotion`` is the map's enum; ``multicast_ctas``
    splits a multicast load's issues among that many CTAs of the cluster
    (:func:`~.multicast.split_among_ctas`). Raises :class:`PlanError`.

    A global view whose offset folds into coordinates may also be placed at the map's base
    (:func:`~.global_view.global_placements`): the folded view is planned first, and only
    when its plan is refused is the other planned (every rule applies to it as well); if
    both are refused, the first refusal is raised.
    """
    direction = copy_direction(dst, src)
    shared_region, global_region = (dst, src) if direction == "g2s" else (src, dst)
    if str(shared_region.source.dtype) != str(global_region.source.dtype):
        raise refuse(
            "dtype",
            f"shared dtype {shared_region.source.dtype} != global dtype "
            f"{global_region.source.dtype}",
        )
    if prover is None:
        prover = Prover(var_ranges, facts)
    _check_oob(oob, direction)
    if reduce is not None:
        if direction != "s2g":
            raise refuse("reduce", f"reduce={reduce!r}: a reduction combines shared data into "
                         "global memory, so it is for shared->global copies")
        check_reduction(reduce, str(shared_region.source.dtype))
    if multicast_ctas is not None and direction != "g2s":
        raise refuse("multicast", "multicast is for global->shared loads (a store writes one "
                     "tensor)")
    check_region_in_buffer(shared_region, prover)
    if shared_allocation is not None:
        lo, hi = buffer_span(shared_region.source, prover)
        check_in_allocation(lo, hi, f"shared buffer {shared_region.source.name}",
                            shared_allocation, prover)
    shared = read_shared(shared_region, prover)
    alignment = shared_alignment(shared_region.source, shared_allocation)
    conv = recognize(global_region, argument, prover)

    def tiled() -> TmaPlan:
        placements = global_placements(global_region, prover, direction, oob, argument)

        def plan_view(global_view: GlobalView) -> TmaPlan:
            axes = refine(shared, global_view)
            ctx = Context(shared, global_view, direction, prover, alignment, reduce,
                          l2_promotion)
            copy_plan = build_plan(axes, ctx)
            if multicast_ctas is not None:
                copy_plan = split_among_ctas(copy_plan, multicast_ctas, ctx)
            return copy_plan

        return _first_plan(placements, plan_view, prover)

    if conv is None:
        return tiled()

    def im2col() -> TmaPlan:
        return _plan_im2col(conv, shared, global_region, prover, direction, oob, alignment,
                            reduce, l2_promotion, multicast_ctas)

    if conv.is_pointwise and direction == "g2s" and reduce is None:
        return _plan_pointwise(conv, global_region, tiled, im2col, prover)
    return im2col()


def _plan_im2col(conv: ConvView, shared, global_region, prover: Prover, direction: str,
                 oob: str | None, alignment: int, reduce: str | None, l2_promotion: int,
                 multicast_ctas: int | None) -> TmaPlan:
    """A copy from a convolution's GEMM view: an im2col load (:mod:`.im2col`)."""
    if direction != "g2s" or reduce is not None:
        raise refuse("im2col", f"the GEMM view {global_region.source.name} of a convolution "
                     "is read by loads only (its elements alias each other)")
    if multicast_ctas is not None:
        raise refuse("multicast", "an im2col load is not split among a cluster's CTAs "
                     "(multicast=rank); give each CTA its own rows")

    def plan_tiled(global_view: GlobalView) -> TmaPlan:
        axes = refine(shared, global_view)
        return build_plan(axes, Context(shared, global_view, direction, prover, alignment,
                                        None, l2_promotion, im2col=True), max_box_axes=2)

    return plan_im2col(conv, shared, global_region, prover, oob, plan_tiled)


def _plan_pointwise(conv: ConvView, global_region, tiled, im2col, prover: Prover) -> TmaPlan:
    """A load from the GEMM view of a pointwise convolution (1x1 filter, stride 1, no
    padding): row ``(n, p, q)`` of the view is pixel ``(n, p, q)`` of X and column ``c`` its
    channel ``c``, so the view is X itself read as an (N*H*W, C) matrix. Over a packed X the
    tiled planner merges the pixels into one dimension of a 2-D map: the plain tiled copy
    of a matrix, with every option the tiled mode takes (a multicast load split among a
    cluster's CTAs, which an im2col load refuses) and no pixel walk, corners or tap offsets
    to encode. It is not faster: the implicit-GEMM conv2d's 36 pointwise ResNet-50 layers
    ran at 0.94-1.08x (geometric mean 1.005x) of their im2col loads in one run (H100,
    benchmarks/RESULTS.md section 8), within the run-to-run spread. It also takes a K block
    that runs past C (its columns past the matrix read zeros), which the im2col mode
    refuses (rule ``im2col``): conv2d gives a pointwise layer such blocks where C is no
    multiple of them (``kernels.conv2d_tiling.channel_block``). Both plans are made:
    the tiled one is taken when it needs no more issues than the im2col one (over a
    cropped image, say, a run of pixels is no run of memory and the tiled planner cannot
    box it), the im2col one otherwise, and when both are refused, the im2col refusal (the
    view is a convolution's) is raised. The prover keeps the records of the plan taken."""
    as_tiled, as_im2col = _attempt(tiled, prover), _attempt(im2col, prover)
    take_tiled = isinstance(as_tiled.result, TmaPlan) and (
        not isinstance(as_im2col.result, TmaPlan)
        or as_tiled.result.num_issues <= as_im2col.result.num_issues)
    chosen = (as_tiled if take_tiled else as_im2col).kept_by(prover)
    if not take_tiled:
        return chosen
    view = global_region.source.name
    return replace(chosen, notes=(*chosen.notes, (
        f"pointwise convolution (filter 1x1, stride 1x1, padding 0x0): {view} is the "
        f"activation as a ({conv.rows}, {conv.channels}) matrix, loaded in tiled mode "
        f"({chosen.num_issues} issue{'s' if chosen.num_issues > 1 else ''}"
        + (f" against the im2col load's {as_im2col.result.num_issues}"
           if isinstance(as_im2col.result, TmaPlan) else "") + ")")))


@dataclass(frozen=True)
class _Attempt:
    """One planning attempt: its plan or refusal, and the prover's records it made (what
    ``explain`` reports), taken off the prover until the attempt is kept."""

    result: TmaPlan | PlanError
    established: list
    unproven: list

    def kept_by(self, prover: Prover) -> TmaPlan:
        """Give the prover this attempt's records back; its plan, or raise its refusal."""
        prover.established.extend(self.established)
        prover.unproven.extend(self.unproven)
        if isinstance(self.result, PlanError):
            raise self.result
        return self.result


def _attempt(make_plan, prover: Prover) -> _Attempt:
    """Run ``make_plan()`` and take the records it made off the prover."""
    kept = len(prover.established), len(prover.unproven)
    try:
        result: TmaPlan | PlanError = make_plan()
    except PlanError as error:
        result = error
    attempt = _Attempt(result, prover.established[kept[0]:], prover.unproven[kept[1]:])
    del prover.established[kept[0]:], prover.unproven[kept[1]:]
    return attempt


def _first_plan(placements: tuple[GlobalView, ...], plan_view, prover: Prover) -> TmaPlan:
    """The plan of the first placement that is not refused, else the first refusal.

    The prover's records (``established``, ``unproven``: what ``explain`` reports) end up
    as the returned plan's own, or, on a refusal, as the first placement's.
    """
    refusal: _Attempt | None = None
    for global_view in placements:
        attempt = _attempt(lambda view=global_view: plan_view(view), prover)
        if isinstance(attempt.result, TmaPlan):
            return attempt.kept_by(prover)
        refusal = refusal or attempt
    assert refusal is not None  # global_placements returns at least one view
    return refusal.kept_by(prover)


#: The dynamic shared arena starts 1024-byte aligned in a kernel without static shared
#: memory (CUTLASS relies on the same); dispatch/arena_check.py refuses the other kernels.
DYNAMIC_SMEM_BASE_ALIGN = 1024
#: What is known of a static shared buffer's alignment without its allocation.
STATIC_SMEM_ALIGN = 16


def shared_alignment(buffer, allocation=None) -> int:
    """Bytes the start of ``buffer``'s allocation is aligned to: the dynamic arena's 1024,
    or a static allocation's declared alignment (``T.alloc_buffer(..., align=1024)`` emits
    ``alignas(1024)``) when the allocation is known."""
    if str(buffer.scope()) == "shared.dyn":
        return DYNAMIC_SMEM_BASE_ALIGN
    declared = getattr(allocation, "data_alignment", None) if allocation is not None else None
    return max(STATIC_SMEM_ALIGN, int(declared)) if declared is not None else STATIC_SMEM_ALIGN


def _check_oob(oob: str | None, direction: str) -> None:
    allowed = LOAD_OOB if direction == "g2s" else STORE_OOB
    if oob is None or oob in allowed:
        return
    kind = "global->shared" if direction == "g2s" else "shared->global"
    other = "shared->global" if direction == "g2s" else "global->shared"
    hint = f" (that one is for {other} copies)" if oob in LOAD_OOB + STORE_OOB else ""
    raise refuse("oob", f"oob={oob!r} on a {kind} copy{hint}; it takes {list(allowed)}")
