"""The check after decoding for an agent's tool calls, once every request sends every tool.

`gdx fix` copies this file as check.py beside a tool family's static tool list. The server then
builds one grammar from all the tools, so the grammar no longer stops a call to a tool this request
did not enable, or a second call where the request asked for one: this does, on the calls vLLM's
tool parser hands back. Standard library only; nothing in it is generated.

    problems = check(tool_calls, request)

- `tool_calls`: the response's calls: chat completions' `message.tool_calls`
  (`[{"function": {"name", "arguments"}}]`) or the Responses API's `function_call` output items
  (`[{"name", "arguments"}]`);
- `request`: the request as it would have been sent before the fix: its `tools` (the ones enabled for
  it), `tool_choice` and `parallel_tool_calls`.
Returns what is wrong, one line each; an empty list when the calls are ones the request allowed.
"""

from __future__ import annotations

import json
from typing import Any

NAMESPACE_SEPARATOR = "__"  # how vLLM flattens a Responses API namespace's tools


def enabled_tools(request: dict[str, Any]) -> set[str]:
    """The names a request's tools let the model call, as vLLM names them."""
    names: set[str] = set()
    for tool in request.get("tools") or ():
        if not isinstance(tool, dict):
            continue
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
        elif tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            for member in tool["tools"]:
                if isinstance(member, dict) and isinstance(member.get("name"), str):
                    names.add(f"{tool.get('name')}{NAMESPACE_SEPARATOR}{member['name']}")
        elif isinstance(tool.get("name"), str):
            names.add(tool["name"])
    return names


def _named(request: dict[str, Any]) -> str | None:
    choice = request.get("tool_choice")
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    return name if isinstance(name, str) else None


def check(tool_calls: Any, request: dict[str, Any]) -> list[str]:
    calls = [c for c in (tool_calls or ()) if isinstance(c, dict)]
    enabled = enabled_tools(request)
    named = _named(request)
    problems: list[str] = []
    if request.get("parallel_tool_calls") is False and len(calls) > 1:
        problems.append(f"{len(calls)} tool calls, but the request allowed one (parallel_tool_calls false)")
    if not calls and (request.get("tool_choice") == "required" or named):
        problems.append("no tool call, but the request's tool_choice requires one")
    for i, call in enumerate(calls):
        inner = call.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else call
        name = function.get("name")
        if name not in enabled:
            problems.append(f"call {i}: tool {name!r} was not enabled for this request")
        elif named is not None and name != named:
            problems.append(f"call {i}: tool {name!r}, but the request named {named!r}")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                json.loads(arguments)
            except ValueError:
                problems.append(f"call {i}: the arguments of {name!r} are not JSON")
    return problems
