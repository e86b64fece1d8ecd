"""The static schema of a family (exporter.schema.static.merge): it accepts every instance any
variant accepts, what it no longer holds is listed as moved, and what cannot be joined is said."""

from __future__ import annotations

import copy
import gzip
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from exporter.schema.static import Merged, Moved, merge
from tools.harness import ROOT

MASKBENCH = ROOT / "tests" / "support" / "data" / "jsonschemabench" / "maskbench"
LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


def validator(schema: Any) -> Any:
    """The validator of the schema's own draft (its `$schema`), 2020-12 without one."""
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def valid(schema: Any, instance: Any) -> bool:
    return bool(validator(schema).is_valid(instance))


def tenant(t: int) -> dict[str, Any]:
    return {
        "title": f"Invoice for tenant {t}",
        "type": "object",
        "properties": {
            "tenant": {"const": f"t{t}"},
            "cost_center": {"enum": [f"CC-{t}-{i}" for i in range(1 + t % 3)]},
            "lines": {
                "type": "array",
                "items": {"type": "number", "maximum": 100 * t},
                "minItems": t,
                "maxItems": t,
            },
            "note": {"type": "string", "description": f"generated 2026-01-0{t % 9 + 1}"},
        },
        "required": ["tenant", "cost_center", "lines"],
        "additionalProperties": False,
    }


def tenant_instance(t: int) -> dict[str, Any]:
    return {"tenant": f"t{t}", "cost_center": f"CC-{t}-0", "lines": [float(100 * t)] * t, "note": "x"}


def test_a_tenant_family_joins_into_one_schema_that_accepts_every_tenants_output() -> None:
    variants = [tenant(t) for t in range(1, 9)]
    merged = merge(variants)
    assert merged.error == ""
    for t in range(1, 9):
        assert valid(variants[t - 1], tenant_instance(t)) and valid(merged.schema, tenant_instance(t))
    props = merged.schema["properties"]
    assert props["tenant"] == {"enum": [f"t{t}" for t in range(1, 9)]}
    assert (props["lines"]["minItems"], props["lines"]["maxItems"], props["lines"]["items"]["maximum"]) == (
        1,
        8,
        800,
    )
    assert "description" not in props["note"] and "title" not in merged.schema
    assert set(merged.moved) == {
        Moved("/properties/tenant", "const"), Moved("/properties/cost_center", "enum"),
        Moved("/properties/lines", "minItems"), Moved("/properties/lines", "maxItems"),
        Moved("/properties/lines/items", "maximum"),
    }  # fmt: skip
    # what the static schema lets through for one tenant is exactly what moved: tenant 1's schema
    # rejects tenant 2's output at the moved pointers only
    errors = jsonschema.Draft202012Validator(variants[0]).iter_errors(tenant_instance(2))
    assert {_moved(error) for error in errors} <= set(merged.moved)


def test_the_static_schema_is_one_string_whatever_the_order_of_the_variants() -> None:
    variants = [tenant(t) for t in range(1, 6)]
    shuffled = variants[::-1]
    assert json.dumps(merge(variants).schema) == json.dumps(merge(shuffled).schema)


def test_tool_subsets_join_into_the_union_of_the_tools() -> None:
    rng = random.Random(29)
    tools = [
        {"properties": {"name": {"type": "string", "enum": [f"tool_{i}"]}, "parameters": {"type": "object"}},
         "required": ["name", "parameters"]}
        for i in range(8)
    ]  # fmt: skip
    variants = []
    for _ in range(30):
        chosen = sorted(rng.sample(range(8), rng.randint(2, 5)))
        variants.append(
            {
                "type": "array",
                "minItems": 1,
                "maxItems": 1,
                "items": {"type": "object", "anyOf": [tools[i] for i in chosen]},
            }
        )
    merged = merge(variants)
    used = sorted(
        {
            i
            for v in variants
            for b in v["items"]["anyOf"]
            for i in [int(b["properties"]["name"]["enum"][0][5:])]
        }
    )
    assert [b["properties"]["name"]["enum"] for b in merged.schema["items"]["anyOf"]] == [
        [f"tool_{i}"] for i in used
    ]
    assert merged.schema["maxItems"] == 1 and merged.moved == (Moved("/items", "anyOf"),)


@pytest.mark.parametrize(
    ("variants", "error"),
    [
        ([{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}], "/$ref: `$ref` differs between variants"),
        ([{"not": {"type": "string"}}, {"not": {"type": "number"}}], "/not: `not` differs between variants"),
        ([{"prefixItems": [{}, {}]}, {"prefixItems": [{}]}], "/prefixItems: lists of different lengths"),
        ([{"type": "object"}, 3], "/: a schema that is not an object"),
        ([], "no variants"),
    ],
)
def test_what_cannot_be_joined_without_changing_what_is_accepted_is_said(
    variants: list[Any], error: str
) -> None:
    merged = merge(variants)
    assert (merged.schema, merged.error) == (None, error)


def test_exclusive_branches_of_different_variants_become_anyof() -> None:
    a = {"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}]}
    b = {"oneOf": [{"type": "number"}, {"type": "string", "maxLength": 3}]}
    merged = merge([a, b])
    assert set(merged.schema) == {"anyOf"} and len(merged.schema["anyOf"]) == 3
    assert valid(a, 2) and valid(merged.schema, 2)  # oneOf over the union would match two branches


def test_a_constraint_absent_from_one_variant_goes_and_a_large_enum_becomes_its_type() -> None:
    merged = merge([{"type": "string", "maxLength": 5, "pattern": "^a"}, {"type": "string"}])
    assert merged.schema == {"type": "string"}
    assert set(merged.moved) == {Moved("", "maxLength"), Moved("", "pattern")}
    wide = merge(
        [{"type": "string", "enum": [f"v{i}-{j}" for i in range(10)]} for j in range(10)], max_enum=64
    )
    # past max_enum the type, with the lengths every member has (a shorter grammar, nothing lost)
    assert wide.schema == {"type": "string", "minLength": 4, "maxLength": 4} and wide.moved == (
        Moved("", "enum"),
    )
    mixed = merge([{"enum": [f"c{i}" * (1 + i % 3), i]} for i in range(70)], max_enum=64)
    assert mixed.schema == {}  # a number among the members: no length to keep
    bounded = merge(
        [{"type": "string", "maxLength": 9, "enum": [f"c{i}-{j}" for i in range(10)]} for j in range(10)]
    )
    assert bounded.schema == {"type": "string", "maxLength": 9}  # its own bound stays


def test_hostile_input_gives_an_error_not_an_exception() -> None:
    deep: Any = {}
    for _ in range(5_000):
        deep = {"properties": {"x": deep}}
    merged = merge([deep, {"properties": {"x": {"type": "string"}}}])
    assert merged.schema is None and merged.error


def _moved(error: Any) -> Moved:
    path = [str(p) for p in error.absolute_schema_path]
    return Moved("".join(f"/{p.replace('~', '~0').replace('/', '~1')}" for p in path[:-1]), path[-1])


def _explained(error: Any, moved: set[Moved]) -> bool:
    """Whether a rejection is at a moved constraint: itself, or (a union's) one of its branches'
    causes."""
    if _moved(error) in moved:
        return True
    if error.validator in ("anyOf", "oneOf") and error.context:
        causes = [_explained(cause, moved) for cause in error.context]
        return True in causes
    return False


def _perturbed(schema: Any, rng: random.Random) -> Any:
    """Another variant of a real schema, as a service would inject one: bounds tightened, an enum
    member dropped, a const changed, a branch dropped, a description rewritten."""
    out = copy.deepcopy(schema)
    stack = [out]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        for key in LOWER:
            if (
                isinstance(node.get(key), int | float)
                and not isinstance(node[key], bool)
                and rng.random() < 0.5
            ):
                node[key] += 1
        for key in UPPER:
            if (
                isinstance(node.get(key), int | float)
                and not isinstance(node[key], bool)
                and rng.random() < 0.5
            ):
                node[key] -= 1
        if isinstance(node.get("enum"), list) and len(node["enum"]) > 1 and rng.random() < 0.5:
            node["enum"] = node["enum"][:-1]
        if "const" in node and rng.random() < 0.5:
            node["const"] = "changed"
        if isinstance(node.get("description"), str):
            node["description"] += " (2026-12-03)"
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list) and len(node[key]) > 2 and rng.random() < 0.3:
                node[key] = node[key][1:]
        for value in node.values():
            if isinstance(value, dict):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, dict))
    return out


@dataclass(frozen=True)
class Pair:
    """A JSONSchemaBench schema with its must-accept instances, a perturbed copy, and their merge."""

    id: str
    schema: dict[str, Any]
    other: Any
    merged: Merged
    instances: list[Any]


def perturbed_pairs(seed: int = 2912) -> Iterator[Pair]:
    """Every maskbench schema that has must-accept instances, merged with `_perturbed` of itself."""
    rng = random.Random(seed)
    for path in sorted(MASKBENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                doc = json.loads(line)
                schema = json.loads(doc["schema"]) if isinstance(doc["schema"], str) else doc["schema"]
                tests = json.loads(doc["tests"]) if isinstance(doc["tests"], str) else doc["tests"]
                instances = [t["data"] for t in tests if t.get("valid")]
                if not isinstance(schema, dict) or not instances:
                    continue
                other = _perturbed(schema, rng)
                yield Pair(doc["id"], schema, other, merge([schema, other]), instances)


# The whole benchmark: about 20 s, so make test runs it and make check (the inner loop) does not.
@pytest.mark.slow
def test_on_jsonschemabench_each_variants_valid_instances_stay_valid_and_what_breaks_moved() -> None:
    """Real schemas with their must-accept instances: merged with a perturbed variant, every instance
    the original accepts the static schema accepts; where the perturbed variant rejects one, each
    error is at a pointer and keyword listed as moved (in schemas without `$ref`)."""
    families = accepted = mapped = 0
    unmerged: list[str] = []
    for pair in perturbed_pairs():
        if pair.merged.schema is None:
            unmerged.append(f"{pair.id}: {pair.merged.error}")
            continue
        families += 1
        has_ref = '"$ref"' in json.dumps(pair.schema)
        for instance in pair.instances:
            try:
                if not valid(pair.schema, instance):
                    continue  # a dataset instance its own schema rejects (a format, a draft)
                assert valid(pair.merged.schema, instance), (pair.id, instance)
            except jsonschema.exceptions.SchemaError:
                break
            accepted += 1
            if has_ref:
                continue  # jsonschema's error paths step through a $ref without naming it
            for error in validator(pair.other).iter_errors(instance):
                assert _explained(error, set(pair.merged.moved)), (pair.id, error.message, pair.merged.moved)
                mapped += 1
    print(f"{families} families merged, {accepted} must-accept instances accepted, {mapped} rejections"
          f" by the perturbed variant at a moved constraint, {len(unmerged)} not merged")  # fmt: skip
    assert families > 500 and accepted > 1000 and mapped > 100
    assert len(unmerged) < families / 20, unmerged[:10]


def test_an_unknown_keyword_goes_unless_a_ref_points_into_it() -> None:
    a = {"x-links": [{"rel": "self"}], "constraints": {"name": {"type": "string", "minLength": 1}},
         "properties": {"n": {"$ref": "#/constraints/name"}}}  # fmt: skip
    b = {"x-links": [{"rel": "next"}], "constraints": {"name": {"type": "string", "minLength": 3}},
         "properties": {"n": {"$ref": "#/constraints/name"}}}  # fmt: skip
    merged = merge([a, b])
    assert "x-links" not in merged.schema  # annotations to validators and engines alike
    assert merged.schema["constraints"] == {"name": {"minLength": 1, "type": "string"}}
    assert merged.moved == (Moved("/constraints/name", "minLength"),)
    assert valid(merged.schema, {"n": "ab"}) and valid(a, {"n": "ab"}) and not valid(b, {"n": "ab"})
