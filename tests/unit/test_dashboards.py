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


def test_the_top_table_ranks_families_by_their_decayed_compile_seconds() -> None:
    """A schema built per request compiles each of its hashes once: only its family, summed over the
    variants by the daemon's decayed gauge, ranks it (rate() of a first sample is zero)."""
    doc = load()
    ordered = list(panels(doc))
    top = next(p for p in ordered if p["title"] == "Top schema families")
    assert ordered.index(top) < ordered.index(next(p for p in ordered if p["title"] == "Top schemas"))
    (sort,) = top["options"]["sortBy"]
    assert sort == {"displayName": "recent compile s", "desc": True}
    organize = next(t for t in top["transformations"] if t["id"] == "organize")["options"]
    (ranked,) = [k for k, v in organize["renameByName"].items() if v == sort["displayName"]]
    (rank,) = [t["expr"] for t in top["targets"] if f"Value #{t['refId']}" == ranked]
    assert rank.startswith("sort_desc(sum by (family) (guided_decoding_family_recent_compile_seconds{")
    assert 'family!="other"' in rank
    exprs = " ".join(t["expr"] for t in top["targets"])
    for series in ("family_compile_seconds_total", "family_requests_total", "family_cache_hits_total",
                   "family_variants", "family_info", "family_findings"):  # fmt: skip
        assert f"guided_decoding_{series}" in exprs, series
    assert {"name", "kind", "severity"} <= set(organize["indexByName"])


def test_what_varies_is_per_family_and_schemas_show_their_family() -> None:
    by_title = {p["title"]: p for p in panels(load())}
    (varying,) = [t["expr"] for t in by_title["Families: what varies"]["targets"]]
    assert "guided_decoding_family_varying" in varying and "by (family, name, pointer, what)" in varying
    schema_info = by_title["Top schemas"]["targets"][0]["expr"]
    assert schema_info.startswith("max by (schema_hash, title, family) (guided_decoding_schema_info{")
    for title, expr in queries(load()):  # superseded by the family series
        assert "shape_variants" not in expr and "shape_varying_path_info" not in expr, title
