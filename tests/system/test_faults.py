"""Fault matrix, on real processes and real sockets: each fault has a named behaviour, and in each the
daemon neither crashes nor hangs and says what happened in one clear log line.
docs/faults.md lists them all, with the vLLM-target and NVML faults tested in their collectors' suites.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.harness import ROOT, free_port
from tools.harness.apiserver import BoundToken, FakeApiServer
from tools.harness.processes import DaemonProcess as Daemon
from tools.harness.scraping import sample, scrape, wait_for
from tools.harness.simengines import SimEngines, Watcher

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
RESTARTS = int(os.environ.get("GDX_FAULT_RESTARTS", "20"))
NOBODY = 65534


@pytest.fixture
def sockdir() -> Iterator[Path]:
    """A socket directory any user may reach (pytest's own tmp folders are root-only)."""
    where = Path(tempfile.mkdtemp(prefix="gdx-faults-"))
    where.chmod(0o777)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def serve(sock: Path | str, *extra: str) -> Daemon:
    """A daemon on `sock`, or (a tcp:// address) on TCP only, as `extra` says."""
    where = [] if str(sock).startswith("tcp://") else ["--probe.socket", str(sock)]
    return Daemon([*where, "--no-collector.nvml", "--no-collector.vllm", *extra])


def tcp_node(tmp_path: Path, engines: int) -> tuple[FakeApiServer, str, list[str], dict[str, str]]:
    """The API server for a daemon on node-a that takes probes over TCP, with a token per engine."""
    api = FakeApiServer()
    (tmp_path / "daemon-token").write_text(api.daemon_token)
    port = free_port()
    for n in range(engines):
        api.tokens[f"token-{n}"] = BoundToken(namespace="llm", pod=f"sim-{n}")
        (tmp_path / f"token-{n}").write_text(f"token-{n}")
    args = ["--probe.socket", "", "--probe.listen-address", f"127.0.0.1:{port}",
            "--kubernetes.api-server", api.url, "--kubernetes.token-file", str(tmp_path / "daemon-token"),
            "--kubernetes.ca-file", "", "--kubernetes.node-name", "node-a"]  # fmt: skip
    return api, f"tcp://127.0.0.1:{port}", args, {"token_file": str(tmp_path / "token-{n}")}


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_daemon_sigkilled_and_restarted_under_load_loses_nothing(tmp_path: Path, transport: str) -> None:
    """Named behaviour: a probe whose daemon vanished reconnects (backoff from 0.5 s) and sends its
    full cumulative state first, so after the next snapshot every counter is whole again. Over TCP
    each reconnect passes a TokenReview first, and the counts are as exact."""
    sock: Path | str = tmp_path / "probe.sock"
    api = None
    extra: list[str] = []
    options: dict[str, str] = {}
    if transport == "tcp":
        api, sock, extra, options = tcp_node(tmp_path, 8)
    engines = SimEngines(sock, tmp_path, engines=8, interval=0.1, rate=100, new=0.05, **options)
    daemon = None
    restarts = RESTARTS if transport == "unix" else max(1, RESTARTS // 2)
    try:
        for i in range(restarts):
            daemon = serve(sock, *extra)  # the old socket file is still there: stale, replaced
            totals = engines.pause()  # compiles made while no daemon listened are in these totals
            Watcher(daemon.url).wait_until_equal(totals, timeout=40)
            assert sample(scrape(daemon.url), "guided_decoding_probe_connections") == 8
            engines.resume()
            time.sleep(0.5)  # snapshots flowing...
            daemon.stop(signal.SIGKILL)  # ...and the daemon dies mid-stream
            assert daemon.proc.returncode == -signal.SIGKILL, i
        daemon = serve(sock, *extra)
        totals = engines.pause()
        Watcher(daemon.url).wait_until_equal(totals, timeout=40)
        wait_for(
            lambda: "probe connected: pod=sim-7" in daemon.log or "pod=llm/sim-7" in daemon.log, timeout=5
        )
        if api is not None:
            assert (
                sample(
                    scrape(daemon.url), "guided_decoding_probe_connections_refused_total", reason="no_token"
                )
                == 0
            )
    finally:
        final = engines.stop()
        if daemon is not None:
            daemon.stop()
        if api is not None:
            api.stop()
    assert final is not None
    assert all(e["shipper"]["connects"] >= restarts for e in final.values())  # really reconnected each time
    assert "send failed" in engines.log or "cannot connect" in engines.log  # the probe said so, once a time


def test_socket_directory_removed_and_recreated(sockdir: Path) -> None:
    """Named behaviour: the daemon checks its socket every second; when the file (or its whole
    directory) is gone or replaced it creates it again, mode 0660, and says so. Probes already
    connected keep their connections; new ones can connect again."""
    sock = sockdir / "run" / "probe.sock"
    daemon = serve(sock)
    first = SimEngines(sock, sockdir, engines=2, interval=0.2, rate=50, pod_prefix="before-")
    second = None
    try:
        wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_probe_connections") == 2)
        shutil.rmtree(sockdir / "run")
        wait_for(lambda: "was removed or replaced: listening again" in daemon.log, timeout=10)
        wait_for(lambda: sock.exists(), timeout=5)
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o660
        second = SimEngines(sock, sockdir, engines=2, interval=0.2, rate=50, pod_prefix="after-")
        wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_probe_connections") == 4)
        watcher = Watcher(daemon.url)
        watcher.wait_until_equal(first.pause() | second.pause())
        assert daemon.proc.poll() is None
    finally:
        first.stop()
        if second is not None:
            second.stop()
        daemon.stop()
    assert daemon.log.count("was removed or replaced") == 1


def test_daemon_stalled_fills_the_socket_and_engines_do_not_notice(tmp_path: Path) -> None:
    """Socket full (the daemon stopped reading: SIGSTOP): the probe's round waits, unsent, and the next
    rounds are skipped (deferred) on its own thread; after 10 s in which the daemon took nothing the
    connection is given up (send_failures). The engine's compile calls go on at full rate, and once
    the daemon reads again the next full snapshot restores every counter."""
    sock = tmp_path / "probe.sock"
    daemon = serve(sock)
    engines = SimEngines(sock, tmp_path, engines=4, interval=0.05, rate=200, new=0.5)
    try:
        wait_for(lambda: sample(scrape(daemon.url), "guided_decoding_probe_connections") == 4)
        before = engines.pause()
        engines.resume()
        daemon.proc.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        while True:  # until every engine's socket has filled up and stalled for 10 s (20-30 s here)
            time.sleep(5)
            during = engines.pause()
            stalled = time.monotonic() - started
            engines.resume()
            if all(e["shipper"]["send_failures"] >= 1 for e in during.values()) or stalled > 120:
                break
        daemon.proc.send_signal(signal.SIGCONT)
        calls = sum(during[k]["xgrammar"]["requests"] - before[k]["xgrammar"]["requests"] for k in during)
        assert calls >= 0.5 * 4 * 200 * stalled  # the engines ran at (about) full rate throughout
        assert all(e["shipper"]["send_failures"] >= 1 for e in during.values())  # the socket did fill up
        assert all(e["shipper"]["deferred"] >= 1 for e in during.values())  # and rounds waited first
        totals = engines.pause()
        Watcher(daemon.url).wait_until_equal(totals, timeout=60)
    finally:
        daemon.proc.send_signal(signal.SIGCONT)
        engines.stop()
        daemon.stop()
    assert "send failed: the daemon read nothing for 10 s" in engines.log


def test_probe_denied_by_socket_permissions_waits_until_allowed(sockdir: Path) -> None:
    """Permission denied: an engine whose user is not in the socket's group cannot connect. The probe
    logs it once, retries with backoff and costs the engine nothing; when the socket is given the
    engines' group (`--probe.socket-group`) it connects and every counter arrives."""
    sock = sockdir / "probe.sock"
    daemon = serve(sock)
    engines = SimEngines(sock, sockdir, as_user=NOBODY, engines=2, interval=0.2, rate=50)
    try:
        wait_for(lambda: "Permission denied" in engines.log, timeout=10)
        time.sleep(3)  # a few more attempts (0.5 s, 1 s, 2 s): still one line per engine
        assert engines.log.count("Permission denied") == 2
        assert sample(scrape(daemon.url), "guided_decoding_probe_connections") == 0
        daemon.stop()
        daemon = serve(sock, "--probe.socket-group", str(NOBODY))
        assert os.stat(sock).st_gid == NOBODY
        Watcher(daemon.url).wait_until_equal(engines.pause(), timeout=40)  # backoff is at most 30 s
    finally:
        engines.stop()
        daemon.stop()


def start_daemon(stderr: Any, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A daemon whose stderr the test controls; the URL from a fixed port, since no log can be read."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "serve", "--web.listen-address", f"127.0.0.1:{port}",
         "--no-collector.nvml", "--probe.socket", str(tmp_path / "probe.sock")],
        stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: urllib.request.urlopen(url + "/healthz", timeout=2).status == 200, timeout=30)
    return proc, url


def stop_within(proc: subprocess.Popen[bytes], seconds: float) -> float:
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the daemon did not stop within {seconds}s") from None
    return time.monotonic() - started


def test_disk_full_for_logs(tmp_path: Path) -> None:
    """Disk full (stderr is /dev/full: every write fails with ENOSPC): the daemon serves as usual,
    drops the lines and counts them; SIGTERM still stops it at once. The log line is the one thing
    it cannot give here; the counter stands in for it."""
    with open("/dev/full", "wb") as full:
        proc, url = start_daemon(full, tmp_path)
    try:
        # the log thread writes (and fails) beside the server: on a busy machine /metrics answered three
        # scrapes before its first failed write (2026-12-06)
        dropped = "guided_decoding_log_messages_dropped_total"
        wait_for(lambda: sample(scrape(url), dropped, reason="write_error") >= 1, timeout=30)
        m = scrape(url)
        assert sample(m, dropped, reason="write_error") >= 1
        assert sample(m, "guided_decoding_collector_success", collector="cpu") == 1
    finally:
        assert stop_within(proc, 5) < 5
    assert proc.returncode == 0


def test_log_pipe_nobody_reads(tmp_path: Path) -> None:
    """A stalled log collector (stderr is a pipe already full): writes block the log thread only;
    /metrics keeps answering, lines wait in a bounded queue (beyond it: dropped, counted), and
    SIGTERM still stops the daemon within a few seconds. When the pipe drains, the lines arrive."""
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    filled = 0
    try:
        while True:
            filled += os.write(write_end, b"x" * 4096)
    except BlockingIOError:
        pass
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags)  # the daemon gets a blocking pipe, as from a runtime
    proc, url = start_daemon(write_end, tmp_path)
    os.close(write_end)
    try:
        for _ in range(5):
            started = time.monotonic()
            scrape(url)
            assert time.monotonic() - started < 5
        data = b""
        os.set_blocking(read_end, False)
        deadline = time.monotonic() + 10
        while b"listening on" not in data and time.monotonic() < deadline:
            try:
                data += os.read(read_end, 65536)  # the collector wakes up: queued lines flow again
            except BlockingIOError:
                time.sleep(0.05)
        assert b"listening on" in data[filled:]
    finally:
        took = stop_within(proc, 8)
        os.close(read_end)
    assert took < 8


ENGINE_THAT_DIES = """
import os, signal, socket, sys
from exporter.probe.recorder import Recorder
from exporter.probe.shipper import Shipper
rec = Recorder()
shipper = Shipper(rec, sys.argv[1], {"pod": "doomed", "engine": "0", "engine_kind": "generic",
                  "engine_version": "", "backends": {}, "probe_version": "0"})
for i in range(30):
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", '{"title":"t%d"}' % (i % 10), 0.01, False)
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
for message in shipper.messages(True):
    sock.sendall(message)
for i in range(30):  # more compiles; their snapshot is cut halfway by the kill
    rec.finish(rec.begin("xgrammar"), "xgrammar", "json", '{"title":"t%d"}' % i, 0.01, False)
last = shipper.messages(False)[-1]
sock.sendall(last[: len(last) // 2])
print("sent", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_engine_killed_mid_snapshot(tmp_path: Path) -> None:
    """Named behaviour: the half message is dropped and counted as malformed, with a line naming the
    engine; the engine's counters stay at its last whole snapshot until --probe.engine-ttl, then its
    series go, with a line."""
    sock = tmp_path / "probe.sock"
    daemon = serve(sock, "--probe.engine-ttl", "4s")
    try:
        run = subprocess.run(
            [sys.executable, "-c", ENGINE_THAT_DIES, str(sock)], cwd=ROOT, capture_output=True, timeout=60
        )
        assert run.returncode == -signal.SIGKILL and b"sent" in run.stdout, run.stderr
        wait_for(lambda: "closed its connection mid-message" in daemon.log, timeout=10)
        m = scrape(daemon.url)
        assert sample(m, "guided_decoding_probe_snapshots_total", result="malformed") == 1
        assert sample(m, "guided_decoding_compile_requests_total", pod="doomed") == 30  # the last whole one
        assert sample(m, "guided_decoding_schema_requests_total", pod="doomed") == 30
        assert "probe of pod=doomed engine=0 closed its connection mid-message" in daemon.log
        wait_for(
            lambda: sample(scrape(daemon.url), "guided_decoding_compile_requests_total", pod="doomed") == 0
        )
        wait_for(lambda: "probe of pod=doomed engine=0 silent for" in daemon.log, timeout=5)  # logs are async
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()
