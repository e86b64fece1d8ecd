"""The protocol validator: the daemon's only trust boundary with engine processes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exporter import wire
from exporter.daemon.receiver.listener import classify
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import encode, schema_messages
from exporter.wire_check import Invalid, validate

HELLO = {
    "kind": "hello",
    "instance": "i1",
    "pid": 7,
    "pod": "vllm-0",
    "engine": "0",
    "engine_kind": "vllm",
    "engine_version": "0.32.0",
    "backends": {"xgrammar": "0.2.9"},
    "probe_version": "0.1.0",
}


def _messages() -> list[dict[str, Any]]:
    rec = Recorder()
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", '{"type":"object"}', 0.02, False)
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", '{"type":"object"}', 0.00001, True)
    rec.finish(rec.begin("llguidance"), "llguidance", "regex", "[0-9]+", 0.001, False, "unsupported")
    rec.observe_wait("xgrammar", 0.03)
    rec.observe_mask("xgrammar", 0.00002)
    rec.route("auto", "xgrammar", "xgrammar", "compiled")
    rec.route("auto", "llguidance", "xgrammar", "rejected", "json", '{"type":"object"}')
    rec.guarded[("server_stall", "refused", "")] = 2  # as the API server's guard counts (vllm_api.guarded)
    rec.count_guarded("compile_budget", "would_refuse", "0123456789ab")
    rec.facts.backend = "xgrammar"
    lines = [encode(HELLO), *schema_messages(rec.take_unsent(True))]
    lines.append(encode({"kind": "snapshot", "seq": 1, **rec.snapshot(True), "probe": dict(rec.counters)}))
    return [json.loads(line) for line in lines]


def test_what_the_probe_sends_validates() -> None:
    hello, schemas, snapshot = (validate(m) for m in _messages())
    assert isinstance(hello, wire.Hello) and hello.pod == "vllm-0"
    assert isinstance(schemas, wire.SchemasMessage)
    assert [s.kind for s in schemas.schemas] == ["json", "regex"]
    assert isinstance(snapshot, wire.Snapshot)
    assert snapshot.backends["xgrammar"].requests == 2
    assert snapshot.backends["llguidance"].errors == {"unsupported": 1}
    assert sorted((r.resolved, r.outcome, r.requests) for r in snapshot.routes) == [
        ("llguidance", "rejected", 1), ("xgrammar", "compiled", 1)
    ]  # fmt: skip
    assert snapshot.engine is not None and snapshot.engine.backend == "xgrammar"
    assert [(r.requests, r.refused, r.misrouted) for r in snapshot.schemas] == [(2, 1, 0), (1, 0, 0)]
    assert snapshot.guard == (
        wire.GuardCount("server_stall", "refused", 2),
        wire.GuardCount("compile_budget", "would_refuse", 1, "0123456789ab"),
    )


@pytest.mark.parametrize(
    ("index", "path", "value"),
    [
        (0, ("pid",), -1),
        (0, ("pod",), "a b"),  # not a label-safe name
        (0, ("engine",), "x" * 500),
        (1, ("schemas", 0, "hash"), "XYZ"),
        (1, ("schemas", 0, "kind"), "sql"),
        (1, ("schemas", 0, "text"), "x" * (256 * 1024 + 1)),
        (2, ("backends", "xgrammar", "compile", "buckets"), [1, 2]),
        (2, ("backends", "xgrammar", "compile", "sum"), float("nan")),
        (2, ("backends", "xgrammar", "requests"), 1.5),
        (2, ("backends", "xgrammar", "errors"), {"oom": 1}),
        (2, ("schemas", 0, "hits"), 10**6),  # more hits than requests
        (2, ("probe",), {f"counter{i}": 1 for i in range(65)}),  # more than MAX_PROBE_COUNTERS
        (2, ("probe",), {"send_failures": -1}),
        (2, ("probe",), ["send_failures"]),
        (2, ("routes", 0, "outcome"), "maybe"),
        (2, ("routes", 0, "resolved"), "a b"),
        (2, ("routes", 0, "requests"), -1),
        (2, ("routes",), [{}] * 65),
        (2, ("schemas", 0, "refused"), -2),
        (2, ("schemas", 0, "sum"), 10**400),  # an integer no float holds
        (2, ("schemas", 0, "stall_seconds"), float("inf")),
        (2, ("schemas", 0, "buckets"), [0, 0, 0, 0, 0, 0, True]),
        (2, ("backends", "xgrammar", "compile", "sum"), 10**400),
        (2, ("engine", "backend"), "x y"),
        (2, ("v",), 2),
        (2, ("guard", 0, "reason"), "too_slow"),  # not a reason the guard refuses for
        (2, ("guard", 0, "action"), "maybe"),
        (2, ("guard", 0, "requests"), -1),
        (2, ("guard",), [{}] * 200),
        (2, ("guard", 1, "schema_hash"), "../etc/passwd"),  # a hash or nothing
        (
            2,
            ("guard",),
            [
                {"reason": "compile_budget", "action": "refused", "requests": 1, "schema_hash": f"{i:012x}"}
                for i in range(33)
            ],
        ),  # over MAX_GUARD_SCHEMAS
        (0, ("guard",), "always"),  # not a guard mode
    ],
)
def test_invalid_fields_are_rejected(index: int, path: tuple[Any, ...], value: Any) -> None:
    message = _messages()[index]
    node = message
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(Invalid):
        validate(message)
    line = json.dumps(message).encode() + b"\n"
    # NaN, infinities and numbers no double holds are not JSON the daemon decodes: malformed
    unreadable = isinstance(value, (int, float)) and not abs(value) <= sys.float_info.max  # NaN too
    assert classify(line) == ("malformed" if unreadable else "rejected", None)


def test_a_counter_from_a_newer_probe_is_ignored_not_a_refused_snapshot() -> None:
    snapshot = _messages()[2]
    snapshot["probe"] = {"deferred": 3, "a_counter_added_later": 7}
    checked = validate(snapshot)
    assert isinstance(checked, wire.Snapshot) and dict(checked.probe) == {"deferred": 3}


def test_schema_warnings_are_checked() -> None:
    from exporter import wire

    item = {"id": 1, "hash": "0" * 12, "shape": "1" * 12, "kind": "json", "backend": "llguidance"}
    item["text"] = "{}"
    said = [{**item, "warnings": ["Unknown format: x"]}]
    ok = validate({"v": wire.VERSION, "kind": "schemas", "schemas": said})
    assert isinstance(ok, wire.SchemasMessage) and ok.schemas[0].warnings == ("Unknown format: x",)
    plain = validate({"v": wire.VERSION, "kind": "schemas", "schemas": [item]})
    assert isinstance(plain, wire.SchemasMessage) and plain.schemas[0].warnings == ()
    for bad in (["x" * 513], ["w"] * 17, "not a list", [1]):
        with pytest.raises(Invalid):
            validate({"v": wire.VERSION, "kind": "schemas", "schemas": [{**item, "warnings": bad}]})


def test_the_integer_version_validates() -> None:
    assert isinstance(validate({"v": wire.VERSION, **HELLO}), wire.Hello)


@pytest.mark.parametrize("version", [True, 1.0, "1", None])
def test_a_version_that_only_equals_1_is_refused(version: object) -> None:
    """The protocol version is the integer 1: JSON's `true` and `1.0` equal 1 in Python, but are not it."""
    with pytest.raises(Invalid, match="unsupported protocol version"):
        validate({"v": version, **HELLO})


def test_the_recorder_names_at_most_max_guard_schemas_and_counts_the_rest_unnamed() -> None:
    rec = Recorder()
    for i in range(wire.MAX_GUARD_SCHEMAS + 5):
        rec.count_guarded("compile_budget", "refused", f"{i:012x}")
    rec.count_guarded("compile_budget", "refused", f"{0:012x}")  # one already named is counted under it
    named = {k[2]: n for k, n in rec.guarded.items()}
    assert len(named) == wire.MAX_GUARD_SCHEMAS + 1 and named[""] == 5 and named[f"{0:012x}"] == 2
    doc = encode({"kind": "snapshot", "seq": 1, **rec.snapshot(True), "probe": dict(rec.counters)})
    snapshot = validate(json.loads(doc))
    assert isinstance(snapshot, wire.Snapshot) and sum(c.requests for c in snapshot.guard) == 38


def test_a_guarded_probe_says_its_mode_in_its_hello() -> None:
    hello = validate(json.loads(encode({**HELLO, "guard": "enforce"})))
    assert isinstance(hello, wire.Hello) and hello.guard == "enforce"
    plain = validate(json.loads(encode(HELLO)))
    assert isinstance(plain, wire.Hello) and plain.guard == ""


_ROW_VALUES: list[Any] = [
    0, 1, 7, 2**63 - 1, 2**63, -1, True, False, 1.0, 0.5, -0.0, float("nan"), float("inf"), 10**400, "1",
    None, [], {}, [0] * 7, [1, 2, 3, 4, 5, 6, 7], [0] * 6, [0] * 8, [0, 0, 0, 0, 0, 0, -1],
    [0, 0, 0, 0, 0, 0, True], [0, 0, 0, 0, 0, 0, 1.0], (0,) * 7, {"timeout": 2}, {"timeout": -2},
    {"bogus": 1}, {"invalid_schema": 1, "internal": 3},
]  # fmt: skip
_ROW_KEYS = ("id", "requests", "hits", "errors", "buckets", "sum")
_OPTIONAL = ("rejected", "refused", "misrouted", "stalls", "stall_seconds", "deaths", "unknown")


def _valid_row(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "requests": 9 + i,
        "hits": 9,
        "errors": {},
        "buckets": [i, 0, 1, 0, 0, 0, 2],
        "sum": 0.5 * i,
    }


def _rows_to_check() -> Iterator[list[Any]]:
    """Three rows, one of them (first, middle, last) given each value of each field, optional ones
    included, or lacking a field, or not an object; then two rows given values at once."""
    changes: list[tuple[str, Any]] = [(k, v) for k in (*_ROW_KEYS, *_OPTIONAL) for v in _ROW_VALUES]
    changes += [(k, None) for k in _ROW_KEYS]  # None below: the field removed
    for position in range(3):
        for key, value in changes:
            rows: list[Any] = [_valid_row(i) for i in range(3)]
            if value is None and key in _ROW_KEYS:
                del rows[position][key]
            else:
                rows[position][key] = value
            yield rows
        not_objects: tuple[Any, ...] = ([], "row", 3, None)
        for other in not_objects:
            yield [other if i == position else _valid_row(i) for i in range(3)]
    for n, (first, second) in enumerate(zip(changes, reversed(changes), strict=True)):
        rows = [_valid_row(i) for i in range(3)]
        rows[n % 3][first[0]] = first[1]
        rows[(n + 1) % 3][second[0]] = second[1]
        yield rows
    yield []


def test_the_rows_checked_as_columns_are_the_rows_checked_one_by_one() -> None:
    """A snapshot's rows are checked column by column (`wire_check._rows`, the daemon's hot path): for any
    rows, the same records as the row-by-row check, of the same types, or the same first problem named."""
    from exporter.wire_check import _rows, _spec_totals

    def outcome(check: Callable[[list[Any]], tuple[wire.SpecTotals, ...]], rows: list[Any]) -> Any:
        try:
            return check(rows)
        except Exception as err:  # classify drops a message on any of these
            return (type(err), str(err))

    def one_by_one(rows: list[Any]) -> tuple[wire.SpecTotals, ...]:
        return tuple([_spec_totals(r, "snapshot.schemas", True) for r in rows])

    accepted = 0
    for rows in _rows_to_check():
        expected, got = outcome(one_by_one, rows), outcome(_rows, rows)
        assert got == expected, rows
        if isinstance(expected, tuple) and expected and isinstance(expected[0], wire.SpecTotals):
            accepted += 1
            assert [type(v) for r in got for v in r] == [type(v) for r in expected for v in r]
    assert accepted > 100  # the fast path ran, not only the refusals
