"""Plans compared field by field, for the tests that check two spellings plan alike."""

from __future__ import annotations

import dataclasses


def plan_fields(value):
    """Every field of a plan (dataclasses recursively), expressions as their text: two plans
    are the same plan exactly when these are equal."""
    if dataclasses.is_dataclass(value):
        return {f.name: plan_fields(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return tuple(plan_fields(item) for item in value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)
