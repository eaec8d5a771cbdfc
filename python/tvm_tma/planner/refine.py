"""L1, part two: factor both sides of a copy into common axes.

Both regions enumerate the same elements in the same row-major order, but each side cuts
that order into its own iterators (a 128B-swizzled tile splits a 256-wide row into 4 x 64;
the global side does not). Walking both iterator lists from the innermost end and splitting
whichever is longer gives the coarsest common refinement: a list of :class:`CopyAxis`, each
with one shared stride and one global stride. This is CuTe's "coalesce both layouts against
each other", in a dozen lines.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import refuse
from .global_view import GlobalView
from .views import SharedView


@dataclass(frozen=True)
class CopyAxis:
    """One axis of the copy: ``extent`` steps, ``smem_stride`` apart in shared memory.

    On the global side the axis is a piece of dimension ``gdim``; ``inner`` is the product of
    the extents of the pieces of that dimension inside this one (so its global stride is
    ``stride[gdim] * inner``), and ``outermost`` marks the piece that holds the dimension's
    region start.
    """

    extent: int
    smem_stride: int
    gdim: int
    inner: int
    outermost: bool


def refine(shared: SharedView, global_view: GlobalView) -> list[CopyAxis]:
    """The common refinement of both sides, outermost axis first."""
    shared_iters = list(shared.iters)
    global_iters = [(d.extent, dim) for dim, d in enumerate(global_view.dims) if d.extent != 1]
    total_shared = _product(e for e, _ in shared_iters)
    total_global = _product(e for e, _ in global_iters)
    if total_shared != total_global:
        raise refuse(
            "extent",
            f"shared region holds {total_shared} elements but global region {total_global}",
        )

    axes: list[CopyAxis] = []
    inner_of_dim: dict[int, int] = {}
    s_extent = g_extent = 0
    s_stride = g_dim = 0
    while shared_iters or s_extent > 1:
        if s_extent <= 1:
            s_extent, s_stride = shared_iters.pop()
        if g_extent <= 1:
            g_extent, g_dim = global_iters.pop()
        step = min(s_extent, g_extent)
        if s_extent % step or g_extent % step:
            raise refuse(
                "layout-mismatch",
                f"shared iterator of extent {s_extent} and global extent {g_extent} "
                "do not divide each other",
            )
        inner = inner_of_dim.get(g_dim, 1)
        axes.append(CopyAxis(step, s_stride, g_dim, inner, outermost=False))
        inner_of_dim[g_dim] = inner * step
        s_extent //= step
        s_stride *= step
        g_extent //= step
    axes.reverse()
    return _mark_outermost(_coalesce(axes))


def _coalesce(axes: list[CopyAxis]) -> list[CopyAxis]:
    """Merge neighbours that are contiguous on both sides and belong to one global dim."""
    merged: list[CopyAxis] = []
    for axis in reversed(axes):  # innermost first
        if merged:
            last = merged[-1]
            if (
                axis.gdim == last.gdim
                and axis.inner == last.inner * last.extent
                and axis.smem_stride == last.smem_stride * last.extent
            ):
                merged[-1] = CopyAxis(
                    last.extent * axis.extent, last.smem_stride, last.gdim, last.inner, False
                )
                continue
        merged.append(axis)
    merged.reverse()
    return merged


def _mark_outermost(axes: list[CopyAxis]) -> list[CopyAxis]:
    widest: dict[int, int] = {}
    for index, axis in enumerate(axes):
        if axis.gdim not in widest or axis.inner > axes[widest[axis.gdim]].inner:
            widest[axis.gdim] = index
    return [
        CopyAxis(a.extent, a.smem_stride, a.gdim, a.inner, outermost=widest[a.gdim] == i)
        for i, a in enumerate(axes)
    ]


def _product(values) -> int:
    total = 1
    for value in values:
        total *= value
    return total
