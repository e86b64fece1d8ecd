"""The real daemon process, scraped over HTTP on loopback, parsed with prometheus-client's parsers."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import psutil
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def get(url: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return resp.status, resp.headers["Content-Type"], resp.read().decode()


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in parse_text(text)}


def test_contract_families_on_metrics(daemon_factory: Any, page_server: Any) -> None:
    daemon = daemon_factory("--vllm.target", page_server.url)
    status, content_type, body = get(daemon.url + "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    fams = families(body)
    expected = {
        "guided_decoding_cpu_seconds": ("counter", {"cpu", "mode"}),
        "guided_decoding_target_up": ("gauge", {"target", "pod"}),
        "guided_decoding_target_scrape_duration_seconds": ("gauge", {"target", "pod"}),
        "guided_decoding_collector_success": ("gauge", {"collector"}),
        "guided_decoding_collector_duration_seconds": ("gauge", {"collector"}),
        "guided_decoding_probe_snapshots": ("counter", {"result"}),
    }
    for name, (kind, labels) in expected.items():
        assert fams[name].type == kind, name
        assert fams[name].samples, name
        assert all(set(s.labels) == labels for s in fams[name].samples), name
    success = {s.labels["collector"]: s.value for s in fams["guided_decoding_collector_success"].samples}
    assert success == {"cpu": 1.0, "nvml": 0.0, "vllm": 1.0, "probe": 1.0}  # no GPU on this machine
    cpus = {s.labels["cpu"] for s in fams["guided_decoding_cpu_seconds"].samples}
    assert len(cpus) == psutil.cpu_count()
    pod = page_server.url.split("/")[2]
    assert [s.value for s in fams["guided_decoding_target_up"].samples] == [1.0]
    vllm = [s for f in fams.values() if f.name.startswith("vllm:") for s in f.samples]
    assert len(vllm) == 364 and all(s.labels["pod"] == pod for s in vllm)
    assert not any(f.startswith(("python_", "vllm:process")) for f in fams if f.startswith("vllm:"))


def test_openmetrics_when_asked(daemon_factory: Any, page_server: Any) -> None:
    daemon = daemon_factory("--vllm.target", page_server.url)
    _status, content_type, body = get(daemon.url + "/metrics", OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n") and body.count("# EOF") == 1
    fams = {f.name: f for f in parse_openmetrics(body)}
    assert fams["vllm:request_success"].type == "counter"
    assert fams["guided_decoding_cpu_seconds"].type == "counter"
    assert sum(len(f.samples) for n, f in fams.items() if n.startswith("vllm:")) == 364


def test_healthz_names_the_failed_sources(daemon_factory: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"
    daemon = daemon_factory("--vllm.target", dead)
    status, content_type, _body = get(daemon.url + "/healthz")
    assert status == 200 and content_type.startswith("application/json")
    get(daemon.url + "/metrics")
    health = json.loads(get(daemon.url + "/healthz")[2])
    assert health["status"] == "ok"
    assert health["collectors"]["cpu"] == {**health["collectors"]["cpu"], "success": True, "last_error": None}
    assert health["collectors"]["vllm"]["success"] is False
    assert "1 of 1 targets down" in health["collectors"]["vllm"]["last_error"]
    assert "NVML unavailable" in health["collectors"]["nvml"]["last_error"]


def test_index_links_metrics_and_healthz(daemon_factory: Any) -> None:
    daemon = daemon_factory("--no-collector.nvml")
    status, content_type, body = get(daemon.url + "/")
    assert status == 200 and content_type.startswith("text/html")
    assert 'href="metrics"' in body and 'href="healthz"' in body and "nvml" not in body


def test_disabled_collectors_are_absent(daemon_factory: Any) -> None:
    daemon = daemon_factory(
        "--no-collector.cpu", "--no-collector.nvml", "--no-collector.vllm", "--no-collector.probe"
    )
    fams = families(get(daemon.url + "/metrics")[2])
    assert not fams["guided_decoding_collector_success"].samples
    assert "guided_decoding_cpu_seconds" not in fams


def test_env_configures_the_process(daemon_factory: Any, page_server: Any) -> None:
    daemon = daemon_factory(
        env={"GDX_VLLM_TARGET": page_server.url, "GDX_COLLECTOR_NVML": "false", "GDX_LOG_FORMAT": "json"}
    )
    fams = families(get(daemon.url + "/metrics")[2])
    assert [s.value for s in fams["guided_decoding_target_up"].samples] == [1.0]
    assert json.loads(daemon.lines[-1])["logger"].startswith("gdx.")


def test_sigterm_stops_within_5s_while_a_scrape_hangs(daemon_factory: Any) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts, never answers
    try:
        daemon = daemon_factory(
            "--vllm.target", f"http://127.0.0.1:{listener.getsockname()[1]}/metrics", "--vllm.timeout", "60s"
        )
        scrape = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import urllib.request as u; u.urlopen('{daemon.url}/metrics', timeout=90)",
            ],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        took = daemon.stop(signal.SIGTERM)
        scrape.kill()
    finally:
        listener.close()
    assert daemon.proc.returncode == 0
    assert took < 5.0, daemon.log
    assert "stopped" in daemon.log


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--web.listen-address",
                f"127.0.0.1:{port}",
                "--no-collector.probe",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr


def _status(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_readyz_waits_for_the_socket_and_discovery(daemon_factory: Any, tmp_path: Any) -> None:
    """/readyz is 503 with the reason while engines cannot connect or discovery fails (a 403: RBAC),
    200 once both work; /healthz stays 200 throughout (a restart would fix neither)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answer = {"status": 403}

    class ApiServer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"kind": "PodList", "items": []}' if answer["status"] == 200 else b"{}"
            self.send_response(answer["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    api = ThreadingHTTPServer(("127.0.0.1", 0), ApiServer)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    token = tmp_path / "token"
    token.write_text("t")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    try:
        discovery = (
            "--kubernetes.enabled", "--kubernetes.node-name", "node-a",
            "--kubernetes.refresh-interval", "10ms",
            "--kubernetes.api-server", f"http://127.0.0.1:{api.server_address[1]}",
            "--kubernetes.token-file", str(token), "--no-collector.nvml",
        )  # fmt: skip
        broken = daemon_factory(*discovery, "--probe.socket", str(blocker / "probe.sock"))
        status, body = _status(broken.url + "/readyz")
        assert status == 503 and body["status"] == "not ready"
        reasons = " ".join(body["reasons"])
        assert "cannot listen on probe socket" in reasons and "HTTP 403" in reasons
        assert _status(broken.url + "/healthz")[0] == 200
        broken.stop()
        daemon = daemon_factory(*discovery, "--probe.socket", str(tmp_path / "probe.sock"))
        status, body = _status(daemon.url + "/readyz")
        assert status == 503 and body["reasons"] == ["kubernetes discovery: listing pods on node-a: HTTP 403"]
        answer["status"] = 200
        time.sleep(0.05)
        assert _status(daemon.url + "/readyz") == (200, {"status": "ready", "reasons": []})
    finally:
        api.shutdown()
