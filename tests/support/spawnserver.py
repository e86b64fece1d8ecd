"""Start a long-running `python -m MODULE ARGS` (the daemon, `gdx serve`) the way `subprocess.Popen`
would, forked from a server (this file, run by that Python) that has imported the program's modules
once. The suite starts about 120 daemons; each fresh interpreter spent 0.6 CPU s (1 s on the loaded
machine) importing the same aiohttp, prometheus-client and exporter modules before it listened.

What the test gets is a process of its own, as from Popen: `Spawned` has the pid (signals go to it
directly: SIGSTOP, SIGKILL), `poll()`, `wait(timeout)`, `returncode` (negative for a signal, as Popen
gives it: the server waits for the child and relays the status), and `stderr`, a pipe read as Popen's
text mode reads it (the test's end of a pipe whose other end the server passes to the child over a
Unix socket). The child is set up as the fresh interpreter would be (tests/support/forkserver.py
`become`: working directory, environment, sys.path, sys.argv, atexit), with stdin and stdout on
/dev/null; it stays in the server's process group, as a Popen child stays in the test's. A command
whose first folders (the working directory, PYTHONPATH) would give it a module the server loaded from
elsewhere is refused, and `spawn` returns None: the caller starts it with Popen.

Servers are keyed like forkserver's (python, environment less what only the program reads) and live
for the test session; when the test process goes, the server's socket closes and it kills what it
started. `reaped_cpu()` is the CPU seconds of the children reaped so far, which RUSAGE_CHILDREN does
not see (tests/support/timeline.py adds it). GDX_NO_FORKSERVER=1 turns this off with forkserver."""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

# What `gdx serve` imports before it listens and on its first connections (python -X importtime).
DAEMON_PRELOAD = (
    "exporter.cli",
    "exporter.daemon.server",
    "exporter.daemon.webconfig",
    "exporter.daemon.receiver.listener",
    "exporter.daemon.receiver.analysis",
    "exporter.daemon.receiver.messages",
    "concurrent.futures.thread",
)
MAX_MESSAGE = 1 << 20


class Spawned:
    """The part of subprocess.Popen the harness uses, for a child of the spawn server."""

    def __init__(self, args: list[str], pid: int, stderr: IO[str]) -> None:
        self.args = args
        self.pid = pid
        self.stderr = stderr
        self.stdout = None
        self.returncode: int | None = None
        self._exited = threading.Event()

    def _exit(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Server:
    def __init__(self, python: str, env: dict[str, str], preload: tuple[str, ...]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.lock = threading.Lock()  # one spawn at a time: its reply is the next "pid" message
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.children: dict[int, Spawned] = {}
        self.early: dict[int, int] = {}  # exits read before their spawn registered the child
        self.children_lock = threading.Lock()
        self.cpu = 0.0
        with theirs:
            self.proc = subprocess.Popen(
                [python, __file__, str(theirs.fileno()), json.dumps(list(preload))],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd="/",
                pass_fds=(theirs.fileno(),),
            )
        threading.Thread(target=self._read, daemon=True, name="spawnserver").start()
        try:
            ready = self.replies.get(timeout=120)
        except queue.Empty:
            ready = {}
        if ready.get("ready") is not True:
            self.stop()
            raise RuntimeError(f"spawn server did not start: {ready}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            if "exit" not in message:
                self.replies.put(message)
                continue
            self.cpu += message["cpu"]
            with self.children_lock:
                child = self.children.pop(message["exit"], None)
                if child is None:
                    self.early[message["exit"]] = message["returncode"]
            if child is not None:
                child._exit(message["returncode"])
        self.replies.put({"closed": True})
        with self.children_lock:  # the server is gone, and so are its children
            orphans, self.children = list(self.children.values()), {}
        for child in orphans:
            child._exit(-signal.SIGKILL)

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> Spawned | None:
        command = {"argv": argv, "env": env, "cwd": str(cwd)}
        with self.lock:
            read_end, write_end = os.pipe()
            try:
                socket.send_fds(self.sock, [json.dumps(command).encode()], [write_end])
            finally:
                os.close(write_end)
            try:
                reply = self.replies.get(timeout=60)
            except queue.Empty:
                reply = {"refused": "no reply"}
            if "pid" not in reply:
                os.close(read_end)
                return None
            stderr = open(read_end, encoding=locale.getpreferredencoding(False))  # noqa: SIM115
            child = Spawned([sys.executable, *argv], reply["pid"], stderr)
            with self.children_lock:
                if reply["pid"] in self.early:
                    child._exit(self.early.pop(reply["pid"]))
                else:
                    self.children[reply["pid"]] = child
            return child

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.sock.close()


_servers: dict[tuple[str, str], _Server] = {}
_servers_lock = threading.Lock()


def reaped_cpu() -> float:
    """CPU seconds of the children the running spawn servers have reaped: RUSAGE_CHILDREN sees them
    only once their server is reaped, at stop_all."""
    with _servers_lock:
        return sum(server.cpu for server in _servers.values())


def stop_all() -> None:
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


atexit.register(stop_all)


def spawn(
    argv: list[str], *, env: dict[str, str], cwd: Path, preload: tuple[str, ...] = DAEMON_PRELOAD
) -> Spawned | None:
    """`subprocess.Popen([sys.executable, *argv], env=env, cwd=cwd, stdin=DEVNULL, stdout=DEVNULL,
    stderr=PIPE, text=True)`, forked from a server of this interpreter that has imported `preload`;
    None when the server refuses it or cannot start (start it with Popen then)."""
    if os.environ.get("GDX_NO_FORKSERVER") == "1":
        return None
    from tests.support.forkserver import server_env

    key_env = server_env(env)
    key = (json.dumps(key_env, sort_keys=True), json.dumps(preload))
    with _servers_lock:
        server = _servers.get(key)
        if server is None or not server.alive():
            try:
                server = _servers[key] = _Server(sys.executable, key_env, preload)
            except (OSError, RuntimeError):
                return None
    return server.spawn(argv, env, cwd)


# --- the server: `python spawnserver.py FD PRELOAD_JSON` ---


def _serve(fd: int, preload: list[str]) -> None:
    import importlib

    import forkserver  # this folder's (sys.path[0]): become, shadowed

    sys.path.pop(0)  # this file's folder: not the programs'
    base_path = list(sys.path)
    sock = socket.socket(fileno=fd)

    def reply(message: dict[str, Any]) -> None:
        sock.send(json.dumps(message).encode())

    for name in preload:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    reply({"ready": True})
    children: dict[int, int] = {}  # pidfd -> pid
    try:
        while True:
            readable, _, _ = select.select([sock, *children], [], [])
            for ready in readable:
                if ready in children:
                    pid = children.pop(ready)
                    os.close(ready)
                    _, status, usage = os.wait4(pid, 0)
                    cpu = usage.ru_utime + usage.ru_stime
                    reply({"exit": pid, "returncode": os.waitstatus_to_exitcode(status), "cpu": cpu})
                    continue
                data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 1)
                if not data:
                    return
                command = json.loads(data)
                if refused := forkserver.shadowed(command):
                    for received in fds:
                        os.close(received)
                    reply({"refused": f"the program's path holds {refused}"})
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(command, base_path, fds[0], [sock.fileno(), *children])
                os.close(fds[0])
                children[os.pidfd_open(pid)] = pid
                reply({"pid": pid})
    finally:  # the test process is gone: so are the daemons it started
        for pidfd, pid in children.items():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            os.close(pidfd)


def _child(command: dict[str, Any], base_path: list[str], stderr: int, inherited: list[int]) -> None:
    """In the forked child: stdin and stdout on /dev/null, stderr on the test's pipe; never returns."""
    import forkserver

    code = 1
    try:
        for fd in inherited:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(stderr, 2)
        os.close(null)
        os.close(stderr)
        code = forkserver.become(command, base_path)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    _serve(int(sys.argv[1]), json.loads(sys.argv[2]))
