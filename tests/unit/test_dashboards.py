"""The dashboard as code: committed JSON up to date, and the rules a good dashboard keeps."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from tests.support.dashboards import ROOT, load, panels, queries

ALERT_LINES = {
    "Compile P95": 0.005,
    "Grammar wait P95": 0.1,
    "Cache hit ratio": 0.95,
    "Oldest running compile": 60,
}


def test_committed_json_is_what_the_generator_writes() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "dashboards" / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_uid_variables_and_alert_links() -> None:
    doc = load()
    assert doc["uid"] == "guided-decoding"
    assert [v["name"] for v in doc["templating"]["list"]] == ["datasource", "instance", "pod", "schema_hash"]
    rules = yaml.safe_load((ROOT / "alerts" / "guided-decoding.rules.yml").read_text())
    urls = {r["annotations"]["dashboard_url"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert urls and all(f"/d/{doc['uid']}/" in url for url in urls)
    assert [p["title"] for p in doc["panels"] if p["type"] == "row"] == [
        "1. Is it stalling?", "2. Which schemas?", "3. Why?", "4. What does it cost?",
        "5. Mask time and running compiles", "6. Exporter health",
    ]  # fmt: skip


def test_every_panel_has_datasource_unit_and_description() -> None:
    for panel in panels(load()):
        title = panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", title
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"]), title
        assert panel.get("description", "").strip(), title
        if panel["type"] != "heatmap":
            unit = panel["fieldConfig"]["defaults"].get("unit")
            assert unit, f"{title}: no unit"
            assert "percent" not in unit, f"{title}: percent unit {unit}"


def test_thresholds_sit_where_the_alerts_are() -> None:
    by_title = {p["title"]: p for p in panels(load())}
    for prefix, line in ALERT_LINES.items():
        (panel,) = [p for t, p in by_title.items() if t.startswith(prefix)]
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert line in [s["value"] for s in steps], (prefix, steps)
        assert panel["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "line"


def test_counters_are_rated_and_sums_never_averaged_over_all_time() -> None:
    for title, expr in queries(load()):
        for match in re.finditer(r"\b([a-z_:]+(_total|_bucket|_sum|_count))\b(\{[^}]*\})?", expr):
            following = expr[match.end() : match.end() + 1]
            assert following == "[", f"{title}: {match.group(1)} is not under rate(): {expr}"


def test_every_metric_is_in_the_contract_or_vllms_list(vllm_page: str) -> None:
    # the first column of the family table in docs/metrics.md (the metric contract)
    lines = (ROOT / "docs" / "metrics.md").read_text().splitlines()
    rows = [r for r in lines if r.startswith("| `guided_decoding_")]
    contract = {n for r in rows for n in re.findall(r"`(guided_decoding_[a-z_]+)`", r.split("|")[1])}
    vllm = set(re.findall(r"^# TYPE (vllm:[a-z_:]+)", vllm_page, re.M))
    rules = set(re.findall(r"record: (\S+)", (ROOT / "alerts" / "guided-decoding.rules.yml").read_text()))
    for title, expr in queries(load()):
        for name in re.findall(r"\b((?:guided_decoding_|vllm:|[a-z_]+:guided_decoding_)[a-z0-9_:]+)", expr):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert base in contract or base in vllm or name in rules, f"{title}: {name} is not a known metric"
