"""The daemon's view of the probes: counters that never jump, totals that add up, bounded series.

Messages are produced by the real probe code (Recorder + Shipper.messages) and checked by the real
validator; only the socket between them is left out here (tests/integration/test_probe_engines.py has it)."""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Any

import pytest

from exporter import wire
from exporter.daemon.receiver.message_check import classify
from exporter.daemon.receiver.metric_families import analysis_families
from exporter.daemon.receiver.store import OTHER, ProbeStore
from exporter.probe.shipper import Shipper
from tests.support.probelink import IDENTITY, Link


def series_totals(store: ProbeStore) -> tuple[int, int, int]:
    series = store.view().series.values()
    return sum(a.requests for a in series), sum(a.hits for a in series), sum(sum(a.buckets) for a in series)


def assert_spec_index(store: ProbeStore) -> None:
    """The per-engine count of specs by hash that the scrape reads instead of walking every spec."""
    for engine in store.engines.values():
        assert engine.per_hash == dict(Counter(info.schema_hash for info in engine.specs.values()))


def engine_totals(link: Link) -> tuple[int, int]:
    b = link.rec.snapshot(full=True)["backends"]["xgrammar"]
    return b["requests"], b["hits"]


def test_top_schemas_by_compile_seconds_and_other_adds_up() -> None:
    store = ProbeStore(max_schemas=3)
    link = Link(store)
    for i in range(10):
        link.compile(f'{{"n":{i}}}', 0.001 * (i + 1))
    link.ship(fresh=True)
    view = store.view()
    exposed = {k.schema_hash for k in view.series}
    assert len(exposed) == 4 and OTHER in exposed  # 3 schemas + other
    slowest = {m.schema_hash for m in view.info.values()}
    assert len(slowest) == 3
    requests, _, observations = series_totals(store)
    assert requests == observations == 10
    assert view.series[("", "vllm-0", "0", "xgrammar", OTHER)].requests == 7


def test_counters_never_go_backwards_while_the_top_set_churns() -> None:
    """Every increment lands in exactly one series, and a series that leaves and comes back resumes
    where it was: the last value seen of every series ever exposed adds up to the engine's totals,
    and no series ever decreases, whichever schema wins a tie (set order varies with the hash seed)."""
    store = ProbeStore(max_schemas=5, linger=3)
    link = Link(store, max_schemas=40)
    rng = random.Random(7)
    last: dict[Any, tuple[int, int]] = {}
    for _ in range(60):
        for _ in range(20):
            n = rng.randrange(60)
            link.compile(f'{{"n":{n}}}', rng.choice((0.00001, 0.002, 0.05)), hit=rng.random() < 0.5)
        link.ship()
        current = {k: (a.requests, a.hits) for k, a in store.view().series.items()}
        for key, (requests, hits) in current.items():
            before = last.get(key, (0, 0))
            assert requests >= before[0] and hits >= before[1], key
        last.update(current)
        assert len(store.exposed) <= 5 and len(store.lingering) <= 5
        assert len({k.schema_hash for k in current}) <= 11  # active, lingering, other
        assert (sum(v[0] for v in last.values()), sum(v[1] for v in last.values())) == engine_totals(link)
    assert store.evicted_total > 0 and link.rec.counters["evicted"] > 0


def test_snapshots_between_two_reads_are_one_increment_per_spec_and_exact() -> None:
    """Snapshots only record each changed row; a read takes them, one increment per changed spec
    however many snapshots moved it, and the probe's evictions in between (rows folded into `other`)
    are taken off `other` once: the totals are the engine's, and the same as reading after each."""
    coalesced, each = ProbeStore(max_schemas=5), ProbeStore(max_schemas=5)
    links = [Link(coalesced, max_schemas=8), Link(each, max_schemas=8)]
    rng = random.Random(3)
    for rnd in range(12):
        work = [
            (rng.randrange(30), rng.choice((0.00001, 0.002, 0.05)), rng.random() < 0.3) for _ in range(25)
        ]
        for link in links:
            for n, seconds, hit in work:
                link.compile(f'{{"n":{n}}}', seconds, hit=hit)
            link.ship(fresh=rnd == 0)
        each.view()
        assert_spec_index(coalesced)
        (engine,) = coalesced.engines.values()
        assert len(engine.last_rows) <= 8 or rnd == 0  # nothing attributed yet: the rows wait
    (engine,) = coalesced.engines.values()
    assert engine.pending and engine.pending_evicted  # 11 snapshots' rows and evictions not taken yet
    specs = len(engine.pending)
    attributed = []
    real = coalesced._attribute
    coalesced._attribute = lambda key, increment, now: attributed.append(key) or real(key, increment, now)  # type: ignore[method-assign]
    assert series_totals(coalesced) == series_totals(each)
    assert (series_totals(coalesced)[0], series_totals(coalesced)[1]) == engine_totals(links[0])
    assert specs <= len(attributed) <= specs + 1  # one increment per changed spec (and `other`)
    assert not engine.pending and not engine.pending_evicted
    assert links[0].rec.counters["evicted"] > 0


def test_a_burst_of_new_specs_between_two_ships_stays_exact() -> None:
    """Many more new specs between two ships than the probe tracks: every eviction of a spec the daemon
    knew reaches it (a cap on the probe's list dropped some, and the daemon counted their last rows
    again in `other`: 38 requests for the engine's 34), and every tracked spec's metadata does."""
    store = ProbeStore(max_schemas=50)
    link = Link(store, max_schemas=4)
    n = 0
    for rnd, burst in enumerate((4, 30, 3, 40, 2)):
        for _ in range(burst):
            link.compile(f'{{"n":{n}}}', 0.002)
            n += 1
        link.ship(fresh=rnd == 0)
        assert (series_totals(store)[0], series_totals(store)[1]) == engine_totals(link), rnd
    assert link.rec.counters["evicted"] == n - 4


def test_rows_nobody_reads_are_bounded_and_still_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no scrape at all, an engine churning through new schemas holds at most MAX_PENDING rows and
    evictions: beyond that they are attributed at once."""
    from exporter.daemon.receiver import store as store_module

    monkeypatch.setattr(store_module, "MAX_PENDING", 20)
    store = ProbeStore(max_schemas=5)
    link = Link(store, max_schemas=6)
    most = 0
    for i in range(40):
        for j in range(3):
            link.compile(f'{{"n":{i * 3 + j}}}', 0.001)
        link.ship(fresh=i == 0)
        (engine,) = store.engines.values()
        most = max(most, len(engine.pending) + len(engine.pending_evicted))
    assert 0 < most <= 20
    assert (series_totals(store)[0], series_totals(store)[1]) == engine_totals(link) == (120, 0)


def test_a_reconnect_with_rows_pending_counts_them_once() -> None:
    store = ProbeStore()
    link = Link(store, max_schemas=4)
    for i in range(6):
        link.compile(f'{{"n":{i}}}', 0.001)
        link.ship(fresh=i == 0)  # the later ones evict: rows and evictions pending
    link.compile('{"n":5}', 0.001)
    link.ship(fresh=True)  # the probe reconnected: its full snapshot comes after what is pending
    assert_spec_index(store)
    assert (series_totals(store)[0], series_totals(store)[1]) == engine_totals(link) == (7, 0)


def test_a_schema_demoted_and_back_between_two_scrapes_loses_nothing() -> None:
    """The scraper sees the series before and after only: it must not look continuous while hiding
    the increments of the series that was dropped in between."""
    store = ProbeStore(max_schemas=1)
    link = Link(store)
    link.compile("A", 0.01)
    link.ship(fresh=True)
    (key,) = store.view().series
    assert store.view().series[key].requests == 1
    link.compile("B", 1.0)  # B outscores A: A is demoted
    link.ship()
    assert store.evicted_total == 1  # read between the scrapes (rows are attributed on each read)
    link.compile("A", 10.0)
    link.compile("A", 10.0)  # A outscores B again: it resumes at 1, not restarts at 0
    link.ship()
    assert store.view().series[key].requests == 3
    assert store.evicted_total == 2
    (b,) = store.lingering  # B, demoted in turn, still shows its final value
    assert store.view().series[(*key[:4], b)].requests == 1


def hash_of(store: ProbeStore, title: str) -> str:
    (h,) = [h for h, m in store.info.items() if m.title == title]
    return h


def test_a_demoted_schema_shows_its_final_value_until_the_linger_ends() -> None:
    """Prometheus only sees what it scrapes: a schema demoted right after its last increments keeps
    that final value on /metrics for the linger, so no scraper misses it; then it goes stale."""
    store = ProbeStore(max_schemas=1, linger=5)
    link = Link(store)
    link.compile('{"title":"A"}', 0.01)
    link.ship(fresh=True)
    link.compile('{"title":"A"}', 0.01)
    link.ship()  # an increment no scrape saw (no view() in between)...
    link.compile('{"title":"B"}', 1.0)
    link.ship()  # ...and A is demoted
    a = ("", "vllm-0", "0", "xgrammar", hash_of(store, "A"))
    series = store.view().series
    assert series[a].requests == 2 and a[4] not in store.exposed
    assert series_totals(store)[0] == engine_totals(link)[0] == 3
    link.compile('{"title":"A"}', 0.01)  # while A lingers its increments go to other, frozen at 2
    link.ship()
    assert store.view().series[a].requests == 2
    assert store.view().series[(*a[:4], OTHER)].requests == 1
    for _ in range(5):
        link.ship()
    assert a not in store.view().series  # the linger ended: stale in Prometheus


def test_daemon_restart_restores_cumulative_values() -> None:
    first = ProbeStore()
    link = Link(first)
    link.compile('{"a":1}', 0.02)
    for _ in range(9):
        link.compile('{"a":1}', 0.00001, hit=True)
    link.ship(fresh=True)
    link.compile('{"a":1}', 0.00001, hit=True)
    # the daemon dies; a new one starts with nothing and the probe reconnects
    link.store = ProbeStore()
    link.ship(fresh=True)
    (acc,) = link.store.view().series.values()
    assert (acc.requests, acc.hits) == (11, 10)


def test_reconnecting_probe_is_not_counted_twice() -> None:
    store = ProbeStore()
    link = Link(store)
    link.compile("A", 0.01)
    link.ship(fresh=True)
    link.compile("A", 0.00001, hit=True)
    link.ship(fresh=True)  # same process, new connection: full snapshot again
    link.ship(fresh=True)
    assert series_totals(store)[:2] == (2, 1)


def test_probe_evictions_while_disconnected_are_conserved() -> None:
    store = ProbeStore()
    link = Link(store, max_schemas=3)
    for i in range(3):
        link.compile(f"s{i}", 0.01)
    link.ship(fresh=True)
    for i in range(3, 12):  # the socket is down: nothing shipped, s0..s8 evicted into other
        link.compile(f"s{i}", 0.01)
    link.compile("s0", 0.01)
    link.ship(fresh=True)
    assert series_totals(store)[0] == engine_totals(link)[0] == 13


def test_engine_restart_resets_its_series_and_ttl_drops_silent_engines() -> None:
    store = ProbeStore(engine_ttl=30)
    old = Link(store)
    old.compile("A", 0.01)
    old.compile("A", 0.00001, hit=True)
    old.ship(fresh=True)
    new = Link(store)  # same pod and engine, new process
    new.now = old.now
    new.compile("A", 0.01)
    new.ship(fresh=True)
    assert series_totals(store)[:2] == (1, 0)
    assert len(store.view().engines) == 1
    other_pod = Link(store, pod="vllm-1")
    other_pod.now = 100
    other_pod.compile("B", 0.01)
    other_pod.ship(fresh=True)
    store.expire(now=101)
    view = store.view()
    assert [engine.hello.pod for engine in view.engines] == ["vllm-1"]
    assert {k.pod for k in view.series} == {"vllm-1"}


def test_two_live_processes_under_one_name_are_logged_not_taken_for_a_restart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = ProbeStore()
    first = Link(store, engine="api-server")
    first.ship(fresh=True)
    assert first.engine is not None
    second = Link(store, engine="api-server")
    second.shipper.hello = {**second.shipper.hello, "pid": first.shipper.hello["pid"] + 1}
    with caplog.at_level(logging.INFO, "gdx"):
        second.ship(fresh=True)
    assert "two connected probes claim pod=vllm-0 engine=api-server" in caplog.text
    assert "restarted" not in caplog.text
    store.disconnected(second.engine)  # type: ignore[arg-type]
    caplog.clear()
    with caplog.at_level(logging.INFO, "gdx"):
        Link(store, engine="api-server").ship(fresh=True)  # after the newer one's connection closed
    assert "restarted (new probe instance)" in caplog.text and "two connected" not in caplog.text


def test_rows_before_their_metadata_are_counted_once_it_arrives() -> None:
    store = ProbeStore()
    link = Link(store)
    link.compile("A", 0.01)
    link.ship(fresh=True)
    link.compile("B", 0.01)
    lines = link.shipper.messages(False)
    schemas_line, snapshot_line = lines
    _, snap = classify(snapshot_line)
    assert isinstance(snap, wire.Snapshot) and link.engine is not None
    store.snapshot(link.engine, snap, 5)  # the snapshot overtakes the metadata
    assert series_totals(store)[0] == 1
    _, meta = classify(schemas_line)
    assert isinstance(meta, wire.SchemasMessage)
    store.schemas(link.engine, meta, 5)
    link.ship()
    assert series_totals(store)[0] == 1  # B unchanged since: not shipped again...
    link.compile("B", 0.00001, hit=True)
    link.ship()
    assert series_totals(store)[:2] == (3, 1)  # ...until it changes, then counted from zero


def test_two_serialisations_of_one_schema_are_a_finding() -> None:
    store = ProbeStore()
    link = Link(store)
    link.compile('{"type":"string","maxLength":5}', 0.01)
    link.compile('{"maxLength":5,"type":"string"}', 0.01)  # the same schema, serialised differently
    link.ship(fresh=True)
    store.analysis.run(deadline=float("inf"))
    view = store.view()
    families = {f.name: f for f in analysis_families(view.analysis, view.serialisations)}
    samples = {(s.labels["rule"], s.value) for s in families["guided_decoding_schema_lint_findings"].samples}
    assert ("unstable_serialization", 2) in samples


def test_a_spec_is_linted_with_the_tables_of_the_engine_that_reported_it() -> None:
    """xgrammar 0.2.8 fails to compile a pattern repeat past 128 (0.2.9 does not): an engine that
    reports 0.2.8 gets the error, one that reports 0.2.9 or nothing does not."""
    spec = '{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{8,500}$"}}}'
    refused = {}
    for reported in ({"xgrammar": "0.2.8"}, {"xgrammar": "0.2.9"}, {}):
        store = ProbeStore()
        link = Link(store)
        link.shipper = Shipper(link.rec, "/nonexistent", {**IDENTITY, "backends": reported})
        link.compile(spec, 0.01)
        link.ship(fresh=True)
        store.analysis.run(deadline=float("inf"))
        (counts,) = store.view().analysis.findings.values()
        refused[reported.get("xgrammar", "")] = counts.get(("xgrammar_refused", "error"), 0)
    assert refused == {"0.2.8": 1, "0.2.9": 0, "": 0}


def test_one_pod_name_in_two_namespaces_is_two_engines_and_labels_say_which() -> None:
    from exporter.daemon.receiver.metric_families import store_families

    store = ProbeStore(max_schemas=5)
    links = [Link(store, namespace="team-a"), Link(store, namespace="team-b"), Link(store)]
    for n, link in enumerate(links):
        for _ in range(n + 1):
            link.compile('{"type":"object"}', 0.002)
        link.ship(fresh=True)
    assert len(store.engines) == 3  # none mistaken for a restart of another
    families = {f.name: f for f in store_families(store.view())}
    requests = {
        (s.labels.get("namespace"), s.labels["pod"]): s.value
        for s in families["guided_decoding_compile_requests"].samples
    }
    assert requests == {("team-a", "vllm-0"): 1, ("team-b", "vllm-0"): 2, (None, "vllm-0"): 3}
    per_schema = families["guided_decoding_schema_requests"].samples
    assert sorted((s.labels.get("namespace", ""), s.value) for s in per_schema) == [
        ("", 3),
        ("team-a", 1),
        ("team-b", 2),
    ]
    labelled = [s for s in per_schema if "namespace" in s.labels]
    assert all(list(s.labels)[:3] == ["namespace", "pod", "engine"] for s in labelled)


def test_discovery_names_the_namespace_of_a_probe_that_does_not() -> None:
    """A probe without GDX_POD_NAMESPACE: its series take the namespace discovery lists for its pod name
    (so they join target_up and the passed-through series); a probe that says its own keeps it."""
    from exporter.daemon.receiver.metric_families import store_families
    from exporter.daemon.receiver.store import with_namespaces

    store = ProbeStore(max_schemas=5)
    silent, named = Link(store, pod="vllm-0"), Link(store, pod="vllm-1", namespace="team-b")
    for link in (silent, named):
        link.compile('{"type":"object"}', 0.002)
        link.ship(fresh=True)
    view = with_namespaces(store.view(), {"vllm-0": "team-a", "vllm-1": "elsewhere"})
    families = {f.name: f for f in store_families(view)}
    for name in (
        "guided_decoding_compile_requests",
        "guided_decoding_schema_requests",
        "guided_decoding_probe",
    ):
        pods = {(s.labels["namespace"], s.labels["pod"]) for s in families[name].samples}
        assert pods == {("team-a", "vllm-0"), ("team-b", "vllm-1")}, name
    assert with_namespaces(store.view(), {}).series == store.view().series  # nothing known: unchanged


MULTIPLE_OF = '{"type":"object","properties":{"qty":{"type":"integer","multipleOf":5}}}'
PLAIN = '{"type":"object","properties":{"sku":{"type":"string"}}}'


def test_backend_routing_per_engine_schema_and_family() -> None:
    """vLLM's router outcomes: per engine by (asked, resolved, backend, outcome); per schema and family
    the requests refused or misrouted; the schema's backend_mismatch finding names the keyword, and
    counters keep their totals when the refused schema is not exposed on its own."""
    from exporter.daemon.receiver.metric_families import store_families

    store = ProbeStore(max_schemas=5)
    link = Link(store)
    for _ in range(3):
        link.rec.route("auto", "xgrammar", "xgrammar", "compiled")
        link.compile(PLAIN, 0.002)
    for _ in range(2):
        link.rec.route("auto", "llguidance", "xgrammar", "rejected", "json", MULTIPLE_OF)
    link.rec.facts.backend = "xgrammar"
    link.ship(fresh=True)
    store.analysis.run(deadline=float("inf"))
    link.ship()
    store.settle(link.now)
    view = store.view(link.now)
    families = {f.name: f for f in store_families(view)}
    routed = {
        (s.labels["requested"], s.labels["resolved"], s.labels["backend"], s.labels["outcome"]): s.value
        for s in families["guided_decoding_routed_requests"].samples
    }
    assert routed == {
        ("auto", "xgrammar", "xgrammar", "compiled"): 3,
        ("auto", "llguidance", "xgrammar", "rejected"): 2,
        # zeros for the mismatches it has not met, so the first one moves increase()
        ("auto", "llguidance", "xgrammar", "other_backend"): 0,
        ("auto", "outlines", "xgrammar", "rejected"): 0,
        ("auto", "outlines", "xgrammar", "other_backend"): 0,
    }
    (backend,) = families["guided_decoding_engine_backend"].samples
    assert backend.labels == {"pod": "vllm-0", "engine": "0", "backend": "xgrammar"}
    from exporter.schema.identity import schema_hash

    refused_hash, plain_hash = schema_hash(MULTIPLE_OF), schema_hash(PLAIN)
    per_schema = {
        (s.labels["schema_hash"], s.labels["outcome"]): s.value
        for s in families["guided_decoding_schema_backend_mismatches"].samples
    }
    assert per_schema == {(refused_hash, "rejected"): 2, (refused_hash, "other_backend"): 0}
    per_family = {
        s.labels["outcome"]: s.value for s in families["guided_decoding_family_backend_mismatches"].samples
    }
    assert per_family == {"rejected": 2, "other_backend": 0}
    findings = {
        (s.labels["schema_hash"], s.labels["rule"]): s.value
        for s in families["guided_decoding_schema_lint_findings"].samples
    }
    assert findings[(refused_hash, "backend_mismatch")] == 1  # one place: multipleOf at /properties/qty
    assert (plain_hash, "backend_mismatch") not in findings  # resolved where it compiles: no finding
    (place,) = [p for p in store.analysis.shown([refused_hash], view.mismatched)[refused_hash].places
                if p.rule == "backend_mismatch"]  # fmt: skip
    assert (place.pointer, place.keyword) == ("/properties/qty", "multipleOf")
    assert view.info[refused_hash].backend == "xgrammar"  # the engine's backend, not the resolved one


PATTERN_PROPERTIES = (
    '{"title":"Theme","type":"object","patternProperties":{"^x-":{"type":"string"}},"properties":{"a":{}}}'
)


def test_api_server_stalls_and_deaths_per_schema_and_family_and_its_validation_histogram() -> None:
    """The API server's probe (engine api-server): its validations per backend; a schema that stalled
    it and one its predecessors died on, each under its own hash though four compilers outrank them on
    compile seconds, and per family; a restarted server's ledger count moves the counter on."""
    from exporter.daemon.receiver.metric_families import store_families
    from exporter.schema.identity import schema_hash

    store = ProbeStore(max_schemas=2)
    engine = Link(store)
    for i in range(4):
        engine.compile(f'{{"type":"object","properties":{{"n{i}":{{"type":"string"}}}}}}', 0.5)
    api = Link(store, engine="api-server")
    api.now = engine.now
    api.rec.validated("xgrammar", 0.003)
    api.rec.validated("outlines", 2.5, "json", MULTIPLE_OF)
    api.rec.died("outlines", "json", PATTERN_PROPERTIES, 1)
    api.rec.server_deaths = 1  # what its marker ledger said at arming
    engine.ship(fresh=True)
    api.ship(fresh=True)
    store.analysis.run(deadline=float("inf"))
    api.ship()
    store.settle(api.now)

    def exposed() -> dict[str, Any]:
        view = store.view(api.now)
        return {f.name: f for f in store_families(view)}

    families = exposed()
    stalls = {
        s.labels["schema_hash"]: s.value
        for s in families["guided_decoding_schema_validation_stall_seconds"].samples
    }
    deaths = {
        s.labels["schema_hash"]: s.value for s in families["guided_decoding_schema_server_deaths"].samples
    }
    assert stalls == {schema_hash(MULTIPLE_OF): 2.5}
    assert deaths == {schema_hash(PATTERN_PROPERTIES): 1}
    (death,) = families["guided_decoding_schema_server_deaths"].samples
    assert (death.labels["engine"], death.labels["backend"]) == ("api-server", "outlines")
    assert [s.value for s in families["guided_decoding_family_server_deaths"].samples] == [1]
    validation = {
        (s.labels["engine"], s.labels["backend"]): s.value
        for s in families["guided_decoding_validation_seconds"].samples
        if s.name.endswith("_count")
    }
    assert validation == {
        ("api-server", "xgrammar"): 1,
        ("api-server", "outlines"): 1,
        ("api-server", "llguidance"): 0,
        ("api-server", "rejected"): 0,
    }
    # the server dies on it again: its successor's ledger says 2, and the daemon's counter follows
    restarted = Link(store, engine="api-server")
    restarted.now = api.now + 1
    restarted.rec.died("outlines", "json", PATTERN_PROPERTIES, 2)
    restarted.rec.server_deaths = 2
    restarted.ship(fresh=True)
    store.settle(restarted.now)
    deaths = {
        s.labels["schema_hash"]: s.value for s in exposed()["guided_decoding_schema_server_deaths"].samples
    }
    assert deaths == {schema_hash(PATTERN_PROPERTIES): 2}
    per_engine = {s.labels["engine"]: s.value for s in exposed()["guided_decoding_server_deaths"].samples}
    assert per_engine == {"api-server": 2}  # the engine processes, which validate nothing, have none


def test_the_guards_refusals_per_engine_reason_and_action() -> None:
    """What an API server's guard refused (or, observing, would have) reaches /metrics by engine,
    reason and action, cumulative as the probe counts it."""
    from exporter.daemon.receiver.metric_families import store_families

    store = ProbeStore(max_schemas=5)
    link = Link(store)
    link.rec.guarded[("server_crash", "refused", "")] = 3
    link.rec.guarded[("server_stall", "would_refuse", "")] = 1
    link.ship(fresh=True)
    link.rec.guarded[("server_crash", "refused", "")] += 1
    link.ship()
    store.settle(link.now)
    families = {f.name: f for f in store_families(store.view(link.now))}
    guarded = {
        (s.labels["pod"], s.labels["reason"], s.labels["action"]): s.value
        for s in families["guided_decoding_guard_requests"].samples
    }
    assert guarded == {
        ("vllm-0", "server_crash", "refused"): 4,
        ("vllm-0", "server_stall", "would_refuse"): 1,
    }
    assert {s.labels["family"] for s in families["guided_decoding_guard_requests"].samples} == {""}


def test_the_guards_refusals_name_the_family_the_daemon_knows_and_no_other() -> None:
    """A schema the analysis placed in a family is counted under it; a hash the daemon never saw (a
    pod can send any) adds up under "", never a label of its own; at most MAX_GUARD_SCHEMAS named."""
    from exporter.daemon.receiver.metric_families import GuardFamilies

    hello = wire.Hello("i", 1, "vllm-0", "api-server", "vllm", "0.32.0", {}, "0")
    counts = (
        wire.GuardCount("compile_budget", "refused", 0),
        wire.GuardCount("compile_budget", "refused", 2, "aaaaaaaaaaaa"),
        wire.GuardCount("compile_budget", "refused", 3, "bbbbbbbbbbbb"),  # the same family
        wire.GuardCount("compile_budget", "refused", 5, "cccccccccccc"),  # unknown here
    )
    snapshot = wire.Snapshot(1, True, {}, (), {}, (), wire.CpuSeconds(0, 0), {}, guard=counts)
    families = GuardFamilies({"aaaaaaaaaaaa": "f00d00000001", "bbbbbbbbbbbb": "f00d00000001"})
    families.add(hello, snapshot)
    (metric,) = families.families()
    assert {s.labels["family"]: s.value for s in metric.samples} == {"": 5, "f00d00000001": 5}
