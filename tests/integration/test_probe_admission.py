"""One pod must not blind, bloat or poison a node's monitoring (issue 47: 3, 5, 10), through the real
`gdx serve` and its real unix socket: a flood of hellos with made-up backends, a forged schema hash
and a hostile title, against the series count, the refusal counters, /schemas/registry and the labels."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter import wire
from exporter.schema.identity import spec_hashes
from tools.harness.scraping import wait_for

ZERO_COMPILE = {"buckets": [0] * (len(wire.COMPILE_BUCKETS) + 1), "sum": 0.0}
ZERO_MASK = {"buckets": [0] * (len(wire.MASK_BUCKETS) + 1), "sum": 0.0}
VICTIM_TEXT = '{"title":"Invoice","type":"object","properties":{"id":{"type":"string"}}}'
FORGED_TEXT = '{"title":"Evil","type":"object","properties":{"x":{"pattern":"(a+)+$"}}}'
HOSTILE = 'Inv"oice\n\u202e' + "}" * 300 + "x" * 700


def line(kind: str, **fields: Any) -> bytes:
    return json.dumps({"v": wire.VERSION, "kind": kind, **fields}).encode() + b"\n"


def backend() -> dict[str, Any]:
    return {"requests": 1, "hits": 0, "compile": ZERO_COMPILE, "wait": ZERO_COMPILE, "mask": ZERO_MASK}


def row(spec_id: int, seconds: float) -> dict[str, Any]:
    return {"id": spec_id, "requests": 1, "hits": 0, "buckets": [0, 0, 0, 1, 0, 0, 0], "sum": seconds}


def connect(sock_path: Path, pod: str, engine: str, *messages: bytes) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(sock_path))
    hello = line("hello", instance=f"{pod}-{engine}", pid=100, pod=pod, engine=engine, engine_kind="generic",
                 engine_version='1"\n\u202e', backends={"xgrammar": "0.1"})  # fmt: skip
    conn.sendall(hello + b"".join(messages))
    return conn


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


def test_a_hostile_pod_cannot_bloat_blind_or_poison_the_node(daemon_factory: Any, tmp_path: Path) -> None:
    sock = tmp_path / "probe.sock"
    daemon = daemon_factory(
        "--probe.socket", str(sock), "--no-collector.nvml", "--no-collector.vllm", "--no-collector.cpu",
        "--probe.max-engines-per-pod", "4", "--probe.max-engines", "8", "--web.schemas-registry", "10",
    )  # fmt: skip
    victim_hash, victim_shape = spec_hashes("json", VICTIM_TEXT)
    hostile_text = json.dumps({"title": HOSTILE, "type": "object"})
    hostile_hash, hostile_shape = spec_hashes("json", hostile_text)
    made_up = {f"made-up-{i}": backend() for i in range(16)}
    forged = {"id": 1, "hash": victim_hash, "shape": victim_shape, "kind": "json", "backend": "xgrammar",
              "title": "Evil", "text": FORGED_TEXT}  # fmt: skip
    hostile = {"id": 2, "hash": hostile_hash, "shape": hostile_shape, "kind": "json", "backend": "xgrammar",
               "title": HOSTILE, "text": hostile_text}  # fmt: skip
    conns = [
        connect(
            sock,
            "attacker",
            str(i),
            line("schemas", schemas=[forged, hostile]),
            line("snapshot", seq=0, full=True, backends=made_up, schemas=[row(1, 5.0), row(2, 1.0)]),
        )
        for i in range(40)
    ]
    victim = {"id": 9, "hash": victim_hash, "shape": victim_shape, "kind": "json", "backend": "xgrammar",
              "title": "Invoice", "text": VICTIM_TEXT}  # fmt: skip
    conns.append(
        connect(
            sock,
            "victim",
            "0",
            line("schemas", schemas=[victim]),
            line("snapshot", seq=0, full=True, backends={"xgrammar": backend()}, schemas=[row(9, 0.05)]),
        )
    )
    try:
        page: dict[str, Any] = {}

        def settled() -> bool:
            text = get(daemon.url + "/metrics")
            page["samples"] = [s for f in text_string_to_metric_families(text) for s in f.samples]
            page["text"] = text
            refused = {s.labels["reason"]: s.value for s in page["samples"]
                       if s.name == "guided_decoding_probe_refused_total"}  # fmt: skip
            return refused.get("engines_per_pod") == 36 and any(
                s.labels.get("pod") == "victim" for s in page["samples"]
            )

        wait_for(settled, timeout=30)
        samples, text = page["samples"], page["text"]
        refused = {
            s.labels["reason"]: s.value for s in samples if s.name == "guided_decoding_probe_refused_total"
        }
        assert refused["backends_per_engine"] == 4 * 9  # per engine: xgrammar (its specs) and 7 of 16 kept
        assert refused["schema_hash_mismatch"] == 4  # one forged text per admitted engine
        engines = {(s.labels["pod"], s.labels["engine"]) for s in samples if "engine" in s.labels}
        assert engines == {("attacker", str(i)) for i in range(4)} | {("victim", "0")}
        assert len(samples) < 3_000, len(samples)
        (info,) = [s for s in samples if s.name == "guided_decoding_schema_info"
                   and s.labels["schema_hash"] == hostile_hash]  # fmt: skip
        assert re.fullmatch(r"[A-Za-z0-9_.#-]{0,64}", info.labels["title"]), info.labels["title"]
        assert "\u202e" not in text and "Evil" not in text
        for s in samples:
            if s.name == "guided_decoding_probe_info":
                assert re.fullmatch(r"[A-Za-z0-9_.+!-]{0,64}", s.labels["engine_version"])

        def registered() -> bool:
            page["registry"] = json.loads(get(daemon.url + "/schemas/registry"))
            return victim_hash in json.dumps(page["registry"])

        wait_for(registered, timeout=30)
        assert "Evil" not in json.dumps(page["registry"]) and "(a+)+$" not in json.dumps(page["registry"])
        (entry,) = [e for e in page["registry"]["schemas"] if e["schema_hash"] == victim_hash]
        assert entry["schema"] == json.loads(VICTIM_TEXT)
    finally:
        for conn in conns:
            conn.close()
