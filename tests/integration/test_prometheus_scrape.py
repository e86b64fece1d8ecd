"""Real Prometheus scrapes the real daemon (OpenMetrics negotiated, as Prometheus prefers it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.test_engine_scrape import EngineServer
from tests.support import hostile_pages
from tools.harness.processes import Prometheus


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Any:
    started: list[Prometheus] = []

    def start(url: str) -> Prometheus:
        prom = Prometheus(tmp_path / "prom", [url.removeprefix("http://")])
        started.append(prom)
        return prom

    (tmp_path / "prom").mkdir()
    yield start
    for prom in started:
        prom.stop()


def test_prometheus_ingests_everything(daemon_factory: Any, page_server: Any, prometheus_for: Any) -> None:
    daemon = daemon_factory("--vllm.target", page_server.url)
    prom = prometheus_for(daemon.url)
    assert prom.wait_for('up{job="gdx"} == 1'), prom.api("targets")
    target = prom.api("targets")["activeTargets"][0]
    assert target["lastError"] == "" and target["health"] == "up"
    pod = page_server.url.split("/")[2]
    assert prom.wait_for(f'vllm:request_success_total{{pod="{pod}",finished_reason="stop"}} == 29')
    hist = prom.query(f'vllm:time_to_first_token_seconds_bucket{{pod="{pod}"}}')
    assert len(hist) == 23
    cores = prom.query('count(guided_decoding_cpu_seconds_total{mode="idle"})')
    assert int(float(cores[0]["value"][1])) == psutil.cpu_count()
    assert prom.query('guided_decoding_collector_success{collector="vllm"} == 1')
    # Nothing from the passthrough was dropped: the same number of vllm: series as on the page.
    count = prom.query(f'count({{__name__=~"vllm:.*", pod="{pod}"}})')
    assert int(float(count[0]["value"][1])) == 364


def test_prometheus_ingests_the_node_page_whatever_its_pods_serve(
    daemon_factory: Any, page_server: Any, prometheus_for: Any
) -> None:
    """Issue 47: one hostile pod's page (repeated or reserved label names, clashing `exported_pod`,
    values Go cannot read, OpenMetrics' strict types) must not take the node's page out of Prometheus."""
    servers = [EngineServer({"/metrics": page}) for page in hostile_pages.every_page().values()]
    try:
        flags = [arg for s in servers for arg in ("--vllm.target", s.base + "/metrics")]
        daemon = daemon_factory(
            "--vllm.target", page_server.url, *flags, "--no-collector.nvml", "--no-collector.probe"
        )
        prom = prometheus_for(daemon.url)
        assert prom.wait_for('up{job="gdx"} == 1'), prom.api("targets")
        for _ in range(3):  # several scrapes, each ingested whole
            time.sleep(1.2)
            target = prom.api("targets")["activeTargets"][0]
            assert target["health"] == "up" and target["lastError"] == "", target
        pod = page_server.url.split("/")[2]
        count = prom.query(f'count({{__name__=~"vllm:.*", pod="{pod}"}})')
        assert int(float(count[0]["value"][1])) == 364  # the good pod's series all there
        down = prom.query("count(guided_decoding_target_up == 0)")
        assert int(float(down[0]["value"][1])) == len(hostile_pages.DOWN)
        for reason in ("duplicate_label", "reserved_label", "missing_label"):
            dropped = f'guided_decoding_passthrough_samples_dropped_total{{reason="{reason}"}} > 0'
            assert prom.wait_for(dropped)
        kept = prom.query('vllm:a{exported_pod="q"}')
        assert kept and kept[0]["metric"]["exported_exported_pod"] == "p"
    finally:
        for server in servers:
            server.close()
