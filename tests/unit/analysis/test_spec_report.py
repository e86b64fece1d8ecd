"""The analysis core (exporter/analysis/spec_report.py): one verdict per spec, its text decoded once on
every path that analyses it (the core itself, the daemon's analysis, `gdx lint`'s report)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from exporter.analysis import spec_report
from exporter.daemon.receiver.analysis import SchemaAnalysis
from exporter.lint.report import analyse as lint_analyse
from exporter.lint.requests import Inputs, Request, parse_file
from exporter.probe.spec_identity import identify
from exporter.schema.findings import Thresholds

SCHEMA = {
    "title": "Invoice",
    "type": "object",
    "properties": {"tier": {"enum": ["free", "pro"]}, "email": {"type": "string", "format": "email"}},
    "required": ["tier"],
}
TAG = {
    "type": "structural_tag",
    "structures": [{"begin": "<f>", "schema": {"type": "object", "minProperties": 1}, "end": "</f>"}],
    "triggers": ["<f>"],
}


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every json.loads call made while the test runs, by the text it decoded."""
    calls: list[str] = []
    real = json.loads

    def counted(text: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(text if isinstance(text, str) else "<bytes>")
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counted)
    yield calls


@pytest.mark.parametrize(
    ("kind", "text", "decodes"),
    [
        ("json", json.dumps(SCHEMA), 1),
        ("json_object", json.dumps(SCHEMA), 1),
        ("structural_tag", json.dumps(TAG), 1),
        ("choice", json.dumps(["a", "b"]), 1),
        ("json", "{not json", 1),
        ("regex", r"[a-z]{8,64}", 0),
        ("grammar", 'root ::= "a" | "b"', 0),
        ("auto", json.dumps(SCHEMA), 1),
    ],
)
def test_the_core_decodes_a_spec_once(loads: list[str], kind: str, text: str, decodes: int) -> None:
    verdict = spec_report.report(kind, text)
    assert loads.count(text) == len(loads) == decodes
    assert verdict.shape_hash == identify(kind if kind != "auto" else "json", text).shape_hash  # the probe's


def test_a_decoded_spec_is_not_decoded_again(loads: list[str]) -> None:
    spec_report.report("json", json.dumps(SCHEMA), parsed=SCHEMA)
    spec_report.report("structural_tag", json.dumps(TAG), parsed=TAG)
    assert loads == []


def test_the_daemons_analysis_decodes_each_text_once(loads: list[str]) -> None:
    analysis = SchemaAnalysis(Thresholds())
    texts = [json.dumps(SCHEMA), json.dumps({"type": "array", "items": {"type": "integer"}}), r"[0-9]+"]
    for i, text in enumerate(texts):
        analysis.submit(f"h{i}", f"shape{i}", "regex" if i == 2 else "json", text)
    analysis.run(deadline=float("inf"))
    assert analysis.analysed == 3
    assert sorted(loads) == sorted(texts[:2])  # the regex never; each schema once for all of it


def test_a_variant_that_joins_is_decoded_once_its_founder_once_more(loads: list[str]) -> None:
    """A founder's positions wait until a variant joins (most families never vary): then the founder's
    kept text is decoded for them, the variant's own come from its analysis."""
    analysis = SchemaAnalysis(Thresholds())
    founder = json.dumps(SCHEMA)
    variant = json.dumps({**SCHEMA, "properties": {**SCHEMA["properties"], "tier": {"enum": ["team"]}}})
    analysis.submit("f", "shape", "json", founder)
    analysis.run(deadline=float("inf"))
    analysis.submit("v", "shape", "json", variant)
    analysis.run(deadline=float("inf"))
    assert analysis.family_of("v") == analysis.family_of("f")
    assert loads == [founder, variant, founder]


def test_gdx_lint_decodes_each_request_once(loads: list[str]) -> None:
    lines = [json.dumps({"id": i, "schema": {**SCHEMA, "title": f"Invoice{i}"}}) for i in range(3)]
    records = parse_file("log.jsonl", "\n".join(lines))
    assert len(loads) == 4  # reading the log: the whole (not one JSON value), then each line
    requests = tuple(found for found in records if isinstance(found, Request))
    report = lint_analyse(Inputs(requests), Thresholds(), ("xgrammar", "llguidance"))
    assert len(loads) == 4 and sum(len(f.schemas) for f in report.families) == 3


def test_a_json_spec_that_is_not_json_is_invalid_spec_everywhere() -> None:
    (finding,) = spec_report.report("json", '{"type": "object",').findings
    assert (finding.rule, finding.severity, finding.pointer) == ("invalid_spec", "error", "")
    assert "line 1 column 19" in finding.message
    analysis = SchemaAnalysis(Thresholds())
    analysis.submit("x", "x", "json", '{"type": "object",')
    analysis.run(deadline=float("inf"))
    assert analysis.view(0.0, ["x"]).findings["x"] == {("invalid_spec", "error"): 1}


def test_findings_come_in_one_order_errors_first() -> None:
    schema = {"type": "object", "properties": {"a": {"not": {"type": "string"}}, "b": {"format": "email"}}}
    findings = spec_report.report("json", json.dumps(schema)).findings
    assert list(findings) == sorted(findings, key=spec_report.order)
    assert findings[0].severity == "error"
