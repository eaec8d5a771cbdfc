"""Device side: the unrolled issue loop, one ``cp.async.bulk.tensor`` per step.

The dispatch emits no completion: a g2s copy completes on the caller's mbarrier
(``arrive.expect_tx`` + wait), an s2g copy through the caller's commit_group / wait_group.
"""

from __future__ import annotations

import tvm
from tvm.script import tirx as T
from tvm.script.ir_builder import IRBuilder

from .. import intrin
from ..planner.plan_types import TmaPlan
from .build import build_prim_func

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


def _issue(plan: TmaPlan, tensor_map, shared_buffer, mbar, arch: str, offset, coords,
           policy=None):
    address = T.address_of(tensor_map)
    if plan.direction == "g2s":
        return intrin.load(_shared_pointer(shared_buffer, offset), address, coords, mbar,
                           cache_hint=policy, arch=arch)
    return intrin.store(address, coords, _shared_pointer(shared_buffer, offset),
                        cache_hint=policy)


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


def _decompose(plan: TmaPlan, flat_index):
    """Per-axis step of a flat issue index (outermost axis slowest), as expressions."""
    steps = []
    remaining = plan.num_issues
    for axis in plan.issue_axes:
        remaining //= axis.extent
        steps.append(tvm.tirx.floormod(tvm.tirx.floordiv(flat_index, remaining), axis.extent))
    return tuple(steps)


def emit_issues(plan: TmaPlan, tensor_map, shared_buffer, mbar, arch: str, prover,
                cache_hint=None):
    """A parameterless PrimFunc whose body replaces the copy_async call.

    ``cache_hint`` (None, a priority name or a uint64 expression) adds ``.L2::cache_hint``
    and the policy operand to every issue.
    """

    def body():
        policy = _policy(cache_hint)
        if not plan.issue_axes:
            T.evaluate(_issue(plan, tensor_map, shared_buffer, mbar, arch,
                              plan.smem_offset, plan.coordinates, policy))
            return
        loop = T.unroll if plan.num_issues <= UNROLL_LIMIT else T.serial
        with loop(plan.num_issues) as index:
            issue = plan.issue_at(_decompose(plan, index))
            T.evaluate(_issue(plan, tensor_map, shared_buffer, mbar, arch,
                              prover.simplify(issue.smem_offset),
                              [prover.simplify(c) for c in issue.coordinates], policy))

    return build_prim_func(body)
