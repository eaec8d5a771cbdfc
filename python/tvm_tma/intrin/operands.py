"""What can be known about an operand when a call is built: its memory space."""

from __future__ import annotations


def pointer_space(expr) -> str | None:
    """``"shared"``, ``"global"`` or ``"param"`` for pointers whose origin is visible.

    ``buffer.ptr_to(...)`` is ``address_of(BufferLoad)`` and carries its buffer's scope;
    ``T.address_of(tensor_map)`` names a kernel parameter. Anything else (an integer address,
    a pointer computed elsewhere) is unknown and left to the assembler.
    """
    if type(expr).__name__ == "Call":
        op = getattr(expr, "op", None)
        if op is not None and getattr(op, "name", "") == "tirx.address_of" and expr.args:
            target = expr.args[0]
            if type(target).__name__ in ("BufferLoad", "TensorLoad"):
                source = getattr(target, "buffer", None) or target.source
                scope = source.scope()
                return "shared" if scope.startswith("shared") else scope
            if type(target).__name__ == "Var":
                if "TensorMap" in str(getattr(target, "ty", "")):
                    return "param"
    return None


def require_space(expr, allowed: tuple[str, ...], what: str) -> None:
    from .errors import IntrinError

    space = pointer_space(expr)
    if space is not None and space not in allowed:
        raise IntrinError(
            "operand-space",
            f"{what} must be in {' or '.join(allowed)} memory, got a {space} pointer ({expr})",
        )
