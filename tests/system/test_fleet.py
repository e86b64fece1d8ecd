"""A fleet, live: three daemons stand for three nodes (node-a, node-b, node-c), each fed by its own
engines; one Prometheus in agent mode scrapes all three (`instance` relabeled to the node's name, as
the shipped PodMonitor does) and remote-writes to a central Prometheus (`--web.enable-remote-write-
receiver`) that evaluates the project's rules (rendered with the live alert test's short windows) and
sends to a real Alertmanager with the example's routing, whose PagerDuty receiver is a local Events
API v2 endpoint. The central one forwards only the recording rules and the alerts (the keep of
docs/fleet.md) to a third Prometheus standing for the global view (Thanos, Mimir).

Nodes A and C run steady static-schema traffic (simulated engines: the real probe code over each
daemon's socket; one static schema per engine, a hit after its first compile). Node B runs one engine
pod with real xgrammar compiles over the Llama 3 vocabulary, static first, then the per-tenant enum
injection. Asserted: nothing pages while all three are static; the injection on B pages exactly once
(one dedup key), and that page names node B, B's pod and the injected family, and nothing of A or C
(their node names, pods, families); the global view holds the rules and the page, nothing raw.
Printed: the time from the injection to the PagerDuty trigger."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from alerts import generate as alert_rules
from exporter.schema.family import fingerprint
from tests.support.engines.tenant_enum import INVOICE, tenant
from tests.system.test_alerts_live import FAST, PAGE, WINDOW, Pod, alertmanager_config, fast_rules, poll
from tools.harness import free_port
from tools.harness.fleet import GLOBAL_KEEP, CentralPrometheus, PrometheusAgent, agent_config, central_config
from tools.harness.processes import Alertmanager, Receiver
from tools.harness.processes import DaemonProcess as Daemon
from tools.harness.simengines import SimEngines
from tools.harness.simulate import static_schema

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROUTING_KEY = "R0UT1NGKEY-fleet-0001"
NODES = ("node-a", "node-b", "node-c")
B_POD = "vllm-b-0"
QUIET_PODS = {"node-a": ("vllm-a-0", "vllm-a-1"), "node-c": ("vllm-c-0", "vllm-c-1")}


@dataclass
class Fleet:
    central: CentralPrometheus
    global_view: CentralPrometheus
    receiver: Receiver
    pod_b: Pod
    daemons: dict[str, Daemon]
    sims: dict[str, SimEngines]

    def triggers(self) -> list[dict[str, Any]]:
        return [e for e in self.receiver.pagerduty() if e.get("event_action") == "trigger"]


@pytest.fixture
def fleet(tmp_path: Path, tokenizer_json: Path) -> Iterator[Fleet]:
    receiver = Receiver()
    key_file = tmp_path / "routing-key"
    key_file.write_text(ROUTING_KEY)
    started: list[Any] = []
    pod_b: Pod | None = None
    try:
        daemons: dict[str, Daemon] = {}
        for node in NODES:
            sock = tmp_path / f"{node}.sock"
            daemons[node] = Daemon(
                ["--probe.socket", str(sock), "--no-collector.nvml", "--no-collector.vllm"],
                env={"NODE_NAME": node},
            )
            started.append(daemons[node])
        # B's engine loads the tokenizer while the rest starts
        pod_b = Pod(B_POD, tmp_path / "node-b.sock", tokenizer_json, first_tenant=0, logdir=tmp_path)
        sims: dict[str, SimEngines] = {}
        for node, pods in QUIET_PODS.items():
            work = tmp_path / node
            work.mkdir()
            prefix = pods[0].removesuffix("0")
            # one static schema per engine, 5 calls/s: one miss each, then hits (never the page's guard)
            sims[node] = SimEngines(
                tmp_path / f"{node}.sock", work, engines=len(pods), interval=0.2, rate=5, static=1, new=0,
                pod_prefix=prefix, seed=ord(node[-1]),
            )  # fmt: skip
            started.append(sims[node])
        am = Alertmanager(tmp_path, alertmanager_config(receiver, key_file))
        started.append(am)
        rules = tmp_path / "rules.yml"
        fast_rules(rules)
        # the agent first, pointed at the central's port: the central's first evaluation already has
        # `up`, so ExporterDown's absent() never holds for its `for`
        central_port = free_port()
        targets = {node: d.url.removeprefix("http://") for node, d in daemons.items()}
        agent = PrometheusAgent(
            tmp_path / "agent",
            agent_config(targets, f"http://127.0.0.1:{central_port}/api/v1/write", interval="1s"),
        )
        started.append(agent)
        global_view = CentralPrometheus(tmp_path / "global", {"scrape_configs": []}, name="global")
        started.append(global_view)
        central = CentralPrometheus(
            tmp_path / "central",
            central_config(
                [rules], f"127.0.0.1:{am.port}", interval="1s", global_write_url=global_view.remote_write_url
            ),
            central_port,
            extra_args=["--rules.alert.resend-delay=1s"],
        )
        started.append(central)
        pod_b.wait_ready(time.monotonic() + 180)
        yield Fleet(central, global_view, receiver, pod_b, daemons, sims)
    finally:
        if pod_b is not None:
            pod_b.stop()
        for part in reversed(started):
            part.stop()
        receiver.stop()


def by(label: str, result: list[dict[str, Any]]) -> set[str]:
    return {series["metric"].get(label, "") for series in result}


def test_injection_on_node_b_pages_once_naming_b_only(fleet: Fleet) -> None:
    central, receiver = fleet.central, fleet.receiver
    began = time.monotonic()
    fleet.pod_b.send("static")

    # every node's traffic reaches the central Prometheus through the agent's remote write
    traffic = f"sum by (instance, pod) (rate(guided_decoding_compile_requests_total[{WINDOW}])) > 1"
    pods = {B_POD, *(p for ps in QUIET_PODS.values() for p in ps)}
    seen = poll(
        "traffic from every node's pods on the central Prometheus",
        lambda: (r := central.query(traffic)) and by("pod", r) >= pods and r,
        120,
        seen=lambda: (central.query("up"), fleet.pod_b.stderr()[-500:]),
    )
    assert {(s["metric"]["instance"], s["metric"]["pod"]) for s in seen} == {
        ("node-b", B_POD),
        *((n, p) for n, ps in QUIET_PODS.items() for p in ps),
    }, seen  # each pod under its own node's name: the relabeling, through remote write
    up = central.query('up{job="guided-decoding-exporter"}')
    assert sorted(by("instance", up)) == list(NODES) and {s["value"][1] for s in up} == {"1"}, up

    # all static for the window and the page's `for`, and then some: nothing pages
    time.sleep(30)
    assert by("pod", central.query(traffic)) >= pods, "the static traffic stopped"
    assert central.query('ALERTS{severity="critical"}') == [], central.query("ALERTS")
    assert receiver.pagerduty() == [], receiver.pagerduty()

    # the injection, on node B only
    injected_at = time.monotonic()
    fleet.pod_b.send("tenants")
    page: dict[str, Any] = poll(
        "a page", lambda: (t := fleet.triggers()) and t[0], 180, 0.2,
        seen=lambda: (central.query("ALERTS"), central.query(alert_rules.records(FAST).compile_p95)),
    )  # fmt: skip
    to_page = time.monotonic() - injected_at
    firing = central.query(f'ALERTS{{alertname="{PAGE}", alertstate="firing"}}')
    time.sleep(5)  # five group intervals with the injection on: room for a second incident, if any

    triggers = fleet.triggers()
    assert {e["dedup_key"] for e in triggers} == {page["dedup_key"]}, [
        (e["dedup_key"], e["payload"]["summary"]) for e in triggers
    ]  # one incident
    assert {(s["metric"]["instance"], s["metric"]["pod"]) for s in firing} == {("node-b", B_POD)}, firing
    assert page["routing_key"] == ROUTING_KEY
    assert page["payload"]["severity"] == "critical"
    assert page["payload"]["summary"].startswith(f"{PAGE}: Grammar compiles are slow")
    details = page["payload"]["custom_details"]
    assert details["nodes"].split() == [f"node-b/{B_POD}"], details
    assert details["num_firing"] == "1", details
    injected = fingerprint(json.dumps(tenant(0))).key
    assert f"Compile P95 on pod {B_POD} (xgrammar, node node-b) is " in details["firing"], details
    assert f": {injected} (Invoice, " in details["firing"], details  # the injected family, first
    text = json.dumps(page)
    quiet = [*QUIET_PODS, *(p for ps in QUIET_PODS.values() for p in ps)]
    quiet_families = [fingerprint(static_schema(0)).key]  # A's and C's one static schema
    assert not [word for word in quiet + quiet_families if word in text], (quiet, text)
    assert fingerprint(json.dumps(INVOICE)).key != injected

    # the global view: the rules of every node and the page, and nothing else
    view = fleet.global_view
    poll(
        "the page in the global view",
        lambda: view.query(f'ALERTS{{alertname="{PAGE}", alertstate="firing", instance="node-b"}}'),
        30, seen=lambda: view.query("count by (__name__) ({__name__=~'.+'})"),
    )  # fmt: skip
    names = by("__name__", view.query('group by (__name__) ({__name__=~".+"})'))
    keep = re.compile(f"(?:{GLOBAL_KEEP['regex']})")
    raw = [name for name in names if not keep.fullmatch(f"{name};{PAGE}")]
    assert names and not raw, raw
    assert alert_rules.records(FAST).compile_p95 in names, names
    p95 = view.query(alert_rules.records(FAST).compile_p95)
    assert by("instance", p95) == set(NODES), p95  # every node's rules, raw series of none

    total = time.monotonic() - began
    print(
        f"\nfleet: injection on node-b to the PagerDuty trigger {to_page:.1f} s"
        f" (windows {WINDOW}, page for {FAST.long_for}, group_wait 1s, scrape and evaluation 1s,"
        f" remote write batches 1s); test body {total:.0f} s"
    )
