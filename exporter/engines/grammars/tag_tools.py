"""The tools a structural-tag builder is given, as xgrammar's `normalize_tool_choice` leaves them.

vLLM hands each builder (xgrammar/builtin_structural_tag.py, vllm/tool_parsers/
structural_tag_registry.py) the request's function tools after `normalize_tool_choice`, the
builtin tools (none in vLLM 0.32.0/0.33.0: no vLLM builder asks for them) and the choice simplified
to "auto", "required" or "forced". Builders read only the fields kept here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from exporter.engines.grammars.tag_formats import Node

Choice = Literal["auto", "required", "forced"]


@dataclass(frozen=True)
class FunctionTool:
    """xgrammar's `FunctionDefinition`: `parameters` None when the tool sent none (or null)."""

    name: str
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    description: str | None = None


@dataclass(frozen=True)
class BuiltinTool:
    """xgrammar's `BuiltinToolParam`: a provider tool called by `name`, else by `type`."""

    type: str
    name: str | None = None
    parameters: dict[str, Any] | None = None


# builder(function_tools, builtin_tools, choice) -> the StructuralTag dict (formats.structural_tag).
# vLLM always asks for reasoning off ("disabled"), one call list per parallel setting left to
# formats.limit_to_single_call, any_order False, special tokens excluded, no whitespace limit.
Builder = Callable[[list[FunctionTool], list[BuiltinTool], Choice], Node]


def function_parameters(tool: FunctionTool | BuiltinTool) -> dict[str, Any] | bool:
    """The schema a tool's arguments are held to: `True` (any JSON) for a non-strict function or
    one without parameters (xgrammar `_get_function_parameters`; vLLM's `get_function_parameters`
    is the same rule)."""
    if isinstance(tool, FunctionTool) and tool.strict is False:
        return True
    if tool.parameters is None:
        return True
    return tool.parameters


def builtin_name(tool: BuiltinTool) -> str:
    return tool.name or tool.type
