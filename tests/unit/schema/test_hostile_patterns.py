"""Issue 47, item 1: a ~350-byte schema whose own pattern backtracks on its own constant froze the
daemon's analysis thread (Python's `re` never released the GIL: /metrics and /healthz stopped) and
hung `gdx lint`. Each run here is a separate interpreter under a wall-clock limit, so the old code
fails by timing out instead of holding the test run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.engines.grammars import compiled

HOSTILE = [
    ("nested quantifier", "^(a+)+$", "a" * 40 + "!"),
    ("nested star", "^((a*)*)*$", "a" * 40 + "!"),
    ("alternation overlap", "^(a|a)*$", "a" * 40 + "!"),
    ("overlapping lengths", "^(a|aa)+$", "a" * 60 + "!"),
    ("counted words", "^([a-z]+ ?){1,40}$", "ab" * 30 + "!"),
]


def hostile(pattern: str, value: str) -> dict[str, object]:
    """A oneOf whose exclusivity proof asks whether the pattern refuses the constant, and
    properties beside the union whose pinned values are checked against the pattern."""
    return {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": pattern}},
        "oneOf": [
            {"properties": {"x": {"const": value}}},
            {"properties": {"x": {"enum": [value, value + "b"]}}},
        ],
        "$defs": {"v": {"oneOf": [{"const": value}, {"type": "string", "pattern": pattern}]}},
        "required": ["x"],
        "additionalProperties": {"$ref": "#/$defs/v"},
    }


def run_bounded(code: str, timeout: float = 20) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.parametrize(("name", "pattern", "value"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_the_daemons_analysis_of_a_hostile_pattern_finishes(name: str, pattern: str, value: str) -> None:
    text = json.dumps(hostile(pattern, value))
    assert len(text) < 600  # a few hundred bytes
    code = (
        "import json, sys, time\n"
        "from exporter.daemon.receiver.analysis import analyse\n"
        "from exporter.analysis.lint import Thresholds\n"
        "start = time.perf_counter()\n"
        f"result, report = analyse('s', 'json', {text!r}, Thresholds())\n"
        "print(json.dumps({'seconds': time.perf_counter() - start, 'failure': report.failure}))\n"
    )
    done = json.loads(run_bounded(code))
    assert done["seconds"] < 2 and not done["failure"]


def test_gdx_lint_on_the_hostile_schema_finishes(tmp_path: Path) -> None:
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(hostile("^(a+)+$", "a" * 40 + "!")), encoding="utf-8")
    code = f"from exporter.cli import main; main(['lint', {str(path)!r}])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "family" in out.stdout, out.stderr[-2000:]


@pytest.mark.parametrize(("name", "pattern", "value"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_refuses_answers_a_hostile_pattern_in_ecma_terms(name: str, pattern: str, value: str) -> None:
    code = (
        "from exporter.engines.grammars import compiled\n"
        f"print(compiled.refuses({{}}, {{'type': 'string', 'pattern': {pattern!r}}}, {value!r}))\n"
    )
    assert run_bounded(code).strip() == "True"


def test_refuses_reads_the_pattern_as_ecma_262() -> None:
    """`$` is the end only and `\\d` is ASCII: a value the engine's grammar refuses is refused here."""
    assert compiled.refuses({}, {"pattern": "^a$"}, "a\n")
    assert compiled.refuses({}, {"pattern": r"^\d+$"}, "١٢")
    assert compiled.refuses({}, {"pattern": "^(?!c)"}, "c")  # lookaround: read (the regex package)
    assert not compiled.refuses({}, {"pattern": "^(?!c)"}, "d")
    assert not compiled.refuses({}, {"pattern": r"^(.)\1$"}, "cd")  # a backreference: not read, not sure
    assert compiled.disjoint({}, {"type": "string", "pattern": "^[ab]"}, {"type": "string", "pattern": "^c"})


@pytest.mark.parametrize("where", ["description", "title", "$comment"])
def test_a_long_word_in_human_text_is_masked_in_linear_time(where: str) -> None:
    """The family key masks volatile tokens in descriptions and titles with its own regex: a token holding
    a digit used to be sought again from each character of a run without one, so a schema with one
    40,000-letter word froze the daemon's analysis thread for 21 s (the probe ships specs up to 256 KiB:
    minutes). Now the token is sought only where its run starts."""
    code = (
        "import json, time\n"
        "from exporter.daemon.receiver.analysis import analyse\n"
        "from exporter.analysis.lint import Thresholds\n"
        f"text = json.dumps({{'type': 'object', {where!r}: 'a' * 200_000 + ' 2026 b' + 'c' * 50_000}})\n"
        "start = time.perf_counter()\n"
        "result, report = analyse('s', 'json', text, Thresholds())\n"
        "print(json.dumps({'seconds': time.perf_counter() - start, 'failure': report.failure}))\n"
    )
    done = json.loads(run_bounded(code))
    assert done["seconds"] < 2 and not done["failure"]
