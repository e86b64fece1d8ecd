"""What each grammar engine does with each JSON Schema keyword, as measured (not as documented).

Every entry was checked by compiling an example schema and feeding a must-reject instance with the
real engines over the Llama 3 vocabulary: xgrammar 0.2.9 and llguidance 1.9.1
(tests/integration/test_schema_backends.py re-checks each one on every run). "unenforced":
xgrammar compiles the schema and accepts the must-reject instance, without a word. "refused":
llguidance fails the compile (the request fails).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from exporter.schema import compiled, regex
from exporter.schema.walk import resolve

# The versions each table was measured on (tests/integration/test_engine_versions.py re-runs the
# table checks on each): vLLM 0.33.0 pins xgrammar 0.2.8 and llguidance 1.7.x, SGLang 0.5.23 xgrammar 0.2.7.
XGRAMMAR_VERSIONS = ("0.2.7", "0.2.8", "0.2.9")
LLGUIDANCE_VERSIONS = ("1.7.6", "1.9.1")
XGRAMMAR_VERIFIED = XGRAMMAR_VERSIONS[-1]
LLGUIDANCE_VERIFIED = LLGUIDANCE_VERSIONS[-1]


@dataclass(frozen=True)
class Versions:
    """The engine versions whose tables a lint uses (as reported by the engine; see table_version)."""

    xgrammar: str = XGRAMMAR_VERIFIED
    llguidance: str = LLGUIDANCE_VERIFIED


NEWEST = Versions()


@dataclass(frozen=True)
class Behaviour:
    keyword: str  # what the finding names
    example: dict[str, Any]  # a schema using it
    must_reject: Any  # an instance a JSON Schema validator rejects
    versions: frozenset[str] | None = None  # the known versions it holds on; None: every one

    def holds_on(self, version: str) -> bool:
        return self.versions is None or version in self.versions


def _release(version: str) -> tuple[int, ...]:
    """(0, 2, 10) for "0.2.10" or "0.2.10.post1": the numeric release, compared as numbers."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip().lstrip("v"))
    return tuple(int(part) for part in match.group().split(".")) if match else ()


def table_version(known: tuple[str, ...], reported: str) -> str:
    """The known version whose table applies to a reported one: itself; else the newest known not
    newer than it; else (older than all, or unparsable) the newest known."""
    if reported in known:
        return reported
    release = _release(reported)
    older = [version for version in known if release and _release(version) <= release]
    return max(older, key=_release) if older else max(known, key=_release)


def versions_of(reported: Mapping[str, str]) -> Versions:
    """The versions an engine reported (its `hello` backends: name -> version); a backend it does not
    report gets the newest known table."""
    return Versions(
        xgrammar=reported.get("xgrammar") or XGRAMMAR_VERIFIED,
        llguidance=reported.get("llguidance") or LLGUIDANCE_VERIFIED,
    )


def xgrammar_table_version(reported: str) -> str:
    return table_version(XGRAMMAR_VERSIONS, reported)


def llguidance_table_version(reported: str) -> str:
    return table_version(LLGUIDANCE_VERSIONS, reported)


# xgrammar compiles these and does not enforce them.
XGRAMMAR_UNENFORCED: dict[str, Behaviour] = {
    behaviour.keyword: behaviour
    for behaviour in (
        Behaviour("not", {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}, {"a": "x"}),
        Behaviour(
            "if",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "if": {"properties": {"a": {"const": 1}}},
                "then": {"required": ["b"]},
            },
            {"a": 1},
        ),
        Behaviour(
            "dependentRequired",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "dependentRequired": {"a": ["b"]},
            },
            {"a": 1},
        ),
        Behaviour(
            "dependentSchemas",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "dependentSchemas": {"a": {"required": ["b"]}},
            },
            {"a": 1},
        ),
        Behaviour(
            "uniqueItems", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, [1, 1]
        ),
        Behaviour(
            "contains", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 5}}, [1, 2]
        ),
        Behaviour(
            "properties beside anyOf",
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "anyOf": [{"required": ["a"]}],
                "additionalProperties": False,
            },
            {"a": 5},
        ),
        Behaviour(
            "properties beside oneOf",
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "oneOf": [{"required": ["a"]}],
                "additionalProperties": False,
            },
            {"a": 5},
        ),
        Behaviour(
            "properties beside allOf",
            {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "allOf": [{"required": ["a"]}],
                "additionalProperties": False,
            },
            {"a": 5},
        ),
        Behaviour("oneOf exclusivity", {"oneOf": [{"type": "integer"}, {"type": "number"}]}, 5),
        Behaviour(
            "allOf with several branches",
            {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
                ]
            },
            {"a": 1},
        ),
        Behaviour("pattern lookaround", {"type": "string", "pattern": "^(?!admin$)[a-z]+$"}, "admin"),
        Behaviour("format idn-email", {"type": "string", "format": "idn-email"}, "zz zz"),
        Behaviour("format idn-hostname", {"type": "string", "format": "idn-hostname"}, "zz zz"),
        Behaviour("format iri", {"type": "string", "format": "iri"}, "zz zz"),
        Behaviour("format iri-reference", {"type": "string", "format": "iri-reference"}, "zz zz"),
        Behaviour("format regex", {"type": "string", "format": "regex"}, "(["),
        # Measured for issue 15 on 0.2.7, 0.2.8 and 0.2.9 alike (docs/measurements/engine-versions.md).
        Behaviour(
            "dependencies",
            {
                "$schema": "http://json-schema.org/draft-07/schema#",  # a validator honours it there
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "dependencies": {"a": ["b"]},
            },
            {"a": 1},
        ),
        Behaviour("number multipleOf", {"type": "number", "multipleOf": 5}, 7),
        Behaviour(
            "multipleOf beside a one-sided range", {"type": "integer", "minimum": 0, "multipleOf": 5}, 6
        ),
        Behaviour("integer multipleOf over 1024", {"type": "integer", "multipleOf": 2000}, 2001),
        Behaviour("enum outside type", {"type": "object", "enum": ["a", "b"]}, "a"),
        Behaviour("$ref to an anchor", {"$schema": "http://json-schema.org/draft-04/schema#",
                                        "definitions": {"p": {"id": "#p", "minimum": 0, "type": "integer"}},
                                        "properties": {"a": {"$ref": "#p"}}}, {"a": -1}),
        Behaviour("patternProperties lookaround", {"type": "object", "additionalProperties": False,
                                                   "patternProperties": {"^(?!if$)[a-z]+$": {}}}, {"if": 1}),
        Behaviour("format date day of month", {"type": "string", "format": "date"}, "2023-02-30"),
        Behaviour("format date-time day of month", {"type": "string", "format": "date-time"}, "2023-02-30T10:00:00Z"),  # noqa: E501
        *(
            Behaviour(f"{key} beside {name}", {"type": "string", name: value, key: bound}, instance)
            for name, value in (("pattern", "^[a-z@.]+$"), ("format", "email"))
            for key, bound, instance in (("minLength", 20, "a@example.co"), ("maxLength", 5, "a@example.co"))
        ),
        Behaviour(
            "assertions beside $ref",
            {"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n", "minimum": 5}}},
            {"a": 4},
        ),
        Behaviour(
            "required name not in properties",
            {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["a"]},
            {"b": 1},
        ),
        Behaviour("pattern anchor in the middle", {"type": "string", "pattern": "^(ab)$c?"}, "abc"),
        *(
            Behaviour(f"{key} without type", {key: value}, instance)
            for key, value, instance in (
                ("minLength", 3, "a"), ("maxLength", 1, "abc"), ("pattern", "^a+$", "b"),
                ("format", "date", "b"), ("minimum", 5, 4), ("maximum", 5, 6), ("exclusiveMinimum", 5, 5),
                ("exclusiveMaximum", 5, 5), ("minItems", 2, [1]), ("maxItems", 1, [1, 2]),
                ("minProperties", 1, {}), ("maxProperties", 0, {"a": 1}),
            )
        ),
    )
}  # fmt: skip
# Dropped beside a `$ref` (measured; properties, additionalProperties, patternProperties, items,
# prefixItems, min/maxItems, maxProperties and propertyNames there are enforced).
BOUNDS = (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum"))  # lower, upper
MAX_STEP = 1024  # an integer multipleOf above this is dropped (1024 holds, 1025 does not)
REF_DROPS = frozenset({
    "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "required", "minProperties", "anyOf", "oneOf", "allOf",
})  # fmt: skip
# Dropped on a schema without `type`, unless a sibling makes xgrammar infer it (UNTYPED_UNLESS).
UNTYPED_DROPS = ("minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                 "exclusiveMaximum", "minItems", "maxItems", "minProperties", "maxProperties")  # fmt: skip
_ARRAY, _OBJECT = ("items", "prefixItems"), ("properties", "additionalProperties")
UNTYPED_UNLESS = {"minItems": _ARRAY, "maxItems": _ARRAY, "minProperties": _OBJECT, "maxProperties": _OBJECT}
# A pattern repeat counting past this fails xgrammar 0.2.7/0.2.8 compiles with the cache on.
REPEAT_LIMIT = 128
XGRAMMAR_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference",
    "uuid", "uri-template", "json-pointer", "relative-json-pointer",
})  # fmt: skip
# Measured enforced by xgrammar 0.2.9 although older write-ups list them: patternProperties, multipleOf.

# Some xgrammar versions fail the compile of these JSON Schemas (the request fails).
# Measured with the compiler cache on (vLLM's setting): the repeat failure needs it.
XGRAMMAR_REFUSED: dict[str, Behaviour] = {
    behaviour.keyword: behaviour
    for behaviour in (
        # strict mode (vLLM's default) closes an array without `items` and an object without
        # `additionalProperties`: a minimum above what is listed cannot be met, on every version
        Behaviour("minItems beyond the listed items", {"type": "array", "minItems": 1}, None),
        Behaviour("minProperties beyond the listed properties", {"type": "object", "minProperties": 1}, None),
        # "Cannot find field a%3Ab": fixed in 0.2.9
        Behaviour(
            "escaped $ref pointer",
            {
                "definitions": {"a:b": {"type": "integer"}},
                "properties": {"a": {"$ref": "#/definitions/a%3Ab"}},
            },
            None,
            frozenset({"0.2.7", "0.2.8"}),
        ),
        # "Check failed: per_rule_fsm_hashes[ref_rule_id].has_value()": fixed in 0.2.9
        Behaviour(
            f"pattern repeat over {REPEAT_LIMIT}",
            {"type": "string", "pattern": "^[A-Z0-9_-]{8,500}$"},
            None,
            frozenset({"0.2.7", "0.2.8"}),
        ),
        Behaviour(
            f"patternProperties repeat over {REPEAT_LIMIT}",
            {"type": "object", "patternProperties": {"^[a-z_-]{1,255}$": {"type": "integer"}}},
            None,
            frozenset({"0.2.7", "0.2.8"}),
        ),
    )
}

# llguidance refuses these at compile time.
LLGUIDANCE_REFUSED: dict[str, Behaviour] = {
    behaviour.keyword: behaviour
    for behaviour in (
        Behaviour("not", XGRAMMAR_UNENFORCED["not"].example, None),
        Behaviour("if", XGRAMMAR_UNENFORCED["if"].example, None),
        Behaviour("dependentRequired", XGRAMMAR_UNENFORCED["dependentRequired"].example, None),
        Behaviour("dependentSchemas", XGRAMMAR_UNENFORCED["dependentSchemas"].example, None),
        Behaviour("uniqueItems", XGRAMMAR_UNENFORCED["uniqueItems"].example, None),
        Behaviour("contains", XGRAMMAR_UNENFORCED["contains"].example, None),
        Behaviour("propertyNames", {"type": "object", "propertyNames": {"pattern": "^a"}}, None),
        Behaviour(
            "unevaluatedProperties",
            {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
            None,
        ),
        Behaviour("oneOf", XGRAMMAR_UNENFORCED["oneOf exclusivity"].example, None),
        Behaviour(
            "minProperties with optional properties",
            {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1},
            None,
        ),
        Behaviour("pattern lookaround", XGRAMMAR_UNENFORCED["pattern lookaround"].example, None),
        Behaviour("format regex", {"type": "string", "format": "regex"}, None),
        Behaviour("format uri-reference", {"type": "string", "format": "uri-reference"}, None),
        Behaviour("format json-pointer", {"type": "string", "format": "json-pointer"}, None),
        Behaviour("dependencies", XGRAMMAR_UNENFORCED["dependencies"].example, None),
        Behaviour("pattern anchor in the middle", {"type": "string", "pattern": "^(ab)$c?"}, None),
        Behaviour(
            "patternProperties lookaround", XGRAMMAR_UNENFORCED["patternProperties lookaround"].example, None
        ),
    )
}
LLGUIDANCE_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uuid",
})  # fmt: skip
SIMPLE_KEYWORDS = ("not", "if", "dependentRequired", "dependentSchemas", "uniqueItems", "contains",
                   "dependencies")  # fmt: skip


def _simple_keywords(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """The keywords both engines mishandle wherever they appear (`uniqueItems: false` asks nothing)."""
    return [
        (keyword, keyword)
        for keyword in SIMPLE_KEYWORDS
        if keyword in schema and not (keyword == "uniqueItems" and schema[keyword] is False)
    ]


def _holding(
    found: list[tuple[str, str]], table: dict[str, Behaviour], version: str
) -> list[tuple[str, str]]:
    """The found keywords whose table entry holds on `version` (one the table lacks, such as a
    custom format, holds everywhere)."""
    return [(word, key) for word, key in found if word not in table or table[word].holds_on(version)]


def xgrammar_gaps(
    schema: dict[str, Any], lookaround: bool, version: str = XGRAMMAR_VERIFIED, root: Any = None
) -> list[tuple[str, str]]:
    """(keyword, the key it sits under) for what xgrammar `version` (a known one) compiles but does
    not enforce here. `root`, the whole document, resolves the `$ref`s of oneOf branches and tells
    the draft (a draft-07 document's `$ref` siblings mean nothing to any validator either)."""
    return _holding(_xgrammar_gaps(schema, lookaround, root), XGRAMMAR_UNENFORCED, version)


def _xgrammar_gaps(schema: dict[str, Any], lookaround: bool, root: Any = None) -> list[tuple[str, str]]:
    out = _simple_keywords(schema)
    if _one_item_at_most(schema):  # strict mode: no `items`, no items; a duplicate needs two
        out = [found for found in out if found[0] != "uniqueItems"]
    several = isinstance(schema.get("allOf"), list) and len(schema["allOf"]) > 1
    reading = compiled.form(schema)
    dropped = reading in ("anyOf", "oneOf", "allOf") and not (reading == "allOf" and several)
    if dropped and _siblings_observable(schema, reading, root):
        out.append((f"properties beside {reading}", reading))
    branches = schema.get("oneOf")
    if isinstance(branches, list) and not exclusive(branches, root):
        out.append(("oneOf exclusivity", "oneOf"))
    if several:
        out.append(("allOf with several branches", "allOf"))
    if lookaround:
        out.append(("pattern lookaround", "pattern"))
    format_name = schema.get("format")
    if isinstance(format_name, str) and format_name not in XGRAMMAR_FORMATS:
        out.append((f"format {format_name}", "format"))
    facts = _pattern_facts(schema)
    if facts is not None and facts.mid_anchor:
        out.append(("pattern anchor in the middle", "pattern"))
    out.extend(_numbers_and_lengths(schema))
    out.extend(_untyped(schema))
    ref = schema.get("$ref")
    if isinstance(ref, str) and not REF_DROPS.isdisjoint(schema) and draft(root) not in OLD_DRAFTS:
        out.append(("assertions beside $ref", "$ref"))
    if isinstance(ref, str) and ref.startswith("#") and ref[1:2] not in ("", "/"):
        out.append(("$ref to an anchor", "$ref"))
    if format_name in ("date", "date-time"):  # the shape holds, not the calendar: 2023-02-30 passes
        out.append((f"format {format_name} day of month", "format"))
    if _outside_type(schema):
        out.append(("enum outside type", "type"))
    if any(facts.lookaround for facts in _name_facts(schema)):
        out.append(("patternProperties lookaround", "patternProperties"))
    required, properties = schema.get("required"), schema.get("properties")
    names = set(properties) if isinstance(properties, dict) else set()
    if (
        isinstance(required, list)
        and any(isinstance(name, str) and name not in names for name in required)
        and "object" in compiled.types(root, schema)  # `required` asks nothing of an array
    ):
        out.append(("required name not in properties", "required"))
    return out


def _siblings_observable(schema: dict[str, Any], union: str, root: Any) -> bool:
    """Whether the `properties` xgrammar drops beside a union could be broken by what the union's
    branches emit: a property that asks something, under a name a branch's object can have, where
    that branch does not already pin the value to a few the property accepts (compiled.finite)."""
    properties = schema.get("properties")
    branches = schema.get(union)
    if not isinstance(properties, dict) or not isinstance(branches, list):
        return False
    document = root if root is not None else schema
    for branch in branches:
        names = compiled.keys(document, branch)
        target = _deref(branch, document)
        own = target.get("properties") if isinstance(target, dict) else None
        for name, sub in properties.items():
            if not compiled.constrains(sub) or (names is not None and name not in names):
                continue
            pinned = own.get(name) if isinstance(own, dict) else None
            values = compiled.finite(document, pinned) if pinned is not None else None
            if values is None or any(compiled.refuses(document, sub, value) for value in values):
                return True
    return False


def exclusive(branches: list[Any], root: Any) -> bool:
    """Whether at most one branch can match what the compiled anyOf emits: xgrammar's own proof,
    or every pair of branches apart (compiled.disjoint)."""
    if provably_disjoint([_deref(b, root) for b in branches]):
        return True
    document = root if root is not None else {}
    return all(compiled.disjoint(document, a, b) for i, a in enumerate(branches) for b in branches[i + 1 :])


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The declared types (None: no `type`, or one that is not a string or list)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    return {k for k in kind if isinstance(k, str)} if isinstance(kind, list) else None


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers_and_lengths(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """multipleOf other than an integer step on integers; a length beside a pattern or a known
    format (typed schemas: an untyped one is `_untyped`'s)."""
    out = []
    types, step = _types(schema), schema.get("multipleOf")
    if _number(step) and (types is None or "number" in types or ("integer" in types and step != int(step))):
        out.append(("number multipleOf", "multipleOf"))
    elif _number(step) and step > MAX_STEP:
        out.append((f"integer multipleOf over {MAX_STEP}", "multipleOf"))
    elif _number(step) and sum(any(_number(schema.get(b)) for b in side) for side in BOUNDS) == 1:
        out.append(("multipleOf beside a one-sided range", "multipleOf"))
    if types is None or "$ref" in schema:
        return out
    beside = [name for name in ("pattern", "format") if isinstance(schema.get(name), str)]
    if beside == ["format"] and schema["format"] not in XGRAMMAR_FORMATS:
        beside = []  # an unknown format is dropped itself, and the length then holds
    width = _pattern_width(schema.get("pattern")) if beside == ["pattern"] or "pattern" in beside else None
    for key in ("minLength", "maxLength"):
        if _number(schema.get(key)) and beside and not _implied(key, schema[key], width):
            out.append((f"{key} beside {beside[0]}", key))
    return out


def _pattern_width(pattern: Any) -> tuple[int, int] | None:
    """The shortest and longest match of a pattern (Python's parser; None: unreadable)."""
    if not isinstance(pattern, str):
        return None
    try:
        from re import _parser  # type: ignore[attr-defined]

        low, high = _parser.parse(pattern).getwidth()
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    return int(low), int(high)


def _implied(key: str, bound: float, width: tuple[int, int] | None) -> bool:
    """A length the pattern already forces: every match is at least `low` long, and xgrammar
    matches the whole string against the pattern, so none is longer than `high`."""
    if width is None:
        return key == "minLength" and bound <= 0
    low, high = width
    return bound <= low if key == "minLength" else bound >= high


def _untyped(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """The type-specific assertions on a schema without `type` (beside `$ref` they are that rule's)."""
    if "type" in schema or "$ref" in schema:
        return []
    return [
        (f"{key} without type", key)
        for key in UNTYPED_DROPS
        if key in schema
        and not isinstance(schema[key], bool)
        and not any(sibling in schema for sibling in UNTYPED_UNLESS.get(key, ()))
    ]


def _json_types(value: Any) -> set[str]:
    """The JSON Schema types a value has (an integral number is both integer and number)."""
    if isinstance(value, bool):
        return {"boolean"}
    if _number(value):
        return {"integer", "number"} if value == int(value) else {"number"}
    names: dict[type, str] = {str: "string", list: "array", dict: "object", type(None): "null"}
    return {name for kind, name in names.items() if isinstance(value, kind)}


def _outside_type(schema: dict[str, Any]) -> bool:
    """An enum member or const that `type` forbids: xgrammar emits it anyway."""
    types = _types(schema)
    values = schema["enum"] if isinstance(schema.get("enum"), list) else []
    values = [*values, schema["const"]] if "const" in schema else values
    return types is not None and any(not _json_types(value) & types for value in values)


def _name_facts(schema: dict[str, Any]) -> list[regex.PatternFacts]:
    names = schema.get("patternProperties")
    if not isinstance(names, dict):
        return []
    return [facts for facts in map(regex.analyse, names) if facts is not None]


def _pattern_facts(schema: dict[str, Any]) -> regex.PatternFacts | None:
    pattern = schema.get("pattern")
    return regex.analyse(pattern) if isinstance(pattern, str) else None


def xgrammar_refusals(schema: dict[str, Any], version: str = XGRAMMAR_VERIFIED) -> list[tuple[str, str]]:
    """(keyword, the key it sits under) for what fails xgrammar `version`'s compile of a JSON Schema."""
    return _holding(_xgrammar_refusals(schema), XGRAMMAR_REFUSED, version)


def _xgrammar_refusals(schema: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    types = _types(schema) or set()
    minimum = schema.get("minItems")
    if "array" in types and _number(minimum) and minimum > _listed_items(schema):
        out.append(("minItems beyond the listed items", "minItems"))
    minimum, properties = schema.get("minProperties"), schema.get("properties")
    listed = len(properties) if isinstance(properties, dict) else 0
    closed = schema.get("additionalProperties", False) is False and "patternProperties" not in schema
    if "object" in types and _number(minimum) and minimum > listed and closed:
        out.append(("minProperties beyond the listed properties", "minProperties"))
    ref = schema.get("$ref")
    if isinstance(ref, str) and re.search(r"%[0-9A-Fa-f]{2}|~[01]", ref):
        out.append(("escaped $ref pointer", "$ref"))
    facts = _pattern_facts(schema)
    if facts is not None and facts.largest_count > REPEAT_LIMIT:
        out.append((f"pattern repeat over {REPEAT_LIMIT}", "pattern"))
    if any(facts.largest_count > REPEAT_LIMIT for facts in _name_facts(schema)):
        out.append((f"patternProperties repeat over {REPEAT_LIMIT}", "patternProperties"))
    return out


def _one_item_at_most(schema: dict[str, Any]) -> bool:
    """An array xgrammar compiles (typed or implied; an untyped schema is any value, arrays of any
    length included) that holds at most one item."""
    if compiled.form(schema) not in ("type", "array") or compiled.bare(schema):
        return False
    high = schema.get("maxItems")
    return _listed_items(schema) <= 1 or (_number(high) and high <= 1)


def _listed_items(schema: dict[str, Any]) -> float:
    """How many items an array may hold in strict mode: unbounded with an `items` schema (or
    `additionalItems` after a draft-4 tuple), else the listed ones."""
    items, prefix = schema.get("items"), schema.get("prefixItems")
    if isinstance(items, list):  # draft 4 to 7 tuple
        extra = schema.get("additionalItems", False)
        return len(items) if extra is False else float("inf")
    if items is not None and items is not False:
        return float("inf")
    return len(prefix) if isinstance(prefix, list) else 0


def llguidance_refusals(
    schema: dict[str, Any], lookaround: bool, version: str = LLGUIDANCE_VERIFIED
) -> list[tuple[str, str]]:
    """(keyword, the key it sits under) for what makes llguidance `version` refuse to compile."""
    return _holding(_llguidance_refusals(schema, lookaround), LLGUIDANCE_REFUSED, version)


def _llguidance_refusals(schema: dict[str, Any], lookaround: bool) -> list[tuple[str, str]]:
    out = _simple_keywords(schema)
    for key in ("propertyNames", "unevaluatedProperties", "unevaluatedItems"):
        if key in schema:
            out.append((key, key))
    if "oneOf" in schema:
        out.append(("oneOf", "oneOf"))
    for key in ("minProperties", "maxProperties"):
        properties = schema.get("properties")
        required = schema.get("required", [])
        if (
            key in schema
            and isinstance(properties, dict)
            and not set(properties) <= set(required if isinstance(required, list) else [])
        ):
            out.append((f"{key} with optional properties", key))
    if lookaround:
        out.append(("pattern lookaround", "pattern"))
    facts = _pattern_facts(schema)
    if facts is not None and facts.mid_anchor:
        out.append(("pattern anchor in the middle", "pattern"))
    if any(facts.lookaround for facts in _name_facts(schema)):
        out.append(("patternProperties lookaround", "patternProperties"))
    format_name = schema.get("format")
    if isinstance(format_name, str) and format_name not in LLGUIDANCE_FORMATS:
        out.append((f"format {format_name}", "format"))
    return out


def _single_type(branch: Any) -> str | None:
    kind = branch.get("type") if isinstance(branch, dict) else None
    if isinstance(kind, list) and len(kind) == 1:
        kind = kind[0]
    return kind if isinstance(kind, str) else None


def _has_const(branch: Any) -> bool:
    return isinstance(branch, dict) and "const" in branch


def _tag(branch: Any, name: str) -> str | None:
    """The branch's constant value of property `name`, when it is required and fixed."""
    if not isinstance(branch, dict) or name not in (branch.get("required") or []):
        return None
    discriminator = (branch.get("properties") or {}).get(name)
    if isinstance(discriminator, dict):
        if "const" in discriminator:
            return repr(discriminator["const"])
        if isinstance(discriminator.get("enum"), list) and len(discriminator["enum"]) == 1:
            return repr(discriminator["enum"][0])
    return None


OLD_DRAFTS = frozenset({"4", "6", "7"})  # `$ref` siblings are ignored by the spec itself
SPEC_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4",
    "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
    "relative-json-pointer", "regex",
})  # fmt: skip
DRAFT4_KEYS = frozenset({"id"})  # a string `id` without `$id`: the draft-04 spelling
DRAFT7_KEYS = frozenset({"dependencies", "definitions", "additionalItems"})
NEWER_KEYS = frozenset({"$id", "$defs", "$anchor", "dependentRequired", "dependentSchemas", "prefixItems",
                        "unevaluatedProperties", "unevaluatedItems"})  # fmt: skip


def draft(root: Any) -> str:
    """The document's draft: "4", "6", "7", "2019-09" or "2020-12" from `$schema`; undeclared, the
    one its keywords are spelled in (most schemas in the wild that use draft-07's `dependencies`
    never declare it); "2020-12" when nothing tells."""
    if _last_draft[0] is root:  # one document is linted node by node: read it once
        return str(_last_draft[1])
    found = _draft(root)
    _last_draft[:] = [root, found]
    return found


_last_draft: list[Any] = [None, "2020-12"]


def _draft(root: Any) -> str:
    declared = root.get("$schema") if isinstance(root, dict) else None
    if isinstance(declared, str):
        for name, tag in (("draft-04", "4"), ("draft-06", "6"), ("draft-07", "7"), ("2019-09", "2019-09")):
            if name in declared:
                return tag
        return "2020-12"
    seen: set[str] = set()
    stack, budget = [root], 100_000
    while stack and budget:
        budget -= 1
        node = stack.pop()
        if isinstance(node, dict):
            seen.update(key for key, value in node.items() if key != "id" or isinstance(value, str))
            stack.extend(v for k, v in node.items() if k not in ("enum", "const", "default", "examples"))
        elif isinstance(node, list):
            stack.extend(node)
    if seen & NEWER_KEYS:
        return "2020-12"
    if seen & DRAFT4_KEYS:
        return "4"
    return "7" if seen & DRAFT7_KEYS else "2020-12"


def _deref(branch: Any, root: Any, hops: int = 4) -> Any:
    """A branch with its local `$ref` replaced by the target (siblings kept), a few hops deep."""
    while hops and isinstance(branch, dict) and isinstance(branch.get("$ref"), str) and root is not None:
        found = resolve(root, branch["$ref"])
        if found is None or not isinstance(found[1], dict):
            return branch
        branch = {**found[1], **{k: v for k, v in branch.items() if k != "$ref"}}
        hops -= 1
    return branch


def provably_disjoint(branches: list[Any]) -> bool:
    """Whether at most one oneOf branch can match any instance, as xgrammar itself decides before
    it falls back to anyOf semantics: distinct types (integer inside number), distinct constants, or
    a required discriminator property with a distinct constant in every branch."""
    if len(branches) < 2:
        return True
    types = [_single_type(branch) for branch in branches]
    if all(types):
        widened = ["number" if kind == "integer" else kind for kind in types]
        if len(set(widened)) == len(widened):
            return True
    constants = [repr(branch["const"]) if _has_const(branch) else None for branch in branches]
    if all(constant is not None for constant in constants) and len(set(constants)) == len(constants):
        return True
    first = branches[0]
    if isinstance(first, dict) and isinstance(first.get("properties"), dict):
        for name in first["properties"]:
            tags = [_tag(branch, name) for branch in branches]
            if all(tag is not None for tag in tags) and len(set(tags)) == len(tags):
                return True
    return False
