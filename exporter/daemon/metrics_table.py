"""Every metric family the daemon declares, once, as data: its name (without the `guided_decoding_`
prefix), type, help text and label names, under the collector that yields it, in the order it yields
them. The collectors build their families from it (`declared(name).counter()` and the like) and describe
themselves from it (`describe`), so a name two collectors declare is refused at start-up, when the
registry takes the second (prometheus-client's "Duplicated timeseries in CollectorRegistry").

Names, types, help texts and label sets are the metric contract (docs/metrics.md), and this table is
the one place they change; its order is the page's (tests/unit/daemon/test_metrics_table.py holds each
collector's `describe()` to what its `collect()` yields). A help text that names a value known only
at run time is a `str.format` template (`{max_connections}`), filled where the family is built. The
label names are those the families are declared with: an engine's series also carry `namespace`,
first, where the daemon knows it (receiver/metric_families.py). The engines' own families passed
through (`vllm:*`, `sglang:*`, `trtllm_*`) are theirs, not declared here.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal, TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

from exporter import wire
from exporter.kernel.names import METRIC_PREFIX, PROBE_ANNOTATION

Kind = Literal["counter", "gauge", "histogram", "info"]
F = TypeVar("F", bound=Metric)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One family as declared: what its `# HELP` and `# TYPE` lines say, and its label names."""

    name: str  # without METRIC_PREFIX; a counter's without `_total`, an info's without `_info`
    type: Kind
    help: str  # a str.format template where it names a run-time value
    labels: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        return METRIC_PREFIX + self.name

    def family(self, value: float | None = None, **fill: object) -> Metric:
        """A new family of this declaration: empty, or with one sample of `value` (a family without
        labels); `fill`: the values of its help text's template."""
        text = self.help.format(**fill) if fill else self.help
        labels = list(self.labels) if self.labels else None
        if self.type == "counter":
            return CounterMetricFamily(self.full_name, text, value=value, labels=labels)
        if self.type == "gauge":
            return GaugeMetricFamily(self.full_name, text, value=value, labels=labels)
        if value is not None:
            raise ValueError(f"{self.full_name}: a {self.type} is not built with one value")
        if self.type == "histogram":
            return HistogramMetricFamily(self.full_name, text, labels=labels)
        return InfoMetricFamily(self.full_name, text, labels=labels)

    def counter(self, value: float | None = None, **fill: object) -> CounterMetricFamily:
        return _typed(CounterMetricFamily, self.family(value, **fill))

    def gauge(self, value: float | None = None, **fill: object) -> GaugeMetricFamily:
        return _typed(GaugeMetricFamily, self.family(value, **fill))

    def histogram(self, **fill: object) -> HistogramMetricFamily:
        return _typed(HistogramMetricFamily, self.family(None, **fill))

    def info(self, **fill: object) -> InfoMetricFamily:
        return _typed(InfoMetricFamily, self.family(None, **fill))


def _typed(cls: type[F], family: Metric) -> F:
    if not isinstance(family, cls):
        raise TypeError(f"{family.name} is declared a {family.type}, not a {cls.__name__}")
    return family


ENGINE = ("pod", "engine", "backend")  # an engine's series (and `namespace` first, where known)
SCHEMA = (*ENGINE, "schema_hash")
PROCESS = ("pod", "engine")  # an engine process's series
GPU = ("gpu", "uuid", "name")

CPU: tuple[MetricSpec, ...] = (
    MetricSpec(
        "cpu_seconds",
        "counter",
        "Seconds each CPU spent in each mode (as node_cpu_seconds_total).",
        ("cpu", "mode"),
    ),
)

NVML: tuple[MetricSpec, ...] = (
    MetricSpec(
        "gpu_utilization_ratio",
        "gauge",
        "Fraction of the last sample period in which a kernel ran on the GPU (NVML utilization.gpu / 100).",
        GPU,
    ),
    MetricSpec("gpu_memory_used_bytes", "gauge", "GPU memory in use.", GPU),
    MetricSpec("gpu_memory_total_bytes", "gauge", "GPU memory installed.", GPU),
    MetricSpec("gpu_power_watts", "gauge", "GPU power draw.", GPU),
    MetricSpec("gpu_sm_clock_hertz", "gauge", "Current SM clock.", GPU),
    MetricSpec(
        "gpu_pcie_rx_bytes_per_second",
        "gauge",
        "PCIe receive throughput over NVML's last 20 ms sample (KiB/s from NVML, in bytes).",
        GPU,
    ),
    MetricSpec(
        "gpu_pcie_tx_bytes_per_second",
        "gauge",
        "PCIe transmit throughput over NVML's last 20 ms sample (KiB/s from NVML, in bytes).",
        GPU,
    ),
)

VLLM: tuple[MetricSpec, ...] = (
    MetricSpec(
        "target_up",
        "gauge",
        "1 when the engine's metrics page answered and parsed, else 0.",
        ("target", "pod"),
    ),
    MetricSpec(
        "target_scrape_duration_seconds",
        "gauge",
        "Time the last scrape of the engine took.",
        ("target", "pod"),
    ),
    MetricSpec(
        "passthrough_type_conflicts",
        "counter",
        "Families dropped from the passthrough because targets declared them with different types.",
    ),
    MetricSpec(
        "passthrough_samples_dropped",
        "counter",
        "Samples of engines' pages dropped at scrapes for labels Prometheus would refuse the whole page for"
        " (duplicate_label, reserved_label) or that their type requires (missing_label).",
        ("reason",),
    ),
)

PROBE: tuple[MetricSpec, ...] = (
    # the listener's (receiver/listener.py)
    MetricSpec(
        "probe_snapshots",
        "counter",
        "Messages received from in-engine probes, by result (ok, malformed, oversize, rejected).",
        ("result",),
    ),
    MetricSpec("probe_connections", "gauge", "Engine probes connected now."),
    MetricSpec(
        "probe_connections_refused",
        "counter",
        "Probe connections refused: limit ({max_connections} already open), credentials (the peer's uid is"
        " not allowed);"
        " over TCP: no_token (no auth line first), token_rejected (the TokenReview did not accept it for"
        " our audience), not_a_pod (not a pod-bound token), other_node, node_unknown (neither the review"
        " nor discovery places the pod), review_failed (the API server could not be asked),"
        " review_rate_limited (over the daemon's rate of TokenReviews), pending_limit (too many connections"
        " awaiting review), pod_limit (too many of one pod); any transport: second_hello, instance_taken (a"
        " hello for another peer's engine), idle (closed: nothing received).",
        ("reason",),
    ),
    # per engine and backend: compiles, waits, mask fills and the probe's info
    MetricSpec(
        "compile_seconds",
        "histogram",
        "Wall time of each grammar compile call, cache hits included.",
        ENGINE,
    ),
    MetricSpec(
        "compile_miss_seconds",
        "histogram",
        "Wall time of the compile calls that missed the grammar cache: how slow a real compile is.",
        ENGINE,
    ),
    MetricSpec("compile_requests", "counter", "Grammar compile calls.", ENGINE),
    MetricSpec("compile_cache_hits", "counter", "Compile calls served from the grammar cache.", ENGINE),
    MetricSpec(
        "compile_errors",
        "counter",
        "Failed compile calls by reason (invalid_schema, unsupported, timeout, internal).",
        (*ENGINE, "reason"),
    ),
    MetricSpec(
        "grammar_rejections",
        "counter",
        "Compiled grammars that failed later, by reason: rejected (refused tokens its own mask allowed:"
        " vLLM ends the request with an error), error (advancing it raised).",
        (*ENGINE, "reason"),
    ),
    MetricSpec("compile_in_progress", "gauge", "Compiles running now.", ENGINE),
    MetricSpec(
        "compile_oldest_running_seconds",
        "gauge",
        "Age of the longest-running compile (0: none).",
        ENGINE,
    ),
    MetricSpec(
        "grammar_wait_seconds",
        "histogram",
        "A request's grammar from submission to ready, queueing in the compile pool included.",
        ENGINE,
    ),
    MetricSpec(
        "mask_seconds",
        "histogram",
        "Time to fill the batch's token bitmask, per engine step.",
        ENGINE,
    ),
    MetricSpec(
        "probe",
        "info",
        "The probe in each engine process.",
        (*ENGINE, "engine_kind", "engine_version", "backend_version", "probe_version", "cache"),
    ),
    # per engine process: its CPU and the probe's own counters
    MetricSpec(
        "engine_cpu_seconds",
        "counter",
        "CPU seconds of the engine process, by mode.",
        (*PROCESS, "mode"),
    ),
    MetricSpec(
        "probe_cpu_seconds",
        "counter",
        "CPU seconds of the probe's own thread in the engine process (aggregation, snapshots, sends): what"
        " the probe costs besides the microseconds its wrappers add to each call.",
        PROCESS,
    ),
    MetricSpec(
        "probe_events",
        "counter",
        "The probe's own counters: internal_errors, send_failures, deferred (rounds held back while the"
        " daemon had not read the last), connects, texts_dropped, evicted, dropped; in vLLM's API server"
        " with GDX_GUARD on, guard_validations (its bounded first validations) and guard_errors (requests"
        " let through on an internal error).",
        (*PROCESS, "event"),
    ),
    # per engine process: what it is sized with (grammar caches, compile pool, CPUs, CFS quota)
    MetricSpec(
        "grammar_cache_bytes",
        "gauge",
        "Bytes held by each grammar compiler's cache.",
        (*ENGINE, "compiler"),
    ),
    MetricSpec(
        "grammar_cache_limit_bytes",
        "gauge",
        "Each grammar compiler's cache limit (vLLM: VLLM_XGRAMMAR_CACHE_MB); absent when unlimited.",
        (*ENGINE, "compiler"),
    ),
    MetricSpec("compile_pool_workers", "gauge", "Workers of the engine's grammar compile pool.", PROCESS),
    MetricSpec(
        "engine_cpus",
        "gauge",
        "CPUs the engine process counts (os.cpu_count(): the node's, whatever its quota).",
        PROCESS,
    ),
    MetricSpec(
        "engine_cpu_quota_cores",
        "gauge",
        "The engine container's CFS CPU quota in cores; 0 when it has none.",
        PROCESS,
    ),
    MetricSpec(
        "engine_cpu_cfs_periods",
        "counter",
        "CFS periods the engine container had runnable tasks.",
        PROCESS,
    ),
    MetricSpec(
        "engine_cpu_cfs_throttled_periods",
        "counter",
        "CFS periods in which the engine container used up its quota and was held back.",
        PROCESS,
    ),
    MetricSpec(
        "engine_cpu_cfs_throttled_seconds",
        "counter",
        "Time the engine container's tasks were held back by its CPU quota.",
        PROCESS,
    ),
    # per engine (vLLM): its router's backend resolutions and the engine's backend
    MetricSpec(
        "routed_requests",
        "counter",
        "Structured requests by the backend asked for (auto or the configured one), the one vLLM's router"
        " resolved them to, the engine's backend, and outcome: compiled (by the backend they resolved to),"
        " rejected (resolved to another backend than the engine's: vLLM 0.33 answers HTTP 400),"
        " other_backend (compiled by the engine's backend anyway, vLLM 0.32: the keyword that made them"
        " fall back is not enforced). Under auto, the mismatches not met yet are 0.",
        ("pod", "engine", "requested", "resolved", "backend", "outcome"),
    ),
    MetricSpec(
        "engine_backend",
        "info",
        "The grammar backend each engine uses: the one its first structured request resolved to.",
        ENGINE,
    ),
    # per vLLM API server process: its validation of structured requests
    MetricSpec(
        "validation_seconds",
        "histogram",
        "Wall time of vLLM's API server validating each structured request, by the backend it resolved to"
        " (rejected: refused with HTTP 400). Synchronous on the server's event loop: every request it"
        " serves waits meanwhile.",
        ENGINE,
    ),
    MetricSpec(
        "server_deaths",
        "counter",
        "vLLM API server processes of this pod that died while validating a structured request (on the"
        " unbounded outlines path), over the pod's life: each successor reads them from the probe's state"
        " folder. 0 from the first API server on, so the first death moves increase().",
        PROCESS,
    ),
    MetricSpec(
        "guard_requests",
        "counter",
        "Structured requests vLLM's API server's guard (GDX_GUARD) refused with HTTP 400 (action refused,"
        ' under enforce) or would have (would_refuse, under observe), by the family of the schema (""'
        " before the daemon has analysed it) and reason: server_crash (an API server died validating the"
        " schema, or its bounded first validation did), server_stall (that validation ran past the guard's"
        " bound, or gdx lint --write-guard predicted it), compile_budget (its grammar compiled past the"
        " daemon's --guard.compile-budget on an engine of the node).",
        ("pod", "engine", "family", "reason", "action"),
    ),
    # per exposed schema hash (and `other`), what each hash is, the daemon's ranking
    MetricSpec("schema_compile_seconds", "histogram", "Compile call wall time per schema hash.", SCHEMA),
    MetricSpec("schema_requests", "counter", "Compile calls per schema hash.", SCHEMA),
    MetricSpec(
        "schema_cache_hits",
        "counter",
        "Compile calls served from the grammar cache, per schema hash.",
        SCHEMA,
    ),
    MetricSpec(
        "schema_compile_errors",
        "counter",
        "Failed compile calls per schema hash, every reason (present once one failed).",
        SCHEMA,
    ),
    MetricSpec(
        "schema_grammar_rejections",
        "counter",
        "Grammar rejections per schema hash after it compiled: the engine ended the request with an error"
        " (present once one happened).",
        SCHEMA,
    ),
    MetricSpec(
        "schema_backend_mismatches",
        "counter",
        "Requests per schema hash that met another backend than vLLM's router resolved them to, by outcome:"
        " rejected (the engine refused them), other_backend (compiled by the engine's backend; present once"
        " one happened).",
        (*SCHEMA, "outcome"),
    ),
    MetricSpec(
        "schema_validation_stalls",
        "counter",
        f"vLLM API server validations per schema hash that took {wire.STALL_SECONDS:g} s or more: the server"
        " answered no"
        " request meanwhile (present once one happened; engine is the API server's).",
        SCHEMA,
    ),
    MetricSpec(
        "schema_validation_stall_seconds",
        "counter",
        "Seconds of those validations per schema hash (present once one happened).",
        SCHEMA,
    ),
    MetricSpec(
        "schema_server_deaths",
        "counter",
        "vLLM API server processes that died while validating this schema hash (outlines, unbounded): named"
        " by the process that replaced them (present once one happened).",
        SCHEMA,
    ),
    MetricSpec(
        "schema",
        "info",
        "One per exposed schema hash: its shape hash, family and title (what the family's variants' sanitised"
        " titles share; both empty until analysed), request kind and backend.",
        ("schema_hash", "shape_hash", "family", "kind", "backend", "title"),
    ),
    MetricSpec(
        "schema_recent_compile_seconds",
        "gauge",
        "Compile seconds of each exposed schema, decayed with a 5-minute half-life: the daemon's ranking."
        " Unlike rate(), it sees a schema compiled once (a new series' first sample has no predecessor).",
        ("schema_hash",),
    ),
    # the analysis of the exposed schemas
    MetricSpec(
        "schema_lint_findings",
        "gauge",
        "Places a lint rule fires in a schema (gdx lint FILE shows them with pointers and fixes).",
        ("schema_hash", "rule", "severity"),
    ),
    MetricSpec(
        "shape_variants",
        "gauge",
        "Distinct schemas of this shape compiled within the window: many means per-request injection.",
        ("shape_hash",),
    ),
    MetricSpec(
        "shape_varying_path_info",
        "gauge",
        "JSON pointers whose literal values differ between variants of the shape (at most 5).",
        ("shape_hash", "path"),
    ),
    MetricSpec("schemas_analysed", "counter", "Distinct schemas linted by the daemon."),
    MetricSpec(
        "schema_analysis_skipped",
        "counter",
        "Schemas not analysed because the queue of texts was full.",
    ),
    MetricSpec("schema_analysis_seconds", "counter", "Time the daemon spent analysing schemas."),
    # per schema family (docs/families.md)
    MetricSpec(
        "family_compile_seconds",
        "counter",
        'Compile call wall time per schema family on this node (all engines); the rest in family="other".',
        ("family",),
    ),
    MetricSpec("family_requests", "counter", "Compile calls per schema family.", ("family",)),
    MetricSpec(
        "family_cache_hits",
        "counter",
        "Compile calls served from the grammar cache, per schema family.",
        ("family",),
    ),
    MetricSpec(
        "family_backend_mismatches",
        "counter",
        "Requests per schema family that met another backend than vLLM's router resolved them to, by"
        " outcome: rejected, other_backend (present once one happened).",
        ("family", "outcome"),
    ),
    MetricSpec(
        "family_validation_stall_seconds",
        "counter",
        f"Seconds vLLM API servers on this node spent in validations of {wire.STALL_SECONDS:g} s or more, per"
        " schema family"
        " (present once one happened).",
        ("family",),
    ),
    MetricSpec(
        "family_server_deaths",
        "counter",
        "vLLM API server processes on this node that died validating a schema of the family (present once"
        " one happened).",
        ("family",),
    ),
    MetricSpec(
        "family_recent_compile_seconds",
        "gauge",
        "Compile seconds of each exposed family, decayed with a 5-minute half-life: the ranking.",
        ("family",),
    ),
    MetricSpec(
        "family",
        "info",
        "One per exposed family: its kind and a readable name (its title, else from its structure).",
        ("family", "kind", "name"),
    ),
    MetricSpec(
        "family_variants",
        "gauge",
        "Distinct specs of the family compiled within the window.",
        ("family",),
    ),
    MetricSpec(
        "family_varying",
        "gauge",
        "What varies between the family's variants (at most 5): branches (distinct subsets of the union at"
        " pointer), optional (properties that come and go), literal (variants whose literal differs), order"
        " (distinct orders of the same members: an enum, required, a type list, a union's branches), names"
        " (distinct sets of definition names over the same definitions).",
        ("family", "pointer", "what"),
    ),
    MetricSpec(
        "family_findings",
        "gauge",
        "dynamic_schema: the family's variants are rarely reused in the window (injection per request).",
        ("family", "rule", "severity"),
    ),
    # the store's totals
    MetricSpec(
        "schemas_first_seen",
        "counter",
        "Distinct schema hashes seen for the first time on this node.",
    ),
    MetricSpec("schemas_tracked", "gauge", "Distinct schema hashes the engines on this node track now."),
    MetricSpec("schemas_evicted", "counter", "Schema hashes moved out of the exposed top set into other."),
    # what the store refused or rewrote of what probes sent (receiver/admission.py)
    MetricSpec(
        "probe_refused",
        "counter",
        "What the daemon refused from connected probes, by reason: engines_per_pod (a hello beyond"
        " --probe.max-engines-per-pod connected engines of its pod), engines_per_node (beyond"
        " --probe.max-engines), engine_taken (a hello naming another peer's connected engine),"
        " backends_per_engine (an entry naming a backend beyond an engine's first {max_engine_backends}),"
        " schema_hash_mismatch"
        " (a schema text that does not hash to the hash it was sent with).",
        ("reason",),
    ),
    MetricSpec(
        "probe_values_sanitised",
        "counter",
        "Label values probes sent outside their documented form, rewritten to it, by field: title"
        " ([A-Za-z0-9_.-], 64 characters), engine_version, probe_version, backend_version"
        " ([A-Za-z0-9_.+!-], 64 characters).",
        ("field",),
    ),
    # pods given the probe whose probe has not connected (with pod discovery)
    MetricSpec(
        "probe_absent",
        "gauge",
        f"Pods on this node injected with the probe (annotation {PROBE_ANNOTATION}: injected)"
        " whose probe is not connected, by reason: vllm_plugins (VLLM_PLUGINS lacks guided_decoding_probe),"
        " python_ignores_environment (python -E or -I), probe_disabled (GDX_PROBE=0),"
        " pythonpath_from_valuefrom, not_connected (none of these: starting, refused, or unreachable).",
        ("namespace", "pod", "reason"),
    ),
)

SELF: tuple[MetricSpec, ...] = (
    MetricSpec(
        "collector_success",
        "gauge",
        "1 when the collector's last refresh succeeded, 0 when it failed (see /healthz for why).",
        ("collector",),
    ),
    MetricSpec(
        "collector_duration_seconds",
        "gauge",
        "Time the collector's last refresh took.",
        ("collector",),
    ),
)

LOGS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "log_messages_dropped",
        "counter",
        "Log lines dropped: queue_full (the writer could not keep up or is blocked), write_error (stderr"
        " failed: disk full, closed).",
        ("reason",),
    ),
)

# collector name (`Collector.name`; `self`: the collectors' own success and duration, `logs`: the log's
# dropped lines) -> what it yields, in order
FAMILIES: dict[str, tuple[MetricSpec, ...]] = {
    "cpu": CPU,
    "nvml": NVML,
    "vllm": VLLM,
    "probe": PROBE,
    "self": SELF,
    "logs": LOGS,
}
_DECLARED = {spec.name: spec for specs in FAMILIES.values() for spec in specs}


def declared(name: str) -> MetricSpec:
    """The declaration of family `name` (without the prefix)."""
    return _DECLARED[name]


def describe(source: str, leave_out: Collection[str] = ()) -> list[Metric]:
    """Empty families of what collector `source` yields, but those named in `leave_out`: for its
    `describe()`, from which prometheus-client's registry reads each name and type."""
    return [spec.family() for spec in FAMILIES[source] if spec.name not in leave_out]
