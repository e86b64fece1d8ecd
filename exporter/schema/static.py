"""The static schema of a family: one schema that accepts every output any of its variants accepts.

A family's variants differ where a service injects per-request values (a tenant's enum, a const, the
n of "exactly n items", a range, the tools a tenant enabled, a timestamp in a description). Sent as
one static schema, the family compiles once and stays cached; what varied moves out of the grammar
into a check after decoding (`gdx fix`). `merge` builds that schema position by position:
- values that differ are joined: enum and const members into one enum (up to `max_enum` members,
  else the keyword goes, and strings keep the lengths every member has: `minLength` the shortest's,
  `maxLength` the longest's, where the position has no length bounds of its own), lower bounds to
  the lowest, upper bounds to the highest, `type` lists into their union, union branches (`anyOf`,
  and `oneOf` as `anyOf`) into every branch seen, `properties` and `$defs` name by name, `required`
  to the names every variant requires;
- a keyword that constrains in some variants and is absent from others goes (absent is unbounded),
  as does a `pattern`, `format` or `multipleOf` that differs; annotations that differ
  (`description`, `title`, `default`, `examples`) go;
- anything else that differs (two `items` lists of other lengths, a `$ref` to elsewhere) cannot be
  joined without changing what is accepted: `merge` says where instead of guessing.
Each constraint that no longer holds for a variant is listed (`Moved`: its pointer and keyword), so
that the check after decoding knows what to look at. Keys keep the order they first appear in (the
engine emits properties in that order); enum members and union branches come out sorted.
Pure, standard library only; hostile input gives `Merged.error`, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.schema.family.definitions import stable
from exporter.schema.identity import canonical_json
from exporter.schema.walk import escape

MAX_ENUM = 64  # an enum of every value seen, up to this many; past it the type alone (the check holds them)
MAX_NODES = 200_000  # schema positions merged across all variants
LOWER = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"})
UPPER = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"})
DROPPED_WHEN_DIFFERENT = frozenset({"pattern", "format", "multipleOf", "contentEncoding", "contentMediaType"})
ANNOTATIONS = frozenset({
    "description", "title", "default", "examples", "example", "$comment", "deprecated", "readOnly",
    "writeOnly", "$id", "$schema", "$anchor",
})  # fmt: skip
NAMED_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})
DEFINITION_MAPS = frozenset({"$defs", "definitions"})  # constrain nothing alone: kept when some lack them
ONE_SCHEMA = frozenset({
    "items", "additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems",
    "propertyNames", "contains", "not", "if", "then", "else",
})  # fmt: skip
UNIONS = frozenset({"anyOf", "oneOf"})
# Where a wider subschema accepts less (`not`) or picks another branch (`if`): no union of them is wider.
NOT_MONOTONE = frozenset({"not", "if", "then", "else"})
# Keywords whose absence means "anything": a variant without them accepts more, so they go.
CONSTRAINTS = LOWER | UPPER | DROPPED_WHEN_DIFFERENT | frozenset({
    "enum", "const", "type", "required", "properties", "patternProperties", "additionalProperties",
    "items", "prefixItems", "additionalItems", "contains", "not", "if", "then", "else", "allOf", "anyOf",
    "oneOf", "propertyNames", "dependentRequired", "dependentSchemas", "uniqueItems",
    "unevaluatedProperties", "unevaluatedItems", "$ref",
})  # fmt: skip
# Every keyword that validates (2020-12 and draft 7); any other is an annotation to validators and engines.
KNOWN = CONSTRAINTS | NAMED_MAPS | ANNOTATIONS | frozenset({
    "dependencies", "dependentRequired", "$defs", "definitions", "$dynamicRef", "$dynamicAnchor",
    "$recursiveRef", "$recursiveAnchor", "$vocabulary", "contentSchema",
})  # fmt: skip
HOSTILE = (RecursionError, ValueError, TypeError, OverflowError)


@dataclass(frozen=True, slots=True)
class Moved:
    """A constraint some variant holds that the static schema does not: the check after decoding
    reads it from that request's own schema."""

    pointer: str  # where, in the variants' schemas (and the static schema)
    keyword: str


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A change to the schema that keeps what it accepts (nothing for the check to hold), or, with
    `done` false, why a finding's place could not be changed so: the report lists both."""

    pointer: str  # in the schema as the request sends it
    what: str
    done: bool = True


@dataclass(frozen=True, slots=True)
class Merged:
    schema: Any  # the static schema; None when the variants cannot be joined
    moved: tuple[Moved, ...]
    error: str = ""  # why not, with the pointer
    rewrites: tuple[Rewrite, ...] = ()  # what changed without moving to the check (nested unions)


class _Conflict(Exception):
    pass


class _Merger:
    def __init__(self, max_enum: int, refs: set[str]) -> None:
        self.max_enum = max_enum
        self.refs = refs  # every `$ref` of the variants: what points into an unknown keyword
        self.moved: dict[tuple[str, str], None] = {}
        self.nodes = 0
        self.lengths: dict[str, tuple[int, int]] = {}  # a string enum that went: its members' lengths

    def move(self, pointer: str, keyword: str) -> None:
        self.moved[(pointer, keyword)] = None

    def schemas(self, values: Sequence[Any], pointer: str) -> Any:
        """One schema accepting what each of `values` (schemas at one position) accepts."""
        self.nodes += len(values)
        if self.nodes > MAX_NODES:
            raise _Conflict(f"more than {MAX_NODES} schema positions")
        if all(isinstance(v, bool) for v in values):
            return any(values)
        if any(v is True for v in values):
            self.move(pointer, "schema")  # one variant accepts anything here
            return True
        values = [v for v in values if v is not False]  # false accepts nothing: no constraint to keep
        if not all(isinstance(v, dict) for v in values):
            raise _Conflict(f"{pointer or '/'}: a schema that is not an object")
        if len({canonical_json(v) for v in values}) == 1:
            return values[0]
        out: dict[str, Any] = {}
        for key in _first_seen(values):
            present = [v[key] for v in values if key in v]
            at = f"{pointer}/{escape(key)}"
            if len(present) < len(values) and key not in DEFINITION_MAPS:
                if key in CONSTRAINTS:  # absent from a variant: unbounded there, so unbounded here
                    self.move(pointer, key)
                continue  # an annotation or an unknown keyword: no constraint to keep
            differ = len({canonical_json(v) for v in present}) > 1
            merged = self.keyword(key, present, at, pointer)
            if merged is _GONE:
                continue
            # two exclusive branch lists joined are not exclusive; several consts are an enum
            target = {"oneOf": "anyOf", "const": "enum"}.get(key, key) if differ else key
            if target in out or (target != key and any(target in v for v in values)):
                self.move(pointer, key)  # `enum` beside `const`, `anyOf` beside `oneOf`: the check holds it
                continue
            out[target] = merged
        if pointer in self.lengths and not ({"minLength", "maxLength", "enum", "const"} & out.keys()):
            out["minLength"], out["maxLength"] = self.lengths[pointer]  # what every member shares
        return out

    def keyword(self, key: str, present: list[Any], at: str, pointer: str) -> Any:
        if len({canonical_json(v) for v in present}) == 1:
            return present[0]
        if key in ANNOTATIONS:
            return _GONE
        if key in ("enum", "const"):
            members: dict[str, Any] = {}
            for value in present:
                for member in value if key == "enum" and isinstance(value, list) else [value]:
                    members.setdefault(canonical_json(member), member)
            self.move(pointer, key)
            if key == "enum" and not all(isinstance(v, list) for v in present):
                return _GONE
            if len(members) <= self.max_enum:
                return [members[k] for k in sorted(members)]
            if all(isinstance(m, str) for m in members.values()):
                sizes = [len(m) for m in members.values()]
                self.lengths[pointer] = (min(sizes), max(sizes))
            return _GONE
        if key in LOWER or key in UPPER:
            numbers = [v for v in present if isinstance(v, int | float) and not isinstance(v, bool)]
            self.move(pointer, key)
            if len(numbers) < len(present):
                return _GONE  # draft-4 boolean exclusiveMinimum or the like, mixed: unbounded
            return min(numbers) if key in LOWER else max(numbers)
        if key in DROPPED_WHEN_DIFFERENT:
            self.move(pointer, key)
            return _GONE
        if key == "type":
            kinds: set[str] = set()
            for value in present:
                kinds.update(value if isinstance(value, list) else [value])
            if not all(isinstance(k, str) for k in kinds):
                raise _Conflict(f"{at}: a type that is not a name")
            self.move(pointer, key)
            return sorted(kinds) if len(kinds) > 1 else next(iter(kinds))
        if key == "required":
            lists = [set(v) for v in present if isinstance(v, list)]
            if len(lists) < len(present):
                raise _Conflict(f"{at}: not a list")
            self.move(pointer, key)
            common = set.intersection(*lists)
            return [name for name in dict.fromkeys(present[0]) if name in common]
        if key in NAMED_MAPS:
            return self.named(present, at)
        if key in UNIONS:
            return self.union(present, at)
        if key in ("allOf", "prefixItems") or (key == "items" and any(isinstance(v, list) for v in present)):
            lengths = {len(v) if isinstance(v, list) else -1 for v in present}
            if len(lengths) != 1 or -1 in lengths:
                raise _Conflict(f"{at}: lists of different lengths")
            return [self.schemas([v[i] for v in present], f"{at}/{i}") for i in range(lengths.pop())]
        if key in ONE_SCHEMA and key not in NOT_MONOTONE:
            return self.schemas(present, at)
        if key == "uniqueItems":
            self.move(pointer, key)
            return _GONE  # true in some, false in others: not unique is the wider
        if key in ("dependencies", "dependentRequired"):
            return self.dependencies(present, at, pointer)
        if key not in KNOWN:
            target = f"#{at}"
            if any(ref == target or ref.startswith(target + "/") for ref in self.refs):
                return self.named(present, at)  # a home-made definitions map (`#/constraints/...`)
            return _GONE  # an unknown keyword constrains nothing (validators and engines ignore it)
        raise _Conflict(f"{at}: `{key}` differs between variants")

    def dependencies(self, present: list[Any], at: str, pointer: str) -> Any:
        """Draft 7's `dependencies` and `dependentRequired`, name by name: a name's required list to what
        every variant requires, its schema merged; a name some variants lack goes (unbounded there)."""
        if not all(isinstance(v, dict) for v in present):
            raise _Conflict(f"{at}: not an object")
        out: dict[str, Any] = {}
        for name in _first_seen(present):
            values = [v[name] for v in present if name in v]
            if len(values) < len(present):
                self.move(pointer, at.rsplit("/", 1)[1])
            elif all(isinstance(v, list) for v in values):
                common = set.intersection(*(set(v) for v in values))
                if len(common) < max(len(set(v)) for v in values):
                    self.move(pointer, at.rsplit("/", 1)[1])
                out[name] = sorted(common, key=str)
            else:
                out[name] = self.schemas(values, f"{at}/{escape(name)}")
        return out

    def named(self, present: list[Any], at: str) -> dict[str, Any]:
        if not all(isinstance(v, dict) for v in present):
            raise _Conflict(f"{at}: not an object")
        names = _first_seen(present)
        return {n: self.schemas([v[n] for v in present if n in v], f"{at}/{escape(n)}") for n in names}

    def union(self, present: list[Any], at: str) -> list[Any]:
        """Every branch seen, once, in canonical order; `oneOf` is joined as `anyOf` by the caller."""
        if not all(isinstance(v, list) for v in present):
            raise _Conflict(f"{at}: not a list")
        branches: dict[str, Any] = {}
        for value in present:
            for branch in value:
                branches.setdefault(canonical_json(branch), branch)
        self.move(at.rsplit("/", 1)[0], at.rsplit("/", 1)[1])
        return [branches[k] for k in sorted(branches)]


_GONE = object()


def _first_seen(maps: Sequence[dict[str, Any]]) -> list[str]:
    """Keys in the order they first appear: xgrammar emits an object's properties in the order the
    schema declares them, so a static schema in another order rejects every output in the variants'."""
    return list(dict.fromkeys(k for m in maps for k in m))


def _refs(variants: Sequence[Any]) -> set[str]:
    refs: set[str] = set()
    stack = list(variants)
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES * 5:
            raise _Conflict("too many values to look for references in")
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.add(node["$ref"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return refs


def merge(variants: Sequence[Any], max_enum: int = MAX_ENUM) -> Merged:
    """The static schema of a family's parsed variants, what moved out of it, or why there is none."""
    if not variants:
        return Merged(None, (), "no variants")
    try:
        variants = stable(list(variants))  # the same models under per-request names: one name each
        merger = _Merger(max_enum, _refs(variants))
        schema = merger.schemas(list(variants), "")
    except _Conflict as err:
        return Merged(None, (), str(err))
    except HOSTILE as err:
        return Merged(None, (), f"too complex to merge ({type(err).__name__})")
    moved = tuple(Moved(p, k) for p, k in sorted(merger.moved))
    return Merged(schema, moved)
