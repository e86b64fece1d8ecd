"""The probe socket: a unix stream server (and a TCP one) that engines send cumulative snapshots to.

Framing is one JSON object per line (protocol: `exporter.wire`). Every message is checked (size,
JSON, protocol version, kind, field types); anything else is dropped and counted in
`guided_decoding_probe_snapshots_total{result}`, never raised. The socket is created with mode 0660
so that only the daemon's user and group (the engine pods' fsGroup) can connect, and peers can be
restricted further by uid (SO_PEERCRED). If the socket file is removed or replaced, it is created
again. Valid messages go to the `ProbeStore`.

Over TCP (`--probe.listen-address`: a node-local Service or a hostPort, no hostPath in the engine
pod) a connection says nothing until its first line, `auth`, has passed a TokenReview
(`tokenreview`): the pod's name and namespace are the review's, whatever its hello says. Until then it
is in a small pool of its own (MAX_PENDING, AUTH_TIMEOUT, an auth line of at most MAX_AUTH_LINE_BYTES),
so junk connections cannot take the slots of reviewed or unix-socket probes. The review is asked again
every REVIEW_EVERY and the connection closed when it fails or the token expires (the probe reconnects
with its rotated token). A connection says hello once; an engine belongs to the peer that created it
(a TCP pod, a unix uid), and another peer's hello for it is refused. A connection silent for
`idle_timeout` is closed. Every refusal is counted by reason in
`guided_decoding_probe_connections_refused_total`.

With `apply_interval` set (`--probe.apply-interval`, 1 s), the probes' connections are read in one
pass per interval: after a snapshot, a connection at a message boundary is parked (its transport stops
reading; the kernel keeps what the probe sends), and each pass resumes them all, reads what they
sent, applies it in order and parks them again. A scrape runs a pass first, so /metrics is never
behind. Why: on these machines each wake-up of the daemon's event loop costs about 200 us of CPU
whatever it does, and 8 engines at one snapshot a second woke it 8 times a second for 2 of its 4 ms
(docs/measurements/performance.md). A connection mid-message (a large `schemas` chunk) is never
parked, nor one before its first snapshot, so a probe never waits on a parked daemon for long.

A message over INLINE_BYTES (a `schemas` chunk with schema texts, up to 4 MiB) is read and its texts'
hashes recomputed (`schema_check`) in a child process (`message_check`), one message at a time, while
its connection waits: done on the event loop, one such message held it for up to half a second, and
/metrics with it; in a thread, the collector's pauses its allocations set off still did. The
connection's order is kept: its next message is read once this one is applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import grp
import logging
import os
import socket
import stat
import struct
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from exporter import wire
from exporter.daemon.receiver.message_check import MAX_MESSAGE_BYTES, CheckProcess, Prepared, classify
from exporter.daemon.receiver.socket_path import clear_socket_path
from exporter.daemon.receiver.store import EngineState, ProbeStore, who
from exporter.daemon.receiver.tokenreview import (
    REFUSAL_REASONS,
    PodIdentity,
    Refused,
    ReviewedToken,
    TokenReviewer,
)

log = logging.getLogger("gdx.collector.probe")
MAX_CONNECTIONS = 256  # a node runs a handful of engines; beyond this a connection is refused, and counted
MAX_PENDING = 16  # TCP connections awaiting their review, outside MAX_CONNECTIONS
MAX_PER_POD = 32  # reviewed TCP connections of one pod (one per engine process)
MAX_AUTH_LINE_BYTES = 20 * 1024  # the auth line: a token of wire.MAX_TOKEN_CHARS and its JSON
RESULTS = ("ok", "malformed", "oversize", "rejected")
# Why a connection was refused or ended by the daemon (REFUSAL_REASONS: the TCP review's).
CONNECTION_REASONS = (
    "pending_limit",  # MAX_PENDING TCP connections already await their review
    "pod_limit",  # MAX_PER_POD connections of this pod already open
    "second_hello",  # a connection says hello once
    "instance_taken",  # a hello for an engine another peer created
    "idle",  # nothing received for idle_timeout
)
REFUSALS = ("limit", "credentials", *REFUSAL_REASONS, *CONNECTION_REASONS)
AUTH_TIMEOUT = 5.0  # a TCP peer that has not shown a token by then is dropped (counted as no_token)
REVIEW_EVERY = 600.0  # a reviewed connection's token is reviewed again this often (revoked: closed)
REVIEW_RETRY = 30.0  # after a re-review the API server could not answer
EXPIRY_MARGIN = 5.0  # a connection is closed this long before its token expires
DEFAULT_IDLE_TIMEOUT = 120.0  # the probe sends a snapshot every second (GDX_PROBE_INTERVAL)
CHECK_EVERY = 5.0  # idle connections and reviews due are looked for this often
WATCH_INTERVAL = 1.0  # socket file checks (removed or replaced: listen again) when there are no read passes
LOG_EVERY = 60.0  # at most one line per kind of probe trouble per minute
MAX_REFUSED_UIDS_LOGGED = 64
# How a snapshot from our probe starts (shipper.encode: compact JSON, `v` then `kind`); anything else,
# however it is spelled, is applied on arrival.
SNAPSHOT_PREFIX = b'{"v":%d,"kind":"snapshot"' % wire.VERSION
MAX_HELD_BYTES = 1 << 20  # per connection: beyond this its held snapshots are applied at once
READ_PASSES = 4  # event-loop turns a pass gives resumed connections to deliver what the kernel holds
# A message longer than this is parsed and its schema texts checked off the event loop: below it the
# work on the loop stays under about 20 ms (wire.validate and the hashes of ~500 small schemas).
INLINE_BYTES = 64 * 1024


@dataclass(slots=True)
class TcpAuth:
    """What a reviewed TCP connection holds of its review: the token (to ask again; never logged), when
    to ask again and when the token stops being valid (monotonic seconds; None: it does not say)."""

    token: str
    reviewed_at: float
    review_at: float
    expires_at: float | None
    reviewing: bool = False

    @classmethod
    def of(cls, token: str, reviewed: ReviewedToken, now: float) -> TcpAuth:
        expires = None if reviewed.expires is None else now + (reviewed.expires - time.time())
        return cls(token, now, now + REVIEW_EVERY, expires)


class Connection:
    """One probe connection: its engine (once hello named it), its peer (a TCP pod's identity, else the
    unix peer's uid), its held snapshots, whether it is parked (its transport not reading until the next
    pass) and when it last sent a message."""

    __slots__ = (
        "auth", "engine", "greeted", "held", "held_bytes", "identity", "last_read", "parked", "reader",
        "transport", "uid",
    )  # fmt: skip

    def __init__(
        self,
        identity: PodIdentity | None,
        reader: asyncio.StreamReader,
        transport: asyncio.BaseTransport,
        uid: int | None = None,
        auth: TcpAuth | None = None,
    ) -> None:
        self.engine: EngineState | None = None
        self.greeted = False  # said hello (the store may have refused its engine: engine stays None)
        self.identity = identity
        self.uid = uid
        self.auth = auth
        self.held: list[bytes] = []
        self.held_bytes = 0
        self.reader = reader
        self.transport = transport
        self.parked = False
        self.last_read = time.monotonic()

    @property
    def owner(self) -> tuple[str, ...]:
        """The peer an engine created by this connection belongs to."""
        if self.identity is not None:
            pod = self.identity
            return ("pod", pod.namespace, pod.pod, pod.uid)
        return ("uid", str(self.uid))

    def close(self) -> None:
        """Ends the connection from the daemon's side: its reader sees the end, `_serve` cleans up."""
        self.transport.close()

    def at_boundary(self) -> bool:
        """Nothing of a next message read yet (the stream's buffer; unknown counts as not)."""
        return not getattr(self.reader, "_buffer", b"x")

    def park(self) -> None:
        if (
            not self.parked
            and isinstance(self.transport, asyncio.ReadTransport)
            and not self.transport.is_closing()
        ):
            self.transport.pause_reading()
            self.parked = True

    def unpark(self) -> None:
        if self.parked:
            self.parked = False
            if isinstance(self.transport, asyncio.ReadTransport) and not self.transport.is_closing():
                self.transport.resume_reading()


@dataclass(frozen=True, slots=True)
class ListenerView:
    """The socket's own counters, for one scrape."""

    results: Mapping[str, int]  # messages by result (RESULTS)
    connections: int  # open now
    refused: Mapping[str, int]  # connections refused by reason (REFUSALS)
    max_connections: int


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


def split_listen_address(text: str) -> tuple[str | None, int]:
    """`HOST:PORT`, `:PORT` (every interface) or `[V6]:PORT` to (host or None, port); ValueError if not."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or None, int(port)


def describe(engine: EngineState | None) -> str:
    """Who is at the other end of a connection, for a log line."""
    if engine is None:
        return "a probe (before hello)"
    return "probe of " + who(*engine.key)


class ProbeListener:
    """Listens on the socket, admits connections and applies every valid message to the store."""

    def __init__(
        self,
        path: str,
        group: str,
        allowed_uids: Collection[int],
        store: ProbeStore,
        listen_address: str = "",
        reviewer: TokenReviewer | None = None,
        apply_interval: float = 0.0,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        """`path`: the unix socket ("" for none); `listen_address`: HOST:PORT for TCP ("" for none),
        whose connections `reviewer` checks; `apply_interval`: seconds snapshots are held (0: none);
        `idle_timeout`: a connection that sent nothing for this long is closed (0: never)."""
        self.apply_interval = apply_interval
        self.idle_timeout = idle_timeout
        self._open: set[Connection] = set()  # connections that have held a snapshot: parked between passes
        self._served: set[Connection] = set()  # every admitted connection: idle and review checks
        self._owners: dict[str, tuple[str, ...]] = {}  # engine instance -> the peer that created it
        self._per_pod: dict[tuple[str, str], int] = {}  # reviewed TCP connections by (namespace, pod)
        self._reviews: set[asyncio.Task[None]] = set()  # re-reviews in flight
        self._next_check = 0.0
        self.pending = 0  # TCP connections awaiting their review
        self._ticker: asyncio.Task[None] | None = None  # the read passes and the socket file's watch
        self.path = path
        self.listen_address = listen_address
        self.reviewer = reviewer
        self.tcp_error: str | None = None
        self._tcp_server: asyncio.AbstractServer | None = None
        self.group = group
        self.allowed_uids = set(allowed_uids)
        self.store = store
        self.counts = dict.fromkeys(RESULTS, 0)
        self.connections = 0
        self.refused = dict.fromkeys(REFUSALS, 0)
        self.listen_error: str | None = None
        self._refused_uids: set[int] = set()
        self._server: asyncio.AbstractServer | None = None
        self._socket_id: tuple[int, int] | None = None
        self._uid = os.geteuid()
        self._logged_at: dict[str, float] = {}
        self._checks = CheckProcess()  # large messages, read in a process of their own
        self._check_turn = asyncio.Lock()  # one at a time: one parsed 4 MiB message in memory at most

    def view(self) -> ListenerView:
        return ListenerView(dict(self.counts), self.connections, dict(self.refused), MAX_CONNECTIONS)

    def not_listening(self) -> str | None:
        """Why engines cannot connect now (readiness), or None: listening, and the socket file is ours."""
        if self.tcp_error:
            return self.tcp_error
        if not self.path:
            return None
        if self.listen_error:
            return self.listen_error
        if self._server is None:
            return f"probe socket {self.path} not created yet"
        if self._socket_gone():
            return f"probe socket {self.path} was removed or replaced (re-creating it)"
        return None

    # ---- the socket file ----------------------------------------------------------------------------

    @property
    def tick_interval(self) -> float:
        """One timer does both the read passes and the watch of the socket file: each wake-up of the
        event loop costs about 200 us of CPU on a small VM, whatever it does."""
        return self.apply_interval if self.apply_interval > 0 else WATCH_INTERVAL

    async def start(self) -> None:
        if self.listen_address:
            await self._listen_tcp()
        if self.path:
            await self._listen()
        if self.path or self.apply_interval > 0 or self.listen_address:
            self._ticker = asyncio.ensure_future(self._tick())

    async def _listen_tcp(self) -> None:
        """The TCP listener: bound once at start; a port in use is a readiness failure that says so."""
        try:
            host, port = split_listen_address(self.listen_address)
            self._tcp_server = await asyncio.start_server(
                self._handle_tcp, host, port, limit=MAX_AUTH_LINE_BYTES, reuse_address=True
            )  # the limit is raised to MAX_MESSAGE_BYTES once the connection is reviewed
        except (OSError, ValueError) as err:
            self.tcp_error = f"cannot listen for probes on {self.listen_address}: {err}"
            log.error("%s", self.tcp_error)
            return
        log.info("probes over TCP on %s (each connection checked by a TokenReview)", self.listen_address)

    async def _listen(self) -> None:
        """Creates the socket (mode 0660, the configured group) in place of whatever is at its path (a
        stale socket of ours; a file, directory or socket an engine left: `socket_path`); on failure
        `listen_error` says why and the watcher tries again every second, logging only when the reason
        changes."""
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            found = clear_socket_path(self.path)
            if found is not None:
                self._log_limited(
                    "foreign", logging.WARNING,
                    "probe socket %s: removed a %s that was not ours from its path (something in the"
                    " engines' group wrote to the socket directory; mount it read-only in engines)",
                    self.path, found,
                )  # fmt: skip
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
            if error != self.listen_error:
                log.error("%s (retrying every %gs)", error, self.tick_interval)
            self.listen_error = error
            return
        self._server, self._socket_id = server, (st.st_dev, st.st_ino)
        if st.st_uid != self._uid:  # not what we created: replaced between bind and lstat
            server.close()
            self._server = None
            self.listen_error = f"probe socket {self.path} was replaced as it was created"
            return
        if self.listen_error:
            log.info("probe socket listening on %s (recovered)", self.path)
        else:
            log.info("probe socket listening on %s", self.path)
        self.listen_error = None

    def _socket_gone(self) -> bool:
        """Removed, or replaced: another inode (a socket renamed over ours), owner or kind of file."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return True
        return (
            (st.st_dev, st.st_ino) != self._socket_id
            or st.st_uid != self._uid
            or not stat.S_ISSOCK(st.st_mode)
        )

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval)
            if self.apply_interval > 0:
                try:
                    await self.read_pass()
                except Exception:  # never let the applier die: the store counts and logs what it refuses
                    log.exception("applying held probe snapshots")
            if self.path:
                try:
                    await self._watch()
                except Exception:  # never let the watcher die
                    log.exception("probe socket watcher")
            now = time.monotonic()
            if now >= self._next_check:
                self._next_check = now + CHECK_EVERY
                try:
                    self.check_connections(now)
                except Exception:  # never let the checks die
                    log.exception("probe connection checks")

    def check_connections(self, now: float) -> None:
        """Closes connections silent for `idle_timeout` (counted: idle) and TCP ones whose token
        expires; starts the re-review of those due. Parked connections count as read at each pass."""
        for conn in list(self._served):
            if self.idle_timeout > 0 and now - conn.last_read > self.idle_timeout and not conn.held:
                self.refused["idle"] += 1
                self._log_limited(
                    "idle", logging.WARNING,
                    "closed the connection of %s: nothing received for %gs (counted in"
                    " guided_decoding_probe_connections_refused_total{reason=\"idle\"})",
                    describe(conn.engine), self.idle_timeout,
                )  # fmt: skip
                self._served.discard(conn)
                conn.close()
                continue
            auth = conn.auth
            if auth is None or auth.reviewing:
                continue
            if auth.expires_at is not None and now >= auth.expires_at - EXPIRY_MARGIN:
                log.info(
                    "%s: its token expires: closing, it reconnects with its new one", describe(conn.engine)
                )
                self._served.discard(conn)
                conn.close()
            elif now >= auth.review_at:
                auth.reviewing = True
                task = asyncio.ensure_future(self._review_again(conn, auth))
                self._reviews.add(task)
                task.add_done_callback(self._reviews.discard)

    async def _review_again(self, conn: Connection, auth: TcpAuth) -> None:
        """Asks the API server about a connection's token again: a token it no longer vouches for (the
        pod deleted, the token revoked) or for another pod closes the connection; a review that could
        not be asked is tried again in REVIEW_RETRY, up to twice REVIEW_EVERY without one."""
        assert self.reviewer is not None
        try:
            reviewed = await self.reviewer.review(auth.token, fresh=True)  # never from memory
            if reviewed.identity != conn.identity:
                raise Refused("token_rejected", "the token now names another pod")
        except Refused as err:
            now = time.monotonic()
            transient = err.reason in ("review_failed", "review_rate_limited")
            if transient and now < auth.reviewed_at + 2 * REVIEW_EVERY:
                auth.review_at = now + REVIEW_RETRY
                auth.reviewing = False
                return
            self._refuse(err, again=True)
            self._served.discard(conn)
            conn.close()
            return
        except Exception:  # never let a review task die loudly: close, the probe reconnects
            log.exception("reviewing a probe's token again")
            conn.close()
            return
        fresh = TcpAuth.of(auth.token, reviewed, time.monotonic())
        auth.reviewed_at, auth.review_at, auth.expires_at = (
            fresh.reviewed_at,
            fresh.review_at,
            fresh.expires_at,
        )
        auth.reviewing = False

    async def _watch(self) -> None:
        """Someone removed the socket (or its directory: a hostPath cleaned, a node agent) or put
        another file there: probes could never reach us again, so listen anew. Connected probes
        keep their connections."""
        if self._server is not None and self._socket_gone():
            log.warning("probe socket %s was removed or replaced: listening again", self.path)
            self._server.close()
            self._server = None
        if self._server is None:
            await self._listen()

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(BaseException):
                await self._ticker
            self._ticker = None
        for task in list(self._reviews):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        for conn in list(self._open):
            conn.unpark()
        self.apply_held()
        await self._checks.close()
        if self._tcp_server is not None:
            self._tcp_server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tcp_server.wait_closed(), 1.0)
            self._tcp_server = None
        if self.reviewer is not None:
            await self.reviewer.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            if not self._socket_gone():
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            self._server = None

    # ---- connections --------------------------------------------------------------------------------

    def _log_limited(self, kind: str, level: int, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._logged_at.get(kind, -LOG_EVERY) >= LOG_EVERY:
            self._logged_at[kind] = now
            log.log(level, msg, *args)

    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        """Whether a new connection may stay: under the connection limit, from an allowed uid."""
        if self.connections >= MAX_CONNECTIONS:
            self.refused["limit"] += 1
            return False
        if self.allowed_uids:
            uid = peer_uid(writer)
            if uid not in self.allowed_uids:
                self.refused["credentials"] += 1
                if uid not in self._refused_uids and len(self._refused_uids) < MAX_REFUSED_UIDS_LOGGED:
                    self._refused_uids.add(uid if uid is not None else -1)  # a line per uid, bounded
                    log.warning("refused a probe connection from uid %s (not in --probe.allowed-uids)", uid)
                return False
        return True

    def _refuse(self, err: Refused, again: bool = False, transport: str = "TCP") -> None:
        """Counts a refusal by reason and logs it (at most one line a minute per reason); `again`: a
        connection taken before whose token a later review did not vouch for."""
        self.refused[err.reason] += 1
        self._log_limited(
            "refused:" + err.reason, logging.WARNING,
            "%s a probe connection over %s (%s): %s (counted in"
            " guided_decoding_probe_connections_refused_total; at most one such line a minute)",
            "closed" if again else "refused", transport, err.reason, err.detail,
        )  # fmt: skip

    async def _authenticate(self, reader: asyncio.StreamReader) -> tuple[PodIdentity, TcpAuth]:
        """The first line of a TCP connection must be `auth` (at most MAX_AUTH_LINE_BYTES, within
        AUTH_TIMEOUT) with a token the API server vouches for."""
        try:
            line = await asyncio.wait_for(reader.readuntil(b"\n"), AUTH_TIMEOUT)
        except asyncio.LimitOverrunError:
            raise Refused("no_token", f"the first line is over {MAX_AUTH_LINE_BYTES} bytes") from None
        except (asyncio.IncompleteReadError, TimeoutError) as err:
            raise Refused("no_token", f"no auth line ({type(err).__name__})") from None
        result, message = classify(line)
        del line  # the token is kept on the connection alone, to review it again
        if not isinstance(message, wire.Auth):
            why = "" if result == "ok" else f" ({result})"
            raise Refused("no_token", "the first message is not auth" + why)
        if self.reviewer is None:
            raise Refused("review_failed", "no TokenReview configured")
        reviewed = await self.reviewer.review(message.token)
        return reviewed.identity, TcpAuth.of(message.token, reviewed, time.monotonic())

    async def _handle_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A TCP connection waits for its review in a pool of MAX_PENDING of its own; reviewed, it takes
        one of the MAX_CONNECTIONS slots, at most MAX_PER_POD of them for one pod."""
        if self.pending >= MAX_PENDING:
            self._refuse(Refused("pending_limit", f"{MAX_PENDING} connections already await their review"))
            writer.close()
            return
        self.pending += 1
        try:
            identity, auth = await self._authenticate(reader)
        except Refused as err:
            self._refuse(err)
            writer.close()
            return
        except (ConnectionError, OSError, asyncio.CancelledError):
            writer.close()
            return
        finally:
            self.pending -= 1
        pod = (identity.namespace, identity.pod)
        if self.connections >= MAX_CONNECTIONS:
            self._refuse(Refused("limit", f"{MAX_CONNECTIONS} connections already open"))
            writer.close()
            return
        if self._per_pod.get(pod, 0) >= MAX_PER_POD:
            self._refuse(Refused("pod_limit", f"pod {pod[0]}/{pod[1]} already has {MAX_PER_POD} connections"))
            writer.close()
            return
        reader._limit = MAX_MESSAGE_BYTES  # type: ignore[attr-defined]  # reviewed: whole messages now
        self.connections += 1
        self._per_pod[pod] = self._per_pod.get(pod, 0) + 1
        try:
            await self._serve(reader, writer, identity, auth=auth)
        finally:
            self.connections -= 1
            if (left := self._per_pod.pop(pod, 1) - 1) > 0:
                self._per_pod[pod] = left

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._admit(writer):
            writer.close()
            return
        self.connections += 1
        try:
            await self._serve(reader, writer, None, uid=peer_uid(writer))
        finally:
            self.connections -= 1

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        identity: PodIdentity | None,
        uid: int | None = None,
        auth: TcpAuth | None = None,
    ) -> None:
        """Applies one connection's messages; `identity`, over TCP, names the pod instead of its hello
        (`auth`: its token, reviewed again in time); `uid`, on the unix socket, is the peer's. The caller
        counts the connection. A refused hello (`Refused`) ends the connection."""
        conn = Connection(identity, reader, writer.transport, uid=uid, auth=auth)
        self._served.add(conn)
        try:
            while (line := await self._read_message(reader, conn.engine)) is not None:
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
        except Refused as err:
            self._refuse(err, transport="TCP" if identity is not None else "the socket")
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass  # daemon shutting down: end quietly, the probe reconnects to the next daemon
        finally:
            self._served.discard(conn)
            self._open.discard(conn)
            self._apply_conn(conn)
            if conn.engine is not None:
                self.store.disconnected(conn.engine)
                log.info(
                    "%s disconnected (its series stay for --probe.engine-ttl unless it reconnects)",
                    describe(conn.engine),
                )
            writer.close()

    async def _prepare(self, line: bytes, engine: EngineState | None) -> Prepared:
        """A large message read in the check process, while its connection waits its turn."""
        async with self._check_turn:
            return await self._checks.prepare(line, describe(engine))

    # ---- held snapshots -------------------------------------------------------------------------------

    def _hold(self, conn: Connection, line: bytes) -> None:
        conn.held.append(line)
        conn.held_bytes += len(line)
        if conn.held_bytes > MAX_HELD_BYTES:
            self._apply_conn(conn)

    def _apply_conn(self, conn: Connection) -> None:
        if not conn.held:
            return
        held, conn.held, conn.held_bytes = conn.held, [], 0
        for line in held:  # a line that began like a snapshot may be a hello (JSON's last `kind` wins)
            try:
                conn.engine = self._apply(line, conn.engine, conn.identity, conn)
            except Refused as err:
                self._refuse(err, transport="TCP" if conn.identity is not None else "the socket")
                self._served.discard(conn)
                conn.close()
                return

    @property
    def _holding(self) -> set[Connection]:
        """The connections holding snapshots not applied yet."""
        return {conn for conn in self._open if conn.held}

    def apply_held(self) -> None:
        """Applies every held snapshot now."""
        for conn in list(self._open):
            self._apply_conn(conn)

    async def read_pass(self) -> None:
        """One pass: the parked connections resume and deliver what their probes sent meanwhile, every
        held snapshot is applied, and each connection at a message boundary is parked again. Each
        refresh runs one, so a scrape sees every snapshot sent before it."""
        for conn in list(self._open):
            conn.unpark()
        for _ in range(READ_PASSES):
            await asyncio.sleep(0)
        self.apply_held()
        for conn in list(self._open):
            if conn.at_boundary():
                conn.park()

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
