"""In-process bookkeeping of grammar compiles: cheap on the hot path, bounded, never raising.

An engine thread only appends its observation to a queue (atomic under the GIL, no lock, no hashing)
and marks in-flight compiles; the shipper thread drains the queue about once a second into the
aggregates, keyed by the exact spec string the engine passed (the key the engine's own cache uses).
At most `max_schemas` specs are tracked; the least recently used are folded into a per-backend
`other` row so that totals always add up. Everything is cumulative since the process started.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
import time
from bisect import bisect_left
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from exporter.wire import COMPILE_BUCKETS, MASK_BUCKETS, MAX_TEXT_CHARS, SCHEMA_BUCKETS

_perf = time.perf_counter
DEFAULT_MAX_SCHEMAS = 500
MAX_PENDING = 200_000  # observations queued between drains (about 1 s); beyond, dropped and counted
WAIT, MASK = 0, 1
# A hit returns in microseconds; the cheapest miss measured over the Llama 3 vocabulary took 0.36 ms
# (regex "[0-9]"), a typical one 1-100 ms. Faster than this is a hit; slower calls ask the second
# signal (did the compiler's cache size change?) where the backend has one.
DEFAULT_HIT_MAX_SECONDS = 0.0002


def _seconds(value: float) -> float:
    """A duration that keeps sums finite: NaN and negatives become 0 (the daemon rejects NaN)."""
    value = float(value)
    return value if value >= 0 and value != float("inf") else 0.0


class Histogram:
    """Non-cumulative bucket counts (the last is +Inf) and a sum: observe() is one bisect."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def merge(self, other: Histogram) -> None:
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.total += other.total

    def doc(self) -> dict[str, Any]:
        return {"buckets": list(self.counts), "sum": self.total}


class Row:
    """Per-schema (or folded `other`) counters."""

    __slots__ = ("errors", "hist", "hits", "requests")

    def __init__(self) -> None:
        self.requests = 0
        self.hits = 0
        self.errors: dict[str, int] = {}
        self.hist = Histogram(SCHEMA_BUCKETS)

    def merge(self, other: Row) -> None:
        self.requests += other.requests
        self.hits += other.hits
        for reason, n in other.errors.items():
            self.errors[reason] = self.errors.get(reason, 0) + n
        self.hist.merge(other.hist)

    def doc(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "hits": self.hits,
            "errors": dict(self.errors),
            "buckets": list(self.hist.counts),
            "sum": self.hist.total,
        }


class Entry(Row):
    """One tracked spec. `text` is kept up to MAX_TEXT_CHARS; longer ones keep it only until the
    shipper has hashed them."""

    __slots__ = (
        "backend",
        "evicted",
        "hash",
        "id",
        "key",
        "kind",
        "length",
        "shape",
        "text",
        "title",
        "truncated",
    )

    def __init__(self, ident: int, kind: str, backend: str, text: str, key: str = "") -> None:
        super().__init__()
        self.id = ident
        self.key = key
        self.evicted = False
        self.kind = kind
        self.backend = backend
        self.text: str | None = text
        self.length = len(text)
        self.truncated = self.length > MAX_TEXT_CHARS
        self.hash = ""
        self.shape = ""
        self.title = ""


class BackendStats:
    __slots__ = ("compile", "errors", "hits", "mask", "requests", "wait")

    def __init__(self) -> None:
        self.requests = 0
        self.hits = 0
        self.errors: dict[str, int] = {}
        self.compile = Histogram(COMPILE_BUCKETS)
        self.wait = Histogram(COMPILE_BUCKETS)
        self.mask = Histogram(MASK_BUCKETS)


def spec_key(kind: str, backend: str, spec: str) -> str:
    """The hot-path key: the spec itself for the common case, else prefixed so kinds never collide.
    Specs over MAX_TEXT_CHARS are keyed by their SHA-256 so the text need not stay in memory."""
    if len(spec) > MAX_TEXT_CHARS:
        return (
            "\x01"
            + kind
            + "\x00"
            + backend
            + "\x00"
            + hashlib.sha256(spec.encode("utf-8", "replace")).hexdigest()
        )
    if kind == "json" and backend == "xgrammar":
        return spec
    return "\x00" + kind + "\x00" + backend + "\x00" + spec


class Recorder:
    """Thread-safe cumulative state of one engine process."""

    def __init__(
        self, max_schemas: int = DEFAULT_MAX_SCHEMAS, hit_max_seconds: float = DEFAULT_HIT_MAX_SECONDS
    ) -> None:
        self.max_schemas = max(1, max_schemas)
        self.hit_max_seconds = hit_max_seconds
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._ids = itertools.count(1)
        self.tokens = itertools.count(1)
        self.inflight: dict[int, tuple[float, str]] = {}
        self._backends: dict[str, BackendStats] = {}
        self._other: dict[str, Row] = {}
        self._dirty: set[Entry] = set()
        self._unsent: list[Entry] = []  # entries whose metadata has not been shipped yet
        self._evicted: list[int] = []
        self.counters = {"internal_errors": 0, "evicted": 0, "texts_dropped": 0, "dropped": 0}
        self.pending: deque[tuple[Entry | None, str, str, str | None, float, bool, str | None]] = deque()
        self.timings: deque[tuple[int, Any, float]] = deque()
        self.backend_name: Callable[[Any], str] = lambda obj: type(obj).__name__

    # ---- hot path -------------------------------------------------------------------------------

    def begin(self, backend: str) -> int:
        """Marks a compile as running; a plain dict store, atomic under the GIL."""
        token = next(self.tokens)
        self.inflight[token] = (_perf(), backend)
        return token

    def finish(
        self,
        token: int,
        backend: str,
        kind: str,
        spec: str,
        elapsed: float,
        hit: bool,
        error: str | None = None,
    ) -> None:
        """Records one finished compile call: a few atomic operations, no lock, never raises.
        A spec already tracked is passed on as its entry, so the string is not kept alive."""
        self.inflight.pop(token, None)
        pending = self.pending
        if len(pending) >= MAX_PENDING:  # the shipper thread is stuck: drop rather than block or grow
            self.counters["dropped"] += 1
            return
        entry = self._entries.get(spec) if kind == "json" and backend == "xgrammar" else None
        if entry is not None:
            pending.append((entry, backend, kind, None, elapsed, hit, error))
        else:
            pending.append((None, backend, kind, spec, elapsed, hit, error))

    def observe_wait(self, backend: str, seconds: float) -> None:
        if len(self.timings) < MAX_PENDING:
            self.timings.append((WAIT, backend, seconds))

    def observe_mask(self, backend: Any, seconds: float) -> None:
        """`backend` may be an object that `backend_name` resolves later, off the engine's step."""
        if len(self.timings) < MAX_PENDING:
            self.timings.append((MASK, backend, seconds))

    def drain(self) -> None:
        """Folds queued observations into the aggregates (shipper thread, snapshot, tests)."""
        with self._lock:
            pending, timings = self.pending, self.timings
            while pending:
                try:
                    self._apply(*pending.popleft())
                except Exception:
                    self.counters["internal_errors"] += 1
            while timings:
                try:
                    which, backend, seconds = timings.popleft()
                    if not isinstance(backend, str):
                        backend = self.backend_name(backend)
                    hist = self._stats(backend).wait if which == WAIT else self._stats(backend).mask
                    hist.observe(_seconds(seconds))
                except Exception:
                    self.counters["internal_errors"] += 1

    def _stats(self, backend: str) -> BackendStats:
        stats = self._backends.get(backend)
        if stats is None:
            stats = self._backends[backend] = BackendStats()
        return stats

    def _apply(
        self,
        entry: Entry | None,
        backend: str,
        kind: str,
        spec: str | None,
        elapsed: float,
        hit: bool,
        error: str | None,
    ) -> None:
        elapsed = _seconds(elapsed)  # before any counter moves: a bad value changes nothing
        if entry is None:
            key = spec_key(kind, backend, spec or "")
            entry = self._entries.get(key)
            if entry is None:
                entry = self._track(key, kind, backend, spec or "")
            else:
                self._entries.move_to_end(key)
        elif entry.evicted:  # folded into `other` after the engine thread looked it up
            other = self._other.get(entry.backend)
            if other is None:
                other = self._other[entry.backend] = Row()
            entry = other  # type: ignore[assignment]
        else:
            self._entries.move_to_end(entry.key)
        stats = self._stats(backend)
        entry.requests += 1
        stats.requests += 1
        if hit:
            entry.hits += 1
            stats.hits += 1
        if error is not None:
            entry.errors[error] = entry.errors.get(error, 0) + 1
            stats.errors[error] = stats.errors.get(error, 0) + 1
        entry.hist.observe(elapsed)
        stats.compile.observe(elapsed)
        if isinstance(entry, Entry):
            self._dirty.add(entry)

    def _track(self, key: str, kind: str, backend: str, spec: str) -> Entry:
        entry = Entry(next(self._ids), kind, backend, spec, key)
        self._entries[key] = entry
        self._unsent.append(entry)
        while len(self._entries) > self.max_schemas:
            _, old = self._entries.popitem(last=False)
            other = self._other.get(old.backend)
            if other is None:
                other = self._other[old.backend] = Row()
            other.merge(old)
            self._dirty.discard(old)
            old.evicted = True
            self._evicted.append(old.id)
            self.counters["evicted"] += 1
        if len(self._evicted) > 4 * self.max_schemas:
            # Nobody is shipping (no daemon): the list is only useful to a live connection.
            del self._evicted[: -self.max_schemas]
        if len(self._unsent) > 2 * self.max_schemas:
            # No daemon is taking them; every tracked entry is re-sent on the next connection anyway.
            del self._unsent[: -self.max_schemas]
        return entry

    # ---- shipper side ---------------------------------------------------------------------------

    def take_unsent(self, everything: bool) -> list[Entry]:
        """Entries whose metadata must be shipped: all tracked ones on a new connection."""
        self.drain()
        with self._lock:
            if everything:
                self._unsent.clear()
                return list(self._entries.values())
            out = self._unsent
            self._unsent = []
            return out

    def snapshot(self, full: bool) -> dict[str, Any]:
        """Cumulative totals: every tracked row when `full`, else the rows changed since the last call."""
        self.drain()
        now = _perf()
        with self._lock:
            rows = list(self._entries.values()) if full else list(self._dirty)
            self._dirty.clear()
            evicted = [] if full else list(self._evicted)
            self._evicted.clear()
            schemas = [{"id": e.id, **e.doc()} for e in rows]
            other = {name: row.doc() for name, row in self._other.items()}
            inflight = list(self.inflight.values())
            backends: dict[str, Any] = {}
            for name, s in self._backends.items():
                backends[name] = {
                    "requests": s.requests,
                    "hits": s.hits,
                    "errors": dict(s.errors),
                    "compile": s.compile.doc(),
                    "wait": s.wait.doc(),
                    "mask": s.mask.doc(),
                    "in_progress": 0,
                    "oldest_seconds": 0.0,
                }
        for started, name in inflight:
            b = backends.get(name)
            if b is None:
                b = backends[name] = {
                    "requests": 0,
                    "hits": 0,
                    "errors": {},
                    "compile": Histogram(COMPILE_BUCKETS).doc(),
                    "wait": Histogram(COMPILE_BUCKETS).doc(),
                    "mask": Histogram(MASK_BUCKETS).doc(),
                    "in_progress": 0,
                    "oldest_seconds": 0.0,
                }
            b["in_progress"] += 1
            b["oldest_seconds"] = max(b["oldest_seconds"], now - started)
        cpu = os.times()
        return {
            "full": full,
            "backends": backends,
            "schemas": schemas,
            "other": other,
            "evicted": evicted,
            "cpu": {"user": cpu.user, "system": cpu.system},
        }

    def totals(self) -> dict[str, dict[str, Any]]:
        """Per backend: requests, hits, errors and observation counts so far. Read-only (unlike
        `snapshot`, it marks nothing as shipped): what simulated engines compare the daemon against."""
        self.drain()
        with self._lock:
            return {
                name: {
                    "requests": s.requests,
                    "hits": s.hits,
                    "errors": dict(s.errors),
                    "compile_count": sum(s.compile.counts),
                    "mask_count": sum(s.mask.counts),
                    "wait_count": sum(s.wait.counts),
                }
                for name, s in self._backends.items()
            }

    def tracked(self) -> int:
        self.drain()
        return len(self._entries)
