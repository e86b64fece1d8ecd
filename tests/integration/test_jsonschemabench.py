"""The linter over every real-world schema of JSONSchemaBench's development half: no exception,
bounded time, and the findings a user would see are well formed."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

from exporter.analysis.lint import RULES, lint
from exporter.schema import family
from exporter.schema.findings import SEVERITIES
from exporter.schema.identity import schema_hash, shape_hash
from tools.harness import JSONSCHEMABENCH

SCHEMAS = JSONSCHEMABENCH / "schemas"


def test_every_schema_lints_within_budget() -> None:
    files = sorted(SCHEMAS.glob("*.jsonl.gz"))
    assert len(files) == 10, f"JSONSchemaBench schemas missing under {SCHEMAS}"
    seen = 0
    slowest = 0.0
    started = time.monotonic()
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                schema = json.loads(line)["schema"]
                lint_started = time.monotonic()
                findings = lint(schema)
                slowest = max(slowest, time.monotonic() - lint_started)
                text = json.dumps(schema)
                assert len(schema_hash(text)) == len(shape_hash(text)) == 12
                # every real schema gets a family fingerprint, none falls back to its exact text
                # (a `type` list once raised inside it: 1,066 of these were degraded unseen)
                assert not family.of(schema).degraded, text[:200]
                for finding in findings:
                    assert finding.rule in RULES and finding.severity in SEVERITIES
                    assert finding.pointer == "" or finding.pointer.startswith("/")
                seen += 1
    assert seen == 4828
    assert slowest < 2.0  # the per-schema budget is 1 s
    assert time.monotonic() - started < 120


def test_gdx_lint_reads_a_benchmark_file(tmp_path: Path) -> None:
    source = SCHEMAS / "Kubernetes.jsonl.gz"
    plain = tmp_path / "kubernetes.jsonl"
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        plain.write_text("".join(line for _, line in zip(range(40), lines, strict=False)))
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "lint", "--format", "json", str(plain)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr
    schemas = [schema for family in json.loads(out.stdout)["families"] for schema in family["schemas"]]
    assert sum(schema["lines"] for schema in schemas) == 40  # one request per line, grouped by family
    assert all(schema["name"].startswith(str(plain)) for schema in schemas)
