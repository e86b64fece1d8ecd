"""/schemas over real HTTP from a real daemon, the schema shipped by the real probe over its socket:
the literals a deny-list let through ($comment, examples, x-* notes, a pattern's alternatives) are
not in the body."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper
from exporter.schema.identity import schema_hash
from tools.harness.scraping import wait_for

MARKER = "TENANT-acme-7f3e"


def test_the_schemas_view_shows_no_literal(tmp_path: Path, daemon_factory: Any) -> None:
    sock = tmp_path / "probe.sock"
    daemon = daemon_factory(
        "--probe.socket", str(sock), "--no-collector.nvml", "--no-collector.vllm", "--web.schemas"
    )
    schema = {
        "$comment": MARKER,
        "x-note": {"owner": MARKER},
        "type": "object",
        "properties": {
            "vendor": {"type": "string", "pattern": f"^(?:{MARKER}|globex)$", "examples": [MARKER]},
        },
    }
    text = json.dumps(schema)
    recorder = Recorder(max_schemas=10)
    hello = {"pod": "redact-0", "engine": "0", "engine_kind": "generic", "engine_version": "",
             "backends": {}, "probe_version": "0"}  # fmt: skip
    wait_for(sock.exists, 30)
    shipper = Shipper(recorder, str(sock), hello)
    try:
        recorder.finish(recorder.begin("xgrammar"), "xgrammar", "json", text, 0.01, False)
        shipper.tick()
        wanted = schema_hash(text)

        def shown() -> tuple[str, dict[str, Any] | None]:
            with urllib.request.urlopen(daemon.url + "/schemas", timeout=30) as resp:
                body = resp.read().decode()
            found = [s for s in json.loads(body)["schemas"] if s["schema_hash"] == wanted]
            done = found and found[0]["structure"].startswith("{")
            return body, found[0] if done else None

        wait_for(lambda: shown()[1] is not None, 60, interval=0.5)
        body, entry = shown()
    finally:
        shipper.stop()
    assert entry is not None
    assert MARKER not in body and "globex" not in body
    assert json.loads(entry["structure"]) == {
        "$comment": "*", "*": 1, "type": "object",
        "properties": {"vendor": {"type": "string", "pattern": "*", "examples": "*"}},
    }  # fmt: skip
