"""The reference side of a proof: what a standard JSON Schema validator says about an instance.

`jsonschema` validates with the schema's own draft (`$schema`; undeclared, the draft its keywords
are spelled in, else 2020-12) and its format checker
(the `format-nongpl` extra checks iri, idn-hostname, uri-template and the rest; without it most
formats pass anything). Each error is placed at the JSON pointer of the keyword that failed *in the
document*, even through `$ref`s, so that it can be compared with a finding's pointer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from exporter.engines.grammars import backends
from exporter.lint.prove.ecma_keywords import with_ecma_patterns
from exporter.schema.walk import escape, resolve

MAX_ERRORS = 16  # per instance: the first ones are enough to place the violation


@dataclass(frozen=True)
class Violation:
    pointer: str  # of the failing keyword in the document, e.g. /properties/tags/uniqueItems
    keyword: str
    message: str
    several: bool = False  # a oneOf that more than one branch matched (exclusivity, not "none")
    route: str = ""  # the way the validator came, through `$ref`s: /properties/a/allOf/0/$ref/type
    trail: tuple[str, ...] = ()  # the document pointers of the subschemas that way passed through


class Validator:
    """One compiled validator per schema; `violations()` is cheap enough to call per candidate."""

    def __init__(self, schema: Any) -> None:
        import jsonschema  # type: ignore[import-untyped]
        from jsonschema import validators

        cls = validators.validator_for(schema, default=_undeclared_draft(schema, jsonschema))
        self.draft = cls.__name__.removesuffix("Validator")
        cls = with_ecma_patterns(cls, schema)  # ECMA-262 patterns in linear time, not `re`
        self._validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        self._root = schema
        self._pointers: dict[int, str] = {}
        _index(schema, "", self._pointers)

    def checks_format(self, name: str) -> bool:
        """Whether the validator asserts this format at all: an unknown one is an annotation."""
        checker = self._validator.format_checker
        return checker is not None and name in checker.checkers

    def violations(self, instance: Any) -> list[Violation]:
        """The top-level errors (an `allOf` or `properties` error is already the inner keyword's).
        A schema the validator cannot evaluate (a pattern it cannot read: ecma_keywords.py) reports
        nothing."""
        out: list[Violation] = []
        try:
            for error in self._validator.iter_errors(instance):
                out.append(self._violation(error))
                out.extend(self._branches(error, 3))
                if len(out) >= MAX_ERRORS:
                    break
        except Exception:
            return []
        return out

    def _branches(self, error: Any, depth: int) -> list[Violation]:
        """Why no branch of a failed anyOf/oneOf matched: each branch's own errors, which say what
        a dropped keyword inside a branch let through."""
        if depth == 0 or error.validator not in ("anyOf", "oneOf") or not error.context:
            return []
        out = []
        for inner in error.context[:MAX_ERRORS]:
            out.append(self._violation(inner))
            out.extend(self._branches(inner, depth - 1))
        return out

    def _violation(self, error: Any) -> Violation:
        keyword = "false" if error.validator is None else str(error.validator)
        parent = self._pointers.get(id(error.schema)) if isinstance(error.schema, dict) else None
        if parent is None:  # a boolean subschema (`false`): place it by its path
            pointer = "".join(f"/{escape(str(part))}" for part in error.absolute_schema_path)
        else:
            pointer = f"{parent}/{escape(keyword)}"
        several = keyword == "oneOf" and not error.context
        route = "".join(f"/{escape(str(part))}" for part in error.absolute_schema_path)
        trail = _trail(self._root, list(error.absolute_schema_path))
        return Violation(pointer, keyword, _short(error.message), several, route, trail)


def _trail(root: Any, path: list[Any]) -> tuple[str, ...]:
    """The document pointers along a validator's schema path, `$ref`s followed where the path goes
    on past one (jsonschema leaves them out of the path): a `$ref`'s target is a place of its own."""
    node, at, out = root, "", [""]
    for part in path:
        hops = 8
        while (
            isinstance(node, dict)
            and isinstance(node.get("$ref"), str)
            and hops
            and (part == "$ref" or part not in node)
        ):
            found = resolve(root, node["$ref"])
            if found is None:
                return tuple(out)
            (at, node), hops = found, hops - 1
            out.append(at)
        if part == "$ref":
            continue
        if isinstance(node, dict) and part in node:
            node, at = node[part], f"{at}/{escape(str(part))}"
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node, at = node[part], f"{at}/{part}"
        else:
            break
        out.append(at)
    return tuple(out)


def _undeclared_draft(schema: Any, jsonschema: Any) -> Any:
    """The validator class for the draft the lint assumes (exporter/engines/grammars/backends.py `draft`)."""
    return {
        "4": jsonschema.Draft4Validator,
        "6": jsonschema.Draft6Validator,
        "7": jsonschema.Draft7Validator,
        "2019-09": jsonschema.Draft201909Validator,
    }.get(backends.draft(schema), jsonschema.Draft202012Validator)


def _index(node: Any, pointer: str, out: dict[int, str]) -> None:
    """id(subschema dict) -> its pointer; iterative, so a deep schema cannot overflow the stack."""
    stack: list[tuple[Any, str]] = [(node, pointer)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, dict):
            out.setdefault(id(value), at)
            stack.extend((child, f"{at}/{escape(str(key))}") for key, child in value.items())
        elif isinstance(value, list):
            stack.extend((child, f"{at}/{number}") for number, child in enumerate(value))


def _short(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def dumps(instance: Any) -> str:
    """The text fed to the engine: compact, as a model would write it."""
    return json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
