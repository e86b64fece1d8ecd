"""The probe inside a real vLLM server on the CPU, loaded through its plugin entry point, shipping to
a real daemon: the per-tenant enum incident (a static schema hits, per-request enums miss), measured
where it happens."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
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


TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "pythonic")
MODELS = """
from typing import Literal, Optional

from pydantic import BaseModel, Field


class Address(BaseModel):
    city: str = Field(max_length=12)
    zip: Optional[str] = None


class Order(BaseModel):
    number: str = Field(max_length=10)
    status: Literal["open", "shipped"]
    shipping: Address
"""


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
        # a tool parser that derives JSON Schema: tool_choice required compiles a grammar of the tools
        server = VllmServer(work, tokenizer_json, sock, args=TOOL_FLAGS)
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


def gdx_lint_hashes(*args: str, cwd: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "lint", "--format", "json", *args],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [
        schema["schema_hash"] for family in json.loads(out.stdout)["families"] for schema in family["schemas"]
    ]


def test_what_the_openai_client_sends_has_the_hash_gdx_lint_prints(
    stack: tuple[Any, VllmServer], tmp_path: Path
) -> None:
    """The real OpenAI SDK against the real server: `parse(response_format=Model)` and a
    tool_choice="required" request. The schema_hash the probe reports for each is the one `gdx lint`
    prints for the model (--client openai) and for the request as a log line (--tool-call-parser)."""
    import openai
    import pydantic

    daemon, server = stack
    (tmp_path / "shop_models.py").write_text(MODELS, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        from shop_models import Order  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Where is my order?"}]
    # the tiny random model rarely finishes an object: a parse error here is the client's, after the compile
    with contextlib.suppress(openai.LengthFinishReasonError, pydantic.ValidationError):
        client.chat.completions.parse(model="tiny", messages=messages, response_format=Order, max_tokens=24)
    parameters = {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]}
    tools: list[Any] = [
        {
            "type": "function",
            "function": {"name": name, "description": f"{name} an order", "parameters": parameters},
        }
        for name in ("track", "cancel")
    ]
    body = {
        "model": "tiny",
        "messages": messages,
        "tools": tools,
        "tool_choice": "required",
        "max_tokens": 24,
    }
    answer = client.chat.completions.create(**body)  # type: ignore[call-overload]
    assert answer.choices[0].finish_reason in ("length", "tool_calls", "stop")
    (tmp_path / "requests.jsonl").write_text(json.dumps(body) + "\n", encoding="utf-8")

    (model_hash,) = gdx_lint_hashes("--client", "openai", "shop_models:Order", cwd=tmp_path)
    (pydantic_hash,) = gdx_lint_hashes("shop_models:Order", cwd=tmp_path)
    (tools_hash,) = gdx_lint_hashes("--tool-call-parser", "pythonic", "--engine", "vllm==0.32.0",
                                    str(tmp_path / "requests.jsonl"), cwd=tmp_path)  # fmt: skip
    requests = "guided_decoding_schema_requests_total"
    wait_for(lambda: sample(scrape(daemon.url), requests, schema_hash=tools_hash) >= 1, timeout=30)
    m = scrape(daemon.url)
    assert sample(m, requests, schema_hash=model_hash, pod="vllm-test") == 1
    assert sample(m, requests, schema_hash=tools_hash, pod="vllm-test") == 1
    assert sample(m, requests, schema_hash=pydantic_hash) == 0  # the SDK does not send model_json_schema()


def costly(tenant: int) -> dict[str, Any]:
    """A schema whose compile a user waits for (bounded patterns, 300 codes: about 0.1 s on xgrammar
    here); tenants differ only in the codes, so each compiles as long as the others."""
    fields: dict[str, Any] = {f"ref{i}": {"type": "string", "pattern": "^[A-Z0-9]{8,32}$"} for i in range(8)}
    fields["code"] = {"enum": [f"CC-{tenant:04d}-{i:03d}" for i in range(300)]}
    return {"title": "Costly", "type": "object", "properties": fields, "required": list(fields)}


def test_the_warm_hook_gdx_inject_writes_warms_the_replica_before_its_first_user_request(
    stack: tuple[Any, VllmServer], tmp_path: Path
) -> None:
    """The postStart hook `gdx inject --warm-configmap` writes, run as the pod would run it: the
    engine's own Python (the stock vLLM virtualenv, no package of ours), the probe's copied tree on
    PYTHONPATH, over a registry folder (the ConfigMap's mount, gdx fix's registry/), against the real
    server. The user's first request with a warmed schema is then a cache hit, and one with a schema
    the replica never compiled is a compile: the first-request TTFT of each, side by side."""
    from exporter.inject.podspec import InjectOptions, inject
    from exporter.inject.tree import write_tree
    from exporter.inject.warmhook import WARM_DIR
    from tools.harness.vllm import VLLM_PYTHON

    daemon, server = stack
    warmed, cold = [costly(t) for t in (1, 3, 5)], [costly(t) for t in (2, 4, 6)]
    registry = tmp_path / "registry"  # as the ConfigMap volume holds it: file per key
    registry.mkdir()
    for index, schema in enumerate(warmed):
        (registry / f"Costly-{index}.json").write_text(json.dumps(schema), encoding="utf-8")
    write_tree(tmp_path / "gdx-probe")
    spec = {"containers": [{"name": "vllm", "command": ["vllm", "serve", "m", "--port", "8000"]}]}
    options = InjectOptions(image="guided-decoding-exporter:test", warm_configmap="gdx-warm")
    hook = inject(spec, {}, options).spec["containers"][0]["lifecycle"]["postStart"]["exec"]["command"]
    here = {"python3": str(VLLM_PYTHON), "http://127.0.0.1:8000": server.url, WARM_DIR: str(registry),
            "/proc/1/fd/1": str(tmp_path / "container.log")}  # the pod's paths, on this machine  # fmt: skip
    pod_env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "gdx-probe")}
    command = [here.get(word, word) for word in hook]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=pod_env)
    assert ran.returncode == 0, ran.stderr
    log = (tmp_path / "container.log").read_text(encoding="utf-8")
    assert log.splitlines()[-1] == f"3 of 3 schemas warmed on {server.url} (tiny)", log
    seconds: dict[str, list[float]] = {"warmed": [], "cold": []}
    for hot, new in zip(warmed, cold, strict=True):  # alternated: the machine's load hits both alike
        for kind, schema in (("warmed", hot), ("cold", new)):
            started = time.perf_counter()
            server.chat(schema, max_tokens=1)  # the user's first request: its one token is its first
            seconds[kind].append(time.perf_counter() - started)
    requests = "guided_decoding_schema_requests_total"
    last = schema_hash(json.dumps(cold[-1]))
    wait_for(lambda: sample(scrape(daemon.url), requests, schema_hash=last) >= 1, timeout=30)
    m = scrape(daemon.url)
    for schema in warmed:  # the hook's request compiled it; the user's hit
        digest = schema_hash(json.dumps(schema))
        assert sample(m, requests, schema_hash=digest, pod="vllm-test") == 2
        assert sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=digest) == 1
    compiled = []
    for schema in cold:
        digest = schema_hash(json.dumps(schema))
        assert sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=digest) == 0
        compiled.append(sample(m, "guided_decoding_schema_compile_seconds_sum", schema_hash=digest))
    median = {kind: sorted(values)[1] for kind, values in seconds.items()}
    print(f"first-request TTFT, median of 3: cold {median['cold'] * 1000:.1f} ms, warmed "
          f"{median['warmed'] * 1000:.1f} ms ({median['cold'] / median['warmed']:.2f}x); the engine's "
          f"compile of a cold one (the probe) {sorted(compiled)[1] * 1000:.1f} ms")  # fmt: skip
