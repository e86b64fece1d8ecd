"""A request log read as a stream (exporter.lint.requests.read_inputs): the records `parse_file` reads
from the whole text, in order, with repeats of an exact string counted instead of kept; each kept
record's line and byte offset, which the Locator reads its line at (a log past the size a Locator reads
whole is still located at the line and column)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.lint import locate
from exporter.lint.locate import Locator
from exporter.lint.report import distinct_specs
from exporter.lint.requests import Request, json_lines, parse_file, read_inputs
from tools.harness import ROOT

SCHEMA = {"type": "object", "properties": {"tenant": {"enum": ["a", "b"]}}}


def body(schema: object) -> dict[str, object]:
    return {
        "messages": [],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    }


def write_log(path: Path) -> list[str]:
    lines = [json.dumps(body(SCHEMA)), "", json.dumps({"messages": []}), json.dumps(body(SCHEMA)),
             json.dumps({"id": "q7", "schema": {"type": "string", "pattern": "[a-z]+"}}) + "\r",
             json.dumps(body({**SCHEMA, "title": "Ünïcode"}), ensure_ascii=False),
             json.dumps(body(SCHEMA))]  # fmt: skip
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def test_the_stream_reads_what_the_whole_text_reads_repeats_counted(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    lines = write_log(log)
    whole = [r for r in parse_file(str(log), log.read_text(encoding="utf-8")) if isinstance(r, Request)]
    streamed = read_inputs([str(log)], io.StringIO())
    assert [r.name for r in whole] == [f"{log}:1", f"{log}:4", f"{log}:q7", f"{log}:6", f"{log}:7"]
    assert [(r.name, r.text) for r in streamed.requests] == [
        (r.name, r.text) for r in (whole[0], *whole[2:4])
    ]
    assert streamed.counts == (3, 1, 1) and [s.name for s in streamed.skipped] == [f"{log}:3"]
    by_line = distinct_specs(whole)
    by_stream = distinct_specs(streamed.requests, streamed.counts)
    assert [(d.schema_hash, d.lines, d.texts, d.first.name) for d in by_stream] == [
        (d.schema_hash, d.lines, d.texts, d.first.name) for d in by_line
    ]
    data = log.read_bytes()
    for request in streamed.requests:
        where = streamed.where[request.name]
        assert data[where.offset :].startswith(lines[where.line - 1].encode())


def test_a_file_of_one_record_or_no_log_is_read_whole(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text("\n" + json.dumps(SCHEMA) + "\n\n")
    (found,) = read_inputs([str(one)], io.StringIO()).requests
    assert found.name == str(one) and not read_inputs([str(one)], io.StringIO()).where
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(SCHEMA, indent=2))
    assert isinstance(json_lines(str(pretty), io.BytesIO(pretty.read_bytes())), str)
    (found,) = read_inputs([str(pretty)], io.StringIO()).requests
    assert found.parsed == SCHEMA
    regex = tmp_path / "id.txt"
    regex.write_text("[a-z]+\n[0-9]+\n")
    (found,) = read_inputs([str(regex)], io.StringIO()).requests
    assert found.kind in ("regex", "grammar")


def test_a_later_line_that_is_not_json_is_named(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(SCHEMA) + "\n" + json.dumps(SCHEMA) + "\n{not json\n")
    with pytest.raises(Exception, match=r"log.jsonl:3: not JSON"):
        read_inputs([str(log)], io.StringIO())


def test_standard_input_streams_too() -> None:
    text = "\n".join(json.dumps(body(SCHEMA)) for _ in range(5)) + "\n"
    inputs = read_inputs(["-"], io.StringIO(text))
    assert [r.name for r in inputs.requests] == ["<stdin>:1"] and inputs.counts == (5,)


def test_the_locator_reads_a_logs_line_at_its_offset_past_its_whole_file_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "log.jsonl"
    lines = write_log(log)
    inputs = read_inputs([str(log)], io.StringIO())
    monkeypatch.setattr(locate, "MAX_FILE_CHARS", 10)  # the whole file is too large to read
    schema = next(r for r in inputs.requests if r.name.endswith(":6"))
    where = Locator(inputs.where).locate(schema.name, "/title", schema.parsed)
    assert (where.path, where.line) == (str(log), 6)
    assert lines[5][where.column - 1 :].startswith('"title": "Ünïcode"')
    assert Locator().locate(schema.name, "/title", schema.parsed).line == 0  # without offsets: by name only
    q7 = Locator(inputs.where).locate(f"{log}:q7", "/pattern", {"type": "string", "pattern": "[a-z]+"})
    assert q7.line == 5 and lines[4][q7.column - 1 :].startswith('"pattern"')


def test_the_analysis_side_by_side_is_the_analysis_in_one_process(tmp_path: Path) -> None:
    """`gdx lint --jobs N`: the distinct specs analysed in N forked processes give the same members, in
    the same order, as one process; and the command's output is the same byte for byte (run as a
    program: `analyse` forks only a process whose one thread runs, which a test worker is not)."""
    from exporter.lint.report import PARALLEL_MIN, _schema, distinct_specs, in_parallel
    from exporter.schema.findings import Thresholds
    from tools.bench.schemas import DATA, read

    log = tmp_path / "bench.jsonl"
    docs = [doc for _, doc in zip(range(PARALLEL_MIN * 2), read(DATA / "schemas"), strict=False)]
    log.write_text("".join(json.dumps({"id": d["id"], "schema": d["schema"]}) + "\n" for d in docs))
    inputs = read_inputs([str(log)], io.StringIO())
    items, engines = distinct_specs(inputs.requests, inputs.counts), ("xgrammar", "llguidance")
    alone = [_schema(item, Thresholds(), engines, None) for item in items]
    together = in_parallel(items, Thresholds(), engines, None, 2)
    assert [(m.report, m.fingerprint) for m in together] == [(m.report, m.fingerprint) for m in alone]
    command = [sys.executable, "-m", "exporter", "lint", str(log), "--format", "json", "--jobs"]
    outputs = [
        subprocess.run([*command, jobs], capture_output=True, text=True, cwd=ROOT, check=False).stdout
        for jobs in ("1", "2")
    ]
    assert json.loads(outputs[0])["summary"]["families"] > PARALLEL_MIN and outputs[0] == outputs[1]
