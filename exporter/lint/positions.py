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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

# a token after any whitespace: whitespace is skipped inside the match, not matched on its own
_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+)', re.DOTALL)
_NOT_PLAIN = re.compile(r"[\x00-\x1f\\]")  # a key with these is decoded by json (escapes, faults)


@dataclass(frozen=True)
class Position:
    line: int
    column: int


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1") if "~" in token or "/" in token else token


class _Positions(Mapping[str, Position]):
    """Pointer -> Position, each made from its offset when asked: a file's findings name a few of
    its nodes, and the scan records them all."""

    def __init__(self, text: str, offsets: dict[str, int]) -> None:
        self._text = text
        self._offsets = offsets
        self._starts: list[int] | None = None

    def __getitem__(self, pointer: str) -> Position:
        offset = self._offsets[pointer]
        if self._starts is None:
            self._starts = [0] + [m.end() for m in re.finditer("\n", self._text)]
        line = bisect.bisect_right(self._starts, offset) - 1
        return Position(line + 1, offset - self._starts[line] + 1)

    def __contains__(self, pointer: object) -> bool:
        return pointer in self._offsets

    def __iter__(self) -> Iterator[str]:
        return iter(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets)


def node_positions(text: str) -> Mapping[str, Position]:
    """Every node's position by its JSON pointer ("" for the root)."""
    found: dict[str, int] = {}
    # each open container: [pointer, is_object, next array index]
    stack: list[list[object]] = []
    expect_key = False
    pending = ""  # the pointer of the value about to start
    for match in _TOKEN.finditer(text):
        token = match.group(1)
        first = token[0]
        if first == "," or first == ":":
            if first == "," and stack:
                top = stack[-1]
                expect_key = bool(top[1])
                if not top[1]:
                    pending = f"{top[0]}/{top[2]}"
            continue
        if first == "}" or first == "]":
            if stack:
                stack.pop()
            expect_key = False
            continue
        if expect_key and first == '"':
            top = stack[-1]
            if _NOT_PLAIN.search(token) is None:
                key = token[1:-1]
            else:
                try:
                    key = json.loads(token)
                except ValueError:
                    return _Positions(text, found)
            pending = f"{top[0]}/{_escape(key)}"
            found.setdefault(pending, match.start(1))
            expect_key = False
            continue
        # a value starts here
        if not stack:
            pending = ""
            found.setdefault("", match.start(1))
        elif not stack[-1][1]:  # an array item: its position is the value's
            found.setdefault(pending, match.start(1))
            stack[-1][2] = int(str(stack[-1][2])) + 1
        if first == "{" or first == "[":
            stack.append([pending, first == "{", 0])
            expect_key = first == "{"
            if first == "[":
                pending = f"{pending}/0"
    return _Positions(text, found)


def position_of(positions: Mapping[str, Position], pointer: str) -> Position | None:
    """The node's position, or its nearest ancestor's (a pointer into a `$ref` target or a derived
    spec may name a node the text does not have)."""
    while True:
        if pointer in positions:
            return positions[pointer]
        if not pointer:
            return None
        pointer = pointer.rsplit("/", 1)[0]
