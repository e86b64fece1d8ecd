"""The probe receiver's metric families, built from typed views: the listener's counters, the
engines' cumulative totals, the schema-level series and the analysis of the exposed schemas.

Names, help texts, label sets and the order families are yielded in are the metric contract.
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
from exporter.daemon.collectors.kubernetes import NodePod
from exporter.daemon.exposition import SharedLabels
from exporter.daemon.receiver.admission import MAX_ENGINE_BACKENDS, REFUSALS, SANITISED
from exporter.daemon.receiver.analysis import AnalysisView, FamilyView
from exporter.daemon.receiver.listener import RESULTS, ListenerView
from exporter.daemon.receiver.rollup import RollupView
from exporter.daemon.receiver.store import EngineView, StoreView
from exporter.kernel.names import METRIC_PREFIX, PROBE_ANNOTATION
from exporter.schema import variants

PREFIX = METRIC_PREFIX
# An engine's series carry `namespace` first where its probe knows it (GDX_POD_NAMESPACE); older
# probes and engines outside Kubernetes give none, and their series keep the labels below. Samples are
# added with their own label dicts (`counter`, `gauge`, `histogram`, `info`) so a family can hold both.
ENGINE_LABELS = ["pod", "engine", "backend"]
SCHEMA_LABELS = [*ENGINE_LABELS, "schema_hash"]
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
    name, append = family.name + "_bucket", family.samples.append
    series, buckets = _histogram_labels(tuple(labels.items()), bounds, keep)
    for i, bucket in buckets:
        append(Sample(name, bucket, running[i]))
    append(Sample(family.name + "_count", series, running[-1]))
    append(Sample(family.name + "_sum", series, total))


# A histogram's label sets, made once per series and handed out at every scrape (bounded: cleared when
# full). Shared, so the renderer finds their text by identity.
_HISTOGRAM_LABELS: dict[tuple[object, ...], tuple[SharedLabels, tuple[tuple[int, SharedLabels], ...]]] = {}
MAX_HISTOGRAM_LABELS = 2_048  # at the caps about 600 series; about 7 KB each


def _histogram_labels(
    items: tuple[tuple[str, str], ...], bounds: tuple[float, ...], keep: frozenset[str] | None
) -> tuple[SharedLabels, tuple[tuple[int, SharedLabels], ...]]:
    """The series' labels and, per bucket written, its index and labels (with `le`)."""
    key = (items, bounds, keep)
    found = _HISTOGRAM_LABELS.get(key)
    if found is None:
        series = SharedLabels(items)
        buckets = tuple(
            (i, SharedLabels({**series, "le": le}))
            for i, le in enumerate(_les(bounds))
            if keep is None or le in keep
        )
        if len(_HISTOGRAM_LABELS) >= MAX_HISTOGRAM_LABELS:
            _HISTOGRAM_LABELS.clear()
        found = _HISTOGRAM_LABELS[key] = (series, buckets)
    return found


@functools.cache
def _les(bounds: tuple[float, ...]) -> tuple[str, ...]:
    """The `le` label values of a histogram's buckets, +Inf last (as the library writes them)."""
    return (*[repr(float(b)) for b in bounds], "+Inf")


def listener_families(view: ListenerView) -> Iterable[Metric]:
    snapshots = CounterMetricFamily(
        PREFIX + "probe_snapshots",
        "Messages received from in-engine probes, by result (ok, malformed, oversize, rejected).",
        labels=["result"],
    )
    for result in RESULTS:
        snapshots.add_metric([result], view.results[result])
    yield snapshots
    yield GaugeMetricFamily(
        PREFIX + "probe_connections", "Engine probes connected now.", value=view.connections
    )
    refused = CounterMetricFamily(
        PREFIX + "probe_connections_refused",
        f"Probe connections refused: limit ({view.max_connections} already open), "
        "credentials (the peer's uid is not allowed); over TCP: no_token (no auth line first), "
        "token_rejected (the TokenReview did not accept it for our audience), not_a_pod (not a pod-bound "
        "token), other_node, node_unknown (neither the review nor discovery places the pod), "
        "review_failed (the API server could not be asked), review_rate_limited (over the daemon's rate of "
        "TokenReviews), pending_limit (too many connections awaiting review), pod_limit (too many of one "
        "pod); any transport: second_hello, instance_taken (a hello for another peer's engine), idle "
        "(closed: nothing received).",
        labels=["reason"],
    )
    for reason, n in view.refused.items():
        refused.add_metric([reason], n)
    yield refused


def absent_family(pods: Iterable[NodePod], view: StoreView) -> Metric:
    """Pods injected with the probe whose probe has not said hello, by what their spec shows."""
    family = GaugeMetricFamily(
        PREFIX + "probe_absent",
        f"Pods on this node injected with the probe (annotation {PROBE_ANNOTATION}: injected)"
        " whose probe is not connected, by reason: vllm_plugins (VLLM_PLUGINS lacks guided_decoding_probe),"
        " python_ignores_environment (python -E or -I), probe_disabled (GDX_PROBE=0),"
        " pythonpath_from_valuefrom, not_connected (none of these: starting, refused, or unreachable).",
        labels=["namespace", "pod", "reason"],
    )
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
    yield from engine_families(view.engines)
    yield from schema_families(view, schema_les)
    yield from analysis_families(view.analysis, view.serialisations)
    yield from family_families(view.families, view.family_analysis)
    yield CounterMetricFamily(
        PREFIX + "schemas_first_seen", "Distinct schema hashes seen for the first time on this node.",
        value=view.first_seen_total,
    )  # fmt: skip
    yield GaugeMetricFamily(
        PREFIX + "schemas_tracked",
        "Distinct schema hashes the engines on this node track now.",
        value=view.tracked,
    )
    yield CounterMetricFamily(
        PREFIX + "schemas_evicted", "Schema hashes moved out of the exposed top set into other.",
        value=view.evicted_total,
    )  # fmt: skip
    yield from admission_families(view)


def admission_families(view: StoreView) -> Iterable[Metric]:
    """What the store refused or changed of what probes sent (admission.py), by fixed reasons."""
    refused = CounterMetricFamily(
        PREFIX + "probe_refused",
        "What the daemon refused from connected probes, by reason: engines_per_pod (a hello beyond"
        " --probe.max-engines-per-pod connected engines of its pod), engines_per_node (beyond"
        " --probe.max-engines), engine_taken (a hello naming another peer's connected engine),"
        " backends_per_engine (an entry naming a backend beyond an engine's first"
        f" {MAX_ENGINE_BACKENDS}), schema_hash_mismatch (a schema text that does not hash to the hash it"
        " was sent with).",
        labels=["reason"],
    )
    for reason in REFUSALS:
        refused.add_metric([reason], view.refused.get(reason, 0))
    yield refused
    sanitised = CounterMetricFamily(
        PREFIX + "probe_values_sanitised",
        "Label values probes sent outside their documented form, rewritten to it, by field: title"
        " ([A-Za-z0-9_.-], 64 characters), engine_version, probe_version, backend_version ([A-Za-z0-9_.+!-],"
        " 64 characters).",
        labels=["field"],
    )
    for name in SANITISED:
        sanitised.add_metric([name], view.sanitised.get(name, 0))
    yield sanitised


def engine_families(engines: Iterable[EngineView]) -> Iterable[Metric]:
    """Engine-level totals, as each engine's probe last reported them."""
    backends, processes, sizing = BackendFamilies(), ProcessFamilies(), SizingFamilies()
    routes, validation = RouteFamilies(), ValidationFamilies()
    for engine in engines:
        if engine.snapshot is None:
            continue
        for name in sorted(engine.snapshot.backends):
            backends.add(engine.hello, name, engine.snapshot.backends[name])
        processes.add(engine.hello, engine.snapshot)
        sizing.add(engine.hello, engine.snapshot.engine)
        routes.add(engine.hello, engine.snapshot)
        validation.add(engine.hello, engine.snapshot)
    yield from backends.families()
    yield from processes.families()
    yield from sizing.families()
    yield from routes.families()
    yield from validation.families()


def has_grammar_cache(engine_kind: str, backend: str) -> bool:
    """Whether repeats of a spec can be served from a cache on this engine and backend. SGLang caches
    compiled grammars itself, for every backend; elsewhere llguidance builds each grammar anew (vLLM's
    guidance backend and direct `LLMatcher` use keep no cache), so every call is a miss and a low hit
    ratio says nothing about the schemas. The cache alerts read this as `probe_info{cache}`."""
    return engine_kind == "sglang" or backend != "llguidance"


class BackendFamilies:
    """Per pod, engine and grammar backend: the compile, wait and mask-fill families and the probe's info."""

    def __init__(self) -> None:
        self.compile_seconds = HistogramMetricFamily(
            PREFIX + "compile_seconds",
            "Wall time of each grammar compile call, cache hits included.",
            labels=ENGINE_LABELS,
        )
        self.miss_seconds = HistogramMetricFamily(
            PREFIX + "compile_miss_seconds",
            "Wall time of the compile calls that missed the grammar cache: how slow a real compile is.",
            labels=ENGINE_LABELS,
        )
        self.requests = CounterMetricFamily(
            PREFIX + "compile_requests", "Grammar compile calls.", labels=ENGINE_LABELS
        )
        self.hits = CounterMetricFamily(
            PREFIX + "compile_cache_hits",
            "Compile calls served from the grammar cache.",
            labels=ENGINE_LABELS,
        )
        self.errors = CounterMetricFamily(
            PREFIX + "compile_errors",
            "Failed compile calls by reason (invalid_schema, unsupported, timeout, internal).",
            labels=[*ENGINE_LABELS, "reason"],
        )
        self.rejections = CounterMetricFamily(
            PREFIX + "grammar_rejections",
            "Compiled grammars that failed later, by reason: rejected (refused tokens its own mask allowed: "
            "vLLM ends the request with an error), error (advancing it raised).",
            labels=[*ENGINE_LABELS, "reason"],
        )
        self.running = GaugeMetricFamily(
            PREFIX + "compile_in_progress", "Compiles running now.", labels=ENGINE_LABELS
        )
        self.oldest = GaugeMetricFamily(
            PREFIX + "compile_oldest_running_seconds",
            "Age of the longest-running compile (0: none).",
            labels=ENGINE_LABELS,
        )
        self.wait = HistogramMetricFamily(
            PREFIX + "grammar_wait_seconds",
            "A request's grammar from submission to ready, queueing in the compile pool included.",
            labels=ENGINE_LABELS,
        )
        self.mask = HistogramMetricFamily(
            PREFIX + "mask_seconds",
            "Time to fill the batch's token bitmask, per engine step.",
            labels=ENGINE_LABELS,
        )
        self.info = InfoMetricFamily(
            PREFIX + "probe",
            "The probe in each engine process.",
            labels=[
                *ENGINE_LABELS,
                "engine_kind",
                "engine_version",
                "backend_version",
                "probe_version",
                "cache",
            ],
        )

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
        self.cpu = CounterMetricFamily(
            PREFIX + "engine_cpu_seconds",
            "CPU seconds of the engine process, by mode.",
            labels=["pod", "engine", "mode"],
        )
        self.probe_cpu = CounterMetricFamily(
            PREFIX + "probe_cpu_seconds",
            "CPU seconds of the probe's own thread in the engine process (aggregation, snapshots, sends):"
            " what the probe costs besides the microseconds its wrappers add to each call.",
            labels=["pod", "engine"],
        )
        self.events = CounterMetricFamily(
            PREFIX + "probe_events",
            "The probe's own counters: internal_errors, send_failures, connects, texts_dropped, evicted.",
            labels=["pod", "engine", "event"],
        )

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
        process, cache = ["pod", "engine"], ["pod", "engine", "backend", "compiler"]
        self.cache = GaugeMetricFamily(
            PREFIX + "grammar_cache_bytes", "Bytes held by each grammar compiler's cache.", labels=cache
        )
        self.limit = GaugeMetricFamily(
            PREFIX + "grammar_cache_limit_bytes",
            "Each grammar compiler's cache limit (vLLM: VLLM_XGRAMMAR_CACHE_MB); absent when unlimited.",
            labels=cache,
        )
        self.workers = GaugeMetricFamily(
            PREFIX + "compile_pool_workers", "Workers of the engine's grammar compile pool.", labels=process
        )
        self.cpus = GaugeMetricFamily(
            PREFIX + "engine_cpus",
            "CPUs the engine process counts (os.cpu_count(): the node's, whatever its quota).",
            labels=process,
        )
        self.quota = GaugeMetricFamily(
            PREFIX + "engine_cpu_quota_cores",
            "The engine container's CFS CPU quota in cores; 0 when it has none.",
            labels=process,
        )
        self.periods = CounterMetricFamily(
            PREFIX + "engine_cpu_cfs_periods",
            "CFS periods the engine container had runnable tasks.",
            labels=process,
        )
        self.throttled = CounterMetricFamily(
            PREFIX + "engine_cpu_cfs_throttled_periods",
            "CFS periods in which the engine container used up its quota and was held back.",
            labels=process,
        )
        self.throttled_seconds = CounterMetricFamily(
            PREFIX + "engine_cpu_cfs_throttled_seconds",
            "Time the engine container's tasks were held back by its CPU quota.",
            labels=process,
        )

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
        self.routed = CounterMetricFamily(
            PREFIX + "routed_requests",
            "Structured requests by the backend asked for (auto or the configured one), the one vLLM's"
            " router resolved them to, the engine's backend, and outcome: compiled (by the backend they"
            " resolved to), rejected (resolved to another backend than the engine's: vLLM 0.33 answers"
            " HTTP 400), other_backend (compiled by the engine's backend anyway, vLLM 0.32: the keyword"
            " that made them fall back is not enforced). Under auto, the mismatches not met yet are 0.",
            labels=["pod", "engine", "requested", "resolved", "backend", "outcome"],
        )
        self.backend = InfoMetricFamily(
            PREFIX + "engine_backend",
            "The grammar backend each engine uses: the one its first structured request resolved to.",
            labels=["pod", "engine", "backend"],
        )

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


class ValidationFamilies:
    """Per vLLM API server process: its structured-output validation of each request, by the backend
    vLLM's router resolved it to (`rejected`: the request got a 400). It runs on the server's event
    loop, so its seconds are seconds in which the server answered nothing."""

    def __init__(self) -> None:
        self.seconds = HistogramMetricFamily(
            PREFIX + "validation_seconds",
            "Wall time of vLLM's API server validating each structured request, by the backend it resolved"
            " to (rejected: refused with HTTP 400). Synchronous on the server's event loop: every request it"
            " serves waits meanwhile.",
            labels=ENGINE_LABELS,
        )
        self.deaths = CounterMetricFamily(
            PREFIX + "server_deaths",
            "vLLM API server processes of this pod that died while validating a structured request (on the"
            " unbounded outlines path), over the pod's life: each successor reads them from the probe's state"
            " folder. 0 from the first API server on, so the first death moves increase().",
            labels=["pod", "engine"],
        )

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
    compile_seconds = HistogramMetricFamily(
        PREFIX + "schema_compile_seconds", "Compile call wall time per schema hash.", labels=SCHEMA_LABELS
    )
    requests = CounterMetricFamily(
        PREFIX + "schema_requests", "Compile calls per schema hash.", labels=SCHEMA_LABELS
    )
    hits = CounterMetricFamily(
        PREFIX + "schema_cache_hits",
        "Compile calls served from the grammar cache, per schema hash.",
        labels=SCHEMA_LABELS,
    )
    failed = CounterMetricFamily(
        PREFIX + "schema_compile_errors",
        "Failed compile calls per schema hash, every reason (present once one failed).",
        labels=SCHEMA_LABELS,
    )
    rejected = CounterMetricFamily(
        PREFIX + "schema_grammar_rejections",
        "Grammar rejections per schema hash after it compiled: the engine ended the request with an error"
        " (present once one happened).",
        labels=SCHEMA_LABELS,
    )
    mismatches = CounterMetricFamily(
        PREFIX + "schema_backend_mismatches",
        "Requests per schema hash that met another backend than vLLM's router resolved them to, by"
        " outcome: rejected (the engine refused them), other_backend (compiled by the engine's backend;"
        " present once one happened).",
        labels=[*SCHEMA_LABELS, "outcome"],
    )
    stalls = CounterMetricFamily(
        PREFIX + "schema_validation_stalls",
        f"vLLM API server validations per schema hash that took {wire.STALL_SECONDS:g} s or more: the server"
        " answered no request meanwhile (present once one happened; engine is the API server's).",
        labels=SCHEMA_LABELS,
    )
    stall_seconds = CounterMetricFamily(
        PREFIX + "schema_validation_stall_seconds",
        "Seconds of those validations per schema hash (present once one happened).",
        labels=SCHEMA_LABELS,
    )
    deaths = CounterMetricFamily(
        PREFIX + "schema_server_deaths",
        "vLLM API server processes that died while validating this schema hash (outlines, unbounded):"
        " named by the process that replaced them (present once one happened).",
        labels=SCHEMA_LABELS,
    )
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
    info = InfoMetricFamily(
        PREFIX + "schema",
        "One per exposed schema hash: its shape hash, family (empty until analysed), request kind, "
        "backend and sanitised title.",
        labels=["schema_hash", "shape_hash", "family", "kind", "backend", "title"],
    )
    for schema_hash, schema in sorted(view.info.items()):
        info.add_metric(
            [schema_hash],
            {
                "shape_hash": schema.shape_hash,
                "family": view.analysis.families.get(schema_hash, ""),
                "kind": schema.kind,
                "backend": schema.backend,
                "title": schema.title,
            },
        )
    recent = GaugeMetricFamily(
        PREFIX + "schema_recent_compile_seconds",
        "Compile seconds of each exposed schema, decayed with a 5-minute half-life: the daemon's ranking."
        " Unlike rate(), it sees a schema compiled once (a new series' first sample has no predecessor).",
        labels=["schema_hash"],
    )
    for schema_hash, score in sorted(view.recent.items()):
        recent.add_metric([schema_hash], score)
    yield from (compile_seconds, requests, hits, failed, rejected, mismatches, stalls, stall_seconds, deaths)
    yield from (info, recent)


def analysis_families(analysis: AnalysisView, serialisations: Mapping[str, int]) -> Iterable[Metric]:
    """Lint findings of the exposed schemas, their shapes' variants and varying paths."""
    findings = GaugeMetricFamily(
        PREFIX + "schema_lint_findings",
        "Places a lint rule fires in a schema (gdx lint FILE shows them with pointers and fixes).",
        labels=["schema_hash", "rule", "severity"],
    )
    for schema_hash, counts in sorted(analysis.findings.items()):
        exact_strings = serialisations.get(schema_hash, 0)
        merged = {**counts, **variants.unstable_serialization_counts(exact_strings)}
        for (rule, severity), value in sorted(merged.items()):
            findings.add_metric([schema_hash, rule, severity], value)
    yield findings
    shape_variants = GaugeMetricFamily(
        PREFIX + "shape_variants",
        "Distinct schemas of this shape compiled within the window: many means per-request injection.",
        labels=["shape_hash"],
    )
    paths = GaugeMetricFamily(
        PREFIX + "shape_varying_path_info",
        "JSON pointers whose literal values differ between variants of the shape (at most 5).",
        labels=["shape_hash", "path"],
    )
    for shape_hash, shape in sorted(analysis.shapes.items()):
        shape_variants.add_metric([shape_hash], shape.variants)
        for path, _ in shape.varying_paths:
            paths.add_metric([shape_hash, path], 1)
    yield shape_variants
    yield paths
    yield CounterMetricFamily(
        PREFIX + "schemas_analysed", "Distinct schemas linted by the daemon.", value=analysis.analysed
    )
    yield CounterMetricFamily(
        PREFIX + "schema_analysis_skipped",
        "Schemas not analysed because the queue of texts was full.",
        value=analysis.skipped,
    )
    yield CounterMetricFamily(
        PREFIX + "schema_analysis_seconds", "Time the daemon spent analysing schemas.", value=analysis.seconds
    )


def family_families(rollup: RollupView, analysis: FamilyView) -> Iterable[Metric]:
    """Family-level series (docs/families.md): what the product ranks by and names as the cause."""
    compile_seconds = CounterMetricFamily(
        PREFIX + "family_compile_seconds",
        'Compile call wall time per schema family on this node (all engines); the rest in family="other".',
        labels=["family"],
    )
    requests = CounterMetricFamily(
        PREFIX + "family_requests", "Compile calls per schema family.", labels=["family"]
    )
    hits = CounterMetricFamily(
        PREFIX + "family_cache_hits",
        "Compile calls served from the grammar cache, per schema family.",
        labels=["family"],
    )
    mismatches = CounterMetricFamily(
        PREFIX + "family_backend_mismatches",
        "Requests per schema family that met another backend than vLLM's router resolved them to, by"
        " outcome: rejected, other_backend (present once one happened).",
        labels=["family", "outcome"],
    )
    stall_seconds = CounterMetricFamily(
        PREFIX + "family_validation_stall_seconds",
        f"Seconds vLLM API servers on this node spent in validations of {wire.STALL_SECONDS:g} s or more, per"
        " schema family (present once one happened).",
        labels=["family"],
    )
    deaths = CounterMetricFamily(
        PREFIX + "family_server_deaths",
        "vLLM API server processes on this node that died validating a schema of the family (present once"
        " one happened).",
        labels=["family"],
    )
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
    recent = GaugeMetricFamily(
        PREFIX + "family_recent_compile_seconds",
        "Compile seconds of each exposed family, decayed with a 5-minute half-life: the ranking.",
        labels=["family"],
    )
    for family_id, score in sorted(rollup.recent.items()):
        recent.add_metric([family_id], score)
    info = InfoMetricFamily(
        PREFIX + "family",
        "One per exposed family: its kind and a readable name (its title, else from its structure).",
        labels=["family", "kind", "name"],
    )
    variant_counts = GaugeMetricFamily(
        PREFIX + "family_variants",
        "Distinct specs of the family compiled within the window.",
        labels=["family"],
    )
    varying = GaugeMetricFamily(
        PREFIX + "family_varying",
        "What varies between the family's variants (at most 5): branches (distinct subsets of the union "
        "at pointer), optional (properties that come and go), literal (variants whose literal differs).",
        labels=["family", "pointer", "what"],
    )
    findings = GaugeMetricFamily(
        PREFIX + "family_findings",
        "dynamic_schema: the family's variants are rarely reused in the window (injection per request).",
        labels=["family", "rule", "severity"],
    )
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
