"""What a JSON Schema `pattern` costs a grammar engine, from the parsed regex (not from grepping it).

Python's own regular-expression parser (`re._parser`, the engine of the `re` module) reads the
ECMA-262 patterns that schemas use, except for a few syntaxes it rejects (then: None). Bounded
repeats `{m,n}` unroll into n states in a grammar, so the largest finite upper bound is what the
`bounded_quantifier` rule looks at; lookarounds are what xgrammar drops (in a JSON `pattern`) or
refuses (in a regex request) and llguidance refuses. The widest alternation (most branches of one `|`)
is what a value list pasted into a regex costs: each branch is a grammar path, as an `enum` member is.
The parser folds single-character alternatives into a character class (`a|b|c` is `[abc]`, one
state) and factors a common prefix out, so only real branches count.
"""

from __future__ import annotations

import functools
import importlib
import re
import warnings
from dataclasses import dataclass
from typing import Any

_parser: Any = importlib.import_module("re._parser")  # the parser behind `re` (Python 3.11+)
_constants: Any = importlib.import_module("re._constants")

MAX_PATTERN_CHARS = 10_000
# The parser warns about `[[` and `--`/`&&`/`~~`/`||` inside a class (syntax a future Python may give
# a meaning); ECMA-262 reads them as plain characters, so for this reading the warning is noise, and
# `gdx lint` on a user's regex must not print it. Matched by message: only these warnings are hidden.
warnings.filterwarnings("ignore", message=r"Possible (nested )?set", category=FutureWarning)
_REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT, getattr(_constants, "POSSESSIVE_REPEAT", None))


@dataclass(frozen=True)
class PatternFacts:
    max_bounded_repeat: int  # the largest finite {m,n} upper bound (0: none)
    lookaround: bool
    widest_alternation: int = 0  # the most branches of one `|` (0: no alternation left after parsing)
    largest_count: int = 0  # the largest count written in a repeat: {m,n}'s n, or m of {m,}
    mid_anchor: bool = False  # a `^` that text can precede or a `$` that text can follow (below)


@functools.lru_cache(maxsize=4096)
def analyse(pattern: str) -> PatternFacts | None:
    """Facts about a JSON Schema `pattern`, or None when it cannot be parsed (or is absurdly long).
    Cached: one pattern recurs across the variants of a schema."""
    return facts(pattern, MAX_PATTERN_CHARS)


def _parsed(pattern: Any, max_chars: int) -> Any:
    """Python's parse of a regex of at most `max_chars` characters, or None (unparsable, or longer)."""
    if not isinstance(pattern, str) or len(pattern) > max_chars:
        return None
    try:
        return _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None


def facts(pattern: str, max_chars: int) -> PatternFacts | None:
    """Facts about a regex of at most `max_chars` characters, or None (unparsable, or longer). Not
    cached, so a caller may pass long texts (a whole regex request; the parser reads about 1 MB/s)."""
    parsed = _parsed(pattern, max_chars)
    if parsed is None:
        return None
    largest = 0
    counted = 0
    widest = 0
    lookaround = False
    stack: list[Any] = [parsed]
    while stack:
        items = stack.pop()
        for opcode, argument in items:
            if opcode in _REPEATS:
                _low, high, repeated = argument
                if high != _constants.MAXREPEAT:
                    largest = max(largest, int(high))
                counted = max(counted, int(high) if high != _constants.MAXREPEAT else int(_low))
                stack.append(repeated)
            elif opcode in (_constants.ASSERT, _constants.ASSERT_NOT):
                lookaround = True
                stack.append(argument[1])
            elif opcode == _constants.SUBPATTERN:
                stack.append(argument[-1])
            elif opcode == _constants.BRANCH:
                widest = max(widest, len(argument[1]))
                stack.extend(argument[1])
            elif opcode == getattr(_constants, "ATOMIC_GROUP", None):
                stack.append(argument)
            elif opcode == _constants.GROUPREF_EXISTS:
                stack.append(argument[1])
                if argument[2] is not None:
                    stack.append(argument[2])
    return PatternFacts(largest, lookaround, widest, counted, _mid_anchor(parsed))


_STARTS = (_constants.AT_BEGINNING, _constants.AT_BEGINNING_STRING)
_ENDS = (_constants.AT_END, _constants.AT_END_STRING)


def _mid_anchor(parsed: Any) -> bool:
    """Whether an anchor sits where text can come before a `^` or after a `$` (`^a$b`, `^(a)$x?`):
    xgrammar ignores such an anchor, so the pattern accepts what it should not (llguidance refuses
    it). Anchors at the edges, also inside groups and alternatives there (`^(?:a$|b$)`, `^a$|^b$`),
    are harmless: xgrammar matches a pattern whole anyway."""
    stack: list[tuple[Any, bool, bool]] = [(parsed, True, True)]
    while stack:
        items, first_ok, last_ok = stack.pop()
        last = len(items) - 1
        for index, (opcode, argument) in enumerate(items):
            at_first, at_last = first_ok and index == 0, last_ok and index == last
            if opcode == _constants.AT:
                if (argument in _STARTS and not at_first) or (argument in _ENDS and not at_last):
                    return True
            elif opcode == _constants.SUBPATTERN:
                stack.append((argument[-1], at_first, at_last))
            elif opcode == _constants.BRANCH:
                stack.extend((branch, at_first, at_last) for branch in argument[1])
            elif opcode in _REPEATS:
                stack.append((argument[2], False, False))
    return False  # inside a lookaround: dropped with it (`pattern lookaround`)


@functools.lru_cache(maxsize=4096)
def open_ends(pattern: str) -> tuple[bool, bool] | None:
    """Whether text may stand before (first) and after (second) a match of `pattern`: a JSON Schema
    `pattern` is a search (ECMA-262 without implicit anchors), so `ab` allows "xaby". An end is closed
    by an anchor there (in every alternative) or by an unbounded any-character repeat (`.*`), which a
    whole match also lets through. None when the pattern does not parse."""
    parsed = _parsed(pattern, MAX_PATTERN_CHARS)
    if parsed is None:
        return None
    return not _closed(list(parsed), 0), not _closed(list(parsed), -1)


def _closed(items: list[Any], edge: int, depth: int = 0) -> bool:
    if not items or depth > 50:
        return False
    opcode, argument = items[edge]
    if opcode == _constants.AT:
        return argument in (_STARTS if edge == 0 else _ENDS)
    if opcode == _constants.SUBPATTERN:
        return _closed(list(argument[-1]), edge, depth + 1)
    if opcode == _constants.BRANCH:
        return all(_closed(list(branch), edge, depth + 1) for branch in argument[1])
    if opcode in (_constants.MAX_REPEAT, _constants.MIN_REPEAT):
        _low, high, repeated = argument
        inner = list(repeated)
        return high == _constants.MAXREPEAT and len(inner) == 1 and inner[0][0] == _constants.ANY
    return False
