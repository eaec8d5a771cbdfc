"""Device side: the unrolled issue loop, one TMA instruction per step.

A load issues ``cp.async.bulk.tensor`` (with ``.multicast::cluster`` and the mask when it
lands in several CTAs), a store ``cp.async.bulk.tensor`` or, reducing,
``cp.reduce.async.bulk.tensor``, a prefetch ``cp.async.bulk.prefetch.tensor``. A plan split
among the CTAs of a cluster (``plan.cluster_split``) issues only this CTA's run of issues:
the loop index is offset by the CTA's rank times the run length.

The dispatch emits no completion: a g2s copy completes on the caller's mbarrier
(``arrive.expect_tx`` + wait), an s2g copy through the caller's commit_group / wait_group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import tvm
from tvm.script import tirx as T
from tvm.script.ir_builder import IRBuilder

from .. import intrin
from ..intrin.operands import cluster_known
from ..planner.errors import refuse
from ..planner.plan_types import TmaPlan
from .build import build_prim_func
from .config import CopyOptions

#: Issue loops up to this many steps are fully unrolled; longer ones stay a serial loop.
UNROLL_LIMIT = 64


def _shared_pointer(shared_buffer, element_offset):
    """Address of ``element_offset`` elements past the shared buffer's data pointer.

    The offset goes into the pointer index of a flat view (elem_offset 0) rather than into
    the view's definition, so loop-local coordinates never leak above their binding.
    """
    flat = T.decl_buffer((1,), shared_buffer.dtype, shared_buffer.data, elem_offset=0,
                         scope=shared_buffer.scope())
    return flat.ptr_to([element_offset])


def _issue(plan: TmaPlan, address, shared_buffer, options: CopyOptions, arch: str, offset,
           coords, policy=None):
    if options.prefetch:
        return intrin.prefetch(address, coords, cache_hint=policy, arch=arch)
    if plan.direction == "g2s":
        mask = options.multicast.mask if options.multicast is not None else None
        return intrin.load(_shared_pointer(shared_buffer, offset), address, coords,
                           options.mbar, mode="im2col" if plan.is_im2col else "tile",
                           im2col_offsets=_tap_offsets(plan), multicast_mask=mask,
                           cache_hint=policy, arch=arch)
    source = _shared_pointer(shared_buffer, offset)
    if options.reduce is not None:
        return intrin.reduce(options.reduce, address, coords, source, cache_hint=policy,
                             arch=arch)
    return intrin.store(address, coords, source, cache_hint=policy, arch=arch)


def _signed_32(coordinate, prover):
    """A tensor coordinate as the instruction's ``.s32`` operand. A view past 2^31 elements
    (256 experts' weights) is indexed in 64 bits; its coordinates are narrowed where they
    provably fit, and refused where they may not (a wrapped coordinate reads elsewhere)."""
    if isinstance(coordinate, int) or str(coordinate.ty.dtype) != "int64":
        return coordinate
    fits = tvm.tirx.all(coordinate >= tvm.tirx.const(-(1 << 31), "int64"),
                        coordinate < tvm.tirx.const(1 << 31, "int64"))
    if not prover.establish(fits, "global-dim (a 32-bit coordinate)"):
        raise refuse("global-dim", f"tensor coordinate {coordinate} may not fit the "
                     "instruction's 32-bit signed coordinate")
    return tvm.tirx.Cast("int32", coordinate)


def _tap_offsets(plan: TmaPlan) -> list:
    """An im2col load's tap offsets as the 16-bit operands the instruction takes (the
    planner proved each in [0, 2^16))."""
    return [offset if isinstance(offset, int) else tvm.tirx.Cast("uint16", offset)
            for offset in plan.im2col_offsets]


def _policy(cache_hint):
    """The 64-bit L2 policy operand: the caller's expression, or, for a priority name, one
    built here by ``createpolicy.fractional`` (covering every line the copy touches).

    The policy is built once before the issue loop, so a copy of many boxes pays one
    instruction for it.
    """
    if cache_hint is None or not isinstance(cache_hint, str):
        return cache_hint
    policy = T.alloc_buffer((1,), "uint64", scope="local")
    IRBuilder.name("l2_policy", policy)
    T.evaluate(getattr(T.ptx.createpolicy.fractional, f"L2__{cache_hint}").b64(policy[0]))
    return policy[0]


def _decompose(plan: TmaPlan, index, cta_rank=None):
    """Per-axis step of this CTA's ``index``-th issue (outermost axis slowest), as
    expressions; a CTA of a split plan starts at its rank times its run length."""
    flat = index if cta_rank is None else cta_rank * plan.issues_per_cta + index
    steps = []
    remaining = plan.num_issues
    for axis in plan.issue_axes:
        remaining //= axis.extent
        steps.append(tvm.tirx.floormod(tvm.tirx.floordiv(flat, remaining), axis.extent))
    return tuple(steps)


def emit_issues(plan: TmaPlan, tensor_map, shared_buffer, options: CopyOptions, arch: str,
                prover, locate_map: Callable[[], object] | None = None):
    """A parameterless PrimFunc whose body replaces the copy_async call.

    ``options.cache_hint`` (None, a priority name or a uint64 expression) adds
    ``.L2::cache_hint`` and the policy operand to every issue. ``locate_map``, for a
    device-born map, emits the rebind of the map (when the view changed) and returns the
    address the issues name (:func:`.device_view.emit_rebind`); otherwise they name
    ``tensor_map``, the kernel parameter.
    """
    cta_rank = options.multicast.rank if options.multicast is not None else None
    if (plan.cluster_split is None) != (cta_rank is None):
        raise ValueError("a plan split among CTAs needs the CTA's rank, and only it does")

    address = []

    def issue(offset, coords, policy):
        T.evaluate(_issue(plan, address[0], shared_buffer, options, arch,
                          prover.simplify(offset),
                          [_signed_32(prover.simplify(c), prover) for c in coords], policy))

    def body():
        address.append(T.address_of(tensor_map) if locate_map is None else locate_map())
        policy = _policy(options.cache_hint)
        count = plan.issues_per_cta
        if count == 1:
            located = plan.issue_at(_decompose(plan, 0, cta_rank)) if plan.issue_axes else plan
            issue(located.smem_offset, located.coordinates, policy)
            return
        loop = T.unroll if count <= UNROLL_LIMIT else T.serial
        with loop(count) as index:
            located = plan.issue_at(_decompose(plan, index, cta_rank))
            issue(located.smem_offset, located.coordinates, policy)

    # The multicast option was read from the kernel's cluster (config.read_multicast).
    scope = cluster_known() if options.multicast is not None else contextlib.nullcontext()
    with scope:
        return build_prim_func(body)
