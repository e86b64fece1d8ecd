"""In-process bookkeeping of grammar compiles: cheap on the hot path, bounded, never raising.

An engine thread only appends its observation to a queue (atomic under the GIL, no lock, no hashing)
and marks in-flight compiles; the shipper thread drains the queue about once a second into the
aggregates, keyed by the exact spec string the engine passed (the key the engine's own cache uses).
At most `max_schemas` specs are tracked (`GDX_PROBE_TRACKED_SPECS`); the least recently used are
folded into a per-backend `other` count so that totals always add up. A spec's identity (its hashes
and title) is computed once, when the shipper first takes its metadata. Everything is cumulative
since the process started.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from exporter.probe.aggregates import BackendStats, LiveHistogram, SpecCounts, SpecMetadata, TrackedSpec
from exporter.probe.facts import EngineFacts
from exporter.probe.spec_identity import identify
from exporter.wire import (
    COMPILE_BUCKETS,
    MAX_BACKENDS,
    MAX_GUARD_SCHEMAS,
    MAX_ROUTES,
    MAX_TEXT_CHARS,
    STALL_SECONDS,
)

_perf = time.perf_counter
DEFAULT_TRACKED_SPECS = 500
MAX_PENDING = 200_000  # observations queued between drains (about 1 s); beyond, dropped and counted
# A call's spec string is queued as it is, its lookup left to the shipper thread, while the queue holds
# fewer than FAST_PENDING calls and the spec is at most FAST_CHARS long: at most 16 MB of strings kept
# alive until the next drain. Past either, the calling thread looks the spec up itself and queues the
# tracked spec (one hash of the string, the cost the fast path saves), so nothing grows with the rate.
FAST_PENDING = 2048
FAST_CHARS = 8192
WAIT, MASK = 0, 1  # which histogram a queued timing goes to
# What vLLM's API server validation of a request can resolve to (the product's backend names), or
# `rejected` (it raised: HTTP 400).
VALIDATION_OUTCOMES = ("xgrammar", "llguidance", "outlines", "rejected")
# A hit returns in microseconds; the cheapest miss measured over the Llama 3 vocabulary took 0.36 ms
# (regex "[0-9]"), a typical one 1-100 ms. Faster than this is a hit; slower calls ask the second
# signal (did the compiler's cache size change?) where the backend has one.
DEFAULT_HIT_MAX_SECONDS = 0.0002


def _seconds(value: float) -> float:
    """A duration that keeps sums finite: NaN and negatives become 0 (the daemon rejects NaN)."""
    value = float(value)
    return value if value >= 0 and value != float("inf") else 0.0


# One finished compile call as queued by an engine thread: the spec already tracked (else None),
# backend, kind, the spec string (when not tracked yet), seconds, hit, error reason, and what the
# backend said it ignores (llguidance's grammar warnings; empty elsewhere).
Observation = tuple[TrackedSpec | None, str, str, str | None, float, bool, str | None, tuple[str, ...]]
# One structured request as vLLM routed it (grammar_init): the backend asked for, the one resolved to,
# the engine's, the outcome (wire.ROUTE_OUTCOMES), and the kind and spec where it did not compile
# with the backend it resolved to (empty otherwise: the common case keeps no string alive).
Routed = tuple[str, str, str, str, str, str]
MAX_WARNINGS, MAX_WARNING_CHARS = 16, 512


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


# vLLM's API server's guard (guard.py): bounded validations run, internal errors (each let the request
# through); what it refused, by reason, action and schema, is `guarded` (count_guarded)
GUARD_COUNTERS = ("guard_validations", "guard_errors")


class Recorder:
    """Thread-safe cumulative state of one engine process."""

    def __init__(
        self,
        max_schemas: int = DEFAULT_TRACKED_SPECS,
        hit_max_seconds: float = DEFAULT_HIT_MAX_SECONDS,
        locate_cgroup: bool = True,
    ) -> None:
        self.max_schemas = max(1, max_schemas)
        self.hit_max_seconds = hit_max_seconds
        self._lock = threading.Lock()
        self._specs: OrderedDict[str, TrackedSpec] = OrderedDict()
        self._spec_ids = itertools.count(1)
        self.tokens = itertools.count(1)
        self.inflight: dict[int, tuple[float, str]] = {}
        self._backends: dict[str, BackendStats] = {}
        self._other: dict[str, SpecCounts] = {}
        self._changed: set[TrackedSpec] = set()
        self._unsent: list[TrackedSpec] = []  # specs whose metadata has not been shipped yet
        self._evicted: list[int] = []
        self.counters = {"internal_errors": 0, "evicted": 0, "texts_dropped": 0, "dropped": 0}
        self.counters.update(dict.fromkeys(GUARD_COUNTERS, 0))
        self.pending: deque[Observation] = deque()
        # (backend, reason, kind, spec) of each grammar failure: rare, bounded
        self.rejected: deque[tuple[str, str, str, str]] = deque(maxlen=MAX_PENDING)
        self.timings: deque[tuple[int, Any, float]] = deque()
        self.routed: deque[Routed] = deque()
        # (resolved backend, seconds, kind, spec) of each API server validation; the spec only when slow
        self.validations: deque[tuple[str, float, str, str]] = deque()
        self._validation: dict[str, LiveHistogram] = {}
        # A process that validates (vLLM's API server): its predecessors' deaths over the pod's life,
        # from the marker ledger (0 when none); None elsewhere.
        self.server_deaths: int | None = None
        # False in a process that only validates (vLLM's API server): no compile pool or cache of its
        # own, and its container's CPU cgroup is the engine's, counted there already.
        self.sizing = True
        self._routes: dict[tuple[str, str, str, str], int] = {}
        # (reason, action, schema hash) -> requests (guard.py); the hash "" holds the zeros set at
        # arming and what is refused beyond wire.MAX_GUARD_SCHEMAS schemas
        self.guarded: dict[tuple[str, str, str], int] = {}
        self.backend_name: Callable[[Any], str] = lambda obj: type(obj).__name__
        self.facts = EngineFacts(locate=locate_cgroup)

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
        warnings: tuple[str, ...] = (),
    ) -> None:
        """Records one finished compile call: a few atomic operations, no lock, never raises. The spec
        is looked up by the shipper thread (FAST_PENDING, FAST_CHARS); past those bounds, here, and a
        spec already tracked is passed on as its TrackedSpec, so the string is not kept alive."""
        self.inflight.pop(token, None)
        pending = self.pending
        queued = len(pending)
        if queued < FAST_PENDING and len(spec) <= FAST_CHARS:
            pending.append((None, backend, kind, spec, elapsed, hit, error, warnings))
            return
        if queued >= MAX_PENDING:  # the shipper thread is stuck: drop rather than block or grow
            self.counters["dropped"] += 1
            return
        tracked = self._specs.get(spec) if kind == "json" and backend == "xgrammar" else None
        if tracked is not None:
            pending.append((tracked, backend, kind, None, elapsed, hit, error, warnings))
        else:
            pending.append((None, backend, kind, spec, elapsed, hit, error, warnings))

    def reject(self, backend: str, reason: str, kind: str = "", spec: str = "") -> None:
        """A compiled grammar refused to advance (`rejected`: the engine ends the request) or raised
        (`error`), for the spec it was compiled from when known. Only on that failure path: one
        lock-free append."""
        self.rejected.append((backend, reason, kind, spec))

    def route(
        self, requested: str, resolved: str, backend: str, outcome: str, kind: str = "", spec: str = ""
    ) -> None:
        """A structured request vLLM's router resolved to `resolved`, on an engine whose backend is
        `backend`: one lock-free append per request."""
        routed = self.routed
        if len(routed) >= MAX_PENDING:
            self.counters["dropped"] += 1
            return
        routed.append((requested, resolved, backend, outcome, kind, spec))

    def validated(self, backend: str, seconds: float, kind: str = "", spec: str = "") -> None:
        """One structured-output validation in vLLM's API server, by the backend it resolved to; the
        spec given only when it took STALL_SECONDS or more. One lock-free append."""
        if len(self.validations) >= MAX_PENDING:
            self.counters["dropped"] += 1
            return
        self.validations.append((backend, seconds, kind, spec))

    def count_guarded(self, reason: str, action: str, schema_hash: str) -> None:
        """One request the guard refused (or would have); at most MAX_GUARD_SCHEMAS schemas named."""
        key = (reason, action, schema_hash)
        guarded = self.guarded
        if key not in guarded and len({k[2] for k in guarded if k[2]} | {schema_hash}) > MAX_GUARD_SCHEMAS:
            key = (reason, action, "")
        guarded[key] = guarded.get(key, 0) + 1

    def validates(self) -> None:
        """This process validates requests (vLLM's API server): its histograms and its death count are
        there at zero from the first snapshot, so a first slow validation or death moves increase()."""
        with self._lock:
            self._expect_validations()
            if self.server_deaths is None:
                self.server_deaths = 0

    def died(self, backend: str, kind: str, spec: str, deaths: int = 1) -> None:
        """Previous processes of this API server died validating `spec` (their markers, found at arming)."""
        with self._lock:
            self._counts_of(backend, kind, spec).deaths += deaths

    def observe_wait(self, backend: str, seconds: float) -> None:
        if len(self.timings) < MAX_PENDING:
            self.timings.append((WAIT, backend, seconds))

    def observe_mask(self, backend: Any, seconds: float) -> None:
        """`backend` may be an object that `backend_name` resolves later, off the engine's step."""
        if len(self.timings) < MAX_PENDING:
            self.timings.append((MASK, backend, seconds))

    # ---- shipper thread: folding in -------------------------------------------------------------

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
                    stats = self._stats(backend)
                    (stats.wait if which == WAIT else stats.mask).observe(_seconds(seconds))
                except Exception:
                    self.counters["internal_errors"] += 1
            routed = self.routed
            while routed:
                try:
                    self._apply_route(*routed.popleft())
                except Exception:
                    self.counters["internal_errors"] += 1
            validations = self.validations
            while validations:
                try:
                    self._apply_validation(*validations.popleft())
                except Exception:
                    self.counters["internal_errors"] += 1
            rejected = self.rejected
            while rejected:
                backend, reason, kind, spec = rejected.popleft()
                counts = self._stats(backend).rejections
                counts[reason] = counts.get(reason, 0) + 1
                if spec:  # the spec's own count: tracked, else its backend's `other`
                    tracked = self._specs.get(spec_key(kind, backend, spec))
                    if tracked is not None and not tracked.evicted:
                        tracked.rejected += 1
                        self._changed.add(tracked)
                    else:
                        self._other_of(backend).rejected += 1

    def _apply_route(
        self, requested: str, resolved: str, backend: str, outcome: str, kind: str, spec: str
    ) -> None:
        key = (requested, resolved, backend, outcome)
        if key in self._routes or len(self._routes) < MAX_ROUTES:
            self._routes[key] = self._routes.get(key, 0) + 1
        else:
            self.counters["dropped"] += 1
        if outcome == "compiled" or not spec:
            return
        # The spec's own count, under the engine's backend (the one that compiles it, if anything does):
        # a refused spec is tracked though it never compiles here.
        counts = self._counts_of(backend, kind, spec)
        if outcome == "rejected":
            counts.refused += 1
        else:
            counts.misrouted += 1

    def _apply_validation(self, backend: str, seconds: float, kind: str, spec: str) -> None:
        seconds = _seconds(seconds)
        if not self._validation:
            self._expect_validations()
        histogram = self._validation.get(backend)
        if histogram is None:
            if len(self._validation) >= MAX_BACKENDS:
                self.counters["dropped"] += 1
                return
            histogram = self._validation[backend] = LiveHistogram(COMPILE_BUCKETS)
        histogram.observe(seconds)
        if spec and seconds >= STALL_SECONDS:
            counts = self._counts_of(backend, kind, spec)
            counts.stalls += 1
            counts.stall_seconds += seconds

    def _expect_validations(self) -> None:
        """Every resolution's histogram at zero, so that a first slow one moves increase()."""
        for name in VALIDATION_OUTCOMES:
            self._validation.setdefault(name, LiveHistogram(COMPILE_BUCKETS))

    def _counts_of(self, backend: str, kind: str, spec: str) -> SpecCounts:
        """The counts of a spec met off the compile path (refused, misrouted, slow to validate, died
        on): tracked, so the daemon names it, though nothing compiles it here; its backend's `other`
        once evicted."""
        key = spec_key(kind, backend, spec)
        tracked = self._specs.get(key)
        if tracked is None:
            tracked = self._track(key, kind, backend, spec)
        if tracked.evicted:
            return self._other_of(backend)
        self._changed.add(tracked)
        return tracked

    def _stats(self, backend: str) -> BackendStats:
        stats = self._backends.get(backend)
        if stats is None:
            stats = self._backends[backend] = BackendStats()
        return stats

    def _other_of(self, backend: str) -> SpecCounts:
        other = self._other.get(backend)
        if other is None:
            other = self._other[backend] = SpecCounts()
        return other

    def _apply(
        self,
        tracked: TrackedSpec | None,
        backend: str,
        kind: str,
        spec: str | None,
        elapsed: float,
        hit: bool,
        error: str | None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        elapsed = _seconds(elapsed)  # before any counter moves: a bad value changes nothing
        counts: SpecCounts
        if tracked is None:
            key = spec_key(kind, backend, spec or "")
            tracked = self._specs.get(key)
            if tracked is None:
                tracked = self._track(key, kind, backend, spec or "")
            else:
                self._specs.move_to_end(key)
            counts = tracked
        elif tracked.evicted:  # folded into `other` after the engine thread looked it up
            counts = self._other_of(tracked.backend)
        else:
            self._specs.move_to_end(tracked.key)
            counts = tracked
        stats = self._stats(backend)
        counts.requests += 1
        stats.requests += 1
        if hit:
            counts.hits += 1
            stats.hits += 1
        if error is not None:
            counts.errors[error] = counts.errors.get(error, 0) + 1
            stats.errors[error] = stats.errors.get(error, 0) + 1
        counts.histogram.observe(elapsed)
        stats.compile.observe(elapsed)
        if not hit:
            stats.miss.observe(elapsed)
        if isinstance(counts, TrackedSpec):
            self._changed.add(counts)
            if warnings and not counts.warnings and counts.identity is None:  # before its metadata ships
                counts.warnings = tuple(str(w)[:MAX_WARNING_CHARS] for w in warnings[:MAX_WARNINGS])

    def _track(self, key: str, kind: str, backend: str, spec: str) -> TrackedSpec:
        tracked = TrackedSpec(next(self._spec_ids), kind, backend, spec, key)
        self._specs[key] = tracked
        self._unsent.append(tracked)
        while len(self._specs) > self.max_schemas:
            _, old = self._specs.popitem(last=False)
            self._other_of(old.backend).merge(old)
            self._changed.discard(old)
            old.evicted = True
            if old.shipped:  # a spec the daemon never heard of needs no word of its eviction
                self._evicted.append(old.id)
            self.counters["evicted"] += 1
        # No cap on `_evicted`: it holds only shipped specs, at most twice max_schemas between two
        # snapshots (those tracked at the last one, and those whose metadata the next cycle took first),
        # max_schemas with nobody shipping; a cap dropped notices in a burst of new specs between two
        # ships, and the daemon counted the evicted specs' last rows twice.
        if len(self._unsent) > 2 * self.max_schemas:
            # An evicted spec's counts are in `other`: its metadata is of no use, and dropping it bounds
            # the list (by max_schemas: the rest are tracked) whether or not a daemon is taking it. A
            # tracked one is kept: dropped, its rows waited on the daemon for metadata that never came.
            self._unsent = [spec for spec in self._unsent if not spec.evicted]
        return tracked

    # ---- shipper thread: what to send -----------------------------------------------------------

    def take_unsent(self, everything: bool) -> list[SpecMetadata]:
        """Metadata of the specs not shipped yet; of every tracked one on a new connection."""
        self.drain()
        with self._lock:
            if everything:
                self._unsent.clear()
                specs = list(self._specs.values())
            else:
                specs, self._unsent = self._unsent, []
            return [self._metadata(spec) for spec in specs]

    def _metadata(self, spec: TrackedSpec) -> SpecMetadata:
        """Computes a spec's identity on its first shipping, once (a text over the limit, kept only
        for this, is dropped then)."""
        spec.shipped = True
        identity = spec.identity
        if identity is None:
            identity = spec.identity = identify(spec.kind, spec.text or "")
            if spec.truncated:
                spec.text = None
                self.counters["texts_dropped"] += 1
        text = None if spec.truncated else spec.text
        return SpecMetadata(
            spec.id, spec.kind, spec.backend, identity, text, spec.length, spec.truncated, spec.warnings
        )

    def snapshot(self, full: bool) -> dict[str, Any]:
        """Cumulative totals: every tracked spec when `full`, else the specs changed since the last call."""
        self.drain()
        now = _perf()
        with self._lock:
            specs = list(self._specs.values()) if full else list(self._changed)
            self._changed.clear()
            for spec in specs:
                spec.shipped = True
            evicted = [] if full else list(self._evicted)
            self._evicted.clear()
            schemas = [{"id": spec.id, **spec.to_wire()} for spec in specs]
            other = {name: counts.to_wire() for name, counts in self._other.items()}
            backends = {name: stats.to_wire() for name, stats in self._backends.items()}
            routes = [
                {"requested": r[0], "resolved": r[1], "backend": r[2], "outcome": r[3], "requests": n}
                for r, n in self._routes.items()
            ]
            inflight = list(self.inflight.values())
            validation = {name: h.to_wire() for name, h in self._validation.items()}
        for started, name in inflight:
            backend = backends.get(name)
            if backend is None:
                backend = backends[name] = BackendStats().to_wire()
            backend["in_progress"] += 1
            backend["oldest_seconds"] = max(backend["oldest_seconds"], now - started)
        cpu = os.times()
        # The thread taking snapshots is the shipper: its CPU is the probe's own work off the engine's
        # threads (folding observations in, snapshots, sends). The wrappers' microseconds on the
        # engine's threads are in `user`/`system` only.
        probe_cpu = time.thread_time()
        return {
            "full": full,
            "backends": backends,
            "schemas": schemas,
            "other": other,
            "evicted": evicted,
            "cpu": {"user": cpu.user, "system": cpu.system, "probe": probe_cpu},
            "engine": self.facts.to_wire() if self.sizing else None,
            **({"routes": routes} if routes else {}),
            **({"validation": validation} if validation else {}),
            **({"deaths": self.server_deaths} if self.server_deaths is not None else {}),
            **(
                {"guard": guard}
                if (
                    guard := [
                        {
                            "reason": k[0],
                            "action": k[1],
                            "requests": n,
                            **({"schema_hash": k[2]} if k[2] else {}),
                        }
                        for k, n in list(self.guarded.items())
                    ]
                )
                else {}
            ),
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
        return len(self._specs)
