"""What can be known about an operand when a call is built: its memory space."""

from __future__ import annotations

from ..parse_frames import scope_id_defs_being_parsed


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


#: ScopeIdDef bindings that make a kernel a cluster launch: kernel->cluster, cluster->cta,
#: cluster->cta_pair (tvm/tirx/exec_scope.py, _SCOPE_BINDING_TO_PARENT_CUR).
_CLUSTER_BINDINGS = (0, 2, 9)


def kernel_declares_cluster() -> bool | None:
    """Whether the kernel being parsed declared a cluster scope (None: not parsing one).

    While TVMScript is parsed, the IR builder's open frames hold the statements emitted so
    far, including the ``T.cluster_id`` / ``T.cta_id_in_cluster`` scope definitions.
    """
    scope_defs = scope_id_defs_being_parsed()
    if scope_defs is None:
        return None
    return any(int(scope_def.scope) in _CLUSTER_BINDINGS for scope_def in scope_defs)


def require_cluster(what: str) -> None:
    from .errors import IntrinError

    if kernel_declares_cluster() is False:
        raise IntrinError(
            "cluster-launch",
            f"{what} multicasts to other CTAs of a cluster, but this kernel declares no "
            "cluster (add T.cluster_id(...) / T.cta_id_in_cluster(...) before it)",
        )
