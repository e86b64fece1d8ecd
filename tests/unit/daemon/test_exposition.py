"""The daemon's renderer writes exactly what prometheus-client's `generate_latest` writes, in both
formats: on the daemon's real families at the caps, and on generated families with hostile label
values, help texts and values (and the cases it hands to the library)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client import exposition as text_exposition
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.openmetrics import exposition as om_exposition
from prometheus_client.samples import Exemplar

from exporter.daemon import exposition, logs
from exporter.daemon.collectors.base import SelfCollector
from exporter.daemon.collectors.cpu import CpuCollector
from exporter.daemon.collectors.nvml import NvmlCollector
from exporter.daemon.receiver.metric_families import store_families
from exporter.daemon.receiver.store import ProbeStore
from tests.support.probelink import Link
from tools.harness import fake_pynvml


class Frozen:
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


def library(metrics: list[Metric], openmetrics: bool) -> bytes:
    if openmetrics:
        return om_exposition.generate_latest(Frozen(metrics))  # type: ignore[no-untyped-call,no-any-return]
    return text_exposition.generate_latest(Frozen(metrics))  # type: ignore[arg-type]


def daemon_families() -> list[Metric]:
    """The daemon's own families at the series caps (docs/metrics.md), frozen (decaying values read once)."""
    store = ProbeStore(max_schemas=50)
    for e in range(8):
        link = Link(store, pod=f"vllm-{e}")
        for s in range(60):
            link.compile(json.dumps({"title": f"s{s}", "type": "object"}), 0.001 * (s + 1), hit=s % 3 == 0)
        link.ship(fresh=True)
    store.analysis.run(math.inf)

    class Probe:
        def collect(self) -> Any:
            yield from store_families(store.view())

    fake_pynvml.reset([fake_pynvml.Gpu(uuid=f"GPU-{i}") for i in range(8)])
    nvml = NvmlCollector(nvml=fake_pynvml)  # type: ignore[arg-type]
    cpu = CpuCollector(cpu_times=lambda: [fake_times(i) for i in range(128)])
    for source in (nvml, cpu):
        asyncio.run(source.timed_refresh())
    registry = CollectorRegistry(auto_describe=False)
    for collector in (Probe(), cpu, nvml, SelfCollector([cpu, nvml]), logs.DroppedCollector()):
        registry.register(collector)  # type: ignore[arg-type]
    ProcessCollector(namespace="", registry=registry)
    return list(registry.collect())


def fake_times(i: int) -> Any:
    from types import SimpleNamespace

    modes = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return SimpleNamespace(**{m: 1000.0 + i * 1.25 + n for n, m in enumerate(modes)})


def test_daemon_families_render_exactly_as_the_library() -> None:
    metrics = daemon_families()
    assert sum(len(m.samples) for m in metrics) > 5000
    for openmetrics in (False, True):
        assert exposition.render(metrics, openmetrics) == library(metrics, openmetrics)


label_value = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ['a"b', "a\\b", "line\nbreak", "\\n", '"', ""]
)
label_name = st.sampled_from(["pod", "engine", "le_x", "schema_hash", "_x", "a:b", "a-b", "1x"])
number = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(-(2**63), 2**63)
    | st.sampled_from([0, 999_999, 1_000_000, -999_999, -1_000_000, 1_234_567, 2**53 + 1])  # _value edges
)
help_text = st.text(max_size=30) | st.sampled_from(["back\\slash", "new\nline", 'quo"te'])


@st.composite
def family(draw: st.DrawFn) -> Metric:
    kind = draw(st.sampled_from(
        ["counter", "gauge", "histogram", "summary", "info", "unit", "created", "timestamp", "exemplar"]
    ))  # fmt: skip
    names = draw(st.lists(label_name, max_size=3, unique=True))
    name = f"fam_{kind}"
    doc = draw(help_text)
    rows = draw(st.lists(st.tuples(st.lists(label_value, min_size=len(names), max_size=len(names)), number),
                         max_size=4))  # fmt: skip
    seen: set[tuple[str, ...]] = set()
    rows = [(vals, v) for vals, v in rows if tuple(vals) not in seen and not seen.add(tuple(vals))]  # type: ignore[func-returns-value]
    metric: Metric
    if kind in ("counter", "created"):
        metric = CounterMetricFamily(name, doc, labels=names)
        for vals, v in rows:
            metric.add_metric(vals, abs(float(v)) if not math.isnan(float(v)) else 0.0,
                              created=1700000000.5 if kind == "created" else None)  # fmt: skip
    elif kind in ("timestamp", "exemplar"):  # samples this module leaves to the library
        metric = Metric(name, doc, "counter" if kind == "exemplar" else "gauge")
        for vals, v in rows:
            value = abs(float(v)) if not math.isnan(float(v)) else 0.0
            if kind == "exemplar":
                metric.add_sample(name + "_total", dict(zip(names, vals, strict=True)), value,
                                  exemplar=Exemplar({"trace_id": "abc"}, 1.0))  # fmt: skip
            else:
                metric.add_sample(name, dict(zip(names, vals, strict=True)), value, timestamp=1700000000.5)
    elif kind in ("gauge", "unit"):
        metric = GaugeMetricFamily(name + ("_seconds" if kind == "unit" else ""), doc, labels=names,
                                   unit="seconds" if kind == "unit" else "")  # fmt: skip
        for vals, v in rows:
            metric.add_metric(vals, v)
    elif kind == "histogram":
        metric = HistogramMetricFamily(name, doc, labels=[n for n in names if n != "le"])
        for vals, v in rows:
            total = float(v) if math.isfinite(float(v)) else 0.0
            metric.add_metric(vals, [("0.5", 1.0), ("+Inf", 3.0)], total)
    elif kind == "summary":
        metric = SummaryMetricFamily(name, doc, labels=names)
        for vals, v in rows:
            metric.add_metric(vals, count_value=3, sum_value=float(v) if math.isfinite(float(v)) else 0.0)
    else:
        metric = InfoMetricFamily(name, doc, labels=names[:1])
        for vals, _ in rows:
            metric.add_metric(vals[:1], {"version": draw(label_value)})
    return metric


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(family(), max_size=5, unique_by=lambda m: m.name))
def test_generated_families_render_exactly_as_the_library(metrics: list[Metric]) -> None:
    for openmetrics in (False, True):
        try:
            want = library(metrics, openmetrics)
        except Exception as err:  # the library refuses it (e.g. a label name it cannot write)
            try:
                exposition.render(metrics, openmetrics)
            except Exception as ours:
                assert type(ours) is type(err)
                continue
            raise AssertionError(f"the library raised {err!r}, the renderer did not") from None
        assert exposition.render(metrics, openmetrics) == want


def test_histogram_label_sets_are_made_once_per_series_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A histogram's label sets are the same objects at every scrape (their text kept on them), the
    page the library would write each time, and the sets kept are bounded under series churn."""
    from exporter.daemon.receiver import metric_families

    def page(schema: str) -> tuple[HistogramMetricFamily, bytes]:
        family = HistogramMetricFamily("h", "help", labels=["schema_hash", "le"])
        metric_families.histogram(family, {"schema_hash": schema}, (0.5, 1.0), [1, 2, 3], 4.5)
        return family, exposition.render([family])

    first, text = page("a")
    again, text_again = page("a")
    assert text == text_again == library([first], False)
    assert all(x.labels is y.labels for x, y in zip(first.samples, again.samples, strict=True))
    assert [s.labels["le"] for s in first.samples[:3]] == ["0.5", "1.0", "+Inf"]
    monkeypatch.setattr(metric_families, "MAX_HISTOGRAM_LABELS", 10)
    for n in range(50):
        page(str(n))
        assert len(metric_families._HISTOGRAM_LABELS) <= 10
    with pytest.raises(ValueError, match="buckets"):
        metric_families.histogram(HistogramMetricFamily("h", "h"), {}, (0.5,), [1, 2, 3], 1.0)


@pytest.mark.parametrize("openmetrics", [False, True])
def test_histograms_kept_as_heads_and_values_render_as_their_samples(openmetrics: bool) -> None:
    """A Histograms family writes each line as its series' head and value, without Samples: the page the
    library writes from the same family's samples, with hostile label values, no labels, a series
    profile's buckets, big and fractional values; a label name the renderer does not write falls back."""
    from exporter.daemon.receiver import metric_families

    def build(labels: list[dict[str, str]], keep: frozenset[str] | None) -> exposition.Histograms:
        family = exposition.Histograms("gdx_h_seconds", 'help "quoted"\\ and\nnewline')
        for n, one in enumerate(labels):
            counts = [n, 2**40, 0, 7]
            metric_families.histogram(family, one, (0.001, 0.5, 30.0), counts, 1e21 + n / 3, keep)
        return family

    hostile = {"schema_hash": 'a"b\\c\nd', "pod": "p\u00e9"}
    cases: list[tuple[list[dict[str, str]], frozenset[str] | None]] = [
        ([hostile, {"schema_hash": "x"}], None),
        ([{}], None),
        ([{"schema_hash": "y"}], frozenset({"0.5", "+Inf"})),
        ([{"bad-name": "z"}], None),  # not a legal label name: the library's error, from either path
    ]
    for labels, keep in cases:
        family = build(labels, keep)
        try:
            want = library([family], openmetrics)
        except ValueError as err:
            with pytest.raises(type(err)):
                exposition.render([family], openmetrics)
            continue
        assert exposition.render([family], openmetrics) == want
        assert len(family.samples) == len(labels) * (len(keep or "1234") + 2)
    again = build([hostile], None)
    assert again.series[0][0] is build([hostile], None).series[0][0]  # the heads are made once
    with pytest.raises(TypeError):
        again.samples = list(again.samples)
    with pytest.raises(TypeError):  # what these would append to is made anew at each read: refused, not lost
        again.add_metric(["x"], [("+Inf", 1)], 1.0)
    with pytest.raises(TypeError):
        again.add_sample("gdx_h_seconds_count", {}, 1)
