"""The engines' own diagnostics as `gdx lint --tokenizer` findings, on the real engines over the real
Llama 3 tokenizer: what xgrammar logs to fd 2 while it compiles (captured, parsed, mapped to the
schema's pointers, fd 2 given back), llguidance's refusal text and its lenient-mode warnings. One
version difference is shown on real versions, each in its own interpreter (one xgrammar per process):
xgrammar 0.2.7 drops minLength/maxLength beside a pattern without a word, 0.2.8 and 0.2.9 log it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.lint.engines import Engines
from exporter.lint.report import analyse
from exporter.lint.requests import read_inputs
from exporter.schema.findings import Finding, Thresholds
from tools.harness import ROOT

ENGINES = Path(os.environ.get("GDX_ENGINES_DIR", ROOT / ".cache" / "engines"))
LOGGED = "logged while compiling"


@pytest.fixture(scope="module")
def checker(tokenizer_json: Path) -> Iterator[Engines]:
    """Both engines, loaded once for the module (as `gdx lint --tokenizer` loads them once)."""
    yield Engines(str(tokenizer_json), ["xgrammar", "llguidance"])


def lint_findings(checker: Engines, schema: Any, tmp_path: Path) -> list[Finding]:
    """The findings `gdx lint --tokenizer` reports for one schema file."""
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    report = analyse(read_inputs([str(path)], io.StringIO()), Thresholds(), checker.names, checker)
    (family,) = report.families
    (spec,) = family.schemas
    return list(spec.findings)


def at(findings: list[Finding], rule: str, pointer: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule and f.pointer == pointer]


def test_what_xgrammar_logs_is_found_where_it_applies(checker: Engines, tmp_path: Path) -> None:
    """A non-disjoint oneOf, a mid-regex `$`, a multi-branch allOf and a number multipleOf: each logged
    message is a finding at its own pointer; those the table has say the log confirmed them."""
    schema = {
        "type": "object",
        "properties": {
            "u": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "p": {"type": "string", "pattern": "^ab$c"},
            "a": {
                "allOf": [
                    {"type": "object", "properties": {"x": {"type": "integer"}}},
                    {"type": "object", "properties": {"y": {"type": "string"}}},
                ]
            },
            "n": {"type": "number", "multipleOf": 0.5},
        },
    }
    (xgrammar, _) = checker.compile(json.dumps(schema))
    version = checker.versions["xgrammar"]
    assert xgrammar.version == version and xgrammar.ok
    assert "Anchor '$' in the middle of regex is ignored: ^ab$c" in xgrammar.warnings
    assert not any("/project/cpp" in warning for warning in xgrammar.warnings)  # the prefix is stripped
    findings = lint_findings(checker, schema, tmp_path)
    (oneof,) = at(findings, "xgrammar_unenforced", "/properties/u/oneOf")
    assert "`oneOf exclusivity`" in oneof.message and oneof.message.endswith(
        f"(xgrammar {version} logged it)"
    )
    (allof,) = at(findings, "xgrammar_unenforced", "/properties/a/allOf")
    assert "`allOf with several branches`" in allof.message and "logged it" in allof.message
    for pointer, name in (("/properties/p/pattern", "pattern anchor in the middle"),
                          ("/properties/n/multipleOf", "number multipleOf")):  # fmt: skip
        (found,) = at(findings, "xgrammar_unenforced", pointer)  # the table's, confirmed by the log
        assert found.severity == "warning" and f"`{name}`" in found.message
        assert found.message.endswith(f"(xgrammar {version} logged it)")
    assert "multipleOf is not supported for type:number; ignoring multipleOf" in xgrammar.warnings


def test_fd2_is_given_back_after_each_compile(checker: Engines, capfd: pytest.CaptureFixture[str]) -> None:
    """What xgrammar logs is taken off fd 2, what else is written there still arrives, and so does a
    write after the compile."""
    capfd.readouterr()
    os.write(2, b"before\n")
    (xgrammar, _) = checker.compile(json.dumps({"oneOf": [{"type": "integer"}, {"type": "number"}]}))
    os.write(2, b"after\n")
    print("to stderr", file=sys.stderr, flush=True)
    err = capfd.readouterr().err
    assert xgrammar.warnings and "falling back to anyOf" in xgrammar.warnings[0]
    assert err == "before\nafter\nto stderr\n"
    (refused, _) = checker.compile('{"type": "integer", "multipleOf": -3}')  # a failing compile
    os.write(2, b"still here\n")
    assert not refused.ok and capfd.readouterr().err == "still here\n"


def test_a_lenient_schema_gives_llguidance_ignored(checker: Engines, tmp_path: Path) -> None:
    """With "x-guidance": {"lenient": true} llguidance compiles `not` and an unknown format, and warns
    that it drops them: `llguidance_ignored`, in place of the table's refusal."""
    schema = {
        "x-guidance": {"lenient": True},
        "type": "object",
        "properties": {"a": {"not": {"type": "string"}}, "b": {"type": "string", "format": "iri"}},
    }
    (_, llguidance) = checker.compile(json.dumps(schema))
    assert llguidance.ok and 'Unimplemented keys: ["not"]' in llguidance.warnings
    version = checker.versions["llguidance"]
    findings = lint_findings(checker, schema, tmp_path)
    (ignored,) = at(findings, "llguidance_ignored", "/properties/a/not")
    assert ignored.severity == "warning"
    assert ignored.message == (
        f'llguidance compiles `not` and ignores it (llguidance {version} warned: Unimplemented keys: ["not"])'
    )
    (fmt,) = at(findings, "llguidance_ignored", "/properties/b/format")
    assert "`format iri`" in fmt.message and "Unknown format: iri" in fmt.message
    assert not [f for f in findings if f.rule == "llguidance_refused"]  # it compiled


def test_a_refusal_carries_the_engines_error_text(checker: Engines, tmp_path: Path) -> None:
    """The table's refusal gets llguidance's own error; a refusal no table entry names (a format whose
    regex cannot fit maxLength) is its own finding with the engine's text."""
    version = checker.versions["llguidance"]
    strict = {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}
    (refused,) = at(lint_findings(checker, strict, tmp_path), "llguidance_refused", "/properties/a/not")
    assert refused.message.endswith(f'(llguidance {version}: Unimplemented keys: ["not"])')
    unsatisfiable = {"type": "string", "format": "date", "maxLength": 3}
    (alone,) = at(lint_findings(checker, unsatisfiable, tmp_path), "llguidance_refused", "")
    assert alone.severity == "error"
    assert alone.message.startswith(
        f"llguidance {version} refuses this schema at compile time: Unsatisfiable"
    )
    lookaround = {"type": "string", "pattern": "^(?!admin$)[a-z]+$"}
    (regex,) = at(lint_findings(checker, lookaround, tmp_path), "llguidance_refused", "/pattern")
    assert "look-around" in regex.message and "`pattern lookaround`" in regex.message


LENGTH = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$", "maxLength": 8}}}
ONEOF = {"oneOf": [{"type": "integer"}, {"type": "number"}]}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("xgrammar", "logs_length"), [("0.2.7", False), ("0.2.8", True), ("", True)], ids=str
)
def test_xgrammar_0_2_7_drops_length_beside_a_pattern_without_a_word(
    xgrammar: str, logs_length: bool, tokenizer_json: Path, tmp_path: Path
) -> None:
    """`gdx lint --tokenizer` in its own process on each version ("": the virtualenv's): the finding is on
    stdout from that version's table, no xgrammar log line reaches stderr; only 0.2.8 and later log
    the dropped maxLength (on 0.2.7 only the table knows it)."""
    path = [str(ROOT)]
    if xgrammar:
        folder = ENGINES / f"xgrammar-{xgrammar}"
        assert (folder / ".installed").exists(), f"run `make engines` first: {folder} not installed"
        path.insert(0, str(folder))
    schemas = tmp_path / "schemas.jsonl"
    schemas.write_text(
        "".join(
            json.dumps({"id": name, "schema": s}) + "\n" for name, s in (("length", LENGTH), ("oneof", ONEOF))
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "exporter", "lint", "--format", "json", "--engine", "xgrammar",
               "--tokenizer", str(tokenizer_json), str(schemas)]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Warning:" not in run.stderr and "/project/cpp" not in run.stderr, run.stderr[-3000:]
    specs = {s["name"].rsplit(":", 1)[1]: s for f in json.loads(run.stdout)["families"] for s in f["schemas"]}
    (compiled,) = specs["length"]["compile"]
    assert compiled["version"] == (xgrammar or compiled["version"]) and compiled["ok"]
    (finding,) = [f for f in specs["length"]["findings"] if f["pointer"] == "/properties/code/maxLength"]
    assert finding["rule"] == "xgrammar_unenforced" and "`maxLength beside pattern`" in finding["message"]
    assert f"(verified on xgrammar {compiled['version']})" in finding["message"]  # that version's table
    assert finding["message"].endswith(f"(xgrammar {compiled['version']} logged it)") == logs_length
    (oneof,) = [f for f in specs["oneof"]["findings"] if f["pointer"] == "/oneOf"]
    assert oneof["message"].endswith(
        f"(xgrammar {compiled['version']} logged it)"
    )  # every version logs this one
