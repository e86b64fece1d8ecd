"""Iterative, budgeted traversal of a JSON Schema's subschema positions.

Only positions that hold schemas are visited (never `enum`, `const`, `default` or `examples`, whose
values may look like schemas). Local `$ref`s (`#/...`) are followed so that depth and union nesting
are measured as the engine expands them; a `$ref` back into its own chain is reported as a cycle and
not followed. No recursion (10,000-deep input is fine) and a node and time budget: past it the walk
stops with `TooComplex`, which the linter turns into a `too_complex` finding.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# keyword -> how its value holds subschemas: "one" (a schema), "map" (name -> schema), "list"
SUBSCHEMAS = {
    "properties": "map",
    "patternProperties": "map",
    "$defs": "map",
    "definitions": "map",
    "dependentSchemas": "map",
    "additionalProperties": "one",
    "unevaluatedProperties": "one",
    "propertyNames": "one",
    "items": "one_or_list",
    "prefixItems": "list",
    "additionalItems": "one",
    "unevaluatedItems": "one",
    "contains": "one",
    "not": "one",
    "if": "one",
    "then": "one",
    "else": "one",
    "allOf": "list",
    "anyOf": "list",
    "oneOf": "list",
}
# descending through these is one level of data nesting (an object's field, an array's item)
NESTING = frozenset({"properties", "patternProperties", "additionalProperties", "items", "prefixItems",
                     "additionalItems", "unevaluatedProperties", "unevaluatedItems", "contains"})  # fmt: skip
UNIONS = frozenset({"anyOf", "oneOf"})
DEFINITIONS = frozenset({"$defs", "definitions"})
MAX_REF_EXPANSIONS = 8  # each definition is expanded through $ref at most this many times
# A structural tag's format nodes (xgrammar structural_tag.py): where they hold formats or schemas.
# Walked only when asked (`tags=True`, the family analysis): a tag's `tags` list is its tool union.
FORMAT_TYPES = frozenset({
    "structural_tag", "const_string", "json_schema", "qwen_xml_parameter", "any_text", "token",
    "exclude_token", "any_tokens", "grammar", "regex", "sequence", "or", "tag", "triggered_tags",
    "token_triggered_tags", "tags_with_separator", "optional", "plus", "star", "repeat",
})  # fmt: skip
# A legacy tag (`{"type": "structural_tag", "structures": [{"begin", "schema", "end"}], "triggers"}`)
# holds its calls in `structures`, each call's arguments under `schema`.
FORMAT_CHILDREN = {
    "format": "one", "content": "one", "json_schema": "one", "schema": "one", "elements": "list",
    "tags": "list", "structures": "list",
}  # fmt: skip
TAG_UNIONS = frozenset({"tags", "structures"})  # a tool-call list: branches that come and go like anyOf's


def is_format(value: Any) -> bool:
    """A structural-tag format node (its `type` names a format, never a JSON Schema type), or a legacy
    tag's structure (`begin`, `schema`, `end`)."""
    if not isinstance(value, dict):
        return False
    kind = value.get("type")  # a JSON Schema `type` may be a list (unhashable): never a format's
    return (isinstance(kind, str) and kind in FORMAT_TYPES) or (
        "begin" in value and "end" in value and "schema" in value
    )


class TooComplex(Exception):
    """The schema exceeded the analysis budget."""


@dataclass(frozen=True)
class Budget:
    max_nodes: int = 100_000
    max_seconds: float = 1.0  # of the analysing thread's CPU (cpu_clock), not of the wall


def cpu_clock() -> float:
    """The seconds a Budget counts: this thread's CPU time. A wall clock made the same schema over
    budget on a busy CI runner and within it on an idle one (findings that came and went with the
    load); CPU time bounds the same work either way."""
    return time.thread_time()


@dataclass(frozen=True)
class Node:
    pointer: str  # JSON pointer of this subschema in the document (of the $ref target when followed)
    schema: dict[str, Any]
    depth: int  # data nesting: fields and items descended into
    union_depth: int  # anyOf/oneOf branches descended into
    via: tuple[str, ...]  # pointers of the $refs followed to get here


@dataclass(frozen=True)
class Cycle:
    pointer: str  # the $ref that closes the loop
    target: str


def escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def resolve(root: Any, ref: str) -> tuple[str, Any] | None:
    """The (pointer, node) a local `$ref` names, or None (remote, malformed or dangling)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    pointer = ref[1:]
    node = root
    if pointer:
        if not pointer.startswith("/"):
            return None
        for token in pointer[1:].split("/"):
            key = unescape(token)
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
    return pointer, node


_ORDER = {keyword: i for i, keyword in enumerate(SUBSCHEMAS)}
_FORMAT_ORDER = {keyword: i for i, keyword in enumerate(FORMAT_CHILDREN)}


def children(pointer: str, schema: dict[str, Any], tags: bool = False) -> Iterator[tuple[str, str, Any]]:
    """(keyword, child pointer, child) for every subschema directly under `schema`; with `tags`, a
    structural-tag format node's formats and schemas instead."""
    table, order = (FORMAT_CHILDREN, _FORMAT_ORDER) if tags and is_format(schema) else (SUBSCHEMAS, _ORDER)
    # the table's keywords the schema has, in the table's order: a schema has a few keys, the table 20
    present = [keyword for keyword in schema if keyword in table]
    if len(present) > 1:
        present.sort(key=order.__getitem__)
    for keyword in present:
        how = table[keyword]
        value = schema[keyword]
        base = f"{pointer}/{escape(keyword)}"
        if how == "map" and isinstance(value, dict):
            # by name, not as written: what the walk finds first (the path a depth or a cycle is
            # reported at) must not change when a file's keys are reordered
            for name in sorted(value, key=str):
                yield keyword, f"{base}/{escape(str(name))}", value[name]
        elif how in ("list", "one_or_list") and isinstance(value, list):
            for i, child in enumerate(value):
                yield keyword, f"{base}/{i}", child
        elif how in ("one", "one_or_list"):
            yield keyword, base, value


def walk(
    root: Any,
    budget: Budget = Budget(),
    cycles: list[Cycle] | None = None,
    follow_refs: bool = True,
    tags: bool = False,
) -> Iterator[Node]:
    """Every subschema (dicts only; booleans are trivially fine), depth first, local refs followed.

    A definition is expanded again through another $ref only when it is reached deeper (in data or
    union nesting) than every earlier expansion, at most MAX_REF_EXPANSIONS times: enough to measure
    the deepest path without walking a definition once per use."""
    started = cpu_clock()
    expansions: dict[str, list[tuple[int, int]]] = {}
    stack: list[Node] = []
    if isinstance(root, dict):
        stack.append(Node("", root, 0, 0, ()))
    visited = 0
    while stack:
        node = stack.pop()
        visited += 1
        if visited > budget.max_nodes or (visited % 256 == 0 and cpu_clock() - started > budget.max_seconds):
            raise TooComplex(f"more than {visited - 1} subschemas or {budget.max_seconds:g}s of CPU")
        yield node
        schema = node.schema
        ref = schema.get("$ref") if follow_refs else None
        if isinstance(ref, str):
            found = resolve(root, ref)
            if found is not None and isinstance(found[1], dict):
                target, target_schema = found
                if target in node.via or target == node.pointer or node.pointer.startswith(target + "/"):
                    if cycles is not None:
                        cycles.append(Cycle(f"{node.pointer}/$ref", target))
                else:
                    seen = expansions.setdefault(target, [])
                    deeper = all(node.depth > depth or node.union_depth > unions for depth, unions in seen)
                    if deeper and len(seen) < MAX_REF_EXPANSIONS:
                        seen.append((node.depth, node.union_depth))
                        stack.append(
                            Node(target, target_schema, node.depth, node.union_depth, (*node.via, target))
                        )
        for keyword, pointer, child in children(node.pointer, schema, tags):
            if not isinstance(child, dict):
                continue
            if keyword in DEFINITIONS and node.via:
                continue  # definitions are reached through their $refs, not walked again
            depth = node.depth + (keyword in NESTING)
            unions = node.union_depth + (keyword in UNIONS)
            if keyword in DEFINITIONS:
                depth, unions = 0, 0  # a definition's own depth counts from where it is used
            stack.append(Node(pointer, child, depth, unions, node.via))


def ref_target(root: Any, schema: Any, hops: int = 16) -> Any:
    """The subschema a chain of local `$ref`s ends at, at most `hops` deep (what xgrammar compiles:
    the target only); the last schema reached when a reference does not resolve."""
    while hops and isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        found = resolve(root, schema["$ref"])
        if found is None:
            return schema
        schema, hops = found[1], hops - 1
    return schema


def inline_ref(branch: Any, root: Any, hops: int = 4) -> Any:
    """A branch with its local `$ref` replaced by the target, its other keywords kept over the
    target's, a few hops deep (how a oneOf branch reads for disjointness)."""
    while hops and isinstance(branch, dict) and isinstance(branch.get("$ref"), str) and root is not None:
        found = resolve(root, branch["$ref"])
        if found is None or not isinstance(found[1], dict):
            return branch
        branch = {**found[1], **{k: v for k, v in branch.items() if k != "$ref"}}
        hops -= 1
    return branch
