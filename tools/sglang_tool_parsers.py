"""SGLang's registry of tool-call parsers, as `exporter.engines.sglang.toolcalls` tabulates it.

Run with SGLang's files (and the xgrammar it pins) on PYTHONPATH:
    PYTHONPATH=.cache/sglang:.cache/engines/xgrammar-0.2.7 .venv/bin/python tools/sglang_tool_parsers.py
prints one JSON line, `{"sglang": VERSION, "parsers": {NAME: [detector, family, xgrammar_model,
legacy_begin, legacy_end, legacy_trigger, auto_tag]}, "auto_tags": {NAME: TEXT}}`; `--python` prints
the table as the Python literal the module holds, to paste when SGLang changes.

Each name of `FunctionCallParser.ToolCallParserEnum` is made as serving_chat makes it (no tools, no
tokenizer where the detector takes none) and sorted into the family `get_structure_constraint` takes
it through (sglang/srt/function_call/function_call_parser.py):

- "response_template": a ResponseTemplateToolDetector, whose template makes the tags (beam's own,
  or the model's `response_template`);
- "glm47": the name serving_chat special-cases (`tool_call_parser == "glm47"`): the full-assistant
  EBNF unless a tool is strict, then the detector's structural tag;
- "required_parser": a detector with its own `get_required_tool_parser` (its own JSON schema);
- "native_parse": `parses_required_natively()`: required and named calls are parsed, not constrained;
- "native_tag": a model-native structural tag (`get_structural_tag_name()`, xgrammar's builtin, or a
  `get_structural_tag` of its own);
- "legacy_tag": `supports_structural_tag()` without a native tag: `get_legacy_structural_tag` from
  `structure_info()`, whose begin and trigger are given with "\\x00" where the tool's name goes;
- "json": none of those: `get_json_schema_constraint` for required and named choices.

`auto_tag`: the detector overrides `get_auto_tool_call_structural_tag` (a tag for `auto` even without
strict tools); "auto_tags" holds the text of those that ignore the tools (the same tag every time).
"""

from __future__ import annotations

import json
import sys
from typing import Any

NAME = "\x00"


def row(name: str, cls: type) -> list[Any]:
    from sglang.srt.function_call.base_format_detector import BaseFormatDetector
    from sglang.srt.function_call.glm47_moe_detector import _glm47_native_structural_tag_available
    from sglang.srt.parser.response_template import ResponseTemplateToolDetector

    auto_tag = (
        cls.get_auto_tool_call_structural_tag is not BaseFormatDetector.get_auto_tool_call_structural_tag
    )
    if issubclass(cls, ResponseTemplateToolDetector):
        return [cls.__name__, "response_template", None, None, None, None, auto_tag]
    detector = cls()
    model = detector.get_structural_tag_name()
    if name == "glm47":
        assert _glm47_native_structural_tag_available(), "xgrammar without glm_4_7"
        return [cls.__name__, "glm47", model, None, None, None, auto_tag]
    if cls.get_required_tool_parser is not BaseFormatDetector.get_required_tool_parser:
        family = "required_parser"
    elif detector.parses_required_natively():
        family = "native_parse"
    elif detector.supports_structural_tag() and (
        model is not None or cls.get_structural_tag is not BaseFormatDetector.get_structural_tag
    ):
        family = "native_tag"
    elif detector.supports_structural_tag():
        info = detector.structure_info()(NAME)
        return [cls.__name__, "legacy_tag", model, info.begin, info.end, info.trigger, auto_tag]
    else:
        family = "json"
    return [cls.__name__, family, model, None, None, None, auto_tag]


def auto_tag_text(name: str, cls: type) -> str | None:
    """The auto tag's text when it is the same whatever the tools (None: it depends on them)."""
    from sglang.srt.entrypoints.openai.protocol import Tool

    detector = cls()
    tools = [Tool.model_validate({"type": "function", "function": {"name": n}}) for n in ("a", "b")]
    tags = [detector.get_auto_tool_call_structural_tag(tools=t) for t in ([], tools[:1], tools)]
    texts = {json.dumps(None if tag is None else tag.model_dump(by_alias=True)) for tag in tags}
    return texts.pop() if len(texts) == 1 else None


def table() -> dict[str, Any]:
    import sglang
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    parsers = {name: row(name, cls) for name, cls in FunctionCallParser.ToolCallParserEnum.items()}
    auto_tags = {}
    for name, cls in FunctionCallParser.ToolCallParserEnum.items():
        if parsers[name][-1] and (text := auto_tag_text(name, cls)) is not None:
            auto_tags[name] = text
    return {"sglang": sglang.__version__, "parsers": parsers, "auto_tags": auto_tags}


def python_literal(result: dict[str, Any]) -> str:
    """The two tables as the module spells them: ASCII escapes, `# noqa: E501` past 110 columns."""

    def line(text: str) -> str:
        return text + "  # noqa: E501" if len(text) > 110 else text

    lines = [f"    # SGLang {result['sglang']}: tools/sglang_tool_parsers.py --python"]
    for name, entry in sorted(result["parsers"].items()):
        lines.append(line(f"    {name!a}: ({', '.join(ascii(v) for v in entry)}),"))
    lines.append("    # auto tags")
    for name, text in sorted(result["auto_tags"].items()):
        lines.append(line(f"    {name!a}: {text!a},"))
    return "\n".join(lines)


def main() -> None:
    result = table()
    if "--python" in sys.argv[1:]:
        print(python_literal(result))
    else:
        print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
