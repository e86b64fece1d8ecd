# ruff: noqa: E501  (PromQL reads better on one line)
"""The "Guided decoding" dashboard as code (grafana-foundation-sdk 0.0.21): `make dashboards` writes
dashboards/guided-decoding.json; a test fails when the committed JSON differs.

Rows answer the on-call questions in order: is it stalling, which schemas, why, what does it cost,
per-step mask time and running compiles, exporter health. Every query filters on the variables
(datasource, instance = the node's exporter, pod, schema_hash), every counter is under rate(), units
are base units (ratios 0-1, no percent), and every panel's description says what to do when it is red.

A panel with an alert's line reads that alert's recording rule (alerts/generate.py `records()`, the
same names and the same window, never `$__rate_interval`) and draws the line from the same
`Params`: a series over its line is the alert's expression over its line, not a look-alike.

    python dashboards/generate.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common, dashboard, heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import GraphThresholdsStyleMode
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    DataTransformerConfig,
    DynamicConfigValue,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.heatmap import HeatmapColorMode, HeatmapColorScale
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run as a script (`make dashboards`): the rules' generator is a sibling
    sys.path.insert(0, str(ROOT))
from alerts import generate as alert_rules  # noqa: E402

OUTPUT = HERE / "guided-decoding.json"
UID = "guided-decoding"
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
N = 'instance=~"$instance"'
NP = 'instance=~"$instance", pod=~"$pod"'
NS = 'instance=~"$instance", schema_hash=~"$schema_hash"'
NPS = 'instance=~"$instance", pod=~"$pod", schema_hash=~"$schema_hash"'
RI = "$__rate_interval"  # panels without an alert line only
PARAMS = alert_rules.Params()
R = alert_rules.records(PARAMS)
W = PARAMS.window  # the alerts' window, for the few columns without a recording rule
ENGINE = "{{pod}} {{backend}}"  # the engine-level rules keep instance, namespace, pod, backend
LINE_MS = f"{PARAMS.compile_p95_seconds * 1000:g} ms"
SCHEMA_SLOW_SHARE = 0.05  # GuidedDecodingSchemaCompileSlow: `schema_slow_share > 0.05` (a test compares)
TOP_SCHEMAS = 50  # a node exposes 50 (--probe.max-schemas); the table and variable keep 50 in all
SCHEMA_RANK = "guided_decoding_schema_recent_compile_seconds"


def q(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        query = query.legend_format(legend)
    if instant:
        query = query.instant().format(PromQueryFormat.TABLE)
    return query


def thresholds(line: float | None, above_is_bad: bool = True) -> dashboard.ThresholdsConfig:
    steps = [Threshold(value=None, color="green")]
    if line is not None:
        steps = [Threshold(value=None, color="green" if above_is_bad else "red"),
                 Threshold(value=line, color="red" if above_is_bad else "green")]  # fmt: skip
    return dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps)


def series(title: str, unit: str, description: str, *queries: prometheus.Dataquery,
           line: float | None = None, above_is_bad: bool = True, span: int = 8,
           overrides: dict[str, list[DynamicConfigValue]] | None = None) -> timeseries.Panel:  # fmt: skip
    panel = (
        timeseries.Panel().title(title).unit(unit).description(description).datasource(DS).span(span).height(8)
        .thresholds(thresholds(line, above_is_bad)).min(0)
    )  # fmt: skip
    if line is not None:
        panel = panel.thresholds_style(
            common.GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.LINE)
        )
    for query in queries:
        panel = panel.with_target(query)
    for ref, properties in (overrides or {}).items():
        panel = panel.override_by_query(ref, properties)
    return panel


def p95(metric: str, by: str, selector: str) -> str:
    return f"histogram_quantile(0.95, sum by ({by}, le) (rate({metric}_bucket{{{selector}}}[{RI}])))"


# An override that draws a context series dashed: the line is not its alert's.
DASHED = DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]})


def stalling() -> list[Any]:
    p, w = PARAMS, PARAMS.window
    alerting = 'alertstate="firing", alertname=~"GuidedDecoding.*", severity=~"critical|warning"'
    return [
        series(f"Compile P95 (line: {LINE_MS})", "s",
               f"Wall time of grammar compiles over {w}, cache hits included, per pod and backend: the recording rule "
               f"the GuidedDecodingCompileP95High page reads. A solid line over the {LINE_MS} line is that page's "
               "first condition; it pages when it holds for "
               f"{p.long_for} and 'Slow compiles per second' is over its line too. Dashed: the real compile P95 "
               "(cache misses only), how slow a compile is when it happens; it is context, the line is not its "
               "alert. Look at the schema table below for the schema at fault.",
               q(f"{R.compile_p95}{{{NP}}}", ENGINE),
               q(f"{R.miss_p95}{{{NP}}}", f"Real compile P95 (cache misses) {ENGINE}", ref="B"),
               line=p.compile_p95_seconds, overrides={"B": [DASHED]}),
        series(f"Slow compiles per second (line: {p.min_slow_rate:g})", "ops",
               f"Compile calls over {LINE_MS} per second over {w}, per pod and backend: the guard of the "
               f"GuidedDecodingCompileP95High page (it needs >= {p.min_slow_rate:g}/s beside the P95 over its line). "
               "A quiet pod's P95 is its slowest call; under this line it does not page however high the P95.",
               q(f"{R.slow}{{{NP}}}", ENGINE), line=p.min_slow_rate),
        stat.Panel().title("GuidedDecoding alerts firing").unit("none").datasource(DS).span(8).height(8)
        .description("GuidedDecoding alerts that page or ticket (severity critical or warning) firing now on the "
                     "selected nodes; info alerts are not counted. Each has a runbook link in its annotations.")
        .thresholds(thresholds(1)).with_target(
            q(f"count(ALERTS{{{alerting}, {N}}}) or vector(0)", "firing")),
        series(f"Cache hit ratio (0-1, line: {p.hit_ratio:g})", "none",
               f"Share of compile calls served from the grammar cache over {w}, per pod and backend: the recording "
               f"rule of GuidedDecodingCacheHitRatioLow (under the line for {p.long_for} with at least "
               f"{p.min_slow_rate:g} misses/s on a backend that caches). Low means schemas change between requests: the families "
               "table ranks the schema built per request and 'Families: what varies' names the field injected.",
               q(f"{R.hit_ratio}{{{NP}}}", ENGINE), line=p.hit_ratio, above_is_bad=False, span=6),
        series(f"Grammar wait P95 (line: {p.grammar_wait_p95_seconds * 1000:g} ms)", "s",
               f"From submission to a ready grammar over {w}, queueing in the compile pool included, per pod and "
               "backend: the recording rule of GuidedDecodingGrammarWaitHigh (over the line for "
               f"{p.long_for} with over {p.min_rate:g} compile calls/s). Red: requests are parked behind compiles; "
               "find the slow schema below.",
               q(f"{R.wait_p95}{{{NP}}}", ENGINE), line=p.grammar_wait_p95_seconds, span=6),
        series("New schemas (per second)", "ops",
               "Schema hashes seen for the first time on the node. A steady stream means a schema is built "
               "per request: every one of them compiles from scratch.",
               q(f"sum by (instance) (rate(guided_decoding_schemas_first_seen_total{{{N}}}[{RI}]))", "{{instance}}"),
               span=6),
        series("vLLM TTFT and queue time P95", "s",
               "vLLM's own time to first token and queue time (passed through by the daemon), on the selected "
               "nodes and pods. When they rise with compile P95 and grammar wait, compiles are what users feel.",
               q(p95("vllm:time_to_first_token_seconds", "pod", NP), "TTFT {{pod}}"),
               q(p95("vllm:request_queue_time_seconds", "pod", NP), "queue {{pod}}", ref="B"), span=6),
        series("vLLM requests waiting, by reason", "none",
               "vLLM's own waiting requests by reason (vllm:num_requests_waiting_by_reason, passed through): "
               "'capacity' waits for scheduling room, 'deferred' for a transient constraint, a grammar still "
               "compiling among them. Beside 'Grammar wait P95': deferred requests rising with grammar wait are "
               "requests parked behind compiles. When vLLM exports request_deferred_time_seconds{reason=\"grammar\"} "
               "(PR 46575) it is the engine's own grammar wait (docs/dashboard.md).",
               q(f"sum by (pod, reason) (vllm:num_requests_waiting_by_reason{{{NP}}})", "{{pod}} {{reason}}"), span=6),
    ]  # fmt: skip


# The families table's ranking: a family sums the variants of a schema built per request, each
# compiled once; the daemon's decayed gauge sees them (rate() of a first sample is zero).
FAMILY_RANK = (
    f'sort_desc(sum by (family) (guided_decoding_family_recent_compile_seconds{{{N}, family!="other"}}))'
)


def families() -> Any:
    f = f'{N}, family!="other"'
    merged = [
        q(f"max by (family, kind, name) (guided_decoding_family_info{{{f}}})", ref="A", instant=True),
        q(FAMILY_RANK, ref="B", instant=True),
        q(f"sum by (family) (rate(guided_decoding_family_compile_seconds_total{{{f}}}[{RI}]))", ref="C", instant=True),
        q(f"sum by (family) (rate(guided_decoding_family_requests_total{{{f}}}[{RI}]))", ref="D", instant=True),
        q(f"sum by (family) (rate(guided_decoding_family_cache_hits_total{{{f}}}[{RI}])) / sum by (family) (rate(guided_decoding_family_requests_total{{{f}}}[{RI}]))",
          ref="E", instant=True),
        q(f"max by (family) (guided_decoding_family_variants{{{f}}})", ref="F", instant=True),
        q(f'max by (family, severity) (guided_decoding_family_findings{{{f}, rule="dynamic_schema"}})', ref="G", instant=True),
    ]  # fmt: skip
    names = {"Value #B": "recent compile s", "Value #C": "compile s/s", "Value #D": "requests/s", "Value #E": "hit ratio",
             "Value #F": "variants", "severity": "dynamic_schema"}  # fmt: skip
    panel = (
        table.Panel().title("Top schema families").unit("none").datasource(DS).span(24).height(10)
        .description("Schema families (docs/families.md) by recent compile seconds: a family groups the variants of a "
                     "schema a service builds per request (a tenant's enum, a timestamp, a tool subset), so the "
                     "injected one ranks first even though each of its hashes compiled once. Many variants, a low hit "
                     "ratio and a dynamic_schema error or warning: the service injects a value per request; 'Families: "
                     "what varies' names the pointer and the DynamicSchema runbook finds the service. info: static "
                     "variants, each reused. Families outside the daemon's top N (family=\"other\") are not listed.")
        .thresholds(thresholds(None)).sort_by([common.TableSortByFieldState().display_name("recent compile s").desc(True)])
        .with_transformation(DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True, "Value #A": True, "Value #G": True}, "renameByName": names,
            "indexByName": {"family": 0, "name": 1, "kind": 2, "Value #B": 3, "Value #C": 4, "Value #D": 5,
                            "Value #E": 6, "Value #F": 7, "severity": 8}}))
    )  # fmt: skip
    for query in merged:
        panel = panel.with_target(query)
    return panel


def top_schemas(selector: str) -> str:
    """The schema table's and variable's bound: the hashes with the most recent compile seconds."""
    return f"topk({TOP_SCHEMAS}, max by (schema_hash) ({SCHEMA_RANK}{{{selector}}}))"


def schemas() -> list[Any]:
    top = f"and on (schema_hash) {top_schemas(NS)}"
    hits = f"sum by (schema_hash) (rate(guided_decoding_schema_cache_hits_total{{{NPS}}}[{W}]))"
    calls = f"sum by (schema_hash) (rate(guided_decoding_schema_requests_total{{{NPS}}}[{W}]))"
    merged = [
        q(f"max by (schema_hash, title, family) (guided_decoding_schema_info{{{NS}}}) {top}", ref="A", instant=True),
        q(f"sum by (schema_hash) (rate(guided_decoding_schema_compile_seconds_sum{{{NPS}}}[{W}])) {top}", ref="B", instant=True),
        q(f"max by (schema_hash) ({R.schema_slow_share}{{{NPS}}}) {top}", ref="C", instant=True),
        q(f"max by (schema_hash) ({R.schema_mean}{{{NPS}}}) {top}", ref="D", instant=True),
        q(f"{hits} / {calls} {top}", ref="E", instant=True),
        q(f"sum by (schema_hash) ({R.schema_requests}{{{NPS}}}) {top}", ref="F", instant=True),
        q(f"max by (schema_hash) (max by (schema_hash, family) (guided_decoding_schema_info{{{NS}}}) * on (family) group_left max by (family) (guided_decoding_family_variants{{{N}}})) {top}",
          ref="G", instant=True),
        q(f"sum by (schema_hash) (guided_decoding_schema_lint_findings{{{NS}}}) {top}", ref="H", instant=True),
        q(f"sort_desc({top_schemas(NS)})", ref="I", instant=True),
    ]  # fmt: skip
    share = f"share over {LINE_MS}"
    names = {"Value #B": "compile s/s", "Value #C": share, "Value #D": "mean compile (s)", "Value #E": "hit ratio",
             "Value #F": "requests/s", "Value #G": "variants of its family", "Value #H": "lint findings",
             "Value #I": "recent compile s"}  # fmt: skip
    order = ["schema_hash", "title", "family", "Value #I", "Value #C", "Value #D", "Value #B", "Value #F",
             "Value #E", "Value #G", "Value #H"]  # fmt: skip
    # The link keeps the node, pod and data source: `:queryparam` writes `var-NAME=VALUE` once per
    # selected value (Grafana's format for multi-value variables; "All" travels as `$__all`).
    keep = "${datasource:queryparam}&${instance:queryparam}&${pod:queryparam}"
    link = f"/d/{UID}/guided-decoding?var-schema_hash=${{__value.raw}}&{keep}&${{__url_time_range}}"
    panel = (
        table.Panel().title("Top schemas").unit("none").datasource(DS).span(24).height(10)
        .description(f"The {TOP_SCHEMAS} schema hashes with the most recent compile seconds on the selected nodes, "
                     "each with its family (empty until the daemon has analysed it). A schema built per request spreads "
                     "its cost over many hashes: the families table above ranks them together. "
                     f"'{share}': the share of its compile calls over {LINE_MS} in {W}, on its worst pod (the recording "
                     f"rule of GuidedDecodingSchemaCompileSlow, red over {SCHEMA_SLOW_SHARE:g}; the ticket also needs "
                     f"over {PARAMS.min_rate:g} requests/s on that pod for {PARAMS.long_for}); 'mean compile (s)': its "
                     "mean compile call on its worst pod. Lint findings: `gdx lint` on the schema names them with fixes. "
                     "Click a hash to filter the dashboard on it (node, pod and data source kept); `gdx hash FILE` "
                     "finds your schema here.")
        .thresholds(thresholds(None)).sort_by([common.TableSortByFieldState().display_name("recent compile s").desc(True)])
        .with_transformation(DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True, "Value #A": True}, "renameByName": names,
            "indexByName": {name: i for i, name in enumerate(order)}}))
        .override_by_name("schema_hash", [DynamicConfigValue(id_val="links", value=[{
            "title": "Filter on this schema", "url": link}])])
        .override_by_name(share, [
            DynamicConfigValue(id_val="thresholds", value={"mode": "absolute", "steps": [
                {"value": None, "color": "green"}, {"value": SCHEMA_SLOW_SHARE, "color": "red"}]}),
            DynamicConfigValue(id_val="custom.cellOptions", value={"type": "color-text"})])
    )  # fmt: skip
    for query in merged:
        panel = panel.with_target(query)
    return [families(), panel]


# Where xgrammar compiles a schema with keywords it does not enforce, per backend, as the UnenforcedKeywords
# alert joins them: on (instance, schema_hash), a hash being node-local. Each side is first made one series
# per (instance, schema_hash[, backend]): findings carry rule and severity, schema_info title, family and
# kind, so two backends compiling one schema, or one schema on two nodes, can never match many-to-many.
UNENFORCED = (
    "sum by (backend) ("
    f'sum by (instance, schema_hash) (guided_decoding_schema_lint_findings{{{NS}, rule="xgrammar_unenforced"}})'
    " * on (instance, schema_hash) group_right"
    f' max by (instance, schema_hash, backend) (guided_decoding_schema_info{{{NS}, backend="xgrammar"}}))'
)


def why() -> list[Any]:
    varying = (
        f"max by (family, name, pointer, what) (guided_decoding_family_varying{{{N}}}"
        f" * on (instance, family) group_left (name) max by (instance, family, name) (guided_decoding_family_info{{{N}}})"
        f" or on (instance, family, pointer, what) guided_decoding_family_varying{{{N}}})"
    )
    return [
        table.Panel().title("Families: what varies").unit("none").datasource(DS).span(12).height(8)
        .description("What differs between the variants of each family, at most 5 pointers per family. what=literal: "
                     "variants whose value at the pointer differs (an injected enum, const, pattern or timestamp; a "
                     "regex's or grammar's text has no pointer); branches: distinct subsets of the union there (a tool "
                     "list per tenant); optional: properties that come and go. Move what varies out of the schema: "
                     "into the prompt, checked after decoding (the DynamicSchema runbook).")
        .thresholds(thresholds(None))
        .with_target(q(f"sort_desc({varying})", ref="A", instant=True))
        .with_transformation(DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True}, "renameByName": {"Value": "how many"},
            "indexByName": {"family": 0, "name": 1, "pointer": 2, "what": 3, "Value": 4}})),
        table.Panel().title("Lint findings by rule").unit("none").datasource(DS).span(6).height(8)
        .description("Places each rule fires across the exposed schemas. error: fix before it pages "
                     "(llguidance_refused, too_complex); `gdx lint` shows pointers and fixes. A schema built per "
                     "request is dynamic_schema, on the families table.")
        .thresholds(thresholds(None))
        .with_target(q(f'sum by (rule, severity) (guided_decoding_schema_lint_findings{{{N}, schema_hash=~"$schema_hash"}})', instant=True)),
        table.Panel().title("Unenforced keywords by backend").unit("none").datasource(DS).span(6).height(8)
        .description("Keywords in schemas in use that xgrammar compiles but does not enforce, where xgrammar is the "
                     "backend compiling them (the join of GuidedDecodingUnenforcedKeywords, an info alert): outputs may "
                     "violate the schema silently. Validate after decoding or change backend.")
        .thresholds(thresholds(None))
        .with_target(q(UNENFORCED, instant=True)),
    ]  # fmt: skip


def cost() -> list[Any]:
    p = PARAMS
    return [
        heatmap.Panel().title("CPU busy per core (0-1)").datasource(DS).span(12).height(8)
        .description("Each core's busy share, one row per node and core (`NODE cpu N`), coloured on a fixed 0-1 "
                     "scale so a darker cell is a busier core on every node and every zoom. A wall of dark while GPUs "
                     "idle is what GuidedDecodingCPUStarvation pages on ('Node CPU busy' below is its rule): compiles "
                     "starve the engine loop. Fix the schemas first, then size the pods' CPU.")
        .calculate(False)
        .color(heatmap.HeatmapColorOptions().mode(HeatmapColorMode.SCHEME).scheme("Oranges").fill("dark-orange")
               .scale(HeatmapColorScale.LINEAR).exponent(0.5).steps(64).reverse(False).min(0).max(1))
        .with_target(q(f'1 - rate(guided_decoding_cpu_seconds_total{{{N}, mode="idle"}}[{RI}])', "{{instance}} cpu {{cpu}}")),
        series("GPU utilisation per GPU (0-1)", "none",
               "Share of time a kernel ran, per GPU (NVML). Low while CPUs are busy and compiles run: the GPUs "
               "wait for the host. GuidedDecodingCPUStarvation reads the node's average ('Node GPU utilisation').",
               q(f"guided_decoding_gpu_utilization_ratio{{{N}}}", "{{instance}} GPU {{gpu}}"), span=12),
        series("Engine CPU (cores)", "none",
               "CPU seconds per second of each engine process, from its probe. Compare with the compile rate: "
               "grammar compiles are CPU work on the engine's host.",
               q(f"sum by (pod) (rate(guided_decoding_engine_cpu_seconds_total{{{NP}}}[{RI}]))", "{{pod}}"), span=8),
        series(f"Node CPU busy (0-1, line: {p.cpu_busy:g})", "none",
               f"The node's average CPU busy share over {p.window} (the recording rule of GuidedDecodingCPUStarvation). "
               f"Over {p.cpu_busy:g} while the node's GPUs are under {p.gpu_idle_below:g} utilised and grammars compile, "
               f"for {p.starvation_for}, pages CPUStarvation.",
               q(f"{R.cpu_busy}{{{N}}}", "{{instance}}"), line=p.cpu_busy, span=8),
        series(f"Engine CPU throttled (share of CFS periods, line: {p.throttled_share:g})", "none",
               f"Share of the engine container's 100 ms CFS periods over {p.window} in which it used up its CPU quota "
               "(the recording rule of GuidedDecodingEngineCPUThrottled; the probe reads the container's own cgroup). "
               f"Over {p.throttled_share:g} while grammars compile: every thread of the container, the engine loop too, "
               "waits for the next period, so tokens stall behind compiles. Compare with 'Compile pool and CPU quota'.",
               q(f"{R.throttled}{{{NP}}}", "{{pod}}"), line=p.throttled_share, span=8),
        series("Compile pool and CPU quota", "none",
               "Per engine pod: the compile pool's workers (vLLM: (cpu_count + 1) // 2, sized from the CPUs the "
               "engine counts, the node's, whatever its quota), the workers busy now, the container's CPU quota in "
               "cores (absent: none) and the CPUs the engine counts. Workers well above the quota: a compile burst "
               "runs the quota out (see 'Engine CPU throttled').",
               q(" or ".join(f'label_replace({expr}, "what", "{what}", "", "")' for what, expr in (
                   ("pool workers", f"max by (pod) (guided_decoding_compile_pool_workers{{{NP}}})"),
                   ("busy", f"sum by (pod) (guided_decoding_compile_in_progress{{{NP}}})"),
                   ("quota cores", f"max by (pod) (guided_decoding_engine_cpu_quota_cores{{{NP}}} > 0)"),
                   ("CPUs counted", f"max by (pod) (guided_decoding_engine_cpus{{{NP}}})"),
               )), "{{pod}} {{what}}"), span=8),
        series("Grammar cache: bytes and limit", "bytes",
               "Bytes each grammar compiler's cache holds, per pod, backend and compiler (vLLM 0.33 has two: "
               "compiler, full_vocab_compiler), and its limit (vLLM: VLLM_XGRAMMAR_CACHE_MB, 512 MiB). At the limit "
               "with a falling hit ratio, the cache evicts what comes back: raise it. Growing without end under the "
               "limit with a low hit ratio: every schema is new (DynamicSchema), a bigger cache will not help.",
               q(f'label_replace(sum by (pod, backend, compiler) (guided_decoding_grammar_cache_bytes{{{NP}}}), "what", "bytes", "", "")'
                 f' or label_replace(max by (pod, backend, compiler) (guided_decoding_grammar_cache_limit_bytes{{{NP}}}), "what", "limit", "", "")',
                 "{{pod}} {{backend}} {{compiler}} {{what}}"), span=8),
        series(f"Node GPU utilisation (0-1, line: {p.gpu_idle_below:g})", "none",
               "The node's average GPU utilisation (the recording rule of GuidedDecodingCPUStarvation), beside the "
               f"CPU: red under {p.gpu_idle_below:g}. Busy CPUs and idle GPUs together mean the host is the bottleneck.",
               q(f"{R.gpu_utilization}{{{N}}}", "{{instance}}"), line=p.gpu_idle_below, above_is_bad=False, span=8),
    ]  # fmt: skip


def masks() -> list[Any]:
    stuck = PARAMS.stuck_seconds
    return [
        series("Mask fill P95 per step", "s",
               "Time to fill the batch's token bitmask per engine step. It grows with concurrent structured "
               "requests and with grammars built by dynamic compilation; it delays every token of the batch.",
               q(p95("guided_decoding_mask_seconds", "pod", NP), "{{pod}}")),
        series("Compiles in progress", "none",
               "Compiles running now per pod. Stuck at the pool size (vLLM: (cores+1)/2) means requests queue "
               "behind compiles.", q(f"sum by (pod) (guided_decoding_compile_in_progress{{{NP}}})", "{{pod}}")),
        series(f"Oldest running compile (line: {stuck:g} s)", "s",
               "Age of the longest-running compile per pod and backend, the expression of GuidedDecodingCompileStuck: "
               f"over {stuck:g} s it pages. Compiles cannot be cancelled; the pool worker is lost until it ends.",
               q(f"max by (instance, namespace, pod, backend) (guided_decoding_compile_oldest_running_seconds{{{NP}}})", ENGINE),
               line=stuck),
        series("SGLang grammar, its own metrics (where no probe runs)", "none",
               "SGLang's own grammar families, passed through from --sglang.target pods: compile P95 (s), requests "
               "waiting for a grammar, and its grammar cache hit ratio (SGLang caches compiled grammars itself). "
               "SGLang 0.5.23 declares these families but records only the queue; the others fill in where a release "
               "records them. With the probe in the engine, rows 1-2 have the same and more, per schema.",
               q(f"histogram_quantile(0.95, sum by (pod, le) (rate(sglang:grammar_compilation_time_seconds_bucket{{{NP}}}[{RI}])))",
                 "compile P95 {{pod}}"),
               q(f"sum by (pod) (sglang:num_grammar_queue_reqs{{{NP}}})", "waiting for a grammar {{pod}}", ref="B"),
               q(f"sum by (pod) (rate(sglang:num_grammar_cache_hit_total{{{NP}}}[{RI}])) / sum by (pod) (rate(sglang:num_grammar_total{{{NP}}}[{RI}]))",
                 "cache hit ratio {{pod}}", ref="C"), span=12),
        series("Grammar failures (per second)", "ops",
               "Inside the engine, per pod, backend and reason: compiled grammars that refused tokens their own mask "
               "allowed or raised (rejected, error: the engine ends the request with an error) and failed compiles "
               "(internal and timeout are the engine's; invalid_schema and unsupported the client's). Any of the "
               "engine's opens GuidedDecodingGrammarFailures.",
               q(f"sum by (pod, backend, reason) (rate(guided_decoding_grammar_rejections_total{{{NP}}}[{RI}]))",
                 "{{pod}} {{backend}} {{reason}}"),
               q(f"sum by (pod, backend, reason) (rate(guided_decoding_compile_errors_total{{{NP}}}[{RI}]))",
                 "{{pod}} {{backend}} compile {{reason}}", ref="B"), span=12),
    ]  # fmt: skip


def routing() -> list[Any]:
    mismatches = f"rate(guided_decoding_family_backend_mismatches_total{{{N}}}[{RI}])"
    named = (
        f"sum by (family, name, outcome) ({mismatches} * on (instance, family) group_left (name)"
        f" max by (instance, family, name) (guided_decoding_family_info{{{N}}})"
        f" or on (instance, family, outcome) {mismatches})"
    )
    return [
        series("Structured requests by resolved backend (per second)", "ops",
               "vLLM: each structured request by the backend its router resolved it to and the outcome on its engine, "
               "which keeps the backend of its first structured request: compiled (the same backend), rejected "
               "(another: vLLM 0.33 answers HTTP 400; GuidedDecodingBackendRejections, the page over "
               f"{PARAMS.rejected_share:.0%} of an engine's requests), other_backend (vLLM 0.32 compiles it with the "
               "engine's backend anyway: the keyword that made it fall back is not enforced).",
               q(f"sum by (pod, engine, resolved, outcome) (rate(guided_decoding_routed_requests_total{{{NP}}}[{RI}]))",
                 "{{pod}}/{{engine}} {{resolved}} {{outcome}}"), span=12),
        series("Backend mismatches by family (per second)", "ops",
               "Requests of each family refused (rejected) or compiled by another backend than they resolved to "
               "(other_backend), on the selected nodes. `gdx lint --engine vllm==VERSION` names the keyword that "
               "sends the family's schemas elsewhere (backend_mismatch); pin structured_outputs_config.backend.",
               q(named, "{{name}} {{family}} {{outcome}}"), span=12),
    ]  # fmt: skip


def api_server() -> list[Any]:
    stall, w = PARAMS.validation_stall_seconds, PARAMS.failures_window
    by = "instance, namespace, pod, engine"
    slow = (f"sum by ({by}) (increase(guided_decoding_validation_seconds_count{{{NP}}}[{w}]))"
            f' - sum by ({by}) (increase(guided_decoding_validation_seconds_bucket{{{NP}, le="{stall:.1f}"}}[{w}]))')  # fmt: skip
    return [
        series("API server validation P99 by backend", "s",
               "vLLM's API server validates each structured request on its event loop, by the backend its router "
               "resolves it to (rejected: HTTP 400): the server answers nothing meanwhile. Under auto, a schema with "
               "patternProperties goes to outlines, unbounded.",
               q(f"histogram_quantile(0.99, sum by (pod, backend, le) (rate(guided_decoding_validation_seconds_bucket{{{NP}}}[{RI}])))",
                 "{{pod}} {{backend}}")),
        series(f"API server validations over {stall:g} s (last {w})", "none",
               "What GuidedDecodingAPIServerStalls reads: any opens a ticket naming the schema. `gdx lint --engine vllm` "
               "flags such schemas before they are sent (server_stall).",
               q(slow, "{{pod}}")),
        series(f"API server deaths (last {PARAMS.deaths_window})", "none",
               "vLLM API server processes that died validating a structured request (outlines, unbounded in memory), "
               "named by the process that replaced them: GuidedDecodingAPIServerKilled pages on the first, naming the "
               "schema. `gdx lint --engine vllm` flags such schemas (server_crash).",
               q(f"sum by (pod) (increase(guided_decoding_server_deaths_total{{{NP}}}[{PARAMS.deaths_window}]))", "{{pod}}")),
    ]  # fmt: skip


def guard() -> list[Any]:
    w = PARAMS.failures_window
    return [
        series(f"Guard refusals by reason (last {w})", "none",
               "Structured requests vLLM's API server's guard (GDX_GUARD=enforce) refused with HTTP 400 before "
               "vLLM's unbounded outlines validation of their schema: a schema that killed a server of the pod, "
               "ran past the guard's bounded first validation, or that gdx lint --write-guard predicted; and, "
               "on every path, a schema whose compiles ran past the daemon's --guard.compile-budget (compile_budget). "
               "GuidedDecodingGuardRefusing opens a ticket while they continue; the server stays up.",
               q(f'sum by (pod, reason) (increase(guided_decoding_guard_requests_total{{{NP}, action="refused"}}[{w}]))',
                 "{{pod}} {{reason}}")),
        series(f"Guard: what observe would refuse (last {w})", "none",
               "With GDX_GUARD=observe the guard only counts: the requests it would refuse under enforce. "
               "Zero here for a day is the evidence to turn enforce on.",
               q(f'sum by (pod, reason) (increase(guided_decoding_guard_requests_total{{{NP}, action="would_refuse"}}[{w}]))',
                 "{{pod}} {{reason}}")),
        series(f"Guard: refused families (last {w})", "none",
               "The same requests, refused or that observe would refuse, by the family of the schema (family_info "
               "says what it is; empty: not analysed yet, or the zeros the guard sets when it arms): the service to "
               "find and the schema to fix.",
               q(f"sum by (family, reason, action) (increase(guided_decoding_guard_requests_total{{{NP}}}[{w}]))",
                 "{{family}} {{reason}} {{action}}")),
    ]  # fmt: skip


def health() -> list[Any]:
    return [
        series("Collector success", "none",
               "1 when each of the daemon's sources worked at the last scrape. 0: its /healthz says why "
               "(no GPU driver, an unreachable target, an unusable socket).",
               q(f"guided_decoding_collector_success{{{N}}}", "{{instance}} {{collector}}"), line=1, above_is_bad=False),
        series("Engine targets up", "none",
               "1 when an engine's /metrics answered and parsed. 0: the engine is down or unreachable from the node.",
               q(f'guided_decoding_target_up{{{N}, pod=~"$pod"}}', "{{pod}}"), line=1, above_is_bad=False),
        series("Probe messages by result (per second)", "ops",
               "Snapshots the probes send, by result. Anything but ok means a probe and daemon disagree "
               "(versions) or something else writes to the socket.",
               q(f"sum by (result) (rate(guided_decoding_probe_snapshots_total{{{N}}}[{RI}]))", "{{result}}")),
    ]  # fmt: skip


SCHEMA_VARIABLE = f"query_result(sort_desc({top_schemas(N)}))"
SCHEMA_VARIABLE_REGEX = '/schema_hash="([^"]+)"/'


def build() -> dict[str, Any]:
    variables = [
        dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        dashboard.QueryVariable("instance").label("Node (exporter)").datasource(DS)
        .query("label_values(guided_decoding_collector_success, instance)").refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .include_all(True).multi(True).all_value(".*"),
        dashboard.QueryVariable("pod").label("Pod").datasource(DS)
        .query('label_values(guided_decoding_compile_requests_total{instance=~"$instance"}, pod)')
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True).multi(True).all_value(".*"),
        # query_result(): an instant query at the range's end, so only the hashes the selected nodes expose
        # now, the top 50 by recent compile seconds, hottest first (sort off keeps that order); the regex
        # takes the hash out of Grafana's `{schema_hash="..."} VALUE TIMESTAMP` lines. label_values()
        # would list every hash any node exposed over the whole range, evicted ones included.
        dashboard.QueryVariable("schema_hash").label("Schema hash").datasource(DS)
        .query(SCHEMA_VARIABLE).regex(SCHEMA_VARIABLE_REGEX).sort(VariableSort.DISABLED)
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True).multi(True).all_value(".*"),
    ]  # fmt: skip
    board = (
        dashboard.Dashboard("Guided decoding").uid(UID).tags(["guided-decoding", "vllm", "structured-output"])
        .description("Grammar compiles per schema, the cache, and what they cost: guided-decoding-exporter.")
        .refresh("30s").time("now-1h", "now").timezone("browser")
    )  # fmt: skip
    for variable in variables:
        board = board.with_variable(variable)
    rows = [
        ("1. Is it stalling?", stalling()),
        ("2. Which schemas?", schemas()),
        ("3. Why?", why()),
        ("4. What does it cost?", cost()),
        ("5. Mask time and running compiles", masks()),
        ("6. Backend routing (vLLM)", routing()),
        ("7. vLLM's API server", api_server()),
        ("8. The guard (vLLM's API server)", guard()),
        ("9. Exporter health", health()),
    ]
    for title, panels in rows:
        board = board.with_row(dashboard.Row(title))
        for panel in panels:
            board = board.with_panel(panel)
    doc: dict[str, Any] = json.loads(JSONEncoder(sort_keys=True, indent=2).encode(board.build()))
    return doc


def render() -> str:
    return json.dumps(build(), sort_keys=True, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT} is stale: run make dashboards", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
