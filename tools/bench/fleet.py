"""The figures of docs/fleet.md: what one node adds to a fleet's Prometheus, and the daemon's memory.

- Series per node exposed by one daemon (`gdx serve`, default flags: 50 schema hashes, 50 families,
  vLLM passthrough on), by kind, on two nodes run side by side as `tools.bench.caps` drives them
  (simulated engines: the real probe code over the real socket; the real vLLM 0.32 page as each
  target; cores at the psutil boundary, GPUs at the pynvml boundary):
    typical: 2 engine pods, 2 vLLM targets, 60 static schemas seen (50 exposed), 128 cores, 8 GPUs;
    caps:    8 engine pods, 8 vLLM targets, the same schemas, 128 cores, 8 GPUs (docs/metrics.md).
- The series the recording rules produce per node: a real Prometheus scrapes both daemons every
  second (each under its node name as `instance`) and evaluates alerts/guided-decoding.rules.yml;
  each recording rule's series are counted per node.
- The daemon's resident memory (VmRSS, peak VmHWM) at both sizes, and under a flood: the caps node
  with its 8 engines each sending a snapshot every 0.1 s and a schema never seen before in half of
  100 compile calls a second (400 new schemas a second in all), scraped every second.
Every figure is also given per 1,000 nodes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tools.bench.caps import Size, daemon, fakes, fetch, series, targets
from tools.bench.machine import header
from tools.harness import ROOT
from tools.harness.processes import DaemonProcess, Prometheus
from tools.harness.simengines import SimEngines

TYPICAL = Size(engines=2, targets=2)
CAPS = Size()
RULES = ROOT / "alerts" / "guided-decoding.rules.yml"
KINDS = (  # (kind, name prefix), first match wins
    ("vLLM passthrough (vllm:*)", "vllm:"),
    ("schema-level (guided_decoding_schema_*)", "guided_decoding_schema_"),
    ("family-level (guided_decoding_family_*)", "guided_decoding_family_"),
    ("shape (guided_decoding_shape_*)", "guided_decoding_shape_"),
    ("per-core CPU (guided_decoding_cpu_*)", "guided_decoding_cpu_"),
    ("GPU (guided_decoding_gpu_*)", "guided_decoding_gpu_"),
    ("engine-level and the daemon's own (other guided_decoding_*)", "guided_decoding_"),
    ("other", ""),
)


def kinds(body: bytes) -> Counter[str]:
    out: Counter[str] = Counter()
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        out[next(kind for kind, prefix in KINDS if name.startswith(prefix))] += 1
    return out


def memory(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def rule_series(prom: Prometheus, nodes: list[str], timeout: float = 60.0) -> dict[str, dict[str, int]]:
    """Series of each recording rule per node, once every rule has produced on every node."""
    names = [
        line.split("record:", 1)[1].strip() for line in RULES.read_text().splitlines() if "record:" in line
    ]
    deadline = time.monotonic() + timeout
    while True:
        result = prom.query('count by (__name__, instance) ({__name__=~"instance[a-z_]*:.+"})')
        counts: dict[str, dict[str, int]] = {name: dict.fromkeys(nodes, 0) for name in names}
        for r in result:
            if r["metric"]["__name__"] in counts:
                counts[r["metric"]["__name__"]][r["metric"]["instance"]] = int(r["value"][1])
        if all(all(c.values()) for c in counts.values()) or time.monotonic() > deadline:
            return counts
        time.sleep(2)


@contextmanager
def flood_daemon(size: Size, urls: list[str], work: Path) -> Iterator[DaemonProcess]:
    sock = work / "probe.sock"
    env = {
        "PYTHONPATH": os.pathsep.join([str(fakes(work / "fakes", size.gpus)), str(ROOT)]),
        "GDX_FAKE_CORES": str(size.cores),
    }
    flags = [f for u in urls[: size.targets] for f in ("--vllm.target", u)]
    proc = DaemonProcess(["--probe.socket", str(sock), *flags], env=env)
    sim = SimEngines(sock, work, engines=size.engines, interval=0.1, rate=100, static=60, new=0.5)
    try:
        yield proc
    finally:
        sim.stop()
        proc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--settle", type=float, default=30.0, help="seconds of scrapes before counting")
    parser.add_argument("--flood", type=float, default=120.0, help="seconds of the flood (default 120)")
    args = parser.parse_args(argv)
    print(header("tools.bench.fleet", argv))
    nodes = {"typical": TYPICAL, "caps": CAPS}
    with tempfile.TemporaryDirectory(prefix="gdx-fleetbench-") as tmp, targets(CAPS.targets) as urls:
        work = Path(tmp)
        for name in nodes:
            (work / name).mkdir()
        with daemon(TYPICAL, urls, work / "typical") as typical, daemon(CAPS, urls, work / "caps") as caps:
            running = {"typical": typical, "caps": caps}
            scrape_config = {
                "job_name": "guided-decoding-exporter",
                "honor_labels": True,
                "static_configs": [
                    {
                        "targets": [url.removeprefix("http://").removesuffix("/metrics")],
                        "labels": {"instance": n},
                    }
                    for n, (_, url) in running.items()
                ],
            }
            (work / "prom").mkdir()
            prom = Prometheus(work / "prom", [], rule_files=[RULES], scrape_config=scrape_config)
            try:
                time.sleep(args.settle)
                pages = {n: fetch(url) for n, (_, url) in running.items()}
                rules = rule_series(prom, list(running))
                mem = {n: memory(pid) for n, (pid, _) in running.items()}
            finally:
                prom.stop()
        (work / "flood").mkdir()
        with flood_daemon(CAPS, urls, work / "flood") as flooded:
            peak_series, rss_trace = 0, []
            started = time.monotonic()
            failures = 0
            while time.monotonic() - started < args.flood:
                t = time.monotonic()
                try:
                    peak_series = max(peak_series, series(fetch(flooded.url + "/metrics")))
                except OSError:
                    failures += 1
                rss_trace.append(memory(flooded.proc.pid)[0])
                time.sleep(max(0.0, t + 1.0 - time.monotonic()))
            flood_mem = memory(flooded.proc.pid)
            first_seen = fetch(flooded.url + "/metrics").decode()
            seen_line = next(
                (
                    line
                    for line in first_seen.splitlines()
                    if line.startswith("guided_decoding_schemas_first_seen_total")
                ),
                "",
            )

    sizes = {
        n: f"{s.engines} engine pods, {s.targets} vLLM targets, {s.cores} cores, {s.gpus} GPUs"
        for n, s in nodes.items()
    }
    print("\n## Series per node (one daemon's /metrics, default flags)")
    for n, s in sizes.items():
        print(f"- {n}: {s}, {nodes[n].schemas + 10} static schemas seen, {nodes[n].schemas} exposed")
    print("| kind | typical | caps |")
    print("| --- | ---: | ---: |")
    counted = {n: kinds(body) for n, body in pages.items()}
    for kind, _ in KINDS:
        print(f"| {kind} | {counted['typical'][kind]:,} | {counted['caps'][kind]:,} |")
    totals = {n: series(body) for n, body in pages.items()}
    passthrough = {n: counted[n][KINDS[0][0]] for n in pages}
    print(f"| **all** | **{totals['typical']:,}** | **{totals['caps']:,}** |")
    print(
        "| without the passthrough (`vllm.passthrough: false`) |"
        f" {totals['typical'] - passthrough['typical']:,} | {totals['caps'] - passthrough['caps']:,} |"
    )
    print(f"| per 1,000 nodes | {totals['typical'] * 1000:,} | {totals['caps'] * 1000:,} |")
    print(
        "| per 1,000 nodes, without the passthrough |"
        f" {(totals['typical'] - passthrough['typical']) * 1000:,} |"
        f" {(totals['caps'] - passthrough['caps']) * 1000:,} |"
    )

    print(
        "\n## Recording rules: series per node"
        " (a real Prometheus evaluating alerts/guided-decoding.rules.yml)"
    )
    print("| rule | typical | caps |")
    print("| --- | ---: | ---: |")
    for name, per in rules.items():
        print(f"| `{name}` | {per['typical']} | {per['caps']} |")
    sums = {n: sum(per[n] for per in rules.values()) for n in running}
    engine_level = {
        n: sum(per[n] for name, per in rules.items() if "schema_hash:" not in name) for n in running
    }
    print(f"| **all** | **{sums['typical']:,}** | **{sums['caps']:,}** |")
    print(f"| without the schema-level rules | {engine_level['typical']:,} | {engine_level['caps']:,} |")
    print(f"| per 1,000 nodes | {sums['typical'] * 1000:,} | {sums['caps'] * 1000:,} |")
    print(
        "| per 1,000 nodes, without the schema-level rules |"
        f" {engine_level['typical'] * 1000:,} | {engine_level['caps'] * 1000:,} |"
    )

    print("\n## Daemon memory (MiB)")
    print("| run | VmRSS | peak (VmHWM) |")
    print("| --- | ---: | ---: |")
    for n in running:
        print(
            f"| {n} node, after {args.settle:.0f} s scraped every second |"
            f" {mem[n][0]:.1f} | {mem[n][1]:.1f} |"
        )
    print(
        "| flood: caps node, 8 engines x 100 calls/s, half new schemas, a snapshot every 0.1 s,"
        f" {args.flood:.0f} s |"
        f" {flood_mem[0]:.1f} | {flood_mem[1]:.1f} |"
    )
    third = rss_trace[len(rss_trace) // 3] if rss_trace else 0.0
    print(
        f"flood: RSS at 1/3 {third:.1f} MiB, max sampled {max(rss_trace, default=0):.1f} MiB,"
        f" end {flood_mem[0]:.1f} MiB;"
        f" peak series on one page {peak_series:,}; failed scrapes {failures}; {seen_line}"
    )
    worst = max(flood_mem[1], *(m[1] for m in mem.values()))
    print(f"worst peak {worst:.1f} MiB; 1.5x {worst * 1.5:.0f} MiB, 2x {worst * 2:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
