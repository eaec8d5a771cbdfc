"""Which tensor reductions exist: ``cp.reduce.async.bulk.tensor`` takes its element type
from the tensor map, and PTX defines each operation for some element types only.

A reduction must therefore run on the tensor's own type: a plan that widened the element
type (two float16 read as one uint32) would add the wrong numbers, so a reducing copy is
never promoted, and a type with no tensor-map type of its own (int8, fp8) cannot reduce.
"""

from __future__ import annotations

from .errors import refuse

REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")

_ORDERED = ("float16", "bfloat16", "int32", "uint32", "int64", "uint64")
_BITWISE = ("int32", "uint32", "int64", "uint64")
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
