"""A faster way for TVMScript macros (``T.inline``) to find the parser that expands them.

When a kernel's script calls a macro, TVM 0.27's ``ScriptMacro._find_parser_def`` finds
the active parser by walking the caller frames with ``inspect.getouterframes``, which
builds a ``FrameInfo`` for every frame on the stack -- reading and tokenizing the source
file of each to get its context line -- only to look at each frame's globals. A kernel
here is macros inside macros (the entry, the CTA, the producer's loads, the consumers'
mainloop, the epilogue), so every expansion walks a deep stack, and the walk was two thirds
of building a GEMM kernel's PrimFunc (cProfile: 2.8 of 4.1 s for three builds of the
4096^3 GEMM, 4374 ``getframeinfo`` calls).

:func:`install` replaces that one method with the same walk over ``frame.f_back``, looking
at the same globals in the same order, without the frame infos: the same parser is found
(or the same error raised), the same IR built. It patches only a TVM whose ``ScriptMacro``
has the method and attribute it expects, and leaves any other alone.
"""

from __future__ import annotations

import inspect


def _find_parser_def(self):
    """The innermost caller frame's parser (TVM's lookup, without building frame infos)."""
    name = type(self).parser_object_name
    frame = inspect.currentframe()
    while frame is not None:
        parser = frame.f_globals.get(name)
        if parser is not None:
            return parser
        frame = frame.f_back
    raise RuntimeError(f"{name} not available")


def install() -> bool:
    """Patch ``ScriptMacro._find_parser_def`` (idempotent); False where TVM's class does not
    look as expected (then nothing is changed)."""
    from tvm.script.parser.core.parser import ScriptMacro

    if ScriptMacro.__dict__.get("_find_parser_def") is _find_parser_def:
        return True
    if not (hasattr(ScriptMacro, "_find_parser_def")
            and isinstance(getattr(ScriptMacro, "parser_object_name", None), str)):
        return False
    ScriptMacro._find_parser_def = _find_parser_def
    return True
