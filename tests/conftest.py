"""Shared fixtures: the real vLLM page, a real daemon process, loopback HTTP servers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("GDX_SHARED_DIR", ROOT.parent / "shared"))
FIXTURE = SHARED / "data" / "fixtures" / "vllm-0.32.0-cpu-metrics.txt"


@pytest.fixture(scope="session")
def vllm_page() -> str:
    """The /metrics page of a real vLLM 0.32.0 server (shared/data/fixtures)."""
    if not FIXTURE.is_file():
        raise FileNotFoundError(f"the vLLM fixture page is missing: {FIXTURE} (set GDX_SHARED_DIR)")
    return FIXTURE.read_text(encoding="utf-8")


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


@pytest.fixture
def page_server(vllm_page: str) -> Iterator[PageServer]:
    server = PageServer(vllm_page.encode())
    yield server
    server.close()


class Daemon:
    """A real `gdx serve` process on a loopback port chosen by the OS."""

    LISTEN = re.compile(r"listening on (https?://[^/ ]+)/")

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        self.args = args
        full_env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "exporter", "serve", "--web.listen-address", "127.0.0.1:0", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=full_env,
            cwd=ROOT,
        )
        self.lines: list[str] = []
        self._listening = threading.Event()
        self.url = ""
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


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[object]:
    started: list[Daemon] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Daemon:
        if not any(a.startswith("--probe.socket") for a in args):
            args = (*args, "--probe.socket", str(tmp_path / "probe.sock"))
        daemon = Daemon(list(args), env)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


TOKENIZER_JSON = Path(
    os.environ.get(
        "GDX_TOKENIZER_JSON", ROOT / ".cache" / "tokenizer" / "package" / "models" / "tokenizer.json"
    )
)


@pytest.fixture(scope="session")
def tokenizer_json() -> Path:
    """The real Llama 3 tokenizer (128,256 tokens), fetched by `make tokenizer`."""
    if not TOKENIZER_JSON.is_file():
        raise FileNotFoundError(f"{TOKENIZER_JSON} is missing: run `make tokenizer` (make test does)")
    return TOKENIZER_JSON
