"""The probe socket: a unix stream server (and a TCP one) that engines send cumulative snapshots to.

The socket is created with mode 0660 so that only the daemon's user and group (the engine pods'
fsGroup) can connect, and peers can be restricted further by uid (SO_PEERCRED). If the socket file is
removed or replaced, it is created again. What each message does, whatever the transport, is
`messages` (framing, classification, held snapshots and read passes, large messages, hello claims).

Over TCP (`--probe.listen-address`: a node-local Service or a hostPort, no hostPath in the engine
pod) a connection says nothing until its first line, `auth`, has passed a TokenReview
(`tokenreview`): the pod's name and namespace are the review's, whatever its hello says. Until then it
is in a small pool of its own (MAX_PENDING, AUTH_TIMEOUT, an auth line of at most MAX_AUTH_LINE_BYTES),
so junk connections cannot take the slots of reviewed or unix-socket probes. The review is asked again
every REVIEW_EVERY and the connection closed when it fails or the token expires (the probe reconnects
with its rotated token). A connection silent for `idle_timeout` is closed. Every refusal is counted by
reason in `guided_decoding_probe_connections_refused_total`.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import logging
import os
import stat
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from exporter import wire
from exporter.daemon.receiver.connection import Connection, TcpAuth, describe, peer_uid
from exporter.daemon.receiver.message_check import MAX_MESSAGE_BYTES, classify
from exporter.daemon.receiver.messages import MessageHandling
from exporter.daemon.receiver.socket_path import clear_socket_path
from exporter.daemon.receiver.store import ProbeStore
from exporter.daemon.receiver.tokenreview import REFUSAL_REASONS, PodIdentity, Refused, TokenReviewer

log = logging.getLogger("gdx.collector.probe")
MAX_CONNECTIONS = 256  # a node runs a handful of engines; beyond this a connection is refused, and counted
MAX_PENDING = 16  # TCP connections awaiting their review, outside MAX_CONNECTIONS
MAX_PER_POD = 32  # reviewed TCP connections of one pod (one per engine process)
MAX_AUTH_LINE_BYTES = 20 * 1024  # the auth line: a token of wire.MAX_TOKEN_CHARS and its JSON
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
MAX_VERDICT_BACKLOG = 64 * 1024  # a probe's unread verdict bytes beyond which it gets no more
WATCH_INTERVAL = 1.0  # socket file checks (removed or replaced: listen again) when there are no read passes
MAX_REFUSED_UIDS_LOGGED = 64


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


def split_listen_address(text: str) -> tuple[str | None, int]:
    """`HOST:PORT`, `:PORT` (every interface) or `[V6]:PORT` to (host or None, port); ValueError if not."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or None, int(port)


class ProbeListener(MessageHandling):
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
        max_hold: float = 0.0,
    ) -> None:
        """`path`: the unix socket ("" for none); `listen_address`: HOST:PORT for TCP ("" for none),
        whose connections `reviewer` checks; `apply_interval`: seconds between read passes (0: none,
        each message applied on arrival); `max_hold`: the longest a snapshot read waits to be applied
        (0: applied in each pass); `idle_timeout`: a connection that sent nothing for this long is
        closed (0: never)."""
        super().__init__(store, apply_interval, max_hold)
        self.idle_timeout = idle_timeout
        self._served: set[Connection] = set()  # every admitted connection: idle and review checks
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
        self.connections = 0
        self.refused = dict.fromkeys(REFUSALS, 0)
        self.listen_error: str | None = None
        self._refused_uids: set[int] = set()
        self._server: asyncio.AbstractServer | None = None
        self._socket_id: tuple[int, int] | None = None
        self._uid = os.geteuid()

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
                    await self.read_pass(apply_all=False)
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
        expires; starts the re-review of those due. Parked connections count as read at each pass.
        Sends the node's verdicts to each vLLM API server's probe that has not had their latest."""
        self.send_verdicts(now)
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

    def send_verdicts(self, now: float) -> None:
        """The node's verdicts (verdicts.py), one line, to every connected probe with a guard whose
        last copy is older; never to a connection whose writes already wait (a probe that does not
        read gets nothing more)."""
        verdicts = self.store.verdicts
        line = b""
        for conn in list(self._served):
            engine = conn.engine
            if engine is None or not engine.hello.guard:
                continue
            if conn.verdicts_sent == verdicts.version:
                continue
            transport = conn.transport
            if not isinstance(transport, asyncio.WriteTransport) or transport.is_closing():
                continue
            if transport.get_write_buffer_size() > MAX_VERDICT_BACKLOG:
                continue
            line = line or verdicts.line(now)
            transport.write(line)
            conn.verdicts_sent = verdicts.version

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
        fresh = TcpAuth.of(auth.token, reviewed, time.monotonic(), REVIEW_EVERY)
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
        return reviewed.identity, TcpAuth.of(message.token, reviewed, time.monotonic(), REVIEW_EVERY)

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
                await self._receive(conn, line)
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

    def _end(self, conn: Connection, err: Refused) -> None:
        self._refuse(err, transport="TCP" if conn.identity is not None else "the socket")
        self._served.discard(conn)
        conn.close()
