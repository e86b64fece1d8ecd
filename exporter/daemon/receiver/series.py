"""Compile-call counts over wire.SCHEMA_BUCKETS: the probe's cumulative rows, the increments the
daemon derives from them, and the monotonic accumulators its schema- and family-level series are."""

from __future__ import annotations

from operator import add as _plus
from operator import sub as _minus
from typing import NamedTuple, Protocol

from exporter import wire


class Counts(Protocol):
    """Compile calls over wire.SCHEMA_BUCKETS: a probe's cumulative row or the daemon's series."""

    @property
    def requests(self) -> int: ...
    @property
    def hits(self) -> int: ...
    @property
    def buckets(self) -> tuple[int, ...]: ...
    @property
    def sum(self) -> float: ...
    @property
    def failed(self) -> int: ...
    @property
    def rejected(self) -> int: ...
    @property
    def refused(self) -> int: ...
    @property
    def misrouted(self) -> int: ...
    @property
    def stalls(self) -> int: ...
    @property
    def stall_seconds(self) -> float: ...
    @property
    def deaths(self) -> int: ...


class SeriesTotals(NamedTuple):
    """A schema-level series' values (or an increment to them). A named tuple: one is built per
    changed row of every snapshot (wire.SpecTotals says why)."""

    requests: int
    hits: int
    buckets: tuple[int, ...]  # non-cumulative, over wire.SCHEMA_BUCKETS and +Inf
    sum: float
    failed: int = 0  # compile calls that failed
    rejected: int = 0  # grammar rejections after the compile
    refused: int = 0  # requests the engine rejected for resolving to another backend (vLLM 0.33)
    misrouted: int = 0  # requests compiled by another backend than they resolved to (vLLM 0.32)
    stalls: int = 0  # vLLM API server validations of wire.STALL_SECONDS or more
    stall_seconds: float = 0.0  # their seconds: the API server answered nothing meanwhile
    deaths: int = 0  # API server processes that died validating it

    @property
    def mismatched(self) -> bool:
        return bool(self.refused or self.misrouted)

    @property
    def off_compile(self) -> bool:
        """Anything counted off the compile path (routing, the API server's validation)."""
        return bool(self.refused or self.misrouted or self.stalls or self.deaths)


NO_CALLS = SeriesTotals(0, 0, (0,) * (len(wire.SCHEMA_BUCKETS) + 1), 0.0)


class SeriesAccumulator:
    """A schema-level series: monotonic accumulators."""

    __slots__ = (
        "buckets", "deaths", "failed", "hits", "misrouted", "refused", "rejected", "requests",
        "stall_seconds", "stalls", "sum",
    )  # fmt: skip

    def __init__(self) -> None:
        self.requests = 0
        self.hits = 0
        self.buckets = [0] * (len(wire.SCHEMA_BUCKETS) + 1)
        self.sum = 0.0
        self.failed = 0
        self.rejected = 0
        self.refused = 0
        self.misrouted = 0
        self.stalls = 0
        self.stall_seconds = 0.0
        self.deaths = 0

    def add(self, increment: Counts) -> None:
        self.requests += increment.requests
        self.hits += increment.hits
        self.buckets = list(map(_plus, self.buckets, increment.buckets))  # equal lengths: validated
        self.sum += increment.sum
        self.failed += increment.failed
        self.rejected += increment.rejected
        self.refused += increment.refused
        self.misrouted += increment.misrouted
        self.stalls += increment.stalls
        self.stall_seconds += increment.stall_seconds
        self.deaths += increment.deaths

    def totals(self) -> SeriesTotals:
        return SeriesTotals(
            self.requests, self.hits, tuple(self.buckets), self.sum, self.failed, self.rejected,
            self.refused, self.misrouted, self.stalls, self.stall_seconds, self.deaths,
        )  # fmt: skip


def delta(new: Counts, old: Counts) -> SeriesTotals | None:
    """new - old field by field; None when any field went backwards (not the same cumulative row)."""
    requests, hits = new.requests - old.requests, new.hits - old.hits
    failed, rejected = new.failed - old.failed, new.rejected - old.rejected
    refused, misrouted = new.refused - old.refused, new.misrouted - old.misrouted
    stalls, deaths = new.stalls - old.stalls, new.deaths - old.deaths
    buckets = tuple(map(_minus, new.buckets, old.buckets))  # equal lengths: validated on the wire
    if min(requests, hits, failed, rejected, refused, misrouted, stalls, deaths) < 0 or min(buckets) < 0:
        return None
    return SeriesTotals(
        requests, hits, buckets, max(0.0, new.sum - old.sum), failed, rejected, refused, misrouted, stalls,
        max(0.0, new.stall_seconds - old.stall_seconds), deaths,
    )  # fmt: skip


def subtract(row: Counts, part: Counts) -> SeriesTotals:
    return SeriesTotals(
        max(0, row.requests - part.requests),
        max(0, row.hits - part.hits),
        tuple([max(0, a - b) for a, b in zip(row.buckets, part.buckets, strict=True)]),
        max(0.0, row.sum - part.sum),
        max(0, row.failed - part.failed),
        max(0, row.rejected - part.rejected),
        max(0, row.refused - part.refused),
        max(0, row.misrouted - part.misrouted),
        max(0, row.stalls - part.stalls),
        max(0.0, row.stall_seconds - part.stall_seconds),
        max(0, row.deaths - part.deaths),
    )


def add(a: Counts, b: Counts) -> SeriesTotals:
    return SeriesTotals(
        a.requests + b.requests,
        a.hits + b.hits,
        tuple(map(_plus, a.buckets, b.buckets)),
        a.sum + b.sum,
        a.failed + b.failed,
        a.rejected + b.rejected,
        a.refused + b.refused,
        a.misrouted + b.misrouted,
        a.stalls + b.stalls,
        a.stall_seconds + b.stall_seconds,
        a.deaths + b.deaths,
    )
