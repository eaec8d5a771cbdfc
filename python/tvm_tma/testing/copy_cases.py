"""One TMA copy as a test case: its buffers, the kernel that performs it, and its truth.

A :class:`CopyCase` describes a global tensor, a shared buffer (plain, padded, swizzled,
multi-stage), the two regions and the direction. From it we build

* the BufferRegions the planner sees (:func:`planner_regions`),
* a TVMScript kernel that performs the copy with ``dispatch="tma"`` and dumps every
  shared element, so a GPU run checks placement *and* that nothing else was touched
  (:func:`build_kernel`),
* the expected bytes, from TVM's own layout semantics (:func:`expected_after`, with the
  input data and the reduction arithmetic, lives in :mod:`.copy_expected`; its names are
  importable from here too).

Two variants share the one-CTA case: ``cluster=N`` runs the load as a multicast in an
N-CTA cluster (each CTA issues its share of the boxes, every CTA receives the whole tile),
and ``reduce=op`` makes the store a tensor reduction into the global region. A view declared
in the kernel may be device-side (``device_view``, :mod:`.device_view_case`): the kernel
reads its offset and rows from an argument, and its map is rebound on the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

from .copy_expected import (
    NAN_FILL_BYTES,
    expected_after,
    numpy_dtype,
    random_array,
    reduce_elements,
    reduction_array,
)
from .device_view_case import (
    WORKSPACE_BYTES,
    PlannerView,
    device_clamp,
    device_eligible,
    device_layout,
    device_shape,
    planner_view,
)
from .layout_eval import layout_offsets
from .loop_forms import LoopForm

__all__ = [
    "GLOBAL_PAD_BYTE", "MAX_CLUSTER", "MIN_CLUSTER", "NAN_FILL_BYTES", "POISON_BYTE", "THREADS",
    "CopyCase", "build_kernel", "expected_after", "global_layout_of", "global_offsets",
    "global_storage", "numpy_dtype", "planner_regions", "random_array", "reduce_elements",
    "reduction_array", "row_major_strides", "shared_layout_of", "shared_span",
    "storage_argument",
]

THREADS = 128
POISON_BYTE = 0xA5
#: Fill of the global allocation's bytes outside the view (row padding, the view offset);
#: distinct from the shared poison so a byte moved from padding into shared memory shows.
GLOBAL_PAD_BYTE = 0x5A
#: Cluster sizes a case may multicast in (the kernel launches one cluster of that many CTAs).
MIN_CLUSTER, MAX_CLUSTER = 2, 4


@dataclass(frozen=True)
class CopyCase:
    """``direction`` g2s copies ``global[region] -> shared[region]``; s2g the reverse.

    ``shared_layout`` is ``"row"`` (row-major), ``"padded:<n>"`` (row-major with ``n`` extra
    elements per row), ``"swizzle:<mode>"`` (TVM's MMA shared layout, modes 0..3, over the
    last two dims) or ``"blocked:<r>:<gap>"`` (row-major blocks of ``r`` rows of the last two
    dims, ``gap`` elements between blocks: one logical dim, two strides). ``stages > 0``
    makes dim 0 of the shared buffer a stage index that a kernel loop walks: stage ``s``
    copies the global region shifted by ``s * extent`` rows.

    The global tensor is a view into a flat allocation: ``global_strides`` are its element
    strides (``None``: row-major and dense, padded rows otherwise) and ``global_offset`` is
    the element index of its origin in the allocation. A view at offset 0 is the kernel's
    argument (matched with its strides); a view at another offset is declared inside the
    kernel over the flat allocation, as kernel authors write views
    (``T.decl_buffer(shape, dtype, A.data, elem_offset=...)``). Bytes of the allocation
    outside the view hold :data:`GLOBAL_PAD_BYTE`.

    ``oob`` (``"zero"``/``"nan"`` for g2s, ``"skip"`` for s2g) lets the global region cross
    the view's edges (a load's region may even start before it): a load fills the elements
    outside the view, a store leaves them alone.

    ``cluster`` (g2s only) is 0 for the one-CTA kernel, or N in 2..4: the kernel runs one
    cluster of N CTAs, each copy is ``copy_async(..., multicast=rank)`` (the tile's boxes
    dealt out among the N CTAs, each box landing in all of them) and ``D`` has a leading dim
    of N: CTA ``r`` seeds its shared memory from ``D[r]`` and writes its whole image back
    there. ``reduce`` (s2g only) names a tensor reduction: the store combines the shared
    data into the global region, ``global = op(global, shared)`` in the element type.

    ``device_view`` (a view declared in the one-CTA kernel at an offset, one stride per
    dim) makes the view's offset and outermost extent device-side values: the kernel reads
    them from an int32 argument ``V`` and clamps them so the view stays in the allocation,
    and the copy rebinds its map in a workspace argument ``W`` (:mod:`.device_view_case`).
    Launched with the case's own values, it copies what the static case copies.
    """

    name: str
    dtype: str
    direction: str
    global_shape: tuple[int, ...]
    global_start: tuple[int, ...]
    global_extent: tuple[int, ...]
    shared_shape: tuple[int, ...]
    shared_layout: str = "row"
    shared_start: tuple[int, ...] | None = None
    shared_extent: tuple[int, ...] | None = None
    smem_elem_offset: int = 0
    stages: int = 0
    expect: dict = field(default_factory=dict)  # plan facts the test asserts exactly
    global_strides: tuple[int, ...] | None = None  # element strides; None: dense row-major
    global_offset: int = 0  # elements from the allocation start to the view's origin
    #: ``cache_hint=`` of the copy: an L2 eviction priority name, or None for no hint
    cache_hint: str | None = None
    #: ``oob=`` of the copy, or None: the region must lie inside the view
    oob: str | None = None
    #: A global layout whose dims are several strided pieces, ``(piece extents, piece
    #: strides)`` of ``TileLayout(S[extents : strides])`` over ``global_shape`` (a tiled or
    #: interleaved tensor); None: one stride per dim (``global_strides``)
    global_tiles: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    #: CTAs of the cluster a multicast load is split among (0: one CTA, no multicast)
    cluster: int = 0
    #: ``reduce=`` of a store (a tensor reduction op), or None for a plain store
    reduce: str | None = None
    #: A persistent tile loop around the copy (:mod:`.loop_forms`; its kernel and truth are
    #: :mod:`.loop_kernel`'s), or None for the one-copy kernel
    loop: LoopForm | None = None
    #: The view's offset and outermost extent are device-side values, read from a kernel
    #: argument and clamped (:mod:`.device_view_case`): the map is rebound on the device
    device_view: bool = False

    def __post_init__(self) -> None:
        # The two variants exist for one direction each (the kernel could not express the
        # other): refuse them here rather than build a kernel that means something else.
        if self.cluster and not (MIN_CLUSTER <= self.cluster <= MAX_CLUSTER
                                 and self.direction == "g2s"):
            raise ValueError(f"cluster={self.cluster}: a multicast load in a cluster of "
                             f"{MIN_CLUSTER}..{MAX_CLUSTER} CTAs (g2s only)")
        if self.reduce is not None and self.direction != "s2g":
            raise ValueError(f"reduce={self.reduce!r} is for s2g copies")
        if self.loop is not None and (self.cluster or self.reduce or self.stages):
            raise ValueError("a loop case is a plain one-stage copy (no cluster, reduce, stages)")
        if self.device_view and not device_eligible(self):
            raise ValueError("a device-side view is declared in the one-CTA kernel at an "
                             "offset, with one stride per dim (no pieces, cluster or loop)")

    @property
    def element_bytes(self) -> int:
        return tvm.DataType(self.dtype).bits // 8

    @property
    def s_start(self) -> tuple[int, ...]:
        return self.shared_start or tuple(0 for _ in self.shared_shape)

    @property
    def s_extent(self) -> tuple[int, ...]:
        if self.shared_extent is not None:
            return self.shared_extent
        if self.stages:
            return (1, *self.shared_shape[1:])
        return self.shared_shape

    @property
    def copy_bytes(self) -> int:
        return math.prod(self.global_extent) * self.element_bytes

    @property
    def g_strides(self) -> tuple[int, ...]:
        """Element strides of the global view (row-major when ``global_strides`` is None)."""
        if self.global_strides is not None:
            return tuple(self.global_strides)
        return row_major_strides(self.global_shape)

    @property
    def global_is_dense(self) -> bool:
        """The view is its whole allocation, row-major (the kernel takes a plain array)."""
        return (self.global_offset == 0 and self.global_tiles is None
                and self.g_strides == row_major_strides(self.global_shape))

    @property
    def view_in_kernel(self) -> bool:
        """The kernel takes the flat allocation and declares the view over it."""
        return self.global_offset != 0 or self.global_tiles is not None

    @property
    def global_storage_elems(self) -> int:
        """Elements of the allocation the view lives in: up to its largest offset, and for a
        view declared in the kernel 256 bytes more (a copy that wrote past the view would
        show there)."""
        if self.global_tiles is not None:
            extents, strides = self.global_tiles
            reach = sum((n - 1) * abs(s) for n, s in zip(extents, strides))
        else:
            reach = sum((n - 1) * abs(s) for n, s in zip(self.global_shape, self.g_strides))
        tail = 256 // self.element_bytes if self.view_in_kernel else 0
        return self.global_offset + reach + 1 + tail

    @property
    def shared_bytes(self) -> int:
        return (math.prod(self.shared_shape) + self.smem_elem_offset) * self.element_bytes

    @property
    def images_shape(self) -> tuple[int, ...]:
        """Shape of ``D``: the shared buffer, once per CTA of the cluster in a cluster case."""
        return ((self.cluster,) if self.cluster else ()) + tuple(self.shared_shape)

    def stage_starts(self, stage) -> tuple[tuple, tuple]:
        """(shared start, global start) of one stage (stage may be a TIR variable)."""
        if not self.stages:
            return self.s_start, self.global_start
        s_start = (stage, *self.s_start[1:])
        g_start = (self.global_start[0] + stage * self.global_extent[0], *self.global_start[1:])
        return s_start, g_start


def row_major_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.insert(0, step)
        step *= extent
    return tuple(strides)


def shared_layout_of(case: CopyCase):
    kind, _, argument = case.shared_layout.partition(":")
    shape = case.shared_shape
    if kind == "row":
        return TileLayout(S[tuple(shape)])
    if kind == "padded":
        pitch = shape[-1] + int(argument)
        strides, step = [], 1
        for extent in reversed([*shape[:-1], pitch]):
            strides.insert(0, step)
            step *= extent
        return TileLayout(S[tuple(shape) : tuple(strides)])
    if kind == "swizzle":
        from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout

        return mma_shared_layout(case.dtype, int(argument), tuple(shape))
    if kind == "blocked":
        rows, gap = (int(v) for v in argument.split(":"))
        *lead, m, k = shape
        if m % rows:
            raise ValueError(f"blocked:{argument} needs rows ({m}) divisible by {rows}")
        block = rows * k + gap
        step = (m // rows) * block
        lead_strides = []
        for extent in reversed(lead):
            lead_strides.insert(0, step)
            step *= extent
        return TileLayout(S[(*lead, m // rows, rows, k) : (*lead_strides, block, k, 1)])
    raise ValueError(f"unknown shared layout {case.shared_layout!r}")


def shared_span(case: CopyCase) -> int:
    """Elements the shared buffer's layout can address (its allocation size)."""
    offsets = layout_offsets(shared_layout_of(case), case.shared_shape)
    return int(offsets.max()) + 1


def global_layout_of(case: CopyCase) -> TileLayout:
    if case.global_tiles is not None:
        extents, strides = case.global_tiles
        return TileLayout(S[tuple(extents) : tuple(strides)])
    if case.global_strides is None:
        return TileLayout(S[tuple(case.global_shape)])
    return TileLayout(S[tuple(case.global_shape) : tuple(case.global_strides)])


def global_offsets(case: CopyCase) -> np.ndarray:
    """Allocation element index of every element of the global view (array of its shape)."""
    if case.global_tiles is not None:
        return case.global_offset + layout_offsets(global_layout_of(case), case.global_shape)
    grids = np.indices(case.global_shape, dtype=np.int64)
    offsets = np.full(case.global_shape, case.global_offset, dtype=np.int64)
    for grid, stride in zip(grids, case.g_strides):
        offsets += grid * stride
    return offsets


def global_storage(case: CopyCase, logical: np.ndarray, elems: int | None = None
                   ) -> np.ndarray:
    """The flat allocation holding ``logical`` at the view's offsets, padding elsewhere;
    ``elems`` elements long (default: the case's own allocation; a device-view kernel
    launched at another view runs in the case's allocation)."""
    elems = case.global_storage_elems if elems is None else elems
    storage = np.full(elems * case.element_bytes, GLOBAL_PAD_BYTE,
                      np.uint8).view(logical.dtype)
    storage[global_offsets(case).reshape(-1)] = logical.reshape(-1)
    return storage


def _ranges(starts, extents):
    return [tvm.ir.Range.from_min_extent(s, e) for s, e in zip(starts, extents)]


def storage_argument(case: CopyCase):
    """The flat allocation a view declared in the kernel aliases (the kernel's argument)."""
    storage = case.global_storage_elems
    return tvm.tirx.decl_buffer((storage,), case.dtype, "A_storage",
                                layout=TileLayout(S[storage]))


def planner_regions(case: CopyCase, stage=0, device: PlannerView | None = None):
    """(dst, src) BufferRegions as the dispatch would see them, for planner-only tests.

    A device-view case's global buffer is ``device.view``
    (:func:`~.device_view_case.planner_view`, made here when not given; plan with its facts
    and its storage as the argument, as :func:`~.runner.plans_of` does)."""
    layout = shared_layout_of(case)
    shared = tvm.tirx.decl_buffer(case.shared_shape, case.dtype, "smem",
                                  elem_offset=case.smem_elem_offset, layout=layout,
                                  scope="shared.dyn")
    if case.device_view:
        glob = (device or planner_view(case, storage_argument(case))).view
    else:
        data = storage_argument(case).data if case.view_in_kernel else None
        glob = tvm.tirx.decl_buffer(case.global_shape, case.dtype, "A", data=data,
                                    elem_offset=case.global_offset,
                                    layout=global_layout_of(case))
    s_start, g_start = case.stage_starts(stage)
    s_region = tvm.tirx.BufferRegion(shared, _ranges(s_start, case.s_extent))
    g_region = tvm.tirx.BufferRegion(glob, _ranges(g_start, case.global_extent))
    return (s_region, g_region) if case.direction == "g2s" else (g_region, s_region)


def _unravel(flat, shape):
    index, out = flat, []
    for extent in reversed(shape):
        out.insert(0, index % extent)
        index = index // extent
    return out


def _slices(starts, extents):
    return tuple(slice(s, s + e) for s, e in zip(starts, extents))


def _dump_index(case: CopyCase, rank, flat) -> tuple:
    """Index of ``D`` for shared element ``flat``: in a cluster case, in CTA ``rank``'s image."""
    index = tuple(_unravel(flat, case.shared_shape))
    return (rank, *index) if case.cluster else index


def _copy_options(case: CopyCase, rank, workspace) -> dict:
    """The copy's options beyond dispatch/mbar/cache_hint (only those the case sets, so a
    plain case's call is what it always was); ``workspace`` holds a device-side view's map
    slots."""
    options = {} if case.oob is None else {"oob": case.oob}
    if case.cluster:
        options["multicast"] = rank
    if case.reduce is not None:
        options["reduce"] = case.reduce
    if case.device_view:
        options["tensormap"] = workspace.ptr_to([0])
    return options


def build_kernel(case: CopyCase, dispatch: str = "tma"):
    """A kernel ``main(A, D)`` that performs the copy with ``dispatch`` ("tma").

    g2s: ``D`` (shared shape) seeds shared memory (poison), the TMA load overwrites the
    region, and every shared element is written back to ``D``. s2g: ``D`` fills shared
    memory, the TMA store (or reduction) writes the region of ``A``. A global view that is
    not a dense row-major array (:attr:`CopyCase.global_is_dense`) is matched with its
    strides (and offset): the caller passes a strided view of the allocation
    (:func:`global_storage`).

    A cluster case launches one cluster of ``case.cluster`` CTAs; ``D`` holds one image per
    CTA (:attr:`CopyCase.images_shape`). Each CTA expects the whole tile's bytes on its own
    mbarrier before it issues its share: a peer's boxes may complete on it first.

    A device-view case's kernel is ``main(A, D, V, W)``: where the copy stands it reads the
    view's offset and rows from ``V``, clamps them into local scalars and declares the view
    over ``A`` with them (:mod:`.device_view_case`); the copy rebinds its map in the
    workspace ``W`` (``tensormap=W.ptr_to([0])``).
    """
    g_shape, s_shape, dtype = case.global_shape, case.shared_shape, case.dtype
    layout = shared_layout_of(case)
    span = shared_span(case)
    total = math.prod(s_shape)
    arena = (case.smem_elem_offset + span) * case.element_bytes
    mbar_slot = (arena + 7) // 8
    stages = max(case.stages, 1)
    nbytes = case.copy_bytes * stages
    g2s = case.direction == "g2s"
    clustered = case.cluster > 0
    expect_last = g2s and not clustered  # a one-CTA load expects its bytes after issuing
    d_shape = case.images_shape
    g_layout = global_layout_of(case)
    g_args = {} if case.global_is_dense else dict(strides=case.g_strides)
    in_kernel = case.view_in_kernel
    device = case.device_view
    clamp = device_clamp(case) if device else None
    arg_shape = (case.global_storage_elems,) if in_kernel else g_shape
    arg_layout = TileLayout(S[arg_shape]) if in_kernel else g_layout

    def regions(stage, smem, glob):
        s_start, g_start = case.stage_starts(stage)
        s_reg = smem[_slices(s_start, case.s_extent)]
        g_reg = glob[_slices(g_start, case.global_extent)]
        return (s_reg, g_reg) if g2s else (g_reg, s_reg)

    # fmt: off
    @T.inline
    def copy(stage, smem, glob, mbar, rank, W):
        dst, src = T.meta_var(regions(stage, smem, glob))
        if g2s:
            Tx.copy_async(dst, src, dispatch=dispatch, mbar=mbar.ptr_to([0]),
                          cache_hint=case.cache_hint, **_copy_options(case, rank, W))
        else:
            Tx.copy_async(dst, src, dispatch=dispatch, cache_hint=case.cache_hint,
                          **_copy_options(case, rank, W))

    @T.inline
    def body(G, D, V, W):
        if not device:  # (a device-side view is declared where the copy stands, below)
            if in_kernel:  # a view at an offset inside the argument, as kernel authors write
                A = T.decl_buffer(g_shape, dtype, G.data, elem_offset=case.global_offset,
                                  layout=g_layout)
            else:
                A = T.meta_var(G)
        T.device_entry()
        if clustered:
            T.cluster_id([1])
            rank = T.cta_id_in_cluster([case.cluster])
        else:
            T.cta_id([1])
            rank = T.meta_var(0)
        tid = T.thread_id([THREADS])
        dyn = T.alloc_buffer((mbar_slot * 8 + 8,), "uint8", scope="shared.dyn")
        smem = T.decl_buffer(s_shape, dtype, dyn.data, elem_offset=case.smem_elem_offset,
                             layout=layout)
        mbar = T.decl_buffer((1,), "uint64", dyn.data, elem_offset=mbar_slot)
        if device:
            units = T.alloc_local((1,), "int32")
            rows = T.alloc_local((1,), "int32")
        for flat in T.serial(tid, total, step=THREADS):
            smem[tuple(_unravel(flat, s_shape))] = D[_dump_index(case, rank, flat)]
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        if clustered:
            # Every CTA's mbarrier (and seeded image) is ready before any peer multicasts.
            T.ptx.fence.mbarrier_init.release.cluster()
            T.cuda.cluster_sync()
        else:
            T.cuda.cta_sync()
        if tid == 0:
            if clustered:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(nbytes))
            for stage in T.serial(stages):
                if device:  # read and clamp where the copy stands: the facts hold there
                    units[0] = clamp.units(V[0])
                    rows[0] = clamp.rows(V[1])
                    A = T.decl_buffer(device_shape(case, rows[0]), dtype, G.data,
                                      elem_offset=clamp.offset(units[0]),
                                      layout=device_layout(case, rows[0]))
                copy(stage, smem, A, mbar, rank, W)
            if expect_last:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(nbytes))
            elif not g2s:
                T.ptx.cp.async_.bulk.commit_group()
                T.ptx.cp.async_.bulk.wait_group(0)
        if g2s:
            T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
            for flat in T.serial(tid, total, step=THREADS):
                D[_dump_index(case, rank, flat)] = smem[tuple(_unravel(flat, s_shape))]
        if clustered:
            T.cuda.cluster_sync()  # no CTA exits while a peer may still multicast into it

    # Only the kernel of the case is parsed: the other's arguments would not fit the body.
    if device:
        @T.prim_func
        def main(A_ptr: T.handle, D_ptr: T.handle, V_ptr: T.handle, W_ptr: T.handle):
            G = T.match_buffer(A_ptr, arg_shape, dtype, layout=arg_layout)
            D = T.match_buffer(D_ptr, d_shape, dtype, layout=TileLayout(S[tuple(d_shape)]))
            V = T.match_buffer(V_ptr, (2,), "int32")
            W = T.match_buffer(W_ptr, (WORKSPACE_BYTES,), "uint8")
            body(G, D, V, W)
    else:
        @T.prim_func
        def main(A_ptr: T.handle, D_ptr: T.handle):
            G = T.match_buffer(A_ptr, arg_shape, dtype, layout=arg_layout,
                               **({} if in_kernel else g_args))
            D = T.match_buffer(D_ptr, d_shape, dtype, layout=TileLayout(S[tuple(d_shape)]))
            body(G, D, None, None)
    # fmt: on
    return main
