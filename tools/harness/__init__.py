"""What the tests, the demo and the benchmarks share: the repository's paths, loopback ports, the daemon and
the servers it talks to as processes (`processes`), a real vLLM on the CPU (`vllm`), simulated engines
(`simulate`, `simengines`), reading /metrics (`scraping`) and the NVML stand-in (`fake_pynvml`)."""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The data the tests, benchmarks and demo read, vendored in the repository (tests/support/data/README.md
# says where each file comes from). GDX_SHARED_DIR, when set, points the data readers at another copy
# laid out as `data/fixtures/` and `data/jsonschemabench/` (a larger or newer development set).
DATA = ROOT / "tests" / "support" / "data"
_OVERRIDE = os.environ.get("GDX_SHARED_DIR")
JSONSCHEMABENCH = Path(_OVERRIDE) / "data" / "jsonschemabench" if _OVERRIDE else DATA / "jsonschemabench"
VLLM_PAGE = (Path(_OVERRIDE) / "data" / "fixtures" if _OVERRIDE else DATA) / "vllm-0.32.0-cpu-metrics.txt"
TOKENIZER_JSON = Path(
    os.environ.get("GDX_TOKENIZER_JSON", ROOT / ".cache/tokenizer/package/models/tokenizer.json")
)


def free_port() -> int:
    """A loopback TCP port the OS says is free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float = 30.0) -> None:
    """Returns once `url` answers (any 2xx); raises the last error after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
