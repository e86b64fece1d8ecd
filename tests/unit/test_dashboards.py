"""The dashboard as code: committed JSON up to date, and the rules a good dashboard keeps."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import yaml

from alerts import generate as alert_rules
from tests.support.dashboards import ROOT, load, panels, queries, titled, variable

PARAMS = alert_rules.Params()
RECORDS = alert_rules.records(PARAMS)
# Each panel with an alert's line: (the line, what it reads, the alert). The series it draws is the
# alert's expression left of its comparison: the recording rule, or the raw gauge where there is none.
ALERT_LINES = {
    "Compile P95": (PARAMS.compile_p95_seconds, RECORDS.compile_p95, "CompileP95High"),
    "Slow compiles per second": (PARAMS.min_slow_rate, RECORDS.slow, "CompileP95High"),
    "Cache hit ratio": (PARAMS.hit_ratio, RECORDS.hit_ratio, "CacheHitRatioLow"),
    "Grammar wait P95": (PARAMS.grammar_wait_p95_seconds, RECORDS.wait_p95, "GrammarWaitHigh"),
    "Node CPU busy": (PARAMS.cpu_busy, RECORDS.cpu_busy, "CPUStarvation"),
    "Node GPU utilisation": (PARAMS.gpu_idle_below, RECORDS.gpu_utilization, "CPUStarvation"),
    "Oldest running compile": (
        PARAMS.stuck_seconds,
        "max by (instance, namespace, pod, backend) (guided_decoding_compile_oldest_running_seconds",
        "CompileStuck",
    ),
}
# Every number an alert compares with: a panel line at one of them must be one of ALERT_LINES.
ALERT_NUMBERS = {
    PARAMS.compile_p95_seconds, PARAMS.grammar_wait_p95_seconds, PARAMS.hit_ratio, PARAMS.cpu_busy,
    PARAMS.gpu_idle_below, PARAMS.stuck_seconds, PARAMS.min_rate, PARAMS.min_slow_rate,
}  # fmt: skip


def alert_exprs() -> dict[str, str]:
    """Alert name without the prefix -> its expression, as alerts/generate.py renders it."""
    rules = [r for g in alert_rules.render(PARAMS)["groups"] for r in g["rules"] if "alert" in r]
    return {r["alert"].removeprefix("GuidedDecoding"): r["expr"] for r in rules}


def comparison(expr: str, left: str) -> tuple[str, float]:
    """The operator and number `left` (with or without a selector) is compared with in `expr`."""
    match = re.search(re.escape(left) + r"(?:\{[^}]*\})?\)?\s*(>=|<=|>|<)\s*([0-9.e+-]+)", expr)
    assert match, f"{left} is not compared in {expr}"
    return match.group(1), float(match.group(2))


def line_of(p: dict[str, Any]) -> list[float]:
    """The threshold values a time series panel draws as lines (none unless its style is "line")."""
    defaults = p["fieldConfig"]["defaults"]
    if defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode") != "line":
        return []
    return [s["value"] for s in defaults["thresholds"]["steps"] if s["value"] is not None]


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
        "5. Mask time and running compiles", "6. Backend routing (vLLM)", "7. vLLM's API server",
        "8. The guard (vLLM's API server)",
        "9. Exporter health",
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


def test_alert_lines_read_the_alerts_recording_rules() -> None:
    """A red panel is the alert's expression over its line: the same rule (so the same window), the
    same number, the same direction, and the description names the alert."""
    doc, exprs = load(), alert_exprs()
    for title, (line, reads, alert) in ALERT_LINES.items():
        p = titled(doc, title)
        assert line_of(p) == [line], (title, line_of(p))
        first = p["targets"][0]["expr"]
        assert first.startswith(reads), f"{title} draws {first}, not {reads}"
        assert "$__rate_interval" not in json.dumps(p["targets"]), title
        assert f"GuidedDecoding{alert}" in p["description"], title
        op, number = comparison(exprs[alert], reads)
        assert number == line, (title, exprs[alert])
        red = p["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["color"]
        assert red == ("red" if op.startswith(">") else "green"), (title, op)


def test_every_line_at_an_alert_number_is_an_alert_line() -> None:
    """No panel draws an alert's number without reading the alert's series (the per-GPU panel at
    0.5 read one GPU, the alert the node's average)."""
    for p in panels(load()):
        if p["type"] == "timeseries" and set(line_of(p)) & ALERT_NUMBERS:
            assert any(p["title"].startswith(t) for t in ALERT_LINES), p["title"]


def test_compile_p95_panel_has_the_real_compile_p95_and_series_carry_backend() -> None:
    p = titled(load(), "Compile P95")
    legends = {t["refId"]: t["legendFormat"] for t in p["targets"]}
    exprs = {t["refId"]: t["expr"] for t in p["targets"]}
    assert exprs["B"].startswith(RECORDS.miss_p95 + "{")
    assert legends["A"] == "{{pod}} {{backend}}"
    assert legends["B"] == "Real compile P95 (cache misses) {{pod}} {{backend}}"
    (dashed,) = p["fieldConfig"]["overrides"]  # the line is not the misses' alert: drawn dashed
    assert dashed["matcher"] == {"id": "byFrameRefID", "options": "B"}
    for title in ("Slow compiles", "Cache hit ratio", "Grammar wait P95", "Oldest running compile"):
        assert [t["legendFormat"] for t in titled(load(), title)["targets"]] == ["{{pod}} {{backend}}"], title


def test_every_recording_rule_is_read() -> None:
    """Each rule in records() is defined and read: by a panel or by an alert's expression."""
    doc = json.dumps(load())
    rules = [r for g in alert_rules.render(PARAMS)["groups"] for r in g["rules"]]
    defined = {r["record"] for r in rules if "record" in r}
    exprs = " ".join(r["expr"] for r in rules if "alert" in r)
    for name in vars(RECORDS).values():
        assert name in defined, name
        assert name in doc or name in exprs, f"{name} is read by no panel and no alert"


def test_schema_table_reads_the_schema_rules_and_colours_the_tickets_line() -> None:
    p = titled(load(), "Top schemas")
    exprs = {t["refId"]: t["expr"] for t in p["targets"]}
    organize = next(t for t in p["transformations"] if t["id"] == "organize")["options"]
    column = {v: exprs[k.removeprefix("Value #")] for k, v in organize["renameByName"].items()}
    share = f"share over {PARAMS.compile_p95_seconds * 1000:g} ms"
    assert column[share].startswith(f"max by (schema_hash) ({RECORDS.schema_slow_share}{{")
    assert column["mean compile (s)"].startswith(f"max by (schema_hash) ({RECORDS.schema_mean}{{")
    assert column["requests/s"].startswith(f"sum by (schema_hash) ({RECORDS.schema_requests}{{")
    assert not any("histogram_quantile" in e for e in exprs.values())
    assert "$__rate_interval" not in json.dumps(p["targets"])
    for expr in exprs.values():
        assert 'instance=~"$instance"' in expr and 'schema_hash=~"$schema_hash"' in expr, expr
    for expr in (column[share], column["mean compile (s)"], column["requests/s"]):
        assert 'pod=~"$pod"' in expr, expr
    (override,) = [o for o in p["fieldConfig"]["overrides"] if o["matcher"]["options"] == share]
    (steps,) = [x["value"]["steps"] for x in override["properties"] if x["id"] == "thresholds"]
    assert steps[-1]["color"] == "red"
    ticket = alert_exprs()["SchemaCompileSlow"]
    assert comparison(ticket, RECORDS.schema_slow_share) == (">", steps[-1]["value"])
    assert "GuidedDecodingSchemaCompileSlow" in p["description"]


def test_alerts_stat_counts_pages_and_tickets_on_the_selected_nodes() -> None:
    (target,) = titled(load(), "GuidedDecoding alerts firing")["targets"]
    (selector,) = re.findall(r"ALERTS\{([^}]*)\}", target["expr"])
    labels = dict(re.findall(r'(\w+=~?)"([^"]*)"', selector))
    assert labels == {
        "alertstate=": "firing", "alertname=~": "GuidedDecoding.*", "severity=~": "critical|warning",
        "instance=~": "$instance",
    }  # fmt: skip


def test_vllm_panel_filters_node_and_pod() -> None:
    for target in titled(load(), "vLLM TTFT")["targets"]:
        assert 'instance=~"$instance", pod=~"$pod"' in target["expr"], target["expr"]


def test_links_into_the_dashboard_keep_the_other_variables() -> None:
    """A click that filters on a schema keeps the node, the pod and the data source (each value of a
    multi-value selection: Grafana's `:queryparam` format) and the time range."""
    doc = load()
    names = [v["name"] for v in doc["templating"]["list"]]
    links = [u for p in panels(doc) for o in p["fieldConfig"].get("overrides", []) for x in o["properties"]
             if x["id"] == "links" for u in (link["url"] for link in x["value"])]  # fmt: skip
    assert links
    for url in links:
        assert url.startswith(f"/d/{doc['uid']}/"), url
        assert "${__url_time_range}" in url, url
        for name in names:
            assert f"var-{name}=" in url or f"${{{name}:queryparam}}" in url, (name, url)
    (schema_link,) = [u for u in links if "var-schema_hash=${__value.raw}" in u]
    assert all(f"${{{n}:queryparam}}" in schema_link for n in ("datasource", "instance", "pod"))


def test_cpu_heatmap_has_a_fixed_scale_and_one_row_per_node_and_core() -> None:
    p = titled(load(), "CPU busy per core")
    assert p["type"] == "heatmap"
    color = p["options"]["color"]
    assert (color["min"], color["max"], color["mode"]) == (0, 1, "scheme")
    (target,) = p["targets"]
    assert "{{instance}}" in target["legendFormat"] and "{{cpu}}" in target["legendFormat"]
    assert " by (" not in target["expr"]  # nothing aggregates instance or cpu away


def test_schema_variable_and_table_are_bounded_to_the_top_schemas() -> None:
    doc = load()
    var = variable(doc, "schema_hash")
    top = "topk(50, max by (schema_hash) (guided_decoding_schema_recent_compile_seconds{"
    assert var["query"].startswith("query_result(") and top in var["query"]
    assert 'instance=~"$instance"' in var["query"]
    assert var["refresh"] == 2 and var["sort"] == 0  # each time range; hottest first, as ranked
    # Grafana's query_result() option text, `{labels} value timestamp`; the regex's group is the value
    line = '{schema_hash="3f9a0c1b2d4e5f60"} 1.25 1717000000000'
    pattern = var["regex"]
    assert pattern.startswith("/") and pattern.endswith("/")
    assert re.search(pattern[1:-1], line).group(1) == "3f9a0c1b2d4e5f60"  # type: ignore[union-attr]
    for target in titled(doc, "Top schemas")["targets"]:
        assert top in target["expr"], target["expr"]


def test_unenforced_keywords_join_one_to_many_on_node_and_schema() -> None:
    (target,) = titled(load(), "Unenforced keywords by backend")["targets"]
    expr = target["expr"]
    assert "on (instance, schema_hash) group_right" in expr
    assert "on (schema_hash)" not in expr
    # one series per (instance, schema_hash) on one side, per (instance, schema_hash, backend) on the other
    assert "sum by (instance, schema_hash) (guided_decoding_schema_lint_findings{" in expr
    assert "max by (instance, schema_hash, backend) (guided_decoding_schema_info{" in expr
    # the alert's join: the same labels, the backend that does not enforce the keywords
    assert "on (instance, schema_hash)" in alert_exprs()["UnenforcedKeywords"]
    assert 'backend="xgrammar"' in expr and 'rule="xgrammar_unenforced"' in expr


def test_counters_are_rated_and_sums_never_averaged_over_all_time() -> None:
    for title, expr in queries(load()):
        for match in re.finditer(r"\b([a-z_:]+(_total|_bucket|_sum|_count))\b(\{[^}]*\})?", expr):
            following = expr[match.end() : match.end() + 1]
            assert following == "[", f"{title}: {match.group(1)} is not under rate(): {expr}"


def test_every_metric_is_in_the_contract_or_vllms_list(vllm_page: str) -> None:
    # the first column of the family tables in docs/reference/metrics.md (the metric contract)
    lines = (ROOT / "docs" / "reference" / "metrics.md").read_text().splitlines()
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
