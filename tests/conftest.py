"""Shared fixtures: the real vLLM page, a real daemon process, loopback HTTP servers."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from exporter.demo.stack import DaemonProcess

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


class Daemon(DaemonProcess):
    """A real `gdx serve` process on a loopback port chosen by the OS, run from the repository."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None) -> None:
        super().__init__(args, env, cwd=ROOT)


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
