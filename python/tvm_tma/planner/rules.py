"""L3 validation: every hardware and safety rule a finished plan must satisfy.

The planner builds plans that should satisfy these by construction; this module is the
independent check (and the place a reader finds the rules). Constant facts are decided
here; facts that depend on run-time values (a dynamic stride, the base pointer) are proven
when possible, refused when provably wrong, and otherwise left to the C++ encoder, which
re-checks every rule on the actual values before calling the driver.
"""

from __future__ import annotations

import tvm

from .context import MAX_BOX, MAX_RANK, Context
from .errors import refuse
from .plan_types import SWIZZLE_GEOMETRY, TmaPlan
from .proofs import Prover, as_int

#: Shared-memory instructions need 128-byte aligned addresses.
SMEM_ALIGN = 128
#: Tensor-map element types with a NaN to fill out-of-bounds elements with.
NAN_FILL_DTYPES = ("float16", "bfloat16", "float32", "float64")


def check_plan(plan: TmaPlan, ctx: Context) -> None:
    spec = plan.tensor_map
    _check_shape(spec)
    _check_global(plan, ctx)
    _check_inner_coordinate(plan, ctx)
    _check_edges(plan, ctx)
    _check_shared(plan, ctx)


def _check_shape(spec) -> None:
    if not 1 <= spec.rank <= MAX_RANK:
        raise refuse("rank", f"tensor map of rank {spec.rank} (must be 1..5)")
    for index, box in enumerate(spec.box_dims):
        if not 1 <= box <= MAX_BOX:
            raise refuse("box-dim", f"box dimension {index} is {box} elements (must be 1..256)")
    inner_bytes = spec.box_dims[0] * spec.element_bytes
    if spec.swizzle:
        span = SWIZZLE_GEOMETRY[spec.swizzle][0]
        if inner_bytes != span:
            raise refuse(
                "swizzle-span",
                f"inner box is {inner_bytes} bytes but the swizzle span is {span} bytes",
            )
    elif inner_bytes % 16:
        raise refuse("inner-box-16B", f"inner box is {inner_bytes} bytes, not a multiple of 16")


def _check_global(plan: TmaPlan, ctx: Context) -> None:
    """Strides and dims: proven, refused when provably wrong, or left to the encoder -- but
    a device-side value (a view the device places, :attr:`TmaPlan.device_view`) never
    reaches an encoder, so for it the proof is the only check."""
    prover = ctx.prover
    spec = plan.tensor_map
    for index, stride in enumerate(spec.global_strides, start=1):
        _require(
            prover, stride,
            tvm.tirx.floormod(stride, 16) == 0,
            "global-stride",
            f"global stride of dimension {index} is {stride} bytes, not a multiple of 16",
        )
        _require(
            prover, stride, stride < (1 << 40), "global-stride",
            f"global stride of dimension {index} is {stride} bytes (must be < 2^40)",
        )
    for index, size in enumerate(spec.global_dims):
        _require(
            prover, size, tvm.tirx.all(size > 0, size <= (1 << 32)), "global-dim",
            f"global dimension {index} has size {size} (must be in (0, 2^32])",
        )


def _require(prover: Prover, value, condition, rule: str, detail: str) -> None:
    if prover.is_host_expr(value):
        _prove_or_defer(prover, condition, rule, detail)
    elif not prover.establish(condition, rule, position=False):
        raise refuse(rule, detail + "; it is a device-side value, which no host encode "
                     "checks, so it must be provable at the copy (a guard or T.assume)")


def _check_inner_coordinate(plan: TmaPlan, ctx: Context) -> None:
    """Every issue's dimension-0 coordinate must be a whole number of 16-byte units.

    Measured on the H100: a tile load whose dimension-0 coordinate is 4 or 6 bytes off a
    16-byte boundary raises an illegal-instruction fault (negative multiples of 16 are fine).
    """
    width = plan.tensor_map.element_bytes
    start = ctx.prover.simplify(plan.coordinates[0] * width)
    if not ctx.prover.establish_divisible(start, 16, "inner-coordinate-16B"):
        raise refuse(
            "inner-coordinate-16B",
            f"the box starts {start} bytes into dimension 0, not provably a multiple of 16",
        )
    for axis in plan.issue_axes:
        if axis.coord_dim == 0 and (axis.coord_step * width) % 16:
            raise refuse(
                "inner-coordinate-16B",
                f"the issue loop steps dimension 0 by {axis.coord_step * width} bytes",
            )


def _check_edges(plan: TmaPlan, ctx: Context) -> None:
    """What ``oob=`` needs beyond the region bounds (proven, per dim, at L1).

    NaN fill exists only for floating-point types (a store passing oob="nan", as kernels
    written for upstream's variants do, is held to the same contract). A store that crosses
    the end of dimension 0 writes out-of-bounds elements up to the next 16-byte boundary
    (measured on the H100), so that end must itself sit on 16 bytes, or the store would
    write past the view into its neighbour.
    """
    spec = plan.tensor_map
    oob = ctx.global_view.oob
    if oob == "nan" and ctx.shared.dtype not in NAN_FILL_DTYPES:
        raise refuse("oob", f'oob="nan" needs a floating-point tensor map type '
                     f"({', '.join(NAN_FILL_DTYPES)}); {ctx.shared.dtype} has none")
    if plan.direction == "s2g" and 0 in plan.edge_dims:
        end = ctx.prover.simplify(spec.global_dims[0] * spec.element_bytes)
        if not ctx.prover.establish_divisible(end, 16, "store-edge-16B"):
            raise refuse(
                "oob",
                f"the store may cross the end of dimension 0 ({end} bytes), which is not a "
                "multiple of 16 bytes: TMA stores write past that end up to the next 16-byte "
                "boundary, into whatever follows")


def _check_shared(plan: TmaPlan, ctx: Context) -> None:
    prover = ctx.prover
    shared = ctx.shared
    width = shared.element_bytes
    base_align = ctx.shared_alignment
    first = prover.simplify(plan.smem_offset * width)
    if base_align < SMEM_ALIGN or not prover.establish_divisible(first, SMEM_ALIGN,
                                                                 "smem-align-128"):
        raise refuse(
            "smem-align-128",
            f"shared address offset {first} bytes (allocation aligned to {base_align}) is not "
            "provably a multiple of 128",
        )
    for axis in plan.issue_axes:
        if (axis.smem_stride * width) % SMEM_ALIGN:
            raise refuse(
                "smem-align-128",
                f"issue loop steps the shared address by {axis.smem_stride * width} bytes, "
                "not a multiple of 128",
            )
    if shared.swizzle:
        period = SWIZZLE_GEOMETRY[shared.swizzle][1]
        base = prover.simplify(shared.buffer_offset * width)
        if base_align < period or not prover.establish_divisible(base, period,
                                                                 "swizzle-base-period"):
            raise refuse(
                "swizzle-base-period",
                f"swizzled shared buffer starts {base} bytes into its allocation, not provably "
                f"on the {period}-byte pattern period",
            )


def _prove_or_defer(prover: Prover, condition, rule: str, detail: str) -> None:
    """Refuse what is provably false; leave run-time-only facts to the C++ encoder."""
    if prover.establish(condition, rule, position=False):
        return
    folded = prover.simplify(condition)
    if as_int(folded) is not None or prover.refutable(condition):
        raise refuse(rule, detail)
