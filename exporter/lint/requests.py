"""Reading specs the way an engine receives them, into typed Requests for `gdx lint` and `gdx hash`.

A file is one spec (a JSON Schema, a structural tag, a regex or a grammar; a `.yaml`/`.yml` file is one
schema or structural tag, sent as the JSON of its value) or a request log (JSONL, one
request per line: a schema, a JSONSchemaBench `{"id", "schema"}` line, an OpenAI/vLLM request body, or
a batch line `{"custom_id", "body"}`). Each Request keeps the exact string the engine would be sent:
engines cache compiled grammars by that string, so two serialisations of one schema are two compiles.

A request body with `tools` gets the grammar the server derives from them (exporter.engines.vllm.toolcalls)
when `ToolServer` says how the server is configured (`--tool-call-parser`, `--tool-strict-level`);
a request that gets no grammar is a `Skipped` with its reason, one vLLM would answer with a 400 a
`Rejected`: neither is dropped silently.

A request log is read as a stream (`read_inputs`): one line at a time, each request kept only when its
exact string is new (the first that sent it, with its line and byte offset, `Where`), a repeat only
counted. Memory follows the distinct specs, not the lines: a day's log lints on a laptop.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, TextIO

from exporter.analysis import spec
from exporter.engines.sglang import toolcalls as sglang_toolcalls
from exporter.engines.vllm import toolcalls
from exporter.lint import targets, yamlspec
from exporter.schema import identity

# What each file holds, as `gdx lint --kind` takes it (parse_file says how each is read).
KINDS = ("auto", "json", "regex", "grammar", "structural_tag")
TEXT_KINDS = ("regex", "grammar")  # the whole file is the spec, as `gdx hash` reads it
# In --kind auto, a file that is not JSON is a regex or a grammar, unless it was plainly meant as JSON:
# a broken .json file says so (exit 2) instead of being linted as a regex.
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
# Top-level keys of a request body; a JSON Schema has none of them as a keyword.
# A request body's fields with the types a request gives them: a schema document may have sections
# named `input`, `model` or `prompt`, but they are schemas (objects), and it may say `$schema`.
REQUEST_FIELDS: dict[str, type | tuple[type, ...]] = {
    "messages": list, "prompt": (str, list), "input": (str, list), "model": str, "response_format": dict,
    "structured_outputs": dict, "guided_decoding": dict, "guided_json": (str, dict), "guided_regex": str,
    "guided_grammar": str, "guided_choice": list, "guided_json_object": bool, "extra_body": dict,
}  # fmt: skip
REQUEST_KEYS = frozenset(REQUEST_FIELDS)
# vLLM's `structured_outputs` (earlier `guided_decoding`) fields, and the older top-level `guided_*`,
# with their request kinds. `json_object` is one fixed grammar: nothing to lint, the line is skipped.
STRUCTURED_FIELDS = (
    ("json", "json"), ("regex", "regex"), ("grammar", "grammar"), ("choice", "choice"),
    ("structural_tag", "structural_tag"),
)  # fmt: skip
GUIDED_FIELDS = (
    ("guided_json", "json"), ("guided_regex", "regex"), ("guided_grammar", "grammar"),
    ("guided_choice", "choice"),
)  # fmt: skip


# Why a request compiles no grammar, as the summary of `gdx lint` says it.
SKIP_REASONS = {
    "no_spec": "no structured output",
    "json_object": "json_object (one fixed JSON grammar, the same for every request)",
    "tool_choice_auto": "tool_choice auto",
    "tool_choice_none": "tool_choice none",
    "tool_choice_null": "tool_choice null",
    "tool_choice_hosted": "a hosted tool's tool_choice (Responses API: web search, MCP...)",
    "tools_without_parser": "tool_choice required or named without --tool-call-parser (vLLM answers 400 "
    "without one; name the server's to derive its grammar)",
    "parser_unconstrained": "a tool parser that leaves required and named choices unconstrained",
    "structural_tag": "a structural tag gdx does not rebuild (its own Parser, or auto beside a grammar)",
    "parser_grammar": "the tool parser's own grammar (Mistral's; not derived by gdx yet)",
    "response_template": "the hf parser's response template (no grammar)",
    "too_complex": "tools too deeply nested to derive",
    "sglang_structural_tag": "SGLang's model-native structural tag (not derived by gdx)",
    "sglang_ebnf": "SGLang's glm47 EBNF for the whole reply (not derived by gdx)",
    "sglang_responses": "an SGLang Responses API request (its tool constraint not derived by gdx)",
    "parsed_natively": "an SGLang parser that parses its own call format (no grammar)",
    "constraint_error": "SGLang's constraint failed and it serves the request unconstrained",
}
# Tool-call outcomes where vLLM replaces the request's own structured outputs with a grammar gdx does
# not derive: the request's own spec is not what compiles, so it is not linted in its place.
REPLACED = frozenset({"structural_tag", "parser_grammar", "too_complex"})


class InputError(Exception):
    """A file that cannot be read as specs: `gdx lint` names it and the reason, and exits 2."""


@dataclass(frozen=True)
class Request:
    """One spec as an engine would receive it: from one file, or one line of a request log."""

    name: str  # FILE, FILE:LINE, or FILE:ID where the line carries an id
    kind: str  # a probe request kind: json, structural_tag, regex, grammar, choice
    text: str  # the exact string (what the engine caches by)
    parsed: Any  # its decoded JSON; None for a regex or a grammar
    body: Any = None  # the request a tool parser derived it from (gdx fix unites its tools), else None
    api: str = "chat"  # that request's API: "chat" or "responses"


@dataclass(frozen=True)
class Line:
    """One JSON record: a line of a request log, or a whole file."""

    file: str
    label: str  # FILE:LINE, or FILE for a whole file
    text: str  # the exact text
    value: Any  # decoded


@dataclass(frozen=True)
class Skipped:
    """A request the engine compiles no grammar for (or none gdx derives), with why: SKIP_REASONS."""

    name: str
    reason: str


@dataclass(frozen=True)
class Rejected:
    """A request vLLM answers with a 400 before any grammar: `error` is a toolcalls.ERRORS code."""

    name: str
    error: str
    message: str
    server: str = "vLLM"  # the server that answers it: vLLM or SGLang


@dataclass(frozen=True)
class ToolServer:
    """How the vLLM server derives tool-call grammars: `--tool-call-parser` (None: not given, so a
    required or named choice is skipped rather than taken for a 400) and `--tool-strict-level`."""

    parser: str | None = None
    version: str = toolcalls.DEFAULT_VERSION
    strict_level: str | None = None
    engine: str = "vllm"  # or "sglang" (exporter.engines.sglang.toolcalls; `version` is SGLang's then)


NO_TOOL_SERVER = ToolServer()
Record = Request | Skipped | Rejected


@dataclass(frozen=True)
class Where:
    """Where a record starts: its file, its line (0: the whole file is the record) and that line's byte
    offset, so that a finding is located without reading the file again."""

    path: str
    line: int = 0
    offset: int = 0


@dataclass(frozen=True)
class Inputs:
    requests: tuple[Request, ...]  # one per distinct (kind, exact string): the first that sent it
    skipped: tuple[Skipped, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    counts: tuple[int, ...] = ()  # the requests that sent each of `requests` (empty: one each)
    where: dict[str, Where] = field(default_factory=dict)  # a kept record's name -> where it starts


class Gathered:
    """Records as they are read, repeats of an exact string counted, not kept."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.counts: list[int] = []
        self.skipped: list[Skipped] = []
        self.rejected: list[Rejected] = []
        self.where: dict[str, Where] = {}
        self._index: dict[tuple[str, str], int] = {}

    def add(self, found: Record, where: Where | None = None) -> None:
        if isinstance(found, Request):
            key = (found.kind, found.text)
            index = self._index.get(key)
            if index is not None:
                self.counts[index] += 1
                return
            self._index[key] = len(self.requests)
            self.requests.append(found)
            self.counts.append(1)
        elif isinstance(found, Skipped):
            self.skipped.append(found)
            return
        else:
            self.rejected.append(found)
        if where is not None and where.line:
            self.where.setdefault(found.name, where)  # a repeated id: the first line keeps it

    def inputs(self) -> Inputs:
        return Inputs(tuple(self.requests), tuple(self.skipped), tuple(self.rejected), tuple(self.counts),
                      self.where)  # fmt: skip


def read_inputs(
    paths: Sequence[str],
    stdin: TextIO,
    kind: str = "auto",
    tools: ToolServer = NO_TOOL_SERVER,
    client: str = "pydantic",
) -> Inputs:
    """Every path's records, read as a stream (the distinct requests kept, repeats counted); a Python
    target (`module:Name`, `file.py:Name`) is the schema `client` sends for it (exporter/lint/targets.py)."""
    gathered = Gathered()
    for path in paths:
        if path != "-" and targets.is_target(path):
            gathered.add(target_request(path, client))
            continue
        name = "<stdin>" if path == "-" else path
        try:
            with binary(path, stdin) as stream:
                for found, where in records_of(name, stream, kind, tools):
                    gathered.add(found, where)
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: {getattr(err, 'strerror', None) or err}") from err
    return gathered.inputs()


def binary(path: str, stdin: TextIO) -> IO[bytes]:
    """The file (or standard input) as bytes: the reader keeps byte offsets."""
    if path != "-":
        return open(path, "rb")  # the caller's `with` closes it
    buffer = getattr(stdin, "buffer", None)
    return buffer if buffer is not None else io.BytesIO(stdin.read().encode("utf-8", "surrogatepass"))


def records_of(name: str, binary: IO[bytes], kind: str = "auto", tools: ToolServer = NO_TOOL_SERVER
               ) -> Iterator[tuple[Record, Where]]:  # fmt: skip
    """The records of one file as `parse_file` reads them, a request log one line at a time, each with
    where it starts."""
    if kind not in TEXT_KINDS and not yamlspec.is_yaml(name):
        lines = json_lines(name, binary)
        if not isinstance(lines, str):
            for line, number, offset in lines:
                yield record(line, kind, tools), Where(name, number, offset)
            return
        text = lines
    else:
        text = binary.read().decode("utf-8")
    for found in parse_file(name, text, kind, tools):
        yield found, Where(name)


def json_lines(name: str, binary: IO[bytes]) -> Iterator[tuple[Line, int, int]] | str:
    """A request log's records, one decoded line at a time (with its number and byte offset), read as
    they are asked for; or, when the stream is no request log (its first non-empty line is not JSON, or
    it holds one record), its whole text for `parse_file`. A later line that is not JSON is InputError."""
    consumed: list[bytes] = []
    first: list[tuple[Line, int, int]] = []
    offset = 0
    for number, raw in enumerate(binary, 1):
        consumed.append(raw)
        try:
            found = _json_line(name, raw, number, offset, strict=bool(first))
        except _NotJson:
            return (b"".join(consumed) + binary.read()).decode("utf-8")
        offset += len(raw)
        if found is not None:
            first.append(found)
            if len(first) == 2:
                return _more(name, binary, first, number, offset)
    return b"".join(consumed).decode("utf-8")


def _more(
    name: str, binary: IO[bytes], first: list[tuple[Line, int, int]], number: int, offset: int
) -> Iterator[tuple[Line, int, int]]:
    yield from first
    for raw in binary:
        number += 1
        found = _json_line(name, raw, number, offset, strict=True)
        offset += len(raw)
        if found:
            yield found


class _NotJson(Exception):
    """The first record of a stream is not JSON: the file is no request log."""


def _json_line(name: str, raw: bytes, number: int, offset: int, strict: bool) -> tuple[Line, int, int] | None:
    """One line: (Line, number, offset); None when blank. Not JSON: _NotJson while `strict` is off
    (the first record), else InputError."""
    text = raw.decode("utf-8").rstrip("\n")
    text = text[:-1] if text.endswith("\r") else text
    if not text.strip():
        return None
    try:
        return Line(name, f"{name}:{number}", text, json.loads(text)), number, offset
    except (json.JSONDecodeError, RecursionError) as err:
        if not strict:
            raise _NotJson from err
        raise InputError(f"{name}:{number}: not JSON: {err}") from err


def target_request(target: str, client: str) -> Request:
    try:
        schema = targets.schema_of(target, client)
    except targets.TargetError as err:
        raise InputError(str(err)) from err
    return Request(target, "json", json.dumps(schema), schema)


def spec_text(text: str) -> str:
    """A file's spec string, as `gdx hash` reads it: JSON as it is (its hash is canonical anyway),
    anything else without the trailing newline an editor adds."""
    return text if identity.parse_spec(text) is not None else text.rstrip("\n")


def parse_file(name: str, text: str, kind: str = "auto", tools: ToolServer = NO_TOOL_SERVER) -> list[Record]:
    """The records of one file, in order. --kind regex/grammar: the whole file is the spec. Else
    one JSON value is one record; JSONL is one record per non-empty line; in --kind auto anything else
    is one regex or grammar (`spec.detect`), unless the file was plainly meant as JSON."""
    if kind in TEXT_KINDS:
        return [Request(name, kind, text.rstrip("\n"), None)]
    if not text.strip():
        return []  # an empty request log (no requests today), not an empty regex
    if yamlspec.is_yaml(name):
        try:
            value = yamlspec.load(text)
        except yamlspec.YamlSpecError as err:
            raise InputError(f"{name}: not a YAML schema: {err}") from err
        return [record(Line(name, name, json.dumps(value), value), kind, tools)]
    try:
        return [record(Line(name, name, text.strip(), json.loads(text)), kind, tools)]
    except json.JSONDecodeError as err:
        whole = err
    except RecursionError as err:
        raise InputError(f"{name}: nested too deep to parse") from err
    lines = _json_lines(name, text)
    if lines is not None:
        return [record(line, kind, tools) for line in lines]
    if kind == "auto" and not _meant_as_json(name, text):
        regex_or_grammar = text.rstrip("\n")
        return [Request(name, spec.detect(regex_or_grammar), regex_or_grammar, None)]
    hint = " (a regex or a grammar: --kind regex or --kind grammar)" if kind == "auto" else ""
    raise InputError(f"{name}: not JSON: {whole.msg} at line {whole.lineno} column {whole.colno}{hint}")


def _meant_as_json(name: str, text: str) -> bool:
    return name.lower().endswith(JSON_SUFFIXES) or text.lstrip().startswith("{")


def _json_lines(name: str, text: str) -> list[Line] | None:
    """Each non-empty line decoded; None when the first is not JSON (the file is not JSONL)."""
    out: list[Line] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Line(name, f"{name}:{number}", line, json.loads(line)))
        except (json.JSONDecodeError, RecursionError) as err:
            if not out:
                return None
            raise InputError(f"{name}:{number}: not JSON: {err}") from err
    return out or None


def record(line: Line, kind: str = "auto", tools: ToolServer = NO_TOOL_SERVER) -> Record:
    """One JSON record (a line, or a whole file): a batch line `{"custom_id", "body"}`, a
    JSONSchemaBench line `{"id", "schema"}`, a request body (a request field with its type, or
    `tools`), or else the spec itself (json, or structural_tag per `spec.detect`; --kind
    json/structural_tag says which)."""
    doc = line.value
    if isinstance(doc, dict):
        body = doc.get("body")
        if isinstance(body, dict) and ("custom_id" in doc or "url" in doc):
            url = doc.get("url")
            api = "responses" if isinstance(url, str) and url.rstrip("/").endswith("/responses") else None
            return from_body(_label(line, doc.get("custom_id")), body, tools, api)
        if "schema" in doc and ("id" in doc or len(doc) <= 3):
            schema = doc["schema"]
            return _bare(_label(line, doc.get("id")), json.dumps(schema), schema, kind)
        if _request_like(doc) or _tools_only(doc):
            return from_body(line.label, doc, tools)
    return _bare(line.label, line.text, doc, kind)


def _request_like(doc: dict[str, Any]) -> bool:
    """A request body rather than a schema document: no `$schema`, and a field of a request with a
    request's type (REQUEST_FIELDS)."""
    if "$schema" in doc:
        return False
    return any(key in doc and isinstance(doc[key], kind) for key, kind in REQUEST_FIELDS.items())


def _tools_only(doc: dict[str, Any]) -> bool:
    """A request body cut down to its tools (`{"tools": [...], "tool_choice": ...}`), not a schema."""
    return isinstance(doc.get("tools"), list) and "type" not in doc and "properties" not in doc


def _label(line: Line, line_id: Any) -> str:
    """FILE:ID instead of FILE:LINE when the record names itself."""
    if line_id is None or isinstance(line_id, (dict, list)):
        return line.label
    return f"{line.file}:{line_id}"


def _bare(label: str, text: str, value: Any, kind: str) -> Request:
    chosen = kind if kind in ("json", "structural_tag") else spec.kind_of_value(value)
    return Request(label, chosen, text, value)


def from_body(
    label: str, body: dict[str, Any], tools: ToolServer = NO_TOOL_SERVER, api: str | None = None
) -> Record:
    """The spec of an OpenAI/vLLM request body, with the string vLLM compiles (a dict is sent as
    `json.dumps` of it, a string as it is): the grammar its `tools` give under `tools` where they
    give one, else its own structured outputs; or why it compiles none. `api`: "chat" or "responses"
    (None: a body with `input` and no `messages` is a Responses API body)."""
    if api is None:
        api = "responses" if "input" in body and "messages" not in body else "chat"
    tool_reason = ""
    if "tools" in body or "tool_choice" in body:
        derived = _tool_call(label, body, tools, api)
        if not isinstance(derived, str):
            return derived
        tool_reason = derived
    found = spec_field(body)
    if found is None:
        if _json_object(body):
            return Skipped(label, "json_object")
        return Skipped(label, tool_reason if tool_reason in SKIP_REASONS else "no_spec")
    kind, value = found
    if isinstance(value, str):
        parsed = identity.parse_spec(value) if kind in ("json", "structural_tag") else None
        return Request(label, kind, value, parsed)
    return Request(label, kind, json.dumps(value), value)


def _json_object(body: dict[str, Any]) -> bool:
    """`response_format` json_object, or its `structured_outputs`/`guided_*` spellings."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_object":
        return True
    if _text_format(body).get("type") == "json_object":
        return True
    params = [body.get(key) for key in ("structured_outputs", "guided_decoding")]
    return bool(body.get("guided_json_object")) or any(
        isinstance(p, dict) and bool(p.get("json_object")) for p in params
    )


def _text_format(body: dict[str, Any]) -> dict[str, Any]:
    text = body.get("text")
    text_format = text.get("format") if isinstance(text, dict) else None
    return text_format if isinstance(text_format, dict) else {}


def _tool_call(label: str, body: dict[str, Any], tools: ToolServer, api: str) -> Record | str:
    """The tool-call grammar vLLM derives, a Skipped or Rejected, or (a string) the reason there is no
    tool grammar and the request's own structured outputs are what compiles."""
    if tools.engine == "sglang":
        return _sglang_tool_call(label, body, tools, api)
    if tools.parser is None:
        choice = body.get("tool_choice")
        named = isinstance(choice, dict) and (api == "chat" or choice.get("type") in ("function", "custom"))
        forced = choice == "required" or named
        return Skipped(label, "tools_without_parser") if forced and body.get("tools") else ""
    got = toolcalls.derive(body, tools.parser, tools.version, tools.strict_level, api)
    if got.error is not None:
        return Rejected(label, got.error, got.message)
    if got.spec_text is not None:
        return Request(label, got.kind, got.spec_text, identity.parse_spec(got.spec_text), body, api)
    if got.reason in REPLACED:
        return Skipped(label, got.reason)
    return got.reason


# SGLang's --tool-strict-level has no flag: SGLANG_TOOL_STRICT_LEVEL, an integer (vLLM's names map onto it).
SGLANG_LEVELS = {name: level for level, name in enumerate(toolcalls.STRICT_LEVELS)}
SGLANG_KINDS = {"ebnf": "grammar"}  # SGLang's request kinds, as the probe names them


def _sglang_tool_call(label: str, body: dict[str, Any], tools: ToolServer, api: str) -> Record | str:
    """The tool-call constraint SGLang derives (SGLang derives one without a parser too); its Responses
    API is not modelled."""
    if api == "responses":
        return Skipped(label, "sglang_responses")
    level = SGLANG_LEVELS.get(tools.strict_level or "")
    got = sglang_toolcalls.derive(body, tools.parser, tools.version, level)
    if got.error is not None:
        return Rejected(label, got.error, got.message, "SGLang")
    if got.spec_text is not None:
        kind = SGLANG_KINDS.get(got.kind, got.kind)
        parsed = identity.parse_spec(got.spec_text) if kind in ("json", "structural_tag") else None
        return Request(label, kind, got.spec_text, parsed, body, api)
    if got.reason in sglang_toolcalls.NOT_DERIVED_REASONS:
        return Skipped(label, f"sglang_{got.reason}")
    if got.reason == sglang_toolcalls.USER_CONSTRAINT:
        return ""  # the request's own constraint compiles
    return got.reason


def spec_field(body: dict[str, Any], nested: bool = False) -> tuple[str, Any] | None:
    """(kind, value) from `response_format` (json_schema, structural_tag; json_object and text have
    no spec), `structured_outputs`/`guided_decoding`, the `guided_*` fields, or `extra_body` as the
    OpenAI client sends it before merging."""
    text_format = _text_format(body)
    if text_format.get("type") == "json_schema" and text_format.get("schema") is not None:
        return "json", text_format["schema"]  # the Responses API's `text.format`
    response_format = body.get("response_format")
    if isinstance(response_format, dict):
        kind = response_format.get("type")
        inner = response_format.get("json_schema")
        if kind == "json_schema" and isinstance(inner, dict):
            schema = inner.get("schema", inner.get("json_schema"))
            if schema is not None:
                return "json", schema
        if kind == "structural_tag":
            return "structural_tag", response_format
    for key in ("structured_outputs", "guided_decoding"):
        params = body.get(key)
        if isinstance(params, dict):
            for name, kind in STRUCTURED_FIELDS:
                if params.get(name) is not None:
                    return kind, params[name]
    for name, kind in GUIDED_FIELDS:
        if body.get(name) is not None:
            return kind, body[name]
    extra = body.get("extra_body")
    if isinstance(extra, dict) and not nested:
        return spec_field(extra, nested=True)
    return None
