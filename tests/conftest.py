"""Shared fixtures: the real vLLM page, a real daemon process, loopback HTTP servers, the tokenizer.

The processes themselves live in `tools.harness` (shared with the demo and the benchmarks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.harness import TOKENIZER_JSON, VLLM_PAGE
from tools.harness.processes import DaemonProcess, PageServer


@pytest.fixture(scope="session")
def vllm_page() -> str:
    """The /metrics page of a real vLLM 0.32.0 server (shared/data/fixtures)."""
    if not VLLM_PAGE.is_file():
        raise FileNotFoundError(f"the vLLM fixture page is missing: {VLLM_PAGE} (set GDX_SHARED_DIR)")
    return VLLM_PAGE.read_text(encoding="utf-8")


@pytest.fixture
def page_server(vllm_page: str) -> Iterator[PageServer]:
    server = PageServer(vllm_page.encode())
    yield server
    server.close()


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[object]:
    """Starts real `gdx serve` processes (each with its own probe socket unless given one); stops them."""
    started: list[DaemonProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> DaemonProcess:
        if not any(a.startswith("--probe.socket") for a in args):
            args = (*args, "--probe.socket", str(tmp_path / "probe.sock"))
        daemon = DaemonProcess(list(args), env)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture(scope="session")
def tokenizer_json() -> Path:
    """The real Llama 3 tokenizer (128,256 tokens), fetched by `make tokenizer`."""
    if not TOKENIZER_JSON.is_file():
        raise FileNotFoundError(f"{TOKENIZER_JSON} is missing: run `make tokenizer` (make test does)")
    return TOKENIZER_JSON
