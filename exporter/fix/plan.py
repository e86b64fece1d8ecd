"""Which families `gdx fix` rewrites, and into what: pure, from what `gdx lint` already found.

A family with a `dynamic_schema` warning or error (its variants are injected per request, so every
request compiles) gets its static schema (exporter/schema/static.py) and the list of constraints that
moved to the check after decoding. An `info` is a family of static variants each reused: nothing to
fix. The folder a family's files go to is made from its name with everything but letters, digits,
`_` and `-` replaced, plus its id: a title never leaves the output folder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.lint.report import FamilyReport, Report
from exporter.lint.requests import Request
from exporter.schema import identity
from exporter.schema.findings import Thresholds
from exporter.schema.flatten import flatten
from exporter.schema.static import Merged, Moved, Rewrite, merge
from exporter.schema.walk import unescape

UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
# Slow-compile findings a check after decoding can take over: the keyword goes from the grammar (the
# accepted set only grows) and the check holds it. A bounded quantifier only in `pattern` (dropping a
# `patternProperties` entry could hand its properties to `additionalProperties: false`).
REWRITES = {
    "max_items": ("minItems", "maxItems"),
    "bounded_quantifier": ("pattern",),
    "large_enum": ("enum",),
}
NAME_CHARS = 48
NON_MONOTONE = frozenset({"not", "if"})  # a keyword dropped under these does not only widen


@dataclass(frozen=True)
class FamilyPlan:
    """One family to fix: its variants (parsed, in log order), their requests and the merge."""

    family: str  # the family id, as gdx lint and the dashboards name it
    name: str
    folder: str  # a safe relative folder name
    severity: str  # of its dynamic_schema finding
    requests: int
    variants: tuple[Any, ...]
    hashes: tuple[str, ...]
    merged: Merged

    @property
    def static_text(self) -> str:
        """The static schema as the service sends it: compact, in the variants' key order (which the
        engine's grammar follows: properties are emitted in the declared order)."""
        return json.dumps(self.merged.schema, ensure_ascii=False, separators=(",", ":"))


def folder_name(name: str, family: str) -> str:
    safe = UNSAFE.sub("-", name).strip("-")[:NAME_CHARS].strip("-")
    return f"{safe}-{family}" if safe else family


def schemas_by_hash(requests: Sequence[Request]) -> dict[str, dict[str, Any]]:
    """Each distinct JSON Schema of the requests, decoded, by its schema_hash (the reports' key)."""
    parsed: dict[str, dict[str, Any]] = {}
    for request in requests:
        if request.kind == "json" and isinstance(request.parsed, dict):
            parsed.setdefault(identity.schema_hash(request.text, request.parsed), request.parsed)
    return parsed


def plans(report: Report, parsed: dict[str, dict[str, Any]]) -> list[FamilyPlan]:
    """A plan per JSON Schema family whose `dynamic_schema` finding is a warning or an error;
    `parsed`: schemas_by_hash of the requests."""
    out = []
    for family in report.families:
        severity = dynamic_severity(family)
        if not severity or family.kind != "json":
            continue
        hashes = tuple(schema.schema_hash for schema in family.schemas if schema.schema_hash in parsed)
        variants = tuple(parsed[h] for h in hashes)
        out.append(
            FamilyPlan(
                family.family, family.name, folder_name(family.name, family.family), severity,
                family.requests, variants, hashes, merge(variants),
            )
        )  # fmt: skip
    return out


def slow_plans(
    report: Report,
    parsed: dict[str, dict[str, Any]],
    fixed: Sequence[FamilyPlan],
    union_depth: int = Thresholds().union_depth,
) -> list[FamilyPlan]:
    """A plan per distinct JSON Schema (outside the families already fixed) with a slow-compile
    warning or error whose keyword the check can hold: that keyword dropped, listed as moved. Unions
    nested past `union_depth` (gdx lint's limit) are flattened where that keeps what the schema
    accepts (exporter/schema/flatten.py: nothing moves, each rewrite is listed); where none can be,
    the plan has no schema and says why."""
    done = {h for plan in fixed for h in plan.hashes}
    out = []
    for family in report.families:
        for schema in family.schemas:
            if schema.schema_hash in done or schema.schema_hash not in parsed:
                continue
            findings = [f for f in schema.findings if f.severity in ("warning", "error")]
            flagged = [f for f in findings if f.rule in REWRITES]
            slow = [f for f in flagged if f.pointer.rsplit("/", 1)[-1] in REWRITES[f.rule]]
            unions = [f.pointer for f in findings if f.rule == "union_depth"]
            if not flagged and not unions:
                continue
            merged = relaxed(parsed[schema.schema_hash], [f.pointer for f in slow])
            if unions:
                flat = flatten(merged.schema, unions, union_depth)
                merged = Merged(flat.schema, merged.moved, rewrites=flat.rewrites)
            if not merged.moved and not any(r.done for r in merged.rewrites):
                why = _not_flattened(merged.rewrites) if unions else _kept(flagged)
                merged = Merged(None, (), why, merged.rewrites)  # said in the report, never silent
            name = schema.title or family.name
            rules = sorted({f.rule for f in flagged} | ({"union_depth"} if unions else set()))
            out.append(
                FamilyPlan(
                    schema.schema_hash, name, folder_name(name, schema.schema_hash), "/".join(rules),
                    schema.lines, (parsed[schema.schema_hash],), (schema.schema_hash,), merged,
                )
            )  # fmt: skip
    return out


def _kept(findings: Sequence[Any]) -> str:
    """Why a schema's slow keywords stay in the grammar (the first: the report names the schema)."""
    pointer = findings[0].pointer
    if "/patternProperties/" in pointer:
        return (f"{pointer}: a patternProperties entry stays (dropping it could hand its properties to "
                "additionalProperties: false)")  # fmt: skip
    return f"{pointer}: under a not, an if or a $ref (dropping it there does not only widen what is accepted)"


def _not_flattened(rewrites: Sequence[Rewrite]) -> str:
    """Why a schema's nested unions stay (the first two findings; the report lists them all)."""
    left = [f"{r.pointer}: {r.what}" for r in rewrites if not r.done]
    more = f" (and {len(left) - 2} more)" if len(left) > 2 else ""
    return "its nested unions stay: " + "; ".join(left[:2]) + more


def relaxed(schema: dict[str, Any], pointers: Sequence[str]) -> Merged:
    """The schema without the keywords at `pointers` (JSON pointers to keywords), and what moved.
    Dropping a keyword widens what its subschema accepts, and so what the schema accepts, except
    under a `not` or an `if` (the widening turns into a narrowing, or another branch): a pointer
    through one of those is left, as is one through a `$ref` (the walk does not follow it here)."""
    copy = json.loads(json.dumps(schema))
    moved = []
    for pointer in sorted(set(pointers)):
        *path, keyword = [unescape(token) for token in pointer.split("/")[1:]]
        node: Any = copy
        for token in path:
            if token in NON_MONOTONE:
                node = None
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                node = node.get(token) if isinstance(node, dict) else None
        if isinstance(node, dict) and keyword in node:
            del node[keyword]
            moved.append(Moved(pointer.rsplit("/", 1)[0], keyword))
    return Merged(copy, tuple(moved))


def dynamic_severity(family: FamilyReport) -> str:
    """Its `dynamic_schema` finding's severity when a warning or an error (injected per request), else ""."""
    for finding in family.findings:
        if finding.rule == "dynamic_schema" and finding.severity in ("warning", "error"):
            return finding.severity
    return ""
