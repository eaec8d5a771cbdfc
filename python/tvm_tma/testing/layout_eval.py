"""Evaluate TVM integer expressions over numpy arrays.

Tests need the address every element of a region has under a TVM layout — TVM's own answer,
not the planner's reading of it. ``Layout.apply`` with symbolic coordinates gives that as an
expression; this evaluates it for all coordinates at once.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tvm

#: Expression node class name -> numpy function (TVM 0.27 keeps these in tvm.ir.prim.expr).
_BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "FloorDiv": np.floor_divide,
    "FloorMod": np.mod,
    "Min": np.minimum,
    "Max": np.maximum,
    "BitwiseXor": np.bitwise_xor,
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
    "LShift": np.left_shift,
    "RShift": np.right_shift,
    "EQ": np.equal,
    "NE": np.not_equal,
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
}


def evaluate(expr, env: Mapping) -> np.ndarray:
    """Value of ``expr`` with each Var replaced by ``env[var]`` (int64 numpy arrays).

    A local scalar's load ``x[0]`` (a device-side value a plan may depend on) takes the
    value ``env`` binds to the buffer ``x``."""
    if isinstance(expr, int):
        return np.int64(expr)
    kind = type(expr).__name__
    if kind == "IntImm":
        return np.int64(expr.value)
    if kind == "Var":
        return _bound(expr, env)
    if kind == "TensorLoad":
        if any(int(evaluate(index, env)) != 0 for index in expr.indices):
            raise NotImplementedError(f"a load of a scalar's element 0 only: {expr}")
        return _bound(expr.source, env)
    if kind == "Cast":
        return evaluate(expr.value, env)
    if kind == "Let":  # a raw swizzle ComposeLayout names its intermediate values
        return evaluate(expr.body, {**env, expr.var: evaluate(expr.value, env)})
    if kind in _BINARY:
        return _BINARY[kind](evaluate(expr.a, env), evaluate(expr.b, env))
    if kind == "Select" or (kind == "Call" and expr.op.name.endswith("if_then_else")):
        # A unit's length by its K part (ordered split-K with a short part 0).
        condition, true_value, false_value = ((expr.condition, expr.true_value,
                                               expr.false_value) if kind == "Select"
                                              else expr.args)
        return np.where(evaluate(condition, env), evaluate(true_value, env),
                        evaluate(false_value, env))
    raise NotImplementedError(f"{kind} in layout expression: {expr}")


def _bound(var, env: Mapping) -> np.ndarray:
    """``env``'s value of ``var`` (looked up by identity: TIR variables compare as exprs)."""
    for key, value in env.items():
        if key.same_as(var):
            return np.asarray(value, dtype=np.int64)
    raise KeyError(f"unbound variable {var}")


def layout_offsets(layout, shape) -> np.ndarray:
    """Element offset of every coordinate of ``shape`` under ``layout`` (array of ``shape``)."""
    coords = [tvm.tirx.Var(f"i{k}", "int64") for k in range(len(shape))]
    applied = layout.apply(*coords, shape=list(shape))
    memory = [value for axis, value in applied.items() if str(axis) == "m"]
    if len(memory) != 1:
        raise ValueError(f"layout {layout} does not map to one memory offset: {applied}")
    grids = np.indices(shape, dtype=np.int64)
    env = dict(zip(coords, grids))
    return np.broadcast_to(evaluate(memory[0], env), shape).astype(np.int64)
