"""GPU gauges from NVML (nvidia-ml-py's `pynvml`), one series per GPU.

NVML calls block (PCIe throughput samples for ~20 ms), so they run in a worker thread. Without a GPU or
driver, initialisation fails: the collector reports success 0, logs once, and retries initialisation
no more often than `retry_interval`, so a node whose driver loads late is picked up without a restart.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric

from exporter.daemon.collectors import Shared, register
from exporter.daemon.collectors.base import Collector, CollectorError
from exporter.daemon.metrics_table import FAMILIES

if TYPE_CHECKING:
    from exporter.daemon.options import Config

# family (exporter.daemon.metrics_table's nvml families) -> reader(nvml, handle) -> value in base units
READERS: dict[str, Any] = {
    "gpu_utilization_ratio": lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu / 100.0,
    "gpu_memory_used_bytes": lambda nv, h: float(nv.nvmlDeviceGetMemoryInfo(h).used),
    "gpu_memory_total_bytes": lambda nv, h: float(nv.nvmlDeviceGetMemoryInfo(h).total),
    "gpu_power_watts": lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
    "gpu_sm_clock_hertz": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM) * 1e6,
    "gpu_pcie_rx_bytes_per_second": (
        lambda nv, h: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES) * 1024.0
    ),
    "gpu_pcie_tx_bytes_per_second": (
        lambda nv, h: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES) * 1024.0
    ),
}
# Errors that mean the library or the GPU went away: re-initialise rather than keep failing.
_FATAL = (
    "NVMLError_Uninitialized",
    "NVMLError_GpuIsLost",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_Unknown",
)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class NvmlCollector(Collector):
    name = "nvml"

    def __init__(
        self, nvml: ModuleType | None = None, retry_interval: float = 60.0, timeout: float = 5.0
    ) -> None:
        super().__init__(timeout)
        self._nvml = nvml
        self.retry_interval = retry_interval
        self._initialised = False
        self._next_init = 0.0
        self._init_error = ""
        self._rows: list[tuple[str, list[str], float]] = []

    def _module(self) -> ModuleType:
        if self._nvml is None:
            import pynvml

            self._nvml = pynvml
        return self._nvml

    def _init(self) -> None:
        self._module().nvmlInit()

    def _read(self) -> list[tuple[str, list[str], float]]:
        nv = self._module()
        rows: list[tuple[str, list[str], float]] = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            labels = [str(index), _text(nv.nvmlDeviceGetUUID(handle)), _text(nv.nvmlDeviceGetName(handle))]
            for metric, reader in READERS.items():
                try:
                    rows.append((metric, labels, float(reader(nv, handle))))
                except nv.NVMLError as err:
                    if type(err).__name__ in _FATAL:
                        raise
                    # NotSupported / NoPermission on this GPU model: leave that gauge out.
        return rows

    async def refresh(self) -> None:
        if not self._initialised:
            now = time.monotonic()
            if now < self._next_init:
                raise CollectorError(self._init_error)
            try:
                await self.run_blocking(self._init)
            except Exception as err:
                self._next_init = now + self.retry_interval
                self._init_error = (
                    f"NVML unavailable ({_text(err) or type(err).__name__}); no GPU metrics. Retrying"
                    f" initialisation every {self.retry_interval:g}s"
                )
                self._rows = []
                raise CollectorError(self._init_error) from None
            self._initialised = True
        try:
            self._rows = await self.run_blocking(self._read)
        except self._module().NVMLError as err:
            self._rows = []
            if type(err).__name__ in _FATAL:
                self._initialised = False
                self._next_init = 0.0
                with contextlib.suppress(Exception):
                    self._module().nvmlShutdown()
            raise CollectorError(f"NVML read failed: {_text(err) or type(err).__name__}") from None

    async def close(self) -> None:
        if self._initialised:
            self._initialised = False
            with contextlib.suppress(Exception):
                await self.run_blocking(self._module().nvmlShutdown)

    def collect(self) -> Iterable[Metric]:
        families = {spec.name: spec.gauge() for spec in FAMILIES[self.name]}
        for metric, labels, value in self._rows:
            families[metric].add_metric(labels, value)
        yield from families.values()


@register("nvml")
def build(config: Config, shared: Shared) -> NvmlCollector:
    return NvmlCollector(retry_interval=config.nvml_retry_interval, timeout=config.collector_timeout)
