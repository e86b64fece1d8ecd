"""A node under attack from its own pods (issue 47's done-when): the real `gdx serve` on both probe
transports and an engine target, driven at once by hostile probe traffic (schemas whose patterns
backtrack catastrophically in Python's `re`, floods of hellos with made-up backends, several hellos on
one connection, oversize and junk auth lines, idle connections holding slots) and hostile metrics pages
(repeated and reserved label names, clashing `exported_pod`, values Go cannot read). Throughout, the
daemon's /metrics answers within 1 s, its RSS stays under the chart's memory limit, and a real
Prometheus ingests every scrape; afterwards a real probe on each transport still gets through."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from exporter import wire
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper
from tests.integration.test_engine_scrape import EngineServer
from tests.support import hostile_pages
from tools.harness import ROOT, free_port
from tools.harness.apiserver import BoundToken, FakeApiServer
from tools.harness.processes import DaemonProcess, Prometheus
from tools.harness.scraping import sample, scrape, wait_for

pytestmark = pytest.mark.slow

ATTACK_SECONDS = 30.0
CHART = ROOT / "deploy" / "helm" / "guided-decoding-exporter"
IDENTITY = {"engine_kind": "generic", "engine_version": "", "backends": {}, "probe_version": "0"}


def chart_memory_limit() -> int:
    """The daemon container's memory limit in the chart's values (bytes)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    limit = str(values["resources"]["limits"]["memory"])
    assert limit.endswith("Mi"), limit
    return int(limit[:-2]) * 2**20


def catastrophic_schema(rng: random.Random, i: int) -> str:
    """A schema whose pattern and literal make Python's backtracking `re` run for minutes: nested or
    overlapping quantifiers, and a value of many matching characters that fails at its end, pinned by
    a union branch beside the pattern's property (what the unenforced-keyword check compares) or beside
    it in the same subschema."""
    core = rng.choice(["(a+)+", "(a|aa)+", "(a|a?)+", "(a*)*b?", "([a-z]+ ?){1,40}", "(\\w+\\s?)+"])
    value = "a" * rng.randint(28, 40) + "!"
    pin: dict[str, Any] = rng.choice([{"const": value}, {"enum": [value, value + "!"]}])
    pattern = {"type": "string", "pattern": f"^{core}$"}
    if i % 3:
        doc: dict[str, Any] = {"properties": {"v": pattern}, "anyOf": [{"properties": {"v": pin}}]}
    else:
        doc = {"properties": {"v": {**pattern, **pin}}}
    return json.dumps({"title": f"t{i}", "type": "object", **doc, "required": ["v"]})


def line(kind: str, **fields: Any) -> bytes:
    return json.dumps({"v": wire.VERSION, "kind": kind, **fields}).encode() + b"\n"


def made_up_hello(i: int) -> bytes:
    backends = {f"backend-{i}-{j}": f"{j}.0" for j in range(12)}
    return line("hello", instance=f"flood-{i}", pid=1000 + i, pod=f"flood-{i % 50}", engine=str(i),
                engine_kind="generic", engine_version="x" * 500, backends=backends)  # fmt: skip


class Attack:
    """Hostile clients in threads, each looping until `stop` and never longer than the test allows."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def run(self, name: str, body: Callable[[], None], pause: float) -> None:
        def loop() -> None:
            while not self.stop.is_set():
                try:
                    body()
                except OSError:
                    pass  # the daemon closing a hostile connection is what it should do
                except Exception as err:
                    self.errors.append(f"{name}: {err!r}")
                    return
                self.stop.wait(pause)

        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(15)


def test_a_node_under_attack_keeps_answering_bounded_and_ingested(tmp_path: Path) -> None:
    rng = random.Random(47)
    api = FakeApiServer()
    own = tmp_path / "daemon-token"
    own.write_text(api.daemon_token)
    api.tokens["good"] = BoundToken(namespace="llm", pod="vllm-good")
    good_token = tmp_path / "token-good"
    good_token.write_text("good\n")
    sock = tmp_path / "probe" / "probe.sock"
    sock.parent.mkdir()
    port = free_port()
    pages = [EngineServer({"/metrics": page}) for page in hostile_pages.every_page().values()]
    daemon = DaemonProcess(
        [
            "--no-collector.nvml", "--probe.socket", str(sock),
            "--probe.listen-address", f"127.0.0.1:{port}",
            "--kubernetes.api-server", api.url, "--kubernetes.token-file", str(own),
            "--kubernetes.ca-file", "", "--kubernetes.node-name", "node-a",
            *[arg for p in pages for arg in ("--vllm.target", p.base + "/metrics")],
        ]
    )  # fmt: skip
    (tmp_path / "prom").mkdir()
    prom = Prometheus(tmp_path / "prom", [daemon.url.removeprefix("http://")], interval="1s")
    attack = Attack()
    held: list[socket.socket] = []
    latencies: list[float] = []
    rss: list[int] = []
    proc = psutil.Process(daemon.proc.pid)
    try:
        assert prom.wait_for('up{job="gdx"} == 1'), prom.api("targets")

        # 1. Probes shipping schemas that backtrack catastrophically (the real recorder and shipper).
        shippers: list[Shipper] = []
        for k in range(4):
            shippers.append(
                Shipper(Recorder(), str(sock), {**IDENTITY, "pod": f"evil-{k}", "engine": "0"}, 0.2)
            )

        def schemas() -> None:
            for shipper in shippers:
                rec = shipper.recorder
                for _ in range(5):
                    spec = catastrophic_schema(rng, rng.randrange(10**9))
                    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", spec, 0.5, False)
                shipper.tick()

        attack.run("schemas", schemas, 0.3)

        # 2. Hello floods on the socket: many engines, several hellos on one connection.
        counter = iter(range(10**9))

        def flood() -> None:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(2)
                conn.connect(str(sock))
                i = next(counter)
                backends = {f"made-up-{j}": {"requests": 1, "hits": 0} for j in range(20)}
                conn.sendall(made_up_hello(i) + made_up_hello(i + 10**6) + line(
                    "snapshot", seq=0, full=True, backends=backends, schemas=[]))  # fmt: skip
                time.sleep(0.05)

        attack.run("flood", flood, 0.02)

        # 3. Before any token is checked: oversize auth lines, junk tokens, idle connections holding slots.
        def oversize() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                chunk = b"A" * 65536
                for _ in range(64):  # 4 MiB with no newline
                    conn.sendall(chunk)

        def junk_tokens() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                conn.sendall(line("auth", token=f"junk-{rng.randrange(10**6)}"))
                conn.recv(1024)

        def hold_slots() -> None:
            if len(held) < 400:
                for target in (("tcp", port), ("unix", str(sock))):
                    family = socket.AF_INET if target[0] == "tcp" else socket.AF_UNIX
                    conn = socket.socket(family, socket.SOCK_STREAM)
                    conn.settimeout(2)
                    conn.connect(("127.0.0.1", port) if target[0] == "tcp" else str(sock))
                    held.append(conn)

        attack.run("oversize", oversize, 0.1)
        attack.run("junk", junk_tokens, 0.01)
        attack.run("slots", hold_slots, 0.02)

        # Meanwhile: /metrics within 1 s at every look, the RSS under the chart's limit.
        started = time.monotonic()
        while time.monotonic() - started < ATTACK_SECONDS:
            t0 = time.monotonic()
            with urllib.request.urlopen(daemon.url + "/metrics", timeout=10) as resp:
                assert resp.status == 200
                resp.read()
            latencies.append(time.monotonic() - t0)
            # the container's memory: the daemon and its child that reads large messages
            family = [proc, *proc.children(recursive=True)]
            rss.append(sum(p.memory_info().rss for p in family if p.is_running()))
            time.sleep(0.2)
        window = int(time.monotonic() - started)
        attack.join()
        assert not attack.errors, attack.errors

        # 4. After the attack: a real probe gets through on each transport.
        good = Recorder()
        good.finish(good.begin("xgrammar"), "xgrammar", "json", '{"title":"ok","type":"object"}', 0.01, False)
        tcp = Shipper(good, f"tcp://127.0.0.1:{port}", {**IDENTITY, "pod": "x", "engine": "0"}, 0.1,
                      token_file=str(good_token))  # fmt: skip
        local = Recorder()
        spec = '{"title":"ok2","type":"object"}'
        local.finish(local.begin("xgrammar"), "xgrammar", "json", spec, 0.01, False)
        unix = Shipper(local, str(sock), {**IDENTITY, "pod": "vllm-local", "engine": "0"}, 0.1)
        for conn in held:
            conn.close()

        def through() -> bool:
            tcp.tick()
            unix.tick()
            page = scrape(daemon.url)
            return (
                sample(page, "guided_decoding_compile_requests_total", pod="vllm-good") == 1
                and sample(page, "guided_decoding_compile_requests_total", pod="vllm-local") == 1
            )

        wait_for(through, timeout=30)
        tcp.stop()
        unix.stop()

        print(
            f"under attack for {window} s: {len(latencies)} /metrics, slowest {max(latencies) * 1000:.0f} ms;"
            f" RSS at most {max(rss) / 2**20:.0f} MiB of {chart_memory_limit() / 2**20:.0f}"
        )
        assert max(latencies) < 1.0, sorted(latencies)[-5:]
        assert max(rss) < chart_memory_limit(), max(rss)
        prom_window = f"{window + 5}s"
        (minimum,) = prom.query(f'min_over_time(up{{job="gdx"}}[{prom_window}])')
        assert float(minimum["value"][1]) == 1.0  # every scrape ingested whole
        (count,) = prom.query(f'count_over_time(up{{job="gdx"}}[{prom_window}])')
        assert float(count["value"][1]) >= window - 3, count  # a scrape a second, none missed
        target = prom.api("targets")["activeTargets"][0]
        assert target["health"] == "up" and target["lastError"] == "", target
        refused = prom.query("sum by (reason) (guided_decoding_probe_connections_refused_total)")
        assert {r["metric"]["reason"] for r in refused if float(r["value"][1]) > 0}, refused
    finally:
        attack.join()
        for conn in held:
            conn.close()
        prom.stop()
        daemon.stop()
        api.stop()
        for page in pages:
            page.close()
