"""Facts about local scalars that only the whole loop body can vouch for.

While a copy is parsed (:mod:`.facts`) the code that follows it is not written yet, so a
fact over a thread's local scalar is kept only where no loop opens between the fact and the
copy: a later iteration could run code after the copy that changes the scalar. Two natural
kernels need more than that:

* **A guard, then an inner loop** (a tile index, its guard, then the K loop around the
  copy)::

      t = cta + i * ctas
      if t < n:
          for k in T.serial(k_steps):
              Tx.copy_async(..., A[t // cols * 128:..., k * 64:...], ...)

  ``t == cta + i * ctas`` and ``t < n`` hold at the copy in every round of ``k`` exactly
  when nothing in the ``k`` loop's body, before *or after* the copy, stores to ``t``.
* **A counter a ``while`` loop advances** (a persistent or dynamic tile loop)::

      cur[0] = cta
      while cur[0] < n:
          Tx.copy_async(..., A[cur[0] // cols * 128:...], ...)
          cur[0] = cur[0] + ctas

  The condition bounds ``cur[0]`` from above until the first store (:mod:`.facts`); from
  below, ``cur[0] >= cta`` holds throughout the loop when the store before it set
  ``cur[0] = cta`` and every store to ``cur`` in the loop's body adds a non-negative
  constant (an induction over the loop's iterations).

Both need the loop's whole body, which exists once the kernel is parsed. So these facts are
derived from the finished PrimFunc: :func:`complete_facts` adds them to each copy's
``tma_facts`` (the lowering runs it just before ``LowerTIRx``, see :func:`install`), and
``explain`` runs it on the function it explains. Everything here only adds facts that the
code proves; a fact it cannot vouch for is left out, which can only cause a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
import tvm_ffi

from .facts import FACTS_KEY, assumed, buffer_vars, scalar_value, writes

_LOOPS = ("For", "While")
#: What ``const_int_bound`` reports for "no bound" is far above any int64 value we accept.
_UNBOUNDED = 1 << 62
_COPY_OP = "tirx.tile.copy_async"
_VARIANT = "tma"


@dataclass(frozen=True)
class _Step:
    """One ancestor of a copy and which of its children leads there."""

    node: object
    child: int | str  # index into a SeqStmt, "then", "else" or "body"


def _kind(node) -> str:
    return type(node).__name__


def _children(node):
    if _kind(node) == "SeqStmt":
        for index, child in enumerate(node.seq):
            yield index, child
        return
    if _kind(node) == "IfThenElse":
        yield "then", node.then_case
        if node.else_case is not None:
            yield "else", node.else_case
        return
    body = getattr(node, "body", None)
    if isinstance(body, tvm.tirx.Stmt):
        yield "body", body


def _is_tma_copy(node) -> bool:
    return (_kind(node) == "TilePrimitiveCall"
            and str(getattr(node.op, "name", "")) == _COPY_OP
            and str(getattr(node, "dispatch", "")) == _VARIANT)


def copy_paths(func) -> list[tuple[object, tuple[_Step, ...]]]:
    """Every TMA copy of ``func`` with its ancestors, outermost first, in program order."""
    found: list = []

    def walk(node, path: tuple) -> None:
        if _is_tma_copy(node):
            found.append((node, path))
            return
        for child, stmt in _children(node):
            walk(stmt, (*path, _Step(node, child)))

    walk(func.body, ())
    return found


def _before(step: _Step) -> list:
    """The statements of a SeqStmt ancestor that run before the copy's branch."""
    return list(step.node.seq[:step.child]) if _kind(step.node) == "SeqStmt" else []


def _stated(path: tuple) -> list[tuple[object, int, int]]:
    """(fact, level, after): what the code states on the way to the copy.

    ``level`` is the ancestor that states it; ``after`` the index of the statement in that
    SeqStmt that stated it (-1 for an ``if``/``while`` condition).
    """
    found = []
    for level, step in enumerate(path):
        for index, stmt in enumerate(_before(step)):
            fact = assumed(stmt)
            if fact is None:
                fact = scalar_value(stmt)
            if fact is not None:
                found.append((fact, level, index))
        kind = _kind(step.node)
        if kind == "While":
            found.append((step.node.condition, level, -1))
        elif kind == "IfThenElse":
            condition = step.node.condition
            if step.child == "else":
                condition = tvm.sym.Analyzer().simplify(tvm.tirx.Not(condition))
            found.append((condition, level, -1))
    return found


def _unchanged_until_copy(buffers: set, path: tuple, level: int, after: int) -> bool:
    """No store to ``buffers`` between the statement that states a fact (at ``level``, after
    index ``after``) and the copy, in this or any later round of a loop opened after it."""
    for depth in range(level, len(path)):
        step = path[depth]
        between = _before(step)[after + 1:] if depth == level else _before(step)
        if any(writes(stmt, buffers) for stmt in between):
            return False
        if depth > level and _kind(step.node) in _LOOPS and writes(step.node.body, buffers):
            return False
    return True


def _holds_at_copy(fact, path: tuple, level: int, after: int) -> bool:
    buffers = buffer_vars(fact)
    if not buffers:
        return True  # immutable variables: true wherever the statement's scope reaches
    if any(str(var.ty.storage_scope) != "local" for var in buffers):
        return False  # shared or global memory: another thread may change it at any time
    return _unchanged_until_copy(buffers, path, level, after)


def _step_of(store, load) -> int | None:
    """``c`` when ``store`` is ``x[i] = x[i] + c`` (or ``- c``) for ``load`` = ``x[i]``."""
    value = store.value
    sign = {"Add": 1, "Sub": -1}.get(_kind(value))
    if sign is None or not isinstance(value.b, tvm.tirx.IntImm):
        return None
    if not (tvm_ffi.structural_equal(value.a, load)
            and tvm_ffi.structural_equal(list(store.indices), list(load.indices))):
        return None
    return sign * int(value.b.value)


def _stores(node, buffer, in_loop: bool = False) -> list | None:
    """``(store, inside an inner loop)`` for every store to ``buffer`` in ``node``; None if
    ``buffer`` may change another way (a call taking its address, say)."""
    kind = _kind(node)
    if kind == "BufferStore":
        return [(node, in_loop)] if node.buffer.same_as(buffer) else []
    children = list(_children(node))
    if not children or kind == "TilePrimitiveCall":
        return None if writes(node, {buffer}) else []
    found: list = []
    for _, child in children:
        inner = _stores(child, buffer, in_loop or kind in _LOOPS)
        if inner is None:
            return None
        found += inner
    return found


def _path_analyzer(path: tuple):
    """An analyzer that knows the ranges in force at the copy: the scope ids declared before
    it (``cta = T.cta_id([132])``) and the enclosing ``for`` loops."""
    analyzer = tvm.sym.Analyzer()
    for step in path:
        for stmt in _before(step):
            if _kind(stmt) == "ScopeIdDefStmt":
                scope_def = getattr(stmt, "def")
                for var, extent in zip(scope_def.def_ids, scope_def.extents or ()):
                    analyzer.bind(var, tvm.ir.Range(0, extent))
        if _kind(step.node) == "For":
            analyzer.bind(step.node.loop_var,
                          tvm.ir.Range.from_min_extent(step.node.min, step.node.extent))
    return analyzer


def _rounds_bound(loop, load, per_round: int, analyzer) -> int | None:
    """The farthest a counter advanced ``per_round`` each round can get from its start.

    A ``for`` loop of a constant extent runs that many rounds. A ``while`` loop whose
    condition caps the counter (``x < e``, ``e`` at most ``E``) ends once it passes ``E``:
    the counter never exceeds ``E + per_round``; that is a bound on the value, returned as
    a negative number (see :func:`_monotone_bounds`). None: unbounded (it could wrap).
    """
    if _kind(loop) == "For":
        rounds = analyzer.const_int_bound(loop.extent).max_value
        return rounds * per_round if rounds < _UNBOUNDED else None
    condition = loop.condition
    if _kind(condition) in ("LT", "LE") and tvm_ffi.structural_equal(condition.a, load):
        limit = analyzer.const_int_bound(condition.b).max_value
        return -(limit + per_round) if limit < _UNBOUNDED else None
    return None


def _monotone_bounds(path: tuple, analyzer) -> list:
    """``x >= start`` (or ``<=``) for counters that the loops around the copy only advance.

    For a loop whose preceding statement in the same sequence sets ``x[i] = start`` (nothing
    between them writing ``x``) and whose body stores to ``x`` only ``x[i] = x[i] + c``, with
    constants ``c`` of one sign and no store inside an inner loop: ``x`` starts at ``start``
    and moves one way only, as long as it cannot wrap around. So the rounds must be bounded:
    a ``for`` of constant extent, or a ``while`` whose condition caps ``x`` (``x < n``), and
    the farthest value must stay inside the counter's type.
    """
    found = []
    for depth in range(1, len(path)):
        loop, parent = path[depth].node, path[depth - 1]
        if _kind(loop) not in _LOOPS or _kind(parent.node) != "SeqStmt":
            continue
        for position, stmt in enumerate(_before(parent)):
            value = scalar_value(stmt)
            if value is None:
                continue
            load, start = value.a, value.b
            if any(writes(later, buffer_vars(load))
                   for later in _before(parent)[position + 1:]):
                continue
            stores = _stores(loop.body, stmt.buffer)
            if not stores or any(in_loop for _, in_loop in stores):
                continue
            steps = [_step_of(store, load) for store, _ in stores]
            if any(step is None for step in steps):
                continue
            if all(step >= 0 for step in steps):
                if _stays_in_type(loop, load, start, sum(steps), analyzer):
                    found.append(tvm.tirx.GE(load, start))
            elif all(step <= 0 for step in steps) and _kind(loop) == "For":
                if _stays_in_type(loop, load, start, sum(steps), analyzer):
                    found.append(tvm.tirx.LE(load, start))
    return found


def _stays_in_type(loop, load, start, per_round: int, analyzer) -> bool:
    """Whether the counter provably never wraps around its integer type in ``loop``."""
    reach = _rounds_bound(loop, load, abs(per_round), analyzer)
    if reach is None:
        return False
    bits = tvm.DataType(str(load.ty.dtype)).bits if hasattr(load.ty, "dtype") else 32
    top, bottom = (1 << (bits - 1)) - 1, -(1 << (bits - 1))
    first = analyzer.const_int_bound(start)
    if reach < 0:  # a while loop's cap: the value itself
        return -reach <= top
    if per_round >= 0:
        return first.max_value + reach <= top
    return first.min_value - reach >= bottom


def derived_facts(path: tuple) -> list:
    """The facts that hold at a copy with ancestors ``path`` (outermost first)."""
    facts = [fact for fact, level, after in _stated(path)
             if _holds_at_copy(fact, path, level, after)]
    return facts + _monotone_bounds(path, _path_analyzer(path))


def _missing(extra: list, present: list) -> list:
    kept: list = []
    for fact in extra:
        if not any(tvm_ffi.structural_equal(fact, old) for old in [*present, *kept]):
            kept.append(fact)
    return kept


def complete_facts(func):
    """``func`` with every TMA copy's ``tma_facts`` completed from the whole loops around
    it (the function itself when nothing is added)."""
    replacements: list = []
    for op, path in copy_paths(func):
        present = list(op.config.get(FACTS_KEY, ()) or ())
        extra = _missing(derived_facts(path), present)
        if extra:
            config = dict(op.config)
            config[FACTS_KEY] = [*present, *extra]
            replacements.append((op.config, tvm_ffi.Map(config)))
    if not replacements:
        return func

    def replace(value):
        for old, new in replacements:
            if value.same_as(old):
                return new
        return value

    return tvm_ffi.structural_map(func, [(type(replacements[0][0]), replace)])


_installed = False


def install() -> None:
    """Run :func:`complete_facts` on every PrimFunc right before ``LowerTIRx`` dispatches
    its copies (the pipelines look the pass up in ``tvm.tirx.transform`` when they run)."""
    global _installed
    if _installed:
        return
    import tvm.tirx.transform as transform

    lower = transform.LowerTIRx

    def lower_tirx_with_loop_facts():
        complete = transform.prim_func_pass(
            lambda func, _mod, _ctx: complete_facts(func), opt_level=0,
            name="tvm_tma.CompleteLoopFacts")
        return tvm.transform.Sequential([complete, lower()], name="tvm_tma.LowerTIRx")

    lower_tirx_with_loop_facts.__doc__ = lower.__doc__
    lower_tirx_with_loop_facts._tvm_tma_original = lower  # type: ignore[attr-defined]
    transform.LowerTIRx = lower_tirx_with_loop_facts
    _installed = True
