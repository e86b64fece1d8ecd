"""`make bench`: the daemon at the series caps (docs/metrics.md) beside node_exporter, scraped on the same
machine in the same run, interleaved, so that the figures are ratios (these machines are noisy).

The daemon runs as in production (its own process, `gdx serve`) with:
- 8 vLLM targets serving the real vLLM 0.32 page (a separate process);
- 8 simulated engines (`tools.harness.simulate`: the real probe code over the real socket), one
  snapshot a second each, 50 schemas each exposed (plus some in `other`);
- 128 CPU cores simulated at the psutil boundary and 8 GPUs at the pynvml boundary (a folder put
  first on the daemon's PYTHONPATH: `sitecustomize` widens `psutil.cpu_times(percpu=True)`, and
  `pynvml` is the tests' stand-in for nvidia-ml-py);
and node_exporter (`prometheus-node-exporter`, default collectors) on a loopback port.

Printed: the command, the machine, per-scrape medians (wall and CPU) of both and their ratio; the
daemon's CPU at steady state (8 engines, 1 snapshot/s, one scrape every 15 s) as a share of a core,
beside node_exporter's under the same scrapes; and how the daemon's figures grow with engines,
schemas and cores (three sizes each, the others at the caps).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.bench.machine import header
from tools.bench.scrape import DEFAULT_PAGE
from tools.harness import ROOT, fake_pynvml, free_port, wait_http
from tools.harness.processes import DaemonProcess
from tools.harness.simengines import SimEngines

NODE_EXPORTER = ("prometheus-node-exporter", "node_exporter")
SITECUSTOMIZE = '''"""Bench only: per-core times widened to GDX_FAKE_CORES (the real ones repeated)."""
import os

_cores = int(os.environ.get("GDX_FAKE_CORES", "0"))
if _cores:
    import psutil

    _real = psutil.cpu_times

    def cpu_times(percpu=False):
        if not percpu:
            return _real()
        real = _real(percpu=True)
        return [real[i % len(real)] for i in range(_cores)]

    psutil.cpu_times = cpu_times

_profile_dir = os.environ.get("GDX_PROFILE_DIR")
if _profile_dir:  # --profile: cProfile of the main thread and of each executor task, dumped on SIGUSR1
    import cProfile
    import concurrent.futures.thread as _pool
    import pstats
    import signal
    import threading

    _state = {"main": cProfile.Profile(), "workers": {}, "n": 0}
    _state["main"].enable()
    _task = _pool._WorkItem.run

    def _run(self):
        profile = _state["workers"].setdefault(threading.get_ident(), cProfile.Profile())
        profile.enable()
        try:
            _task(self)
        finally:
            profile.disable()

    _pool._WorkItem.run = _run

    def _dump(_signum, _frame):
        _state["main"].disable()
        stats = pstats.Stats(_state["main"])
        workers, _state["workers"] = _state["workers"], {}
        for profile in workers.values():
            stats.add(profile)
        stats.dump_stats(os.path.join(_profile_dir, f"profile-{_state['n']}.prof"))
        _state["n"] += 1
        _state["main"] = cProfile.Profile()
        _state["main"].enable()

    signal.signal(signal.SIGUSR1, _dump)
'''


@dataclass
class Size:
    engines: int = 8
    schemas: int = 50
    cores: int = 128
    gpus: int = 8
    targets: int = 8
    profile: str = "full"  # --metrics.profile
    apply_interval: str = "1s"  # --probe.apply-interval
    max_hold: str = "15s"  # --probe.max-hold


def fakes(where: Path, gpus: int) -> Path:
    """The folder put first on the daemon's PYTHONPATH: pynvml with `gpus` GPUs, and sitecustomize."""
    fake_pynvml.install_dir(where, [50 + i for i in range(gpus)])
    (where / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return where


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return bytes(resp.read())


def cpu_seconds(pid: int) -> float:
    """CPU time of the process's live threads, in nanoseconds where the kernel keeps schedstat (user
    plus system, as psutil's): psutil's clock ticks are 10 ms, which over a 60 s window is most of
    node_exporter's steady state (0.05 % of a core is three ticks)."""
    total, found = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
                found = True
        except (OSError, ValueError, IndexError):
            continue  # the thread ended: the executor's and the Go runtime's threads live on
    if found and total > 0:
        return total / 1e9
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


@contextmanager
def targets(count: int) -> Iterator[list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.bench.scrape", "--_serve-targets", "--targets", str(count),
         "--page", str(DEFAULT_PAGE)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        yield [f"http://127.0.0.1:{p}/metrics" for p in proc.stdout.readline().split()]
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def daemon(size: Size, urls: list[str], work: Path, profile: Path | None = None) -> Iterator[tuple[int, str]]:
    """`gdx serve` at `size`, with its simulated engines running; yields (pid, /metrics URL)."""
    sock = work / "probe.sock"
    env = {
        "PYTHONPATH": os.pathsep.join([str(fakes(work / "fakes", size.gpus)), str(ROOT)]),
        "GDX_FAKE_CORES": str(size.cores),
        **({"GDX_PROFILE_DIR": str(profile)} if profile else {}),
    }
    flags = [f for u in urls[: size.targets] for f in ("--vllm.target", u)]
    proc = DaemonProcess(
        [
            "--probe.socket",
            str(sock),
            "--probe.max-schemas",
            str(size.schemas),
            "--metrics.profile",
            size.profile,
            "--probe.apply-interval",
            size.apply_interval,
            "--probe.max-hold",
            size.max_hold,
            *flags,
        ],
        env=env,
    )
    url = proc.url + "/metrics"
    sim = None
    try:
        sim = SimEngines(
            sock, work, engines=size.engines, interval=1, rate=20, static=size.schemas + 10, new=0
        )
        deadline = time.monotonic() + 60
        want = f"guided_decoding_probe_connections {float(size.engines)}"
        while want not in fetch(url).decode():
            if time.monotonic() > deadline:
                raise RuntimeError("the simulated engines did not connect")
            time.sleep(0.2)
        time.sleep(3)  # every schema shipped and analysed
        for _ in range(3):
            fetch(url)
        yield proc.proc.pid, url
    finally:
        if sim is not None:
            sim.stop()
        proc.stop()


@contextmanager
def node_exporter() -> Iterator[tuple[int, str]]:
    binary = next((shutil.which(b) for b in NODE_EXPORTER if shutil.which(b)), None)
    if binary is None:
        raise SystemExit("node_exporter not found: `make bench` installs prometheus-node-exporter (apt)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_http(url)
        for _ in range(3):
            fetch(url)
        yield proc.pid, url
    finally:
        proc.terminate()
        proc.wait(10)


def series(body: bytes) -> int:
    return sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))


def idle_rate(pid: int, seconds: float) -> float:
    """CPU seconds per second the process spends with nobody scraping it (background work)."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


def per_scrape(procs: list[tuple[int, str]], rounds: int) -> list[dict[str, float]]:
    """Interleaved scrapes of each (pid, url): median wall ms, and CPU ms per scrape net of the
    process's background rate, measured just before."""
    idle = [idle_rate(pid, 5.0) for pid, _ in procs]
    walls: list[list[float]] = [[] for _ in procs]
    cpu0 = [cpu_seconds(pid) for pid, _ in procs]
    started = time.monotonic()
    bodies = [b""] * len(procs)
    for _ in range(rounds):
        for i, (_, url) in enumerate(procs):
            t = time.perf_counter()
            bodies[i] = fetch(url)
            walls[i].append(time.perf_counter() - t)
    elapsed = time.monotonic() - started
    out = []
    for i, (pid, _) in enumerate(procs):
        cpu = (cpu_seconds(pid) - cpu0[i] - idle[i] * elapsed) / rounds
        out.append(
            {
                "wall_ms": statistics.median(walls[i]) * 1000,
                "cpu_ms": max(cpu, 0.0) * 1000,
                "bytes": len(bodies[i]),
                "series": series(bodies[i]),
                "idle_share": idle[i],
            }
        )
    return out


def steady(procs: list[tuple[int, str]], seconds: float, every: float = 15.0) -> list[float]:
    """CPU share of one core of each process over `seconds`, scraped every `every` seconds."""
    cpu0 = [cpu_seconds(pid) for pid, _ in procs]
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        for _, url in procs:
            fetch(url)
        time.sleep(min(every, max(0.0, seconds - (time.monotonic() - started))))
    elapsed = time.monotonic() - started
    return [(cpu_seconds(pid) - c) / elapsed for (pid, _), c in zip(procs, cpu0, strict=True)]


# Where the daemon (its event loop and its executor tasks: snapshots, scrapes) spends its time, by stage: the
# entry point of each, cumulative (a stage's callees count in it; the scrape stages nest in `scrape`).
STAGES = (
    ("snapshot: decode and validate", "receiver/message_check.py", "classify"),
    ("snapshot: store (increments, ranking, rollup)", "receiver/store.py", "snapshot"),
    ("schemas message: store and analysis queue", "receiver/store.py", "schemas"),
    ("housekeeping: expire", "receiver/store.py", "expire"),
    ("scrape: whole /metrics", "daemon/server.py", "render"),
    ("scrape: settle families", "receiver/store.py", "settle"),
    ("scrape: store view (copy, analysis and family views)", "receiver/store.py", "view"),
    ("scrape: store families (metric objects)", "receiver/metric_families.py", "store_families"),
    ("scrape: exposition (our families to bytes)", "daemon/exposition.py", "render"),
    ("scrape: passthrough (parse vLLM pages)", "daemon/passthrough.py", "parse"),
    ("scrape: passthrough (render)", "daemon/passthrough.py", "render_text"),
    ("scrape: cpu collector", "collectors/cpu.py", "collect"),
    ("scrape: nvml collector", "collectors/nvml.py", "collect"),
)


def stage_table(path: Path, per: int, what: str) -> list[str]:
    """Markdown rows: each stage's cumulative ms per `what` (one of `per`), and the top functions."""
    import pstats

    stats = pstats.Stats(str(path))
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    rows = [f"| stage | ms per {what} (under cProfile) |", "| --- | ---: |"]
    for name, file, func in STAGES:
        ct = sum(v[3] for (f, _, fn), v in table.items() if f.endswith(file) and fn == func)
        rows.append(f"| {name} | {ct * 1000 / per:.2f} |")
    own = sorted(((v[2], f, fn) for (f, _, fn), v in table.items()), reverse=True)[:12]
    rows.append("")
    rows.append(f"top functions by own time (ms per {what}):")
    rows += [f"  {tt * 1000 / per:7.3f}  {fn} ({f.split('/exporter/')[-1]})" for tt, f, fn in own]
    return rows


def profile(pid: int, url: str, folder: Path, idle: float, rounds: int) -> None:
    """cProfile of the daemon's main thread: `idle` seconds with no scrape, then `rounds` scrapes."""
    import signal

    def dump(n: int) -> Path:
        os.kill(pid, signal.SIGUSR1)
        path = folder / f"profile-{n}.prof"
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        return path

    dump(0)  # start and warm-up, set aside
    time.sleep(idle)
    quiet = dump(1)
    for _ in range(rounds):
        fetch(url)
    scraped = dump(2)
    print(f"\n## Profile, no scrape ({idle:.0f} s: 8 engines at 1 snapshot/s; {quiet})")
    print("\n".join(stage_table(quiet, int(idle), "second")))
    print(f"\n## Profile, {rounds} scrapes back to back ({scraped})")
    print("\n".join(stage_table(scraped, rounds, "scrape")))


def compare_apply(windows: int, seconds: float, modes: list[tuple[str, Size]]) -> None:
    """Daemons at the caps in the same windows, no scrape, one per mode (its name and its size)."""
    print(header("tools.bench.caps", None))
    with (
        tempfile.TemporaryDirectory(prefix="gdx-capsbench-") as tmp,
        targets(8) as urls,
        ExitStack() as stack,
    ):
        pids = []
        for i, (_, size) in enumerate(modes):
            (Path(tmp) / str(i)).mkdir()
            pids.append(stack.enter_context(daemon(size, urls, Path(tmp) / str(i)))[0])
        print(f"| window ({seconds:.0f} s, no scrape) | " + " | ".join(name for name, _ in modes) + " |")
        print("| --- |" + " ---: |" * len(modes))
        shares: list[list[float]] = [[] for _ in modes]
        for w in range(windows):
            before = [cpu_seconds(pid) for pid in pids]
            time.sleep(seconds)
            for i, pid in enumerate(pids):
                shares[i].append((cpu_seconds(pid) - before[i]) / seconds)
            print(f"| {w + 1} | " + " | ".join(f"{s[-1] * 100:.3f} %" for s in shares) + " |")
        means = [statistics.mean(s) for s in shares]
        print("| mean | " + " | ".join(f"{m * 100:.3f} % ({m / means[0]:.2f}x)" for m in means) + " |")


def node_exporter_version() -> str:
    binary = next((shutil.which(b) for b in NODE_EXPORTER if shutil.which(b)), None)
    if binary is None:
        return "?"
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    match = re.search(r"version (\S+)", out.stdout + out.stderr)
    return match.group(1) if match else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.caps", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="interleaved scrapes of each (default 40)")
    parser.add_argument("--steady", type=float, default=120.0, help="steady-state seconds (default 120)")
    parser.add_argument("--growth-rounds", type=int, default=15, help="scrapes per growth point (default 15)")
    parser.add_argument("--no-growth", action="store_true", help="skip the growth table")
    parser.add_argument(
        "--profile", metavar="DIR", type=Path,
        help="only profile the daemon at the caps (cProfile of its main thread, no scrape and then scrapes);"
        " the .prof files are written to DIR",
    )  # fmt: skip
    parser.add_argument(
        "--compare-apply", nargs="?", const="0,1s", metavar="INTERVALS",
        help="only compare, side by side at the caps with no scrape, daemons at each --probe.apply-interval"
        " of the comma-separated INTERVALS, each snapshot applied in the pass that reads it (default 0,1s:"
        " on arrival; a pass a second)",
    )  # fmt: skip
    parser.add_argument(
        "--compare-hold", nargs="?", const="0,15s", metavar="HOLDS",
        help="only compare, as --compare-apply, daemons at each --probe.max-hold of the comma-separated"
        " HOLDS, a pass a second (default 0,15s: applied in the pass that reads it; held up to 15 s)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.compare_apply:
        modes = [
            ("on arrival (0)" if i == "0" else f"a pass every {i}", Size(apply_interval=i, max_hold="0"))
            for i in args.compare_apply.split(",")
        ]
        compare_apply(windows=3, seconds=60.0, modes=modes)
        return 0
    if args.compare_hold:
        modes = [
            ("applied in its pass (0)" if h == "0" else f"held up to {h}", Size(max_hold=h))
            for h in args.compare_hold.split(",")
        ]
        compare_apply(windows=3, seconds=60.0, modes=modes)
        return 0
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        folder = args.profile.resolve()
        with (
            tempfile.TemporaryDirectory(prefix="gdx-capsbench-") as tmp,
            targets(Size().targets) as urls,
            daemon(Size(), urls, Path(tmp), profile=folder) as (pid, url),
        ):
            profile(pid, url, folder, idle=30.0, rounds=args.rounds)
        return 0
    print(header("tools.bench.caps", argv))
    print(f"# node_exporter {node_exporter_version()}")
    caps = Size()
    with tempfile.TemporaryDirectory(prefix="gdx-capsbench-") as tmp, targets(caps.targets) as urls:
        work = Path(tmp)
        print(
            f"\n## At the caps ({caps.engines} engines at 1 snapshot/s, {caps.schemas} schemas exposed,"
            f" {caps.cores} cores, {caps.gpus} GPUs, {caps.targets} vLLM targets): per scrape, {args.rounds}"
            f" interleaved scrapes each; steady state with a scrape every 15 s, {args.steady:.0f} s;"
            " no scrape, 30 s"
        )
        print(
            "| --metrics.profile | series | bytes | median wall ms | CPU ms per scrape | CPU per series vs"
            " node_exporter | steady, % of a core | vs node_exporter | no scrape, % of a core |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        figures = {}
        for name in ("full", "minimal"):
            size = Size(profile=name)
            (work / name).mkdir()
            with daemon(size, urls, work / name) as gdx, node_exporter() as node:
                (d, n) = per_scrape([gdx, node], args.rounds)
                background = idle_rate(gdx[0], 30.0)
                shares = steady([gdx, node], args.steady)
            per_series = d["cpu_ms"] / d["series"] / max(n["cpu_ms"] / n["series"], 1e-9)
            steady_ratio = shares[0] / max(shares[1], 1e-9)
            figures[name] = (per_series, steady_ratio, background)
            print(
                f"| {name} | {d['series']} | {d['bytes']} | {d['wall_ms']:.1f} | {d['cpu_ms']:.1f} |"
                f" {per_series:.2f} | {shares[0] * 100:.2f} | {steady_ratio:.1f}x | {background * 100:.2f} |"
            )
            print(
                f"| node_exporter | {n['series']} | {n['bytes']} | {n['wall_ms']:.1f} | {n['cpu_ms']:.1f}"
                f" | 1 | {shares[1] * 100:.2f} | 1x | |"
            )
        per_series, steady_ratio, background = figures["full"]
        print(
            "targets (issues 31 and 53, full profile): CPU per series vs node_exporter <= 0.25:"
            f" {per_series:.2f} {'ok' if per_series <= 0.25 else 'MISSED'}; steady <= 5x node_exporter:"
            f" {steady_ratio:.1f}x {'ok' if steady_ratio <= 5 else 'MISSED'}; no scrape <= 0.15% of a core:"
            f" {background * 100:.2f}% {'ok' if background <= 0.0015 else 'MISSED'}"
        )
        if args.no_growth:
            return 0
        print("\n## Growth (one dimension at a time, the others at the caps)")
        print("| dimension | size | series | median wall ms | CPU ms per scrape | background CPU % |")
        print("| --- | --- | --- | --- | --- | --- |")
        for dim, sizes in (("engines", (2, 8, 32)), ("schemas", (10, 50, 200)), ("cores", (16, 128, 512))):
            for value in sizes:
                change: dict[str, Any] = {dim: value}
                size = dataclasses.replace(Size(), **change)
                where = work / f"{dim}-{value}"
                where.mkdir()
                with daemon(size, urls, where) as gdx:
                    (r,) = per_scrape([gdx], args.growth_rounds)
                print(
                    f"| {dim} | {value} | {r['series']} | {r['wall_ms']:.1f} | {r['cpu_ms']:.1f} |"
                    f" {r['idle_share'] * 100:.2f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
