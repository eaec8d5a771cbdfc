"""Box splitting for cluster multicast: each CTA of the cluster issues 1/N of the tile.

A multicast load writes its box into the same shared offset of every CTA named by the mask
and completes the same mbarrier offset there. If each of the cluster's N CTAs issues a
different N-th of the tile's boxes with the full mask, the tile's global bytes are read once
per cluster and every CTA still receives the whole tile on its own mbarrier (whose expected
transaction bytes stay the whole tile's). This is CuTe's ``make_tma_copy(..., cluster_size)``.

The plan's issues, in issue order, are dealt out in N equal runs: CTA ``r`` makes issues
``[r * k, (r + 1) * k)`` with ``k = num_issues / N`` (``TmaPlan.cluster_split``). When the
issue count does not divide by N, boxes are cut, outermost box dimension first, as little as
needed: an outer box dimension becomes issues (each step one slice of it), and the dimension
that supplies the missing factor is cut into that many pieces. A cut dimension must be the
outermost of the box with an extent above one (a box lands densely in shared memory, so a
piece of an inner dimension would interleave with the next slice of an outer one); every
piece must start 128-byte aligned in shared memory, like every issue; a piece of dimension 0
must stay a whole number of 16-byte units and is never cut under a swizzle (its rows fill
the swizzle span whatever their width).

A piece of a swizzled tile stays on the tile's swizzle pattern wherever it starts: the
hardware swizzles absolute shared-address bits, and the tile's base is on the pattern period
(rule ``swizzle-base-period``), so a box that starts at row ``k`` of the tile lands exactly
where rows ``k, k+1, ...`` of the whole tile land (measured on the H100 and H200: a box
starting inside an aligned tile). Each piece lands at the same offset in every CTA, so on
the same pattern there too.

A whole tile sent with a mask (``multicast=0b11``) is not split: whichever CTA runs the copy
sends all of it. :func:`check_mask_issuers` refuses such a copy when two CTAs may both run it
into overlapping shared bytes of a CTA both masks name (see the section below).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from math import gcd

import tvm
import tvm_ffi
from tvm.ir.expr import TensorLoad
from tvm.sym import Analyzer

from .context import Context
from .errors import refuse
from .plan_types import SWIZZLE_GEOMETRY, IssueAxis, TmaPlan
from .proofs import Prover, as_int, as_range, range_fact

#: Shared addresses of TMA issues are 128-byte aligned.
SMEM_ALIGN = 128


def split_among_ctas(plan: TmaPlan, ctas: int, ctx: Context) -> TmaPlan:
    """``plan`` with its issues dealt out among ``ctas`` CTAs, or a refusal."""
    if ctas == 1:
        return plan
    spec = plan.tensor_map
    piece_align = SMEM_ALIGN
    width = ctx.shared.element_bytes
    boxes = list(spec.box_dims)
    new_axes: list[IssueAxis] = []
    issues = plan.num_issues
    for dim in range(spec.rank - 1, -1, -1):
        need = ctas // gcd(issues, ctas)
        if need == 1:
            break
        extent = boxes[dim]
        if extent == 1:
            continue
        cut = next((f for f in range(need, extent + 1, need)
                    if extent % f == 0 and _piece_fits(plan, dim, extent // f, piece_align)),
                   None)
        whole = _piece_fits(plan, dim, 1, piece_align)
        if cut is None and not whole:
            break  # neither a cut of this dimension nor all of its slices will do
        pieces = cut if cut is not None else extent
        piece = extent // pieces
        row = _row_bytes(plan, dim)
        new_axes.append(IssueAxis(pieces, piece * row // width, dim, piece))
        boxes[dim] = piece
        issues *= pieces
        if piece > 1:
            break  # the dimensions inside this one now stay whole
    if issues % ctas:
        raise refuse(
            "multicast",
            f"the tile ({plan.num_issues} issue(s) of box {list(spec.box_dims)}) cannot be "
            f"split among {ctas} CTAs: no cut of its outer box dimensions gives a multiple of "
            f"{ctas} boxes that each start {piece_align}-byte aligned in shared memory (rows "
            "of a swizzled box are whole swizzle spans)")
    return replace(plan, tensor_map=replace(spec, box_dims=tuple(boxes)),
                   issue_axes=(*plan.issue_axes, *new_axes), cluster_split=ctas)


def _piece_fits(plan: TmaPlan, dim: int, piece: int, piece_align: int) -> bool:
    """A box dimension ``dim`` cut into pieces of ``piece`` keeps every piece aligned."""
    spec = plan.tensor_map
    if dim == 0 and (spec.swizzle or (piece * spec.element_bytes) % 16):
        return False
    return (piece * _row_bytes(plan, dim)) % piece_align == 0


def _row_bytes(plan: TmaPlan, dim: int) -> int:
    """Shared bytes one step of map dimension ``dim`` spans inside the box (rows of a
    swizzled box are padded to the span)."""
    spec = plan.tensor_map
    total = spec.element_bytes
    for inner in range(dim):
        extent = spec.box_dims[inner]
        if inner == 0 and spec.swizzle:
            total = max(total * extent, SWIZZLE_GEOMETRY[spec.swizzle][0])
        else:
            total *= extent
    return total


# ---- a whole tile multicast by a mask: every receiver must get it once -----------------
#
# With ``multicast=<mask>`` the CTA that runs the copy loads the whole tile into every CTA of
# the mask. When two CTAs of the cluster run it and their masks share a receiver, that
# receiver gets both issues, at the shared offsets each issuer computed for itself: if they
# overlap, the bytes land twice and the receiver's mbarrier completes more bytes than it was
# armed for (the tx-count underflows, undefined behaviour in PTX). So each pair of CTAs that
# may issue the copy must write disjoint shared bytes (each CTA sending its own slice), or
# reach disjoint receivers.
#
# The two issues compared are the copy as two CTAs run it at the same point of the kernel:
# the CTA's rank in the cluster fixed to each value, the same iteration of every enclosing
# loop whose range is the same in both CTAs (its variable is one value for both), the same
# kernel parameters (the variables of the global tensor's shape), and every other variable
# (scope ids such as ``cta`` or ``tid``, the variable of a loop whose range depends on the
# CTA, local scalars) free in each CTA on its own, bound only by that CTA's facts. A local
# scalar whose value a fact states (``t = rank * 32``) is replaced by that value first.

#: A cluster holds at most 16 CTAs.
MAX_CLUSTER = 16
#: At most this many placements of a cluster's CTAs are tried (a cluster holds 16).
MAX_CLUSTER_PLACEMENTS = 64
#: At most this many differences of two issues' shared offsets are proven one by one.
MAX_OFFSET_PROOFS = 64


@dataclass(frozen=True)
class _Issuer:
    """One CTA of the cluster that may run the copy: its rank values and mask."""

    values: tuple  # ((rank var, int), ...)
    mask: int
    facts: tuple  # the copy's facts with the rank substituted
    ranges: dict  # the loops' ranges with the rank substituted

    def name(self) -> str:
        if len(self.values) == 1:
            (var, value), = self.values
            return f"{var.name} = {value}"
        names = ", ".join(var.name for var, _ in self.values)
        return f"({names}) = ({', '.join(str(value) for _, value in self.values)})"


def check_mask_issuers(plan: TmaPlan, mask, cluster: tuple, var_ranges: Mapping,
                       facts: tuple, shared_region, global_region) -> None:
    """Refuse a multicast load of a whole tile (``multicast=<mask>``) that two CTAs may issue
    into overlapping shared bytes of a CTA both masks name.

    ``cluster`` is ``((rank var, size or None), ...)``, the CTA-in-cluster ids in force;
    ``var_ranges`` and ``facts`` are what the copy was planned under (the loops' ranges and
    the facts captured at parse time). A mask expression whose value for some CTA is not a
    constant is not judged here.
    """
    issuers = _issuers(mask, cluster, var_ranges, facts)
    if issuers is None or len(issuers) < 2:
        return
    loops = {var for var in var_ranges if isinstance(var_ranges[var], tvm.ir.Range)} - {
        var for var, _ in cluster}
    # Kernel parameters: the variables of the global tensor's shape that no scope id,
    # loop or fact about a range binds on the device.
    source = global_region.source
    scoped = {found[0] for found in map(as_range, facts) if found is not None}
    host = {var for extent in (*source.shape, *(source.strides or ()))
            for var in _variables(extent) if var not in scoped and var not in loops}
    width = tvm.DataType(str(shared_region.source.dtype)).bits // 8
    footprint = plan.tensor_map.shared_footprint
    steps = sorted({sum(step * axis.smem_stride for step, axis in zip(point, plan.issue_axes))
                    * width for point in itertools.product(
                        *[range(axis.extent) for axis in plan.issue_axes])})
    for first, second in itertools.combinations(issuers, 2):
        if not first.mask & second.mask:
            continue  # no CTA receives from both
        verdict = _disjoint_writes(plan.smem_offset * width, steps, footprint, first, second,
                                   _same_in_both(first, second, loops, host))
        if verdict is True:
            continue
        raise refuse("multicast", _duplicate_detail(mask, issuers, first, second, verdict,
                                                     shared_region, global_region))


def _issuers(mask, cluster: tuple, var_ranges: Mapping, facts: tuple) -> list | None:
    """The CTAs of the cluster the facts let reach the copy, each with its mask; None when a
    mask expression is not a constant for some CTA (a mask only the run decides)."""
    spans = []
    for var, size in cluster:
        if size is None:
            bound = Prover(var_ranges, facts).analyzer.const_int_bound(var)
            low, high = max(bound.min_value, 0), min(bound.max_value, MAX_CLUSTER - 1)
            size = None if high < low else (low, high + 1)
        else:
            size = (0, size)
        if size is None:
            return []
        spans.append(range(*size))
    placements = list(itertools.product(*spans))
    if len(placements) > MAX_CLUSTER_PLACEMENTS:
        raise refuse("multicast", f"multicast mask {_mask_text(mask)}: the cluster's "
                     f"{len(placements)} possible CTAs are too many to tell which of them "
                     "issue this load; declare the cluster's size (T.cta_id_in_cluster([n]))")
    found = []
    for values in placements:
        pairs = tuple((var, value) for (var, _), value in zip(cluster, values))
        ranks = {var: tvm.tirx.const(value, str(var.ty.dtype)) for var, value in pairs}
        here = tuple(substitute(fact, ranks) for fact in facts)
        ranges = {var: _substitute_range(rng, ranks) for var, rng in var_ranges.items()
                  if isinstance(rng, tvm.ir.Range) and not any(var.same_as(r) for r in ranks)}
        prover = Prover(ranges, here)
        if prover.unreachable:
            continue  # a guard keeps this CTA away (``if rank == 0:``)
        value = mask if isinstance(mask, int) else _constant_mask(substitute(mask, ranks),
                                                                  prover)
        if value is None:
            return None
        found.append(_Issuer(pairs, value, here, ranges))
    return found


def _same_in_both(first: _Issuer, second: _Issuer, loops: set, host: set) -> set:
    """The variables that hold one value in both CTAs at the paired issues: the kernel
    parameters, and the variables of the loops whose ranges are the same expression of them
    in both (the same iteration)."""
    same = set(host)
    analyzer = Analyzer()
    grown = True
    while grown:
        grown = False
        for var in loops - same:
            a, b = first.ranges.get(var), second.ranges.get(var)
            if a is None or b is None:
                continue
            ends = [analyzer.simplify(end) for end in (a.min, a.extent, b.min, b.extent)]
            if (tvm_ffi.structural_equal(ends[0], ends[2])
                    and tvm_ffi.structural_equal(ends[1], ends[3])
                    and all(used in same for end in ends[:2] for used in _variables(end))):
                same.add(var)
                grown = True
    return same


def _variables(expr) -> list:
    """The scalar variables ``expr`` mentions (not buffers)."""
    if as_int(expr) is not None:
        return []
    return [var for var in tvm.tirx.analysis.undefined_vars(expr)
            if type(var.ty).__name__ != "BufferType"]


def _disjoint_writes(base, steps: list, footprint: int, first: _Issuer, second: _Issuer,
                     same: set):
    """True when the two CTAs' issues provably write disjoint shared bytes; otherwise the
    byte distance between their first issues when it is a constant (they overlap), else
    None (it cannot be decided). ``same``: the variables one value in both CTAs."""
    rename = _Renamer(same)
    ranks_a = {var: tvm.tirx.const(v, str(var.ty.dtype)) for var, v in first.values}
    ranks_b = {var: tvm.tirx.const(v, str(var.ty.dtype)) for var, v in second.values}
    facts = list(first.facts) + [rename(fact) for fact in second.facts]
    for var, rng in second.ranges.items():  # the second CTA's own loops
        if var not in same:
            facts.append(rename(range_fact(var, rng.min, rng.min + rng.extent)))
    joint = Prover(first.ranges, facts)
    if joint.unreachable:
        return True  # never both in the same iteration (``if k % 2 == rank:``)
    start_a = _resolve(substitute(base, ranks_a), first.facts)
    start_b = rename(_resolve(substitute(base, ranks_b), second.facts))
    distance = joint.simplify(start_b - start_a)
    span = steps[-1] - steps[0] + footprint
    if as_int(distance) is not None:
        distance = as_int(distance)
        overlap = any(abs(distance + b - a) < footprint for a in steps for b in steps)
        return distance if overlap else True
    if joint.prove(tvm.tirx.any(distance >= span, distance <= -span)):
        return True  # the spans of the two CTAs' issues do not meet
    gaps = sorted({b - a for a in steps for b in steps})
    if len(gaps) > MAX_OFFSET_PROOFS:
        return None
    if all(joint.prove(tvm.tirx.any(distance + gap >= footprint,
                                    distance + gap <= -footprint)) for gap in gaps):
        return True
    return None


def _duplicate_detail(mask, issuers: list, first: _Issuer, second: _Issuer, verdict,
                      shared_region, global_region) -> str:
    ranks = [var for var, _ in first.values]
    if isinstance(mask, int):
        what, receivers = f"multicast mask {mask:#b}", "every CTA of the mask"
    else:
        what = (f"multicast={mask} (mask {first.mask:#b} where {first.name()}, "
                f"{second.mask:#b} where {second.name()})")
        receivers = "every CTA both masks name"
    every = issuers[0].name() + "".join(f", {issuer.name().split(' = ')[1]}"
                                        for issuer in issuers[1:])
    if verdict == 0:
        how = "the same shared bytes"
    elif verdict is None:
        how = "shared bytes that are not provably disjoint"
    else:
        how = f"overlapping shared bytes ({abs(verdict)} bytes apart)"
    regions = "; ".join(f"{issuer.name()}: {_region_text(global_region, issuer)} into "
                        f"{_region_text(shared_region, issuer)}" for issuer in (first, second))
    one = " and ".join(f"{var} == 0" for var in ranks)
    fix = (f"deal the tile out with multicast={ranks[0]}, or issue the copy from one CTA: "
           f"`if {one}:`" if len(ranks) == 1 else f"issue the copy from one CTA: `if {one}:`")
    return (f"{what}: {len(issuers)} CTAs of the cluster issue this load ({every}; no guard "
            f"leaves one issuer), and the CTAs where {first.name()} and {second.name()} write "
            f"{how} ({regions}) of {receivers}: each receives those bytes once per issuing "
            "CTA, and its mbarrier more bytes than it was armed for (the tx-count underflows: "
            f"undefined behaviour); {fix} (or give each CTA its own slice of the tile)")


def _region_text(region, issuer: _Issuer) -> str:
    ranks = {var: tvm.tirx.const(v, str(var.ty.dtype)) for var, v in issuer.values}
    analyzer = Analyzer()
    parts = []
    for rng in region.region:
        low = analyzer.simplify(substitute(rng.min, ranks))
        high = analyzer.simplify(substitute(rng.min + rng.extent, ranks))
        parts.append(f"{low}:{high}")
    return f"{region.source.name}[{', '.join(parts)}]"


#: Bitwise operations on a mask the analyzer does not fold (``T.uint16(3) >> 1``).
_BITWISE = {"LShift": lambda a, b: a << b, "RShift": lambda a, b: a >> b,
            "BitwiseAnd": lambda a, b: a & b, "BitwiseOr": lambda a, b: a | b,
            "BitwiseXor": lambda a, b: a ^ b}


def _constant_mask(expr, prover: Prover) -> int | None:
    """The 16 bits of a mask expression whose variables are all fixed, else None."""
    value = as_int(prover.simplify(expr))
    if value is None:
        kind = type(expr).__name__
        if kind in _BITWISE:
            a, b = _constant_mask(expr.a, prover), _constant_mask(expr.b, prover)
            value = None if a is None or b is None or b < 0 else _BITWISE[kind](a, b)
        elif kind == "BitwiseNot":
            a = _constant_mask(expr.a, prover)
            value = None if a is None else ~a
        elif kind == "Cast":
            value = _constant_mask(expr.value, prover)
    return None if value is None else value & 0xFFFF


def _mask_text(mask) -> str:
    return f"{mask:#b}" if isinstance(mask, int) else str(mask)


def substitute(expr, values: Mapping):
    """``expr`` with each variable of ``values`` replaced by its value."""
    if as_int(expr) is not None or not values:
        return expr

    def var(node):
        for key, value in values.items():
            if node.same_as(key):
                return value
        return node

    return tvm_ffi.structural_map(expr, [(tvm.tirx.Var, var)])


def _substitute_range(rng, values: Mapping):
    return tvm.ir.Range.from_min_extent(substitute(rng.min, values),
                                        substitute(rng.extent, values))


def _resolve(expr, facts: tuple, rounds: int = 4):
    """``expr`` with each local scalar a fact gives the value of (``t == rank * 32``)
    replaced by that value."""
    known = [(fact.a, fact.b) for fact in facts
             if isinstance(fact, tvm.tirx.EQ) and isinstance(fact.a, TensorLoad)]
    if not known or as_int(expr) is not None:
        return expr

    def load(node):
        for key, value in known:
            if tvm_ffi.structural_equal(key, node):
                return value
        return node

    for _ in range(rounds):
        replaced = tvm_ffi.structural_map(expr, [(TensorLoad, load)])
        if replaced.same_as(expr):
            break
        expr = replaced
    return expr


class _Renamer:
    """The second CTA's copy of an expression: every variable not in ``same`` (one value in
    both CTAs) becomes its own, and so does every load."""

    def __init__(self, same: set) -> None:
        self.same = same
        self.vars: list = []
        self.loads: list = []

    def __call__(self, expr):
        if as_int(expr) is not None:
            return expr

        def load(node):
            for key, fresh in self.loads:
                if tvm_ffi.structural_equal(key, node):
                    return fresh
            fresh = tvm.tirx.Var(f"{node.source.name}'", node.ty.dtype
                                 if hasattr(node.ty, "dtype") else "int32")
            self.loads.append((node, fresh))
            return fresh

        def var(node):
            if type(node.ty).__name__ == "BufferType" or node in self.same:
                return node
            for key, fresh in self.vars:
                if node.same_as(key):
                    return fresh
            fresh = tvm.tirx.Var(f"{node.name}'", node.ty)
            self.vars.append((node, fresh))
            return fresh

        expr = tvm_ffi.structural_map(expr, [(TensorLoad, load)])
        return tvm_ffi.structural_map(expr, [(tvm.tirx.Var, var)])
