"""Schemas kept as YAML (exporter/lint/yamlspec.py): the value a client sends for the file, each
member's position at its key and each item's at its value, however the file is written; aliases and
non-JSON values refused with the line; hostile text never raises."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.lint import yamlspec
from exporter.lint.positions import Position, position_of
from tests.unit.lint.test_positions import offset, pointers

KEYS = st.text(alphabet="abcxyz_-/~ :'\"#é", max_size=6)
SCALARS = st.none() | st.booleans() | st.integers() | st.text(alphabet="ab: -#'\"\né", max_size=8)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=5), st.sampled_from([False, True, None]), st.booleans())
def test_the_value_round_trips_and_every_node_is_at_its_text(value: Any, flow: Any, sort_keys: bool) -> None:
    text = yaml.safe_dump(value, default_flow_style=flow, sort_keys=sort_keys, allow_unicode=True)
    assert yamlspec.load(text) == value
    found = yamlspec.positions(text)
    expected = pointers(value)
    assert set(found) == set(expected)
    for pointer, (key, child) in expected.items():
        rest = text[offset(text, found[pointer]) :]
        if key is not None:  # a plain key is written as it is, any other quoted
            assert rest.startswith(key) or rest[:1] in "'\"?", (pointer, rest[:20])
        elif pointer and not isinstance(child, (dict, list)):
            head = rest.split("\n", 1)[0]
            assert head.split(",")[0].rstrip("]}").strip() or child in ("", None), (pointer, head)


def test_a_schema_file_gives_the_lines_of_its_keys() -> None:
    text = "# kept in YAML\ntype: object\nproperties:\n  when:\n    const: 2020-01-01\n  on: {type: string}\n"
    assert yamlspec.load(text) == {
        "type": "object",
        "properties": {"when": {"const": "2020-01-01"}, "true": {"type": "string"}},
    }  # YAML 1.1's `on` is true, and json.dumps writes that key as "true": what the client sends
    found = yamlspec.positions(text)
    assert found["/properties/when/const"] == Position(5, 5)
    assert found["/properties/true/type"] == Position(6, 8)
    assert position_of(found, "/properties/when/const/x") == Position(5, 5)
    assert json.loads(json.dumps(yamlspec.load("1: {2: x}"))) == {"1": {"2": "x"}}
    assert "/1/2" in yamlspec.positions("1: {2: x}")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: &x [1]\nb: *x\n", "line 1 column 4: a node an alias repeats"),
        ("a: [1\n", "line 2 column 1"),
        ("a: !!python/object:os.system x\n", "could not determine a constructor"),
        ("--- 1\n--- 2\n", "line 2 column 1: but found another document"),
        ("? [1]\n: x\n", "unhashable key"),
        ("a: !!set {x}\n", "set is no JSON value"),
    ],
)
def test_what_is_no_yaml_tree_of_json_values_says_why(text: str, why: str) -> None:
    with pytest.raises(yamlspec.YamlSpecError, match=why.replace("[", r"\[")):
        yamlspec.load(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab:-[]{}&*!'\" \n#?|>", max_size=60))
def test_hostile_text_never_raises(text: str) -> None:
    with contextlib.suppress(yamlspec.YamlSpecError):
        yamlspec.load(text)
    for pointer, position in yamlspec.positions(text).items():
        assert position.line >= 1 and position.column >= 1 and isinstance(pointer, str)
