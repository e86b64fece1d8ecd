"""Receiver for the in-engine probes: a unix socket that engines send cumulative snapshots to.

Framing is one JSON object per line (protocol: `exporter.wire`). Every message is checked (size,
JSON, protocol version, kind, field types); anything else is dropped and counted in
`guided_decoding_probe_snapshots_total{result}`, never raised. The socket is created with mode 0660
so that only the daemon's user and group (the engine pods' fsGroup) can connect. What the messages
say is kept in a `ProbeStore` and exposed as the contract's engine- and schema-level families.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import logging
import os
import socket
import stat
import struct
import time
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

from exporter import wire
from exporter.collectors.base import Collector, CollectorError
from exporter.collectors.probe_analysis import SchemaAnalysis
from exporter.collectors.probe_store import Engine, ProbeStore
from exporter.config import Config

log = logging.getLogger("gdx.probe")
MAX_MESSAGE_BYTES = 4 * 2**20
MAX_CONNECTIONS = 256  # a node runs a handful of engines; beyond this a connection is refused, and counted
KINDS = wire.KINDS
RESULTS = ("ok", "malformed", "oversize", "rejected")
WATCH_INTERVAL = 1.0  # how often the socket file is checked (removed or replaced: listen again)
LOG_EVERY = 60.0  # at most one line per kind of probe trouble per minute


def resolve_group(group: str) -> int:
    """A group name or numeric id to a gid (KeyError when there is no such group)."""
    if group.isdigit():
        return int(group)
    return grp.getgrnam(group).gr_gid


def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    """The connecting process's user id, from the kernel (SO_PEERCRED), or None when unknown."""
    sock = writer.get_extra_info("socket")
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def classify(line: bytes) -> tuple[str, dict[str, Any] | None]:
    """Pure: the result label for one framed message and, when it is ok, the validated message.

    malformed: not a JSON object with a known kind; rejected: another protocol version, or a field
    of the wrong type or out of range; oversize: over MAX_MESSAGE_BYTES."""
    if len(line) > MAX_MESSAGE_BYTES:
        return "oversize", None
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "malformed", None
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        return "malformed", None
    try:
        return "ok", wire.validate(doc)
    except (wire.Invalid, TypeError, ValueError, RecursionError):
        return "rejected", None


class ProbeCollector(Collector):
    name = "probe"

    def __init__(self, config: Config) -> None:
        super().__init__(config.collector_timeout)
        self.path = config.probe_socket
        self.counts = dict.fromkeys(RESULTS, 0)
        self.connections = 0
        self.refused = {"limit": 0, "credentials": 0}
        self.group = config.probe_socket_group
        self.allowed_uids = set(config.probe_allowed_uids)
        self._refused_uids: set[int] = set()
        self._server: asyncio.AbstractServer | None = None
        self._listen_error: str | None = None
        self._socket_id: tuple[int, int] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._logged_at: dict[str, float] = {}
        self.analysis = SchemaAnalysis(config.lint_thresholds(), config.shape_window)
        self.analysis_time = max(0.05, min(2.0, config.collector_timeout / 2))
        self.store = ProbeStore(
            config.probe_max_schemas, config.probe_engine_ttl, config.probe_titles, self.analysis
        )

    async def start(self) -> None:
        await self._listen()
        self._watcher = asyncio.ensure_future(self._watch())

    async def _listen(self) -> None:
        """Creates the socket (mode 0660, the configured group); on failure the collector fails and
        the watcher tries again every second, logging only when the reason changes."""
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                    os.unlink(self.path)  # a stale socket from a previous run
            server = await asyncio.start_unix_server(self._handle, path=self.path, limit=MAX_MESSAGE_BYTES)
            try:
                os.chmod(self.path, 0o660)
                if self.group:
                    os.chown(self.path, -1, resolve_group(self.group))
                st = os.lstat(self.path)
            except BaseException:
                server.close()
                raise
        except (OSError, KeyError) as err:
            why = f"no group {self.group!r}" if isinstance(err, KeyError) else err.strerror or err
            error = f"cannot listen on probe socket {self.path}: {why}"
            if error != self._listen_error:
                log.error("%s (retrying every %gs)", error, WATCH_INTERVAL)
            self._listen_error = error
            return
        self._server, self._socket_id = server, (st.st_dev, st.st_ino)
        if self._listen_error:
            log.info("probe socket listening on %s (recovered)", self.path)
        else:
            log.info("probe socket listening on %s", self.path)
        self._listen_error = None

    def _socket_gone(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return True
        return (st.st_dev, st.st_ino) != self._socket_id

    async def _watch(self) -> None:
        """Someone removed the socket (or its directory: a hostPath cleaned, a node agent) or put
        another file there: probes could never reach us again, so listen anew. Connected probes
        keep their connections."""
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                if self._server is not None and self._socket_gone():
                    log.warning("probe socket %s was removed or replaced: listening again", self.path)
                    self._server.close()
                    self._server = None
                if self._server is None:
                    await self._listen()
            except Exception:  # never let the watcher die
                log.exception("probe socket watcher")

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(BaseException):
                await self._watcher
            self._watcher = None
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            if not self._socket_gone():
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            self._server = None

    def _log_limited(self, kind: str, level: int, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._logged_at.get(kind, -LOG_EVERY) >= LOG_EVERY:
            self._logged_at[kind] = now
            log.log(level, msg, *args)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            self.refused["limit"] += 1
            writer.close()
            return
        if self.allowed_uids:
            uid = peer_uid(writer)
            if uid not in self.allowed_uids:
                self.refused["credentials"] += 1
                if uid not in self._refused_uids and len(self._refused_uids) < 64:  # a line per uid, bounded
                    self._refused_uids.add(uid if uid is not None else -1)
                    log.warning("refused a probe connection from uid %s (not in --probe.allowed-uids)", uid)
                writer.close()
                return
        self.connections += 1
        engine: Engine | None = None
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.LimitOverrunError:
                    self.counts["oversize"] += 1
                    await self._skip_line(reader)
                    continue
                except asyncio.IncompleteReadError as err:
                    if err.partial:  # the engine died (or closed) halfway through a message
                        self.counts["malformed"] += 1
                        who = (
                            f"probe of pod={engine.key[0]} engine={engine.key[1]}"
                            if engine
                            else "a probe (before hello)"
                        )
                        self._log_limited(
                            "cut", logging.WARNING,
                            "%s closed its connection mid-message: %d bytes dropped, counted as"
                            " malformed; its totals stay as of its last whole snapshot",
                            who, len(err.partial),
                        )  # fmt: skip
                    break
                result, msg = classify(line)
                if msg is not None:
                    if msg["kind"] == "hello":
                        engine = self.store.hello(msg, time.monotonic())
                    elif engine is None:
                        result = "rejected"  # a probe always says hello first
                    elif msg["kind"] == "schemas":
                        self.store.schemas(engine, msg, time.monotonic())
                    else:
                        self.store.snapshot(engine, msg, time.monotonic())
                if result != "ok":
                    self._log_limited(
                        "dropped", logging.WARNING,
                        "dropped a %s probe message (counted in guided_decoding_probe_snapshots_total;"
                        " at most one such line a minute)", result,
                    )  # fmt: skip
                self.counts[result] += 1
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass  # daemon shutting down: end quietly, the probe reconnects to the next daemon
        finally:
            self.connections -= 1
            if engine is not None:
                self.store.disconnected(engine)
                log.info(
                    "probe of pod=%s engine=%s disconnected (its series stay for --probe.engine-ttl"
                    " unless it reconnects)",
                    *engine.key,
                )
            writer.close()

    @staticmethod
    async def _skip_line(reader: asyncio.StreamReader) -> None:
        """Discards the rest of an oversize message, in bounded chunks."""
        while True:
            try:
                await reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as err:
                await reader.readexactly(err.consumed)

    async def refresh(self) -> None:
        self.store.expire(time.monotonic())
        if self.analysis.pending:  # new schemas: lint them in a worker thread, within a time slice
            deadline = time.monotonic() + self.analysis_time
            await asyncio.get_running_loop().run_in_executor(None, self.analysis.run, deadline)
        if self._listen_error:
            raise CollectorError(self._listen_error)

    def collect(self) -> Iterable[Metric]:
        snapshots = CounterMetricFamily(
            "guided_decoding_probe_snapshots",
            "Messages received from in-engine probes, by result (ok, malformed, oversize, rejected).",
            labels=["result"],
        )
        for result in RESULTS:
            snapshots.add_metric([result], self.counts[result])
        yield snapshots
        yield GaugeMetricFamily(
            "guided_decoding_probe_connections", "Engine probes connected now.", value=self.connections
        )
        refused = CounterMetricFamily(
            "guided_decoding_probe_connections_refused",
            f"Probe connections refused: limit ({MAX_CONNECTIONS} already open), "
            "credentials (the peer's uid is not allowed).",
            labels=["reason"],
        )
        for reason, n in self.refused.items():
            refused.add_metric([reason], n)
        yield refused
        yield from families(self.store.view())


EL = ["pod", "engine", "backend"]  # engine-level labels
SL = [*EL, "schema_hash"]  # schema-level labels


def _buckets(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs from non-cumulative counts, +Inf last."""
    out: list[tuple[str, float]] = []
    running = 0
    for bound, n in zip((*bounds, float("inf")), counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return out


def families(view: dict[str, Any]) -> Iterable[Metric]:
    """The contract's probe families from one consistent view of the store."""
    p = "guided_decoding_"
    compile_s = HistogramMetricFamily(
        p + "compile_seconds",
        "Wall time of each grammar compile call, cache hits included.",
        labels=EL,
    )
    requests = CounterMetricFamily(p + "compile_requests", "Grammar compile calls.", labels=EL)
    hits = CounterMetricFamily(
        p + "compile_cache_hits", "Compile calls served from the grammar cache.", labels=EL
    )
    errors = CounterMetricFamily(
        p + "compile_errors",
        "Failed compile calls by reason (invalid_schema, unsupported, timeout, internal).",
        labels=[*EL, "reason"],
    )
    running = GaugeMetricFamily(p + "compile_in_progress", "Compiles running now.", labels=EL)
    oldest = GaugeMetricFamily(
        p + "compile_oldest_running_seconds",
        "Age of the longest-running compile (0: none).",
        labels=EL,
    )
    wait = HistogramMetricFamily(
        p + "grammar_wait_seconds",
        "A request's grammar from submission to ready, queueing in the compile pool included.",
        labels=EL,
    )
    mask = HistogramMetricFamily(
        p + "mask_seconds", "Time to fill the batch's token bitmask, per engine step.", labels=EL
    )
    info = InfoMetricFamily(
        p + "probe",
        "The probe in each engine process.",
        labels=[
            "pod",
            "engine",
            "backend",
            "engine_kind",
            "engine_version",
            "backend_version",
            "probe_version",
        ],
    )
    cpu = CounterMetricFamily(
        p + "engine_cpu_seconds",
        "CPU seconds of the engine process, by mode.",
        labels=["pod", "engine", "mode"],
    )
    events = CounterMetricFamily(
        p + "probe_events",
        "The probe's own counters: internal_errors, send_failures, connects, texts_dropped, evicted.",
        labels=["pod", "engine", "event"],
    )
    for hello, snap in view["engines"]:
        pod, eng = hello["pod"], hello["engine"]
        backends = snap["backends"] if snap else {}
        for name in sorted(backends):
            b = backends[name]
            labels = [pod, eng, name]
            compile_s.add_metric(
                labels, _buckets(wire.COMPILE_BUCKETS, b["compile"]["buckets"]), b["compile"]["sum"]
            )
            wait.add_metric(labels, _buckets(wire.COMPILE_BUCKETS, b["wait"]["buckets"]), b["wait"]["sum"])
            mask.add_metric(labels, _buckets(wire.MASK_BUCKETS, b["mask"]["buckets"]), b["mask"]["sum"])
            requests.add_metric(labels, b["requests"])
            hits.add_metric(labels, b["hits"])
            for reason in wire.ERROR_REASONS:
                errors.add_metric([*labels, reason], b["errors"].get(reason, 0))
            running.add_metric(labels, b["in_progress"])
            oldest.add_metric(labels, b["oldest_seconds"])
            info.add_metric(
                labels,
                {
                    "engine_kind": hello["engine_kind"],
                    "engine_version": hello["engine_version"],
                    "backend_version": hello["backends"].get(name, ""),
                    "probe_version": hello["probe_version"],
                },
            )
        if snap:
            for mode in ("user", "system"):
                cpu.add_metric([pod, eng, mode], snap["cpu"][mode])
            for event in wire.PROBE_COUNTERS:
                events.add_metric([pod, eng, event], snap["probe"].get(event, 0))
    yield from (compile_s, requests, hits, errors, running, oldest, wait, mask, info, cpu, events)

    s_compile = HistogramMetricFamily(
        p + "schema_compile_seconds", "Compile call wall time per schema hash.", labels=SL
    )
    s_requests = CounterMetricFamily(p + "schema_requests", "Compile calls per schema hash.", labels=SL)
    s_hits = CounterMetricFamily(
        p + "schema_cache_hits",
        "Compile calls served from the grammar cache, per schema hash.",
        labels=SL,
    )
    for (pod, eng, backend, schema), acc in sorted(view["series"].items()):
        labels = [pod, eng, backend, schema]
        s_compile.add_metric(labels, _buckets(wire.SCHEMA_BUCKETS, acc.buckets), acc.sum)
        s_requests.add_metric(labels, acc.requests)
        s_hits.add_metric(labels, acc.hits)
    s_info = InfoMetricFamily(
        p + "schema",
        "One per exposed schema hash: its shape hash, request kind, backend and sanitised title.",
        labels=["schema_hash", "shape_hash", "kind", "backend", "title"],
    )
    for schema, meta in sorted(view["info"].items()):
        s_info.add_metric(
            [schema],
            {"shape_hash": meta.shape, "kind": meta.kind, "backend": meta.backend, "title": meta.title},
        )
    recent = GaugeMetricFamily(
        p + "schema_recent_compile_seconds",
        "Compile seconds of each exposed schema, decayed with a 5-minute half-life: the daemon's ranking."
        " Unlike rate(), it sees a schema compiled once (a new series' first sample has no predecessor).",
        labels=["schema_hash"],
    )
    for schema, score in sorted(view["recent"].items()):
        recent.add_metric([schema], score)
    yield from (s_compile, s_requests, s_hits, s_info, recent)
    yield from analysis_families(view)
    yield CounterMetricFamily(
        p + "schemas_first_seen", "Distinct schema hashes seen for the first time on this node.",
        value=view["first_seen_total"],
    )  # fmt: skip
    yield GaugeMetricFamily(
        p + "schemas_tracked",
        "Distinct schema hashes the engines on this node track now.",
        value=view["tracked"],
    )
    yield CounterMetricFamily(
        p + "schemas_evicted", "Schema hashes moved out of the exposed top set into other.",
        value=view["evicted_total"],
    )  # fmt: skip


def analysis_families(view: dict[str, Any]) -> Iterable[Metric]:
    """Lint findings of the exposed schemas, their shapes' variants and varying paths."""
    p = "guided_decoding_"
    analysis = view["analysis"]
    findings = GaugeMetricFamily(
        p + "schema_lint_findings",
        "Places a lint rule fires in a schema (gdx lint FILE shows them with pointers and fixes).",
        labels=["schema_hash", "rule", "severity"],
    )
    for schema_hash, counts in sorted(analysis["findings"].items()):
        counts = dict(counts)
        n = view["serialisations"].get(schema_hash, 0)
        if n:
            counts[("unstable_serialization", "warning")] = n
        for (rule, severity), value in sorted(counts.items()):
            findings.add_metric([schema_hash, rule, severity], value)
    yield findings
    shape_variants = GaugeMetricFamily(
        p + "shape_variants",
        "Distinct schemas of this shape compiled within the window: many means per-request injection.",
        labels=["shape_hash"],
    )
    paths = GaugeMetricFamily(
        p + "shape_varying_path_info",
        "JSON pointers whose literal values differ between variants of the shape (at most 5).",
        labels=["shape_hash", "path"],
    )
    for shape_hash, (count, varying) in sorted(analysis["shapes"].items()):
        shape_variants.add_metric([shape_hash], count)
        for path, _ in varying:
            paths.add_metric([shape_hash, path], 1)
    yield shape_variants
    yield paths
    yield CounterMetricFamily(
        p + "schemas_analysed", "Distinct schemas linted by the daemon.", value=analysis["analysed"]
    )
    yield CounterMetricFamily(
        p + "schema_analysis_skipped",
        "Schemas not analysed because the queue of texts was full.",
        value=analysis["skipped"],
    )
    yield CounterMetricFamily(
        p + "schema_analysis_seconds", "Time the daemon spent analysing schemas.", value=analysis["seconds"]
    )
