"""Simulated engines for the soak, fault and performance suites: the real probe (Recorder and Shipper
over a real unix socket) driven by a synthetic compile workload instead of a model server.

Each engine is one Recorder and one Shipper thread with its own identity (pod `<prefix><n>`), as if it
were its own process; one driver thread makes the compile, wait and mask calls of all of them at
`--rate` compile calls per second per engine. The mix: a fixed set of static schemas shared by all
engines (cache hits after the first compile) and, with probability `--new`, a schema never seen
before whose enum varies (per-request injection: misses, shape variants, `other` after eviction).

Control, so that a test can compare the daemon against exact totals:
- SIGUSR1: pause the workload and write the totals so far to `--totals` (atomically; `generation`
  counts the writes). The shippers keep shipping, so the daemon converges on exactly these totals.
- SIGUSR2: resume, and write the file again as the acknowledgement. Wait for each write before the
  next signal: two different signals pending at once are delivered in signal-number order.
- SIGTERM / SIGINT: pause, write the totals, ship a last snapshot, exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from exporter.probe.recorder import DEFAULT_TRACKED_SPECS, Recorder
from exporter.probe.shipper import Shipper

IDENTITY = {
    "engine_kind": "generic",
    "engine_version": "simulated",
    "backends": {"xgrammar": "simulated"},
    "probe_version": "simulated",
}


def static_schema(i: int) -> str:
    """A different schema per i (its own family: distinct required property names), as services'
    static schemas are."""
    props = {f"s{i}_field_{j}": {"type": "string"} for j in range(i % 7 + 1)}
    return json.dumps(
        {"title": f"static-{i}", "type": "object", "properties": props, "required": list(props)}
    )


def dynamic_schema(rng: random.Random) -> str:
    codes = [f"c{rng.randrange(10**9)}" for _ in range(3)]
    return json.dumps(
        {
            "title": "per-request",
            "type": "object",
            "properties": {"cost_center": {"enum": codes}, "amount": {"type": "number"}},
        }
    )


class Engines:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.static = [static_schema(i) for i in range(args.static)]
        self.recorders = [Recorder(max_schemas=args.tracked_specs) for _ in range(args.engines)]
        self.shippers = [
            Shipper(
                rec,
                args.socket,
                {**IDENTITY, "pod": f"{args.pod_prefix}{n}", "engine": "0"},
                args.interval,
                token_file=args.token_file.replace("{n}", str(n)),
            )
            for n, rec in enumerate(self.recorders)
        ]
        self.compiled: list[set[int]] = [set() for _ in self.recorders]
        self.running = threading.Event()
        self.running.set()
        self.stop = threading.Event()
        self.generation = 0
        self.lock = threading.Lock()

    def call(self, n: int) -> None:
        """One compile call of engine n, as the probe's wrappers record it."""
        rec = self.recorders[n]
        backend = "xgrammar"
        if self.rng.random() < self.args.new:
            spec, seconds, hit = dynamic_schema(self.rng), self.rng.uniform(0.01, 0.2), False
        else:
            i = self.rng.randrange(len(self.static))
            spec = self.static[i]
            hit = i in self.compiled[n]
            seconds = 0.00002 if hit else self.rng.uniform(0.005, 0.05)
            self.compiled[n].add(i)
        token = rec.begin(backend)
        error = "invalid_schema" if self.rng.random() < 0.001 else None
        rec.finish(token, backend, "json", spec, seconds, hit, error)
        if not hit:
            rec.observe_wait(backend, seconds * 1.5)
        rec.observe_mask(backend, self.rng.uniform(0.00002, 0.0002))

    def drive(self) -> None:
        period = 1.0 / max(self.args.rate, 1e-9)
        started = time.monotonic()
        done = 0
        while not self.stop.is_set():
            if not self.running.is_set():  # paused: the pace starts afresh on resume, no catch-up burst
                self.running.wait(0.1)
                started, done = time.monotonic(), 0
                continue
            with self.lock:
                if not self.running.is_set():
                    continue
                for n in range(len(self.recorders)):
                    self.call(n)
            done += 1
            ahead = started + done * period - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def totals(self) -> dict[str, Any]:
        return {
            f"{self.args.pod_prefix}{n}/0": rec.totals()
            | {"probe": dict(rec.counters), "shipper": dict(self.shippers[n].counters)}
            for n, rec in enumerate(self.recorders)
        }

    def pause_and_write(self) -> None:
        with self.lock:  # no call is half made once we hold it
            self.running.clear()
        self.write()

    def resume_and_write(self) -> None:
        self.running.set()
        self.write()

    def write(self) -> None:
        self.generation += 1
        doc = {"generation": self.generation, "running": self.running.is_set(), "engines": self.totals()}
        path = Path(self.args.totals)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.harness.simulate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--socket", required=True, help="the daemon's probe socket, or tcp://HOST:PORT")
    parser.add_argument(
        "--token-file", default="", help="over TCP, engine n's token file ({n} in the name is replaced)"
    )
    parser.add_argument("--totals", required=True, help="file the totals are written to on SIGUSR1/SIGTERM")
    parser.add_argument("--engines", type=int, default=8, help="simulated engines (default 8)")
    parser.add_argument("--interval", type=float, default=1.0, help="snapshot interval, seconds (default 1)")
    parser.add_argument("--rate", type=float, default=20.0, help="compile calls/s per engine (default 20)")
    parser.add_argument("--static", type=int, default=40, help="static schemas shared by all (default 40)")
    parser.add_argument("--new", type=float, default=0.02, help="share of calls with a new schema")
    parser.add_argument(
        "--tracked-specs",
        type=int,
        default=DEFAULT_TRACKED_SPECS,
        help=f"GDX_PROBE_TRACKED_SPECS of each engine (default {DEFAULT_TRACKED_SPECS})",
    )
    parser.add_argument("--pod-prefix", default="sim-", help="engine n is pod <prefix><n> (default sim-)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    engines = Engines(args)
    actions: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        # Only a list append: taking a lock here (Event.set) can deadlock against the main thread.
        names = {int(signal.SIGUSR1): "pause", int(signal.SIGUSR2): "resume"}
        actions.append(names.get(signum, "exit"))

    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    for shipper in engines.shippers:
        shipper.start()
    driver = threading.Thread(target=engines.drive, name="sim-driver", daemon=True)
    driver.start()
    print(f"simulating {args.engines} engines on {args.socket}", flush=True)
    while True:
        time.sleep(0.02)
        while actions:
            action = actions.pop(0)
            if action == "resume":
                engines.resume_and_write()
            else:
                engines.pause_and_write()
            if action == "exit":
                time.sleep(2 * args.interval)  # let each shipper send what the totals hold
                engines.stop.set()
                for shipper in engines.shippers:
                    shipper.stop()
                return 0


if __name__ == "__main__":
    sys.exit(main())
