"""Building the dispatch's small PrimFuncs with TVM's IR builder, without the parser.

``@T.prim_func`` on a nested function parses that function's Python source on every call:
it walks the interpreter stack with ``inspect.stack()`` and re-reads source files to find
the decorated code. For a dispatch that runs once per copy that was 90% of its time
(measured with benchmarks/planner_cost.py). The same ``T.*`` builder calls, run inside an
``IRBuilder`` PrimFunc frame, produce the same IR with no parsing at all.
"""

from __future__ import annotations

from collections.abc import Callable

from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as builder_ir


def build_prim_func(emit_body: Callable[[], None]):
    """A parameterless PrimFunc whose body is what ``emit_body`` emits with ``T.*`` calls."""
    with IRBuilder() as builder:
        with builder_ir.prim_func():
            emit_body()
    return builder.get()
