"""`gdx hash`: the schema_hash and shape_hash the probe reports for each spec of a file, a request log
hashed line by line as it is read (exporter/lint/requests.py), a Python target as its client sends it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from exporter.analysis import spec
from exporter.lint import targets
from exporter.lint.flags import FlagError, sglang_engine, tool_server, vllm_router
from exporter.lint.requests import (
    SKIP_REASONS,
    InputError,
    Record,
    Request,
    Skipped,
    ToolServer,
    binary,
    json_lines,
    parse_file,
    record,
    spec_text,
    target_request,
)
from exporter.schema import identity


def hash_main(args: argparse.Namespace) -> int:
    try:
        sglang, rest = sglang_engine(args.engine or [])
        router, rest = vllm_router(rest)
        if rest:
            raise FlagError(f"--engine {rest[0]}: gdx hash takes vllm[==VERSION] or sglang[==VERSION]")
        tools = tool_server(args.tool_call_parser, args.tool_strict_level, router, sglang)
        for path in args.files:
            if path != "-" and targets.is_target(path):
                _print_hash(target_request(path, args.client).text, path)
                continue
            name = "<stdin>" if path == "-" else path
            with binary(path, sys.stdin) as stream:
                lines = json_lines(name, stream)  # a request log: hashed as it is read
                if not isinstance(lines, str):
                    _print_records(record(line, "auto", tools) for line, _, _ in lines)
                    continue
            text = lines
            records = _request_records(name, text, tools)
            if records is None:  # one spec: the file is the string, as the engine gets it
                spec_string = spec_text(text)
                _print_hash(spec_string, path, spec.kind_of_value(identity.parse_spec(spec_string)))
                continue
            _print_records(records)
    except (FlagError, OSError, UnicodeDecodeError, InputError) as err:
        print(f"gdx hash: {err}", file=sys.stderr)
        return 2
    return 0


def _print_records(records: Iterable[Record]) -> None:
    for found in records:
        if isinstance(found, Request):
            _print_hash(found.text, found.name, found.kind)
        elif isinstance(found, Skipped):
            print(f"no grammar: {SKIP_REASONS.get(found.reason, found.reason)}  {found.name}")
        else:
            print(f"rejected: {found.server} answers {found.error}: {found.message}  {found.name}")


def _request_records(name: str, text: str, tools: ToolServer) -> list[Record] | None:
    """A request log's records (each request's spec, as the server derives it), or None when the file
    is one spec of its own (a schema, a structural tag, a regex, a grammar)."""
    try:
        records = parse_file(name, text, "auto", tools)
    except InputError:
        return None  # not JSON: one regex or grammar, hashed as its text
    if len(records) == 1 and isinstance(records[0], Request) and records[0].name == name:
        only = records[0]
        if only.body is None and only.text == text.strip():
            return None
    return records


def _print_hash(spec_string: str, name: str, kind: str = "json") -> None:
    """schema_hash and shape_hash as the probe labels the spec: a JSON Schema's canonical hashes, a
    structural tag's (or any other kind's) exact string."""
    parsed = identity.parse_spec(spec_string)
    if kind == "structural_tag":
        schema_hash, shape_hash = identity.spec_hashes(kind, spec_string, parsed)
    else:
        schema_hash = identity.schema_hash(spec_string, parsed)
        shape_hash = identity.shape_hash(spec_string, parsed)
    suffix = "" if kind == "json" else f" kind={kind}"
    print(f"schema_hash={schema_hash} shape_hash={shape_hash}{suffix} {name}")
