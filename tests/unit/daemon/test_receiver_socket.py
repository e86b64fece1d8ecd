"""The probe socket: created 0660, every message classified and counted, nothing raised."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from exporter.daemon.collectors.probe import ProbeCollector, ProbeSettings
from exporter.daemon.receiver.message_check import MAX_MESSAGE_BYTES
from exporter.probe.shipper import encode

HELLO = {
    "instance": "abc",
    "pid": 1,
    "pod": "p",
    "engine": "0",
    "engine_kind": "generic",
    "engine_version": "",
    "backends": {},
    "probe_version": "0",
}


def _count(source: ProbeCollector, result: str) -> float | None:
    registry = CollectorRegistry()
    registry.register(source)
    return registry.get_sample_value("guided_decoding_probe_snapshots_total", {"result": result})


async def _send(path: Path, payload: bytes) -> None:
    _reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(payload)
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def _settle(source: ProbeCollector, total: int) -> None:
    for _ in range(200):
        if sum(source.listener.counts.values()) >= total and source.listener.connections == 0:
            return
        await asyncio.sleep(0.01)


async def test_socket_mode_and_stale_socket(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "probe.sock"
    path.parent.mkdir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # a socket file left by a killed daemon
    source = ProbeCollector(ProbeSettings(socket=str(path)))
    await source.start()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
        await source.timed_refresh()
        assert source.success
    finally:
        await source.close()
    assert not path.exists()


async def test_messages_are_classified(tmp_path: Path) -> None:
    path = tmp_path / "probe.sock"
    source = ProbeCollector(ProbeSettings(socket=str(path)))
    await source.start()
    try:
        good = encode({"kind": "hello", **HELLO})
        for _ in range(3):  # one hello per connection (a second one ends it)
            await _send(path, good)
        await _send(path, b"{not json\n" + b"[1,2]\n" + b'{"v":1,"kind":"nope"}\n' + b"\xff\xfe\n")
        await _send(path, json.dumps({"v": 99, "kind": "snapshot"}).encode() + b"\n")
        await _send(path, encode({"kind": "hello", **HELLO, "pid": -1}))  # a field out of range
        await _send(path, encode({"kind": "snapshot", "seq": 1, "backends": {}}))  # no hello first
        await _send(
            path, b'{"v":1,"kind":"snapshot","pad":"' + b"x" * (MAX_MESSAGE_BYTES + 10) + b'"}\n' + good
        )
        await _send(path, b'{"v":1,"kind":"snap')  # peer dies mid-message: counted as malformed
        await _settle(source, 3 + 5 + 3 + 2)
    finally:
        await source.close()
    assert [_count(source, r) for r in ("ok", "malformed", "rejected", "oversize")] == [4.0, 5.0, 3.0, 1.0]


async def test_unusable_socket_path_fails_the_collector_not_the_daemon(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    source = ProbeCollector(ProbeSettings(socket=str(blocker / "probe.sock")))
    await source.start()
    await source.timed_refresh()
    assert not source.success and "cannot listen on probe socket" in (source.last_error or "")
    await source.close()


async def test_connections_beyond_the_cap_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import exporter.daemon.receiver.listener as listener

    monkeypatch.setattr(listener, "MAX_CONNECTIONS", 2)
    path = tmp_path / "probe.sock"
    source = ProbeCollector(ProbeSettings(socket=str(path)))
    await source.start()
    try:
        held = [await asyncio.open_unix_connection(str(path)) for _ in range(2)]
        for _ in range(100):
            if source.listener.connections == 2:
                break
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_unix_connection(str(path))
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the daemon
        writer.close()
        refused = source.listener.refused
        assert refused["limit"] == 1 and sum(refused.values()) == 1 and source.listener.connections == 2
        for _, w in held:
            w.close()
    finally:
        await source.close()


async def test_peer_credentials_and_socket_group(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """SO_PEERCRED: a process whose uid is not allowed is refused and counted; the socket gets the
    configured group."""
    path = tmp_path / "probe.sock"
    other = os.getuid() + 12345
    source = ProbeCollector(
        ProbeSettings(socket=str(path), allowed_uids=(other,), socket_group=str(os.getgid()))
    )
    await source.start()
    try:
        assert os.stat(path).st_gid == os.getgid()
        reader, writer = await asyncio.open_unix_connection(str(path))
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the daemon
        writer.close()
        assert source.listener.refused["credentials"] == 1
        (refusal,) = [r for r in caplog.records if "refused a probe connection from uid" in r.getMessage()]
        assert refusal.name == "gdx.collector.probe"  # the daemon side; the engine side logs as gdx.probe
    finally:
        await source.close()
    allowed = ProbeCollector(ProbeSettings(socket=str(path), allowed_uids=(os.getuid(),)))
    await allowed.start()
    try:
        await _send(path, encode({"kind": "hello", **HELLO}))
        await _settle(allowed, 1)
        assert allowed.listener.counts["ok"] == 1 and allowed.listener.refused["credentials"] == 0
    finally:
        await allowed.close()
    bad = ProbeCollector(ProbeSettings(socket=str(path), socket_group="no-such-group-gdx"))
    await bad.start()
    await bad.timed_refresh()
    assert not bad.success and "no group 'no-such-group-gdx'" in (bad.last_error or "")
    await bad.close()


def test_settings_from_the_configuration() -> None:
    """The daemon maps each option to the probe collector's settings; the defaults agree."""
    from exporter.daemon.collectors.probe import probe_settings
    from exporter.daemon.config import Config

    assert probe_settings(Config()) == ProbeSettings()
    settings = probe_settings(Config(probe_socket="/x.sock", probe_max_schemas=7, collector_timeout=2.0))
    assert (settings.socket, settings.max_schemas, settings.timeout) == ("/x.sock", 7, 2.0)


def _snapshot(seq: int, requests: int, **more: object) -> bytes:
    totals = {"requests": requests, "hits": 0, "errors": {}, "in_progress": 0, "oldest_seconds": 0.0}
    for name, bounds in (("compile", 19), ("wait", 19), ("mask", 14)):
        totals[name] = {"buckets": [0] * bounds, "sum": 0.0}
    return encode({"kind": "snapshot", "seq": seq, "backends": {"xgrammar": totals}, **more})


def _requests(source: ProbeCollector) -> int | None:
    """The one engine's xgrammar requests as the store holds them (None: no snapshot applied yet)."""
    engines = list(source.store.engines.values())
    snap = engines[0].snapshot if engines else None
    return snap.backends["xgrammar"].requests if snap else None


async def test_snapshots_are_held_and_applied_together_in_order(tmp_path: Path) -> None:
    """Snapshots wait for the next pass (a tick or a refresh), the connection parked meanwhile; any other
    message applies what its connection holds first; a closing connection applies what it holds."""
    path = tmp_path / "probe.sock"
    source = ProbeCollector(ProbeSettings(socket=str(path), apply_interval=0.3))
    await source.start()
    store = source.store

    def requests() -> int | None:
        engines = list(store.engines.values())
        snap = engines[0].snapshot if engines else None
        return snap.backends["xgrammar"].requests if snap else None

    try:
        _reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(encode({"kind": "hello", **HELLO}) + _snapshot(1, 5))
        await writer.drain()
        for _ in range(100):
            if store.engines:
                break
            await asyncio.sleep(0.005)
        assert store.engines and requests() is None  # hello at once, the snapshot held
        assert len(source.listener._holding) == 1
        for _ in range(100):  # the tick applies it
            if requests() == 5:
                break
            await asyncio.sleep(0.01)
        assert requests() == 5 and not source.listener._holding

        writer.write(_snapshot(2, 7))
        await writer.drain()
        await asyncio.sleep(0.05)
        assert requests() == 5  # parked: the kernel holds it until the next pass
        assert [c.parked for c in source.listener._open] == [True]
        await source.refresh()  # a scrape is never behind
        assert requests() == 7

        writer.write(_snapshot(3, 9) + encode({"kind": "schemas", "schemas": []}))  # order kept
        await writer.drain()
        for _ in range(100):
            if source.listener.counts["ok"] == 5:
                break
            await asyncio.sleep(0.005)
        assert requests() == 9

        writer.write(_snapshot(4, 11))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()
        await writer.wait_closed()
        await _settle(source, 6)
        assert requests() == 11 and source.listener.counts["ok"] == 6
    finally:
        await source.close()


async def test_snapshots_apply_on_arrival_with_no_interval(tmp_path: Path) -> None:
    path = tmp_path / "probe.sock"
    source = ProbeCollector(ProbeSettings(socket=str(path), apply_interval=0.0))
    await source.start()
    try:
        _reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(encode({"kind": "hello", **HELLO}) + _snapshot(1, 3))
        await writer.drain()
        for _ in range(200):
            if source.listener.counts["ok"] == 2:
                break
            await asyncio.sleep(0.005)
        assert source.listener.counts["ok"] == 2 and not source.listener._holding  # applied on arrival
        writer.close()
        await writer.wait_closed()
    finally:
        await source.close()


async def test_a_pass_reads_parked_snapshots_from_the_socket_and_hands_the_rest_to_the_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While parked, whole snapshots are read straight from the socket at each pass: the connection is
    never resumed for them. A message of another kind, a line not finished yet and the end of the
    connection go to its stream, in order, and it is resumed (then parked again at a boundary)."""
    from exporter.daemon.receiver.connection import Connection

    resumed: list[Connection] = []
    unpark = Connection.unpark
    monkeypatch.setattr(Connection, "unpark", lambda conn: (resumed.append(conn), unpark(conn))[1])
    path = tmp_path / "probe.sock"
    source = ProbeCollector(ProbeSettings(socket=str(path), apply_interval=60.0))  # passes: refresh()
    await source.start()
    listener = source.listener

    def requests() -> int:
        (engine,) = source.store.engines.values()
        assert engine.snapshot is not None
        return engine.snapshot.backends["xgrammar"].requests

    async def until(done: Callable[[], bool]) -> None:
        for _ in range(200):
            if done():
                return
            await asyncio.sleep(0.005)
        raise AssertionError("not within 1 s")

    try:
        _reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(encode({"kind": "hello", **HELLO}) + _snapshot(1, 5))
        await writer.drain()
        await until(lambda: [c.parked for c in listener._open] == [True])
        await source.refresh()
        assert requests() == 5 and listener.counts["ok"] == 2

        writer.write(_snapshot(2, 6) + _snapshot(3, 7) + _snapshot(4, 8))  # three, in one pass
        await writer.drain()
        await asyncio.sleep(0.05)
        await source.refresh()
        assert requests() == 8 and listener.counts["ok"] == 5
        assert not resumed and [c.parked for c in listener._open] == [True]

        # a snapshot, something else, a snapshot and half of one: the first held, the rest streamed
        last = _snapshot(8, 12)
        writer.write(_snapshot(5, 9) + b"not json\n" + _snapshot(6, 10) + last[:40])
        await writer.drain()
        await asyncio.sleep(0.05)
        await source.refresh()
        assert len(resumed) == 1
        await until(lambda: listener.counts["ok"] == 7)
        assert requests() == 10 and listener.counts["malformed"] == 1
        writer.write(last[40:])
        await writer.drain()
        await until(lambda: [c.parked for c in listener._open] == [True])  # at a boundary again
        await source.refresh()
        assert requests() == 12 and listener.counts["ok"] == 8 and len(resumed) == 1

        # the probe sends a last snapshot and closes while parked: applied, and the connection ends
        writer.write(_snapshot(9, 13))
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        await asyncio.sleep(0.05)
        assert listener.connections == 1  # parked: nothing read yet
        await source.refresh()
        await until(lambda: listener.connections == 0)
        assert requests() == 13 and listener.counts["ok"] == 9 and listener.counts["malformed"] == 1
    finally:
        await source.close()


@pytest.mark.parametrize(
    ("engine", "more", "budget", "prompt"),
    [
        ("0", {}, 0.0, False),  # an EngineCore: its snapshots wait for a scrape or --probe.max-hold
        ("api-server", {"deaths": 0}, 0.0, True),  # an API server's can make a verdict: applied in the pass
        ("0", {}, 1.0, True),  # with a compile budget, every engine's can
    ],
)
async def test_snapshots_read_wait_to_be_applied_unless_they_can_make_a_verdict(
    tmp_path: Path, engine: str, more: dict[str, object], budget: float, prompt: bool
) -> None:
    """Each pass reads the parked sockets; what it reads is applied by a refresh (a scrape), once the
    oldest waited --probe.max-hold, or in the pass when a snapshot can make a node verdict."""
    path = tmp_path / "probe.sock"
    settings = ProbeSettings(socket=str(path), apply_interval=0.05, max_hold=0.6, compile_budget=budget)
    source = ProbeCollector(settings)
    await source.start()
    listener = source.listener

    def requests() -> int | None:
        return _requests(source)

    async def until(done: Callable[[], bool], seconds: float = 2.0) -> float:
        start = asyncio.get_running_loop().time()
        while not done():
            assert asyncio.get_running_loop().time() - start < seconds, "not in time"
            await asyncio.sleep(0.01)
        return asyncio.get_running_loop().time() - start

    try:
        _reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(encode({"kind": "hello", **HELLO, "engine": engine}) + _snapshot(1, 5, **more))
        await writer.drain()
        await until(lambda: requests() == 5)  # the first is applied in its pass: who sent it is not known yet
        (conn,) = listener._open

        writer.write(_snapshot(2, 6, **more))
        await writer.drain()
        await until(lambda: bool(conn.held) or requests() == 6)  # read in a pass
        read = asyncio.get_running_loop().time()
        if prompt:
            await until(lambda: requests() == 6)
            assert not conn.held
        else:
            assert requests() == 5 and conn.held and conn.parked
            await asyncio.sleep(0.2)
            assert requests() == 5  # still held: nothing scraped, max-hold not reached
            await until(lambda: requests() == 6)
            assert asyncio.get_running_loop().time() - read >= 0.5  # applied once it waited max-hold
            writer.write(_snapshot(3, 7, **more))
            await writer.drain()
            await until(lambda: bool(conn.held))
            await source.refresh()  # a scrape applies everything read, and reads what was not
            assert requests() == 7 and not conn.held
        assert listener.counts["ok"] == (3 if prompt else 4)  # the hello and each snapshot
        writer.close()
        await writer.wait_closed()
    finally:
        await source.close()


async def test_a_held_batch_is_applied_as_one_unless_one_of_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots held together are checked and applied as one (each counted ok); with one that is not
    valid among them, each is applied and judged alone, as on arrival."""
    from exporter.daemon.receiver import messages

    merged: list[int] = []
    coalesce = messages.coalesce
    monkeypatch.setattr(messages, "coalesce", lambda lines: (merged.append(len(lines)), coalesce(lines))[1])
    path = tmp_path / "probe.sock"
    source = ProbeCollector(ProbeSettings(socket=str(path), apply_interval=60.0))  # passes: refresh()
    await source.start()
    listener = source.listener

    def requests() -> int | None:
        return _requests(source)

    try:
        _reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(encode({"kind": "hello", **HELLO}) + _snapshot(1, 5))
        await writer.drain()
        await asyncio.sleep(0.05)
        await source.refresh()
        assert requests() == 5 and merged == []  # the first: alone, applied in its pass

        writer.write(_snapshot(2, 6) + _snapshot(3, 7) + _snapshot(4, 8))
        await writer.drain()
        await asyncio.sleep(0.05)
        await source.refresh()
        assert requests() == 8 and merged == [3] and listener.counts["ok"] == 5

        bad = _snapshot(6, 10, schemas=[{"id": 3, "requests": "x"}])  # a row of the wrong type: rejected
        writer.write(_snapshot(5, 9) + bad + _snapshot(7, 11))
        await writer.drain()
        await asyncio.sleep(0.05)
        await source.refresh()
        assert requests() == 11 and merged == [3, 3]
        assert listener.counts["ok"] == 7 and listener.counts["rejected"] == 1

        # totals a later snapshot of the batch supersedes are never read, so never refused
        writer.write(_snapshot(8, 12, cpu={"user": "x"}) + _snapshot(9, 13))
        await writer.drain()
        await asyncio.sleep(0.05)
        await source.refresh()
        assert requests() == 13 and merged == [3, 3, 2] and listener.counts["ok"] == 9
        writer.close()
        await writer.wait_closed()
    finally:
        await source.close()
