"""The daemon's log lines (exporter/daemon/logs.py): one format for every line, a bad call's too."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest

from exporter.daemon import logs

TS = re.compile(r"^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=")


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("gdx.test", logging.INFO, __file__, 1, msg, args, None)


def test_a_line_in_logfmt() -> None:
    line = logs.LogfmtFormatter().format(_record("probe of %s disconnected", "pod=ns/vllm-0 engine=0"))
    assert TS.match(line)
    assert line.endswith('logger=gdx.test msg="probe of pod=ns/vllm-0 engine=0 disconnected"')


@pytest.mark.parametrize(
    "args",
    [("ns", "pod", "0"), ("pod",), ({"a": 1},)],
    ids=["more arguments than placeholders", "fewer", "a mapping for positional placeholders"],
)
def test_arguments_that_do_not_fit_keep_the_event_and_the_format(args: tuple[object, ...]) -> None:
    record = _record("probe of pod=%s engine=%s disconnected", *args)
    line = logs.LogfmtFormatter().format(record)
    assert TS.match(line), line  # the same timestamp as every other line
    assert 'msg="probe of pod=%s engine=%s disconnected"' in line  # what happened, not a placeholder
    assert "log_error=" in line
    doc = json.loads(logs.JsonFormatter().format(record))
    assert doc["msg"] == "probe of pod=%s engine=%s disconnected" and "log_error" in doc


def test_the_background_handler_writes_the_line_it_formats() -> None:
    stream = io.StringIO()
    handler = logs.BackgroundHandler(stream)
    handler.setFormatter(logs.LogfmtFormatter())
    handler.emit(_record("dropped a %s probe message", "malformed", "extra"))
    handler.flush()
    (line,) = stream.getvalue().splitlines()
    assert TS.match(line) and "dropped a %s probe message" in line and "log_error=" in line
