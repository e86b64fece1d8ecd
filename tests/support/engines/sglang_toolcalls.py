"""SGLang's own tool-call constraint for each request of a case file: what
`exporter.engines.sglang.toolcalls` derives.

Usage (the test virtualenv's Python; SGLang's wheel and the xgrammar it pins first on PYTHONPATH):
    python tests/support/engines/sglang_toolcalls.py CASES_JSON
CASES_JSON: {"cases": [{"id", "body", "strict_level"?}], "parsers": {CASE_ID_PREFIX: [PARSER...]}}:
each body is a chat-completions body (`messages` defaults to one user message); each case runs, for
each parser named for its id prefix ("" is a server without --tool-call-parser), through the code
OpenAIServingChat runs, taken from sglang/srt/entrypoints/openai/serving_chat.py itself: its methods
`_validate_request`, `_process_messages` (with `_effective_tools`, `_takes_turn_grammar`...) are
compiled from the file's source (the module imports FastAPI and the multimodal stack, absent here)
into a class whose instance stands for a server with that --tool-call-parser, no reasoning parser, no
chat-encoding spec, the xgrammar backend and a Hugging Face-like stand-in tokenizer. Then
`ChatCompletionRequest.to_sampling_params` with the constraint, as `_convert_to_internal_request`
does; the string under `json_schema` / `structural_tag` / `ebnf` is the grammar cache key's. The body
gets `input_ids` so that no chat template is rendered (serving_chat skips it for such requests and
derives the constraint all the same). A case's `strict_level` is SGLANG_TOOL_STRICT_LEVEL.
Each distinct tool `parameters` schema goes through jsonschema's check_schema once (CheckedSchemas).

Outcomes: {"outcome": "json"|"structural_tag"|"ebnf", "text"} when the tool-call constraint reaches
the sampling params; "none" when there is none, with "dropped": true when the request's own
response_format/regex/ebnf took its place; "error" (a 400: pydantic, `_validate_request`, a
ValueError) or "error500" (another exception) with the message; "init_error" when the parser cannot
be made here. Prints one JSON line: {"sglang": VERSION, "results": {case id: {PARSER: outcome}}}, and
with `"table": true` in the case file, "table": what tools/sglang_tool_parsers.py prints.
"""

from __future__ import annotations

import ast
import json
import os
import pickle
import sys
import types
from pathlib import Path
from typing import Any

os.environ.pop("SGLANG_TOOL_STRICT_LEVEL", None)

import jsonschema
import sglang
import sglang.srt.entrypoints.openai.protocol as protocol
import sglang.srt.function_call.function_call_parser as function_call_parser
import sglang.srt.function_call.utils as function_call_utils
import sglang.srt.parser.reasoning_parser as reasoning_parser
import sglang.srt.parser.response_template as response_template
from pydantic import ValidationError
from sglang.srt.environ import envs

SGLANG_FILES = Path(sglang.__file__).parent / "srt"
MESSAGES = [{"role": "user", "content": "hi"}]
METHODS = (
    "_effective_tools", "_validate_request", "_validate_media_content", "_process_messages",
    "_patch_reasoning_skip_special_tokens", "_get_reasoning_from_request", "_takes_turn_grammar",
    "_template_turn_grammar", "_requires_response_template_detokenization",
    "_record_template_tool_call_grammar", "_message_start_tool_call_constraint",
)  # fmt: skip


class Vocab(dict[str, int]):
    """Every token a detector looks up exists, with an id of its own."""

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
    chat_template = None
    init_kwargs: dict[str, Any] = {}

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


def hunyuan_reasoning() -> dict[str, Any]:
    """sglang/srt/parser/hunyuan_reasoning.py's functions (its module imports the model configs)."""
    source = (SGLANG_FILES / "parser" / "hunyuan_reasoning.py").read_text(encoding="utf-8")
    source = source.replace("from sglang.srt.parser.template_detection import ReasoningToggleConfig\n", "")
    namespace: dict[str, Any] = {"ReasoningToggleConfig": object}
    exec(compile(source, "hunyuan_reasoning.py", "exec"), namespace)
    return namespace


class CheckedSchemas:
    """`Draft202012Validator` as `_validate_request` calls it (`check_schema(parameters)`), each distinct
    schema checked once: the generated tool sets and JSONSchemaBench's variants send the same few
    parameter schemas thousands of times, and check_schema is a pure function of the schema. The key is
    the schema's JSON text as given (key order, and `1`, `1.0`, `true` apart); what it raised (a
    SchemaError, a RecursionError, a 500's exception) is raised again for the same text."""

    checked: dict[str, BaseException | None] = {}

    @classmethod
    def check_schema(cls, schema: Any) -> None:
        try:
            key = json.dumps(schema)
        except (TypeError, ValueError, RecursionError):  # not JSON text: checked every time
            jsonschema.Draft202012Validator.check_schema(schema)
            return
        if key not in cls.checked:
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
                cls.checked[key] = None
            except Exception as err:
                cls.checked[key] = err
        if (err := cls.checked[key]) is not None:
            raise err.with_traceback(None)


def serving_chat_class() -> type:
    """OpenAIServingChat's methods that decide the tool-call constraint, compiled from its source."""
    path = SGLANG_FILES / "entrypoints" / "openai" / "serving_chat.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    chat = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OpenAIServingChat")
    methods = [n for n in chat.body if isinstance(n, ast.FunctionDef) and n.name in METHODS]
    assert sorted(m.name for m in methods) == sorted(METHODS), [m.name for m in methods]
    # module-level names those methods read (the M3 helpers only run for MiniMax-M3 models)
    m3_helpers = ("_normalize_minimax_m3_request", "_validate_minimax_m3_request")
    helpers = [
        n
        for n in tree.body
        if (isinstance(n, ast.FunctionDef) and n.name in m3_helpers)
        or (
            isinstance(n, ast.Assign)
            and any(getattr(t, "id", "") == "_MEDIA_CONTENT_PART_TYPES" for t in n.targets)
        )
    ]
    body = ast.Module(
        body=[*helpers, ast.ClassDef("ServingChat", [], [], methods, [], type_params=[])], type_ignores=[]
    )
    ast.fix_missing_locations(body)
    namespace: dict[str, Any] = {
        **vars(protocol),
        "FunctionCallParser": function_call_parser.FunctionCallParser,
        "get_json_schema_constraint": function_call_utils.get_json_schema_constraint,
        "normalize_json_schema_types": function_call_utils.normalize_json_schema_types,
        "strip_structural_tag_excludes": function_call_utils.strip_structural_tag_excludes,
        "ResponseTemplateToolDetector": response_template.ResponseTemplateToolDetector,
        "ResponseTemplateReasoningDetector": response_template.ResponseTemplateReasoningDetector,
        "configure_response_template_request": response_template.configure_response_template_request,
        "IQuestQ1ReasoningDetector": reasoning_parser.IQuestQ1ReasoningDetector,
        "ReasoningParser": reasoning_parser.ReasoningParser,
        "normalize_hunyuan_reasoning_effort": hunyuan_reasoning()["normalize_hunyuan_reasoning_effort"],
        "Draft202012Validator": CheckedSchemas,
        "SchemaError": jsonschema.SchemaError,
        "envs": envs,
        "logger": types.SimpleNamespace(warning=lambda *a, **k: None, info=lambda *a, **k: None),
        # runtime_context: a model of unknown context length, the default serving flags
        "get_model": lambda: types.SimpleNamespace(context_length=None),
        "get_serving": lambda: types.SimpleNamespace(
            trust_request_chat_template=False, allow_auto_truncate=False, default_chat_template_kwargs=None
        ),
    }
    exec(compile(body, str(path), "exec"), namespace)
    cls: type = namespace["ServingChat"]
    return cls


ServingChat = serving_chat_class()


def server(parser: str | None) -> Any:
    """A chat server with `--tool-call-parser parser` and otherwise the defaults."""
    serving = ServingChat()
    tokenizer = StandInTokenizer()
    serving.tool_call_parser = parser
    serving.reasoning_parser = None
    serving._reasoning_detector = None
    serving.chat_encoding_spec = None
    serving.default_chat_template_kwargs = None
    serving.is_minimax_m3 = serving.is_gpt_oss = serving.is_gemma4 = False
    serving.template_manager = types.SimpleNamespace(reasoning_config=None, chat_template_name=None)
    serving.tokenizer_manager = types.SimpleNamespace(
        tokenizer=tokenizer,
        # multimodal: _validate_media_content has nothing to say about the one text message
        model_config=types.SimpleNamespace(is_multimodal=True),
        config_value=lambda name: "xgrammar" if name == "grammar_backend" else None,
    )
    return serving


def failure(err: BaseException, status: int = 400) -> dict[str, Any]:
    return {
        "outcome": "error" if status == 400 else "error500",
        "message": f"{type(err).__name__}: {err}"[:600],
    }


def validated(body: dict[str, Any]) -> Any:
    """The request as pydantic and `_validate_request` leave it (its tools' parameters normalized in
    place), or the error outcome. Neither depends on the parser."""
    raw = json.loads(json.dumps(body))
    raw.setdefault("messages", MESSAGES)
    raw["input_ids"] = [1]  # serving_chat then renders no chat template
    try:
        request = protocol.ChatCompletionRequest.model_validate(raw)
    except ValidationError as err:
        return failure(err)
    except Exception as err:  # a before-validator's own exception: FastAPI answers a 500
        return failure(err, 500)
    try:
        message = server(None)._validate_request(request)
    except ValueError as err:
        return failure(err)
    except Exception as err:
        return failure(err, 500)
    if message:
        return {"outcome": "error", "message": message[:600]}
    return request


def outcome(validated_request: Any, parser: str | None) -> dict[str, Any]:
    if isinstance(validated_request, dict):
        return validated_request
    # a deep copy for each parser (what model_copy(deep=True) makes, by pickle's C code: the same
    # fields, extras and private attributes, in a third of the time)
    request = pickle.loads(pickle.dumps(validated_request, pickle.HIGHEST_PROTOCOL))
    serving = server(parser)
    try:
        result = serving._process_messages(request, False)
        constraint = result.tool_call_constraint
        params = request.to_sampling_params(
            stop=result.stop, model_generation_config={}, tool_call_constraint=constraint
        )
    except ValueError as err:
        return failure(err)
    except Exception as err:
        return failure(err, 500)
    if constraint is None:
        return {"outcome": "none"}
    own = request.to_sampling_params(stop=result.stop, model_generation_config={})
    if any(own.get(k) for k in ("json_schema", "structural_tag", "regex", "ebnf")):
        return {"outcome": "none", "dropped": True}  # the request's own constraint compiles instead
    kind, key = {
        "json_schema": ("json", "json_schema"),
        "structural_tag": ("structural_tag", "structural_tag"),
        "full_assistant_ebnf": ("ebnf", "ebnf"),
    }[constraint[0]]
    return {"outcome": kind, "text": params[key]}


def made(parser: str | None, cache: dict[str | None, str | None]) -> str | None:
    """Why the parser cannot be made with the stand-in tokenizer, or None."""
    if parser not in cache:
        try:
            if parser is not None:
                function_call_parser.FunctionCallParser([], parser, tokenizer=StandInTokenizer())
            cache[parser] = None
        except Exception as err:
            cache[parser] = f"{type(err).__name__}: {err}"[:300]
    return cache[parser]


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    cache: dict[str | None, str | None] = {}
    results: dict[str, dict[str, Any]] = {}
    for case in spec["cases"]:
        level = case.get("strict_level")
        if level is None:
            os.environ.pop("SGLANG_TOOL_STRICT_LEVEL", None)
        else:
            os.environ["SGLANG_TOOL_STRICT_LEVEL"] = str(level)
        out: dict[str, Any] = {}
        request = validated(case["body"])
        for prefix, parsers in spec["parsers"].items():
            if case["id"].startswith(prefix):
                for name in parsers:
                    parser = name or None
                    why = made(parser, cache)
                    out[name] = {"outcome": "init_error", "message": why} if why else outcome(request, parser)
        results[case["id"]] = out
    printed: dict[str, Any] = {"sglang": sglang.__version__, "results": results}
    if spec.get("table"):  # tools/sglang_tool_parsers.py's table, from the same process
        from tools.sglang_tool_parsers import table

        printed["table"] = table()
    print(json.dumps(printed))


if __name__ == "__main__":
    main()
