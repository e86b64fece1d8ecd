"""What one authenticated probe may create in the daemon's store (issue 47, items 3, 5 and 10): engines
per pod and per node, backend names per engine, schema hashes checked against their texts, and label
values in their documented form. Messages are real protocol lines through the real validator
(`classify`); the victim's are the real probe's (Recorder + Shipper, tests/support/probelink)."""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter import wire
from exporter.daemon.collectors.probe import ProbeCollector, ProbeSettings
from exporter.daemon.receiver.admission import Limits
from exporter.daemon.receiver.message_check import classify
from exporter.daemon.receiver.metric_families import store_families
from exporter.daemon.receiver.schema_check import identify
from exporter.daemon.receiver.store import EngineState, ProbeStore
from exporter.probe import spec_identity
from exporter.schema.identity import spec_hashes
from tests.support.probelink import Link

ZERO_COMPILE = {"buckets": [0] * (len(wire.COMPILE_BUCKETS) + 1), "sum": 0.0}
ZERO_MASK = {"buckets": [0] * (len(wire.MASK_BUCKETS) + 1), "sum": 0.0}


def message(kind: str, **fields: Any) -> wire.Message:
    """A protocol line as a probe sends it, through the daemon's validator."""
    line = json.dumps({"v": wire.VERSION, "kind": kind, **fields}).encode() + b"\n"
    result, msg = classify(line)
    assert result == "ok" and msg is not None, line[:300]
    return msg


def hello(store: ProbeStore, pod: str, engine: str, **fields: Any) -> EngineState | None:
    msg = message(
        "hello", instance=f"{pod}-{engine}-{time.monotonic_ns()}", pid=1, pod=pod, engine=engine,
        engine_kind="generic", **fields,
    )  # fmt: skip
    assert isinstance(msg, wire.Hello)
    return store.hello(msg, 1.0)


def backend_totals() -> dict[str, Any]:
    return {"requests": 1, "hits": 0, "compile": ZERO_COMPILE, "wait": ZERO_COMPILE, "mask": ZERO_MASK}


def row(**fields: Any) -> dict[str, Any]:
    return {"requests": 1, "hits": 0, "buckets": [1, 0, 0, 0, 0, 0, 0], "sum": 0.0005, **fields}


def snapshot(store: ProbeStore, state: EngineState, seq: int, **fields: Any) -> None:
    msg = message("snapshot", seq=seq, full=seq == 0, **{"backends": {}, **fields})
    assert isinstance(msg, wire.Snapshot)
    store.snapshot(state, msg, 1.0 + seq)


def schemas(store: ProbeStore, engine: EngineState, *items: dict[str, Any]) -> None:
    msg = message("schemas", schemas=list(items))
    assert isinstance(msg, wire.SchemasMessage)
    store.schemas(engine, msg, 1.0)


def rendered(store: ProbeStore) -> str:
    class Collect:
        def collect(self) -> Any:
            yield from store_families(store.view())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collect())
    return generate_latest(registry).decode()


def samples(text: str) -> list[Any]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def test_a_flood_of_hellos_is_bounded_per_pod_and_per_node_and_refusals_are_counted() -> None:
    """500 hellos from one pod, each engine naming 16 made-up backends (the issue: /metrics grew to
    82 MiB): the pod keeps 16 engines, the node 64, and a well-behaved pod still gets in."""
    store = ProbeStore(limits=Limits(max_engines=64, max_engines_per_pod=16))
    made_up = {f"made-up-{i}": backend_totals() for i in range(16)}
    for i in range(500):
        engine = hello(store, "attacker", str(i))
        if engine is not None:
            snapshot(store, engine, 0, backends=made_up)
    assert sum(e.hello.pod == "attacker" for e in store.engines.values()) == 16
    for p in range(100):  # other pods, one engine each: the node's bound
        hello(store, f"pod-{p}", "0")
    assert len(store.engines) == 64
    view = store.view()
    assert view.refused["engines_per_pod"] == 484 and view.refused["engines_per_node"] == 100 - 48
    text = rendered(store)
    assert 'guided_decoding_probe_refused_total{reason="engines_per_pod"} 484.0' in text
    attacker = [s for s in samples(text) if s.labels.get("pod") == "attacker"]
    assert len({s.labels["engine"] for s in attacker}) == 16
    assert len({s.labels["backend"] for s in attacker if "backend" in s.labels}) == 8  # first 8 names
    assert len(attacker) <= 16 * 8 * 100  # about 90 series per engine and backend


def test_a_disconnected_engine_makes_room_and_a_connected_one_never_does() -> None:
    store = ProbeStore(limits=Limits(max_engines=4, max_engines_per_pod=2))
    first = hello(store, "a", "0")
    assert first is not None and hello(store, "a", "1") is not None
    assert hello(store, "a", "2") is None  # both connected: refused
    store.disconnected(first)
    assert hello(store, "a", "2") is not None  # the silent one made room
    assert {e.hello.engine for e in store.engines.values()} == {"1", "2"}
    assert hello(store, "b", "0") is not None and hello(store, "c", "0") is not None
    assert hello(store, "d", "0") is None  # the node is full of connected engines
    assert store.view().refused == {
        "engines_per_pod": 1, "engines_per_node": 1, "engine_taken": 0, "backends_per_engine": 0,
        "schema_hash_mismatch": 0,
    }  # fmt: skip


def test_a_pod_naming_another_pods_instance_is_another_engine() -> None:
    """An instance id is the probe's word: a reconnect is only one from the same pod."""
    store = ProbeStore()
    victim = message("hello", instance="i-1", pid=1, pod="victim", engine="0", engine_kind="generic")
    thief = message("hello", instance="i-1", pid=2, pod="thief", engine="0", engine_kind="generic")
    assert isinstance(victim, wire.Hello) and isinstance(thief, wire.Hello)
    mine = store.hello(victim, 1.0)
    assert store.hello(thief, 2.0) is not mine
    assert mine is not None and mine.hello.pod == "victim"
    assert {e.hello.pod for e in store.engines.values()} == {"victim", "thief"}


def test_another_peer_cannot_end_a_connected_engine_by_naming_it() -> None:
    """A hello naming a connected engine (namespace, pod, engine) from another peer is refused and
    counted, never taken for a restart; the same peer's new instance is a restart; once the engine
    is disconnected, a new instance from any peer takes its name."""
    store = ProbeStore()
    first = message("hello", instance="i-1", pid=1, pod="vllm-0", engine="0", engine_kind="generic")
    squat = message("hello", instance="i-2", pid=2, pod="vllm-0", engine="0", engine_kind="generic")
    again = message("hello", instance="i-3", pid=3, pod="vllm-0", engine="0", engine_kind="generic")
    assert isinstance(first, wire.Hello) and isinstance(squat, wire.Hello) and isinstance(again, wire.Hello)
    mine = store.hello(first, 1.0, peer=("uid", "1000"))
    assert mine is not None
    assert store.hello(squat, 2.0, peer=("uid", "2000")) is None
    assert store.view().refused["engine_taken"] == 1
    assert [e.instance for e in store.engines.values()] == ["i-1"]
    restarted = store.hello(again, 3.0, peer=("uid", "1000"))
    assert restarted is not None and [e.instance for e in store.engines.values()] == ["i-3"]
    restarted.connected = False
    taken = store.hello(squat, 4.0, peer=("uid", "2000"))
    assert taken is not None and [e.instance for e in store.engines.values()] == ["i-2"]


def test_made_up_backends_in_specs_and_snapshots_are_bounded_per_engine() -> None:
    """Every dimension of a snapshot that becomes a label (backends, `other`, validation, routes,
    caches, spec metadata) draws on one budget of 8 backend names per engine."""
    store = ProbeStore(max_schemas=5)
    engine = hello(store, "vllm-0", "0")
    assert engine is not None
    items = []
    for i in range(40):
        text = json.dumps({"type": "object", "properties": {"n": {"const": i}}})
        schema_hash, shape_hash = spec_hashes("json", text)
        items.append({"id": i + 1, "hash": schema_hash, "shape": shape_hash, "kind": "json",
                      "backend": f"spec-backend-{i}", "text": text})  # fmt: skip
    schemas(store, engine, *items)
    for seq in range(10):
        names = [f"b{seq}-{i}" for i in range(16)]
        snapshot(
            store, engine, seq,
            backends={n: backend_totals() for n in names},
            schemas=[row(id=i + 1) for i in range(40)],
            other={n: row() for n in names},
            validation={n: ZERO_COMPILE for n in names},
            routes=[{"requested": "auto", "resolved": n, "backend": n, "outcome": "compiled", "requests": 1}
                    for n in names],
            engine={"caches": [{"backend": n, "compiler": "c", "bytes": 1} for n in names],
                    "backend": names[-1]},
        )  # fmt: skip
        store.view()
    text = rendered(store)
    named = {s.labels[k] for s in samples(text) for k in ("backend", "resolved") if k in s.labels}
    assert len(named) <= 8, sorted(named)
    assert len(store.engines[engine.slot].specs) == 8  # the specs of the first 8 backend names
    refused = store.view().refused["backends_per_engine"]
    assert refused >= 32 + 9 * 16 * 5
    assert f'guided_decoding_probe_refused_total{{reason="backends_per_engine"}} {float(refused)}' in text


def test_a_schema_hash_is_recomputed_and_a_forged_one_never_reaches_the_registry() -> None:
    """Another tenant reports the victim's hash first, with its own slow text and title: refused and
    counted; /schemas/registry (what `gdx warm` compiles), schema_info and findings stay the victim's."""
    collector = ProbeCollector(ProbeSettings(socket="", max_schemas=10))
    store = collector.store
    victim_text = '{"title":"Invoice","type":"object","properties":{"id":{"type":"string"}}}'
    victim_hash, victim_shape = spec_hashes("json", victim_text)
    forged = '{"title":"Evil","type":"object","properties":{"x":{"pattern":"(a+)+$","type":"string"}}}'
    attacker = hello(store, "attacker", "0")
    assert attacker is not None
    schemas(store, attacker, {"id": 1, "hash": victim_hash, "shape": victim_shape, "kind": "json",
                              "backend": "xgrammar", "title": "Evil", "text": forged})  # fmt: skip
    snapshot(store, attacker, 0, schemas=[row(id=1, sum=5.0, buckets=[0, 0, 0, 0, 0, 1, 0])])
    link = Link(store, pod="victim")
    link.compile(victim_text, 0.05)
    link.ship(fresh=True)
    collector.analysis.run(time.monotonic() + 10)
    store.settle(time.monotonic())
    (entry,) = collector.registry(10)
    assert entry.schema_hash == victim_hash and entry.text == victim_text
    view = store.view()
    assert view.info[victim_hash].title == "Invoice"
    assert view.refused["schema_hash_mismatch"] == 1
    assert all("Evil" not in s.title for s in collector.schemas_view().schemas)
    assert "Evil" not in rendered(store)


def test_an_unverifiable_claim_never_names_a_schema() -> None:
    """A spec whose text was not sent (over the probe's limit) cannot be checked: it is counted, but
    its claimed title is not shown, and a checked report of the same hash replaces what it said."""
    store = ProbeStore()
    text = '{"title":"Receipt","type":"object"}'
    schema_hash, shape_hash = spec_hashes("json", text)
    attacker = hello(store, "attacker", "0")
    assert attacker is not None
    claim = {"id": 1, "hash": schema_hash, "shape": "0" * 12, "kind": "regex", "backend": "outlines",
             "title": "Pwned", "text": None, "truncated": True}  # fmt: skip
    schemas(store, attacker, claim)
    snapshot(store, attacker, 0, schemas=[row(id=1)])
    assert store.view().info[schema_hash].title == ""
    victim = hello(store, "victim", "0")
    assert victim is not None
    schemas(store, victim, {"id": 7, "hash": schema_hash, "shape": shape_hash, "kind": "json",
                            "backend": "xgrammar", "title": "Receipt", "text": text})  # fmt: skip
    snapshot(store, victim, 0, schemas=[row(id=7)])
    info = store.view().info[schema_hash]
    said = (info.title, info.shape_hash, info.kind, info.backend)
    assert said == ("Receipt", shape_hash, "json", "xgrammar")


HOSTILE = 'Inv"oice\n\u202e' + "}" * 300 + "x" * 700  # 1,001 characters: the protocol's limit is 1,024
LABEL = re.compile(r"[A-Za-z0-9_.#-]{0,64}")  # the documented form; `#` masks a volatile word


def test_a_hostile_title_and_versions_become_bounded_safe_labels() -> None:
    store = ProbeStore()
    engine = hello(
        store, "vllm-0", "0", engine_version='0.32"\n\u202e' + "9" * 50, probe_version="x" * 64,
        backends={"xgrammar": 'v"1\n'},
    )  # fmt: skip
    assert engine is not None
    text = json.dumps({"title": HOSTILE, "type": "object"})
    schema_hash, shape_hash = spec_hashes("json", text)
    schemas(store, engine, {"id": 1, "hash": schema_hash, "shape": shape_hash, "kind": "json",
                            "backend": "xgrammar", "title": HOSTILE, "text": text})  # fmt: skip
    snapshot(store, engine, 0, backends={"xgrammar": backend_totals()}, schemas=[row(id=1)])
    (info,) = [s for s in samples(rendered(store)) if s.name == "guided_decoding_schema_info"]
    assert info.labels["title"] == info.labels["family"] == ""  # the family's title, once analysed
    store.analysis.run(math.inf)
    text_page = rendered(store)
    (info,) = [s for s in samples(text_page) if s.name == "guided_decoding_schema_info"]
    assert LABEL.fullmatch(info.labels["title"]) and info.labels["title"].startswith("Inv_oice")
    (probe,) = [s for s in samples(text_page) if s.name == "guided_decoding_probe_info"]
    for name in ("engine_version", "backend_version", "probe_version"):
        assert re.fullmatch(r"[A-Za-z0-9_.+!-]{0,64}", probe.labels[name]), probe.labels
    assert "\u202e" not in text_page and '\\"' not in text_page
    sanitised = store.view().sanitised
    assert sanitised == {"title": 1, "engine_version": 1, "probe_version": 0, "backend_version": 1}


def test_the_daemon_identifies_a_spec_exactly_as_the_probe_does() -> None:
    for kind, text in [
        ("json", '{"b":1,"a":{"title":"Tool Call!","enum":[1,2]}}'),
        ("json", '{"title":"Answer_2026-01-10T00_00_58Z","type":"object"}'),
        ("json", "not json"),
        ("json_object", "[1, 2]"),
        ("regex", "[a-z]+"),
        ("structural_tag", '{"b":1,"a":2}'),
        ("json", "[" * 5000 + "]" * 5000),
    ]:
        mine, probes = identify(kind, text), spec_identity.identify(kind, text)
        assert (mine.schema_hash, mine.shape_hash, mine.title) == (
            probes.schema_hash, probes.shape_hash, probes.title,
        ), (kind, text[:40])  # fmt: skip
