"""What each grammar engine does with each JSON Schema keyword, as measured (not as documented).

Every entry was checked by compiling an example schema and feeding a must-reject instance with the
real engines over the Llama 3 vocabulary: xgrammar 0.2.9 and llguidance 1.9.1
(tests/integration/test_schema_backends.py re-checks each one on every run). "unenforced":
xgrammar compiles the schema and accepts the must-reject instance, without a word. "refused":
llguidance fails the compile (the request fails).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

XGRAMMAR_VERIFIED = "0.2.9"
LLGUIDANCE_VERIFIED = "1.9.1"


@dataclass(frozen=True)
class Behaviour:
    keyword: str  # what the finding names
    example: dict[str, Any]  # a schema using it
    must_reject: Any  # an instance a JSON Schema validator rejects


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
    )
}
XGRAMMAR_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference",
    "uuid", "uri-template", "json-pointer", "relative-json-pointer",
})  # fmt: skip
# Measured enforced by xgrammar 0.2.9 although older write-ups list them: patternProperties, multipleOf.

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
    )
}
LLGUIDANCE_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uuid",
})  # fmt: skip
SIMPLE_KEYWORDS = ("not", "if", "dependentRequired", "dependentSchemas", "uniqueItems", "contains")


def _simple_keywords(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """The keywords both engines mishandle wherever they appear (`uniqueItems: false` asks nothing)."""
    return [
        (keyword, keyword)
        for keyword in SIMPLE_KEYWORDS
        if keyword in schema and not (keyword == "uniqueItems" and schema[keyword] is False)
    ]


def xgrammar_gaps(schema: dict[str, Any], lookaround: bool) -> list[tuple[str, str]]:
    """(keyword, the key it sits under) for what xgrammar compiles but does not enforce here."""
    out = _simple_keywords(schema)
    for union in ("anyOf", "oneOf", "allOf"):
        if union in schema and "properties" in schema:
            out.append((f"properties beside {union}", union))
    branches = schema.get("oneOf")
    if isinstance(branches, list) and not provably_disjoint(branches):
        out.append(("oneOf exclusivity", "oneOf"))
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) > 1:
        out.append(("allOf with several branches", "allOf"))
    if lookaround:
        out.append(("pattern lookaround", "pattern"))
    format_name = schema.get("format")
    if isinstance(format_name, str) and format_name not in XGRAMMAR_FORMATS:
        out.append((f"format {format_name}", "format"))
    return out


def llguidance_refusals(schema: dict[str, Any], lookaround: bool) -> list[tuple[str, str]]:
    """(keyword, the key it sits under) for what makes llguidance refuse to compile."""
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
