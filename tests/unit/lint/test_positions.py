"""Positions of JSON nodes (exporter/lint/positions.py): for any value written any way (indented,
compact, keys sorted or not, escapes and non-ASCII), each member's position is its key's text and
each item's its value's text; hostile text never raises."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.lint.positions import Position, node_positions, position_of

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=25,
)


def pointers(value: Any, at: str = "") -> dict[str, tuple[str | None, Any]]:
    """pointer -> (the member's key, or None for an item or the root; the value)."""
    out: dict[str, tuple[str | None, Any]] = {at: (None, value)} if at == "" else {}
    if isinstance(value, dict):
        for key, child in value.items():
            here = f"{at}/{key.replace('~', '~0').replace('/', '~1')}"
            out[here] = (key, child)
            out |= pointers(child, here)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out[f"{at}/{i}"] = (None, child)
            out |= pointers(child, f"{at}/{i}")
    return out


def offset(text: str, position: Position) -> int:
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[: position.line - 1]) + position.column - 1


@settings(max_examples=300, deadline=None)
@given(VALUES, st.sampled_from([None, 2, 4, "\t"]), st.booleans(), st.booleans())
def test_every_member_is_at_its_key_and_every_item_at_its_value(
    value: Any, indent: Any, sort_keys: bool, ascii_only: bool
) -> None:
    text = json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=ascii_only)
    found = node_positions(text)
    expected = pointers(json.loads(text))
    assert set(found) == set(expected)
    for pointer, (key, child) in expected.items():
        start = offset(text, found[pointer])
        rest = text[start:]
        if key is not None:
            assert json.JSONDecoder().raw_decode(rest)[0] == key, pointer
        else:
            assert json.JSONDecoder().raw_decode(rest)[0] == child, pointer


def test_a_pointer_the_text_lacks_falls_back_to_its_nearest_ancestor() -> None:
    text = '{\n  "properties": {\n    "c": {"$ref": "#/$defs/D"}\n  }\n}'
    found = node_positions(text)
    assert position_of(found, "/properties/c/$ref/x") == Position(3, 11)
    assert position_of(found, "/nowhere") == Position(1, 1)
    assert position_of({}, "/a") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]:,"\\ \n abc1-', max_size=60))
def test_hostile_text_never_raises(text: str) -> None:
    for pointer, position in node_positions(text).items():
        assert position.line >= 1 and position.column >= 1 and isinstance(pointer, str)
