"""Host side: bounds that only the launch can decide, asserted before the kernel starts.

A copy ``A[0:64, :]`` of a tensor whose row count ``M`` is a kernel argument is in bounds
for ``M >= 64`` only. The planner cannot prove that and should not guess it; refusing would
reject a kernel that is right for every shape it is launched with. So the planner states
the condition on host values (:class:`~tvm_tma.planner.plan_types.HostCheck`) and the host
code asserts it before the launch: a launch with ``M = 32`` raises a ``ValueError`` naming
the rule and the bound, never a silent or faulting copy.
"""

from __future__ import annotations

from tvm.script import tirx as T

from ..planner.plan_types import HostCheck
from .build import build_prim_func


def _check_key(check: HostCheck) -> str:
    return f"tvm_tma.host_check:{check.condition}"


def emit_host_checks(checks, sctx) -> None:
    """One host assertion per distinct condition of the kernel (shared by its copies)."""
    for check in checks:
        key = _check_key(check)
        if sctx.cache_get(key) is not None:
            continue

        def assert_bound(check=check):
            with T.Assert(check.condition, [check.message], "ValueError"):
                T.evaluate(T.tvm_kernel_replace_point())

        sctx.add_init_stmt(build_prim_func(assert_bound).body, host=True)
        sctx.cache_set(key, [check.condition])
