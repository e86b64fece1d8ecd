# ruff: noqa: RUF001, RUF003  (the DeepSeek tokens are spelled with fullwidth bars)
"""xgrammar 0.2.8's builtin structural-tag models, as the dicts `StructuralTag.model_dump()` gives.

vLLM 0.32.0 asks `xgrammar.get_model_structural_tag(model, tools, tool_choice, reasoning=False)` for
a parser's tag and compiles `json.dumps(tag.model_dump())`. Each builder here mirrors one model of
xgrammar/builtin_structural_tag.py on that path only: reasoning "disabled" (no reasoning prefix, the
tag's format is the tool part alone), any_order False, special tokens excluded from free text, no
whitespace limit, parallel calls on (`formats.limit_to_single_call` turns them off). Inputs are
`normalize_tool_choice`'s; a builder raises ValueError where the xgrammar function raises (where it
only asserts, for "required" with no function tool, ValueError too).
tests/integration/test_tooltags_xgrammar.py compares every string with xgrammar's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from exporter.engines.grammars import tag_formats as f
from exporter.engines.grammars.tag_formats import Node
from exporter.engines.grammars.tag_tools import (
    Builder,
    BuiltinTool,
    Choice,
    FunctionTool,
    function_parameters,
)

THINK = ["<think>", "</think>"]
FORCED_NO_TOOL = "Forced tool choice must resolve to exactly one tool."
REQUIRED_NO_TOOL = "The 'tools' list is empty, which is not allowed when 'tool_choice' is 'required'."

# One call's tag: begin, content, end (kept apart so a section can fold its own begin/end in).
Call = tuple[str, Node, str]


def _arguments(tool: FunctionTool, style: str = "json") -> Node:
    return f.json_schema(function_parameters(tool), style=style)


def _forced(tools: list[FunctionTool]) -> FunctionTool:
    if not tools:
        raise ValueError(FORCED_NO_TOOL)
    return tools[0]


def _required(tags: list[Node], message: str = REQUIRED_NO_TOOL) -> list[Node]:
    if not tags:  # xgrammar: `assert len(tags) > 0` (mimo: this ValueError)
        raise ValueError(message)
    return tags


def _flat(call: Callable[[FunctionTool], Call], trigger: str) -> Builder:
    """Calls anywhere in free text, each opened by `trigger` (llama, qwen_3, qwen_3_5)."""

    def build(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
        if choice == "forced":
            return f.structural_tag(f.tag(*call(_forced(tools))))
        tags = [f.tag(*call(tool)) for tool in tools]
        if choice == "required":
            return f.structural_tag(
                f.triggered_tags([trigger], _required(tags), at_least_one=True, excludes=THINK)
            )
        if not tags:
            return f.structural_tag(f.any_text(THINK))
        return f.structural_tag(f.triggered_tags([trigger], tags, excludes=THINK))

    return build


@dataclass(frozen=True)
class _Section:
    """Calls inside one section `begin call (separator call)* end`, opened in free text by `trigger`
    (kimi, the deepseek models).

    `folded`: forced is one tag, the section's begin/end folded into the call's, and required the
    section as a tag (deepseek_r1, deepseek_v3_1); otherwise both are a sequence of const strings
    around the call(s), the first `lead + begin` (kimi, deepseek_v3_2 and v4)."""

    call: Callable[[FunctionTool], Call]
    begin: str
    end: str
    trigger: str
    separator: str = ""
    folded: bool = False
    lead: str = ""
    auto_excludes: tuple[str, ...] = tuple(THINK)  # around the section (auto)
    text_excludes: tuple[str, ...] = tuple(THINK)  # auto with no tools

    def __call__(self, tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
        if choice == "forced":
            begin, content, end = self.call(_forced(tools))
            if self.folded:
                return f.structural_tag(f.tag(self.begin + begin, content, end + self.end))
            return f.structural_tag(self._wrapped(f.tag(begin, content, end)))
        tags = [f.tag(*self.call(tool)) for tool in tools]
        if choice == "required":
            calls = f.tags_with_separator(_required(tags), self.separator, at_least_one=True)
            if self.folded:
                return f.structural_tag(f.tag(self.begin, calls, self.end))
            return f.structural_tag(self._wrapped(calls))
        if not tags:
            return f.structural_tag(f.any_text(list(self.text_excludes)))
        section = f.tag(self.begin, f.tags_with_separator(tags, self.separator, at_least_one=True), self.end)
        return f.structural_tag(
            f.triggered_tags([self.trigger], [section], excludes=list(self.auto_excludes))
        )

    def _wrapped(self, content: Node) -> Node:
        return f.sequence([f.const_string(self.lead + self.begin), content, f.const_string(self.end)])


# ---- llama: {"name": "NAME", "parameters": {...}} ----


def _llama_call(tool: FunctionTool) -> Call:
    return f'{{"name": "{tool.name}", "parameters": ', _arguments(tool), "}"


# ---- qwen_3: <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call> ----


def _qwen_3_call(tool: FunctionTool) -> Call:
    return f'<tool_call>\n{{"name": "{tool.name}", "arguments": ', _arguments(tool), "}\n</tool_call>"


# ---- qwen_3_5 / qwen_3_coder: <tool_call>\n<function=NAME>\n<parameter=...>\n</function>\n</tool_call> ----


def _qwen_xml_call(tool: FunctionTool) -> Call:
    return (
        f"<tool_call>\n<function={tool.name}>\n",
        _arguments(tool, "qwen_xml"),
        "\n</function>\n</tool_call>",
    )


# ---- kimi: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
# <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|> ----

KIMI_CALL_BEGIN = "<|tool_call_begin|>"
KIMI_SECTION_BEGIN = "<|tool_calls_section_begin|>"


def _kimi_call(tool: FunctionTool) -> Call:
    content = f.sequence([f.regex(r"\d+"), f.const_string("<|tool_call_argument_begin|>"), _arguments(tool)])
    return f"{KIMI_CALL_BEGIN}functions.{tool.name}:", content, "<|tool_call_end|>"


# ---- deepseek_r1 / deepseek_v3_1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>...<｜tool▁calls▁end｜> ----

DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
DS_CALLS_END = "<｜tool▁calls▁end｜>"
DS_CALL_BEGIN = "<｜tool▁call▁begin｜>"
DS_CALL_END = "<｜tool▁call▁end｜>"
DS_SEP = "<｜tool▁sep｜>"


def _deepseek_r1_call(tool: FunctionTool) -> Call:
    return f"{DS_CALL_BEGIN}function{DS_SEP}{tool.name}\n```json\n", _arguments(tool), f"\n```{DS_CALL_END}"


def _deepseek_v3_1_call(tool: FunctionTool) -> Call:
    return f"{DS_CALL_BEGIN}{tool.name}{DS_SEP}", _arguments(tool), DS_CALL_END


# ---- deepseek_v3_2 / v4 / v4_1 (DSML): <｜DSML｜function_calls>\n<｜DSML｜invoke name="NAME">\n
# ...</｜DSML｜invoke>\n</｜DSML｜function_calls>; v4 names the section tool_calls, v4_1 " calls"
# and " invoke" ----


def _dsml(calls: str, invoke: str, style: str, empty_excludes_trigger: bool = False) -> _Section:
    def call(tool: FunctionTool) -> Call:
        return f'<｜DSML｜{invoke} name="{tool.name}">\n', _arguments(tool, style), f"</｜DSML｜{invoke}>\n"

    trigger = f"<｜DSML｜{calls}>"
    return _Section(
        call,
        begin=trigger + "\n",
        end=f"</｜DSML｜{calls}>",
        trigger=trigger,
        lead="\n\n",
        # v4_1: with no tools, a calls block must not slip through as text.
        text_excludes=(*THINK, trigger) if empty_excludes_trigger else tuple(THINK),
    )


# ---- mimo: <tool_call><function=NAME><parameter=...></function></tool_call> ----

MIMO_START = "<tool_call>"
MIMO_TEXT_EXCLUDES = ["<think>", "</think>", "</tool_call>", "<function="]


def _mimo(tools: list[FunctionTool], builtin_tools: list[BuiltinTool], choice: Choice) -> Node:
    if builtin_tools:
        raise ValueError("MiMo does not support builtin tools.")
    tags = [
        f.tag(f"{MIMO_START}<function={tool.name}>", _arguments(tool, "qwen_xml"), "</function></tool_call>")
        for tool in tools
    ]
    if choice == "forced":
        if not tags:
            raise ValueError(FORCED_NO_TOOL)
        return f.structural_tag(tags[0])
    if choice == "required":
        _required(tags, "Required tool choice needs at least one function tool.")
    if not tags:
        return f.structural_tag(f.any_text([MIMO_START, *MIMO_TEXT_EXCLUDES]))
    return f.structural_tag(
        f.triggered_tags([MIMO_START], tags, at_least_one=choice == "required", excludes=MIMO_TEXT_EXCLUDES)
    )


_qwen_3_5 = _flat(_qwen_xml_call, "<tool_call>\n<function=")

BUILDERS: dict[str, Builder] = {
    "llama": _flat(_llama_call, '{"name": '),
    "kimi": _Section(
        _kimi_call,
        begin=KIMI_SECTION_BEGIN,
        end="<|tool_calls_section_end|>",
        trigger=KIMI_SECTION_BEGIN,
        auto_excludes=(*THINK, KIMI_CALL_BEGIN),
    ),
    "deepseek_r1": _Section(
        _deepseek_r1_call,
        begin=DS_CALLS_BEGIN,
        end=DS_CALLS_END,
        trigger=DS_CALLS_BEGIN,
        separator="\n",
        folded=True,
    ),
    "deepseek_v3_1": _Section(
        _deepseek_v3_1_call, begin=DS_CALLS_BEGIN, end=DS_CALLS_END, trigger=DS_CALLS_BEGIN, folded=True
    ),
    "qwen_3_5": _qwen_3_5,
    "qwen_3_coder": _qwen_3_5,
    "mimo": _mimo,
    "qwen_3": _flat(_qwen_3_call, "<tool_call>"),
    "deepseek_v3_2": _dsml("function_calls", "invoke", "deepseek_xml"),
    "deepseek_v4": _dsml("tool_calls", "invoke", "deepseek_xml"),
    "deepseek_v4_1": _dsml(" calls", " invoke", "deepseek_v4_1_xml", empty_excludes_trigger=True),
}
