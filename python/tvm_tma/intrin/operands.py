"""What can be known about an operand when a call is built: its memory space."""

from __future__ import annotations

import contextlib
import contextvars
import numbers
from collections.abc import Iterator

from ..parse_frames import scope_id_defs_being_parsed

#: Set while a caller that has already seen the kernel's cluster builds calls outside the
#: kernel's own parse (the dispatch builds its issue code in a PrimFunc of its own, whose
#: open frames cannot show the kernel's ``T.cluster_id``).
_CLUSTER_KNOWN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tvm_tma_cluster_known", default=False)


@contextlib.contextmanager
def cluster_known() -> Iterator[None]:
    """Calls built inside belong to a kernel the caller knows declares a cluster."""
    token = _CLUSTER_KNOWN.set(True)
    try:
        yield
    finally:
        _CLUSTER_KNOWN.reset(token)


def pointer_space(expr) -> str | None:
    """``"shared"``, ``"global"`` or ``"param"`` for pointers whose origin is visible.

    ``buffer.ptr_to(...)`` is ``address_of(BufferLoad)`` and carries its buffer's scope;
    ``T.address_of(tensor_map)`` (or the map variable itself) names a kernel parameter;
    ``buffer.data`` carries its buffer's scope, and any pointer typed into a shared scope is
    shared. Anything else (an integer address, an untyped handle, a pointer computed
    elsewhere) is unknown and left to the assembler.
    """
    name = type(expr).__name__
    if name == "Call":
        op = getattr(expr, "op", None)
        op_name = getattr(op, "name", "") if op is not None else ""
        if op_name == "tirx.address_of" and expr.args:
            target = expr.args[0]
            if type(target).__name__ in ("BufferLoad", "TensorLoad"):
                source = getattr(target, "buffer", None) or target.source
                scope = source.scope()
                return "shared" if scope.startswith("shared") else scope
            if type(target).__name__ == "Var":
                if "TensorMap" in str(getattr(target, "ty", "")):
                    return "param"
        scope_of = getattr(expr.args[0], "scope", None) if expr.args else None
        if op_name == "tirx.buffer_data" and callable(scope_of):
            scope = str(scope_of())
            return "shared" if scope.startswith("shared") else scope
    ty = getattr(expr, "ty", None)
    if type(ty).__name__ == "PointerType":
        if type(ty.element_type).__name__ == "TensorMapType":
            return "param"
        if str(ty.storage_scope).startswith("shared"):
            return "shared"
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
    if _CLUSTER_KNOWN.get():
        return True
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


# ---- operand types: what class of value each operand slot takes ------------------------
#
# The PTX operands are typed: coordinates, sizes and dims are 32-bit ``r`` registers, masks
# and im2col offsets 16-bit ``h``, cache policies and raw addresses 64-bit ``l``; pointers
# (tensor maps, shared and global data, mbarriers, descriptors) are addresses. The helpers
# below refuse a value of the wrong class when the call is built (rule ``operand-type``),
# naming the operand, the value and its type, instead of letting a cast hide it (a float
# coordinate truncated to an integer) or an FFI error surface from deep inside TVM.

#: tvm dtype type codes of the integer classes (int, uint); bool has its own code.
_INT_CODES = (0, 1)
#: tvm dtype type code of an opaque handle.
_HANDLE_CODE = 3


def _prim_dtype(value):
    """The scalar dtype of a TIR expression whose type is a PrimType, else None."""
    ty = getattr(value, "ty", None)
    if type(ty).__name__ != "PrimType":
        return None
    return ty.dtype


def _is_expr(value) -> bool:
    import tvm

    return isinstance(value, tvm.ir.expr.Expr)


def _is_buffer(value) -> bool:
    return type(getattr(value, "ty", None)).__name__ == "BufferType"


def _is_pointer(value) -> bool:
    """A TIR expression of pointer type (``ptr_to``, ``buffer.data``, a handle variable)."""
    if not _is_expr(value) or _is_buffer(value):
        return False
    ty = getattr(value, "ty", None)
    if type(ty).__name__ == "PointerType":
        return True
    dtype = _prim_dtype(value)
    return dtype is not None and dtype.type_code == _HANDLE_CODE


def _is_tensor_map_handle(value) -> bool:
    ty = getattr(value, "ty", None)
    return (type(value).__name__ == "Var" and type(ty).__name__ == "PointerType"
            and type(ty.element_type).__name__ == "TensorMapType")


def is_python_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def describe(value) -> str:
    """The value and its type, for messages: ``T.float32(1.5) (constant of type float32)``."""
    if isinstance(value, bool):
        return f"{value} (a Python bool)"
    if is_python_int(value):
        return f"{int(value)} (a Python int)"
    if isinstance(value, float):
        return f"{value!r} (a Python float)"
    if _is_buffer(value):
        return f"buffer {value.name} (a {value.dtype} buffer in {value.scope()} memory)"
    if _is_expr(value):
        ty = getattr(value, "ty", None)
        if type(ty).__name__ == "PointerType":
            element = ty.element_type
            element = ("TensorMap" if type(element).__name__ == "TensorMapType"
                       else getattr(element, "dtype", element))
            scope = ty.storage_scope or "global"
            return f"{value} (a pointer to {element} in {scope} memory)"
        dtype = _prim_dtype(value)
        kind = "constant" if type(value).__name__ in ("IntImm", "FloatImm") else "expression"
        return f"{value} ({kind} of type {dtype})" if dtype is not None else f"{value}"
    return f"{value!r} (a Python {type(value).__name__})"


def _refuse(what: str, expected: str, value, hint: str = ""):
    from .errors import IntrinError

    raise IntrinError("operand-type",
                      f"{what} must be {expected}, got {describe(value)}{hint}")


def _bits_text(bits: int, exact: bool) -> str:
    return f"a {bits}-bit integer" if exact else f"an integer of at most {bits} bits"


def require_int(value, what: str, bits: int = 32, *, exact: bool = False,
                low: int | None = None, high: int | None = None, note: str = ""):
    """An integer operand: a Python int in ``[low, high]`` or an integer TIR expression of at
    most (``exact``: exactly) ``bits`` bits. Returns a Python int's ``int()``, else the value."""
    expected = _bits_text(bits, exact) + note
    if is_python_int(value):
        value = int(value)
        low = -(1 << (bits - 1)) if low is None else low
        high = (1 << bits) - 1 if high is None else high
        if not low <= value <= high:
            _refuse(what, expected, value, f"; {value} is outside {low}..{high}")
        return value
    dtype = _prim_dtype(value) if _is_expr(value) and not _is_buffer(value) else None
    if dtype is None or dtype.type_code not in _INT_CODES or dtype.lanes != 1:
        hint = ""
        if _is_pointer(value):
            hint = "; a pointer is not an integer" + (
                " (T.reinterpret(\"uint64\", ptr) is its address)" if bits == 64 else "")
        elif _is_buffer(value):
            hint = f"; pass an element or {value.name}.ptr_to([...]), not the buffer"
        _refuse(what, expected, value, hint)
    if (dtype.bits != bits) if exact else (dtype.bits > bits):
        _refuse(what, expected, value)
    return value


def require_static_int(value, what: str) -> int:
    """An attribute written into the instruction text: a Python int (or an integer constant)."""
    if type(value).__name__ == "IntImm" and _prim_dtype(value).type_code in _INT_CODES:
        return int(value.value)
    if not is_python_int(value):
        _refuse(what, "a Python int (it is written into the instruction)", value)
    return int(value)


def require_sequence(values, what: str) -> list:
    """A list of operands (coordinates, offsets, dims): a Python list/tuple or a TVM array."""
    if isinstance(values, (str, bytes)) or _is_expr(values) or not hasattr(values, "__len__") \
            or not hasattr(values, "__iter__"):
        _refuse(what, "a list", values)
    return list(values)


def require_pointer(value, what: str, *, tensor_map: bool = False):
    """An address operand (tensor map, shared or global data, mbarrier, descriptor).

    Accepted: a pointer (``buf.ptr_to([...])``, ``buf.data``, a handle variable), a
    non-constant 64-bit integer expression (a generic address, e.g. ``T.address_of(map)``
    or ``T.reinterpret("uint64", ptr)``) and, for ``tensor_map``, the map variable itself
    (returned as ``T.address_of(map)``). Never an integer constant (no valid address is
    one), a float, a buffer object or a 32-bit value (too narrow for a generic address).
    The memory space is checked separately (``require_space``). Returns the operand.
    """
    from tvm.script import tirx as T

    expected = ("T.address_of(<tensor map>), a global pointer or a 64-bit address expression"
                if tensor_map else "a pointer (buffer.ptr_to([...])) or a 64-bit address "
                "expression")
    if _is_tensor_map_handle(value):
        return T.address_of(value)
    if _is_pointer(value):
        return value
    if is_python_int(value) or type(value).__name__ == "IntImm":
        _refuse(what, expected + ", never an integer constant", value)
    if _is_buffer(value):
        _refuse(what, expected, value, f"; pass {value.name}.ptr_to([...]), not the buffer")
    dtype = _prim_dtype(value) if _is_expr(value) else None
    if dtype is None or dtype.type_code not in _INT_CODES or dtype.lanes != 1:
        _refuse(what, expected, value)
    if dtype.bits != 64:
        _refuse(what, expected, value, f"; a {dtype.bits}-bit value cannot hold a generic "
                "address")
    return value


#: helper parameter kind (asm.OPERAND_KINDS) -> what the raw form's operand must be
_KIND_ROLES = {"smem": "shared address", "gaddr": "global address or tensor map",
               "s32": "32-bit operand", "u32": "32-bit operand", "u16": "16-bit operand",
               "u64": "64-bit operand"}


def check_operand_kinds(family: str, operands, kinds_of_operands) -> list:
    """The raw (printed) form's operands against the kinds of the helper parameters they
    feed; returns the operands (a bare tensor map variable becomes ``T.address_of(map)``)."""
    checked = list(operands)
    for index, (value, kind) in enumerate(zip(operands, kinds_of_operands)):
        what = f"{family} operand {index} ({_KIND_ROLES.get(kind, kind)})"
        if kind in ("smem", "gaddr"):
            checked[index] = require_pointer(value, what, tensor_map=kind == "gaddr")
        elif kind == "u16":
            require_int(value, what, 16)
        elif kind == "u64":
            require_int(value, what, 64, exact=True, low=0)
        elif kind in ("s32", "u32"):
            require_int(value, what, 32)
    return checked
