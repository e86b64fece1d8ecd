# ruff: noqa: E501  (request bodies read better on one line)
"""exporter.engines.sglang.toolcalls derives the tool-call constraint SGLang 0.5.23's own code derives
(tests/support/engines/sglang_toolcalls.py runs serving_chat's methods, FunctionCallParser and the
detectors from the wheel under .cache/sglang, with the xgrammar 0.2.7 it pins): the outcome (a JSON
schema, a structural tag, glm47's EBNF, none, a 400 or a 500) for generated tool sets under every
tool_choice, parallel_tool_calls value and registered parser, at each SGLANG_TOOL_STRICT_LEVEL, and
JSONSchemaBench's function-calling schemas as tool parameters; for every spec derived, the exact
string the grammar backend keys (hence its schema_hash). The parser table in the module is the one
tools/sglang_tool_parsers.py prints from the wheel. The counts print."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.engines.sglang import parsers as sg_parsers
from exporter.engines.sglang import toolcalls as sg
from exporter.engines.vllm.toolcalls import ToolCallGrammar
from tests.integration.test_toolcalls_agreement import body, jsonschemabench, tool
from tests.support.hashes import hashes_agree
from tools.harness import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
DRIVER = ROOT / "tests" / "support" / "engines" / "sglang_toolcalls.py"
SGLANG = Path(os.environ.get("GDX_SGLANG_PATH", ROOT / ".cache" / "sglang"))
ENGINES = Path(os.environ.get("GDX_ENGINES_DIR", ROOT / ".cache" / "engines"))
XGRAMMAR = ENGINES / "xgrammar-0.2.7"  # the version SGLang 0.5.23 pins
EVERY_PARSER = ["", *sorted(sg_parsers.PARSERS_0_5_23)]  # "": no --tool-call-parser
# one parser of each family, for the strict levels and the real schemas
ONE_PER_FAMILY = [
    "",
    "pythonic",
    "hermes",
    "inkling",
    "qwen3_coder",
    "kimi_k3",
    "glm47",
    "muse",
    "iquest_q1",
    "beam",
]
# What cannot be made without the model: the generic response-template parser reads its template
# from the checkpoint's metadata (beam brings its own).
NOT_MADE = ["response_template"]
# SGLang's error messages, to the module's error codes (the first that matches).
MESSAGES = [
    ("validation error", "invalid_request"),
    ("Messages cannot be empty", "invalid_request"),
    ("Tools cannot be empty if tool choice", "tool_choice_without_tools"),
    ("not found in tools list", "unknown_named_tool"),
    ("Tool names must be unique", "duplicate_tool_names"),
    ("has invalid 'parameters' schema", "invalid_parameters_schema"),
    ("too deeply nested", "parameters_too_deep"),
    ("schema_ is required", "invalid_response_format"),
    ("has multiple schemas", "defs_clash"),
    ("cannot be combined with", "structured_outputs_conflict"),
    ("cannot enforce", "template_unsupported"),
    ("does not support strict", "template_unsupported"),
]

SIMPLE = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
WITH_DEFS = {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}
CLASH = {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "integer"}}}
DB_TYPES = {
    "type": "object",
    "properties": {
        "a": {"type": "varchar(255)"}, "b": {"type": "int32"}, "c": {"type": ["INT", "integer", "null"]},
        "d": {"type": "list[str]", "items": {"type": "str"}}, "e": {"type": "Dict"}, "f": {"type": "decimal(10,2)"},
        "g": {"anyOf": [{"type": "uuid"}, {"type": "internal"}]},
    },
}  # fmt: skip


def nest(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


PARAMETERS: list[Any] = [
    "absent", None, {}, SIMPLE, SIMPLE, WITH_DEFS, WITH_DEFS, CLASH, DB_TYPES, True, False,
    {"$defs": {"Q": {"type": "integer"}}},  # nothing but $defs
    {"type": "object", "$defs": {}},
    {"type": "object", "$defs": {"C": {"const": 1}}},
    {"type": "object", "$defs": {"C": {"const": True}}},  # == 1 in Python: merged, the later kept
    {"type": "object", "$defs": {"C": {"const": 1.0}}},
    {"type": "object", "definitions": {"D": {"type": "string"}}, "properties": {"d": {"$ref": "#/definitions/D"}}},
    {"type": "object", "properties": {"n": {"type": "object", "$defs": {"N": {}}}}},  # nested: not hoisted
    {"type": "object", "properties": {"städte": {"type": "string", "enum": ["Zürich", "東京", "\u2028"]}}},
    {"type": "object", "properties": {"price": {"type": "number", "minimum": 1e-7, "maximum": 1e21, "multipleOf": 0.01}}},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 3.0}}},
    {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "dependencies": {"a": ["b"], "c": {"type": "object"}}},
    {"type": "object", "$id": "https://example.com/tool", "$schema": "https://json-schema.org/draft/2020-12/schema", "$anchor": "top"},
]  # fmt: skip
INVALID: list[Any] = [
    {"type": "object", "properties": {"x": {"type": "string", "required": True}}},  # draft-3 required
    {"type": "any"}, {"type": ["string", 5]}, {"type": []},
    {"type": "object", "properties": {"x": {"type": "string", "pattern": "(unclosed"}}},
    {"type": "object", "properties": []}, {"type": "array", "items": [{"type": "string"}]},  # draft-4 items
    {"type": "number", "exclusiveMinimum": True}, {"type": "object", "required": ["a", "a"]},
    {"type": "string", "minLength": -1}, {"type": "number", "multipleOf": 0}, {"$id": "x#frag"},
    {"$anchor": "1bad"}, {"type": "object", "patternProperties": {"(": {}}}, {"dependencies": {"a": [1]}},
    {"type": "object", "$defs": []}, {"enum": "a"}, {"anyOf": []}, "a string", [1, 2], 5,
    {"type": "string", "pattern": "a{4294967296}"},  # re's OverflowError: a 500
]  # fmt: skip
KIMI_K3_REFUSED: list[Any] = [
    {"type": "string"}, {"type": "object", "required": ["x"]}, True, {"type": "object", "additionalProperties": {"type": "string", "enum": [1]}},
    {"type": "object", "properties": {"x": {"type": "integer", "enum": ["a"]}}, "required": ["x"]},
    {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "integer", "const": "z"}]}}, "required": ["x"]},
    {"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}, "required": ["x"], "$defs": {"A": {"$ref": "#/$defs/A"}}},
    {"allOf": [{"type": "object"}, {"properties": {"x": {"oneOf": [{"enum": [1, "a"]}, {"type": "null"}]}}, "required": ["x"]}]},
]  # fmt: skip
NAMES = ["t0", "t1", "t2", "wetter_städte", "東京", 'a"b', "t3", "t4"]
CHOICES: list[Any] = ["absent", "none", "auto", "required", None, "named:first", "named:last"]
BAD_CHOICES: list[Any] = [
    "named:missing", "always", {"type": "function"}, {"type": "function", "function": {"name": None}},
    {"type": "other", "function": {"name": "t0"}},
]  # fmt: skip
PARALLEL: list[Any] = ["absent", True, False, "false", 0, "Yes"]
BAD_PARALLEL: list[Any] = [None, 2]
FORMATS: list[Any] = [
    {"type": "text"}, {"type": "json_object"},
    {"type": "json_schema", "json_schema": {"name": "out", "schema": SIMPLE}},
    {"type": "json_schema", "json_schema": {"name": "out"}},
]  # fmt: skip


def generated() -> Iterator[tuple[str, dict[str, Any]]]:
    """Tool sets of 0..6 tools over PARAMETERS (now and then an invalid schema, a strict tool, a repeated
    name), every choice and parallel value, now and then a response_format, a regex or message tools."""
    rng = random.Random(20261204)
    for i in range(500):
        size = rng.choice([0, 1, 1, 2, 2, 3, 4, 5, 6])
        names = [NAMES[rng.randrange(len(NAMES))] if rng.random() < 0.2 else NAMES[j] for j in range(size)]
        tools = []
        for name in names:
            parameters = rng.choice(INVALID if rng.random() < 0.06 else PARAMETERS)
            extra = {"strict": rng.choice([True, "yes", False])} if rng.random() < 0.15 else {}
            tools.append(tool(name, parameters, **extra))
        choice = rng.choice(BAD_CHOICES if rng.random() < 0.12 else CHOICES)
        request = body(tools or None, choice, rng.choice(BAD_PARALLEL if rng.random() < 0.06 else PARALLEL))
        if not tools and rng.random() < 0.5:
            request["tools"] = []
        roll = rng.random()
        if roll < 0.06:
            request["response_format"] = rng.choice(FORMATS)
        elif roll < 0.09:
            request["regex"] = rng.choice(["[a-z]+", ""])
        elif roll < 0.14:  # a system message's tools join the request's
            request["messages"] = [
                {
                    "role": rng.choice(["system", "Developer", "user"]),
                    "content": "s",
                    "tools": [tool(rng.choice(NAMES[:3]), SIMPLE)],
                },
                {"role": "user", "content": "hi"},
            ]
        yield f"gen/{i}", request
    for i, parameters in enumerate(PARAMETERS + INVALID):  # each alone, after WITH_DEFS, named
        yield f"gen/one/{i}", body([tool("only", parameters)])
        yield f"gen/strict/{i}", body([tool("only", parameters, strict=True)], "auto")
        yield f"gen/pair/{i}", body([tool("a", WITH_DEFS), tool("b", parameters)], parallel=False)
        yield f"gen/named/{i}", body([tool("a", WITH_DEFS), tool("b", parameters)], "named:last")
    yield "gen/deep/60", body([tool("d", nest(60))])
    yield "gen/deep/200", body([tool("d", nest(200))])
    yield "gen/no-tools", {}
    yield "gen/no-tools-required", {"tool_choice": "required"}
    yield "gen/no-tools-named", body(None, "named:first")
    yield "gen/null-tools", {"tools": None, "tool_choice": "none"}
    yield "gen/empty-messages", {**body([tool("a", SIMPLE)]), "messages": []}
    yield "gen/messages-not-list", {**body([tool("a", SIMPLE)]), "messages": "hi"}
    yield "gen/tools-object", {"tools": {"a": 1}, "tool_choice": "required"}
    yield (
        "gen/tool-type",
        {"tools": [{"type": "web_search", "function": {"name": "w"}}], "tool_choice": "required"},
    )
    yield (
        "gen/name-not-str",
        {"tools": [{"type": "function", "function": {"name": 7}}], "tool_choice": "required"},
    )
    yield "gen/defer", body([tool("s", SIMPLE, defer_loading=True)])
    yield "gen/two-inkling-triggers", body([tool("a", SIMPLE, strict=True), tool("b", SIMPLE)])
    yield (
        "gen/message-dup",
        {
            **body([tool("a", SIMPLE)]),
            "messages": [
                {"role": "system", "content": "s", "tools": [tool("a", WITH_DEFS)]},
                {"role": "user", "content": "hi"},
            ],
        },
    )
    yield (
        "gen/message-only",
        {
            "messages": [
                {"role": "root", "content": "s", "tools": [tool("m", WITH_DEFS), tool("n", CLASH)]},
                {"role": "user", "content": "hi"},
            ],
            "tool_choice": "required",
        },
    )
    yield (
        "gen/message-only-auto",
        {
            "messages": [
                {"role": "system", "content": "s", "tools": [tool("m", SIMPLE)]},
                {"role": "user", "content": "hi"},
            ]
        },
    )
    for number, response_format in enumerate(FORMATS):
        for choice in ("auto", "required", "named:first", "none"):
            yield (
                f"gen/rf/{number}/{choice}",
                {
                    **body([tool("a", SIMPLE), tool("b", SIMPLE, strict=True)], choice),
                    "response_format": response_format,
                },
            )
    yield (
        "gen/rf-bare-schema",
        {**body([tool("a", SIMPLE)], "auto"), "response_format": {"type": "json_schema", "schema": SIMPLE}},
    )
    yield (
        "gen/rf-tag",
        {
            **body([tool("a", SIMPLE)], "auto"),
            "response_format": {
                "type": "structural_tag",
                "structures": [{"begin": "<a>", "schema": SIMPLE, "end": "</a>"}],
                "triggers": ["<a>"],
            },
        },
    )
    for i, schema in enumerate(
        [
            "x",
            {"properties": ["strict"], "type": "object"},
            {"title": 5, "type": "object"},
            {"properties": {"strict": {"default": True}}, "type": "object"},
            {"properties": None},
        ]
    ):
        yield (
            f"gen/rf-bare/{i}",
            {
                **body([tool("a", SIMPLE)], "auto"),
                "response_format": {"type": "json_schema", "schema": schema},
            },
        )
    yield "gen/rf-not-object", {**body([tool("a", SIMPLE)], "auto"), "response_format": "json"}
    yield (
        "gen/message-user-tools",
        {
            "messages": [{"role": "user", "content": "s", "tools": [tool("m", SIMPLE)]}],
            "tool_choice": "required",
        },
    )
    for i, parameters in enumerate(KIMI_K3_REFUSED):  # strict tools Kimi K3's builder cannot render
        for choice in ("auto", "required", "named:first"):
            yield (
                f"gen/k3/{i}/{choice}",
                body([tool("a", parameters, strict=True), tool("b", SIMPLE)], choice),
            )
    for strict in (False, True):  # a template's tag for auto under the request's own grammar
        for parallel in ("absent", False):
            for extra in ({"regex": "[a-z]+"}, {"response_format": {"type": "json_object"}}):
                tools = [tool("a", SIMPLE, strict=strict), tool("b", True)]
                yield (
                    f"gen/own-grammar/{strict}/{parallel}/{next(iter(extra))}",
                    {**body(tools[:1], "auto", parallel), **extra},
                )
                yield (
                    f"gen/own-grammar/{strict}/{parallel}/{next(iter(extra))}/true",
                    {**body(tools, "auto", parallel), **extra},
                )
    yield "gen/ebnf-required", {**body([tool("a", SIMPLE)]), "ebnf": 'root ::= "x"'}
    yield "gen/ebnf-auto", {**body([tool("a", SIMPLE)], "auto"), "ebnf": 'root ::= "x"'}


def with_levels() -> Iterator[tuple[str, dict[str, Any], int]]:
    """Each strict level under each choice, with and without a strict tool and parallel calls."""
    for level in (0, 1, 2):
        for strict in ("absent", True, False):
            tools = [
                tool("a", SIMPLE, **({} if strict == "absent" else {"strict": strict})),
                tool("b", WITH_DEFS),
                tool("c", None),
            ]
            for choice in ("auto", "required", "named:first", "none"):
                for parallel in ("absent", False):
                    yield f"lvl/{level}/{strict}/{choice}/{parallel}", body(tools, choice, parallel), level


def real_schemas() -> Iterator[tuple[str, dict[str, Any]]]:
    """JSONSchemaBench's function-calling schemas as tool parameters (test_toolcalls_agreement's
    reading of them), and each BFCL tool set once more with strict tools."""
    for case_id, request in jsonschemabench():
        yield case_id, request
        if case_id.endswith("/required") and not case_id.startswith("jsb/defs/"):
            strict = [{**t, "function": {**t["function"], "strict": True}} for t in request["tools"]]
            yield (
                case_id.replace("/required", "/strict-auto"),
                {**request, "tools": strict, "tool_choice": "auto"},
            )


def outcome_of(grammar: ToolCallGrammar) -> str:
    if grammar.spec_text is not None or grammar.reason in sg.NOT_DERIVED_REASONS:
        return grammar.kind
    if grammar.error:
        return "error500" if sg.ERROR_STATUS.get(grammar.error, 400) == 500 else "error"
    return "none"


def error_code(message: str) -> str:
    return next((code for needle, code in MESSAGES if needle in message), "?")


def template_fallback(ours: ToolCallGrammar, theirs: dict[str, Any], request: dict[str, Any]) -> bool:
    """A response template's tag (beam's, not derived) that SGLang drops where the template cannot
    hold a tool's arguments: `auto` is then refused (a 400), required and named take the JSON schema,
    which must be the one derived without a parser."""
    if ours.reason != sg.STRUCTURAL_TAG or not ours.message.startswith("beam:"):
        return False
    if theirs["outcome"] == "error":
        return error_code(theirs["message"]) == "template_unsupported"
    return theirs["outcome"] == "json" and sg.derive(request, None).spec_text == theirs["text"]


def compare(
    ours: ToolCallGrammar, theirs: dict[str, Any], hashes: dict[str, str] | None = None
) -> str | None:
    """What differs between the module's answer and SGLang's, or None when they agree. `hashes` keeps
    the schema_hash of each text of ours (many parsers derive the same one); SGLang's is hashed anew."""
    if outcome_of(ours) != theirs["outcome"]:
        return f"ours {ours.reason}/{ours.error}/{ours.kind}, SGLang {theirs['outcome']} {theirs.get('message', '')[:300]}"
    if theirs["outcome"] == "error" and ours.error != error_code(theirs["message"]):
        return f"ours {ours.error}, SGLang {theirs['message'][:300]}"
    if theirs["outcome"] == "none" and theirs.get("dropped", False) != (ours.reason == sg.USER_CONSTRAINT):
        return f"ours {ours.reason}, SGLang's dropped={theirs.get('dropped', False)}"
    if ours.spec_text is not None:
        if ours.spec_text != theirs["text"]:
            return f"text differs: ours {ours.spec_text[:300]} SGLang {theirs['text'][:300]}"
        if not hashes_agree(ours.spec_text, theirs["text"], hashes):
            return "schema_hash differs"
    return None


def test_the_derived_constraint_is_the_one_sglang_compiles(tmp_path: Path) -> None:
    if not (SGLANG / "sglang").is_dir() or not (XGRAMMAR / "xgrammar").is_dir():
        raise FileNotFoundError(
            f"SGLang or xgrammar 0.2.7 missing under {SGLANG}, {XGRAMMAR}: run `make sglang engines`"
        )
    cases = dict(generated()) | dict(real_schemas())
    levels = {case_id: level for case_id, _, level in with_levels()}
    cases |= {case_id: request for case_id, request, _ in with_levels()}
    spec = {
        "cases": [
            {"id": k, "body": v, **({"strict_level": levels[k]} if k in levels else {})}
            for k, v in cases.items()
        ],
        "parsers": {"gen/": EVERY_PARSER, "lvl/": EVERY_PARSER, "jsb/": ["", "hermes", "iquest_q1"]},
        "table": True,
    }
    (tmp_path / "cases.json").write_text(json.dumps(spec), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(SGLANG), str(XGRAMMAR), str(ROOT)])
    out = subprocess.run(
        [sys.executable, str(DRIVER), str(tmp_path / "cases.json")],
        env=env, capture_output=True, text=True, timeout=540, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    printed = json.loads(out.stdout.strip().splitlines()[-1])
    assert printed["sglang"] == sg.DEFAULT_VERSION
    # the module's table is the one the wheel gives
    assert {
        name: tuple(row) for name, row in printed["table"]["parsers"].items()
    } == sg_parsers.PARSERS_0_5_23
    assert printed["table"]["auto_tags"] == sg_parsers.AUTO_TAGS_0_5_23

    counts: Counter[str] = Counter()
    by_parser: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    mismatches: list[str] = []
    not_made: set[str] = set()
    hashes: dict[str, str] = {}
    for case_id, results in printed["results"].items():
        for parser, theirs in results.items():
            if theirs["outcome"] == "init_error":
                not_made.add(parser)
                continue
            ours = sg.derive(cases[case_id], parser or None, strict_level=levels.get(case_id))
            reasons[ours.reason] += 1
            if ours.reason == sg.TOO_COMPLEX:  # not vouched for: SGLang's stack decides
                counts[f"too_complex/{theirs['outcome']}"] += 1
                continue
            if template_fallback(ours, theirs, cases[case_id]):
                counts[f"beam_fallback/{theirs['outcome']}"] += 1
                continue
            derived = "/derived" if ours.spec_text is not None else ""
            counts[f"{theirs['outcome']}{derived}"] += 1
            by_parser[f"{parser or '(none)'}:{theirs['outcome']}{derived}"] += 1
            if ours.error:
                errors[ours.error] += 1
            if (why := compare(ours, theirs, hashes)) is not None:
                mismatches.append(f"{case_id} [{parser or '(none)'}]: {why}")
    total = sum(counts.values())
    print(
        f"\nSGLang {printed['sglang']}: {len(cases)} requests, {total} comparisons, {dict(sorted(counts.items()))}"
        f"\nby reason: {dict(sorted(reasons.items()))}\nerrors by code: {dict(sorted(errors.items()))}"
        f"\nby parser: {dict(sorted(by_parser.items()))}\nparsers not made here: {sorted(not_made)},"
        f" {len(mismatches)} mismatches"
    )
    assert sorted(not_made) == NOT_MADE
    assert mismatches == [], "\n".join(mismatches[:40])
    assert counts["json/derived"] > 3000 and counts["structural_tag/derived"] > 1000
    assert counts["structural_tag"] > 500 and counts["ebnf"] > 50 and counts["none"] > 2000
    assert counts["error"] > 1000 and counts["error500"] > 10
    assert (
        reasons[sg.AUTO_TAG] > 0
        and reasons[sg.TOOL_CHOICE_AUTO_STRICT] > 0
        and reasons[sg.PARSED_NATIVELY] > 0
    )
    assert reasons[sg.USER_CONSTRAINT] > 0 and reasons[sg.CONSTRAINT_ERROR] > 0
    assert set(sg.ERRORS) <= set(errors), set(sg.ERRORS) - set(errors)
    assert counts["beam_fallback/error"] + counts["beam_fallback/json"] < 40  # the exception, not the rule
