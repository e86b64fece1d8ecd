# ruff: noqa: E501  (PromQL reads better on one line)
"""The "Guided decoding" dashboard as code (grafana-foundation-sdk 0.0.21): `make dashboards` writes
dashboards/guided-decoding.json; a test fails when the committed JSON differs.

Rows answer the on-call questions in order: is it stalling, which schemas, why, what does it cost,
per-step mask time and running compiles, exporter health. Every query filters on the variables
(datasource, instance = the node's exporter, pod, schema_hash), every counter is under rate(), units
are base units (ratios 0-1, no percent), thresholds sit where the alerts are, and every panel's
description says what to do when it is red.

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
)

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "guided-decoding.json"
UID = "guided-decoding"
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
N = 'instance=~"$instance"'
NP = 'instance=~"$instance", pod=~"$pod"'
NPS = 'instance=~"$instance", pod=~"$pod", schema_hash=~"$schema_hash"'
RI = "$__rate_interval"
COMPILE_LINE = 0.005  # GuidedDecodingCompileP95High
WAIT_LINE = 0.1  # GuidedDecodingGrammarWaitHigh
HIT_LINE = 0.95  # GuidedDecodingCacheHitRatioLow
STUCK_LINE = 60  # GuidedDecodingCompileStuck


def q(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DS)
    if legend:
        query = query.legend_format(legend)
    if instant:
        query = query.instant().format("table")
    return query


def thresholds(line: float | None, above_is_bad: bool = True) -> dashboard.ThresholdsConfig:
    steps = [Threshold(value=None, color="green")]
    if line is not None:
        steps = [Threshold(value=None, color="green" if above_is_bad else "red"),
                 Threshold(value=line, color="red" if above_is_bad else "green")]  # fmt: skip
    return dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps)


def series(title: str, unit: str, description: str, *queries: prometheus.Dataquery,
           line: float | None = None, above_is_bad: bool = True, span: int = 8) -> timeseries.Panel:  # fmt: skip
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
    return panel


def p95(metric: str, by: str, selector: str) -> str:
    return f"histogram_quantile(0.95, sum by ({by}, le) (rate({metric}_bucket{{{selector}}}[{RI}])))"


def stalling() -> list[Any]:
    return [
        series("Compile P95 (line: 5 ms)", "s",
               "Wall time of grammar compiles, cache hits included, per pod. Red above the 5 ms line "
               "(the CompileP95High page): look at the schema table below for the schema at fault.",
               q(p95("guided_decoding_compile_seconds", "pod", NP), "{{pod}}"), line=COMPILE_LINE),
        series("Cache hit ratio (0-1, line: 0.95)", "none",
               "Share of compile calls served from the grammar cache. Low means schemas change between "
               "requests: the families table ranks the schema built per request and 'Families: what varies' names the field injected.",
               q(f"sum by (pod) (rate(guided_decoding_compile_cache_hits_total{{{NP}}}[{RI}])) / sum by (pod) (rate(guided_decoding_compile_requests_total{{{NP}}}[{RI}]))", "{{pod}}"),
               line=HIT_LINE, above_is_bad=False),
        series("New schemas (per second)", "ops",
               "Schema hashes seen for the first time on the node. A steady stream means a schema is built "
               "per request: every one of them compiles from scratch.",
               q(f"sum by (instance) (rate(guided_decoding_schemas_first_seen_total{{{N}}}[{RI}]))", "{{instance}}")),
        series("Grammar wait P95 (line: 100 ms)", "s",
               "From submission to a ready grammar, queueing in the compile pool included. Red: requests "
               "are parked behind compiles (GrammarWaitHigh); find the slow schema below.",
               q(p95("guided_decoding_grammar_wait_seconds", "pod", NP), "{{pod}}"), line=WAIT_LINE),
        series("vLLM TTFT and queue time P95", "s",
               "vLLM's own time to first token and queue time (passed through by the daemon). When they rise "
               "with compile P95 and grammar wait, compiles are what users feel.",
               q(p95("vllm:time_to_first_token_seconds", "pod", 'pod=~"$pod"'), "TTFT {{pod}}"),
               q(p95("vllm:request_queue_time_seconds", "pod", 'pod=~"$pod"'), "queue {{pod}}", ref="B")),
        stat.Panel().title("GuidedDecoding alerts firing").unit("none").datasource(DS).span(8).height(8)
        .description("Alerts of this project firing now. Each has a runbook link in its annotations.")
        .thresholds(thresholds(1)).with_target(
            q('count(ALERTS{alertstate="firing", alertname=~"GuidedDecoding.*"}) or vector(0)', "firing")),
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


def schemas() -> list[Any]:
    merged = [
        q(
            f'max by (schema_hash, title, family) (guided_decoding_schema_info{{{N}, schema_hash=~"$schema_hash"}})',
            ref="A",
            instant=True,
        ),
        q(
            f"sum by (schema_hash) (rate(guided_decoding_schema_compile_seconds_sum{{{NPS}}}[{RI}]))",
            ref="B",
            instant=True,
        ),
        q(p95("guided_decoding_schema_compile_seconds", "schema_hash", NPS), ref="C", instant=True),
        q(
            f"sum by (schema_hash) (rate(guided_decoding_schema_cache_hits_total{{{NPS}}}[{RI}])) / sum by (schema_hash) (rate(guided_decoding_schema_requests_total{{{NPS}}}[{RI}]))",
            ref="D",
            instant=True,
        ),
        q(
            f"sum by (schema_hash) (rate(guided_decoding_schema_requests_total{{{NPS}}}[{RI}]))",
            ref="E",
            instant=True,
        ),
        q(
            f'max by (schema_hash) (max by (schema_hash, family) (guided_decoding_schema_info{{{N}, schema_hash=~"$schema_hash"}}) * on (family) group_left max by (family) (guided_decoding_family_variants{{{N}}}))',
            ref="F",
            instant=True,
        ),
        q(
            f'sum by (schema_hash) (guided_decoding_schema_lint_findings{{{N}, schema_hash=~"$schema_hash"}})',
            ref="G",
            instant=True,
        ),
        q(
            f'max by (schema_hash) (guided_decoding_schema_recent_compile_seconds{{{N}, schema_hash=~"$schema_hash"}})',
            ref="H",
            instant=True,
        ),
    ]
    names = {"Value #B": "compile s/s", "Value #C": "P95 (s)", "Value #D": "hit ratio", "Value #E": "requests/s",
             "Value #F": "variants of its family", "Value #G": "lint findings", "Value #H": "recent compile s"}  # fmt: skip
    panel = (
        table.Panel().title("Top schemas").unit("none").datasource(DS).span(24).height(10)
        .description("Schema hashes by recent compile seconds, each with its family (empty until the daemon has "
                     "analysed it). A schema built per request spreads its cost over many hashes: the families table "
                     "above ranks them together. Lint findings: `gdx lint` on the schema names them with fixes. Click a "
                     "hash to filter the dashboard on it; `gdx hash FILE` finds your schema here.")
        .thresholds(thresholds(None)).sort_by([common.TableSortByFieldState().display_name("recent compile s").desc(True)])
        .with_transformation(DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True, "Value #A": True}, "renameByName": names}))
        .override_by_name("schema_hash", [DynamicConfigValue(id_val="links", value=[{
            "title": "Filter on this schema", "url": f"/d/{UID}/guided-decoding?var-schema_hash=${{__value.raw}}&${{__url_time_range}}"}])])
    )  # fmt: skip
    for query in merged:
        panel = panel.with_target(query)
    return [families(), panel]


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
        .description("Keywords in schemas in use that the backend compiling them does not enforce: outputs may "
                     "violate the schema silently. Validate after decoding or change backend.")
        .thresholds(thresholds(None))
        .with_target(q(f'sum by (backend) (guided_decoding_schema_lint_findings{{{N}, rule="xgrammar_unenforced"}} * on (schema_hash) group_left (backend) max by (schema_hash, backend) (guided_decoding_schema_info{{{N}}}))', instant=True)),
    ]  # fmt: skip


def cost() -> list[Any]:
    return [
        heatmap.Panel().title("CPU busy per core (0-1)").datasource(DS).span(12).height(8)
        .description("Each core's busy share. A wall of red while GPUs idle is the CPUStarvation page: compiles "
                     "starve the engine loop. Fix the schemas first, then size the pods' CPU.")
        .calculate(False).with_target(q(f'1 - rate(guided_decoding_cpu_seconds_total{{{N}, mode="idle"}}[{RI}])', "{{cpu}}")),
        series("GPU utilisation per GPU (0-1)", "none",
               "Share of time a kernel ran, per GPU (NVML). Low while CPUs are busy and compiles run: the GPUs "
               "wait for the host.", q(f"guided_decoding_gpu_utilization_ratio{{{N}}}", "{{instance}} GPU {{gpu}}"),
               line=0.5, above_is_bad=False, span=12),
        series("Engine CPU (cores)", "none",
               "CPU seconds per second of each engine process, from its probe. Compare with the compile rate: "
               "grammar compiles are CPU work on the engine's host.",
               q(f"sum by (pod) (rate(guided_decoding_engine_cpu_seconds_total{{{NP}}}[{RI}]))", "{{pod}}"), span=8),
        series("Node CPU busy (0-1, line: 0.9)", "none",
               "The node's average CPU busy share (recording rule). Above 0.9 with GPUs under 0.5 pages CPUStarvation.",
               q(f"instance:guided_decoding_cpu_busy:ratio_rate5m{{{N}}}", "{{instance}}"), line=0.9, span=8),
        series("Node GPU idle (0-1, line: 0.5)", "none",
               "1 - average GPU utilisation on the node (recording rule), beside the CPU: busy CPUs and idle "
               "GPUs together mean the host is the bottleneck.",
               q(f"1 - instance:guided_decoding_gpu_utilization:ratio{{{N}}}", "{{instance}}"), line=0.5, span=8),
    ]  # fmt: skip


def masks() -> list[Any]:
    return [
        series("Mask fill P95 per step", "s",
               "Time to fill the batch's token bitmask per engine step. It grows with concurrent structured "
               "requests and with grammars built by dynamic compilation; it delays every token of the batch.",
               q(p95("guided_decoding_mask_seconds", "pod", NP), "{{pod}}")),
        series("Compiles in progress", "none",
               "Compiles running now per pod. Stuck at the pool size (vLLM: (cores+1)/2) means requests queue "
               "behind compiles.", q(f"sum by (pod) (guided_decoding_compile_in_progress{{{NP}}})", "{{pod}}")),
        series("Oldest running compile (line: 60 s)", "s",
               "Age of the longest-running compile. Over 60 s pages CompileStuck: compiles cannot be cancelled.",
               q(f"max by (pod) (guided_decoding_compile_oldest_running_seconds{{{NP}}})", "{{pod}}"), line=STUCK_LINE),
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


def build() -> dict[str, Any]:
    variables = [
        dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        dashboard.QueryVariable("instance").label("Node (exporter)").datasource(DS)
        .query("label_values(guided_decoding_collector_success, instance)").refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .include_all(True).multi(True).all_value(".*"),
        dashboard.QueryVariable("pod").label("Pod").datasource(DS)
        .query('label_values(guided_decoding_compile_requests_total{instance=~"$instance"}, pod)')
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True).multi(True).all_value(".*"),
        dashboard.QueryVariable("schema_hash").label("Schema hash").datasource(DS)
        .query('label_values(guided_decoding_schema_info{instance=~"$instance"}, schema_hash)')
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
        ("6. Exporter health", health()),
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
