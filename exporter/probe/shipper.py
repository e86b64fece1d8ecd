"""The probe's background thread: ships cumulative snapshots to the node daemon over a unix socket.

Every `interval` seconds it connects if needed (backing off up to 30 s while the daemon is absent),
sends `hello` and the metadata of every tracked spec on a new connection, then a snapshot. All
socket work happens here with a send timeout, never on the engine's threads; every failure is
counted and retried, none is raised. The recorder hands over each spec's metadata with its identity
(computed on this thread, once per spec); the shipper only encodes what it is given.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from exporter.probe.recorder import Recorder, SpecMetadata
from exporter.wire import VERSION

log = logging.getLogger("gdx.probe")
SEND_TIMEOUT = 2.0
MAX_BACKOFF = 30.0
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
    """Ships one recorder's state to the daemon at `path`; `hello` names the engine process (pod,
    engine, engine_kind, engine_version, backends, probe_version)."""

    def __init__(self, recorder: Recorder, path: str, hello: dict[str, Any], interval: float = 1.0) -> None:
        self.recorder = recorder
        self.path = path
        self.interval = interval
        self.hello = {"instance": uuid.uuid4().hex, "pid": os.getpid(), **hello}
        self.counters = {"send_failures": 0, "connects": 0}
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seq = 0
        self._backoff = 0.0
        self._next_connect = 0.0
        self._logged_failure = False

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
        messages = self.messages(fresh)
        try:
            assert self._sock is not None
            for message in messages:
                self._sock.sendall(message)
            self._backoff = 0.0
            self._logged_failure = False
        except OSError as err:
            self.counters["send_failures"] += 1
            self._failed(f"send failed: {err}")
            self._close()

    def messages(self, fresh: bool) -> list[bytes]:
        """What to send now: on a fresh connection hello and every schema first, then a snapshot.
        The snapshot is taken before the schema list, so every spec it names has its metadata sent."""
        snapshot = self.recorder.snapshot(full=fresh)
        out = [encode({"kind": "hello", **self.hello})] if fresh else []
        out.extend(schema_messages(self.recorder.take_unsent(everything=fresh)))
        self._seq += 1
        probe = {**self.recorder.counters, **self.counters}
        out.append(encode({"kind": "snapshot", "seq": self._seq, **snapshot, "probe": probe}))
        return out

    def _connect(self) -> bool:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(SEND_TIMEOUT)
        try:
            sock.connect(self.path)
        except OSError as err:
            sock.close()
            self._failed(f"cannot connect to {self.path}: {err}")
            return False
        self._sock = sock
        self.counters["connects"] += 1
        log.info("guided-decoding probe: connected to %s", self.path)
        return True

    def _failed(self, why: str) -> None:
        if not self._logged_failure:  # one line per outage, not one per second
            log.warning("guided-decoding probe: %s (retrying with backoff)", why)
            self._logged_failure = True

    def _close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
