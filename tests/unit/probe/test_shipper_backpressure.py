"""A daemon that reads slowly is waited for, not reconnected to: a round the socket cannot take yet
stays pending and the next rounds are skipped (`deferred`), since the snapshot sent once it is read
is cumulative. Only a daemon that takes no byte for STALL_SECONDS is given up on (`send_failures`).
Real unix sockets; the daemon is this test process, reading when the test says."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.probe import shipper as shipping
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper

HELLO = {"pod": "p", "engine": "0", "engine_kind": "generic", "engine_version": "", "backends": {}}
BIG = "x" * 100_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = tmp_path / "probe.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    listener.settimeout(5)
    yield str(path), listener
    listener.close()


def loaded(path: str, specs: int) -> Shipper:
    """A shipper whose first round holds `specs` schema texts of 100 kB: more than a socket buffer."""
    rec = Recorder()
    for i in range(specs):
        rec.finish(rec.begin("xgrammar"), "xgrammar", "json", f'{{"title":"{i}{BIG}"}}', 0.01, False)
    return Shipper(rec, path, HELLO, daemon_uid=os.getuid())


def read_all(conn: socket.socket) -> bytes:
    conn.setblocking(False)
    data = b""
    while True:
        try:
            chunk = conn.recv(1 << 20)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


def test_a_slow_daemon_defers_rounds_and_gets_every_line_whole(server: tuple[str, socket.socket]) -> None:
    path, listener = server
    shipper = loaded(path, 40)  # about 4 MB on a new connection
    shipper.tick()
    conn, _ = listener.accept()
    for _ in range(3):  # the daemon reads nothing: the rounds wait, no reconnect, no failure
        shipper.tick()
    assert shipper.counters["deferred"] == 3
    assert shipper.counters["send_failures"] == 0 and shipper.counters["connects"] == 1
    data = b""
    for _ in range(200):  # the daemon reads a little between rounds
        data += read_all(conn)
        shipper.tick()
        if data.count(b'"kind":"snapshot"') >= 2:
            break
    data += read_all(conn)
    lines = data.split(b"\n")
    kinds = [json.loads(line)["kind"] for line in lines if line]  # every line arrives whole
    assert kinds[0] == "hello" and kinds.count("snapshot") >= 2
    docs = [json.loads(line) for line in lines if line]
    assert sum(len(d["schemas"]) for d in docs if d["kind"] == "schemas") == 40  # each text once
    seqs = [json.loads(line)["seq"] for line in lines if line and b'"snapshot"' in line]
    assert seqs == sorted(seqs) and seqs[-1] - seqs[0] == len(seqs) - 1  # skipped rounds send nothing
    assert shipper.counters["send_failures"] == 0 and shipper.counters["connects"] == 1
    shipper.stop()
    conn.close()


def test_a_daemon_that_reads_nothing_is_given_up_after_the_stall_limit(
    server: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, listener = server
    shipper = loaded(path, 40)
    shipper.tick()
    conn, _ = listener.accept()
    shipper.tick()
    assert shipper.counters["send_failures"] == 0 and shipper.counters["deferred"] == 1
    monkeypatch.setattr(shipping, "STALL_SECONDS", 0.3)  # shortened only now: a loaded machine's pauses
    time.sleep(0.35)
    shipper.tick()  # no byte taken for longer than the limit: this connection is dropped
    assert shipper.counters["send_failures"] == 1
    assert shipper._sock is None and not shipper._pending  # the next connection starts afresh
    shipper.stop()
    conn.close()
