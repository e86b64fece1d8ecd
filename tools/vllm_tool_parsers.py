"""vLLM's registry of tool parsers, as `exporter.engines.vllm.toolcalls` tabulates it.

Run with the vLLM virtualenv's Python (for 0.33.0, its files first on PYTHONPATH):
`python tools/vllm_tool_parsers.py` prints one JSON line, `{"vllm": VERSION, "parsers": {NAME:
[structural_tag_model, supports_required_and_named, composer, default_tool_strict_level]},
"own_get_structural_tag": [NAME...]}`; `--python` prints the same table as
the Python literal the module holds, to paste when vLLM changes.

Each name registered with `ToolParserManager` is loaded and its class attributes read after import,
so `ToolParser.__init_subclass__` has already turned `supports_required_and_named` off for a class
with a structural-tag model (the default `VLLM_ENFORCE_STRICT_TOOL_CALLING=1`; the script clears the
variable so the table is the default's). `composer` is the module of the `Parser` class that
`ParserManager.get_parser` composes around the tool parser (its dynamic subclass, made in
parser_manager, skipped): `abstract_parser` is the plain `DelegatingParser`, whose `adjust_request`
hands the request to the tool parser; `response_template`, `cohere_command`, `kimi_k3`, `beam` have
their own. A composer whose optional dependency is missing (Cohere's) is named from the module that
failed to import. `default_tool_strict_level` is the parser's own floor for structural tags (an int of
vLLM's ToolStrictLevel, or None where the version leaves it unset). `own_get_structural_tag` names the
parsers that override `get_structural_tag` (read by hand: exporter.engines.vllm.toolcalls.NEVER_AUTO).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

os.environ.pop("VLLM_ENFORCE_STRICT_TOOL_CALLING", None)
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

PARSER_PACKAGE = "vllm.parser."


def composer_of(name: str) -> str:
    """The module (under vllm.parser) of the Parser class composed around tool parser `name`."""
    from vllm.parser.parser_manager import ParserManager

    try:
        parser_cls = ParserManager.get_parser(tool_parser_name=name, enable_auto_tools=True)
    except ImportError as err:
        modules = [
            frame.f_globals.get("__name__", "")
            for frame, _ in traceback.walk_tb(err.__traceback__)
            if str(frame.f_globals.get("__name__", "")).startswith(PARSER_PACKAGE)
        ]
        modules = [m for m in modules if m != PARSER_PACKAGE + "parser_manager"]
        if not modules:
            raise
        return str(modules[-1])[len(PARSER_PACKAGE) :]
    assert parser_cls is not None
    for cls in parser_cls.__mro__:
        if cls.__module__.startswith(PARSER_PACKAGE) and cls.__module__ != PARSER_PACKAGE + "parser_manager":
            return str(cls.__module__)[len(PARSER_PACKAGE) :]
    raise AssertionError(f"no vllm.parser class in the parser composed for {name}")


def table() -> dict[str, Any]:
    import vllm
    from vllm.tool_parsers import ToolParserManager
    from vllm.tool_parsers.abstract_tool_parser import ToolParser

    parsers: dict[str, list[Any]] = {}
    overriding = []
    for name in ToolParserManager.list_registered():
        cls = ToolParserManager.get_tool_parser(name)
        if cls.get_structural_tag is not ToolParser.get_structural_tag:
            overriding.append(name)
        level = cls.default_tool_strict_level
        parsers[name] = [
            cls.structural_tag_model,
            bool(cls.supports_required_and_named),
            composer_of(name),
            None if level is None else int(level),
        ]
    return {"vllm": vllm.__version__, "parsers": parsers, "own_get_structural_tag": sorted(overriding)}


def python_literal(result: dict[str, Any]) -> str:
    lines = [f"    # vLLM {result['vllm']}: tools/vllm_tool_parsers.py --python"]
    for name, (model, supports, composer, level) in result["parsers"].items():
        lines.append(f"    {name!r}: ({model!r}, {supports!r}, {composer!r}, {level!r}),")
    return "\n".join(lines)


def main() -> None:
    result = table()
    if "--python" in sys.argv[1:]:
        print(python_literal(result))
    else:
        print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
