"""Where a finding is in the files `gdx lint` read: file, line and column of the node its pointer names.

A spec is named by the request that sent it first (`FILE`, `FILE:LINE`, `FILE:ID` for a batch or
JSONSchemaBench line that names itself, `module:Name` or `path.py:Name` for a Python target). A
whole JSON file maps pointers through exporter/lint/positions.py (a YAML file through yamlspec.py); a
line of a request log is its line, the column where the pointer's node starts inside the spec that
line carries (found as the subtree of the line's JSON equal to the spec:
`response_format.json_schema.schema`, a batch line's body...), or the line's start where the spec was
derived (a tool call's grammar) rather than sent. A Python target points at the line that defines the
model. A request log's line is read at the byte offset the reader kept (`Where`), whatever the log's
size; other files are read once each. Nothing here raises on hostile input: an unreadable file gives
the name with no line.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.lint import yamlspec
from exporter.lint.positions import Position, node_positions, position_of
from exporter.lint.requests import Where

MAX_FILE_CHARS = 64 * 2**20  # past it a file is located by name only
MAX_SEARCH_NODES = 200_000  # subtrees compared to find a spec inside a request line


@dataclass(frozen=True)
class Location:
    """A finding's place: `path` relative as given; line and column from 1, or 0 when unknown."""

    path: str
    line: int = 0
    column: int = 0


class Locator:
    """Resolves request names and pointers to locations, caching each file's text and positions."""

    def __init__(self, where: Mapping[str, Where] | None = None) -> None:
        self._where = where or {}
        self._at: dict[tuple[str, int], str | None] = {}
        self._texts: dict[str, str | None] = {}
        self._lines: dict[str, list[str]] = {}
        self._ids: dict[str, dict[str, int]] = {}
        self._positions: dict[tuple[str, int], Mapping[str, Position]] = {}
        self._prefixes: dict[tuple[str, int], tuple[Any, str | None]] = {}

    def locate(self, name: str, pointer: str = "", spec: Any = None) -> Location:
        at = self._where.get(name)
        line_text = self._line_at(at) if at is not None else None
        if at is not None and line_text is not None:
            return self._in_line(at.path, at.line, line_text, pointer, spec)
        path, line = self._split(name)
        if path is None:
            return Location(name)
        text = self._text(path)
        if text is None:
            return Location(path)
        if path.endswith(".py") and line == 0:
            return Location(path, _definition_line(text, name.rsplit(":", 1)[-1]), 1)
        if line == 0:
            found = position_of(self._positions_of(path, 0, text, yamlspec.is_yaml(path)), pointer)
            return Location(path, found.line, found.column) if found else Location(path, 1, 1)
        return self._in_line(path, line, self._line(path, text, line), pointer, spec)

    def _in_line(self, path: str, line: int, line_text: str, pointer: str, spec: Any) -> Location:
        prefix = self._prefix(path, line, line_text, spec)
        if prefix is None:
            return Location(path, line, 1)
        found = position_of(self._positions_of(path, line, line_text), prefix + pointer)
        return Location(path, line, found.column if found else 1)

    def _line_at(self, at: Where) -> str | None:
        """The line a record started at, read at its byte offset (None: not a line, or unreadable)."""
        key = (at.path, at.line)
        if at.line and key not in self._at:
            try:
                with open(at.path, "rb") as handle:
                    handle.seek(at.offset)
                    text = handle.readline().decode("utf-8").rstrip("\n")
                self._at[key] = text[:-1] if text.endswith("\r") else text
            except (OSError, UnicodeDecodeError, ValueError):
                self._at[key] = None
        return self._at.get(key)

    def _split(self, name: str) -> tuple[str | None, int]:
        """(the file, its line or 0 for the whole file); None when the name is no file here."""
        if self._text(name) is not None:
            return name, 0
        head, sep, tail = name.rpartition(":")
        if not sep:
            return None, 0
        if tail.isdigit() and self._text(head) is not None:
            return head, int(tail)
        if self._text(head) is not None:
            if head.endswith(".py"):
                return head, 0
            return head, self._id_line(head, tail)
        module_file = _module_file(head)
        return (module_file, 0) if module_file and self._text(module_file) is not None else (None, 0)

    def _text(self, path: str) -> str | None:
        if path not in self._texts:
            try:
                file = Path(path)
                if not file.is_file() or file.stat().st_size > MAX_FILE_CHARS:
                    self._texts[path] = None
                else:
                    self._texts[path] = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError, ValueError):
                self._texts[path] = None
        return self._texts[path]

    def _line(self, path: str, text: str, number: int) -> str:
        if path not in self._lines:
            self._lines[path] = text.split("\n")
        lines = self._lines[path]
        return lines[number - 1] if 0 < number <= len(lines) else ""

    def _id_line(self, path: str, line_id: str) -> int:
        """The first line of a JSONL file whose `custom_id` or `id` is `line_id` (0 when none is); the
        file's ids are read once."""
        if path not in self._ids:
            self._ids[path] = _id_lines(self._text(path) or "")
        return self._ids[path].get(line_id, 0)

    def _prefix(self, path: str, line: int, line_text: str, spec: Any) -> str | None:
        """`_prefix` once per line and spec: a schema's findings all sit in the same subtree."""
        cached = self._prefixes.get((path, line))
        if cached is not None and cached[0] is spec:
            return cached[1]
        found = _prefix(line_text, spec)
        self._prefixes[(path, line)] = (spec, found)
        return found

    def _positions_of(self, path: str, line: int, text: str, is_yaml: bool = False) -> Mapping[str, Position]:
        key = (path, line)
        if key not in self._positions:
            self._positions[key] = yamlspec.positions(text) if is_yaml else node_positions(text)
        return self._positions[key]


def _id_lines(text: str) -> dict[str, int]:
    """Each `custom_id` and `id` of a JSONL file's lines, to the first line that carries it."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), 1):
        if '"id"' not in line and '"custom_id"' not in line:
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            for key in ("custom_id", "id"):
                if key in value:
                    found.setdefault(str(value[key]), number)
    return found


def _prefix(line_text: str, spec: Any) -> str | None:
    """The pointer, inside the line's JSON, of the subtree equal to the spec (breadth first, bounded)."""
    if spec is None:
        return None
    try:
        root = json.loads(line_text)
    except (ValueError, RecursionError):
        return None
    queue: deque[tuple[str, Any]] = deque([("", root)])
    seen = 0
    while queue and seen < MAX_SEARCH_NODES:
        pointer, node = queue.popleft()
        seen += 1
        if type(node) is type(spec) and node == spec:
            return pointer
        if isinstance(node, dict):
            queue.extend((f"{pointer}/{_escape(str(k))}", v) for k, v in node.items())
        elif isinstance(node, list):
            queue.extend((f"{pointer}/{i}", v) for i, v in enumerate(node))
    return None


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _definition_line(text: str, name: str) -> int:
    """The line of `class Name` or `Name = ...` in a Python file (1 when neither is found)."""
    pattern = re.compile(rf"^\s*(?:class\s+{re.escape(name)}\b|{re.escape(name)}\s*[:=])", re.MULTILINE)
    found = pattern.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else 1


def _module_file(module: str) -> str | None:
    """The source file of a dotted module name on the current path, without importing it."""
    if not re.fullmatch(r"[A-Za-z_][\w.]*", module):
        return None
    relative = Path(*module.split("."))
    for candidate in (relative.with_suffix(".py"), relative / "__init__.py"):
        if candidate.is_file():
            return str(candidate)
    return None
