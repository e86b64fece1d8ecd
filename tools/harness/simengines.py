"""Simulated engines in their own process (`tools.harness.simulate`: the real probe code over a real
unix socket), and the check that a daemon's /metrics agree exactly with the engines' own totals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tools.harness import ROOT
from tools.harness.scraping import sample, scrape, wait_for


class SimEngines:
    def __init__(
        self, socket: Path | str, workdir: Path, as_user: int | None = None, **options: object
    ) -> None:
        """`as_user`: run as that uid and gid (setpriv), e.g. to meet a socket it may not open."""
        name = str(options.get("pod_prefix", "sim-"))
        self.totals_path = workdir / f"{name}totals.json"
        self.log_path = workdir / f"{name}log.txt"
        args = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
        command = [sys.executable, "-m", "tools.harness.simulate", "--socket", str(socket),
                   "--totals", str(self.totals_path), *args]  # fmt: skip
        if as_user is not None:
            command = ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups", *command]
        start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log)
        self.generation = 0
        self._wait_ready(start)

    def _wait_ready(self, start: int, timeout: float = 60.0) -> None:
        """Until the process says it handles its signals ("simulating ..."): SIGUSR1 before that is
        SIGUSR1's default, the end of the process (a daemon forked in 0.15 s came first)."""
        deadline = time.monotonic() + timeout
        while b"simulating " not in self.log_path.read_bytes()[start:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the simulated engines did not start:\n{self.log}")
            time.sleep(0.02)

    def _read(self, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.totals_path.exists():
                doc: dict[str, Any] = json.loads(self.totals_path.read_text())
                if doc["generation"] > self.generation:
                    self.generation = doc["generation"]
                    return doc["engines"]  # type: ignore[no-any-return]
            time.sleep(0.05)
        raise AssertionError("the simulated engines wrote no totals")

    def pause(self) -> dict[str, Any]:
        """Stops the workload; returns the exact totals of every engine."""
        self.proc.send_signal(signal.SIGUSR1)
        return self._read()

    def resume(self) -> None:
        """Restarts the workload; returns once the engines acknowledged it (signals must not overlap:
        a pending SIGUSR1 would be delivered before a pending SIGUSR2, whatever the order sent)."""
        self.proc.send_signal(signal.SIGUSR2)
        self._read()

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> dict[str, Any] | None:
        if self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            totals = self._read()
        except AssertionError:
            totals = None
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return totals


ENGINE_LEVEL = ("compile_requests_total", "compile_cache_hits_total", "compile_errors_total",
                "compile_seconds_count", "mask_seconds_count", "grammar_wait_seconds_count")  # fmt: skip


ACCUMULATED = ("guided_decoding_schema_", "guided_decoding_family_")  # series kept at their last value


class Watcher:
    """What a scraper of one daemon process has seen: the last value of every series, including
    those that have since left /metrics (a demoted schema's series shows its final value for a
    while, then goes stale). Summed, these must equal the engines' totals."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.last: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}

    def observe(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        m = scrape(self.url)
        self.last.update((k, v) for k, v in m.items() if k[0].startswith(ACCUMULATED))
        return m

    def mismatches(self, totals: dict[str, Any]) -> list[str]:
        """Every way the daemon's counters differ from the engines' totals (empty: they agree):
        engine-level families as exposed now, schema-level ones as the sum of last values seen."""
        now = self.observe()
        out = []
        for key, backends in totals.items():
            pod, engine = key.split("/")
            for backend, t in backends.items():
                if backend in ("probe", "shipper"):
                    continue
                where = {"pod": pod, "engine": engine, "backend": backend}
                want = {
                    "compile_requests_total": t["requests"],
                    "compile_cache_hits_total": t["hits"],
                    "compile_errors_total": sum(t["errors"].values()),
                    "compile_seconds_count": t["compile_count"],
                    "mask_seconds_count": t["mask_count"],
                    "grammar_wait_seconds_count": t["wait_count"],
                    "schema_requests_total": t["requests"],
                    "schema_cache_hits_total": t["hits"],
                    "schema_compile_seconds_count": t["compile_count"],
                }
                for name, value in want.items():
                    source = now if name in ENGINE_LEVEL else self.last
                    have = sample(source, "guided_decoding_" + name, **where)
                    if have != value:
                        out.append(f"{pod}/{engine}/{backend} {name}: daemon {have:g}, engine {value}")
        # family-level series are per node: all engines' calls, each in exactly one family series
        for name, field in (("family_requests_total", "requests"), ("family_cache_hits_total", "hits")):
            want_total = sum(
                t[field]
                for backends in totals.values()
                for b, t in backends.items()
                if b not in ("probe", "shipper")
            )
            have = sample(self.last, "guided_decoding_" + name)
            if have != want_total:
                out.append(f"node {name}: daemon {have:g}, engines {want_total}")
        return out

    def wait_until_equal(self, totals: dict[str, Any], timeout: float = 30.0) -> None:
        last: list[list[str]] = [[]]

        def agree() -> bool:
            last[0] = self.mismatches(totals)
            return not last[0]

        try:
            wait_for(agree, timeout, 0.25)
        except AssertionError:
            raise AssertionError("daemon and engines disagree:\n" + "\n".join(last[0][:20])) from None
