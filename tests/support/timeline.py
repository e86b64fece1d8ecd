"""Where the suite's time goes: with GDX_TEST_TIMELINE=FILE each test's start, end and the machine's
busy cores while it ran (from /proc/stat, so the servers a test starts count) are appended to FILE
as JSON lines, from every xdist worker; `python -m tests.support.timeline FILE` sums them per file.

Why: most of `make test` is real servers and windows; whether a test waits or computes decides
whether it can share the machine with another (docs/testing.md)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TICKS = os.sysconf("SC_CLK_TCK")


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
    start, ticks = time.time(), busy_ticks()
    yield
    end = time.time()
    row = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "start": round(start, 3),
        "end": round(end, 3),
        "busy_cores": round((busy_ticks() - ticks) / TICKS / max(end - start, 1e-3), 2),
    }
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


def report(rows: list[dict[str, Any]]) -> str:
    """Per file: tests, wall seconds (setup to teardown) and the machine's mean busy cores meanwhile,
    longest first; then the span from the first start to the last end."""
    files: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        files[row["test"].split("::")[0]].append(row)
    lines = [f"{'file':<70} {'tests':>5} {'wall s':>7} {'busy cores':>10}"]
    walls = {f: sum(r["end"] - r["start"] for r in rs) for f, rs in files.items()}
    for name in sorted(files, key=lambda f: -walls[f]):
        rs = files[name]
        busy = sum(r["busy_cores"] * (r["end"] - r["start"]) for r in rs) / max(walls[name], 1e-3)
        lines.append(f"{name:<70} {len(rs):>5} {walls[name]:>7.1f} {busy:>10.2f}")
    span = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    lines.append(f"{len(rows)} tests, {sum(walls.values()):.0f} s of test time in a span of {span:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report([json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line]))
