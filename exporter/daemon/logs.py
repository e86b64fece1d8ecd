"""Log lines in logfmt (the Prometheus exporters' default) or JSON, one line per event, to stderr.

Lines are written by a background thread from a bounded queue: a write that blocks (a full pipe
to a stalled log collector) or fails (disk full, a closed stream) never blocks or breaks the event
loop that serves /metrics. A line that cannot be queued or written is dropped and counted in
`guided_decoding_log_messages_dropped_total{reason}` (queue_full, write_error).
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO

from prometheus_client.core import Metric

from exporter.daemon import metrics_table
from exporter.daemon.metrics_table import declared

QUEUE_LINES = 1000
DROPPED = {"queue_full": 0, "write_error": 0}


def _quote(value: str) -> str:
    if value and not any(c in value for c in ' "=\\\n'):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def message(record: logging.LogRecord) -> tuple[str, str]:
    """The record's message and, when its arguments do not fit its format (a bug at the call site), the
    bare format with the error: the event is still logged, in the same line format as every other."""
    try:
        return record.getMessage(), ""
    except Exception as err:  # TypeError, ValueError, KeyError: whatever `%` raised
        return str(record.msg), f"unformattable log arguments: {type(err).__name__}: {err}"


def timestamp(record: logging.LogRecord) -> str:
    """RFC 3339 in UTC with milliseconds, as the Prometheus exporters write `ts`."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text, error = message(record)
        level = record.levelname.lower()
        line = f"ts={timestamp(record)} level={level} logger={record.name} msg={_quote(text)}"
        if error:
            line += " log_error=" + _quote(error)
        if record.exc_info:
            line += " err=" + _quote(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text, error = message(record)
        doc = {"ts": record.created, "level": record.levelname.lower(), "logger": record.name, "msg": text}
        if error:
            doc["log_error"] = error
        if record.exc_info:
            doc["err"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


class BackgroundHandler(logging.Handler):
    """Formats on the caller's thread (cheap), writes on its own daemon thread."""

    def __init__(self, stream: IO[str], capacity: int = QUEUE_LINES) -> None:
        super().__init__()
        self.stream = stream
        self.queue: queue.Queue[str] = queue.Queue(capacity)
        self._writer = threading.Thread(target=self._write, name="gdx-log-writer", daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # a formatter that is not ours, or an exception that will not print
            line = (
                f"ts={timestamp(record)} level=error logger={record.name} msg={_quote(str(record.msg))}"
                " log_error=unformattable"
            )
        try:
            self.queue.put_nowait(line + "\n")
        except queue.Full:
            DROPPED["queue_full"] += 1

    def _write(self) -> None:
        while True:
            line = self.queue.get()
            try:
                self.stream.write(line)
                self.stream.flush()
            except (OSError, ValueError):  # ENOSPC, EPIPE, a closed stream: nothing to tell it to
                DROPPED["write_error"] += 1
            finally:
                self.queue.task_done()

    def flush(self, timeout: float = 2.0) -> None:
        """Waits (bounded) for queued lines to be written: a stuck stream must not stop an exit."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)


class DroppedCollector:
    """`guided_decoding_log_messages_dropped_total`: the log lines nobody will read."""

    def describe(self) -> Iterable[Metric]:
        return metrics_table.describe("logs")

    def collect(self) -> Iterable[Metric]:
        family = declared("log_messages_dropped").counter()
        for reason, dropped in DROPPED.items():
            family.add_metric([reason], dropped)
        yield family


def setup(level: str = "info", line_format: str = "logfmt", stream: IO[str] | None = None) -> None:
    handler = BackgroundHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if line_format == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
