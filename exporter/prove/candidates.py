"""Candidate counterexamples: small edits of an instance the grammar produced. Pure functions.

A sample the engine's grammar emitted is close to what it accepts; one edit away lie the instances a
dropped keyword lets through: a duplicated array item (`uniqueItems`), a property removed
(`dependentRequired`, `if`/`then`), a value replaced by one the schema itself names (`not: {const}`,
an enum member of another `oneOf` branch, what a `pattern`'s lookahead forbids), a string made longer
or shorter (`maxLength` beside `pattern`), a number moved off its `multipleOf`. Which of them the
grammar accepts and the validator rejects is for exporter/prove/search.py to check.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator
from typing import Any

MAX_POOL = 64  # literals taken from the schema
SECOND_STEPS = 40  # candidates per sample given a second edit
MAX_STRING = 300
LITERAL_KEYS = ("const", "default")
LIST_KEYS = ("enum", "examples")
GENERIC: tuple[Any, ...] = (
    "", "zz zz", "a", "0", "-", "A" * 65, 0, 1, -1, 0.5, 1.5, 1e9, -1e9, 10**12, True, False, None, [], {},
)  # fmt: skip
Path = tuple[Any, ...]
DATE = re.compile(r"^(\d{4})-\d\d-\d\d")


def pool(schema: Any, limit: int = MAX_POOL) -> list[Any]:
    """Values the schema names (const, enum, default, examples, a pattern's literal runs), short
    ones first: the values a `not`, a `oneOf` branch or a lookahead is about."""
    found: dict[str, Any] = {}
    stack = [schema]
    seen = 0
    while stack and seen < 100_000:
        node = stack.pop()
        seen += 1
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in LITERAL_KEYS:
                _add(found, value)
            elif key in LIST_KEYS and isinstance(value, list):
                for item in value[:limit]:
                    _add(found, item)
            elif key == "pattern" and isinstance(value, str):
                for literal in pattern_literals(value):
                    _add(found, literal)
            elif key == "required" and isinstance(value, list):  # names a `not`/`if` is about
                for name in value[:limit]:
                    _add(found, name)
            elif key == "patternProperties" and isinstance(value, dict):
                for name in list(value)[:limit]:
                    for literal in pattern_literals(name):
                        _add(found, literal)
                stack.append(value)
            elif isinstance(value, (dict, list)):
                stack.append(value)
    values = sorted(found.items(), key=lambda item: (len(item[0]), item[0]))
    return [value for _, value in values[:limit]]


def _add(found: dict[str, Any], value: Any) -> None:
    try:
        text = json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return
    if len(text) <= MAX_STRING:
        found.setdefault(text, value)


def pattern_literals(pattern: str) -> list[str]:
    """Strings a regex is about, as Python's own parser reads it: one example of the whole pattern
    and of each lookaround's body (`^((?!(c|C)lyde).)*$` gives "clyde"), and its literal runs."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return []
    out: list[str] = []
    budget = [2_000]
    out.append(_example(parsed, budget))
    _lookarounds(parsed, out, budget)
    return [text for text in dict.fromkeys(out) if text][:16]


def _example(parsed: Any, budget: list[int]) -> str:
    """The shortest-ish string the parsed regex matches, ignoring what it cannot spell."""
    parts: list[str] = []
    for op, value in parsed:
        budget[0] -= 1
        if budget[0] < 0:
            break
        name = str(op)
        if name == "LITERAL":
            parts.append(chr(value))
        elif name == "ANY":
            parts.append("a")
        elif name == "IN":
            parts.append(_in_example(value))
        elif name == "BRANCH":
            parts.append(_example(value[1][0], budget))
        elif name == "SUBPATTERN":
            parts.append(_example(value[-1], budget))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _, sub = value
            parts.append(_example(sub, budget) * min(max(low, 1), 8))
    return "".join(parts)


def _in_example(items: Any) -> str:
    for op, value in items:
        name = str(op)
        if name == "LITERAL":
            return chr(value)
        if name == "RANGE":
            return chr(value[0])
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " "}.get(str(value), "a")
    return "a"


def _lookarounds(parsed: Any, out: list[str], budget: list[int]) -> None:
    for op, value in parsed:
        budget[0] -= 1
        if budget[0] < 0:
            return
        name = str(op)
        if name in ("ASSERT", "ASSERT_NOT"):
            out.append(_example(value[1], budget))
            _lookarounds(value[1], out, budget)
        elif name == "SUBPATTERN":
            _lookarounds(value[-1], out, budget)
        elif name == "BRANCH":
            for branch in value[1]:
                _lookarounds(branch, out, budget)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            _lookarounds(value[2], out, budget)


def places(instance: Any) -> list[tuple[Path, Any]]:
    """Every value in the instance with its path, the root first."""
    out: list[tuple[Path, Any]] = []
    stack: list[tuple[Path, Any]] = [((), instance)]
    while stack:
        path, value = stack.pop()
        out.append((path, value))
        if isinstance(value, dict):
            stack.extend(((*path, key), child) for key, child in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(((*path, index), child) for index, child in reversed(list(enumerate(value))))
    return out


def replace(instance: Any, path: Path, value: Any) -> Any:
    if not path:
        return copy.deepcopy(value)
    out = copy.deepcopy(instance)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = copy.deepcopy(value)
    return out


def edits(value: Any) -> Iterator[Any]:
    """Structural and size edits of one value, the likeliest counterexamples first."""
    if isinstance(value, list):
        if value:
            yield [*value, value[0]]
            yield [value[0], value[0]]
        yield []
        yield value + value
    elif isinstance(value, dict):
        for key in value:
            yield {k: v for k, v in value.items() if k != key}
        yield {**value, "zz": 0}
        yield {}
    elif isinstance(value, str):
        if DATE.match(value):  # a date the shape allows and the calendar does not
            yield DATE.sub(r"\g<1>-02-30", value, count=1)
            yield DATE.sub(r"\g<1>-04-31", value, count=1)
        yield value + value
        yield (value or "a") * (MAX_STRING // max(1, len(value) or 1))
        yield value[:1]
        yield value[:-1]
        yield value.upper()
        yield value + " "
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        yield value + 1
        yield value - 1
        yield -value
        yield value * 1000
        yield value + 0.5
        yield 0


def mutations(instance: Any, literals: list[Any], rng: random.Random, limit: int = 400) -> list[Any]:
    """Instances one edit away: edits of every value first, then every value replaced by a schema
    literal or a generic one, or an object given a schema string as a key (a `patternProperties`
    lookahead is about keys), shuffled so that each sample tries different ones; at most `limit`."""
    spots = places(instance)
    out: list[Any] = []
    for path, value in spots:
        out.extend(replace(instance, path, edited) for edited in edits(value))
    swaps = [(path, new) for path, _ in spots for new in (*literals, *GENERIC)]
    names = [literal for literal in literals if isinstance(literal, str) and literal]
    for path, value in spots:
        if isinstance(value, dict):
            filler = next(iter(value.values()), 0)
            swaps.extend((path, {**value, name: filler}) for name in names)
    rng.shuffle(swaps)
    out.extend(replace(instance, path, new) for path, new in swaps[: max(0, limit - len(out))])
    out = out[:limit]
    if out:  # a few two steps away: a value set *and* a property dropped (`if`/`then`, `not`)
        for first in rng.sample(out, min(len(out), SECOND_STEPS)):
            path, value = rng.choice(places(first))
            second = list(edits(value)) or list(GENERIC)
            out.append(replace(first, path, rng.choice(second)))
    return out
