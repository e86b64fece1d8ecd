# ruff: noqa: E501  (schemas and spec strings read better on one line)
"""The tool-call grammar vLLM derives from `tools` (exporter.engines.vllm.toolcalls): the exact strings, why
there is none, the 400s, and hostile input (tests/integration/test_toolcalls_agreement.py checks the
strings and the 400s against vLLM's own code)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from exporter.engines.vllm.parsers import PARSERS_0_32_0
from exporter.engines.vllm.toolcalls import (
    DERIVED_REASONS,
    ERRORS,
    NO_GRAMMAR_REASONS,
    PARSER_TABLES,
    ToolParserInfo,
    derive,
    parser_info,
)
from exporter.schema.identity import schema_hash

SIMPLE = {"type": "object", "properties": {"x": {"type": "integer"}}}
WITH_DEFS = {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}


def tool(name: str, parameters: Any = "absent", **extra: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, **extra}
    if parameters != "absent":
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def required(*tools: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"tools": list(tools), "tool_choice": "required", **fields}


def test_required_is_an_array_of_calls_in_the_engines_serialisation() -> None:
    got = derive(required(tool("get_weather", SIMPLE), tool("ping")), "pythonic")
    assert got.reason == "tool_choice_required" and got.kind == "json" and got.error is None
    assert got.spec_text == (
        '{"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": ['
        '{"properties": {"name": {"type": "string", "enum": ["get_weather"]}, "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}, "required": ["name", "parameters"]}, '
        '{"properties": {"name": {"type": "string", "enum": ["ping"]}, "parameters": {"type": "object", "properties": {}}}, "required": ["name", "parameters"]}]}}'
    )
    assert schema_hash(got.spec_text) == schema_hash(json.dumps(json.loads(got.spec_text), indent=2))


@pytest.mark.parametrize(
    ("parallel", "max_items"),
    [(False, True), ("false", True), (0, True), (True, False), (None, False), ("absent", False)],
)
def test_only_an_explicit_false_limits_the_calls_to_one(parallel: Any, max_items: bool) -> None:
    request = required(tool("a", SIMPLE))
    if parallel != "absent":
        request["parallel_tool_calls"] = parallel
    spec = json.loads(derive(request, "pythonic").spec_text or "")
    assert ("maxItems" in spec) is max_items and spec.get("maxItems", 1) == 1


def test_defs_move_to_the_root_and_leave_the_parameters_without_them() -> None:
    only_defs = {"$defs": {"Q": {"type": "integer"}}}
    request = required(
        tool("a", WITH_DEFS),
        tool("b", only_defs),
        tool("c", {"type": "object", "$defs": {"P": {"type": "string"}}}),
    )
    before = copy.deepcopy(request)
    spec = json.loads(derive(request, "pythonic").spec_text or "")
    params = [branch["properties"]["parameters"] for branch in spec["items"]["anyOf"]]
    assert params == [{"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}, {}, {"type": "object"}]
    assert spec["$defs"] == {"P": {"type": "string"}, "Q": {"type": "integer"}}
    assert list(spec) == ["type", "minItems", "items", "$defs"]
    assert request == before  # the caller's body is left as it was


def test_equal_defs_merge_in_pythons_sense_keeping_the_later_value() -> None:
    tools = [tool("a", {"$defs": {"C": {"const": 1}, "D": {}}}), tool("b", {"$defs": {"C": {"const": True}}})]
    spec = derive(required(*tools), "pythonic").spec_text
    assert spec is not None and spec.endswith('"$defs": {"C": {"const": true}, "D": {}}}')


@pytest.mark.parametrize(
    ("tools", "error"),
    [
        ([tool("a", WITH_DEFS), tool("b", {"$defs": {"P": {"type": "integer"}}})], "defs_clash"),
        ([tool("a", {"$defs": []})], "defs_not_object"),
        ([tool("a", {"$defs": None})], "defs_not_object"),
        ([tool("a", {"type": "object", "$defs": "P"})], "defs_not_object"),
    ],
)
def test_defs_vllm_refuses_are_a_400(tools: list[dict[str, Any]], error: str) -> None:
    got = derive(required(*tools), "pythonic")
    assert (got.spec_text, got.reason, got.error) == (None, "rejected", error)
    # only "required" hoists `$defs`
    assert derive({"tools": tools, "tool_choice": "auto"}, "pythonic").reason == "tool_choice_auto"


def test_a_named_function_is_its_parameters_as_sent_defs_and_all() -> None:
    got = derive({"tools": [tool("a", WITH_DEFS), tool("b")], "tool_choice": named("a")}, "pythonic")
    assert got.reason == "tool_choice_named" and got.spec_text == json.dumps(WITH_DEFS)
    got = derive({"tools": [tool("a", WITH_DEFS), tool("b", {})], "tool_choice": named("b")}, "pythonic")
    assert got.spec_text == '{"type": "object", "properties": {}}'
    # two tools of one name: the later one's parameters, as vLLM's name -> tool dict keeps it
    got = derive({"tools": [tool("a", WITH_DEFS), tool("a", SIMPLE)], "tool_choice": named("a")}, "pythonic")
    assert got.spec_text == json.dumps(SIMPLE)


def test_non_ascii_is_escaped_as_the_engine_writes_it() -> None:
    got = derive(required(tool("wetter_für", {"enum": ["東京"]})), "pythonic")
    assert got.spec_text is not None and "\\u00fc" in got.spec_text and "\\u6771\\u4eac" in got.spec_text


@pytest.mark.parametrize(
    ("request_body", "parser", "reason"),
    [
        ({}, "pythonic", "no_tools"),
        ({"tool_choice": "none"}, "pythonic", "no_tools"),
        ({"tools": [tool("a")], "tool_choice": "none"}, "pythonic", "tool_choice_none"),
        ({"tools": [tool("a")], "tool_choice": "none"}, None, "tool_choice_none"),
        ({"tools": [tool("a")], "tool_choice": None}, "pythonic", "tool_choice_null"),
        ({"tools": [tool("a")]}, "pythonic", "tool_choice_auto"),  # tools without a choice: auto
        (required(tool("a")), "hermes", "tool_choice_required"),  # a structural tag (below)
        (required(tool("a")), "cohere_command3", "structural_tag"),  # its own Parser: not derived
        ({"tools": [tool("a")]}, "llama3_json", "tool_choice_auto"),  # auto, no strict tool: no tag
        (required(tool("a")), "gemma4", "parser_unconstrained"),
        (required(tool("a")), "mistral", "parser_grammar"),
        ({"tools": [tool("a")]}, "mistral", "tool_choice_auto"),
        ({"tools": [tool("a")]}, "hf", "response_template"),
        (required(tool("a")), "no_such_parser", "unknown_parser"),
        (required(tool("a"), structured_outputs={"structural_tag": "{}"}), "pythonic", "user_structural_tag"),
        (required(tool("a"), structured_outputs={"json": SIMPLE}), "pythonic", "tool_choice_required"),
        (required(tool("a"), response_format={"type": "json_object"}), "pythonic", "tool_choice_required"),
    ],
)
def test_why_there_is_no_grammar(request_body: dict[str, Any], parser: str | None, reason: str) -> None:
    got = derive(request_body, parser)
    assert got.reason == reason and got.error is None
    assert (got.spec_text is not None) is (reason in DERIVED_REASONS)


@pytest.mark.parametrize(
    ("request_body", "parser", "error"),
    [
        (required(tool("a")), None, "no_tool_parser"),
        ({"tools": [tool("a")]}, None, "no_tool_parser"),
        ({"tools": []}, "pythonic", "empty_tools"),
        ({"tool_choice": "required", "tools": None}, "pythonic", "tool_choice_without_tools"),
        ({"tools": [tool("a")], "tool_choice": "always"}, "pythonic", "invalid_tool_choice"),
        ({"tools": [tool("a")], "tool_choice": {"type": "function"}}, "pythonic", "invalid_tool_choice"),
        ({"tools": [tool("a")], "tool_choice": named("")}, "pythonic", "invalid_tool_choice"),
        ({"tools": [tool("a")], "tool_choice": named("b")}, "pythonic", "unknown_named_tool"),
        ({"tools": [tool("a")], "tool_choice": named("b")}, "hermes", "unknown_named_tool"),
        (
            {"tools": [tool("a")], "tool_choice": {"type": "x", "function": {"name": "a"}}},
            "pythonic",
            "invalid_request",
        ),
        (
            {**required(tool("a")), "tool_choice": named("a"), "structured_outputs": {"json": {}}},
            "pythonic",
            "structured_outputs_conflict",
        ),
        (
            {**required(tool("a")), "tool_choice": None, "structured_outputs": {"regex": "a"}},
            "pythonic",
            "structured_outputs_conflict",
        ),
        (required(tool("a")), "hf", "response_template_unsupported"),
        ({"tools": [tool("a", strict=True)]}, "hf", "response_template_unsupported"),
        ({"tools": [tool("a")], "parallel_tool_calls": False}, "hf", "response_template_unsupported"),
        (required(tool("a"), parallel_tool_calls="maybe"), "pythonic", "invalid_request"),
        (required(tool("a", [1])), "pythonic", "invalid_request"),
    ],
)
def test_what_vllm_answers_with_a_400(request_body: dict[str, Any], parser: str | None, error: str) -> None:
    got = derive(request_body, parser)
    assert (got.spec_text, got.reason, got.error) == (None, "rejected", error)
    assert got.message


def deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        node = {"type": "object", "properties": {"n": node}}
    return node


def circular() -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object"}
    node["properties"] = {"self": node}
    return node


@pytest.mark.parametrize(
    "request_body",
    [
        None, [], "tools", 7, {"tools": "abc"}, {"tools": {"a": 1}}, {"tools": [None]}, {"tools": [[]]},
        {"tools": [{"type": "function"}]}, {"tools": [{"function": {"name": 7}}]}, {"tools": [{"type": "web_search"}]},
        {"tools": [tool("a")], "tool_choice": []}, {"tools": [tool("a")], "tool_choice": {"function": "a"}},
        {"tools": [None], "tool_choice": named("a")}, {"tools": [tool("a")], "structured_outputs": "x"},
        {"tools": [tool("a", description=3)], "tool_choice": "required"}, {"tools": [tool("a", strict=[])]},
        required(tool("a", deep(5000))), required(tool("a", {"$defs": {"D": deep(5000)}}), tool("b", {"$defs": {"D": deep(5000)}})),
        required(tool("a", circular())), {"tools": [tool("a", circular())], "tool_choice": named("a")},
        required(tool("a", {"enum": [{1, 2}]})), required(tool("a", {"minimum": float("nan")})),
        required(*[tool(f"t{i}", SIMPLE) for i in range(2000)]),
    ],
)  # fmt: skip
def test_hostile_input_gets_a_reason_never_an_exception(request_body: Any) -> None:
    for parser in (None, "pythonic", "hermes", "hf", "no_such_parser"):
        got = derive(request_body, parser)
        assert got.reason in DERIVED_REASONS | NO_GRAMMAR_REASONS
        assert got.error is None or (got.error in ERRORS and got.reason == "rejected")
        assert (got.spec_text is None) is (got.reason not in DERIVED_REASONS)


def test_what_cannot_be_serialised_is_too_complex() -> None:
    assert derive(required(tool("a", deep(5000))), "pythonic").reason == "too_complex"
    assert derive(required(tool("a", circular())), "pythonic").reason == "too_complex"
    assert derive(required(tool("a", {"enum": [{1, 2}]})), "pythonic").reason == "too_complex"
    nan = derive(required(tool("a", {"minimum": float("nan")})), "pythonic").spec_text
    assert nan is not None and '"minimum": NaN' in nan  # as vLLM's json.dumps writes it


def test_versions_and_parsers_of_ones_own() -> None:
    assert derive(required(tool("a")), "pythonic", "0.31.0").reason == "unknown_version"
    assert derive(required(tool("a")), "beam", "0.32.0").reason == "unknown_parser"
    assert derive(required(tool("a")), "beam", "0.33.0").reason == "structural_tag"
    mine = ToolParserInfo("my_plugin", None, True)
    assert derive(required(tool("a")), mine).reason == "tool_choice_required"
    assert derive(required(tool("a")), ToolParserInfo("my_xml", None, False)).reason == "parser_unconstrained"
    assert parser_info("pythonic") == ToolParserInfo("pythonic", None, True, "abstract_parser")
    assert parser_info("pythonic", "0.9") is None


def test_the_parser_table_of_0_32_0() -> None:
    """54 parsers: 23 with a structural-tag model (none of which vLLM lets constrain required and named
    choices to JSON), 8 more that leave them unconstrained, and 23 that would, of which `hf` (response
    template) and Cohere's two (their own structural tag) are composed otherwise: 20 derive JSON Schema."""
    rows = PARSERS_0_32_0
    structural = {name for name, (model, *_) in rows.items() if model is not None}
    unconstrained = {name for name, (model, supports, *_) in rows.items() if model is None and not supports}
    json_schema = {
        name
        for name, (_, supports, composer, _) in rows.items()
        if supports and composer == "abstract_parser"
    }
    assert (len(rows), len(structural), len(unconstrained), len(json_schema)) == (54, 23, 8, 20)
    assert all(not supports for model, supports, *_ in rows.values() if model is not None)
    assert {"pythonic", "llama4_pythonic", "olmo3", "granite", "xlam"} <= json_schema
    assert set(PARSER_TABLES["0.33.0"]) - set(rows) == {"beam", "muse", "musespark1x", "step5"}
    assert set(rows) - set(PARSER_TABLES["0.33.0"]) == set()


AUTO = {"tools": [tool("a", SIMPLE)], "tool_choice": "auto"}
JSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "x", "schema": SIMPLE}}


@pytest.mark.parametrize(
    ("request_body", "parser", "version", "level", "reason"),
    [
        (AUTO, "hermes", "0.32.0", None, "tool_choice_auto"),
        (AUTO, "hermes", "0.32.0", "auto", "tool_choice_auto"),
        (AUTO, "hermes", "0.33.0", "function", "tool_choice_auto_tag"),
        (AUTO, "hermes", "0.32.0", "parameter", "tool_choice_auto_tag"),
        ({"tools": [tool("a", SIMPLE, strict=True)]}, "hermes", "0.32.0", None, "tool_choice_auto_tag"),
        ({"tools": [tool("a", SIMPLE, strict="yes")]}, "hermes", "0.33.0", None, "tool_choice_auto_tag"),
        ({**AUTO, "parallel_tool_calls": False}, "hermes", "0.32.0", None, "tool_choice_auto_tag"),
        # parallel_tool_calls false leaves auto with structured outputs at its format's grammar
        (
            {**AUTO, "parallel_tool_calls": False, "response_format": JSON_FORMAT},
            "hermes",
            "0.32.0",
            None,
            "tool_choice_auto",
        ),
        (
            {**AUTO, "parallel_tool_calls": False, "response_format": {"type": "text"}},
            "hermes",
            "0.32.0",
            None,
            "tool_choice_auto_tag",
        ),
        # glm47's own floor is `function`; 0.33.0 keeps an explicit `auto`, 0.32.0 does not
        (AUTO, "glm47", "0.32.0", None, "tool_choice_auto_tag"),
        (AUTO, "glm47", "0.33.0", None, "tool_choice_auto_tag"),
        (AUTO, "glm47", "0.32.0", "auto", "tool_choice_auto_tag"),
        (AUTO, "glm47", "0.33.0", "auto", "tool_choice_auto"),
        (AUTO, "pythonic", "0.32.0", "parameter", "tool_choice_auto"),  # no structural-tag model
        (AUTO, "hermes", "0.32.0", "strictest", "unknown_strict_level"),
    ],
)
def test_auto_gets_a_structural_tag_only_from_the_strict_level_up(
    request_body: dict[str, Any], parser: str, version: str, level: str | None, reason: str
) -> None:
    got = derive(request_body, parser, version, level)
    assert (got.reason, got.error) == (reason, None)
    if reason in DERIVED_REASONS:  # the tag vLLM builds (its strings: test_toolcalls_agreement.py)
        assert got.kind == "structural_tag" and got.spec_text is not None
        assert json.loads(got.spec_text)["type"] == "structural_tag"
    else:
        assert got.spec_text is None


def rsp_tool(name: str, parameters: Any = "absent") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "function", "name": name}
    if parameters != "absent":
        out["parameters"] = parameters
    return out


# hermes's tag for one function `f` without parameters: both call layouts, arguments any JSON
HERMES_F = json.dumps({"type": "structural_tag", "format": {"type": "tags_with_separator", "tags": [
    {"type": "tag", "begin": '<tool_call>\n{"name": "f", "arguments": ', "content": {"type": "json_schema", "json_schema": True, "style": "json", "any_order": False, "max_whitespace_cnt": None, "excludes": []}, "end": "}\n</tool_call>"},
    {"type": "tag", "begin": '<tool_call>{"name": "f", "arguments": ', "content": {"type": "json_schema", "json_schema": True, "style": "json", "any_order": False, "max_whitespace_cnt": None, "excludes": []}, "end": "}</tool_call>"},
], "separator": "", "at_least_one": True, "stop_after_first": False}})  # fmt: skip


def namespace(name: str, *members: dict[str, Any]) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": name, "tools": list(members)}


@pytest.mark.parametrize(
    ("request_body", "parser", "reason", "error", "schema"),
    [
        ({"tools": [{"type": "custom", "name": "sh"}], "tool_choice": {"type": "custom", "name": "sh"}}, "pythonic",
         "tool_choice_named", None, json.dumps({"type": "object", "properties": {"input": {"type": "string", "description": "The freeform text payload for this tool."}}, "required": ["input"], "additionalProperties": False})),
        ({"tools": [namespace("a", rsp_tool("f", SIMPLE)), namespace("b", rsp_tool("f"))], "tool_choice": {"type": "function", "name": "f"}},
         "pythonic", "rejected", "ambiguous_named_tool", None),
        ({"tools": [namespace("a", rsp_tool("f", SIMPLE)), namespace("b", rsp_tool("f"))], "tool_choice": {"type": "function", "name": "b__f"}},
         "pythonic", "tool_choice_named", None, json.dumps({"type": "object", "properties": {}})),
        ({"tools": [rsp_tool("f")], "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": []}}, "pythonic", "tool_choice_hosted", None, None),
        ({"tools": [rsp_tool("f")], "tool_choice": {"type": "web_search"}}, "pythonic", "rejected", "invalid_request", None),
        ({"tools": [{"type": "web_search"}], "tool_choice": "required"}, "pythonic", "rejected", "no_function_tools", None),
        ({"tools": [{"type": "web_search"}], "tool_choice": "required"}, "hermes", "rejected", "no_function_tools", None),
        ({"tools": [{"type": "web_search"}], "tool_choice": "auto", "parallel_tool_calls": False}, "hermes", "tool_choice_auto", None, None),
        ({"tools": [rsp_tool("f")], "tool_choice": "auto"}, "hy_v4", "rejected", "parser_error", None),
        ({"tools": [rsp_tool("f")], "tool_choice": "required"}, "hermes", "tool_choice_required", None, HERMES_F),
        ({"tool_choice": "required"}, "pythonic", "rejected", "tool_choice_without_tools", None),
        ({"tools": [], "tool_choice": "auto"}, "pythonic", "tool_choice_none", None, None),  # no tools: auto is none
    ],
)  # fmt: skip
def test_the_responses_api_flattens_namespaces_and_shims_custom_tools(
    request_body: dict[str, Any], parser: str, reason: str, error: str | None, schema: str | None
) -> None:
    got = derive(request_body, parser, "0.33.0", api="responses")
    assert (got.reason, got.error, got.spec_text) == (reason, error, schema)
