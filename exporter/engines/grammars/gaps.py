"""A schema read against the engines' tables (exporter/engines/grammars/backends.py): the keywords xgrammar
compiles and does not enforce here, what xgrammar or llguidance refuses, and whether a oneOf's
branches exclude each other (xgrammar's own test and the table's). Pure functions over one node, the
document at hand for its `$ref`s and its draft.
"""

from __future__ import annotations

import re
from typing import Any

from exporter.engines.grammars import compiled
from exporter.engines.grammars.backends import (
    BOUNDS,
    LLGUIDANCE_FORMATS,
    LLGUIDANCE_REFUSED,
    LLGUIDANCE_VERIFIED,
    MAX_STEP,
    OLD_DRAFTS,
    REF_DROPS,
    REPEAT_LIMIT,
    SIMPLE_KEYWORDS,
    UNTYPED_DROPS,
    UNTYPED_UNLESS,
    XGRAMMAR_FORMATS,
    XGRAMMAR_OVERREACH,
    XGRAMMAR_REFUSED,
    XGRAMMAR_UNENFORCED,
    XGRAMMAR_VERIFIED,
    Behaviour,
    draft,
)
from exporter.schema import regex
from exporter.schema.values import declared_types, is_integral, is_number, value_types
from exporter.schema.walk import inline_ref


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
        target = inline_ref(branch, document)
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
    if provably_disjoint([inline_ref(b, root) for b in branches]):
        return True
    document = root if root is not None else {}
    return all(compiled.disjoint(document, a, b) for i, a in enumerate(branches) for b in branches[i + 1 :])


def _numbers_and_lengths(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """multipleOf other than an integer step on integers; a length beside a pattern or a known
    format (typed schemas: an untyped one is `_untyped`'s)."""
    out = []
    types, step = declared_types(schema), schema.get("multipleOf")
    fractional = is_number(step) and not is_integral(step)
    if is_number(step) and (types is None or "number" in types or ("integer" in types and fractional)):
        out.append(("number multipleOf", "multipleOf"))
    elif is_number(step) and step > MAX_STEP:
        out.append((f"integer multipleOf over {MAX_STEP}", "multipleOf"))
    elif is_number(step) and sum(any(is_number(schema.get(b)) for b in side) for side in BOUNDS) == 1:
        out.append(("multipleOf beside a one-sided range", "multipleOf"))
    if types is None or "$ref" in schema:
        return out
    beside = [name for name in ("pattern", "format") if isinstance(schema.get(name), str)]
    if beside == ["format"] and schema["format"] not in XGRAMMAR_FORMATS:
        beside = []  # an unknown format is dropped itself, and the length then holds
    width = _pattern_width(schema.get("pattern")) if beside == ["pattern"] or "pattern" in beside else None
    for key in ("minLength", "maxLength"):
        if is_number(schema.get(key)) and beside and not _implied(key, schema[key], width):
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


def _outside_type(schema: dict[str, Any]) -> bool:
    """An enum member or const that `type` forbids: xgrammar emits it anyway."""
    types = declared_types(schema)
    values = schema["enum"] if isinstance(schema.get("enum"), list) else []
    values = [*values, schema["const"]] if "const" in schema else values
    return types is not None and any(not value_types(value) & types for value in values)


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
    types = declared_types(schema) or set()
    minimum = schema.get("minItems")
    if "array" in types and is_number(minimum) and minimum > _listed_items(schema):
        out.append(("minItems beyond the listed items", "minItems"))
    minimum, properties = schema.get("minProperties"), schema.get("properties")
    listed = len(properties) if isinstance(properties, dict) else 0
    closed = schema.get("additionalProperties", False) is False and "patternProperties" not in schema
    if "object" in types and is_number(minimum) and minimum > listed and closed:
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
    return _listed_items(schema) <= 1 or (is_number(high) and high <= 1)


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
            and not set(properties)
            <= {r for r in (required if isinstance(required, list) else []) if isinstance(r, str)}
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


def xgrammar_overreach(schema: dict[str, Any], version: str = XGRAMMAR_VERIFIED) -> list[tuple[str, str]]:
    """(keyword, the key it sits under) for where xgrammar `version` refuses values the schema allows
    (XGRAMMAR_OVERREACH). Only where xgrammar enforces the keyword at all: beside a `$ref`, a `format`,
    an `enum` or `const`, or a pattern with a lookaround it drops it instead (xgrammar_gaps)."""
    found = []
    fixed = any(key in schema for key in ("$ref", "enum", "const"))
    types = declared_types(schema) or set()
    if types == {"string"} and not fixed and "format" not in schema:
        if "pattern" not in schema:  # beside a pattern xgrammar drops the lengths (xgrammar_gaps)
            found.extend(_length_bounds(schema))
        if _searched(schema.get("pattern")):
            found.append(("pattern matched whole", "pattern"))
    names = schema.get("patternProperties")
    closed = "object" in types and schema.get("additionalProperties") is False
    if closed and isinstance(names, dict) and any(_searched(name) for name in names):
        found.append(("patternProperties matched whole", "patternProperties"))
    return [(word, key) for word, key in found if XGRAMMAR_OVERREACH[word].holds_on(version)]


def _length_bounds(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """A string length bound xgrammar enforces (maxLength, or minLength of 1 or more) under which a
    value holding an escaped character still fits: there xgrammar takes no escape sequence at all."""
    most, least = schema.get("maxLength"), schema.get("minLength")
    low = least if is_number(least) else 0
    if is_number(most) and (most < max(low, 1) or not is_integral(most)):
        return []  # no string holding a character fits (or a bound xgrammar may read otherwise)
    out = []
    if is_number(most):
        out.append(("escapes under maxLength", "maxLength"))
    if is_number(least) and least >= 1:
        out.append(("escapes under minLength", "minLength"))
    return out


def _searched(pattern: Any) -> bool:
    """A pattern whose matches text may stand beside (JSON Schema searches) and that xgrammar enforces
    (no lookaround, no anchor mid-pattern: those it drops)."""
    if not isinstance(pattern, str):
        return False
    facts, ends = regex.analyse(pattern), regex.open_ends(pattern)
    return (
        facts is not None and ends is not None and not facts.lookaround and not facts.mid_anchor and any(ends)
    )
