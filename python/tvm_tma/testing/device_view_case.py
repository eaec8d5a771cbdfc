"""A copy case's device-side view: its start and its rows read from a kernel argument.

A grouped kernel reads where its view starts and how many rows it has from device memory
(``offs[g - 1]:offs[g]``), so no host value names the view's base or its size: the planner
plans against the view itself and the dispatch rebinds the map on the device
(:mod:`tvm_tma.dispatch.device_view`). A :class:`~.copy_cases.CopyCase` with
``device_view=True`` performs its copy through such a view. Its kernel takes two more
arguments -- ``V`` (int32 ``[units, rows]``: the view's offset in 16-byte units and its
outermost extent) and ``W`` (the 256-byte map workspace, ``tensormap=W.ptr_to([0])``) --
and clamps what it reads (:class:`DeviceClamp`) so that the view provably stays inside the
allocation, as a kernel author must. Launched with the case's own values
(:func:`launch_values`), the view is exactly the static case's, so the case's truth
(:func:`~.copy_expected.expected_after`) is unchanged.

It exists apart from :mod:`.copy_cases` because both the kernel and the planner-only path
must build *the same* view from the same clamp: the kernel in TVMScript (local scalars
``units[0]`` and ``rows[0]``, whose stores the parser turns into facts with every read of
``V`` an unknown), the planner-only path from TIR nodes (:func:`planner_view`: the same
local scalars and the facts the parser would capture), and the model then binds those
scalars to the launch values (:func:`~.layout_eval.evaluate` reads a local scalar from its
environment), so it executes the very plan the device would rebind its map for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.tirx.layout import S, TileLayout


class CopyCase(Protocol):
    """What this module reads of a :class:`~.copy_cases.CopyCase` (a protocol, so that
    :mod:`.copy_cases`, which builds device-view kernels from this module, is not imported
    back: the package's import graph stays acyclic)."""

    dtype: str
    global_shape: tuple[int, ...]
    global_start: tuple[int, ...]
    global_extent: tuple[int, ...]
    global_offset: int
    global_tiles: object
    stages: int
    cluster: int
    loop: object

    @property
    def element_bytes(self) -> int: ...

    @property
    def g_strides(self) -> tuple[int, ...]: ...

    @property
    def view_in_kernel(self) -> bool: ...

#: Bytes of one unit of the view's offset: a map's base must be 16-byte aligned.
UNIT_BYTES = 16
#: Bytes of the ``tensormap=`` workspace: two 128-byte slots (one CTA).
WORKSPACE_BYTES = 256
#: The rules a device-side view adds (:mod:`tvm_tma.dispatch.device_view`): a refusal of a
#: device-view case names one of them, or the rule its static twin is refused with.
DEVICE_VIEW_RULES = ("global-view-bounds", "global-dim", "global-stride",
                     "global-address-align", "tensormap-slot")


@dataclass(frozen=True)
class DeviceClamp:
    """What the kernel makes of ``V``: ``units = min(max(V[0], 0), max_units)`` and
    ``rows = min(max(V[1], min_rows), max_rows)``; the view starts ``units * unit +
    remainder`` elements into the allocation and has ``rows`` rows.

    ``max_units`` and ``max_rows`` are the static case's (the view at its largest is the
    static one, inside the allocation); ``remainder`` keeps a misaligned offset misaligned
    (refused by name: a device-side base must be provably 16-byte aligned); ``min_rows``
    is the static region's reach along dim 0 when it ends inside the view (the guard a
    kernel writes before a copy that must stay inside: ``if rows >= 64``), else 1 (a copy
    with ``oob=`` that may cross the view's end, and a view that is never empty).
    """

    unit: int
    max_units: int
    remainder: int
    min_rows: int
    max_rows: int

    def units(self, loaded):
        """The view's offset in units, clamped (``loaded``: what the kernel read)."""
        return T.min(T.max(loaded, 0), self.max_units)

    def rows(self, loaded):
        """The view's outermost extent, clamped."""
        return T.min(T.max(loaded, self.min_rows), self.max_rows)

    def offset(self, units):
        """The view's element offset from ``units``."""
        return units * self.unit + self.remainder


def device_clamp(case: CopyCase) -> DeviceClamp:
    """The clamp of ``case``'s view (see :class:`DeviceClamp`)."""
    unit = max(1, UNIT_BYTES // case.element_bytes)
    start, rows = case.global_start[0], case.global_shape[0]
    reach = start + case.global_extent[0] * max(case.stages, 1)
    inside = start >= 0 and reach <= rows
    return DeviceClamp(unit, case.global_offset // unit, case.global_offset % unit,
                       max(1, reach) if inside else 1, rows)


#: ``V`` of one launch: the view's offset in 16-byte units and its rows.
Launch = tuple[int, int]


def launch_values(case: CopyCase) -> Launch:
    """``V`` of the case's own launch: the static view's offset in units and its rows (the
    view then is the static case's, and so is the copy's truth)."""
    clamp = device_clamp(case)
    return clamp.max_units, clamp.max_rows


def launches(case: CopyCase) -> tuple[Launch, ...]:
    """The launches a device-view case is checked at: its own, then one that places the
    view elsewhere (half the offset) and makes it shorter (ending one row into the region
    when the copy may cross its end, else where the region ends), which a map bound to the
    static view instead of the device's values would miscopy."""
    clamp = device_clamp(case)
    rows = max(clamp.min_rows, min(clamp.max_rows, case.global_start[0] + 1))
    other = (clamp.max_units // 2, rows)
    own = launch_values(case)
    return (own,) if other == own else (own, other)


def clamped(case: CopyCase, launch: Launch) -> Launch:
    """The values the kernel's scalars ``units[0]`` and ``rows[0]`` hold after a launch
    with ``V = launch`` (Python's reading of :meth:`DeviceClamp.units` and ``rows``)."""
    clamp = device_clamp(case)
    return (min(max(launch[0], 0), clamp.max_units),
            min(max(launch[1], clamp.min_rows), clamp.max_rows))


def relaunched(case: CopyCase, launch: Launch) -> CopyCase:
    """The static case a launch of ``case``'s kernel with ``V = launch`` performs: the view
    at the clamped offset with the clamped rows (its truth is
    :func:`~.copy_expected.expected_after` of that case)."""
    units, rows = clamped(case, launch)
    clamp = device_clamp(case)
    return replace(case, global_shape=device_shape(case, rows), device_view=False,
                   global_offset=clamp.offset(units))


def launch_array(launch: Launch) -> np.ndarray:
    """``V`` as the kernel reads it (int32)."""
    return np.array(launch, dtype=np.int32)


def device_shape(case: CopyCase, rows) -> tuple:
    """The view's shape with ``rows`` (a device-side value) as its outermost extent."""
    return (rows, *case.global_shape[1:])


def device_layout(case: CopyCase, rows) -> TileLayout:
    """The view's layout with ``rows`` rows: its strides are the static view's."""
    return TileLayout(S[device_shape(case, rows) : tuple(case.g_strides)])


@dataclass(frozen=True)
class PlannerView:
    """A device-side view as the dispatch sees it, for planner-only tests.

    ``view`` is declared over ``storage`` (the kernel argument) with the local scalars
    ``units[0]``/``rows[0]`` in its offset and shape; ``facts`` are what the parser captures
    from the kernel's clamps; ``env`` binds the two scalars to the launch values, for the
    model (:func:`~.layout_eval.evaluate`).
    """

    view: object
    storage: object
    facts: tuple
    env: dict


def planner_view(case: CopyCase, storage, launch: Launch | None = None) -> PlannerView:
    """The device-side view of ``case`` over the kernel argument ``storage``, its scalars
    bound (``env``) to what a launch with ``V = launch`` (default: the case's own) leaves.

    The facts are the ones :func:`tvm_tma.dispatch.facts.scalar_value` makes of the
    kernel's ``units[0] = clamp.units(V[0])``: each read of ``V`` becomes a fresh unknown.
    """
    clamp = device_clamp(case)
    units = tvm.tirx.decl_buffer((1,), "int32", "units", scope="local")
    rows = tvm.tirx.decl_buffer((1,), "int32", "rows", scope="local")
    loaded = [tvm.tirx.Var("loaded", "int32") for _ in range(2)]
    facts = (tvm.tirx.EQ(units[0], clamp.units(loaded[0])),
             tvm.tirx.EQ(rows[0], clamp.rows(loaded[1])))
    view = tvm.tirx.decl_buffer(device_shape(case, rows[0]), case.dtype, "A",
                                data=storage.data, elem_offset=clamp.offset(units[0]),
                                layout=device_layout(case, rows[0]))
    values = clamped(case, launch_values(case) if launch is None else launch)
    return PlannerView(view, storage, facts, {units: values[0], rows: values[1]})


def mentions_device_values(value) -> bool:
    """Whether ``value`` reads a buffer (a device-side value, e.g. a local scalar)."""
    if isinstance(value, int):
        return False
    return any(type(var.ty).__name__ == "BufferType"
               for var in tvm.tirx.analysis.undefined_vars(value))


def device_eligible(case: CopyCase) -> bool:
    """A case whose view may be device-side: declared in the kernel at an offset with one
    stride per dim, in the one-CTA copy kernel (no cluster, no persistent loop)."""
    return (case.view_in_kernel and case.global_tiles is None and not case.cluster
            and case.loop is None)
