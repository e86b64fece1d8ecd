"""The scenario suite's figures (`python -m tools.bench.scenarios`): seconds from the first injected
request to the `dynamic_schema` finding on /metrics, per scenario, with real xgrammar, a real daemon
and the real `gdx lint` (tests/system/test_scenarios.py, whose docstring says how it measures).

Runs that module under pytest with GDX_SCENARIO_REPORT set, then prints a Markdown table: families
seen, the finding's severity on /metrics and in `gdx lint`, lint's exit code, the seconds (and the
injected requests sent by then) to the finding, the probe's snapshot interval, the scrape period and
the request rate. Exit code: pytest's (a failed scenario is printed with the figures it reached).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tools.bench.machine import header
from tools.harness import ROOT

MODULE = "tests/system/test_scenarios.py"


def table(doc: dict[str, Any]) -> str:
    lines = [
        f"probe interval {doc['probe_interval']} s, /metrics polled every {doc['poll']} s, "
        f"{doc['rate']:g} requests per second, --lint.dynamic-span {doc.get('span', 30.0):g} s "
        "(the finding waits for new variants to keep arriving this long; the default is 30 s)",
        "",
        "| scenario | requests | families | /metrics | gdx lint | lint exit | seconds to finding |",
        "| --- | ---: | ---: | --- | --- | ---: | --- |",
    ]
    for row in doc["scenarios"]:
        seconds = row["seconds_to_finding"]
        to = "" if seconds is None else f"{seconds:.2f} s ({row['requests_to_finding']} injected requests)"
        lines.append(
            f"| {row['scenario']} | {row['requests']} | {row['families']} | {row['metrics'] or 'none'} | "
            f"{row['lint'] or 'none'} | {row['lint_exit']} | {to} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.scenarios", description=__doc__)
    parser.add_argument("-k", metavar="EXPR", help="only the scenarios pytest -k selects")
    parser.add_argument("--json", metavar="PATH", help="also keep the figures as JSON here")
    args = parser.parse_args(argv)
    print(header("tools.bench.scenarios", argv))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(args.json) if args.json else Path(tmp) / "scenarios.json"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", MODULE]
        if args.k:
            command += ["-k", args.k]
        run = subprocess.run(
            command, cwd=ROOT, env={**os.environ, "GDX_SCENARIO_REPORT": str(report)}, capture_output=True,
            text=True,
        )  # fmt: skip
        if run.returncode != 0:
            print(run.stdout[-4000:], file=sys.stderr)
        if report.is_file():
            print(table(json.loads(report.read_text())))
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
