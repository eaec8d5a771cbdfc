"""Kernel facts a copy carries from parse time to lowering, inside its own IR.

The planner can only prove a CTA-dependent copy in bounds if it knows the range of
``cta = T.cta_id([132])``; TVM 0.27 gives a dispatch the launch IterVars and the enclosing
loop ranges, but not the script's scope ids. The parse hook reads them from the builder's
frames (:mod:`tvm_tma.parse_frames`) and writes them, as boolean expressions, into the
copy's own config under :data:`FACTS_KEY`. The facts therefore live exactly as long as the
kernel's IR does: nothing is kept per process, and a kernel printed and parsed again gets
them captured afresh.

A fact is a ``PrimExpr`` of type bool. ``lo <= v and v < hi`` on a variable binds ``v`` to
the range ``[lo, hi)``; any other fact is an assumption the prover may use.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..parse_frames import scope_id_defs_being_parsed
from ..planner.proofs import range_fact

#: The config key of ``copy_async`` that holds the captured facts (reserved by "tma").
FACTS_KEY = "tma_facts"


def _scope_id_facts() -> list:
    facts = []
    for scope_def in scope_id_defs_being_parsed() or ():
        extents = scope_def.extents
        if extents is None:  # deferred: its extent is only known after the verifier
            continue
        for var, extent in zip(scope_def.def_ids, extents):
            facts.append(range_fact(var, 0, extent))
    return facts


def capture_into(config: dict) -> None:
    """Write the facts of the kernel being parsed into ``config`` (replacing stale ones)."""
    config.pop(FACTS_KEY, None)
    facts = _scope_id_facts()
    if facts:
        config[FACTS_KEY] = facts


def facts_of(config: Mapping) -> tuple:
    """The facts a copy carries (empty for a copy built without the parser)."""
    facts = config.get(FACTS_KEY) if config is not None else None
    return tuple(facts) if facts is not None else ()
