"""The probe on real xgrammar and llguidance over the real Llama 3 vocabulary, shipping to a real
daemon over its real unix socket; every assertion is read from the daemon's /metrics."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import exporter.probe as probe
from tools.harness import ROOT
from tools.harness.scraping import sample, scrape, wait_for

INVOICE = {
    "title": "Invoice",
    "type": "object",
    "properties": {
        "vendor": {"type": "string"},
        "date": {"type": "string", "format": "date"},
        "line_items": {
            "type": "array",
            "maxItems": 25,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string"},
                    "qty": {"type": "integer", "minimum": 1},
                    "cost": {"type": "number"},
                    "cost_center_id": {"type": "string"},
                },
                "required": ["sku", "qty", "cost", "cost_center_id"],
            },
        },
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["vendor", "date", "line_items"],
}


def tenant_invoice(tenant: int) -> dict[str, Any]:
    """The per-tenant enum incident: each tenant's 50 cost centres injected into the schema as an enum."""
    schema = json.loads(json.dumps(INVOICE))
    item = schema["properties"]["line_items"]["items"]["properties"]
    item["cost_center_id"] = {"enum": [f"CC-{tenant:03d}-{i:02d}" for i in range(50)]}
    return schema


PATTERN = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z0-9_-]{8,64}$"}}}


@pytest.fixture(scope="module")
def xgr_info(tokenizer_json: Path) -> Any:
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
    return xgr.TokenizerInfo.from_huggingface(tok, vocab_size=128256)


@pytest.fixture(scope="module")
def ll_tokenizer(tokenizer_json: Path) -> Any:
    import llguidance

    return llguidance.LLTokenizer(tokenizer_json.read_text(), n_vocab=128256)


@pytest.fixture
def socket_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "probe.sock"
    monkeypatch.setenv("GDX_PROBE_SOCKET", str(path))
    monkeypatch.setenv("GDX_PROBE_INTERVAL", "0.1")
    monkeypatch.setenv("GDX_POD_NAME", "engine-pod")
    assert probe.install("generic")
    yield path
    probe.uninstall()


def compiler(info: Any) -> Any:
    import xgrammar as xgr

    return xgr.GrammarCompiler(info, max_threads=8, cache_enabled=True, cache_limit_bytes=512 << 20)


def info_of(samples: dict, schema_hash: str) -> dict[str, str]:
    for (name, labels), _ in samples.items():
        if name == "guided_decoding_schema_info" and ("schema_hash", schema_hash) in labels:
            return dict(labels)
    raise AssertionError(f"no schema_info for {schema_hash}")


def test_static_schema_and_per_tenant_enums_on_real_xgrammar(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    from exporter.schema.identity import schema_hash

    daemon = daemon_factory("--probe.socket", str(socket_path), "--probe.max-schemas", "100")
    c = compiler(xgr_info)
    static = json.dumps(INVOICE)
    for _ in range(50):
        c.compile_json_schema(json.dumps(INVOICE), any_whitespace=False)  # a fresh string each call
    variants = [json.dumps(tenant_invoice(t)) for t in range(50)]
    for spec in variants:
        c.compile_json_schema(spec, any_whitespace=False)
    c.compile_json_schema(json.dumps(PATTERN))

    static_hash = schema_hash(static)
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total") == 101)
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_schema_requests_total", schema_hash=static_hash) == 50
    assert sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=static_hash) == 49
    assert sample(m, "guided_decoding_compile_cache_hits_total", pod="engine-pod", backend="xgrammar") == 49
    # the miss-only histogram holds the 52 real compiles, not the 49 hits
    assert sample(m, "guided_decoding_compile_miss_seconds_count", pod="engine-pod", backend="xgrammar") == 52
    assert sample(m, "guided_decoding_compile_seconds_count", pod="engine-pod", backend="xgrammar") == 101
    (info,) = [dict(ls) for (n, ls) in m if n == "guided_decoding_probe_info"]
    assert info["cache"] == "true"

    hashes = {schema_hash(v) for v in variants}
    assert len(hashes) == 50
    assert sum(sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=h) for h in hashes) == 0
    assert all(sample(m, "guided_decoding_schema_requests_total", schema_hash=h) == 1 for h in hashes)
    shapes = {info_of(m, h)["shape_hash"] for h in hashes}
    assert len(shapes) == 1 and shapes != {info_of(m, static_hash)["shape_hash"]}
    assert info_of(m, static_hash)["title"] == "Invoice"

    pattern_hash = schema_hash(json.dumps(PATTERN))
    # the bounded quantifier costs tens of ms: nothing in the le=0.005 bucket, one compile above it
    assert (
        sample(m, "guided_decoding_schema_compile_seconds_bucket", schema_hash=pattern_hash, le="0.005") == 0
    )
    assert sample(m, "guided_decoding_schema_compile_seconds_count", schema_hash=pattern_hash) == 1
    assert sample(m, "guided_decoding_schemas_first_seen_total") == 52
    assert sample(m, "guided_decoding_schemas_tracked") == 52
    assert sample(m, "guided_decoding_probe_snapshots_total", result="ok") > 0
    assert sample(m, "guided_decoding_probe_snapshots_total", result="rejected") == 0
    assert sample(m, "guided_decoding_engine_cpu_seconds_total", pod="engine-pod", mode="user") > 0


def test_llguidance_never_hits_and_reports_refused_keywords(
    ll_tokenizer: Any, socket_path: Path, daemon_factory: Any
) -> None:
    import llguidance

    daemon = daemon_factory("--probe.socket", str(socket_path))
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(INVOICE))
    for _ in range(5):
        matcher = llguidance.LLMatcher(ll_tokenizer, grammar)
        assert not matcher.is_error() and isinstance(matcher, llguidance.LLMatcher)
    refused = llguidance.LLMatcher.grammar_from_json_schema('{"not": {"type": "string"}}')
    assert llguidance.LLMatcher(ll_tokenizer, refused).is_error()

    wait_for(
        lambda: (
            sample(scrape(daemon.url), "guided_decoding_compile_requests_total", backend="llguidance") == 6
        )
    )
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_compile_cache_hits_total", backend="llguidance") == 0
    assert sample(m, "guided_decoding_compile_errors_total", backend="llguidance", reason="unsupported") == 1
    assert sample(m, "guided_decoding_compile_miss_seconds_count", backend="llguidance") == 6
    # no cache to hit: the cache alerts skip it
    assert [dict(ls)["cache"] for (n, ls) in m if n == "guided_decoding_probe_info"] == ["false"]
    from exporter.schema.identity import schema_hash

    # identified by the user's schema, not by llguidance's wrapped grammar string
    assert (
        sample(m, "guided_decoding_schema_requests_total", schema_hash=schema_hash(json.dumps(INVOICE))) == 5
    )


def test_llguidance_warnings_become_the_schemas_findings(
    ll_tokenizer: Any, socket_path: Path, daemon_factory: Any
) -> None:
    """What llguidance compiles and ignores (lenient mode: an unknown format), read off the engine's
    own matcher by the probe, is the schema's `llguidance_ignored` finding on the daemon, where the
    table alone says llguidance refuses it."""
    import llguidance

    from exporter.schema.identity import schema_hash

    daemon = daemon_factory("--probe.socket", str(socket_path))
    lenient = {"type": "object", "properties": {"sku": {"type": "string", "format": "sku-code"}},
               "x-guidance": {"lenient": True}}  # fmt: skip
    text = json.dumps(lenient)
    matcher = llguidance.LLMatcher(ll_tokenizer, llguidance.LLMatcher.grammar_from_json_schema(text))
    assert not matcher.is_error() and matcher.get_grammar_warnings() == ["Unknown format: sku-code"]
    h = schema_hash(text)

    def findings() -> dict[str, float]:
        m = scrape(daemon.url)
        return {dict(ls)["rule"]: v for (n, ls), v in m.items()
                if n == "guided_decoding_schema_lint_findings" and dict(ls)["schema_hash"] == h}  # fmt: skip

    wait_for(lambda: bool(findings()), timeout=30)
    found = findings()
    assert found.get("llguidance_ignored") == 1 and "llguidance_refused" not in found, found


def test_compile_errors_reach_the_engine_unchanged(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    daemon = daemon_factory("--probe.socket", str(socket_path))
    c = compiler(xgr_info)
    with pytest.raises(RuntimeError, match=r"\$defs"):
        c.compile_json_schema('{"$ref": "#/$defs/missing"}')
    wait_for(
        lambda: (
            sample(scrape(daemon.url), "guided_decoding_compile_errors_total", reason="invalid_schema") == 1
        )
    )


def test_daemon_restart_loses_nothing(xgr_info: Any, socket_path: Path, daemon_factory: Any) -> None:
    c = compiler(xgr_info)
    first = daemon_factory("--probe.socket", str(socket_path))
    for i in range(10):
        c.compile_regex(f"[a-z]{{{i + 1}}}")
        c.compile_regex("[a-z]{1}")
    wait_for(lambda: sample(scrape(first.url), "guided_decoding_compile_requests_total") == 20)
    first.stop(signal.SIGKILL)
    for i in range(10, 15):  # the engine keeps compiling while no daemon listens
        c.compile_regex(f"[a-z]{{{i + 1}}}")
    second = daemon_factory("--probe.socket", str(socket_path))
    wait_for(lambda: sample(scrape(second.url), "guided_decoding_compile_requests_total") == 25, timeout=40)
    m = scrape(second.url)
    assert sample(m, "guided_decoding_compile_cache_hits_total") == 10  # the repeats of "[a-z]{1}"
    assert sample(m, "guided_decoding_schema_requests_total") == 25
    assert sample(m, "guided_decoding_compile_seconds_count") == 25


def test_without_a_daemon_the_engine_notices_nothing(xgr_info: Any, socket_path: Path) -> None:
    import xgrammar as xgr

    c = compiler(xgr_info)
    wrapped = c.compile_regex("[0-9]{3}")
    probe.uninstall()
    plain = compiler(xgr_info).compile_regex("[0-9]{3}")
    assert isinstance(wrapped, xgr.CompiledGrammar)
    assert wrapped.memory_size_bytes == plain.memory_size_bytes
    assert probe.install("generic")
    c = compiler(xgr_info)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(1500):
        c.compile_regex(f"x{i}[0-9]")
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(
        s.size_diff for s in after.compare_to(before, "filename") if "exporter/probe" in str(s.traceback)
    )
    rec = probe.get_recorder()
    assert rec is not None and rec.tracked() == 500  # GDX_PROBE_TRACKED_SPECS default
    assert rec.counters["internal_errors"] == 0
    assert grown < 2 * 2**20, grown
    shipper = probe.get_shipper()
    assert shipper is not None and shipper.counters["connects"] == 0


def test_eight_threads_count_exactly(xgr_info: Any, socket_path: Path, daemon_factory: Any) -> None:
    daemon = daemon_factory("--probe.socket", str(socket_path))
    c = compiler(xgr_info)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                c.compile_regex(f"t{n}-{i % 5}[a-z]+")
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total") == 200)
    m = scrape(daemon.url)
    # 40 distinct regexes, each compiled once: a compile is never taken for a hit, while a repeat that
    # was slow (starved by the other threads) and overlapped a compile counts as a miss: it waited.
    assert 120 <= sample(m, "guided_decoding_compile_cache_hits_total") <= 160
    assert sample(m, "guided_decoding_schema_requests_total") == 200
    assert sample(m, "guided_decoding_compile_in_progress") == 0


def test_sglang_grammar_backend(tokenizer_json: Path, tmp_path: Path, daemon_factory: Any) -> None:
    """SGLang's own cache answers repeats (counted at get_cached_or_future_value); its misses reach
    xgrammar (counted there): every request once, hits exact."""
    sglang_path = os.environ.get("GDX_SGLANG_PATH", str(ROOT / ".cache" / "sglang"))
    if not Path(sglang_path, "sglang").is_dir():
        raise FileNotFoundError(f"SGLang is missing under {sglang_path}: run `make sglang` (make test does)")
    sock = tmp_path / "sglang.sock"
    daemon = daemon_factory("--probe.socket", str(sock))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([sglang_path, str(ROOT)]),
        "GDX_PROBE_SOCKET": str(sock),
        "GDX_PROBE_INTERVAL": "0.2",
        "GDX_POD_NAME": "sglang-0",
    }
    script = ROOT / "tests" / "support" / "engines" / "sglang_grammar.py"
    out = subprocess.run(
        [sys.executable, str(script), str(tokenizer_json), "10", "3"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary == {"requests": 13, "sglang_hits": 9}
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_compile_requests_total", pod="sglang-0", backend="xgrammar") == 13
    assert sample(m, "guided_decoding_compile_cache_hits_total", pod="sglang-0") == 9
    assert sample(m, "guided_decoding_schema_requests_total", pod="sglang-0") == 13
    info = [dict(ls) for (n, ls) in m if n == "guided_decoding_probe_info"]
    assert [i["engine_kind"] for i in info] == ["sglang"]
    assert [i["cache"] for i in info] == ["true"]  # SGLang's own cache, whatever the backend


def test_a_running_compile_is_visible_while_it_runs(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    daemon = daemon_factory("--probe.socket", str(socket_path))
    c = compiler(xgr_info)
    code = {"type": "string", "pattern": "^[A-Z0-9_-]{8,5000}$"}  # a bounded quantifier: about 2 s
    spec = json.dumps({"type": "object", "properties": {"code": code}})
    slow = threading.Thread(target=c.compile_json_schema, args=(spec,))
    slow.start()
    seen: list[float] = []

    def running() -> bool:
        m = scrape(daemon.url)
        if sample(m, "guided_decoding_compile_in_progress", backend="xgrammar") == 1:
            seen.append(sample(m, "guided_decoding_compile_oldest_running_seconds", backend="xgrammar"))
        return bool(seen) and seen[-1] > 0.3

    try:
        wait_for(running, timeout=30, interval=0.05)
    finally:
        slow.join()
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_in_progress") == 0)


def test_a_daemon_that_stops_reading_never_blocks_the_engine(xgr_info: Any, tmp_path: Path) -> None:
    """A listener that accepts and never reads: the socket fills, the shipper's rounds wait, and after
    STALL_SECONDS without a byte read it reconnects, counted; the engine's calls stay as fast as ever."""
    path = tmp_path / "stuck.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    held: list[socket.socket] = []
    accepting = threading.Thread(
        target=lambda: [held.append(server.accept()[0]) for _ in range(8)], daemon=True
    )
    accepting.start()
    os.environ["GDX_PROBE_SOCKET"], os.environ["GDX_PROBE_INTERVAL"] = str(path), "0.05"
    try:
        assert probe.install("generic")
        rec = probe.get_recorder()
        shipper = probe.get_shipper()
        assert rec is not None and shipper is not None
        text = "x" * 200_000
        for i in range(150):  # about 30 MB of schema texts to ship: more than a socket buffer holds
            rec.finish(rec.begin("xgrammar"), "xgrammar", "regex", f"{i}{text}", 0.01, False)
        worst = 0.0
        deadline = time.monotonic() + 40  # the socket fills, then STALL_SECONDS (10 s) without a byte read
        while shipper.counters["send_failures"] == 0 and time.monotonic() < deadline:
            started = time.perf_counter()
            rec.finish(rec.begin("xgrammar"), "xgrammar", "json", '{"a":1}', 0.00001, True)
            worst = max(worst, time.perf_counter() - started)
            time.sleep(0.001)
        assert shipper.counters["send_failures"] >= 1
        assert worst < 0.05, worst  # never waited on the socket
    finally:
        probe.uninstall()
        os.environ.pop("GDX_PROBE_SOCKET")
        os.environ.pop("GDX_PROBE_INTERVAL")
        for conn in held:
            conn.close()
        server.close()


def test_a_path_that_refuses_is_retried_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "not-a-socket"
    path.write_text("")
    os.environ["GDX_PROBE_SOCKET"], os.environ["GDX_PROBE_INTERVAL"] = str(path), "0.02"
    try:
        with caplog.at_level(logging.WARNING, "gdx.probe"):
            assert probe.install("generic")
            time.sleep(1.5)
        shipper = probe.get_shipper()
        assert shipper is not None and shipper.counters["connects"] == 0
        assert caplog.text.count("cannot connect") == 1  # one line per outage, retried with backoff
    finally:
        probe.uninstall()
        os.environ.pop("GDX_PROBE_SOCKET")
        os.environ.pop("GDX_PROBE_INTERVAL")


MARKER = "ZZMARKERZZ"


def test_analysis_names_the_varying_field_and_leaks_no_value(
    xgr_info: Any, socket_path: Path, daemon_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Per-tenant enums whose members, descriptions, defaults and examples carry a marker: the daemon
    names the pointer that varies and the rules that fire, and the marker appears nowhere."""
    from exporter.schema.identity import schema_hash, shape_hash

    # 12 tenants in well under a second, in two snapshots: a dynamic-span of 1 ms lets it warn at once
    daemon = daemon_factory(
        "--probe.socket", str(socket_path), "--probe.max-schemas", "100", "--lint.dynamic-span", "1ms"
    )
    c = compiler(xgr_info)
    specs = []
    for tenant in range(12):
        schema = tenant_invoice(tenant)
        item = schema["properties"]["line_items"]["items"]["properties"]
        item["cost_center_id"]["enum"] = [f"{MARKER}-{tenant}-{i}" for i in range(50)]
        item["sku"]["description"] = f"{MARKER} sku for tenant {tenant}"
        item["sku"]["default"] = MARKER
        item["sku"]["examples"] = [MARKER]
        specs.append(json.dumps(schema))
    specs.append(json.dumps(PATTERN))
    with caplog.at_level(logging.DEBUG):
        # in two snapshots: dynamic_schema waits until new variants have kept arriving for the span
        for i, spec in enumerate(specs):
            c.compile_json_schema(spec, any_whitespace=False)
            if i == 5:
                wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total") >= 6)
        shape = shape_hash(specs[0])
        enum_path = "/properties/line_items/items/properties/cost_center_id/enum"

        def analysed() -> bool:
            m = scrape(daemon.url)
            return (
                sample(m, "guided_decoding_shape_varying_path_info", shape_hash=shape, path=enum_path) == 1
                and sample(m, "guided_decoding_schemas_analysed_total") == 13
                and sample(m, "guided_decoding_family_requests_total") == 13
            )

        wait_for(analysed, timeout=30)
    text = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_shape_variants", shape_hash=shape) == 12
    variant = schema_hash(specs[0])
    family = next(
        dict(labels)["family"]
        for name, labels in m
        if name == "guided_decoding_schema_info" and ("schema_hash", variant) in labels
    )
    assert (
        family and sample(m, "guided_decoding_family_info", family=family, name="Invoice", kind="schema") == 1
    )
    assert sample(m, "guided_decoding_family_variants", family=family) == 12
    assert sample(m, "guided_decoding_family_requests_total", family=family) == 12
    assert (
        sample(m, "guided_decoding_family_varying", family=family, pointer=enum_path, what="literal") == 11
    )  # of the 11 that joined
    findings = [
        dict(ls) for n, ls in m if n == "guided_decoding_family_findings" and ("family", family) in ls
    ]
    assert [(f["rule"], f["severity"] in ("warning", "error")) for f in findings] == [
        ("dynamic_schema", True)
    ]
    assert sample(m, "guided_decoding_schema_lint_findings", schema_hash=variant, rule="max_items") == 1  # 25
    pattern = schema_hash(specs[-1])
    assert (
        sample(m, "guided_decoding_schema_lint_findings", schema_hash=pattern, rule="bounded_quantifier") == 1
    )
    assert sample(m, "guided_decoding_schemas_analysed_total") == 13
    assert MARKER not in text
    assert MARKER not in daemon.log
    assert MARKER not in caplog.text  # the probe's own log lines, in this process


def test_schemas_view_is_off_by_default_and_redacts_values(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    from exporter.schema.identity import schema_hash

    quiet = daemon_factory("--probe.socket", str(socket_path.with_name("other.sock")))
    for path in ("/schemas", "/schemas/registry"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(quiet.url + path, timeout=10)
        assert err.value.code == 404
    daemon = daemon_factory("--probe.socket", str(socket_path), "--web.schemas")
    schema = tenant_invoice(7)
    schema["properties"]["vendor"]["description"] = f"{MARKER} vendor"
    schema["properties"]["line_items"]["items"]["properties"]["cost_center_id"]["enum"] = [
        f"{MARKER}-{i}" for i in range(5)
    ]
    spec = json.dumps(schema)
    compiler(xgr_info).compile_json_schema(spec)

    def listed() -> list[dict[str, Any]]:
        with urllib.request.urlopen(daemon.url + "/schemas", timeout=10) as resp:
            doc: dict[str, list[dict[str, Any]]] = json.load(resp)
        wanted = schema_hash(spec)
        return [d for d in doc["schemas"] if d["schema_hash"] == wanted and d["structure"].startswith("{")]

    wait_for(lambda: bool(listed()), timeout=30)
    (entry,) = listed()
    assert entry["title"] == "Invoice" and entry["findings"]["max_items/warning"] == 1
    structure = json.loads(entry["structure"])
    assert structure["properties"]["line_items"]["items"]["properties"]["cost_center_id"]["enum"] == "*"
    body = urllib.request.urlopen(daemon.url + "/schemas", timeout=10).read().decode()
    assert MARKER not in body


def test_the_schemas_registry_lists_the_nodes_static_schemas_for_gdx_warm(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    """/schemas/registry (`--web.schemas-registry N`, off by default): this node's most requested
    static schemas with their text, as gdx warm reads them; the family injected per request is not
    in it, and N bounds it."""
    from exporter.fix.warm import schemas
    from exporter.schema.identity import schema_hash

    daemon = daemon_factory(
        "--probe.socket", str(socket_path), "--probe.max-schemas", "100", "--lint.dynamic-span", "1ms",
        "--web.schemas-registry", "2",
    )  # fmt: skip
    c = compiler(xgr_info)
    hot, warm, cool = (
        INVOICE,
        PATTERN,
        {"title": "Cool", "type": "object", "properties": {"n": {"type": "integer"}}},
    )
    sent = [
        *[hot] * 4,
        *[warm] * 2,
        cool,
        *[tenant_invoice(t) for t in range(6)],
        *[tenant_invoice(t) for t in range(6, 12)],
    ]
    for i, schema in enumerate(sent):
        c.compile_json_schema(json.dumps(schema), any_whitespace=False)
        if i == 12:  # dynamic_schema waits until new variants have kept arriving for the span
            wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total") >= 13)
    url = daemon.url + "/schemas/registry"

    def listed() -> list[dict[str, Any]]:
        with urllib.request.urlopen(url, timeout=10) as resp:
            found: list[dict[str, Any]] = json.load(resp)["schemas"]
        return found

    wanted = [schema_hash(json.dumps(s)) for s in (hot, warm)]
    wait_for(lambda: [e["schema_hash"] for e in listed()] == wanted, timeout=30)
    first = listed()[0]
    assert first["requests"] == 4 and first["name"] == "Invoice" and first["schema"] == hot
    assert list(first["schema"]["properties"]) == list(hot["properties"])  # the key order the engine saw
    assert [schema for _, schema in schemas([url])] == [hot, warm]  # what gdx warm sends


def compile_and_find_family(daemon: Any, c: Any, specs: list[str]) -> tuple[Any, str]:
    """Compiles the specs in two snapshots (dynamic_schema waits for new variants to keep arriving),
    waits until every one is analysed; the page and the family the first one is in."""
    from exporter.schema.identity import schema_hash

    half, done = len(specs) // 2, len(specs)
    for i, spec in enumerate(specs):
        c.compile_json_schema(spec, any_whitespace=False)
        if i == half - 1:
            wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total") >= half)
    wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_schemas_analysed_total") == done, timeout=30)
    m = scrape(daemon.url)
    family = next(
        dict(labels)["family"]
        for name, labels in m
        if name == "guided_decoding_schema_info" and ("schema_hash", schema_hash(specs[0])) in labels
    )
    return m, family


def test_order_alone_is_named_as_order_on_metrics(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    """The same members in a fresh order per request (an enum built from a set, tools from a dict): one
    family, what varies is the order of each list (not a literal, not a union subset), and
    dynamic_schema fires. Built from the mechanism: random members, random permutations."""
    import random

    rng = random.Random(20261205)
    daemon = daemon_factory("--probe.socket", str(socket_path), "--lint.dynamic-span", "1ms")
    c = compiler(xgr_info)
    members = [f"m{rng.randrange(10**6)}" for _ in range(rng.randint(5, 9))]
    tools = [
        {"type": "object", "properties": {"name": {"const": f"t{i}"}, "arg": {"type": "integer"}}}
        for i in range(rng.randint(4, 6))
    ]
    specs = []
    for _ in range(10):
        rng.shuffle(members)
        rng.shuffle(tools)
        schema = {
            "type": "object",
            "properties": {"kind": {"enum": list(members)}, "call": {"anyOf": list(tools)}},
        }
        specs.append(json.dumps(schema))
    m, family = compile_and_find_family(daemon, c, specs)
    varying = {
        (d["pointer"], d["what"])
        for d in (
            dict(ls) for n, ls in m if n == "guided_decoding_family_varying" and ("family", family) in ls
        )
    }
    assert varying == {("/properties/kind/enum", "order"), ("/properties/call/anyOf", "order")}
    findings = [
        dict(ls)["rule"] for n, ls in m if n == "guided_decoding_family_findings" and ("family", family) in ls
    ]
    assert findings == ["dynamic_schema"]


def test_names_alone_are_named_and_never_a_label(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    """The same models under per-tenant names (Pydantic's create_model(f"LineItem_{tenant}")): one
    family on /metrics whose varying part is `names` at the definitions map, and no tenant's name
    anywhere on the page (not in a pointer, a family name or a title)."""
    import random

    rng = random.Random(20261205)
    daemon = daemon_factory("--probe.socket", str(socket_path), "--lint.dynamic-span", "1ms")
    c = compiler(xgr_info)
    tenants = [f"tnt{rng.randrange(10**6)}zz" for _ in range(10)]
    specs = []
    for t in tenants:
        item = {"title": f"LineItem_{t}", "type": "object", "properties": {"sku": {"type": "string"}}}
        items = {"type": "array", "items": {"$ref": f"#/$defs/LineItem_{t}"}}
        schema = {
            "title": "Invoice",
            "type": "object",
            "properties": {"items": items},
            "$defs": {f"LineItem_{t}": item},
        }
        specs.append(json.dumps(schema))
    m, family = compile_and_find_family(daemon, c, specs)
    assert sample(m, "guided_decoding_family_variants", family=family) == 10
    assert sample(m, "guided_decoding_family_varying", family=family, pointer="/$defs", what="names") == 10
    text = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
    assert not any(t in text for t in tenants)


def test_a_root_model_named_per_tenant_is_one_family_and_never_a_label(
    xgr_info: Any, socket_path: Path, daemon_factory: Any
) -> None:
    """The whole model made per tenant (`create_model(f"{Base}_{tenant}")` at the top): its own title
    is a name like a definition's. One family whose varying part is `names` at `/title`, the schema
    and family titles what the variants share, and no tenant's name anywhere on the page. Built from
    the mechanism: random tenant names (letters only, which no masking of ids would catch), a random
    base name and random fields."""
    import random
    import string

    rng = random.Random(20261206)
    word = "".join(rng.choice(string.ascii_lowercase) for _ in range(6))
    base = word.capitalize() + "Request"
    tenants = ["".join(rng.choice(string.ascii_lowercase) for _ in range(8)) for _ in range(8)]
    fields = {
        f"f{i}": {"type": rng.choice(["string", "integer", "boolean"])} for i in range(rng.randint(1, 5))
    }
    daemon = daemon_factory("--probe.socket", str(socket_path), "--lint.dynamic-span", "1ms")
    c = compiler(xgr_info)
    specs = [
        json.dumps(
            {"title": f"{base}_{t}", "type": "object", "properties": fields, "required": sorted(fields)}
        )
        for t in tenants
    ]
    m, family = compile_and_find_family(daemon, c, specs)
    assert sample(m, "guided_decoding_family_variants", family=family) == len(tenants)
    assert sample(m, "guided_decoding_family_varying", family=family, pointer="/title", what="names") == 8
    titles = {dict(ls)["title"] for (n, ls) in m if n == "guided_decoding_schema_info"}
    assert titles == {base}, titles
    text = urllib.request.urlopen(daemon.url + "/metrics", timeout=10).read().decode()
    assert not any(t in text for t in tenants)
