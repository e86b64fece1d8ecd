"""The processes of the demo, the tests and the benchmarks, each on loopback: the daemon, Prometheus,
Alertmanager, a local PagerDuty Events API v2 endpoint that records what would be paged, and a page server."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tools.harness import ROOT, free_port


class LoopbackServer:
    """A server binary run on a loopback port (a free one unless given: another process can be pointed
    at it before it starts), ready when its /-/ready answers 200."""

    def __init__(
        self, binary: str, args: list[str], workdir: Path, name: str, port: int | None = None
    ) -> None:
        path = shutil.which(binary)
        if path is None:
            raise FileNotFoundError(
                f"{binary} is not installed: `make demo` and `make test` install it with apt"
            )
        self.port = port or free_port()
        self.name = name
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{name}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [path, *args, f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{binary} ({name}) did not become ready: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Prometheus(LoopbackServer):
    def __init__(
        self,
        workdir: Path,
        scrape_targets: list[str],
        interval: str = "1s",
        job: str = "gdx",
        rule_files: list[Path] | None = None,
        alertmanager: str | None = None,
        extra_args: list[str] | None = None,
        scrape_config: dict[str, Any] | None = None,
    ) -> None:
        """`scrape_config` replaces the one static job (e.g. with the relabelings a monitor generates)."""
        default = {"job_name": job, "static_configs": [{"targets": scrape_targets}]}
        config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [scrape_config or default],
        }
        if rule_files:
            config["rule_files"] = [str(f) for f in rule_files]
        if alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        args = [f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}"]
        super().__init__("prometheus", [*args, *(extra_args or [])], workdir, "prometheus")

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            doc = json.load(resp)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def wait_for(self, expr: str, timeout: float = 30) -> list[dict[str, Any]]:
        """Polls until `expr` returns at least one series."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.5)


class Alertmanager(LoopbackServer):
    """A real Alertmanager on loopback (Debian's prometheus-alertmanager)."""

    def __init__(self, workdir: Path, config: dict[str, Any]) -> None:
        (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
        args = [f"--config.file={workdir / 'alertmanager.yml'}", f"--storage.path={workdir / 'am-data'}",
                "--cluster.listen-address="]  # fmt: skip
        binary = "prometheus-alertmanager" if shutil.which("prometheus-alertmanager") else "alertmanager"
        super().__init__(binary, args, workdir, "alertmanager")


class Receiver:
    """A local PagerDuty Events API v2 endpoint (and ticket webhook): records every JSON body POSTed."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    outer.events.append((self.path, json.loads(body)))
                except ValueError:
                    outer.events.append((self.path, {"unparsable": body.decode("utf-8", "replace")}))
                self.send_response(202)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"status":"success","message":"Event processed"}')

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def pagerduty(self) -> list[dict[str, Any]]:
        return [body for path, body in self.events if path == "/v2/enqueue"]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# How DaemonProcess starts `python ARGV`: None for Popen; the tests' conftest sets a function that
# forks it from a server that has imported the daemon once (tests/support/spawnserver.py), with
# Popen's interface, or returns None (then Popen). The demo and the benchmarks start it with Popen.
SPAWN: Callable[[list[str], dict[str, str], Path], Any] | None = None


class DaemonProcess:
    """`gdx serve` as a process on a port the OS picks; the URL is read from its first log line."""

    LISTEN = re.compile(r"listening on (https?://[^/ ]+)/")

    def __init__(self, args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        self.args = args
        argv = ["-m", "exporter", "serve", "--web.listen-address", "127.0.0.1:0", *args]
        full_env = {**os.environ, **(env or {})}
        spawned = SPAWN(argv, full_env, cwd) if SPAWN is not None else None
        self.proc: Any = spawned or subprocess.Popen(
            [sys.executable, *argv],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=full_env,
            cwd=cwd,
        )
        self.lines: list[str] = []
        self.url = ""
        self._listening = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listening.wait(30):
            self.stop()
            raise RuntimeError("daemon did not start:\n" + "\n".join(self.lines))

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            match = self.LISTEN.search(line)
            if match and not self.url:
                self.url = match.group(1)
                self._listening.set()

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> float:
        """Sends `sig` and returns how long the process took to exit."""
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return time.monotonic() - started


class PageServer:
    """A threaded loopback HTTP server answering every GET with `body` (settable while running)."""

    def __init__(self, body: bytes, content_type: str = "text/plain; version=0.0.4; charset=utf-8") -> None:
        self.body = body
        self.content_type = content_type
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", outer.content_type)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
