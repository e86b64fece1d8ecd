"""The rules that read a schema's structure alone, true of JSON Schema whatever engine compiles it:
nesting, unions, bounded repeats, enum and item counts. Each grammar engine turns every one of these
into states (the thresholds were measured on xgrammar and llguidance, exporter/schema/findings.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from exporter.schema import regex
from exporter.schema.findings import Finding, Thresholds
from exporter.schema.walk import Node, escape


def depth(node: Node, limits: Thresholds) -> Iterable[Finding]:
    """Levels of objects and arrays, the root being level 1: the demo's invoice schema (envelope,
    line_items array, line item) has 3."""
    if node.depth == limits.depth and _is_container(node.schema):
        yield Finding(
            "depth", "warning", node.pointer,
            f"object/array nesting reaches level {node.depth + 1} here (limit {limits.depth}): "
            "every level multiplies grammar states",
            f"flatten to at most {limits.depth} levels; "
            "move deep detail into a second request or post-processing",
        )  # fmt: skip


def union_depth(node: Node, limits: Thresholds) -> Iterable[Finding]:
    key = "anyOf" if "anyOf" in node.schema else "oneOf" if "oneOf" in node.schema else ""
    if key and node.union_depth == limits.union_depth:
        yield Finding(
            "union_depth", "warning", f"{node.pointer}/{key}",
            f"anyOf/oneOf nested {node.union_depth + 1} deep here (limit {limits.union_depth})",
            "flatten the unions into one discriminated union at one level",
        )  # fmt: skip


def union_width(node: Node, limits: Thresholds) -> Iterable[Finding]:
    for key in ("anyOf", "oneOf"):
        branches = node.schema.get(key)
        if isinstance(branches, list) and len(branches) > limits.union_width:
            yield Finding(
                "union_width", "info", f"{node.pointer}/{key}",
                f"{len(branches)} branches (limit {limits.union_width})",
                "split into fewer, distinct alternatives or into separate schemas per request type",
            )  # fmt: skip


def bounded_quantifier(node: Node, limits: Thresholds) -> Iterable[Finding]:
    for pointer, pattern in _patterns(node):
        facts = regex.analyse(pattern)
        if facts is not None and facts.max_bounded_repeat > limits.quantifier:
            yield Finding(
                "bounded_quantifier", "warning", pointer,
                f"a bounded repeat up to {facts.max_bounded_repeat} unrolls into as many grammar states",
                "drop the length bound from the pattern (use maxLength) or check the format after decoding",
            )  # fmt: skip


def large_enum(node: Node, limits: Thresholds) -> Iterable[Finding]:
    values = node.schema.get("enum")
    if isinstance(values, list) and len(values) > limits.enum_size:
        yield Finding(
            "large_enum", "info", f"{node.pointer}/enum",
            f"{len(values)} members (limit {limits.enum_size})",
            "constrain to a string and validate membership after decoding",
        )  # fmt: skip


def max_items(node: Node, limits: Thresholds) -> Iterable[Finding]:
    for key in ("minItems", "maxItems"):
        value = node.schema.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limits.max_items:
            yield Finding(
                "max_items", "warning", f"{node.pointer}/{key}",
                f"{key} {value} (limit {limits.max_items}): each counted item is a grammar state",
                f"drop {key} from the grammar and check the count after decoding",
            )  # fmt: skip


def _is_container(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return bool({"object", "array"} & {k for k in kinds if isinstance(k, str)}) or any(
        keyword in schema for keyword in ("properties", "items", "prefixItems", "additionalProperties")
    )


def _patterns(node: Node) -> Iterable[tuple[str, str]]:
    pattern = node.schema.get("pattern")
    if isinstance(pattern, str):
        yield f"{node.pointer}/pattern", pattern
    names = node.schema.get("patternProperties")
    if isinstance(names, dict):
        for name in names:
            yield f"{node.pointer}/patternProperties/{escape(name)}", name
