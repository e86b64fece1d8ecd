"""Which schemas `gdx fix` rewrites on its own, from what `gdx lint` found (exporter/fix/plan.py):
unions nested past the limit are flattened, nothing moved to the check, each rewrite listed; where
none can be flattened the plan says why instead of a schema."""

from __future__ import annotations

import json
from typing import Any

from exporter.fix.plan import FamilyPlan, plans, schemas_by_hash, slow_plans
from exporter.lint.report import analyse
from exporter.lint.requests import Inputs, Request
from exporter.schema.findings import Thresholds
from exporter.schema.static import Moved, Rewrite


def slow(*schemas: dict[str, Any], thresholds: Thresholds | None = None) -> list[FamilyPlan]:
    """slow_plans of schema files, each sent once, as `gdx fix` makes them."""
    thresholds = thresholds or Thresholds()
    requests = tuple(
        Request(f"s{i}.json", "json", json.dumps(schema), schema) for i, schema in enumerate(schemas)
    )
    report = analyse(Inputs(requests), thresholds, ("xgrammar",))
    parsed = schemas_by_hash(requests)
    families = plans(report, parsed)
    return slow_plans(report, parsed, families, thresholds.union_depth)


SHAPES = {"title": "Shapes", "anyOf": [{"type": "null"}, {"title": "more", "anyOf": [{"type": "boolean"}, {
    "anyOf": [{"type": "string"}, {"anyOf": [{"type": "integer"}, {"type": "array"}]}]}]}]}  # fmt: skip
FLAT = [{"type": "null"}, {"type": "boolean"}, {"type": "string"}, {"type": "integer"}, {"type": "array"}]


def test_unions_nested_past_the_limit_are_flattened_and_the_rewrites_listed() -> None:
    (plan,) = slow(SHAPES)
    assert (plan.name, plan.severity, plan.merged.moved) == ("Shapes", "union_depth", ())
    assert plan.merged.schema == {"title": "Shapes", "anyOf": FLAT}
    assert plan.merged.rewrites == (
        Rewrite("/anyOf/1/anyOf/1/anyOf/1", "replaced by the 2 branches of its anyOf"),
        Rewrite("/anyOf/1/anyOf/1", "replaced by the 3 branches of its anyOf"),
        Rewrite("/anyOf/1", "replaced by the 4 branches of its anyOf"),
    )
    assert slow(SHAPES, thresholds=Thresholds(union_depth=4)) == []  # not past gdx lint's limit


def test_flattening_and_moved_keywords_go_together() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "maxItems": 40}, "shape": SHAPES}}
    (plan,) = slow(schema)
    assert plan.severity == "max_items/union_depth"
    assert plan.merged.moved == (Moved("/properties/tags", "maxItems"),)
    shape = "/properties/shape/anyOf/1"
    assert [r.pointer for r in plan.merged.rewrites] == [
        f"{shape}/anyOf/1/anyOf/1",
        f"{shape}/anyOf/1",
        shape,
    ]
    assert plan.merged.schema["properties"] == {
        "tags": {"type": "array"},
        "shape": {"title": "Shapes", "anyOf": FLAT},
    }


def test_unions_that_cannot_be_flattened_give_a_plan_that_says_why() -> None:
    """A oneOf whose branches overlap (5 is both): flattened into the anyOf, 5 would be accepted."""
    overlapping = {"oneOf": [{"type": "integer"}, {"minimum": 0}]}
    schema = {"anyOf": [{"type": "null"}, {"allOf": [{"anyOf": [{"type": "string"}, {"allOf": [
        {"anyOf": [{"type": "boolean"}, overlapping]}]}]}]}]}  # fmt: skip
    (plan,) = slow(schema)
    assert plan.merged.schema is None and plan.merged.moved == ()
    (left,) = plan.merged.rewrites
    assert not left.done and left.pointer == "/anyOf/1/allOf/0/anyOf/1/allOf/0/anyOf/1/oneOf"
    assert plan.merged.error.startswith(
        "its nested unions stay: /anyOf/1/allOf/0/anyOf/1/allOf/0/anyOf/1/oneOf: unions still nested 4 deep: "
    )
    assert "a oneOf in an anyOf whose branches are not provably exclusive" in plan.merged.error


def test_a_finding_left_beside_a_moved_keyword_is_listed_not_fatal() -> None:
    u = {"anyOf": [{"type": "null"}, {"oneOf": [{"type": "integer"}, {"minimum": 0}]}]}
    deep = {
        "anyOf": [{"type": "string"}, {"allOf": [{"anyOf": [{"type": "boolean"}, {"$ref": "#/$defs/u"}]}]}]
    }
    schema = {"$defs": {"u": u}, "properties": {"tags": {"maxItems": 30}, "deep": deep}}
    (plan,) = slow(schema)
    assert plan.merged.schema is not None and plan.merged.moved == (Moved("/properties/tags", "maxItems"),)
    (left,) = plan.merged.rewrites
    assert not left.done and left.pointer == "/$defs/u/anyOf/1/oneOf"
    assert "/$defs/u/anyOf/1: a oneOf in an anyOf" in left.what and "reached through a `$ref`" in left.what


def test_relaxed_steps_into_union_branches_but_not_under_not_or_if() -> None:
    """Dropping a keyword widens its subschema: through a branch of a union or a tuple's item that
    widens the schema; under `not` it would narrow it, under `if` switch branches: left."""
    from exporter.fix.plan import relaxed

    schema = {
        "anyOf": [{"type": "array", "maxItems": 50}, {"type": "null"}],
        "not": {"type": "array", "maxItems": 30},
        "if": {"maxItems": 40},
        "then": {"maxItems": 45},
    }
    merged = relaxed(
        schema, ["/anyOf/0/maxItems", "/not/maxItems", "/if/maxItems", "/then/maxItems", "/anyOf/7/maxItems"]
    )
    assert [(m.pointer, m.keyword) for m in merged.moved] == [("/anyOf/0", "maxItems"), ("/then", "maxItems")]
    assert merged.schema is not None and merged.schema["anyOf"][0] == {"type": "array"}
    assert merged.schema["not"] == schema["not"] and merged.schema["if"] == schema["if"]
    assert schema["anyOf"][0]["maxItems"] == 50  # the input is untouched
