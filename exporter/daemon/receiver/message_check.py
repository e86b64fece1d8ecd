"""Reading one framed probe message: `classify` (the result label and the validated message), and for a
large one, the same reading with its schema texts' identities found in a child process.

Why a process and not a thread: reading a 4 MiB `schemas` message parses its texts to hash them and
builds millions of Python objects. In a worker thread that still held the daemon's event loop: the
allocations set off the collector's full passes, each a pause of the whole process as long as the
daemon's heap is large (0.27 s once in CI against a 0.2 s bound; 0.57 s with 3 million live objects
here), and /metrics waited. In a process of its own the daemon's heap and lock are never touched; only
the line and the result travel, and an engine's texts are remembered there across reconnects.
The process starts with the first large message (about 0.5 s, once) and lives as long as the listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pickle
import sys
import time
from dataclasses import dataclass
from typing import Any

import orjson

from exporter import wire, wire_check
from exporter.daemon.receiver.schema_check import Identities, SpecChecker

log = logging.getLogger("gdx.collector.probe")
MAX_MESSAGE_BYTES = 4 * 2**20
# A message the child has not read by then is dropped and the child replaced: the largest honest one
# (4 MiB of dense schema texts) takes 0.5 to 2 s, and while one is read no other large message is.
CHECK_TIMEOUT = 30.0
LOG_EVERY = 60.0  # at most one line a minute about the child ending


def classify(line: bytes) -> tuple[str, wire.Message | None]:
    """Pure: the result label for one framed message and, when it is ok, the validated message.

    malformed: not a JSON object with a known kind (NaN and numbers no double holds are not JSON here);
    rejected: another protocol version, or a field of the wrong type or out of range; oversize: over
    MAX_MESSAGE_BYTES."""
    if len(line) > MAX_MESSAGE_BYTES:
        return "oversize", None
    try:
        # orjson: a quarter of json's time; NaN, a number no double holds, bad UTF-8 are malformed
        doc = orjson.loads(line)
    except (ValueError, RecursionError):
        return "malformed", None
    if not isinstance(doc, dict) or doc.get("kind") not in wire.KINDS:
        return "malformed", None
    message = check(doc)
    return ("ok", message) if message is not None else ("rejected", None)


def check(doc: dict[str, Any]) -> wire.Message | None:
    """Pure: the validated message of a decoded document of a known kind, or None when the protocol
    refuses it (another version, a field of the wrong type or out of range): what `classify` calls
    rejected, and what a merged batch of snapshots must pass (messages.py)."""
    try:
        return wire_check.validate(doc)
    except (wire_check.Invalid, TypeError, ValueError, OverflowError, RecursionError):
        return None


@dataclass(frozen=True, slots=True)
class Prepared:
    """A message read off the event loop: `classify`'s result and, for `schemas`, its texts'
    identities (schema_check), for the store to apply on the loop."""

    result: str
    message: wire.Message | None
    identities: Identities | None = None


def prepare(line: bytes, checker: SpecChecker) -> Prepared:
    """Blocking: the message classified and, for `schemas`, its texts checked."""
    result, message = classify(line)
    if isinstance(message, wire.SchemasMessage):
        return Prepared(result, message, checker.identities(message))
    return Prepared(result, message)


class CheckProcess:
    """One child process (`message_check_worker`) that reads large messages, one at a time: started
    on first use, started again after it died (killed for memory: that message is dropped as
    rejected, and logged). A plain `python -m` child talking over its pipes: multiprocessing's spawn
    would run the daemon's main script again in the child."""

    def __init__(self, timeout: float = CHECK_TIMEOUT) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self.timeout = timeout
        self.deaths = 0  # the child ended, or was ended, with a message in it
        self._logged = -LOG_EVERY

    async def prepare(self, line: bytes, who: str) -> Prepared:
        """The message read in the child; the caller lets one message in at a time."""
        try:
            body = await asyncio.wait_for(self._exchange(line), self.timeout)
        except (OSError, EOFError, asyncio.IncompleteReadError, ConnectionError, TimeoutError) as err:
            self.deaths += 1
            await self.close()
            why = f"no answer in {self.timeout:g}s" if isinstance(err, TimeoutError) else type(err).__name__
            now = time.monotonic()
            if now - self._logged >= LOG_EVERY:
                self._logged = now
                log.warning(
                    "the process that reads large probe messages ended (%s) on a %d-byte message from %s;"
                    " that message is dropped (counted as rejected) and the next one starts it again"
                    " (at most one such line a minute)",
                    why,
                    len(line),
                    who,
                )
            return Prepared("rejected", None)
        except BaseException:
            await self.close()  # cancelled mid-message: the pipe is out of step
            raise
        # our own child's answer; unpickled in a thread, as its objects can be many
        prepared: Prepared = await asyncio.to_thread(pickle.loads, body)
        return prepared

    async def _exchange(self, line: bytes) -> bytes:
        proc = await self._started()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(len(line).to_bytes(4, "big") + line)
        await proc.stdin.drain()
        size = int.from_bytes(await proc.stdout.readexactly(4), "big")
        return await proc.stdout.readexactly(size)

    async def _started(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "exporter.daemon.receiver.message_check_worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=2 * MAX_MESSAGE_BYTES,
            )
        return self._proc

    async def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
