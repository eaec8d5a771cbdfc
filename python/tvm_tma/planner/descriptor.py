"""L2 and L3: turn common copy axes into one tensor map and an issue loop.

L2 ("chain"): a TMA box lands in shared memory densely, dimension 0 fastest. So the axes
whose shared strides form the chain 1, e0, e0*e1, ... can be box dimensions; the chain is
cut into box segments of at most 256 elements (exactly the swizzle span for dimension 0 of
a swizzled tile), and every other axis becomes a step of the issue loop.

L3 ("stack"): each box segment and each stepping axis becomes a tensor-map dimension with
its global size, byte stride and start coordinate; box-1 dimensions that are contiguous in
global memory with another dimension are folded into it (fewer dims), dimension 0 may be
promoted to a wider element type when its box is over 256, and the result is checked
against every hardware rule. A map over rank 5 is retried with a shorter chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tvm

from .context import MAX_BOX, MAX_RANK, Context
from .errors import PlanError, refuse
from .plan_types import SWIZZLE_GEOMETRY, IssueAxis, TensorMapSpec, TmaPlan
from .proofs import Expr, Prover, as_int
from .reductions import reduction_map_dtype
from .refine import CopyAxis
from .rules import check_plan

#: Descriptor element type of each copy dtype (TMA moves bytes; the type only matters for
#: out-of-bounds NaN fill, which planned copies never hit).
_DESCRIPTOR_DTYPE = {
    1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64",
}
_NATIVE_DTYPES = {"float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8",
                  "uint16", "uint32", "uint64"}
_PROMOTED = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


@dataclass(eq=False)  # identity semantics: one global dim may be reached from several axes
class _Dim:
    """A tensor-map dimension under construction (element units of the copy dtype)."""

    size: Expr
    stride: Expr
    box: int
    coord: Expr
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (extent, smem, coord step)
    #: Every issue's box provably lies in [0, size) along this dim. A dim the copy may cross
    #: (``oob=``) keeps ``inside=False``, and no rewrite may change where its edge falls.
    inside: bool = True


def descriptor_dtype(dtype: str, element_bytes: int) -> str:
    return dtype if dtype in _NATIVE_DTYPES else _DESCRIPTOR_DTYPE[element_bytes]


def build_plan(axes: list[CopyAxis], ctx: Context, max_box_axes: int | None = None
               ) -> TmaPlan:
    """The plan with the longest legal box chain (fewest issues), or the reason there is none.

    ``max_box_axes`` caps the chain (an im2col box is two-dimensional: channels by pixels,
    so further axes must become issue steps)."""
    chain = _chain(axes)[:max_box_axes]
    failures: list[PlanError] = []
    for length in range(len(chain), 0, -1):
        try:
            return _plan_for_chain(axes, chain[:length], ctx)
        except PlanError as error:
            if error.rule != "rank":
                raise
            failures.append(error)
    raise failures[-1]


def _chain(axes: list[CopyAxis]) -> list[CopyAxis]:
    """Axes whose shared strides continue 1, e0, e0*e1, ...: the dense part of the region."""
    ordered = sorted(axes, key=lambda a: a.smem_stride)
    for inner, outer in zip(ordered, ordered[1:]):
        if outer.smem_stride < inner.smem_stride * inner.extent:
            raise refuse(
                "shared-injective",
                f"shared axes of stride {inner.smem_stride} (extent {inner.extent}) and stride "
                f"{outer.smem_stride} overlap",
            )
    if not ordered or ordered[0].smem_stride != 1:
        smallest = ordered[0].smem_stride if ordered else None
        raise refuse(
            "shared-chain",
            f"no shared axis of the region has stride 1 (smallest stride: {smallest})",
        )
    chain = [ordered[0]]
    for axis in ordered[1:]:
        if axis.smem_stride != chain[-1].smem_stride * chain[-1].extent:
            break
        chain.append(axis)
    return chain


def _plan_for_chain(axes: list[CopyAxis], chain: list[CopyAxis], ctx: Context) -> TmaPlan:
    prover = ctx.prover
    gdims = ctx.global_view.dims
    split_ok = {d: _split_allowed(axes, d, ctx) for d in {a.gdim for a in axes}}
    whole_dim: dict[int, _Dim] = {}  # gdims kept as one tensor-map dimension

    def dim_for(axis: CopyAxis) -> tuple[_Dim, int]:
        """The tensor-map dim an axis lives on, and the coordinate step of one axis step."""
        g = gdims[axis.gdim]
        if split_ok[axis.gdim]:
            if axis.outermost:
                return _Dim(prover.simplify(tvm.tirx.floordiv(g.size, axis.inner)),
                            prover.simplify(g.stride * axis.inner), 1,
                            prover.simplify(tvm.tirx.floordiv(g.start, axis.inner)),
                            inside=g.inside), 1
            return _Dim(axis.extent, prover.simplify(g.stride * axis.inner), 1, 0), 1
        if axis.gdim not in whole_dim:
            whole_dim[axis.gdim] = _Dim(g.size, g.stride, 1, g.start, inside=g.inside)
        return whole_dim[axis.gdim], axis.inner

    box_dims: list[_Dim] = []
    other_dims: list[_Dim] = []
    pending = list(chain)
    chained = True
    while pending:
        axis = pending.pop(0)
        if not chained or (not split_ok[axis.gdim] and axis.inner != 1):
            chained = False
            _add_step(axis, dim_for, box_dims, other_dims)
            continue
        dim, _ = dim_for(axis)
        first = not box_dims
        if first and not prover.prove(dim.stride == 1):
            raise refuse(
                "innermost-stride",
                f"the region's stride-1 shared axis has global stride {dim.stride} elements; "
                "the TMA box's inner dimension must be contiguous in global memory",
            )
        limit = _box_limit(axis, dim.coord, first, ctx)
        if axis.extent <= limit:
            dim.box = axis.extent
            box_dims.append(dim)
            continue
        factor = _split_factor(axis.extent, limit, dim, first, ctx)
        if factor is not None:
            # The inner `factor` elements become this box dim; the rest continues the chain.
            box_dims.append(_Dim(factor, dim.stride, factor, 0))
            rest = CopyAxis(axis.extent // factor, axis.smem_stride * factor, axis.gdim,
                            axis.inner * factor, axis.outermost)
            pending.insert(0, rest)
            continue
        # Cannot split at a provable coordinate: box the widest legal piece, step the rest.
        piece = _largest_divisor(axis.extent, limit, first, ctx)
        dim.box = piece
        dim.steps.append((axis.extent // piece, axis.smem_stride * piece, piece))
        box_dims.append(dim)
        chained = False
    for axis in axes:
        if axis not in chain:
            _add_step(axis, dim_for, box_dims, other_dims)
    for d, g in enumerate(gdims):
        # A unit dim of size 1 is coordinate 0 and can go, unless the copy may step off it
        # (oob=): then it keeps its edge like any other crossed dim.
        if g.extent == 1 and (not g.inside or not prover.prove(g.size == 1)) \
                and d not in whole_dim:
            other_dims.append(_Dim(g.size, g.stride, 1, g.start, inside=g.inside))
    for dim in whole_dim.values():
        if dim not in box_dims and dim not in other_dims:
            other_dims.append(dim)
    dims = _fold(box_dims, other_dims, prover, bool(ctx.shared.swizzle))
    return _finish(dims, ctx)


def _split_allowed(axes: list[CopyAxis], gdim: int, ctx: Context) -> bool:
    """A global dim may become several map dims only if its start sits on a piece boundary
    and, where the copy may cross its end, its size does too (else the outer map dim,
    ``size // inner`` long, would end before the tensor does)."""
    outer = [a for a in axes if a.gdim == gdim and a.outermost]
    if not outer or outer[0].inner == 1:
        return True
    dim = ctx.global_view.dims[gdim]
    inner = outer[0].inner
    return ctx.prover.divisible(dim.start, inner) and (
        dim.inside or ctx.prover.divisible(dim.size, inner))


def _add_step(axis: CopyAxis, dim_for, box_dims: list[_Dim], other_dims: list[_Dim]) -> None:
    """Make ``axis`` a step of the issue loop on the map dim it lives on.

    A global dim kept whole may already be a box dim (its innermost piece is boxed); then the
    outer pieces step its coordinate and it must not be added a second time.
    """
    dim, step = dim_for(axis)
    dim.steps.append((axis.extent, axis.smem_stride, step))
    if dim not in box_dims and dim not in other_dims:
        other_dims.append(dim)


def _box_limit(axis: CopyAxis, coord: Expr, first: bool, ctx: Context) -> int:
    """How many elements one box segment of this axis may hold."""
    if not first:
        return MAX_BOX
    shared = ctx.shared
    if shared.swizzle:
        span_bytes = SWIZZLE_GEOMETRY[shared.swizzle][0]
        span = span_bytes // shared.element_bytes
        if axis.extent % span:
            raise refuse(
                "swizzle-span",
                f"inner box of {axis.extent * shared.element_bytes} bytes does not fill whole "
                f"{span_bytes}-byte swizzle spans",
            )
        return span
    # Without swizzle a wider element type may carry a long contiguous run (see _promote).
    return MAX_BOX * _promotion_room(axis.extent, coord, ctx)


def _promotion_room(extent: int, coord: Expr, ctx: Context) -> int:
    """The widest element-type factor (1, 2, 4, 8 bytes total) dimension 0 could take.

    None under NaN fill: the fill needs the tensor's own floating-point element type.
    """
    if ctx.keeps_dtype:
        return 1
    factor = 1
    while (
        ctx.shared.element_bytes * factor * 2 <= 8
        and extent % (factor * 2) == 0
        and ctx.prover.divisible(coord, factor * 2)
    ):
        factor *= 2
    return factor


def _split_factor(extent: int, limit: int, dim: _Dim, first: bool, ctx: Context) -> int | None:
    """The largest legal inner piece at which the axis can become two map dims.

    Only proper factors (2 .. extent-1) split anything: a factor of 1 would re-queue the same
    axis forever (a prime extent over 256 has no other). On a dim the copy may cross, the
    dim's size must split too, or the outer map dim would end before the tensor.
    """
    for factor in range(min(limit, extent - 1), 1, -1):
        if extent % factor == 0 and _legal_inner(factor, first, ctx) and ctx.prover.divisible(
            dim.coord, factor
        ) and (dim.inside or ctx.prover.divisible(dim.size, factor)):
            return factor
    return None


def _largest_divisor(extent: int, limit: int, first: bool, ctx: Context) -> int:
    for factor in range(min(limit, extent), 0, -1):
        if extent % factor == 0 and _legal_inner(factor, first, ctx):
            return factor
    raise refuse(
        "inner-box-16B",
        f"no piece of the {extent}-element inner axis is a multiple of 16 bytes",
    )


def _legal_inner(factor: int, first: bool, ctx: Context) -> bool:
    """Dimension 0 pieces must be whole 16-byte units and, past 256, promotable."""
    if not first:
        return True
    width = ctx.shared.element_bytes
    if (factor * width) % 16:
        return False
    scale = 1
    while factor // scale > MAX_BOX:
        scale *= 2
    return width * scale <= 8 and factor % scale == 0


def _fold(box_dims: list[_Dim], other_dims: list[_Dim], prover: Prover, swizzled: bool
          ) -> list[_Dim]:
    """Fold dims into neighbours they are contiguous with in global memory (fewer dims).

    A box-1 dim ``a`` folds into ``b`` when ``stride_a == stride_b * size_b``: the pair is one
    dimension of ``size_a * size_b`` with coordinate ``coord_a * size_b + coord_b``. Two box
    dims fold only when ``b`` is boxed whole and they are neighbours in the chain, and never
    into a swizzled dimension 0 (its box is exactly the swizzle span). ``b`` must never be
    crossed: the folded dim's edge is only ``a``'s.
    """
    dims = box_dims + other_dims
    boxed = len(box_dims)
    changed = True
    while changed:
        changed = False
        for ai, a in enumerate(dims):
            for bi, b in enumerate(dims):
                if a is b or not b.inside or not prover.prove(a.stride == b.stride * b.size):
                    continue
                if a.box > 1 and not (
                    bi + 1 == ai < boxed and prover.prove(b.size == b.box)
                    and prover.prove(b.coord == 0)
                    and not b.steps and a.box * b.box <= MAX_BOX
                    and not (bi == 0 and swizzled)
                ):
                    continue
                b.box *= a.box
                b.coord = prover.simplify(a.coord * b.size + b.coord)
                b.steps.extend((n, smem, prover.simplify(step * b.size)) for n, smem, step in
                               a.steps)
                b.size = prover.simplify(a.size * b.size)
                b.inside = a.inside  # b is never crossed: the folded dim's edge is a's
                if ai < boxed:
                    boxed -= 1
                del dims[ai]
                changed = True
                break
            if changed:
                break
    return dims


def _promote(dims: list[_Dim], ctx: Context) -> tuple[str, int]:
    """Widen dimension 0's element type (1->2->4->8 bytes) until its box fits 256."""
    shared = ctx.shared
    width = shared.element_bytes
    dim0 = dims[0]
    while dim0.box > MAX_BOX:
        factor = 2
        if width * factor > 8:
            raise refuse("box-dim", f"inner box of {dim0.box} elements exceeds 256 even as "
                         "8-byte elements")
        if ctx.keeps_dtype:
            why = "NaN fill" if ctx.reduce is None else f"the {ctx.reduce} reduction"
            raise refuse("box-dim", f"inner box of {dim0.box} elements exceeds 256 and {why} "
                         f"keeps the {shared.dtype} element type (no promotion)")
        if dim0.box % factor or not ctx.prover.divisible(dim0.coord, factor) or any(
            step % factor for _, _, step in dim0.steps
        ) or not (dim0.inside or ctx.prover.divisible(dim0.size, factor)):
            raise refuse(
                "box-dim",
                f"inner box of {dim0.box} {width}-byte elements exceeds 256 and cannot be "
                f"promoted to {width * factor}-byte elements (coordinate {dim0.coord})",
            )
        dim0.box //= factor
        dim0.coord = ctx.prover.simplify(tvm.tirx.floordiv(dim0.coord, factor))
        dim0.size = ctx.prover.simplify(tvm.tirx.floordiv(dim0.size, factor))
        dim0.steps = [(n, smem, step // factor) for n, smem, step in dim0.steps]
        width *= factor
    if width == shared.element_bytes:
        dtype = descriptor_dtype(shared.dtype, width)
        return (dtype if ctx.reduce is None else reduction_map_dtype(ctx.reduce, dtype)), 1
    return _PROMOTED[width], width // shared.element_bytes


def _finish(dims: list[_Dim], ctx: Context) -> TmaPlan:
    if len(dims) > MAX_RANK:
        raise refuse("rank", f"the copy needs a rank-{len(dims)} tensor map (at most 5)")
    dtype, factor = _promote(dims, ctx)
    element_bytes = ctx.shared.element_bytes
    spec = TensorMapSpec(
        dtype=dtype,
        global_dims=tuple(d.size for d in dims),
        global_strides=tuple(ctx.prover.simplify(d.stride * element_bytes) for d in dims[1:]),
        box_dims=tuple(d.box for d in dims),
        element_strides=tuple(1 for _ in dims),
        swizzle=ctx.shared.swizzle,
        oob_fill=1 if ctx.global_view.fills_nan else 0,
        l2_promotion=ctx.l2_promotion,
    )
    issue_axes = tuple(
        IssueAxis(extent, smem, index, step)
        for index, d in enumerate(dims) for extent, smem, step in d.steps
    )
    issue_axes = tuple(sorted(issue_axes, key=lambda a: -a.smem_stride))
    plan = TmaPlan(
        direction=ctx.direction,
        tensor_map=spec,
        coordinates=tuple(d.coord for d in dims),
        smem_offset=ctx.shared.region_offset,
        issue_axes=issue_axes,
        notes=(f"dimension 0 promoted x{factor}",) if factor > 1 else (),
        base_offset=ctx.global_view.base_offset,
        edge_dims=tuple(index for index, d in enumerate(dims) if not d.inside),
        host_checks=ctx.global_view.host_checks,
        device_view=not all(ctx.prover.is_host_expr(value) for value in (
            ctx.global_view.base_offset, *spec.global_dims, *spec.global_strides)),
    )
    check_plan(plan, ctx)
    return plan


__all__ = ["Context", "build_plan", "as_int"]
