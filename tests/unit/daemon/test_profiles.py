"""The series profiles: `minimal` keeps every series the shipped rules and dashboard read (checked on
their queries here; the live dashboard and alert tests run a minimal daemon), and drops the rest of
the three large sources."""

from __future__ import annotations

import json
import re
from collections import namedtuple

import yaml

from exporter.daemon.collectors.cpu import MODES, CpuCollector
from exporter.daemon.collectors.engines import vllm_settings
from exporter.daemon.collectors.probe import probe_settings
from exporter.daemon.config import Config
from exporter.daemon.profiles import FULL, MINIMAL, PROFILES
from exporter.daemon.receiver.metric_families import histogram
from exporter.daemon.server import build_collectors
from tools.harness import ROOT

ENGINE_FAMILY = re.compile(r"\b((?:vllm|sglang):[a-z_:]+|trtllm_[a-z_]+)")


def every_query() -> list[str]:
    """Each PromQL the project ships: rule and alert expressions, the queries inside alert descriptions,
    every dashboard target and variable."""
    rules = yaml.safe_load((ROOT / "alerts" / "guided-decoding.rules.yml").read_text())
    out = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            out.append(rule["expr"])
            out.append(rule.get("annotations", {}).get("description", ""))
    out.append((ROOT / "dashboards" / "guided-decoding.json").read_text())  # targets, variables, links
    return out


def selectors(text: str, metric: str) -> list[str]:
    """The label matchers of each use of `metric` (empty where it is used bare)."""
    found = []
    for m in re.finditer(rf"\b{re.escape(metric)}\b(\{{[^}}]*\}})?", text):
        found.append(m.group(1) or "")
    return found


def unescaped(text: str) -> str:
    return text.replace('\\"', '"')


def test_minimal_keeps_what_every_shipped_query_reads() -> None:
    texts = [unescaped(t) for t in every_query()]
    assert MINIMAL.cpu_modes is not None and MINIMAL.schema_les is not None
    assert MINIMAL.passthrough is not None
    cpu = [s for t in texts for s in selectors(t, "guided_decoding_cpu_seconds_total")]
    assert cpu, "the CPU panel and the starvation rule read per-core seconds"
    for matchers in cpu:
        modes = re.findall(r'mode="([^"]+)"', matchers)
        assert modes and set(modes) <= MINIMAL.cpu_modes, matchers
    buckets = [s for t in texts for s in selectors(t, "guided_decoding_schema_compile_seconds_bucket")]
    assert buckets, "the page's recording rule reads per-schema buckets"
    for matchers in buckets:
        les = re.findall(r'le="([^"]+)"', matchers)
        assert les and set(les) <= MINIMAL.schema_les, matchers
    read = {n for t in texts for n in ENGINE_FAMILY.findall(t)}
    assert read, "the dashboard charts some of the engines' own families"
    # a family by its declared name (a counter's ends in _total), its samples by theirs
    family = {n if n in MINIMAL.passthrough else re.sub(r"_(bucket|count|sum)$", "", n) for n in read}
    assert family <= MINIMAL.passthrough, family - MINIMAL.passthrough
    assert MINIMAL.passthrough <= family, MINIMAL.passthrough - family  # nothing kept that nothing reads


def test_the_profile_reaches_each_source() -> None:
    for name, profile in PROFILES.items():
        config = Config(metrics_profile=name, collector_nvml=False)
        assert vllm_settings(config).families == profile.passthrough
        assert probe_settings(config).schema_les == profile.schema_les
        (cpu,) = [c for c in build_collectors(config) if isinstance(c, CpuCollector)]
        assert set(cpu._modes) == (set(MODES) if profile.cpu_modes is None else profile.cpu_modes)
    assert Config().metrics_profile == FULL.name


Times = namedtuple("Times", MODES)


async def test_cpu_modes_follow_the_profile() -> None:
    cores = [Times(*[float(i + j) for j in range(len(MODES))]) for i in range(4)]
    for modes, want in ((None, 4 * len(MODES)), (MINIMAL.cpu_modes, 4)):
        collector = CpuCollector(lambda: cores, modes=modes)
        await collector.refresh()
        (family,) = collector.collect()
        assert len(family.samples) == want
        if modes is not None:
            assert {s.labels["mode"] for s in family.samples} == {"idle"}
            assert [s.value for s in family.samples] == [c.idle for c in cores]


def test_a_minimal_schema_histogram_keeps_its_cumulative_buckets() -> None:
    from prometheus_client.core import HistogramMetricFamily

    bounds = (0.001, 0.005, 0.025)
    full = HistogramMetricFamily("h", "", labels=["schema_hash"])
    minimal = HistogramMetricFamily("h", "", labels=["schema_hash"])
    histogram(full, {"schema_hash": "a"}, bounds, [3, 2, 4, 1], 0.5)
    histogram(minimal, {"schema_hash": "a"}, bounds, [3, 2, 4, 1], 0.5, MINIMAL.schema_les)
    by_le = {s.labels.get("le"): s.value for s in full.samples if s.name == "h_bucket"}
    kept = [(s.name, s.labels.get("le"), s.value) for s in minimal.samples]
    assert kept == [
        ("h_bucket", "0.005", 5),
        ("h_bucket", "+Inf", 10),
        ("h_count", None, 10),
        ("h_sum", None, 0.5),
    ]
    assert by_le["0.005"] == 5 and by_le["+Inf"] == 10 and len(by_le) == 4
    json.dumps(kept)  # plain values
