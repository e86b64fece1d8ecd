"""The pure parts of `--prove`: the edits a search tries, the strings a regex is about, where a
validator error proves a finding, and the draft an undeclared schema is read in."""

from __future__ import annotations

import random

from exporter.prove import candidates
from exporter.prove.search import covers
from exporter.prove.validator import Violation
from exporter.schema import backends
from exporter.schema.lint import Finding, lint


def _finding(pointer: str, keyword: str) -> Finding:
    return Finding("xgrammar_unenforced", "warning", pointer, f"xgrammar compiles `{keyword}` and ...", "")


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
    out = candidates.mutations(instance, ["if"], random.Random(0), limit=10_000)
    assert {"tags": ["x", "x"], "when": "2024-11-05", "n": 3} in out  # uniqueItems
    assert {"tags": ["x"], "n": 3} in out  # a property removed (dependentRequired, if/then)
    assert {"tags": ["x"], "when": "2024-02-30", "n": 3} in out  # a date the calendar refuses
    assert {"tags": ["x"], "when": "2024-11-05", "n": 3, "if": ["x"]} in out  # a key a lookahead forbids
    assert instance == {"tags": ["x"], "when": "2024-11-05", "n": 3}  # the sample is left alone
    assert len(candidates.mutations(instance, ["if"], random.Random(0), limit=5)) == 5 + 5  # + second steps


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
