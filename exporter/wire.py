"""The probe-to-daemon protocol, version 1: constants both sides share and the daemon's validator.

One JSON object per line over a unix stream socket. On each connection the probe sends `hello`,
then `schemas` (metadata and text of every tracked schema, in chunks), then `snapshot` messages
about once a second. Values are cumulative since the engine process started, so a lost message or
a daemon restart loses nothing: the next snapshot carries the totals. A `full` snapshot carries
every tracked schema; the others only those that changed, plus the ids evicted into `other`.

    hello    {v, kind, instance, pid, pod, engine, engine_kind, engine_version, backends{name: version},
              probe_version}
    schemas  {v, kind, schemas: [{id, hash, shape, kind, backend, title, text|null, bytes, truncated}]}
    snapshot {v, kind, seq, full, backends: {name: {requests, hits, errors{reason: n}, compile, wait,
              mask (histograms: {buckets: [n...], sum}), in_progress, oldest_seconds}},
              schemas: [{id, requests, hits, errors, buckets, sum}], other: {backend: same without id},
              evicted: [id], cpu: {user, system}, probe: {name: n}}

Standard library only.
"""

from __future__ import annotations

import math
import re
from typing import Any

VERSION = 1
KINDS = ("hello", "schemas", "snapshot")
# Engine-level compile and wait buckets (the metric contract), then the per-schema coarse ones
# (0.005 exact so that "share above 5 ms" needs no interpolation), then per-step mask fill.
COMPILE_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
SCHEMA_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 2.5)
MASK_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
)  # fmt: skip
ERROR_REASONS = ("invalid_schema", "unsupported", "timeout", "internal")
REQUEST_KINDS = ("json", "json_object", "regex", "grammar", "choice", "structural_tag", "other")
PROBE_COUNTERS = ("internal_errors", "send_failures", "connects", "texts_dropped", "evicted", "dropped")
MAX_TEXT_CHARS = 256 * 1024
MAX_SCHEMAS_PER_MESSAGE = 100_000
_NAME = re.compile(r"^[A-Za-z0-9_.:/+-]{1,128}$")
_HASH = re.compile(r"^[0-9a-f]{12}$")


class Invalid(ValueError):
    """A message that is well-formed JSON but not a valid protocol message."""


def _need(cond: bool, what: str, problem: str = "") -> None:
    """Raises Invalid("what: problem") unless cond; the message is only built on failure."""
    if not cond:
        raise Invalid(f"{what}: {problem}" if problem else what)


_MAX_COUNT = 2**63


def _count(value: Any, what: str) -> int:
    # The checks are inline and the message built only on failure: this runs ~25 times per row.
    if type(value) is int and 0 <= value < _MAX_COUNT:
        return value
    raise Invalid(f"{what}: not a non-negative integer")


def _seconds(value: Any, what: str) -> float:
    if type(value) in (int, float) and math.isfinite(value) and value >= 0:
        return float(value)
    raise Invalid(f"{what}: bad number")


def _name(value: Any, what: str) -> str:
    _need(isinstance(value, str) and bool(_NAME.match(value)), what, "bad name")
    return str(value)


def _text(value: Any, what: str, limit: int = 256) -> str:
    _need(isinstance(value, str) and len(value) <= limit, what, "bad string")
    return str(value)


def _histogram(doc: Any, bounds: tuple[float, ...], what: str) -> dict[str, Any]:
    _need(isinstance(doc, dict), what, "not an object")
    buckets = doc.get("buckets")
    _need(isinstance(buckets, list) and len(buckets) == len(bounds) + 1, what, "bucket count")
    if not all(type(n) is int and 0 <= n < _MAX_COUNT for n in buckets):
        raise Invalid(f"{what}: not a non-negative integer")
    return {"buckets": list(buckets), "sum": _seconds(doc.get("sum"), what)}


def _errors(doc: Any, what: str) -> dict[str, int]:
    _need(isinstance(doc, dict) and set(doc) <= set(ERROR_REASONS), what, "bad error reasons")
    return {reason: _count(n, what) for reason, n in doc.items()}


def _row(doc: Any, what: str, with_id: bool) -> dict[str, Any]:
    _need(isinstance(doc, dict), what, "not an object")
    row: dict[str, Any] = {
        "requests": _count(doc.get("requests"), what),
        "hits": _count(doc.get("hits"), what),
        "errors": _errors(doc.get("errors", {}), what),
        **_histogram(doc, SCHEMA_BUCKETS, what),
    }
    _need(row["hits"] <= row["requests"], what, "more hits than requests")
    if with_id:
        row["id"] = _count(doc.get("id"), what)
    return row


def validate(doc: dict[str, Any]) -> dict[str, Any]:
    """A normalised copy of a decoded message; raises Invalid naming the first problem."""
    _need(doc.get("v") == VERSION, "unsupported protocol version")
    kind = doc.get("kind")
    if kind == "hello":
        backends = doc.get("backends", {})
        _need(isinstance(backends, dict) and len(backends) <= 16, "hello: backends")
        return {
            "kind": kind,
            "instance": _name(doc.get("instance"), "hello.instance"),
            "pid": _count(doc.get("pid"), "hello.pid"),
            "pod": _name(doc.get("pod"), "hello.pod"),
            "engine": _name(doc.get("engine"), "hello.engine"),
            "engine_kind": _name(doc.get("engine_kind"), "hello.engine_kind"),
            "engine_version": _text(doc.get("engine_version", ""), "hello.engine_version", 64),
            "backends": {
                _name(k, "hello.backends"): _text(v, "hello.backends", 64) for k, v in backends.items()
            },
            "probe_version": _text(doc.get("probe_version", ""), "hello.probe_version", 64),
        }
    if kind == "schemas":
        items = doc.get("schemas")
        if not isinstance(items, list) or len(items) > MAX_SCHEMAS_PER_MESSAGE:
            raise Invalid("schemas: list")
        out = []
        for item in items:
            _need(isinstance(item, dict), "schemas: item")
            text = item.get("text")
            _need(text is None or (isinstance(text, str) and len(text) <= MAX_TEXT_CHARS), "schemas.text")
            _need(isinstance(item.get("hash"), str) and bool(_HASH.match(item["hash"])), "schemas.hash")
            _need(isinstance(item.get("shape"), str) and bool(_HASH.match(item["shape"])), "schemas.shape")
            _need(item.get("kind") in REQUEST_KINDS, "schemas.kind")
            out.append(
                {
                    "id": _count(item.get("id"), "schemas.id"),
                    "hash": item["hash"],
                    "shape": item["shape"],
                    "kind": item["kind"],
                    "backend": _name(item.get("backend"), "schemas.backend"),
                    "title": _text(item.get("title", ""), "schemas.title", 1024),
                    "text": text,
                    "bytes": _count(item.get("bytes", 0), "schemas.bytes"),
                    "truncated": bool(item.get("truncated", False)),
                }
            )
        return {"kind": kind, "schemas": out}
    if kind == "snapshot":
        backends = doc.get("backends")
        if not isinstance(backends, dict) or len(backends) > 16:
            raise Invalid("snapshot.backends")
        engines = {}
        for name, b in backends.items():
            _need(isinstance(b, dict), "snapshot.backends item")
            engines[_name(name, "snapshot.backends")] = {
                "requests": _count(b.get("requests"), "backend.requests"),
                "hits": _count(b.get("hits"), "backend.hits"),
                "errors": _errors(b.get("errors", {}), "backend.errors"),
                "compile": _histogram(b.get("compile"), COMPILE_BUCKETS, "backend.compile"),
                "wait": _histogram(b.get("wait"), COMPILE_BUCKETS, "backend.wait"),
                "mask": _histogram(b.get("mask"), MASK_BUCKETS, "backend.mask"),
                "in_progress": _count(b.get("in_progress", 0), "backend.in_progress"),
                "oldest_seconds": _seconds(b.get("oldest_seconds", 0), "backend.oldest_seconds"),
            }
        rows = doc.get("schemas", [])
        _need(isinstance(rows, list) and len(rows) <= MAX_SCHEMAS_PER_MESSAGE, "snapshot.schemas")
        other = doc.get("other", {})
        _need(isinstance(other, dict) and len(other) <= 16, "snapshot.other")
        evicted = doc.get("evicted", [])
        _need(isinstance(evicted, list) and len(evicted) <= MAX_SCHEMAS_PER_MESSAGE, "snapshot.evicted")
        cpu = doc.get("cpu", {})
        _need(isinstance(cpu, dict), "snapshot.cpu")
        probe = doc.get("probe", {})
        _need(isinstance(probe, dict) and set(probe) <= set(PROBE_COUNTERS), "snapshot.probe")
        return {
            "kind": kind,
            "seq": _count(doc.get("seq"), "snapshot.seq"),
            "full": bool(doc.get("full", False)),
            "backends": engines,
            "schemas": [_row(r, "snapshot.schemas", True) for r in rows],
            "other": {_name(k, "snapshot.other"): _row(r, "snapshot.other", False) for k, r in other.items()},
            "evicted": [_count(i, "snapshot.evicted") for i in evicted],
            "cpu": {m: _seconds(cpu.get(m, 0), "snapshot.cpu") for m in ("user", "system")},
            "probe": {k: _count(v, "snapshot.probe") for k, v in probe.items()},
        }
    raise Invalid("unknown kind")
