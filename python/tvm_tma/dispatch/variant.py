"""The ``copy_async`` dispatch variant "tma": plan, encode on the host, issue on the device."""

from __future__ import annotations

import tvm
from tvm.tirx.operator.tile_primitive import fail, register_dispatch

from ..planner import PlanError, copy_direction, plan
from ..planner.proofs import Prover
from ..scope_ids import recorded_ranges_for
from .config import read_options
from .descriptors import tensor_map_for
from .issue import emit_issues
from .predicates import PREDICATES

VARIANT = "tma"
PRIORITY = 10


def kernel_var_ranges(sctx, regions=()) -> dict:
    """Ranges of every variable the copy may mention: launch indices, enclosing loops, and
    the scope ids (``T.cta_id``...) that the copy's regions use."""
    ranges = recorded_ranges_for(r for region in regions for rng in region.region
                                 for r in (rng.min, rng.extent))
    for iter_var in dict(sctx.launch_params).values():
        if iter_var.dom is not None:
            ranges[iter_var.var] = iter_var.dom
    for var, rng in dict(sctx.var_range_map).items():
        if isinstance(rng, tvm.ir.Range):
            ranges[var] = rng
    return ranges


def lower_tma_copy(op, sctx):
    """Lower one copy_async; any refusal is reported through ``fail`` with its rule name."""
    dst, src = op.args[:2]
    try:
        direction = copy_direction(dst, src)
        options = read_options(op.config, direction)
        var_ranges = kernel_var_ranges(sctx, (dst, src))
        copy_plan = plan(dst, src, var_ranges=var_ranges)
    except PlanError as error:
        fail(str(error))
    shared_region, global_region = (dst, src) if direction == "g2s" else (src, dst)
    tensor_map = tensor_map_for(copy_plan.tensor_map, global_region.source, sctx)
    return emit_issues(copy_plan, tensor_map, shared_region.source, options.mbar,
                       str(sctx.target.arch), Prover(var_ranges), options.cache_hint)


_registered = False


def register() -> None:
    """Register the variant once per process (idempotent: autoload and import both call it)."""
    global _registered
    if _registered:
        return
    register_dispatch("copy_async", "cuda", variant=VARIANT, priority=PRIORITY,
                      when=PREDICATES)(lower_tma_copy)
    _registered = True
