"""What /schemas shows of a JSON Schema: its structure, by an allow-list of JSON Schema keywords.

A deny-list of literal keywords let through whatever it did not name (`$comment`, `x-*` notes,
`examples` under another spelling, a `pattern`'s literal alternatives). Here only keywords of the
JSON Schema vocabularies (drafts 4 to 2020-12, and OpenAPI's `nullable`) are kept, each with what it
holds in structure: subschemas are redacted in turn; numbers and booleans (bounds, `uniqueItems`)
kept; `type` and `format` kept only when they are one of the standard names; a local `$ref` kept.
Every other string is "*": `enum`, `const`, `default`, `examples`, `title`, `description`,
`$comment`, `pattern`, `$id`, `contentMediaType` values and a remote `$ref`. A keyword outside the
vocabularies is not shown, its name neither: `"*": N` counts those of one schema object. Property
names (`properties`, `$defs`, `dependentRequired`, `required`) are structure and are kept, since a
finding's pointer names them; `patternProperties` keys are patterns, so literals, and are shown as
`*1`, `*2`, ... in order.
"""

from __future__ import annotations

from typing import Any

HIDDEN = "*"
# Keywords whose value is one subschema.
SCHEMA = frozenset({
    "additionalItems", "additionalProperties", "contains", "contentSchema", "else", "if", "not",
    "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties",
})  # fmt: skip
# Keywords whose value is an array of subschemas (`items` too, in its draft-4-to-7 array form).
SCHEMAS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
# Keywords whose value maps names (structure) to subschemas.
NAMED_SCHEMAS = frozenset({"$defs", "definitions", "dependentSchemas", "properties"})
# Keywords whose value is a number (or, for draft 4's exclusive bounds and the flags, a boolean).
NUMBERS = frozenset({
    "exclusiveMaximum", "exclusiveMinimum", "maxContains", "maxItems", "maxLength", "maxProperties",
    "maximum", "minContains", "minItems", "minLength", "minProperties", "minimum", "multipleOf",
    "uniqueItems", "nullable", "readOnly", "writeOnly", "deprecated",
})  # fmt: skip
# Keywords whose value is a literal: the keyword is shown, its value is not.
LITERALS = frozenset({
    "$anchor", "$comment", "$dynamicAnchor", "$dynamicRef", "$id", "$schema", "$vocabulary", "const",
    "contentEncoding", "contentMediaType", "default", "description", "enum", "examples", "pattern",
    "title",
})  # fmt: skip
TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
FORMATS = frozenset({
    "date", "date-time", "duration", "email", "hostname", "idn-email", "idn-hostname", "ipv4", "ipv6",
    "iri", "iri-reference", "json-pointer", "regex", "relative-json-pointer", "time", "uri",
    "uri-reference", "uri-template", "uuid",
    "binary", "byte", "double", "float", "int32", "int64", "password",  # OpenAPI's
})  # fmt: skip


def redact_schema(node: Any) -> Any:
    """A schema (an object, or a boolean schema) redacted; anything else where a schema belongs is
    "*" (an array: each item as a schema, as `items` in its array form). Raises RecursionError on a
    schema nested deeper than the interpreter allows (the caller shows it as unparsable)."""
    if isinstance(node, bool):
        return node
    if isinstance(node, list):
        return [redact_schema(item) for item in node]
    if not isinstance(node, dict):
        return HIDDEN
    out: dict[str, Any] = {}
    other = 0
    for key, value in node.items():
        if key in SCHEMA or key in SCHEMAS or key == "items":
            out[key] = redact_schema(value)
        elif key in NAMED_SCHEMAS:
            out[key] = (
                {str(name): redact_schema(v) for name, v in value.items()}
                if isinstance(value, dict)
                else HIDDEN
            )
        elif key == "patternProperties":
            patterns = value.items() if isinstance(value, dict) else ()
            out[key] = {f"{HIDDEN}{i}": redact_schema(v) for i, (_, v) in enumerate(patterns, 1)} or HIDDEN
        elif key in NUMBERS:
            out[key] = value if isinstance(value, (int, float)) else HIDDEN
        elif key == "type":
            out[key] = [_known(t, TYPES) for t in value] if isinstance(value, list) else _known(value, TYPES)
        elif key == "format":
            out[key] = _known(value, FORMATS)
        elif key == "$ref":
            out[key] = (
                value if isinstance(value, str) and (value == "#" or value.startswith("#/")) else HIDDEN
            )
        elif key == "required":
            out[key] = _names(value)
        elif key == "dependentRequired":
            out[key] = {str(n): _names(v) for n, v in value.items()} if isinstance(value, dict) else HIDDEN
        elif key == "dependencies":  # draft 7: a name's required names, or a schema
            out[key] = (
                {str(n): _names(v) if isinstance(v, list) else redact_schema(v) for n, v in value.items()}
                if isinstance(value, dict)
                else HIDDEN
            )
        elif key in LITERALS:
            out[key] = HIDDEN
        else:
            other += 1
    if other:
        out[HIDDEN] = other
    return out


def _known(value: Any, names: frozenset[str]) -> str:
    return value if isinstance(value, str) and value in names else HIDDEN


def _names(value: Any) -> Any:
    """Property names (structure), each kept when it is a string."""
    if not isinstance(value, list):
        return HIDDEN
    return [name if isinstance(name, str) else HIDDEN for name in value]
