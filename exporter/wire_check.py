"""The daemon's validator of the probe protocol (`exporter.wire`): `validate` turns a decoded message into
the typed, immutable records of `exporter.wire`, so that the daemon never reads a protocol field by a
string key, and raises `Invalid` naming the first problem. Standard library only. Apart from the
protocol's constants and records, because only the daemon checks messages: the probe, and the tree
`gdx inject` copies into an engine's pod, carry none of this."""

from __future__ import annotations

import math
import operator
import re
import sys
from collections.abc import Mapping
from functools import partial
from itertools import chain, repeat
from typing import Any

from exporter.wire import (
    COMPILE_BUCKETS,
    ERROR_REASONS,
    GUARD_ACTIONS,
    GUARD_MODES,
    GUARD_REASONS,
    MASK_BUCKETS,
    MAX_BACKENDS,
    MAX_GUARD_SCHEMAS,
    MAX_PROBE_COUNTERS,
    MAX_ROUTES,
    MAX_SCHEMAS_PER_MESSAGE,
    MAX_TEXT_CHARS,
    MAX_TOKEN_CHARS,
    PROBE_COUNTERS,
    REJECTION_REASONS,
    REQUEST_KINDS,
    ROUTE_OUTCOMES,
    SCHEMA_BUCKETS,
    VERSION,
    Auth,
    BackendTotals,
    CacheSize,
    CgroupCpu,
    CpuSeconds,
    EngineSizing,
    GuardCount,
    Hello,
    Histogram,
    Message,
    RouteCount,
    SchemaMeta,
    SchemasMessage,
    Snapshot,
    SpecTotals,
)

_NAME = re.compile(r"^[A-Za-z0-9_.:/+-]{1,128}$")
_HASH = re.compile(r"^[0-9a-f]{12}$")
_MAX_COUNT = 2**63
_REASONS = frozenset(ERROR_REASONS)
_REJECTIONS = frozenset(REJECTION_REASONS)
_COUNTERS = frozenset(PROBE_COUNTERS)
_OUTCOMES = frozenset(ROUTE_OUTCOMES)
_NO_ERRORS: Mapping[str, int] = {}
_INT_ONLY = frozenset({int})
_NUMBER = (int, float)
_FLOAT_MAX = sys.float_info.max  # NaN, infinities and ints too large for a float compare false


class Invalid(ValueError):
    """A message that is well-formed JSON but not a valid protocol message."""


# ---- checks: each raises Invalid("what: problem"), the message built only on failure ------------------


def _require(condition: bool, what: str, problem: str = "") -> None:
    if not condition:
        raise Invalid(f"{what}: {problem}" if problem else what)


def _count(value: Any, what: str) -> int:
    # Inline checks: this runs about 25 times per row of every snapshot.
    if type(value) is int and 0 <= value < _MAX_COUNT:
        return value
    raise Invalid(f"{what}: not a non-negative integer")


def _seconds(value: Any, what: str) -> float:
    if type(value) in _NUMBER and 0 <= value <= _FLOAT_MAX:
        return float(value)
    raise Invalid(f"{what}: bad number")


def _name(value: Any, what: str) -> str:
    _require(isinstance(value, str) and bool(_NAME.match(value)), what, "bad name")
    return str(value)


def _text(value: Any, what: str, limit: int = 256) -> str:
    _require(isinstance(value, str) and len(value) <= limit, what, "bad string")
    return str(value)


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str:
    _require(value in allowed, what, f"not one of {', '.join(allowed)}")
    return str(value)


def _hash(value: Any, what: str) -> str:
    _require(isinstance(value, str) and bool(_HASH.match(value)), what)
    return str(value)


def _counts(values: list[Any] | tuple[Any, ...]) -> bool:
    """Every value a non-negative int below 2**63 (not a bool): three C-level passes, no Python loop."""
    return not values or (
        _INT_ONLY.issuperset(map(type, values)) and min(values) >= 0 and max(values) < _MAX_COUNT
    )


def _buckets(doc: dict[str, Any], bounds: tuple[float, ...], what: str) -> tuple[int, ...]:
    buckets = doc.get("buckets")
    if type(buckets) is not list or len(buckets) != len(bounds) + 1:
        raise Invalid(f"{what}: bucket count")
    if not _counts(buckets):
        raise Invalid(f"{what}: not a non-negative integer")
    return tuple(buckets)


def _histogram(doc: Any, bounds: tuple[float, ...], what: str) -> Histogram:
    _require(isinstance(doc, dict), what, "not an object")
    return Histogram(_buckets(doc, bounds, what), _seconds(doc.get("sum"), what))


def _errors(doc: Any, what: str, reasons: frozenset[str] = _REASONS) -> Mapping[str, int]:
    """Counts by reason, every reason one of `reasons` (compile errors by default; rejections too)."""
    if not doc and isinstance(doc, dict):
        return _NO_ERRORS
    _require(isinstance(doc, dict) and reasons.issuperset(doc), what, "bad reasons")
    return {reason: _count(n, what) for reason, n in doc.items()}


def _spec_totals(doc: Any, what: str, row: bool = False) -> SpecTotals:
    """A row of `schemas` (`row`: with its id) or of `other`, checked: the counts together, a message
    built only on failure. `_rows` checks a snapshot's usual rows faster and comes here for the rest."""
    if type(doc) is not dict:
        raise Invalid(f"{what}: not an object")
    get = doc.get
    counts: tuple[Any, ...] = (
        get("requests"), get("hits"), get("rejected", 0), get("refused", 0), get("misrouted", 0),
        get("stalls", 0), get("deaths", 0), get("id") if row else 0,
    )  # fmt: skip
    if not _counts(counts):
        raise Invalid(f"{what}: not a non-negative integer")
    requests, hits, rejected, refused, misrouted, stalls, deaths, ident = counts
    if hits > requests:
        raise Invalid(f"{what}: more hits than requests")
    return SpecTotals(
        requests,
        hits,
        _errors(get("errors", _NO_ERRORS), what),
        _buckets(doc, SCHEMA_BUCKETS, what),
        _seconds(get("sum"), what),
        rejected,
        refused,
        misrouted,
        stalls,
        _seconds(get("stall_seconds", 0), what),
        deaths,
        ident,
    )


_ROW_FIELDS = operator.itemgetter("id", "requests", "hits", "errors", "buckets", "sum")
_ROW_BUCKETS = len(SCHEMA_BUCKETS) + 1
_DICT_ONLY = frozenset({dict})
_LIST_ONLY = frozenset({list})
_NUMBERS_ONLY = frozenset(_NUMBER)
_new_row = partial(tuple.__new__, SpecTotals)  # a SpecTotals from one tuple, without a Python call


def _rows(rows: list[Any]) -> tuple[SpecTotals, ...]:
    """The rows of a snapshot's `schemas`, checked column by column: the same rows `_spec_totals` accepts
    (the same records, the same first problem named), in a few C-level passes over all of them rather
    than a dozen checks per row (at the caps: 17 rows per snapshot, 8 snapshots a second, the daemon's
    largest cost with nobody scraping). A row with any of the optional fields, and any doubt, is checked
    by `_spec_totals`."""
    what = "snapshot.schemas"
    if not rows:
        return ()
    try:
        if not _DICT_ONLY.issuperset(map(type, rows)):
            raise Invalid(what)
        ids, requests, hits, errors, buckets, sums = zip(*map(_ROW_FIELDS, rows), strict=True)
        if not (
            _counts(ids + requests + hits)
            and all(map(operator.le, hits, requests))
            and _DICT_ONLY.issuperset(map(type, errors))
            and _LIST_ONLY.issuperset(map(type, buckets))
            and set(map(len, buckets)) == {_ROW_BUCKETS}
            and _counts(list(chain.from_iterable(buckets)))
            and _NUMBERS_ONLY.issuperset(map(type, sums))
            and min(sums) >= 0
            and max(sums) <= _FLOAT_MAX
            and not any(map(math.isnan, sums))
        ):
            raise Invalid(what)
        checked = [_errors(e, what) if e else _NO_ERRORS for e in errors]
        zero, seconds = repeat(0), repeat(0.0)  # endless: zip(strict=False)
        # the optional fields absent: rejected, refused, misrouted, stalls 0; stall_seconds 0.0; deaths 0
        optional = (zero, zero, zero, zero, seconds, zero)
        columns = (requests, hits, checked, map(tuple, buckets), map(float, sums), *optional, ids)
        out = list(map(_new_row, zip(*columns, strict=False)))
    except (Invalid, LookupError, TypeError, ValueError, OverflowError):
        return tuple([_spec_totals(row, what, True) for row in rows])  # names the first problem
    for i, row in enumerate(rows):
        if len(row) != 6:  # optional fields: the whole row checked (the rows before it passed)
            out[i] = _spec_totals(row, what, True)
    return tuple(out)


_MAX_GUARD_COUNTS = (MAX_GUARD_SCHEMAS + 1) * len(GUARD_REASONS) * len(GUARD_ACTIONS)


def _guard(doc: Any) -> tuple[GuardCount, ...]:
    _require(isinstance(doc, list) and len(doc) <= _MAX_GUARD_COUNTS, "snapshot.guard")
    counts = []
    for item in doc:
        _require(isinstance(item, dict), "snapshot.guard item")
        reason, action = item.get("reason"), item.get("action")
        _require(reason in GUARD_REASONS and action in GUARD_ACTIONS, "snapshot.guard reason or action")
        schema = _hash(item["schema_hash"], "snapshot.guard.schema_hash") if item.get("schema_hash") else ""
        counts.append(
            GuardCount(str(reason), str(action), _count(item.get("requests"), "snapshot.guard"), schema)
        )
    _require(len({c.schema_hash for c in counts} - {""}) <= MAX_GUARD_SCHEMAS, "snapshot.guard: schemas")
    return tuple(counts)


def _routes(doc: Any) -> tuple[RouteCount, ...]:
    _require(isinstance(doc, list) and len(doc) <= MAX_ROUTES, "snapshot.routes")
    routes = []
    for item in doc:
        _require(isinstance(item, dict), "snapshot.routes item")
        outcome = item.get("outcome")
        _require(outcome in _OUTCOMES, "snapshot.routes.outcome")
        routes.append(RouteCount(
            _name(item.get("requested"), "snapshot.routes.requested"),
            _name(item.get("resolved"), "snapshot.routes.resolved"),
            _name(item.get("backend"), "snapshot.routes.backend"),
            str(outcome),
            _count(item.get("requests"), "snapshot.routes.requests"),
        ))  # fmt: skip
    return tuple(routes)


def _validation(doc: Any) -> Mapping[str, Histogram]:
    _require(isinstance(doc, dict) and len(doc) <= MAX_BACKENDS, "snapshot.validation")
    return {
        _name(k, "snapshot.validation"): _histogram(v, COMPILE_BUCKETS, "snapshot.validation")
        for k, v in doc.items()
    }


def _backend(doc: Any) -> BackendTotals:
    _require(isinstance(doc, dict), "snapshot.backends item")
    return BackendTotals(
        requests=_count(doc.get("requests"), "backend.requests"),
        hits=_count(doc.get("hits"), "backend.hits"),
        errors=_errors(doc.get("errors", _NO_ERRORS), "backend.errors"),
        compile=_histogram(doc.get("compile"), COMPILE_BUCKETS, "backend.compile"),
        wait=_histogram(doc.get("wait"), COMPILE_BUCKETS, "backend.wait"),
        mask=_histogram(doc.get("mask"), MASK_BUCKETS, "backend.mask"),
        in_progress=_count(doc.get("in_progress", 0), "backend.in_progress"),
        oldest_seconds=_seconds(doc.get("oldest_seconds", 0), "backend.oldest_seconds"),
        miss=None if doc.get("miss") is None else _histogram(doc["miss"], COMPILE_BUCKETS, "backend.miss"),
        rejections=_errors(doc.get("rejections", _NO_ERRORS), "backend.rejections", _REJECTIONS),
    )


MAX_WARNINGS = 16


def _warnings(doc: Any) -> tuple[str, ...]:
    _require(isinstance(doc, list) and len(doc) <= MAX_WARNINGS, "schemas.warnings")
    return tuple(_text(w, "schemas.warnings", 512) for w in doc)


def _schema_meta(item: Any) -> SchemaMeta:
    _require(isinstance(item, dict), "schemas: item")
    text = item.get("text")
    _require(text is None or (isinstance(text, str) and len(text) <= MAX_TEXT_CHARS), "schemas.text")
    schema_hash = _hash(item.get("hash"), "schemas.hash")
    shape_hash = _hash(item.get("shape"), "schemas.shape")
    kind = item.get("kind")
    _require(kind in REQUEST_KINDS, "schemas.kind")
    return SchemaMeta(
        id=_count(item.get("id"), "schemas.id"),
        hash=schema_hash,
        shape=shape_hash,
        kind=str(kind),
        backend=_name(item.get("backend"), "schemas.backend"),
        title=_text(item.get("title", ""), "schemas.title", 1024),
        text=text,
        bytes=_count(item.get("bytes", 0), "schemas.bytes"),
        truncated=bool(item.get("truncated", False)),
        warnings=_warnings(item.get("warnings", [])),
    )


# ---- the messages -------------------------------------------------------------------------------


def _hello(doc: dict[str, Any]) -> Hello:
    backends = doc.get("backends", {})
    _require(isinstance(backends, dict) and len(backends) <= MAX_BACKENDS, "hello: backends")
    return Hello(
        instance=_name(doc.get("instance"), "hello.instance"),
        pid=_count(doc.get("pid"), "hello.pid"),
        pod=_name(doc.get("pod"), "hello.pod"),
        engine=_name(doc.get("engine"), "hello.engine"),
        engine_kind=_name(doc.get("engine_kind"), "hello.engine_kind"),
        engine_version=_text(doc.get("engine_version", ""), "hello.engine_version", 64),
        backends={_name(k, "hello.backends"): _text(v, "hello.backends", 64) for k, v in backends.items()},
        probe_version=_text(doc.get("probe_version", ""), "hello.probe_version", 64),
        namespace=_name(doc["namespace"], "hello.namespace") if doc.get("namespace") else "",
        guard=_choice(doc["guard"], GUARD_MODES, "hello.guard") if doc.get("guard") else "",
    )


def _schemas(doc: dict[str, Any]) -> SchemasMessage:
    items = doc.get("schemas")
    if not isinstance(items, list) or len(items) > MAX_SCHEMAS_PER_MESSAGE:
        raise Invalid("schemas: list")
    return SchemasMessage(tuple([_schema_meta(item) for item in items]))


MAX_CACHES = 16


def _engine(doc: Any) -> EngineSizing | None:
    if doc is None:
        return None
    _require(isinstance(doc, dict), "snapshot.engine")
    caches = doc.get("caches", [])
    _require(isinstance(caches, list) and len(caches) <= MAX_CACHES, "snapshot.engine.caches")
    sizes = []
    for c in caches:
        _require(isinstance(c, dict), "snapshot.engine.caches item")
        limit = c.get("limit_bytes", -1)
        _require(type(limit) is int and -1 <= limit < _MAX_COUNT, "snapshot.engine.caches.limit_bytes")
        sizes.append(CacheSize(_name(c.get("backend"), "snapshot.engine.caches.backend"),
                               _name(c.get("compiler"), "snapshot.engine.caches.compiler"),
                               _count(c.get("bytes"), "snapshot.engine.caches.bytes"), limit))  # fmt: skip
    group = doc.get("cgroup")
    cpu = None
    if group is not None:
        _require(isinstance(group, dict), "snapshot.engine.cgroup")
        version = _count(group.get("version"), "snapshot.engine.cgroup.version")
        _require(version in (1, 2), "snapshot.engine.cgroup.version")
        cpu = CgroupCpu(
            version,
            _count(group.get("periods"), "snapshot.engine.cgroup.periods"),
            _count(group.get("throttled_periods"), "snapshot.engine.cgroup.throttled_periods"),
            _seconds(group.get("throttled_seconds"), "snapshot.engine.cgroup.throttled_seconds"),
            _seconds(group.get("quota_cores"), "snapshot.engine.cgroup.quota_cores"),
        )
    return EngineSizing(
        tuple(sizes),
        _count(doc.get("pool_workers", 0), "snapshot.engine.pool_workers"),
        _count(doc.get("cpus", 0), "snapshot.engine.cpus"),
        cpu,
        _name(doc["backend"], "snapshot.engine.backend") if doc.get("backend") else "",
    )


def _snapshot(doc: dict[str, Any]) -> Snapshot:
    backends = doc.get("backends")
    if not isinstance(backends, dict) or len(backends) > MAX_BACKENDS:
        raise Invalid("snapshot.backends")
    totals = {_name(name, "snapshot.backends"): _backend(b) for name, b in backends.items()}
    rows = doc.get("schemas", [])
    _require(isinstance(rows, list) and len(rows) <= MAX_SCHEMAS_PER_MESSAGE, "snapshot.schemas")
    other = doc.get("other", {})
    _require(isinstance(other, dict) and len(other) <= MAX_BACKENDS, "snapshot.other")
    evicted = doc.get("evicted", [])
    _require(isinstance(evicted, list) and len(evicted) <= MAX_SCHEMAS_PER_MESSAGE, "snapshot.evicted")
    cpu = doc.get("cpu", {})
    _require(isinstance(cpu, dict), "snapshot.cpu")
    probe = doc.get("probe", {})
    _require(isinstance(probe, dict) and len(probe) <= MAX_PROBE_COUNTERS, "snapshot.probe")
    return Snapshot(
        seq=_count(doc.get("seq"), "snapshot.seq"),
        full=bool(doc.get("full", False)),
        backends=totals,
        schemas=_rows(rows),
        other={_name(k, "snapshot.other"): _spec_totals(r, "snapshot.other") for k, r in other.items()},
        evicted=tuple([_count(i, "snapshot.evicted") for i in evicted]),
        cpu=CpuSeconds(
            _seconds(cpu.get("user", 0), "snapshot.cpu"),
            _seconds(cpu.get("system", 0), "snapshot.cpu"),
            _seconds(cpu.get("probe", 0), "snapshot.cpu"),
        ),
        probe={k: _count(v, "snapshot.probe") for k, v in probe.items() if k in _COUNTERS},
        engine=_engine(doc.get("engine")),
        routes=_routes(doc.get("routes", [])),
        validation=_validation(doc.get("validation", {})),
        deaths=None if doc.get("deaths") is None else _count(doc["deaths"], "snapshot.deaths"),
        guard=_guard(doc.get("guard", [])),
    )


def validate(doc: dict[str, Any]) -> Message:
    """The typed message a decoded JSON object carries; raises Invalid naming the first problem."""
    _require(type(doc.get("v")) is int and doc["v"] == VERSION, "unsupported protocol version")  # not True
    kind = doc.get("kind")
    if kind == "hello":
        return _hello(doc)
    if kind == "schemas":
        return _schemas(doc)
    if kind == "snapshot":
        return _snapshot(doc)
    if kind == "auth":
        token = doc.get("token")
        _require(isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_CHARS, "auth: token")
        return Auth(str(token))
    raise Invalid("unknown kind")
