"""Receiver for the in-engine probes: a unix socket that engines send cumulative snapshots to.

Framing is one JSON object per line. Every message is checked (size, JSON, an object with a known
`kind`); anything else is dropped and counted in `guided_decoding_probe_snapshots_total{result}`,
never raised. The socket is created with mode 0660 so that only the daemon's user and group (the
engine pods' fsGroup) can connect. The families that the snapshots carry are added by the probe issue;
this module owns the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from collections.abc import Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter.config import Config
from exporter.sources.base import Source, SourceError

log = logging.getLogger("gdx.probe")
MAX_MESSAGE_BYTES = 4 * 2**20
MAX_CONNECTIONS = 256  # a node runs a handful of engines; beyond this a connection is refused, and counted
KINDS = ("hello", "schemas", "snapshot")
RESULTS = ("ok", "malformed", "oversize", "rejected")


def classify(line: bytes) -> tuple[str, dict[str, Any] | None]:
    """Pure: the result label for one framed message and, when it is ok, the decoded object."""
    if len(line) > MAX_MESSAGE_BYTES:
        return "oversize", None
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "malformed", None
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        return "malformed", None
    if doc.get("v") != 1:
        return "rejected", None
    return "ok", doc


class ProbeSource(Source):
    name = "probe"

    def __init__(self, config: Config) -> None:
        super().__init__(config.collector_timeout)
        self.path = config.probe_socket
        self.counts = dict.fromkeys(RESULTS, 0)
        self.connections = 0
        self.refused = 0
        self._server: asyncio.AbstractServer | None = None
        self._listen_error: str | None = None

    async def start(self) -> None:
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                    os.unlink(self.path)  # a stale socket from a previous run
            self._server = await asyncio.start_unix_server(
                self._handle, path=self.path, limit=MAX_MESSAGE_BYTES
            )
            os.chmod(self.path, 0o660)
            log.info("probe socket listening on %s", self.path)
        except OSError as err:
            self._listen_error = f"cannot listen on probe socket {self.path}: {err.strerror or err}"
            log.error("%s", self._listen_error)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= MAX_CONNECTIONS:
            self.refused += 1
            writer.close()
            return
        self.connections += 1
        try:
            while True:
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.LimitOverrunError:
                    self.counts["oversize"] += 1
                    await self._skip_line(reader)
                    continue
                except asyncio.IncompleteReadError:
                    break  # peer closed, possibly mid-message: the partial message is dropped
                result, _doc = classify(line)  # the snapshot's families arrive with the probe (issue 3)
                self.counts[result] += 1
        except (ConnectionError, OSError):
            pass
        finally:
            self.connections -= 1
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
        if self._listen_error:
            raise SourceError(self._listen_error)

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
        yield CounterMetricFamily(
            "guided_decoding_probe_connections_refused",
            f"Probe connections refused because {MAX_CONNECTIONS} were already open.",
            value=self.refused,
        )
