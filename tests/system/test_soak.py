"""Soak: 8 simulated engines (the real probe code, real unix sockets) ship snapshots ten times a second
for GDX_SOAK_SECONDS (default 120: two minutes, to keep `make test` inside its budget; the figures
in docs/faults.md are of 600) with a new schema in 2% of 200 compile calls/s each, while a
Prometheus-style scraper reads /metrics every second. Asserted: no failed scrape, no rejected message,
no counter that ever goes down, the daemon's resident memory flat after its caches fill, and at the
end every counter equal to the engines' own totals."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tools.harness.scraping import sample, scrape
from tools.harness.simengines import ACCUMULATED, SimEngines, Watcher

SECONDS = float(os.environ.get("GDX_SOAK_SECONDS", "120"))
RSS_LIMIT = 200 * 2**20  # absolute ceiling for the daemon under this load
RSS_GROWTH = 24 * 2**20  # from the end of the first third to the end of the run
COUNTER_SUFFIXES = ("_total", "_count", "_bucket", "_sum")

# beside the other tests: its scraper only fetches in its loop and parses the pages after the run (the
# parse in the loop, in the process that also runs the 8 simulated engines, made 85 of 96 scrapes
# beside the benchmark sweeps, 2026-12-05)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(SECONDS + 300)]


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Scraper(threading.Thread):
    """Scrapes every second and keeps each page and the daemon's RSS; `check()` then reads the pages
    in order for counters that went down and series counts. Parsing waits for the end of the run: a
    page parse costs a scrape's worth of CPU in the process that also runs the simulated engines."""

    def __init__(self, url: str, pid: int) -> None:
        super().__init__(daemon=True)
        self.url, self.pid = url, pid
        self.stop = threading.Event()
        self.pages: list[str] = []
        self.high: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        self.backwards: list[str] = []
        self.failures: list[str] = []
        self.rss: list[tuple[float, int]] = []
        self.scrapes = 0
        self.max_schema_series = 0
        self.durations: list[float] = []

    def run(self) -> None:
        import urllib.request

        started = time.monotonic()
        while not self.stop.wait(max(0.0, started + 1.0 - time.monotonic())):  # one scrape a second
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
                    self.pages.append(resp.read().decode())
            except Exception as err:
                self.failures.append(f"{time.monotonic():.0f}: {err!r}")
                continue
            self.durations.append(time.monotonic() - started)
            self.scrapes += 1
            self.rss.append((time.monotonic(), rss(self.pid)))

    def check(self) -> None:
        """Every page in the order it was scraped: a page that does not parse is a failure."""
        for number, text in enumerate(self.pages):
            try:
                families = list(text_string_to_metric_families(text))
            except Exception as err:
                self.failures.append(f"page {number}: {err!r}")
                continue
            for family in families:
                if family.name == "guided_decoding_schema_requests":
                    self.max_schema_series = max(self.max_schema_series, len(family.samples))
                if family.type not in ("counter", "histogram"):
                    continue
                for s in family.samples:
                    if not s.name.endswith(COUNTER_SUFFIXES):
                        continue
                    key = (s.name, frozenset(s.labels.items()))
                    before = self.high.get(key, 0.0)
                    if s.value < before and len(self.backwards) < 20:
                        self.backwards.append(f"{s.name}{dict(s.labels)}: {before} -> {s.value}")
                    self.high[key] = max(before, s.value)
        self.pages.clear()


def test_soak(daemon_factory: Any, tmp_path: Path) -> None:
    sock = tmp_path / "probe.sock"
    daemon = daemon_factory("--probe.socket", str(sock), "--no-collector.nvml")
    engines = SimEngines(sock, tmp_path, engines=8, interval=0.1, rate=200, new=0.02)
    scraper = Scraper(daemon.url, daemon.proc.pid)
    scraper.start()
    try:
        time.sleep(SECONDS)
        totals = engines.pause()
    finally:
        scraper.stop.set()
        scraper.join(15)
    scraper.check()
    try:
        watcher = Watcher(daemon.url)  # what the scraper saw, then scrapes until the last snapshots land
        watcher.last = {k: v for k, v in scraper.high.items() if k[0].startswith(ACCUMULATED)}
        watcher.wait_until_equal(totals)
    finally:
        engines.stop()
    assert daemon.proc.poll() is None, daemon.log
    assert not scraper.failures, scraper.failures[:5]
    assert not scraper.backwards, scraper.backwards
    assert scraper.scrapes >= 0.8 * SECONDS
    assert 0 < scraper.max_schema_series <= 8 * 51  # 50 exposed hashes + other, per engine
    requests = sum(b["xgrammar"]["requests"] for b in totals.values())
    assert requests >= 0.5 * 8 * 200 * SECONDS  # the load really ran (allowing for a slow machine)
    for key, engine in totals.items():
        assert engine["probe"]["dropped"] == 0 and engine["probe"]["internal_errors"] == 0, key
    m = scrape(daemon.url)
    for result in ("malformed", "oversize", "rejected"):
        assert sample(m, "guided_decoding_probe_snapshots_total", result=result) == 0
    assert sample(m, "guided_decoding_probe_snapshots_total", result="ok") >= 8 * 5 * SECONDS
    assert sample(m, "guided_decoding_probe_events_total", event="send_failures") == 0
    peak = max(r for _, r in scraper.rss)
    third = scraper.rss[len(scraper.rss) // 3][1]
    durations = sorted(scraper.durations)
    print(
        f"soak {SECONDS:.0f}s: {requests} compile calls, {scraper.scrapes} scrapes"
        f" (median {durations[len(durations) // 2] * 1000:.1f} ms, max {durations[-1] * 1000:.1f} ms),"
        f" RSS at 1/3 {third / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB,"
        f" end {scraper.rss[-1][1] / 2**20:.1f} MiB"
    )
    assert peak < RSS_LIMIT
    assert scraper.rss[-1][1] - third < RSS_GROWTH
