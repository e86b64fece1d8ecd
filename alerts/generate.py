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
    gpu_idle_below: float = 0.5
    stuck_seconds: float = 60
    min_rate: float = 0.05  # compiles per second: below this, percentiles are noise (about 3 a minute)
    window: str = "5m"
    long_for: str = "10m"
    short_for: str = "5m"
    info_for: str = "30m"
    exporter_job: str = "guided-decoding-exporter"
    runbook_base: str = RUNBOOK_BASE
    dashboard_url: str = DASHBOARD_URL
    extra: dict[str, Any] = field(default_factory=dict)


# Ranked by family (docs/families.md): a service that injects a per-request value spreads its cost
# over many cheap schema hashes, each compiled once; its family sums them. The ranking is the
# daemon's decayed gauge, not rate(): rate() of a counter's first sample is zero. Every query is
# scoped to the alert's node (`$labels.instance`), so the page for one node never names another's.


def _q(expr: str, *args: str) -> str:
    """A template call `query (printf "EXPR" ARGS...)`: EXPR's quotes escaped for the template string."""
    quoted = expr.replace('"', '\\"')
    return f'query (printf "{quoted}" {" ".join(args)})'


NODE = "$labels.instance"
FAMILY_OF = 'instance="%s", family="%s"'


def varies(family: str, limit: int) -> str:
    """The family's "; varies: POINTER (what, how many), ...": at most `limit`, the most first."""
    expr = f"sort_desc(topk({limit}, {P}family_varying{{{FAMILY_OF}}}))"
    return (
        f"{{{{ range $j, $v := {_q(expr, NODE, family)} }}}}{{{{ if eq $j 0 }}}}; varies: {{{{ else }}}}, {{{{ end }}}}"
        '{{ or $v.Labels.pointer "the text" }} ({{ if eq $v.Labels.what "branches" }}{{ $v.Value }} distinct subsets of its branches'
        '{{ else if eq $v.Labels.what "optional" }}{{ $v.Value }} optional properties come and go'
        "{{ else }}literal differs in {{ $v.Value }} variants{{ end }}){{ end }}"
    )


def family_facts(family: str) -> str:
    """The family's ", N variants, dynamic_schema SEVERITY", each part when the daemon has it."""
    count = f"max({P}family_variants{{{FAMILY_OF}}})"
    finding = f'max by (severity) ({P}family_findings{{{FAMILY_OF}, rule="dynamic_schema", severity=~"error|warning"}} > 0)'
    return (
        f"{{{{ range {_q(count, NODE, family)} }}}}, {{{{ .Value }}}} variants{{{{ end }}}}"
        f"{{{{ range {_q(finding, NODE, family)} }}}}, dynamic_schema {{{{ .Labels.severity }}}}{{{{ end }}}}"
    )


def top_families() -> str:
    """The node's top 3 families by recent compile seconds, with their names; for the first, its
    variants, its finding and what varies."""
    recent = f'{P}family_recent_compile_seconds{{instance="%s", family!="other"}}'
    expr = (
        f"sort_desc(topk(3, {recent} * on (instance, family) group_left (name)"
        f' max by (instance, family, name) ({P}family_info{{instance="%s"}}) or on (instance, family) {recent}))'
    )
    return (
        f"{{{{ range $i, $f := {_q(expr, NODE, NODE, NODE)} }}}}{{{{ $f.Labels.family }}}}"
        " ({{ if $f.Labels.name }}{{ $f.Labels.name }}{{ else }}untitled{{ end }},"
        ' {{ printf "%.2f" $f.Value }} s recently'
        f"{{{{ if eq $i 0 }}}}{family_facts('$f.Labels.family')}{varies('$f.Labels.family', 2)}{{{{ end }}}}); {{{{ end }}}}"
    )


def family_name(family: str) -> str:
    expr = f"max by (name) ({P}family_info{{{FAMILY_OF}}})"
    return (
        f"{{{{ range {_q(expr, NODE, family)} }}}}{{{{ if .Labels.name }}}}{{{{ .Labels.name }}}}{{{{ else }}}}untitled{{{{ end }}}}"
        "{{ else }}untitled{{ end }}"
    )


DYNAMIC_FIX = (
    "keep one static schema and move what varies out of it (allowed values into the prompt, checked"
    " after decoding; timestamps and ids out of descriptions; one tool list for all tenants)"
)


def recording(p: Params) -> list[dict[str, Any]]:
    w = p.window
    return [
        {"record": f"pod:{P}compile_seconds:p95_rate{w}",
         "expr": f"histogram_quantile(0.95, sum by (instance, pod, le) (rate({P}compile_seconds_bucket[{w}])))"},
        {"record": f"pod:{P}compile_requests:rate{w}",
         "expr": f"sum by (instance, pod) (rate({P}compile_requests_total[{w}]))"},
        {"record": f"pod:{P}compile_cache_hit:ratio_rate{w}",
         "expr": f"sum by (instance, pod) (rate({P}compile_cache_hits_total[{w}]))"
                 f" / sum by (instance, pod) (rate({P}compile_requests_total[{w}]))"},
        {"record": f"pod:{P}grammar_wait_seconds:p95_rate{w}",
         "expr": f"histogram_quantile(0.95, sum by (instance, pod, le) (rate({P}grammar_wait_seconds_bucket[{w}])))"},
        {"record": f"schema_hash:{P}schema_compile_seconds:p95_rate{w}",
         "expr": f"histogram_quantile(0.95, sum by (instance, pod, schema_hash, le)"
                 f" (rate({P}schema_compile_seconds_bucket{{schema_hash!=\"other\"}}[{w}])))"},
        {"record": f"schema_hash:{P}schema_compile_seconds_over_5ms:ratio_rate{w}",
         "expr": f"1 - sum by (instance, pod, schema_hash) (rate({P}schema_compile_seconds_bucket{{le=\"0.005\"}}[{w}]))"
                 f" / sum by (instance, pod, schema_hash) (rate({P}schema_compile_seconds_count[{w}]))"},
        {"record": f"schema_hash:{P}schema_requests:rate{w}",
         "expr": f"sum by (instance, pod, schema_hash) (rate({P}schema_requests_total[{w}]))"},
        {"record": f"instance:{P}cpu_busy:ratio_rate{w}",
         "expr": f"1 - avg by (instance) (rate({P}cpu_seconds_total{{mode=\"idle\"}}[{w}]))"},
        {"record": f"instance:{P}gpu_utilization:ratio",
         "expr": f"avg by (instance) ({P}gpu_utilization_ratio)"},
    ]  # fmt: skip


def alert(
    name: str, expr: str, for_: str, severity: str, summary: str, description: str, p: Params
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": f"GuidedDecoding{name}", "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook_url": f"{p.runbook_base}/GuidedDecoding{name}.md",
        "dashboard_url": p.dashboard_url,
    }
    return rule


def alerts(p: Params) -> list[dict[str, Any]]:
    w = p.window
    top = top_families()
    traffic = f"pod:{P}compile_requests:rate{w} > {p.min_rate}"
    return [
        alert(
            "CompileP95High",
            f"pod:{P}compile_seconds:p95_rate{w} > {p.compile_p95_seconds} and on (instance, pod) {traffic}",
            p.long_for, "critical",
            "Grammar compiles are slow: structured-output requests wait for the CPU before their first token.",
            f"Compile P95 on pod {{{{ $labels.pod }}}} is {{{{ $value | humanizeDuration }}}} (line {p.compile_p95_seconds * 1000:g} ms)"
            f" over {w}. Top families by recent compile seconds: {top}",
            p,
        ),
        alert(
            "SchemaCompileSlow",
            f"schema_hash:{P}schema_compile_seconds:p95_rate{w} > {p.compile_p95_seconds}"
            f" and on (instance, pod, schema_hash) schema_hash:{P}schema_requests:rate{w} > {p.min_rate}",
            p.long_for, "warning",
            "One schema compiles slowly on every use.",
            "Schema {{ $labels.schema_hash }} on pod {{ $labels.pod }} compiles in {{ $value | humanizeDuration }}"
            " at P95. `gdx lint` on the schema names the cause; the dashboard's schema table has its findings.",
            p,
        ),
        alert(
            "CacheHitRatioLow",
            f"pod:{P}compile_cache_hit:ratio_rate{w} < {p.hit_ratio} and on (instance, pod) {traffic}",
            p.long_for, "warning",
            "The grammar cache rarely hits: schemas change between requests.",
            f"Cache hit ratio on pod {{{{ $labels.pod }}}} is {{{{ $value | humanizePercentage }}}} (line {p.hit_ratio:g})."
            f" Top families by recent compile seconds: {top}",
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
            f"instance:{P}cpu_busy:ratio_rate{w} > {p.cpu_busy}"
            f" and on (instance) instance:{P}gpu_utilization:ratio < {p.gpu_idle_below}"
            f" and on (instance) sum by (instance) (rate({P}compile_requests_total[{w}])) > {p.min_rate}",
            p.long_for, "critical",
            "Host CPUs are saturated while GPUs idle and grammars compile.",
            f"Node {{{{ $labels.instance }}}}: CPU busy {{{{ $value | humanizePercentage }}}}, GPUs under {p.gpu_idle_below:g}"
            f" utilised, grammar compiles running. Top families by recent compile seconds: {top}",
            p,
        ),
        alert(
            "GrammarWaitHigh",
            f"pod:{P}grammar_wait_seconds:p95_rate{w} > {p.grammar_wait_p95_seconds} and on (instance, pod) {traffic}",
            p.long_for, "critical",
            "Requests are parked behind grammar compiles.",
            f"Grammar wait P95 on pod {{{{ $labels.pod }}}} is {{{{ $value | humanizeDuration }}}} (line"
            f" {p.grammar_wait_p95_seconds * 1000:g} ms): requests queue behind compiles in the pool. Top families: {top}",
            p,
        ),
        alert(
            "CompileStuck",
            f"max by (instance, pod, backend) ({P}compile_oldest_running_seconds) > {p.stuck_seconds}",
            "1m", "critical",
            "A grammar compile has been running for over a minute.",
            "A {{ $labels.backend }} compile on pod {{ $labels.pod }} has run for {{ $value | humanizeDuration }}:"
            " compiles cannot be cancelled; the pool worker is lost until it ends. Top families: " + top,
            p,
        ),
        alert(
            "UnenforcedKeywords",
            f'sum by (instance, schema_hash) ({P}schema_lint_findings{{rule="xgrammar_unenforced"}}) > 0'
            f' and on (schema_hash) max by (schema_hash) ({P}schema_info{{backend="xgrammar"}})',
            p.info_for, "info",
            "Schemas in use carry keywords the active backend does not enforce.",
            "Schema {{ $labels.schema_hash }} uses {{ $value }} keyword(s) xgrammar compiles but does not enforce:"
            " outputs may violate the schema. `gdx lint` lists them.",
            p,
        ),
        alert(
            "ProbeMissing",
            f"max by (instance, pod) ({P}target_up) == 1 unless on (pod) max by (pod) ({P}probe_info)",
            p.long_for, "warning",
            "An engine is scraped but its probe does not report.",
            "Pod {{ $labels.pod }} answers /metrics but no probe reports from it: compile metrics are missing."
            " Check that the image has the probe and the socket directory is mounted.",
            p,
        ),
        alert(
            "ExporterDown",
            f'up{{job="{p.exporter_job}"}} == 0 or absent(up{{job="{p.exporter_job}"}})',
            p.short_for, "critical",
            "The guided-decoding exporter is down: compile stalls would go unseen.",
            "Prometheus cannot scrape the exporter {{ $labels.instance }} (job " + p.exporter_job + ").",
            p,
        ),
    ]  # fmt: skip


def render(p: Params | None = None) -> dict[str, Any]:
    p = p or Params()
    return {
        "groups": [
            {"name": "guided-decoding.rules", "rules": recording(p)},
            {"name": "guided-decoding.alerts", "rules": alerts(p)},
        ]
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
