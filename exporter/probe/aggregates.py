"""What the recorder aggregates compiles into, and each aggregate's wire form: bucket histograms,
a spec's counters, a backend's totals and the metadata shipped once per spec. Apart from
exporter/probe/recorder.py (the queues and the bookkeeping that feeds these) so that each stays one
readable module; like it, standard library only, cheap and never raising (it ships into engine pods).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from exporter.probe.spec_identity import SpecIdentity
from exporter.wire import COMPILE_BUCKETS, MASK_BUCKETS, MAX_TEXT_CHARS, SCHEMA_BUCKETS


class LiveHistogram:
    """Non-cumulative bucket counts (the last is +Inf) and a sum: observe() is one bisect."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def merge(self, other: LiveHistogram) -> None:
        for i, n in enumerate(other.counts):
            self.counts[i] += n
        self.total += other.total

    def to_wire(self) -> dict[str, Any]:
        return {"buckets": list(self.counts), "sum": self.total}


class SpecCounts:
    """Compile counters of one tracked spec, or of a backend's `other` (the specs folded away)."""

    __slots__ = (
        "deaths", "errors", "histogram", "hits", "misrouted", "refused", "rejected", "requests",
        "stall_seconds", "stalls",
    )  # fmt: skip

    def __init__(self) -> None:
        self.requests = 0
        self.hits = 0
        self.errors: dict[str, int] = {}
        self.histogram = LiveHistogram(SCHEMA_BUCKETS)
        self.rejected = 0  # grammar rejections after the compile
        self.refused = 0  # requests the engine refused: resolved to another backend (vLLM 0.33)
        self.misrouted = 0  # compiled by the engine's backend, not the one resolved to (vLLM 0.32)
        self.stalls = 0  # API server validations of STALL_SECONDS or more (vLLM's API server)
        self.stall_seconds = 0.0
        self.deaths = 0  # API server processes that died validating it

    def merge(self, other: SpecCounts) -> None:
        self.requests += other.requests
        self.hits += other.hits
        self.rejected += other.rejected
        self.refused += other.refused
        self.misrouted += other.misrouted
        self.stalls += other.stalls
        self.stall_seconds += other.stall_seconds
        self.deaths += other.deaths
        for reason, n in other.errors.items():
            self.errors[reason] = self.errors.get(reason, 0) + n
        self.histogram.merge(other.histogram)

    def to_wire(self) -> dict[str, Any]:
        doc = {
            "requests": self.requests,
            "hits": self.hits,
            "errors": dict(self.errors),
            "buckets": list(self.histogram.counts),
            "sum": self.histogram.total,
        }
        for name in ("rejected", "refused", "misrouted", "stalls", "stall_seconds", "deaths"):
            value = getattr(self, name)
            if value:
                doc[name] = value
        return doc


class TrackedSpec(SpecCounts):
    """One spec the engine compiled, under the id the daemon knows it by. `text` is the exact spec;
    one over MAX_TEXT_CHARS is kept only until its identity is computed, then dropped."""

    __slots__ = (
        "backend", "evicted", "id", "identity", "key", "kind", "length", "shipped", "text", "truncated",
        "warnings",
    )  # fmt: skip

    def __init__(self, spec_id: int, kind: str, backend: str, text: str, key: str = "") -> None:
        super().__init__()
        self.id = spec_id
        self.key = key
        self.evicted = False
        self.shipped = False  # its metadata or a row of it went to the daemon: its eviction is news there
        self.kind = kind
        self.backend = backend
        self.text: str | None = text
        self.length = len(text)
        self.truncated = self.length > MAX_TEXT_CHARS
        self.identity: SpecIdentity | None = None
        self.warnings: tuple[str, ...] = ()  # what the backend said it ignores (llguidance), once


@dataclass(frozen=True, slots=True)
class SpecMetadata:
    """What the shipper sends about a tracked spec once per connection (the `schemas` message)."""

    id: int
    kind: str
    backend: str
    identity: SpecIdentity
    text: str | None  # None when over MAX_TEXT_CHARS
    length: int
    truncated: bool
    warnings: tuple[str, ...] = ()


class BackendStats:
    """Engine-level totals of one backend: compile counts and the compile, wait and mask histograms."""

    __slots__ = ("compile", "errors", "hits", "mask", "miss", "rejections", "requests", "wait")

    def __init__(self) -> None:
        self.requests = 0
        self.hits = 0
        self.errors: dict[str, int] = {}
        self.rejections: dict[str, int] = {}  # REJECTION_REASONS -> grammar advances that failed
        self.compile = LiveHistogram(COMPILE_BUCKETS)
        self.miss = LiveHistogram(COMPILE_BUCKETS)  # the calls that compiled: how slow a real compile is
        self.wait = LiveHistogram(COMPILE_BUCKETS)
        self.mask = LiveHistogram(MASK_BUCKETS)

    def to_wire(self) -> dict[str, Any]:
        """The snapshot's form; the in-flight fields are filled in by the caller."""
        return {
            "requests": self.requests,
            "hits": self.hits,
            "errors": dict(self.errors),
            "compile": self.compile.to_wire(),
            "miss": self.miss.to_wire(),
            "rejections": dict(self.rejections),
            "wait": self.wait.to_wire(),
            "mask": self.mask.to_wire(),
            "in_progress": 0,
            "oldest_seconds": 0.0,
        }
