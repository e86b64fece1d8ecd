"""The probe's background thread: ships cumulative snapshots to the node daemon over a unix socket or TCP.

Every `interval` seconds it connects if needed (backing off up to 30 s while the daemon is absent),
sends `hello` and the metadata of every tracked spec on a new connection, then a snapshot. Over TCP
the first line is `auth`, the pod's projected ServiceAccount token, read from its file at each
connect (the kubelet rotates it; a name lookup and a file read happen here, never on an engine
thread). All socket work happens here, never on the engine's threads; every failure is counted and
retried, none is raised. Sends never block: a round the daemon has not yet read stays pending and
the next rounds are skipped (`deferred`: snapshots are cumulative, so the one sent after catches
up). Only a daemon that reads nothing for STALL_SECONDS is given up on (`send_failures`) and
reconnected to; reconnecting to one that is merely slow would resend every schema and slow it more.
The recorder hands over each spec's metadata with its identity
(computed on this thread, once per spec); the shipper only encodes what it is given.

On the unix socket nothing is sent before the kernel says who listens (SO_PEERCRED): the daemon's
uid (`GDX_PROBE_DAEMON_UID`, else the owner of the socket's directory). The directory is shared with
other pods: a socket someone else put at the path would otherwise receive this engine's hello and
schema texts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from exporter.probe.aggregates import SpecMetadata
from exporter.probe.recorder import Recorder
from exporter.probe.settings import Address, parse_address
from exporter.wire import DEFAULT_TOKEN_FILE, MAX_TOKEN_CHARS, VERSION

log = logging.getLogger("gdx.probe")
SEND_TIMEOUT = 2.0  # connecting
STALL_SECONDS = 10.0  # a daemon that takes no byte of a pending round for this long is hung
MAX_BACKOFF = 30.0
MAX_INBOX = 1 << 20  # the daemon's unread bytes kept while a line is incomplete (verdicts: a few KB)
CHUNK_BYTES = 1 << 20


def encode(doc: dict[str, Any]) -> bytes:
    """One protocol line: the message with the protocol version, compact JSON, newline-terminated."""
    return (
        json.dumps({"v": VERSION, **doc}, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "replace"
        )
        + b"\n"
    )


def schema_messages(specs: Iterable[SpecMetadata]) -> Iterator[bytes]:
    """`schemas` messages of at most about CHUNK_BYTES each (a single large text may exceed it)."""
    batch: list[dict[str, Any]] = []
    size = 0
    for spec in specs:
        batch.append(
            {
                "id": spec.id,
                "hash": spec.identity.schema_hash,
                "shape": spec.identity.shape_hash,
                "kind": spec.kind,
                "backend": spec.backend,
                "title": spec.identity.title,
                "text": spec.text,
                "bytes": spec.length,
                "truncated": spec.truncated,
                **({"warnings": list(spec.warnings)} if spec.warnings else {}),
            }
        )
        size += 200 + (spec.length if spec.text is not None else 0)
        if size >= CHUNK_BYTES:
            yield encode({"kind": "schemas", "schemas": batch})
            batch, size = [], 0
    if batch:
        yield encode({"kind": "schemas", "schemas": batch})


class Shipper:
    """Ships one recorder's state to the daemon at `path` (a socket path, unix:PATH or tcp://HOST:PORT);
    `hello` names the engine process (pod, engine, engine_kind, engine_version, backends, probe_version)."""

    def __init__(
        self,
        recorder: Recorder,
        path: str,
        hello: dict[str, Any],
        interval: float = 1.0,
        token_file: str = DEFAULT_TOKEN_FILE,
        daemon_uid: int | None = None,
    ) -> None:
        """`daemon_uid`: who must listen on a unix socket (None: the owner of its directory)."""
        self.recorder = recorder
        self.path = path
        self.token_file = token_file
        self.daemon_uid = daemon_uid
        self.wrong_listener = 0  # unix connections dropped unused: someone else listened (not shipped)
        try:
            self.address: Address | None = parse_address(path)
        except ValueError as err:
            self.address = None
            log.warning("guided-decoding probe: not shipping: GDX_PROBE_ADDRESS: %s", err)
        self.interval = interval
        self.hello = {"instance": uuid.uuid4().hex, "pid": os.getpid(), **hello}
        self.counters = {"send_failures": 0, "deferred": 0, "connects": 0}
        self._sock: socket.socket | None = None
        self._pending = memoryview(b"")  # what of the last round the daemon has not yet read
        self._progress_at = 0.0  # when the daemon last took a byte (or the connection was made)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seq = 0
        self._backoff = 0.0
        self._next_connect = 0.0
        self._logged_failure = False
        # What the daemon sends back (the node's guard verdicts, exporter/daemon/receiver/verdicts.py):
        # each whole JSON line to `on_message`, read without blocking; None: nothing is read.
        self.on_message: Callable[[dict[str, Any]], None] | None = None
        self._inbox = bytearray()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gdx-probe-shipper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # never let the thread die: count and go on
                self.recorder.counters["internal_errors"] += 1
            self._stop.wait(self.interval)

    def tick(self) -> None:
        """One round: connect if due, then ship. Public so tests can drive it without the thread."""
        self.recorder.drain()  # also while no daemon listens: the queue stays short
        now = time.monotonic()
        fresh = False
        if self._sock is None:
            if now < self._next_connect:
                return
            if not self._connect():
                self._backoff = min(MAX_BACKOFF, max(0.5, self._backoff * 2))
                self._next_connect = now + self._backoff
                return
            fresh = True
        try:
            self._receive()
            if self._pending and not self._flush(now):
                self.counters["deferred"] += 1  # the next round, once this one is read, catches up
                return
            self._pending = memoryview(b"".join(self.messages(fresh)))
            if self._flush(now) and not fresh:  # the daemon kept the connection past its first round
                self._backoff = 0.0
                self._logged_failure = False
        except OSError as err:
            # A daemon that went away, one that read nothing for STALL_SECONDS, or one that refused
            # this connection (over TCP, a token it did not accept): reconnect with the same backoff
            # as a failed connect, never in a tight loop.
            self.counters["send_failures"] += 1
            self._failed(f"send failed: {err}")
            self._close()
            self._backoff = min(MAX_BACKOFF, max(0.5, self._backoff * 2))
            self._next_connect = now + self._backoff

    def _receive(self) -> None:
        """The daemon's lines, as far as they have arrived, to `on_message`; bounded (MAX_INBOX: a
        line longer than that is dropped whole), never waiting."""
        if self.on_message is None or self._sock is None:
            return
        for _ in range(8):
            try:
                chunk = self._sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            if not chunk:
                return  # closed: the next send finds out and reconnects
            self._inbox += chunk
            while True:
                end = self._inbox.find(b"\n")
                if end < 0:
                    break
                line = bytes(self._inbox[:end])
                del self._inbox[: end + 1]
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if isinstance(doc, dict):
                    self.on_message(doc)
            if len(self._inbox) > MAX_INBOX:
                self._inbox.clear()

    def _flush(self, now: float) -> bool:
        """Sends what the socket takes without waiting; True once nothing is pending. Raises OSError
        for a closed connection, and TimeoutError once no byte went out for STALL_SECONDS."""
        assert self._sock is not None
        while self._pending:
            try:
                sent = self._sock.send(self._pending)
            except (BlockingIOError, InterruptedError):
                if now - self._progress_at >= STALL_SECONDS:
                    raise TimeoutError(f"the daemon read nothing for {STALL_SECONDS:.0f} s") from None
                return False
            self._pending = self._pending[sent:]
            self._progress_at = now
        return True

    def messages(self, fresh: bool) -> list[bytes]:
        """What to send now: on a fresh connection hello and every schema first, then a snapshot.
        The snapshot is taken before the schema list, so every spec it names has its metadata sent."""
        snapshot = self.recorder.snapshot(full=fresh)
        out = [encode({"kind": "hello", **self.hello})] if fresh else []
        if fresh and self.address is not None and self.address.family == "tcp":
            token = self._token()
            if token:  # without one the daemon refuses the connection, and counts it: say why here
                out.insert(0, encode({"kind": "auth", "token": token}))
        out.extend(schema_messages(self.recorder.take_unsent(everything=fresh)))
        self._seq += 1
        probe = {**self.recorder.counters, **self.counters}
        out.append(encode({"kind": "snapshot", "seq": self._seq, **snapshot, "probe": probe}))
        return out

    def _token(self) -> str:
        try:
            with open(self.token_file, encoding="utf-8") as handle:
                token = handle.read(MAX_TOKEN_CHARS + 1).strip()
        except (OSError, ValueError) as err:
            self._failed(f"no token to show the daemon: {self.token_file}: {err}")
            return ""
        if not token or len(token) > MAX_TOKEN_CHARS:
            self._failed(f"no token to show the daemon: {self.token_file} is empty or too long")
            return ""
        return token

    def _connect(self) -> bool:
        address = self.address
        if address is None:
            return False
        try:
            if address.family == "tcp":
                sock = socket.create_connection((address.host, address.port), timeout=SEND_TIMEOUT)
            else:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(SEND_TIMEOUT)
                try:
                    sock.connect(address.path)
                    stranger = self._stranger(sock, address.path)
                except BaseException:
                    sock.close()
                    raise
                if stranger:
                    sock.close()
                    self.wrong_listener += 1
                    self._failed(f"not sending to {address}: {stranger}")
                    return False
        except OSError as err:
            self._failed(f"cannot connect to {address}: {err}")
            return False
        sock.setblocking(False)  # sends take what fits; the rest waits for the next round
        self._sock = sock  # nothing pending: a connection closes through _close(), which drops it
        self._progress_at = time.monotonic()
        self.counters["connects"] += 1
        log.info("guided-decoding probe: connected to %s", address)
        return True

    def _stranger(self, sock: socket.socket, path: str) -> str:
        """Why the process listening on `sock` is not the daemon (its uid is not the expected one), or
        "" when it is, or when this system cannot say (no SO_PEERCRED: not Linux)."""
        option = getattr(socket, "SO_PEERCRED", None)
        if option is None:
            return ""
        expected = self.daemon_uid
        if expected is None:
            try:
                expected = os.stat(os.path.dirname(path) or ".").st_uid
            except OSError as err:
                return f"cannot tell who should listen ({err})"
        try:
            _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, 12))
        except (OSError, struct.error) as err:
            return f"cannot tell who listens ({err})"
        if uid != expected:
            return f"uid {uid} listens, not the daemon's ({expected}; GDX_PROBE_DAEMON_UID)"
        return ""

    def _failed(self, why: str) -> None:
        if not self._logged_failure:  # one line per outage, not one per second
            log.warning("guided-decoding probe: %s (retrying with backoff)", why)
            self._logged_failure = True

    def _close(self) -> None:
        self._pending = memoryview(b"")
        self._inbox.clear()  # a new connection starts with hello and every schema
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
