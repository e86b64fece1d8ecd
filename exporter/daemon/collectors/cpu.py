"""Per-core CPU seconds, as node_exporter's `node_cpu_seconds_total{cpu,mode}`.

Compile storms show as every core busy in `user`; the ratio is derived in PromQL, never here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import psutil
from prometheus_client.core import Metric
from prometheus_client.samples import Sample

from exporter.daemon.collectors import Shared, register
from exporter.daemon.collectors.base import Collector
from exporter.daemon.exposition import SharedLabels
from exporter.daemon.metrics_table import declared
from exporter.daemon.profiles import PROFILES

if TYPE_CHECKING:
    from exporter.daemon.options import Config

# psutil's Linux fields that node_exporter reports as modes; guest time is already inside user.
MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _per_core_times() -> Sequence[Any]:
    return psutil.cpu_times(percpu=True)


class CpuCollector(Collector):
    name = "cpu"

    def __init__(
        self,
        cpu_times: Callable[[], Sequence[Any]] = _per_core_times,
        timeout: float = 5.0,
        modes: Collection[str] | None = None,
    ) -> None:
        """`modes`: the modes exposed (the series profile's; None: every one in MODES)."""
        super().__init__(timeout)
        self._cpu_times = cpu_times
        self._modes = MODES if modes is None else tuple(m for m in MODES if m in modes)
        self._rows: list[tuple[SharedLabels, float]] = []
        self._labels: dict[tuple[int, str], SharedLabels] = {}  # one set per core and mode, made once

    async def refresh(self) -> None:
        rows = []
        labels = self._labels
        for index, times in enumerate(self._cpu_times()):
            for mode in self._modes:
                value = getattr(times, mode, None)
                if value is not None:
                    pair = labels.get((index, mode))
                    if pair is None:
                        pair = labels[index, mode] = SharedLabels(cpu=str(index), mode=mode)
                    rows.append((pair, float(value)))
        self._rows = rows

    def collect(self) -> Iterable[Metric]:
        family = declared("cpu_seconds").counter()
        name, append = family.name + "_total", family.samples.append
        for pair, value in self._rows:
            append(Sample(name, pair, value))
        yield family


@register("cpu")
def build(config: Config, shared: Shared) -> CpuCollector:
    modes = PROFILES[config.metrics_profile].cpu_modes  # the series profile's
    return CpuCollector(timeout=config.collector_timeout, modes=modes)
