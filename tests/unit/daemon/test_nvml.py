"""NVML: the real no-GPU path on this machine, and values mapped through a pynvml stand-in."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from exporter.daemon.collectors.nvml import NvmlCollector
from tools.harness import fake_pynvml


def _gpu_samples(registry: CollectorRegistry) -> list[object]:
    return [s for f in registry.collect() if f.name.startswith("guided_decoding_gpu_") for s in f.samples]


def _registry(source: NvmlCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(source)
    return registry


async def test_real_pynvml_without_gpu_fails_cleanly_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    import pynvml

    source = NvmlCollector(nvml=pynvml, retry_interval=3600)
    registry = _registry(source)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            await source.timed_refresh()
    assert source.success is False
    assert "NVML unavailable" in (source.last_error or "")
    assert len([r for r in caplog.records if "nvml" in r.getMessage()]) == 1
    assert _gpu_samples(registry) == []


async def test_values_in_base_units() -> None:
    fake_pynvml.reset([fake_pynvml.Gpu(), fake_pynvml.Gpu(uuid="GPU-1", util=0, unsupported={"pcie"})])
    source = NvmlCollector(nvml=fake_pynvml)  # type: ignore[arg-type]
    registry = _registry(source)
    await source.timed_refresh()
    assert source.success, source.last_error
    gpu0 = {"gpu": "0", "uuid": "GPU-00000000-0000-0000-0000-000000000000", "name": "NVIDIA H100 80GB HBM3"}
    value = registry.get_sample_value
    assert value("guided_decoding_gpu_utilization_ratio", gpu0) == pytest.approx(0.57)
    assert value("guided_decoding_gpu_memory_used_bytes", gpu0) == 40 * 2**30
    assert value("guided_decoding_gpu_memory_total_bytes", gpu0) == 80 * 2**30
    assert value("guided_decoding_gpu_power_watts", gpu0) == pytest.approx(312.5)
    assert value("guided_decoding_gpu_sm_clock_hertz", gpu0) == pytest.approx(1.98e9)
    assert value("guided_decoding_gpu_pcie_rx_bytes_per_second", gpu0) == 2048 * 1024
    assert value("guided_decoding_gpu_pcie_tx_bytes_per_second", gpu0) == 512 * 1024
    gpu1 = {**gpu0, "gpu": "1", "uuid": "GPU-1"}
    assert value("guided_decoding_gpu_utilization_ratio", gpu1) == 0.0
    assert value("guided_decoding_gpu_pcie_rx_bytes_per_second", gpu1) is None  # NotSupported: left out


async def test_init_retried_only_after_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    state = fake_pynvml.reset([fake_pynvml.Gpu()], init_error=fake_pynvml.NVMLError_DriverNotLoaded)
    now = [1000.0]
    monkeypatch.setattr("exporter.daemon.collectors.nvml.time.monotonic", lambda: now[0])
    source = NvmlCollector(nvml=fake_pynvml, retry_interval=60)  # type: ignore[arg-type]
    for _ in range(5):
        await source.timed_refresh()
    assert state.init_calls == 1 and not source.success
    assert "Driver Not Loaded" in (source.last_error or "")
    state.init_error = None  # the driver comes up
    now[0] += 61
    await source.timed_refresh()
    assert state.init_calls == 2 and source.success


async def test_gpu_lost_mid_run_reinitialises(caplog: pytest.LogCaptureFixture) -> None:
    state = fake_pynvml.reset([fake_pynvml.Gpu()])
    source = NvmlCollector(nvml=fake_pynvml)  # type: ignore[arg-type]
    registry = _registry(source)
    await source.timed_refresh()
    assert source.success and len(_gpu_samples(registry)) == 7
    state.read_error = fake_pynvml.NVMLError_GpuIsLost
    with caplog.at_level(logging.WARNING):
        await source.timed_refresh()
    assert not source.success and "GPU is lost" in (source.last_error or "")
    assert _gpu_samples(registry) == []  # no stale values
    assert any("nvml failed" in r.getMessage() for r in caplog.records)
    state.read_error = None
    await source.timed_refresh()
    assert source.success and state.init_calls == 2


async def test_a_wedged_nvml_call_times_out_and_is_not_stacked(caplog: pytest.LogCaptureFixture) -> None:
    """NVML calls cannot be cancelled: a wedged one ends the scrape at the timeout, later scrapes say
    it is still running instead of piling up threads, and the first read after it returns works."""
    import threading

    state = fake_pynvml.reset([fake_pynvml.Gpu()])
    source = NvmlCollector(nvml=fake_pynvml, timeout=0.3)  # type: ignore[arg-type]
    await source.timed_refresh()
    assert source.success
    state.hang = threading.Event()
    with caplog.at_level(logging.WARNING):
        await source.timed_refresh()
        assert not source.success and "timed out after 0.3s" in (source.last_error or "")
        threads = threading.active_count()
        for _ in range(5):
            await source.timed_refresh()
            assert "previous collection is still running" in (source.last_error or "")
        assert threading.active_count() == threads
    assert any("collector nvml failed" in r.getMessage() for r in caplog.records)
    state.hang.set()
    state.hang = None
    await asyncio.sleep(0.1)
    await source.timed_refresh()
    assert source.success
