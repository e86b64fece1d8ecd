# ruff: noqa: E501  (PromQL reads better on one line)
"""The demo: a real vLLM on the CPU with the probe, the daemon, Prometheus with the project's rules,
Alertmanager with the example routing and a local PagerDuty endpoint, and a traffic generator that
replays the per-tenant enum incident: the static design, the per-tenant enum injected per request (the
page, naming the family), the fix `gdx fix` writes from the demo's own request log (the static schema
sent for every tenant, its check after decoding on every output: the page resolves), then a schema
that compiles slowly on its own. A live view shows what the product shows. `run()` returns what each
phase measured, so the end-to-end test asserts on the same run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from alerts import generate as alert_rules
from exporter.daemon.receiver.rollup import RECENT_VARIANTS
from tools.demo.remedy import FLAGS, FixRun, Remedy, run_fix
from tools.harness import ROOT
from tools.harness.processes import Alertmanager, DaemonProcess, Prometheus, Receiver
from tools.harness.scraping import scrape
from tools.harness.vllm import VllmServer, chat_body

POD = "vllm-demo-0"
ROUTING_KEY = "demo-routing-key"
ENUM_PATH = "/properties/line_items/items/properties/cost_center_id/enum"
TENANTS = 1000


def invoice() -> dict[str, Any]:
    """The canonical static invoice schema of the per-tenant enum incident (integers bounded so random weights terminate)."""
    item = {
        "type": "object",
        "properties": {
            "sku_code": {"type": "string", "maxLength": 8},
            "cost_center_id": {"type": "string", "maxLength": 8},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 9},
        },
        "required": ["sku_code", "cost_center_id", "quantity"],
    }
    return {
        "title": "InvoiceExtractionEnvelope",
        "type": "object",
        "properties": {
            "vendor_name": {"type": "string", "maxLength": 12},
            "line_items": {"type": "array", "items": item, "maxItems": 25},
        },
        "required": ["vendor_name", "line_items"],
    }


def cost_centres(tenant: int) -> list[str]:
    return [f"CC-{tenant:04d}-{i:03d}" for i in range(300)]


def tenant_invoice(tenant: int) -> dict[str, Any]:
    """Design 2: the tenant's cost-centre codes injected into the schema on every request (as a
    Pydantic `Literal` of them gives it)."""
    schema = invoice()
    schema["properties"]["line_items"]["items"]["properties"]["cost_center_id"] = {
        "enum": cost_centres(tenant),
        "type": "string",
    }
    return schema


def pattern_unions() -> dict[str, Any]:
    """Design 3: a `{8,64}` bounded pattern and deep `$ref` unions."""
    return {
        "title": "Shipment",
        "type": "object",
        "$defs": {
            "code": {"type": "string", "pattern": "^[A-Z0-9_-]{8,64}$"},
            "party": {"anyOf": [{"$ref": "#/$defs/code"}, {"anyOf": [{"type": "null"}, {"anyOf": [
                {"type": "integer", "minimum": 0, "maximum": 9},
                {"anyOf": [{"type": "boolean"}, {"$ref": "#/$defs/code"}]}]}]}]},
        },
        "properties": {
            "tracking": {"$ref": "#/$defs/code"},
            "sender": {"$ref": "#/$defs/party"},
        },
        # compiled by xgrammar and silently not enforced (vLLM's own check lets it through)
        "if": {"required": ["sender"]},
        "then": {"properties": {"tracking": {"maxLength": 12}}},
        "required": ["tracking"],
    }  # fmt: skip


def parcel() -> dict[str, Any]:
    """Beside design 3: a weight in steps of 5 g. xgrammar does not support `multipleOf`, so vLLM's `auto`
    router resolves the request to llguidance; vLLM 0.32 compiles it with the engine's backend anyway
    (xgrammar, since phase 1's first request), where `multipleOf` is not enforced (0.33 answers 400)."""
    return {
        "title": "Parcel",
        "type": "object",
        "properties": {"weight_g": {"type": "integer", "minimum": 5, "maximum": 995, "multipleOf": 5}},
        "required": ["weight_g"],
    }


PHASES = (
    (
        "1 static schema",
        "the canonical invoice schema; tenant cost centres in the prompt, checked after decoding",
    ),
    ("2 per-request enum", "the same schema with each tenant's cost-centre enum injected per request"),
    (
        "3 the fix",
        "the static schema gdx fix wrote from phases 1-2's request log, sent for every tenant; its check.py on every output",
    ),
    (
        "4 pattern + unions",
        "a {8,64} bounded pattern and deep $ref unions; one request in four a parcel weight in steps of 5 g",
    ),
)


@dataclass
class View:
    """One refresh of the live view."""

    at: float
    families: list[str]  # family ids on the daemon's /metrics, most recent compile seconds first
    lines: list[str]


@dataclass
class PhaseResult:
    name: str
    started: float
    ended: float
    requests: int = 0
    failures: int = 0
    pages: int = 0  # PagerDuty trigger events received by the end of the phase
    resolved: int = 0  # PagerDuty resolve events received by the end of the phase
    checked: int = 0  # complete outputs the fix's check.py ran on (phase 3)
    rejected: int = 0  # of them, those it rejected against the request's own schema
    check_messages: list[str] = field(default_factory=list)  # the first few, as check() words them
    checked_outputs: list[tuple[str, int, bool]] = field(default_factory=list)  # (output, tenant, rejected)
    stats: dict[str, float | None] = field(default_factory=dict)
    views: list[View] = field(default_factory=list)


@dataclass
class DemoResult:
    phases: list[PhaseResult]
    pages: list[dict[str, Any]]
    alerts: list[dict[str, Any]]
    urls: dict[str, str]
    prometheus_url: str = ""
    fix: FixRun | None = None


def whitespace_bias(tokenizer_json: Path) -> dict[str, int]:
    """`logit_bias` against the vocabulary's whitespace-only tokens. vLLM's default JSON grammar lets
    whitespace in anywhere, and this random model picks it as often as anything: its outputs would
    never finish. A trained model writes compact JSON; phase 3 asks this one to, so that the service's
    check has complete outputs to judge (the grammar, and so the compile and the cache, are the same)."""
    vocab = json.loads(tokenizer_json.read_text(encoding="utf-8"))["model"]["vocab"]
    return {str(i): -100 for token, i in vocab.items() if token and set(token) <= set("ĠĊĉč")}


MAX_TOKENS = 24  # tokens per answer: enough to show the schema at work, short enough for many requests
FIX_MAX_TOKENS = 96  # phase 3: room to finish the JSON, which its check.py reads whole


class Traffic:
    """Structured-output requests from a few threads, like an application's workers."""

    LOGGED = (0, 1)  # the phases whose requests go to the request log gdx fix reads

    def __init__(
        self,
        server: VllmServer,
        log: TextIO | None = None,
        workers: int = 3,
        tokenizer_json: Path | None = None,
        rate: float | None = None,
    ) -> None:
        """`rate`: at most this many requests a second, all workers together (None: as fast as the
        server answers)."""
        self.server = server
        self.rate = rate
        self._next_slot = 0.0
        self.compact = whitespace_bias(tokenizer_json) if tokenizer_json else {}
        self.log = log
        self.workers = workers
        self.counter = 0
        self.lock = threading.Lock()
        self.remedy: Remedy | None = None  # phase 3 sends its static schema and calls its check

    def run(self, phase: int, seconds: float, result: PhaseResult, stop: threading.Event) -> None:
        deadline = time.monotonic() + seconds

        def worker() -> None:
            while time.monotonic() < deadline and not stop.is_set():
                if not self._wait_slot(deadline, stop):
                    break
                with self.lock:
                    self.counter += 1
                    n = self.counter
                tenant = n % TENANTS
                codes = "Allowed cost_center_id values: " + ", ".join(cost_centres(tenant)[:20])
                max_tokens, extra = MAX_TOKENS, {}
                if phase == 0:
                    schema, prompt = invoice(), codes
                elif phase == 1:
                    schema, prompt = tenant_invoice(tenant), "Extract the invoice."
                elif phase == 2 and self.remedy is not None:
                    schema, prompt, max_tokens = self.remedy.schema, codes, FIX_MAX_TOKENS
                    extra = {"logit_bias": self.compact}
                elif n % 4:
                    schema, prompt = pattern_unions(), "Extract the shipment."
                else:
                    schema, prompt = parcel(), "Weigh the parcel."
                try:
                    answer = self.server.chat(schema, max_tokens=max_tokens, prompt=prompt, **extra)
                    with self.lock:
                        result.requests += 1
                        if self.log is not None and phase in self.LOGGED:
                            self.log.write(json.dumps(chat_body(schema, max_tokens, prompt)) + "\n")
                    if phase == 2 and self.remedy is not None:
                        self._check(answer, tenant, result)
                except Exception:
                    with self.lock:
                        result.failures += 1
                    time.sleep(0.2)  # a failing phase must not hammer the server

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(self.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _wait_slot(self, deadline: float, stop: threading.Event) -> bool:
        """With a rate, waits for this worker's next request slot; False when the phase ends first."""
        if self.rate is None:
            return True
        with self.lock:
            now = time.monotonic()
            slot = self._next_slot = max(self._next_slot + 1 / self.rate, now)
        return slot < deadline and not stop.wait(slot - now)

    def _check(self, answer: dict[str, Any], tenant: int, result: PhaseResult) -> None:
        """The service's side of the fix: the output checked against the tenant's own schema. A
        reply cut at max_tokens is not JSON and not the check's to judge."""
        assert self.remedy is not None
        choice = answer["choices"][0]
        if choice.get("finish_reason") != "stop":
            return
        content = choice["message"]["content"]
        problems = self.remedy.problems(content, tenant_invoice(tenant))
        with self.lock:
            result.checked += 1
            if len(result.checked_outputs) < 500:
                result.checked_outputs.append((content, tenant, bool(problems)))
            if problems:
                result.rejected += 1
                if len(result.check_messages) < 3:
                    result.check_messages.append(problems[0])


def phase_stats(prom: Prometheus, seconds: int) -> dict[str, float | None]:
    """What Prometheus saw over the last `seconds` (the phase, after its warm-up)."""
    w = f"{max(seconds, 5)}s"
    exprs = {
        "compile_p95": f"histogram_quantile(0.95, sum by (le) (increase(guided_decoding_compile_seconds_bucket[{w}])))",
        "hit_ratio": f"sum(increase(guided_decoding_compile_cache_hits_total[{w}])) / sum(increase(guided_decoding_compile_requests_total[{w}]))",
        "compiles": f"sum(increase(guided_decoding_compile_requests_total[{w}]))",
        "new_schemas_per_min": f"sum(increase(guided_decoding_schemas_first_seen_total[{w}])) * 60 / {max(seconds, 5)}",
        "ttft_p95": f'histogram_quantile(0.95, sum by (le) (increase(vllm:time_to_first_token_seconds_bucket{{pod="{POD}"}}[{w}])))',
        "ttft_mean": f'sum(increase(vllm:time_to_first_token_seconds_sum{{pod="{POD}"}}[{w}])) / sum(increase(vllm:time_to_first_token_seconds_count{{pod="{POD}"}}[{w}]))',
        "grammar_wait_mean": f"sum(increase(guided_decoding_grammar_wait_seconds_sum[{w}])) / sum(increase(guided_decoding_grammar_wait_seconds_count[{w}]))",
        "grammar_wait_p95": f"histogram_quantile(0.95, sum by (le) (increase(guided_decoding_grammar_wait_seconds_bucket[{w}])))",
    }  # fmt: skip
    out: dict[str, float | None] = {}
    for name, expr in exprs.items():
        result = prom.query(expr)
        value = float(result[0]["value"][1]) if result else None
        out[name] = None if value is None or value != value else value  # NaN: no data
    return out


def describe(stats: dict[str, float | None]) -> str:
    def ms(key: str) -> str:
        value = stats.get(key)
        return "-" if value is None else f"{value * 1000:.1f} ms"

    ratio = stats.get("hit_ratio")
    new = stats.get("new_schemas_per_min")
    return (
        f"compile P95 {ms('compile_p95')}, hit ratio {'-' if ratio is None else f'{ratio:.2f}'}, "
        f"new schemas/min {'-' if new is None else f'{new:.0f}'}, grammar wait P95 {ms('grammar_wait_p95')}, "
        f"vLLM TTFT P95 {ms('ttft_p95')} (mean {ms('ttft_mean')}; grammar wait mean {ms('grammar_wait_mean')})"
    )


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
FAMILY = "guided_decoding_family_"


def _by_family(samples: Samples, name: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for (n, labels), value in samples.items():
        if n == name:
            d = dict(labels)
            out.setdefault(d.get("family", ""), []).append((d, value))
    return out


def top_families(samples: Samples, limit: int = 3) -> tuple[list[str], list[str]]:
    """The daemon's families ranked by their decayed compile seconds (what the alerts and the dashboard
    rank by): their ids, and one line each with its name, variants, what varies and its finding.
    A schema injected per request compiles each of its hashes once; its family sums them."""
    recent = {f: v for f, [(_, v), *_] in _by_family(samples, FAMILY + "recent_compile_seconds").items()}
    recent.pop("other", None)  # families outside the daemon's top N, summed
    ranked = sorted(recent, key=lambda f: (-recent[f], f))[:limit]
    info = _by_family(samples, FAMILY + "info")
    variants = _by_family(samples, FAMILY + "variants")
    varying = _by_family(samples, FAMILY + "varying")
    findings = _by_family(samples, FAMILY + "findings")
    lines = []
    for f in ranked:
        name = next((labels.get("name", "") for labels, _ in info.get(f, [])), "") or "untitled"
        line = f"family {f} {name}: {recent[f]:.2f} s recently"
        n = int(variants[f][0][1]) if f in variants else None
        if n is not None:
            line += f", {n} variant{'' if n == 1 else 's'}"
        parts = []
        for labels, value in sorted(varying.get(f, []), key=lambda lv: -lv[1]):
            pointer, what = labels.get("pointer") or "the text", labels.get("what", "")
            if what == "branches":
                parts.append(f"{pointer} ({value:g} distinct subsets of its branches)")
            elif what == "optional":
                parts.append(f"{pointer} ({value:g} optional properties come and go)")
            else:
                compared = min(n, RECENT_VARIANTS) if n is not None else RECENT_VARIANTS
                parts.append(f"{pointer} (differs in {value:g} of the last {compared} variants)")
        if parts:
            line += "; varies: " + ", ".join(parts[:2])
        fired = sorted(
            labels.get("severity", "")
            for labels, value in findings.get(f, [])
            if labels.get("rule") == "dynamic_schema" and value > 0
        )
        if fired:
            line += "; dynamic_schema " + ",".join(fired)
        lines.append(line)
    return ranked, lines


def live_view(prom: Prometheus, daemon_url: str, receiver: Receiver, phase: str, out: TextIO) -> View:
    def one(expr: str) -> str:
        try:
            r = prom.query(expr)
            return f"{float(r[0]['value'][1]):.4g}" if r else "-"
        except Exception:
            return "?"

    w = "30s"
    view = View(time.time(), [], [])
    lines = [
        f"[{time.strftime('%H:%M:%S')}] phase {phase}",
        f"  compile P95 {one(f'histogram_quantile(0.95, sum by (le) (rate(guided_decoding_compile_seconds_bucket[{w}])))')} s"
        f" | hit ratio {one(f'sum(rate(guided_decoding_compile_cache_hits_total[{w}])) / sum(rate(guided_decoding_compile_requests_total[{w}]))')}"
        f" | new schemas/min {one(f'sum(rate(guided_decoding_schemas_first_seen_total[{w}])) * 60')}"
        f" | vLLM TTFT P95 {one(f'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[{w}])))')} s",
    ]  # fmt: skip
    try:
        view.families, ranked = top_families(scrape(daemon_url))
        lines += [f"  {line}" for line in ranked]
        top = prom.query(
            "topk(3, guided_decoding_schema_recent_compile_seconds * on (schema_hash) group_left (title, family) max by (schema_hash, title, family) (guided_decoding_schema_info))"
        )
        for s in top:
            h, family = s["metric"]["schema_hash"], s["metric"].get("family", "")
            rules = prom.query(f'sum by (rule) (guided_decoding_schema_lint_findings{{schema_hash="{h}"}})')
            names = ",".join(sorted(r["metric"]["rule"] for r in rules)) or "no findings"
            lines.append(
                f"  schema {h} {s['metric'].get('title', '')}{f' (family {family})' if family else ''}:"
                f" {float(s['value'][1]):.3f} s recently; {names}"
            )
        firing = sorted(
            {a["labels"]["alertname"] for a in prom.api("alerts")["alerts"] if a["state"] == "firing"}
        )
        events = receiver.pagerduty()
        pages = sum(1 for e in events if e.get("event_action") == "trigger")
        resolved = sum(1 for e in events if e.get("event_action") == "resolve")
        lines.append(
            f"  alerts firing: {', '.join(firing) or 'none'}; PagerDuty events received: {pages}"
            f" ({resolved} resolved)"
        )
    except Exception as err:
        lines.append(f"  (view incomplete: {err})")
    view.lines = lines
    print("\n".join(lines), file=out, flush=True)
    return view


def run(
    workdir: Path,
    tokenizer_json: Path,
    phase_seconds: float | Sequence[float] = 60,
    warmup: float = 15,
    out: TextIO = sys.stdout,
    daemon_env: dict[str, str] | None = None,
    view_every: float = 5,
    stop: threading.Event | None = None,
    after: Any = None,
    each_phase: Any = None,
    rate: float | None = None,
) -> DemoResult:
    """Starts everything, replays the four phases (`phase_seconds` each, or one length per phase;
    `rate`: at most this many requests a second, else as fast as vLLM answers), stops everything (also
    on error or Ctrl-C).
    `each_phase(result, prom)` and `after(outcome, prom)` run while everything still runs: at the end
    of each phase, and after the last."""
    stop = stop or threading.Event()
    lengths = (
        [float(phase_seconds)] * len(PHASES)
        if isinstance(phase_seconds, (int, float))
        else list(phase_seconds)
    )
    if len(lengths) != len(PHASES):
        raise ValueError(f"{len(PHASES)} phase lengths wanted, got {len(lengths)}")
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("data", "am-data"):  # a previous run's series and notification log: start clean
        shutil.rmtree(workdir / stale, ignore_errors=True)
    started: list[Any] = []
    gen = alert_rules
    try:
        receiver = Receiver()
        started.append(receiver)
        key = workdir / "routing-key"
        key.write_text(ROUTING_KEY)
        am_config = yaml.safe_load((ROOT / "alerts" / "alertmanager" / "alertmanager.yml").read_text())
        am_config["route"].update(group_wait="1s", group_interval="5s", repeat_interval="1h")
        for r in am_config["receivers"]:
            for pd in r.get("pagerduty_configs", []):
                pd.update(routing_key_file=str(key), url=receiver.url + "/v2/enqueue")
            for hook in r.get("webhook_configs", []):
                hook["url"] = receiver.url + "/ticket"
        am = Alertmanager(workdir, am_config)
        started.append(am)
        sock = workdir / "probe.sock"
        rules = workdir / "rules.yml"
        # Alerts with 30 s windows and short `for:` (the same source), plus the standard 5 m recording
        # rules that the dashboard reads. A page's description is rendered when it fires: 20 s of the
        # injected schema's compiles (2-3 a second) put its family well above the static schema's one
        # compile, so the page names the injected family first in every run.
        fast = gen.render(
            gen.Params(
                window="30s",
                long_for="20s",
                short_for="10s",
                info_for="10s",
                starvation_for="30s",
                keep_firing_for="15s",  # the fix's page resolves within its phase
            )
        )
        fast["groups"].append({"name": "guided-decoding.rules-5m", "rules": gen.recording(gen.Params())})
        rules.write_text(gen.dump(fast))
        print(
            "starting vLLM on the CPU (tiny random Llama, real Llama 3 tokenizer; about a minute)...",
            file=out,
            flush=True,
        )
        # vLLM's default backend, `auto`: its router picks a backend per request (the parcel's goes to
        # llguidance), and the engine keeps the one its first structured request built
        server = VllmServer(
            workdir,
            tokenizer_json,
            sock,
            pod=POD,
            seqs=4,
            structured_outputs={"backend": "auto"},
        )
        started.append(server)
        config = workdir / "gdx.yaml"  # the engine's pod name on its scraped series, as in Kubernetes
        config.write_text(
            yaml.safe_dump({"vllm": {"targets": [{"url": f"{server.url}/metrics", "pod": POD}]}})
        )
        daemon = DaemonProcess(
            ["--config.file", str(config), "--probe.socket", str(sock), "--probe.max-schemas", "100"],
            env=daemon_env,
        )
        started.insert(0, daemon)
        prom = Prometheus(
            workdir, [daemon.url.removeprefix("http://")], job="guided-decoding-exporter", rule_files=[rules],
            alertmanager=f"127.0.0.1:{am.port}", extra_args=["--rules.alert.resend-delay=1s"],
        )  # fmt: skip
        started.append(prom)
        urls = {
            "metrics": f"{daemon.url}/metrics",
            "prometheus": prom.url,
            "alertmanager": am.url,
            "vllm": server.url,
        }
        print("\n".join(f"  {k}: {v}" for k, v in urls.items()), file=out, flush=True)
        request_log = workdir / "requests.jsonl"
        log = request_log.open("w", encoding="utf-8")
        started.append(_Closing(log))
        traffic = Traffic(server, log, tokenizer_json=tokenizer_json, rate=rate)
        results = []
        fixed: FixRun | None = None
        for index, (name, what) in enumerate(PHASES):
            if stop.is_set():
                break
            if index == 2:
                log.close()
                fixed = _fix(request_log, workdir / "fix", tokenizer_json, out)
                traffic.remedy = fixed.remedies[_injected(fixed)]
            print(f"\n== phase {name}: {what}", file=out, flush=True)
            result = PhaseResult(name, time.time(), 0)
            runner = threading.Thread(
                target=traffic.run, args=(index, lengths[index], result, stop), daemon=True
            )
            runner.start()
            while runner.is_alive():
                runner.join(view_every)
                result.views.append(live_view(prom, daemon.url, receiver, name, out))
            time.sleep(3)  # the last snapshot and scrape
            result.ended = time.time()
            result.stats = phase_stats(prom, int(lengths[index] - warmup))
            events = receiver.pagerduty()
            result.pages = sum(1 for e in events if e.get("event_action") == "trigger")
            result.resolved = sum(1 for e in events if e.get("event_action") == "resolve")
            results.append(result)
            if each_phase is not None:
                each_phase(result, prom)
            print(
                f"-- phase {name}: {result.requests} requests ({result.failures} failed); {describe(result.stats)}",
                file=out,
                flush=True,
            )
            if result.checked:
                print(f"   {_checked(result)}", file=out, flush=True)
        alerts = prom.api("alerts")["alerts"]
        outcome = DemoResult(results, receiver.pagerduty(), alerts, urls, prom.url, fixed)
        if after is not None:
            after(outcome, prom)
        return outcome
    finally:
        for part in reversed(started):
            with contextlib.suppress(Exception):
                part.stop()


class _Closing:
    """A file among the parts `run` stops."""

    def __init__(self, handle: TextIO) -> None:
        self.handle = handle

    def stop(self) -> None:
        self.handle.close()


def _fix(log: Path, folder: Path, tokenizer_json: Path, out: TextIO) -> FixRun:
    """`gdx fix` on the request log so far; the demo cannot go on without a fixed family."""
    shutil.rmtree(folder, ignore_errors=True)  # a previous run's fix
    print(
        f"\n$ gdx fix --tokenizer tokenizer.json --out {folder} {' '.join(FLAGS)} {log}", file=out, flush=True
    )
    fixed = run_fix(log, folder, tokenizer_json)
    print(fixed.stdout.rstrip(), file=out, flush=True)
    if not fixed.remedies:
        raise RuntimeError(f"gdx fix fixed no family (exit {fixed.exit_code}): {fixed.stdout.strip()}")
    return fixed


def _injected(fixed: FixRun) -> str:
    """The family gdx fix fixed for being injected per request (the one that paged), most requested
    first; a schema fixed for its own slow keywords (the invoice's maxItems) is not it."""
    dynamic = [r for r in fixed.remedies.values() if str(r.report["finding"]).startswith("dynamic_schema")]
    if not dynamic:
        raise RuntimeError(f"gdx fix fixed no injected family: {fixed.stdout.strip()}")
    return max(dynamic, key=lambda r: r.report["requests"]).family


def _checked(phase: PhaseResult) -> str:
    line = f"check.py: {phase.rejected} of {phase.checked} complete outputs rejected against the tenant's own schema"
    if phase.check_messages:
        line += f" (e.g. {phase.check_messages[0]})"
    return line


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tools.demo",
        description="The per-tenant enum incident on a real vLLM, caught and fixed: four phases (static, "
        "injected per request, the gdx fix remedy, a slow schema).",
    )
    default = float(os.environ.get("DEMO_DURATION", "240"))
    parser.add_argument(
        "--duration", type=float, default=default, help="seconds of traffic, all phases (DEMO_DURATION)"
    )
    parser.add_argument(
        "--tokenizer",
        default=os.environ.get(
            "GDX_TOKENIZER_JSON", str(ROOT / ".cache/tokenizer/package/models/tokenizer.json")
        ),
    )
    parser.add_argument("--workdir", default=str(ROOT / ".cache" / "demo"))
    args = parser.parse_args(argv)
    stop = threading.Event()
    try:
        result = run(
            Path(args.workdir), Path(args.tokenizer), phase_seconds=args.duration / len(PHASES), stop=stop
        )
    except KeyboardInterrupt:
        stop.set()
        print("\nstopped: everything the demo started is stopped.")
        return 130
    print("\n== summary (after each phase's warm-up)")
    for p in result.phases:
        print(f"  phase {p.name}: {describe(p.stats)}; pages so far {p.pages}, resolved {p.resolved}")
        if p.checked:
            print(f"    {_checked(p)}")
    pages = [e for e in result.pages if e.get("event_action") == "trigger"]
    for e in pages:
        print(f"  paged: {e['payload']['summary']}")
        print(f"    {e['payload'].get('custom_details', {}).get('firing', '').strip()}")
    print("everything the demo started is stopped.")
    return 0
