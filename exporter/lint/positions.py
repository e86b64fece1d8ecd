"""Where each node of a JSON text sits: JSON pointer -> (line, column), for findings at the line.

`gdx lint` reports a finding by the JSON pointer of the node that causes it; an editor, a pull
request annotation or SARIF needs the line and column. This scans the text once, without building
the value, and records each node where its text starts: an object member at its key (the line that
holds `"enum":` is the one a reviewer looks for), an array item and the root at the value. Lines and
columns count from 1; a column counts Unicode code points (SARIF's `unicodeCodePoints`). Iterative,
bounded by the text's length, never raises: text that is not JSON gives the positions read before
the fault.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+|\s+', re.DOTALL)


@dataclass(frozen=True)
class Position:
    line: int
    column: int


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> Position:
        line = bisect.bisect_right(self.starts, offset) - 1
        return Position(line + 1, offset - self.starts[line] + 1)


def node_positions(text: str) -> dict[str, Position]:
    """Every node's position by its JSON pointer ("" for the root)."""
    lines = _Lines(text)
    found: dict[str, Position] = {}
    # each open container: [pointer, is_object, next array index, pending member pointer]
    stack: list[list[object]] = []
    expect_key = False
    pending = ""  # the pointer of the value about to start
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token.isspace():
            continue
        if token in ",:":
            if token == "," and stack:
                top = stack[-1]
                expect_key = bool(top[1])
                if not top[1]:
                    pending = f"{top[0]}/{top[2]}"
            continue
        if token in "}]":
            if stack:
                stack.pop()
            expect_key = False
            continue
        if expect_key and token.startswith('"'):
            top = stack[-1]
            try:
                key = json.loads(token)
            except ValueError:
                return found
            pending = f"{top[0]}/{_escape(key)}"
            found.setdefault(pending, lines.at(match.start()))
            expect_key = False
            continue
        # a value starts here
        if not stack:
            pending = ""
        if stack and not stack[-1][1]:  # an array item: its position is the value's
            found.setdefault(pending, lines.at(match.start()))
            stack[-1][2] = int(str(stack[-1][2])) + 1
        elif not stack:
            found.setdefault("", lines.at(match.start()))
        if token in "{[":
            stack.append([pending, token == "{", 0])
            expect_key = token == "{"
            if token == "[":
                pending = f"{pending}/0"
    return found


def position_of(positions: dict[str, Position], pointer: str) -> Position | None:
    """The node's position, or its nearest ancestor's (a pointer into a `$ref` target or a derived
    spec may name a node the text does not have)."""
    while True:
        if pointer in positions:
            return positions[pointer]
        if not pointer:
            return None
        pointer = pointer.rsplit("/", 1)[0]
