"""Families of specs: the unit of blame when a service injects per-request values into its schemas.

The engine caches grammars by the exact string, so a value injected per request means a compile per
request. A family is every spec that is the same schema up to
- a literal: `enum`, `const`, `default`, `examples`/`example`, `pattern` and `format` values are
  removed (the keyword stays); `description`, `title` and `$comment` text is kept with its volatile
  tokens masked (anything holding a digit: timestamps, ids, counters, amounts; month and day names);
- key order and whitespace (the parsed value is hashed, dict keys sorted, `type`/`required` as sets);
- per-request subsets of union branches (`anyOf`/`oneOf`: the tool_choice="required" pattern), of
  optional properties, and of `$defs`/`definitions` that come and go with them.

Why text is masked rather than removed: in JSONSchemaBench many genuinely different schemas differ
from another only in description wording (37 `calculate_area` functions, say); with the text removed
13.6 % of its 4,828 schemas share a family with another, masked 0.87 % (`python -m
tools.bench.families`, docs/families.md). Masking joins the machine-made values services inject (the
timestamp, the tenant id) and keeps human wording apart. Injected *words* (a tenant's name in a
description) split the family; `shape_hash` (identity.py) still shows those variants.

The key: a spec's *frame* is its structure with literals removed, text masked and each union's
branch list, each object's optional properties and each definitions map replaced by a *hole*. A
hole's members are keyed by their own literal-free structure (a branch by its digest, a property or
a definition by its name and digest). Two specs are `same_family` when their frames are equal and,
hole by hole, their members are compatible: equal; or, for a union, sharing a branch that is not a
bare leaf like `{"type": "string"}`; or, for named members, no name with two structures and the
shared names at least a third of the larger side. `FamilyIndex` joins specs by single linkage (a
tool-list subset joins through any earlier subset it shares a tool with) and reports a family joined
through holes once it has a quorum of 4 distinct variants: versions of one schema (v2 adds a
property) look like properties that come and go, but come in twos and threes.

Outputs are digests, JSON pointers, property names and counts: no literal value leaves this module.
Everything is bounded by the walk `Budget` and degrades (the exact spec as its own family) instead of
raising.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.schema.identity import LITERAL_KEYS, canonical_json, digest, parse_spec, schema_hash
from exporter.schema.variants import literals
from exporter.schema.walk import SUBSCHEMAS, Budget, TooComplex, children, escape, walk

# Removed from the frame (the keyword stays): values a service injects per request.
REMOVED = frozenset((LITERAL_KEYS - {"title", "description"}) | {"example", "pattern", "format"})
# Human text: kept with volatile tokens masked (see the module docstring for why).
MASKED = frozenset({"title", "description", "$comment"})
UNIONS = ("anyOf", "oneOf")
DEFINITIONS = ("$defs", "definitions")
SETS = frozenset({"type", "required"})  # lists whose order means nothing
NAME_MAX = 64
TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
MAX_VARIANTS = 1_000
MAX_TEXT = 1 << 20  # characters of a regex or grammar masked; past it, the exact text is the family
MAX_REPORTED_NAMES = 32
DEFAULT_BUDGET = Budget()
# What hostile input (or a caller's non-JSON Python value) can raise inside the analysis: it degrades.
HOSTILE = (TooComplex, RecursionError, ValueError, TypeError, AttributeError, KeyError, IndexError)

_VOLATILE = re.compile(
    r"[\w.:+/-]*\d[\w.:+/-]*"
    r"|\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t|tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|mon(?:day)?|tue(?:s|sday)?"
    r"|wed(?:nesday)?|thu(?:r|rs|rsday)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?|am|pm|utc|gmt)\b",
    re.IGNORECASE,
)
_MASK_RUN = re.compile(r"#(?:[\s,;|/&+-]*#)+")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.,+ -]+")
_GRAMMAR = re.compile(r"::=|^\s*[?!]?[A-Za-z_][\w.]*\s*:[ \t]", re.MULTILINE)
_REGEX_META = frozenset("\\^$.|?*+()[]{}")
_BOUND = re.compile(r"\{\d*(?:,\d*)?\}")
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", re.DOTALL)


@dataclass(frozen=True)
class Rules:
    """Which keywords are literals: removed from the frame, or kept with volatile tokens masked."""

    removed: frozenset[str] = REMOVED
    masked: frozenset[str] = MASKED


DEFAULT_RULES = Rules()


@dataclass(frozen=True)
class Hole:
    """A place in the frame whose members may come and go between variants of one family."""

    pointer: str  # JSON pointer of the `anyOf`/`oneOf` list, the `properties` or the definitions map
    kind: str  # the keyword: "anyOf", "oneOf", "properties", "$defs" or "definitions"
    members: tuple[tuple[str, str], ...]  # sorted (key, structure digest); a branch's key is its digest
    leaves: frozenset[str] = frozenset()  # keys of members without subschemas ({"type": "string"})


@dataclass(frozen=True)
class Fingerprint:
    """What a spec contributes to its family: the frame digest and the members of its holes."""

    frame: str  # digest of the frame; for a non-JSON spec, of its kind and its text with literals masked
    shape: str  # digest of the whole structure, holes filled: equal shapes are one spec up to literals
    holes: tuple[Hole, ...]
    kind: str  # "schema", "json" (JSON that is not an object), "regex", "grammar"
    size: int  # subschemas in the frame (outside the holes); characters for a regex or grammar
    name: str  # readable, from structure only
    degraded: bool = False  # over the budget or malformed: the exact spec is its own family

    @property
    def key(self) -> str:
        """The family id this spec gives the family it founds (12 hex digits, like schema_hash)."""
        return digest(f"{self.frame}|{self.shape}")


@dataclass(frozen=True)
class Membership:
    """Where `FamilyIndex.add` put a spec."""

    family: str  # the family id (12 hex digits): the key of the family's first spec still held
    new: bool  # the spec founded a family
    absorbed: tuple[str, ...] = ()  # ids given out before that now mean `family` (confirmed or bridged)


@dataclass(frozen=True)
class FamilySummary:
    family: str
    frame: str
    kind: str
    size: int
    name: str
    specs: int  # specs added to it (including the families it absorbed)
    variants: int  # distinct variants (literal-free shapes) remembered
    confirmed: bool  # reached the quorum (always, for a family of one shape)
    holes: tuple[tuple[str, str, int], ...]  # (pointer, kind, distinct members in those variants)


@dataclass(frozen=True)
class UnionVariation:
    pointer: str  # of the `anyOf`/`oneOf` list, in the first variant that has it
    variants: int  # variants that have this union
    subsets: int  # distinct branch sets among them
    branches: int  # distinct branches (by literal-free structure) over all of them


@dataclass(frozen=True)
class OptionalVariation:
    pointer: str  # of the `properties` map, in the first variant that has it
    variants: int  # variants that have this object
    names: tuple[tuple[str, int], ...]  # (property name, variants it is present in), those not in all


@dataclass(frozen=True)
class Variation:
    """What differs between the variants of one family; pointers and counts, never values."""

    variants: int
    literals: tuple[tuple[str, int], ...]  # (pointer, variants differing from the commonest value)
    unions: tuple[UnionVariation, ...]
    optional: tuple[OptionalVariation, ...]
    degraded: bool = False

    def lines(self) -> tuple[str, ...]:
        """One line per finding, e.g. "/anyOf: 37 distinct subsets of 12 branches"."""
        out = [
            f"{u.pointer or '/'}: {u.subsets} distinct subsets of {u.branches} branches" for u in self.unions
        ]
        for o in self.optional:
            shown = ", ".join(f"{n} ({k}/{o.variants})" for n, k in o.names[:8])
            more = f", +{len(o.names) - 8}" if len(o.names) > 8 else ""
            out.append(f"{o.pointer}: optional properties come and go: {shown}{more}")
        out += [
            f"{p or 'text'}: literal differs in {n} of {self.variants} variants" for p, n in self.literals
        ]
        return tuple(out)

    def parts(self) -> tuple[tuple[str, str, int], ...]:
        """(pointer, what, how many) in the order of `lines`: "branches" (distinct subsets), "optional"
        (properties that come and go), "literal" (variants differing); a text spec's pointer is ""."""
        return (
            *((u.pointer or "/", "branches", u.subsets) for u in self.unions),
            *((o.pointer, "optional", len(o.names)) for o in self.optional),
            *((p, "literal", n) for p, n in self.literals),
        )


# ---------------------------------------------------------------------------------------------------
# Fingerprints


def _h(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def mask_text(text: str) -> str:
    """Text with every volatile token (anything holding a digit, month and day names) as "#"."""
    return _MASK_RUN.sub("#", _VOLATILE.sub("#", text))


@dataclass
class _Result:
    shape: str  # literal-free structure, holes included
    frame: str  # holes blanked
    holes: list[Hole]
    leaf: bool  # a schema without subschemas or $ref (or a plain JSON value)
    size: int


class _Clock:
    """The walk Budget over a traversal of every JSON value: nodes visited and seconds."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.started = time.monotonic()
        self.visited = 0

    def tick(self) -> None:
        self.visited += 1
        if self.visited > self.budget.max_nodes or (
            self.visited % 256 == 0 and time.monotonic() - self.started > self.budget.max_seconds
        ):
            raise TooComplex(f"more than {self.visited - 1} values or {self.budget.max_seconds:g}s")


# A work item: ("enter", value, role, pointer) or ("exit", plan, count); roles "schema" and "json".
_Plan = tuple[str, Any, Any]


def _analyse(root: Any, rules: Rules, budget: Budget, shapes: dict[str, str] | None = None) -> _Result:
    """Post-order over the value without recursion: each schema's shape and frame digests, and the
    frame's holes (holes inside a hole belong to its members, not to the frame)."""
    clock = _Clock(budget)
    stack: list[tuple[Any, ...]] = [("enter", root, "schema", "")]
    results: list[_Result] = []
    while stack:
        item = stack.pop()
        if item[0] == "exit":
            _, plan, count = item
            kids = results[len(results) - count :] if count else []
            del results[len(results) - count :]
            results.append(_combine(plan, kids))
            if shapes is not None and plan[0] == "schema":
                shapes[plan[2]] = results[-1].shape
            continue
        _, value, role, pointer = item
        clock.tick()
        if isinstance(value, dict) and role == "schema":
            parts, pushes = _schema_parts(value, pointer, rules)
            stack.append(("exit", ("schema", parts, pointer), len(pushes)))
            stack.extend(reversed(pushes))
        elif isinstance(value, dict):
            keys = sorted(value)
            stack.append(("exit", ("jdict", keys, None), len(keys)))
            stack.extend(("enter", value[k], "json", "") for k in reversed(keys))
        elif isinstance(value, list):
            stack.append(("exit", ("jlist", None, None), len(value)))
            stack.extend(("enter", v, "json", "") for v in reversed(value))
        else:
            text = json.dumps(value, ensure_ascii=False)
            d = _h(text)
            results.append(_Result(d, d, [], True, 0))
    return results[0]


def _schema_parts(
    schema: dict[str, Any], pointer: str, rules: Rules
) -> tuple[list[tuple[str, str, Any, int]], list[tuple[Any, ...]]]:
    """How each keyword of a schema enters its digests, (keyword, how, detail, children), and the
    children to visit, in order. `how`: "lit", "text", "json", "set", "one", "list", "union", "props",
    "defs" or "map"."""
    parts: list[tuple[str, str, Any, int]] = []
    pushes: list[tuple[Any, ...]] = []
    base = f"{pointer}/"
    for key in sorted(schema):
        value = schema[key]
        at = base + escape(key)
        how = SUBSCHEMAS.get(key)
        if key in rules.removed:
            parts.append((key, "lit", None, 0))
        elif key in rules.masked:
            parts.append((key, "text", mask_text(value) if isinstance(value, str) else "*", 0))
        elif key in SETS and isinstance(value, list):
            parts.append((key, "set", None, len(value)))
            pushes.extend(("enter", v, "json", "") for v in value)
        elif how == "map" and isinstance(value, dict):
            names = sorted(value)
            kind = "props" if key == "properties" else "defs" if key in DEFINITIONS else "map"
            detail = (names, schema.get("required") if kind == "props" else None)
            parts.append((key, kind, detail, len(names)))
            pushes.extend(("enter", value[n], "schema", f"{at}/{escape(n)}") for n in names)
        elif how in ("list", "one_or_list") and isinstance(value, list):
            parts.append((key, "union" if key in UNIONS else "list", None, len(value)))
            pushes.extend(("enter", v, "schema", f"{at}/{i}") for i, v in enumerate(value))
        elif how in ("one", "one_or_list"):
            parts.append((key, "one", None, 1))
            pushes.append(("enter", value, "schema", at))
        else:
            parts.append((key, "json", None, 1))
            pushes.append(("enter", value, "json", at))
    return parts, pushes


def _combine(plan: _Plan, kids: list[_Result]) -> _Result:
    what, detail, pointer = plan
    if what == "jdict":
        text = "{" + ",".join(f"{json.dumps(k)}:{r.shape}" for k, r in zip(detail, kids, strict=True)) + "}"
        d = _h(text)
        return _Result(d, d, [], True, 0)
    if what == "jlist":
        d = _h("[" + ",".join(r.shape for r in kids) + "]")
        return _Result(d, d, [], True, 0)
    shape: list[str] = []
    frame: list[str] = []
    holes: list[Hole] = []
    leaf = True
    size = 1
    i = 0
    for key, how, info, n in detail:
        label = json.dumps(key)
        if how == "lit":
            shape.append(f"{label}:*")
            frame.append(f"{label}:*")
            continue
        if how == "text":
            text = f"{label}:{json.dumps(info, ensure_ascii=False)}"
            shape.append(text)
            frame.append(text)
            continue
        if key == "$ref":
            leaf = False
        mine = kids[i : i + n]
        i += n
        if how in ("one", "json"):
            r = mine[0]
            shape.append(f"{label}:{r.shape}")
            frame.append(f"{label}:{r.frame}")
            holes.extend(r.holes)
            size += r.size
            leaf = leaf and (how == "json" or not r.size)
        elif how == "set":
            text = f"{label}:[" + ",".join(sorted({r.shape for r in mine})) + "]"
            shape.append(text)
            frame.append(text)
        elif how in ("list", "map"):
            names = info[0] if how == "map" else [str(j) for j in range(len(mine))]
            shape.append(
                f"{label}:["
                + ",".join(f"{json.dumps(n)}={r.shape}" for n, r in zip(names, mine, strict=True))
                + "]"
            )
            frame.append(
                f"{label}:["
                + ",".join(f"{json.dumps(n)}={r.frame}" for n, r in zip(names, mine, strict=True))
                + "]"
            )
            for r in mine:
                holes.extend(r.holes)
                size += r.size
            leaf = leaf and not any(r.size for r in mine)
        elif how == "union":
            branches = sorted(r.shape for r in mine)
            shape.append(f"{label}:<" + ",".join(branches) + ">")
            frame.append(f"{label}:?")
            members = tuple(sorted({(b, b) for b in branches}))
            leaves = frozenset(r.shape for r in mine if r.leaf)
            holes.append(Hole(f"{pointer}/{escape(key)}", key, members, leaves))
            leaf = leaf and not mine
        else:  # props or defs: a named hole; required properties stay in the frame
            names, listed = info
            required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
            shape.append(
                f"{label}:{{"
                + ",".join(f"{json.dumps(n)}:{r.shape}" for n, r in zip(names, mine, strict=True))
                + "}"
            )
            fixed = []
            optional = []
            for n, r in zip(names, mine, strict=True):
                if n in required:
                    fixed.append(f"{json.dumps(n)}:{r.frame}")
                    holes.extend(r.holes)
                    size += r.size
                else:
                    optional.append((n, r))
            frame.append(f"{label}:{{" + ",".join(fixed) + "}?")
            members = tuple(sorted((n, r.shape) for n, r in optional))
            leaves = frozenset(n for n, r in optional if r.leaf)
            holes.append(Hole(f"{pointer}/{escape(key)}", key, members, leaves))
            leaf = leaf and not mine
    s = _h("{" + ",".join(shape) + "}")
    f = _h("{" + ",".join(frame) + "}")
    return _Result(s, f, holes, leaf, size)


def _text_kind(spec: str) -> str:
    return "grammar" if _GRAMMAR.search(spec) else "regex"


def _mask_regex(spec: str) -> str:
    """The regex with each run of literal characters as "L"; classes, escapes and {m,n} kept."""
    out: list[str] = []
    i = 0
    while i < len(spec):
        c = spec[i]
        if c == "\\":
            out.append(spec[i : i + 2])
            i += 2
        elif c == "[":
            j = i + 1
            while j < len(spec) and spec[j] != "]":
                j += 2 if spec[j] == "\\" else 1
            out.append(spec[i : j + 1])
            i = j + 1
        elif c == "{" and (bound := _BOUND.match(spec, i)):
            out.append(bound.group())  # a quantifier's bounds are structure
            i = bound.end()
        elif c in _REGEX_META:
            out.append(c)
            i += 1
        else:
            while i < len(spec) and spec[i] not in _REGEX_META:
                i += 1
            out.append("L")
    return "".join(out)


def _text_fingerprint(spec: str) -> Fingerprint:
    """A regex or grammar: its kind and its text with literals masked (a regex's literal runs, a
    grammar's quoted strings), so that per-request words inside it join while structure does not.
    Over MAX_TEXT characters, the exact text is its own family."""
    kind = _text_kind(spec[:MAX_TEXT])
    if len(spec) > MAX_TEXT:
        return _exact(spec, None, kind, f"{kind}, {len(spec)} chars", True)
    masked = _QUOTED.sub('"S"', spec) if kind == "grammar" else _mask_regex(spec)
    if kind == "grammar":
        rules = sum(1 for _ in _GRAMMAR.finditer(spec))
        name = f"grammar, {rules} rules"
    else:
        name = f"regex, {len(spec)} chars"
    frame = digest(f"{kind}:{masked}")
    return Fingerprint(frame, frame, (), kind, len(spec), name)


def _exact(spec: str, parsed: Any, kind: str, name: str, degraded: bool) -> Fingerprint:
    try:
        exact = schema_hash(spec, parsed)
    except HOSTILE:
        exact = digest(spec)
    frame = digest(f"exact:{exact}")
    return Fingerprint(frame, frame, (), kind, 0, name, degraded)


def fingerprint(
    spec: str, parsed: Any | None = None, budget: Budget = DEFAULT_BUDGET, rules: Rules = DEFAULT_RULES
) -> Fingerprint:
    """The family fingerprint of a spec string (`parsed` when the caller already decoded it).

    A JSON object is analysed as a schema; other JSON (a choice list, a boolean schema) is its own
    exact family; text that is not JSON is a regex or a grammar (`::=` or a `name:` rule line)."""
    try:
        value = parsed if parsed is not None else parse_spec(spec)
        if value is None:
            return _text_fingerprint(spec)
        if not isinstance(value, dict):
            return _exact(spec, value, "json", readable_name(value), False)
        result = _analyse(value, rules, budget)
        holes = tuple(sorted(result.holes, key=lambda h: h.pointer))
        return Fingerprint(result.frame, result.shape, holes, "schema", result.size, readable_name(value))
    except HOSTILE:
        return _exact(spec, parsed, "schema", "too complex", True)


def of(schema: Any, budget: Budget = DEFAULT_BUDGET, rules: Rules = DEFAULT_RULES) -> Fingerprint:
    """The fingerprint of an already parsed schema (its canonical JSON is the spec)."""
    try:
        text = canonical_json(schema)
    except HOSTILE:
        frame = digest("exact:unserialisable")
        return Fingerprint(frame, frame, (), "schema", 0, "too complex", True)
    return fingerprint(text, schema, budget, rules)


# ---------------------------------------------------------------------------------------------------
# Compatibility


def compatible(kind: str, a: Mapping[str, str], b: Mapping[str, str], leaves: Iterable[str] = ()) -> bool:
    """Whether two member maps of one hole can be variants of one schema.

    Equal maps always are. A union's branch lists are when they share a branch that is not a leaf in
    `leaves` (a whole tool object, not a bare `{"type": "string"}` that any two unions share). Named
    members (properties, definitions) are when no shared name has two structures and the shared names
    are at least a third of the larger side: random subsets of one set of optional properties overlap
    that much, two unrelated objects that happen to share an `id` do not."""
    if a == b:
        return True
    shared = a.keys() & b.keys()
    if kind in UNIONS:
        skip = set(leaves)
        return any(k not in skip for k in shared)
    if any(a[k] != b[k] for k in shared):
        return False
    return 3 * len(shared) >= max(len(a), len(b))


def same_family(a: Fingerprint, b: Fingerprint) -> bool:
    """The pairwise test: equal frames and every hole compatible. FamilyIndex also joins through a
    third spec that each is compatible with, and asks for a quorum of variants first."""
    if a.frame != b.frame:
        return False
    if a.degraded or b.degraded:
        return a.key == b.key
    theirs = {h.pointer: h for h in b.holes}
    for hole in a.holes:
        other = theirs.get(hole.pointer)
        if other is None or not compatible(
            hole.kind, dict(hole.members), dict(other.members), hole.leaves | other.leaves
        ):
            return False
    return len(theirs) == len(a.holes)


# ---------------------------------------------------------------------------------------------------
# The index


@dataclass
class _Family:
    id: str
    seq: int
    founder: Fingerprint
    variants: OrderedDict[str, Fingerprint]  # by shape, most recent last, at most max_variants
    specs: int = 1
    confirmed: bool = False  # reached the quorum: its variants are reported as one family

    def reported(self) -> set[str]:
        """The ids its specs were given: the family's once confirmed, each variant's own before."""
        return {self.id} if self.confirmed else {v.key for v in self.variants.values()}


class FamilyIndex:
    """Specs joined into families by single linkage: a spec joins every family of its frame that holds
    a variant it is `same_family` with, and bridges them into the oldest (a tool-list subset joins
    through any earlier subset it shares a tool with). Comparing with variants, not with the union of
    all members seen, keeps a family from snowballing: a spec must be close to one real variant.

    Quorum: variants that differ only in literals are one family at once, but a family joined through
    holes is reported as one only once it holds `quorum` distinct variants (literal-free shapes);
    before that each variant keeps its own id. Per-request subsets produce many variants quickly; two
    or three versions of a schema (a property added in v2) look the same but stay apart, and a
    handful of compiles is not worth blaming anyway. When a family is confirmed or bridged, the ids it
    replaces come back in `Membership.absorbed`.

    Bounded: at most `max_families` (least recently used dropped first), `max_per_frame` of one frame
    and `max_variants` distinct variants remembered per family (least recent dropped). Deterministic:
    the same specs in the same order give the same ids; a family's id is its first spec's `key`."""

    def __init__(
        self, max_families: int = 1024, max_variants: int = 16, max_per_frame: int = 64, quorum: int = 4
    ) -> None:
        self.max_families = max_families
        self.max_variants = max(max_variants, quorum)
        self.max_per_frame = max_per_frame
        self.quorum = max(1, quorum)
        self._families: OrderedDict[str, _Family] = OrderedDict()
        self._by_frame: dict[str, list[str]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._families)

    def add(self, fp: Fingerprint) -> Membership:
        candidates = [self._families[i] for i in self._by_frame.get(fp.frame, ())]
        fits = [f for f in candidates if any(same_family(fp, v) for v in reversed(f.variants.values()))]
        if not fits:
            found = self._found(fp)
            return Membership(found.id if found.confirmed else fp.key, True)
        keep = min(fits, key=lambda f: f.seq)
        before = set().union(*(f.reported() for f in fits))
        for other in fits:
            if other is not keep:
                for shape, variant in other.variants.items():
                    self._remember(keep, shape, variant)
                keep.specs += other.specs
                keep.confirmed = keep.confirmed or other.confirmed
                self._drop(other.id)
        self._remember(keep, fp.shape, fp)
        keep.specs += 1
        keep.confirmed = keep.confirmed or len(keep.variants) >= self.quorum
        self._families.move_to_end(keep.id)
        family = keep.id if keep.confirmed else fp.key
        return Membership(family, False, tuple(sorted(before - keep.reported())))

    def summary(self, family: str) -> FamilySummary | None:
        f = self._families.get(family)
        if f is None:
            return None
        seen: dict[tuple[str, str], set[str]] = {}
        for variant in f.variants.values():
            for h in variant.holes:
                seen.setdefault((h.pointer, h.kind), set()).update(k for k, _ in h.members)
        holes = tuple((p, k, len(m)) for (p, k), m in sorted(seen.items()))
        fp = f.founder
        return FamilySummary(
            f.id, fp.frame, fp.kind, fp.size, fp.name, f.specs, len(f.variants), f.confirmed, holes
        )

    def _remember(self, family: _Family, shape: str, fp: Fingerprint) -> None:
        family.variants[shape] = fp
        family.variants.move_to_end(shape)
        while len(family.variants) > self.max_variants:
            family.variants.popitem(last=False)

    def _found(self, fp: Fingerprint) -> _Family:
        family_id = fp.key
        while family_id in self._families:
            family_id = digest(family_id)
        ids = self._by_frame.get(fp.frame, [])
        if len(ids) >= self.max_per_frame:
            self._drop(ids[0])
        self._seq += 1
        family = _Family(family_id, self._seq, fp, OrderedDict({fp.shape: fp}), 1, self.quorum <= 1)
        self._families[family_id] = family
        self._by_frame.setdefault(fp.frame, []).append(family_id)
        while len(self._families) > self.max_families:
            self._drop(next(iter(self._families)))
        return family

    def _drop(self, family_id: str) -> None:
        family = self._families.pop(family_id, None)
        if family is None:
            return
        ids = self._by_frame.get(family.founder.frame, [])
        if family_id in ids:
            ids.remove(family_id)
        if not ids:
            self._by_frame.pop(family.founder.frame, None)


# ---------------------------------------------------------------------------------------------------
# What varies


@dataclass(frozen=True)
class Positions:
    """One variant's schema positions under aligned keys (a union branch keyed by its structure,
    not its index, so that subsets and reorderings line up). Digests and pointers only: the daemon
    keeps these per spec instead of the text, and `variation` compares them."""

    nodes: dict[str, str]  # aligned key -> real pointer
    literals: dict[str, tuple[str, str]]  # aligned key -> (real pointer, digest)
    unions: dict[str, frozenset[str]]  # aligned key of the list -> branch keys
    optional: dict[str, frozenset[str]]  # aligned key of the properties map -> optional names


def _literal_digest(value: Any) -> str:
    """The same digest as variants.literals."""
    text = canonical_json(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def _positions(schema: Any, budget: Budget, rules: Rules) -> Positions:
    shapes: dict[str, str] = {}
    _analyse(schema, rules, budget, shapes)
    real_literals = literals(schema, budget)  # the standard literal keys, digested as variants does
    extra = (rules.removed | rules.masked) - LITERAL_KEYS
    keys = rules.removed | rules.masked
    aligned: dict[str, str] = {"": ""}
    nodes: dict[str, str] = {}
    lits: dict[str, tuple[str, str]] = {}
    unions: dict[str, frozenset[str]] = {}
    optional: dict[str, frozenset[str]] = {}
    for node in walk(schema, budget, follow_refs=False):
        a = aligned.get(node.pointer, node.pointer)
        nodes[a] = node.pointer
        s = node.schema
        for key in keys & s.keys():
            real = f"{node.pointer}/{escape(key)}"
            found = real_literals.get(real)
            if found is None and key in extra:
                found = _literal_digest(s[key])
            if found is not None:
                lits[f"{a}/{escape(key)}"] = (real, found)
        props = s.get("properties")
        if isinstance(props, dict):
            required = s.get("required")
            needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
            optional[f"{a}/properties"] = frozenset(n for n in props if n not in needed)
        seen: Counter[str] = Counter()
        for keyword, pointer, child in children(node.pointer, s):
            if not isinstance(child, dict):
                continue
            token = pointer.rsplit("/", 1)[1]
            if keyword in UNIONS:
                shape = shapes.get(pointer, token)
                seen[keyword + shape] += 1
                token = f"~{shape}" + (f"~{seen[keyword + shape]}" if seen[keyword + shape] > 1 else "")
            aligned[pointer] = f"{a}/{escape(keyword)}/{token}"
        for keyword in UNIONS:
            branches = s.get(keyword)
            if isinstance(branches, list):
                base = f"{node.pointer}/{keyword}"
                tokens = (aligned.get(f"{base}/{i}", "").rsplit("/", 1)[-1] for i in range(len(branches)))
                unions[f"{a}/{keyword}"] = frozenset(t for t in tokens if t)
    return Positions(nodes, lits, unions, optional)


def positions(schema: Any, budget: Budget = DEFAULT_BUDGET, rules: Rules = DEFAULT_RULES) -> Positions | None:
    """One parsed variant's positions, or None over the budget or malformed."""
    try:
        return _positions(schema, budget, rules)
    except HOSTILE:
        return None


def text_positions(text: str) -> Positions:
    """A regex or grammar: one literal position, the whole text (its literal runs are what varies)."""
    return Positions({"": ""}, {"/": ("", _h(text))}, {}, {})


def what_varies(
    variants: Sequence[Any], budget: Budget = DEFAULT_BUDGET, rules: Rules = DEFAULT_RULES, limit: int = 20
) -> Variation:
    """For the parsed variants of one family: the literal pointers that differ (compared only where
    the enclosing schema exists), the unions whose branch set varies, and the optional properties that
    come and go. At most MAX_VARIANTS variants, each within `budget.max_nodes`, all within
    `budget.max_seconds`; a variant over it is skipped and the result marked degraded."""
    deadline = time.monotonic() + budget.max_seconds
    per: list[Positions] = []
    degraded = len(variants) > MAX_VARIANTS
    for v in variants[:MAX_VARIANTS]:
        left = deadline - time.monotonic()
        if left <= 0:
            degraded = True
            break
        found = positions(v, Budget(budget.max_nodes, left), rules)
        if found is None:
            degraded = True
        else:
            per.append(found)
    return variation(per, limit, degraded)


def variation(per: Sequence[Positions], limit: int = 20, degraded: bool = False) -> Variation:
    """What differs between these variants' positions (see `what_varies`)."""
    return Variation(
        len(per),
        _varying_literals(per, limit),
        _varying_unions(per, limit),
        _varying_optional(per, limit),
        degraded,
    )


def _first(per: Sequence[Positions], key: str, table: str) -> str:
    for p in per:
        if table == "nodes" and key in p.nodes:
            return p.nodes[key]
        if table == "literals" and key in p.literals:
            return p.literals[key][0]
    return key


def _varying_literals(per: Sequence[Positions], limit: int) -> tuple[tuple[str, int], ...]:
    keys = sorted({k for p in per for k in p.literals})
    ranked = []
    for key in keys:
        parent = key.rsplit("/", 1)[0]
        values = Counter(p.literals.get(key, ("", ""))[1] for p in per if parent in p.nodes)
        differ = sum(values.values()) - values.most_common(1)[0][1]
        if differ > 0:
            ranked.append((_first(per, key, "literals"), differ))
    ranked.sort(key=lambda item: (-item[1], item[0]))
    return tuple(ranked[:limit])


def _varying_unions(per: Sequence[Positions], limit: int) -> tuple[UnionVariation, ...]:
    out = []
    for key in sorted({k for p in per for k in p.unions}):
        sets = [p.unions[key] for p in per if key in p.unions]
        distinct = set(sets)
        if len(distinct) > 1:
            branches = frozenset().union(*sets)
            parent, keyword = key.rsplit("/", 1)
            pointer = f"{_first(per, parent, 'nodes')}/{keyword}"
            out.append(UnionVariation(pointer, len(sets), len(distinct), len(branches)))
    out.sort(key=lambda u: (-u.subsets, u.pointer))
    return tuple(out[:limit])


def _varying_optional(per: Sequence[Positions], limit: int) -> tuple[OptionalVariation, ...]:
    out = []
    for key in sorted({k for p in per for k in p.optional}):
        sets = [p.optional[key] for p in per if key in p.optional]
        present = Counter(n for s in sets for n in s)
        names = tuple(sorted((n, k) for n, k in present.items() if k < len(sets)))
        if names:
            parent = key.rsplit("/", 1)[0]
            pointer = f"{_first(per, parent, 'nodes')}/properties"
            out.append(OptionalVariation(pointer, len(sets), names[:MAX_REPORTED_NAMES]))
    out.sort(key=lambda o: (-len(o.names), o.pointer))
    return tuple(out[:limit])


# ---------------------------------------------------------------------------------------------------
# Readable names


def _clean(text: str) -> str:
    return _NAME_BAD.sub("_", text).strip(" _")


def readable_name(value: Any) -> str:
    """A name for an untitled schema from its structure only: its first property names (required
    first, sorted) and how many more, or its union and width, or its `$ref` or type. Never a literal
    value (title, description, enum, const, default): those may be per-request and are not read."""
    try:
        return _clean(_name(value))[:NAME_MAX] or "schema"
    except HOSTILE:
        return "schema"


def _name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean schema"
    if isinstance(value, list):
        return f"json array, {len(value)} items"
    if not isinstance(value, dict):
        return "json " + type(value).__name__
    props = value.get("properties")
    if isinstance(props, dict) and props:
        required = value.get("required")
        needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        names = sorted(n for n in props if n in needed) + sorted(n for n in props if n not in needed)
        shown: list[str] = []
        for n in names:
            clean = _clean(str(n))[:24]
            if not clean:
                continue
            if len(shown) == 3 or sum(len(s) + 2 for s in shown) + len(clean) > NAME_MAX - 8:
                break
            shown.append(clean)
        rest = len(names) - len(shown)
        return ", ".join(shown + ([f"+{rest}"] if rest else []))
    for keyword in (*UNIONS, "allOf"):
        branches = value.get(keyword)
        if isinstance(branches, list):
            return f"{keyword}, {len(branches)} branches"
    ref = value.get("$ref")
    if isinstance(ref, str):
        return "ref " + ref.rsplit("/", 1)[-1][:40]
    kind = value.get("type")
    if isinstance(kind, str):
        items = value.get("items")
        if kind == "array" and isinstance(items, dict) and items.get("type") in TYPES:
            return f"array of {items['type']}"
        return kind if kind in TYPES else "schema"
    return "schema" if value else "empty schema"
