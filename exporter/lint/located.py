"""Each finding of a lint report with its place in the files and a fingerprint that outlives edits.

A schema's findings sit at the node their pointer names in the first request that sent the schema; a
family's (`dynamic_schema`) at its first member's, the other members' first requests listed beside;
a rejected request at its line. The fingerprint is what code scanning follows a finding by across
commits: the rule, the keyword, the pointer and the spec's canonical `schema_hash` (a family's id for
a family finding), so reindenting a file or reordering its keys keeps it, and moving a schema to
other lines too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from exporter.lint.locate import Location, Locator
from exporter.lint.report import Report
from exporter.lint.requests import Request
from exporter.schema.findings import Finding


@dataclass(frozen=True)
class Located:
    finding: Finding
    location: Location
    related: tuple[Location, ...]  # a family's other members
    fingerprint: str
    spec: str  # the schema_hash (or family id, or request name) the finding is about


def fingerprint(rule: str, keyword: str, pointer: str, spec: str) -> str:
    text = json.dumps([rule, keyword, pointer, spec])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def located(report: Report, requests: Sequence[Request], locator: Locator | None = None) -> Iterator[Located]:
    """Every finding of the report, in the report's order, located."""
    locator = locator or Locator()
    parsed = {request.name: request.parsed for request in requests}
    for family in report.families:
        first, *others = family.schemas
        related = tuple(locator.locate(s.name, "", parsed.get(s.name)) for s in others)
        for finding in family.findings:
            where = locator.locate(first.name, finding.pointer, parsed.get(first.name))
            key = fingerprint(finding.rule, finding.keyword, finding.pointer, family.family)
            yield Located(finding, where, related, key, family.family)
        for schema in family.schemas:
            for finding in schema.findings:
                where = locator.locate(schema.name, finding.pointer, parsed.get(schema.name))
                key = fingerprint(finding.rule, finding.keyword, finding.pointer, schema.schema_hash)
                yield Located(finding, where, (), key, schema.schema_hash)
    for rejected in report.rejected:
        where = locator.locate(rejected.name)
        finding = rejected.finding
        key = fingerprint(finding.rule, finding.keyword, "", finding.message)
        yield Located(finding, where, (), key, rejected.name)
