"""Real Prometheus scrapes the real daemon (OpenMetrics negotiated, as Prometheus prefers it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest

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
