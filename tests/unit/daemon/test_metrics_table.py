"""Every family the daemon declares is declared once (exporter.daemon.metrics_table) and each collector
describes itself from that table: prometheus-client's registry reads the names as it takes a collector
and refuses, at start-up, one that two collectors declare. What a collector describes is what it
yields, name for name and in order."""

from __future__ import annotations

import asyncio
import json
import math
import re
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from exporter.daemon import logs, metrics_table
from exporter.daemon.collectors.base import SelfCollector
from exporter.daemon.collectors.cpu import MODES, CpuCollector
from exporter.daemon.collectors.engines import TargetResult, VllmCollector, VllmSettings
from exporter.daemon.collectors.nvml import READERS, NvmlCollector
from exporter.daemon.collectors.probe import ProbeCollector, ProbeSettings
from exporter.daemon.discovery import NodePod
from exporter.daemon.options import Config
from exporter.daemon.server import Exporter
from exporter.daemon.targets import Target
from tests.support.probelink import Link
from tools.harness import ROOT, fake_pynvml

DUPLICATE = "Duplicated timeseries in CollectorRegistry"


def shapes(metrics: Any) -> list[tuple[str, str]]:
    return [(m.name, m.type) for m in metrics]


def cores(n: int) -> list[Any]:
    return [SimpleNamespace(**{mode: 1.0 + i for mode in MODES}) for i in range(n)]


def test_every_family_is_declared_once() -> None:
    names = [spec.name for specs in metrics_table.FAMILIES.values() for spec in specs]
    assert len(names) > 70 and len(names) == len(set(names))
    assert all(spec.full_name.startswith("guided_decoding_") for spec in map(metrics_table.declared, names))


def test_the_contract_table_names_exactly_the_declared_families() -> None:
    """docs/reference/metrics.md's family tables (the first column) and the declarations name the same
    families, as exposed: a counter with `_total`, an info with `_info`."""
    page = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    rows = [r for r in page.splitlines() if r.startswith("| `guided_")]
    documented = {n for r in rows for n in re.findall(r"`(guided_decoding_[a-z_]+)`", r.split("|")[1])}
    suffix = {"counter": "_total", "info": "_info"}
    specs = [spec for specs in metrics_table.FAMILIES.values() for spec in specs]
    exposed = {spec.full_name + suffix.get(spec.type, "") for spec in specs}
    assert exposed == documented


def test_two_collectors_describing_one_name_are_refused() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CpuCollector(cpu_times=lambda: cores(2)))
    with pytest.raises(ValueError, match=DUPLICATE) as err:
        registry.register(CpuCollector(cpu_times=lambda: cores(2)))
    assert "guided_decoding_cpu_seconds_total" in str(err.value)

    class Clash:
        """Another collector that declares one of the probe's names."""

        def describe(self) -> list[Metric]:
            return [metrics_table.declared("compile_seconds").family()]

        def collect(self) -> list[Metric]:
            return []

    registry.register(ProbeCollector(ProbeSettings(socket="")))
    with pytest.raises(ValueError, match=DUPLICATE) as err:
        registry.register(Clash())
    assert "guided_decoding_compile_seconds_bucket" in str(err.value)


def test_a_daemon_whose_collectors_declare_one_name_twice_does_not_start() -> None:
    config = Config(probe_socket="")
    assert [s.name for s in Exporter(config).collectors] == ["cpu", "nvml", "vllm", "probe"]  # no clash
    with pytest.raises(ValueError, match=DUPLICATE):
        Exporter(config, [CpuCollector(), NvmlCollector(), CpuCollector()])


def populated_probe(pods: list[NodePod] | None) -> ProbeCollector:
    probe = ProbeCollector(ProbeSettings(socket=""), injected_pods=None if pods is None else lambda: pods)
    for e in range(2):
        link = Link(probe.store, pod=f"vllm-{e}", namespace="team-a")
        for s in range(6):
            link.compile(json.dumps({"title": f"s{s}", "type": "object"}), 0.01 * (s + 1), hit=s % 2 == 0)
        link.ship(fresh=True)
    probe.store.analysis.run(math.inf)
    return probe


@pytest.mark.parametrize("pods", [[NodePod("team-a", "vllm-9", True)], None])
def test_the_probe_collector_describes_exactly_what_it_yields(pods: list[NodePod] | None) -> None:
    probe = populated_probe(pods)
    yielded = list(probe.collect())
    assert sum(len(m.samples) for m in yielded) > 100  # a populated store
    assert shapes(probe.describe()) == shapes(yielded)
    assert ("guided_decoding_probe_absent" in [m.name for m in yielded]) == (pods is not None)
    assert not [m.name for m in yielded if "{" in m.documentation]  # every help template filled
    asyncio.run(probe.close())


def test_every_other_collector_describes_exactly_what_it_yields() -> None:
    fake_pynvml.reset([fake_pynvml.Gpu(uuid=f"GPU-{i}") for i in range(2)])
    nvml = NvmlCollector(nvml=fake_pynvml)
    cpu = CpuCollector(cpu_times=lambda: cores(4))
    for source in (cpu, nvml):
        asyncio.run(source.timed_refresh())
    vllm = VllmCollector(VllmSettings())
    vllm.results = [TargetResult(Target("http://10.0.0.1:8000/metrics", "vllm-0"), up=True)]
    sources: list[Any] = [cpu, nvml, vllm, SelfCollector([cpu, nvml, vllm]), logs.DroppedCollector()]
    for source in sources:
        yielded = list(source.collect())
        assert yielded and all(m.samples for m in yielded), type(source).__name__
        assert shapes(source.describe()) == shapes(yielded), type(source).__name__


def test_each_gpu_gauge_has_a_reader() -> None:
    assert list(READERS) == [spec.name for spec in metrics_table.FAMILIES["nvml"]]


def test_a_family_is_built_as_declared() -> None:
    spec = metrics_table.declared("probe_connections_refused")
    assert spec.type == "counter" and spec.labels == ("reason",) and "{max_connections}" in spec.help
    family = spec.counter(max_connections=3)
    assert (family.name, family.documentation[:40]) == (
        "guided_decoding_probe_connections_refused",
        "Probe connections refused: limit (3 already open)"[:40],
    )
    assert metrics_table.declared("schemas_tracked").gauge(7).samples[0].value == 7
    with pytest.raises(TypeError, match="declared a counter"):
        spec.gauge()
    with pytest.raises(ValueError, match="one value"):
        metrics_table.declared("compile_seconds").family(1.0)
