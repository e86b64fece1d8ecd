"""The whole alert path, live: real xgrammar compiles -> probe -> daemon -> real Prometheus with the
project's rules (rendered from the same source with short windows) -> real Alertmanager with the
example's routing -> a local PagerDuty Events API v2 endpoint. A static workload pages nothing; a
per-request enum workload pages with its schema family first, what varies in it and the runbook; when
it stops, the page resolves."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import exporter.probe as probe
from alerts import generate as alert_rules
from exporter.schema.family import fingerprint
from tools.harness import ROOT
from tools.harness.processes import Alertmanager, Prometheus, Receiver
from tools.harness.processes import DaemonProcess as Daemon

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROUTING_KEY = "R0UT1NGKEY-test-0001"


def fast_rules(path: Path) -> None:
    gen = alert_rules  # the same source as the shipped rules, rendered with short windows
    params = gen.Params(window="20s", long_for="5s", short_for="5s", info_for="5s")
    path.write_text(gen.dump(gen.render(params)))


def alertmanager_config(receiver: Receiver, key_file: Path) -> dict[str, Any]:
    """The shipped example, pointed at the local receivers and with second-scale grouping."""
    config: dict[str, Any] = yaml.safe_load(
        (ROOT / "alerts" / "alertmanager" / "alertmanager.yml").read_text()
    )
    config["route"].update(group_wait="1s", group_interval="1s", repeat_interval="1h")
    for r in config["receivers"]:
        for pd in r.get("pagerduty_configs", []):
            pd["routing_key_file"] = str(key_file)
            pd["url"] = receiver.url + "/v2/enqueue"
        for hook in r.get("webhook_configs", []):
            hook["url"] = receiver.url + "/ticket"
    return config


@pytest.fixture
def stack(tmp_path: Path, xgr_compiler: Any) -> Iterator[tuple[Prometheus, Receiver, Any]]:
    sock = tmp_path / "probe.sock"
    receiver = Receiver()
    key_file = tmp_path / "routing-key"
    key_file.write_text(ROUTING_KEY)
    started: list[Any] = []
    try:
        daemon = Daemon(["--probe.socket", str(sock), "--no-collector.nvml", "--no-collector.vllm"])
        started.append(daemon)
        am = Alertmanager(tmp_path, alertmanager_config(receiver, key_file))
        started.append(am)
        rules = tmp_path / "rules.yml"
        fast_rules(rules)
        prom = Prometheus(
            tmp_path,
            [daemon.url.removeprefix("http://")],
            job="guided-decoding-exporter",
            rule_files=[rules],
            alertmanager=f"127.0.0.1:{am.port}",
            extra_args=["--rules.alert.resend-delay=1s"],
        )
        started.append(prom)
        import os

        os.environ["GDX_PROBE_SOCKET"], os.environ["GDX_PROBE_INTERVAL"] = str(sock), "0.2"
        os.environ["GDX_POD_NAME"] = "vllm-live-0"
        assert probe.install("generic")
        yield prom, receiver, xgr_compiler
    finally:
        probe.uninstall()
        for name in ("GDX_PROBE_SOCKET", "GDX_PROBE_INTERVAL", "GDX_POD_NAME"):
            __import__("os").environ.pop(name, None)
        for part in reversed(started):
            part.stop()
        receiver.stop()


@pytest.fixture(scope="module")
def xgr_compiler(tokenizer_json: Path) -> Any:
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=128256)
    return lambda: xgr.GrammarCompiler(info, max_threads=8, cache_enabled=True, cache_limit_bytes=512 << 20)


INVOICE: dict[str, Any] = {
    "title": "Invoice",
    "type": "object",
    "properties": {
        "vendor": {"type": "string"},
        "line_items": {"type": "array", "maxItems": 25, "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}, "cost_center_id": {"type": "string"}}}},
    },
}  # fmt: skip


def tenant(n: int) -> dict[str, Any]:
    schema = json.loads(json.dumps(INVOICE))
    item = schema["properties"]["line_items"]["items"]["properties"]
    item["cost_center_id"] = {"enum": [f"CC-{n:05d}-{i:02d}" for i in range(50)]}
    return schema


def run_workload(compile_one: Any, seconds: float, pace: float = 0.1) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        compile_one()
        time.sleep(pace)


def test_injected_enum_pages_and_resolves_static_pages_nothing(
    stack: tuple[Prometheus, Receiver, Any],
) -> None:
    prom, receiver, new_compiler = stack
    static = new_compiler()
    run_workload(lambda: static.compile_json_schema(json.dumps(INVOICE)), 30)
    assert prom.query("sum(rate(guided_decoding_compile_requests_total[20s])) > 1"), (
        "no traffic reached Prometheus"
    )
    assert prom.query('ALERTS{alertname="GuidedDecodingCompileP95High"}') == []
    assert receiver.pagerduty() == []

    dynamic = new_compiler()
    counter = iter(range(10**6))

    def one() -> None:
        dynamic.compile_json_schema(json.dumps(tenant(next(counter))))

    deadline = time.monotonic() + 120
    while (
        not any(e["event_action"] == "trigger" for e in receiver.pagerduty()) and time.monotonic() < deadline
    ):
        run_workload(one, 2)
    triggers = [e for e in receiver.pagerduty() if e["event_action"] == "trigger"]
    assert triggers, f"no page; alerts: {prom.query('ALERTS')}"
    page = triggers[0]
    assert page["routing_key"] == ROUTING_KEY
    assert page["payload"]["severity"] == "critical"
    assert page["payload"]["summary"].startswith("GuidedDecodingCompileP95High: Grammar compiles are slow")
    firing = page["payload"]["custom_details"]["firing"]
    # the families on this node, the injected one first (each of its hashes compiled once; the family
    # sums them), then the static invoice; what varies in the first
    injected, static = fingerprint(json.dumps(tenant(0))).key, fingerprint(json.dumps(INVOICE)).key
    named = re.findall(r"(?:: |; )([0-9a-f]{12}) \(Invoice, ", firing)
    assert named[:1] == [injected] and set(named) <= {injected, static}, firing
    assert (
        "varies: /properties/line_items/items/properties/cost_center_id/enum (literal differs in " in firing
    )
    assert "vllm-live-0" in firing
    links = {link["text"]: link["href"] for link in page["links"]}
    assert links["runbook"].endswith("/alerts/runbooks/GuidedDecodingCompileP95High.md")
    assert links["dashboard"].endswith("/d/guided-decoding/guided-decoding")
    dedup = page["dedup_key"]

    deadline = time.monotonic() + 120  # the workload stopped: the page resolves
    while time.monotonic() < deadline:
        if any(e["event_action"] == "resolve" and e["dedup_key"] == dedup for e in receiver.pagerduty()):
            break
        time.sleep(1)
    else:
        raise AssertionError(f"no resolve event: {receiver.pagerduty()}")
