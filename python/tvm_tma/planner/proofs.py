"""Symbolic facts the planner must *prove* before it emits a copy.

TMA faults or silently miscopies when an alignment or bound is wrong, so every such
condition goes through :class:`Prover`: constant conditions are decided exactly, symbolic
ones with TVM's analyzer under the kernel's variable ranges. "Cannot prove" is a refusal,
never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Union

import tvm
import tvm_ffi
from tvm.ir.expr import TensorLoad
from tvm.sym import Analyzer, ProofStrength

Expr = Union[int, "tvm.tirx.PrimExpr"]

#: The solver's budget per question (Z3's deterministic resource count). A loop bound over
#: two variables costs about 500; the limit only stops a pathological question early, and
#: "not proven" is a refusal, never a guess.
SOLVER_RLIMIT = 1_000_000


def as_int(value: Expr) -> int | None:
    """The value as a Python int when it is a compile-time constant, else None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, tvm.tirx.IntImm):
        return int(value.value)
    return None


def range_fact(var, low, high):
    """The fact ``low <= var < high`` (how a variable's range travels as a boolean)."""
    low = tvm.tirx.const(low, str(var.ty.dtype)) if isinstance(low, int) else low
    return tvm.tirx.And(low <= var, var < high)


def as_range(fact) -> tuple | None:
    """``(var, Range)`` when ``fact`` is ``lo <= var and var < hi``, else None."""
    if not isinstance(fact, tvm.tirx.And):
        return None
    low, high = fact.a, fact.b
    if not (isinstance(low, tvm.tirx.LE) and isinstance(high, tvm.tirx.LT)):
        return None
    var = low.b
    if not isinstance(var, tvm.tirx.Var) or not high.a.same_as(var):
        return None
    return var, tvm.ir.Range.from_min_extent(low.a, high.b - low.a)


def _bounds_one_variable(fact) -> bool:
    """``var < c``, ``c <= var``, ... or a range: a fact the analyzer turns into a bound."""
    if as_range(fact) is not None:
        return True
    if not isinstance(fact, (tvm.tirx.LT, tvm.tirx.LE, tvm.tirx.GT, tvm.tirx.GE)):
        return False
    sides = (fact.a, fact.b)
    return (sum(isinstance(side, tvm.tirx.Var) for side in sides) == 1
            and sum(as_int(side) is not None for side in sides) == 1)


@dataclass(frozen=True)
class Established:
    """A safety fact the planner proved, and the kernel facts the proof could lean on."""

    what: str
    condition: str
    using: tuple[str, ...]


class Prover:
    """An analyzer bound to the kernel's facts: variable ranges (block ids, loop vars, scope
    ids) and assumptions (boolean facts carried by the copy).

    ``established`` collects the safety facts the rule checks proved, for ``explain``.
    """

    def __init__(self, var_ranges: Mapping | None = None, facts: Iterable = ()) -> None:
        self.analyzer = Analyzer()
        if self.analyzer.is_z3_enabled:
            # A resource limit, not a time limit: the same proof succeeds on every machine.
            self.analyzer.set_z3_rlimit(SOLVER_RLIMIT)
        self.assumptions: dict = {}  # Var or fact -> its text, in the order given
        self.established: list[Established] = []
        #: The safety facts it failed to prove, with what it knew (the last one is what a
        #: refusal is about; ``explain`` prints it).
        self.unproven: list[Established] = []
        bound: set = set()
        #: Variables the kernel binds on the device (scope ids, loops, launch indices).
        self.device_vars = bound
        #: The range of each of them.
        self.ranges: dict = {}
        constraints: list = []

        def bind(var, rng) -> None:
            self.analyzer.bind(var, rng)
            bound.add(var)
            self.ranges[var] = rng
            self.assumptions[var] = _range_text(var, rng, self.analyzer)
            if not _constant_range(rng):
                # Its ends, as facts: the solver relates them to the other variables.
                constraints.extend([rng.min <= var,
                                    var < self.analyzer.simplify(rng.min + rng.extent)])

        # Constant ranges first: a range whose ends are expressions of other variables (a
        # loop that runs this CTA's tiles, ``range((n - cta + 131) // 132)``, or a strided
        # one, ``range(cta, n, 132)``) is bounded through theirs, so they must be known.
        deferred = []
        for var, rng in (var_ranges or {}).items():
            if isinstance(rng, tvm.ir.Range):
                if _constant_range(rng):
                    bind(var, rng)
                else:
                    deferred.append((var, rng))
        for stated in facts:
            # Under the ranges, a fact may reduce to a simpler one: ``cta + j * 132 < 4``
            # with ``j`` the variable of a one-round loop is ``cta < 4``, a range.
            # Other facts keep the form the kernel wrote (``explain`` quotes them; a fact
            # the ranges refute is found below).
            simplified = self.analyzer.simplify(stated)
            if as_int(simplified) == 1:
                continue
            reduced = _bounds_one_variable(simplified) and not _bounds_one_variable(stated)
            fact = simplified if reduced else stated
            found = as_range(fact)
            if found is not None and found[0] not in bound and all(
                    found[0] is not var for var, _ in deferred):
                if _constant_range(found[1]):
                    bind(*found)
                else:
                    deferred.append(found)
                continue
            constraints.append(fact)
            self.assumptions[fact] = str(fact)
        for var, rng in deferred:
            bind(var, rng)
        constraints += [limit for fact in constraints for limit in self._value_bounds(fact)]
        #: A thread's local scalars (``cur[0]``), each as one variable for the solver, which
        #: reasons about variables only; the native analyzer keeps the loads themselves.
        self._scalars: list = []
        constraints += [named for fact in constraints
                        if not (named := self._name_scalars(fact)).same_as(fact)]
        # One scope holding every assumption, entered for the prover's lifetime: TVM checks
        # on exit that nested scopes close in order, which garbage collection would not do.
        self._scope = None
        #: The facts contradict each other: no execution reaches the copy (a refill guarded
        #: by ``k >= 1`` in a loop of one round, say). Its position-dependent safety facts
        #: then hold vacuously (:meth:`establish`); everything else is still proven, from the
        #: ranges alone, since an analyzer under contradictory constraints proves anything.
        self.unreachable = False
        if constraints:
            together = tvm.tirx.all(*constraints)
            # A fact the ranges alone refute (``step + 4 < 4`` with ``step`` in [0, 4)) is
            # only seen before the scope is entered: inside it the analyzer's bound of
            # ``step`` is the empty intersection, which it does not fold.
            if as_int(self.analyzer.simplify(together)) == 0:
                self.unreachable = True
                return
            self._scope = self.analyzer.constraint_scope(together)
            self._scope.__enter__()
            # Under its own facts a contradictory conjunction folds to false (bounds of one
            # value that cross, say); one that cannot be decided stays symbolic.
            if as_int(self.analyzer.simplify(together)) == 0:
                self._scope.__exit__(None, None, None)
                self._scope = None
                self.unreachable = True

    def _value_bounds(self, fact) -> list:
        """For ``x == value`` (a local scalar's value), the bounds ``value`` has under the
        ranges bound so far, stated on ``x``: what the analyzer needs to bound ``x``."""
        if not isinstance(fact, tvm.tirx.EQ):
            return []
        bound = self.analyzer.const_int_bound(fact.b)
        found = []
        if abs(bound.min_value) < 1 << 62:
            found.append(fact.a >= bound.min_value)
        if abs(bound.max_value) < 1 << 62:
            found.append(fact.a <= bound.max_value)
        return found

    def establish(self, condition, what: str, *, position: bool = True) -> bool:
        """Prove a safety fact; when it holds, record it (with the facts it may rest on).

        ``position`` marks a fact about where this copy reads or writes (its region, its
        addresses): in a copy no execution reaches (:attr:`unreachable`) such a fact holds
        vacuously. Facts about the tensor map itself (``position=False``) do not: the host
        encodes the map whether or not the copy ever runs.
        """
        if hasattr(condition, "asobject"):  # ``a == b`` on PrimExprs is a lazy EqualOp
            condition = condition.asobject()
        if not self.prove(condition):
            if not (self.unreachable and position):
                self.unproven.append(Established(what, str(condition),
                                                 self.known_about(condition)))
                return False
            self.established.append(Established(what, str(condition), (
                "unreachable: the facts at the copy contradict each other",
                *self.assumptions.values())))
            return True
        mentioned = set() if isinstance(condition, bool) else set(
            tvm.tirx.analysis.undefined_vars(condition))
        if mentioned:  # constant facts need no record: they hold for every launch
            mentioned = self._related(mentioned)
            using = tuple(text for key, text in self.assumptions.items()
                          if _mentions(key, mentioned))
            self.established.append(Established(what, str(condition), using))
        return True

    def known_about(self, condition) -> tuple[str, ...]:
        """The facts about the variables ``condition`` mentions (and those they relate to),
        then ``nothing bounds x`` for each variable no fact mentions."""
        if isinstance(condition, bool):
            return ()
        mentioned = set(tvm.tirx.analysis.undefined_vars(condition))
        related = self._related(mentioned)
        known = tuple(text for key, text in self.assumptions.items()
                      if _mentions(key, related))
        unknown = sorted(str(var) for var in mentioned
                         if not any(_mentions(key, {var}) for key in self.assumptions))
        return known + tuple(f"nothing bounds {name}" for name in unknown)

    def _related(self, variables: set) -> set:
        """``variables`` and every variable an assumption about them mentions, and so on:
        the facts a proof may lean on (``cur >= cta`` bounds ``cur`` through ``cta``'s
        range)."""
        related = set(variables)
        while True:
            more = {var for key in self.assumptions if _mentions(key, related)
                    for var in self._variables_of(key)} - related
            if not more:
                return related
            related |= more

    def _variables_of(self, key) -> set:
        """The variables an assumption mentions (a range: those of its ends)."""
        if isinstance(key, tvm.tirx.Var):
            rng = self.ranges.get(key)
            return set() if rng is None else set(
                tvm.tirx.analysis.undefined_vars(rng.min + rng.extent))
        return set(tvm.tirx.analysis.undefined_vars(key))

    def is_host_expr(self, value: Expr) -> bool:
        """Whether the host can compute ``value`` before the launch: it reads no buffer and
        no variable the device binds (ranges are only ever given for device variables)."""
        if as_int(value) is not None:
            return True
        return not any(type(var.ty).__name__ == "BufferType" or var in self.device_vars
                       for var in tvm.tirx.analysis.undefined_vars(value))

    def simplify(self, value: Expr) -> Expr:
        """Fold ``value``; constants come back as plain ints."""
        if as_int(value) is not None:
            return as_int(value)
        folded = self.analyzer.simplify(value)
        constant = as_int(folded)
        return folded if constant is None else constant

    def prove(self, condition) -> bool:
        """True only when ``condition`` holds for every value of the bound variables."""
        if isinstance(condition, bool):
            return condition
        folded = self.analyzer.simplify(condition)
        if as_int(folded) is not None:
            return bool(as_int(folded))
        if self.analyzer.can_prove(folded, ProofStrength.SYMBOLIC_BOUND):
            return True
        named = self._name_scalars(folded)
        return not named.same_as(folded) and bool(
            self.analyzer.can_prove(named, ProofStrength.SYMBOLIC_BOUND))

    def _name_scalars(self, expr):
        """``expr`` with every load of a local scalar replaced by its variable.

        Sound because the loads of one scalar in a copy's facts and region all read the
        value it holds at the copy (the facts a copy carries keep a fact over a
        scalar only where nothing changes the scalar before the copy).
        """
        def name(load):
            source = load.source
            if str(getattr(source.ty, "storage_scope", "")) != "local" or any(
                    as_int(index) is None for index in load.indices):
                return load
            for known, var in self._scalars:
                if tvm_ffi.structural_equal(known, load):
                    return var
            var = tvm.tirx.Var(source.name, load.ty.dtype if hasattr(load.ty, "dtype")
                               else "int32")
            self._scalars.append((load, var))
            return var

        return tvm_ffi.structural_map(expr, [(TensorLoad, name)])

    def divisible(self, value: Expr, divisor: int) -> bool:
        """Prove ``value % divisor == 0``."""
        if divisor == 1:
            return True
        constant = as_int(self.simplify(value))
        if constant is not None:
            return constant % divisor == 0
        return self.prove(tvm.tirx.floormod(value, divisor) == 0)

    def establish_divisible(self, value: Expr, divisor: int, what: str) -> bool:
        """:meth:`divisible`, recorded like :meth:`establish` when ``value`` is symbolic."""
        if not self.divisible(value, divisor):
            if as_int(self.simplify(value)) is None:  # symbolic: vacuous if unreachable
                return self.establish(tvm.tirx.floormod(value, divisor) == 0, what)
            return False
        value = self.simplify(value)
        if as_int(value) is None:
            self.establish(tvm.tirx.floormod(value, divisor) == 0, what)
        return True

    def refutable(self, condition) -> bool:
        """True when ``condition`` is provably false (used to split "unknown" from "wrong")."""
        return self.prove(tvm.tirx.Not(condition)) if not isinstance(condition, bool) else (
            not condition
        )


def _constant_range(rng) -> bool:
    return as_int(rng.min) is not None and as_int(rng.extent) is not None


def _range_text(var, rng, analyzer: Analyzer) -> str:
    return f"{var} in [{rng.min}, {analyzer.simplify(rng.min + rng.extent)})"


def _mentions(key, variables: set) -> bool:
    if isinstance(key, tvm.tirx.Var):
        return key in variables
    return any(var in variables for var in tvm.tirx.analysis.undefined_vars(key))
