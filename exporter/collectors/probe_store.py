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
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from exporter.collectors.probe_analysis import SchemaAnalysis
from exporter.wire import SCHEMA_BUCKETS

log = logging.getLogger("gdx.probe")
OTHER = "other"
HALF_LIFE = 300.0  # "recent" compile seconds: a score halves every 5 minutes
HYSTERESIS = 1.5  # a newcomer must beat the weakest exposed schema by this factor
LINGER = 120.0  # a demoted schema's final values stay exposed this long: longer than scrape intervals
MAX_METAS_PER_ENGINE = 20_000
SEEN_LIMIT = 100_000  # hashes remembered for schemas_first_seen_total (about 10 MB at most)
ROW_FIELDS = ("requests", "hits")


@dataclass
class Meta:
    hash: str
    shape: str
    kind: str
    backend: str
    title: str
    text: str | None
    truncated: bool


@dataclass
class Acc:
    """A schema-level series: monotonic accumulators."""

    requests: int = 0
    hits: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(SCHEMA_BUCKETS) + 1))
    sum: float = 0.0

    def add(self, delta: dict[str, Any]) -> None:
        self.requests += delta["requests"]
        self.hits += delta["hits"]
        for i, n in enumerate(delta["buckets"]):
            self.buckets[i] += n
        self.sum += delta["sum"]


@dataclass
class Engine:
    instance: str
    hello: dict[str, Any]
    last_seen: float
    connected: bool = True
    metas: dict[int, Meta] = field(default_factory=dict)
    rows: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # id -> (backend, last row)
    other: dict[str, dict[str, Any]] = field(default_factory=dict)
    snapshot: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.hello["pod"], self.hello["engine"]


def _zero() -> dict[str, Any]:
    return {"requests": 0, "hits": 0, "errors": {}, "buckets": [0] * (len(SCHEMA_BUCKETS) + 1), "sum": 0.0}


def delta(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any] | None:
    """new - old field by field; None when any field went backwards (not the same cumulative row)."""
    out = {k: new[k] - old[k] for k in ROW_FIELDS}
    out["buckets"] = [a - b for a, b in zip(new["buckets"], old["buckets"], strict=True)]
    out["sum"] = max(0.0, new["sum"] - old["sum"])
    if min(out["requests"], out["hits"], *out["buckets"]) < 0:
        return None
    return out


def subtract(row: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    out = {k: max(0, row[k] - part[k]) for k in ROW_FIELDS}
    out["buckets"] = [max(0, a - b) for a, b in zip(row["buckets"], part["buckets"], strict=True)]
    out["sum"] = max(0.0, row["sum"] - part["sum"])
    return out


def add_rows(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {k: a[k] + b[k] for k in ROW_FIELDS}
    out["buckets"] = [x + y for x, y in zip(a["buckets"], b["buckets"], strict=True)]
    out["sum"] = a["sum"] + b["sum"]
    return out


class ProbeStore:
    def __init__(
        self,
        max_schemas: int = 50,
        engine_ttl: float = 120.0,
        titles: bool = True,
        analysis: SchemaAnalysis | None = None,
        linger: float = LINGER,
    ) -> None:
        self.analysis = analysis or SchemaAnalysis()
        self.max_schemas = max(1, max_schemas)
        self.engine_ttl = engine_ttl
        self.titles = titles
        self.lock = threading.Lock()
        self.engines: dict[str, Engine] = {}
        self.series: dict[tuple[str, str, str, str], Acc] = {}
        self.retired: dict[tuple[str, str, str, str], Acc] = {}  # demoted series, resumed on return
        self.exposed: set[str] = set()  # active: increments go to their own series
        self.linger = linger
        self.lingering: dict[str, float] = {}  # demoted, still on /metrics (frozen) until this time
        # Scores decay by the same factor for all, so the weakest exposed hash stays the weakest
        # until its own score grows or the set changes: cached, instead of a min() per newcomer.
        self._weakest: str | None = None
        self.scores: dict[str, tuple[float, float]] = {}
        self.info: dict[str, Meta] = {}
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.first_seen_total = 0
        self.evicted_total = 0
        self.dropped_engines_total = 0

    # ---- messages -------------------------------------------------------------------------------

    def hello(self, msg: dict[str, Any], now: float) -> Engine:
        with self.lock:
            engine = self.engines.get(msg["instance"])
            if engine is not None:  # the same process reconnecting: keep its totals, it resends metadata
                engine.hello, engine.last_seen, engine.connected = msg, now, True
                engine.metas.clear()
                return engine
            for other in list(self.engines.values()):
                if other.key == (msg["pod"], msg["engine"]):  # the engine restarted: its counters reset
                    log.info("engine pod=%s engine=%s restarted (new probe instance)", *other.key)
                    self._drop(other)
            engine = Engine(msg["instance"], msg, now)
            self.engines[engine.instance] = engine
            log.info(
                "probe connected: pod=%s engine=%s kind=%s pid=%d",
                msg["pod"],
                msg["engine"],
                msg["engine_kind"],
                msg["pid"],
            )
            return engine

    def schemas(self, engine: Engine, msg: dict[str, Any], now: float) -> None:
        with self.lock:
            engine.last_seen = now
            for item in msg["schemas"]:
                meta = Meta(
                    item["hash"], item["shape"], item["kind"], item["backend"],
                    item["title"] if self.titles else "", item["text"], item["truncated"],
                )  # fmt: skip
                engine.metas[item["id"]] = meta
                if len(engine.metas) > MAX_METAS_PER_ENGINE:  # a probe tracks at most a few hundred
                    del engine.metas[next(iter(engine.metas))]
                if meta.hash not in self.seen:
                    self.first_seen_total += 1
                    self.seen[meta.hash] = None
                    if len(self.seen) > SEEN_LIMIT:
                        self.seen.popitem(last=False)
                else:
                    self.seen.move_to_end(meta.hash)
                self.info.setdefault(meta.hash, meta)
                self.analysis.submit(meta.hash, meta.shape, meta.kind, meta.text)
                meta.text = None  # analysed once, off the loop; the store keeps no schema text

    def snapshot(self, engine: Engine, msg: dict[str, Any], now: float) -> None:
        with self.lock:
            self._end_lingering(now)
            engine.last_seen = now
            engine.snapshot = msg
            pod, eng = engine.key
            seen_ids = {row["id"] for row in msg["schemas"]}
            if msg["full"]:
                vanished = [i for i in engine.rows if i not in seen_ids]
            else:
                vanished = [i for i in msg["evicted"] if i in engine.rows]
            increments: list[tuple[str, str, dict[str, Any]]] = []
            for row in msg["schemas"]:
                meta = engine.metas.get(row["id"])
                if meta is None:
                    continue  # metadata not here yet: counted once it is (from zero), or via `other`
                d = delta(row, engine.rows.get(row["id"], ("", _zero()))[1])
                if d is None:
                    continue
                engine.rows[row["id"]] = (meta.backend, row)
                increments.append((meta.hash, meta.backend, d))
            folded: dict[str, dict[str, Any]] = {}
            for i in vanished:
                backend, last = engine.rows.pop(i)
                folded[backend] = add_rows(folded.get(backend, _zero()), last)
            for i in msg["evicted"]:
                engine.metas.pop(i, None)
            for backend, row in msg["other"].items():
                before = engine.other.get(backend, _zero())
                d = delta(row, before)
                engine.other[backend] = row
                if d is not None:
                    d = subtract(d, folded.get(backend, _zero()))
                    if d["requests"] or d["sum"]:
                        increments.append((OTHER, backend, d))
            for schema_hash, backend, d in sorted(increments, key=lambda x: -x[2]["sum"]):
                self._attribute(pod, eng, backend, schema_hash, d, now)

    def disconnected(self, engine: Engine) -> None:
        with self.lock:
            engine.connected = False

    # ---- exposure -------------------------------------------------------------------------------

    def _score(self, schema_hash: str, now: float) -> float:
        score, at = self.scores.get(schema_hash, (0.0, now))
        return score * math.pow(0.5, max(0.0, now - at) / HALF_LIFE)

    def _attribute(
        self, pod: str, eng: str, backend: str, schema_hash: str, d: dict[str, Any], now: float
    ) -> None:
        target = OTHER
        if schema_hash != OTHER:
            info = self.info.get(schema_hash)
            if info is not None:
                self.analysis.seen(schema_hash, info.shape, now)
            self.scores[schema_hash] = (self._score(schema_hash, now) + d["sum"], now)
            if schema_hash == self._weakest:
                self._weakest = None
            if schema_hash in self.exposed or self._promote(schema_hash, now):
                target = schema_hash
        key = (pod, eng, backend, target)
        acc = self.series.get(key)
        if acc is None:
            acc = self.series[key] = self.retired.pop(key) if key in self.retired else Acc()
        acc.add(d)
        if len(self.scores) > 20 * self.max_schemas:
            self._prune_scores(now)

    def _promote(self, schema_hash: str, now: float) -> bool:
        if len(self.exposed) < self.max_schemas:
            self.exposed.add(schema_hash)
            self.lingering.pop(schema_hash, None)
            self._weakest = None
            return True
        if len(self.lingering) - (schema_hash in self.lingering) >= self.max_schemas:
            return False  # demotions are paced: no room to keep another final value on show
        weakest = self._weakest
        if weakest is None or weakest not in self.exposed:
            weakest = self._weakest = min(self.exposed, key=lambda h: self._score(h, now))
        if self._score(schema_hash, now) <= HYSTERESIS * self._score(weakest, now):
            return False
        self.exposed.discard(weakest)
        self.lingering[weakest] = now + self.linger  # frozen; its increments go to `other` now
        self.evicted_total += 1
        self.exposed.add(schema_hash)
        self.lingering.pop(schema_hash, None)  # back before its linger ended: the series goes on
        self._weakest = None
        return True

    def _end_lingering(self, now: float) -> None:
        """Demoted hashes whose final values have been on show long enough leave /metrics (Prometheus
        marks them stale); their accumulators are kept aside to resume from if they come back."""
        done = {h for h, until in self.lingering.items() if until <= now}
        if not done:
            return
        for h in done:
            del self.lingering[h]
        for key in [k for k in self.series if k[3] in done]:
            self.retired[key] = self.series.pop(key)

    def _prune_scores(self, now: float) -> None:
        keep = sorted(self.scores, key=lambda h: self._score(h, now), reverse=True)[: 10 * self.max_schemas]
        keep_set = set(keep) | self.exposed | set(self.lingering)
        self.scores = {h: s for h, s in self.scores.items() if h in keep_set}
        self.retired = {k: a for k, a in self.retired.items() if k[3] in keep_set}
        live = {m.hash for e in self.engines.values() for m in e.metas.values()}
        self.info = {h: m for h, m in self.info.items() if h in keep_set or h in live}

    # ---- lifecycle ------------------------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Drops engines whose probe has been silent for longer than the TTL, and ends lingering."""
        with self.lock:
            self._end_lingering(now)
            for engine in list(self.engines.values()):
                if now - engine.last_seen > self.engine_ttl:
                    log.info(
                        "probe of pod=%s engine=%s silent for %.0fs: dropped",
                        *engine.key,
                        now - engine.last_seen,
                    )
                    self._drop(engine)

    def _drop(self, engine: Engine) -> None:
        self.engines.pop(engine.instance, None)
        self.dropped_engines_total += 1
        pod, eng = engine.key
        if not any(e.key == (pod, eng) for e in self.engines.values()):
            for key in [k for k in self.series if k[0] == pod and k[1] == eng]:
                del self.series[key]
            for key in [k for k in self.retired if k[0] == pod and k[1] == eng]:
                del self.retired[key]

    def view(self) -> dict[str, Any]:
        """A consistent copy for one scrape."""
        with self.lock:
            live_hashes = {m.hash for e in self.engines.values() for m in e.metas.values()}
            serialisations: dict[str, int] = {}
            for e in self.engines.values():
                per_engine: dict[str, int] = {}
                for m in e.metas.values():
                    per_engine[m.hash] = per_engine.get(m.hash, 0) + 1
                for h, n in per_engine.items():
                    serialisations[h] = max(serialisations.get(h, 0), n)
            exposed = self.exposed | set(self.lingering)  # every hash with a series on /metrics
            now_mono = time.monotonic()
            return {
                "analysis": self.analysis.view(now_mono, exposed),
                "serialisations": {h: n for h, n in serialisations.items() if n > 1 and h in exposed},
                "engines": [(e.hello, e.snapshot) for e in self.engines.values()],
                "series": {
                    k: Acc(a.requests, a.hits, list(a.buckets), a.sum) for k, a in self.series.items()
                },
                "info": {h: self.info[h] for h in exposed if h in self.info},
                "recent": {h: self._score(h, now_mono) for h in exposed},
                "tracked": len(live_hashes),
                "first_seen_total": self.first_seen_total,
                "evicted_total": self.evicted_total,
                "at": time.time(),
            }
