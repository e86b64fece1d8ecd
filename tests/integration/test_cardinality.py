"""Cardinality attack and literal leaks, through the real probe code and the real daemon store:
a flood of distinct schemas keeps /metrics under its series cap, memory bounded and totals
conserved through `other`; and no literal of any schema ever reaches the rendered metrics."""

from __future__ import annotations

import logging
import os
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from exporter.daemon.receiver.analysis import MAX_PENDING
from exporter.daemon.receiver.listener import classify
from exporter.daemon.receiver.metric_families import store_families
from exporter.daemon.receiver.store import ProbeStore
from tests.support.probelink import Link

FLOOD = int(os.environ.get("GDX_FLOOD_SCHEMAS", "100000"))  # 1,000,000 in the long mode


class StoreCollector:
    def __init__(self, store: ProbeStore) -> None:
        self.store = store

    def collect(self) -> Any:
        yield from store_families(self.store.view())


def render(store: ProbeStore) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))  # type: ignore[arg-type]
    return generate_latest(registry).decode()


@pytest.mark.slow
@pytest.mark.timeout(300)  # about 35 s alone on a 2-core machine; twice that when it is busy
def test_a_flood_of_distinct_schemas_stays_bounded() -> None:
    store = ProbeStore(max_schemas=50)
    links = [Link(store, max_schemas=500, pod=f"vllm-{i}") for i in range(4)]
    tracemalloc.start()
    peak_series = 0
    last: dict[Any, int] = {}  # the last value a scraper saw of every series ever exposed
    for n in range(FLOOD):
        link = links[n % 4]
        seconds = 0.002 * (1 + n / 20_000) + (n % 7) * 0.001  # later schemas cost more: the top set churns
        link.compile(f'{{"type":"object","properties":{{"id":{{"const":"{n}"}}}}}}', seconds)
        if n % 5000 == 4999:
            for each in links:
                each.ship()
            series = store.view().series
            peak_series = max(peak_series, len(series))
            last.update((k, a.requests) for k, a in series.items())
    for each in links:
        each.ship()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    view = store.view()
    last.update((k, a.requests) for k, a in view.series.items())
    schema_hashes = {k.schema_hash for k in view.series}
    assert len(store.exposed) <= 50 and len(store.lingering) <= 50
    assert len(schema_hashes - {"other"}) <= 100  # 50 active, 50 demoted showing their final values
    assert peak_series <= 4 * 101
    assert store.evicted_total > 0
    assert sum(last.values()) == FLOOD  # conserved exactly: every compile is in some series' last value
    engine_total = sum(link.rec.snapshot(full=True)["backends"]["xgrammar"]["requests"] for link in links)
    assert engine_total == FLOOD
    assert peak < 150 * 2**20, peak  # probes (4 x 500 specs) and store together
    assert len(store.analysis.pending) <= MAX_PENDING  # analysis starved (no scrape): the queue is capped
    assert store.analysis.skipped > 0  # and what did not fit is counted
    print(f"flood of {FLOOD} schemas: peak traced {peak / 2**20:.1f} MiB, {store.evicted_total} demotions")
    text = render(store)
    assert text.count("guided_decoding_schema_requests_total{") <= 4 * 101


literal = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ", min_size=12, max_size=16).map(lambda s: "LIT" + s)


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter("%(name)s %(message)s").format(record))


@settings(max_examples=int(os.environ.get("GDX_FUZZ_EXAMPLES", "10000")) // 50, deadline=None,
          suppress_health_check=list(HealthCheck), database=None)  # fmt: skip
@given(st.lists(literal, min_size=1, max_size=5), literal, literal, literal)
def test_no_literal_reaches_the_metrics_or_the_logs(
    members: list[str], description: str, default: str, const: str
) -> None:
    """Whatever sits in enums, consts, descriptions, defaults and examples, neither the rendered
    /metrics nor any log line (every logger, at debug) of the probe and the daemon contains it: two
    variants of the schema, one unparsable text and a broken probe message carry the values through
    the probe, the wire, the store, the schema analysis and the classifier."""
    import json

    captured = Captured()
    root = logging.getLogger()
    level = root.level
    root.addHandler(captured)
    root.setLevel(logging.DEBUG)
    try:
        store = ProbeStore()
        link = Link(store)
        for variant in (members, [*members, "v2"]):
            schema = {
                "type": "object",
                "properties": {
                    "x": {"enum": variant, "description": description, "default": default},
                    "y": {"const": const, "examples": [const, default]},
                },
            }
            link.compile(json.dumps(schema), 0.01)
        link.compile('{"enum": ["' + members[0] + '", ', 0.01)  # not JSON
        link.ship(fresh=True)
        store.analysis.run(deadline=float("inf"))
        broken = b'{"v":1,"kind":"schemas","schemas":[{"text":"' + const.encode() + b'"}]}\n'
        assert classify(broken)[1] is None
        text = render(store)
    finally:
        root.removeHandler(captured)
        root.setLevel(level)
    assert "guided_decoding_schema_requests_total" in text
    logs = "\n".join(captured.lines)
    assert "probe connected: pod=vllm-0" in logs  # the capture sees the daemon's lines
    for value in (*members, description, default, const):
        assert value not in text
        assert value not in logs
