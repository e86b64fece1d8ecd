"""Nested unions flattened where that provably keeps what the schema accepts (`gdx fix`, for the
`union_depth` finding: each anyOf/oneOf level is one more nested rule in the engine's grammar).

A union's branch that is itself a union gives way to its branches when the two accept the same:
- an `anyOf` in an `anyOf`: A or (B or C) is A or B or C; a union of one branch is that branch;
- where a `oneOf` takes part, inside or out, only when the inner branches are pairwise exclusive
  (types apart, constants apart, or a property both require with constants apart): among them
  "exactly one" and "at least one" agree, and A xor (B or C) is exactly one of A, B, C;
- keywords beside the inner union (`type: object`, `required`) are copied into each of its branches,
  S and (B or C) being (S and B) or (S and C), when the copy reads the same: no keyword set
  differently on both sides, none read together with one on the other side (`exclusiveMaximum`
  reads `maximum` in draft 4), none beside a `$ref` (drafts 4 to 7 ignore what stands there), none
  that names a place (`$id`, `$defs`); none that holds schemas either (`properties`: a copy per
  branch grows the grammar); the inner union's annotations (title, description) go: they
  constrain nothing.
Nothing else is rewritten, and each finding left says why: unions that nest through a field or an
item rather than branch in branch, unions reached through a `$ref` (a definition is shared by its
uses and may recurse: flattening across it means copying it in), and a rewrite that would move what
a `$ref` points at. Only the unions on the way to each finding and below it are touched. Pure;
every pointer reported is one of the schema as given.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from exporter.schema.findings import Thresholds
from exporter.schema.identity import canonical_json
from exporter.schema.static import KNOWN, Rewrite
from exporter.schema.structure import union_depth
from exporter.schema.walk import SUBSCHEMAS, Node, TooComplex, escape, unescape, walk

UNIONS = ("anyOf", "oneOf")
ARTICLE = {"anyOf": "an anyOf", "oneOf": "a oneOf"}
# Annotations beside an inner union go with it (as do keywords no validator knows): no constraint.
DROPPED = frozenset({
    "title", "description", "default", "examples", "example", "$comment", "deprecated", "readOnly",
    "writeOnly",
})  # fmt: skip
REFS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})
# Beside an inner union, never copied into its branches: a place others point at or resolve against,
# a reference (drafts 4 to 7 ignore its siblings), keywords that read every keyword beside them.
NOT_COPIED = REFS | frozenset({
    "$id", "id", "$schema", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$defs", "definitions",
    "$vocabulary", "unevaluatedProperties", "unevaluatedItems", *UNIONS,
})  # fmt: skip
# Keywords that hold subschemas: copied into every branch, the grammar would grow by as many copies.
HOLDS_SCHEMAS = frozenset(SUBSCHEMAS) | {"dependencies", "contentSchema"}
TOGETHER = (  # keywords one reads the other of: copied beside the other side's, they would change
    frozenset({"properties", "patternProperties", "additionalProperties"}),
    frozenset({"items", "prefixItems", "additionalItems"}),
    frozenset({"contains", "minContains", "maxContains"}),
    frozenset({"if", "then", "else"}),
    frozenset({"maximum", "exclusiveMaximum"}),  # draft 4's boolean exclusiveMaximum reads maximum
    frozenset({"minimum", "exclusiveMinimum"}),
    frozenset({"contentMediaType", "contentEncoding", "contentSchema"}),
)
TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
HOSTILE = (RecursionError, ValueError, TypeError, OverflowError, TooComplex)


@dataclass(frozen=True)
class Flattened:
    schema: Any
    rewrites: tuple[Rewrite, ...]  # each branch replaced by its union's branches, then each finding left


@dataclass(frozen=True)
class _Splice:
    """Branch `index` of the union at `outer` replaced by `count` branches of its `inner` union."""

    outer: str
    index: int
    inner: str
    count: int

    def back(self, pointer: str) -> str:
        """A pointer of the schema after this splice, as it was before it."""
        head, _, tail = pointer.removeprefix(self.outer + "/").partition("/")
        if not pointer.startswith(self.outer + "/") or not head.isdigit() or int(head) < self.index:
            return pointer
        rest = f"/{tail}" if tail else ""
        number = int(head) - self.index
        if number < self.count:
            return f"{self.outer}/{self.index}/{self.inner}/{number}{rest}"
        return f"{self.outer}/{int(head) - self.count + 1}{rest}"


def flatten(schema: Any, pointers: Sequence[str], limit: int = Thresholds().union_depth) -> Flattened:
    """`schema` with the nested unions on the way to `pointers` (union_depth findings) and below them
    flattened where provably the same set; what was done, then why each finding still there is."""
    try:
        doc = json.loads(json.dumps(schema))
        refs = _targets(doc)
        splices: list[_Splice] = []
        done: list[Rewrite] = []
        # Deepest and last first: each splice then leaves the pointers of those still to come as given.
        for outer, index, inner in sorted(_pairs(doc, pointers), key=_order, reverse=True):
            branches = _at(doc, outer)
            spliced, what = _inlined(branches, outer, index, inner, refs)
            if spliced is not None:
                branches[index : index + 1] = spliced
                splices.append(_Splice(outer, index, inner, len(spliced)))
                done.append(Rewrite(f"{outer}/{index}", what))

        def back(pointer: str) -> str:
            for splice in reversed(splices):
                pointer = splice.back(pointer)
            return pointer

        left = [Rewrite(back(p), why, done=False) for p, why in _left(doc, limit, refs, back)]
    except HOSTILE as err:
        why = f"too complex to flatten ({type(err).__name__})"
        return Flattened(schema, tuple(Rewrite(p, why, done=False) for p in sorted(set(pointers))))
    return Flattened(doc, (*done, *left))


def _pairs(doc: Any, pointers: Sequence[str]) -> set[tuple[str, int, str]]:
    """(outer union's pointer, branch, inner union's keyword) for each branch that is itself a union,
    where that inner union is on the way to one of `pointers` or below it."""
    out = set()
    for node in walk(doc, follow_refs=False):
        for outer_key in UNIONS:
            branches = node.schema.get(outer_key)
            outer = f"{node.pointer}/{outer_key}"
            for index, branch in enumerate(branches if isinstance(branches, list) else []):
                for inner_key in (k for k in UNIONS if isinstance(branch, dict) and k in branch):
                    inner = f"{outer}/{index}/{inner_key}"
                    if any(_within(p, inner) or _within(inner, p) for p in pointers):
                        out.add((outer, index, inner_key))
    return out


def _inlined(
    branches: list[Any], outer: str, index: int, inner: str, refs: set[str]
) -> tuple[list[Any] | None, str]:
    """The branches that replace branch `index` and what was done, or None and why not."""
    outer_key, branch = outer.rsplit("/", 1)[1], branches[index]
    inside = branch.get(inner)
    if all(key in branch for key in UNIONS):
        return None, "an anyOf and a oneOf stand side by side in it"
    if not isinstance(inside, list) or not inside:
        return None, f"its {inner} is not a list of branches"
    for target in sorted(refs):
        head = target.removeprefix(outer + "/").split("/")[0]
        if _within(target, outer) and head.isdigit() and int(head) >= index:
            return None, f"a `$ref` points at {target}, which would move"
    if len(inside) > 1 and "oneOf" in (outer_key, inner) and not _exclusive(inside):
        return None, (
            f"{ARTICLE[inner]} in {ARTICLE[outer_key]} whose branches are not provably exclusive: "
            "flattened, a value two of them accept would be judged otherwise"
        )
    kept = NOT_COPIED | (KNOWN - DROPPED)
    beside = {k: v for k, v in branch.items() if k != inner and k in kept}
    for key in sorted(beside.keys() & NOT_COPIED)[:1]:
        return None, f"`{key}` beside its {inner} cannot be copied into its branches"
    for key in sorted(beside.keys() & HOLDS_SCHEMAS)[:1]:
        return None, f"`{key}` beside its {inner} holds schemas: a copy in each branch would grow the grammar"
    out = []
    for number, each in enumerate(inside):
        if beside and isinstance(each, dict):
            why = _clash(beside, each)
            if why:
                return None, f"branch {number} of its {inner}: {why}"
            each = {**beside, **each}
        elif beside and each is True:
            each = dict(beside)
        elif beside and each is not False:
            return None, f"branch {number} of its {inner} is not a schema"
        out.append(each)
    what = f"replaced by the {len(out)} branches of its {inner}"
    return out, what + (f", `{'`, `'.join(beside)}` copied into each" if beside else "")


def _clash(beside: dict[str, Any], branch: dict[str, Any]) -> str:
    """Why `beside` copied into `branch` would not read as the two did apart ("" when it would)."""
    if found := sorted((REFS | {"unevaluatedProperties", "unevaluatedItems"}) & branch.keys()):
        return f"`{found[0]}` there reads (or, drafts 4 to 7, ignores) every keyword beside it"
    for key in sorted(beside.keys() & branch.keys()):
        if canonical_json(beside[key]) != canonical_json(branch[key]):
            return f"`{key}` is set there and beside the union, differently"
    for group in TOGETHER:
        mine, theirs = group & beside.keys(), group & branch.keys()
        if mine and theirs and mine != theirs:
            other = sorted(theirs - mine or theirs)[0]
            return f"`{sorted(mine)[0]}` beside the union and `{other}` there read each other"
    return ""


def _exclusive(branches: list[Any]) -> bool:
    return all(_apart(a, b) for i, a in enumerate(branches) for b in branches[i + 1 :])


def _apart(a: Any, b: Any) -> bool:
    """Whether no value satisfies both: one is `false`, their types do not meet, every constant of one
    is outside the other's constants or types, or a property both require (of objects only) is apart."""
    if a is False or b is False:
        return True
    if not isinstance(a, dict) or not isinstance(b, dict) or REFS & (a.keys() | b.keys()):
        return False
    kinds_a, kinds_b = _types(a), _types(b)
    if kinds_a is not None and kinds_b is not None and not _meet(kinds_a, kinds_b):
        return True
    for one, other in ((a, b), (b, a)):
        values = _constants(one)
        if values is not None and all(_refuses(other, value) for value in values):
            return True
    if {"object"} not in (kinds_a, kinds_b):
        return False  # `required` holds for objects only: a string passes both
    for name in set(_names(a.get("required"))) & set(_names(b.get("required"))):
        one, other = _property(a, name), _property(b, name)
        if one is not None and other is not None and _apart(one, other):
            return True
    return False


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The types `type` allows; None when absent or not plainly a list of the seven."""
    kind = schema.get("type")
    kinds = {str(k) for k in kind} if isinstance(kind, list) else {str(kind)}
    plain = isinstance(kind, str) or (isinstance(kind, list) and all(isinstance(k, str) for k in kind))
    return kinds if plain and kinds and kinds <= TYPES else None


def _meet(a: Iterable[str], b: Iterable[str]) -> bool:
    return any(x == y or {x, y} == {"integer", "number"} for x in a for y in b)


def _constants(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return values if isinstance(values, list) else None


def _refuses(schema: Any, value: Any) -> bool:
    """Whether `schema` certainly rejects `value` by its constants or its types."""
    if not isinstance(schema, dict) or REFS & schema.keys():
        return schema is False
    values = _constants(schema)
    if values is not None and _key(value) not in {_key(v) for v in values}:
        return True
    kinds = _types(schema)
    return kinds is not None and not _meet(_kinds(value), kinds)


def _kinds(value: Any) -> set[str]:
    """The JSON Schema types a value has (1.0 is an integer too, in drafts 6 on)."""
    if isinstance(value, bool):
        return {"boolean"}
    if isinstance(value, int | float):
        return {"number", "integer"} if isinstance(value, int) or value.is_integer() else {"number"}
    names = {type(None): "null", str: "string", list: "array", dict: "object"}
    return {names[type(value)]} if type(value) in names else set()


def _key(value: Any) -> Any:
    """A hashable form under which JSON-equal values are equal (1 and 1.0 alike, true and 1 apart)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _key(v)) for k, v in value.items()))
    return ("string", value)


def _names(value: Any) -> list[str]:
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []


def _property(schema: dict[str, Any], name: str) -> Any:
    properties = schema.get("properties")
    return properties.get(name) if isinstance(properties, dict) else None


def _left(doc: Any, limit: int, refs: set[str], back: Callable[[str], str]) -> list[tuple[str, str]]:
    """Each union_depth finding the flattened schema still has, and why its unions stay nested."""
    visits: dict[str, list[Node]] = {}
    for node in walk(doc):
        for finding in union_depth(node, Thresholds(union_depth=limit)):
            visits.setdefault(finding.pointer, []).append(node)
    out = []
    for pointer, nodes in sorted(visits.items()):
        levels = _levels(doc, pointer)
        parts = []
        for (above, _), (here, between) in itertools.pairwise(levels):
            index = int(here.removeprefix(above + "/").split("/")[0])
            if between:
                under = "`, `".join(dict.fromkeys(between))
                parts.append(
                    f"{back(here)} is under `{under}` in a branch of {back(above)}, not a branch itself"
                )
                continue
            spliced, why = _inlined(_at(doc, above), above, index, here.rsplit("/", 1)[1], refs)
            if spliced is None:
                parts.append(f"{back(above)}/{index}: {why}")
        if all(node.via for node in nodes):
            parts.append(
                f"the unions above it are reached through a `$ref` to #{back(nodes[0].via[0])}: a definition "
                "is flattened only where it stands (its uses share it, and it may recurse)"
            )
        reasons = "; ".join(dict.fromkeys(parts)) or "no branch of these unions is a union itself"
        out.append((pointer, f"unions still nested {limit + 1} deep: {reasons}"))
    return out


def _levels(doc: Any, pointer: str) -> list[tuple[str, list[str]]]:
    """The unions on the way to `pointer` in the document: each one's pointer, and the keywords passed
    between the previous union's branch and it."""
    tokens = pointer.split("/")[1:]
    levels: list[tuple[str, list[str]]] = []
    between: list[str] = []
    at, node, i = "", doc, 0
    while i < len(tokens) and isinstance(node, dict):
        keyword = unescape(tokens[i])
        value, how, at, i = node.get(keyword), SUBSCHEMAS.get(keyword), f"{at}/{tokens[i]}", i + 1
        if keyword in UNIONS:
            levels.append((at, between))
            between = []
        else:
            between.append(keyword)
        if how is None or i == len(tokens):
            break
        if how == "map" or (how != "one" and isinstance(value, list)):
            at, node, i = f"{at}/{tokens[i]}", _child(value, unescape(tokens[i])), i + 1
        else:
            node = value
    return levels


def _child(value: Any, token: str) -> Any:
    if isinstance(value, dict):
        return value.get(token)
    if isinstance(value, list) and token.isdigit() and int(token) < len(value):
        return value[int(token)]
    return None


def _at(doc: Any, pointer: str) -> Any:
    node = doc
    for token in pointer.split("/")[1:]:
        node = _child(node, unescape(token))
    return node


def _targets(doc: Any) -> set[str]:
    """The document pointers the references' fragments name: `#/a/b` from the root, or from the
    embedded resource (`$id`) it stands in; after another base (`other.json#/a/b`), from each."""
    resources, found = {""}, []
    stack: list[tuple[Any, str, str]] = [(doc, "", "")]
    while stack:
        node, pointer, resource = stack.pop()
        if isinstance(node, dict):
            if pointer and any(isinstance(node.get(key), str) for key in ("$id", "id")):
                resource = pointer
                resources.add(pointer)
            for key in REFS & node.keys():
                base, _, fragment = node[key].partition("#") if isinstance(node[key], str) else ("", "", "")
                if unquote(fragment).startswith("/"):
                    found.append((resource if not base else None, unquote(fragment)))
            stack.extend((value, f"{pointer}/{escape(key)}", resource) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, f"{pointer}/{i}", resource) for i, value in enumerate(node))
    return {
        f"{at}{fragment}" for start, fragment in found for at in ([start] if start is not None else resources)
    }


def _within(pointer: str, top: str) -> bool:
    return pointer == top or pointer.startswith(top + "/")


def _order(pair: tuple[str, int, str]) -> tuple[tuple[int, int, str], ...]:
    """Document order, a list's branches by number."""
    outer, index, _ = pair
    tokens = [*outer.split("/")[1:], str(index)]
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in tokens)
