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
from typing import Any

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


@dataclass(frozen=True)
class Overreach:
    """Where an engine enforces more than the schema asks: `must_accept` is valid for `example` (a
    JSON Schema validator accepts it) and the compiled grammar refuses it, so no decoding can emit it."""

    keyword: str
    example: dict[str, Any]
    must_accept: Any
    versions: frozenset[str] | None = None

    def holds_on(self, version: str) -> bool:
        return self.versions is None or version in self.versions


# xgrammar refuses these valid values (measured on 0.2.7, 0.2.8 and 0.2.9: 40 of 40 random cases
# each, none of their controls; llguidance 1.7.6 and 1.9.1 accept all: docs/measurements/
# over-enforcement.md; tests/integration/test_schema_backends.py re-checks each entry). Its fixed
# property order (the schema's) is the same kind of loss, by design in both engines, and is stated
# once in the docs rather than found in every object.
XGRAMMAR_OVERREACH: dict[str, Overreach] = {
    overreach.keyword: overreach
    for overreach in (
        # a string with a length bound (minLength 1 or more, or maxLength) takes no escape sequence at
        # all: no quote, backslash or control character, at any length within the bound
        Overreach("escapes under maxLength", {"type": "string", "maxLength": 10}, "a\nb"),
        Overreach("escapes under minLength", {"type": "string", "minLength": 2}, 'a"b'),
        # a JSON Schema pattern is a search; xgrammar matches it whole
        Overreach("pattern matched whole", {"type": "string", "pattern": "[0-9]+"}, "v12"),
        Overreach(
            "patternProperties matched whole",
            {
                "type": "object",
                "patternProperties": {"id": {"type": "integer"}},
                "additionalProperties": False,
            },
            {"user_id": 1},
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
