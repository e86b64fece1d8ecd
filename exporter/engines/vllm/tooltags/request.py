"""A request's tool-call structural tag, as vLLM's `Parser._apply_structural_tag` assembles it.

vllm/parser/abstract_parser.py (0.32.0 and 0.33.0): the tools the model may call
(`get_structural_tag_tools`; a Responses custom tool is a function with its string shim by then),
each one's `strict` pinned from the server's level (`resolve_tool_strictness`: strict when the tool
says so or from `--tool-strict-level parameter`), the choice simplified as xgrammar's
`normalize_tool_choice` does, the model's builder, then `limit_to_single_tool_call` for
`parallel_tool_calls: false` and, for `auto` beside the request's own structured outputs, an
`or` of the tool calls (built as for `required`) and that format (`structured_outputs_to_format`).
The string is `json.dumps` of the dumped tag with the default separators.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.engines.grammars import tag_formats as formats
from exporter.engines.grammars.tag_formats import Node
from exporter.engines.grammars.tag_tools import Choice, FunctionTool
from exporter.engines.vllm.tooltags import builders

PARAMETER_LEVEL = 2  # ToolStrictLevel.PARAMETER


@dataclass(frozen=True, slots=True)
class TagTool:
    """A function tool as the request sent it (a Responses custom tool as its string shim)."""

    name: str
    parameters: dict[str, Any] | None
    strict: bool
    description: str | None = None


class NotDerived(Exception):
    """The request's own format cannot be put beside the tags here (a grammar or a structural tag of
    its own): vLLM's string is not rebuilt."""


def own_format(params: dict[str, Any]) -> Node | None:
    """structured_outputs_to_format over the request's effective StructuredOutputsParams fields.
    ValueError where vLLM raises; NotDerived for a grammar or a structural tag."""
    if params.get("json_object"):
        return formats.json_schema({"type": "object"})
    if params.get("json") is not None:
        schema = params["json"]
        if isinstance(schema, str):
            schema = json.loads(schema)
        return formats.json_schema(schema)
    if params.get("regex") is not None:
        return formats.regex(params["regex"])
    if params.get("choice") is not None:
        return formats.or_([formats.const_string(c) for c in params["choice"]])
    if params.get("grammar") is not None or params.get("structural_tag") is not None:
        raise NotDerived("a grammar or structural tag of the request's own")
    return None


def tag_text(
    model: str,
    tools: Sequence[TagTool],
    choice: str,
    named: str,
    level: int,
    single_call: bool,
    output: Node | None = None,
    glm_values: str = "unless_string",
) -> str:
    """The string vLLM compiles for a request whose tag applies (the caller decided that), with
    `level` the strict level after `parallel_tool_calls: false` raised it. ValueError where vLLM's
    builders raise (a forced choice that is not exactly one tool, required with none). `glm_values`: the
    release's (versions.py)."""
    build = builders(glm_values).get(model)
    if build is None:
        raise ValueError(f"Unknown format type: {model}")
    tag_choice = "required" if output is not None else choice
    function_tools = [
        FunctionTool(
            t.name,
            t.parameters,
            level >= PARAMETER_LEVEL or t.strict,
            t.description,
        )
        for t in tools
    ]
    simplified: Choice
    if tag_choice == "named":
        function_tools = [t for t in function_tools if t.name == named]
        if not function_tools:
            raise ValueError(f"The tool with name '{named}' is not found in the tools list.")
        simplified = "forced"
        if len(function_tools) != 1:
            raise ValueError("Forced tool choice must resolve to exactly one tool.")
    elif tag_choice == "required":
        if not function_tools:
            raise ValueError(
                "The 'tools' list is empty, which is not allowed when 'tool_choice' is 'required'."
            )
        simplified = "required"
    else:
        simplified = "auto"
    tag = build(function_tools, [], simplified)
    if single_call:
        formats.limit_to_single_call(tag["format"])
    if output is not None:
        tag = formats.structural_tag(formats.or_([tag["format"], output]))
    return json.dumps(tag)
