"""On the unix socket a hello's pod is the probe's word: the per-pod engine bound counts per real peer
(the uid SO_PEERCRED gives, and the pod claimed), so a process of another uid that claims a victim's
pod cannot use up the victim's budget. Real unix sockets; the hostile peer is a real process of
another uid (needs root to start it, as the system tests' engines do)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from exporter.daemon.receiver.admission import Limits
from exporter.daemon.receiver.listener import ProbeListener
from exporter.daemon.receiver.store import ProbeStore
from exporter.probe.shipper import encode

NOBODY = 65534


def hello(instance: str, pod: str, engine: str) -> bytes:
    return encode({
        "kind": "hello", "instance": instance, "pid": 1, "pod": pod, "engine": engine, "namespace": "llm",
        "engine_kind": "generic", "engine_version": "1", "backends": {}, "probe_version": "1",
    })  # fmt: skip


async def until(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def python_for_others() -> str | None:
    """A Python interpreter another uid may run (a virtualenv under /root is not one)."""
    for candidate in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if not candidate or not os.path.exists(candidate):
            continue
        real = Path(os.path.realpath(candidate))
        if all(p.stat().st_mode & 0o001 for p in (real, *real.parents)):
            return str(real)
    return None


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    """A directory another uid can reach (pytest's tmp dirs are root's alone)."""
    where = Path(tempfile.mkdtemp(prefix="gdx-owner-"))
    where.chmod(0o711)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def as_nobody(python: str, path: str, lines: list[bytes]) -> subprocess.Popen[bytes]:
    """A process of uid 65534 that opens one connection per line, sends it, and holds them open until
    its stdin closes."""
    code = textwrap.dedent(
        """
        import socket, sys
        held = []
        for line in sys.argv[2:]:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sys.argv[1])
            s.sendall(line.encode())
            held.append(s)
        print("sent", flush=True)
        sys.stdin.read()
        """
    )
    args = [line.decode() for line in lines]
    proc = subprocess.Popen(
        [python, "-c", code, path, *args],
        user=NOBODY, group=NOBODY, extra_groups=[], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == b"sent\n"
    return proc


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process of another uid needs root")
async def test_another_uid_claiming_a_pod_does_not_use_up_its_engine_budget(socket_dir: Path) -> None:
    python = python_for_others()
    if python is None:
        pytest.skip("no Python interpreter that uid 65534 may run")
    store = ProbeStore(limits=Limits(max_engines=64, max_engines_per_pod=2))
    path = str(socket_dir / "probe.sock")
    listener = ProbeListener(path, str(NOBODY), (), store)  # the socket's group: the engines'
    await listener.start()
    hostile = as_nobody(python, path, [hello(f"fake-{n}", "victim", str(n)) for n in range(3)])
    try:
        await until(lambda: store.tally.refused["engines_per_pod"] == 1)
        assert len(store.engines) == 2  # the hostile uid's own budget for the pod it claims
        victim = [await asyncio.open_unix_connection(path) for _ in range(3)]
        for n, (_reader, writer) in enumerate(victim):
            writer.write(hello(f"real-{n}", "victim", str(10 + n)))
            await writer.drain()
        await until(lambda: listener.counts["ok"] == 6)
        assert store.tally.refused["engines_per_pod"] == 2
        ours = sorted(e.instance for e in store.engines.values() if e.instance.startswith("real-"))
        assert ours == ["real-0", "real-1"]  # the victim's budget is whole; a third of its own is refused
        assert {e.owner for e in store.engines.values()} == {
            ("uid", str(NOBODY), "llm", "victim"), ("uid", str(os.geteuid()), "llm", "victim"),
        }  # fmt: skip
        for _reader, writer in victim:
            writer.close()
    finally:
        assert hostile.stdin is not None
        hostile.stdin.close()
        hostile.wait(10)
        await listener.close()


async def test_a_hello_spelled_as_a_held_snapshot_is_still_one_hello(tmp_path: Path) -> None:
    """A line that begins like a snapshot is held for the next read pass; if it is a hello after all
    (JSON's last `kind` wins), it is refused as a second hello, as on arrival, not taken as an engine."""
    store = ProbeStore()
    listener = ProbeListener(str(tmp_path / "probe.sock"), "", (), store, apply_interval=0.1)
    await listener.start()
    try:
        reader, writer = await asyncio.open_unix_connection(listener.path)
        disguised = hello("second", "p", "1").replace(b'"kind":"hello"', b'"kind":"snapshot","kind":"hello"')
        assert disguised.startswith(b'{"v":1,"kind":"snapshot"')
        writer.write(hello("first", "p", "0") + disguised)
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the daemon
        assert listener.refused["second_hello"] == 1
        assert [e.instance for e in store.engines.values()] == ["first"]
        writer.close()
    finally:
        await listener.close()
