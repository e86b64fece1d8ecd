"""Request logs with `tools` (exporter.lint.requests): the grammar the server's tool parser derives,
the request's own spec where the tools give none, and every other request counted with its reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exporter.engines.vllm import toolcalls
from exporter.lint import requests
from exporter.lint.requests import (
    REPLACED,
    SKIP_REASONS,
    Rejected,
    Request,
    Skipped,
    ToolServer,
    parse_file,
)
from exporter.schema.identity import schema_hash

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OWN = {"type": "object", "properties": {"answer": {"type": "string"}}}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "out", "schema": OWN}}


def tools(*names: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": PARAMS, **extra}} for n in names]


def one(body: dict[str, Any], server: ToolServer) -> Request | Skipped | Rejected:
    around = {"model": "m"} if "input" in body else {"model": "m", "messages": []}
    (found,) = parse_file("log.jsonl", json.dumps({**around, **body}) + "\n", tools=server)
    return found


PYTHONIC = ToolServer("pythonic", "0.33.0")
HERMES = ToolServer("hermes", "0.33.0")


@pytest.mark.parametrize(
    ("body", "server"),
    [
        ({"tools": tools("a"), "tool_choice": "required"}, HERMES),
        ({"tools": tools("a"), "tool_choice": "required", "response_format": RESPONSE_FORMAT}, HERMES),
        ({"tools": tools("a"), "tool_choice": "auto", "parallel_tool_calls": False}, HERMES),
        ({"tools": tools("a"), "tool_choice": "auto"}, ToolServer("hermes", "0.33.0", "function")),
    ],
)
def test_a_structural_tag_parser_gives_the_tag_it_builds(body: dict[str, Any], server: ToolServer) -> None:
    found = one(body, server)
    expected = toolcalls.derive(body, server.parser, server.version, server.strict_level)
    assert isinstance(found, Request) and expected.kind == "structural_tag" and expected.spec_text
    assert (found.kind, found.text) == ("structural_tag", expected.spec_text)
    assert found.parsed["type"] == "structural_tag"


def test_required_lints_the_grammar_the_parser_derives_not_the_requests_own() -> None:
    body = {"tools": tools("a", "b"), "tool_choice": "required", "response_format": RESPONSE_FORMAT}
    found = one(body, PYTHONIC)
    expected = toolcalls.derive(body, "pythonic", "0.33.0")
    assert isinstance(found, Request) and expected.spec_text is not None
    assert (found.name, found.kind, found.text) == ("log.jsonl", "json", expected.spec_text)
    assert found.parsed["items"]["anyOf"][1]["properties"]["name"]["enum"] == ["b"]
    assert schema_hash(found.text) != schema_hash(json.dumps(OWN))


@pytest.mark.parametrize(
    ("body", "server", "reason"),
    [
        ({"tools": tools("a"), "tool_choice": "required"}, ToolServer(), "tools_without_parser"),
        (
            {"tools": tools("a"), "tool_choice": {"type": "function", "function": {"name": "a"}}},
            ToolServer(),
            "tools_without_parser",
        ),
        ({"tools": tools("a"), "tool_choice": "auto"}, PYTHONIC, "tool_choice_auto"),
        ({"tools": tools("a")}, HERMES, "tool_choice_auto"),
        ({"tools": tools("a"), "tool_choice": "none"}, PYTHONIC, "tool_choice_none"),
        (
            {"tools": tools("a"), "tool_choice": "auto", "response_format": {"type": "json_object"}},
            PYTHONIC,
            "json_object",
        ),
        ({"tools": tools("a"), "tool_choice": "required"}, ToolServer("mistral", "0.33.0"), "parser_grammar"),
        # a structural tag gdx does not rebuild: auto beside a grammar of the request's own
        (
            {
                "tools": tools("a", strict=True),
                "tool_choice": "auto",
                "structured_outputs": {"grammar": 'root ::= "x"'},
            },
            HERMES,
            "structural_tag",
        ),
    ],
)
def test_a_request_without_a_derived_grammar_says_why(
    body: dict[str, Any], server: ToolServer, reason: str
) -> None:
    assert one(body, server) == Skipped("log.jsonl", reason)
    assert reason in SKIP_REASONS


@pytest.mark.parametrize(
    ("body", "server"),
    [
        ({"tools": tools("a"), "tool_choice": "auto", "response_format": RESPONSE_FORMAT}, PYTHONIC),
        ({"tools": tools("a"), "tool_choice": "auto", "response_format": RESPONSE_FORMAT}, HERMES),
        ({"tools": tools("a"), "tool_choice": "none", "structured_outputs": {"json": OWN}}, HERMES),
        (
            {"tools": tools("a"), "tool_choice": "required", "response_format": RESPONSE_FORMAT},
            ToolServer("gemma4", "0.33.0"),
        ),
    ],
)
def test_where_the_tools_give_no_grammar_the_requests_own_spec_compiles(
    body: dict[str, Any], server: ToolServer
) -> None:
    found = one(body, server)
    assert isinstance(found, Request) and found.parsed == OWN


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            {"tools": tools("a"), "tool_choice": {"type": "function", "function": {"name": "b"}}},
            "unknown_named_tool",
        ),
        ({"tools": [], "tool_choice": "auto"}, "empty_tools"),
        (
            {
                "tools": [
                    {"type": "function", "function": {"name": n, "parameters": {"$defs": {"D": {"type": t}}}}}
                    for n, t in (("a", "string"), ("b", "integer"))
                ],
                "tool_choice": "required",
            },
            "defs_clash",
        ),
    ],
)
def test_a_request_vllm_answers_with_a_400_is_rejected_with_its_code(
    body: dict[str, Any], error: str
) -> None:
    found = one(body, PYTHONIC)
    assert isinstance(found, Rejected) and (found.name, found.error) == ("log.jsonl", error)


def test_a_tools_only_record_is_a_request_and_a_schema_with_a_tools_property_is_a_schema() -> None:
    found = one({"tools": tools("a"), "tool_choice": "required"}, PYTHONIC)
    assert isinstance(found, Request) and found.parsed["type"] == "array"
    schema = {"type": "object", "properties": {"tools": {"type": "array"}}, "tools": []}
    (bare,) = parse_file("s.json", json.dumps(schema), tools=PYTHONIC)
    assert isinstance(bare, Request) and bare.parsed == schema


def test_every_reason_the_tools_replace_the_requests_own_spec_is_explained() -> None:
    assert set(SKIP_REASONS) >= REPLACED
    assert REPLACED <= toolcalls.NO_GRAMMAR_REASONS


def responses_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": PARAMS}


def test_a_responses_body_gets_its_flat_and_namespaced_tools_as_function_tools() -> None:
    namespace = {"type": "namespace", "name": "crm", "description": "CRM.", "tools": [responses_tool("find")]}
    body = {
        "input": "hi",
        "tools": [responses_tool("a"), namespace, {"type": "web_search"}],
        "tool_choice": "required",
    }
    found = one(body, PYTHONIC)
    assert isinstance(found, Request)
    names = [branch["properties"]["name"]["enum"] for branch in found.parsed["items"]["anyOf"]]
    assert names == [["a"], ["crm__find"]]  # the hosted web_search is not shown to the model
    assert found.text == toolcalls.derive(body, "pythonic", "0.33.0", api="responses").spec_text
    named = one({**body, "tool_choice": {"type": "function", "name": "find"}}, PYTHONIC)
    assert isinstance(named, Request) and named.parsed == PARAMS  # resolved to its one namespace


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "o", "schema": OWN}}}, OWN),
        (
            {
                "input": "hi",
                "tools": [responses_tool("a")],
                "text": {"format": {"type": "json_schema", "name": "o", "schema": OWN}},
            },
            OWN,
        ),
    ],
)
def test_a_responses_bodys_own_text_format_is_its_spec(body: dict[str, Any], expected: Any) -> None:
    found = one(body, PYTHONIC)
    assert isinstance(found, Request) and found.parsed == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"input": "hi", "text": {"format": {"type": "json_object"}}}, Skipped("log.jsonl", "json_object")),
        (
            {"input": "hi", "tools": [responses_tool("a")], "tool_choice": {"type": "web_search_preview"}},
            Skipped("log.jsonl", "tool_choice_hosted"),
        ),
        ({"input": "hi", "tools": [{"type": "web_search"}], "tool_choice": "required"}, "no_function_tools"),
        (
            {"input": "hi", "tools": [responses_tool("a")], "tool_choice": {"type": "function", "name": "b"}},
            "unknown_named_tool",
        ),
    ],
)
def test_a_responses_body_without_a_grammar_says_why(body: dict[str, Any], expected: Any) -> None:
    found = one(body, HERMES if expected == "no_function_tools" else PYTHONIC)
    if isinstance(expected, str):
        assert isinstance(found, Rejected) and found.error == expected
    else:
        assert found == expected


def test_a_batch_line_to_the_responses_endpoint_is_read_as_a_responses_body() -> None:
    body = {"tools": [responses_tool("a")], "tool_choice": {"type": "function", "name": "a"}}
    line = {"custom_id": "r1", "method": "POST", "url": "/v1/responses", "body": body}
    (found,) = parse_file("batch.jsonl", json.dumps(line) + "\n", tools=PYTHONIC)
    assert isinstance(found, Request) and found.name == "batch.jsonl:r1" and found.parsed == PARAMS
    chat = {**line, "url": "/v1/chat/completions"}
    (refused,) = parse_file("batch.jsonl", json.dumps(chat) + "\n", tools=PYTHONIC)
    assert isinstance(refused, Rejected)  # read as chat, its tools have no `function`


@pytest.mark.parametrize(
    "doc",
    [
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Config",
            "input": {"type": "string"},
        },
        {"title": "Sections", "model": {"type": "object"}, "prompt": {"type": "string"}, "input": {}},
        {"messages": {"type": "array"}, "type": "object"},
    ],
)
def test_a_schema_document_with_request_named_sections_is_a_schema(doc: dict[str, Any]) -> None:
    """A schema whose top-level sections are called like request fields (`input`, `model`, `prompt`,
    `messages`) is read as the schema it is, not as a request without a grammar."""
    found = requests.record(requests.Line("s.json", "s.json:1", json.dumps(doc), doc))
    assert isinstance(found, requests.Request) and found.kind == "json" and found.parsed == doc


def test_a_request_body_is_still_a_request() -> None:
    body = {"model": "m", "messages": [], "response_format": {"type": "json_object"}}
    found = requests.record(requests.Line("r.jsonl", "r.jsonl:1", json.dumps(body), body))
    assert isinstance(found, requests.Skipped) and found.reason == "json_object"
