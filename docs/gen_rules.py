"""docs/reference/lint-rules.md: every rule of `gdx lint` (exporter/analysis/lint.py's RULES), with the
severity, descriptions and fix that SARIF carries (exporter/lint/rules.py)."""

from __future__ import annotations

from pathlib import Path

from gen_common import REFERENCE, cell, header, row, table

from exporter.analysis.lint import RULES
from exporter.lint.lintconfig import REJECTED_RULE
from exporter.lint.rules import DEFAULT_SEVERITY, HELP

PAGE = REFERENCE / "lint-rules.md"


def page() -> str:
    lines = header(
        "Lint rules reference",
        "For whoever reads a `gdx lint` finding or configures CI: each rule, its usual severity, what it"
        " means and the fix. The limits are the `--lint.*` flags ([flags.md](flags.md)); how the analysis"
        " decides, at length: [schema-analysis.md](../schema-analysis.md#the-rules).",
        "docs/gen_rules.py",
        "`exporter/analysis/lint.py` (RULES) and `exporter/lint/rules.py` (HELP, DEFAULT_SEVERITY)",
    )
    rows = []
    for rule in (*RULES, REJECTED_RULE):
        help_ = HELP[rule]
        rows.append(
            row(f"`{rule}`", DEFAULT_SEVERITY[rule], cell(help_.short), cell(help_.full), cell(help_.fix))
        )
    lines += [
        "A finding's own severity can differ from the usual one: `dynamic_schema` and `server_stall` grow",
        "with what they measure. Select or ignore rules in CI with `select`, `ignore` and",
        "`per-path-ignores` ([lint-in-ci.md](../lint-in-ci.md)).",
        "",
        "## Rules",
        "",
        *table(("rule", "usual severity", "what", "when it fires, and what it costs", "fix"), rows),
        "",
    ]
    return "\n".join(lines)


def pages() -> dict[Path, str]:
    return {PAGE: page()}
