"""The in-engine bookkeeping: exact counts, bounded memory, nothing raised."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from exporter.probe.recorder import Recorder
from exporter.probe.spec_identity import identify
from exporter.wire import MAX_TEXT_CHARS


def _compile(
    rec: Recorder, spec: str, seconds: float = 0.01, hit: bool = False, backend: str = "xgrammar"
) -> None:
    rec.finish(rec.begin(backend), backend, "json", spec, seconds, hit)


def _totals(snapshot: dict[str, Any]) -> tuple[int, int]:
    rows = snapshot["schemas"] + list(snapshot["other"].values())
    return sum(r["requests"] for r in rows), sum(r["hits"] for r in rows)


def test_counts_per_schema_and_backend() -> None:
    rec = Recorder()
    _compile(rec, '{"a":1}', 0.03)
    for _ in range(4):
        _compile(rec, '{"a":1}', 0.00001, hit=True)
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", "{bad", 0.002, False, "invalid_schema")
    snap = rec.snapshot(full=True)
    rows = {r["id"]: r for r in snap["schemas"]}
    assert [(r["requests"], r["hits"]) for r in rows.values()] == [(5, 4), (1, 0)]
    assert rows[2]["errors"] == {"invalid_schema": 1}
    b = snap["backends"]["xgrammar"]
    assert (b["requests"], b["hits"], b["errors"]) == (6, 4, {"invalid_schema": 1})
    assert sum(b["compile"]["buckets"]) == 6 and abs(b["compile"]["sum"] - 0.03204) < 1e-9
    assert rows[1]["buckets"] == [4, 0, 0, 1, 0, 0, 0]  # 10 us x4 in le=0.001, 30 ms in le=0.1
    # the miss-only histogram: the 30 ms compile and the failed one, not the four hits
    assert sum(b["miss"]["buckets"]) == 2 and abs(b["miss"]["sum"] - 0.032) < 1e-9


def test_incremental_snapshots_carry_only_changed_rows() -> None:
    rec = Recorder()
    _compile(rec, "A")
    _compile(rec, "B")
    rec.snapshot(full=True)
    assert rec.snapshot(full=False)["schemas"] == []
    _compile(rec, "B")
    rows = rec.snapshot(full=False)["schemas"]
    assert [(r["id"], r["requests"]) for r in rows] == [(2, 2)]  # cumulative, not a delta


def test_least_recently_used_fold_into_other_and_totals_add_up() -> None:
    rec = Recorder(max_schemas=3)
    _compile(rec, "keep")
    for i in range(10):
        _compile(rec, f"s{i}")
        _compile(rec, "keep", 0.00001, hit=True)  # recently used: never evicted
    snap = rec.snapshot(full=True)
    assert rec.tracked() == 3
    assert _totals(snap) == (21, 10)
    assert snap["other"]["xgrammar"]["requests"] == 8
    assert rec.counters["evicted"] == 8
    assert "keep" in [e.text for e in rec.take_unsent(True)]


def test_oversize_specs_are_hashed_then_dropped() -> None:
    rec = Recorder()
    big = '{"enum":[' + ",".join(f'"{i:08d}"' for i in range(40_000)) + "]}"
    assert len(big) > MAX_TEXT_CHARS
    _compile(rec, big)
    _compile(rec, big, 0.00001, hit=True)
    (row,) = rec.snapshot(full=True)["schemas"]
    assert row["requests"] == 2
    (spec,) = rec.take_unsent(True)
    assert spec.truncated and spec.length == len(big)
    assert spec.text is None and len(spec.identity.schema_hash) == 12 and spec.identity.shape_hash
    assert spec.identity == identify("json", big)
    assert rec.counters["texts_dropped"] == 1
    (again,) = rec.take_unsent(True)  # a new connection: the same identity, the text counted once
    assert again.identity == spec.identity and rec.counters["texts_dropped"] == 1


def test_identity_is_computed_once_per_spec_off_the_hot_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's calls never hash; the first shipping of a spec does, once, whatever the repeats."""
    import exporter.probe.recorder as recorder_module

    calls: list[str] = []

    def counting(kind: str, text: str) -> Any:
        calls.append(text)
        return identify(kind, text)

    monkeypatch.setattr(recorder_module, "identify", counting)
    rec = Recorder()
    spec = '{"title": "Invoice", "type": "object"}'
    for _ in range(5):
        _compile(rec, spec, 0.00001, hit=True)
    rec.drain()
    assert calls == []
    (first,) = rec.take_unsent(True)
    (second,) = rec.take_unsent(True)
    assert calls == [spec]
    assert first.identity == second.identity == identify("json", spec)
    assert first.identity.title == "Invoice" and first.text == spec


def test_identity_of_json_and_other_kinds() -> None:
    """JSON kinds by their canonical form (serialisation does not matter), other kinds by the string."""
    spaced, compact = '{"type": "string", "title": "T 1"}', '{"title":"T 1","type":"string"}'
    schema = identify("json", spaced)
    assert schema == identify("json", compact) and schema.title == "T_1"
    assert schema.shape_hash != schema.schema_hash  # the title is a literal: the shape drops it
    regex = identify("regex", spaced)  # the same text as a regex is not a schema
    assert regex.schema_hash == regex.shape_hash != schema.schema_hash and regex.title == ""
    assert identify("json", "{not json").schema_hash == identify("regex", "{not json").schema_hash


def test_in_progress_and_oldest() -> None:
    rec = Recorder()
    token = rec.begin("xgrammar")
    time.sleep(0.05)
    b = rec.snapshot(full=True)["backends"]["xgrammar"]
    assert b["in_progress"] == 1 and b["oldest_seconds"] >= 0.05
    rec.finish(token, "xgrammar", "json", "x", 0.05, False)
    assert rec.snapshot(full=True)["backends"]["xgrammar"]["in_progress"] == 0


def test_bad_input_is_counted_not_raised() -> None:
    rec = Recorder()
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", "x", None, False)  # type: ignore[arg-type]
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", "x", float("nan"), False)
    snap = rec.snapshot(full=True)  # observations are folded in off the hot path
    assert rec.counters["internal_errors"] == 1
    assert snap["backends"]["xgrammar"]["in_progress"] == 0
    assert snap["backends"]["xgrammar"]["requests"] == 1  # the NaN one, as 0 s: sums stay finite
    assert snap["backends"]["xgrammar"]["compile"]["sum"] == 0.0


def test_threads_count_exactly() -> None:
    """8 engine threads record while the shipper drains and evicts (50 tracked of 800 specs)."""
    rec = Recorder(max_schemas=50)
    done = threading.Event()

    def work(n: int) -> None:
        for i in range(2000):
            _compile(rec, f"t{n}-{i % 100}", 0.0001, hit=i >= 100)

    def drain() -> None:
        while not done.is_set():
            rec.drain()

    drainer = threading.Thread(target=drain)
    drainer.start()
    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    drainer.join()
    snap = rec.snapshot(full=True)
    assert _totals(snap) == (16_000, 16_000 - 800)
    assert snap["backends"]["xgrammar"]["requests"] == 16_000


def test_snapshots_carry_the_cpu_of_the_thread_that_takes_them() -> None:
    """The shipper's own CPU (`cpu.probe`): the work a thread does between two of its snapshots shows,
    another thread's does not."""
    rec = Recorder()
    first = rec.snapshot(full=True)["cpu"]["probe"]
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:  # 50 ms of this thread's CPU
        _compile(rec, '{"a":1}', 0.001)
    second = rec.snapshot(full=False)["cpu"]["probe"]
    assert second - first >= 0.05
    other: list[float] = []
    thread = threading.Thread(target=lambda: other.append(rec.snapshot(full=False)["cpu"]["probe"]))
    thread.start()
    thread.join()
    assert other[0] < 0.05 <= second  # a fresh thread has its own, small count
    from exporter import wire, wire_check

    doc = {"v": wire.VERSION, "kind": "snapshot", "seq": 1, "full": True, "backends": {}}
    parsed = wire_check.validate({**doc, "cpu": {"user": 1.0, "system": 0.5, "probe": second}})
    assert isinstance(parsed, wire.Snapshot) and parsed.cpu.probe == second
    older = wire_check.validate({**doc, "cpu": {"user": 1.0, "system": 0.5}})  # a probe before the field
    assert isinstance(older, wire.Snapshot) and older.cpu.probe == 0.0


MULTIPLE_OF = '{"type":"object","properties":{"qty":{"type":"integer","multipleOf":5}}}'
PLAIN = '{"type":"object","properties":{"sku":{"type":"string"}}}'


def test_routes_count_per_engine_and_mismatches_per_spec() -> None:
    """Every structured request by (asked, resolved, engine's backend, outcome); a request refused
    for another backend is its spec's own count, though the spec never compiles on this engine."""
    rec = Recorder()
    for _ in range(3):
        rec.route("auto", "xgrammar", "xgrammar", "compiled")
        _compile(rec, PLAIN)
    rec.route("auto", "llguidance", "xgrammar", "rejected", "json", MULTIPLE_OF)
    rec.route("auto", "llguidance", "xgrammar", "rejected", "json", MULTIPLE_OF)
    rec.facts.backend = "xgrammar"
    snap = rec.snapshot(full=True)
    routes = {
        (r["requested"], r["resolved"], r["backend"], r["outcome"]): r["requests"] for r in snap["routes"]
    }
    assert routes == {
        ("auto", "xgrammar", "xgrammar", "compiled"): 3,
        ("auto", "llguidance", "xgrammar", "rejected"): 2,
    }
    rows = sorted(snap["schemas"], key=lambda r: r["id"])
    assert [(r["requests"], r.get("refused", 0)) for r in rows] == [(3, 0), (0, 2)]
    assert snap["engine"]["backend"] == "xgrammar"
    metadata = rec.take_unsent(everything=True)
    assert sorted(m.backend for m in metadata) == ["xgrammar", "xgrammar"]  # the engine's backend


def test_a_misrouted_compile_is_one_spec_row() -> None:
    """vLLM 0.32: the request resolved to guidance is compiled by the engine's xgrammar; route and
    compile land on one row, whichever the shipper folds in first."""
    for route_first in (True, False):
        rec = Recorder()
        for step in ("route", "compile") if route_first else ("compile", "route"):
            if step == "route":
                rec.route("auto", "llguidance", "xgrammar", "other_backend", "json", MULTIPLE_OF)
            else:
                _compile(rec, MULTIPLE_OF)
            rec.drain()
        (row,) = rec.snapshot(full=True)["schemas"]
        assert (row["requests"], row["misrouted"], row.get("refused", 0)) == (1, 1, 0), route_first


def test_routes_are_bounded_and_evicted_mismatches_go_to_other() -> None:
    rec = Recorder(max_schemas=2)
    rec.route("auto", "llguidance", "xgrammar", "rejected", "json", MULTIPLE_OF)
    rec.drain()
    for i in range(3):
        _compile(rec, f'{{"n":{i}}}')
    rec.drain()  # the refused spec is the least recently used: folded into other with its count
    rec.route("auto", "llguidance", "xgrammar", "rejected", "json", MULTIPLE_OF)  # tracked again
    snap = rec.snapshot(full=True)
    refused = sum(r.get("refused", 0) for r in snap["schemas"]) + snap["other"]["xgrammar"].get("refused", 0)
    assert refused == 2 and snap["other"]["xgrammar"]["refused"] == 1
    from exporter.wire import MAX_ROUTES

    for i in range(MAX_ROUTES + 5):
        rec.route("auto", f"b{i}", "xgrammar", "rejected")
    snap = rec.snapshot(full=True)
    assert len(snap["routes"]) == MAX_ROUTES and rec.counters["dropped"] == 6


PATTERN_PROPERTIES = '{"type":"object","patternProperties":{"^x-":{"type":"string"}},"properties":{"a":{}}}'


def test_api_server_validations_per_backend_and_the_slow_ones_per_spec() -> None:
    """vLLM's API server: every validation in its backend's histogram; only one of STALL_SECONDS or
    more keeps its spec, tracked with its stalls and seconds though nothing compiles here."""
    from exporter.wire import COMPILE_BUCKETS, STALL_SECONDS

    rec = Recorder()
    for _ in range(3):
        rec.validated("xgrammar", 0.002)
    rec.validated("outlines", 7.5, "json", PATTERN_PROPERTIES)
    rec.validated("outlines", STALL_SECONDS / 2)  # under the line: the wrapper passes no spec
    rec.validated("rejected", 0.001)
    snap = rec.snapshot(full=True)
    counts = {b: sum(h["buckets"]) for b, h in snap["validation"].items()}
    assert counts == {"xgrammar": 3, "llguidance": 0, "outlines": 2, "rejected": 1}  # all from the first
    assert len(snap["validation"]["outlines"]["buckets"]) == len(COMPILE_BUCKETS) + 1
    assert snap["validation"]["outlines"]["sum"] == 7.5 + STALL_SECONDS / 2
    (row,) = snap["schemas"]
    assert (row["requests"], row["stalls"], row["stall_seconds"]) == (0, 1, 7.5)
    (meta,) = rec.take_unsent(everything=True)
    assert (meta.backend, meta.kind, meta.text) == ("outlines", "json", PATTERN_PROPERTIES)
    assert "validation" not in Recorder().snapshot(full=True)  # an engine that validates nothing


def test_deaths_found_at_arming_are_the_specs_own() -> None:
    rec = Recorder()
    rec.died("outlines", "json", PATTERN_PROPERTIES, 2)
    rec.validated("outlines", 1.5, "json", PATTERN_PROPERTIES)  # and it stalls this one too
    (row,) = rec.snapshot(full=True)["schemas"]
    assert (row["deaths"], row["stalls"]) == (2, 1)


def test_a_process_that_validates_shows_zeros_from_its_first_snapshot() -> None:
    """vLLM's API server: every resolution's histogram and the death count at zero before any request,
    so Prometheus' increase() sees the first slow validation and the first death."""
    rec = Recorder()
    assert "deaths" not in rec.snapshot(full=True)
    rec.validates()
    snap = rec.snapshot(full=True)
    assert snap["deaths"] == 0
    assert {b: sum(h["buckets"]) for b, h in snap["validation"].items()} == {
        "xgrammar": 0, "llguidance": 0, "outlines": 0, "rejected": 0,
    }  # fmt: skip


def test_a_process_that_only_validates_sends_no_sizing() -> None:
    """vLLM's API server has no compile pool or cache, and its CPU cgroup is the engine container's:
    counted once, by the engine's probe."""
    from exporter import wire, wire_check

    rec = Recorder(locate_cgroup=False)
    rec.sizing = False
    snap = rec.snapshot(full=True)
    assert snap["engine"] is None
    assert wire_check.validate({"v": wire.VERSION, "kind": "snapshot", "seq": 1, **snap}).engine is None  # type: ignore[union-attr]


def test_the_calling_thread_leaves_the_lookup_to_the_shipper_within_bounds() -> None:
    """Up to FAST_PENDING queued calls of specs up to FAST_CHARS, the spec string is queued as it is
    (no hash on the engine's thread); past either bound a tracked spec is queued as its TrackedSpec, so
    at most FAST_PENDING strings of FAST_CHARS stay alive until the drain; the counts are the same."""
    from exporter.probe.recorder import FAST_CHARS, FAST_PENDING

    rec = Recorder()
    spec = '{"type": "object", "title": "' + "x" * 1000 + '"}'
    big = '{"type": "object", "title": "' + "y" * FAST_CHARS + '"}'
    for text in (spec, big):
        rec.finish(rec.begin("xgrammar"), "xgrammar", "json", text, 0.01, False)
    rec.drain()
    for _ in range(FAST_PENDING + 10):
        rec.finish(rec.begin("xgrammar"), "xgrammar", "json", (spec + " ")[:-1], 0.00001, True)
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", (big + " ")[:-1], 0.00001, True)
    queued = list(rec.pending)
    assert all(entry[0] is None and entry[3] == spec for entry in queued[:FAST_PENDING])
    assert all(entry[0] is not None and entry[3] is None for entry in queued[FAST_PENDING:])
    rec.drain()
    counts = {(c.requests, c.hits) for c in rec._specs.values()}
    assert counts == {(FAST_PENDING + 11, FAST_PENDING + 10), (2, 1)}


def test_what_waits_for_the_next_ship_stays_bounded_by_the_tracked_specs() -> None:
    """With nobody shipping, a stream of new specs leaves at most max_schemas evictions to report (only
    shipped specs' evictions are news) and at most twice that many specs awaiting their metadata; every
    tracked one among them, however long ago it was tracked, still ships its metadata."""
    rec = Recorder(max_schemas=4)
    live = '{"n": "live"}'
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", live, 0.01, False)
    rec.take_unsent(everything=True)
    rec.snapshot(full=True)
    for i in range(5_000):
        rec.finish(rec.begin("xgrammar"), "xgrammar", "json", f'{{"n": {i}}}', 0.01, False)
        rec.finish(rec.begin("xgrammar"), "xgrammar", "json", (live + " ")[:-1], 0.00001, True)  # kept live
        if i % 500 == 0:
            rec.drain()
    rec.drain()
    assert len(rec._evicted) <= 4 and len(rec._unsent) <= 8
    shipped = {meta.id for meta in rec.take_unsent(everything=False)}
    assert {spec.id for spec in rec._specs.values() if spec.text != live} <= shipped
