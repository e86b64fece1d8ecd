# ruff: noqa: E501  (PromQL reads better on one line)
"""The demo: a real vLLM on the CPU with the probe, the daemon, Prometheus with the project's rules,
Alertmanager with the example routing and a local PagerDuty endpoint, and a traffic generator that
replays the per-tenant enum incident's three schema designs, one phase each, with a live view of what the product
shows. `run()` returns what each phase measured, so the end-to-end test asserts on the same run.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from alerts import generate as alert_rules
from tools.harness import ROOT
from tools.harness.processes import Alertmanager, DaemonProcess, Prometheus, Receiver
from tools.harness.vllm import VllmServer

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
    """Design 2: the tenant's cost-centre codes injected into the schema on every request."""
    schema = invoice()
    schema["properties"]["line_items"]["items"]["properties"]["cost_center_id"] = {
        "enum": cost_centres(tenant)
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


PHASES = (
    (
        "1 static schema",
        "the canonical invoice schema; tenant cost centres in the prompt, checked after decoding",
    ),
    ("2 per-request enum", "the same schema with each tenant's cost-centre enum injected per request"),
    ("3 pattern + unions", "a {8,64} bounded pattern and deep $ref unions"),
)


@dataclass
class PhaseResult:
    name: str
    started: float
    ended: float
    requests: int = 0
    failures: int = 0
    pages: int = 0  # PagerDuty trigger events received by the end of the phase
    stats: dict[str, float | None] = field(default_factory=dict)


@dataclass
class DemoResult:
    phases: list[PhaseResult]
    pages: list[dict[str, Any]]
    alerts: list[dict[str, Any]]
    urls: dict[str, str]
    prometheus_url: str = ""


class Traffic:
    """Structured-output requests from a few threads, like an application's workers."""

    def __init__(self, server: VllmServer, workers: int = 3) -> None:
        self.server = server
        self.workers = workers
        self.counter = 0
        self.lock = threading.Lock()

    def run(self, phase: int, seconds: float, result: PhaseResult, stop: threading.Event) -> None:
        deadline = time.monotonic() + seconds

        def worker() -> None:
            while time.monotonic() < deadline and not stop.is_set():
                with self.lock:
                    self.counter += 1
                    n = self.counter
                tenant = n % TENANTS
                if phase == 0:
                    schema, prompt = (
                        invoice(),
                        "Allowed cost_center_id values: " + ", ".join(cost_centres(tenant)[:20]),
                    )
                elif phase == 1:
                    schema, prompt = tenant_invoice(n), "Extract the invoice."
                else:
                    schema, prompt = pattern_unions(), "Extract the shipment."
                try:
                    self.server.chat(schema, prompt=prompt)
                    with self.lock:
                        result.requests += 1
                except Exception:
                    with self.lock:
                        result.failures += 1
                    time.sleep(0.2)  # a failing phase must not hammer the server

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(self.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def phase_stats(prom: Prometheus, seconds: int) -> dict[str, float | None]:
    """What Prometheus saw over the last `seconds` (the phase, after its warm-up)."""
    w = f"{max(seconds, 5)}s"
    exprs = {
        "compile_p95": f"histogram_quantile(0.95, sum by (le) (increase(guided_decoding_compile_seconds_bucket[{w}])))",
        "hit_ratio": f"sum(increase(guided_decoding_compile_cache_hits_total[{w}])) / sum(increase(guided_decoding_compile_requests_total[{w}]))",
        "compiles": f"sum(increase(guided_decoding_compile_requests_total[{w}]))",
        "new_schemas_per_min": f"sum(increase(guided_decoding_schemas_first_seen_total[{w}])) * 60 / {max(seconds, 5)}",
        "ttft_p95": f'histogram_quantile(0.95, sum by (le) (increase(vllm:time_to_first_token_seconds_bucket{{pod="{POD}"}}[{w}])))',
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
        f"vLLM TTFT P95 {ms('ttft_p95')}"
    )


def live_view(prom: Prometheus, daemon_url: str, receiver: Receiver, phase: str, out: TextIO) -> None:
    def one(expr: str) -> str:
        try:
            r = prom.query(expr)
            return f"{float(r[0]['value'][1]):.4g}" if r else "-"
        except Exception:
            return "?"

    w = "30s"
    lines = [
        f"[{time.strftime('%H:%M:%S')}] phase {phase}",
        f"  compile P95 {one(f'histogram_quantile(0.95, sum by (le) (rate(guided_decoding_compile_seconds_bucket[{w}])))')} s"
        f" | hit ratio {one(f'sum(rate(guided_decoding_compile_cache_hits_total[{w}])) / sum(rate(guided_decoding_compile_requests_total[{w}]))')}"
        f" | new schemas/min {one(f'sum(rate(guided_decoding_schemas_first_seen_total[{w}])) * 60')}"
        f" | vLLM TTFT P95 {one(f'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[{w}])))')} s",
    ]  # fmt: skip
    try:
        top = prom.query(
            "topk(3, guided_decoding_schema_recent_compile_seconds * on (schema_hash) group_left (title) max by (schema_hash, title) (guided_decoding_schema_info))"
        )
        for s in top:
            h = s["metric"]["schema_hash"]
            rules = prom.query(f'sum by (rule) (guided_decoding_schema_lint_findings{{schema_hash="{h}"}})')
            names = ",".join(sorted(r["metric"]["rule"] for r in rules)) or "no findings"
            lines.append(
                f"  schema {h} {s['metric'].get('title', '')}: {float(s['value'][1]):.3f} s recently; {names}"
            )
        paths = prom.query(
            "guided_decoding_shape_varying_path_info * on (shape_hash) group_left max by (shape_hash) (guided_decoding_shape_variants > 1)"
        )
        for p in paths[:2]:
            lines.append(
                f"  shape {p['metric']['shape_hash']}: {p['value'][1]} variants, varying {p['metric']['path']}"
            )
        firing = sorted(
            {a["labels"]["alertname"] for a in prom.api("alerts")["alerts"] if a["state"] == "firing"}
        )
        pages = sum(1 for e in receiver.pagerduty() if e.get("event_action") == "trigger")
        lines.append(f"  alerts firing: {', '.join(firing) or 'none'}; PagerDuty events received: {pages}")
    except Exception as err:
        lines.append(f"  (view incomplete: {err})")
    print("\n".join(lines), file=out, flush=True)


def run(
    workdir: Path,
    tokenizer_json: Path,
    phase_seconds: float = 60,
    warmup: float = 15,
    out: TextIO = sys.stdout,
    daemon_env: dict[str, str] | None = None,
    view_every: float = 5,
    stop: threading.Event | None = None,
    after: Any = None,
) -> DemoResult:
    """Starts everything, replays the three designs, stops everything (also on error or Ctrl-C)."""
    stop = stop or threading.Event()
    workdir.mkdir(parents=True, exist_ok=True)
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
        # Alerts with 30 s windows and 10 s `for:` (the same source), plus the standard 5 m recording
        # rules that the dashboard reads.
        fast = gen.render(gen.Params(window="30s", long_for="10s", short_for="10s", info_for="10s"))
        standard = gen.render(gen.Params())["groups"][0]
        fast["groups"].append({**standard, "name": "guided-decoding.rules-5m"})
        rules.write_text(gen.dump(fast))
        print(
            "starting vLLM on the CPU (tiny random Llama, real Llama 3 tokenizer; about a minute)...",
            file=out,
            flush=True,
        )
        server = VllmServer(workdir, tokenizer_json, sock, pod=POD, seqs=4)
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
        traffic = Traffic(server)
        results = []
        for index, (name, what) in enumerate(PHASES):
            if stop.is_set():
                break
            print(f"\n== phase {name}: {what}", file=out, flush=True)
            result = PhaseResult(name, time.time(), 0)
            runner = threading.Thread(
                target=traffic.run, args=(index, phase_seconds, result, stop), daemon=True
            )
            runner.start()
            while runner.is_alive():
                runner.join(view_every)
                live_view(prom, daemon.url, receiver, name, out)
            time.sleep(3)  # the last snapshot and scrape
            result.ended = time.time()
            result.stats = phase_stats(prom, int(phase_seconds - warmup))
            result.pages = sum(1 for e in receiver.pagerduty() if e.get("event_action") == "trigger")
            results.append(result)
            print(
                f"-- phase {name}: {result.requests} requests ({result.failures} failed); {describe(result.stats)}",
                file=out,
                flush=True,
            )
        alerts = prom.api("alerts")["alerts"]
        outcome = DemoResult(results, receiver.pagerduty(), alerts, urls, prom.url)
        if after is not None:
            after(outcome, prom)
        return outcome
    finally:
        for part in reversed(started):
            with contextlib.suppress(Exception):
                part.stop()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tools.demo",
        description="The per-tenant enum incident on a real vLLM, caught: three schema designs, one phase each.",
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
        result = run(Path(args.workdir), Path(args.tokenizer), phase_seconds=args.duration / 3, stop=stop)
    except KeyboardInterrupt:
        stop.set()
        print("\nstopped: everything the demo started is stopped.")
        return 130
    print("\n== summary (after each phase's warm-up)")
    for p in result.phases:
        print(f"  phase {p.name}: {describe(p.stats)}; pages so far {p.pages}")
    pages = [e for e in result.pages if e.get("event_action") == "trigger"]
    for e in pages:
        print(f"  paged: {e['payload']['summary']}")
    print("everything the demo started is stopped.")
    return 0
