"""`gdx lint --engine vllm` runs the API server's outlines validation bounded (exporter/lint/bounded.py,
real outlines_core 0.2.14 in a child): schemas of the class that stalls or kills vLLM's API server,
built from the mechanism (optional properties nested in optional properties, each level multiplying
the regex outlines builds; `patternProperties` beside `properties` to send them to outlines), and the
two JsonSchemaStore schemas measured on the real server (clang-format: a stall; theme: an abort).
The bounded run never takes gdx lint down, and its cost is reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.lint import bounded
from exporter.schema.identity import schema_hash
from tests.support.server_killers import jsonschemastore, nested

pytestmark = pytest.mark.timeout(300)


def test_the_regex_grows_with_the_nesting_and_so_does_the_stall() -> None:
    runs = {shape: bounded.run(json.dumps(nested(*shape))) for shape in ((4, 2), (5, 3), (7, 3))}
    assert all(r.outcome == "validated" and r.version == "0.2.14" for r in runs.values()), runs
    small, medium, large = (runs[s] for s in ((4, 2), (5, 3), (7, 3)))
    assert small.regex_chars < medium.regex_chars < large.regex_chars
    assert small.seconds < bounded.STALL_WARNING_SECONDS < large.seconds
    assert large.seconds > bounded.STALL_ERROR_SECONDS  # seconds of the API server blocked


def test_a_regex_past_the_memory_bound_is_a_death_with_the_allocation_named() -> None:
    run = bounded.run(json.dumps(nested(12, 4)), memory_bytes=1 << 30, timeout=120)
    assert run.outcome == "died" and run.crashed, run
    assert run.allocation_bytes > 0 and "signal 6" in run.detail  # Rust's abort: SIGABRT


def test_a_step_past_the_time_bound_is_killed_and_counts_as_that_long() -> None:
    run = bounded.run(json.dumps(nested(8, 4)), timeout=2)
    assert run.outcome == "timeout" and 2 <= run.stall < 10, run


def test_what_the_library_refuses_is_a_rejection_not_a_crash() -> None:
    run = bounded.run(
        '{"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}, "patternProperties": {}}'
    )
    assert run.outcome == "rejected" and not run.crashed and run.detail, run


def gdx(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "exporter", "lint", *args], capture_output=True, text=True,
                          timeout=240, cwd=cwd)  # fmt: skip


def test_gdx_lint_predicts_the_stall_and_the_crash_the_real_server_suffered(tmp_path: Path) -> None:
    specs = {"clang-format": jsonschemastore("clang-format"), "theme": jsonschemastore("theme"),
             "nested": nested(7, 3), "plain": nested(3, 1)}  # fmt: skip
    for name, schema in specs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(schema))
    files = [f"{name}.json" for name in specs]
    out = gdx("--engine", "vllm==0.33.0", "--format", "json", *files, cwd=tmp_path)
    assert out.returncode == 1, out.stderr[-3000:]  # errors found; gdx lint itself survived the crash
    doc = json.loads(out.stdout)
    found = {
        s["name"]: {(f["rule"], f["severity"]) for f in s["findings"] if f["rule"].startswith("server_")}
        for family in doc["families"]
        for s in family["schemas"]
    }
    assert found == {
        "clang-format.json": {("server_stall", "error")},
        "theme.json": {("server_crash", "error")},
        "nested.json": {("server_stall", "error")},
        "plain.json": set(),
    }
    assert doc["api_server_validation"]["runs"] == 4 and doc["api_server_validation"]["seconds"] > 1
    theme = next(s for f in doc["families"] for s in f["schemas"] if s["name"] == "theme.json")
    assert (
        theme["schema_hash"] == schema_hash(json.dumps(specs["theme"]))
        and theme["vllm_backend"] == "outlines"
    )
    crash = next(f for f in theme["findings"] if f["rule"] == "server_crash")
    assert crash["keyword"] == "patternProperties" and crash["pointer"].endswith("/patternProperties")

    text = gdx("--engine", "vllm==0.32.0", "plain.json", cwd=tmp_path)
    assert "the API server's outlines validation, bounded: 1 schema," in text.stdout
    skipped = gdx(
        "--engine", "vllm==0.32.0", "--no-api-server.validate", "--format", "json", "theme.json", cwd=tmp_path
    )
    assert "server_crash" not in skipped.stdout and "api_server_validation" not in json.loads(skipped.stdout)
    bad = gdx("--engine", "vllm", "--api-server.memory-limit", "lots", "theme.json", cwd=tmp_path)
    assert bad.returncode == 2 and "--api-server.memory-limit" in bad.stderr
