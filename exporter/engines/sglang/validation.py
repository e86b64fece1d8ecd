"""What SGLang's request validation lets through for the fields that decide a tool grammar
(entrypoints/openai/protocol.py ChatCompletionRequest, serving_chat.py `_validate_request`), as an
`SglangRequest`; `SglangRejected` where the server answers 400."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exporter.engines.sglang.errors import SglangRejected, SglangTooComplex
from exporter.engines.sglang.metaschema import metaschema_error, normalize_json_schema_types

# JSON nesting past which SGLang's recursive checks may raise RecursionError (a 400 at a depth that
# depends on the server's stack: from about 120 levels in a plain process): not vouched for here.
MAX_DEPTH = 64

_GENERIC_ROLES = frozenset(
    {"system", "assistant", "tool", "function", "developer", "latest_reminder", "root"}
)
_TOOL_ROLES = frozenset({"root", "system", "developer"})
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_BOOL_WORDS = _TRUE | frozenset({"0", "off", "f", "false", "n", "no"})


@dataclass(frozen=True, slots=True)
class SglangTool:
    name: str
    parameters: Any  # None when absent; any JSON value otherwise (normalized in place later)
    strict: bool
    type: str = "function"


@dataclass(frozen=True, slots=True)
class SglangRequest:
    tools: list[SglangTool]  # the effective tools: the request's, then its system/developer/root messages'
    message_tools: bool
    choice: str  # "none", "auto", "required", "named"
    named: str | None
    parallel: bool
    user_constraint: bool  # response_format other than text, or a non-empty regex or ebnf
    schema_missing: bool  # a json_schema response_format without a schema
    client_grammar: bool = False  # a non-empty regex or ebnf, or a structural_tag response_format


# --- validation -----------------------------------------------------------------------------------


def validate(body: Any) -> SglangRequest:
    """ChatCompletionRequest's fields that decide the tool grammar, as pydantic validates them."""
    if not isinstance(body, dict):
        raise SglangRejected("invalid_request", "the body is not a JSON object")
    messages = body.get("messages")
    if "messages" in body and not isinstance(messages, list):
        raise SglangRejected("invalid_request", "`messages` is not an array")
    if messages == []:
        raise SglangRejected("invalid_request", "Messages cannot be empty.")
    raw_tools = body.get("tools")
    tools = None if raw_tools is None else _tools(raw_tools)
    message_tools: list[SglangTool] = []
    has_message_tools = False
    for message in messages or ():
        role = _message_role(message)
        if role not in _GENERIC_ROLES or message.get("tools") is None:
            continue
        listed = _tools(message["tools"])
        if role in _TOOL_ROLES and listed:
            has_message_tools = True
            message_tools.extend(listed)
    choice, named = _tool_choice(body, raw_tools, messages)
    parallel = lax_bool(body.get("parallel_tool_calls", True), "parallel_tool_calls")
    if parallel is None:
        raise SglangRejected("invalid_request", "`parallel_tool_calls` is null")
    user_constraint, schema_missing = _response_format(body.get("response_format"))
    response_format = body.get("response_format")
    client_grammar = isinstance(response_format, dict) and response_format.get("type") == "structural_tag"
    for field in ("regex", "ebnf"):
        value = body.get(field)
        if value is not None and not isinstance(value, str):
            raise SglangRejected("invalid_request", f"`{field}` is not a string")
        client_grammar = client_grammar or bool(value)
    tools_all = (tools or []) + message_tools
    return SglangRequest(
        tools_all,
        has_message_tools,
        choice,
        named,
        parallel,
        user_constraint or client_grammar,
        schema_missing,
        client_grammar,
    )


def _tool_choice(body: dict[str, Any], raw_tools: Any, messages: Any) -> tuple[str, str | None]:
    """set_tool_choice_default, then Union[ToolChoice, Literal["auto", "required", "none"]]."""
    raw = body.get("tool_choice")
    if raw is None:
        listed = any(_message_role(m) in _TOOL_ROLES and bool(m.get("tools")) for m in messages or ())
        return ("none" if raw_tools is None and not listed else "auto"), None
    if isinstance(raw, str):
        if raw in ("auto", "required", "none"):
            return raw, None
        raise SglangRejected("invalid_request", f"`tool_choice` {raw[:40]!r}")
    if not isinstance(raw, dict):
        raise SglangRejected("invalid_request", "`tool_choice` is neither a string nor an object")
    function = raw.get("function")
    if not isinstance(function, dict):
        raise SglangRejected("invalid_request", "`tool_choice.function` is not an object")
    name = function.get("name")
    if name is not None and not isinstance(name, str):
        raise SglangRejected("invalid_request", "`tool_choice.function.name` is not a string")
    if raw.get("type", "function") != "function":
        raise SglangRejected("invalid_request", "`tool_choice.type` is not 'function'")
    return "named", name


def _message_role(message: Any) -> str | None:
    role = message.get("role") if isinstance(message, dict) else None
    return role.lower() if isinstance(role, str) else None


def _tools(raw_tools: Any) -> list[SglangTool]:
    """List[Tool]: `type` a string, `function.name` a string, `parameters` anything."""
    if not isinstance(raw_tools, list):
        raise SglangRejected("invalid_request", "`tools` is not an array")
    tools = []
    for raw in raw_tools:
        if not isinstance(raw, dict) or not isinstance(raw.get("type", "function"), str):
            raise SglangRejected("invalid_request", "a tool is not an object with a string `type`")
        function = raw.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise SglangRejected("invalid_request", "a tool without a string `function.name`")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise SglangRejected("invalid_request", f"description of {function['name']!r} is not a string")
        strict = lax_bool(function.get("strict"), "strict")
        lax_bool(function.get("defer_loading"), "defer_loading")
        lax_bool(raw.get("defer_loading"), "defer_loading")
        tools.append(
            SglangTool(
                function["name"], function.get("parameters"), bool(strict), raw.get("type", "function")
            )
        )
    return tools


def _response_format(value: Any) -> tuple[bool, bool]:
    """(whether it constrains the output, whether it is a json_schema without a schema)."""
    if value is None:
        return False, False
    if not isinstance(value, dict):  # set_json_schema reads `.get` of anything truthy: a 500
        raise SglangRejected(
            "internal_error" if value else "invalid_request", "`response_format` is not an object"
        )
    kind = value.get("type")
    if kind == "json_schema" and value:
        _bare_schema(value)
    if kind == "text":
        return False, False
    if kind == "json_object":
        return True, False
    if kind == "structural_tag":  # the legacy format or xgrammar's StructuralTag
        legacy = isinstance(value.get("structures"), list) and isinstance(value.get("triggers"), list)
        if not legacy and not isinstance(value.get("format"), dict):
            raise SglangRejected(
                "invalid_request", "a structural_tag response_format without structures or format"
            )
        return True, False
    if kind != "json_schema":
        raise SglangRejected("invalid_request", f"`response_format.type` {str(kind)[:40]!r}")
    json_schema = value.get("json_schema")
    if not json_schema and value.get("schema"):  # set_json_schema: a bare `schema` moves in
        return True, False
    if json_schema is None:
        return False, True
    if not isinstance(json_schema, dict) or not isinstance(json_schema.get("name"), str):
        raise SglangRejected("invalid_request", "`response_format.json_schema` without a string `name`")
    schema = json_schema.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise SglangRejected("invalid_request", "`response_format.json_schema.schema` is not an object")
    if json_schema.get("strict") is not None and not isinstance(json_schema.get("strict"), bool):
        raise SglangRejected("invalid_request", "`response_format.json_schema.strict` is not a boolean")
    return schema is not None, schema is None


def _bare_schema(value: dict[str, Any]) -> None:
    """ChatCompletionRequest.set_json_schema on a bare `schema` (named by its title, a `strict`
    property popped): where it raises other than a ValueError, FastAPI answers a 500."""
    schema = value.get("schema")
    if value.get("json_schema") or not schema:
        return
    if not isinstance(schema, dict):
        raise SglangRejected("internal_error", "`response_format.schema` is not an object")
    if "properties" in schema:
        properties = schema["properties"]
        if not isinstance(properties, dict | list | str):
            raise SglangRejected("internal_error", "`response_format.schema.properties` is not a container")
        if "strict" in properties:
            item = properties["strict"] if isinstance(properties, dict) else None
            if not isinstance(properties, dict) or (item and not isinstance(item, dict)):
                raise SglangRejected(
                    "internal_error", "`response_format.schema.properties.strict` is not a schema"
                )
    if not isinstance(schema.get("title", "Schema"), str):
        raise SglangRejected("invalid_request", "`response_format.schema.title` is not a string")


def validate_tools(request: SglangRequest) -> None:
    """OpenAIServingChat._validate_request's tool checks, normalizing each tool's parameters (a copy)."""
    tools = request.tools
    if request.choice == "required" and not tools:
        raise SglangRejected(
            "tool_choice_without_tools", "Tools cannot be empty if tool choice is set to required."
        )
    if request.choice == "named":
        if not tools:
            raise SglangRejected("tool_choice_without_tools", "a named tool_choice without tools")
        if not any(tool.name == request.named for tool in tools):
            raise SglangRejected(
                "unknown_named_tool", f"Tool {str(request.named)[:80]!r} not found in tools list."
            )
    if request.message_tools and len({tool.name for tool in tools}) != len(tools):
        raise SglangRejected(
            "duplicate_tool_names", "Tool names must be unique across request and message tools."
        )
    for i, tool in enumerate(tools):
        if tool.parameters is None:
            continue
        if too_deep(tool.parameters, MAX_DEPTH):
            raise SglangTooComplex(f"parameters of tool {i} nest deeper than {MAX_DEPTH}")
        parameters = copy_json(tool.parameters)
        normalize_json_schema_types(parameters)
        problem = metaschema_error(parameters)
        if problem:
            raise SglangRejected(
                "invalid_parameters_schema", f"Tool {i} function has invalid 'parameters' schema: {problem}"
            )
        tools[i] = SglangTool(tool.name, parameters, tool.strict, tool.type)


def too_deep(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return False


def copy_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: copy_json(child) for key, child in value.items()}
    if isinstance(value, list):
        return [copy_json(child) for child in value]
    return value


def lax_bool(value: Any, field: str) -> bool | None:
    """A `bool | None` field as pydantic reads it in lax mode: true/false, 0/1, and the usual words."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _BOOL_WORDS:
        return value.lower() in _TRUE
    raise SglangRejected("invalid_request", f"`{field}` is not a boolean")
