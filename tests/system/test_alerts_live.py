"""The whole alert path, live: real xgrammar compiles -> probe -> daemon -> real Prometheus with the
project's rules (rendered from the same source with short windows) -> real Alertmanager with the
example's routing -> a local PagerDuty Events API v2 endpoint. Two engine pods on one node, each its
own process with the probe armed and its own pod name, both reporting to the node's daemon. A static
workload pages nothing; a per-tenant enum injection on both pods fires the page for each pod and opens
exactly one PagerDuty incident (one dedup key), which names both pods, the injected schema family
first, what varies in it and the runbook; when the workload stops, that incident resolves."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import generate as alert_rules
from exporter.schema.family import fingerprint
from tests.support.engines.tenant_enum import INVOICE, tenant
from tools.harness import ROOT
from tools.harness.processes import Alertmanager, Prometheus, Receiver
from tools.harness.processes import DaemonProcess as Daemon

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ROUTING_KEY = "R0UT1NGKEY-test-0001"
PODS = ("vllm-live-0", "vllm-live-1")
PAGE = "GuidedDecodingCompileP95High"
WINDOW = "20s"


# the same source as the shipped rules, rendered with short windows
FAST = alert_rules.Params(
    window=WINDOW, long_for="5s", info_for="5s",
    # ExporterDown's `for`: longer than Prometheus takes to scrape a new target (its scrape manager
    # applies discovered targets every 5 s), during which absent(up) holds
    short_for="15s",
    keep_firing_for="10s",  # the resolve comes this long after the window empties
    starvation_for="10s",  # still longer than the page's `for`
    min_slow_rate=0.1,  # the shipped guard; each pod compiles ~4 slow (8-15 ms) schemas a second
)  # fmt: skip


def fast_rules(path: Path) -> None:
    path.write_text(alert_rules.dump(alert_rules.render(FAST)))


def alertmanager_config(receiver: Receiver, key_file: Path) -> dict[str, Any]:
    """The shipped example, pointed at the local receivers and with second-scale grouping."""
    config: dict[str, Any] = yaml.safe_load(
        (ROOT / "alerts" / "alertmanager" / "alertmanager.yml").read_text()
    )
    fast = {"group_wait": "1s", "group_interval": "1s"}
    config["route"].update(fast, repeat_interval="1h")
    for route in config["route"].get("routes", []):
        route.update({k: v for k, v in fast.items() if k in route})
    for r in config["receivers"]:
        for pd in r.get("pagerduty_configs", []):
            pd.pop("routing_key", None)
            pd["routing_key_file"] = str(key_file)
            pd["url"] = receiver.url + "/v2/enqueue"
        for hook in r.get("webhook_configs", []):
            hook["url"] = receiver.url + "/ticket"
    return config


class Pod:
    """One engine pod: tests/support/engines/tenant_enum.py with the probe armed as `name`."""

    SCRIPT = ROOT / "tests" / "support" / "engines" / "tenant_enum.py"

    def __init__(self, name: str, sock: Path, tokenizer_json: Path, first_tenant: int, logdir: Path) -> None:
        self.name = name
        self.log_path = logdir / f"{name}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "GDX_PROBE_SOCKET": str(sock),
            "GDX_PROBE_INTERVAL": "0.2",
            "GDX_POD_NAME": name,
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1",
        }
        self.proc = subprocess.Popen(
            [sys.executable, str(self.SCRIPT), str(tokenizer_json), str(first_tenant)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=ROOT, text=True,
        )  # fmt: skip

    def wait_ready(self, deadline: float) -> None:
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline()
                if line.strip() == "ready":
                    return
                if not line:  # it exited
                    break
        raise AssertionError(f"pod {self.name} not ready (rc {self.proc.poll()}): {self.stderr()}")

    def stderr(self) -> str:
        self.log.flush()
        return self.log_path.read_text()[-4000:]

    def send(self, command: str) -> None:
        assert self.proc.poll() is None, f"pod {self.name} died: {self.stderr()}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # the pod exits at the end of its stdin
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Stack:
    def __init__(self, prom: Prometheus, receiver: Receiver, pods: list[Pod]) -> None:
        self.prom, self.receiver, self.pods = prom, receiver, pods

    def all(self, command: str) -> None:
        for pod in self.pods:
            pod.send(command)

    def triggers(self) -> list[dict[str, Any]]:
        return [e for e in self.receiver.pagerduty() if e.get("event_action") == "trigger"]

    def tickets(self) -> list[dict[str, Any]]:
        return [body for path, body in self.receiver.events if path == "/ticket"]


@pytest.fixture
def stack(tmp_path: Path, tokenizer_json: Path) -> Iterator[Stack]:
    sock = tmp_path / "probe.sock"
    receiver = Receiver()
    key_file = tmp_path / "routing-key"
    key_file.write_text(ROUTING_KEY)
    started: list[Any] = []
    pods: list[Pod] = []
    try:
        # the minimal series profile: the alerts must work on it (it only drops series full has)
        daemon = Daemon(
            [
                "--probe.socket",
                str(sock),
                "--no-collector.nvml",
                "--no-collector.vllm",
                "--metrics.profile",
                "minimal",
            ]
        )
        started.append(daemon)
        # the pods load the tokenizer while the servers start
        for i, name in enumerate(PODS):
            pods.append(Pod(name, sock, tokenizer_json, first_tenant=i * 100_000, logdir=tmp_path))
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
        deadline = time.monotonic() + 180  # two tokenizers over 128k tokens on a loaded machine
        for pod in pods:
            pod.wait_ready(deadline)
        yield Stack(prom, receiver, pods)
    finally:
        for pod in pods:
            pod.stop()
        for part in reversed(started):
            part.stop()
        receiver.stop()


def poll(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    interval: float = 1.0,
    seen: Callable[[], Any] = lambda: None,
) -> Any:
    """`check()`'s first truthy result within `timeout` seconds; fails with `what` (and `seen()`)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; seen: {seen()}")
        time.sleep(interval)


def pods_of(result: list[dict[str, Any]]) -> set[str]:
    return {series["metric"].get("pod", "") for series in result}


def test_injection_on_two_pods_is_one_incident_static_pages_nothing(stack: Stack) -> None:
    prom, receiver = stack.prom, stack.receiver
    firing_page = f'ALERTS{{alertname="{PAGE}", alertstate="firing"}}'

    # static: both pods busy on one schema (cache hits) for twice the window: nothing pages
    stack.all("static")
    traffic = f"sum by (pod) (rate(guided_decoding_compile_requests_total[{WINDOW}])) > 1"
    poll(
        "static traffic from both pods", lambda: pods_of(prom.query(traffic)) >= set(PODS), 90,
        seen=lambda: [(p.name, p.proc.poll(), p.stderr()[-500:]) for p in stack.pods],
    )  # fmt: skip
    time.sleep(40)  # an absence: twice the window, and the page's `for`, with the traffic on
    assert pods_of(prom.query(traffic)) >= set(PODS), "the static traffic stopped"
    assert prom.query(f'ALERTS{{alertname="{PAGE}"}}') == []
    assert prom.query('ALERTS{severity="critical"}') == []
    assert receiver.pagerduty() == [], receiver.pagerduty()

    # the injection, on both pods
    stack.all("tenants")
    both = poll(
        f"{PAGE} firing for both pods",
        lambda: (r := prom.query(firing_page)) and pods_of(r) >= set(PODS) and r,
        180,
        seen=lambda: (prom.query("ALERTS"), prom.query(alert_rules.records(FAST).compile_p95)),
    )
    instances = {series["metric"]["instance"] for series in both}
    assert len(instances) == 1, both  # one node: the one daemon

    def page_for_both() -> dict[str, Any] | None:
        for event in reversed(stack.triggers()):
            if all(pod in event["payload"]["custom_details"].get("nodes", "") for pod in PODS):
                return event
        return None

    page: dict[str, Any] = poll(
        "a page that lists both pods", page_for_both, 60, 0.5,
        seen=lambda: [(e["dedup_key"][:12], e["payload"]["custom_details"]) for e in stack.triggers()],
    )  # fmt: skip
    time.sleep(5)  # five group intervals with the injection on: room for a second incident, if any
    triggers = stack.triggers()
    assert {e["dedup_key"] for e in triggers} == {page["dedup_key"]}, [
        (e["dedup_key"], e["payload"]["summary"]) for e in triggers
    ]  # one incident: no second page per pod, nor for another critical alert
    assert all(e["payload"]["summary"].startswith(f"{PAGE}: ") for e in triggers)

    assert page["routing_key"] == ROUTING_KEY
    assert page["payload"]["severity"] == "critical"
    assert page["payload"]["summary"].startswith(f"{PAGE}: Grammar compiles are slow")
    details = page["payload"]["custom_details"]
    (instance,) = instances
    assert sorted(details["nodes"].split()) == [f"{instance}/{pod}" for pod in PODS], details
    assert details["num_firing"] == "2", details
    firing = details["firing"]
    # each pod's description: the families on this node, the injected one first (each of its hashes
    # compiled once; the family sums them), then the static invoice; what varies in the first
    injected, static = fingerprint(json.dumps(tenant(0))).key, fingerprint(json.dumps(INVOICE)).key
    parts = re.split(f"({'|'.join(map(re.escape, PODS))})", firing)  # text, pod, text, pod, text...
    families: dict[str, list[str]] = {}  # the families named after a pod's name, up to the next pod's
    for pod, text in zip(parts[1::2], parts[2::2], strict=True):
        named = re.findall(r"(?:: |; )([0-9a-f]{12}) \(Invoice, ", text)
        if named:
            families.setdefault(pod, named)
    assert set(families) == set(PODS), firing
    for named in families.values():
        assert named[:1] == [injected] and set(named) <= {injected, static}, firing
    assert (
        "varies: /properties/line_items/items/properties/cost_center_id/enum (literal differs in " in firing
    )
    links = {link["text"]: link["href"] for link in page["links"]}
    assert links["runbook"].endswith(f"/alerts/runbooks/{PAGE}.md")
    assert links["dashboard"].endswith("/d/guided-decoding/guided-decoding")
    # the warnings ride along as tickets, never as pages
    tickets = poll("a ticket", stack.tickets, 60, seen=lambda: prom.query("ALERTS"))
    assert {a["labels"]["severity"] for t in tickets for a in t["alerts"]} == {"warning"}, tickets

    # the workload stops: the one incident resolves
    stack.all("idle")
    dedup = page["dedup_key"]
    poll(
        "the resolve event",
        lambda: any(e["event_action"] == "resolve" and e["dedup_key"] == dedup for e in receiver.pagerduty()),
        150,
        seen=lambda: (prom.query("ALERTS"), [e["event_action"] for e in receiver.pagerduty()]),
    )
    assert {e["dedup_key"] for e in receiver.pagerduty()} == {dedup}
