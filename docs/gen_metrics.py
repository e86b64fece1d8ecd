"""docs/reference/metrics.md: every family the daemon declares (exporter/daemon/metrics_table.py), by
the collector that yields it, as exposed: a counter's name with `_total`, an info's with `_info`."""

from __future__ import annotations

from pathlib import Path

from gen_common import REFERENCE, cell, header, row, table

from exporter.daemon import metrics_table

PAGE = REFERENCE / "metrics.md"
SUFFIX = {"counter": "_total", "info": "_info"}
SOURCES = {
    "cpu": "Per-core CPU (`--collector.cpu`)",
    "nvml": "GPUs, from NVML (`--collector.nvml`)",
    "vllm": "Engine targets (`--collector.vllm`): up and scrape time; their own families pass through",
    "probe": "The in-engine probe (`--collector.probe`): compiles, waits, caches, schemas, the guard",
    "self": "The daemon itself",
    "logs": "The engines' grammar log lines",
}


def exposed(spec: metrics_table.MetricSpec) -> str:
    return spec.full_name + SUFFIX.get(spec.type, "")


def page() -> str:
    lines = header(
        "Metrics reference",
        "For whoever writes a query, an alert or a dashboard: every family `gdx serve` exposes on `/metrics`,"
        " its type, its labels and its help text. Why they are shaped so, the endpoints and the series caps:"
        " [metrics.md](../metrics.md).",
        "docs/gen_metrics.py",
        "`exporter/daemon/metrics_table.py`",
    )
    lines += [
        "Engine-level series also carry `namespace`, first, wherever the daemon knows the engine pod's",
        "namespace ([metrics.md](../metrics.md)); it is not listed below. Help texts in braces are filled in",
        "at run time.",
        "",
    ]
    for source, specs in metrics_table.FAMILIES.items():
        lines += [f"## {SOURCES.get(source, source)}", ""]
        rows = [row(f"`{exposed(s)}`", s.type, cell(", ".join(s.labels)) or "-", cell(s.help)) for s in specs]
        lines += [*table(("name", "type", "labels", "help"), rows), ""]
    return "\n".join(lines)


def pages() -> dict[Path, str]:
    return {PAGE: page()}
