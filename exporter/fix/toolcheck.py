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
Whatever the calls or the request hold (a call that is no object, a name that is no string, arguments
nested thousands deep, NaN), the answer is such a list: never an exception, and bounded work (at most
MAX_CALLS calls and MAX_ARGUMENTS characters of arguments read; past either, a rejection).
"""

from __future__ import annotations

import json
from typing import Any

NAMESPACE_SEPARATOR = "__"  # how vLLM flattens a Responses API namespace's tools
MAX_CALLS = 1_000  # calls read; more: rejected unread
MAX_ARGUMENTS = 1 << 20  # characters of one call's arguments read; more: rejected unread


def enabled_tools(request: dict[str, Any]) -> set[str]:
    """The names a request's tools let the model call, as vLLM names them."""
    names: set[str] = set()
    tools = request.get("tools") if isinstance(request, dict) else None
    for tool in tools if isinstance(tools, list) else ():
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
    choice = request.get("tool_choice") if isinstance(request, dict) else None
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    return name if isinstance(name, str) else None


def check(tool_calls: Any, request: dict[str, Any]) -> list[str]:
    try:
        return _check(tool_calls, request)
    except (RecursionError, MemoryError, ValueError, TypeError, AttributeError) as err:
        return [f"not checked: the check failed ({type(err).__name__})"]


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _arguments_problem(arguments: Any) -> str:
    """Why a call's arguments are not the JSON object a tool's grammar emits ("" when they are): a
    JSON text (the OpenAI API's form) or, as a structural tag's output parses, the object itself;
    none given reads as no arguments."""
    if arguments is None or isinstance(arguments, dict):
        return ""
    if not isinstance(arguments, str):
        return "are not a JSON object"
    if len(arguments) > MAX_ARGUMENTS:
        return f"are longer than {MAX_ARGUMENTS} characters: not checked"
    try:
        value = json.loads(arguments, parse_constant=_not_json)
    except ValueError:
        return "are not JSON"
    except RecursionError:
        return "are nested too deep to read: not checked"
    return "" if isinstance(value, dict) else "are not a JSON object"


def _check(tool_calls: Any, request: Any) -> list[str]:
    if not isinstance(request, dict):
        return ["not checked: the request is not a JSON object"]
    if tool_calls is None:
        tool_calls = []
    if not isinstance(tool_calls, list):
        return ["the tool calls are not a list"]
    if len(tool_calls) > MAX_CALLS:
        return [f"{len(tool_calls)} tool calls, more than the check reads ({MAX_CALLS})"]
    problems: list[str] = [
        f"call {i}: not a JSON object" for i, c in enumerate(tool_calls) if not isinstance(c, dict)
    ]
    calls = [c for c in tool_calls if isinstance(c, dict)]
    enabled = enabled_tools(request)
    named = _named(request)
    if request.get("parallel_tool_calls") is False and len(tool_calls) > 1:
        problems.append(
            f"{len(tool_calls)} tool calls, but the request allowed one (parallel_tool_calls false)"
        )
    if not calls and (request.get("tool_choice") == "required" or named):
        problems.append("no tool call, but the request's tool_choice requires one")
    for i, call in enumerate(calls):
        inner = call.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else call
        name = function.get("name")
        if not isinstance(name, str):
            problems.append(f"call {i}: the tool's name is not a string")
            continue
        shown = name if len(name) <= 80 else name[:77] + "..."
        if name not in enabled:
            problems.append(f"call {i}: tool {shown!r} was not enabled for this request")
        elif named is not None and name != named:
            problems.append(f"call {i}: tool {shown!r}, but the request named {named!r}")
        problem = _arguments_problem(function.get("arguments"))
        if problem:
            problems.append(f"call {i}: the arguments of {shown!r} {problem}")
    return problems
