"""Canonical spec strings: how an intrinsic's attributes travel inside the TIR call.

Each intrinsic is one TIR op whose first argument spells its attributes as
``"key=value,key=value"`` in a fixed key order (``"rank=2,mode=tile,multicast=1"``). The
string survives printing and parsing unchanged, so ``T.tma.load(...)`` round-trips, and the
CUDA codegen reads the same string back to render the instruction.
"""

from __future__ import annotations

from collections.abc import Mapping

from .errors import IntrinError


def encode(fields: Mapping[str, object]) -> str:
    return ",".join(f"{key}={_text(value)}" for key, value in fields.items())


def decode(text: str, schema: Mapping[str, type]) -> dict[str, object]:
    """Parse a spec string against ``schema`` (field -> int/str/bool), in schema order."""
    fields: dict[str, object] = {}
    for item in str(text).split(","):
        key, sep, value = item.partition("=")
        if not sep or key not in schema:
            raise IntrinError("spec", f"unknown field {key!r} in spec {text!r} "
                              f"(fields: {', '.join(schema)})")
        if key in fields:
            raise IntrinError("spec", f"field {key!r} appears twice in spec {text!r}")
        kind = schema[key]
        if kind is bool and value not in ("0", "1"):
            raise IntrinError("spec", f"field {key}={value!r} is not 0 or 1")
        try:
            fields[key] = bool(int(value)) if kind is bool else kind(value)
        except ValueError:
            raise IntrinError("spec", f"field {key}={value!r} is not a {kind.__name__}") from None
    missing = [key for key in schema if key not in fields]
    if missing:
        raise IntrinError("spec", f"spec {text!r} misses field(s) {missing}")
    return {key: fields[key] for key in schema}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(int(value))
    return str(value)
