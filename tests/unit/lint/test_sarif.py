# ruff: noqa: E501  (commands read better on one line)
"""The pieces of `--format sarif` and `--format github` that need no engine: every rule described in
code and in the documentation's table, levels, URIs, fingerprints and the runner's escaping."""

from __future__ import annotations

import re
from pathlib import Path

from exporter.analysis.lint import RULES
from exporter.lint.locate import Location
from exporter.lint.located import Located, fingerprint
from exporter.lint.rules import HELP, LEVELS
from exporter.lint.sarif import github, sarif
from exporter.schema.findings import SEVERITIES, Finding

ROOT = Path(__file__).resolve().parents[3]


def test_every_rule_has_help_here_and_a_row_in_the_documentation() -> None:
    rules = {*RULES, "request_rejected"}
    assert set(HELP) == rules
    table = (ROOT / "docs" / "reference" / "lint-rules.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE))
    assert set(RULES) <= rows, set(RULES) - rows
    assert all(h.short and h.full and h.fix for h in HELP.values())
    assert set(LEVELS) == set(SEVERITIES) and set(LEVELS.values()) <= {"error", "warning", "note"}


def item(path: str, severity: str = "warning", message: str = "m") -> Located:
    finding = Finding("large_enum", severity, "/properties/a/enum", message, "use a string")
    return Located(
        finding, Location(path, 3, 7), (Location(path, 9, 1),), fingerprint("large_enum", "", "/p", "h"), "h"
    )


def test_results_are_at_their_place_with_a_relative_or_file_uri() -> None:
    log = sarif([item("schemas/a b.json", "info"), item("/abs/x.json", "error")], {"xgrammar": "0.2.9"})
    run = log["runs"][0]
    assert log["version"] == "2.1.0" and run["columnKind"] == "unicodeCodePoints"
    assert run["properties"] == {"engines": {"xgrammar": "0.2.9"}}
    first, second = run["results"]
    where = first["locations"][0]["physicalLocation"]
    assert where["artifactLocation"] == {"uri": "schemas/a%20b.json", "uriBaseId": "%SRCROOT%"}
    assert where["region"] == {"startLine": 3, "startColumn": 7}
    assert second["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///abs/x.json"}
    assert (first["level"], second["level"]) == ("note", "error")
    assert first["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 9
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(HELP) and first["ruleIndex"] == second["ruleIndex"]
    assert rules[first["ruleIndex"]]["id"] == "large_enum"
    assert rules[first["ruleIndex"]]["defaultConfiguration"] == {"level": "note"}


def test_fingerprints_depend_on_the_finding_not_on_where_it_is() -> None:
    assert fingerprint("depth", "", "/a", "h1") == fingerprint("depth", "", "/a", "h1")
    assert len({fingerprint("depth", "", "/a", "h1"), fingerprint("depth", "", "/b", "h1"),
                fingerprint("depth", "", "/a", "h2"), fingerprint("max_items", "", "/a", "h1")}) == 4  # fmt: skip


def test_github_commands_escape_what_the_runner_reads_as_syntax() -> None:
    (line,) = github([item("a,b:c%.json", "info", "two\nlines, 100%")])
    assert line == (
        "::notice file=a%2Cb%3Ac%25.json,line=3,col=7,title=large_enum::two%0Alines, 100%25 (fix: use a string)"
    )
    (error,) = github([item("x.json", "error")])
    assert error.startswith("::error file=x.json,line=3,col=7,title=large_enum::")
