"""Reading specs the way an engine receives them, into typed Requests for `gdx lint` and `gdx hash`.

A file is one spec (a JSON Schema, a structural tag, a regex or a grammar) or a request log (JSONL, one
request per line: a schema, a JSONSchemaBench `{"id", "schema"}` line, an OpenAI/vLLM request body, or
a batch line `{"custom_id", "body"}`). Each Request keeps the exact string the engine would be sent:
engines cache compiled grammars by that string, so two serialisations of one schema are two compiles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from exporter.schema import identity, spec

# What each file holds, as `gdx lint --kind` takes it (parse_file says how each is read).
KINDS = ("auto", "json", "regex", "grammar", "structural_tag")
TEXT_KINDS = ("regex", "grammar")  # the whole file is the spec, as `gdx hash` reads it
# In --kind auto, a file that is not JSON is a regex or a grammar, unless it was plainly meant as JSON:
# a broken .json file says so (exit 2) instead of being linted as a regex.
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
# Top-level keys of a request body; a JSON Schema has none of them as a keyword.
REQUEST_KEYS = frozenset(
    {"messages", "prompt", "model", "response_format", "structured_outputs", "guided_decoding",
     "guided_json", "guided_regex", "guided_grammar", "guided_choice", "guided_json_object", "extra_body"}
)  # fmt: skip
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


class InputError(Exception):
    """A file that cannot be read as specs: `gdx lint` names it and the reason, and exits 2."""


@dataclass(frozen=True)
class Request:
    """One spec as an engine would receive it: from one file, or one line of a request log."""

    name: str  # FILE, FILE:LINE, or FILE:ID where the line carries an id
    kind: str  # a probe request kind: json, structural_tag, regex, grammar, choice
    text: str  # the exact string (what the engine caches by)
    parsed: Any  # its decoded JSON; None for a regex or a grammar


@dataclass(frozen=True)
class Line:
    """One JSON record: a line of a request log, or a whole file."""

    file: str
    label: str  # FILE:LINE, or FILE for a whole file
    text: str  # the exact text
    value: Any  # decoded


@dataclass(frozen=True)
class Inputs:
    requests: tuple[Request, ...]
    skipped: int  # request lines that carry no spec (json_object, plain text)


def read_inputs(paths: Sequence[str], stdin: TextIO, kind: str = "auto") -> Inputs:
    requests: list[Request] = []
    skipped = 0
    for path in paths:
        try:
            if path == "-":
                text, name = stdin.read(), "<stdin>"
            else:
                with open(path, encoding="utf-8") as handle:
                    text, name = handle.read(), path
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: {getattr(err, 'strerror', None) or err}") from err
        found, none = parse_file(name, text, kind)
        requests.extend(found)
        skipped += none
    return Inputs(tuple(requests), skipped)


def spec_text(text: str) -> str:
    """A file's spec string, as `gdx hash` reads it: JSON as it is (its hash is canonical anyway),
    anything else without the trailing newline an editor adds."""
    return text if identity.parse_spec(text) is not None else text.rstrip("\n")


def parse_file(name: str, text: str, kind: str = "auto") -> tuple[list[Request], int]:
    """(requests, lines skipped) of one file. --kind regex/grammar: the whole file is the spec. Else
    one JSON value is one record; JSONL is one record per non-empty line; in --kind auto anything else
    is one regex or grammar (`spec.detect`), unless the file was plainly meant as JSON."""
    if kind in TEXT_KINDS:
        return [Request(name, kind, text.rstrip("\n"), None)], 0
    if not text.strip():
        return [], 0  # an empty request log (no requests today), not an empty regex
    try:
        return _records([Line(name, name, text.strip(), json.loads(text))], kind)
    except json.JSONDecodeError as err:
        whole = err
    except RecursionError as err:
        raise InputError(f"{name}: nested too deep to parse") from err
    lines = _json_lines(name, text)
    if lines is not None:
        return _records(lines, kind)
    if kind == "auto" and not _meant_as_json(name, text):
        regex_or_grammar = text.rstrip("\n")
        return [Request(name, spec.detect(regex_or_grammar), regex_or_grammar, None)], 0
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


def _records(lines: Iterable[Line], kind: str) -> tuple[list[Request], int]:
    requests: list[Request] = []
    skipped = 0
    for line in lines:
        found = record(line, kind)
        if found is None:
            skipped += 1
        else:
            requests.append(found)
    return requests, skipped


def record(line: Line, kind: str = "auto") -> Request | None:
    """One JSON record (a line, or a whole file): a batch line `{"custom_id", "body"}`, a
    JSONSchemaBench line `{"id", "schema"}`, a request body (any REQUEST_KEYS), or else the spec
    itself (json, or structural_tag per `spec.detect`; --kind json/structural_tag says which).
    None: a request without a spec."""
    doc = line.value
    if isinstance(doc, dict):
        body = doc.get("body")
        if isinstance(body, dict) and ("custom_id" in doc or "url" in doc):
            return from_body(_label(line, doc.get("custom_id")), body)
        if "schema" in doc and ("id" in doc or len(doc) <= 3):
            schema = doc["schema"]
            return _bare(_label(line, doc.get("id")), json.dumps(schema), schema, kind)
        if not REQUEST_KEYS.isdisjoint(doc):
            return from_body(line.label, doc)
    return _bare(line.label, line.text, doc, kind)


def _label(line: Line, line_id: Any) -> str:
    """FILE:ID instead of FILE:LINE when the record names itself."""
    if line_id is None or isinstance(line_id, (dict, list)):
        return line.label
    return f"{line.file}:{line_id}"


def _bare(label: str, text: str, value: Any, kind: str) -> Request:
    chosen = kind if kind in ("json", "structural_tag") else spec.kind_of_value(value)
    return Request(label, chosen, text, value)


def from_body(label: str, body: dict[str, Any]) -> Request | None:
    """The spec of an OpenAI/vLLM request body, with the string vLLM compiles (a dict is sent as
    `json.dumps` of it, a string as it is), or None when the request has none."""
    found = spec_field(body)
    if found is None:
        return None
    kind, value = found
    if isinstance(value, str):
        parsed = identity.parse_spec(value) if kind in ("json", "structural_tag") else None
        return Request(label, kind, value, parsed)
    return Request(label, kind, json.dumps(value), value)


def spec_field(body: dict[str, Any], nested: bool = False) -> tuple[str, Any] | None:
    """(kind, value) from `response_format` (json_schema, structural_tag; json_object and text have
    no spec), `structured_outputs`/`guided_decoding`, the `guided_*` fields, or `extra_body` as the
    OpenAI client sends it before merging."""
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
