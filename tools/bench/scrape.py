"""`make bench`: scrape cost of the daemon with N vLLM targets, beside prometheus-client's own renderer.

Everything runs on this machine in one run, so the figures are ratios measured side by side:
- the daemon's `/metrics` (text and OpenMetrics) over loopback with N targets serving a real vLLM page
  (targets in a separate process, the daemon in another, as in production);
- prometheus-client's `generate_latest` of the same families (render only, in-process);
- prometheus-client's parser + `generate_latest`: what a passthrough built on the library would cost;
- the daemon's resident memory after the run.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tools.harness import VLLM_PAGE as DEFAULT_PAGE


def _serve_targets(page: Path, count: int) -> None:
    """Internal: serve `page` on `count` loopback ports (aiohttp, like vLLM's asyncio server), print the
    ports, and run until stdin closes."""
    import asyncio

    from aiohttp import web

    body = page.read_bytes()

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def run() -> None:
        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        for _ in range(count):
            await web.TCPSite(runner, "127.0.0.1", 0).start()
        ports = [addr[1] for addr in runner.addresses]
        print(" ".join(map(str, ports)), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(run())


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _time(func: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        func()
        out.append(time.perf_counter() - started)
    return out


def _library_costs(page_text: str, targets: int, runs: int) -> tuple[float, float]:
    """Median ms of prometheus-client rendering the same families, and of parsing + rendering them."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    def parse_all() -> list[Metric]:
        fams: list[Metric] = []
        for i in range(targets):
            for fam in text_string_to_metric_families(page_text):
                if fam.name.startswith("vllm:"):
                    fam.samples = [s._replace(labels={**s.labels, "pod": f"vllm-{i}"}) for s in fam.samples]
                    fams.append(fam)
        return fams

    class Families:
        def __init__(self) -> None:
            self.fams = parse_all()

        def collect(self) -> list[Metric]:
            return self.fams

    registry = CollectorRegistry()
    registry.register(Families())
    render = _time(lambda: generate_latest(registry), runs)
    both = _time(lambda: (parse_all(), generate_latest(registry)), max(5, runs // 5))
    return _median_ms(render), _median_ms(both)


def _direct_fetch_ms(urls: list[str], runs: int) -> float:
    """Median ms to fetch every target page concurrently, with no exporter in between: the floor."""
    import asyncio

    import aiohttp

    async def run() -> list[float]:
        async with aiohttp.ClientSession() as session:

            async def fetch(url: str) -> bytes:
                async with session.get(url) as resp:
                    return await resp.read()

            times = []
            for _ in range(runs):
                started = time.perf_counter()
                await asyncio.gather(*(fetch(u) for u in urls))
                times.append(time.perf_counter() - started)
            return times

    return _median_ms(asyncio.run(run()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.scrape", description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=8, help="vLLM targets to scrape (default 8)")
    parser.add_argument("--scrapes", type=int, default=60, help="scrapes per format (default 60)")
    parser.add_argument("--page", type=Path, default=DEFAULT_PAGE, help="the /metrics page the targets serve")
    parser.add_argument("--_serve-targets", dest="serve_targets", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_targets:
        _serve_targets(args.page, args.targets)
        return 0
    if not args.page.is_file():
        parser.error(f"page not found: {args.page}")
    import psutil

    targets = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tools.bench.scrape",
            "--_serve-targets",
            "--targets",
            str(args.targets),
            "--page",
            str(args.page),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert targets.stdout is not None
    ports = targets.stdout.readline().split()
    flags = [f for p in ports for f in ("--vllm.target", f"http://127.0.0.1:{p}/metrics")]
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "serve",
            "--web.listen-address",
            "127.0.0.1:0",
            "--no-collector.nvml",
            "--no-collector.probe",
            *flags,
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert daemon.stderr is not None
        url = ""
        for line in daemon.stderr:
            match = re.search(r"listening on (http://\S+?)/ ", line)
            if match:
                url = match.group(1) + "/metrics"
                break
        threading.Thread(target=daemon.stderr.read, daemon=True).start()

        def scrape(accept: str) -> int:
            req = urllib.request.Request(url, headers={"Accept": accept})
            with urllib.request.urlopen(req, timeout=30) as resp:
                return len(resp.read())

        floor = _direct_fetch_ms([f"http://127.0.0.1:{p}/metrics" for p in ports], args.scrapes)
        size = scrape("text/plain")
        for _ in range(5):
            scrape("text/plain")
        proc = psutil.Process(daemon.pid)
        cpu0 = proc.cpu_times()
        text = _time(lambda: scrape("text/plain"), args.scrapes)
        om = _time(lambda: scrape("application/openmetrics-text; version=1.0.0"), args.scrapes)
        cpu1 = proc.cpu_times()
        cpu_per_scrape = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / (2 * args.scrapes)
        rss = proc.memory_info().rss
    finally:
        daemon.terminate()
        daemon.wait(10)
        targets.terminate()
        targets.wait(10)
    page_text = args.page.read_text(encoding="utf-8")
    lib_render, lib_both = _library_costs(page_text, args.targets, args.scrapes)
    daemon_text = _median_ms(text)
    from tools.bench.machine import header

    print(header("tools.bench.scrape", argv))
    print(f"# scrape benchmark: {args.targets} vLLM targets, {args.scrapes} scrapes per format")
    print(f"page size: {size} bytes")
    print("| measurement | median ms |")
    print("| --- | --- |")
    print(
        f"| daemon /metrics, text (fetch {args.targets} targets, parse, render; HTTP) | {daemon_text:.2f} |"
    )
    print(f"| daemon /metrics, OpenMetrics | {_median_ms(om):.2f} |")
    print(f"| the {args.targets} target pages fetched directly and concurrently (the floor) | {floor:.2f} |")
    print(f"| daemon CPU per scrape | {cpu_per_scrape * 1000:.2f} |")
    print(f"| prometheus-client generate_latest, same families (render only) | {lib_render:.2f} |")
    print(f"| prometheus-client parse + generate_latest (a library-built passthrough) | {lib_both:.2f} |")
    print(f"ratio daemon scrape / library render only: {daemon_text / lib_render:.2f}")
    print(f"ratio daemon scrape / library parse+render: {daemon_text / lib_both:.2f}")
    print(f"daemon RSS after the run: {rss / 2**20:.1f} MiB (target < 80 MiB)")
    print(f"scrape target < 50 ms: {'met' if daemon_text < 50 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
