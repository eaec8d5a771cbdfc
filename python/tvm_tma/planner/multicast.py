"""Box splitting for cluster multicast: each CTA of the cluster issues 1/N of the tile.

A multicast load writes its box into the same shared offset of every CTA named by the mask
and completes the same mbarrier offset there. If each of the cluster's N CTAs issues a
different N-th of the tile's boxes with the full mask, the tile's global bytes are read once
per cluster and every CTA still receives the whole tile on its own mbarrier (whose expected
transaction bytes stay the whole tile's). This is CuTe's ``make_tma_copy(..., cluster_size)``.

The plan's issues, in issue order, are dealt out in N equal runs: CTA ``r`` makes issues
``[r * k, (r + 1) * k)`` with ``k = num_issues / N`` (``TmaPlan.cluster_split``). When the
issue count does not divide by N, boxes are cut, outermost box dimension first, as little as
needed: an outer box dimension becomes issues (each step one slice of it), and the dimension
that supplies the missing factor is cut into that many pieces. A cut dimension must be the
outermost of the box with an extent above one (a box lands densely in shared memory, so a
piece of an inner dimension would interleave with the next slice of an outer one); every
piece must start 128-byte aligned in shared memory, like every issue; a piece of dimension 0
must stay a whole number of 16-byte units and is never cut under a swizzle (its rows fill
the swizzle span whatever their width).

A piece of a swizzled tile stays on the tile's swizzle pattern wherever it starts: the
hardware swizzles absolute shared-address bits, and the tile's base is on the pattern period
(rule ``swizzle-base-period``), so a box that starts at row ``k`` of the tile lands exactly
where rows ``k, k+1, ...`` of the whole tile land (measured on the H100 and H200: a box
starting inside an aligned tile). Each piece lands at the same offset in every CTA, so on
the same pattern there too.
"""

from __future__ import annotations

from dataclasses import replace
from math import gcd

from .context import Context
from .errors import refuse
from .plan_types import SWIZZLE_GEOMETRY, IssueAxis, TmaPlan

#: Shared addresses of TMA issues are 128-byte aligned.
SMEM_ALIGN = 128


def split_among_ctas(plan: TmaPlan, ctas: int, ctx: Context) -> TmaPlan:
    """``plan`` with its issues dealt out among ``ctas`` CTAs, or a refusal."""
    if ctas == 1:
        return plan
    spec = plan.tensor_map
    piece_align = SMEM_ALIGN
    width = ctx.shared.element_bytes
    boxes = list(spec.box_dims)
    new_axes: list[IssueAxis] = []
    issues = plan.num_issues
    for dim in range(spec.rank - 1, -1, -1):
        need = ctas // gcd(issues, ctas)
        if need == 1:
            break
        extent = boxes[dim]
        if extent == 1:
            continue
        cut = next((f for f in range(need, extent + 1, need)
                    if extent % f == 0 and _piece_fits(plan, dim, extent // f, piece_align)),
                   None)
        whole = _piece_fits(plan, dim, 1, piece_align)
        if cut is None and not whole:
            break  # neither a cut of this dimension nor all of its slices will do
        pieces = cut if cut is not None else extent
        piece = extent // pieces
        row = _row_bytes(plan, dim)
        new_axes.append(IssueAxis(pieces, piece * row // width, dim, piece))
        boxes[dim] = piece
        issues *= pieces
        if piece > 1:
            break  # the dimensions inside this one now stay whole
    if issues % ctas:
        raise refuse(
            "multicast",
            f"the tile ({plan.num_issues} issue(s) of box {list(spec.box_dims)}) cannot be "
            f"split among {ctas} CTAs: no cut of its outer box dimensions gives a multiple of "
            f"{ctas} boxes that each start {piece_align}-byte aligned in shared memory (rows "
            "of a swizzled box are whole swizzle spans)")
    return replace(plan, tensor_map=replace(spec, box_dims=tuple(boxes)),
                   issue_axes=(*plan.issue_axes, *new_axes), cluster_split=ctas)


def _piece_fits(plan: TmaPlan, dim: int, piece: int, piece_align: int) -> bool:
    """A box dimension ``dim`` cut into pieces of ``piece`` keeps every piece aligned."""
    spec = plan.tensor_map
    if dim == 0 and (spec.swizzle or (piece * spec.element_bytes) % 16):
        return False
    return (piece * _row_bytes(plan, dim)) % piece_align == 0


def _row_bytes(plan: TmaPlan, dim: int) -> int:
    """Shared bytes one step of map dimension ``dim`` spans inside the box (rows of a
    swizzled box are padded to the span)."""
    spec = plan.tensor_map
    total = spec.element_bytes
    for inner in range(dim):
        extent = spec.box_dims[inner]
        if inner == 0 and spec.swizzle:
            total = max(total * extent, SWIZZLE_GEOMETRY[spec.swizzle][0])
        else:
            total *= extent
    return total
