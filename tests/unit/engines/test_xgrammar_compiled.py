"""exporter/engines/grammars/compiled.py: where xgrammar's parser reaches, and when a dropped keyword shows.

The premises (allOf with several branches is any value, an untyped branch is any value, objects are
closed, a pattern matches the whole string) are checked on the real engines, every pinned version,
by tests/integration/test_prove.py::test_the_model_of_the_compile_holds_on_the_engine.
"""

from __future__ import annotations

from typing import Any

import pytest

from exporter.analysis.lint import lint
from exporter.engines.grammars import compiled


def _unenforced(schema: Any) -> list[tuple[str, str]]:
    return [
        (f.pointer, f.message.split("`")[1])
        for f in lint(schema, engines=("xgrammar",))
        if f.rule == "xgrammar_unenforced" and f.severity == "warning"
    ]


def test_live_follows_the_parsers_precedence() -> None:
    schema = {
        "$defs": {"used": {"type": "string"}, "unused": {"type": "string", "format": "iri"}},
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/used", "minLength": 3},
            "b": {"not": {"type": "string", "format": "iri"}},
            "c": {"anyOf": [{"type": "integer"}], "properties": {"x": {"type": "string"}}},
            "d": {"allOf": [{"type": "integer"}, {"minimum": 0}]},
            "e": {"type": ["array", "null"], "items": {"type": "number"}},
        },
    }
    places = compiled.live(schema)
    assert {"", "/properties/a", "/$defs/used", "/properties/c/anyOf/0", "/properties/e/items"} <= places
    for dead in ("/$defs/unused", "/properties/b/not", "/properties/c/properties/x", "/properties/d/allOf/0"):
        assert dead not in places


def test_no_finding_where_xgrammar_never_compiles() -> None:
    """A format under `not`, in an unused definition, beside a union: the `not` is the finding."""
    schema = {
        "definitions": {"unused": {"type": "string", "format": "iri"}},
        "type": "object",
        "properties": {"b": {"not": {"type": "string", "format": "iri", "uniqueItems": True}}},
    }
    assert _unenforced(schema) == [("/properties/b/not", "not")]


@pytest.mark.parametrize(
    ("branches", "apart"),
    [
        ([{"type": "string", "pattern": "^#[0-9a-f]{6}$"}, {"enum": ["black", "white"]}], True),
        ([{"type": "string", "pattern": "^https?://.+$"}, {"type": "string", "pattern": "^\\./.+$"}], True),
        ([{"type": "string", "enum": ["all", "none"]}, {"type": "string", "enum": ["some"]}], True),
        ([{"type": "integer"}, {"enum": ["inf", "Infinity"]}], True),
        (
            [
                {"type": "object", "properties": {"name": {}, "value": {}}, "required": ["name", "value"]},
                {"type": "object", "properties": {"uri": {}}, "required": ["uri"]},
            ],
            True,
        ),
        ([{"type": "array", "maxItems": 1}, {"type": "array", "minItems": 2}], True),
        ([{"type": "number", "maximum": 0}, {"type": "number", "exclusiveMinimum": 0}], True),
        # overlapping: a value can match both
        ([{"type": "integer"}, {"type": "number"}], False),
        ([{"type": "string", "pattern": "^a"}, {"type": "string", "maxLength": 3}], False),
        (
            [{"type": "object", "properties": {"a": {}}, "additionalProperties": True}, {"required": ["a"]}],
            False,
        ),
        ([{"type": "array", "maxItems": 2}, {"type": "array", "minItems": 2}], False),
        ([{"enum": ["a", "b"]}, {"type": "string", "minLength": 1}], False),
    ],
)
def test_oneof_exclusivity_only_where_branches_can_overlap(branches: list[Any], apart: bool) -> None:
    found = _unenforced({"oneOf": branches})
    assert (("/oneOf", "oneOf exclusivity") not in found) is apart


def test_oneof_branches_resolved_through_refs() -> None:
    schema = {
        "$defs": {
            "a": {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
            "b": {"type": "object", "properties": {"kind": {"const": "b"}, "x": {}}, "required": ["kind"]},
        },
        "oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}],
    }
    assert ("/oneOf", "oneOf exclusivity") not in _unenforced(schema)


def test_properties_beside_a_union_only_when_a_branch_can_break_them() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert _unenforced({"properties": {"b": {"type": "string"}}, "anyOf": [closed]}) == []
    assert _unenforced({"properties": {"a": {"description": "x"}}, "anyOf": [closed]}) == []
    pinned = {"type": "object", "properties": {"shape": {"enum": ["circle"]}}}
    assert _unenforced({"properties": {"shape": {"type": "string"}}, "oneOf": [pinned]}) == []
    assert _unenforced({"properties": {"a": {"minimum": 5}}, "anyOf": [closed]}) == [
        ("/anyOf", "properties beside anyOf")
    ]
    untyped = {"required": ["a"]}  # any value: every name
    assert ("/anyOf", "properties beside anyOf") in _unenforced(
        {"properties": {"b": {"type": "string"}}, "anyOf": [untyped]}
    )


def test_allof_with_several_branches_says_the_value_is_unconstrained() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "allOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    findings = [f for f in lint(schema, engines=("xgrammar",)) if f.rule == "xgrammar_unenforced"]
    assert [(f.pointer, f.severity) for f in findings] == [("/allOf", "warning")]
    assert "accepts any JSON value" in findings[0].message


@pytest.mark.parametrize(
    ("schema", "fires"),
    [
        ({"type": "string", "pattern": "^[a-z]{5,9}$", "minLength": 5}, False),
        ({"type": "string", "pattern": "^[a-z]{5,9}$", "minLength": 6}, True),
        ({"type": "string", "pattern": "[a-z]{2}", "maxLength": 2}, False),  # xgrammar matches it whole
        ({"type": "string", "pattern": "^[a-z]+$", "maxLength": 9}, True),
        ({"type": "string", "format": "email", "minLength": 0}, False),
    ],
)
def test_a_length_the_pattern_forces_is_no_gap(schema: dict[str, Any], fires: bool) -> None:
    assert any(word.endswith(("beside pattern", "beside format")) for _, word in _unenforced(schema)) is fires


def test_required_asks_nothing_of_an_array() -> None:
    assert _unenforced({"type": "array", "items": {"type": "string"}, "required": ["0"]}) == []
    assert _unenforced({"type": "object", "properties": {}, "required": ["a"]}) == [
        ("/required", "required name not in properties")
    ]


def test_refuses_is_sure_or_silent() -> None:
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer", "maximum": 3}}}
    assert compiled.refuses(schema, schema, {"a": 4})
    assert compiled.refuses(schema, schema, {})
    assert compiled.refuses(schema, schema, "x")
    assert not compiled.refuses(schema, schema, {"a": 2, "b": "anything"})
    assert not compiled.refuses({}, {"pattern": "(unclosed"}, "x")  # unreadable: not sure


def test_a_branch_that_closes_a_property_to_an_empty_object_pins_it() -> None:
    """Strict mode compiles `{"type": "object", "properties": {}}` to `{}` only: a sibling that
    accepts `{}` is moot; a bare `{"type": "object"}` is any object."""
    branch = {"type": "object", "properties": {"options": {"type": "object"}, "n": {"type": "number"}}}
    sibling = {"options": {"type": "object", "properties": {"a": {"type": "string"}}}}
    assert compiled.finite({}, {"type": "object", "properties": {}}) == [{}]
    assert compiled.finite({}, branch["properties"]["options"]) is None  # bare: any object
    closed = {"type": "object", "properties": {"options": {"type": "object", "properties": {}}}}
    assert _unenforced({"allOf": [closed], "properties": sibling}) == []
    assert _unenforced({"allOf": [branch], "properties": sibling}) == [("/allOf", "properties beside allOf")]
    assert _unenforced({"allOf": [branch], "properties": {"options": {"required": ["a"]}}}) == [
        ("/allOf", "properties beside allOf")
    ]


def test_uniqueitems_only_where_two_items_can_be_emitted() -> None:
    assert _unenforced({"type": "array", "uniqueItems": True}) == []  # strict mode: `[]` only
    assert _unenforced({"type": "array", "items": {}, "maxItems": 1, "uniqueItems": True}) == []
    assert _unenforced({"type": "array", "items": {"type": "string"}, "uniqueItems": True}) == [
        ("/uniqueItems", "uniqueItems")
    ]


def test_more_names_required_than_the_other_branch_allows_is_apart() -> None:
    repository = {"type": "object", "properties": {"type": {}, "url": {}}, "required": ["type", "url"]}
    single = {"type": "object", "additionalProperties": {"enum": [False]}, "maxProperties": 1}
    assert compiled.disjoint({}, repository, single)
    assert not compiled.disjoint({}, {**repository, "required": ["type"]}, single)


def test_uniqueitems_on_an_untyped_schema_shows() -> None:
    """No `type`: xgrammar compiles any value, arrays of any length with duplicates included."""
    assert _unenforced({"uniqueItems": True}) == [("/uniqueItems", "uniqueItems")]
