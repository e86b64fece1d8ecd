"""Where the suite's time goes: with GDX_TEST_TIMELINE=FILE each test's start, end and the machine's
busy cores while it ran (from /proc/stat, so the servers a test starts count) are appended to FILE
as JSON lines, from every xdist worker; `python -m tests.support.timeline FILE` sums them per file
(`--write-durations tests/support/durations.json` keeps each file's wall time: the longest files
start first, `pytest_collection_modifyitems` below).

Why: most of `make test` is real servers and windows; whether a test waits or computes decides
whether it can share the machine with another (docs/testing.md)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float:
    """CPU this process and its reaped children have used: a test's own work, the subprocesses it
    waited for included (a server's grandchildren that its group kill leaves to init are not), and the
    daemons the spawn server forked and reaped for it (tests/support/spawnserver.py)."""
    from tests.support import spawnserver

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned = spawnserver.reaped_cpu()
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + spawned


def busy_ticks() -> int:
    """Clock ticks the whole machine has spent busy (not idle, not waiting on I/O) since boot."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal, *_ = map(int, f.readline().split()[1:])
    return user + nice + system + irq + softirq + steal


RUN = "GDX_TEST_TIMELINE_RUN"  # the pid of the pytest a step started, for the processes below it
_recording = False


def pytest_configure(config: pytest.Config) -> None:
    """Records in the step's own pytest and its xdist workers, not in the pytest runs some tests start
    inside themselves (the engine-version sweeps): their tests are counted once, as the outer test."""
    global _recording
    outer = os.environ.get(RUN)
    if outer is None:
        os.environ[RUN] = str(os.getpid())
        _recording = True
    else:
        _recording = bool(os.environ.get("PYTEST_XDIST_WORKER")) and str(os.getppid()) == outer


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    path = os.environ.get("GDX_TEST_TIMELINE")
    if not path or not _recording:
        yield
        return
    start, ticks, cpu = time.time(), busy_ticks(), cpu_seconds()
    yield
    end = time.time()
    row = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "start": round(start, 3),
        "end": round(end, 3),
        "busy_cores": round((busy_ticks() - ticks) / TICKS / max(end - start, 1e-3), 2),
        "cpu": round(cpu_seconds() - cpu, 2),
    }
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def per_file(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    files: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        files[row["test"].split("::")[0]].append(row)
    return files


DURATIONS = Path(__file__).parent / "durations.json"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, each file's tests in their order: pytest-xdist hands whole files to
    its workers in this order, so no worker is left with a long file while the others sit idle at the
    end. The seconds are a past run's (`--write-durations`); a file not there yet counts as short."""
    seconds: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    root = DURATIONS.parent.parent.parent
    weight = {
        item.nodeid: seconds.get(Path(str(item.fspath)).relative_to(root).as_posix(), 1.0) for item in items
    }
    items.sort(key=lambda item: -weight[item.nodeid])


def report(rows: list[dict[str, Any]]) -> str:
    """Per file: tests, wall seconds (setup to teardown), the machine's mean busy cores meanwhile and
    the CPU seconds of the test's own processes, longest first; then the span from the first start to
    the last end."""
    files = per_file(rows)
    lines = [f"{'file':<70} {'tests':>5} {'wall s':>7} {'busy cores':>10} {'cpu s':>7}"]
    walls = {f: sum(r["end"] - r["start"] for r in rs) for f, rs in files.items()}
    for name in sorted(files, key=lambda f: -walls[f]):
        rs = files[name]
        busy = sum(r["busy_cores"] * (r["end"] - r["start"]) for r in rs) / max(walls[name], 1e-3)
        cpu = sum(r.get("cpu", 0.0) for r in rs)
        lines.append(f"{name:<70} {len(rs):>5} {walls[name]:>7.1f} {busy:>10.2f} {cpu:>7.1f}")
    span = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    lines.append(f"{len(rows)} tests, {sum(walls.values()):.0f} s of test time in a span of {span:.0f} s")
    return "\n".join(lines)


def durations(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Each file's wall seconds, rounded: the order `pytest_collection_modifyitems` hands files to the
    workers in."""
    return {f: round(sum(r["end"] - r["start"] for r in rs), 1) for f, rs in sorted(per_file(rows).items())}


if __name__ == "__main__":
    timeline = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line]
    if len(sys.argv) > 3 and sys.argv[2] == "--write-durations":
        Path(sys.argv[3]).write_text(json.dumps(durations(timeline), indent=1) + "\n")
    print(report(timeline))
