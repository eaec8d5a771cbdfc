"""The ``copy_async`` dispatch variant "tma": plan, encode on the host, issue on the device."""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm.tirx.operator.tile_primitive import fail, register_dispatch

from ..planner import PlanError, TmaPlan, copy_direction, plan
from ..planner.multicast import check_mask_issuers
from ..planner.proofs import Prover
from ..planner.shared_space import MBARRIER_BYTES, check_in_allocation, check_mbar_clear
from .config import CopyOptions, read_options
from .descriptors import tensor_map_for
from .device_view import (
    SlotPair,
    device_view_slots,
    emit_rebind,
    emit_slot_check,
    rebind_fields,
    tag_buffer,
    template_spec,
)
from .facts import cluster_ranks_of, cta_identities_of, cta_indices_of, facts_of
from .host_checks import emit_host_checks
from .issue import emit_issues
from .operands import mbar_buffer, mbar_byte_offset
from .predicates import PREDICATES
from .roots import argument_of, mbar_allocation_of, shared_allocation_of
from .seed_options import cluster_shape

VARIANT = "tma"
PRIORITY = 10


@dataclass(frozen=True)
class PlannedCopy:
    """One ``copy_async(dispatch="tma")`` call, planned: what lowering and ``explain`` share."""

    direction: str
    options: CopyOptions
    plan: TmaPlan
    prover: Prover  # holds the facts the plan rests on (``prover.established``)
    shared_region: object
    global_region: object
    #: The ``tensormap=`` slots of a copy of a device-side view (None: a host-born map).
    slots: SlotPair | None = None


def copy_prover(op, var_ranges: dict) -> Prover:
    """The prover of one copy call: the ranges the lowering context knows (launch indices,
    enclosing loops) and the facts that come with the call itself (parse time, loops)."""
    return Prover(var_ranges, facts_of(op.config))


def plan_copy(op, var_ranges: dict, prover: Prover | None = None) -> PlannedCopy:
    """Validate the options and plan one copy call; raises :class:`PlanError`.

    ``prover`` defaults to :func:`copy_prover`; pass one to read what it could not prove
    after a refusal (``prover.unproven``).
    """
    dst, src = op.args[:2]
    direction = copy_direction(dst, src)
    prover = prover if prover is not None else copy_prover(op, var_ranges)
    options = read_options(op.config, direction, prover)
    shared_allocation = shared_allocation_of(op.config)
    split = options.multicast.ctas if options.multicast is not None else None
    copy_plan = plan(dst, src, prover=prover, oob=options.oob, argument=argument_of(op.config),
                     shared_allocation=shared_allocation, reduce=options.reduce,
                     l2_promotion=options.l2_promotion, multicast_ctas=split)
    shared_region, global_region = (dst, src) if direction == "g2s" else (src, dst)
    _check_mbar_space(copy_plan, options.mbar, shared_region, shared_allocation,
                      mbar_allocation_of(op.config), prover)
    multicast = options.multicast
    if multicast is not None and multicast.ctas is None and not prover.unreachable:
        # A whole tile sent by a mask: no receiver may get it from two issuing CTAs.
        check_mask_issuers(copy_plan, multicast.mask,
                           cluster_shape(cluster_ranks_of(op.config), prover), var_ranges,
                           facts_of(op.config), shared_region, global_region)
    slots = None
    if copy_plan.device_view:
        slots = device_view_slots(options.tensormap, global_region.source,
                                  argument_of(op.config), prover, cta_indices_of(op.config),
                                  cta_identities_of(op.config))
    return PlannedCopy(direction, options, copy_plan, prover, shared_region, global_region,
                       slots)


def _check_mbar_space(copy_plan: TmaPlan, mbar, shared_region, shared_allocation,
                      mbar_allocation, prover: Prover) -> None:
    """The mbarrier lies inside its allocation and, when that is the tile's, outside every
    box the copy writes."""
    byte = mbar_byte_offset(mbar, prover) if mbar is not None else None
    if byte is None or mbar_allocation is None:
        return
    check_in_allocation(byte, byte + MBARRIER_BYTES, f"mbarrier {mbar_buffer(mbar).name}",
                        mbar_allocation, prover)
    if shared_allocation is not None and shared_allocation.same_as(mbar_allocation):
        width = tvm.DataType(str(shared_region.source.dtype)).bits // 8
        check_mbar_clear(copy_plan, width, byte, prover)


def kernel_var_ranges(sctx) -> dict:
    """Ranges of the launch indices and enclosing loops the lowering context hands over."""
    ranges = {}
    for iter_var in dict(sctx.launch_params).values():
        if iter_var.dom is not None:
            ranges[iter_var.var] = iter_var.dom
    for var, rng in dict(sctx.var_range_map).items():
        if isinstance(rng, tvm.ir.Range):
            ranges[var] = rng
    return ranges


def lower_tma_copy(op, sctx):
    """Lower one copy_async; any refusal is reported through ``fail`` with its rule name."""
    try:
        planned = plan_copy(op, kernel_var_ranges(sctx))
    except PlanError as error:
        fail(str(error))
    emit_host_checks(planned.plan.host_checks, sctx)
    # The map is encoded on the host over the kernel argument the global operand aliases
    # (a view declared in device code does not exist there); the view shares its data.
    view = planned.global_region.source
    argument = argument_of(op.config)
    host_buffer = view if argument is None else argument
    try:
        if planned.plan.device_view:
            return _lower_device_view(planned, op, sctx, host_buffer)
        base_bytes = planned.plan.base_offset * (tvm.DataType(str(view.dtype)).bits // 8)
        tensor_map = tensor_map_for(planned.plan.tensor_map, host_buffer, sctx, base_bytes)
        return emit_issues(planned.plan, tensor_map, planned.shared_region.source,
                           planned.options, str(sctx.target.arch), planned.prover)
    except PlanError as error:  # a coordinate that may not fit 32 bits, say
        fail(str(error))


def _lower_device_view(planned: PlannedCopy, op, sctx, host_buffer):
    """A copy of a device-side view: a template encoded on the host, rebound on the device
    by the issuing thread into the copy's ``tensormap=`` slots (:mod:`.device_view`).

    A copy whose map the host can encode ignores ``tensormap=``: a kernel may pass slots
    wherever a view might be device-side (a group's B matrix that is inside B whole when
    N is a multiple of the tile, not otherwise) and pays for a rebind only where one is
    needed."""
    plan, slots, prover = planned.plan, planned.slots, planned.prover
    emit_slot_check(slots, sctx)
    template = template_spec(plan.tensor_map, prover)
    tensor_map = tensor_map_for(template, host_buffer, sctx)
    rebind = rebind_fields(plan, planned.global_region.source, prover)
    tag = tag_buffer(sctx, slots, len(rebind.watched), shared_allocation_of(op.config),
                     str(template))
    arch = str(sctx.target.arch)
    return emit_issues(plan, tensor_map, planned.shared_region.source, planned.options, arch,
                       prover, locate_map=lambda: emit_rebind(rebind, slots, tag, tensor_map,
                                                              arch))


_registered = False


def register() -> None:
    """Register the variant once per process (idempotent: autoload and import both call it)."""
    global _registered
    if _registered:
        return
    register_dispatch("copy_async", "cuda", variant=VARIANT, priority=PRIORITY,
                      when=PREDICATES)(lower_tma_copy)
    _registered = True
