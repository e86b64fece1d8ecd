"""Issue 47, item 7: check.py (written by `gdx fix`, standard library only) and the tool check, on
hostile outputs and schemas: ECMA-262 patterns (what the request's own grammar refuses is refused),
bounded work, and every failure a rejection message, never an exception or a pass. Each case runs
the generated check.py in a fresh isolated interpreter without this package, under a time limit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from exporter.fix.command import standalone_check
from exporter.fix.toolcheck import check as tool_check


def deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


# (case, output, schema, the one message expected)
CASES = [
    ("$ before a trailing newline", "abc\n", {"type": "string", "pattern": "^abc$"},
     "/: does not match the pattern this request requires"),
    ("non-ASCII digits for \\d", "١٢٣", {"type": "string", "pattern": r"^\d+$"},
     "/: does not match the pattern this request requires"),
    ("non-ASCII letter for \\w", {"é": 1},
     {"patternProperties": {r"^\w+$": True}, "additionalProperties": False},
     "/: has `é`, which this request does not allow"),
    ("catastrophic counted pattern", "ab " * 3000 + "!", {"type": "string", "pattern": "^([a-z]+ ?){1,40}$"},
     "/: does not match the pattern this request requires"),
    ("required name that is not a string", {}, {"type": "object", "required": [["a"]]},
     "/: lists a name that is not a string: not checked"),
    ("multipleOf of 400 digits", 5, {"multipleOf": int("7" * 400)},
     "/: is not a multiple of a number of about 403 digits"),
    ("a 5,000-deep output", "DEEP", {"items": {"$ref": "#"}}, None),
    ("anyOf of $refs to the root", [[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]],
     {"anyOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}, {"type": "string"}]},
     "/: not checked: more than 1000000 steps of work"),
    ("a list index in Unicode digits", "x", {"prefixItems": [{"type": "string"}], "$ref": "#/prefixItems/²"},
     "/: a reference the check cannot follow"),
    ("lookaround", "b", {"type": "string", "pattern": "(?!a)b"},
     "/: has a pattern the check does not read (lookaround is not read at 0): not checked"),
]  # fmt: skip


@pytest.fixture(scope="module")
def check_py(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("service")
    (folder / "check.py").write_text(standalone_check([]), encoding="utf-8")
    return folder


def run_check(folder: Path, output: Any, schema: Any) -> tuple[list[str], float]:
    """check.check(output, schema) in a fresh interpreter (-I -S: no site-packages, no package)."""
    code = (
        "import sys, json, time; sys.setrecursionlimit(20000)\n"
        f"sys.path.insert(0, {str(folder)!r}); import check\n"
        "output, schema = json.loads(sys.stdin.read())\n"
        "output = json.loads('[' * 5000 + ']' * 5000) if output == 'DEEP' else output\n"
        "start = time.perf_counter(); found = check.check(output, schema)\n"
        "print(json.dumps([found, time.perf_counter() - start]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],  # the deep output is built there: json.dumps would recurse
        input=json.dumps([output, schema]),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found, seconds = json.loads(out.stdout)
    return found, seconds


@pytest.mark.parametrize(("case", "output", "schema", "expected"), CASES, ids=[c[0] for c in CASES])
def test_generated_check_rejects_hostile_outputs_quickly(
    check_py: Path, case: str, output: Any, schema: Any, expected: str | None
) -> None:
    found, seconds = run_check(check_py, output, schema)
    if expected is None:
        assert len(found) == 1 and found[0].endswith("nested deeper than 256: not checked"), found
    else:
        assert found == [expected]
    assert seconds < 2


def test_what_could_not_be_checked_is_reported_whatever_moved(check_py: Path) -> None:
    """A moved list names the constraints to report; running out of depth or work is always one."""
    from exporter.fix.postcheck import check

    schema = {"properties": {"a": {"items": {"$ref": "#/properties/a"}}, "b": {"const": 1}}}
    assert check({"a": deep(400)}, schema, [("/properties/b", "const")]) == [
        "/a" + "/0" * 128 + ": nested deeper than 256: not checked"  # two subschemas per level
    ]


def test_check_json_rejects_what_is_not_json_or_too_deep() -> None:
    from exporter.fix.postcheck import check_json

    assert check_json('{"n": NaN}', {}) == ["/: not JSON: NaN is not JSON"]
    assert check_json("[" * 5000 + "]" * 5000, {}) == ["/: not checked: nested too deep to read"]


def test_multiple_of_is_exact_in_decimal() -> None:
    from exporter.fix.postcheck import check

    assert check(0.3, {"multipleOf": 0.1}) == []
    assert check(int("7" * 400) * 3, {"multipleOf": int("7" * 400)}) == []
    assert check(10**2000, {"multipleOf": 3}) == [
        "/: is too large or too precise to check against multipleOf 3: not checked"
    ]


def call(name: Any, arguments: Any = "{}") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


REQUEST = {"tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}]}


@pytest.mark.parametrize(
    ("calls", "request_body", "expected"),
    [
        ([call(["a"])], REQUEST, ["call 0: the tool's name is not a string"]),
        ([call("a", "[" * 5000 + "]" * 5000)], REQUEST,
         ["call 0: the arguments of 'a' are nested too deep to read: not checked"]),
        ([call("a", '{"x": NaN}')], REQUEST, ["call 0: the arguments of 'a' are not JSON"]),
        ([call("a", "[1]")], REQUEST, ["call 0: the arguments of 'a' are not a JSON object"]),
        ([call("a", {"x": 1})], REQUEST, []),  # the object itself, as a structural tag's output parses
        ([call("a", 7)], REQUEST, ["call 0: the arguments of 'a' are not a JSON object"]),
        ([7, call("a")], {**REQUEST, "parallel_tool_calls": False},
         ["call 0: not a JSON object",
          "2 tool calls, but the request allowed one (parallel_tool_calls false)"]),
        ("a", REQUEST, ["the tool calls are not a list"]),
        ([call("a")], [], ["not checked: the request is not a JSON object"]),
        ([call("a")], {"tools": "a"}, ["call 0: tool 'a' was not enabled for this request"]),
        ([call("a")] * 1001, REQUEST, ["1001 tool calls, more than the check reads (1000)"]),
    ],
)  # fmt: skip
def test_the_tool_check_rejects_hostile_calls(calls: Any, request_body: Any, expected: list[str]) -> None:
    start = time.process_time()  # its own work: a loaded machine's wait for a core is not the check's
    assert tool_check(calls, request_body) == expected
    assert time.process_time() - start < 1
