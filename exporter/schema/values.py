"""Small readings every rule shares, written once: whether a value is a JSON number, the JSON types a
value has, and the types a schema declares. Pure functions; they never raise on odd input."""

from __future__ import annotations

import math
from typing import Any, TypeGuard

_NAMES: dict[type, str] = {str: "string", list: "array", dict: "object", type(None): "null"}


def is_number(value: Any) -> TypeGuard[float]:
    """A JSON number: an int or a float, not a bool (which Python counts as an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integral(value: float) -> bool:
    """A number with no fraction. NaN and the infinities (Python's json reads them) are not."""
    return math.isfinite(value) and value == int(value)


def value_types(value: Any) -> set[str]:
    """The JSON Schema types a value has (an integral number is both integer and number)."""
    if isinstance(value, bool):
        return {"boolean"}
    if is_number(value):
        return {"integer", "number"} if is_integral(value) else {"number"}
    return {name for kind, name in _NAMES.items() if isinstance(value, kind)}


def declared_types(schema: dict[str, Any]) -> set[str] | None:
    """The types `type` declares (None: no `type`, or one that is neither a string nor a list)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    return {k for k in kind if isinstance(k, str)} if isinstance(kind, list) else None
