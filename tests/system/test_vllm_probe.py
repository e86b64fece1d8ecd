"""The probe inside a real vLLM server on the CPU, loaded through its plugin entry point, shipping to
a real daemon: the per-tenant enum incident (a static schema hits, per-request enums miss), measured
where it happens."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.schema.identity import schema_hash
from tools.harness.scraping import sample, scrape, wait_for
from tools.harness.vllm import VllmServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

INVOICE = {
    "title": "Invoice",
    "type": "object",
    "properties": {
        "vendor": {"type": "string", "maxLength": 12},
        "total": {"type": "integer", "minimum": 0, "maximum": 999},
    },
    "required": ["vendor", "total"],
}


def with_tenant_enum(tenant: int) -> dict[str, Any]:
    schema = json.loads(json.dumps(INVOICE))
    schema["properties"]["cost_center_id"] = {"enum": [f"CC-{tenant:03d}-{i:02d}" for i in range(50)]}
    schema["required"].append("cost_center_id")
    return schema


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, tokenizer_json: Path) -> Iterator[tuple[Any, VllmServer]]:
    from tools.harness.processes import DaemonProcess as Daemon

    work = tmp_path_factory.mktemp("vllm")
    sock = work / "probe.sock"
    server_holder: list[VllmServer] = []
    daemon = Daemon(["--probe.socket", str(sock), "--no-collector.nvml", "--probe.max-schemas", "100"])
    try:
        server = VllmServer(work, tokenizer_json, sock)
        server_holder.append(server)
        yield daemon, server
    finally:
        for server in server_holder:
            server.stop()
        daemon.stop()
    for server in server_holder:  # everything started is gone: no process left, the port free again
        assert not server.group_alive()
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine, a listener is not
            s.bind(("127.0.0.1", server.port))


def test_static_schema_hits_and_per_request_enum_misses(stack: tuple[Any, VllmServer]) -> None:
    daemon, server = stack
    for _ in range(20):
        out = server.chat(INVOICE)
        assert out["choices"][0]["message"]["content"].startswith("{")
    variants = [with_tenant_enum(t) for t in range(20)]
    for schema in variants:
        server.chat(schema)

    static = schema_hash(json.dumps(INVOICE))
    requests = "guided_decoding_schema_requests_total"
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total") >= 40, timeout=30)
    m = scrape(daemon.url)
    assert sample(m, requests, schema_hash=static, pod="vllm-test", backend="xgrammar") == 20
    assert sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=static) / 20 >= 0.9

    hashes = {schema_hash(json.dumps(s)) for s in variants}
    assert len(hashes) == 20 and all(sample(m, requests, schema_hash=h) == 1 for h in hashes)
    shapes = {
        dict(ls)["shape_hash"]
        for (n, ls) in m
        if n == "guided_decoding_schema_info" and dict(ls)["schema_hash"] in hashes
    }
    assert len(shapes) == 1

    assert sample(m, "guided_decoding_grammar_wait_seconds_count", engine="0") == 40
    assert sample(m, "guided_decoding_mask_seconds_count", backend="xgrammar") > 0
    assert sample(m, "guided_decoding_mask_seconds_sum", backend="xgrammar") > 0
    info = [dict(ls) for (n, ls) in m if n == "guided_decoding_probe_info"]
    assert [(i["engine_kind"], i["engine_version"], i["backend"]) for i in info] == [
        ("vllm", "0.32.0", "xgrammar")
    ]
    assert sample(m, "guided_decoding_probe_snapshots_total", result="rejected") == 0
    assert sample(m, "guided_decoding_probe_events_total", event="internal_errors") == 0
    # the probe's own thread costs CPU, a small share of the engine process's
    probe_cpu = sample(m, "guided_decoding_probe_cpu_seconds_total", pod="vllm-test")
    engine_cpu = sample(m, "guided_decoding_engine_cpu_seconds_total", pod="vllm-test", mode="user")
    assert 0 < probe_cpu < 0.1 * engine_cpu
    # what the engine is sized with: its compile pool from os.cpu_count(), its xgrammar compiler's
    # cache (VLLM_XGRAMMAR_CACHE_MB, 512 by default) and the container's CPU cgroup
    import os

    assert sample(m, "guided_decoding_compile_pool_workers", pod="vllm-test") == max(
        1, ((os.cpu_count() or 1) + 1) // 2
    )
    assert sample(m, "guided_decoding_engine_cpus", pod="vllm-test") == os.cpu_count()
    cache = {"pod": "vllm-test", "backend": "xgrammar", "compiler": "compiler"}
    assert sample(m, "guided_decoding_grammar_cache_bytes", **cache) > 0
    assert sample(m, "guided_decoding_grammar_cache_limit_bytes", **cache) == 512 << 20
    assert sample(m, "guided_decoding_compile_miss_seconds_count", pod="vllm-test") >= 21
    # accept_tokens is wrapped on every step of every structured request: exposed, nothing refused
    assert any(n == "guided_decoding_grammar_rejections_total" for n, _ in m)
    assert sample(m, "guided_decoding_grammar_rejections_total", pod="vllm-test") == 0
