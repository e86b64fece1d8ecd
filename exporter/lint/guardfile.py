"""`gdx lint --engine vllm==V --write-guard FILE`: the refusals lint predicts, as the verdict list the
probe's guard loads (GDX_GUARD_FILE, exporter/probe/guard.py): each schema whose API-server validation
killed the bounded step (server_crash) or ran a second or more (server_stall at error), by schema
hash, the hash the probe computes from the request. With `--write-guard-unions`, also each schema with
a union_depth finding (anyOf/oneOf nested --lint.union-depth deep), as compile_budget: refused on every
path, with the screens (identity.screen_key) the guard tests every request by first. A ConfigMap
carries the file to the pods."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from exporter.lint.report import Report
from exporter.lint.requests import Request
from exporter.schema.identity import screen_key
from exporter.wire import GUARD_RANK

GUARDED = {"server_crash": "error", "server_stall": "error"}  # rule -> the severity that refuses


def verdicts(
    report: Report, version: str, requests: Iterable[Request] = (), unions: bool = False
) -> dict[str, Any]:
    """The guard file's document: {"vllm": V, "verdicts": [{schema_hash, reason, detail[, screens]}]},
    one per schema (its crash before its stall before its unions), sorted by hash so that the file
    diffs cleanly. `requests`: where the screens of a compile_budget verdict come from."""
    first = {r.name: r for r in requests} if unions else {}
    found: dict[str, dict[str, Any]] = {}
    for group in report.families:
        for schema in group.schemas:
            for finding in schema.findings:
                if GUARDED.get(finding.rule) == finding.severity:
                    reason, detail = finding.rule, f"{finding.rule} under gdx lint --engine vllm=={version}"
                elif unions and finding.rule == "union_depth":
                    reason, detail = "compile_budget", f"gdx lint: {finding.message}"
                else:
                    continue
                known = found.get(schema.schema_hash)
                if known is not None and GUARD_RANK[known["reason"]] >= GUARD_RANK[reason]:  # the worst
                    continue
                entry: dict[str, Any] = {
                    "schema_hash": schema.schema_hash,
                    "reason": reason,
                    "detail": detail,
                }
                request = first.get(schema.name)
                if reason == "compile_budget" and request is not None:
                    entry["screens"] = [list(screen_key(request.text)), list(screen_key(request.parsed))]
                found[schema.schema_hash] = entry
    return {"vllm": version, "verdicts": [found[h] for h in sorted(found)]}
