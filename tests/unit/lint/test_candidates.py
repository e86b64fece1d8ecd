"""The pure parts of `--prove`: the edits a search tries, the strings a regex is about, where a
validator error proves a finding, and the draft an undeclared schema is read in."""

from __future__ import annotations

import random

import pytest

from exporter.analysis.lint import lint
from exporter.engines.grammars import backends
from exporter.lint.prove import candidates
from exporter.lint.prove.search import covers
from exporter.lint.prove.validator import Violation
from exporter.schema.findings import Finding


def _finding(pointer: str, keyword: str) -> Finding:
    return Finding(
        "xgrammar_unenforced", "warning", pointer, f"xgrammar compiles `{keyword}` and ...", "", keyword
    )


def test_a_lookahead_gives_the_string_it_forbids() -> None:
    assert "clyde" in candidates.pattern_literals("^((?!(c|C)(l|L)(y|Y)(d|D)(e|E)).)*$")
    assert "admin" in candidates.pattern_literals("^(?!admin$)[a-z]+$")
    assert candidates.pattern_literals(r"^\d{3}-[A-Z]{2}$") == ["000-AA"]
    assert candidates.pattern_literals("([") == []  # not a regex: nothing, no exception


def test_the_pool_holds_what_the_schema_names_shortest_first() -> None:
    schema = {
        "properties": {"a": {"not": {"const": "forbidden"}}, "b": {"enum": [1, 2]}},
        "patternProperties": {"^(?!if$)[a-z]+$": {}},
    }
    pool = candidates.pool(schema)
    assert {"forbidden", 1, 2, "if"} <= {json for json in pool}
    assert pool.index(1) < pool.index("forbidden")


def test_mutations_duplicate_drop_and_bend_the_calendar() -> None:
    instance = {"tags": ["x"], "when": "2024-11-05", "n": 3}
    out = list(candidates.mutations(instance, ["if"], random.Random(0), limit=10_000))
    assert {"tags": ["x", "x"], "when": "2024-11-05", "n": 3} in out  # uniqueItems
    assert {"tags": ["x"], "n": 3} in out  # a property removed (dependentRequired, if/then)
    assert {"tags": ["x"], "when": "2024-02-30", "n": 3} in out  # a date the calendar refuses
    assert {"tags": ["x"], "when": "2024-11-05", "n": 3, "if": ["x"]} in out  # a key a lookahead forbids
    assert instance == {"tags": ["x"], "when": "2024-11-05", "n": 3}  # the sample is left alone
    assert (
        len(list(candidates.mutations(instance, ["if"], random.Random(0), limit=5))) == 5 + 5
    )  # + 2nd steps


def test_a_violation_proves_the_finding_where_the_dropped_keyword_acts() -> None:
    unique = _finding("/properties/tags/uniqueItems", "uniqueItems")
    assert covers(unique, Violation("/properties/tags/uniqueItems", "uniqueItems", ""))
    assert not covers(unique, Violation("/properties/n/type", "type", ""))
    beside = _finding("/anyOf", "properties beside anyOf")  # the siblings of the union are dropped
    assert covers(beside, Violation("/properties/a/type", "type", ""))
    assert not covers(beside, Violation("/anyOf/0/required", "required", ""))
    conditional = _finding("/if", "if")
    assert covers(conditional, Violation("/then/required", "required", ""))
    exclusive = _finding("/oneOf", "oneOf exclusivity")
    assert covers(exclusive, Violation("/oneOf", "oneOf", "", several=True))
    assert not covers(exclusive, Violation("/oneOf", "oneOf", "", several=False))  # none matched
    branches = _finding("/properties/v/allOf", "allOf with several branches")  # through a $ref
    assert covers(branches, Violation("/$defs/T/type", "type", "", route="/properties/v/allOf/1/$ref/type"))


def test_an_undeclared_draft_is_read_from_its_keywords() -> None:
    assert backends.draft({"$schema": "http://json-schema.org/draft-07/schema#"}) == "7"
    assert backends.draft({"properties": {"a": {}}, "dependencies": {"a": ["b"]}}) == "7"
    assert backends.draft({"definitions": {"p": {"id": "#p"}}}) == "4"
    assert backends.draft({"$defs": {}, "definitions": {}}) == "2020-12"
    assert backends.draft({"type": "string"}) == "2020-12"


def test_lint_resolves_refs_reads_the_draft_and_leaves_undefined_formats_at_info() -> None:
    def named(schema: dict[str, object]) -> dict[str, str]:
        found = lint(schema, engines=["xgrammar"])
        return {f.message.split("`")[1]: f.severity for f in found if f.rule == "xgrammar_unenforced"}

    refs = {"$defs": {"s": {"type": "string"}}, "oneOf": [{"$ref": "#/$defs/s"}, {"type": "array"}]}
    assert "oneOf exclusivity" not in named(refs)  # string or array: one branch at most
    overlapping = {"$defs": {"n": {"type": "number"}}, "oneOf": [{"$ref": "#/$defs/n"}, {"type": "integer"}]}
    assert "oneOf exclusivity" in named(overlapping)
    sibling = {"properties": {"a": {"$ref": "#/definitions/n", "minimum": 5}}, "definitions": {"n": {}}}
    assert "assertions beside $ref" not in named(sibling)  # draft-07 ignores $ref siblings itself
    assert "assertions beside $ref" in named(
        {**sibling, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    )
    assert named({"type": "string", "format": "semver"}) == {"format semver": "info"}
    assert named({"type": "string", "format": "iri"}) == {"format iri": "warning"}


def test_the_schemas_example_fills_every_property() -> None:
    schema = {
        "$defs": {"when": {"type": "string", "format": "date"}},
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {"type": "integer", "minimum": 3},
            "kind": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^t[0-9]$"}, "minItems": 2},
            "deep": {"type": "object", "properties": {"at": {"$ref": "#/$defs/when"}, "n": {"type": "null"}}},
            "either": {"oneOf": [{"type": "boolean"}, {"type": "string", "minLength": 3}]},
        },
    }
    first, second = candidates.exemplar(schema, 0), candidates.exemplar(schema, 1)
    assert first == {
        "id": 3,
        "kind": "a",
        "tags": ["t0", "t0"],
        "deep": {"at": "2023-01-15", "n": None},
        "either": True,
    }
    assert (second["kind"], second["either"]) == ("b", "aaa")


def test_the_schemas_example_is_bounded_on_recursion() -> None:
    schema = {
        "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
        "$ref": "#/$defs/n",
    }
    made = candidates.exemplar(schema)
    depth = 0
    while isinstance(made, dict):
        made, depth = made.get("next"), depth + 1
    assert 5 < depth <= candidates.MAX_EXEMPLAR_DEPTH + 2


def test_the_schemas_example_meets_a_dropped_if_or_not() -> None:
    """Even choices meet the condition a dropped `if` or `not` is about; odd ones do not."""
    named = {"type": "string", "not": {"const": "admin"}}
    assert (candidates.exemplar(named, 0), candidates.exemplar(named, 1)) == ("admin", "a")
    schema = {
        "type": "object",
        "properties": {"t": {"type": "string"}, "z": {"type": "integer"}},
        "if": {"properties": {"t": {"const": "x"}}},
        "then": {"required": ["z"]},
    }
    assert candidates.exemplar(schema, 0) == {"t": "x", "z": 1}
    assert candidates.exemplar(schema, 1) == {"t": "a", "z": 1}


def test_a_violation_carries_the_document_places_its_way_passed() -> None:
    """jsonschema's path leaves `$ref`s out; the trail follows them, so a finding at a definition
    is matched by an error met on the way through it."""
    from exporter.lint.prove.validator import Validator

    schema = {
        "definitions": {"meter": {"type": "object"}, "w1": {"allOf": [{"$ref": "#/definitions/meter"}, {}]}},
        "properties": {"meters": {"type": "array", "items": {"$ref": "#/definitions/w1"}}},
    }
    (violation,) = Validator(schema).violations({"meters": [0]})
    assert violation.pointer == "/definitions/meter/type"
    assert "/definitions/w1/allOf/0" in violation.trail and "/properties/meters/items" in violation.trail


def test_targeted_edits_change_only_the_place_a_finding_points_to() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "format": "date"}, "b": {"type": "integer"}},
    }
    made = candidates.Exemplar(schema)
    assert made.places("/properties/a") == [("a",)]
    edited = candidates.targeted(made, "/properties/a", [])
    assert {"a": "2023-02-30", "b": 1} in edited
    assert all(candidate["b"] == 1 for candidate in edited)


@pytest.mark.parametrize(
    ("pattern", "example"),
    [
        ("^/dev/[^/]+(/[^/]+)*$", "/dev/a/a"),  # a negated class gives a character it allows
        ("^[^a-z0-9]x$", "Ax"),
        ("^[A-F\\d]{24}$", "A" * 24),  # an exact count is spelled out
    ],
)
def test_a_patterns_example_matches_it(pattern: str, example: str) -> None:
    import re

    assert candidates.pattern_literals(pattern)[0] == example
    assert re.search(pattern, example)


def test_past_bounds_steps_just_outside_the_subschema() -> None:
    assert candidates.past_bounds({"maxLength": 5}, "ab") == ["aaaaab"]
    assert candidates.past_bounds({"minLength": 3}, "abcd") == ["ab"]
    assert candidates.past_bounds({"multipleOf": 0.1}, 1) == [1.05, 1.03]
    assert candidates.past_bounds({"maxLength": 1.5}, "ab") == []  # already past
