"""Host-side tensor maps: the one place that spells the encode of a ``CUtensorMap``.

A tensor map is a ``T.handle("tensormap")`` stack slot in the kernel's host function,
filled by the rule-checking C++ runtime (``tvm_tma.encode_tiled``) and passed to the device
as a ``const __grid_constant__ CUtensorMap`` parameter. Three users emit it: the
``dispatch="tma"`` lowering (once per distinct map), ``T.tma.encode_tiled`` for kernels that
use the intrinsics directly, and the hardware-validation kernels. They all live above this
layer, so the emitter lives here and none of them depends on another.

Written before ``T.device_entry()`` (host code), ``T.meta_var(T.tma.encode_tiled(...))``
binds the slot, encodes it and returns the variable; used in device code
(``T.address_of(map)``) it becomes the kernel parameter.

Every encode emitted here is checked twice. When the kernel is built, the arguments that are
compile-time constants go through the C++ runtime's own rules
(``tvm_tma.validate_tiled_static``, the rules of ``tvm_tma.encode_tiled`` minus the base
address, skipping any rule that reads a run-time value) and a violation raises
:class:`~tvm_tma.intrin.errors.EncodeError` naming the rule; at launch the encode checks every
rule again on the actual values. ``T.tma.encode_tiled`` also checks that a static map stays
inside the buffer it is encoded over (``map-footprint``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import tvm
from tvm.script import tirx as T

from .._runtime import load_runtime
from ..planner.plan_types import TensorMapSpec
from ..planner.proofs import Prover, as_int
from ..planner.views import buffer_span
from .errors import HOST_RULES, EncodeError
from .operands import describe, is_python_int

#: The packed function of the C++ runtime that checks the rules and calls the driver.
ENCODE_FUNCTION = "tvm_tma.encode_tiled"
#: The runtime's rule check on what is known when the kernel is built (no base address;
#: None for a run-time value).
VALIDATE_STATIC_FUNCTION = "tvm_tma.validate_tiled_static"


def encode_arguments(spec: TensorMapSpec, base) -> list:
    """The flat packed-call arguments after the map itself (driver order throughout)."""
    return [
        spec.dtype,
        spec.rank,
        base,
        *spec.global_dims,
        *spec.global_strides,
        *spec.box_dims,
        *spec.element_strides,
        spec.interleave,
        spec.swizzle,
        spec.l2_promotion,
        spec.oob_fill,
    ]


def map_base(buffer, base_bytes=0):
    """The global address a map over ``buffer`` starts at: its data pointer, plus
    ``base_bytes`` for a view whose offset is not folded into coordinates."""
    if isinstance(base_bytes, int) and base_bytes == 0:
        return buffer.data
    return tvm.tirx.handle_add_byte_offset(buffer.data, base_bytes)


# ---- compile-time checks ------------------------------------------------------------------

def _static_value(value, what: str, where: str) -> int | None:
    """``value`` as an int when it is a compile-time constant, None for a run-time integer
    expression; anything that is not an integer is refused (``operand-type``)."""
    if is_python_int(value):
        return int(value)
    ty = getattr(value, "ty", None)
    if isinstance(value, tvm.ir.expr.Expr) and type(ty).__name__ == "PrimType" and \
            ty.dtype.type_code in (0, 1) and ty.dtype.lanes == 1:
        if type(value).__name__ != "IntImm":
            from tvm.sym import Analyzer

            value = Analyzer().simplify(value)
        return int(value.value) if type(value).__name__ == "IntImm" else None
    raise EncodeError("operand-type", f"{where}: {what} must be an integer, got "
                      f"{describe(value)}")


def _sequence(values, what: str, where: str) -> list:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or \
            not hasattr(values, "__iter__") or isinstance(values, tvm.ir.expr.Expr):
        raise EncodeError("operand-type", f"{where}: {what} must be a list, got "
                          f"{describe(values)}")
    return list(values)


def _dtype_name(dtype, where: str) -> str:
    if isinstance(dtype, str):
        return dtype
    if type(dtype).__name__ in ("dtype", "DataType"):
        return str(dtype)
    raise EncodeError("dtype", f"{where}: the descriptor dtype must be a dtype name such as "
                      f"\"float16\", got {describe(dtype)}")


def check_static_encode(spec: TensorMapSpec, where: str) -> None:
    """Run the runtime's rules on the compile-time constants among ``spec``'s arguments.

    The argument counts must agree with the rank (the number of dims): ``rank`` dims, box
    dims and element strides, ``rank - 1`` strides. Rules that read a run-time value are
    left to the launch.
    """
    dtype = _dtype_name(spec.dtype, where)
    dims = _sequence(spec.global_dims, "dims", where)
    strides = _sequence(spec.global_strides, "strides", where)
    box = _sequence(spec.box_dims, "box", where)
    element_strides = _sequence(spec.element_strides, "element_strides", where)
    rank = len(dims)
    if not 1 <= rank <= 5:
        raise EncodeError("rank", f"{where}: rank {rank} ({rank} dims {dims}) is outside 1..5")
    for name, values, expected in (("strides", strides, rank - 1), ("box", box, rank),
                                   ("element_strides", element_strides, rank)):
        if len(values) != expected:
            raise EncodeError("rank", f"{where}: a rank-{rank} map ({rank} dims) takes "
                              f"{expected} {name}, got {len(values)}: {values}")
    arguments = [dtype, rank]
    for name, values in (("dims", dims), ("strides", strides), ("box", box),
                         ("element_strides", element_strides)):
        for i, v in enumerate(values):
            arguments.append(_fits_64(_static_value(v, f"{name}[{i}]", where), name,
                                      f"{name}[{i}]", where))
    for name in ("interleave", "swizzle", "l2_promotion", "oob_fill"):
        arguments.append(_fits_64(_static_value(getattr(spec, name), name, where), name, name,
                                  where))
    _run_static_rules(arguments, where)


#: The runtime's rule for each argument (for values too large to reach the runtime at all).
_RULE_OF_ARGUMENT = {"dims": "global-dim", "strides": "global-stride", "box": "box-dim",
                     "element_strides": "element-stride"}


def _fits_64(value: int | None, name: str, label: str, where: str) -> int | None:
    if value is not None and not -(1 << 63) <= value < (1 << 63):
        raise EncodeError(_RULE_OF_ARGUMENT.get(name, "enum"),
                          f"{where}: {label} = {value} is out of range (it does not even fit "
                          "a signed 64-bit integer)")
    return value


def _run_static_rules(arguments: list, where: str) -> None:
    import tvm_ffi

    load_runtime()
    try:
        tvm_ffi.get_global_func(VALIDATE_STATIC_FUNCTION)(*arguments)
    except ValueError as error:
        match = re.search(r"tvm_tma: rule '([^']+)': (.*)", str(error), re.S)
        if match is None or match.group(1) not in HOST_RULES:
            raise
        rule, detail = match.group(1), match.group(2).strip()
        raise EncodeError(rule, f"{where}: {detail} (tvm_tma: rule '{rule}', refused when "
                          "the kernel is built: the arguments it reads are compile-time "
                          "constants)") from None


def _element_bytes(dtype: str) -> int | None:
    try:
        return max(tvm.DataType(dtype).bits // 8, 1)
    except (ValueError, TypeError, tvm.error.TVMError):
        return None


def check_map_footprint(spec: TensorMapSpec, buffer, where: str, base_bytes=0) -> None:
    """A static map over ``buffer`` must reach no byte past the buffer's own footprint.

    The map's bytes are counted from the buffer's first element (its data plus elem_offset)
    plus ``base_bytes``: ``base + sum((dim_i - 1) * stride_i) + element size`` with stride_0
    the element size. The buffer's footprint comes from its declared shape and strides (or
    its layout; the larger when it declares both). Skipped when either side is not a
    compile-time constant.
    """
    width = _element_bytes(spec.dtype)
    values = [_static_value(v, "dims", where) for v in spec.global_dims]
    values += [_static_value(v, "strides", where) for v in spec.global_strides]
    base = _static_value(base_bytes, "base_bytes", where)
    if width is None or base is None or any(v is None for v in values):
        return
    dims, strides = values[:len(spec.global_dims)], [width, *values[len(spec.global_dims):]]
    if any(d <= 0 for d in dims):
        return  # the global-dim rule's business
    reach = base + width + sum((d - 1) * s for d, s in zip(dims, strides))
    prover = Prover()
    spans = []
    try:
        lo, hi = buffer_span(buffer, prover)
        spans.append(as_int(prover.simplify(hi - lo)))
    except Exception:  # a layout the planner cannot read: nothing to compare with
        pass
    if len(buffer.strides) == len(buffer.shape) and len(buffer.shape) > 0:
        # Declared element strides: the last element sits at sum((shape_i - 1) * stride_i).
        last = sum((extent - 1) * stride for extent, stride in zip(buffer.shape,
                                                                    buffer.strides))
        buffer_width = _element_bytes(str(buffer.dtype))
        end = as_int(prover.simplify((last + 1) * buffer_width)) if buffer_width else None
        spans.append(end)
    if not spans or any(span is None for span in spans):
        return
    held = max(spans)
    if reach > held:
        terms = " + ".join(f"({d} - 1) * {s}" for d, s in zip(dims, strides))
        start = f"{base} + " if base else ""
        declared = (f", strides {[_show(x) for x in buffer.strides]}" if len(buffer.strides)
                    else "")
        raise EncodeError(
            "map-footprint",
            f"{where}: the map reaches {reach} bytes from the start of buffer {buffer.name} "
            f"({start}{terms} + {width} for dims {dims} and byte strides {strides[1:]} of "
            f"{spec.dtype}), but {buffer.name} holds only {held} bytes (shape "
            f"{[_show(x) for x in buffer.shape]}{declared}, {buffer.dtype}); the map would "
            "read and write past the buffer")


def _show(value):
    return int(value.value) if type(value).__name__ == "IntImm" else value


def bind_encoded_map(spec: TensorMapSpec, buffer, name: str | None = None, base_bytes=0):
    """Emit (into the statement being built) a tensor-map stack slot and its encode over
    ``buffer``'s data plus ``base_bytes``.

    The compile-time constants among the arguments are checked first (EncodeError). Returns
    the map variable.
    """
    check_static_encode(spec, f"tensor map over {getattr(buffer, 'name', buffer)}")
    tensor_map = T.Var(name or f"{buffer.name}_tensormap", ty=T.handle("tensormap").ty)
    T.Bind(T.tvm_stack_alloca("tensormap", 1), var=tensor_map)
    T.evaluate(T.call_packed(ENCODE_FUNCTION, tensor_map,
                             *encode_arguments(spec, map_base(buffer, base_bytes))))
    return tensor_map


def encode_tiled(buffer, dtype: str, dims: Sequence, strides: Sequence, box: Sequence, *,
                 element_strides: Sequence | None = None, swizzle: int = 0,
                 interleave: int = 0, l2_promotion: int = 2, oob_fill: int = 0,
                 name: str | None = None):
    """Encode a tiled map over ``buffer``'s data (driver order: innermost dimension first).

    Refused when the kernel is built (EncodeError): ``buffer`` not a buffer; a static
    argument that breaks one of the runtime's rules; a count of dims/strides/box/element
    strides that disagrees with the rank; a static map that reaches past the buffer
    (``map-footprint``).
    """
    where = f"T.tma.encode_tiled over {getattr(buffer, 'name', buffer)}"
    if type(getattr(buffer, "ty", None)).__name__ != "BufferType":
        raise EncodeError("operand-type", f"T.tma.encode_tiled: buffer must be a buffer "
                          f"(T.match_buffer(...)), got {describe(buffer)}")
    if name is not None and not isinstance(name, str):
        raise EncodeError("operand-type", f"{where}: name must be a string, got "
                          f"{describe(name)}")
    box = _sequence(box, "box", where)
    if element_strides is None or (isinstance(element_strides, (list, tuple))
                                   and not element_strides):
        element_strides = (1,) * len(box)
    spec = TensorMapSpec(
        dtype=dtype, global_dims=tuple(_sequence(dims, "dims", where)),
        global_strides=tuple(_sequence(strides, "strides", where)), box_dims=tuple(box),
        element_strides=tuple(_sequence(element_strides, "element_strides", where)),
        swizzle=swizzle, interleave=interleave, l2_promotion=l2_promotion, oob_fill=oob_fill,
    )
    check_static_encode(spec, where)
    check_map_footprint(spec, buffer, where)
    return bind_encoded_map(spec, buffer, name)
