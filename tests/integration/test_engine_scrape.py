"""The real daemon passes SGLang's and TensorRT-LLM's families through beside vLLM's.

Each engine's page is served by a loopback HTTP server at the engine's own path (TensorRT-LLM answers
JSON at /metrics and Prometheus text at /prometheus/metrics, as trtllm-serve does); the daemon is
given the bare host:port, so the default paths are under test too. The pages are the fixtures that
tests/support/data/engine_pages.py renders from the engines' metric code; the last tests render them
again and check the committed copies still match.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from tools.harness import DATA, ROOT
from tools.harness.processes import Prometheus

SGLANG_PAGE = (DATA / "sglang-0.5.23-metrics.txt").read_text(encoding="utf-8")
TRTLLM_PAGE = (DATA / "trtllm-metrics.txt").read_text(encoding="utf-8")
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class EngineServer:
    """A loopback server answering each of its paths with a page, anything else with 404."""

    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = pages
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = outer.pages.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                data = body.encode()
                kind = (
                    "application/json" if body.startswith("[") else "text/plain; version=0.0.4; charset=utf-8"
                )
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.pod = self.base.removeprefix("http://")
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def engines(vllm_page: str) -> Iterator[dict[str, EngineServer]]:
    """vLLM, SGLang (whose page also carries other engines' families, to be dropped) and TensorRT-LLM."""
    servers = {
        "vllm": EngineServer({"/metrics": vllm_page}),
        "sglang": EngineServer(
            {"/metrics": SGLANG_PAGE + TRTLLM_PAGE + "# TYPE vllm:stray gauge\nvllm:stray 1\n"}
        ),
        "trtllm": EngineServer({"/metrics": '[{"iter": 7}]', "/prometheus/metrics": TRTLLM_PAGE}),
    }
    yield servers
    for server in servers.values():
        server.close()


def _get(url: str, accept: str = "") -> str:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return str(resp.read().decode())


def _series(text: str, openmetrics: bool = False) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by name, as prometheus-client reads the daemon's page."""
    parsed = parse_openmetrics(text) if openmetrics else parse_text(text)
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in parsed:
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _of(
    series: dict[str, list[tuple[dict[str, str], float]]], prefix: str
) -> list[tuple[str, dict[str, str]]]:
    return [
        (name, labels) for name, samples in series.items() if name.startswith(prefix) for labels, _ in samples
    ]


def _page_samples(page: str, prefix: str) -> int:
    return sum(len(f.samples) for f in parse_text(page) if f.name.startswith(prefix))


def _engine_flags(engines: dict[str, EngineServer]) -> list[str]:
    return [
        "--vllm.target", engines["vllm"].base + "/metrics",
        "--sglang.target", engines["sglang"].base,  # no path: SGLang's /metrics
        "--trtllm.target", engines["trtllm"].base,  # no path: TensorRT-LLM's /prometheus/metrics
        "--no-collector.nvml", "--no-collector.probe",
    ]  # fmt: skip


def test_each_engine_comes_through_with_its_pod(
    daemon_factory: Any, engines: dict[str, EngineServer], vllm_page: str, tmp_path: Path
) -> None:
    daemon = daemon_factory(*_engine_flags(engines))
    want = {
        "vllm:": (engines["vllm"].pod, _page_samples(vllm_page, "vllm:")),
        "sglang:": (engines["sglang"].pod, _page_samples(SGLANG_PAGE, "sglang:")),
        "trtllm_": (engines["trtllm"].pod, _page_samples(TRTLLM_PAGE, "trtllm_")),
    }
    assert [n for _, n in want.values()] == [364, 522, 237]
    for openmetrics in (False, True):
        text = _get(daemon.url + "/metrics", OPENMETRICS if openmetrics else "")
        series = _series(text, openmetrics)
        up = {labels["target"]: value for labels, value in series["guided_decoding_target_up"]}
        assert up == {
            engines["vllm"].base + "/metrics": 1.0,
            engines["sglang"].base + "/metrics": 1.0,
            engines["trtllm"].base + "/prometheus/metrics": 1.0,
        }
        for prefix, (pod, count) in want.items():
            mine = _of(series, prefix)
            # the SGLang page's copy of TensorRT-LLM's families and its stray vllm: family are dropped
            assert len(mine) == count and {labels["pod"] for _, labels in mine} == {pod}, prefix
        grammar = {
            name: value for name, samples in series.items() for _, value in samples if "grammar" in name
        }
        assert grammar["sglang:num_grammar_total"] == 13.0
        assert grammar["sglang:num_grammar_cache_hit_total"] == 9.0
        assert grammar["sglang:num_grammar_queue_reqs"] == 2.0
        assert grammar["sglang:grammar_compilation_time_seconds_count"] == 4.0
    conflicts = series["guided_decoding_passthrough_type_conflicts_total"]
    assert conflicts == [({}, 0.0)]

    # Real Prometheus takes the page (OpenMetrics negotiated): every series of the three engines.
    (tmp_path / "prom").mkdir()
    prom = Prometheus(tmp_path / "prom", [daemon.url.removeprefix("http://")])
    try:
        assert prom.wait_for('up{job="gdx"} == 1'), prom.api("targets")
        for prefix, (pod, count) in want.items():
            query = f'count({{__name__=~"{prefix}.*", pod="{pod}"}}) == {count}'
            assert prom.wait_for(query), (prefix, prom.query(f'count({{__name__=~"{prefix}.*"}})'))
        assert prom.query(f'sglang:num_grammar_total{{pod="{engines["sglang"].pod}"}} == 13')
        assert prom.api("targets")["activeTargets"][0]["lastError"] == ""
    finally:
        prom.stop()


def test_switching_an_engine_off_drops_only_its_families(
    daemon_factory: Any, engines: dict[str, EngineServer]
) -> None:
    daemon = daemon_factory(*_engine_flags(engines), "--no-sglang.passthrough", "--no-trtllm.passthrough")
    series = _series(_get(daemon.url + "/metrics"))
    assert not _of(series, "sglang:") and not _of(series, "trtllm_")
    assert len(_of(series, "vllm:")) == 364
    # still scraped and checked
    assert {v for _, v in series["guided_decoding_target_up"]} == {1.0}


def _health_errors(daemon: Any) -> str:
    return str(json.loads(_get(daemon.url + "/healthz"))["collectors"]["vllm"]["last_error"])


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (("--vllm.max-series", "400"), "more than 400 sglang:* samples (vllm.max-series)"),
        (("--vllm.max-body-bytes", "64KiB"), "larger than 65536 bytes (vllm.max-body-bytes)"),
    ],
)
def test_caps_mark_only_the_engine_over_them_down(
    daemon_factory: Any, engines: dict[str, EngineServer], flags: tuple[str, str], error: str
) -> None:
    # SGLang's page (with the extra families) is about 107 KB and 522 own samples; TensorRT-LLM's
    # about 29 KB and 237; vLLM's 364 samples.
    daemon = daemon_factory(*_engine_flags(engines), *flags)
    series = _series(_get(daemon.url + "/metrics"))
    up = {labels["pod"]: value for labels, value in series["guided_decoding_target_up"]}
    assert up == {engines["vllm"].pod: 1.0, engines["sglang"].pod: 0.0, engines["trtllm"].pod: 1.0}
    assert not _of(series, "sglang:") and len(_of(series, "trtllm_")) == 237
    assert error in _health_errors(daemon)
    assert error in daemon.log and engines["sglang"].base in daemon.log


def test_type_conflict_between_sglang_targets_is_counted(daemon_factory: Any) -> None:
    first = EngineServer({"/metrics": SGLANG_PAGE})
    other = SGLANG_PAGE.replace(
        "# TYPE sglang:num_running_reqs gauge", "# TYPE sglang:num_running_reqs untyped"
    )
    second = EngineServer({"/metrics": other})
    try:
        daemon = daemon_factory(
            "--sglang.target",
            first.base,
            "--sglang.target",
            second.base,
            "--no-collector.nvml",
            "--no-collector.probe",
        )
        series = _series(_get(daemon.url + "/metrics"))
        _get(daemon.url + "/metrics")
        again = _series(_get(daemon.url + "/metrics"))
    finally:
        first.close()
        second.close()
    assert series["guided_decoding_passthrough_type_conflicts_total"][0][1] >= 1.0
    assert again["guided_decoding_passthrough_type_conflicts_total"][0][1] >= 3.0  # per family and scrape
    assert {labels["pod"] for labels, _ in series["sglang:num_running_reqs"]} == {first.pod}
    assert {labels["pod"] for labels, _ in series["sglang:num_grammar_total"]} == {first.pod, second.pod}
    # logged when the conflict starts, not on every scrape
    assert daemon.log.count("targets disagree on the type of sglang:num_running_reqs; kept the first") == 1


# ---- the fixtures are what the engines' code renders ----------------------------------------------------


def _normalised(page: str) -> set[tuple[str, str, str]]:
    """Families (name, type, help) and samples (name, labels without pid, value), order aside."""
    out: set[tuple[str, str, str]] = set()
    for family in parse_text(page):
        out.add(("family", family.name, f"{family.type} {family.documentation}"))
        for s in family.samples:
            labels = sorted((k, v) for k, v in s.labels.items() if k != "pid")
            out.add((s.name, str(labels), "nan" if math.isnan(s.value) else repr(s.value)))
    return out


def _render(engine: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, str(DATA / "engine_pages.py"), engine],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_sglang_fixture_is_what_sglangs_collectors_render() -> None:
    sglang_path = os.environ.get("GDX_SGLANG_PATH", str(ROOT / ".cache" / "sglang"))
    if not Path(sglang_path, "sglang").is_dir():
        raise FileNotFoundError(f"SGLang is missing under {sglang_path}: run `make sglang` (make test does)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([sglang_path, str(ROOT)])}
    rendered = _render("sglang", env)
    assert _normalised(rendered) == _normalised(SGLANG_PAGE)


def test_trtllm_fixture_is_what_the_generator_renders() -> None:
    rendered = _render("trtllm", {**os.environ, "PYTHONPATH": str(ROOT)})
    assert _normalised(rendered) == _normalised(TRTLLM_PAGE)
