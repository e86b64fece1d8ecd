"""`gdx lint --engine vllm==V --write-guard FILE`: the refusals lint predicts, as the verdict list the
probe's guard loads (GDX_GUARD_FILE, exporter/probe/guard.py): each schema whose API-server validation
killed the bounded step (server_crash) or ran a second or more (server_stall at error), by schema
hash, the hash the probe computes from the request. A ConfigMap carries the file to the pods."""

from __future__ import annotations

from typing import Any

from exporter.lint.report import Report

GUARDED = {"server_crash": "error", "server_stall": "error"}  # rule -> the severity that refuses


def verdicts(report: Report, version: str) -> dict[str, Any]:
    """The guard file's document: {"vllm": V, "verdicts": [{schema_hash, reason, detail}]}, one per
    schema (its crash before its stall), sorted by hash so that the file diffs cleanly."""
    found: dict[str, dict[str, str]] = {}
    for group in report.families:
        for schema in group.schemas:
            for finding in schema.findings:
                if GUARDED.get(finding.rule) != finding.severity:
                    continue
                if schema.schema_hash in found and found[schema.schema_hash]["reason"] == "server_crash":
                    continue
                detail = f"{finding.rule} under gdx lint --engine vllm=={version}"
                found[schema.schema_hash] = {"schema_hash": schema.schema_hash, "reason": finding.rule,
                                             "detail": detail}  # fmt: skip
    return {"vllm": version, "verdicts": [found[h] for h in sorted(found)]}
