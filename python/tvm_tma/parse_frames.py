"""What the IR builder's open frames show while a TVMScript kernel is being parsed.

Some facts a dispatch needs are visible only while the kernel is parsed: TVM 0.27 hands a
dispatch the launch IterVars and enclosing loop ranges, but not the script's scope-id
variables (``cta = T.cta_id([132])``): those stay unbound ``Var``s until LowerTIRx maps
them to ``blockIdx``/``threadIdx``, after dispatch. Their extents are in the
``ScopeIdDefStmt``s the builder holds in its frames. This module only *reads* the frames;
it keeps no state, so parsing any number of kernels leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator


def frames_being_parsed() -> list | None:
    """The builder frames of the PrimFunc being parsed (outermost first), or None."""
    from tvm.script.ir_builder import IRBuilder

    if not IRBuilder.is_in_scope():
        return None
    frames = list(IRBuilder.current().frames)
    if not frames or type(frames[0]).__name__ != "PrimFuncFrame":
        return None
    return frames


def scope_id_defs_being_parsed() -> Iterator | None:
    """The ``ScopeIdDef``s of the PrimFunc being parsed, or None outside of parsing one."""
    frames = frames_being_parsed()
    if frames is None:
        return None
    return (getattr(stmt, "def") for frame in frames for stmt in getattr(frame, "stmts", ())
            if type(stmt).__name__ == "ScopeIdDefStmt")
