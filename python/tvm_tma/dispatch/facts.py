"""Kernel facts a copy carries from parse time to lowering, inside its own IR.

The planner proves a copy in bounds from what holds where the copy stands: the ranges of
``cta = T.cta_id([132])`` and the other scope ids, the conditions of the enclosing ``if``s
(``if t < num_tiles:``), ``T.assume(...)`` statements, and the values of local scalars
(``t = cta + i * grid``). TVM 0.27 gives a dispatch only the launch IterVars and the
enclosing loop ranges, so the parse hook reads the rest from the builder's open frames
(:mod:`tvm_tma.parse_frames`) and writes it, as boolean expressions, into the copy's own
config under :data:`FACTS_KEY`. The facts live exactly as long as the kernel's IR: nothing
is kept per process, and a kernel printed and parsed again gets them captured afresh.

A fact must hold *at the copy*, on every path that reaches it, in every loop iteration.
Facts over immutable variables (scope ids, loop variables, parameters) always do. A fact
that reads shared or global memory never does (another thread may write it). A fact that
reads a thread's own local buffer (a scalar ``t``) is kept only if nothing between it and
the copy can change that buffer: no statement already written between them mentions the
buffer (other than reading it into a different buffer), and no loop opens between them
(a later iteration could run code that follows the copy and changes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm.ir.expr import TensorLoad

from ..parse_frames import frames_being_parsed, scope_id_defs_being_parsed
from ..planner.proofs import range_fact

#: The config key of ``copy_async`` that holds the captured facts (reserved by "tma").
FACTS_KEY = "tma_facts"
#: The config key that holds the kernel's CTA-in-cluster rank variables (a cluster kernel).
CLUSTER_KEY = "tma_cluster"
#: The config key that holds the variables that tell the kernel's CTAs apart (``T.cta_id``,
#: ``T.cluster_id``, ``T.cta_id_in_cluster``) and their extents.
CTA_KEY = "tma_cta"
#: The scope binding of ``T.cta_id_in_cluster`` (cluster -> cta, tvm/tirx/exec_scope.py).
_CLUSTER_TO_CTA = 2
#: The scope bindings of the CTA-telling ids: kernel -> cluster, kernel -> cta, cluster -> cta.
_KERNEL_TO_CLUSTER, _KERNEL_TO_CTA = 0, 1
_CTA_TELLING = (_KERNEL_TO_CLUSTER, _KERNEL_TO_CTA, _CLUSTER_TO_CTA)

_LOOP_FRAMES = ("ForFrame", "WhileFrame")
_COPY_OPS = ("tirx.tile.copy", "tirx.tile.copy_async")


@dataclass(frozen=True)
class _Candidate:
    fact: object
    frame: int  # index of the frame whose statement (or condition) states it
    after: int  # statements of that frame after this index run before the copy


def _scope_id_facts() -> list:
    facts = []
    for scope_def in scope_id_defs_being_parsed() or ():
        extents = scope_def.extents
        if extents is None:  # deferred: its extent is only known after the verifier
            continue
        for var, extent in zip(scope_def.def_ids, extents):
            facts.append(range_fact(var, 0, extent))
    return facts


def buffer_vars(node) -> set:
    """The buffers an expression or statement mentions (their data Vars)."""
    return {v for v in tvm.tirx.analysis.undefined_vars(node)
            if type(v.ty).__name__ == "BufferType"}


def assumed(stmt):
    """The condition of ``T.assume(cond)``, else None."""
    value = getattr(stmt, "value", None) if type(stmt).__name__ == "Evaluate" else None
    op = getattr(value, "op", None)
    if type(value).__name__ == "Call" and getattr(op, "name", "") == "tirx.assume":
        return value.args[0]
    return None


def scalar_value(stmt):
    """``load == value`` for ``t = value`` into a one-element local buffer, else None.

    A value that reads local scalars keeps them (the fact then holds only while none of
    them changes: :func:`_holds_at_copy` checks that); one that reads shared or global
    memory -- a group's first row, ``offs[g - 1]`` -- states only what holds for any value
    that memory held: each such read becomes a fresh unknown (``start == min(max(x, 0),
    end)`` still bounds ``start`` by ``end``). ``t = t + 1`` states nothing."""
    if type(stmt).__name__ != "BufferStore":
        return None
    buffer = stmt.buffer
    if str(buffer.scope()) != "local" or len(stmt.indices) != 1:
        return None
    read = buffer_vars(stmt.value)
    if any(var.same_as(buffer) for var in read):
        return None  # t = t + 1: the fact would relate t's new value to its old one
    value = stmt.value
    if any(str(var.ty.storage_scope) != "local" for var in read):
        value = _unknown_reads(value)
    return tvm.tirx.EQ(buffer[stmt.indices[0]], value)


def _unknown_reads(value):
    """``value`` with every read of shared or global memory replaced by a fresh variable of
    its type (what was read is not known to be what that memory holds later)."""

    def load(node):
        if str(node.source.data.ty.storage_scope) == "local":
            return node
        return tvm.tirx.Var("loaded", node.ty.dtype if hasattr(node.ty, "dtype") else
                            str(node.dtype))

    return tvm_ffi.structural_map(value, [(TensorLoad, load)])


def _candidates(frames: list) -> list[_Candidate]:
    found = []
    for index, frame in enumerate(frames):
        for position, stmt in enumerate(getattr(frame, "stmts", ())):
            fact = assumed(stmt)
            if fact is None:
                fact = scalar_value(stmt)
            if fact is not None:
                found.append(_Candidate(fact, index, position))
        kind = type(frame).__name__
        following = type(frames[index + 1]).__name__ if index + 1 < len(frames) else ""
        if kind == "WhileFrame":  # re-tested before every pass through the body
            found.append(_Candidate(frame.condition, index, -1))
        if kind == "IfFrame" and following in ("ThenFrame", "ElseFrame"):
            condition = frame.condition
            fact = condition if following == "ThenFrame" else tvm.sym.Analyzer().simplify(
                tvm.tirx.Not(condition))
            found.append(_Candidate(fact, index, len(getattr(frame, "stmts", ()))))
    return found


def writes(stmt, buffers: set) -> bool:
    """Whether ``stmt`` may change one of ``buffers``.

    Compound statements are looked into (conditions and regions only read); a leaf that
    mentions a buffer in any other way (a call taking its address, say) counts as a write.
    """
    kind = type(stmt).__name__
    if kind == "SeqStmt":
        return any(writes(child, buffers) for child in stmt.seq)
    if kind == "IfThenElse":
        return writes(stmt.then_case, buffers) or (
            stmt.else_case is not None and writes(stmt.else_case, buffers))
    if kind in ("For", "While", "AttrStmt"):
        return writes(stmt.body, buffers)
    if kind == "BufferStore":
        return stmt.buffer in buffers
    if kind == "DeclBuffer":
        return False  # declares a view: its shape and offset only read
    if kind == "TilePrimitiveCall" and str(stmt.op.name) in _COPY_OPS:
        return stmt.args[0].source in buffers  # a copy writes its first operand only
    if assumed(stmt) is not None:
        return False
    return bool(buffer_vars(stmt) & buffers)


def _holds_at_copy(candidate: _Candidate, frames: list) -> bool:
    buffers = buffer_vars(candidate.fact)
    if not buffers:
        return True
    if any(str(var.ty.storage_scope) != "local" for var in buffers):
        return False  # shared or global memory: another thread may change it at any time
    later_frames = frames[candidate.frame + 1:]
    if any(type(frame).__name__ in _LOOP_FRAMES for frame in later_frames):
        return False
    between = list(getattr(frames[candidate.frame], "stmts", ()))[candidate.after + 1:]
    for frame in later_frames:
        between += list(getattr(frame, "stmts", ()))
    return not any(writes(stmt, buffers) for stmt in between)


def _context_facts() -> list:
    """Guards, assumptions and scalar values that hold at the copy.

    Reading the builder's frames leans on TVM internals; if a future TVM changes them, a
    copy loses these facts (and may be refused), but parsing never fails because of them.
    """
    frames = frames_being_parsed() or []
    try:
        return [c.fact for c in _candidates(frames) if _holds_at_copy(c, frames)]
    except Exception:  # noqa: BLE001  (fewer facts only ever means more refusals)
        return []


def capture_into(config: dict) -> None:
    """Write the facts of the kernel being parsed into ``config`` (replacing stale ones),
    and, in a cluster kernel, its CTA-in-cluster rank variables (their ranges are facts)."""
    config.pop(FACTS_KEY, None)
    config.pop(CLUSTER_KEY, None)
    facts = _scope_id_facts() + _context_facts()
    if facts:
        config[FACTS_KEY] = facts
    config.pop(CTA_KEY, None)
    defs = list(scope_id_defs_being_parsed() or ())
    ranks = [var for scope_def in defs
             if int(scope_def.scope) == _CLUSTER_TO_CTA for var in scope_def.def_ids]
    if ranks:
        config[CLUSTER_KEY] = ranks
    ctas = [[var, extent, int(scope_def.scope)] for scope_def in defs
            if int(scope_def.scope) in _CTA_TELLING and scope_def.extents is not None
            for var, extent in zip(scope_def.def_ids, scope_def.extents)]
    if ctas:
        config[CTA_KEY] = ctas


def cluster_ranks_of(config: Mapping) -> tuple:
    """The CTA-in-cluster rank variables of the kernel (empty: not a cluster kernel)."""
    ranks = config.get(CLUSTER_KEY) if config is not None else None
    return tuple(ranks) if ranks is not None else ()


def cta_indices_of(config: Mapping) -> dict:
    """The variables that tell the kernel's CTAs apart (``T.cta_id``, ``T.cluster_id``,
    ``T.cta_id_in_cluster``) and take more than one value, with their extents (empty for a
    copy built without the parser)."""
    entries = config.get(CTA_KEY) if config is not None else None
    return {entry[0]: entry[1] for entry in (entries or ())
            if not (type(entry[1]).__name__ == "IntImm" and int(entry[1]) == 1)}


def cta_identities_of(config: Mapping) -> tuple:
    """The sets of :func:`cta_indices_of`'s variables that each tell every CTA apart on
    their own: the grid's CTA indices (``T.cta_id``, every dimension of it), or the
    cluster indices with the ranks in the cluster (``T.cluster_id`` and
    ``T.cta_id_in_cluster``). A CTA's slots may be indexed by either set (a cluster
    kernel's ``maps.ptr_to([cta, 0])`` needs no rank term: its rank is a function of its
    index), never by part of one (``bx`` of a ``(bx, by)`` grid: the CTAs of one ``bx``
    would share)."""
    indices = cta_indices_of(config)
    entries = [entry for entry in (config.get(CTA_KEY) or ()) if entry[0] in indices] \
        if config is not None else []
    scoped = {scope: tuple(entry[0] for entry in entries if entry[2] == scope)
              for scope in _CTA_TELLING}
    identities = [scoped[_KERNEL_TO_CTA]] if scoped[_KERNEL_TO_CTA] else []
    if scoped[_KERNEL_TO_CLUSTER] and scoped[_CLUSTER_TO_CTA]:
        identities.append(scoped[_KERNEL_TO_CLUSTER] + scoped[_CLUSTER_TO_CTA])
    return tuple(identities)


def facts_of(config: Mapping) -> tuple:
    """The facts a copy carries (empty for a copy built without the parser)."""
    facts = config.get(FACTS_KEY) if config is not None else None
    return tuple(facts) if facts is not None else ()
