"""kimi_k3's refusal of a tool it cannot render (SGLang's kimi_k3 detector): the JSON types its renderer
reads from a tool's parameters, and when a strict tool's schema has none it can print."""

from __future__ import annotations

from typing import Any

from exporter.engines.sglang.validation import SglangTool

_K3_TYPES = ("string", "number", "integer", "boolean", "array", "object", "null")
_K3_KEYWORDS = (
    (frozenset({"additionalProperties", "dependentRequired", "dependentSchemas", "maxProperties",
                "minProperties", "patternProperties", "properties", "propertyNames", "required"}), "object"),
    (frozenset({"contains", "items", "maxContains", "maxItems", "minContains", "minItems", "prefixItems",
                "uniqueItems"}), "array"),
    (frozenset({"format", "maxLength", "minLength", "pattern"}), "string"),
    (frozenset({"exclusiveMaximum", "exclusiveMinimum", "maximum", "minimum", "multipleOf"}), "number"),
)  # fmt: skip
_K3_DEPTH = 200  # past this the builder's own recursion fails (and the failure is logged)


class KimiRefusal(Exception):
    pass


def kimi_k3_refuses(tool: SglangTool, strict: bool) -> bool:
    """Whether get_kimik3_structural_tag raises on the tool (`_tool_arguments_format`)."""
    parameters = tool.parameters
    if not strict or parameters is None:
        return False
    if not isinstance(parameters, dict):
        return True
    try:
        if "object" not in _k3_types(parameters, parameters, set(), 0):
            return True
        properties = parameters.get("properties", {})
        required = parameters.get("required", [])
        if not isinstance(properties, dict) or not isinstance(required, list):
            return True
        if not all(isinstance(item, str) for item in required) or set(required) - set(properties):
            return True
        for key, schema in properties.items():
            if not isinstance(schema, bool | dict):
                return True
            if key in required and not _k3_accepts(schema, parameters):
                return True
        additional = parameters.get("additionalProperties", True)
        if isinstance(additional, dict):
            return not _k3_accepts(additional, parameters)
        return not isinstance(additional, bool)
    except (KimiRefusal, RecursionError):
        return True


def _k3_json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _k3_matches(value: Any, json_type: str) -> bool:
    found = _k3_json_type(value)
    return found == json_type or (json_type == "number" and found == "integer")


def _k3_ref(ref: str, root: dict[str, Any]) -> Any:
    if not ref.startswith("#/"):
        return None
    value: Any = root
    for part in ref[2:].split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, bool | dict) else None


def _k3_types(schema: Any, root: dict[str, Any], seen: set[str], depth: int) -> list[str]:
    """_schema_types: the JSON types a schema admits."""
    if depth > _K3_DEPTH:
        raise KimiRefusal
    if schema is False:
        return []
    if schema is True:
        return list(_K3_TYPES)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        target = _k3_ref(ref, root)
        if target is not None:
            return _k3_types(target, root, seen | {ref}, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind] if kind in _K3_TYPES else list(_K3_TYPES)
    if isinstance(kind, list):
        return [t for t in _K3_TYPES if t in kind]
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if isinstance(options, list):
            found = {
                t for o in options if isinstance(o, bool | dict) for t in _k3_types(o, root, seen, depth + 1)
            }
            return [t for t in _K3_TYPES if t in found]
    options = schema.get("allOf")
    if isinstance(options, list):
        sets = [set(_k3_types(o, root, seen, depth + 1)) for o in options if isinstance(o, bool | dict)]
        constrained = [types for types in sets if types != set(_K3_TYPES)]
        if constrained:
            result = constrained[0] | ({"integer"} if "number" in constrained[0] else set())
            for types in constrained[1:]:
                result &= types | ({"integer"} if "number" in types else set())
            if "number" in result and "integer" in result:
                result.remove("integer")
            return [t for t in _K3_TYPES if t in result]
    if "const" in schema:
        return [_k3_json_type(schema["const"])]
    enum = schema.get("enum")
    if isinstance(enum, list):
        found = {_k3_json_type(value) for value in enum}
        return [t for t in _K3_TYPES if t in found]
    for keywords, json_type in _K3_KEYWORDS:
        if keywords.intersection(schema):
            return [json_type]
    return list(_K3_TYPES)


def _k3_accepts(schema: Any, root: dict[str, Any]) -> bool:
    """_argument_value_variants is not empty."""
    return any(_k3_restrict(schema, t, root, 0) is not False for t in _k3_types(schema, root, set(), 0))


def _k3_restrict(schema: Any, json_type: str, root: dict[str, Any], depth: int) -> Any:
    """_restrict_schema_type: the schema narrowed to one JSON type, or False."""
    if depth > _K3_DEPTH:
        raise KimiRefusal
    if not isinstance(schema, dict):
        return {"type": json_type} if schema else False
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _k3_ref(ref, root)
        if target is not None:
            return _k3_with_root(_k3_restrict(target, json_type, root, depth + 1), root)
    result = dict(schema)
    kind = result.get("type")
    if isinstance(kind, list):
        if json_type not in kind:
            return False
        result["type"] = json_type
    elif isinstance(kind, str):
        if kind != json_type:
            return False
    else:
        result["type"] = json_type
    for keyword in ("anyOf", "oneOf"):
        options = result.get(keyword)
        if not isinstance(options, list):
            continue
        restricted = [
            _k3_restrict(option, json_type, root, depth + 1)
            for option in options
            if isinstance(option, bool | dict) and json_type in _k3_types(option, root, set(), depth + 1)
        ]
        if not restricted:
            return False
        if len(restricted) == 1 and isinstance(restricted[0], dict):
            result.pop(keyword)
            result.update(restricted[0])
        else:
            result[keyword] = restricted
    enum = result.get("enum")
    if isinstance(enum, list):
        result["enum"] = [value for value in enum if _k3_matches(value, json_type)]
        if not result["enum"]:
            return False
    if "const" in result and not _k3_matches(result["const"], json_type):
        return False
    return _k3_with_root(result, root)


def _k3_with_root(schema: Any, root: dict[str, Any]) -> Any:
    if not isinstance(schema, dict):
        return schema
    result = dict(schema)
    for key in ("$defs", "definitions"):
        if key in root and key not in result:
            result[key] = root[key]
    return result
