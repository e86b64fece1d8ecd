"""Lint rules on small schemas: each fires where it should, at the right pointer, and nowhere else."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from exporter.schema.lint import Thresholds, count, lint, parse_and_lint
from exporter.schema.regex import analyse
from exporter.schema.walk import Budget


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
    schema = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}
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
