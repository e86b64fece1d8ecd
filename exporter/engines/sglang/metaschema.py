"""SGLang's tool-parameter checks: `normalize_json_schema_types` (function_call/utils.py), which rewrites
type aliases in place, and the Draft 2020-12 metaschema check (jsonschema's `check_schema`), written
here without jsonschema so the core stays standard library only."""

from __future__ import annotations

import re
from typing import Any

from exporter.engines.sglang.errors import SglangRejected, SglangTooComplex

# --- normalize_json_schema_types (function_call/utils.py) ------------------------------------------

_STANDARD_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_TYPE_ALIASES = {
    "str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
    "uuid": "string", "date": "string", "datetime": "string", "time": "string", "timestamp": "string",
    "binary": "string", "blob": "string", "bytea": "string", "bytes": "string", "varbinary": "string",
    "bool": "boolean", "bigint": "integer", "smallint": "integer", "tinyint": "integer",
    "double": "number", "decimal": "number", "real": "number", "numeric": "number", "arr": "array",
    "tuple": "array", "set": "array", "map": "object",
}  # fmt: skip
_PREFIX_BOUNDARY = frozenset("0123456789[<( \t")
_PREFIX_RULES = (
    (("int", "uint", "long", "short", "unsigned"), "integer"),
    (("num", "float"), "number"),
    (("list",), "array"),
    (("dict",), "object"),
)


def _normalize_type(raw: Any) -> Any:
    if not isinstance(raw, str) or raw in _STANDARD_TYPES:
        return raw
    base = raw.split("(", 1)[0].strip().lower()
    if base in _STANDARD_TYPES:
        return base
    if base in _TYPE_ALIASES:
        return _TYPE_ALIASES[base]
    for prefixes, target in _PREFIX_RULES:
        for p in prefixes:
            if base == p or (len(base) > len(p) and base.startswith(p) and base[len(p)] in _PREFIX_BOUNDARY):
                return target
    return raw


def normalize_json_schema_types(schema: Any) -> None:
    """SGLang's rewrite of DB/ORM type names to JSON Schema types, in place, where it walks."""
    if isinstance(schema, list):
        for item in schema:
            normalize_json_schema_types(item)
        return
    if not isinstance(schema, dict):
        return
    if "type" in schema:
        kind = schema["type"]
        if isinstance(kind, str):
            schema["type"] = _normalize_type(kind)
        elif isinstance(kind, list):
            items: list[Any] = []
            for item in kind:
                normalized = _normalize_type(item)
                if normalized not in items:
                    items.append(normalized)
            schema["type"] = items
    for key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
        nested = schema.get(key)
        if isinstance(nested, dict):
            for child in nested.values():
                normalize_json_schema_types(child)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        nested = schema.get(key)
        if isinstance(nested, list):
            for child in nested:
                normalize_json_schema_types(child)
    for key in (
        "items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
        "unevaluatedItems", "unevaluatedProperties",
    ):  # fmt: skip
        if key in schema:
            normalize_json_schema_types(schema[key])


# --- Draft 2020-12 metaschema (jsonschema's check_schema) -----------------------------------------


class _Invalid(Exception):
    pass


_SIMPLE_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_ANCHOR = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")
_ID = re.compile(r"^[^#]*#?$")
# keyword -> what its value must be, in the metaschema's order (core, applicator, unevaluated,
# validation, meta-data, format-annotation, content, then the deprecated keywords of the root)
_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("$id", "id"), ("$schema", "string"), ("$ref", "string"), ("$anchor", "anchor"),
    ("$dynamicRef", "string"), ("$dynamicAnchor", "anchor"), ("$vocabulary", "vocabulary"),
    ("$comment", "string"), ("$defs", "schema_map"),
    ("prefixItems", "schema_array"), ("items", "schema"), ("contains", "schema"),
    ("additionalProperties", "schema"), ("properties", "schema_map"),
    ("patternProperties", "pattern_map"), ("dependentSchemas", "schema_map"),
    ("propertyNames", "schema"), ("if", "schema"), ("then", "schema"), ("else", "schema"),
    ("allOf", "schema_array"), ("anyOf", "schema_array"), ("oneOf", "schema_array"), ("not", "schema"),
    ("unevaluatedItems", "schema"), ("unevaluatedProperties", "schema"),
    ("type", "type"), ("enum", "array"), ("multipleOf", "positive"), ("maximum", "number"),
    ("exclusiveMaximum", "number"), ("minimum", "number"), ("exclusiveMinimum", "number"),
    ("maxLength", "count"), ("minLength", "count"), ("pattern", "regex"), ("maxItems", "count"),
    ("minItems", "count"), ("uniqueItems", "boolean"), ("maxContains", "count"),
    ("minContains", "count"), ("maxProperties", "count"), ("minProperties", "count"),
    ("required", "string_array"), ("dependentRequired", "string_array_map"),
    ("title", "string"), ("description", "string"), ("deprecated", "boolean"),
    ("readOnly", "boolean"), ("writeOnly", "boolean"), ("examples", "array"),
    ("format", "string"), ("contentEncoding", "string"), ("contentMediaType", "string"),
    ("contentSchema", "schema"),
    ("definitions", "schema_map"), ("dependencies", "dependencies"), ("$recursiveAnchor", "anchor"),
    ("$recursiveRef", "string"),
)  # fmt: skip


def metaschema_error(schema: Any) -> str:
    """What Draft202012Validator.check_schema rejects in `schema` ('' when valid). An OverflowError
    of `re` (a repeat count past its limit) is raised: SGLang answers it with a 500."""
    try:
        _check(schema)
    except _Invalid as err:
        return str(err)
    except OverflowError as err:
        raise SglangRejected("internal_error", f"OverflowError: {err}") from err
    except RecursionError as err:
        raise SglangTooComplex("a pattern nests too deep") from err
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _check(schema: Any) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise _Invalid(f"{short(schema)} is not of type 'object', 'boolean'")
    for keyword, rule in _KEYWORDS:
        if keyword in schema:
            _check_value(keyword, rule, schema[keyword])


def _check_value(keyword: str, rule: str, value: Any) -> None:
    bad = _Invalid(f"{short(value)} is not valid under {keyword!r}")
    if rule == "schema":
        _check(value)
    elif rule in ("string", "id", "anchor", "regex"):
        if not isinstance(value, str):
            raise bad
        if rule == "id" and not _ID.search(value):
            raise bad
        if rule == "anchor" and not _ANCHOR.search(value):
            raise bad
        if rule == "regex":
            _compile(value, bad)
    elif rule == "schema_map":
        if not isinstance(value, dict):
            raise bad
        for child in value.values():
            _check(child)
    elif rule == "pattern_map":
        if not isinstance(value, dict):
            raise bad
        for child in value.values():
            _check(child)
        for key in value:
            _compile(key, bad)
    elif rule == "schema_array":
        if not isinstance(value, list) or not value:
            raise bad
        for child in value:
            _check(child)
    elif rule == "vocabulary":
        if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
            raise bad
    elif rule == "type":
        if not _simple_types(value):
            raise bad
    elif rule == "array":
        if not isinstance(value, list):
            raise bad
    elif rule == "number":
        if not _is_number(value):
            raise bad
    elif rule == "positive":
        if not _is_number(value) or value <= 0:
            raise bad
    elif rule == "count":
        if not _is_integer(value) or value < 0:
            raise bad
    elif rule == "boolean":
        if not isinstance(value, bool):
            raise bad
    elif rule == "string_array":
        if not _string_array(value):
            raise bad
    elif rule == "string_array_map":
        if not isinstance(value, dict) or not all(_string_array(v) for v in value.values()):
            raise bad
    elif rule == "dependencies":
        if not isinstance(value, dict):
            raise bad
        for child in value.values():
            if not _string_array(child):  # anyOf [a schema, a stringArray]
                _check(child)


def _simple_types(value: Any) -> bool:
    """A simple type, or a non-empty array of distinct ones."""
    if isinstance(value, str):
        return value in _SIMPLE_TYPES
    if not isinstance(value, list) or not value or not _unique(value):
        return False
    return all(isinstance(v, str) and v in _SIMPLE_TYPES for v in value)


def _string_array(value: Any) -> bool:
    return (
        isinstance(value, list) and all(isinstance(v, str) for v in value) and len(set(value)) == len(value)
    )


def _unique(values: list[Any]) -> bool:
    seen: list[Any] = []
    for value in values:
        if any(_same(value, other) for other in seen):
            return False
        seen.append(value)
    return True


def _same(a: Any, b: Any) -> bool:
    """jsonschema's `equal`: booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _compile(pattern: str, bad: _Invalid) -> None:
    """The `regex` format: Python's `re.compile`; its `re.error` makes the schema invalid."""
    try:
        re.compile(pattern)
    except re.error as err:
        raise bad from err


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
