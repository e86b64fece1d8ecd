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
from exporter.schema.static import Merged, merge

UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
NAME_CHARS = 48


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


def plans(report: Report, requests: Sequence[Request]) -> list[FamilyPlan]:
    """A plan per JSON Schema family whose `dynamic_schema` finding is a warning or an error."""
    parsed: dict[str, Any] = {}
    for request in requests:
        if request.kind == "json" and isinstance(request.parsed, dict):
            parsed.setdefault(identity.schema_hash(request.text, request.parsed), request.parsed)
    out = []
    for family in report.families:
        severity = _dynamic(family)
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


def _dynamic(family: FamilyReport) -> str:
    for finding in family.findings:
        if finding.rule == "dynamic_schema" and finding.severity in ("warning", "error"):
            return finding.severity
    return ""
