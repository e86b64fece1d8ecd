"""Lint rules on small schemas: each fires where it should, at the right pointer, and nowhere else."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from exporter.analysis.lint import lint, parse_and_lint
from exporter.engines.grammars import backends
from exporter.schema.findings import Thresholds, count
from exporter.schema.regex import analyse
from exporter.schema.walk import Budget
from tools.bench.schemas import DATA, read


def fired(schema: Any, rule: str, **thresholds: Any) -> list[str]:
    return [f.pointer for f in lint(schema, Thresholds(**thresholds)) if f.rule == rule]


def nest(levels: int, leaf: dict[str, Any] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = leaf or {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def test_depth_counts_data_nesting_including_through_refs() -> None:
    assert fired(nest(3), "depth") == []
    assert fired(nest(4), "depth") == ["/properties/x/properties/x/properties/x"]  # the 4th object
    via_ref = {"type": "object", "properties": {"a": {"$ref": "#/$defs/inner"}}, "$defs": {"inner": nest(3)}}
    assert fired(via_ref, "depth") == ["/$defs/inner/properties/x/properties/x"]
    assert fired(nest(4), "depth", depth=4) == []


def test_recursive_refs_are_found_and_not_followed_forever() -> None:
    self_ref = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
                "$ref": "#/$defs/node"}  # fmt: skip
    assert fired(self_ref, "recursive_ref") == ["/$defs/node/properties/next/$ref"]
    mutual = {
        "$defs": {
            "a": {"properties": {"b": {"$ref": "#/$defs/b"}}},
            "b": {"properties": {"a": {"$ref": "#/$defs/a"}}},
        },
        "$ref": "#/$defs/a",
    }
    assert fired(mutual, "recursive_ref")
    assert fired({"type": "object", "properties": {"again": {"$ref": "#"}}}, "recursive_ref") == [
        "/properties/again/$ref"
    ]
    assert (
        fired(
            {"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}, "recursive_ref"
        )
        == []
    )


def test_unions_deep_and_wide() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(4):
        deep = {"anyOf": [deep, {"type": "null"}]}
    assert fired(deep, "union_depth") == ["/anyOf/0/anyOf/0/anyOf/0/anyOf"]  # the 4th union
    assert fired({"oneOf": [{"const": i} for i in range(9)]}, "union_width") == ["/oneOf"]
    assert fired({"oneOf": [{"const": i} for i in range(8)]}, "union_width") == []


def test_bounded_quantifier_reads_the_regex() -> None:
    def bound(pattern: str) -> list[str]:
        return fired({"type": "string", "pattern": pattern}, "bounded_quantifier")

    assert bound("^[A-Z0-9_-]{8,64}$") == ["/pattern"]
    assert bound("^(ab|c{2,40})+$") == ["/pattern"]
    assert bound("^[A-Z]{8,16}$") == []
    assert bound(r"^\{8,64\}$") == []  # escaped braces: literal text, not a repeat
    assert bound("^[{]8,64}$") == []
    assert bound("^a{100}$") == ["/pattern"]  # exactly 100 is a bound too
    assert bound("^(") == []  # unparsable: no guess
    assert fired({"patternProperties": {"^x{1,99}$": {}}}, "bounded_quantifier") == [
        "/patternProperties/^x{1,99}$"
    ]
    facts = analyse("^(?!admin$)[a-z]+$")
    assert facts is not None and facts.lookaround and facts.max_bounded_repeat == 0
    assert facts.widest_alternation == 0


def test_regex_facts_count_the_widest_alternation() -> None:
    def widest(pattern: str) -> int | None:
        facts = analyse(pattern)
        return None if facts is None else facts.widest_alternation

    assert widest("^(alice|bob|carol)$") == 3
    assert widest("^(a(x|yy|zz|ww)|bb|cc)$") == 4  # the widest one, nested or not
    assert widest("^(a|b|c)$") == 0  # folded into one character class by the parser: one state
    assert widest("^(x1|x2|x10)$") == 3  # the common prefix factored out, the branches remain
    assert widest("^(") is None


def test_enum_and_item_counts() -> None:
    assert fired({"enum": list(range(65))}, "large_enum") == ["/enum"]
    assert fired({"enum": list(range(64))}, "large_enum") == []
    assert fired({"type": "array", "maxItems": 25}, "max_items") == ["/maxItems"]
    assert fired({"type": "array", "minItems": 20, "maxItems": 20}, "max_items") == []


def test_literals_are_never_walked_as_schemas() -> None:
    sneaky = {
        "type": "object",
        "default": {"not": {}, "properties": {"a": nest(9)}},
        "examples": [{"oneOf": []}],
    }
    assert lint(sneaky) == []


def test_backend_rules_name_the_keyword_and_engine_filter() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
    }
    findings = lint(schema)
    assert [(f.rule, f.pointer) for f in findings] == [
        ("llguidance_refused", "/properties/a/uniqueItems"),
        ("xgrammar_unenforced", "/properties/a/uniqueItems"),
    ]
    assert all("`uniqueItems`" in f.message for f in findings)
    assert [f.rule for f in lint(schema, engines=["xgrammar"])] == ["xgrammar_unenforced"]
    assert count(findings) == {("llguidance_refused", "error"): 1, ("xgrammar_unenforced", "warning"): 1}


@pytest.mark.parametrize(
    "make",
    [
        lambda: nest(10_000),  # 10,000 levels deep
        lambda: {
            "type": "object",
            "properties": {f"p{i}": {"type": "string", "description": "x" * 40} for i in range(200_000)},
        },
        lambda: {
            "$defs": {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{j}"} for j in range(60)]} for i in range(60)},
            "$ref": "#/$defs/d0",
        },
        lambda: {"enum": [f"v{i}" for i in range(1_000_000)]},
    ],
    ids=["10k-deep", "200k-properties-10MB", "ref-cycles", "1M-enum"],
)
def test_hostile_schemas_finish_within_the_budget(make: Any) -> None:
    schema = make()
    budget = Budget(max_nodes=50_000, max_seconds=2.0)
    started = time.monotonic()
    findings = lint(schema, Thresholds(budget=budget))
    assert time.monotonic() - started < 10
    assert findings  # each has something to say: too_complex, depth, recursive_ref or large_enum


def test_too_complex_is_a_finding() -> None:
    findings = lint(nest(10_000), Thresholds(budget=Budget(max_nodes=1000)))
    assert "too_complex" in {f.rule for f in findings}
    assert [f.rule for f in parse_and_lint("[" * 100_000 + "]" * 100_000)] == ["too_complex"]
    assert [f.rule for f in parse_and_lint(json.dumps({"x": "y" * 100}) + " " * (17 * 2**20))] == [
        "too_complex"
    ]


@pytest.mark.parametrize(
    ("reported", "table"),
    [
        ("0.2.8", "0.2.8"),  # known: itself
        ("0.2.10", "0.2.9"),  # newer than all known: the newest (numbers, not strings: 10 > 9)
        ("0.2.8.post1", "0.2.8"),  # between known ones: the newest not newer than it
        ("0.2.6", "0.2.9"),  # older than all known: the newest
        ("", "0.2.9"),  # not reported
        ("garbage", "0.2.9"),
    ],
)
def test_the_table_version_for_a_reported_version(reported: str, table: str) -> None:
    assert backends.xgrammar_table_version(reported) == table


def test_llguidance_table_versions() -> None:
    assert backends.llguidance_table_version("1.7.9") == "1.7.6"
    assert backends.llguidance_table_version("1.8.0") == "1.7.6"
    assert backends.llguidance_table_version("1.9.1") == "1.9.1"
    assert backends.versions_of({"xgrammar": "0.2.7"}) == backends.Versions(
        "0.2.7", backends.LLGUIDANCE_VERIFIED
    )


def test_version_specific_entries_fire_only_on_their_versions() -> None:
    """0.2.7/0.2.8 fail a compile that 0.2.9 passes: an error there, nothing on 0.2.9; the finding
    names the version whose table it used."""
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{8,500}$"}}}
    old = [
        f for f in lint(schema, versions=backends.Versions(xgrammar="0.2.8")) if f.rule == "xgrammar_refused"
    ]
    assert [(f.severity, f.pointer) for f in old] == [("error", "/properties/code/pattern")]
    assert "verified on xgrammar 0.2.8" in old[0].message
    assert not [f for f in lint(schema) if f.rule == "xgrammar_refused"]
    newer = lint({"not": {}}, versions=backends.Versions(xgrammar="0.3.1"))
    assert any("verified on xgrammar 0.2.9" in f.message for f in newer)


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        ({"type": "number", "multipleOf": 0.01}, "number multipleOf", "/multipleOf"),
        (
            {"type": "integer", "maximum": 9, "multipleOf": 3},
            "multipleOf beside a one-sided range",
            "/multipleOf",
        ),
        ({"type": "integer", "multipleOf": 1025}, "integer multipleOf over 1024", "/multipleOf"),
        ({"type": "string", "pattern": "^[a-z]+$", "maxLength": 8}, "maxLength beside pattern", "/maxLength"),
        ({"type": "string", "format": "uuid", "minLength": 1}, "minLength beside format", "/minLength"),
        (
            {"properties": {"a": {"$ref": "#/$defs/a", "enum": [1]}}},
            "assertions beside $ref",
            "/properties/a/$ref",
        ),
        ({"type": "object", "required": ["a"]}, "required name not in properties", "/required"),
        ({"type": "string", "pattern": "^\\d+$x?"}, "pattern anchor in the middle", "/pattern"),
        ({"properties": {"a": {"maxLength": 3}}}, "maxLength without type", "/properties/a/maxLength"),
        ({"type": "string", "enum": ["a", None]}, "enum outside type", "/type"),
        ({"properties": {"a": {"$ref": "#node"}}}, "$ref to an anchor", "/properties/a/$ref"),
    ],
)
def test_new_xgrammar_gaps_are_detected(schema: dict[str, Any], keyword: str, pointer: str) -> None:
    found = [(f.message.split("`")[1], f.pointer) for f in lint(schema) if f.rule == "xgrammar_unenforced"]
    assert (keyword, pointer) in found


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "multipleOf": 5},  # enforced: an integer step without bounds
        {"type": "integer", "minimum": 0, "maximum": 99, "multipleOf": 1024},  # or with both
        {"type": "string", "pattern": "^(?:a$|b$)"},  # anchors at the edges
        {"type": "string", "format": "uuid", "maxLength": None},  # not a number: no length asked
        {"type": "array", "items": {}, "minItems": 2},  # typed, or inferred from items
        {"items": {}, "maxItems": 2},
        {"type": "object", "propertyNames": {"pattern": "^a"}},  # names are strings
        {"type": "object", "properties": {"a": {}}, "required": ["a"]},
        {"$ref": "#/$defs/a", "description": "annotations only"},
    ],
)
def test_what_xgrammar_enforces_stays_quiet(schema: dict[str, Any]) -> None:
    assert [f.message for f in lint(schema) if f.rule.startswith("xgrammar")] == []


def test_backend_findings_name_their_keyword_in_a_field() -> None:
    """A backend rule's keyword is its own field (what `gdx lint` probes, the daemon's /schemas shows
    and proofs search for), the same one its message names between backticks; other rules have none."""
    backend = {"xgrammar_unenforced", "xgrammar_overenforced", "xgrammar_refused", "llguidance_refused"}
    seen = 0
    for doc in read(DATA / "schemas"):
        if doc["category"] not in ("JsonSchemaStore", "Snowplow"):
            continue
        for finding in lint(doc["schema"]):
            if finding.rule in backend:
                seen += 1
                assert finding.keyword and f"`{finding.keyword}`" in finding.message, finding
            else:
                assert finding.keyword == "", finding
    assert seen > 100
