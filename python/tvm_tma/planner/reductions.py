"""Which tensor reductions exist: ``cp.reduce.async.bulk.tensor`` takes its element type
from the tensor map, and PTX defines each operation for some element types only.

A reduction must therefore run on the tensor's own type: a plan that widened the element
type (two float16 read as one uint32) would add the wrong numbers, so a reducing copy is
never promoted, and a type with no tensor-map type of its own (int8, fp8) cannot reduce.

Checked on an H200 with ``tools/probe_reduce_types.py`` (every op on ten map types): every
pair below computes exactly what numpy computes; every other pair but one stops the kernel
with an illegal instruction. The bitwise operations are defined on bit types (``.b32``,
``.b64``): the hardware takes INT32 and UINT32 maps for them but only UINT64 for 64 bits (an
INT64 map is an illegal instruction), so an int64 tensor's bitwise reduction goes through a
UINT64 map over the same bits (:func:`reduction_map_dtype`). The exception is float64 add,
which the H200 computes but PTX does not define: it is refused.
"""

from __future__ import annotations

from .errors import refuse

REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")

_ORDERED = ("float16", "bfloat16", "int32", "uint32", "int64", "uint64")
_BITWISE = ("int32", "uint32", "int64", "uint64")
#: Bitwise reductions on these tensor types run through a map of the same bits' unsigned
#: type: the hardware refuses an INT64 map for them.
_BITWISE_MAP_DTYPE = {"int64": "uint64"}
#: The element types PTX defines each tensor reduction for.
REDUCE_TYPES: dict[str, tuple[str, ...]] = {
    "add": ("float16", "bfloat16", "float32", "int32", "uint32", "uint64"),
    "min": _ORDERED,
    "max": _ORDERED,
    "inc": ("uint32",),
    "dec": ("uint32",),
    "and": _BITWISE,
    "or": _BITWISE,
    "xor": _BITWISE,
}


def check_reduction(op: str, dtype: str) -> None:
    """Refuse a (op, element type) pair PTX does not define, naming the pair."""
    if op not in REDUCE_OPS:
        raise refuse("reduce", f"reduce={op!r} is not one of {list(REDUCE_OPS)}")
    allowed = REDUCE_TYPES[op]
    if dtype not in allowed:
        raise refuse("reduce", f"reduce={op!r} on {dtype}: PTX defines the {op} tensor "
                     f"reduction for {', '.join(allowed)} only")


def reduction_map_dtype(op: str, dtype: str) -> str:
    """The tensor-map element type a reduction of ``dtype`` tensors runs through."""
    if op in ("and", "or", "xor"):
        return _BITWISE_MAP_DTYPE.get(dtype, dtype)
    return dtype
