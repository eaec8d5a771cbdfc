"""The planner's result: a tensor map in driver order plus the issue loop that walks it.

Everything is frozen: a plan is a value that the dispatch turns into one host encode and an
unrolled list of ``cp.async.bulk.tensor`` issues, and that tests compare field by field.
Dimension tuples are in the CUDA driver's order, innermost dimension first.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .proofs import Expr

#: Bytes of one element of each descriptor element type the planner emits.
DESCRIPTOR_DTYPE_BYTES: dict[str, int] = {
    "uint8": 1,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "uint32": 4,
    "int32": 4,
    "float32": 4,
    "uint64": 8,
    "int64": 8,
    "float64": 8,
}

#: Swizzle mode (the driver enum value) -> (span bytes, pattern period bytes).
SWIZZLE_GEOMETRY: dict[int, tuple[int, int]] = {1: (32, 256), 2: (64, 512), 3: (128, 1024)}


@dataclass(frozen=True)
class TensorMapSpec:
    """The arguments of one ``cuTensorMapEncodeTiled`` call (except the base pointer).

    ``global_strides`` are byte strides of dimensions 1..rank-1 (dimension 0 is contiguous).
    """

    dtype: str
    global_dims: tuple[Expr, ...]
    global_strides: tuple[Expr, ...]
    box_dims: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle: int = 0
    interleave: int = 0
    l2_promotion: int = 2
    oob_fill: int = 0

    @property
    def rank(self) -> int:
        return len(self.box_dims)

    @property
    def element_bytes(self) -> int:
        return DESCRIPTOR_DTYPE_BYTES[self.dtype]

    @property
    def box_bytes(self) -> int:
        """Bytes one issue moves."""
        total = self.element_bytes
        for extent in self.box_dims:
            total *= extent
        return total

    @property
    def shared_footprint(self) -> int:
        """Bytes of shared memory one issue writes or reads from its shared address: the box,
        densely, each row padded to the swizzle span (measured on the H100)."""
        return box_footprint(self.box_dims, self.element_strides, self.element_bytes,
                             self.swizzle)


def box_footprint(box_dims, element_strides, element_bytes: int, swizzle: int) -> int:
    """Bytes a box occupies in shared memory: its elements (``element_strides`` apart in
    global memory) land densely, dimension 0 fastest, each row padded to the swizzle span."""
    rows = 1
    for extent, stride in zip(box_dims[1:], element_strides[1:]):
        rows *= -(-extent // stride)
    row_bytes = -(-box_dims[0] // element_strides[0]) * element_bytes
    if swizzle:
        row_bytes = max(row_bytes, SWIZZLE_GEOMETRY[swizzle][0])
    return rows * row_bytes


@dataclass(frozen=True)
class Im2colMapSpec:
    """The arguments of one ``cuTensorMapEncodeIm2col`` call (except the base pointer), in
    driver order (innermost dimension first: C, W, H, N)."""

    dtype: str
    global_dims: tuple[Expr, ...]
    global_strides: tuple[Expr, ...]  # bytes of dims 1..rank-1
    lower_corner: tuple[int, ...]
    upper_corner: tuple[int, ...]
    channels_per_pixel: int
    pixels_per_column: int
    element_strides: tuple[int, ...]
    swizzle: int = 0
    interleave: int = 0
    l2_promotion: int = 2
    oob_fill: int = 0

    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def element_bytes(self) -> int:
        return DESCRIPTOR_DTYPE_BYTES[self.dtype]

    @property
    def box_dims(self) -> tuple[int, int]:
        """The box one issue lands in shared memory: pixels of channels."""
        return (self.channels_per_pixel, self.pixels_per_column)

    @property
    def box_bytes(self) -> int:
        return self.channels_per_pixel * self.pixels_per_column * self.element_bytes

    @property
    def shared_footprint(self) -> int:
        """As a tiled box of ``box_dims``: the traversal strides step between pixels in
        global memory, never within the box in shared memory."""
        return box_footprint(self.box_dims, (1, 1), self.element_bytes, self.swizzle)


@dataclass(frozen=True)
class IssueAxis:
    """One axis of the issue loop: each step moves the shared address and one coordinate.

    ``smem_stride`` is in elements of the shared buffer; ``coord_dim``/``coord_step`` name the
    tensor-map dimension whose coordinate advances by ``coord_step`` per step.
    """

    extent: int
    smem_stride: int
    coord_dim: int
    coord_step: int


@dataclass(frozen=True)
class Issue:
    """One concrete instruction of the loop (for static inspection and tests)."""

    smem_offset: Expr
    coordinates: tuple[Expr, ...]


@dataclass(frozen=True)
class HostCheck:
    """A bound only the launch can decide (a shape the host passes, say): the host code
    checks it before the kernel starts and fails with ``message``, instead of the planner
    guessing or refusing a copy that is fine for the shapes it is launched with."""

    condition: Expr
    message: str


@dataclass(frozen=True)
class TmaPlan:
    """A copy between a shared region and a global region as TMA issues over one tensor map.

    ``smem_offset`` is the element offset of the first issue's shared address from the start
    of the shared buffer's data (its ``elem_offset`` included). ``coordinates`` are the first
    issue's tensor coordinates, in driver order; the map's base is the global buffer's data
    pointer plus ``base_offset`` elements.
    """

    direction: str
    tensor_map: TensorMapSpec | Im2colMapSpec
    coordinates: tuple[Expr, ...]
    smem_offset: Expr
    issue_axes: tuple[IssueAxis, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())
    #: Elements (of the copy's dtype) from the global buffer's data pointer to the map's
    #: base: 0, or a view's offset that could not become coordinates.
    base_offset: Expr = 0
    #: Map dims the copy may cross (``oob=``): the hardware fills or skips past their edges.
    edge_dims: tuple[int, ...] = field(default=())
    #: Bounds checked by the host at launch (see :class:`HostCheck`).
    host_checks: tuple[HostCheck, ...] = field(default=())
    #: CTAs of a cluster the issues are dealt out among (a multicast load split among them):
    #: CTA ``r`` makes issues ``[r * k, (r + 1) * k)`` of :meth:`issues`, ``k`` =
    #: :attr:`issues_per_cta`. None: the issuing CTA makes all of them.
    cluster_split: int | None = None
    #: An im2col load's tap offsets (driver order: W, H), the same for every issue; empty
    #: for a tiled copy.
    im2col_offsets: tuple[Expr, ...] = field(default=())
    #: The map's base, dims or strides are device-side values (a view the device places,
    #: e.g. rows ``offs[g - 1]:offs[g]``): the host encodes a template and the issuing
    #: thread rebinds a copy of it before the issues (the lowering's device-view step).
    device_view: bool = False

    @property
    def is_im2col(self) -> bool:
        return isinstance(self.tensor_map, Im2colMapSpec)

    @property
    def rank(self) -> int:
        return self.tensor_map.rank

    @property
    def num_issues(self) -> int:
        count = 1
        for axis in self.issue_axes:
            count *= axis.extent
        return count

    @property
    def issues_per_cta(self) -> int:
        """Issues one CTA makes (all of them unless the plan is split among CTAs)."""
        if self.cluster_split is None:
            return self.num_issues
        return self.num_issues // self.cluster_split

    @property
    def bytes_per_issue(self) -> int:
        return self.tensor_map.box_bytes

    def issue_at(self, steps: tuple[int, ...]) -> Issue:
        """The issue at one point of the issue loop (``steps[i]`` indexes ``issue_axes[i]``)."""
        offset = self.smem_offset
        coords = list(self.coordinates)
        for axis, step in zip(self.issue_axes, steps):
            offset = offset + step * axis.smem_stride
            coords[axis.coord_dim] = coords[axis.coord_dim] + step * axis.coord_step
        return Issue(offset, tuple(coords))

    def issues(self, cta: int | None = None) -> list[Issue]:
        """Every issue, outermost issue axis slowest; with ``cta``, only the issues that CTA
        of the cluster makes (its slice of the CTA axis; all of them in an unsplit plan)."""
        ranges = [range(axis.extent) for axis in self.issue_axes]
        every = [self.issue_at(steps) for steps in itertools.product(*ranges)]
        if cta is None or self.cluster_split is None:
            return every
        count = self.issues_per_cta
        return every[cta * count:(cta + 1) * count]
