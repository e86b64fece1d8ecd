"""A large `schemas` message does not hold the daemon's event loop (issue 47: /metrics within 1 s): its
texts' hashes are recomputed in the listener's child process while its connection waits, and the
store learns each spec only once its check has landed. Real unix sockets, the real listener, store,
checker and child process; the loop's stall is measured against the same work done on the loop, side
by side, with a heap as large as a busy daemon's (the collector's pauses grow with it: in a thread they
alone broke the bound)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exporter import wire
from exporter.daemon.receiver.listener import ProbeListener
from exporter.daemon.receiver.message_check import classify
from exporter.daemon.receiver.messages import INLINE_BYTES
from exporter.daemon.receiver.store import EngineState, ProbeStore
from exporter.probe.shipper import encode
from exporter.schema.identity import spec_hashes

HELLO = {
    "kind": "hello", "instance": "i-1", "pid": 1, "pod": "p", "engine": "0", "engine_kind": "generic",
    "engine_version": "1", "backends": {}, "probe_version": "1",
}  # fmt: skip
TEXTS = 16
TEXT_CHARS = 215_000  # 16 of them escaped in one line stay under the 4 MiB message limit


def dense(i: int) -> str:
    """A schema text of many JSON nodes per byte (about two): the costliest to hash per byte."""
    cells = (TEXT_CHARS - 60) // 12
    return json.dumps(
        {"title": f"dense {chr(97 + i)}", "type": "array", "enum": [[[i % 10, 0], [0, 0]]] * cells},
        separators=(",", ":"),
    )


def schemas_line(texts: list[str], forged: int | None = None) -> bytes:
    """A `schemas` message as the probe sends it; spec `forged` claims another text's hash."""
    items: list[dict[str, Any]] = []
    for n, text in enumerate(texts):
        schema, shape = spec_hashes("json", text)
        if n == forged:
            schema = spec_hashes("json", '{"title":"victim"}')[0]
        items.append({"id": n, "hash": schema, "shape": shape, "kind": "json", "backend": "xgrammar",
                      "title": "", "text": text, "bytes": len(text), "truncated": False})  # fmt: skip
    return encode({"kind": "schemas", "schemas": items})


def row_snapshot(ids: range) -> bytes:
    rows = [
        {"id": i, "requests": 1, "hits": 0, "buckets": [1] + [0] * len(wire.SCHEMA_BUCKETS), "sum": 0.5}
        for i in ids
    ]
    return encode({"kind": "snapshot", "seq": 0, "full": True, "backends": {}, "schemas": rows})


async def until(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def said_hello(listener: ProbeListener) -> tuple[asyncio.StreamWriter, EngineState]:
    """A connection to `listener` whose hello the store has taken, and the engine it names."""
    _reader, writer = await asyncio.open_unix_connection(listener.path)
    writer.write(encode(HELLO))
    await writer.drain()
    await until(lambda: len(listener.store.engines) == 1)
    (engine,) = listener.store.engines.values()
    return writer, engine


class Ticker:
    """The event loop's largest gap between two 5 ms sleeps (what a scrape would wait for)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, time.perf_counter() - before - 0.005)

    async def stop(self) -> float:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        return self.worst


@pytest.mark.alone  # compares the loop's gaps with the same work inline: wants the machine quiet
async def test_a_4_mib_schemas_message_is_checked_off_the_loop(tmp_path: Path) -> None:
    heap = [{"n": [n]} for n in range(600_000)]  # a busy daemon's objects: a full collection walks them
    texts = [dense(i) for i in range(TEXTS)]
    line = schemas_line(texts, forged=3)
    assert INLINE_BYTES < len(line) <= 4 * 2**20
    # the same work on the loop, as before: classify and apply to a store of its own
    inline = ProbeStore()
    _, hello_msg = classify(encode(HELLO))
    assert isinstance(hello_msg, wire.Hello)
    engine = inline.hello(hello_msg, 1.0)
    assert engine is not None
    started = time.perf_counter()
    _, msg = classify(line)
    assert isinstance(msg, wire.SchemasMessage)
    inline.schemas(engine, msg, 1.0)
    on_loop = time.perf_counter() - started

    store = ProbeStore()
    listener = ProbeListener(str(tmp_path / "probe.sock"), "", (), store)
    await listener.start()
    try:
        _reader, writer = await asyncio.open_unix_connection(listener.path)
        writer.write(encode(HELLO))
        await writer.drain()
        await until(lambda: len(store.engines) == 1)
        ticker = Ticker()
        writer.write(line + row_snapshot(range(TEXTS)))
        await writer.drain()
        (engine,) = store.engines.values()
        await until(lambda: engine.snapshot is not None)
        worst = await ticker.stop()
        assert worst < min(0.1, on_loop / 5), (worst, on_loop)
        assert len(heap) == 600_000
        # the checks landed all the same: 15 specs, titled from their texts, queued for analysis;
        # the forged one refused, its claimed hash unknown
        assert sorted(engine.specs) == [n for n in range(TEXTS) if n != 3]
        assert store.tally.refused["schema_hash_mismatch"] == 1
        assert {info.title for info in engine.specs.values()} == {
            f"dense_{chr(97 + i)}" for i in range(TEXTS) if i != 3
        }
        assert all(info.verified for info in engine.specs.values())
        assert len(store.analysis.pending) == TEXTS - 1
        assert spec_hashes("json", '{"title":"victim"}')[0] not in store.info
        assert {h: i.title for h, i in store.info.items()} == {
            h: i.title for h, i in inline.info.items()
        }  # what the loop would have found
        writer.close()
    finally:
        await listener.close()


async def test_a_spec_is_unknown_until_its_check_lands_and_the_connection_keeps_its_order(
    tmp_path: Path,
) -> None:
    """While a large message's check waits its turn, the store holds none of its specs (no title, no
    analysis, no hash), and the snapshot sent after it waits too; then both apply, in order."""
    texts = [dense(i) for i in range(4)]
    store = ProbeStore()
    listener = ProbeListener(str(tmp_path / "probe.sock"), "", (), store)
    await listener.start()
    try:
        writer, engine = await said_hello(listener)
        async with listener._check_turn:  # another connection's message is being checked
            writer.write(schemas_line(texts) + row_snapshot(range(4)))
            await writer.drain()
            await asyncio.sleep(0.5)
            assert engine.specs == {} and engine.snapshot is None
            assert store.info == {} and not store.analysis.pending
        await until(lambda: engine.snapshot is not None)
        assert sorted(engine.specs) == [0, 1, 2, 3]
        store.settle(time.monotonic())
        series = {k.schema_hash for k in store.view().series}
        assert series == {info.schema_hash for info in engine.specs.values()}  # rows met their specs
        writer.close()
    finally:
        await listener.close()


def test_identities_found_off_the_loop_still_refuse_a_forged_hash() -> None:
    """The store checks each claim against the identity the worker found: a forged hash is refused
    whichever side computed it, and an identity list of another length is not trusted."""
    texts = ['{"title":"a","type":"string"}', '{"title":"b","type":"integer"}']
    store = ProbeStore()
    _, hello_msg = classify(encode(HELLO))
    assert isinstance(hello_msg, wire.Hello)
    engine = store.hello(hello_msg, 1.0)
    assert engine is not None
    _, msg = classify(schemas_line(texts, forged=1))
    assert isinstance(msg, wire.SchemasMessage)
    found = store.checker.identities(msg)
    store.schemas(engine, msg, 1.0, found[:1])  # the wrong length: checked again here
    store.schemas(engine, msg, 1.0, found)
    assert sorted(engine.specs) == [0]
    assert store.tally.refused["schema_hash_mismatch"] == 2
    assert engine.specs[0].title == "a"


async def test_a_check_process_that_dies_costs_its_message_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Killed mid-message (as the kernel's OOM killer would), the child costs that message: counted as
    rejected, one warning line, the connection and the daemon go on; the next large message starts a
    new child, and one that died while idle is started again before it is handed a message."""
    store = ProbeStore()
    listener = ProbeListener(str(tmp_path / "probe.sock"), "", (), store)
    await listener.start()
    checks = listener._checks
    try:
        writer, engine = await said_hello(listener)
        writer.write(schemas_line([dense(i) for i in range(TEXTS)]))  # about 0.5-2 s in the child
        await writer.drain()
        await until(lambda: checks._proc is not None)
        assert checks._proc is not None
        await asyncio.sleep(0.2)
        os.kill(checks._proc.pid, signal.SIGKILL)
        with caplog.at_level(logging.WARNING, "gdx.collector.probe"):
            await until(lambda: listener.counts["rejected"] == 1)
        assert checks.deaths == 1 and engine.specs == {}
        assert "process that reads large probe messages ended" in caplog.text

        writer.write(schemas_line([dense(i) for i in range(2)]) + row_snapshot(range(2)))
        await writer.drain()
        await until(lambda: engine.snapshot is not None)
        assert sorted(engine.specs) == [0, 1] and listener.counts["rejected"] == 1
        assert checks._proc is not None
        first = checks._proc
        first.kill()  # dies idle: found dead before the next message, which is read all the same
        await first.wait()
        writer.write(schemas_line([dense(i) for i in range(2, 4)]))
        await writer.drain()
        await until(lambda: {i.title for i in engine.specs.values()} == {"dense_c", "dense_d"})
        assert checks.deaths == 1 and checks._proc is not first
        writer.close()
    finally:
        await listener.close()
    assert checks._proc is None and first.returncode is not None  # closed with the listener


async def test_a_message_the_child_does_not_read_in_time_is_dropped_and_the_child_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A child that has not answered within its timeout (it would hold every large message of the node
    behind it) is ended, its message counted as rejected; one line a minute says so, whatever the count."""
    store = ProbeStore()
    listener = ProbeListener(str(tmp_path / "probe.sock"), "", (), store)
    await listener.start()
    checks = listener._checks
    checks.timeout = 0.05  # a 4 MiB message of dense texts takes 0.5 s and more
    try:
        writer, engine = await said_hello(listener)
        with caplog.at_level(logging.WARNING, "gdx.collector.probe"):
            for n in (1, 2):
                writer.write(schemas_line([dense(i) for i in range(TEXTS)]))
                await writer.drain()
                await until(lambda n=n: listener.counts["rejected"] == n)
        assert checks.deaths == 2 and engine.specs == {}
        assert caplog.text.count("no answer in 0.05s") == 1  # the second within the minute: counted only
        checks.timeout = 30.0
        writer.write(schemas_line([dense(i) for i in range(2)]))
        await writer.drain()
        await until(lambda: len(engine.specs) == 2)
        writer.close()
    finally:
        await listener.close()
