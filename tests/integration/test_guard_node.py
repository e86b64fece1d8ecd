"""The node's verdicts (exporter/daemon/receiver/verdicts.py) over real sockets from a real daemon:
an API server of one pod dies validating a schema; the daemon sends the verdict to the probe of an
API server of another pod on the node, whose guard then refuses that schema (exporter/probe's
`_daemon_message`, as install() wires it when the guard is on). With --guard.compile-budget, a schema
an EngineCore compiled past the budget is refused on every path, by an API server's guard and by that
of an engine run in-process. A probe without a guard gets nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import exporter.probe as probe
from exporter.probe.guard import Guard, GuardSettings
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper
from exporter.probe.targets.vllm_api import GUARD
from exporter.schema.identity import schema_hash
from tests.support.server_killers import nested
from tools.harness.scraping import wait_for


def shipper(sock: Path, pod: str, engine: str, recorder: Recorder, guard: str = "") -> Shipper:
    hello = {"pod": pod, "engine": engine, "engine_kind": "vllm", "engine_version": "0.32.0",
             "backends": {}, "probe_version": "0", **({"guard": guard} if guard else {})}  # fmt: skip
    return Shipper(recorder, str(sock), hello)


def test_a_death_on_one_pod_is_refused_by_the_guard_of_another(tmp_path: Path, daemon_factory: Any) -> None:
    sock = tmp_path / "probe.sock"
    daemon_factory("--probe.socket", str(sock), "--no-collector.nvml", "--no-collector.vllm")
    wait_for(sock.exists, 30)
    killer = json.dumps(nested(20, 3))
    dying, guarded, compiling = Recorder(), Recorder(), Recorder()
    dying.validates()
    guarded.validates()
    ships = [shipper(sock, "vllm-a", "api-server", dying),
             shipper(sock, "vllm-b", "api-server", guarded, "enforce"),
             shipper(sock, "vllm-c", "0", compiling)]  # fmt: skip
    got: list[dict[str, Any]] = []
    ships[1].on_message = probe._daemon_message
    ships[2].on_message = got.append  # an EngineCore: the daemon sends it no verdicts
    guard = GUARD.guard = Guard(GuardSettings("enforce"))
    try:
        for ship in ships:
            ship.tick()
        dying.died("outlines", "json", killer)  # what vllm-a's successor reports from the marker
        wanted = schema_hash(killer)
        deadline = time.monotonic() + 60
        while guard.verdict(wanted) is None and time.monotonic() < deadline:
            for ship in ships:
                ship.tick()
            time.sleep(0.5)
        verdict = guard.verdict(wanted)
        assert verdict is not None and (verdict.reason, verdict.source) == ("server_crash", "daemon")
        assert "an API server of this node stalled or died on it" in verdict.message(wanted)
        assert got == []
    finally:
        GUARD.guard = None
        for ship in ships:
            ship.stop()


def test_a_compile_past_the_budget_is_refused_on_every_path_by_every_guard_of_the_node(
    tmp_path: Path, daemon_factory: Any
) -> None:
    sock = tmp_path / "probe.sock"
    daemon_factory("--probe.socket", str(sock), "--no-collector.nvml", "--no-collector.vllm",
                   "--guard.compile-budget", "2s")  # fmt: skip
    slow = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "number"}]}}}
    quick = {"type": "object", "properties": {"y": {"type": "string"}}}
    compiling, api, in_process = Recorder(), Recorder(), Recorder()
    api.validates()
    ships = [shipper(sock, "vllm-c", "0", compiling), shipper(sock, "vllm-d", "api-server", api, "observe"),
             shipper(sock, "vllm-e", "0", in_process, "enforce")]  # fmt: skip
    guards = [Guard(GuardSettings("observe")), Guard(GuardSettings("enforce"))]
    ships[1].on_message = lambda doc: guards[0].load(doc.get("verdicts", []), "daemon")
    ships[2].on_message = lambda doc: guards[1].load(doc.get("verdicts", []), "daemon")
    try:
        for spec, seconds in ((slow, 3.5), (quick, 0.5), (quick, 0.000_01)):
            text = json.dumps(spec)  # vLLM's key for the request's object: what the engine compiles
            compiling.finish(compiling.begin("xgrammar"), "xgrammar", "json", text, seconds, False)
        deadline = time.monotonic() + 60
        while not all(g.screens for g in guards) and time.monotonic() < deadline:
            for ship in ships:
                ship.tick()
            time.sleep(0.5)
        for guard in guards:  # the request's object, as the API server holds it: found by its screen
            found = guard.screen(json.loads(json.dumps(slow)))
            assert found is not None and found[0] == schema_hash(json.dumps(slow))
            assert (
                "compiled in 3.5 s on an engine of this node, over the node's --guard.compile-budget of 2 s"
                in (found[1].message(found[0]))
            )
            assert guard.screen(quick) is None and len(guard) == 1
    finally:
        for ship in ships:
            ship.stop()
