"""What a JSON Schema `pattern` costs a grammar engine, from the parsed regex (not from grepping it).

Python's own regular-expression parser (`re._parser`, the engine of the `re` module) reads the
ECMA-262 patterns that schemas use, except for a few syntaxes it rejects (then: None). Bounded
repeats `{m,n}` unroll into n states in a grammar, so the largest finite upper bound is what the
`bounded_quantifier` rule looks at; lookarounds are what xgrammar drops and llguidance refuses.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from typing import Any

_p: Any = importlib.import_module("re._parser")  # the parser behind `re` (Python 3.11+)
_c: Any = importlib.import_module("re._constants")

MAX_PATTERN_CHARS = 10_000


@dataclass(frozen=True)
class PatternFacts:
    max_bounded_repeat: int  # the largest finite {m,n} upper bound (0: none)
    lookaround: bool


@functools.lru_cache(maxsize=4096)
def analyse(pattern: str) -> PatternFacts | None:
    """Facts about a pattern, or None when it cannot be parsed (or is absurdly long)."""
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        parsed = _p.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    largest = 0
    lookaround = False
    stack: list[Any] = [parsed]
    while stack:
        items = stack.pop()
        for op, av in items:
            if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
                _low, high, sub = av
                if high != _c.MAXREPEAT:
                    largest = max(largest, int(high))
                stack.append(sub)
            elif op in (_c.ASSERT, _c.ASSERT_NOT):
                lookaround = True
                stack.append(av[1])
            elif op == _c.SUBPATTERN:
                stack.append(av[-1])
            elif op == _c.BRANCH:
                stack.extend(av[1])
            elif op == getattr(_c, "ATOMIC_GROUP", None):
                stack.append(av)
            elif op == _c.GROUPREF_EXISTS:
                stack.append(av[1])
                if av[2] is not None:
                    stack.append(av[2])
    return PatternFacts(largest, lookaround)
