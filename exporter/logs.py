"""Log lines in logfmt (the Prometheus exporters' default) or JSON, one line per event, to stderr."""

from __future__ import annotations

import json
import logging
import sys
import time


def _quote(value: str) -> str:
    if value and not any(c in value for c in ' "=\\\n'):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        line = (
            f"ts={ts} level={record.levelname.lower()} logger={record.name} msg={_quote(record.getMessage())}"
        )
        if record.exc_info:
            line += " err=" + _quote(self.formatException(record.exc_info))
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["err"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def setup(level: str = "info", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
