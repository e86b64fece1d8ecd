"""The cpu collector on this machine's real /proc/stat through psutil."""

from __future__ import annotations

from collections import namedtuple

import psutil
from prometheus_client import CollectorRegistry

from exporter.daemon.collectors.cpu import MODES, CpuCollector


async def test_one_counter_per_core_and_mode() -> None:
    source = CpuCollector()
    registry = CollectorRegistry()
    registry.register(source)
    await source.timed_refresh()
    assert source.success
    cores = psutil.cpu_count(logical=True)
    for cpu in range(cores):
        for mode in MODES:
            assert (
                registry.get_sample_value(
                    "guided_decoding_cpu_seconds_total", {"cpu": str(cpu), "mode": mode}
                )
                is not None
            )
    idle_before = registry.get_sample_value("guided_decoding_cpu_seconds_total", {"cpu": "0", "mode": "idle"})
    sum(i * i for i in range(200_000))
    await source.timed_refresh()
    idle_after = registry.get_sample_value("guided_decoding_cpu_seconds_total", {"cpu": "0", "mode": "idle"})
    assert idle_after >= idle_before  # a counter never goes back


async def test_many_cores_at_the_psutil_boundary() -> None:
    Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")
    source = CpuCollector(cpu_times=lambda: [Times(*(float(i),) * 10) for i in range(128)])
    registry = CollectorRegistry()
    registry.register(source)
    await source.timed_refresh()
    assert (
        registry.get_sample_value("guided_decoding_cpu_seconds_total", {"cpu": "127", "mode": "steal"})
        == 127.0
    )
    assert (
        registry.get_sample_value("guided_decoding_cpu_seconds_total", {"cpu": "0", "mode": "guest"}) is None
    )


async def test_failure_is_reported_not_raised() -> None:
    def broken() -> list[object]:
        raise PermissionError("/proc/stat")

    source = CpuCollector(cpu_times=broken)
    await source.timed_refresh()
    assert not source.success and "PermissionError" in (source.last_error or "")
