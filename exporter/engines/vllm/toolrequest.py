"""What vLLM's request validation lets through for the fields that decide a tool grammar: the chat
request's (ChatCompletionRequest's validators and field types) and the Responses API's (its flat tools,
namespaces and custom tools made function tools), as a `ToolRequest`; `ToolRejected` where vLLM answers 400.
Pure and standard library only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    parameters: dict[str, Any] | None
    strict: bool
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ToolRequest:
    tools: list[Tool] | None
    choice: str | None  # "none", "auto", "required", "named" or None (an explicit null)
    named: str
    parallel_tool_calls: bool | None
    user_structural_tag: bool
    structured_outputs: bool  # structured_outputs or a response_format other than text
    raw_tools: bool = False  # any tool at all, function or hosted (a Responses request's may be none)
    # The request's own StructuredOutputsParams fields (response_format applied), for the `or` an
    # `auto` tag makes with them; None when they cannot be read here (the Responses API's text.format).
    own: dict[str, Any] | None = None


class ToolRejected(Exception):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_BOOL_WORDS = _TRUE | frozenset({"0", "off", "f", "false", "n", "no"})


def validate(body: Any, empty_tools_rejected: bool = True) -> ToolRequest:
    """What ChatCompletionRequest's validators (check_structured_outputs_count, check_tool_usage) and
    field types let through, for the fields that decide the tool grammar; ToolRejected where vLLM 400s.
    `empty_tools_rejected`: `tools: []` is a 400 (before 0.34.0); else it reads as no tools, auto and
    required becoming none, and only a named choice keeps the empty list (then a 400: no such tool)."""
    if not isinstance(body, dict):
        raise ToolRejected("invalid_request", "the body is not a JSON object")
    raw_tools = body.get("tools")
    if raw_tools == [] and empty_tools_rejected:
        raise ToolRejected("empty_tools", "`tools` must not be an empty array")
    if "tool_choice" in body:
        choice: Any = body["tool_choice"]
    else:
        choice = "auto" if raw_tools else "none"
    if raw_tools == [] and not isinstance(choice, dict):
        raw_tools = None
        if choice in ("auto", "required"):
            choice = "none"
    # pydantic runs the "before" validators last-defined first: check_tool_usage, then
    # check_structured_outputs_count (the same in 0.32.0 to 0.34.0).
    named = ""
    if choice is not None and choice != "none":
        if raw_tools is None:
            raise ToolRejected("tool_choice_without_tools", "`tool_choice` without `tools`")
        if isinstance(choice, dict):
            named = _named_choice(choice, raw_tools)
            choice = "named"
        elif choice not in ("auto", "required"):
            raise ToolRejected("invalid_tool_choice", f"`tool_choice` {str(choice)[:40]!r}")
    so = body.get("structured_outputs")
    if so is not None and not isinstance(so, dict):
        raise ToolRejected("invalid_request", "`structured_outputs` is not an object")
    so = so or {}
    constraints = sum(so.get(key) is not None for key in ("json", "regex", "choice"))
    # check_structured_outputs_count reads the body's own tool_choice (an explicit null counts).
    if constraints > 1 or (
        constraints and body.get("tool_choice", "none") not in ("none", "auto", "required")
    ):
        raise ToolRejected(
            "structured_outputs_conflict", "structured outputs beside a named tool or each other"
        )
    tools = None if raw_tools is None else _tools(raw_tools)
    parallel = _lax_bool(body.get("parallel_tool_calls", True), "parallel_tool_calls")
    response_format = body.get("response_format")
    formatted = isinstance(response_format, dict) and response_format.get("type", "text") != "text"
    structured = body.get("structured_outputs") is not None or formatted
    return ToolRequest(
        tools,
        choice,
        named,
        parallel,
        so.get("structural_tag") is not None,
        structured,
        bool(tools),
        _own_params(so, response_format if formatted else None),
    )


def _own_params(so: dict[str, Any], response_format: Any) -> dict[str, Any] | None:
    """structured_outputs_from_response_format: the request's StructuredOutputsParams fields, with
    response_format's override (json_object, a json_schema's schema) on top; None for a response
    format read no further here (a structural tag of its own)."""
    params = {key: value for key, value in so.items() if value is not None}
    if response_format is None:
        return params
    kind = response_format.get("type")
    if kind == "json_object":
        return {**params, "json_object": True}
    if kind == "json_schema":
        json_schema = response_format.get("json_schema")
        schema = json_schema.get("schema") if isinstance(json_schema, dict) else None
        return {**params, "json": schema}  # no schema: vLLM's json=None, the tag alone
    return None


NAMESPACE_SEPARATOR = "__"  # vllm/tool_parsers/utils.py flat_namespace_tool_name
CUSTOM_TOOL_PARAMETERS = {  # custom_tool_parameters(): the single-string shim a custom tool is shown as
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The freeform text payload for this tool."}},
    "required": ["input"],
    "additionalProperties": False,
}


def validate_responses(body: Any) -> ToolRequest:
    """ResponsesRequest's validators (check_custom_tool_format, check_tool_usage with
    _resolve_named_tool_choice) and get_function_tools: the function tools the model is shown."""
    if not isinstance(body, dict):
        raise ToolRejected("invalid_request", "the body is not a JSON object")
    raw_tools = body.get("tools")
    if raw_tools is not None and not isinstance(raw_tools, list):
        raise ToolRejected("invalid_request", "`tools` is not an array")
    choice: Any = body.get("tool_choice", "auto")
    named_choice = isinstance(choice, dict) and choice.get("type") in ("function", "custom")
    named = ""
    if not raw_tools:
        if choice in ("auto", "none"):
            choice = "none"
        elif choice == "required":
            raise ToolRejected("tool_choice_without_tools", "tool_choice required without `tools`")
        elif named_choice:
            raise ToolRejected("unknown_named_tool", "a named tool_choice without `tools`")
    elif named_choice:
        name = choice.get("name")
        if not name:
            raise ToolRejected("unknown_named_tool", "a named tool_choice without a name")
        named = _resolve_named(name, raw_tools)
    for raw in raw_tools or ():  # check_custom_tool_format: pydantic runs it after check_tool_usage
        if isinstance(raw, dict) and raw.get("type") == "custom":
            tool_format = raw.get("format")
            if isinstance(tool_format, dict) and tool_format.get("type") == "grammar":
                raise ToolRejected("invalid_request", "custom tools with a grammar format are not supported")
    tools = _response_tools(raw_tools or [])
    if named_choice:
        if not isinstance(named, str):
            raise ToolRejected("invalid_tool_choice", "`tool_choice.name` is not a string")
        choice = "named"
    elif _hosted_choice(choice):
        choice = "hosted"  # a hosted tool, allowed_tools, mcp...: no function-call grammar
    elif choice not in ("auto", "none", "required"):
        raise ToolRejected("invalid_request", f"`tool_choice` {str(choice)[:40]!r}")  # pydantic's 400
    parallel = _lax_bool(body.get("parallel_tool_calls", True), "parallel_tool_calls")
    so = body.get("structured_outputs")
    if so is not None and not isinstance(so, dict):
        raise ToolRejected("invalid_request", "`structured_outputs` is not an object")
    text = body.get("text")
    text_format = text.get("format") if isinstance(text, dict) else None
    if so is not None and text_format is not None:
        raise ToolRejected("structured_outputs_conflict", "both structured_outputs and text.format")
    formatted = isinstance(text_format, dict) and text_format.get("type", "text") != "text"
    user_tag = isinstance(so, dict) and so.get("structural_tag") is not None
    return ToolRequest(tools, choice, named, parallel, user_tag, so is not None or formatted, bool(raw_tools))


# The Responses API's other tool_choice objects (openai.types.responses ToolChoiceTypes, apply_patch, shell).
HOSTED_CHOICES = frozenset({
    "file_search", "web_search_preview", "computer", "computer_use_preview", "computer_use",
    "web_search_preview_2025_03_11", "image_generation", "code_interpreter", "apply_patch", "shell",
})  # fmt: skip


def _hosted_choice(choice: Any) -> bool:
    if not isinstance(choice, dict):
        return False
    kind = choice.get("type")
    if kind == "allowed_tools":
        return choice.get("mode") in ("auto", "required") and isinstance(choice.get("tools"), list)
    if kind == "mcp":
        return isinstance(choice.get("server_label"), str)
    return kind in HOSTED_CHOICES


def _resolve_named(name: Any, raw_tools: list[Any]) -> Any:
    """_resolve_named_tool_choice: the exact name, or the one namespace's `<namespace>__<name>`."""
    exact: set[str] = set()
    local: dict[str, list[str]] = {}
    for raw in raw_tools:
        if not isinstance(raw, dict):
            continue
        if raw.get("type") == "namespace":
            namespace, members = raw.get("name"), raw.get("tools")
            if not isinstance(members, list) or not isinstance(namespace, str):
                return name
            for member in members:
                member_name = member.get("name") if isinstance(member, dict) else None
                if isinstance(member_name, str):
                    flat = namespace + NAMESPACE_SEPARATOR + member_name
                    exact.add(flat)
                    local.setdefault(member_name, []).append(flat)
        elif isinstance(raw.get("name"), str):
            exact.add(raw["name"])
    if name in exact:
        return name
    candidates = local.get(name, []) if isinstance(name, str) else []
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise ToolRejected("ambiguous_named_tool", f"tool {name!r} is in more than one namespace")
    raise ToolRejected("unknown_named_tool", f"tool {str(name)[:80]!r} is not among the tools")


def _response_tools(raw_tools: list[Any]) -> list[Tool]:
    """get_function_tools: function tools as sent, namespace members flattened, custom tools as the
    single-string shim; hosted tools (web_search, mcp...) are not shown to the model and dropped."""
    tools: list[Tool] = []
    for raw in raw_tools:
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise ToolRejected("invalid_request", "a tool without a `type`")
        kind = raw["type"]
        if kind == "function":
            tools.append(_response_function(raw, raw.get("name")))
        elif kind == "namespace":
            members = raw.get("tools")
            if not isinstance(raw.get("name"), str) or not isinstance(members, list):
                raise ToolRejected("invalid_request", "a namespace without a name or tools")
            for member in members:
                if isinstance(member, dict) and member.get("type") == "function":
                    name = member.get("name")
                    if not isinstance(name, str):
                        raise ToolRejected("invalid_request", "a namespace function without a string name")
                    tools.append(_response_function(member, raw["name"] + NAMESPACE_SEPARATOR + name))
        elif kind == "custom":
            if not isinstance(raw.get("name"), str):
                raise ToolRejected("invalid_request", "a custom tool without a string `name`")
            tools.append(Tool(raw["name"], dict(CUSTOM_TOOL_PARAMETERS), False, _text(raw)))
    return tools


def _response_function(raw: dict[str, Any], name: Any) -> Tool:
    if not isinstance(name, str):
        raise ToolRejected("invalid_request", "a function tool without a string `name`")
    parameters = raw.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise ToolRejected("invalid_request", f"parameters of {name!r} are not an object")
    strict = _lax_bool(raw.get("strict"), "strict")
    return Tool(name, parameters, bool(strict), _text(raw))


def _text(raw: dict[str, Any]) -> str | None:
    """A tool's description as the builders are given it (only a string passes validation)."""
    description = raw.get("description")
    return description if isinstance(description, str) else None


def _named_choice(choice: dict[Any, Any], raw_tools: Any) -> str:
    function = choice.get("function")
    if not isinstance(function, dict) or "name" not in function:
        raise ToolRejected("invalid_tool_choice", "`tool_choice.function` needs a `name`")
    name = function["name"]
    if not isinstance(name, str) or not name:
        raise ToolRejected("invalid_tool_choice", "`tool_choice.function.name` is not a non-empty string")
    if not isinstance(raw_tools, list):
        raise ToolRejected("invalid_request", "`tools` is not an array")
    for tool in raw_tools:
        function_of_tool = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function_of_tool, dict) or "name" not in function_of_tool:
            raise ToolRejected("invalid_request", "a tool without `function.name`")  # vLLM: a 500
        if function_of_tool["name"] == name:
            break
    else:
        raise ToolRejected("unknown_named_tool", f"tool {name!r} is not among the tools")
    if choice.get("type", "function") != "function":
        raise ToolRejected("invalid_request", "`tool_choice.type` is not 'function'")
    return name


def _tools(raw_tools: Any) -> list[Tool]:
    """list[ChatCompletionToolsParam] as pydantic validates it (lax mode, extra fields allowed)."""
    if not isinstance(raw_tools, list):
        raise ToolRejected("invalid_request", "`tools` is not an array")
    tools = []
    for raw in raw_tools:
        if not isinstance(raw, dict) or raw.get("type", "function") != "function":
            raise ToolRejected("invalid_request", "a tool is not a function tool")
        function = raw.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ToolRejected("invalid_request", "a tool without a string `function.name`")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise ToolRejected("invalid_request", f"parameters of {function['name']!r} are not an object")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise ToolRejected("invalid_request", f"description of {function['name']!r} is not a string")
        strict = _lax_bool(function.get("strict"), "strict")
        _lax_bool(function.get("defer_loading"), "defer_loading")
        _lax_bool(raw.get("defer_loading"), "defer_loading")
        tools.append(Tool(function["name"], parameters, bool(strict), description))
    return tools


def _lax_bool(value: Any, field: str) -> bool | None:
    """A `bool | None` field as pydantic reads it in lax mode: true/false, 0/1, and the usual words."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _BOOL_WORDS:
        return value.lower() in _TRUE
    raise ToolRejected("invalid_request", f"`{field}` is not a boolean")
