"""vLLM's own structural-tag models, as the dicts `StructuralTag.model_dump()` gives.

For a parser whose `structural_tag_model` vLLM registers itself (hermes, longcat, minimax, plamo3,
kimi_k3, hy_v4, glm_4_7), vLLM calls the builder in vllm/tool_parsers/structural_tag_registry.py
(identical in 0.32.0 and 0.33.0) as `builder(function_tools, builtin_tools, choice, reasoning=False,
token_suffix="")` after xgrammar's `normalize_tool_choice`, and compiles `json.dumps(tag.model_dump())`.
Each builder here rebuilds that dict on that path only (no reasoning prefix, no HYV4 token suffix).
Where vLLM's function raises for a tool set (a TypeError, AttributeError or pydantic's ValidationError
on odd schemas), the builder raises ValueError. tests/integration/test_tooltags_vllm.py compares every
string with vLLM's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from exporter.engines.grammars import tag_formats as f
from exporter.engines.grammars.tag_formats import Node
from exporter.engines.grammars.tag_tools import (
    Builder,
    BuiltinTool,
    Choice,
    FunctionTool,
    function_parameters,
)


def _string(value: Any, where: str) -> str:
    """A value pydantic takes for a `str` field (ConstStringFormat.value): a str, nothing else."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: {value!r} is not a string (vLLM's tag fails validation)")
    return value


# --- hermes, longcat ------------------------------------------------------------------------------


def _hermes_style(start: str, end: str) -> Builder:
    def build(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
        del builtin_tools
        ends = [(start + '\n{"name": "', "}\n" + end), (start + '{"name": "', "}" + end)]
        tags = [
            f.tag(begin + tool.name + '", "arguments": ', f.json_schema(function_parameters(tool)), close)
            for tool in tools
            for begin, close in ends
        ]
        if choice == "auto":
            fmt = f.triggered_tags([start], tags) if tags else f.any_text()
        else:
            fmt = f.tags_with_separator(tags, "", at_least_one=True, stop_after_first=choice == "forced")
        return f.structural_tag(fmt)

    return build


# --- minimax ----------------------------------------------------------------------------------------

_MINIMAX_THINK = ["<think>", "</think>"]


def _minimax(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
    del builtin_tools
    begin, end, trigger = "<minimax:tool_call>\n", "</minimax:tool_call>", "<minimax:tool_call>"
    tags = [
        f.tag(
            f'<invoke name="{tool.name}">\n',
            f.json_schema(function_parameters(tool), style="minimax_xml"),
            "</invoke>\n",
        )
        for tool in tools
    ]
    if choice == "auto":
        if not tags:
            return f.structural_tag(f.any_text(excludes=_MINIMAX_THINK))
        calls = f.tag(begin, f.tags_with_separator(tags, "", at_least_one=True), end)
        return f.structural_tag(f.triggered_tags([trigger], [calls], excludes=_MINIMAX_THINK))
    calls = f.tags_with_separator(tags, "", at_least_one=True, stop_after_first=choice == "forced")
    return f.structural_tag(f.sequence([f.const_string("\n" + begin), calls, f.const_string(end)]))


# --- plamo3 -----------------------------------------------------------------------------------------

_PLAMO3_REQUESTS = ("<|plamo:begin_tool_requests:plamo|>", "<|plamo:end_tool_requests:plamo|>")
_PLAMO3_REQUEST = ("<|plamo:begin_tool_request:plamo|>", "<|plamo:end_tool_request:plamo|>")
_PLAMO3_NAME = ("<|plamo:begin_tool_name:plamo|>", "<|plamo:end_tool_name:plamo|>")
_PLAMO3_ARGUMENTS = (
    "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>",
    "<|plamo:end_tool_arguments:plamo|>",
)
_PLAMO3_EOT = "<|plamo:tag|>"


def _plamo3(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
    del builtin_tools
    requests = [
        f.tag(
            _PLAMO3_REQUEST[0] + _PLAMO3_NAME[0] + tool.name + _PLAMO3_NAME[1] + _PLAMO3_ARGUMENTS[0],
            f.json_schema(function_parameters(tool)),
            _PLAMO3_ARGUMENTS[1] + _PLAMO3_REQUEST[1],
        )
        for tool in tools
    ]
    block = f.tag(
        _PLAMO3_REQUESTS[0],
        f.tags_with_separator(requests, "", at_least_one=True, stop_after_first=choice == "forced"),
        [_PLAMO3_REQUESTS[1], _PLAMO3_REQUESTS[1] + _PLAMO3_EOT],
    )
    if choice == "auto":
        return f.structural_tag(f.triggered_tags([_PLAMO3_REQUESTS[0]], [block]))
    return f.structural_tag(block)


# --- kimi_k3 (XTML channels) ------------------------------------------------------------------------

_K3_OPEN, _K3_CLOSE, _K3_SEP = "<|open|>", "<|close|>", "<|sep|>"
_K3_END_OF_MSG = "<|end_of_msg|>"
_K3_XTML_TYPE = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "object",
    "array": "array",
}
_K3_STRING_ATOM = r"(?:[^<]|<[^|])"


def _k3_open(channel: str) -> str:
    return f"{_K3_OPEN}{channel}{_K3_SEP}"


def _k3_close(channel: str) -> str:
    return f"{_K3_CLOSE}{channel}{_K3_SEP}"


def _k3_escape(value: str) -> str:
    return str(value).replace("&", "&amp;").replace('"', "&quot;")


def _k3_bounded_string(prop: dict[str, Any]) -> str | None:
    """`_k3_bounded_string_regex`, its `isinstance(int)` checks (a bool passes) included."""
    max_len = prop.get("maxLength")
    min_len = prop.get("minLength", 0)
    if not isinstance(max_len, int) or max_len < 0 or max_len > 4096:
        return None
    if not isinstance(min_len, int) or min_len < 0 or min_len > max_len:
        min_len = 0
    return _K3_STRING_ATOM + f"{{{min_len},{max_len}}}"


def _k3_argument(key: str, schema: Any, root_defs: dict[str, Any]) -> Node:
    prop: dict[str, Any] = schema if isinstance(schema, dict) else {}
    json_type = prop.get("type")
    xtml_type = _K3_XTML_TYPE.get(json_type) if isinstance(json_type, str) else None
    if xtml_type is None:
        return _k3_any_argument()
    content: Node
    if xtml_type == "string":
        values = prop.get("enum")
        if values is None and isinstance(prop.get("const"), str):
            values = [prop["const"]]
        if (
            isinstance(values, list)
            and values
            and len(values) <= 256
            and all(isinstance(v, str) for v in values)
            and not any("<|" in v for v in values)
        ):
            branches = [f.const_string(v) for v in values]
            content = branches[0] if len(branches) == 1 else f.or_(branches)
        elif (bounded := _k3_bounded_string(prop)) is not None:
            content = f.regex(bounded)
        else:
            content = f.any_text(excludes=[_K3_CLOSE])
    else:
        embedded = prop
        if root_defs:
            embedded = dict(prop)
            for defs_key, defs_value in root_defs.items():
                embedded.setdefault(defs_key, defs_value)
        content = f.json_schema(embedded)
    begin = f'{_K3_OPEN}argument key="{_k3_escape(key)}" type="{xtml_type}"{_K3_SEP}'
    return f.tag(begin, content, _k3_close("argument"))


def _k3_any_argument() -> Node:
    pattern = f.regex(r"[^<]*" + _K3_SEP.replace("|", r"\|"))
    return f.tag(
        _K3_OPEN + "argument ",
        f.sequence([pattern, f.any_text(excludes=[_K3_CLOSE])]),
        _k3_close("argument"),
    )


def _k3_arguments(parameters: dict[str, Any] | bool) -> Node:
    if not isinstance(parameters, dict):
        return f.star(_k3_any_argument())
    props = parameters.get("properties")
    if not isinstance(props, dict) or not props:
        return f.star(_k3_any_argument())
    root_defs = {
        key: parameters[key] for key in ("$defs", "definitions") if isinstance(parameters.get(key), dict)
    }
    tags = [_k3_argument(key, prop, root_defs) for key, prop in props.items()]
    inner = tags[0] if len(tags) == 1 else f.or_(tags)
    required = parameters.get("required")
    return f.plus(inner) if isinstance(required, list) and required else f.star(inner)


def _k3_call(tool: FunctionTool) -> Node:
    content = f.sequence(
        [
            f.regex(r"[0-9]+"),
            f.const_string(f'"{_K3_SEP}'),
            _k3_arguments(function_parameters(tool)),
        ]
    )
    return f.tag(f'{_K3_OPEN}call tool="{_k3_escape(tool.name)}" index="', content, _k3_close("call"))


def _k3_tools_channel(tools: list[FunctionTool]) -> Node:
    calls = f.tags_with_separator([_k3_call(tool) for tool in tools], "", at_least_one=True)
    return f.tag(_k3_open("tools"), calls, _k3_close("tools"))


def _kimi_k3(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
    del builtin_tools
    response = [
        f.optional(f.const_string(_k3_open("response"))),
        f.tag("", f.any_text(excludes=[_K3_OPEN, _K3_CLOSE, _K3_END_OF_MSG]), _k3_close("response")),
    ]
    trailer = f.optional(f.const_string(_k3_close("message")))
    if not tools:
        return f.structural_tag(f.sequence([*response, trailer]))
    if choice == "auto":
        calls = f.optional(_k3_tools_channel(tools))
    elif choice == "forced":
        calls = _k3_tools_channel(tools[:1])  # vLLM: "treat defensively" as the first tool
    else:
        calls = _k3_tools_channel(tools)
    return f.structural_tag(f.sequence([*response, calls, trailer]))


# --- hy_v4 ------------------------------------------------------------------------------------------


def _hy_v4_argument_keys(parameters: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """vLLM's `_hy_v4_argument_keys`, on whatever `properties`/`required` hold (a string is iterated
    by character, as there); the TypeError it raises on other values becomes a ValueError."""
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or []
    try:
        required_set = set(required)
        required_keys = [k for k in properties if k in required_set]
        required_keys += [k for k in required if k not in properties]
        optional_keys = [k for k in properties if k not in required_set]
    except TypeError as e:
        raise ValueError(f"hy_v4: vLLM fails on properties/required of these parameters: {e}") from e
    return required_keys, optional_keys


def _hy_v4(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
    del builtin_tools
    tool_calls = ("<tool_calls>", "</tool_calls>")
    tool_call = ("<tool_call>", "</tool_call>")

    def pair(key: Any) -> Node:
        return f.sequence(
            [
                f.const_string("<arg_key>"),
                f.const_string(_string(key, "hy_v4 argument key")),
                f.const_string("</arg_key>"),
                f.const_string("<arg_value>"),
                f.any_text(),
                f.const_string("</arg_value>"),
            ]
        )

    def call(tool: FunctionTool) -> Node:
        # The raw `parameters`, not get_function_parameters: `strict` does not matter here.
        required, optional = _hy_v4_argument_keys(
            tool.parameters if isinstance(tool.parameters, dict) else {}
        )
        elements = [pair(k) for k in required]
        if optional:
            pairs = [pair(k) for k in optional]
            elements.append(f.star(pairs[0] if len(pairs) == 1 else f.or_(pairs)))
        content = f.sequence(elements) if elements else f.any_text()
        return f.tag(tool_call[0] + tool.name, content, tool_call[1])

    tags = [call(tool) for tool in tools]
    if choice == "auto":
        block = f.tag(tool_calls[0], f.tags_with_separator(tags, "", at_least_one=True), tool_calls[1])
        return f.structural_tag(f.triggered_tags([tool_calls[0]], [block]))
    calls = f.tags_with_separator(tags, "", at_least_one=True, stop_after_first=choice == "forced")
    return f.structural_tag(f.sequence([f.const_string(tool_calls[0]), calls, f.const_string(tool_calls[1])]))


# --- glm_4_7 ----------------------------------------------------------------------------------------

_GLM_VALUE_EXCLUDES = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
]
# xgrammar's glm_4_7 builtin (the all-strict path): free text may start a call with <tool_call>.
_GLM_TEXT_EXCLUDES = [
    "<think>",
    "</think>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
]


def _iterated(value: Any, where: str) -> list[Any]:
    """`for v in value` on a JSON value: a list's items, a string's characters, an object's keys;
    anything else raises (TypeError in vLLM)."""
    if isinstance(value, (list, str, dict)):
        return list(value)
    raise ValueError(f"{where}: {value!r} is not iterable (vLLM fails)")


def _glm_enum(prop: dict[str, Any]) -> Node:
    values = [
        f.const_string(v if isinstance(v, str) else json.dumps(v))
        for v in _iterated(prop["enum"], "glm_4_7 enum")
    ]
    return values[0] if len(values) == 1 else f.or_(values)


def _glm_value(prop: Any) -> Node:
    """`_glm_4_7_value_format` (before 0.34.0): every type but string pinned as JSON. A property that
    is not an object fails there (`in` or `.get`); an empty enum or type list is an empty `or`."""
    if not isinstance(prop, dict):
        raise ValueError(f"glm_4_7: property schema {prop!r} is not an object (vLLM fails)")
    if "enum" in prop:
        return _glm_enum(prop)
    prop_type = prop.get("type")
    if isinstance(prop_type, list):
        formats = [_glm_value({"type": t}) for t in prop_type if t != "string"]
        if "string" in prop_type:
            formats.append(f.any_text(excludes=_GLM_VALUE_EXCLUDES))
        return formats[0] if len(formats) == 1 else f.or_(formats)
    if prop_type in (None, "string"):
        return f.any_text(excludes=_GLM_VALUE_EXCLUDES)
    return f.json_schema({"type": prop_type})


_GLM_JSON_SCALAR_TYPES = frozenset({"integer", "number", "boolean", "null"})


def _glm_scalar_value(prop: Any) -> Node:
    """`_glm_4_7_value_format` from 0.34.0: pinned as JSON only when every type is a scalar one, else
    free text. vLLM tests each type's membership in a frozenset left to right and stops at the first
    miss, so an object or list type reached first raises there (TypeError: unhashable)."""
    if not isinstance(prop, dict):
        raise ValueError(f"glm_4_7: property schema {prop!r} is not an object (vLLM fails)")
    if "enum" in prop:
        return _glm_enum(prop)
    prop_type = prop.get("type")
    types = prop_type if isinstance(prop_type, list) else [prop_type]
    for t in types:
        if isinstance(t, (dict, list)):
            raise ValueError(f"glm_4_7: type {t!r} is unhashable (vLLM fails)")
        if t not in _GLM_JSON_SCALAR_TYPES:
            return f.any_text(excludes=_GLM_VALUE_EXCLUDES)
    if not types:
        return f.any_text(excludes=_GLM_VALUE_EXCLUDES)
    formats = [f.json_schema({"type": t}) for t in types]
    return formats[0] if len(formats) == 1 else f.or_(formats)


GLM_VALUES: dict[str, Callable[[Any], Node]] = {
    "unless_string": _glm_value,
    "scalars_only": _glm_scalar_value,
}


def _glm_plain_properties(params: dict[str, Any]) -> dict[str, Any] | None:
    properties = params.get("properties")
    if (
        not isinstance(properties, dict)
        or not properties
        or params.get("additionalProperties") is True
        or any(key in params for key in ("$ref", "allOf", "anyOf", "oneOf", "patternProperties"))
    ):
        return None
    return properties


def _glm_tag(tool: FunctionTool, value: Callable[[Any], Node]) -> Node:
    """A non-strict tool: argument keys and basic value types pinned (`_glm_4_7_tool_tag`)."""
    begin = f"<tool_call>{tool.name}"
    properties = _glm_plain_properties(tool.parameters or {})
    if properties is None:
        return f.tag(begin, f.json_schema(True, style="glm_xml"), "</tool_call>")
    pairs = [
        f.sequence(
            [
                f.const_string(f"<arg_key>{key}</arg_key><arg_value>"),
                value(prop),
                f.const_string("</arg_value>"),
            ]
        )
        for key, prop in properties.items()
    ]
    return f.tag(begin, f.star(pairs[0] if len(pairs) == 1 else f.or_(pairs)), "</tool_call>")


def _glm_strict_tag(tool: FunctionTool) -> Node:
    schema = tool.parameters if tool.parameters is not None else True
    return f.tag(f"<tool_call>{tool.name}", f.json_schema(schema, style="glm_xml"), "</tool_call>")


def _glm_all_strict(tools: list[FunctionTool], choice: Choice) -> Node:
    """xgrammar 0.2.8's own glm_4_7 builtin, which vLLM calls for an all-strict tool set (reasoning
    disabled, the defaults otherwise). The tools are sent again with strict true, so the arguments are
    each tool's parameters (True when it has none)."""
    if choice == "forced":
        return f.structural_tag(_glm_strict_tag(tools[0]))
    tags = [_glm_strict_tag(tool) for tool in tools]
    return f.structural_tag(
        f.triggered_tags(
            ["<tool_call>"], tags, at_least_one=choice == "required", excludes=_GLM_TEXT_EXCLUDES
        )
    )


def glm_4_7(values: str) -> Builder:
    """The glm_4_7 builder of a release whose non-strict values are pinned by GLM_VALUES[values]."""
    value = GLM_VALUES[values]

    def build(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
        del builtin_tools
        if tools and all(tool.strict for tool in tools):
            return _glm_all_strict(tools, choice)
        tags = [_glm_strict_tag(tool) if tool.strict else _glm_tag(tool, value) for tool in tools]
        if choice == "auto":
            excludes = [e for e in _GLM_VALUE_EXCLUDES if e != "<tool_call>"]
            return f.structural_tag(f.triggered_tags(["<tool_call>"], tags, excludes=excludes))
        return f.structural_tag(
            f.tags_with_separator(tags, "", at_least_one=True, stop_after_first=choice == "forced")
        )

    return build


BUILDERS: dict[str, Builder] = {
    "hermes": _hermes_style("<tool_call>", "</tool_call>"),
    "longcat": _hermes_style("<longcat_tool_call>", "</longcat_tool_call>"),
    "minimax": _minimax,
    "plamo3": _plamo3,
    "kimi_k3": _kimi_k3,
    "hy_v4": _hy_v4,
    "glm_4_7": glm_4_7("unless_string"),  # before 0.34.0; builders() gives each release its own
}
