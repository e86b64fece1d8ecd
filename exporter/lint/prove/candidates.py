"""Candidate counterexamples: small edits of an instance the grammar produced. Pure functions.

A sample the engine's grammar emitted is close to what it accepts; one edit away lie the instances a
dropped keyword lets through: a duplicated array item (`uniqueItems`), a property removed
(`dependentRequired`, `if`/`then`), a value replaced by one the schema itself names (`not: {const}`,
an enum member of another `oneOf` branch, what a `pattern`'s lookahead forbids), a string made longer
or shorter (`maxLength` beside `pattern`), a number moved off its `multipleOf`. Which of them the
grammar accepts and the validator rejects is for exporter/lint/prove/search.py to check.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator
from typing import Any, TypeGuard

from exporter.engines.grammars.compiled import declared
from exporter.schema.values import is_number
from exporter.schema.walk import escape, resolve

MAX_POOL = 64  # literals taken from the schema
MAX_REPEAT_EXAMPLE = 256  # a pattern's `{24}` is spelled out 24 times; beyond this, once
SECOND_STEPS = 40  # candidates per sample given a second edit
MAX_BOUND = 20_000  # longest string made to pass a maxLength
MAX_SPOTS = 60  # places edited per instance: each edit copies the whole instance
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
        elif name == "NOT_LITERAL":  # `[^/]`
            parts.append("a" if value != ord("a") else "b")
        elif name == "IN":
            parts.append(_in_example(value))
        elif name == "BRANCH":
            parts.append(_example(value[1][0], budget))
        elif name == "SUBPATTERN":
            parts.append(_example(value[-1], budget))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _, sub = value
            parts.append(_example(sub, budget) * (low if 0 < low <= MAX_REPEAT_EXAMPLE else 1))
    return "".join(parts)


def _in_example(items: Any) -> str:
    """A character of a class; of a negated class (`[^/]`), one it does not exclude."""
    if any(str(op) == "NEGATE" for op, _ in items):
        for char in "a0A_-. x":
            if not any(_in_item(op, value, char) for op, value in items):
                return char
        return "a"
    for op, value in items:
        name = str(op)
        if name == "LITERAL":
            return chr(value)
        if name == "RANGE":
            return chr(value[0])
        if name == "CATEGORY":
            return {"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " "}.get(str(value), "a")
    return "a"


def _in_item(op: Any, value: Any, char: str) -> bool:
    name = str(op)
    if name == "LITERAL":
        return chr(value) == char
    if name == "RANGE":
        return bool(value[0] <= ord(char) <= value[1])
    if name == "CATEGORY":
        tests = {"CATEGORY_DIGIT": str.isdigit, "CATEGORY_SPACE": str.isspace, "CATEGORY_WORD": str.isalnum}
        test = tests.get(str(value))
        return bool(test(char) or (str(value) == "CATEGORY_WORD" and char == "_")) if test else False
    return False


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
        yield value + 0.001  # off a decimal step (multipleOf 0.01)
        yield 0


def mutations(instance: Any, literals: list[Any], rng: random.Random, limit: int = 400) -> Iterator[Any]:
    """Instances one edit away: edits of every value first, then every value replaced by a schema
    literal or a generic one, or an object given a schema string as a key (a `patternProperties`
    lookahead is about keys), shuffled so that each sample tries different ones; at most `limit`,
    then a few two edits away. Lazy: each copies the whole instance, and the search has a budget."""
    spots = places(instance)
    if len(spots) > MAX_SPOTS:  # a large instance: a different handful of places each time
        spots = rng.sample(spots, MAX_SPOTS)
    out: list[Any] = []
    for path, value in spots:
        for edited in edits(value):
            if len(out) >= limit:
                break
            out.append(replace(instance, path, edited))
            yield out[-1]
    swaps = [(path, new) for path, _ in spots for new in (*literals, *GENERIC)]
    names = [literal for literal in literals if isinstance(literal, str) and literal]
    for path, value in spots:
        if isinstance(value, dict):
            filler = next(iter(value.values()), 0)
            swaps.extend((path, {**value, name: filler}) for name in names)
    rng.shuffle(swaps)
    for path, new in swaps[: max(0, limit - len(out))]:
        out.append(replace(instance, path, new))
        yield out[-1]
    if out:  # a few two steps away: a value set *and* a property dropped (`if`/`then`, `not`)
        for first in rng.sample(out, min(len(out), SECOND_STEPS)):
            path, value = rng.choice(places(first))
            second = list(edits(value)) or list(GENERIC)
            yield replace(first, path, rng.choice(second))


FORMAT_EXAMPLES = {
    "date": "2023-01-15", "date-time": "2023-01-15T10:00:00Z", "time": "10:00:00Z",
    "email": "a@example.com", "idn-email": "a@example.com", "hostname": "example.com",
    "idn-hostname": "example.com", "ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "uri": "http://example.com/a",
    "uri-reference": "http://example.com/a", "iri": "http://example.com/a",
    "iri-reference": "http://example.com/a", "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "duration": "P1D", "json-pointer": "/a", "regex": "a+",
}  # fmt: skip
MAX_EXEMPLAR_NODES = 400
MAX_EXEMPLAR_DEPTH = 12
MAX_EXEMPLAR_PROPERTIES = 64


def exemplar(schema: Any, branch: int = 0) -> Any:
    """An instance the schema describes with *every* property filled, not only the required ones
    (the grammar's random walks rarely reach a date three optional objects down): the `branch`-th
    choice of each union and enum. A starting point for mutations, not necessarily valid."""
    return Exemplar(schema, branch).instance


class Exemplar:
    """exemplar() and, for each subschema it went through (by JSON pointer), the places in the
    instance it made: where to edit to break what a finding at that subschema names."""

    def __init__(self, schema: Any, branch: int = 0, aim: str = "") -> None:
        self.root = schema
        self.branch = branch
        self.aim = aim  # a subschema to reach: the union branch that leads there is taken
        self.budget = MAX_EXEMPLAR_NODES
        self.where: dict[str, list[Path]] = {}
        self.instance = self._make(schema, "", (), 0)

    def places(self, pointer: str, limit: int = 3) -> list[Path]:
        return self.where.get(pointer, [])[:limit]

    def _make(self, schema: Any, pointer: str, path: Path, depth: int) -> Any:
        self.budget -= 1
        self.where.setdefault(pointer, []).append(path)
        hops = 8
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and hops:
            found = resolve(self.root, schema["$ref"])
            if found is None:
                schema = {}
                break
            pointer, schema, hops = found[0], found[1], hops - 1
            self.where.setdefault(pointer, []).append(path)
        if not isinstance(schema, dict) or depth > 2 * MAX_EXEMPLAR_DEPTH:
            return None if schema is False else "a"
        branch = self.branch
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return copy.deepcopy(schema["enum"][branch % len(schema["enum"])])
        for union in ("anyOf", "oneOf"):
            options = schema.get(union)
            if isinstance(options, list) and options:
                pick = self._toward(options, f"{pointer}/{union}")
                chosen = self._make(options[pick], f"{pointer}/{union}/{pick}", path, depth + 1)
                return self._siblings(schema, pointer, path, depth, chosen)
        parts = schema.get("allOf")
        if isinstance(parts, list) and parts:
            each = [self._make(part, f"{pointer}/allOf/{i}", path, depth + 1) for i, part in enumerate(parts)]
            if all(isinstance(part, dict) for part in each):
                merged = {key: value for part in each for key, value in part.items()}
                return self._siblings(schema, pointer, path, depth, merged)
            return each[0]
        made = self._typed(schema, pointer, path, depth)
        if branch % 2 == 0:  # what a dropped `if` or `not` is about: its condition met
            for key in ("if", "not"):
                if isinstance(schema.get(key), dict):
                    about = self._make(schema[key], f"{pointer}/{key}", path, depth + 1)
                    if isinstance(made, dict) and isinstance(about, dict):
                        made = {**made, **about}
                    elif type(made) is type(about) and not isinstance(made, (dict, list)):
                        made = about  # `not: {const: "admin"}` beside `type: string`: "admin"
        return made

    def _siblings(self, schema: dict[str, Any], pointer: str, path: Path, depth: int, made: Any) -> Any:
        """The `properties` beside a union, which xgrammar drops: their values too (a branch's own
        value kept where it has one), so that edits can break what they ask."""
        properties = schema.get("properties")
        if not isinstance(made, dict) or not isinstance(properties, dict) or self._lean(depth):
            return made
        if self.branch % 2:  # odd variants keep the branch's value alone: what a closed branch emits
            return made
        for key, sub in list(properties.items())[:MAX_EXEMPLAR_PROPERTIES]:
            place = f"{pointer}/properties/{escape(key)}"
            value = self._make(sub, place, (*path, key), depth + 1)
            if isinstance(made.get(key), dict) and isinstance(value, dict):
                made[key] = {**value, **made[key]}  # the branch's own fields win
            elif key not in made:
                made[key] = value
        return made

    def _toward(self, options: list[Any], pointer: str) -> int:
        """The branch that leads to the aim; else the variant's."""
        for i, option in enumerate(options):
            if self._leads(option, f"{pointer}/{i}"):
                return i
        return self.branch % len(options)

    def _leads(self, schema: Any, pointer: str) -> bool:
        """Whether the aim lies under this place, or under its `$ref`'s target."""
        if not self.aim:
            return False
        places = [pointer]
        if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            found = resolve(self.root, schema["$ref"])
            places += [found[0]] if found is not None else []
        return any(self.aim == p or self.aim.startswith(p + "/") for p in places)

    def _lean(self, depth: int) -> bool:
        """Past the budget or the depth: only what the schema requires (a recursive definition
        then ends in empty arrays and required fields, not in placeholders)."""
        return self.budget < 0 or depth > MAX_EXEMPLAR_DEPTH

    def _typed(self, schema: dict[str, Any], pointer: str, path: Path, depth: int) -> Any:
        kinds = declared(schema)
        if not kinds:
            implied = "object" if "properties" in schema or "additionalProperties" in schema else None
            implied = implied or ("array" if "items" in schema or "prefixItems" in schema else None)
            kinds = [implied] if implied else ["string"]
        useful = [k for k in kinds if k != "null"] or kinds
        name = useful[self.branch % len(useful)]
        if name == "object":
            return self._object(schema, pointer, path, depth)
        if name == "array":
            return self._array(schema, pointer, path, depth)
        if name in ("integer", "number"):
            low, high = schema.get("minimum"), schema.get("maximum")
            value = low if is_number(low) else 1
            if is_number(high) and value > high:
                value = high
            return int(value) if name == "integer" and value == int(value) else value
        if name == "boolean":
            return True
        if name == "null":
            return None
        return _string(schema)

    def _object(self, schema: dict[str, Any], pointer: str, path: Path, depth: int) -> dict[str, Any]:
        found = schema.get("properties")
        properties: dict[str, Any] = found if isinstance(found, dict) else {}
        if self._lean(depth):  # large enough: the required properties only from here on
            listed = schema.get("required")
            wanted: list[Any] = listed if isinstance(listed, list) else []
            properties = {
                key: sub
                for key, sub in properties.items()
                if key in wanted or self._leads(sub, f"{pointer}/properties/{escape(key)}")
            }
        listing = list(properties.items())[:MAX_EXEMPLAR_PROPERTIES]
        if self.branch % 2:  # the budget runs out elsewhere: the last properties filled first
            listing.reverse()
        filled = {
            key: self._make(sub, f"{pointer}/properties/{escape(key)}", (*path, key), depth + 1)
            for key, sub in listing
        }
        made: dict[str, Any] = {key: filled[key] for key in properties if key in filled}  # xgrammar's order
        named = schema.get("patternProperties") if not self._lean(depth) else None  # one entry a pattern
        for pattern, sub in list(named.items() if isinstance(named, dict) else ())[:4]:
            key = next(iter(pattern_literals(pattern)), "") or "a"
            where = f"{pointer}/patternProperties/{escape(pattern)}"
            made.setdefault(key, self._make(sub, where, (*path, key), depth + 1))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not self._lean(depth):
            made.setdefault(
                "zz", self._make(extra, f"{pointer}/additionalProperties", (*path, "zz"), depth + 1)
            )
        return made

    def _array(self, schema: dict[str, Any], pointer: str, path: Path, depth: int) -> list[Any]:
        listed = schema.get("prefixItems")
        prefix: list[Any] = listed if isinstance(listed, list) else []
        out = [
            self._make(sub, f"{pointer}/prefixItems/{i}", (*path, i), depth + 1)
            for i, sub in enumerate(prefix)
        ]
        items = schema.get("items")
        if isinstance(items, dict):
            low = schema.get("minItems")
            low = int(low) if isinstance(low, int) and not isinstance(low, bool) else 0
            count = min(low, 4) if self._lean(depth) else max(1, min(low, 4))
            out.extend(
                self._make(items, f"{pointer}/items", (*path, len(out)), depth + 1) for _ in range(count)
            )
        return out


def targeted(made: Exemplar, pointer: str, literals: list[Any]) -> Iterator[Any]:
    """Edits of the values the subschema at `pointer` made: each value edited, swapped for a
    schema literal or a generic value of every type (a several-branch `allOf` takes anything).
    Lazy: each candidate copies the whole instance, and the search stops on its budget."""
    found = resolve(made.root, "#" + pointer)
    schema = found[1] if found is not None and isinstance(found[1], dict) else {}
    for path in made.places(pointer):
        try:
            value = at(made.instance, path)
        except (KeyError, IndexError, TypeError):
            continue
        for new in (*past_bounds(schema, value), *edits(value), *literals[:16], *GENERIC):
            yield replace(made.instance, path, new)


def past_bounds(schema: dict[str, Any], value: Any) -> list[Any]:
    """The value just past what its own subschema bounds: one character over `maxLength` (the
    first character repeated, which most patterns still match), one under `minLength`, a number
    off its `multipleOf` step."""
    out: list[Any] = []
    high, low, step = schema.get("maxLength"), schema.get("minLength"), schema.get("multipleOf")
    if isinstance(value, str):
        if _count(high) and len(value) <= high < MAX_BOUND:
            out.append((value[:1] or "a") * (int(high) + 1 - len(value)) + value)
        if _count(low) and 0 < low <= len(value):
            out.append(value[: int(low) - 1])
    elif is_number(value) and _count(step, 0):
        out.extend((value + step / 2, value + step * 0.3))
    return out


def _count(value: Any, least: float = 0) -> TypeGuard[float]:
    return is_number(value) and value >= least and value == value


def at(instance: Any, path: Path) -> Any:
    """The value at `path` in the instance."""
    for key in path:
        instance = instance[key]
    return instance


def _string(schema: dict[str, Any]) -> str:
    named = schema.get("format")
    if isinstance(named, str) and named in FORMAT_EXAMPLES:
        return FORMAT_EXAMPLES[named]
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        found = pattern_literals(pattern)
        if found:
            return found[0]
    low = schema.get("minLength")
    length = int(low) if isinstance(low, int) and not isinstance(low, bool) and 0 < low <= MAX_STRING else 1
    return "a" * length
