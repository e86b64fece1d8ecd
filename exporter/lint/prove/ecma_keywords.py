"""jsonschema's pattern keywords with ECMA-262 semantics in linear time (exporter/schema/ecma_regex.py).

jsonschema runs `pattern`, `patternProperties` and `additionalProperties` through Python's `re.search`,
which backtracks: a schema's own pattern on a schema's own constant (the prover's candidates are
taken from the schema) could hold `gdx lint` and `gdx fix` for minutes, and its `$`, `\\d`, `\\w` are
not ECMA's. These replacements give the same errors. A pattern neither engine reads (lookaround, a
backreference) raises NotEvaluated: the reference validator then says nothing about that instance
rather than guess. `unevaluatedProperties` beside `patternProperties` is not evaluated either (its
helper in jsonschema searches with `re`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from exporter.schema import ecma_regex


class NotEvaluated(Exception):
    """A pattern the validator cannot evaluate here: the instance gets no verdict."""


def matches(pattern: Any, text: str) -> bool:
    if not isinstance(pattern, str):
        raise NotEvaluated("a pattern that is not a string")
    verdict = ecma_regex.search(pattern, text)
    if verdict.matched is None:
        raise NotEvaluated(verdict.why)
    return verdict.matched


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

    if validator.is_type(instance, "string") and not matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if matches(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    return [
        name
        for name in instance
        if name not in properties and not any(matches(pattern, name) for pattern in patterns)
    ]


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema._utils import extras_msg  # type: ignore[import-untyped]
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(extra, "object"):
        for name in extras:
            yield from validator.descend(instance[name], extra, path=name)
    elif not extra and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % extras_msg(sorted(extras, key=str)))


def with_ecma_patterns(cls: Any, schema: Any) -> Any:
    """The validator class `cls` with the pattern keywords above (and, where the schema has both
    `unevaluatedProperties` and `patternProperties`, an `unevaluatedProperties` that is not run)."""
    from jsonschema import validators  # type: ignore[import-untyped]

    keywords: dict[str, Any] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if _has_both(schema) and "unevaluatedProperties" in cls.VALIDATORS:

        def unevaluated(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if validator.is_type(instance, "object"):
                raise NotEvaluated("unevaluatedProperties beside patternProperties")
            return
            yield

        keywords["unevaluatedProperties"] = unevaluated
    return validators.extend(cls, keywords)


def _has_both(schema: Any, limit: int = 200_000) -> bool:
    seen: set[str] = set()
    stack = [schema]
    while stack and limit:
        limit -= 1
        node = stack.pop()
        if isinstance(node, dict):
            seen.update(key for key in ("unevaluatedProperties", "patternProperties") if key in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return len(seen) == 2 or not limit
