# ruff: noqa: E501  (requests and calls read better on one line)
"""The pieces of gdx fix for a tool parser's structural tags: the check after decoding
(exporter/fix/toolcheck.py, copied as check.py), the union of the tools, and naming the calls in a
sampled text (tests/integration/test_lint_toolcalls.py runs the whole fix on xgrammar)."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.fix.toolcheck import check, enabled_tools
from exporter.fix.toolfix import calls_in, unite

P = {"type": "object", "properties": {"q": {"type": "string"}}}


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": P, **extra}}


def call(name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("calls", "request_body", "problems"),
    [
        ([call("a")], {"tools": [tool("a")], "tool_choice": "required"}, []),
        ([call("b")], {"tools": [tool("a")]}, ["call 0: tool 'b' was not enabled for this request"]),
        ([], {"tools": [tool("a")], "tool_choice": "required"}, ["no tool call, but the request's tool_choice requires one"]),
        ([], {"tools": [tool("a")], "tool_choice": "auto"}, []),
        ([call("a"), call("a")], {"tools": [tool("a")], "parallel_tool_calls": False},
         ["2 tool calls, but the request allowed one (parallel_tool_calls false)"]),
        ([call("a"), call("a")], {"tools": [tool("a")]}, []),
        ([call("b")], {"tools": [tool("a"), tool("b")], "tool_choice": {"type": "function", "function": {"name": "a"}}},
         ["call 0: tool 'b', but the request named 'a'"]),
        ([call("a", "{not json")], {"tools": [tool("a")]}, ["call 0: the arguments of 'a' are not JSON"]),
        # the Responses API: flat tools, namespaces flattened as vLLM does, function_call items
        ([{"type": "function_call", "name": "ns__f", "arguments": "{}"}],
         {"tools": [{"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]}]}, []),
        ([{"type": "function_call", "name": "g", "arguments": "{}"}], {"tools": [{"type": "function", "name": "f"}]},
         ["call 0: tool 'g' was not enabled for this request"]),
        # an entry that is not a call is refused, not skipped: skipped, it hid a second call
        ([None, "x", call("a")], {"tools": [tool("a")]}, ["call 0: not a JSON object", "call 1: not a JSON object"]),
    ],
)  # fmt: skip
def test_the_check_refuses_what_the_request_did_not_allow(
    calls: list[Any], request_body: dict[str, Any], problems: list[str]
) -> None:
    assert check(calls, request_body) == problems


def test_enabled_tools_read_every_shape_and_ignore_junk() -> None:
    request = {"tools": [tool("a"), {"type": "custom", "name": "sh"}, None, {"type": "function"}, 3]}
    assert enabled_tools(request) == {"a", "sh"}
    assert enabled_tools({}) == set() and enabled_tools({"tools": None}) == set()


def test_the_union_keeps_first_seen_order_and_refuses_two_definitions_of_a_name() -> None:
    bodies = [
        {"tools": [tool("b"), tool("a")], "tool_choice": "required"},
        {"tools": [tool("c"), tool("a")], "tool_choice": "required"},
    ]
    tools, error = unite(bodies)
    assert error == "" and [t["function"]["name"] for t in tools] == ["b", "a", "c"]
    bodies[1]["tools"][1] = tool("a", description="other")
    assert unite(bodies) == ([], "tool 'a' is sent with two definitions: one static list needs one")
    named = [{"tools": [tool("a")], "tool_choice": {"type": "function", "function": {"name": "a"}}}] * 2
    assert unite(named)[1] == "a named tool_choice builds a tag for one tool: nothing to unite"
    mixed = [{"tools": [tool("a")], "tool_choice": "required"}, {"tools": [tool("a")], "tool_choice": "auto"}]
    assert "differ in `tool_choice`" in unite(mixed)[1]


def test_calls_in_names_each_call_by_its_longest_begin() -> None:
    begins = [('<tool_call>{"name": "get_all", ', "get_all"), ('<tool_call>{"name": "get", ', "get")]
    text = '<tool_call>{"name": "get", "arguments": {}}</tool_call><tool_call>{"name": "get_all", "arguments": {}}</tool_call>'
    assert [c["function"]["name"] for c in calls_in(text, begins)] == ["get", "get_all"]
    assert calls_in("plain text", begins) == []
