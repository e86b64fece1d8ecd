# ruff: noqa: E501  (PromQL and templates read better on one line)
"""The one source of the recording rules and alerts: writes the Prometheus rule file and the
Kubernetes PrometheusRule (`make alerts`), and renders fast variants for the live tests.

    python alerts/generate.py [--check]    write (or check) alerts/guided-decoding.rules.yml and
                                           alerts/prometheusrule.yaml

Thresholds, windows and `for:` durations are parameters of `render()`, so the live test gets the
same rules with short windows. Alert conventions (monitoring mixins): prefix GuidedDecoding,
`severity` critical pages / warning tickets / info is not routed, static `summary`, templated
`description`, `runbook_url`, `dashboard_url`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RULES_FILE = HERE / "guided-decoding.rules.yml"
PROMETHEUS_RULE = HERE / "prometheusrule.yaml"
RUNBOOK_BASE = (
    "https://github.com/guided-decoding-exporter/guided-decoding-exporter/blob/main/alerts/runbooks"
)
DASHBOARD_URL = "https://grafana.example.com/d/guided-decoding/guided-decoding"  # the dashboard's uid
P = "guided_decoding_"


@dataclass(frozen=True)
class Params:
    compile_p95_seconds: float = 0.005  # the P95 line of the per-tenant enum incident's field report
    grammar_wait_p95_seconds: float = 0.1
    hit_ratio: float = 0.95
    cpu_busy: float = 0.9
    throttled_share: float = 0.25  # of the engine container's CFS periods, while it compiles
    gpu_idle_below: float = 0.5
    stuck_seconds: float = 60
    min_rate: float = 0.05  # calls per second: below this, percentiles and ratios are noise
    # The page's guard in absolute terms: compiles above the line per second. A quiet pod's P95 is its
    # maximum (15 calls in 5 minutes): one slow new schema would page without it.
    min_slow_rate: float = 0.1  # also the cache alert's: misses per second, real work
    window: str = "5m"
    long_for: str = "10m"
    short_for: str = "5m"
    starvation_for: str = "15m"  # longer than the page's `for`: the page fires first and inhibits it
    failures_window: str = "10m"  # GrammarFailures: any in this window opens a ticket
    rejected_share: float = 0.1  # BackendRejectionsHigh: of an engine's structured requests
    # APIServerStalls: a validation this long (a bound of wire.COMPILE_BUCKETS) froze vLLM's API server
    validation_stall_seconds: float = 1.0
    deaths_window: str = "1h"  # APIServerKilled: a death in this window is one incident per pod
    keep_firing_for: str = "10m"  # a page that flaps at the guard's edge stays one incident
    info_for: str = "30m"
    vanished_within: str = "1h"  # an exporter scraped this recently and gone now is a blind node
    exporter_job: str = "guided-decoding-exporter"  # the monitors' jobLabel: the pods' app.kubernetes.io/name
    runbook_base: str = RUNBOOK_BASE
    dashboard_url: str = DASHBOARD_URL
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Records:
    """The recording rules' names, `level:metric:operations`: the level lists the labels each keeps.
    The dashboard reads the same names (dashboards/generate.py), so a red panel is a firing alert."""

    compile_p95: str
    miss_p95: str
    requests: str
    slow: str
    hit_ratio: str
    wait_p95: str
    schema_slow_share: str
    schema_mean: str
    schema_requests: str
    cpu_busy: str
    gpu_utilization: str
    throttled: str


# `namespace` is the engine pod's (the daemon and the probe add it where they know it): two pods of one
# name in two namespaces stay apart, and `kube_pod_info{namespace, pod}` joins. Where a series has
# no namespace the level keeps none, and every matcher `namespace=""` below still selects it.
ENGINE_LEVEL = "instance, namespace, pod, backend"
SCHEMA_LEVEL = "instance, namespace, pod, backend, schema_hash"
POD_LEVEL = "instance, namespace, pod"
ROUTE_LEVEL = "instance, namespace, pod, engine"


GUARD_REFUSED = P + 'guard_requests_total{action="refused"}'


def new_or_increase(selector: str, window: str) -> str:
    """Each series' increase over the window, and a series born within it counted whole: a counter's
    first sample (a new label set, e.g. the guard's first refusal of a family) is no increase()."""
    return f"(({selector} unless {selector} offset {window}) * 1) or increase({selector}[{window}])"


def routed(outcome: str, p: Params, rate: bool = False) -> str:
    """An engine's structured requests (of one outcome, or all) in the window: increase, or rate."""
    where = f'{{outcome="{outcome}"}}' if outcome else ""
    fn, window = ("rate", p.window) if rate else ("increase", p.failures_window)
    return f"sum by ({ROUTE_LEVEL}) ({fn}({P}routed_requests_total{where}[{window}]))"


def records(p: Params | None = None) -> Records:
    p = p or Params()
    w, ms = p.window, f"{p.compile_p95_seconds * 1000:g}ms"
    engine, schema = "instance_namespace_pod_backend:" + P, "instance_namespace_pod_backend_schema_hash:" + P
    return Records(
        compile_p95=f"{engine}compile_seconds:p95_rate{w}",
        miss_p95=f"{engine}compile_miss_seconds:p95_rate{w}",
        requests=f"{engine}compile_requests:rate{w}",
        slow=f"{engine}compile_seconds_over_{ms}:rate{w}",
        hit_ratio=f"{engine}compile_cache_hits:ratio_rate{w}",
        wait_p95=f"{engine}grammar_wait_seconds:p95_rate{w}",
        schema_slow_share=f"{schema}schema_compile_seconds_over_{ms}:ratio_rate{w}",
        schema_mean=f"{schema}schema_compile_seconds:mean_rate{w}",
        schema_requests=f"{schema}schema_requests:rate{w}",
        cpu_busy=f"instance:{P}cpu_busy:ratio_rate{w}",
        gpu_utilization=f"instance:{P}gpu_utilization_ratio:avg",
        throttled=f"instance_namespace_pod:{P}engine_cpu_cfs_throttled_periods:ratio_rate{w}",
    )


# Ranked by family (docs/families.md): a service that injects a per-request value spreads its cost
# over many cheap schema hashes, each compiled once; its family sums them. The ranking is the
# daemon's decayed gauge, not rate(): rate() of a counter's first sample is zero. Every query is
# scoped to the alert's node (`$labels.instance`), so the page for one node never names another's.


def _q(expr: str, *args: str) -> str:
    """A template call `query (printf "EXPR" ARGS...)`: EXPR's quotes escaped for the template string."""
    quoted = expr.replace('"', '\\"')
    return f'query (printf "{quoted}" {" ".join(args)})'


NODE = "$labels.instance"
POD_OF = 'instance="%s", namespace="%s", pod="%s"'  # the alert's pod; namespace="" where it has none
POD_ARGS = (NODE, "$labels.namespace", "$labels.pod")
FAMILY_OF = 'instance="%s", family="%s"'


HELD = "1m"


def _held(selector: str) -> str:
    """The selector's last sample within HELD: a description's facts survive the one scrape that failed
    (a daemon slow for a moment marks its series stale, and a page sent then would name nothing)."""
    return f"last_over_time({selector}[{HELD}])"


def varies(family: str, limit: int) -> str:
    """The family's "; varies: POINTER (what, how many), ...": at most `limit`, the most first."""
    expr = f"sort_desc(topk({limit}, {_held(f'{P}family_varying{{{FAMILY_OF}}}')}))"
    return (
        f"{{{{ range $j, $v := {_q(expr, NODE, family)} }}}}{{{{ if eq $j 0 }}}}; varies: {{{{ else }}}}, {{{{ end }}}}"
        '{{ or $v.Labels.pointer "the text" }} ({{ if eq $v.Labels.what "branches" }}{{ $v.Value }} distinct subsets of its branches'
        '{{ else if eq $v.Labels.what "optional" }}{{ $v.Value }} optional properties come and go'
        "{{ else }}literal differs in {{ $v.Value }} variants{{ end }}){{ end }}"
    )


def family_facts(family: str) -> str:
    """The family's ", N variants, dynamic_schema SEVERITY", each part when the daemon has it."""
    count = f"max({_held(f'{P}family_variants{{{FAMILY_OF}}}')})"
    findings = _held(f'{P}family_findings{{{FAMILY_OF}, rule="dynamic_schema", severity=~"error|warning"}}')
    finding = f"max by (severity) ({findings} > 0)"
    return (
        f"{{{{ range {_q(count, NODE, family)} }}}}, {{{{ .Value }}}} variants{{{{ end }}}}"
        f"{{{{ range {_q(finding, NODE, family)} }}}}, dynamic_schema {{{{ .Labels.severity }}}}{{{{ end }}}}"
    )


def top_families() -> str:
    """The node's top 3 families by recent compile seconds, with their names; for the first, its
    variants, its finding and what varies."""
    recent = _held(f'{P}family_recent_compile_seconds{{instance="%s", family!="other"}}')
    info = _held(f'{P}family_info{{instance="%s"}}')
    expr = (
        f"sort_desc(topk(3, {recent} * on (instance, family) group_left (name)"
        f" max by (instance, family, name) ({info}) or on (instance, family) {recent}))"
    )
    return (
        f"{{{{ range $i, $f := {_q(expr, NODE, NODE, NODE)} }}}}{{{{ $f.Labels.family }}}}"
        " ({{ if $f.Labels.name }}{{ $f.Labels.name }}{{ else }}untitled{{ end }},"
        ' {{ printf "%.2f" $f.Value }} s recently'
        f"{{{{ if eq $i 0 }}}}{family_facts('$f.Labels.family')}{varies('$f.Labels.family', 2)}{{{{ end }}}}); {{{{ end }}}}"
    )


def family_name(family: str) -> str:
    expr = f"max by (name) ({_held(f'{P}family_info{{{FAMILY_OF}}}')})"
    return (
        f"{{{{ range {_q(expr, NODE, family)} }}}}{{{{ if .Labels.name }}}}{{{{ .Labels.name }}}}{{{{ else }}}}untitled{{{{ end }}}}"
        "{{ else }}untitled{{ end }}"
    )


DYNAMIC_FIX = (
    "keep one static schema and move what varies out of it (allowed values into the prompt, checked"
    " after decoding; timestamps and ids out of descriptions; one tool list for all tenants)"
)


def recording(p: Params) -> list[dict[str, Any]]:
    w, r, e, sl = p.window, records(p), ENGINE_LEVEL, SCHEMA_LEVEL
    line = f"{p.compile_p95_seconds:g}"
    schemas = 'schema_hash!="other"'
    return [
        {"record": r.compile_p95,
         "expr": f"histogram_quantile(0.95, sum by ({e}, le) (rate({P}compile_seconds_bucket[{w}])))"},
        {"record": r.miss_p95,
         "expr": f"histogram_quantile(0.95, sum by ({e}, le) (rate({P}compile_miss_seconds_bucket[{w}])))"},
        {"record": r.requests, "expr": f"sum by ({e}) (rate({P}compile_requests_total[{w}]))"},
        {"record": r.slow,
         "expr": f"sum by ({e}) (rate({P}compile_seconds_count[{w}]))"
                 f" - sum by ({e}) (rate({P}compile_seconds_bucket{{le=\"{line}\"}}[{w}]))"},
        {"record": r.hit_ratio,
         "expr": f"sum by ({e}) (rate({P}compile_cache_hits_total[{w}])) / sum by ({e}) (rate({P}compile_requests_total[{w}]))"},
        {"record": r.wait_p95,
         "expr": f"histogram_quantile(0.95, sum by ({e}, le) (rate({P}grammar_wait_seconds_bucket[{w}])))"},
        {"record": r.schema_slow_share,
         "expr": f"1 - sum by ({sl}) (rate({P}schema_compile_seconds_bucket{{{schemas}, le=\"{line}\"}}[{w}]))"
                 f" / sum by ({sl}) (rate({P}schema_compile_seconds_count{{{schemas}}}[{w}]))"},
        {"record": r.schema_mean,
         "expr": f"sum by ({sl}) (rate({P}schema_compile_seconds_sum{{{schemas}}}[{w}]))"
                 f" / sum by ({sl}) (rate({P}schema_compile_seconds_count{{{schemas}}}[{w}]))"},
        {"record": r.schema_requests, "expr": f"sum by ({sl}) (rate({P}schema_requests_total{{{schemas}}}[{w}]))"},
        {"record": r.cpu_busy,
         "expr": f"1 - avg by (instance) (rate({P}cpu_seconds_total{{mode=\"idle\"}}[{w}]))"},
        {"record": r.gpu_utilization, "expr": f"avg by (instance) ({P}gpu_utilization_ratio)"},
        {"record": r.throttled,
         "expr": f"sum by ({POD_LEVEL}) (rate({P}engine_cpu_cfs_throttled_periods_total[{w}]))"
                 f" / sum by ({POD_LEVEL}) (rate({P}engine_cpu_cfs_periods_total[{w}]))"},
    ]  # fmt: skip


def alert(
    name: str,
    expr: str,
    for_: str,
    severity: str,
    summary: str,
    description: str,
    p: Params,
    keep_firing_for: str = "",
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": f"GuidedDecoding{name}", "expr": expr}
    if for_:
        rule["for"] = for_
    if keep_firing_for:
        rule["keep_firing_for"] = keep_firing_for
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": f"{p.runbook_base}/GuidedDecoding{name}.md",
        "dashboard_url": p.dashboard_url,
    }
    return rule


def miss_p95() -> str:
    """ ", real compiles (cache misses) X at P95" for the alert's pod and backend, when it has misses."""
    expr = f'{records().miss_p95}{{{POD_OF}, backend="%s"}} >= 0'
    return (
        f"{{{{ range {_q(expr, *POD_ARGS, '$labels.backend')} }}}}; real compiles (cache misses)"
        " take {{ .Value | humanizeDuration }} at P95{{ end }}"
    )


def schema_mean() -> str:
    expr = f'{records().schema_mean}{{{POD_OF}, backend="%s", schema_hash="%s"}}'
    args = (*POD_ARGS, "$labels.backend", "$labels.schema_hash")
    return f"{{{{ range {_q(expr, *args)} }}}}, {{{{ .Value | humanizeDuration }}}} on average{{{{ end }}}}"


def sizing() -> str:
    """ "; CPU quota Q cores; compile pool of W workers; the engine counts C CPUs" for the alert's
    pod, each part when the probe reports it (a pool sized from the node's CPUs, not the quota)."""
    pod, args = POD_OF, POD_ARGS
    parts = (
        (f"max({P}engine_cpu_quota_cores{{{pod}}} > 0)", "; CPU quota {{ .Value }} cores"),
        (f"max({P}compile_pool_workers{{{pod}}})", "; compile pool of {{ .Value }} workers"),
        (f"max({P}engine_cpus{{{pod}}})", "; the engine counts {{ .Value }} CPUs"),
    )
    return "".join(f"{{{{ range {_q(expr, *args)} }}}}{text}{{{{ end }}}}" for expr, text in parts)


def failing_schemas(p: Params) -> str:
    """ " Schemas: HASH (N), ..." of the alert's pod, the most failures first (where the probe knew)."""
    where = POD_OF + ', backend="%s"'
    failures = (
        f"sum by (schema_hash) (increase({P}schema_grammar_rejections_total{{{where}}}[{p.failures_window}]))"
        f" or sum by (schema_hash) (increase({P}schema_compile_errors_total{{{where}}}[{p.failures_window}]))"
    )
    expr = f"sort_desc(topk(3, {failures} > 0))"
    return (
        f"{{{{ range $i, $s := {_q(expr, *POD_ARGS, '$labels.backend', *POD_ARGS, '$labels.backend')} }}}}"
        '{{ if eq $i 0 }} Schemas: {{ else }}, {{ end }}{{ $s.Labels.schema_hash }} ({{ printf "%.0f" $s.Value }}){{ end }}'
    )


def mismatched_schemas(p: Params, outcome: str) -> str:
    """ " Schemas: HASH (N), ..." of the alert's engine with requests of `outcome` in the window."""
    counts = (f'sum by (schema_hash) (increase({P}schema_backend_mismatches_total{{{POD_OF}, engine="%s",'
              f' outcome="{outcome}"}}[{p.failures_window}]))')  # fmt: skip
    expr = f"sort_desc(topk(3, {counts} > 0))"
    return (
        f"{{{{ with {_q(expr, *POD_ARGS, '$labels.engine')} }}}} Schemas: {{{{ range $i, $s := . }}}}"
        '{{ if $i }}, {{ end }}{{ $s.Labels.schema_hash }} ({{ printf "%.0f" $s.Value }}){{ end }}.{{ end }}'
    )


def mismatched_families(p: Params, outcome: str) -> str:
    """ " Families on the node: ID (NAME, N), ..." with requests of `outcome` in the window, the most
    first, named by family_info (the per-family series are per node, all engines)."""
    counts = f'sum by (family) (increase({P}family_backend_mismatches_total{{instance="%s", outcome="{outcome}"}}[{p.failures_window}]))'
    expr = f"sort_desc(topk(3, {counts} > 0))"
    return (
        f"{{{{ with {_q(expr, NODE)} }}}} Families on the node: {{{{ range $i, $f := . }}}}"
        "{{ if $i }}, {{ end }}{{ $f.Labels.family }} ("
        + family_name("$f.Labels.family")
        + ', {{ printf "%.0f" $f.Value }}){{ end }}.{{ end }}'
    )


def engine_backend() -> str:
    """ " The engine is on BACKEND." for the alert's pod and engine, where the probe says."""
    expr = f'max by (backend) ({P}engine_backend_info{{{POD_OF}, engine="%s"}})'
    return f"{{{{ range {_q(expr, *POD_ARGS, '$labels.engine')} }}}} The engine is on {{{{ .Labels.backend }}}}.{{{{ end }}}}"


def killing_schemas(p: Params) -> str:
    """ " Schemas: HASH (TITLE, family F, N), ..." that killed the alert's pod's API servers in the window
    (a per-schema series appears at its first death, hence `unless ... offset`)."""
    x = f"{P}schema_server_deaths_total{{{POD_OF}}}"
    window = p.deaths_window
    deaths = (f"sum by (schema_hash) ({x} - {x} offset {window}) > 0"
              f" or sum by (schema_hash) ({x} unless {x} offset {window})")  # fmt: skip
    expr = f"sort_desc(topk(3, {deaths}))"
    info = f'max by (title, family) ({P}schema_info{{instance="%s", schema_hash="%s"}})'
    return (
        f"{{{{ with {_q(expr, *POD_ARGS * 4)} }}}} Schemas: {{{{ range $i, $s := . }}}}"
        "{{ if $i }}, {{ end }}{{ $s.Labels.schema_hash }} ("
        f"{{{{ range {_q(info, NODE, '$s.Labels.schema_hash')} }}}}"
        "{{ with .Labels.title }}{{ . }}, {{ end }}family {{ .Labels.family }}, {{ end }}"
        '{{ printf "%.0f" $s.Value }}){{ end }}.{{ end }}'
    )


def stalling_schemas(p: Params) -> str:
    """ " Schemas: HASH (S s), ..." that stalled the alert's API server in the window, the most first."""
    x = f'{P}schema_validation_stall_seconds_total{{{POD_OF}, engine="%s"}}'
    w = p.failures_window
    seconds = (
        f"sum by (schema_hash) ({x} - {x} offset {w}) > 0 or sum by (schema_hash) ({x} unless {x} offset {w})"
    )
    expr = f"sort_desc(topk(3, {seconds}))"
    args = (*POD_ARGS, "$labels.engine")
    return (
        f"{{{{ with {_q(expr, *args, *args, *args, *args)} }}}} Schemas: {{{{ range $i, $s := . }}}}"
        '{{ if $i }}, {{ end }}{{ $s.Labels.schema_hash }} ({{ printf "%.1f" $s.Value }} s){{ end }}.{{ end }}'
    )


SERVER_FIX = (
    'pin the backend (vllm serve --structured-outputs-config \'{"backend": "xgrammar"}\': the schema gets HTTP 400'
    " instead), or rewrite it: `patternProperties` into `additionalProperties` and a check of the keys after"
    " decoding. `gdx lint --engine vllm` flags such schemas before they are sent (server_crash, server_stall)"
)
ROUTING_FIX = (
    'pin the backend (vllm serve --structured-outputs-config \'{"backend": "xgrammar"}\', or guidance), or change'
    " the schemas: `gdx lint --engine vllm==VERSION` names the keyword that sends each elsewhere"
)


def job_down(p: Params) -> str:
    """Scraped and failing; gone (a node's exporter scraped within the hour and missing now: evicted,
    unschedulable; not when the node itself left the cluster, where kube-state-metrics says so); or
    never scraped anywhere. `instance` is the node's name (the monitors relabel it), so a rollout
    that replaces the pod is not a vanished exporter."""
    up = f'up{{job="{p.exporter_job}"}}'
    vanished = f"(max by (instance) (max_over_time({up}[{p.vanished_within}])) unless on (instance) {up})"
    nodes = 'label_replace(kube_node_info, "instance", "$1", "node", "(.+)")'
    return (
        f"{up} == 0"
        f" or ({vanished} and on (instance) {nodes})"
        f" or ({vanished} unless on () count(kube_node_info))"
        f" or absent({up})"
    )


def alerts(p: Params) -> list[dict[str, Any]]:
    w, r, e = p.window, records(p), ENGINE_LEVEL
    top = top_families()
    busy = f"{r.requests} > {p.min_rate}"
    line_ms = f"{p.compile_p95_seconds * 1000:g} ms"
    return [
        alert(
            "CompileP95High",
            f"{r.compile_p95} > {p.compile_p95_seconds} and on ({e}) {r.slow} >= {p.min_slow_rate}",
            p.long_for, "critical",
            "Grammar compiles are slow: structured-output requests wait for the CPU before their first token.",
            f"Compile P95 on pod {{{{ with $labels.namespace }}}}{{{{ . }}}}/{{{{ end }}}}{{{{ $labels.pod }}}} ({{{{ $labels.backend }}}}, node {{{{ $labels.instance }}}}) is"
            f" {{{{ $value | humanizeDuration }}}} over {w}, hits included (line {line_ms}){miss_p95()}."
            f" Top families by recent compile seconds: {top}",
            p, keep_firing_for=p.keep_firing_for,
        ),
        alert(
            "SchemaCompileSlow",
            f"{r.schema_slow_share} > 0.05 and on ({SCHEMA_LEVEL}) {r.schema_requests} > {p.min_rate}",
            p.long_for, "warning",
            "One schema compiles slowly on every use.",
            f"Schema {{{{ $labels.schema_hash }}}} on pod {{{{ with $labels.namespace }}}}{{{{ . }}}}/{{{{ end }}}}{{{{ $labels.pod }}}} ({{{{ $labels.backend }}}}, node"
            f" {{{{ $labels.instance }}}}): {{{{ $value | humanizePercentage }}}} of its compile calls take over {line_ms}"
            f"{schema_mean()}. `gdx lint` on the schema names the cause; the dashboard's schema table has its findings.",
            p,
        ),
        alert(
            "CacheHitRatioLow",
            f"{r.hit_ratio} < {p.hit_ratio} and on ({e}) {r.requests} * (1 - {r.hit_ratio}) >= {p.min_slow_rate}"
            f' and on ({e}) {P}probe_info{{cache="true"}}',
            p.long_for, "warning",
            "The grammar cache rarely hits: schemas change between requests.",
            f"Cache hit ratio on pod {{{{ with $labels.namespace }}}}{{{{ . }}}}/{{{{ end }}}}{{{{ $labels.pod }}}} ({{{{ $labels.backend }}}}, node {{{{ $labels.instance }}}})"
            f" is {{{{ $value | humanizePercentage }}}} (line {p.hit_ratio:g}). Top families by recent compile seconds: {top}",
            p,
        ),
        alert(
            "DynamicSchema",
            f'max by (instance, family) ({P}family_findings{{rule="dynamic_schema", severity=~"error|warning"}}) > 0',
            p.short_for, "warning",
            "A schema is rebuilt per request: one family's variants are rarely reused.",
            "Family {{ $labels.family }} (" + family_name("$labels.family") + family_facts("$labels.family") + ")"
            " on node {{ $labels.instance }} compiles a new variant for nearly every request: the service injects"
            " a value into the schema" + varies("$labels.family", 5) + ". Fix: " + DYNAMIC_FIX + ".",
            p,
        ),
        alert(
            "CPUStarvation",
            f"{r.cpu_busy} > {p.cpu_busy}"
            f" and on (instance) {r.gpu_utilization} < {p.gpu_idle_below}"
            f" and on (instance) sum by (instance) ({r.requests}) > {p.min_rate}",
            p.starvation_for, "critical",
            "Host CPUs are saturated while GPUs idle and grammars compile.",
            f"Node {{{{ $labels.instance }}}}: CPU busy {{{{ $value | humanizePercentage }}}}, GPUs under {p.gpu_idle_below:g}"
            f" utilised, grammar compiles running. Top families by recent compile seconds: {top}",
            p,
        ),
        alert(
            "EngineCPUThrottled",
            f"{r.throttled} > {p.throttled_share}"
            f" and on ({POD_LEVEL}) {r.requests} > {p.min_rate}",
            p.long_for, "warning",
            "An engine's container runs out of CPU quota while grammars compile: decode stalls.",
            f"Pod {{{{ with $labels.namespace }}}}{{{{ . }}}}/{{{{ end }}}}{{{{ $labels.pod }}}} (node {{{{ $labels.instance }}}}) was CPU-throttled in {{{{ $value | humanizePercentage }}}}"
            f" of its CFS periods over {w} while it compiled grammars{sizing()}. Each throttled period holds"
            " the engine loop back until the next, so tokens stall behind compiles. Top families: " + top,
            p,
        ),
        alert(
            "GrammarWaitHigh",
            f"{r.wait_p95} > {p.grammar_wait_p95_seconds} and on ({e}) {busy}",
            p.long_for, "warning",
            "Requests are parked behind grammar compiles.",
            f"Grammar wait P95 on pod {{{{ with $labels.namespace }}}}{{{{ . }}}}/{{{{ end }}}}{{{{ $labels.pod }}}} ({{{{ $labels.backend }}}}, node {{{{ $labels.instance }}}}) is"
            f" {{{{ $value | humanizeDuration }}}} (line {p.grammar_wait_p95_seconds * 1000:g} ms): requests queue behind"
            f" compiles in the pool. Top families: {top}",
            p,
        ),
        alert(
            "CompileStuck",
            f"max by ({e}) ({P}compile_oldest_running_seconds) > {p.stuck_seconds}",
            "1m", "critical",
            "A grammar compile has been running for over a minute.",
            "A {{ $labels.backend }} compile on pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} (node {{ $labels.instance }}) has run for"
            " {{ $value | humanizeDuration }}: compiles cannot be cancelled; the pool worker is lost until it ends."
            " Top families: " + top,
            p,
        ),
        alert(
            "GrammarFailures",
            f"sum by ({e}) (increase({P}grammar_rejections_total[{p.failures_window}])) > 0"
            f' or sum by ({e}) (increase({P}compile_errors_total{{reason=~"internal|timeout"}}[{p.failures_window}])) > 0',
            "1m", "warning",
            "Grammars fail inside the engine: requests end with an error.",
            "Pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} ({{ $labels.backend }}, node {{ $labels.instance }}): about {{ printf \"%.0f\" $value }} grammar"
            f" failure(s) in the last {p.failures_window}: a compiled grammar refused tokens its own mask allowed or"
            " raised (the engine ends that request with an error), or a compile failed inside the engine (internal,"
            " timeout). Client errors (invalid or unsupported schemas) are not counted here." + failing_schemas(p),
            p,
        ),
        alert(
            "BackendRejectionsHigh",
            f"{routed('rejected', p)} / {routed('', p)} > {p.rejected_share}"
            f" and on ({ROUTE_LEVEL}) {routed('', p, rate=True)} > {p.min_rate}",
            p.short_for, "critical",
            "An engine rejects a large share of structured requests: they resolved to another backend than its own.",
            "Engine {{ $labels.engine }} of pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} (node {{ $labels.instance }})"
            f" rejected {{{{ $value | humanizePercentage }}}} of its structured requests over {p.failures_window} (HTTP 400, 'only supports one"
            " backend per engine'): vLLM's router sent them to another backend than the one the engine's first structured request"
            f" built, and it keeps that one until it restarts.{engine_backend()}{mismatched_schemas(p, 'rejected')}{mismatched_families(p, 'rejected')} Fix: {ROUTING_FIX}.",
            p, keep_firing_for=p.keep_firing_for,
        ),
        alert(
            "BackendRejections",
            f"{routed('rejected', p)} > 0",
            "1m", "warning",
            "An engine rejects structured requests resolved to another backend than its own.",
            "Engine {{ $labels.engine }} of pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} (node {{ $labels.instance }})"
            f" rejected about {{{{ printf \"%.0f\" $value }}}} structured request(s) in the last {p.failures_window} (HTTP 400): vLLM's"
            f" router resolved them to another backend than the engine's.{engine_backend()}{mismatched_schemas(p, 'rejected')}{mismatched_families(p, 'rejected')}"
            f" Fix: {ROUTING_FIX}.",
            p,
        ),
        alert(
            "APIServerKilled",
            f"sum by ({POD_LEVEL}) (increase({P}server_deaths_total[{p.deaths_window}])) > 0",
            "", "critical",
            "A schema killed vLLM's API server: every request in flight on it was lost.",
            "Pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} (node {{ $labels.instance }}): about"
            f' {{{{ printf "%.0f" $value }}}} API server process(es) died in the last {p.deaths_window} while validating a'
            " structured request: under the default backend `auto`, vLLM builds outlines' regex for a schema with"
            " `patternProperties` in the API server's own process, unbounded in time and memory; the container"
            f" restarts and the next request with that schema kills it again.{killing_schemas(p)} Fix: {SERVER_FIX}.",
            p,
        ),
        alert(
            "APIServerStalls",
            f"sum by ({ROUTE_LEVEL}) (increase({P}validation_seconds_count[{p.failures_window}]))"
            f' - sum by ({ROUTE_LEVEL}) (increase({P}validation_seconds_bucket{{le="{p.validation_stall_seconds:.1f}"}}[{p.failures_window}])) > 0',
            "", "warning",
            "vLLM's API server froze validating structured requests: no request was answered meanwhile.",
            "Engine {{ $labels.engine }} of pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} (node {{ $labels.instance }})"
            f' validated about {{{{ printf "%.0f" $value }}}} structured request(s) for over {p.validation_stall_seconds:g} s each in the'
            f" last {p.failures_window}. The validation runs on the API server's event loop: every request it serves, structured or"
            f" not, waited that long.{stalling_schemas(p)} Fix: {SERVER_FIX}.",
            p,
        ),
        alert(
            "GuardRefusing",
            f"sum by ({ROUTE_LEVEL}, reason) ({new_or_increase(GUARD_REFUSED, p.failures_window)}) > 0",
            "", "warning",
            "vLLM's API server's guard is refusing a schema that would stall or kill the server, or hold an engine on one"
            " compile: its clients get HTTP 400.",
            "Engine {{ $labels.engine }} of pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} (node {{ $labels.instance }})"
            f' refused about {{{{ printf "%.0f" $value }}}} structured request(s) in the last {p.failures_window} ({{{{ $labels.reason }}}}):'
            " the server stayed up, and the clients that sent the schema got HTTP 400 naming the reason, its hash and the fix"
            " (also in the API server's log; the dashboard's guard row names its family). Find the service sending it and fix"
            f" the schema; then there is nothing left to refuse. Fix (server_crash, server_stall): {SERVER_FIX}. Fix"
            " (compile_budget): simplify what `gdx lint` flags as slow to compile (union depth and width, enum size,"
            " quantifiers), or raise the daemon's --guard.compile-budget.",
            p,
        ),
        alert(
            "BackendNotEnforced",
            f"{routed('other_backend', p)} > 0",
            "1m", "warning",
            "Structured requests are compiled by another backend than they resolved to: keywords go unenforced.",
            "Engine {{ $labels.engine }} of pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} (node {{ $labels.instance }})"
            f" compiled about {{{{ printf \"%.0f\" $value }}}} structured request(s) in the last {p.failures_window} with its own backend,"
            " not the one vLLM's router resolved them to (vLLM 0.32: no check): the keyword that made them fall back is not"
            f" enforced, or the compile fails (HTTP 500).{engine_backend()}{mismatched_schemas(p, 'other_backend')}{mismatched_families(p, 'other_backend')} Fix: {ROUTING_FIX}.",
            p,
        ),
        alert(
            "UnenforcedKeywords",
            f'sum by (instance, schema_hash) ({P}schema_lint_findings{{rule="xgrammar_unenforced"}}) > 0'
            f' and on (instance, schema_hash) {P}schema_info{{backend="xgrammar"}}',
            p.info_for, "info",
            "Schemas in use carry keywords the active backend does not enforce.",
            "Schema {{ $labels.schema_hash }} on node {{ $labels.instance }} uses {{ $value }} keyword(s) xgrammar"
            " compiles but does not enforce: outputs may violate the schema. `gdx lint` lists them.",
            p,
        ),
        alert(
            "ProbeMissing",
            f"max by ({POD_LEVEL}) ({P}target_up) == 1 unless on ({POD_LEVEL}) {P}probe_info",
            p.long_for, "warning",
            "An engine is scraped but its probe does not report.",
            "Pod {{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} on node {{ $labels.instance }} answers /metrics but no probe reports from it:"
            " compile metrics are missing. guided_decoding_probe_absent says why for injected pods (gdx inject);"
            " refusals are counted in guided_decoding_probe_connections_refused_total.",
            p,
        ),
        alert(
            "NVMLUnavailable",
            f'max by (instance) ({P}collector_success{{collector="nvml"}}) == 0',
            p.info_for, "warning",
            "The exporter cannot read NVML: GPU utilisation is unknown, so CPU starvation cannot page.",
            "The exporter on node {{ $labels.instance }} has not read NVML for " + p.info_for + ": its GPU series"
            " are missing and GuidedDecodingCPUStarvation cannot fire there. With the GPU operator's CDI mode"
            " the exporter needs runtimeClassName nvidia (Helm value runtimeClassName, kustomize component"
            " gpu-operator); the exporter's /healthz gives NVML's own error.",
            p,
        ),
        alert(
            "ExporterDown",
            job_down(p),
            p.short_for, "critical",
            "The guided-decoding exporter is down: compile stalls would go unseen.",
            "{{ if $labels.instance }}The exporter on node {{ $labels.instance }} is down or gone: Prometheus cannot"
            " scrape it, or its pod no longer runs there.{{ else }}No guided-decoding exporter is scraped at all"
            f" (job {p.exporter_job}).{{{{ end }}}}",
            p,
        ),
    ]  # fmt: skip


def render(p: Params | None = None) -> dict[str, Any]:
    p = p or Params()
    return {
        # One group, recording rules first: a group evaluates its rules in order, so every alert reads
        # the recording rules of the same evaluation. Across groups the order is not fixed and an
        # alert's value would lag its rule by an interval, or not, from one evaluation to the next.
        "groups": [{"name": "guided-decoding", "rules": [*recording(p), *alerts(p)]}]
    }


def prometheus_rule(p: Params | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "guided-decoding-exporter",
            "labels": {
                "app.kubernetes.io/name": "guided-decoding-exporter",
                "app.kubernetes.io/part-of": "guided-decoding",
            },
        },
        "spec": render(p),
    }


HEADER = "# Generated by alerts/generate.py (make alerts): edit the generator, not this file.\n"


def dump(doc: dict[str, Any]) -> str:
    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=1000, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if the committed files differ")
    args = parser.parse_args(argv)
    outputs = {RULES_FILE: dump(render()), PROMETHEUS_RULE: dump(prometheus_rule())}
    stale = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} is stale: run make alerts", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
