"""`gdx lint --format sarif` and `--format github`: the report as code scanning and CI annotations read it.

SARIF 2.1.0, one run: every rule (reported or not) with its descriptions, help (the fix) and link
(exporter/lint/rules.py), each result at its file, line and column (columns in Unicode code points),
a family's other members as related locations, `partialFingerprints` that survive reindenting and
key reordering (exporter/lint/located.py), and the engine versions the findings hold for in the run's
properties. GitHub's workflow commands print one `::error|warning|notice file=,line=,col=,title=::`
line per finding, escaped as the runner requires.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from exporter import __version__
from exporter.lint.locate import Location
from exporter.lint.located import Located
from exporter.lint.rules import DEFAULT_SEVERITY, DOCS, HELP, LEVELS, RULES_ANCHOR, RuleHelp

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "gdxFinding/v1"
GITHUB_COMMANDS = {"error": "error", "warning": "warning", "info": "notice"}


def _rule(rule_id: str) -> dict[str, Any]:
    help_ = HELP.get(rule_id, RuleHelp(rule_id, rule_id, ""))
    uri = f"{DOCS}{RULES_ANCHOR}"
    return {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in rule_id.split("_")),
        "shortDescription": {"text": help_.short},
        "fullDescription": {"text": help_.full},
        "help": {
            "text": f"{help_.full} Fix: {help_.fix} See {uri}",
            "markdown": f"{help_.full}\n\n**Fix:** {help_.fix}\n\n[Documentation]({uri})",
        },
        "helpUri": uri,
        "defaultConfiguration": {"level": LEVELS[DEFAULT_SEVERITY.get(rule_id, "warning")]},
        "properties": {"tags": ["structured-outputs", "grammar"]},
    }


def _artifact(path: str) -> dict[str, Any]:
    """A relative path as a relative URI against the checkout (`%SRCROOT%`, what code scanning maps to
    the repository), an absolute one as a file URI."""
    if Path(path).is_absolute():
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(Path(path).as_posix()), "uriBaseId": "%SRCROOT%"}


def _physical(location: Location) -> dict[str, Any]:
    region = {"startLine": max(1, location.line), "startColumn": max(1, location.column)}
    return {"physicalLocation": {"artifactLocation": _artifact(location.path), "region": region}}


def sarif(found: Iterable[Located], engines: Mapping[str, str]) -> dict[str, Any]:
    """The SARIF log of these findings; `engines`: {engine: version the findings hold for}."""
    results = []
    descriptors = [_rule(rule_id) for rule_id in HELP]  # every rule, reported or not
    rules = {rule_id: i for i, rule_id in enumerate(HELP)}
    for item in found:
        finding = item.finding
        if finding.rule not in rules:
            rules[finding.rule] = len(descriptors)
            descriptors.append(_rule(finding.rule))
        result: dict[str, Any] = {
            "ruleId": finding.rule,
            "ruleIndex": rules[finding.rule],
            "level": LEVELS.get(finding.severity, "warning"),
            "message": {"text": f"{finding.message} Fix: {finding.fix}" if finding.fix else finding.message},
            "locations": [_physical(item.location)],
            "partialFingerprints": {FINGERPRINT_KEY: item.fingerprint},
            "properties": {"pointer": finding.pointer, "keyword": finding.keyword, "spec": item.spec},
        }
        if item.related:
            result["relatedLocations"] = [
                {**_physical(where), "id": i, "message": {"text": "another member of this family"}}
                for i, where in enumerate(item.related, 1)
            ]
        results.append(result)
    driver = {
        "name": "gdx lint",
        "fullName": "guided-decoding-exporter gdx lint",
        "version": __version__,
        "informationUri": DOCS,
        "rules": descriptors,
    }
    run = {
        "tool": {"driver": driver},
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {"engines": dict(engines)},
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(found: Iterable[Located]) -> Iterable[str]:
    """One workflow command per finding: `::error file=F,line=L,col=C,title=RULE::message`."""
    for item in found:
        finding, where = item.finding, item.location
        fields = [f"file={_escape_property(where.path)}"]
        if where.line:
            fields.append(f"line={where.line}")
        if where.column:
            fields.append(f"col={where.column}")
        fields.append(f"title={_escape_property(finding.rule)}")
        message = f"{finding.message} (fix: {finding.fix})" if finding.fix else finding.message
        command = GITHUB_COMMANDS.get(finding.severity, "warning")
        yield f"::{command} {','.join(fields)}::{_escape_data(message)}"
