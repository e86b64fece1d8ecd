"""One probe connection: who is at the other end (a reviewed TCP pod, else the unix peer's uid), what its
token's review says and when to ask again, its engine once hello named it, and the snapshots it holds
between read passes (parked: its transport not reading)."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from dataclasses import dataclass

from exporter.daemon.receiver.store import EngineState, who
from exporter.daemon.receiver.tokenreview import PodIdentity, ReviewedToken

READ_CHUNK = 256 * 1024  # one read of a parked socket (asyncio's own reads are at most this)


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
    def of(cls, token: str, reviewed: ReviewedToken, now: float, every: float) -> TcpAuth:
        """`every`: seconds until the token is reviewed again."""
        expires = None if reviewed.expires is None else now + (reviewed.expires - time.time())
        return cls(token, now, now + every, expires)


class Connection:
    """One probe connection: its engine (once hello named it), its peer (a TCP pod's identity, else the
    unix peer's uid), its held snapshots, whether it is parked (its transport not reading until the next
    pass) and when it last sent a message."""

    __slots__ = (
        "auth", "engine", "greeted", "held", "held_bytes", "held_since", "identity", "last_read", "parked",
        "reader", "transport", "uid", "verdicts_sent",
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
        self.held_since = 0.0  # when the oldest snapshot held was read (monotonic)
        self.reader = reader
        self.transport = transport
        self.parked = False
        self.last_read = time.monotonic()
        self.verdicts_sent = -1  # the node's verdicts' version this connection last got (verdicts.py)

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

    def read_parked(self, limit: int) -> tuple[bytes, Exception | None] | None:
        """What the probe sent while the connection was parked, read straight from its socket without
        waking the event loop (non-blocking, about `limit` bytes at most), and how the reading ended:
        None (nothing more for now), EOFError (the peer closed) or the OSError a read raised. Only a
        parked plain socket transport (unix or TCP, never TLS) is read this way: nothing else reads it
        meanwhile, and a selector transport keeps no bytes of its own; None for any other (resume it)."""
        sock = self.transport.get_extra_info("socket")
        fd = -1 if sock is None or self.transport.is_closing() else sock.fileno()
        if not self.parked or fd < 0 or self.transport.get_extra_info("sslcontext") is not None:
            return None
        chunks: list[bytes] = []
        size = 0
        end: Exception | None = None
        while size < limit:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                break
            except OSError as err:
                end = err
                break
            if not chunk:
                end = EOFError()
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), end

    def unpark(self) -> None:
        if self.parked:
            self.parked = False
            if isinstance(self.transport, asyncio.ReadTransport) and not self.transport.is_closing():
                self.transport.resume_reading()


def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    """The connecting process's user id, from the kernel (SO_PEERCRED), or None when unknown."""
    sock = writer.get_extra_info("socket")
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def describe(engine: EngineState | None) -> str:
    """Who is at the other end of a connection, for a log line."""
    if engine is None:
        return "a probe (before hello)"
    return "probe of " + who(*engine.key)
