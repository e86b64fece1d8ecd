"""Schema-level increments rolled up into family-level series: what the product ranks by.

Injection spreads a family's cost over many cheap schema hashes, so the family is the unit of blame
(docs/families.md). Every increment the store attributes to a schema hash (exposed or folded into
`other`) is held here until the analysis has put that hash in a family (at the next scrape's
refresh), then it feeds the family's accumulators, its decayed score and its window. Families are
exposed like schema hashes: the top `size` by recent compile seconds, the rest in `family="other"`,
demoted ones lingering frozen (`ranking.Ranking`), so the counters never go backwards. When the
analysis finds that two families are one (a tool-list family reaching its quorum), the absorbed
family's score moves to the one that absorbs it and its series lingers, frozen, then goes.
Not thread-safe: the store's lock guards it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from exporter.daemon.receiver.ranking import LINGER, Ranking
from exporter.daemon.receiver.series import NO_CALLS, SeriesAccumulator, SeriesTotals, add

OTHER = "other"
MAX_PENDING = 20_000  # hashes whose increments wait for their family; beyond, they go to `other`
MAX_WAIT = 120.0  # seconds a hash waits for the analysis; then it is a family of its own
MAX_VARIANTS = 1_000  # variants remembered per family in the window
RECENT_VARIANTS = 50  # the most recent variants compared for what varies
BUCKETS = 10  # the window is counted in this many buckets

Resolve = Callable[[str], str | None]  # schema hash -> its family, None while it waits for analysis


@dataclass(frozen=True, slots=True)
class FamilyUsage:
    """A family's traffic within the window: what `dynamic_schema` weighs."""

    requests: int
    hits: int
    seconds: float
    variants: int  # distinct schema hashes compiled
    recent: tuple[str, ...]  # the most recent of them, oldest first (at most RECENT_VARIANTS)
    span: float  # seconds between the first arrivals of the oldest and the newest of them


@dataclass(frozen=True, slots=True)
class RollupView:
    series: Mapping[str, SeriesTotals]  # family or OTHER -> totals, every family on /metrics
    recent: Mapping[str, float]  # the same families' decayed compile seconds
    usage: Mapping[str, FamilyUsage]  # the same families' window


@dataclass
class FamilyWindow:
    variants: OrderedDict[str, float] = field(default_factory=OrderedDict)  # hash -> last compile
    arrived: dict[str, float] = field(default_factory=dict)  # hash -> first compile (same keys)
    buckets: deque[list[float]] = field(default_factory=deque)  # [start, requests, hits, seconds]

    def add(self, schema_hash: str, increment: SeriesTotals, now: float, width: float, since: float) -> None:
        """An increment settled `now`, whose first compile reached the daemon at `since`."""
        self.variants[schema_hash] = now
        self.variants.move_to_end(schema_hash)
        self.arrived.setdefault(schema_hash, since)
        if len(self.variants) > MAX_VARIANTS:
            gone, _ = self.variants.popitem(last=False)
            self.arrived.pop(gone, None)
        if not self.buckets or now - self.buckets[-1][0] >= width:
            self.buckets.append([now, 0.0, 0.0, 0.0])
            if len(self.buckets) > BUCKETS + 1:
                self.buckets.popleft()
        last = self.buckets[-1]
        last[1] += increment.requests
        last[2] += increment.hits
        last[3] += increment.sum

    def merge(self, other: FamilyWindow) -> None:
        for h, at in other.variants.items():
            if self.variants.get(h, 0.0) < at:
                self.variants[h] = at
        for h, first in other.arrived.items():
            self.arrived[h] = min(first, self.arrived.get(h, first))
        self.variants = OrderedDict(sorted(self.variants.items(), key=lambda item: item[1])[-MAX_VARIANTS:])
        self.arrived = {h: self.arrived[h] for h in self.variants if h in self.arrived}
        merged = sorted([*self.buckets, *other.buckets], key=lambda b: b[0])[-(BUCKETS + 1) :]
        self.buckets = deque(list(b) for b in merged)

    def usage(self, now: float, window: float) -> FamilyUsage:
        live = [h for h, at in self.variants.items() if now - at <= window]
        counted = [b for b in self.buckets if now - b[0] <= window]
        firsts = [self.arrived.get(h, now) for h in live]
        return FamilyUsage(
            requests=int(sum(b[1] for b in counted)),
            hits=int(sum(b[2] for b in counted)),
            seconds=sum(b[3] for b in counted),
            variants=len(live),
            recent=tuple(live[-RECENT_VARIANTS:]),
            span=max(firsts) - min(firsts) if firsts else 0.0,
        )


class FamilyRollup:
    def __init__(self, size: int, window: float, linger: float = LINGER) -> None:
        self.ranking = Ranking(size, linger)
        self.window = window
        self.series: dict[str, SeriesAccumulator] = {}
        self.retired: dict[str, SeriesAccumulator] = {}  # demoted families, resumed on return
        self.windows: dict[str, FamilyWindow] = {}
        self.pending: OrderedDict[str, tuple[float, SeriesAccumulator]] = (
            OrderedDict()
        )  # hash -> (since, sum)
        self.unassigned = NO_CALLS  # increments with no schema hash (the probe's own `other` row)

    def add(self, schema_hash: str | None, increment: SeriesTotals, now: float) -> None:
        """An increment of a schema hash (None: of the engines' `other` row), held until `settle`."""
        if schema_hash is None:
            self.unassigned = add(self.unassigned, increment)
            return
        found = self.pending.get(schema_hash)
        if found is None:
            found = self.pending[schema_hash] = (now, SeriesAccumulator())
        found[1].add(increment)
        if len(self.pending) > MAX_PENDING:
            _, (_, dropped) = self.pending.popitem(last=False)
            self.unassigned = add(self.unassigned, dropped.totals())

    def settle(self, resolve: Resolve, merges: Iterable[tuple[str, str]], now: float) -> None:
        """Moves held increments into their families (after the analysis ran), applies merges."""
        for family in self.ranking.end_lingering(now):
            accumulator = self.series.pop(family, None)
            if accumulator is not None and family in self.ranking.scores:
                self.retired[family] = accumulator
        for old, new in merges:
            self._merge(old, new, now)
        if self.unassigned.requests or self.unassigned.sum or self.unassigned.off_compile:
            self._series(OTHER).add(self.unassigned)
            self.unassigned = NO_CALLS
        for schema_hash, (since, accumulated) in list(self.pending.items()):
            resolved = resolve(schema_hash)
            if resolved is None and now - since < MAX_WAIT:
                continue
            family = resolved or schema_hash
            del self.pending[schema_hash]
            held = accumulated.totals()
            exposed = self.ranking.credit(family, held.sum, now)
            if held.off_compile:
                exposed = self.ranking.pin(family, now)
            self._series(family if exposed else OTHER).add(held)
            window = self.windows.get(family)
            if window is None:
                window = self.windows[family] = FamilyWindow()
            window.add(schema_hash, held, now, self.window / BUCKETS, since)
        if self.ranking.crowded():
            kept = self.ranking.prune(now)
            self.retired = {f: a for f, a in self.retired.items() if f in kept}
            self.windows = {f: w for f, w in self.windows.items() if f in kept}

    def _series(self, family: str) -> SeriesAccumulator:
        series = self.series.get(family)
        if series is None:
            series = self.series[family] = (
                self.retired.pop(family) if family in self.retired else SeriesAccumulator()
            )
        return series

    def _merge(self, old: str, new: str, now: float) -> None:
        self.ranking.merge(old, new, now)
        self.retired.pop(old, None)  # an absorbed family does not come back
        if old not in self.ranking.lingering:
            self.series.pop(old, None)
        window = self.windows.pop(old, None)
        if window is not None:
            self.windows.setdefault(new, FamilyWindow()).merge(window)

    def view(self, now: float) -> RollupView:
        shown = self.ranking.shown()
        return RollupView(
            series={f: a.totals() for f, a in self.series.items()},
            recent={f: self.ranking.score(f, now) for f in shown},
            usage={f: self.windows[f].usage(now, self.window) for f in shown if f in self.windows},
        )
