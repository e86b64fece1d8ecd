"""What the daemon knows from the probes: per engine the latest cumulative totals, per node the
schema-level series, bounded to the top `max_schemas` schema hashes by recent compile seconds.

Engine-level families are the probe's cumulative values as they are. Schema-level series are the
daemon's own accumulators fed with increments, so that a schema moving in or out of the top set
never makes a counter jump or go backwards: while a hash is exposed its increments go to its own
series, otherwise to `schema_hash="other"` of the same pod, engine and backend. A demoted hash's
series stays on /metrics, frozen, for `linger` seconds (2 minutes), so that every scraper reads its
final value: the last value seen of every series ever exposed adds up to the engines' totals. Then
it is kept aside (as long as its score is remembered) and resumes from that value if the hash comes
back. At most `max_schemas` hashes are active and `max_schemas` lingering: a demotion waits for room.
When a daemon starts (or restarts) the first snapshot of each engine is an increment from zero, so
every counter is back at the engine's cumulative value. Thread-safe: the event loop applies messages,
the scrape reads.

A snapshot's rows are cumulative, so a snapshot only records each changed row as the engine's latest
(a dictionary update); the increments, the series, the families and the ranking take them once per
read of the store (each scrape, /schemas, expiry), one increment per changed spec, however many
snapshots moved it (at one snapshot a second and a scrape every 15 s, 15 rows become one). Evicted
rows are folded out of `other` at the same time, so the totals stay exact.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from exporter import wire
from exporter.daemon.receiver.admission import BackendNames, Limits, Tally, hello_labels
from exporter.daemon.receiver.analysis import AnalysisView, FamilyView, SchemaAnalysis
from exporter.daemon.receiver.ranking import LINGER, Ranking
from exporter.daemon.receiver.rollup import FamilyRollup, RollupView
from exporter.daemon.receiver.schema_check import Identities, SpecChecker
from exporter.daemon.receiver.series import (
    NO_CALLS,
    SeriesAccumulator,
    SeriesTotals,
    add,
    delta,
    subtract,
)
from exporter.daemon.receiver.verdicts import NodeVerdicts
from exporter.engines.grammars import backends
from exporter.schema import identity

log = logging.getLogger("gdx.collector.probe")
OTHER = "other"
DEFAULT_MAX_SCHEMAS = 50
DEFAULT_MAX_FAMILIES = 50
DEFAULT_ENGINE_TTL = 120.0
MAX_SPECS_PER_ENGINE = 20_000
MAX_PENDING = 4_096  # rows and evictions an engine holds unattributed before they are taken at once
SEEN_LIMIT = 100_000  # hashes remembered for schemas_first_seen_total (about 10 MB at most)


def who(namespace: str, pod: str, engine: str) -> str:
    """An engine in a log line: `pod=NS/POD engine=E` (`pod=POD` where the namespace is unknown)."""
    return f"pod={namespace + '/' if namespace else ''}{pod} engine={engine}"


class SeriesKey(NamedTuple):
    """The labels of one schema-level series (`namespace` empty where the probe does not know it)."""

    namespace: str
    pod: str
    engine: str
    backend: str
    schema_hash: str  # or OTHER


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """What `schema_info` says of a schema hash: never a value from inside the schema."""

    schema_hash: str
    shape_hash: str
    kind: str
    backend: str
    title: str  # read by the daemon from the text it hashed, volatile words masked; empty when off
    verified: bool = True  # the daemon recomputed the hashes from the text (False: not sent, too long)
    screens: tuple[identity.Screen, ...] = ()  # the guard's first test, from the text (node verdicts)


@dataclass(frozen=True, slots=True)
class EngineView:
    hello: wire.Hello
    snapshot: wire.Snapshot | None  # None until its first snapshot


@dataclass(frozen=True, slots=True)
class StoreView:
    """One consistent copy of the store for a scrape."""

    engines: tuple[EngineView, ...]
    series: Mapping[SeriesKey, SeriesTotals]
    info: Mapping[str, SchemaInfo]  # every hash with a series on /metrics
    recent: Mapping[str, float]  # the same hashes' decayed compile seconds: the ranking
    serialisations: Mapping[str, int]  # the same hashes' exact strings (the most in one engine)
    analysis: AnalysisView
    mismatched: frozenset[str]  # exposed hashes whose requests met another backend than they resolved to
    families: RollupView  # family-level series, ranking and window
    family_analysis: FamilyView  # what each family on /metrics is, what varies, its finding
    tracked: int
    first_seen_total: int
    evicted_total: int
    refused: Mapping[str, int] = field(default_factory=dict)  # admission.REFUSALS -> count
    sanitised: Mapping[str, int] = field(default_factory=dict)  # admission.SANITISED -> count


def with_namespaces(view: StoreView, namespaces: Mapping[str, str]) -> StoreView:
    """Pure: the view with each engine that did not say its namespace given the one discovery knows for
    its pod name (`namespaces`: pod name -> namespace, names unique on the node). A probe without
    GDX_POD_NAMESPACE and without a mounted service account still gets the label its pod's
    passed-through series and `target_up` carry, so the two join on (instance, namespace, pod)."""
    if not namespaces or all(e.hello.namespace for e in view.engines):
        return view
    engines = tuple(
        EngineView(dataclasses.replace(e.hello, namespace=namespaces[e.hello.pod]), e.snapshot)
        if not e.hello.namespace and e.hello.pod in namespaces
        else e
        for e in view.engines
    )

    def named(key: SeriesKey) -> SeriesKey:
        known = not key.namespace and key.pod in namespaces
        return key._replace(namespace=namespaces[key.pod]) if known else key

    series = {named(key): totals for key, totals in view.series.items()}
    return dataclasses.replace(view, engines=engines, series=series)


@dataclass
class EngineState:
    """One engine process as its probe described it; the handle its connection passes back."""

    instance: str
    hello: wire.Hello
    last_seen: float
    names: BackendNames  # the backend names it may use (admission.MAX_ENGINE_BACKENDS)
    connected: bool = True
    peer: tuple[str, ...] = ()  # who created it, as the kernel or the API server says (see `owner`)
    specs: dict[int, SchemaInfo] = field(default_factory=dict)  # the probe's spec id -> its schema
    last_rows: dict[int, tuple[str, wire.SpecTotals]] = field(default_factory=dict)  # id -> (backend, row)
    last_other: dict[str, wire.SpecTotals] = field(default_factory=dict)  # backend -> its `other` row
    snapshot: wire.Snapshot | None = None
    # since the last attribution: each changed spec's latest row, the latest `other`, the ids evicted
    pending: dict[int, tuple[SchemaInfo, wire.SpecTotals]] = field(default_factory=dict)
    pending_other: dict[str, wire.SpecTotals] = field(default_factory=dict)
    pending_evicted: list[int] = field(default_factory=list)
    pending_at: float = 0.0  # when the latest of them arrived

    per_hash: dict[str, int] = field(default_factory=dict)  # schema hash -> its specs among `specs`

    @property
    def key(self) -> tuple[str, str, str]:
        return self.hello.namespace, self.hello.pod, self.hello.engine

    @property
    def slot(self) -> tuple[str, str, str]:
        """Where the store keeps it: its instance within its pod, so that a pod naming another's
        instance is another engine, never that one reconnecting."""
        return self.hello.namespace, self.hello.pod, self.instance

    @property
    def owner(self) -> tuple[str, ...]:
        """The budget it counts against (--probe.max-engines-per-pod): its pod as its real peer and its
        hello name it. Over TCP the peer is the TokenReview's pod (the hello's pod is the review's);
        on the socket it is the peer's uid (SO_PEERCRED) and the pod the hello claims, which any process
        can make up: a claim uses up only its own uid's budget for that pod, never another uid's."""
        return (*self.peer, self.hello.namespace, self.hello.pod)

    @property
    def has_pending(self) -> bool:
        return bool(self.pending or self.pending_other or self.pending_evicted)

    def add_spec(self, spec_id: int, info: SchemaInfo) -> None:
        self.drop_spec(spec_id)
        self.specs[spec_id] = info
        self.per_hash[info.schema_hash] = self.per_hash.get(info.schema_hash, 0) + 1

    def drop_spec(self, spec_id: int) -> None:
        info = self.specs.pop(spec_id, None)
        if info is not None:
            left = self.per_hash[info.schema_hash] - 1
            if left:
                self.per_hash[info.schema_hash] = left
            else:
                del self.per_hash[info.schema_hash]

    def clear_specs(self) -> None:
        self.specs.clear()
        self.per_hash.clear()


class ProbeStore:
    def __init__(
        self,
        max_schemas: int = DEFAULT_MAX_SCHEMAS,
        engine_ttl: float = DEFAULT_ENGINE_TTL,
        titles: bool = True,
        analysis: SchemaAnalysis | None = None,
        linger: float = LINGER,
        max_families: int = DEFAULT_MAX_FAMILIES,
        limits: Limits | None = None,
        compile_budget: float = 0.0,
        verdict_ttl: float = 86400.0,
    ) -> None:
        self.analysis = analysis or SchemaAnalysis()
        self.limits = limits or Limits()
        self.tally = Tally()
        self.checker = SpecChecker()
        self.max_schemas = max(1, max_schemas)
        self.engine_ttl = engine_ttl
        self.titles = titles
        self._lock = threading.Lock()
        self.engines: dict[tuple[str, str, str], EngineState] = {}  # by slot
        self.series: dict[SeriesKey, SeriesAccumulator] = {}
        self.retired: dict[SeriesKey, SeriesAccumulator] = {}  # demoted series, resumed on return
        self.ranking = Ranking(self.max_schemas, linger)
        # what killed or froze an API server of the node, or compiled over the budget (verdicts.py)
        self.verdicts = NodeVerdicts(max_age=verdict_ttl, compile_budget=compile_budget)
        self.families = FamilyRollup(max_families, self.analysis.window, linger)
        self.info: dict[str, SchemaInfo] = {}
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.first_seen_total = 0
        self.dropped_engines_total = 0

    @property
    def exposed(self) -> set[str]:
        """Schema hashes whose increments go to their own series (pending rows taken first)."""
        with self._lock:
            self._attribute_pending()
            return self.ranking.exposed

    @property
    def evicted_total(self) -> int:
        with self._lock:
            self._attribute_pending()
            return self.ranking.evicted_total

    @property
    def lingering(self) -> dict[str, float]:
        """Demoted schema hashes still on /metrics (frozen), until when (pending rows taken first)."""
        with self._lock:
            self._attribute_pending()
            return self.ranking.lingering

    # ---- messages -------------------------------------------------------------------------------

    def hello(self, msg: wire.Hello, now: float, *, peer: tuple[str, ...] = ()) -> EngineState | None:
        """The engine a connection's hello names, or None when it would go over a bound (counted): the
        connection's later messages are then rejected. `peer`: who is at the other end, as the listener
        knows it (a reviewed pod, a socket uid; `EngineState.owner`)."""
        with self._lock:
            msg = hello_labels(msg, self.tally, who(msg.namespace, msg.pod, msg.engine))
            engine = self.engines.get((msg.namespace, msg.pod, msg.instance))
            if engine is not None:  # the same process reconnecting: keep its totals, it resends metadata
                engine.hello, engine.last_seen, engine.connected = msg, now, True
                engine.clear_specs()
                return engine
            for other in list(self.engines.values()):
                if other.key == (msg.namespace, msg.pod, msg.engine):  # restarted: its counters reset
                    if other.connected and other.peer != peer:
                        # another peer naming a live engine: never a restart (a pod cannot end another's)
                        self.tally.refuse("engine_taken", f"{who(*other.key)}: named by another peer")
                        return None
                    if other.connected and other.hello.pid != msg.pid:
                        # not a restart: two live processes under one name (one engine label per
                        # process: GDX_PROBE_ENGINE), and only the newer one is shown from now on
                        log.warning(
                            "two connected probes claim %s (pids %d and %d): showing the newer one",
                            who(*other.key), other.hello.pid, msg.pid,
                        )  # fmt: skip
                    else:
                        log.info("engine %s restarted (new probe instance)", who(*other.key))
                    self._drop(other)
            if not self._room_for(msg, peer):
                return None
            engine = EngineState(msg.instance, msg, now, BackendNames(self.limits.max_backends), peer=peer)
            self.engines[engine.slot] = engine
            log.info("probe connected: %s kind=%s pid=%d", who(*engine.key), msg.engine_kind, msg.pid)
            return engine

    def _room_for(self, msg: wire.Hello, peer: tuple[str, ...]) -> bool:
        """Whether a new engine fits its pod's bound (per owner: `EngineState.owner`) and the node's: a
        disconnected engine (the longest silent) makes room; connected ones never do, so a pod cannot
        push out another's."""
        owner = (*peer, msg.namespace, msg.pod)
        for reason, limit, mine in (
            ("engines_per_pod", self.limits.max_engines_per_pod, lambda e: e.owner == owner),
            ("engines_per_node", self.limits.max_engines, lambda e: True),
        ):
            counted = [e for e in self.engines.values() if mine(e)]
            if len(counted) < limit:
                continue
            gone = [e for e in counted if not e.connected]
            if not gone:
                named = who(msg.namespace, msg.pod, msg.engine)
                self.tally.refuse(reason, f"{named}: {limit} engines already")
                return False
            oldest = min(gone, key=lambda e: e.last_seen)
            log.info("probe of %s disconnected: dropped to make room (%s)", who(*oldest.key), reason)
            self._drop(oldest)
        return True

    def schemas(
        self,
        engine: EngineState,
        msg: wire.SchemasMessage,
        now: float,
        identities: Identities | None = None,
    ) -> None:
        """The specs of `msg`, each checked against its text (`identities`: the texts' identities, from
        `checker.identities` off the loop; None: computed here, for a small message)."""
        with self._lock:
            engine.last_seen = now
            if identities is not None and len(identities) != len(msg.schemas):
                identities = None  # not this message's: checked here
            versions = backends.versions_of(engine.hello.backends)  # its lint's backend tables
            for n, item in enumerate(msg.schemas):
                checked = self.checker.check(item, identities[n] if identities is not None else None)
                if checked is None:
                    self.tally.refuse(
                        "schema_hash_mismatch",
                        f"{who(*engine.key)}: a {item.kind} text that does not hash to {item.hash}",
                    )
                    engine.drop_spec(item.id)
                    continue
                if not engine.names.admit(item.backend):
                    named = f"{who(*engine.key)}: a spec of backend {item.backend}"
                    self.tally.refuse("backends_per_engine", named)
                    engine.drop_spec(item.id)
                    continue
                if item.title and identity.sanitize_title(item.title) != item.title:
                    self.tally.changed("title", who(*engine.key))  # our probe sends the documented form
                title = checked.label if self.titles else ""
                info = SchemaInfo(
                    checked.schema_hash, checked.shape_hash, item.kind, item.backend, title, checked.verified,
                    checked.screens,
                )  # fmt: skip
                engine.add_spec(item.id, info)
                if len(engine.specs) > MAX_SPECS_PER_ENGINE:  # a probe tracks at most a few hundred
                    engine.drop_spec(next(iter(engine.specs)))
                if info.schema_hash not in self.seen:
                    self.first_seen_total += 1
                    self.seen[info.schema_hash] = None
                    if len(self.seen) > SEEN_LIMIT:
                        self.seen.popitem(last=False)
                else:
                    self.seen.move_to_end(info.schema_hash)
                known = self.info.get(info.schema_hash)
                if known is None or (info.verified and not known.verified):  # a checked text wins a claim
                    self.info[info.schema_hash] = info
                if not info.verified:
                    continue  # nothing to analyse: its text was not sent
                # analysed once, off the loop; the store keeps no schema text
                # linted with the backend tables of the engine that first reports it
                self.analysis.submit(
                    info.schema_hash, info.shape_hash, info.kind, item.text, checked.title, versions=versions,
                    warnings=item.warnings,
                )  # fmt: skip

    def snapshot(self, engine: EngineState, msg: wire.Snapshot, now: float) -> None:
        with self._lock:
            engine.last_seen = now
            msg, dropped = engine.names.bound(msg)
            if dropped:
                self.tally.refuse("backends_per_engine", f"{who(*engine.key)}: {dropped} entries", dropped)
            engine.snapshot = msg
            self._observe_verdicts(engine, msg, now)
            if msg.full:  # a new connection's first: it names every tracked spec, missing ones vanished
                self._attribute_engine(engine)
                self._end_lingering(now)
                self._attribute_increments(engine, self._full_increments(engine, msg), now)
                for i in msg.evicted:
                    engine.drop_spec(i)
                return
            if self.ranking.lingering or self.ranking.pinned:  # they end on time, scraped or not
                self._end_lingering(now)
            pending = engine.pending
            specs = engine.specs
            for row in msg.schemas:
                info = specs.get(row.id)
                if info is not None:  # metadata not here yet: counted once it is (from zero), or via `other`
                    pending[row.id] = (info, row)
            if msg.evicted:
                engine.pending_evicted.extend(msg.evicted)
                for i in msg.evicted:
                    engine.drop_spec(i)
            if msg.other:
                engine.pending_other.update(msg.other)
            engine.pending_at = now
            if len(pending) + len(engine.pending_evicted) > MAX_PENDING:
                self._attribute_engine(engine)

    def _observe_verdicts(self, engine: EngineState, msg: wire.Snapshot, now: float) -> None:
        """A death, a long validation or (with a compile budget) a long compile, from the spec's
        cumulative counts, is a node verdict as the snapshot arrives (verdicts.py), not when a scrape
        attributes the rows: the guards need it before."""
        verdicts = self.verdicts
        if msg.deaths is None:  # not an API server: its compiles
            budget = verdicts.compile_budget
            if budget > 0:
                for row in msg.schemas:
                    compiles = row.requests - row.hits
                    if compiles > 0 and row.sum >= budget * compiles:
                        info = engine.specs.get(row.id)
                        if info is not None:
                            verdicts.observe_compiles(info.schema_hash, compiles, row.sum, info.screens, now)
            return
        for row in msg.schemas:
            if row.deaths or row.stalls:
                info = engine.specs.get(row.id)
                if info is not None:
                    verdicts.observe(info.schema_hash, row.deaths, row.stalls, row.stall_seconds, now)

    def _attribute_pending(self) -> None:
        """Every engine's pending rows into the series, families and ranking, oldest first."""
        for engine in sorted(self.engines.values(), key=lambda e: e.pending_at):
            self._attribute_engine(engine)

    def _attribute_engine(self, engine: EngineState) -> None:
        if not engine.has_pending:
            return
        now = engine.pending_at
        self._end_lingering(now)
        increments = self._increments(
            engine, engine.pending.values(), engine.pending_evicted, engine.pending_other
        )
        engine.pending, engine.pending_other, engine.pending_evicted = {}, {}, []
        self._attribute_increments(engine, increments, now)

    def _attribute_increments(
        self, engine: EngineState, increments: list[tuple[str, str, SeriesTotals]], now: float
    ) -> None:
        """Exposed hashes first (what they compiled while exposed stays theirs if one is demoted in this
        pass), then the biggest first."""
        namespace, pod, eng = engine.key
        exposed = self.ranking.exposed
        for schema_hash, backend, increment in sorted(
            increments, key=lambda item: (item[0] not in exposed, -item[2].sum)
        ):
            self._attribute(SeriesKey(namespace, pod, eng, backend, schema_hash), increment, now)

    def _full_increments(
        self, engine: EngineState, msg: wire.Snapshot
    ) -> list[tuple[str, str, SeriesTotals]]:
        """The increments of a full snapshot: a known id it does not list vanished."""
        listed = {row.id for row in msg.schemas}
        vanished = [i for i in engine.last_rows if i not in listed]
        rows = [(info, row) for row in msg.schemas if (info := engine.specs.get(row.id)) is not None]
        return self._increments(engine, rows, vanished, msg.other)

    @staticmethod
    def _increments(
        engine: EngineState,
        rows: Iterable[tuple[SchemaInfo, wire.SpecTotals]],
        vanished: Iterable[int],
        other: Mapping[str, wire.SpecTotals],
    ) -> list[tuple[str, str, SeriesTotals]]:
        """(schema hash or OTHER, backend, increment) of every row that grew since it was last taken.
        A row the probe evicted moves into its `other`: its last value is taken off `other`'s growth,
        so that nothing is counted twice."""
        increments: list[tuple[str, str, SeriesTotals]] = []
        last_rows = engine.last_rows
        for info, row in rows:
            last = last_rows.get(row.id)
            increment = delta(row, last[1] if last is not None else NO_CALLS)
            if increment is None:
                continue
            last_rows[row.id] = (info.backend, row)
            increments.append((info.schema_hash, info.backend, increment))
        folded: dict[str, SeriesTotals] = {}
        for i in vanished:
            gone = last_rows.pop(i, None)
            if gone is not None:
                backend, last_row = gone
                folded[backend] = add(folded.get(backend, NO_CALLS), last_row)
        for backend, totals in other.items():
            increment = delta(totals, engine.last_other.get(backend, NO_CALLS))
            engine.last_other[backend] = totals
            if increment is not None:
                increment = subtract(increment, folded.get(backend, NO_CALLS))
                if increment.requests or increment.sum or increment.off_compile:
                    increments.append((OTHER, backend, increment))
        return increments

    def disconnected(self, engine: EngineState) -> None:
        with self._lock:
            engine.connected = False

    # ---- exposure -------------------------------------------------------------------------------

    def _attribute(self, key: SeriesKey, increment: SeriesTotals, now: float) -> None:
        schema_hash = key.schema_hash
        self.families.add(None if schema_hash == OTHER else schema_hash, increment, now)
        if schema_hash != OTHER:
            info = self.info.get(schema_hash)
            if info is not None:
                self.analysis.seen(schema_hash, info.shape_hash, now)
            exposed = self.ranking.credit(schema_hash, increment.sum, now)
            if (
                increment.off_compile
            ):  # refused, misrouted, stalled or killed a server: named, whatever it compiled
                exposed = self.ranking.pin(schema_hash, now)
            if not exposed:
                key = key._replace(schema_hash=OTHER)
        series = self.series.get(key)
        if series is None:
            series = self.series[key] = self.retired.pop(key) if key in self.retired else SeriesAccumulator()
        series.add(increment)
        if self.ranking.crowded():
            self._prune_scores(now)

    def _end_lingering(self, now: float) -> None:
        """Demoted hashes whose final values have been on show long enough leave /metrics (Prometheus
        marks them stale); their accumulators are kept aside to resume from if they come back."""
        done = self.ranking.end_lingering(now)
        if not done:
            return
        for key in [k for k in self.series if k.schema_hash in done]:
            self.retired[key] = self.series.pop(key)

    def _prune_scores(self, now: float) -> None:
        keep_set = self.ranking.prune(now)
        self.retired = {k: a for k, a in self.retired.items() if k.schema_hash in keep_set}
        live = {h for e in self.engines.values() for h in e.per_hash}
        self.info = {h: m for h, m in self.info.items() if h in keep_set or h in live}

    def settle(self, now: float) -> None:
        """After the analysis ran: held increments join their families (called by each refresh)."""
        with self._lock:
            self._attribute_pending()
            self.families.settle(self.analysis.family_of, self.analysis.take_merges(), now)

    # ---- lifecycle ------------------------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Drops engines whose probe has been silent for longer than the TTL, and ends lingering."""
        with self._lock:
            self._attribute_pending()
            self._end_lingering(now)
            for engine in list(self.engines.values()):
                if now - engine.last_seen > self.engine_ttl:
                    silent = now - engine.last_seen
                    log.info("probe of %s silent for %.0fs: dropped", who(*engine.key), silent)
                    self._drop(engine)

    def _drop(self, engine: EngineState) -> None:
        self._attribute_engine(engine)  # what it sent counts in the families and the ranking
        self.engines.pop(engine.slot, None)
        self.dropped_engines_total += 1
        ident = engine.key
        if not any(e.key == ident for e in self.engines.values()):
            for key in [k for k in self.series if (k.namespace, k.pod, k.engine) == ident]:
                del self.series[key]
            for key in [k for k in self.retired if (k.namespace, k.pod, k.engine) == ident]:
                del self.retired[key]

    def view(self, now: float | None = None) -> StoreView:
        """A consistent copy for one scrape (at `now`, monotonic; tests pass their own clock)."""
        with self._lock:
            self._attribute_pending()
            live_hashes = set().union(*(e.per_hash.keys() for e in self.engines.values()))
            exposed = self.ranking.shown()  # every hash with a series on /metrics
            now = time.monotonic() if now is None else now
            families = self.families.view(now)
            mismatched = frozenset(k.schema_hash for k, a in self.series.items()
                                   if k.schema_hash != OTHER and (a.refused or a.misrouted))  # fmt: skip
            return StoreView(
                engines=tuple(EngineView(e.hello, e.snapshot) for e in self.engines.values()),
                series={k: a.totals() for k, a in self.series.items()},
                info={h: self.info[h] for h in exposed if h in self.info},
                recent={h: self.ranking.score(h, now) for h in exposed},
                serialisations=self._serialisations(exposed),
                analysis=self.analysis.view(now, exposed, mismatched),
                mismatched=mismatched,
                families=families,
                family_analysis=self.analysis.family_view(families.usage, self.titles),
                tracked=len(live_hashes),
                first_seen_total=self.first_seen_total,
                evicted_total=self.ranking.evicted_total,
                refused=dict(self.tally.refused),
                sanitised=dict(self.tally.sanitised),
            )

    def _serialisations(self, schema_hashes: set[str]) -> dict[str, int]:
        """Per hash, the most specs of it one engine tracks: each is another exact string that compiles."""
        most: dict[str, int] = {}
        for h in schema_hashes:
            n = max((e.per_hash.get(h, 0) for e in self.engines.values()), default=0)
            if n:
                most[h] = n
        return most
