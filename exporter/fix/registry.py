"""The registry `gdx fix` recommends: the static schemas a new replica should compile before its first
user request (`gdx warm DIR/registry/`, or a ConfigMap made of it for `gdx inject --warm-configmap`).

It holds every proven fix's static schema, then the log's schemas that are already static and reused
(sent by two requests or more, outside any family injected per request), most requested first, up
to `limit`: a replica that starts with them compiled serves the traffic the log shows from its cache.
A schema injected per request is never in it (its next variant is new anyway). Each file is named
like the fix folders (letters, digits, `_` and `-` of the title, then the hash), so no title leaves
the folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.fix.plan import FamilyPlan, dynamic_severity, folder_name
from exporter.lint.report import Report

LIMIT = 64  # schemas a replica warms: each is one compile before it takes traffic


@dataclass(frozen=True)
class Entry:
    file: str  # the file name in DIR/registry/
    text: str  # the schema as a service sends it (compact, the key order kept)
    requests: int  # requests in the log it serves
    source: str  # "fix" (a proven static schema) or "log" (a static schema the log reuses)


def entries(
    report: Report, parsed: dict[str, dict[str, Any]], fixed: Sequence[FamilyPlan], limit: int = LIMIT
) -> list[Entry]:
    """The registry: `fixed` (the proven plans) first, then the reused static schemas of `report`
    (`parsed`: plan.schemas_by_hash of the requests)."""
    out = [Entry(f"{plan.folder}.json", plan.static_text, plan.requests, "fix") for plan in fixed]
    taken = {h for plan in fixed for h in plan.hashes}
    reused: list[Entry] = []
    for family in report.families:
        if family.kind != "json" or dynamic_severity(family):
            continue
        for schema in family.schemas:
            if schema.schema_hash in taken or schema.schema_hash not in parsed or schema.lines < 2:
                continue
            text = json.dumps(parsed[schema.schema_hash], ensure_ascii=False, separators=(",", ":"))
            name = folder_name(schema.title or family.name, schema.schema_hash)
            reused.append(Entry(f"{name}.json", text, schema.lines, "log"))
    reused.sort(key=lambda entry: (-entry.requests, entry.file))
    return (out + reused)[:limit]


def write(folder: Path, found: Sequence[Entry]) -> None:
    """DIR/registry/ holds exactly `found` afterwards (a previous run's other `*.json` removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    keep = {entry.file for entry in found}
    for stale in folder.glob("*.json"):
        if stale.name not in keep:
            stale.unlink()
    for entry in found:
        (folder / entry.file).write_text(entry.text + "\n", encoding="utf-8")
