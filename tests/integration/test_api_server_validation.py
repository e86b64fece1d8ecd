"""`gdx lint --engine vllm` runs the API server's outlines validation bounded
(exporter/engines/vllm/outlines_validation.py,
real outlines_core 0.2.14 in a child): schemas of the class that stalls or kills vLLM's API server,
built from the mechanism (optional properties nested in optional properties, each level multiplying
the regex outlines builds; `patternProperties` beside `properties` to send them to outlines), and the
two JsonSchemaStore schemas measured on the real server (clang-format: a stall; theme: an abort).
The bounded run never takes gdx lint down, and its cost is reported.

`gdx lint` runs in this process (`exporter.cli.main`, what `python -m exporter` calls), once per
command line, instead of an interpreter per command line importing the engines again; and a bounded
run is made once per module for the same schema text and bounds (`bounded_run`), so the nested
schema whose stall the first test measures is not run again when `gdx lint` validates the same text
within the same bounds."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exporter.cli import main
from exporter.engines.vllm import outlines_validation as bounded
from exporter.schema.identity import schema_hash
from tests.support.server_killers import jsonschemastore, nested

pytestmark = pytest.mark.timeout(300)
_RUN = bounded.run
_RUNS: dict[tuple[str, int, float, str], bounded.BoundedRun] = {}


def bounded_run(
    text: str,
    memory_bytes: int = bounded.DEFAULT_MEMORY_BYTES,
    timeout: float = bounded.DEFAULT_TIMEOUT_SECONDS,
    python: str = sys.executable,
) -> bounded.BoundedRun:
    """`bounded.run`, made once for the module per schema text and bounds."""
    key = (text, memory_bytes, float(timeout), python)
    if key not in _RUNS:
        _RUNS[key] = _RUN(text, memory_bytes, timeout, python)
    return _RUNS[key]


def test_the_regex_grows_with_the_nesting_and_so_does_the_stall() -> None:
    runs = {shape: bounded_run(json.dumps(nested(*shape))) for shape in ((4, 2), (5, 3), (7, 3))}
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
    """`python -m exporter lint ARGS` in `cwd`, run here: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.chdir(cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        patch.setattr(bounded, "run", bounded_run)
        try:
            code = main(["lint", *args])
        except SystemExit as exit:  # argparse's errors
            code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    return subprocess.CompletedProcess(["gdx", "lint", *args], code, out.getvalue(), err.getvalue())


def killer_files(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """The two public schemas measured on the real server, a synthetic stall and a plain one, each
    written to `folder` as NAME.json: the schemas and the file names."""
    specs = {"clang-format": jsonschemastore("clang-format"), "theme": jsonschemastore("theme"),
             "nested": nested(7, 3), "plain": nested(3, 1)}  # fmt: skip
    for name, schema in specs.items():
        (folder / f"{name}.json").write_text(json.dumps(schema))
    return specs, [f"{name}.json" for name in specs]


def test_gdx_lint_predicts_the_stall_and_the_crash_the_real_server_suffered(tmp_path: Path) -> None:
    specs, files = killer_files(tmp_path)
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


def guidance_bound(refused_by_llguidance: str) -> dict[str, object]:
    """A schema `auto` sends to guidance (an integer's `multipleOf`, which xgrammar's router check
    refuses; no `patternProperties`), and beside it `refused_by_llguidance`: a keyword llguidance
    refuses at validation (`oneOf` over branches that overlap, `not`), or "" for none."""
    extra: dict[str, object] = {
        "oneOf": {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]},
        "not": {"not": {"type": "null"}},
        "": {"type": "boolean"},
    }[refused_by_llguidance]
    return {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}, "x": extra}}


def test_gdx_lint_predicts_the_400_of_the_guidance_validation_and_says_when_it_could_not(
    tmp_path: Path,
) -> None:
    """The guidance-routed half of the API server's refusals (the dev half's 400s agree with vLLM's
    own: tests/integration/test_routing_agreement.py): server_rejected with llguidance's own error, at
    the keyword that sent the schema there; none where llguidance takes it; and where llguidance
    is missing, stderr and the text output say the check did not run and what to install."""
    for name in ("oneOf", "not", ""):
        (tmp_path / f"g-{name or 'plain'}.json").write_text(json.dumps(guidance_bound(name)))
    files = ["g-oneOf.json", "g-not.json", "g-plain.json"]
    out = gdx("--engine", "vllm==0.32.0", "--format", "json", *files, cwd=tmp_path)
    doc = json.loads(out.stdout)
    rejected = {
        s["name"]: [f for f in s["findings"] if f["rule"] == "server_rejected"]
        for family in doc["families"]
        for s in family["schemas"]
    }
    assert {name: len(found) for name, found in rejected.items()} == {"g-oneOf.json": 1, "g-not.json": 1,
                                                                     "g-plain.json": 0}  # fmt: skip
    (one_of,) = rejected["g-oneOf.json"]
    assert one_of["severity"] == "error" and one_of["pointer"] == "/properties/n"
    assert "to guidance because of `multipleOf`" in one_of["message"] and "oneOf" in one_of["message"]
    assert "HTTP 400" in one_of["message"]
    assert doc["api_server_validation"]["guidance_runs"] == 3
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "llguidance", None)  # `import llguidance` raises ImportError
        missing = gdx("--engine", "vllm==0.32.0", "g-oneOf.json", cwd=tmp_path)
    assert "error    server_rejected" not in missing.stdout
    assert "install 'llguidance>=1.7,<1.8' (what vLLM 0.32.0 pins)" in missing.stderr, missing.stderr
    assert "NOT CHECKED: the API server's guidance validation (llguidance is not installed" in missing.stdout


def test_the_guard_file_lint_writes_refuses_exactly_what_it_predicted(tmp_path: Path) -> None:
    """`--write-guard`: the schemas lint predicts crash or stall (at error) the API server, as the probe's
    guard loads them (GDX_GUARD_FILE): those refused, by the hash the probe computes from the request,
    and nothing else."""
    from exporter.probe.guard import Guard, GuardSettings, read_file

    specs, files = killer_files(tmp_path)
    out = gdx("--engine", "vllm==0.33.0", "--write-guard", "guard.json", *files, cwd=tmp_path)
    assert out.returncode == 1 and "3 verdicts written to guard.json" in out.stderr, out.stderr[-3000:]
    doc = json.loads((tmp_path / "guard.json").read_text())
    hashes = {name: schema_hash(json.dumps(schema)) for name, schema in specs.items()}
    assert doc["vllm"] == "0.33.0"
    expected = {"clang-format": "server_stall", "theme": "server_crash", "nested": "server_stall"}
    assert {v["schema_hash"]: v["reason"] for v in doc["verdicts"]} == {
        hashes[n]: r for n, r in expected.items()
    }
    guard = Guard(GuardSettings("enforce"))
    assert guard.load(read_file(str(tmp_path / "guard.json")), "lint") == 3
    refused = {name for name, schema in specs.items() if guard.verdict(schema_hash(json.dumps(schema)))}
    assert refused == {"clang-format", "theme", "nested"}
    bad = gdx("--write-guard", "guard.json", "plain.json", cwd=tmp_path)
    assert bad.returncode == 2 and "--write-guard needs --engine vllm" in bad.stderr


def test_the_guard_file_takes_deep_unions_as_compile_budget_only_when_asked(tmp_path: Path) -> None:
    """`--write-guard-unions`: a schema with a union_depth finding is written as compile_budget, with
    the screens the guard tests every request by; the guard finds it from the request's object on any
    path. Without the flag, and for a shallow union, nothing."""
    from exporter.probe.guard import Guard, GuardSettings, read_file

    deep: dict[str, Any] = {"type": "string"}
    for _ in range(5):
        deep = {"anyOf": [deep, {"type": "integer"}]}
    deep = {"type": "object", "properties": {"v": deep}, "required": ["v"]}
    shallow = {"type": "object", "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}
    (tmp_path / "deep.json").write_text(
        json.dumps(deep, indent=1)
    )  # another serialisation than the request's
    (tmp_path / "shallow.json").write_text(json.dumps(shallow))
    plain = gdx("--engine", "vllm==0.33.0", "--write-guard", "plain-guard.json", "deep.json", "shallow.json",
                cwd=tmp_path)  # fmt: skip
    assert "0 verdicts written" in plain.stderr, plain.stderr[-3000:]
    out = gdx("--engine", "vllm==0.33.0", "--write-guard", "guard.json", "--write-guard-unions", "deep.json",
              "shallow.json", cwd=tmp_path)  # fmt: skip
    assert "1 verdicts written to guard.json" in out.stderr, out.stderr[-3000:]
    (entry,) = json.loads((tmp_path / "guard.json").read_text())["verdicts"]
    assert entry["reason"] == "compile_budget" and "anyOf/oneOf nested" in entry["detail"]
    guard = Guard(GuardSettings("enforce"))
    assert guard.load(read_file(str(tmp_path / "guard.json")), "lint") == 1
    found = guard.screen(json.loads(json.dumps(deep)))  # the request's object, as vLLM's API server holds it
    assert found is not None and found[0] == schema_hash(json.dumps(deep)) == entry["schema_hash"]
    assert guard.screen(shallow) is None
    lone = gdx("--write-guard-unions", "deep.json", cwd=tmp_path)
    assert lone.returncode == 2 and "--write-guard-unions adds to --write-guard FILE" in lone.stderr
