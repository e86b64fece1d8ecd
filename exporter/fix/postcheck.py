"""The check after decoding: what a family's static schema no longer holds, checked on the output.

`gdx fix` sends the engine one static schema per family (exporter/schema/static.py) and moves what
varied per request (a tenant's enum, a const, the n of "exactly n items", the tools a request
enabled) out of the grammar. This module checks those moved constraints on each output against that
request's own schema, so one file serves every tenant: `check(output, request_schema)` returns one
readable message per broken constraint, `[]` when the output is fine. It costs a walk of the output
(well under a millisecond for a typical answer), where the grammar cost a compile per request.

Standard library only, and no value of any schema in the code: `gdx fix` copies this file as the
service's `check.py` with `MOVED` (the pointers and keywords, as data) filled in. It validates the
subset of JSON Schema a grammar engine compiles (types, enum/const, bounds, lengths, patterns,
properties, items, unions, local `$ref`s); formats and content keywords are not checked.

Patterns are ECMA-262's, as the engine's grammar reads them (exporter/schema/ecma_pattern.py, which
`gdx fix` inlines into check.py with its matcher, ecma_automaton.py: `$` is the end only, `\\d` is
[0-9]), matched by an automaton in linear time; lookaround and backreferences are not read, and say
so. Bounded: the whole check costs at most MAX_STEPS steps (a subschema applied: STEP_COST; a
pattern: its automaton's steps), nesting stops at MAX_DEPTH; past either, and on anything the check
cannot read, the answer is a rejection that says "not checked", never an exception and never a pass.
"""

from __future__ import annotations

import json
import math
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from exporter.schema.ecma_automaton import ecma_search  # gdx fix inlines this module here

# (schema pointer, keyword) pairs the static schema dropped; empty: check every constraint.
MOVED: tuple[tuple[str, str], ...] = ()
MAX_DEPTH = 256
MAX_REF_HOPS = 64
MAX_STEPS = 1_000_000  # the whole check's work (about half a second at most); past it: not checked
STEP_COST = 10  # one subschema applied to one value, in pattern-automaton steps
MAX_DIGITS = 1_000  # digits of a number multipleOf divides exactly; larger: not checked
_DECIMALS = Context(prec=2 * MAX_DIGITS + 700, Emax=10 * MAX_DIGITS, Emin=-10 * MAX_DIGITS)
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: _is_number(v),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
    ),
}


def check_json(text: str | bytes, request_schema: Any, moved: Any = None) -> list[str]:
    """`check` of the output as the engine returned it, JSON text (NaN and Infinity are not JSON)."""
    try:
        output = json.loads(text, parse_constant=_not_json)
    except ValueError as err:
        return [f"/: not JSON: {err}"]
    except RecursionError:
        return ["/: not checked: nested too deep to read"]
    return check(output, request_schema, moved)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check(output: Any, request_schema: Any, moved: Any = None) -> list[str]:
    """Messages for each constraint of `request_schema` that the decoded `output` breaks, among
    `moved` (default MOVED; an empty one means all). What could not be checked (too deep, too much
    work) is always among them, whatever moved: the grammar no longer holds it either."""
    wanted = {(str(p), str(k)) for p, k in (MOVED if moved is None else moved)}
    found: list[_Broken] = []
    walk = _Walk(request_schema)
    try:
        walk.validate(output, request_schema, "", "", found, 0)
    except _Stop:
        pass
    except (RecursionError, MemoryError, ValueError, TypeError, OverflowError) as err:
        return [f"/: not checked: the check failed ({type(err).__name__})"]
    if walk.stopped:
        return [walk.stopped]
    return [f"{b.at or '/'}: {b.message}" for b in found if not wanted or _caused(b, wanted)]


class _Stop(Exception):
    """The check's work or nesting ran out: the walk ends at once (the caller says not checked)."""


class _Broken:
    """A broken constraint: where in the schema, which keyword, where in the output, what; a union
    that no branch matched keeps its branches' failures, which say whether a moved constraint did it."""

    __slots__ = ("at", "causes", "keyword", "message", "where")

    def __init__(
        self, where: str, keyword: str, at: str, message: str, causes: list[_Broken] | None = None
    ) -> None:
        self.where, self.keyword, self.at, self.message = where, keyword, at, message
        self.causes = causes or []


def _caused(broken: _Broken, wanted: set[tuple[str, str]]) -> bool:
    """Whether a moved constraint broke it: itself, or (a union's) one of its branches' failures."""
    stack = [broken]
    seen = 0
    while stack and seen < 100_000:
        item = stack.pop()
        seen += 1
        if (item.where, item.keyword) in wanted:
            return True
        stack.extend(item.causes)
    return False


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class _Walk:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.steps = MAX_STEPS
        self.stopped = ""  # why the walk ended early: the whole answer
        # Up to draft 7 a `$ref` replaces the keywords beside it; from 2019-09 they apply too.
        dialect = str(root.get("$schema", "")) if isinstance(root, dict) else ""
        self.ref_alone = any(f"draft-0{n}" in dialect for n in (3, 4, 6, 7))

    def resolve(self, ref: str) -> tuple[str, Any] | None:
        """A local reference: a JSON pointer (`#/$defs/A`), or an anchor (`#name`: `$anchor`, or a
        draft-4 `id`/`$id` of `#name`)."""
        if not ref.startswith("#"):
            return None
        if ref != "#" and not ref.startswith("#/"):
            return self.anchor(ref[1:])
        node = self.root
        for token in ref[1:].split("/")[1:] if ref != "#" else []:
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isascii() and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return ref[1:], node

    def anchor(self, name: str) -> tuple[str, Any] | None:
        stack: list[tuple[str, Any]] = [("", self.root)]
        seen = 0
        while stack and seen < 200_000:
            pointer, node = stack.pop()
            seen += 1
            if isinstance(node, dict):
                if node.get("$anchor") == name or f"#{name}" in (node.get("id"), node.get("$id")):
                    return pointer, node
                stack.extend((f"{pointer}/{_escape(str(k))}", v) for k, v in node.items())
            elif isinstance(node, list):
                stack.extend((f"{pointer}/{i}", v) for i, v in enumerate(node))
        return None

    def trial(self, value: Any, schema: Any, where: str, at: str, depth: int) -> list[_Broken]:
        """What `value` breaks of `schema`, apart from the output's verdict (a union's branch)."""
        trial: list[_Broken] = []
        self.validate(value, schema, where, at, trial, depth + 1)
        return trial

    def matches(self, value: Any, schema: Any, where: str, depth: int) -> bool:
        return not self.trial(value, schema, where, "", depth)

    def charge(self, steps: int) -> None:
        self.steps -= steps
        if self.steps < 0:
            self.stop(f"/: not checked: more than {MAX_STEPS} steps of work")

    def stop(self, why: str) -> None:
        self.stopped = self.stopped or why
        raise _Stop

    def validate(
        self, value: Any, schema: Any, where: str, at: str, out: list[_Broken], depth: int, hops: int = 0
    ) -> None:
        """Every broken constraint as (schema pointer, keyword, instance pointer, message). `hops`:
        `$ref`s followed in a row on this one value; a cycle of them past MAX_REF_HOPS applies nothing
        new (its schemas were applied here already), while nesting in the output stops at MAX_DEPTH."""
        self.charge(STEP_COST)
        if schema is True or (isinstance(schema, dict) and not schema):
            return
        if schema is False:
            out.append(_Broken(where, "false", at, "no value is allowed here"))
            return
        if not isinstance(schema, dict):
            return
        if depth > MAX_DEPTH:
            self.stop(f"{at or '/'}: nested deeper than {MAX_DEPTH}: not checked")

        def fail(keyword: str, message: str, causes: list[_Broken] | None = None) -> None:
            out.append(_Broken(where, keyword, at, message, causes))

        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self.resolve(ref)
            if target is None:
                fail("$ref", "a reference the check cannot follow")
            elif hops < MAX_REF_HOPS:
                self.validate(value, target[1], target[0], at, out, depth + 1, hops + 1)
            if self.ref_alone:
                return
        kinds = schema.get("type")
        if kinds is not None:
            names = kinds if isinstance(kinds, list) else [kinds]
            if not any(_TYPES.get(n, lambda v: True)(value) for n in names if isinstance(n, str)):
                fail("type", f"is not of type {' or '.join(map(str, names))}")
                return
        if (
            "enum" in schema
            and isinstance(schema["enum"], list)
            and not any(self.equal(value, m) for m in schema["enum"])
        ):
            fail("enum", "is not one of the values this request allows")
        if "const" in schema and not self.equal(value, schema["const"]):
            fail("const", "is not the value this request requires")
        if _is_number(value):
            self.numbers(value, schema, fail)
        if isinstance(value, str):
            self.strings(value, schema, fail)
            self.pattern(value, schema.get("pattern"), fail)
        if isinstance(value, list):
            self.arrays(value, schema, where, at, out, depth, fail)
        if isinstance(value, dict):
            self.objects(value, schema, where, at, out, depth, fail)
        for keyword in ("allOf", "anyOf", "oneOf"):
            branches = schema.get(keyword)
            if not isinstance(branches, list):
                continue
            if keyword == "allOf":
                for i, branch in enumerate(branches):
                    self.validate(value, branch, f"{where}/allOf/{i}", at, out, depth + 1)
                continue
            trials = [
                self.trial(value, b, f"{where}/{keyword}/{i}", at, depth) for i, b in enumerate(branches)
            ]
            matched = sum(not t for t in trials)
            if matched == 0:
                causes = [cause for t in trials for cause in t]
                fail(keyword, f"matches none of the {len(branches)} alternatives this request allows", causes)
            elif keyword == "oneOf" and matched > 1:
                fail(keyword, f"matches {matched} of the alternatives, where exactly one is allowed")
        if "not" in schema and self.matches(value, schema["not"], f"{where}/not", depth):
            fail("not", "matches what this request excludes")
        if "if" in schema:
            branch = "then" if self.matches(value, schema["if"], f"{where}/if", depth) else "else"
            if branch in schema:
                self.validate(value, schema[branch], f"{where}/{branch}", at, out, depth + 1)

    @staticmethod
    def numbers(value: float, schema: dict[str, Any], fail: Any) -> None:
        for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            bound: Any = schema.get(keyword)
            if not _is_number(bound):
                continue  # draft 4's boolean exclusiveMinimum: read beside minimum
            # draft 4: a boolean exclusiveMinimum/exclusiveMaximum makes minimum/maximum exclusive
            exclusive = schema.get("exclusive" + keyword[0].upper() + keyword[1:]) is True
            broken = {
                "minimum": value <= bound if exclusive else value < bound,
                "maximum": value >= bound if exclusive else value > bound,
                "exclusiveMinimum": value <= bound, "exclusiveMaximum": value >= bound,
            }[keyword]  # fmt: skip
            if broken:
                fail(keyword, f"is out of this request's range ({keyword} {_show(bound)})")
        step: Any = schema.get("multipleOf")
        if _is_number(step) and step > 0:
            multiple = _multiple(value, step)
            if multiple is None:
                fail(
                    "multipleOf",
                    f"is too large or too precise to check against multipleOf {_show(step)}: not checked",
                )
            elif not multiple:
                fail("multipleOf", f"is not a multiple of {_show(step)}")

    @staticmethod
    def strings(value: str, schema: dict[str, Any], fail: Any) -> None:
        length = len(value)
        if isinstance(schema.get("minLength"), int) and length < schema["minLength"]:
            fail("minLength", f"is shorter than this request allows ({length} < {schema['minLength']})")
        if isinstance(schema.get("maxLength"), int) and length > schema["maxLength"]:
            fail("maxLength", f"is longer than this request allows ({length} > {schema['maxLength']})")

    def search(self, pattern: str, text: str) -> tuple[bool | None, str]:
        """Whether the ECMA-262 pattern matches in text, its steps charged; None: not read (why)."""
        verdict = ecma_search(pattern, text, max(0, self.steps) + 1)
        self.charge(verdict.steps)
        return verdict.matched, verdict.why.removeprefix("not checked: ")

    def pattern(self, value: str, pattern: Any, fail: Any) -> None:
        if not isinstance(pattern, str):
            return
        matched, why = self.search(pattern, value)
        if matched is None:
            fail("pattern", f"has a pattern the check does not read ({why}): not checked")
        elif not matched:
            fail("pattern", "does not match the pattern this request requires")

    def arrays(self, value: list[Any], schema: dict[str, Any], where: str, at: str, out: list[_Broken],
               depth: int, fail: Any) -> None:  # fmt: skip
        n = len(value)
        if isinstance(schema.get("minItems"), int) and n < schema["minItems"]:
            fail("minItems", f"has {n} items, fewer than this request's {schema['minItems']}")
        if isinstance(schema.get("maxItems"), int) and n > schema["maxItems"]:
            fail("maxItems", f"has {n} items, more than this request's {schema['maxItems']}")
        if schema.get("uniqueItems") is True and n > 1:
            seen: set[str] = set()
            for item in value:
                text = json.dumps(item, sort_keys=True)  # JSON equality: 1 and 1.0 differ here, as before
                self.charge(len(text) // 16 + 1)
                seen.add(text)
            if len(seen) < n:
                fail("uniqueItems", "has repeated items")
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft 7 tuples
            prefix, items = items, schema.get("additionalItems")
        start = 0
        if isinstance(prefix, list):
            for i, sub in enumerate(prefix[:n]):
                self.validate(
                    value[i],
                    sub,
                    f"{where}/{'items' if isinstance(schema.get('items'), list) else 'prefixItems'}/{i}",
                    f"{at}/{i}",
                    out,
                    depth + 1,
                )
            start = len(prefix)
        if items is not None and not isinstance(items, list):
            key = "additionalItems" if isinstance(schema.get("items"), list) else "items"
            for i in range(start, n):
                self.validate(value[i], items, f"{where}/{key}", f"{at}/{i}", out, depth + 1)
        contains = schema.get("contains")
        if contains is not None:
            count = sum(self.matches(v, contains, f"{where}/contains", depth) for v in value)
            low = schema.get("minContains", 1)
            if isinstance(low, int) and count < low:
                fail("contains", f"has {count} items of the kind this request requires, fewer than {low}")
            if isinstance(schema.get("maxContains"), int) and count > schema["maxContains"]:
                fail("maxContains", f"has {count} items of that kind, more than {schema['maxContains']}")

    def objects(self, value: dict[str, Any], schema: dict[str, Any], where: str, at: str, out: list[_Broken],
                depth: int, fail: Any) -> None:  # fmt: skip
        for name in schema.get("required", []) if isinstance(schema.get("required"), list) else []:
            if not isinstance(name, str):
                fail("required", "lists a name that is not a string: not checked")
            elif name not in value:
                fail("required", f"lacks `{name}`, which this request requires")
        n = len(value)
        if isinstance(schema.get("minProperties"), int) and n < schema["minProperties"]:
            fail("minProperties", f"has {n} properties, fewer than {schema['minProperties']}")
        if isinstance(schema.get("maxProperties"), int) and n > schema["maxProperties"]:
            fail("maxProperties", f"has {n} properties, more than {schema['maxProperties']}")
        props: dict[str, Any] = _map(schema.get("properties"))
        patterns: dict[str, Any] = _map(schema.get("patternProperties"))
        names = schema.get("propertyNames")
        if names is not None:
            for name in value:
                self.validate(name, names, f"{where}/propertyNames", f"{at}/{_escape(name)}", out, depth + 1)
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            here = f"{at}/{_escape(name)}"
            covered = False
            if name in props:
                covered = True
                self.validate(item, props[name], f"{where}/properties/{_escape(name)}", here, out, depth + 1)
            for pattern, sub in patterns.items():
                hit, why = self.search(pattern, name)
                if hit is None:
                    covered = True
                    fail(
                        "patternProperties",
                        f"has `{name}`, and a pattern the check does not read ({why}): not checked",
                    )
                elif hit:
                    covered = True
                    self.validate(
                        item, sub, f"{where}/patternProperties/{_escape(pattern)}", here, out, depth + 1
                    )
            if not covered and extra is not None:
                if extra is False:
                    fail("additionalProperties", f"has `{name}`, which this request does not allow")
                else:
                    self.validate(item, extra, f"{where}/additionalProperties", here, out, depth + 1)
        dependent = schema.get("dependentRequired") or schema.get("dependencies")
        if isinstance(dependent, dict):
            for name, needs in dependent.items():
                if name in value and isinstance(needs, list):
                    for need in needs:
                        if not isinstance(need, str):
                            fail("dependentRequired", "lists a name that is not a string: not checked")
                        elif need not in value:
                            fail("dependentRequired", f"has `{name}` without `{need}`")
                elif name in value and isinstance(needs, dict):
                    self.validate(value, needs, f"{where}/dependencies/{_escape(name)}", at, out, depth + 1)

    def equal(self, a: Any, b: Any) -> bool:
        """JSON equality (1 == 1.0, but true is not 1), iterative, each pair charged."""
        stack = [(a, b)]
        while stack:
            x, y = stack.pop()
            self.charge(1)
            if isinstance(x, bool) or isinstance(y, bool):
                if type(x) is not type(y) or x != y:
                    return False
            elif isinstance(x, dict) and isinstance(y, dict):
                if x.keys() != y.keys():
                    return False
                stack.extend((x[k], y[k]) for k in x)
            elif isinstance(x, list) and isinstance(y, list):
                if len(x) != len(y):
                    return False
                stack.extend(zip(x, y, strict=True))
            elif isinstance(x, (dict, list)) or isinstance(y, (dict, list)):
                return False
            elif _is_number(x) and _is_number(y):
                if _compare(x, y) != 0:
                    return False
            elif type(x) is not type(y) or x != y:
                return False
        return True


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compare(a: float, b: float) -> int:
    """-1, 0, 1 of two JSON numbers, exactly (an int and a float compare exactly in Python)."""
    return (a > b) - (a < b)


def _digits(value: float) -> int:
    """About how many decimal digits a number's exact value takes (a float: its repr's)."""
    if isinstance(value, int):
        return value.bit_length() * 10 // 33 + 1
    return len(repr(value))


def _decimal(value: float) -> Decimal:
    """A JSON number as the decimal it was written as (a float: its shortest repr, as JSON wrote it)."""
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _multiple(value: float, step: float) -> bool | None:
    """Whether value is an exact multiple of step, in decimal (0.3 is a multiple of 0.1); None: a
    number too large or too precise for the bounded arithmetic (or not finite)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(step, float) and not math.isfinite(step):
        return None
    if _digits(value) > MAX_DIGITS or _digits(step) > MAX_DIGITS:
        return None
    try:
        return _DECIMALS.remainder(_decimal(value), _decimal(step)).is_zero()
    except (InvalidOperation, ArithmeticError, ValueError):
        return None


def _show(value: Any, limit: int = 40) -> str:
    """A number for a message, shortened (a 400-digit bound is quoted by its first digits)."""
    if isinstance(value, int) and _digits(value) > limit:
        return f"a number of about {_digits(value)} digits"
    text = repr(value) if isinstance(value, float) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
