"""`suppress.apply` without a place to look up: a configuration of rules only (select, ignore) leaves
out the same findings whether or not each finding is located first."""

from __future__ import annotations

import io
import json
from pathlib import Path

from exporter.lint import suppress
from exporter.lint.lintconfig import LintConfig
from exporter.lint.report import Report, analyse
from exporter.lint.requests import read_inputs
from exporter.schema.findings import Thresholds

SCHEMAS = [
    {"type": "object", "properties": {"a": {"enum": [f"v{i}" for i in range(300)]}}},
    {"type": "array", "items": {"type": "string"}, "maxItems": 5000},
    {"type": "string", "format": "email", "minLength": 2},
    {"type": "object", "properties": {"b": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["b"]},
]


def rules_of(report: Report) -> list[str]:
    return [f.rule for f in report.findings()]


def test_rules_alone_leave_out_what_the_located_walk_leaves_out(tmp_path: Path) -> None:
    log = tmp_path / "schemas.jsonl"
    log.write_text("".join(json.dumps(s) + "\n" for s in SCHEMAS), encoding="utf-8")
    inputs = read_inputs([str(log)], io.StringIO())
    report = analyse(inputs, Thresholds(), ["xgrammar", "llguidance"])
    found = rules_of(report)
    assert len(set(found)) >= 3, found
    kept, dropped = found[0], sorted(set(found) - {found[0]})
    for settings in (
        LintConfig(),
        LintConfig(ignore=frozenset({kept})),
        LintConfig(select=frozenset({kept})),
        LintConfig(select=frozenset(dropped), ignore=frozenset(dropped[:1])),
    ):
        fast = suppress.apply(report, inputs.requests, settings)
        # a per-path ignore that matches no file sends the same configuration through `located`
        placed = LintConfig(
            select=settings.select,
            ignore=settings.ignore,
            per_path_ignores=(("no/such/file/*", frozenset({kept})),),
        )
        slow = suppress.apply(report, inputs.requests, placed)
        assert rules_of(fast.report) == rules_of(slow.report)
        assert fast.ignored == slow.ignored == len(found) - len(rules_of(fast.report))
        assert all(settings.reported(rule, "") for rule in rules_of(fast.report))
    assert suppress.apply(report, inputs.requests, LintConfig()).report is report
