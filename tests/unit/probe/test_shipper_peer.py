"""The probe sends nothing on the unix socket before the kernel says the daemon listens (SO_PEERCRED):
a socket someone else renamed over the daemon's must not receive an engine's hello and schema texts.
Real unix sockets in tmp dirs; the listener is this test process."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.probe.recorder import Recorder
from exporter.probe.settings import read_settings
from exporter.probe.shipper import Shipper

HELLO = {"pod": "p", "engine": "0", "engine_kind": "generic", "engine_version": "", "backends": {}}


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[Path, socket.socket]]:
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "probe.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    server.settimeout(2)
    yield path, server
    server.close()


def received(server: socket.socket) -> bytes:
    """What the probe sent on its connection before it closed it (or within a second)."""
    conn, _ = server.accept()
    conn.settimeout(1)
    data = b""
    try:
        while chunk := conn.recv(1 << 16):
            data += chunk
    except TimeoutError:
        pass
    conn.close()
    return data


def test_the_daemon_uid_listening_gets_the_hello(listening: tuple[Path, socket.socket]) -> None:
    path, server = listening
    shipper = Shipper(Recorder(), str(path), HELLO, daemon_uid=os.getuid())
    shipper.tick()
    assert b'"kind":"hello"' in received(server)
    assert shipper.wrong_listener == 0
    shipper.stop()


def test_another_uid_listening_gets_nothing(
    listening: tuple[Path, socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    path, server = listening
    shipper = Shipper(Recorder(), str(path), HELLO, daemon_uid=os.getuid() + 1)
    shipper.tick()
    assert received(server) == b""
    assert shipper.wrong_listener == 1 and shipper.counters["connects"] == 0
    assert f"uid {os.getuid()} listens, not the daemon's" in caplog.text
    shipper.tick()  # backing off: no second try at once
    assert shipper.wrong_listener == 1
    shipper.stop()


def test_by_default_the_socket_directorys_owner_must_listen(listening: tuple[Path, socket.socket]) -> None:
    path, server = listening
    shipper = Shipper(Recorder(), str(path), HELLO)  # the directory is ours: we are the daemon
    shipper.tick()
    assert b'"kind":"hello"' in received(server)
    shipper.stop()
    if os.getuid() != 0:
        pytest.skip("giving the directory another owner needs root")
    os.chown(path.parent, 4242, -1)  # the daemon's directory; whoever listens now is not it
    shipper = Shipper(Recorder(), str(path), HELLO)
    shipper.tick()
    assert received(server) == b"" and shipper.wrong_listener == 1
    shipper.stop()


def test_the_daemon_uid_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GDX_PROBE_DAEMON_UID", "65532")
    assert read_settings().daemon_uid == 65532
    monkeypatch.setenv("GDX_PROBE_DAEMON_UID", "nobody")
    assert read_settings().daemon_uid is None  # logged, and the directory's owner expected
    monkeypatch.delenv("GDX_PROBE_DAEMON_UID")
    assert read_settings().daemon_uid is None
