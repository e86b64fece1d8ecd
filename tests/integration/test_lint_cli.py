"""`gdx hash` and `gdx lint` as a user runs them: real processes, real files, exit codes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from exporter import cli
from exporter.lintcli import OLD_SPELLINGS
from exporter.schema.identity import schema_hash, shape_hash

PATTERN = {
    "title": "Codes",
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^[A-Z]{8,64}$"}},
}


def gdx(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args], input=stdin, capture_output=True, text=True, timeout=300
    )


def test_hash_matches_what_the_probe_reports(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(PATTERN, indent=4))
    engine_string = json.dumps(dict(reversed(list(PATTERN.items()))))  # what an engine might be sent
    out = gdx("hash", str(path))
    assert out.returncode == 0
    assert out.stdout.split() == [
        f"schema_hash={schema_hash(engine_string)}",
        f"shape_hash={shape_hash(engine_string)}",
        str(path),
    ]
    regex = tmp_path / "r.txt"
    regex.write_text("^[0-9]{3}$\n")
    assert gdx("hash", str(regex)).stdout.split()[0] == f"schema_hash={schema_hash('^[0-9]{3}$')}"


def test_lint_exit_codes_and_text(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "string"}}}))
    out = gdx("lint", str(good))
    assert out.returncode == 0 and "no findings" in out.stdout
    warn = tmp_path / "warn.json"
    warn.write_text(json.dumps(PATTERN))
    out = gdx("lint", str(warn))
    assert (
        out.returncode == 0
        and "bounded_quantifier" in out.stdout
        and "/properties/code/pattern" in out.stdout
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "array", "uniqueItems": True}))
    assert gdx("lint", str(bad)).returncode == 1  # llguidance refuses it: an error
    assert gdx("lint", "--engine", "xgrammar", str(bad)).returncode == 0  # only a warning for xgrammar
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    out = gdx("lint", str(broken))
    assert out.returncode == 2 and str(broken) in out.stderr and "not JSON" in out.stderr
    out = gdx("lint", str(tmp_path / "missing.json"))
    assert out.returncode == 2 and "missing.json" in out.stderr


def test_jsonl_variants_name_the_varying_enum(tmp_path: Path) -> None:
    lines = []
    for tenant in range(6):
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"cc": {"enum": [f"T{tenant}-{i}" for i in range(3)]}},
        }
        lines.append(json.dumps({"id": f"req{tenant}", "schema": schema}))
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = gdx("lint", "--format", "json", str(path))
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert [r["name"] for r in report] == [f"{path}:req{t}" for t in range(6)]
    assert {f["pointer"] for r in report for f in r["findings"] if f["rule"] == "dynamic_enum"} == {
        "/properties/cc/enum"
    }
    assert "T0-0" not in out.stdout  # no literal value in the report


def test_stdin_and_unstable_serialisation() -> None:
    a = json.dumps({"type": "string", "maxLength": 5})
    b = json.dumps({"maxLength": 5, "type": "string"})
    out = gdx("lint", "--format", "json", "-", stdin=f"{a}\n{b}\n")
    rules = [f["rule"] for r in json.loads(out.stdout) for f in r["findings"]]
    assert rules == ["unstable_serialization", "unstable_serialization"]


def test_lint_compiles_for_real_with_a_tokenizer(tmp_path: Path, tokenizer_json: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {"type": "object", "properties": {"a": {"not": {"type": "string"}}, "b": {"type": "string"}}}
        )
    )
    out = gdx("lint", "--format", "json", "--tokenizer", str(tokenizer_json), str(path))
    (report,) = json.loads(out.stdout)
    by_engine = {c["engine"]: c for c in report["compile"]}
    assert by_engine["xgrammar"]["ok"] and by_engine["xgrammar"]["seconds"] > 0
    assert not by_engine["llguidance"]["ok"] and "not" in by_engine["llguidance"]["error"]
    assert {(p["engine"], p["keyword"], p["outcome"]) for p in report["probes"]} == {
        ("xgrammar", "not", "unenforced"),
        ("llguidance", "not", "refused"),
    }


def test_help_lists_the_rules() -> None:
    out = gdx("lint", "--help")
    assert out.returncode == 0
    for rule in ("dynamic_enum", "bounded_quantifier", "xgrammar_unenforced", "too_complex"):
        assert rule in out.stdout


def _four_levels(tmp_path: Path) -> Path:
    """Objects four deep: one past the default depth limit of 3."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(4):
        schema = {"type": "object", "properties": {"x": schema}}
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(schema))
    return path


def _rules(out: subprocess.CompletedProcess[str]) -> list[str]:
    return [f["rule"] for report in json.loads(out.stdout) for f in report["findings"]]


def test_lint_takes_the_serve_flag_names(tmp_path: Path) -> None:
    path = _four_levels(tmp_path)
    assert _rules(gdx("lint", "--format", "json", str(path))) == ["depth"]
    out = gdx("lint", "--format", "json", "--lint.depth", "4", str(path))
    assert out.returncode == 0 and _rules(out) == [] and out.stderr == ""
    out = gdx("lint", "--format", "json", "--lint.budget-nodes", "2", "--lint.budget", "5s", str(path))
    assert out.returncode == 1 and _rules(out) == ["too_complex"]
    out = gdx("lint", "--lint.depth", "0", str(path))
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "gdx lint: invalid configuration: lint.depth (from --lint.depth): '0' must be greater than zero"
    )


def test_old_flag_spellings_still_work_and_warn_once(tmp_path: Path) -> None:
    path = _four_levels(tmp_path)
    args = ["--depth", "4", "--depth", "5", "--max-items", "30", "--union-depth", "4", "--union-width", "9"]
    args += ["--enum-size", "65", "--quantifier", "33", "--budget-seconds", "2", "--budget-nodes", "50000"]
    out = gdx("lint", "--format", "json", *args, str(path))
    assert out.returncode == 0 and _rules(out) == []  # --depth took effect
    assert out.stderr.splitlines() == [
        f"gdx lint: {old} is deprecated and goes away in the next release; use --{new}"
        for old, new in OLD_SPELLINGS.items()
    ]
    out = gdx("lint", "--format", "json", "--budget-nodes", "2", str(path))
    assert _rules(out) == ["too_complex"] and len(out.stderr.splitlines()) == 1


def test_old_spellings_are_hidden_aliases_of_the_new_flags() -> None:
    (commands,) = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    lint_parser = commands.choices["lint"]
    by_flag = {flag: action for action in lint_parser._actions for flag in action.option_strings}
    assert set(OLD_SPELLINGS) <= set(by_flag)
    for old, new in OLD_SPELLINGS.items():
        assert by_flag[old].dest == by_flag["--" + new].dest
        assert by_flag[old].help == argparse.SUPPRESS
    help_text = gdx("lint", "--help").stdout
    assert "--lint.budget-nodes" in help_text
    assert [old for old in OLD_SPELLINGS if old in help_text] == []
