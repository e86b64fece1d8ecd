# ruff: noqa: E501  (schemas and spec strings read better on one line)
"""The tool-call constraint SGLang 0.5.23 derives from `tools` (exporter.engines.sglang.toolcalls): the
exact strings, each reason there is none, the 400s and 500s, and hostile input
(tests/integration/test_sglang_toolcalls_agreement.py checks them against SGLang's own code)."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from exporter.engines.sglang import metaschema
from exporter.engines.sglang import parsers as sg_parsers
from exporter.engines.sglang import toolcalls as sg
from exporter.engines.sglang.toolcalls import derive
from exporter.schema.identity import schema_hash

SIMPLE = {"type": "object", "properties": {"x": {"type": "integer"}}}
WITH_DEFS = {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}
EMPTY = '{"type": "object", "properties": {}}'


def tool(name: str, parameters: Any = "absent", **extra: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name, **extra}
    if parameters != "absent":
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def named(name: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def request(*tools: dict[str, Any], choice: Any = "required", **fields: Any) -> dict[str, Any]:
    return {"tools": list(tools), "tool_choice": choice, **fields}


def call(name: str, parameters: str = EMPTY) -> str:
    return f'{{"properties": {{"name": {{"type": "string", "enum": ["{name}"]}}, "parameters": {parameters}}}, "required": ["name", "parameters"]}}'


def test_required_is_an_array_of_calls_with_every_tools_defs_at_the_root() -> None:
    got = derive(request(tool("get_weather", SIMPLE), tool("lookup", WITH_DEFS), tool("ping")), "pythonic")
    assert (got.reason, got.kind, got.error) == (sg.TOOL_CHOICE_REQUIRED, sg_parsers.KIND_JSON, None)
    assert got.spec_text == (
        '{"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": ['
        + call("get_weather", json.dumps(SIMPLE))
        + ", "
        + call("lookup", json.dumps(WITH_DEFS))
        + ", "
        + call("ping")
        + ']}, "$defs": {"P": {"type": "string"}}}'
    )  # the tool keeps its own $defs too
    assert schema_hash(got.spec_text) == schema_hash(json.dumps(json.loads(got.spec_text), indent=2))


def test_named_is_an_array_of_calls_of_the_first_tool_of_that_name_without_hoisting() -> None:
    got = derive(
        request(tool("a", WITH_DEFS), tool("a", SIMPLE), choice=named("a"), parallel_tool_calls=False),
        "pythonic",
    )
    assert got.reason == sg.TOOL_CHOICE_NAMED
    assert (
        got.spec_text
        == '{"type": "array", "minItems": 1, "items": '
        + call("a", json.dumps(WITH_DEFS))
        + ', "maxItems": 1}'
    )


@pytest.mark.parametrize(
    ("parallel", "max_items"),
    [(False, True), ("false", True), (0, True), ("no", True), (True, False), ("absent", False)],
)
def test_parallel_tool_calls_false_limits_the_calls_to_one(parallel: Any, max_items: bool) -> None:
    body = request(tool("a", SIMPLE))
    if parallel != "absent":
        body["parallel_tool_calls"] = parallel
    assert ('"maxItems": 1' in str(derive(body, None).spec_text)) is max_items


@pytest.mark.parametrize("parallel", [None, 2, "maybe", [], 0.5])
def test_parallel_tool_calls_must_be_a_boolean(parallel: Any) -> None:
    got = derive(request(tool("a"), parallel_tool_calls=parallel), None)
    assert (got.reason, got.error) == (sg.REJECTED, "invalid_request")


def test_without_a_parser_required_and_named_still_get_the_json_schema() -> None:
    assert derive(request(tool("a")), None).reason == sg.TOOL_CHOICE_REQUIRED
    assert derive(request(tool("a"), choice=named("a")), None).reason == sg.TOOL_CHOICE_NAMED
    assert derive(request(tool("a"), choice="auto"), None).reason == sg.TOOL_CHOICE_AUTO


def test_parameters_are_normalized_as_sglang_rewrites_them() -> None:
    db = {
        "type": "object",
        "properties": {
            "a": {"type": "varchar(255)"},
            "b": {"type": ["INT", "integer", "null"]},
            "c": {"type": "list[str]", "items": {"type": "str"}},
            "d": {"type": "internal"},
        },
    }
    got = derive(
        request(tool("t", {**db, "properties": {k: v for k, v in db["properties"].items() if k != "d"}})),
        None,
    )
    assert got.spec_text is not None
    params = json.loads(got.spec_text)["items"]["anyOf"][0]["properties"]["parameters"]
    assert params["properties"] == {
        "a": {"type": "string"},
        "b": {"type": ["integer", "null"]},
        "c": {"type": "array", "items": {"type": "string"}},
    }
    body = request(tool("t", db))
    before = copy.deepcopy(body)
    assert derive(body, None).error == "invalid_parameters_schema"  # "internal" is no type
    assert body == before  # the caller's body is left as it was


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "string", "required": True}, {"type": "any"}, {"type": []}, {"pattern": "(x"}, {"properties": []},
        {"items": [{"type": "string"}]}, {"exclusiveMinimum": True}, {"required": ["a", "a"]}, {"minLength": -1},
        {"multipleOf": 0}, {"$id": "x#frag"}, {"$anchor": "1bad"}, {"patternProperties": {"(": {}}},
        {"dependencies": {"a": [1]}}, {"$defs": []}, {"enum": "a"}, {"anyOf": []}, "a string", [1], 5, {"minLength": True},
    ],
)  # fmt: skip
def test_parameters_the_2020_12_metaschema_rejects_are_a_400(parameters: Any) -> None:
    for choice in ("required", "auto", "none"):  # checked whatever the choice
        got = derive(request(tool("t", parameters), choice=choice), "hermes")
        assert (got.reason, got.error) == (sg.REJECTED, "invalid_parameters_schema"), (parameters, choice)


@pytest.mark.parametrize(
    "parameters",
    [True, False, {}, {"minLength": 1.0}, {"dependencies": {"a": ["b"], "c": {"type": "string"}}}, {"$anchor": "ok_1"},
     {"$schema": "not a uri at all"}, {"format": "whatever", "x-extension": [1, {"type": 5}]}],
)  # fmt: skip
def test_parameters_the_metaschema_accepts(parameters: Any) -> None:
    assert metaschema.metaschema_error(parameters) == ""


def test_a_regex_repeat_past_res_limit_is_a_500() -> None:
    got = derive(request(tool("t", {"type": "string", "pattern": "a{4294967296}"})), None)
    assert (got.error, sg.ERROR_STATUS[got.error]) == ("internal_error", 500)


def test_unequal_defs_are_a_400_and_equal_ones_merge_the_later_kept() -> None:
    clash = {"type": "object", "$defs": {"P": {"type": "integer"}}}
    assert derive(request(tool("a", WITH_DEFS), tool("b", clash)), None).error == "defs_clash"
    # named does not merge $defs: no clash
    assert (
        derive(request(tool("a", WITH_DEFS), tool("b", clash), choice=named("b")), None).reason
        == sg.TOOL_CHOICE_NAMED
    )
    one, true = (
        {"type": "object", "$defs": {"C": {"const": 1}}},
        {"type": "object", "$defs": {"C": {"const": True}}},
    )
    got = derive(request(tool("a", one), tool("b", true)), None)
    assert got.spec_text is not None and got.spec_text.endswith('"$defs": {"C": {"const": true}}}')


def test_a_boolean_schema_breaks_the_defs_merge_with_a_500_but_not_named() -> None:
    assert derive(request(tool("a", True)), None).error == "internal_error"
    got = derive(request(tool("a", True), choice=named("a")), None)
    assert got.spec_text is not None and '"parameters": true' in got.spec_text
    assert derive(request(tool("a", False)), None).error == "internal_error"
    got = derive(request(tool("a", False), choice=named("a")), None)  # falsy: the empty object
    assert got.spec_text is not None and EMPTY in got.spec_text


def test_legacy_structural_tags_are_derived_with_the_schema_only_for_strict_tools() -> None:
    got = derive(request(tool("get", SIMPLE), tool("put", SIMPLE, strict=True)), "hermes")
    assert (got.reason, got.kind) == (sg.TOOL_CHOICE_REQUIRED, sg_parsers.KIND_TAG)
    assert got.spec_text == json.dumps({
        "type": "structural_tag",
        "structures": [
            {"begin": '<tool_call>{"name":"get", "arguments":', "schema": {}, "end": "}</tool_call>"},
            {"begin": '<tool_call>{"name":"put", "arguments":', "schema": SIMPLE, "end": "}</tool_call>"},
        ],
        "triggers": ["<tool_call>"],
        "at_least_one": True,
    })  # fmt: skip
    # named tags every tool; parallel_tool_calls does not enter the legacy tag
    assert (
        derive(
            request(
                tool("get", SIMPLE),
                tool("put", SIMPLE, strict=True),
                choice=named("put"),
                parallel_tool_calls=False,
            ),
            "hermes",
        ).spec_text
        == got.spec_text
    )
    auto = derive(request(tool("get", SIMPLE), tool("put", SIMPLE, strict=True), choice="auto"), "hermes")
    assert auto.reason == sg.TOOL_CHOICE_AUTO_STRICT and auto.spec_text == got.spec_text.replace(
        '"at_least_one": true', '"at_least_one": false'
    )


def test_strict_levels() -> None:
    body = request(tool("a", SIMPLE), choice="auto")
    assert derive(body, "hermes").reason == sg.TOOL_CHOICE_AUTO
    assert derive(body, "hermes", strict_level=1).spec_text == json.dumps(
        {
            "type": "structural_tag",
            "structures": [
                {"begin": '<tool_call>{"name":"a", "arguments":', "schema": {}, "end": "}</tool_call>"}
            ],
            "triggers": ["<tool_call>"],
            "at_least_one": False,
        }
    )
    assert '"schema": {"type": "object"' in str(derive(body, "hermes", strict_level=2).spec_text)
    for level in ("1", 1.0, True):
        assert derive(body, "hermes", strict_level=level).reason == sg.UNKNOWN_STRICT_LEVEL  # type: ignore[arg-type]


def test_a_defs_clash_under_a_legacy_tag() -> None:
    clash = {"type": "object", "$defs": {"P": {"type": "integer"}}}
    tools = [tool("a", WITH_DEFS, strict=True), tool("b", clash)]
    assert derive(request(*tools), "hermes").error == "defs_clash"  # the JSON fallback raises the same
    assert derive(request(*tools, choice=named("b")), "hermes").reason == sg.TOOL_CHOICE_NAMED  # JSON
    assert (
        derive(request(*tools, choice="auto"), "hermes").reason == sg.CONSTRAINT_ERROR
    )  # logged, unconstrained


def test_inkling_triggers_carry_the_name_and_its_auto_tag_is_constant() -> None:
    one = derive(request(tool("a", SIMPLE)), "inkling")
    assert (
        one.spec_text is not None
        and '"triggers": ["<|message_model|>a<|content_invoke_tool_json|>"]' in one.spec_text
    )
    two = derive(request(tool("a"), tool("b")), "inkling")  # list(set(...)): hash order
    assert (two.spec_text, two.reason, two.kind) == (None, sg.STRUCTURAL_TAG, sg_parsers.KIND_TAG)
    auto = derive(request(tool("a"), choice="auto"), "inkling")
    assert auto.reason == sg.AUTO_TAG and auto.spec_text == sg_parsers.AUTO_TAGS_0_5_23["inkling"]


@pytest.mark.parametrize("parser", ["deepseekv32", "qwen3_coder", "gpt-oss", "kimi_k2", "kimi_k3"])
def test_model_native_tags_are_not_derived(parser: str) -> None:
    got = derive(request(tool("a", SIMPLE)), parser)
    assert (got.spec_text, got.reason, got.kind) == (None, sg.STRUCTURAL_TAG, sg_parsers.KIND_TAG)


def test_model_native_tags_fall_back_to_json_where_xgrammar_refuses_the_tools() -> None:
    # a boolean schema makes a builtin tool, which qwen_3_coder cannot name
    assert derive(request(tool("a", False), choice=named("a")), "qwen3_coder").reason == sg.TOOL_CHOICE_NAMED
    assert (
        derive(request(tool("a", False), choice=named("a")), "kimi_k2").reason == sg.STRUCTURAL_TAG
    )  # non-strict: reshaped
    assert (
        derive(request(tool("a"), tool("a"), choice=named("a")), "qwen3_coder").reason == sg.TOOL_CHOICE_NAMED
    )  # two of that name
    # no function tool left for required: the JSON fallback, whose $defs merge fails on the boolean
    assert derive(request(tool("a", False)), "qwen3_coder").error == "internal_error"
    assert (
        derive(request(tool("a", False)), "gpt-oss").reason == sg.STRUCTURAL_TAG
    )  # harmony renders builtin tools
    assert (
        derive(request({"type": "web_search", "function": {"name": "w"}}), "qwen3_coder").reason
        == sg.TOOL_CHOICE_REQUIRED
    )


def test_kimi_k3_refuses_strict_tools_it_cannot_render() -> None:
    refused = [
        {"type": "string"},
        {"type": "object", "required": ["x"]},
        {"type": "object", "properties": {"x": {"type": "integer", "enum": ["a"]}}, "required": ["x"]},
        True,
        {"type": "object", "additionalProperties": {"type": "string", "enum": [1]}},
    ]
    for parameters in refused:
        assert (
            derive(request(tool("a", parameters, strict=True), choice=named("a")), "kimi_k3").reason
            == sg.TOOL_CHOICE_NAMED
        ), parameters
        assert (
            derive(request(tool("a", parameters, strict=True), choice="auto"), "kimi_k3").reason
            == sg.CONSTRAINT_ERROR
        )
    assert derive(request(tool("a", SIMPLE, strict=True)), "kimi_k3").reason == sg.STRUCTURAL_TAG
    assert derive(request(tool("a", {"type": "string"})), "kimi_k3").reason == sg.STRUCTURAL_TAG  # not strict
    cyclic = {
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/A"}},
        "required": ["x"],
        "$defs": {"A": {"$ref": "#/$defs/A"}},
    }
    assert derive(request(tool("a", cyclic, strict=True)), "kimi_k3").reason in (
        sg.STRUCTURAL_TAG,
        sg.TOOL_CHOICE_REQUIRED,
    )


def test_glm47_takes_its_ebnf_for_every_choice_unless_a_tool_is_strict() -> None:
    for choice in ("auto", "required", named("a")):
        got = derive(request(tool("a", SIMPLE), choice=choice), "glm47")
        assert (got.spec_text, got.reason, got.kind) == (None, sg.EBNF, sg_parsers.KIND_EBNF)
    assert derive(request(tool("a", SIMPLE, strict=True)), "glm47").reason == sg.STRUCTURAL_TAG
    assert derive(request(tool("a", SIMPLE), choice="none"), "glm47").reason == sg.TOOL_CHOICE_NONE


@pytest.mark.parametrize("parser", ["muse", "spark25", "hunyuan"])
def test_detectors_that_parse_forced_calls_natively_get_no_grammar(parser: str) -> None:
    assert derive(request(tool("a", SIMPLE)), parser).reason == sg.PARSED_NATIVELY
    assert derive(request(tool("a", SIMPLE), choice=named("a")), parser).reason == sg.PARSED_NATIVELY


def test_iquest_q1_named_is_the_bare_parameters() -> None:
    assert derive(request(tool("a", SIMPLE), choice=named("a")), "iquest_q1").spec_text == json.dumps(SIMPLE)
    assert derive(request(tool("a"), choice=named("a")), "iquest_q1").spec_text == "{}"
    assert derive(request(tool("a", True), choice=named("a")), "iquest_q1").error == "internal_error"
    assert (
        derive(request(tool("a", SIMPLE)), "iquest_q1").spec_text
        == derive(request(tool("a", SIMPLE)), None).spec_text
    )


def test_beam_tags_every_turn() -> None:
    for body in (
        {},
        request(tool("a"), choice="none"),
        request(tool("a"), choice="auto"),
        request(tool("a")),
    ):
        got = derive(body, "beam")
        assert (got.reason, got.kind) == (sg.STRUCTURAL_TAG, sg_parsers.KIND_TAG), body
    assert derive({"response_format": {"type": "json_object"}}, "beam").reason == sg.NO_TOOLS
    assert (
        derive(request(tool("a", True), choice="auto"), "beam").error == "internal_error"
    )  # building the tag
    # auto under the request's own grammar: no tag is built, unless strict or single calls ask for one
    assert derive(request(tool("a", True), choice="auto", regex="x"), "beam").reason == sg.TOOL_CHOICE_AUTO
    single = request(tool("a", SIMPLE), choice="auto", parallel_tool_calls=False)
    assert derive({**single, "regex": "x"}, "beam").error == "template_unsupported"
    assert derive({**single, "response_format": {"type": "json_object"}}, "beam").reason == sg.USER_CONSTRAINT


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({}, sg.NO_TOOLS), ({"tools": None, "tool_choice": "none"}, sg.NO_TOOLS), ({"tools": []}, sg.NO_TOOLS),
        ({"tools": [], "tool_choice": "auto"}, sg.NO_TOOLS), (request(tool("a"), choice="none"), sg.TOOL_CHOICE_NONE),
        ({"tools": [tool("a")]}, sg.TOOL_CHOICE_AUTO), (request(tool("a"), choice=None), sg.TOOL_CHOICE_AUTO),
    ],
)  # fmt: skip
def test_requests_without_a_tool_call_grammar(body: dict[str, Any], reason: str) -> None:
    got = derive(body, "pythonic")
    assert (got.spec_text, got.reason, got.error) == (None, reason, None)


def test_the_requests_own_constraint_replaces_the_tool_grammar_and_conflicts_with_a_forced_call() -> None:
    for field in ({"response_format": {"type": "json_object"}}, {"regex": "[a-z]+"}, {"ebnf": 'root ::= "x"'},
                  {"response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": SIMPLE}}}):  # fmt: skip
        assert (
            derive(request(tool("a", SIMPLE, strict=True), choice="auto", **field), "hermes").reason
            == sg.USER_CONSTRAINT
        )
        assert derive(request(tool("a", SIMPLE), **field), "hermes").error == "structured_outputs_conflict"
        assert (
            derive(request(tool("a", SIMPLE), choice="auto", **field), "glm47").reason == sg.USER_CONSTRAINT
        )
        assert (
            derive(request(tool("a", SIMPLE), **field), "glm47").reason == sg.USER_CONSTRAINT
        )  # its EBNF never conflicts
    assert (
        derive(request(tool("a", SIMPLE), regex=""), "hermes").reason == sg.TOOL_CHOICE_REQUIRED
    )  # empty: no constraint
    assert (
        derive(request(tool("a"), response_format={"type": "text"}), None).reason == sg.TOOL_CHOICE_REQUIRED
    )
    assert (
        derive(request(tool("a"), response_format={"type": "json_schema"}), None).error
        == "invalid_response_format"
    )


def test_message_tools_join_the_request_tools() -> None:
    messages = [
        {"role": "System", "content": "s", "tools": [tool("m", WITH_DEFS)]},
        {"role": "user", "content": "hi"},
    ]
    got = derive({"messages": messages, "tool_choice": "required"}, None)
    assert got.spec_text is not None and '"enum": ["m"]' in got.spec_text
    assert derive({"messages": messages}, None).reason == sg.TOOL_CHOICE_AUTO  # tool_choice defaults to auto
    assert derive({"messages": messages, "tools": [tool("m")]}, None).error == "duplicate_tool_names"
    user = [{"role": "user", "content": "s", "tools": [tool("m")]}]  # a user message's tools are ignored
    assert derive({"messages": user, "tool_choice": "required"}, None).error == "tool_choice_without_tools"
    assert derive({"messages": [], "tools": [tool("a")]}, None).error == "invalid_request"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"tool_choice": "required"}, "tool_choice_without_tools"),
        ({"tools": [], "tool_choice": "required"}, "tool_choice_without_tools"),
        ({"tool_choice": named("a")}, "tool_choice_without_tools"),
        (request(tool("a"), choice=named("b")), "unknown_named_tool"),
        (request(tool("a"), choice=named(None)), "unknown_named_tool"),
        (request(tool("a"), choice="always"), "invalid_request"),
        (request(tool("a"), choice={"type": "function"}), "invalid_request"),
        (request(tool("a"), choice={"type": "other", "function": {"name": "a"}}), "invalid_request"),
        (request(tool("a"), choice=named(7)), "invalid_request"),
        ({"tools": {"a": 1}}, "invalid_request"),
        ({"tools": [{"type": "function", "function": {"name": 7}}]}, "invalid_request"),
        ({"tools": [{"type": 1, "function": {"name": "a"}}]}, "invalid_request"),
        ({"tools": [tool("a", strict="maybe")]}, "invalid_request"),
        ({"tools": [tool("a", description=3)]}, "invalid_request"),
        ({"tools": [tool("a")], "response_format": {"type": "xml"}}, "invalid_request"),
        ({"tools": [tool("a")], "regex": 5}, "invalid_request"),
    ],
)
def test_what_sglang_answers_with_a_400(body: dict[str, Any], error: str) -> None:
    got = derive(body, "pythonic")
    assert (got.spec_text, got.reason, got.error) == (None, sg.REJECTED, error)
    assert error in sg.ERRORS and sg.ERROR_STATUS.get(error, 400) == 400


def test_unknown_parsers_and_versions() -> None:
    assert derive(request(tool("a")), "nope").reason == sg.UNKNOWN_PARSER
    assert derive(request(tool("a")), ["hermes"]).reason == sg.UNKNOWN_PARSER  # type: ignore[arg-type]
    assert derive(request(tool("a")), "hermes", version="0.4.0").reason == sg.UNKNOWN_VERSION
    assert sg.parser_family("hermes") == "legacy_tag" and sg.parser_family("nope") is None


def test_every_parser_has_a_known_family_and_every_reason_is_listed() -> None:
    assert {row[1] for row in sg_parsers.PARSERS_0_5_23.values()} <= sg_parsers.FAMILIES
    assert (
        not sg.DERIVED_REASONS & sg.NO_GRAMMAR_REASONS and not sg.NOT_DERIVED_REASONS & sg.NO_GRAMMAR_REASONS
    )
    body = request(tool("a", SIMPLE), tool("b", WITH_DEFS, strict=True))
    for parser in [None, *sg_parsers.PARSERS_0_5_23]:
        for choice in ("auto", "required", named("b"), "none"):
            got = derive({**body, "tool_choice": choice}, parser)
            assert got.reason in sg.DERIVED_REASONS | sg.NOT_DERIVED_REASONS | sg.NO_GRAMMAR_REASONS, (
                parser,
                got,
            )
            assert (got.spec_text is not None) == (got.reason in sg.DERIVED_REASONS), (parser, got)


def deep(depth: int) -> Any:
    node: Any = {"type": "string"}
    for _ in range(depth):
        node = {"type": "array", "items": node}
    return node


def cyclic() -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object"}
    node["properties"] = {"self": node}
    return node


@pytest.mark.parametrize(
    "body",
    [
        None, 1, "x", [], {"tools": "x"}, {"tools": [None]}, {"tools": [tool("a", deep(5000))]}, {"tools": [tool("a", cyclic())]},
        {"tools": [tool("a", {"enum": [math.nan, math.inf]})]}, {"tools": [tool("a", {"enum": [{1, 2}]})], "tool_choice": "required"},
        {"tools": [tool("a", {1: {"type": "string"}})], "tool_choice": "required"}, {"tools": [tool("a", {"pattern": "(" * 2000})]},
        {"messages": [None, 3, {"role": 5}, {"role": "system", "tools": "x"}]}, {"tools": [tool("a")], "tool_choice": {"function": []}},
        {"tools": [tool("a")], "response_format": {"type": "json_schema", "schema": "x"}},
    ],
)  # fmt: skip
def test_hostile_input_never_raises(body: Any) -> None:
    for parser in (None, "hermes", "kimi_k3", "iquest_q1", "beam", "glm47"):
        got = derive(body, parser)
        assert got.reason in sg.DERIVED_REASONS | sg.NOT_DERIVED_REASONS | sg.NO_GRAMMAR_REASONS
        assert got.error is None or got.error in sg.ERRORS


def test_deep_parameters_are_not_vouched_for() -> None:
    assert derive(request(tool("a", deep(60))), None).reason == sg.TOOL_CHOICE_REQUIRED
    assert derive(request(tool("a", deep(70))), None).reason == sg.TOO_COMPLEX
