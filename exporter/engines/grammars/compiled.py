"""What xgrammar compiles of a JSON Schema, as its schema parser reads one. Pure functions.

xgrammar (0.2.7 to 0.2.9, `json_schema_converter.cc`) reads a subschema by the first of these it
finds: `$ref` (only the target), `const`, `enum`, `anyOf`, `oneOf`, `allOf` (one branch: that branch;
several: any JSON value at all), `type`, then an object or array implied by its keywords, else any
value. Objects are closed unless `additionalProperties` or `patternProperties` open them (vLLM
compiles in strict mode), and so are arrays without `items`, except a bare `{"type": "object"}` or
`{"type": "array"}`, which takes any object or array. What the parser never reaches is not
compiled: a dropped keyword there changes nothing the engine emits, so a finding there is noise.
The table (backends.py) asks this module where a finding can be observed; the prover
(exporter/lint/prove/) then shows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from exporter.schema import ecma_regex
from exporter.schema.ecma_pattern import EcmaUnsupported, parse_ecma
from exporter.schema.values import is_number, value_types
from exporter.schema.walk import escape, ref_target, resolve

JSON_TYPES = frozenset({"object", "array", "string", "number", "boolean", "null"})
OBJECT_KEYS = ("properties", "additionalProperties", "unevaluatedProperties")
ARRAY_KEYS = ("items", "prefixItems", "unevaluatedItems")
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                         "readOnly", "writeOnly", "$id", "id", "$schema", "$anchor"})  # fmt: skip
MAX_PLACES = 100_000  # the walk is bounded whatever the document
MAX_DEPTH = 6  # how deep the disjointness proof descends into properties and $refs


def form(schema: Any) -> str:
    """The one reading xgrammar's parser gives a subschema (the first keyword that decides)."""
    if not isinstance(schema, dict):
        return "any"
    for key in ("$ref", "const", "enum", "anyOf", "oneOf", "allOf"):
        if key in schema:
            return key
    if "type" in schema:
        return "type"
    if any(key in schema for key in OBJECT_KEYS):
        return "object"
    if any(key in schema for key in ARRAY_KEYS):
        return "array"
    return "any"


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a typed or implied object/array reading produces (integer counts as number)."""
    reading = form(schema)
    if reading == "object":
        return {"object"}
    if reading == "array":
        return {"array"}
    return {"number" if name == "integer" else name for name in declared(schema)} & JSON_TYPES


def declared(schema: dict[str, Any]) -> list[str]:
    """The type names `type` lists, in order (a string or a list; anything else: none)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    return [k for k in kind if isinstance(k, str)] if isinstance(kind, list) else []


def children(root: Any, pointer: str, schema: Any) -> Iterator[tuple[str, Any]]:
    """(pointer, subschema) of what the parser goes on to compile under this subschema."""
    if not isinstance(schema, dict):
        return
    reading = form(schema)
    if reading == "$ref":
        found = resolve(root, schema["$ref"])
        if found is not None:
            yield found
    elif reading in ("anyOf", "oneOf", "allOf"):
        branches = schema[reading]
        if isinstance(branches, list) and (reading != "allOf" or len(branches) == 1):
            yield from ((f"{pointer}/{reading}/{i}", branch) for i, branch in enumerate(branches))
    elif reading in ("type", "object", "array"):
        kinds = _kinds(schema)
        if "object" in kinds:
            yield from _object_children(pointer, schema)
        if "array" in kinds:
            yield from _array_children(pointer, schema)


def _object_children(pointer: str, schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for key in ("properties", "patternProperties"):
        value = schema.get(key)
        if isinstance(value, dict):
            yield from ((f"{pointer}/{key}/{escape(str(name))}", child) for name, child in value.items())
    if "propertyNames" in schema:
        yield f"{pointer}/propertyNames", schema["propertyNames"]
    if isinstance(schema.get("additionalProperties"), dict):
        yield f"{pointer}/additionalProperties", schema["additionalProperties"]
    elif "additionalProperties" not in schema and isinstance(schema.get("unevaluatedProperties"), dict):
        yield f"{pointer}/unevaluatedProperties", schema["unevaluatedProperties"]


def _array_children(pointer: str, schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    prefix = schema.get("prefixItems")
    if isinstance(prefix, list):
        yield from ((f"{pointer}/prefixItems/{i}", item) for i, item in enumerate(prefix))
    if isinstance(schema.get("items"), dict):
        yield f"{pointer}/items", schema["items"]
    elif "items" not in schema and isinstance(schema.get("unevaluatedItems"), dict):
        yield f"{pointer}/unevaluatedItems", schema["unevaluatedItems"]


def live(root: Any) -> frozenset[str]:
    """Pointers of the subschemas xgrammar compiles, from the root through `$ref`s. A definition
    no compiled place refers to, and whatever sits under `not`, `if`, `then`, `else`, `contains`,
    the siblings of a union or a `$ref`, or the branches of a several-branch `allOf`, is absent."""
    out: set[str] = set()
    stack: list[tuple[str, Any]] = [("", root)]
    while stack and len(out) < MAX_PLACES:
        pointer, schema = stack.pop()
        if pointer in out:
            continue
        out.add(pointer)
        stack.extend(children(root, pointer, schema))
    return frozenset(out)


def types(root: Any, schema: Any, depth: int = MAX_DEPTH) -> frozenset[str]:
    """The JSON types the compiled grammar can emit here (integer counted as number)."""
    schema = ref_target(root, schema, MAX_DEPTH)
    reading = form(schema)
    if depth <= 0 or reading == "any" or not isinstance(schema, dict):
        return JSON_TYPES if schema is not False else frozenset()
    if reading == "const":
        return frozenset(value_types(schema["const"]) - {"integer"})
    if reading == "enum":
        values = schema["enum"] if isinstance(schema["enum"], list) else []
        return frozenset(kind for value in values for kind in (value_types(value) - {"integer"}))
    if reading in ("anyOf", "oneOf", "allOf"):
        branches = schema[reading] if isinstance(schema[reading], list) else []
        if reading == "allOf" and len(branches) != 1:
            return JSON_TYPES
        return frozenset(kind for branch in branches for kind in types(root, branch, depth - 1))
    kinds = _kinds(schema)
    return frozenset(kinds) if kinds else JSON_TYPES


def keys(root: Any, schema: Any, depth: int = MAX_DEPTH) -> frozenset[str] | None:
    """The property names the compiled grammar can emit in an object here (None: any name)."""
    schema = ref_target(root, schema, MAX_DEPTH)
    reading = form(schema)
    if depth <= 0 or reading == "any" or not isinstance(schema, dict):
        return None
    if reading in ("const", "enum"):
        values = (
            [schema["const"]]
            if reading == "const"
            else schema["enum"]
            if isinstance(schema["enum"], list)
            else []
        )
        return frozenset(name for value in values if isinstance(value, dict) for name in value)
    if reading in ("anyOf", "oneOf", "allOf"):
        branches = schema[reading] if isinstance(schema[reading], list) else []
        if reading == "allOf" and len(branches) != 1:
            return None
        found: set[str] = set()
        for branch in branches:
            names = keys(root, branch, depth - 1)
            if names is None:
                return None
            found |= names
        return frozenset(found)
    if "object" not in _kinds(schema):
        return frozenset()
    if _open(schema):
        return None
    properties = schema.get("properties")
    return frozenset(properties) if isinstance(properties, dict) else frozenset()


def _open(schema: dict[str, Any]) -> bool:
    """An object that admits names beyond `properties`: strict mode closes the rest, except on a
    bare `{"type": "object"}` (nothing but annotations beside `type`), which is any object."""
    extra = schema.get("additionalProperties", schema.get("unevaluatedProperties", False))
    return extra is not False or isinstance(schema.get("patternProperties"), dict) or bare(schema)


def bare(schema: dict[str, Any]) -> bool:
    """`type` and annotations only: xgrammar compiles any object (or any array) of that type."""
    return "type" in schema and set(schema) - ANNOTATIONS <= {"type"}


def finite(root: Any, schema: Any) -> list[Any] | None:
    """Every value the compiled grammar can emit here, when there are few (None: many): the
    constants, `true`/`false`, `null`, and `{}` for an object strict mode closes with no names."""
    schema = ref_target(root, schema, MAX_DEPTH)
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    if isinstance(values, list):
        return values or None
    if form(schema) not in ("type", "object"):
        return None
    out: list[Any] = []
    for kind in _kinds(schema):
        if kind == "null":
            out.append(None)
        elif kind == "boolean":
            out.extend((True, False))
        elif kind == "object" and keys(root, schema) == frozenset():
            out.append({})
        else:
            return None
    return out or None


def constrains(schema: Any) -> bool:
    """Whether a subschema asks anything of a value (`{}`, `true` and annotations ask nothing)."""
    if schema is True or schema == {}:
        return False
    return not isinstance(schema, dict) or not set(schema) <= ANNOTATIONS


def disjoint(root: Any, left: Any, right: Any, depth: int = MAX_DEPTH) -> bool:
    """Whether no value the compiled grammar emits for one `oneOf` branch can also match the other
    (so falling back to anyOf changes nothing): types apart, every constant of one refused by the
    other, a name one requires that the other's closed object cannot have, a common required
    property whose values are apart, ranges apart, or patterns that start apart."""
    left, right = ref_target(root, left, MAX_DEPTH), ref_target(root, right, MAX_DEPTH)
    if depth <= 0 or not isinstance(left, dict) or not isinstance(right, dict):
        return False
    if not types(root, left) & types(root, right):
        return True
    for one, other in ((left, right), (right, left)):
        values = _finite(one)
        if values is not None and all(refuses(root, other, value) for value in values):
            return True
    if _required_apart(root, left, right) or _ranges_apart(left, right) or _patterns_apart(left, right):
        return True
    for one, other in ((left, right), (right, left)):  # more names required than the other allows
        most = other.get("maxProperties")
        if is_number(most) and len(set(_required(one))) > most and types(root, one) <= {"object"}:
            return True
    common = set(_required(left)) & set(_required(right))
    for name in common:
        a, b = _property(left, name), _property(right, name)
        if a is not None and b is not None and disjoint(root, a, b, depth - 1):
            return True
    return False


def _finite(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return values if isinstance(values, list) and values else None


def _required(schema: dict[str, Any]) -> list[str]:
    names = schema.get("required")
    return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []


def _property(schema: dict[str, Any], name: str) -> Any:
    properties = schema.get("properties")
    return properties.get(name) if isinstance(properties, dict) else None


def _required_apart(root: Any, left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Each side requires a name the other's compiled (closed) object cannot emit."""
    if form(left) not in ("type", "object") or form(right) not in ("type", "object"):
        return False
    for one, other in ((left, right), (right, left)):
        names = keys(root, one)
        if names is None or set(_required(other)) <= names:
            return False
    return True


BOUNDS: dict[str, tuple[str, str | None, str, str | None]] = {
    "number": ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"),
    "string": ("minLength", None, "maxLength", None),
    "array": ("minItems", None, "maxItems", None),
    "object": ("minProperties", None, "maxProperties", None),
}


def _ranges_apart(left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Both of one kind with intervals that do not meet (`maxItems: 1` beside `minItems: 2`)."""
    kinds = _kinds(left)
    if (
        len(kinds) != 1
        or kinds != _kinds(right)
        or form(left) not in ("type", "object", "array")
        or form(right) not in ("type", "object", "array")
    ):
        return False
    bounds = BOUNDS.get(next(iter(kinds)))
    if bounds is None:
        return False
    low_key, low_open, high_key, high_open = bounds

    def interval(schema: dict[str, Any]) -> tuple[float, bool, float, bool]:
        low, high, lo_x, hi_x = float("-inf"), float("inf"), False, False
        if is_number(schema.get(low_key)):
            low = schema[low_key]
        if low_open and is_number(schema.get(low_open)) and schema[low_open] >= low:
            low, lo_x = schema[low_open], True
        if is_number(schema.get(high_key)):
            high = schema[high_key]
        if high_open and is_number(schema.get(high_open)) and schema[high_open] <= high:
            high, hi_x = schema[high_open], True
        return low, lo_x, high, hi_x

    a_low, a_lx, a_high, a_hx = interval(left)
    b_low, b_lx, b_high, b_hx = interval(right)
    return (
        a_high < b_low
        or b_high < a_low
        or (a_high == b_low and (a_hx or b_lx))
        or (b_high == a_low and (b_hx or a_lx))
    )


def _patterns_apart(left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Two string patterns anchored at the start whose first characters cannot be the same."""
    if _kinds(left) != {"string"} or _kinds(right) != {"string"}:
        return False
    a, b = _first_chars(left.get("pattern")), _first_chars(right.get("pattern"))
    return a is not None and b is not None and not a & b


def _first_chars(pattern: Any) -> set[str] | None:
    """The characters a `^`-anchored pattern's match can start with, as ECMA-262 reads it (None:
    unknown or any)."""
    if not isinstance(pattern, str):
        return None
    try:
        tree = parse_ecma(pattern)
    except EcmaUnsupported:
        return None
    items = list(tree[1]) if tree[0] == "seq" else [tree]
    if len(items) < 2 or items[0] != ("bol",):
        return None
    return _starts(items[1])


def _starts(node: Any) -> set[str] | None:
    tag = node[0]
    if tag == "set":
        if sum(hi - lo + 1 for lo, hi in node[1]) > 256:
            return None
        return {chr(c) for lo, hi in node[1] for c in range(lo, hi + 1)}
    if tag == "seq":
        return _starts(node[1][0]) if node[1] else None
    if tag == "alt":
        found: set[str] = set()
        for branch in node[1]:
            chars = _starts(branch)
            if chars is None:
                return None
            found |= chars
        return found
    if tag == "rep" and node[2] >= 1:
        return _starts(node[1])
    return None


def refuses(root: Any, schema: Any, value: Any, depth: int = MAX_DEPTH) -> bool:
    """Whether a subschema surely refuses this value (False when unsure): the types, constants,
    required names, properties, bounds and pattern a validator would check."""
    schema = ref_target(root, schema, MAX_DEPTH)
    if depth <= 0 or not isinstance(schema, dict):
        return schema is False
    if "const" in schema and schema["const"] != value:
        return True
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return True
    for union in ("anyOf", "oneOf"):
        branches = schema.get(union)
        if (
            isinstance(branches, list)
            and branches
            and all(refuses(root, b, value, depth - 1) for b in branches)
        ):
            return True
    branches = schema.get("allOf")
    if isinstance(branches, list) and any(refuses(root, b, value, depth - 1) for b in branches):
        return True
    kinds = _kinds(schema) if "type" in schema else set()
    if kinds and not (value_types(value) - {"integer"}) & kinds:
        return True
    raw = set(declared(schema))
    if "integer" in raw and "number" not in raw and isinstance(value, float) and not value.is_integer():
        return True
    if isinstance(value, str):
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and ecma_regex.search(pattern, value).matched is False:
            return True  # matched None (a pattern not read): not sure, so not refused
        if is_number(schema.get("minLength")) and len(value) < schema["minLength"]:
            return True
        if is_number(schema.get("maxLength")) and len(value) > schema["maxLength"]:
            return True
    if is_number(value):
        if is_number(schema.get("minimum")) and value < schema["minimum"]:
            return True
        if is_number(schema.get("maximum")) and value > schema["maximum"]:
            return True
    if isinstance(value, dict):
        if any(name not in value for name in _required(schema)):
            return True
        properties = schema.get("properties")
        if isinstance(properties, dict) and any(
            name in properties and refuses(root, properties[name], item, depth - 1)
            for name, item in value.items()
        ):
            return True
    return False
