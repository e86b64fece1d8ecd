"""What the engine is sized with, from the probe inside its (real) container cgroup: a real CFS quota
on an engine process that floods compiles is seen throttled, with its quota, the CPUs it counts and
its grammar cache's bytes against the limit, through the real daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.probe import cgroup
from tools.harness import ROOT
from tools.harness.scraping import sample, scrape, wait_for

V1_CPU = Path("/sys/fs/cgroup/cpu")
QUOTA_US, PERIOD_US = 50_000, 100_000  # half a core


@pytest.fixture
def half_a_core() -> Iterator[Path]:
    """A v1 cpu cgroup with a quota of half a core (this machine mounts the v1 cpu controller; the
    tests run as root)."""
    assert (V1_CPU / "cgroup.procs").exists() and os.access(V1_CPU, os.W_OK), (
        f"{V1_CPU} must be a writable cgroup v1 cpu hierarchy (run as root)"
    )
    group = V1_CPU / f"gdx-test-{os.getpid()}"
    group.mkdir()
    (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (group / "cpu.cfs_quota_us").write_text(str(QUOTA_US))
    try:
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():  # anything left goes back to the root
            (V1_CPU / "cgroup.procs").write_text(pid)
        group.rmdir()


def test_a_throttled_engine_reports_its_quota_throttling_and_cache(
    half_a_core: Path, tmp_path: Path, tokenizer_json: Path, daemon_factory: object
) -> None:
    sock = tmp_path / "probe.sock"
    daemon = daemon_factory("--probe.socket", str(sock), "--no-collector.nvml", "--no-collector.vllm")  # type: ignore[operator]
    script = ROOT / "tests" / "support" / "engines" / "tenant_enum.py"
    env = {**os.environ, "GDX_PROBE_SOCKET": str(sock), "GDX_POD_NAME": "vllm-throttled",
           "GDX_PROBE_INTERVAL": "0.2", "PYTHONPATH": str(ROOT)}  # fmt: skip
    # the engine starts inside the cgroup, as a container's processes do
    command = f'echo $$ > {half_a_core / "cgroup.procs"} && exec "$0" "$@"'
    engine = subprocess.Popen(
        ["sh", "-c", command, sys.executable, str(script), str(tokenizer_json), "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        assert engine.stdout is not None and engine.stdin is not None
        assert engine.stdout.readline().strip() == "ready", engine.stderr.read() if engine.stderr else ""
        assert str(engine.pid) in (half_a_core / "cgroup.procs").read_text().split()
        engine.stdin.write("flood\n")
        engine.stdin.flush()
        pod = {"pod": "vllm-throttled"}
        cache = {**pod, "backend": "xgrammar", "compiler": "0"}

        def flooding() -> bool:
            m = scrape(daemon.url)
            return sample(m, "guided_decoding_compile_requests_total", **pod) >= 5 and sample(
                m, "guided_decoding_grammar_cache_bytes", **cache) > 0  # fmt: skip

        wait_for(flooding, timeout=60)
        before = sample(scrape(daemon.url), "guided_decoding_engine_cpu_cfs_throttled_periods_total", **pod)
        # the compiles alone, one core's worth of work against half a core's quota, are throttled
        wait_for(
            lambda: (
                sample(scrape(daemon.url), "guided_decoding_engine_cpu_cfs_throttled_periods_total", **pod)
                >= before + 5
            ),
            timeout=60,
        )
        m = scrape(daemon.url)
        periods = sample(m, "guided_decoding_engine_cpu_cfs_periods_total", **pod)
        throttled = sample(m, "guided_decoding_engine_cpu_cfs_throttled_periods_total", **pod)
        assert 0 < throttled <= periods
        assert sample(m, "guided_decoding_engine_cpu_cfs_throttled_seconds_total", **pod) > 0
        assert sample(m, "guided_decoding_engine_cpu_quota_cores", **pod) == QUOTA_US / PERIOD_US
        assert sample(m, "guided_decoding_engine_cpus", **pod) == os.cpu_count()  # the node's, not the quota
        # the compiler's cache grows with the flood of new schemas, under its 512 MiB limit
        assert sample(m, "guided_decoding_grammar_cache_limit_bytes", **cache) == 512 << 20
        first = sample(m, "guided_decoding_grammar_cache_bytes", **cache)
        assert first > 0
        wait_for(
            lambda: sample(scrape(daemon.url), "guided_decoding_grammar_cache_bytes", **cache) > first, 30
        )
    finally:
        engine.kill()
        engine.wait(10)
    # this process, outside the cgroup, reads the root's counters: no quota there
    where = cgroup.locate()
    assert where is not None and where.version == 1
    read = cgroup.read(where)
    assert read is not None and read.quota_cores == 0.0
