"""The shared side of a copy, proven: what it writes or reads lies where it may.

TMA writes shared memory by address: nothing stops a box from landing past its tile, past
the allocation the tile is declared over, or on the mbarrier the copy completes on (the
wait then never ends). Three facts are proven here, each with a named rule:

* ``shared-bounds``: the region lies inside its shared buffer (per dimension);
* ``shared-allocation``: the shared buffer, and the mbarrier, lie inside the ``shared`` /
  ``shared.dyn`` allocation that holds their data (``T.decl_buffer`` over ``dyn.data``);
* ``mbar-overlap``: no issue's box covers the mbarrier, when both are offsets of one
  allocation. Where the offsets depend on ranged variables (a ring's stage), every reachable
  combination is tried; a copy whose overlap cannot be decided still plans.

Symbolic sizes go through the same prover (ranges, guards, assumptions) as the global side.
"""

from __future__ import annotations

import itertools
import math

import tvm
from tvm.sym import Analyzer

from .errors import refuse
from .plan_types import TmaPlan
from .proofs import Expr, Prover, as_int
from .views import region_bounds

#: An mbarrier is one 8-byte word.
MBARRIER_BYTES = 8
#: At most this many assignments of the ranged variables are tried for an mbarrier overlap.
MAX_WITNESS_TRIES = 4096


def check_region_in_buffer(region, prover: Prover) -> None:
    """Every dimension of the shared region lies inside the buffer's shape."""
    buffer = region.source
    starts, extents = region_bounds(region)
    for dim, (start, extent, size) in enumerate(zip(starts, extents, buffer.shape)):
        inside = tvm.tirx.all(start >= 0, start + extent <= size)
        if not prover.establish(inside, f"shared-bounds ({buffer.name} dimension {dim})"):
            raise refuse(
                "shared-bounds",
                f"shared region [{start}, {start} + {extent}) of {buffer.name} dimension {dim} "
                f"is not provably inside [0, {size}) (the TMA would write past the tile)")


def allocation_bytes(allocation) -> Expr:
    width = tvm.DataType(str(allocation.dtype)).bits // 8
    return math.prod(allocation.shape) * width


def check_in_allocation(lo: Expr, hi: Expr, what: str, allocation, prover: Prover) -> None:
    """Bytes ``[lo, hi)`` (from the allocation's start) lie inside ``allocation``."""
    size = allocation_bytes(allocation)
    inside = tvm.tirx.all(lo >= 0, hi <= size)
    if not prover.establish(inside, f"shared-allocation ({what})"):
        raise refuse(
            "shared-allocation",
            f"{what} spans bytes [{prover.simplify(lo)}, {prover.simplify(hi)}) of its "
            f"allocation {allocation.name}, which holds {prover.simplify(size)} bytes")


def check_mbar_clear(plan: TmaPlan, element_bytes: int, mbar_byte: Expr,
                     prover: Prover) -> None:
    """No issue of ``plan`` writes the 8 bytes at ``mbar_byte`` (both from one allocation).

    Each issue writes one dense run of the box's shared footprint from its shared address.
    """
    footprint = plan.tensor_map.shared_footprint
    for issue in plan.issues():
        start = prover.simplify(issue.smem_offset * element_bytes)
        clear = tvm.tirx.any(mbar_byte + MBARRIER_BYTES <= start,
                             start + footprint <= mbar_byte)
        if prover.prove(clear):
            continue
        witness = _overlap_witness(start, footprint, mbar_byte, prover)
        if witness is not None:
            where = f" when {witness}" if witness else ""
            raise refuse(
                "mbar-overlap",
                f"the mbarrier at byte {mbar_byte} of the shared allocation lies in the "
                f"{footprint} bytes an issue of this copy writes from byte {start}{where}: the "
                "TMA would overwrite it and the wait would never end")


def _overlap_witness(start: Expr, footprint: int, mbar_byte: Expr, prover: Prover
                     ) -> str | None:
    """A reachable assignment of the ranged variables under which the box covers the
    mbarrier ("" when no variable is involved), or None when none is found or trying them
    all would take too long (the copy then plans)."""
    overlap = tvm.tirx.all(start < mbar_byte + MBARRIER_BYTES, mbar_byte < start + footprint)
    variables = [var for var in tvm.tirx.analysis.undefined_vars(overlap)]
    if any(var not in prover.ranges for var in variables):
        return None
    spans = []
    for var in variables:
        low, extent = as_int(prover.ranges[var].min), as_int(prover.ranges[var].extent)
        if low is None or extent is None:
            return None
        spans.append(range(low, low + extent))
    if math.prod(len(span) for span in spans) > MAX_WITNESS_TRIES:
        return None
    for values in itertools.product(*spans):
        analyzer = Analyzer()
        for var, value in zip(variables, values):
            analyzer.bind(var, tvm.tirx.const(value, str(var.ty.dtype)))
        if as_int(analyzer.simplify(overlap)) != 1:
            continue
        assignment = tvm.tirx.all(*[tvm.tirx.EQ(var, tvm.tirx.const(value, str(var.ty.dtype)))
                                    for var, value in zip(variables, values)]) if values else None
        if assignment is not None and prover.refutable(assignment):
            continue  # the facts at the copy exclude it
        return ", ".join(f"{var} = {value}" for var, value in zip(variables, values))
    return None
