"""What users of structured outputs actually send, end to end with real parts: each scenario's traffic
(tools/harness/scenarios.py) is compiled by a real xgrammar GrammarCompiler (cache on, as vLLM runs
it) over the real Llama 3 vocabulary, in this process, with the probe installed; the probe ships to a
real `gdx serve` process of the scenario's own (its own socket and pod name, so no scenario sees
another's families); every daemon-side assertion is read over HTTP from /metrics and /schemas. The
same traffic, as a request log (one line per request), goes through the real `gdx lint` CLI, which
must say the same.

For the injected scenarios the seconds from the first injected request to the `dynamic_schema`
finding on /metrics are measured: the traffic is sent at RATE requests per second, /metrics is
scraped every POLL seconds while it runs (the daemon analyses on scrape), and the probe ships every
PROBE_INTERVAL seconds so that the figure is about the daemon, not the probe's period. The figures are
printed at the end of the module and, with GDX_SCENARIO_REPORT=PATH, written there as JSON
(`python -m tools.bench.scenarios` runs the module and prints them as a table).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import exporter.probe as probe
from exporter.schema.identity import schema_hash
from tests.support import cli
from tools.harness import ROOT
from tools.harness import scenarios as sc
from tools.harness.processes import DaemonProcess
from tools.harness.scraping import sample, scrape

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PROBE_INTERVAL = 0.1  # seconds between the probe's snapshots
POLL = 0.2  # seconds between scrapes of /metrics while a scenario's traffic runs
RATE = 10.0  # requests per second
# The daemon's --lint.dynamic-span here (default 30 s): dynamic_schema warns only once new variants have
# kept arriving this long, so that a static set's first requests (all new) do not warn. Injected
# scenarios send new variants for about 3 s at RATE; the classifiers' 10 variants all arrive in the
# first second. The figures measured are the span plus the detection latency beyond it.
SPAN = 2.0
SETTLE = 60.0  # seconds the daemon has to account for every request after the last one
CALLS = {"json": "compile_json_schema", "regex": "compile_regex", "grammar": "compile_grammar"}
SEVERITY = ("", "info", "warning", "error")  # "": no finding; ordered by how bad
BAD = ("warning", "error")
RULE = "dynamic_schema"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def worst(severities: Iterable[str]) -> str:
    return max(severities, key=SEVERITY.index, default="")


# ---------------------------------------------------------------------------------------------------
# Reading the daemon's families off /metrics


def labels_of(m: Samples, name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(ls), v) for (n, ls), v in m.items() if n == name]


def family_of(m: Samples) -> dict[str, str]:
    """schema_hash -> family, from schema_info ("" until analysed)."""
    return {ls["schema_hash"]: ls["family"] for ls, _ in labels_of(m, "guided_decoding_schema_info")}


def live_families(m: Samples) -> dict[str, dict[str, str]]:
    """The families the daemon reports on now (family_info): family -> its labels."""
    return {ls["family"]: ls for ls, v in labels_of(m, "guided_decoding_family_info") if v == 1}


def dynamic_findings(m: Samples) -> dict[str, str]:
    """family -> the severity of its dynamic_schema finding on /metrics (absent: none)."""
    out: dict[str, str] = {}
    for ls, v in labels_of(m, "guided_decoding_family_findings"):
        if ls["rule"] == RULE and v > 0:
            out[ls["family"]] = worst([out.get(ls["family"], ""), ls["severity"]])
    return out


def varying(m: Samples, family: str) -> dict[tuple[str, str], float]:
    """(pointer, what) -> value of family_varying."""
    return {
        (ls["pointer"], ls["what"]): v
        for ls, v in labels_of(m, "guided_decoding_family_varying")
        if ls["family"] == family
    }


# ---------------------------------------------------------------------------------------------------
# One scenario: its daemon, the probe, the traffic and the polls


@dataclass(frozen=True)
class Poll:
    at: float  # monotonic, when the scrape returned
    took: float  # seconds the scrape took (the daemon analyses new specs on scrape)
    sent: int  # requests whose compile had started
    findings: dict[str, str]  # family -> dynamic_schema severity
    families: dict[str, str]  # schema_hash -> family


@dataclass(frozen=True)
class Played:
    requests: list[sc.Request]
    started: list[float]  # monotonic start of each request's compile
    polls: list[Poll]
    metrics: Samples  # /metrics once every request is in a family
    schemas: dict[str, Any]  # /schemas then

    def hashes(self, which: Callable[[int], bool] = lambda i: True) -> set[str]:
        return {schema_hash(text) for i, (_, text) in enumerate(self.requests) if which(i)}

    def families(self, hashes: set[str]) -> set[str]:
        found = family_of(self.metrics)
        return {found[h] for h in hashes}

    def seen(self, hashes: set[str]) -> str:
        """The worst dynamic_schema severity ever on /metrics for a family holding one of `hashes`."""
        return worst(poll.findings.get(poll.families.get(h, ""), "") for poll in self.polls for h in hashes)

    def detection(self, injected: Sequence[int]) -> tuple[float, int] | None:
        """(seconds, injected requests sent) from the first of the `injected` requests to the first
        poll where a family holding one of their hashes has a dynamic_schema warning or error."""
        first = self.started[injected[0]]
        hashes = self.hashes(lambda i: i in set(injected))
        for poll in self.polls:
            if poll.at >= first and any(poll.findings.get(poll.families.get(h, "")) in BAD for h in hashes):
                return poll.at - first, sum(1 for i in injected if 0 < self.started[i] <= poll.at)
        return None


class Scenario:
    """A daemon of the scenario's own (fresh socket, --web.schemas), the probe armed for a pod named
    after the scenario, a fresh GrammarCompiler (cache on)."""

    def __init__(self, name: str, info: Any, workdir: Path) -> None:
        import xgrammar as xgr

        self.name = name
        socket_path = workdir / f"{name}.sock"
        flags = ["--probe.socket", str(socket_path), "--web.schemas", "--probe.max-schemas", "100"]
        self.daemon = DaemonProcess([*flags, "--lint.dynamic-span", f"{SPAN}s"])
        os.environ.update(
            GDX_PROBE_SOCKET=str(socket_path), GDX_PROBE_INTERVAL=str(PROBE_INTERVAL), GDX_POD_NAME=name
        )
        if not probe.install("generic"):
            self.close()
            raise AssertionError("the probe did not arm")
        self.compiler = xgr.GrammarCompiler(
            info, max_threads=8, cache_enabled=True, cache_limit_bytes=256 << 20
        )

    def close(self) -> None:
        probe.uninstall()
        for key in ("GDX_PROBE_SOCKET", "GDX_PROBE_INTERVAL", "GDX_POD_NAME"):
            os.environ.pop(key, None)
        self.daemon.stop()

    def schemas(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.daemon.url + "/schemas", timeout=10) as resp:
            doc: dict[str, Any] = json.load(resp)
        return doc

    def accounted(self, m: Samples, n: int) -> bool:
        """Every request counted, analysed and attributed to a family (none held, none in `other`)."""
        return (
            sample(m, "guided_decoding_compile_requests_total", pod=self.name) == n
            and sample(m, "guided_decoding_family_requests_total") == n
            and all(family_of(m).values())
        )

    def play(self, requests: list[sc.Request]) -> Played:
        """Sends the requests at RATE from a thread while /metrics is scraped every POLL seconds;
        returns once the daemon has accounted for every request."""
        started = [0.0] * len(requests)
        errors: list[BaseException] = []
        done = threading.Event()

        def send() -> None:
            begin = time.monotonic()
            try:
                for i, (kind, text) in enumerate(requests):
                    time.sleep(max(0.0, begin + i / RATE - time.monotonic()))  # the request rate
                    started[i] = time.monotonic()
                    getattr(self.compiler, CALLS[kind])(text)
            except BaseException as err:
                errors.append(err)
            finally:
                done.set()

        sender = threading.Thread(target=send, name=f"traffic-{self.name}")
        sender.start()
        polls: list[Poll] = []
        deadline = time.monotonic() + len(requests) / RATE + SETTLE
        try:
            while True:
                ended = done.is_set()
                begun = time.monotonic()
                m = scrape(self.daemon.url)
                now = time.monotonic()
                sent = sum(1 for s in started if s)
                polls.append(Poll(now, now - begun, sent, dynamic_findings(m), family_of(m)))
                if ended and (errors or self.accounted(m, len(requests))):
                    break
                assert now < deadline, (
                    f"{self.name}: not every request accounted for: "
                    f"{sample(m, 'guided_decoding_compile_requests_total', pod=self.name)} counted, "
                    f"{sample(m, 'guided_decoding_family_requests_total')} in families, of {len(requests)}"
                )
                time.sleep(max(0.0, POLL - (time.monotonic() - begun)))  # the scrape period
        finally:
            sender.join()
        assert not errors, errors
        return Played(requests, started, polls, m, self.schemas())


@pytest.fixture(scope="module")
def xgr_info(tokenizer_json: Path) -> Any:
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
    return xgr.TokenizerInfo.from_huggingface(tok, vocab_size=128256)


@pytest.fixture
def scenario(xgr_info: Any, tmp_path: Path) -> Iterator[Callable[[str], Scenario]]:
    started: list[Scenario] = []

    def start(name: str) -> Scenario:
        run = Scenario(name, xgr_info, tmp_path)
        started.append(run)
        return run

    yield start
    for run in started:
        run.close()


@pytest.fixture(scope="module")
def results() -> Iterator[list[dict[str, Any]]]:
    """The figures of every scenario: printed at the end, written to GDX_SCENARIO_REPORT if set."""
    from tools.bench.scenarios import table

    rows: list[dict[str, Any]] = []
    yield rows
    doc = {"probe_interval": PROBE_INTERVAL, "poll": POLL, "rate": RATE, "span": SPAN, "scenarios": rows}
    print("\n" + table(doc))
    path = os.environ.get("GDX_SCENARIO_REPORT")
    if path:
        Path(path).write_text(json.dumps(doc, indent=2) + "\n")


def record(
    results: list[dict[str, Any]],
    name: str,
    played: Played,
    metrics: str,
    lint_doc: dict[str, Any],
    lint_exit: int,
    lint_severity: str,
    injected: Sequence[int] = (),
) -> None:
    found = played.detection(injected) if injected else None
    if injected:
        assert found is not None, f"{name}: no dynamic_schema warning or error seen while polling"
    row = {
        "scenario": name,
        "requests": len(played.requests),
        "families": len(live_families(played.metrics)),
        "metrics": metrics,
        "lint": lint_severity,
        "lint_exit": lint_exit,
        "seconds_to_finding": None if found is None else round(found[0], 3),
        "requests_to_finding": None if found is None else found[1],
        "probe_interval": PROBE_INTERVAL,
        "poll": POLL,
        "rate": RATE,
        "lint_families": lint_doc["summary"]["families"],
        "scrapes": len(played.polls),
        "slowest_scrape_seconds": round(max(poll.took for poll in played.polls), 3),
    }
    results.append(row)
    print(json.dumps(row))


# ---------------------------------------------------------------------------------------------------
# gdx lint, the real CLI


def gdx(*args: str) -> subprocess.CompletedProcess[str]:
    return cli.gdx(*args, cwd=ROOT, timeout=120)


def lint(path: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    out = gdx("lint", "--format", "json", "--kind", "auto", *flags, str(path))
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads(out.stdout)
    assert isinstance(doc, dict)
    errors = doc["summary"]["error"]
    assert out.returncode == (1 if errors else 0), (out.returncode, doc["summary"])  # exit per severity
    return out.returncode, doc


def lint_log(
    workdir: Path, name: str, requests: Sequence[sc.Request], *flags: str
) -> tuple[int, dict[str, Any]]:
    """`gdx lint` on the scenario's request log, one line per request."""
    path = workdir / f"{name}.jsonl"
    path.write_text(sc.request_log(requests))
    return lint(path, *flags)


def lint_family(doc: dict[str, Any], hashes: set[str]) -> dict[str, Any]:
    """The one lint family that holds exactly these schema hashes."""
    found: list[dict[str, Any]] = [
        f for f in doc["families"] if {s["schema_hash"] for s in f["schemas"]} & hashes
    ]
    assert len(found) == 1, [(f["family"], len(f["schemas"])) for f in found]
    assert {s["schema_hash"] for s in found[0]["schemas"]} == hashes
    return found[0]


def lint_dynamic(family: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in family["findings"] if f["rule"] == RULE]


def schemas_family(doc: dict[str, Any], family: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = [f for f in doc["families"] if f["family"] == family]
    assert len(entries) == 1, (family, [f["family"] for f in doc["families"]])
    return entries[0]


# ---------------------------------------------------------------------------------------------------
# The scenarios


def test_per_tenant_const(
    scenario: Any, results: list[dict[str, Any]], tmp_path: Path, tokenizer_json: Path
) -> None:
    """A retrieval service pins each request's tenant id as a `const`. A user expects: one family (not
    30 unrelated schemas), its varying pointer the const (what="literal"), dynamic_schema as a warning
    or an error, and `gdx lint` on the request log naming the same pointer, exit code per severity."""
    requests = sc.tenant_const(30)
    pointer = "/properties/tenant_id/const"
    played = scenario("tenant-const").play(requests)
    m = played.metrics
    hashes = played.hashes()
    assert len(hashes) == 30
    (family,) = played.families(hashes)
    assert set(live_families(m)) == {family}
    assert sample(m, "guided_decoding_family_variants", family=family) == 30
    assert sample(m, "guided_decoding_family_requests_total", family=family) == 30
    assert sample(m, "guided_decoding_family_cache_hits_total", family=family) == 0
    assert set(varying(m, family)) == {(pointer, "literal")}
    severity = dynamic_findings(m).get(family, "")
    assert severity in BAD
    entry = schemas_family(played.schemas, family)
    assert played.schemas["families"][0]["family"] == family
    assert entry["finding"]["rule"] == RULE and entry["finding"]["pointer"] == pointer
    assert entry["finding"]["severity"] == severity
    assert entry["window"] == {"requests": 30, "cache_hits": 0, "variants": 30}
    assert set(entry["schemas"]) == hashes

    code, doc = lint_log(tmp_path, "tenant-const", requests)
    fam = lint_family(doc, hashes)
    assert doc["summary"]["families"] == 1 and fam["variants"] == 30 and fam["requests"] == 30
    assert fam["family"] == family  # the id an alert names is the one gdx lint prints
    (found,) = lint_dynamic(fam)
    assert found["pointer"] == pointer and found["severity"] in BAD
    assert found["severity"] == "warning"  # no --tokenizer: the cost is unknown, never an error
    # measured (--tokenizer) against a line the variants' compiles cross: an error, and exit 1
    code_measured, measured = lint_log(
        tmp_path, "tenant-const", requests,
        "--tokenizer", str(tokenizer_json), "--engine", "xgrammar", "--lint.dynamic-seconds", "10ms",
    )  # fmt: skip
    (costly,) = lint_dynamic(lint_family(measured, hashes))
    assert costly["severity"] == "error" and costly["pointer"] == pointer and code_measured == 1
    record(results, "1 per-tenant const", played, severity, doc, code, found["severity"], range(30))
    assert varying(m, family) == {(pointer, "literal"): 29}  # every variant's const differs from the others
    assert entry["varies"] == [f"{pointer}: literal differs in 29 of 30 variants"]


@pytest.mark.parametrize("where", ["description", "title"])
def test_timestamp_in_text(where: str, scenario: Any, results: list[dict[str, Any]], tmp_path: Path) -> None:
    """A template writes a timestamp and a request id into the schema's text (the top-level and a
    property's `description`; or the `title`). A user expects one family each, the text's pointer
    named as what varies, dynamic_schema, and a family name that never carries the volatile digits."""
    requests = sc.volatile_text(where, 30)
    pointers = {"/description", "/properties/answer/description"} if where == "description" else {"/title"}
    played = scenario(f"timestamp-{where}").play(requests)
    m = played.metrics
    hashes = played.hashes()
    assert len(hashes) == 30
    (family,) = played.families(hashes)
    assert set(live_families(m)) == {family}
    assert {p for p, what in varying(m, family) if what == "literal"} == pointers
    severity = dynamic_findings(m).get(family, "")
    assert severity in BAD
    name = live_families(m)[family]["name"]
    assert name and not re.search(r"[0-9]", name), name  # masked or built from structure
    texts = "\n".join(text for _, text in requests)
    volatile = set(re.findall(r"[0-9][0-9a-f:.TZ-]{3,}", texts))
    entry = schemas_family(played.schemas, family)
    assert entry["name"] == name and entry["finding"]["pointer"] in pointers
    assert not any(token in json.dumps(entry) for token in volatile)

    code, doc = lint_log(tmp_path, f"timestamp-{where}", requests)
    fam = lint_family(doc, hashes)
    assert doc["summary"]["families"] == 1 and fam["family"] == family
    (found,) = lint_dynamic(fam)
    assert found["severity"] in BAD and found["pointer"] == entry["finding"]["pointer"]
    assert {line.split(":")[0] for line in fam["varies"]} == pointers
    record(results, f"2 timestamp in {where}", played, severity, doc, code, found["severity"], range(30))
    assert varying(m, family) == {(p, "literal"): 29 for p in pointers}


def test_unstable_serialization(scenario: Any, results: list[dict[str, Any]], tmp_path: Path) -> None:
    """One schema, sent with its keys in a different order and different whitespace each time. A user
    expects one schema hash (it is canonical), one family of one variant, no dynamic_schema warning or
    error (nothing is injected), and unstable_serialization named by /metrics and by `gdx lint`:
    each serialisation is a cache miss, which is the cost."""
    requests = sc.unstable_serialization(24)
    texts = {text for _, text in requests}
    assert len(texts) == 24
    played = scenario("unstable-serialization").play(requests)
    m = played.metrics
    (digest,) = played.hashes()
    (family,) = played.families({digest})
    assert set(live_families(m)) == {family}
    assert sample(m, "guided_decoding_family_variants", family=family) == 1
    assert sample(m, "guided_decoding_family_requests_total", family=family) == 24
    assert sample(m, "guided_decoding_family_cache_hits_total", family=family) == 24 - len(texts)
    assert played.seen({digest}) not in BAD
    assert (
        sample(m, "guided_decoding_schema_lint_findings", schema_hash=digest, rule="unstable_serialization")
        >= 1
    )
    severity = dynamic_findings(m).get(family, "")
    entry = schemas_family(played.schemas, family)
    assert entry["window"] == {"requests": 24, "cache_hits": 24 - len(texts), "variants": 1}
    assert entry["finding"] is None and entry["schemas"] == [digest]

    code, doc = lint_log(tmp_path, "unstable-serialization", requests)
    fam = lint_family(doc, {digest})
    assert fam["variants"] == 1 and fam["requests"] == 24 and fam["family"] == family
    assert all(f["severity"] not in BAD for f in lint_dynamic(fam))
    (schema,) = fam["schemas"]
    assert "unstable_serialization" in {f["rule"] for f in schema["findings"]}
    record(results, "3 unstable serialization", played, severity, doc, code,
           worst(f["severity"] for f in lint_dynamic(fam)))  # fmt: skip


def test_tool_subsets(scenario: Any, results: list[dict[str, Any]], tmp_path: Path) -> None:
    """tool_choice="required": each request's `anyOf` is the subset of 12 tools its tenant enabled.
    A user expects one family once it is past the quorum of 4 variants, the union named as what
    varies (what="branches", the value the number of distinct subsets), dynamic_schema, and `gdx lint`
    saying "/anyOf: N distinct subsets of 12 branches"."""
    requests = sc.tool_subsets(32)
    subsets = sc.distinct_subsets(requests)
    branches = len({b["properties"]["name"]["const"] for _, t in requests for b in json.loads(t)["anyOf"]})
    assert branches == len(sc.TOOLS) == 12
    played = scenario("tool-subsets").play(requests)
    m = played.metrics
    hashes = played.hashes()
    assert len(hashes) == subsets == 32
    (family,) = played.families(hashes)
    assert set(live_families(m)) == {family}
    assert sample(m, "guided_decoding_family_variants", family=family) == len(hashes)
    assert ("/anyOf", "branches") in varying(m, family)
    # the families the first variants had before the quorum went away into this one: nothing is lost
    assert sample(m, "guided_decoding_family_requests_total") == 32
    severity = dynamic_findings(m).get(family, "")
    assert severity in BAD
    entry = schemas_family(played.schemas, family)
    assert played.schemas["families"][0]["family"] == family
    assert entry["window"]["requests"] == 32 and entry["finding"]["pointer"] == "/anyOf"

    code, doc = lint_log(tmp_path, "tool-subsets", requests)
    fam = lint_family(doc, hashes)
    assert doc["summary"]["families"] == 1 and fam["family"] == family
    assert f"/anyOf: {subsets} distinct subsets of {branches} branches" in fam["varies"]
    (found,) = lint_dynamic(fam)
    assert found["pointer"] == "/anyOf" and found["severity"] in BAD
    record(results, "4 tool subsets", played, severity, doc, code, found["severity"], range(32))
    assert varying(m, family)[("/anyOf", "branches")] == subsets
    assert f"/anyOf: {subsets} distinct subsets of {branches} branches" in entry["varies"]


def test_recursive_model(scenario: Any, results: list[dict[str, Any]], tmp_path: Path) -> None:
    """A Pydantic model of a comment thread ($defs, $ref recursion), the same on every request. A
    user expects one family of one variant, cache hits for every repeat, and no dynamic_schema
    warning or error (on /metrics at any time, or in `gdx lint`)."""
    requests = sc.recursive_model(30)
    played = scenario("recursive-model").play(requests)
    m = played.metrics
    (digest,) = played.hashes()
    (family,) = played.families({digest})
    assert set(live_families(m)) == {family}
    assert sample(m, "guided_decoding_family_variants", family=family) == 1
    assert sample(m, "guided_decoding_family_requests_total", family=family) == 30
    assert sample(m, "guided_decoding_family_cache_hits_total", family=family) == 29
    assert played.seen({digest}) not in BAD
    severity = dynamic_findings(m).get(family, "")
    entry = schemas_family(played.schemas, family)
    assert entry["window"] == {"requests": 30, "cache_hits": 29, "variants": 1} and entry["finding"] is None

    code, doc = lint_log(tmp_path, "recursive-model", requests)
    fam = lint_family(doc, {digest})
    assert fam["variants"] == 1 and fam["requests"] == 30 and fam["family"] == family
    assert all(f["severity"] not in BAD for f in lint_dynamic(fam))
    record(results, "5 recursive model", played, severity, doc, code,
           worst(f["severity"] for f in lint_dynamic(fam)))  # fmt: skip


@pytest.fixture(scope="module")
def benchmark(xgr_info: Any) -> list[tuple[str, str]]:
    """The first 15 JSONSchemaBench schemas by id (at most 1,500 characters, objects with properties,
    distinct) that a cold xgrammar compiles in under 100 ms here. Compiled before any probe is armed."""
    import xgrammar as xgr

    assert probe.get_shipper() is None
    compiler = xgr.GrammarCompiler(xgr_info, max_threads=8, cache_enabled=False)

    def fast(text: str) -> bool:
        started = time.perf_counter()
        try:
            compiler.compile_json_schema(text)
        except Exception:
            return False
        return time.perf_counter() - started < 0.1

    return sc.benchmark_schemas(15, fast)


def test_distinct_static_schemas(
    scenario: Any, benchmark: list[tuple[str, str]], results: list[dict[str, Any]], tmp_path: Path
) -> None:
    """15 real, different schemas (JSONSchemaBench), each sent 4 times, interleaved. A user expects
    15 families (no two schemas blamed together), each of one variant, and no dynamic_schema warning
    or error."""
    specs = [("json", text) for _, text in benchmark]
    requests = sc.interleave(specs, repeats=4)
    played = scenario("distinct-static").play(requests)
    m = played.metrics
    hashes = played.hashes()
    assert len(hashes) == 15
    found = family_of(m)
    assert len({found[h] for h in hashes}) == 15, sorted(found.items())
    assert set(live_families(m)) == {found[h] for h in hashes}
    for h in hashes:
        assert sample(m, "guided_decoding_family_variants", family=found[h]) == 1
        assert sample(m, "guided_decoding_family_requests_total", family=found[h]) == 4
    assert played.seen(hashes) not in BAD
    severity = worst(dynamic_findings(m).values())
    listed = played.schemas["families"]
    assert {f["family"] for f in listed} == {found[h] for h in hashes}
    assert all(f["finding"] is None and f["window"]["variants"] == 1 for f in listed)

    code, doc = lint_log(tmp_path, "distinct-static", requests)
    assert doc["summary"]["families"] == 15
    assert {f["family"] for f in doc["families"]} == {found[h] for h in hashes}
    lint_severity = worst(f["severity"] for fam in doc["families"] for f in lint_dynamic(fam))
    assert lint_severity not in BAD
    record(results, "6 distinct static (JSONSchemaBench)", played, severity, doc, code, lint_severity)


def test_classifiers_each_reused(scenario: Any, results: list[dict[str, Any]], tmp_path: Path) -> None:
    """The false-positive trap: 10 static classifiers that differ only in their label enum (one
    family), each used in 9 or 10 of 10 rounds. Many variants, but each reused: a user expects at
    most an info, never a warning or an error, on /metrics and in `gdx lint` (exit 0)."""
    requests = sc.classifiers(10, 10)
    played = scenario("classifiers").play(requests)
    m = played.metrics
    hashes = played.hashes()
    assert len(hashes) == 10
    (family,) = played.families(hashes)
    assert set(live_families(m)) == {family}
    assert sample(m, "guided_decoding_family_variants", family=family) == 10
    assert sample(m, "guided_decoding_family_requests_total", family=family) == len(requests)
    assert sample(m, "guided_decoding_family_cache_hits_total", family=family) == len(requests) - 10
    severity = dynamic_findings(m).get(family, "")
    assert severity in ("", "info")
    entry = schemas_family(played.schemas, family)
    assert entry["window"] == {"requests": len(requests), "cache_hits": len(requests) - 10, "variants": 10}
    assert entry["finding"] is None or entry["finding"]["severity"] == "info"
    transient = played.seen(hashes)

    code, doc = lint_log(tmp_path, "classifiers", requests)
    fam = lint_family(doc, hashes)
    assert fam["family"] == family and fam["variants"] == 10
    lint_severity = worst(f["severity"] for f in lint_dynamic(fam))
    assert lint_severity in ("", "info") and code == 0
    record(results, "7 classifiers, each reused", played, severity, doc, code, lint_severity)
    assert transient not in BAD, f"/metrics said dynamic_schema {transient} while the classifiers warmed up"


def test_injected_family_ranks_first(scenario: Any, results: list[dict[str, Any]], tmp_path: Path) -> None:
    """Three static schemas at a high rate (cached after their first compile, each dearer than one
    injected variant) and one injected family at a lower rate. A user expects the injected family
    FIRST by family_recent_compile_seconds and first in /schemas, and only it with dynamic_schema."""
    requests, static = sc.mixed()
    injected = [i for i, (_, text) in enumerate(requests) if text not in static]
    played = scenario("mixed").play(requests)
    m = played.metrics
    static_hashes = {schema_hash(text) for text in static}
    injected_hashes = played.hashes(lambda i: i in set(injected))
    (family,) = played.families(injected_hashes)
    statics = played.families(static_hashes)
    assert len(statics) == 3 and family not in statics
    assert set(live_families(m)) == statics | {family}
    for text in static:  # compiled once, then cache hits
        sent = sum(1 for _, t in requests if t == text)
        assert sample(m, "guided_decoding_schema_cache_hits_total", schema_hash=schema_hash(text)) == sent - 1

    def cost(h: str) -> float:
        return sample(m, "guided_decoding_schema_compile_seconds_sum", schema_hash=h)

    # the premise: a static schema's (first) compile costs more than an injected variant's
    assert min(cost(h) for h in static_hashes) > statistics.median(cost(h) for h in injected_hashes)
    recent = {ls["family"]: v for ls, v in labels_of(m, "guided_decoding_family_recent_compile_seconds")}
    assert max(recent, key=lambda f: recent[f]) == family, recent
    assert played.schemas["families"][0]["family"] == family
    findings = dynamic_findings(m)
    severity = findings.get(family, "")
    assert severity in BAD
    assert all(findings.get(f, "") not in BAD for f in statics)
    assert played.seen(static_hashes) not in BAD

    code, doc = lint_log(tmp_path, "mixed", requests)
    assert doc["summary"]["families"] == 4
    fam = lint_family(doc, injected_hashes)
    assert doc["families"][0]["family"] == fam["family"] == family
    (found,) = lint_dynamic(fam)
    assert found["severity"] in BAD
    others = [f for f in doc["families"] if f["family"] != family]
    assert all(g["severity"] not in BAD for f in others for g in lint_dynamic(f))
    record(results, "8 static + injected mix", played, severity, doc, code, found["severity"], injected)


def test_regex_and_grammar_families(scenario: Any, results: list[dict[str, Any]], tmp_path: Path) -> None:
    """Not only JSON: a ticket regex (`compile_regex`) and a GBNF grammar (`compile_grammar`), each with
    a per-request literal. A user expects a family of kind regex and one of kind grammar, each with
    dynamic_schema, the regex's {8,64} reported as bounded_quantifier on /metrics, and `gdx lint
    --kind auto` on a pattern file giving the schema_hash that `gdx hash` and the daemon give."""
    regexes, grammars = sc.regex_prefix(24), sc.grammar_prefix(24)
    requests = [r for pair in zip(regexes, grammars, strict=True) for r in pair]
    played = scenario("regex-grammar").play(requests)
    m = played.metrics
    regex_hashes = played.hashes(lambda i: requests[i][0] == "regex")
    grammar_hashes = played.hashes(lambda i: requests[i][0] == "grammar")
    (regex_family,) = played.families(regex_hashes)
    (grammar_family,) = played.families(grammar_hashes)
    live = live_families(m)
    assert set(live) == {regex_family, grammar_family}
    assert live[regex_family]["kind"] == "regex" and live[grammar_family]["kind"] == "grammar"
    findings = dynamic_findings(m)
    assert findings.get(regex_family) in BAD and findings.get(grammar_family) in BAD
    assert set(varying(m, regex_family)) == set(varying(m, grammar_family)) == {("", "literal")}
    for h in regex_hashes:
        assert (
            sample(m, "guided_decoding_schema_lint_findings", schema_hash=h, rule="bounded_quantifier") == 1
        )

    code, doc = lint_log(tmp_path, "regex-grammar", requests)
    lint_regex, lint_grammar = lint_family(doc, regex_hashes), lint_family(doc, grammar_hashes)
    assert (lint_regex["kind"], lint_grammar["kind"]) == ("regex", "grammar")
    assert (lint_regex["family"], lint_grammar["family"]) == (regex_family, grammar_family)
    (regex_found,) = lint_dynamic(lint_regex)
    (grammar_found,) = lint_dynamic(lint_grammar)
    assert regex_found["severity"] in BAD and grammar_found["severity"] in BAD
    daemon_hashes = set(family_of(m))
    for kind, text, suffix in (("regex", regexes[0][1], "regex"), ("grammar", grammars[0][1], "gbnf")):
        path = tmp_path / f"spec.{suffix}"
        path.write_text(text + "\n")  # as an editor saves it
        hashed = gdx("hash", str(path))
        assert hashed.returncode == 0, hashed.stderr
        cli_hash = re.search(r"schema_hash=([0-9a-f]{12})", hashed.stdout)
        assert cli_hash
        _, single = lint(path)
        (fam,) = single["families"]
        (schema,) = fam["schemas"]
        assert fam["kind"] == schema["kind"] == kind
        assert schema["schema_hash"] == cli_hash.group(1) == schema_hash(text)
        assert schema["schema_hash"] in daemon_hashes
        if kind == "regex":
            assert "bounded_quantifier" in {f["rule"] for f in schema["findings"]}
    record(results, "9a regex, injected prefix", played, findings[regex_family], doc, code,
           regex_found["severity"], range(0, len(requests), 2))  # fmt: skip
    record(results, "9b grammar, injected literal", played, findings[grammar_family], doc, code,
           grammar_found["severity"], range(1, len(requests), 2))  # fmt: skip
    assert varying(m, regex_family) == varying(m, grammar_family) == {("", "literal"): 23}
