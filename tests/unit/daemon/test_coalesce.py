"""A batch of one engine's held snapshots applied as one (`coalesce`) leaves the store as applying
each in order does: the real probe (Recorder + Shipper.messages) churning through more specs than it
tracks, so that rows, evictions and `other` all move between batches; the real validator and store."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter import wire, wire_check
from exporter.daemon.receiver.coalesce import coalesce
from exporter.daemon.receiver.message_check import classify
from exporter.daemon.receiver.metric_families import store_families
from exporter.daemon.receiver.store import EngineState, ProbeStore
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper, encode
from tests.support.probelink import IDENTITY


def rendered(store: ProbeStore, now: float) -> str:
    """The store's page at `now` (its recent compile seconds decay with the clock)."""

    class Collect:
        def collect(self) -> Any:
            yield from store_families(store.view(now))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collect())
    return generate_latest(registry).decode()


class Side:
    """One store fed the probe's messages: held snapshots applied at each flush, one by one or merged."""

    def __init__(self, merged: bool) -> None:
        self.store = ProbeStore(max_schemas=6)
        self.merged = merged
        self.engine: EngineState | None = None
        self.held: list[bytes] = []
        self.batches = 0

    def receive(self, line: bytes, now: float) -> None:
        if line.startswith(b'{"v":1,"kind":"snapshot"') and self.engine is not None:
            self.held.append(line)
            return
        self.flush(now)  # anything else applies what is held first, as the listener does
        result, msg = classify(line)
        assert result == "ok"
        if isinstance(msg, wire.Hello):
            self.engine = self.store.hello(msg, now)
        elif isinstance(msg, wire.SchemasMessage):
            assert self.engine is not None
            self.store.schemas(self.engine, msg, now)
        else:
            assert isinstance(msg, wire.Snapshot) and self.engine is not None
            self.store.snapshot(self.engine, msg, now)

    def flush(self, now: float) -> None:
        held, self.held = self.held, []
        assert self.engine is not None or not held
        doc = coalesce(held) if self.merged and len(held) > 1 else None
        if doc is not None:  # None for a batch with the connection's first, full snapshot
            msg = wire_check.validate(doc)
            assert isinstance(msg, wire.Snapshot) and self.engine is not None
            self.store.snapshot(self.engine, msg, now)
            self.batches += 1
            return
        for line in held:
            result, msg = classify(line)
            assert result == "ok" and isinstance(msg, wire.Snapshot) and self.engine is not None
            self.store.snapshot(self.engine, msg, now)


@pytest.mark.parametrize("seed", range(6))
def test_a_merged_batch_applies_as_its_snapshots_in_order(seed: int) -> None:
    rng = random.Random(seed)
    rec = Recorder(max_schemas=10)  # 10 tracked of 25 specs: evictions into `other` all along
    shipper = Shipper(rec, "/nonexistent", IDENTITY)
    one, merged = Side(merged=False), Side(merged=True)
    evictions = 0
    for step in range(120):
        for _ in range(rng.randrange(0, 6)):
            spec = f'{{"title":"s{rng.randrange(25)}","type":"object"}}'
            seconds = rng.choice((0.00002, 0.003, 0.04, 0.7))
            backend = rng.choice(("xgrammar", "xgrammar", "llguidance"))
            error = "invalid_schema" if rng.random() < 0.03 else None
            rec.finish(rec.begin(backend), backend, "json", spec, seconds, seconds < 0.0001, error)
        for line in shipper.messages(fresh=step == 0):
            evictions += b'"evicted":[' in line and b'"evicted":[]' not in line
            one.receive(line, float(step))
            merged.receive(line, float(step))
        if rng.random() < 0.25:  # a scrape: both apply what they hold, then the page is read
            one.flush(float(step))
            merged.flush(float(step))
            one.store.settle(float(step))
            merged.store.settle(float(step))
            assert rendered(merged.store, step) == rendered(one.store, step), step
    assert evictions > 5 and merged.batches > 5  # what the test is about happened


def snapshot(**fields: Any) -> bytes:
    return encode({"kind": "snapshot", "seq": 1, "backends": {}, **fields})


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        ([snapshot(), b"{not json\n"], "a line that is not JSON"),
        ([snapshot(), encode({"kind": "schemas", "schemas": []})], "another kind"),
        ([snapshot(), snapshot(full=True)], "a full snapshot: it names every tracked spec"),
        ([snapshot(deaths=0), snapshot(deaths=1)], "an API server's: its deaths make verdicts"),
        ([snapshot(schemas=[{"id": "7"}]), snapshot()], "a row whose id is not an integer"),
        ([snapshot(schemas=[7]), snapshot()], "a row that is not an object"),
        ([snapshot(evicted=["7"]), snapshot()], "an eviction that is not an id"),
        ([snapshot(schemas={}), snapshot()], "rows that are not a list"),
        ([snapshot(evicted=[7]), snapshot(schemas=[{"id": 7}])], "a row of a spec evicted before"),
    ],
)
def test_what_is_not_merged(lines: list[bytes], why: str) -> None:
    assert coalesce(lines) is None, why


def test_the_merge_keeps_the_last_totals_each_specs_last_row_and_every_eviction() -> None:
    first = snapshot(seq=1, schemas=[{"id": 1, "requests": 1}, {"id": 2, "requests": 1}], evicted=[5],
                     other={"xgrammar": {"requests": 1}}, cpu={"user": 1.0})  # fmt: skip
    second = snapshot(seq=2, schemas=[{"id": 2, "requests": 3}], evicted=[1, 6], other={"llguidance": {}},
                      cpu={"user": 2.0})  # fmt: skip
    doc = coalesce([first, second])
    assert doc == {
        **orjson.loads(second),
        "schemas": [{"id": 1, "requests": 1}, {"id": 2, "requests": 3}],
        "evicted": [5, 1, 6],
        "other": {"xgrammar": {"requests": 1}, "llguidance": {}},
    }
