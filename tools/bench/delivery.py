"""What delivering the probes' lines costs an event loop, apart from what is done with them
(`python -m tools.bench.delivery`): the daemon's idle CPU at the caps is a read pass a second over 8
parked connections plus 8 snapshots, and this measures the first part alone, three ways.

8 clients on a unix socket each send one 2.5 KB line a second (a snapshot's size), spread over the
second. The server only counts the lines; the loop thread's CPU (`time.thread_time`) over the window:
- `stream`: as the daemon read before its passes read the parked sockets (commit 3642275): a
  StreamReader task per connection (`readuntil`), parked with `pause_reading` after a whole line and
  resumed by a pass a second that gives the loop 4 turns;
- `protocol`: an asyncio.Protocol splitting lines in `data_received`, parked and resumed the same way;
- `direct`: the connections never registered with the loop; a pass a second reads each socket
  (non-blocking `recv` until it would block) and splits the lines: what the daemon's passes do now.
Each mode runs in a child process of its own, the modes alternated for `--rounds` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tools.bench.machine import header

LINE = (json.dumps({"v": 1, "kind": "snapshot", "pad": "x" * 2500}) + "\n").encode()
CONNECTIONS = 8
MODES = ("stream", "protocol", "direct")


def _clients(path: str, stop: threading.Event) -> None:
    socks = []
    for _ in range(CONNECTIONS):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        socks.append(sock)
    while not stop.is_set():
        for sock in socks:
            sock.sendall(LINE)
            time.sleep(1 / CONNECTIONS)
    for sock in socks:
        sock.close()


def _lines(buffer: bytes, counted: list[int]) -> bytes:
    while (end := buffer.find(b"\n")) >= 0:
        counted.append(end + 1)
        buffer = buffer[end + 1 :]
    return buffer


async def _stream(path: str, counted: list[int], ready: asyncio.Event) -> None:
    parked: list[tuple[asyncio.StreamReader, Any]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parked.append((reader, writer.transport))
        try:
            while True:
                counted.append(len(await reader.readuntil(b"\n")))
                if not getattr(reader, "_buffer", b"x"):
                    writer.transport.pause_reading()  # type: ignore[attr-defined]
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    await asyncio.start_unix_server(serve, path)
    ready.set()
    while True:
        await asyncio.sleep(1)
        for _, transport in parked:
            transport.resume_reading()
        for _ in range(4):
            await asyncio.sleep(0)
        for reader, transport in parked:
            if not getattr(reader, "_buffer", b"x"):
                transport.pause_reading()


class _Lines(asyncio.Protocol):
    def __init__(self, counted: list[int], parked: list[Any]) -> None:
        self.buffer = b""
        self.counted = counted
        self.parked = parked

    def connection_made(self, transport: Any) -> None:
        self.parked.append(transport)

    def data_received(self, data: bytes) -> None:
        self.buffer = _lines(self.buffer + data, self.counted)


async def _protocol(path: str, counted: list[int], ready: asyncio.Event) -> None:
    parked: list[Any] = []
    await asyncio.get_running_loop().create_unix_server(lambda: _Lines(counted, parked), path)
    ready.set()
    while True:
        await asyncio.sleep(1)
        for transport in parked:
            transport.resume_reading()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        for transport in parked:
            transport.pause_reading()


async def _direct(path: str, counted: list[int], ready: asyncio.Event) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(16)
    listener.setblocking(False)
    buffers: dict[socket.socket, bytes] = {}

    def accept() -> None:
        sock, _ = listener.accept()
        sock.setblocking(False)
        buffers[sock] = b""

    asyncio.get_running_loop().add_reader(listener.fileno(), accept)
    ready.set()
    while True:
        await asyncio.sleep(1)
        for sock in list(buffers):
            while True:
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    break
                if not data:
                    del buffers[sock]
                    break
                buffers[sock] = _lines(buffers[sock] + data, counted)


def _child(mode: str, seconds: float) -> None:
    """One mode: the loop thread's CPU per second and the lines a second it counted, as JSON."""
    servers: dict[str, Callable[[str, list[int], asyncio.Event], Awaitable[None]]] = {
        "stream": _stream, "protocol": _protocol, "direct": _direct,
    }  # fmt: skip

    async def run() -> dict[str, float]:
        with tempfile.TemporaryDirectory(prefix="gdx-delivery-") as tmp:
            path = os.path.join(tmp, "s.sock")
            counted: list[int] = []
            ready = asyncio.Event()
            server = asyncio.ensure_future(servers[mode](path, counted, ready))
            await ready.wait()
            stop = threading.Event()
            threading.Thread(target=_clients, args=(path, stop), daemon=True).start()
            await asyncio.sleep(3)  # connected, one pass or two behind it
            lines, cpu = len(counted), time.thread_time()
            await asyncio.sleep(seconds)
            cpu, lines = time.thread_time() - cpu, len(counted) - lines
            stop.set()
            server.cancel()
            return {"ms_per_s": cpu / seconds * 1000, "lines_per_s": lines / seconds}

    print(json.dumps(asyncio.run(run())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench.delivery", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="window per mode and round (default 30)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three modes (default 2)")
    parser.add_argument("--_child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child:
        _child(args._child, args.seconds)
        return 0
    print(header("tools.bench.delivery", argv))
    print(
        f"| round | {' | '.join(MODES)} |  (loop thread, ms of CPU per second; {CONNECTIONS} lines a second)"
    )
    print("| --- |" + " ---: |" * len(MODES))
    found: dict[str, list[float]] = {mode: [] for mode in MODES}
    for n in range(args.rounds):
        for mode in MODES:
            child = [
                sys.executable,
                "-m",
                "tools.bench.delivery",
                "--_child",
                mode,
                "--seconds",
                str(args.seconds),
            ]
            out = subprocess.run(child, capture_output=True, text=True, check=True)
            figures = json.loads(out.stdout.strip().splitlines()[-1])
            if abs(figures["lines_per_s"] - CONNECTIONS) > 0.5:
                raise SystemExit(f"{mode}: {figures['lines_per_s']:.1f} lines a second, not {CONNECTIONS}")
            found[mode].append(figures["ms_per_s"])
        print(f"| {n + 1} | " + " | ".join(f"{found[mode][-1]:.3f}" for mode in MODES) + " |")
    base = statistics.mean(found["stream"])
    print(
        "| mean | "
        + " | ".join(f"{statistics.mean(v):.3f} ({statistics.mean(v) / base:.2f}x)" for v in found.values())
        + " |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
