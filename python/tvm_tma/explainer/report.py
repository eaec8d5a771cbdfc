"""The text ``python -m tvm_tma explain`` prints for a :class:`KernelExplanation`."""

from __future__ import annotations

from ..planner.plan_types import TmaPlan
from .model import CopyExplanation, KernelExplanation


def _issue_loop(plan: TmaPlan) -> list[str]:
    if not plan.issue_axes:
        return ["    issue loop: none (one issue)"]
    lines = [f"    issue loop: {plan.num_issues} issues, outermost axis first"]
    if plan.cluster_split is not None:
        lines.append(f"    split among the cluster's {plan.cluster_split} CTAs: CTA r makes "
                     f"issues [r * {plan.issues_per_cta}, (r + 1) * {plan.issues_per_cta})")
    for axis in plan.issue_axes:
        lines.append(f"      {axis.extent} steps: shared +{axis.smem_stride} elements, "
                     f"coordinate {axis.coord_dim} +{axis.coord_step}")
    return lines


def _planned(copy: CopyExplanation) -> list[str]:
    plan = copy.plan
    assert plan is not None
    lines = [f"    {plan.direction}: planned, {plan.num_issues} issue(s) of "
             f"{plan.bytes_per_issue} bytes, rank {plan.rank}"]
    lines.append(f"    tensor map ({copy.encoder}, innermost first):")
    lines += [f"      {name} = {value}" for name, value in copy.map_fields()]
    lines.append(f"    instruction: {copy.instruction}")
    lines.append("    first issue: coordinates "
                 f"({', '.join(str(c) for c in plan.coordinates)}), shared offset "
                 f"{plan.smem_offset} elements")
    if plan.im2col_offsets:
        lines.append("    im2col tap offsets (W, H): "
                     f"({', '.join(str(o) for o in plan.im2col_offsets)})")
    if not (isinstance(plan.base_offset, int) and plan.base_offset == 0):
        lines.append(f"    map base: the global buffer's data + {plan.base_offset} elements")
    if plan.device_view:
        lines.append("    device-side view: a template encoded on the host, rebound on the "
                     "device (address, dims, strides above) in the copy's tensormap= slots "
                     "whenever the view changes")
    if plan.edge_dims:
        fate = ("skipped" if plan.direction == "s2g" else
                "NaN" if plan.tensor_map.oob_fill else "zeros")
        lines.append(f"    edges: the copy may cross map dims {list(plan.edge_dims)}; "
                     f"out-of-bounds elements are {fate}")
    lines += [f"    checked at launch: {check.condition}" for check in plan.host_checks]
    lines += _issue_loop(plan)
    lines += [f"    note: {note}" for note in plan.notes]
    if copy.established:
        lines.append("    proved:")
        for fact in copy.established:
            using = f"   [from {'; '.join(fact.using)}]" if fact.using else ""
            lines.append(f"      {fact.what}: {fact.condition}{using}")
    else:
        lines.append("    proved: every fact is a constant")
    return lines


def _refused(copy: CopyExplanation) -> list[str]:
    lines = [f"    refused [{copy.rule}]: {copy.detail}"]
    for fact in copy.unproven:
        lines.append(f"    not proven: {fact.what}: {fact.condition}")
        lines.append(f"      given: {'; '.join(fact.using) or 'no facts at all'}")
    if copy.hint:
        lines.append(f"    to plan: {copy.hint}")
    return lines


def format_kernel(kernel: KernelExplanation) -> str:
    planned = sum(copy.planned for copy in kernel.copies)
    count = len(kernel.copies)
    copies = "1 TMA copy" if count == 1 else f"{count} TMA copies"
    lines = [f"kernel {kernel.name} ({kernel.arch}): {copies}, {planned} planned, "
             f"{count - planned} refused"]
    if not kernel.copies:
        lines[0] = f"kernel {kernel.name} ({kernel.arch}): no copy_async(..., dispatch=\"tma\")"
    for copy in kernel.copies:
        where = f"line {copy.line}" if copy.line is not None else "(no source line)"
        lines.append(f"  {where}: {copy.source}")
        lines += _planned(copy) if copy.planned else _refused(copy)
    return "\n".join(lines)
