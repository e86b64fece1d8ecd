"""The probe listener's handling of each message, whatever the transport: framing, classification,
held snapshots and read passes, large messages read off the event loop, and what a hello may claim.

Framing is one JSON object per line (protocol: `exporter.wire`). Every message is checked (size,
JSON, protocol version, kind, field types); anything else is dropped and counted in
`guided_decoding_probe_snapshots_total{result}`, never raised. Valid messages go to the `ProbeStore`.
A connection says hello once; an engine belongs to the peer that created it (a TCP pod, a unix uid),
and another peer's hello for it is refused.

With `apply_interval` set (`--probe.apply-interval`, 1 s), the probes' connections are read in one
pass per interval: after a snapshot, a connection at a message boundary is parked (its transport stops
reading; the kernel keeps what the probe sends), and each pass reads the parked sockets directly,
holds the whole snapshots it finds and leaves the connections parked; what is not a snapshot goes to
the connection's stream, which is resumed. Why: on these machines each wake-up of the daemon's event
loop costs about 200 us of CPU whatever it does, and 8 engines at one snapshot a second woke it 8
times a second for 2 of its 4 ms (docs/measurements/performance.md); resuming the streams each pass
still cost about 0.5 ms a second more than reading the sockets (docs/measurements/daemon-speedups.md).

Held snapshots are applied, in each connection's order, when something reads the store (a scrape,
/schemas: `read_pass()` applies all, so /metrics is never behind), before the connection's next other
message or its end, at MAX_HELD_BYTES, and otherwise once the oldest has waited `max_hold`
(`--probe.max-hold`, 15 s). A connection's held snapshots are checked and applied as one (`coalesce`:
the last totals, each spec's latest row, every eviction), each counted ok; a batch that cannot be
merged, or whose merge is not valid, is applied one by one, each judged alone. Snapshots that can make
a node verdict (an API server's; every engine's with a compile budget: `_verdicts_from`) are applied
one by one in the pass that read them: the guards need them at once. Why: decoding, checking and
applying a snapshot a second per engine was most of what the daemon spent with nobody scraping
(docs/measurements/daemon-speedups.md). Values are cumulative: applying later loses nothing, and a
daemon that dies holding snapshots gets each engine's totals in its first snapshot after the
reconnection. A connection mid-message (a large `schemas` chunk) is never parked, nor one before its
first snapshot, so a probe never waits on a parked daemon for long.

A message over INLINE_BYTES (a `schemas` chunk with schema texts, up to 4 MiB) is read and its texts'
hashes recomputed (`schema_check`) in a child process (`message_check`), one message at a time, while
its connection waits: done on the event loop, one such message held it for up to half a second, and
/metrics with it; in a thread, the collector's pauses its allocations set off still did. The
connection's order is kept: its next message is read once this one is applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from exporter import wire
from exporter.daemon.receiver.coalesce import coalesce
from exporter.daemon.receiver.connection import Connection, describe
from exporter.daemon.receiver.message_check import CheckProcess, Prepared, check, classify
from exporter.daemon.receiver.store import EngineState, ProbeStore, who
from exporter.daemon.receiver.tokenreview import PodIdentity, Refused

log = logging.getLogger("gdx.collector.probe")
RESULTS = ("ok", "malformed", "oversize", "rejected")
LOG_EVERY = 60.0  # at most one line per kind of probe trouble per minute
# How a snapshot from our probe starts (shipper.encode: compact JSON, `v` then `kind`); anything else,
# however it is spelled, is applied on arrival.
SNAPSHOT_PREFIX = b'{"v":%d,"kind":"snapshot"' % wire.VERSION
MAX_HELD_BYTES = 1 << 20  # per connection: beyond this its held snapshots are applied at once
READ_PASSES = 4  # event-loop turns a pass gives resumed connections to deliver what the kernel holds
# A message longer than this is parsed and its schema texts checked off the event loop: below it the
# work on the loop stays under about 20 ms (wire_check.validate and the hashes of ~500 small schemas).
INLINE_BYTES = 64 * 1024


class MessageHandling:
    """Applies the messages of the listener's connections to the store and counts them by result; the
    listener (`ProbeListener`) accepts, reviews and ends the connections."""

    def __init__(self, store: ProbeStore, apply_interval: float, max_hold: float = 0.0) -> None:
        """`apply_interval`: seconds between read passes (0: every message applied on arrival);
        `max_hold`: the longest a snapshot read waits to be applied (0: applied in the pass)."""
        self.store = store
        self.apply_interval = apply_interval
        self.max_hold = max_hold
        self.counts = dict.fromkeys(RESULTS, 0)
        self._open: set[Connection] = set()  # connections that have held a snapshot: parked between passes
        self._owners: dict[str, tuple[str, ...]] = {}  # engine instance -> the peer that created it
        self._logged_at: dict[str, float] = {}
        self._checks = CheckProcess()  # large messages, read in a process of their own
        self._check_turn = asyncio.Lock()  # one at a time: one parsed 4 MiB message in memory at most

    def _log_limited(self, kind: str, level: int, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._logged_at.get(kind, -LOG_EVERY) >= LOG_EVERY:
            self._logged_at[kind] = now
            log.log(level, msg, *args)

    def _end(self, conn: Connection, err: Refused) -> None:
        """Ends a connection one of whose held messages was refused (the listener counts why)."""
        raise NotImplementedError

    async def _receive(self, conn: Connection, line: bytes) -> None:
        """One whole message of `conn`: a snapshot held until the next pass (with `apply_interval`), any
        other applied at once, after what the connection holds. Raises Refused for a refused hello."""
        conn.last_read = time.monotonic()
        if self.apply_interval > 0 and line.startswith(SNAPSHOT_PREFIX):
            self._open.add(conn)  # from its first snapshot on, read once per pass
            self._hold(conn, line)
            if conn.at_boundary():
                conn.park()
        else:
            self._apply_conn(conn)  # what it holds first: the connection's order is kept
            prepared = await self._prepare(line, conn.engine) if len(line) > INLINE_BYTES else None
            conn.engine = self._apply(line, conn.engine, conn.identity, conn, prepared)

    async def _prepare(self, line: bytes, engine: EngineState | None) -> Prepared:
        """A large message read in the check process, while its connection waits its turn."""
        async with self._check_turn:
            return await self._checks.prepare(line, describe(engine))

    # ---- held snapshots -------------------------------------------------------------------------------

    def _hold(self, conn: Connection, line: bytes) -> None:
        if not conn.held:
            conn.held_since = time.monotonic()
        conn.held.append(line)
        conn.held_bytes += len(line)
        if conn.held_bytes > MAX_HELD_BYTES:
            self._apply_conn(conn)

    def _apply_conn(self, conn: Connection) -> None:
        if not conn.held:
            return
        held, conn.held, conn.held_bytes = conn.held, [], 0
        if len(held) > 1 and self._batch(conn.engine, held):
            return
        for line in held:  # a line that began like a snapshot may be a hello (JSON's last `kind` wins)
            try:
                conn.engine = self._apply(line, conn.engine, conn.identity, conn)
            except Refused as err:
                self._end(conn, err)
                return

    def _batch(self, engine: EngineState | None, held: list[bytes]) -> bool:
        """Applies an engine's held snapshots as one (`coalesce`), each counted ok; False when they
        cannot be merged, or the merged one is not valid, or they can make a node verdict: then each is
        applied and judged alone."""
        if engine is None or self._verdicts_from(engine):
            return False
        doc = coalesce(held)
        if doc is None:
            return False
        message = check(doc)
        if message is None:
            return False
        assert isinstance(message, wire.Snapshot)
        self.store.snapshot(engine, message, time.monotonic())
        self.counts["ok"] += len(held)
        return True

    @property
    def _holding(self) -> set[Connection]:
        """The connections holding snapshots not applied yet."""
        return {conn for conn in self._open if conn.held}

    def apply_held(self) -> None:
        """Applies every held snapshot now."""
        for conn in list(self._open):
            self._apply_conn(conn)

    def _apply_due(self) -> None:
        """Applies the held snapshots that waited `max_hold`, and those that can make a node verdict."""
        due = time.monotonic() - self.max_hold
        for conn in list(self._open):
            if conn.held and (conn.held_since <= due or self._verdicts_from(conn.engine)):
                self._apply_conn(conn)

    def _verdicts_from(self, engine: EngineState | None) -> bool:
        """Its snapshots can make a node verdict (`ProbeStore._observe_verdicts`): an API server's (they
        carry `deaths`), every engine's with a compile budget; unknown (none applied yet) counts as can."""
        snapshot = None if engine is None else engine.snapshot
        return snapshot is None or snapshot.deaths is not None or self.store.verdicts.compile_budget > 0

    async def read_pass(self, apply_all: bool = True) -> None:
        """One pass: what the parked connections' probes sent meanwhile is read, the held snapshots are
        applied (`apply_all`: every one, as each refresh does, so that a scrape sees every snapshot sent
        before it; else those due), and each connection at a message boundary is parked again. Whole
        snapshots are read straight from the parked sockets (`_read_parked`); the loop gets READ_PASSES
        turns only when a connection's stream has something to deliver (it was resumed, or never
        parked)."""
        turns = False
        for conn in list(self._open):
            if not conn.parked or not self._read_parked(conn):  # its stream reads (mid-message, or resumed)
                turns = True
        if turns:
            for _ in range(READ_PASSES):
                await asyncio.sleep(0)
        if apply_all or self.max_hold <= 0:
            self.apply_held()
        else:
            self._apply_due()
        for conn in list(self._open):
            if conn.at_boundary():
                conn.park()

    def _read_parked(self, conn: Connection) -> bool:
        """Holds the whole snapshots a parked connection's probe sent, read from its socket without
        resuming it: each wake-up of the event loop for a connection costs more than reading it (the
        daemon's idle CPU at the caps, docs/measurements/daemon-speedups.md). From the first line that
        is anything else (another kind, over INLINE_BYTES, unfinished) everything read is handed to the
        connection's stream reader, with the end of the connection if it came, and the connection is
        resumed: its task reads on as if it had read it all. True: it stays parked."""
        read = conn.read_parked(MAX_HELD_BYTES)
        if read is None:  # not a plain socket: its transport reads it
            conn.unpark()
            return False
        data, end = read
        start = 0
        if data:
            conn.last_read = time.monotonic()
        while (stop := data.find(b"\n", start)) >= 0:
            if stop + 1 - start > INLINE_BYTES or not data.startswith(SNAPSHOT_PREFIX, start):
                break
            self._hold(conn, data[start : stop + 1])
            start = stop + 1
            if conn.transport.is_closing():  # a held message was refused: the connection ends
                return False
        if start == len(data) and end is None:
            return True
        if start < len(data):
            conn.reader.feed_data(data[start:])
        if isinstance(end, EOFError):
            conn.reader.feed_eof()
        elif end is not None:
            conn.reader.set_exception(end)
        conn.unpark()
        return False

    async def _read_message(self, reader: asyncio.StreamReader, engine: EngineState | None) -> bytes | None:
        """The next whole line, or None once the peer closed. Oversize messages are skipped and counted."""
        while True:
            try:
                return await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                self.counts["oversize"] += 1
                await self._skip_line(reader)
            except asyncio.IncompleteReadError as err:
                if err.partial:  # the engine died (or closed) halfway through a message
                    self.counts["malformed"] += 1
                    self._log_limited(
                        "cut", logging.WARNING,
                        "%s closed its connection mid-message: %d bytes dropped, counted as"
                        " malformed; its totals stay as of its last whole snapshot",
                        describe(engine), len(err.partial),
                    )  # fmt: skip
                return None

    def _claim(self, conn: Connection, hello: wire.Hello) -> None:
        """Binds `hello.instance` to the connection's peer, or raises Refused (the message counted as
        rejected): a connection says hello once; an engine is the peer's that created it."""
        if conn.greeted:
            self.counts["rejected"] += 1
            raise Refused("second_hello", f"{describe(conn.engine)} said hello again on its connection")
        conn.greeted = True
        live = {engine.instance for engine in self.store.engines.values()}
        owner = self._owners.get(hello.instance)
        if owner is not None and owner != conn.owner and hello.instance in live:
            self.counts["rejected"] += 1
            named = who(hello.namespace, hello.pod, hello.engine)
            raise Refused("instance_taken", f"{named}: a hello for an engine another peer created")
        self._owners[hello.instance] = conn.owner
        if len(self._owners) > 2 * len(live) + 64:  # forget the engines the store has dropped
            for instance in [i for i in self._owners if i not in live]:
                del self._owners[instance]

    @staticmethod
    async def _skip_line(reader: asyncio.StreamReader) -> None:
        """Discards the rest of an oversize message, in bounded chunks."""
        while True:
            try:
                await reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as err:
                await reader.readexactly(err.consumed)

    def _apply(
        self,
        line: bytes,
        engine: EngineState | None,
        identity: PodIdentity | None = None,
        conn: Connection | None = None,
        prepared: Prepared | None = None,
    ) -> EngineState | None:
        """Classifies one message (`prepared`: done off the loop), hands it to the store and counts it;
        returns the connection's engine, which a hello (always first) names: over TCP with the
        reviewed pod and namespace. Raises Refused (the message counted as rejected) for a second
        hello on `conn`, or a hello for an engine another peer created."""
        result, message = (prepared.result, prepared.message) if prepared is not None else classify(line)
        if isinstance(message, wire.Hello):
            if identity is not None:
                message = dataclasses.replace(message, pod=identity.pod, namespace=identity.namespace)
            if conn is not None:
                self._claim(conn, message)
            peer = conn.owner if conn is not None else ()
            engine = self.store.hello(message, time.monotonic(), peer=peer)
        elif isinstance(message, wire.Auth):
            result = "rejected"  # only the first line of a TCP connection
        elif message is not None:
            if engine is None:
                result = "rejected"  # a probe always says hello first
            elif isinstance(message, wire.SchemasMessage):
                known = prepared.identities if prepared is not None else None
                self.store.schemas(engine, message, time.monotonic(), known)
            else:
                self.store.snapshot(engine, message, time.monotonic())
        if result != "ok":
            self._log_limited(
                "dropped", logging.WARNING,
                "dropped a %s probe message (counted in guided_decoding_probe_snapshots_total;"
                " at most one such line a minute)", result,
            )  # fmt: skip
        self.counts[result] += 1
        return engine
