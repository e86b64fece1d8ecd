"""The probe receiver's metric families, built from typed views: the listener's counters, the
engines' cumulative totals, the schema-level series and the analysis of the exposed schemas.

Each family is built from its declaration (exporter.daemon.metrics_table: name, type, help, labels);
the order they are yielded in is the table's. Both are the metric contract (docs/metrics.md).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from itertools import accumulate

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

from exporter import wire
from exporter.daemon.collectors.base import pod_labels
from exporter.daemon.discovery import NodePod
from exporter.daemon.exposition import Heads, Histograms, SharedLabels
from exporter.daemon.metrics_table import declared
from exporter.daemon.receiver.admission import MAX_ENGINE_BACKENDS, REFUSALS, SANITISED
from exporter.daemon.receiver.analysis import AnalysisView, FamilyView
from exporter.daemon.receiver.listener import ListenerView
from exporter.daemon.receiver.messages import RESULTS
from exporter.daemon.receiver.rollup import RollupView
from exporter.daemon.receiver.store import EngineView, StoreView
from exporter.schema import variants

# An engine's series carry `namespace` first where its probe knows it (GDX_POD_NAMESPACE); older
# probes and engines outside Kubernetes give none, and their series keep the labels declared. Samples
# are added with their own label dicts (`counter`, `gauge`, `histogram`, `info`) so a family can hold
# both.
Labels = dict[str, str]


def engine_identity(namespace: str, pod: str, engine: str) -> Labels:
    """The labels naming one engine process: its pod's (namespace when known, pod), its engine index."""
    return {**pod_labels(namespace, pod), "engine": engine}


def counter(family: CounterMetricFamily, labels: Labels, value: float) -> None:
    family.samples.append(Sample(family.name + "_total", labels, value))


def gauge(family: GaugeMetricFamily, labels: Labels, value: float) -> None:
    family.samples.append(Sample(family.name, labels, value))


def info(family: InfoMetricFamily, labels: Labels, values: Labels) -> None:
    family.samples.append(Sample(family.name + "_info", {**labels, **values}, 1))


def histograms(name: str) -> Histograms:
    """A new, empty histogram family of declaration `name`, whose series `histogram` keeps as values
    beside their line heads (exposition.Histograms)."""
    spec = declared(name)
    if spec.type != "histogram":
        raise TypeError(f"{spec.full_name} is declared a {spec.type}, not a histogram")
    return Histograms(spec.full_name, spec.help, labels=list(spec.labels) or None)


def histogram(
    family: HistogramMetricFamily,
    labels: Labels,
    bounds: tuple[float, ...],
    counts: Iterable[int],
    total: float,
    keep: frozenset[str] | None = None,
) -> None:
    """As prometheus-client's add_metric: the cumulative buckets, then _count and _sum. `keep`: the
    buckets written (by `le`; +Inf among them), for the series profile; None: all."""
    running = list(accumulate(counts))
    if len(running) != len(bounds) + 1:
        raise ValueError(f"{family.name}: {len(running)} buckets for {len(bounds)} bounds")
    heads, picks = _histogram_heads(family.name, tuple(labels.items()), bounds, keep)
    values: list[float] = [running[i] for i in picks]
    values.append(running[-1])
    values.append(total)
    if type(family) is Histograms:
        family.series.append((heads, values))
    else:
        family.samples.extend(map(Sample, heads.names, heads.labels, values))


# A histogram series' heads (names, label sets, line heads) and the buckets it writes, made once per
# series and handed out at every scrape (bounded: cleared when full). Shared, so the renderer finds
# their text by identity.
_HISTOGRAM_LABELS: dict[tuple[object, ...], tuple[Heads, tuple[int, ...]]] = {}
MAX_HISTOGRAM_LABELS = 2_048  # at the caps about 600 series; about 12 KB each with their text


def _histogram_heads(
    name: str, items: tuple[tuple[str, str], ...], bounds: tuple[float, ...], keep: frozenset[str] | None
) -> tuple[Heads, tuple[int, ...]]:
    """The series' heads: per bucket written its sample (with `le`), then _count and _sum; and the
    index of each bucket written."""
    key = (name, items, bounds, keep)
    found = _HISTOGRAM_LABELS.get(key)
    if found is None:
        series = SharedLabels(items)
        les = _les(bounds)
        picks = tuple(i for i, le in enumerate(les) if keep is None or le in keep)
        labels = (*(SharedLabels({**series, "le": les[i]}) for i in picks), series, series)
        names = (*[name + "_bucket"] * len(picks), name + "_count", name + "_sum")
        if len(_HISTOGRAM_LABELS) >= MAX_HISTOGRAM_LABELS:
            _HISTOGRAM_LABELS.clear()
        found = _HISTOGRAM_LABELS[key] = (Heads(names, labels), picks)
    return found


@functools.cache
def _les(bounds: tuple[float, ...]) -> tuple[str, ...]:
    """The `le` label values of a histogram's buckets, +Inf last (as the library writes them)."""
    return (*[repr(float(b)) for b in bounds], "+Inf")


def listener_families(view: ListenerView) -> Iterable[Metric]:
    snapshots = declared("probe_snapshots").counter()
    for result in RESULTS:
        snapshots.add_metric([result], view.results[result])
    yield snapshots
    yield declared("probe_connections").gauge(view.connections)
    refused = declared("probe_connections_refused").counter(max_connections=view.max_connections)
    for reason, n in view.refused.items():
        refused.add_metric([reason], n)
    yield refused


def absent_family(pods: Iterable[NodePod], view: StoreView) -> Metric:
    """Pods injected with the probe whose probe has not said hello, by what their spec shows."""
    family = declared("probe_absent").gauge()
    connected = {(e.hello.namespace, e.hello.pod) for e in view.engines}
    connected_names = {e.hello.pod for e in view.engines if not e.hello.namespace}
    for pod in pods:
        if (pod.namespace, pod.name) in connected or pod.name in connected_names:
            continue
        family.add_metric([pod.namespace, pod.name, pod.blockers[0] if pod.blockers else "not_connected"], 1)
    return family


def store_families(view: StoreView, schema_les: frozenset[str] | None = None) -> Iterable[Metric]:
    """The probe families of the metric contract (docs/metrics.md) from one consistent view of the store;
    `schema_les`: the per-schema histogram's buckets the series profile keeps (None: all)."""
    yield from engine_families(view.engines, view.analysis.families)
    yield from schema_families(view, schema_les)
    yield from analysis_families(view.analysis, view.serialisations)
    yield from family_families(view.families, view.family_analysis)
    yield declared("schemas_first_seen").counter(view.first_seen_total)
    yield declared("schemas_tracked").gauge(view.tracked)
    yield declared("schemas_evicted").counter(view.evicted_total)
    yield from admission_families(view)


def admission_families(view: StoreView) -> Iterable[Metric]:
    """What the store refused or changed of what probes sent (admission.py), by fixed reasons."""
    refused = declared("probe_refused").counter(max_engine_backends=MAX_ENGINE_BACKENDS)
    for reason in REFUSALS:
        refused.add_metric([reason], view.refused.get(reason, 0))
    yield refused
    sanitised = declared("probe_values_sanitised").counter()
    for name in SANITISED:
        sanitised.add_metric([name], view.sanitised.get(name, 0))
    yield sanitised


def engine_families(
    engines: Iterable[EngineView], families: Mapping[str, str] | None = None
) -> Iterable[Metric]:
    """Engine-level totals, as each engine's probe last reported them; `families`: schema hash -> its
    family (the guard's counts name the family refused)."""
    backends, processes, sizing = BackendFamilies(), ProcessFamilies(), SizingFamilies()
    routes, validation, guard = RouteFamilies(), ValidationFamilies(), GuardFamilies(families or {})
    for engine in engines:
        if engine.snapshot is None:
            continue
        for name in sorted(engine.snapshot.backends):
            backends.add(engine.hello, name, engine.snapshot.backends[name])
        processes.add(engine.hello, engine.snapshot)
        sizing.add(engine.hello, engine.snapshot.engine)
        routes.add(engine.hello, engine.snapshot)
        validation.add(engine.hello, engine.snapshot)
        guard.add(engine.hello, engine.snapshot)
    yield from backends.families()
    yield from processes.families()
    yield from sizing.families()
    yield from routes.families()
    yield from validation.families()
    yield from guard.families()


def has_grammar_cache(engine_kind: str, backend: str) -> bool:
    """Whether repeats of a spec can be served from a cache on this engine and backend. SGLang caches
    compiled grammars itself, for every backend; elsewhere llguidance builds each grammar anew (vLLM's
    guidance backend and direct `LLMatcher` use keep no cache), so every call is a miss and a low hit
    ratio says nothing about the schemas. The cache alerts read this as `probe_info{cache}`."""
    return engine_kind == "sglang" or backend != "llguidance"


class BackendFamilies:
    """Per pod, engine and grammar backend: the compile, wait and mask-fill families and the probe's info."""

    def __init__(self) -> None:
        self.compile_seconds = histograms("compile_seconds")
        self.miss_seconds = histograms("compile_miss_seconds")
        self.requests = declared("compile_requests").counter()
        self.hits = declared("compile_cache_hits").counter()
        self.errors = declared("compile_errors").counter()
        self.rejections = declared("grammar_rejections").counter()
        self.running = declared("compile_in_progress").gauge()
        self.oldest = declared("compile_oldest_running_seconds").gauge()
        self.wait = histograms("grammar_wait_seconds")
        self.mask = histograms("mask_seconds")
        self.info = declared("probe").info()

    def add(self, hello: wire.Hello, backend: str, totals: wire.BackendTotals) -> None:
        labels = {**engine_identity(hello.namespace, hello.pod, hello.engine), "backend": backend}
        histogram(
            self.compile_seconds, labels, wire.COMPILE_BUCKETS, totals.compile.buckets, totals.compile.sum
        )
        if totals.miss is not None:
            histogram(self.miss_seconds, labels, wire.COMPILE_BUCKETS, totals.miss.buckets, totals.miss.sum)
        histogram(self.wait, labels, wire.COMPILE_BUCKETS, totals.wait.buckets, totals.wait.sum)
        histogram(self.mask, labels, wire.MASK_BUCKETS, totals.mask.buckets, totals.mask.sum)
        counter(self.requests, labels, totals.requests)
        counter(self.hits, labels, totals.hits)
        for reason in wire.ERROR_REASONS:
            counter(self.errors, {**labels, "reason": reason}, totals.errors.get(reason, 0))
        for reason in wire.REJECTION_REASONS:
            counter(self.rejections, {**labels, "reason": reason}, totals.rejections.get(reason, 0))
        gauge(self.running, labels, totals.in_progress)
        gauge(self.oldest, labels, totals.oldest_seconds)
        info(
            self.info,
            labels,
            {
                "engine_kind": hello.engine_kind,
                "engine_version": hello.engine_version,
                "backend_version": hello.backends.get(backend, ""),
                "probe_version": hello.probe_version,
                "cache": "true" if has_grammar_cache(hello.engine_kind, backend) else "false",
            },
        )

    def families(self) -> tuple[Metric, ...]:
        return (
            self.compile_seconds, self.miss_seconds, self.requests, self.hits, self.errors, self.rejections,
            self.running,
            self.oldest, self.wait, self.mask, self.info,
        )  # fmt: skip


class ProcessFamilies:
    """Per engine process: its CPU seconds and the probe's own counters."""

    def __init__(self) -> None:
        self.cpu = declared("engine_cpu_seconds").counter()
        self.probe_cpu = declared("probe_cpu_seconds").counter()
        self.events = declared("probe_events").counter()

    def add(self, hello: wire.Hello, snapshot: wire.Snapshot) -> None:
        process = engine_identity(hello.namespace, hello.pod, hello.engine)
        counter(self.cpu, {**process, "mode": "user"}, snapshot.cpu.user)
        counter(self.cpu, {**process, "mode": "system"}, snapshot.cpu.system)
        counter(self.probe_cpu, process, snapshot.cpu.probe)
        for event in wire.PROBE_COUNTERS:
            counter(self.events, {**process, "event": event}, snapshot.probe.get(event, 0))

    def families(self) -> tuple[Metric, ...]:
        return self.cpu, self.probe_cpu, self.events


class SizingFamilies:
    """Per engine process, what it is sized with: grammar cache bytes against their limit, the compile
    pool's workers, the CPUs it counts (its pool is sized from them) against its container's CPU
    quota, and that container's CFS throttling (from the probe, inside the container)."""

    def __init__(self) -> None:
        self.cache = declared("grammar_cache_bytes").gauge()
        self.limit = declared("grammar_cache_limit_bytes").gauge()
        self.workers = declared("compile_pool_workers").gauge()
        self.cpus = declared("engine_cpus").gauge()
        self.quota = declared("engine_cpu_quota_cores").gauge()
        self.periods = declared("engine_cpu_cfs_periods").counter()
        self.throttled = declared("engine_cpu_cfs_throttled_periods").counter()
        self.throttled_seconds = declared("engine_cpu_cfs_throttled_seconds").counter()

    def add(self, hello: wire.Hello, state: wire.EngineSizing | None) -> None:
        if state is None:
            return
        process = engine_identity(hello.namespace, hello.pod, hello.engine)
        for c in state.caches:
            cache = {**process, "backend": c.backend, "compiler": c.compiler}
            gauge(self.cache, cache, c.bytes)
            if c.limit_bytes >= 0:
                gauge(self.limit, cache, c.limit_bytes)
        if state.pool_workers:
            gauge(self.workers, process, state.pool_workers)
        if state.cpus:
            gauge(self.cpus, process, state.cpus)
        if state.cgroup is not None:
            gauge(self.quota, process, state.cgroup.quota_cores)
            counter(self.periods, process, state.cgroup.periods)
            counter(self.throttled, process, state.cgroup.throttled_periods)
            counter(self.throttled_seconds, process, state.cgroup.throttled_seconds)

    def families(self) -> tuple[Metric, ...]:
        return (
            self.cache, self.limit, self.workers, self.cpus, self.quota, self.periods, self.throttled,
            self.throttled_seconds,
        )  # fmt: skip


# Where vLLM's `auto` router can send a request, in the product's names.
AUTO_RESOLVES = ("xgrammar", "llguidance", "outlines")
MISMATCH_OUTCOMES = (("rejected", "refused"), ("other_backend", "misrouted"))  # outcome, field


def with_zero_mismatches(routes: Iterable[wire.RouteCount]) -> dict[tuple[str, str, str, str], int]:
    """An engine's routes by (requested, resolved, backend, outcome), with a zero for each mismatch an
    engine routing under auto could meet: a series that first appears at 1 has no `increase()`, so
    without them the alerts would miss an engine's first mismatches."""
    counts = {(r.requested, r.resolved, r.backend, r.outcome): r.requests for r in routes}
    for requested, backend in {(k[0], k[2]) for k in counts if k[0] == "auto" and k[2]}:
        for resolved in AUTO_RESOLVES:
            for outcome, _ in MISMATCH_OUTCOMES if resolved != backend else ():
                counts.setdefault((requested, resolved, backend, outcome), 0)
    return counts


class RouteFamilies:
    """Per engine (vLLM): where its router sent each structured request against the backend the engine
    uses, and that backend. One backend per EngineCore, the first structured request's: the others
    are refused (0.33) or compiled by the wrong backend (0.32), and no vLLM metric says so."""

    def __init__(self) -> None:
        self.routed = declared("routed_requests").counter()
        self.backend = declared("engine_backend").info()

    def add(self, hello: wire.Hello, snapshot: wire.Snapshot) -> None:
        process = engine_identity(hello.namespace, hello.pod, hello.engine)
        for (requested, resolved, backend, outcome), n in with_zero_mismatches(snapshot.routes).items():
            labels = {**process, "requested": requested, "resolved": resolved, "backend": backend,
                      "outcome": outcome}  # fmt: skip
            counter(self.routed, labels, n)
        if snapshot.engine is not None and snapshot.engine.backend:
            info(self.backend, {**process, "backend": snapshot.engine.backend}, {})

    def families(self) -> tuple[Metric, ...]:
        return self.routed, self.backend


class GuardFamilies:
    """Per vLLM API server process with the guard on: requests refused (or, observing, that would be),
    by the family of the schema refused (the daemon's analysis; "" before it, and for the zeros the
    probe sets at arming). A pod's made-up hashes are no label: unknown to the analysis, they are ""."""

    def __init__(self, families: Mapping[str, str]) -> None:
        self.guarded = declared("guard_requests").counter()
        self.family_of = families

    def add(self, hello: wire.Hello, snapshot: wire.Snapshot) -> None:
        process = engine_identity(hello.namespace, hello.pod, hello.engine)
        totals: dict[tuple[str, str, str], int] = {}
        for count in snapshot.guard:
            key = (
                self.family_of.get(count.schema_hash, "") if count.schema_hash else "",
                count.reason,
                count.action,
            )
            totals[key] = totals.get(key, 0) + count.requests
        for (family, reason, action), n in sorted(totals.items()):
            counter(self.guarded, {**process, "family": family, "reason": reason, "action": action}, n)

    def families(self) -> tuple[Metric, ...]:
        return (self.guarded,)


class ValidationFamilies:
    """Per vLLM API server process: its structured-output validation of each request, by the backend
    vLLM's router resolved it to (`rejected`: the request got a 400). It runs on the server's event
    loop, so its seconds are seconds in which the server answered nothing."""

    def __init__(self) -> None:
        self.seconds = histograms("validation_seconds")
        self.deaths = declared("server_deaths").counter()

    def add(self, hello: wire.Hello, snapshot: wire.Snapshot) -> None:
        process = engine_identity(hello.namespace, hello.pod, hello.engine)
        if snapshot.deaths is not None:
            counter(self.deaths, process, snapshot.deaths)
        for backend, h in sorted(snapshot.validation.items()):
            histogram(self.seconds, {**process, "backend": backend}, wire.COMPILE_BUCKETS, h.buckets, h.sum)

    def families(self) -> tuple[Metric, ...]:
        return self.seconds, self.deaths


def schema_families(view: StoreView, les: frozenset[str] | None = None) -> Iterable[Metric]:
    """The exposed schemas' series (and `other`), what each hash is, and the daemon's ranking."""
    compile_seconds = histograms("schema_compile_seconds")
    requests = declared("schema_requests").counter()
    hits = declared("schema_cache_hits").counter()
    failed = declared("schema_compile_errors").counter()
    rejected = declared("schema_grammar_rejections").counter()
    mismatches = declared("schema_backend_mismatches").counter()
    stalls = declared("schema_validation_stalls").counter()
    stall_seconds = declared("schema_validation_stall_seconds").counter()
    deaths = declared("schema_server_deaths").counter()
    for key, totals in sorted(view.series.items()):
        labels = {**engine_identity(key.namespace, key.pod, key.engine), "backend": key.backend,
                  "schema_hash": key.schema_hash}  # fmt: skip
        histogram(compile_seconds, labels, wire.SCHEMA_BUCKETS, totals.buckets, totals.sum, les)
        counter(requests, labels, totals.requests)
        counter(hits, labels, totals.hits)
        if totals.failed:
            counter(failed, labels, totals.failed)
        if totals.rejected:
            counter(rejected, labels, totals.rejected)
        if totals.mismatched:
            for outcome, name in MISMATCH_OUTCOMES:
                counter(mismatches, {**labels, "outcome": outcome}, getattr(totals, name))
        if totals.stalls:
            counter(stalls, labels, totals.stalls)
            counter(stall_seconds, labels, totals.stall_seconds)
        if totals.deaths:
            counter(deaths, labels, totals.deaths)
    info = declared("schema").info()
    for schema_hash, schema in sorted(view.info.items()):
        info.add_metric(
            [schema_hash],
            {
                "shape_hash": schema.shape_hash,
                "family": view.analysis.families.get(schema_hash, ""),
                "kind": schema.kind,
                "backend": schema.backend,
                # its family's shared title once analysed (a per-tenant name never shows), "" before
                "title": view.analysis.titles.get(schema_hash, "") if schema.title else "",
            },
        )
    recent = declared("schema_recent_compile_seconds").gauge()
    for schema_hash, score in sorted(view.recent.items()):
        recent.add_metric([schema_hash], score)
    yield from (compile_seconds, requests, hits, failed, rejected, mismatches, stalls, stall_seconds, deaths)
    yield from (info, recent)


def analysis_families(analysis: AnalysisView, serialisations: Mapping[str, int]) -> Iterable[Metric]:
    """Lint findings of the exposed schemas, their shapes' variants and varying paths."""
    findings = declared("schema_lint_findings").gauge()
    for schema_hash, counts in sorted(analysis.findings.items()):
        exact_strings = serialisations.get(schema_hash, 0)
        merged = {**counts, **variants.unstable_serialization_counts(exact_strings)}
        for (rule, severity), value in sorted(merged.items()):
            findings.add_metric([schema_hash, rule, severity], value)
    yield findings
    shape_variants = declared("shape_variants").gauge()
    paths = declared("shape_varying_path_info").gauge()
    for shape_hash, shape in sorted(analysis.shapes.items()):
        shape_variants.add_metric([shape_hash], shape.variants)
        for path, _ in shape.varying_paths:
            paths.add_metric([shape_hash, path], 1)
    yield shape_variants
    yield paths
    yield declared("schemas_analysed").counter(analysis.analysed)
    yield declared("schema_analysis_skipped").counter(analysis.skipped)
    yield declared("schema_analysis_seconds").counter(analysis.seconds)


def family_families(rollup: RollupView, analysis: FamilyView) -> Iterable[Metric]:
    """Family-level series (docs/families.md): what the product ranks by and names as the cause."""
    compile_seconds = declared("family_compile_seconds").counter()
    requests = declared("family_requests").counter()
    hits = declared("family_cache_hits").counter()
    mismatches = declared("family_backend_mismatches").counter()
    stall_seconds = declared("family_validation_stall_seconds").counter()
    deaths = declared("family_server_deaths").counter()
    for family_id, totals in sorted(rollup.series.items()):
        if totals.stalls:
            stall_seconds.add_metric([family_id], totals.stall_seconds)
        if totals.deaths:
            deaths.add_metric([family_id], totals.deaths)
        compile_seconds.add_metric([family_id], totals.sum)
        requests.add_metric([family_id], totals.requests)
        hits.add_metric([family_id], totals.hits)
        if totals.mismatched:
            for outcome, name in MISMATCH_OUTCOMES:
                mismatches.add_metric([family_id, outcome], getattr(totals, name))
    recent = declared("family_recent_compile_seconds").gauge()
    for family_id, score in sorted(rollup.recent.items()):
        recent.add_metric([family_id], score)
    info = declared("family").info()
    variant_counts = declared("family_variants").gauge()
    varying = declared("family_varying").gauge()
    findings = declared("family_findings").gauge()
    for family_id in sorted(rollup.recent):
        report = analysis.reports.get(family_id)
        if report is None:
            continue
        info.add_metric([family_id], {"kind": report.kind, "name": report.name})
        used = rollup.usage.get(family_id)
        variant_counts.add_metric([family_id], used.variants if used is not None else 0)
        for pointer, what, n in report.variation.parts()[:5]:
            varying.add_metric([family_id, pointer, what], n)
        for (rule, severity), n in sorted(report.findings.items()):
            findings.add_metric([family_id, rule, severity], n)
    yield from (compile_seconds, requests, hits, mismatches, stall_seconds, deaths, recent, info)
    yield from (variant_counts, varying, findings)
