"""Nested unions flattened only where the accepted set stays the same (exporter/schema/flatten.py):
the jsonschema validator gives the same verdict before and after, by hand and on JSONSchemaBench;
where a union cannot be flattened, the reason is the one that makes the naive rewrite wrong."""

from __future__ import annotations

import copy
import functools
import gzip
import json
import time
from typing import Any

from exporter.analysis.lint import lint
from exporter.lint.prove import candidates
from exporter.lint.prove.validator import Validator
from exporter.schema.findings import Thresholds
from exporter.schema.flatten import Flattened, flatten
from exporter.schema.identity import canonical_json
from exporter.schema.structure import union_depth
from exporter.schema.walk import TooComplex, walk
from tests.unit.schema.test_static import MASKBENCH

GENERIC = [*candidates.GENERIC, {"kind": "a"}, {"kind": "b", "n": 1}, [1, "a"], {"a": None}, 2, 2.0, "b"]


def findings(schema: Any) -> list[str]:
    return [f.pointer for f in lint(schema, engines=()) if f.rule == "union_depth"]


def accepts(schema: Any, instance: Any) -> bool:
    return not Validator(schema).violations(instance)


def same_verdicts(a: Any, b: Any, instances: list[Any]) -> list[Any]:
    """The instances the two schemas disagree on (none, when they accept the same)."""
    left, right = Validator(a), Validator(b)
    return [x for x in instances if bool(left.violations(x)) != bool(right.violations(x))]


def nested(depth: int, key: str = "anyOf") -> dict[str, Any]:
    """`depth` unions each a branch of the one above: integer, then strings of a growing length."""
    schema: dict[str, Any] = {"type": "integer"}
    for level in range(depth):
        schema = {"title": f"level {level}", key: [{"type": "string", "minLength": level}, schema]}
    return schema


def test_an_anyof_in_an_anyof_becomes_one_anyof_with_the_same_verdicts() -> None:
    schema = nested(6)
    assert findings(schema) == ["/anyOf/1/anyOf/1/anyOf/1/anyOf"]
    flat = flatten(schema, findings(schema))
    assert [len(flat.schema["anyOf"]), findings(flat.schema)] == [7, []]
    assert [(r.pointer, r.done) for r in flat.rewrites] == [
        ("/anyOf/1/anyOf/1/anyOf/1/anyOf/1/anyOf/1", True), ("/anyOf/1/anyOf/1/anyOf/1/anyOf/1", True),
        ("/anyOf/1/anyOf/1/anyOf/1", True), ("/anyOf/1/anyOf/1", True), ("/anyOf/1", True),
    ]  # fmt: skip
    assert flat.rewrites[-1].what == "replaced by the 6 branches of its anyOf"
    assert same_verdicts(schema, flat.schema, [*GENERIC, "", "abcdef", 7, 7.5, None]) == []
    assert schema == nested(6)  # the input is left as it was


def test_keywords_beside_an_inner_union_are_copied_into_its_branches() -> None:
    ids = [{"properties": {"id": {"type": "integer"}}}, {"properties": {"id": {"type": "string"}}}]
    schema = {
        "anyOf": [{"type": "null"}, {"type": "object", "required": ["id"], "description": "x", "anyOf": ids}]
    }
    flat = flatten(schema, ["/anyOf/1/anyOf"])
    assert flat.schema == {"anyOf": [
        {"type": "null"},
        {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}},
        {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
    ]}  # fmt: skip
    assert (
        flat.rewrites[0].what
        == "replaced by the 2 branches of its anyOf, `type`, `required` copied into each"
    )
    instances = [None, {}, {"id": 1}, {"id": "x"}, {"id": None}, [], "x", {"other": 1}]
    assert same_verdicts(schema, flat.schema, instances) == []


def test_a_oneof_in_an_anyof_stays_unless_its_branches_are_exclusive() -> None:
    """5 is an integer and at least 0: the inner oneOf rejects it; flattened, the anyOf would accept it."""
    schema = {"anyOf": [{"type": "null"}, {"oneOf": [{"type": "integer"}, {"minimum": 0}]}]}
    naive = {"anyOf": [{"type": "null"}, {"type": "integer"}, {"minimum": 0}]}
    assert (
        flatten(schema, ["/anyOf/1/oneOf"]).schema == schema and not accepts(schema, 5) and accepts(naive, 5)
    )
    deep = nested_over(schema, 2)
    (why,) = flatten(deep, findings(deep)).rewrites
    assert why.pointer == "/anyOf/1/allOf/0/anyOf/1/allOf/0/anyOf/1/oneOf" and not why.done
    assert (
        "/anyOf/1/allOf/0/anyOf/1/allOf/0/anyOf/1: a oneOf in an anyOf whose branches are "
        "not provably exclusive" in why.what
    )
    exclusive = {"anyOf": [{"type": "null"}, {"oneOf": [
        {"type": "object", "required": ["kind"], "properties": {"kind": {"const": "a"}}},
        {"type": "object", "required": ["kind", "n"], "properties": {"kind": {"const": "b"}}},
        {"type": "string"}]}]}  # fmt: skip
    flat = flatten(exclusive, ["/anyOf/1/oneOf"])
    assert len(flat.schema["anyOf"]) == 4 and same_verdicts(exclusive, flat.schema, GENERIC) == []


def nested_over(inner: dict[str, Any], depth: int = 3) -> dict[str, Any]:
    """`inner` under `depth` more anyOf levels, each reached through an `allOf` (so not flattened)."""
    schema = inner
    for level in range(depth):
        schema = {"anyOf": [{"type": "string", "maxLength": level}, {"allOf": [schema]}]}
    return schema


def test_exclusive_means_provably_so() -> None:
    """A discriminator holds for objects only, and 1 and 1.0 are one JSON value: neither is apart."""
    tags = [{"required": ["kind"], "properties": {"kind": {"const": "a"}}},
            {"required": ["kind"], "properties": {"kind": {"const": "b"}}}]  # fmt: skip
    untyped = {"anyOf": [{"oneOf": tags}, {"type": "null"}]}
    assert flatten(untyped, ["/anyOf/0/oneOf"]).schema == untyped
    assert not accepts(untyped, "x") and accepts({"anyOf": [*tags, {"type": "null"}]}, "x")  # "x" passes both
    numbers = {"anyOf": [{"oneOf": [{"const": 1}, {"const": 1.0}]}, {"type": "null"}]}
    assert flatten(numbers, ["/anyOf/0/oneOf"]).schema == numbers
    assert not accepts(numbers, 1) and accepts({"anyOf": [{"const": 1}, {"const": 1.0}, {"type": "null"}]}, 1)
    apart = {"oneOf": [{"oneOf": [{"const": 1}, {"const": True}, {"enum": ["a", None]}]}, {"type": "array"}]}
    flat = flatten(apart, ["/oneOf/0/oneOf"])
    assert len(flat.schema["oneOf"]) == 4 and same_verdicts(apart, flat.schema, [*GENERIC, 1.0, "a"]) == []


def test_what_would_read_otherwise_copied_is_not_flattened() -> None:
    cases = {
        "`exclusiveMaximum` beside the union and `maximum` there read each other": {
            "exclusiveMaximum": True, "anyOf": [{"maximum": 3}, {"type": "null"}]},
        "`$ref` there reads (or, drafts 4 to 7, ignores) every keyword beside it": {
            "type": "object", "anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]},
        "`type` is set there and beside the union, differently": {
            "type": ["object", "null"], "anyOf": [{"type": "object"}, {"required": ["a"]}]},
        "`$defs` beside its anyOf cannot be copied into its branches": {
            "$defs": {"b": {"type": "integer"}}, "anyOf": [{"type": "string"}, {"type": "null"}]},
        "`properties` beside its anyOf holds schemas": {
            "properties": {"a": {"type": "integer"}}, "anyOf": [{"required": ["a"]}, {"type": "null"}]},
    }  # fmt: skip
    for reason, inner in cases.items():
        schema = {
            "$defs": {"a": {"type": "integer"}},
            **nested_over({"anyOf": [{"type": "boolean"}, inner]}, 2),
        }
        flat = flatten(schema, findings(schema))
        left = [r.what for r in flat.rewrites if not r.done]
        assert flat.schema == schema and len(left) == 1 and reason in left[0], (reason, flat.rewrites)


def test_a_branch_a_ref_points_into_is_not_moved() -> None:
    target = {"anyOf": [{"type": "integer"}, {"anyOf": [{"const": 1.5}, {"const": "x"}]}]}
    schema = {"properties": {"a": {"$ref": "#/anyOf/1/anyOf/1"}},
              "anyOf": [{"type": "string"}, {"anyOf": [{"type": "null"}, target]}]}  # fmt: skip
    flat = flatten(schema, findings(schema))
    assert [r.pointer for r in flat.rewrites] == [
        "/anyOf/1/anyOf/1/anyOf/1"
    ]  # inside the target: it stays put
    assert flat.schema["anyOf"][1]["anyOf"][1] == {
        "anyOf": [{"type": "integer"}, {"const": 1.5}, {"const": "x"}]
    }
    assert same_verdicts(schema, flat.schema, [*GENERIC, {"a": 1.5}, {"a": "y"}, {"a": "x"}, 1.5]) == []
    # In an embedded resource, `#/...` starts at its `$id`; after another base, at any resource's.
    union = {
        "$id": "urn:r",
        "anyOf": [{"type": "null"}, {"anyOf": [{"type": "integer"}, {"type": "string"}]}],
    }
    inside = {"$defs": {"r": {**union, "properties": {"a": {"$ref": "#/anyOf/1/anyOf/0"}}}}}
    outside = {"$defs": {"r": union}, "properties": {"a": {"$ref": "urn:r#/anyOf/1/anyOf/0"}}}
    for embedded in (inside, outside):
        assert flatten(embedded, ["/$defs/r/anyOf/1/anyOf"]) == Flattened(embedded, ())
    assert flatten({"$defs": {"r": union}}, ["/$defs/r/anyOf/1/anyOf"]).rewrites[0].done


def test_unions_through_a_ref_or_a_field_stay_and_say_why() -> None:
    u = {"anyOf": [{"type": "null"}, {"oneOf": [{"type": "integer"}, {"minimum": 0}]}]}
    through_ref = {"$defs": {"u": u}, **nested_over({"$ref": "#/$defs/u"}, 2)}
    (pointer,) = findings(through_ref)
    flat = flatten(through_ref, [pointer])
    assert pointer == "/$defs/u/anyOf/1/oneOf" and flat.schema == through_ref
    assert [r.done for r in flat.rewrites] == [False]
    assert "/$defs/u/anyOf/1: a oneOf in an anyOf" in flat.rewrites[0].what
    assert (
        "reached through a `$ref` to #/$defs/u: a definition is flattened only where it stands"
        in flat.rewrites[0].what
    )
    through_field = nested_over(
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "null"}, {"type": "integer"}]}}}
    )
    (pointer,) = findings(through_field)
    (left,) = flatten(through_field, [pointer]).rewrites
    assert left.pointer == pointer == "/anyOf/1/allOf/0/anyOf/1/allOf/0/anyOf/1/allOf/0/properties/a/anyOf"
    assert "/anyOf/1/allOf/0/anyOf is under `allOf` in a branch of /anyOf, not a branch itself" in left.what
    assert f"{pointer} is under `allOf`, `properties` in a branch of " in left.what


def test_the_reasons_name_the_pointers_of_the_schema_as_given() -> None:
    """Two levels flatten above oneOfs that stay: the finding left is named where it was given."""
    inner = {
        "oneOf": [
            {"type": "integer"},
            {"oneOf": [{"minimum": 0}, {"oneOf": [{"maximum": 9}, {"multipleOf": 2}]}]},
        ]
    }
    schema = {
        "anyOf": [{"type": "null"}, {"anyOf": [{"type": "boolean"}, {"anyOf": [{"type": "string"}, inner]}]}]
    }
    assert findings(schema) == ["/anyOf/1/anyOf/1/anyOf/1/oneOf"]
    flat = flatten(schema, findings(schema))
    assert [r.pointer for r in flat.rewrites if r.done] == ["/anyOf/1/anyOf/1", "/anyOf/1"]
    assert flat.schema["anyOf"][3] == inner
    (left,) = [r for r in flat.rewrites if not r.done]
    assert left.pointer == "/anyOf/1/anyOf/1/anyOf/1/oneOf/1/oneOf/1/oneOf"  # the 4th level now
    assert "/anyOf/1/anyOf/1/anyOf/1/oneOf/1: a oneOf in a oneOf" in left.what
    assert same_verdicts(schema, flat.schema, [*GENERIC, -1, 3, 4, 10, 12, 11]) == []


def test_hostile_input_gives_a_reason_not_an_exception() -> None:
    schema: Any = {"type": "null"}
    for _ in range(5000):
        schema = {"anyOf": [schema, {"type": "integer"}]}
    flat = flatten(schema, ["/anyOf"])
    assert flat.schema is schema and flat.rewrites[0].what.startswith("too complex to flatten")
    assert flatten({"anyOf": [{"anyOf": "x"}]}, ["/anyOf/0/anyOf"]).rewrites == ()


@functools.cache
def maskbench() -> tuple[tuple[str, dict[str, Any], list[Any]], ...]:
    """(id, schema, the instances it comes with, must-accept and must-reject) of each maskbench schema."""
    out = []
    for path in sorted(MASKBENCH.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                doc = json.loads(line)
                schema = json.loads(doc["schema"]) if isinstance(doc["schema"], str) else doc["schema"]
                tests = json.loads(doc["tests"]) if isinstance(doc["tests"], str) else doc["tests"]
                if isinstance(schema, dict):
                    out.append((doc["id"], schema, [t["data"] for t in tests]))
    return tuple(out)


def instances(schema: Any, given: list[Any]) -> list[Any]:
    """The dataset's instances, an exemplar per union branch (0 to 2), the values the schema names."""
    made = []
    for branch in range(3):
        try:
            made.append(candidates.exemplar(schema, branch))
        except RecursionError:
            continue
    return [*given, *made, *candidates.pool(schema, 24), *GENERIC]


def unions(schema: Any) -> int:
    return json.dumps(schema).count('"anyOf"') + json.dumps(schema).count('"oneOf"')


def test_on_jsonschemabench_what_fires_union_depth_is_flattened_or_said_why() -> None:
    """Every maskbench schema union_depth fires on: each rewrite takes one union away, every finding
    left has its reason, and the validator's verdicts stay on the dataset's instances and exemplars."""
    started = time.monotonic()
    fired = flattened = refused = 0
    reasons: dict[str, int] = {}
    for name, schema, given in maskbench():
        try:
            pointers = sorted({f.pointer for node in walk(schema) for f in union_depth(node, Thresholds())})
        except TooComplex:
            continue
        if not pointers:
            continue
        fired += 1
        flat = flatten(schema, pointers)
        done = [r for r in flat.rewrites if r.done]
        left = [r for r in flat.rewrites if not r.done]
        assert unions(flat.schema) == unions(schema) - len(done), name
        assert len(left) == len(findings_in(flat.schema)), name
        flattened += bool(done)
        refused += bool(left)
        for r in left:
            kind = (
                "$ref"
                if "through a `$ref`" in r.what
                else "a field or an item"
                if "not a branch itself" in r.what
                else "other"
            )
            reasons[kind] = reasons.get(kind, 0) + 1
        if done:
            assert same_verdicts(schema, flat.schema, instances(schema, given)) == [], name
    print(f"union_depth fires on {fired} maskbench schemas: {flattened} flattened (some unions), "
          f"{refused} with findings left ({reasons}) in {time.monotonic() - started:.1f} s")  # fmt: skip
    assert fired >= 20 and flattened >= 2


def findings_in(schema: Any) -> set[str]:
    return {f.pointer for node in walk(schema) for f in union_depth(node, Thresholds())}


def deepened(schema: Any) -> Any:
    """Each union of two branches or more, deepest first, nested branch in branch: [a, b, c] becomes
    [a, {title, K: [b, {title, K: [c]}]}], a `type` all the moved branches share beside their union."""
    out = copy.deepcopy(schema)
    places = []
    for node in walk(out, follow_refs=False):
        for key in ("anyOf", "oneOf"):
            if isinstance(node.schema.get(key), list) and len(node.schema[key]) >= 2:
                places.append((node.schema, key, node.pointer))
    for holder, key, _ in sorted(places, key=lambda p: p[2].count("/"), reverse=True):
        branches = holder[key]
        rest: Any = branches[-1:]
        for branch in reversed(branches[1:-1]):
            rest = [branch, _wrapper(key, rest)]
        holder[key] = [branches[0], _wrapper(key, rest)]
    return out


def _wrapper(key: str, branches: list[Any]) -> dict[str, Any]:
    """A union of `branches` with a title; or, when every branch has the same `type` and is no union
    itself, that `type` beside it instead of in each branch."""
    kinds = {canonical_json(b["type"]) if isinstance(b, dict) and "type" in b else "" for b in branches}
    plain = all(isinstance(b, dict) and not {"anyOf", "oneOf"} & b.keys() for b in branches)
    if len(kinds) > 1 or "" in kinds or not plain:
        return {"title": "nested", key: branches}
    moved = [{k: v for k, v in b.items() if k != "type"} for b in branches]
    return {"description": "nested", "type": json.loads(kinds.pop()), key: moved}


def test_on_jsonschemabench_unions_nested_by_hand_flatten_back_with_the_same_verdicts() -> None:
    """Every maskbench schema with instances, unions and no `$ref` (jsonschema takes minutes on a
    recursive one nested so), its unions nested branch in branch and flattened: an anyOf comes back
    as the original flattens, a oneOf where its branches are provably exclusive; either way the
    validator's verdicts stay (on the dataset's instances, exemplars, the values the schema names)."""
    started = time.monotonic()
    schemas = same = exclusive = kept = 0
    for name, schema, given in maskbench():
        text = json.dumps(schema)
        if not given or ('"anyOf"' not in text and '"oneOf"' not in text) or '"$ref"' in text:
            continue
        try:
            deep = deepened(schema)
            flat = flatten(deep, [""])
        except TooComplex:
            continue
        if deep == schema:
            continue
        schemas += 1
        assert same_verdicts(deep, flat.schema, instances(schema, given)) == [], name
        if '"oneOf"' not in text:
            assert canonical_json(flat.schema) == canonical_json(flatten(schema, [""]).schema), name
            same += 1
        elif unions(flat.schema) == unions(schema):
            exclusive += 1
        else:
            kept += 1
    print(f"{schemas} maskbench schemas nested by hand: {same} with anyOf only flattened back as the "
          f"original flattens, {exclusive} with oneOf flattened back, {kept} with oneOf kept nested "
          f"(not provably exclusive), in {time.monotonic() - started:.1f} s")  # fmt: skip
    assert schemas > 300 and same > 100 and exclusive > 10
