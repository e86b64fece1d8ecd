"""The alert rules as code: generated files up to date, promtool check and unit tests, runbooks and
annotations complete, the Alertmanager example valid, metric names from the contract."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from alerts import generate as alert_rules
from tools.harness import ROOT

ALERTS = ROOT / "alerts"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    binary = shutil.which(args[0])
    assert binary, f"{args[0]} is not installed: run `make test` (it installs it with apt)"
    return subprocess.run([binary, *args[1:]], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_generated_files_are_up_to_date_and_match() -> None:
    out = subprocess.run(
        [sys.executable, str(ALERTS / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    custom = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())
    assert custom["kind"] == "PrometheusRule" and custom["spec"] == rules


def test_promtool_checks_and_unit_tests_pass() -> None:
    check = run("promtool", "check", "rules", str(ALERTS / "guided-decoding.rules.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    test = run("promtool", "test", "rules", "guided-decoding.tests.yml", cwd=ALERTS / "tests")
    assert test.returncode == 0, test.stdout + test.stderr


def test_the_unit_tests_see_the_thresholds(tmp_path: Path) -> None:
    """The same tests against rules rendered with a 20 ms line must fail: they bind the threshold."""
    gen = alert_rules
    (tmp_path / "tests").mkdir()
    (tmp_path / "guided-decoding.rules.yml").write_text(
        gen.dump(gen.render(gen.Params(compile_p95_seconds=0.02)))
    )
    shutil.copy(ALERTS / "tests" / "guided-decoding.tests.yml", tmp_path / "tests")
    test = run("promtool", "test", "rules", "guided-decoding.tests.yml", cwd=tmp_path / "tests")
    assert test.returncode != 0 and "GuidedDecodingCompileP95High" in test.stdout + test.stderr


def test_every_alert_is_complete_and_tested() -> None:
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    tests = (ALERTS / "tests" / "guided-decoding.tests.yml").read_text()
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    records = [r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r]
    expected = {
        "CompileP95High", "SchemaCompileSlow", "CacheHitRatioLow", "DynamicSchema", "CPUStarvation",
        "GrammarWaitHigh", "CompileStuck", "UnenforcedKeywords", "ProbeMissing", "ExporterDown",
    }  # fmt: skip
    assert {a["alert"] for a in alerts} == {f"GuidedDecoding{n}" for n in expected}
    for a in alerts:
        name, ann = a["alert"], a["annotations"]
        assert a["labels"]["severity"] in ("critical", "warning", "info")
        assert "{{" not in ann["summary"] and "{{" in ann["description"], name
        assert ann["runbook_url"].endswith(f"/alerts/runbooks/{name}.md")
        runbook = (ALERTS / "runbooks" / f"{name}.md").read_text()
        for section in ("## What it means", "## Confirm it", "## Fix", "## Silence it safely"):
            assert section in runbook, (name, section)
        assert ann["dashboard_url"].endswith("/d/guided-decoding/guided-decoding")
        assert f"alertname: {name}" in tests, f"{name} has no promtool test"
    for record in records:
        assert f"expr: {record}" in tests, f"recording rule {record} has no expression test"
    assert {a["alert"] for a in alerts if a["labels"]["severity"] == "critical"} >= {
        "GuidedDecodingCompileP95High"
    }


def test_rules_use_only_metrics_that_exist() -> None:
    """Every metric a rule reads is in the family table of docs/metrics.md or is a recording rule."""
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    lines = (ROOT / "docs" / "metrics.md").read_text().splitlines()
    table = [r for r in lines if r.startswith("| `guided_decoding_")]
    every = [r for g in rules["groups"] for r in g["rules"]]
    # the expressions and the queries in the descriptions (the top families, what varies)
    exprs = " ".join(
        [r["expr"] for r in every] + [r["annotations"]["description"] for r in every if "alert" in r]
    )
    exprs = re.sub(r"\b[a-z_]+:guided_decoding_[a-z0-9_:]+", " ", exprs)  # recording rules
    names = {re.sub(r"_(bucket|count|sum)$", "", n) for n in re.findall(r"\bguided_decoding_[a-z_]+", exprs)}
    assert len(names) >= 12
    documented = {n for r in table for n in re.findall(r"`(guided_decoding_[a-z_]+)`", r.split("|")[1])}
    for name in names:
        assert name in documented, f"{name} is read by a rule but not in the metric contract"


def test_description_queries_stay_on_the_alerts_node() -> None:
    """A page for node B never names node A's families: every selector in a description's query is
    scoped to the alert's `instance` (the promtool tests check it with two nodes)."""
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    ranked = [a for a in alerts if "Top families" in a["annotations"]["description"]]
    listing = ("CompileP95High", "CacheHitRatioLow", "CPUStarvation", "GrammarWaitHigh", "CompileStuck")
    assert {a["alert"] for a in ranked} == {f"GuidedDecoding{n}" for n in listing}
    calls = 0
    for a in alerts:
        description = a["annotations"]["description"]
        assert "schema_recent_compile_seconds" not in description and "shape_" not in description, a["alert"]
        for call in re.findall(r'query \(printf "(.*?)" \$', description):
            calls += 1
            selectors = re.findall(r"guided_decoding_[a-z_]+(\{[^}]*\})?", call)
            assert selectors and all('instance=\\"%s\\"' in s for s in selectors), (a["alert"], call)
        assert not re.search(r'query "', description), f"{a['alert']}: a query not scoped to the node"
    assert calls >= 5 * 4 + 4


def test_alertmanager_example_is_valid() -> None:
    out = run("amtool", "check-config", str(ALERTS / "alertmanager" / "alertmanager.yml"))
    assert out.returncode == 0, out.stdout + out.stderr
    config = yaml.safe_load((ALERTS / "alertmanager" / "alertmanager.yml").read_text())
    (pd,) = next(r for r in config["receivers"] if r["name"] == "pagerduty")["pagerduty_configs"]
    assert (
        pd["send_resolved"] and "routing_key_file" in pd and "{{ .CommonLabels.severity }}" in pd["severity"]
    )
    assert {link["text"] for link in pd["links"]} == {"runbook", "dashboard"}
