"""A spec's family fingerprint: its frame (structure with literals removed, text masked, holes
blanked), its holes' members and its literal-free shape; regexes and grammars by masked text."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from enum import Enum
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, NamedTuple

from exporter.schema.family.definitions import canonical, root_name
from exporter.schema.family.model import (
    DEFAULT_BUDGET,
    DEFAULT_RULES,
    DEFINITIONS,
    HOSTILE,
    MAX_TEXT,
    SETS,
    UNIONS,
    Fingerprint,
    Hole,
    Rules,
)
from exporter.schema.family.names import readable_name
from exporter.schema.identity import canonical_json, digest, parse_spec, schema_hash
from exporter.schema.walk import (
    FORMAT_CHILDREN,
    SUBSCHEMAS,
    TAG_UNIONS,
    Budget,
    TooComplex,
    cpu_clock,
    escape,
    is_format,
)

# A token holding a digit starts where its run of token characters starts (the lookbehind): without
# it a run with no digit was scanned again from each of its characters (0.9 s of the development half's
# 3 s of masking; the same output on its 96,038 descriptions and titles). The names are one word each
# (jan, january, sep, sept, september, tue, tues, tuesday, thu, thur, thurs, thursday, am, pm, utc, gmt...),
# written as a tree behind a check of their first letter: at a word's start only (the old alternation was
# tried at every character), a third less time, the same matches.
_VOLATILE = re.compile(
    r"(?<![\w.:+/-])[\w.:+/-]*\d[\w.:+/-]*"
    r"|(?<!\w)(?=[adfgjmnopstuw])(?:a(?:pr(?:il)?|ug(?:ust)?|m)|dec(?:ember)?|f(?:eb(?:ruary)?|ri(?:day)?)"
    r"|gmt|j(?:an(?:uary)?|u(?:ne?|ly?))|m(?:a(?:r(?:ch)?|y)|on(?:day)?)|nov(?:ember)?|oct(?:ober)?|pm"
    r"|s(?:ep(?:t(?:ember)?)?|at(?:urday)?|un(?:day)?)|t(?:ue(?:s(?:day)?)?|hu(?:r(?:s(?:day)?)?)?)|utc"
    r"|wed(?:nesday)?)\b",
    re.IGNORECASE,
)
_MASK_RUN = re.compile(r"#(?:[\s,;|/&+-]*#)+")
_GRAMMAR = re.compile(r"::=|^\s*[?!]?[A-Za-z_][\w.]*\s*:[ \t]", re.MULTILINE)
_REGEX_META = frozenset("\\^$.|?*+()[]{}")
_BOUND = re.compile(r"\{\d*(?:,\d*)?\}")
_QUOTED = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", re.DOTALL)


# Recent results kept, for short texts only (the memory stays under a few MB whatever the input): of the
# development half's 700,000 digests 100,000 texts are distinct (`"string"`, `{"type":...}`), and of its
# 9.8 MB of descriptions and titles masked, 2.7 MB (the same description in many schemas).
_DIGESTS: dict[str, str] = {}
_MASKS: dict[str, str] = {}
CACHED_CHARS = 512
CACHED_TEXTS = 4096


def _kept(cache: dict[str, str], text: str, result: str) -> str:
    if len(text) <= CACHED_CHARS:
        if len(cache) >= CACHED_TEXTS:
            cache.clear()  # a new working set; an LRU's bookkeeping costs more than it saves here
        cache[text] = result
    return result


def short_digest(text: str) -> str:
    found = _DIGESTS.get(text)
    if found is not None:
        return found
    made = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return _kept(_DIGESTS, text, made)


def _label(key: Any) -> str:
    """json.dumps(key): the C string encoder called at once (a million calls over a benchmark)."""
    return encode_basestring_ascii(key) if type(key) is str else json.dumps(key)


def _scalar(value: Any) -> str:
    """json.dumps(value, ensure_ascii=False) without the encoder that call builds each time."""
    if type(value) is str:
        return encode_basestring(value)
    if value is None or value is True or value is False:
        return "null" if value is None else "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


def mask_text(text: str) -> str:
    """Text with every volatile token (anything holding a digit, month and day names) as "#"."""
    found = _MASKS.get(text)
    if found is not None:
        return found
    return _kept(_MASKS, text, _MASK_RUN.sub("#", _VOLATILE.sub("#", text)))


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
        self.started = cpu_clock()
        self.visited = 0

    def tick(self) -> None:
        self.visited += 1
        if self.visited > self.budget.max_nodes or (
            self.visited % 256 == 0 and cpu_clock() - self.started > self.budget.max_seconds
        ):
            raise TooComplex(f"more than {self.visited - 1} values or {self.budget.max_seconds:g}s of CPU")


class Role(Enum):
    """How a value is read: as a schema (its keywords have meanings) or as plain JSON."""

    SCHEMA = "schema"
    JSON = "json"


class How(Enum):
    """How one keyword of a schema enters its digests."""

    LITERAL = "literal"  # removed: only the keyword stays
    TEXT = "text"  # human text, volatile tokens masked
    JSON = "json"  # a plain JSON value (a scalar's digest in the part, no child)
    SET = "set"  # a list whose order means nothing (`type`, `required`; scalars' digests in the part)
    ONE = "one"  # one subschema
    LIST = "list"  # subschemas in order (`allOf`, `prefixItems`)
    UNION = "union"  # `anyOf`/`oneOf`: a hole of branches
    PROPS = "props"  # `properties`: a named hole, required names stay in the frame
    DEFS = "defs"  # `$defs`/`definitions`: a named hole
    MAP = "map"  # another map of named subschemas (`patternProperties`, `dependentSchemas`)


class Composite(Enum):
    """What a finished node combines its children into."""

    SCHEMA = "schema"
    OBJECT = "object"  # a plain JSON object
    ARRAY = "array"  # a plain JSON array


class Part(NamedTuple):
    """One keyword of a schema: how it enters the digests, what that needs, its children's count."""

    key: str
    how: How
    detail: Any  # TEXT: the masked text; PROPS/DEFS/MAP: (names, required list or None); a JSON
    # scalar: its digest; a SET of scalars: their digests, sorted and distinct; else None
    children: int


class Enter(NamedTuple):
    """Visit a value."""

    value: Any
    role: Role
    pointer: str


class Exit(NamedTuple):
    """Combine the last `children` results into one node."""

    what: Composite
    detail: Any  # SCHEMA: its parts; OBJECT: its sorted keys; ARRAY: None
    pointer: str
    children: int


def analyse_structure(
    root: Any, rules: Rules, budget: Budget, shapes: dict[str, str] | None = None
) -> _Result:
    """Post-order over the value without recursion: each schema's shape and frame digests, and the
    frame's holes (holes inside a hole belong to its members, not to the frame)."""
    clock = _Clock(budget)
    stack: list[Enter | Exit] = [Enter(root, Role.SCHEMA, "")]
    results: list[_Result] = []
    while stack:
        item = stack.pop()
        if isinstance(item, Exit):
            count = item.children
            kids = results[len(results) - count :] if count else []
            del results[len(results) - count :]
            results.append(_combine(item, kids))
            if shapes is not None and item.what is Composite.SCHEMA:
                shapes[item.pointer] = results[-1].shape
            continue
        value = item.value
        clock.tick()
        if isinstance(value, dict) and item.role is Role.SCHEMA:
            parts, pushes = _schema_parts(value, item.pointer, rules, clock)
            stack.append(Exit(Composite.SCHEMA, parts, item.pointer, len(pushes)))
            stack.extend(reversed(pushes))
        elif isinstance(value, dict):
            keys = sorted(value)
            stack.append(Exit(Composite.OBJECT, keys, "", len(keys)))
            stack.extend(Enter(value[k], Role.JSON, "") for k in reversed(keys))
        elif isinstance(value, list):
            stack.append(Exit(Composite.ARRAY, None, "", len(value)))
            stack.extend(Enter(v, Role.JSON, "") for v in reversed(value))
        else:
            d = short_digest(_scalar(value))
            results.append(_Result(d, d, [], True, 0))
    return results[0]


def _schema_parts(
    schema: dict[str, Any], pointer: str, rules: Rules, clock: _Clock
) -> tuple[list[Part], list[Enter]]:
    """How each keyword of a schema enters its digests, and the children to visit, in order. A plain
    scalar (`"type": "string"`, half of all values) is digested here, counted as a visited value, instead
    of visited as a child (no stack entry, no result of its own): the same digests."""
    parts: list[Part] = []
    pushes: list[Enter] = []
    base = f"{pointer}/"
    if is_format(schema):
        return _format_parts(schema, base)
    for key in sorted(schema):
        value = schema[key]
        how = SUBSCHEMAS.get(key)
        if key in rules.removed:
            parts.append(Part(key, How.LITERAL, None, 0))
            continue
        if key in rules.masked:
            parts.append(Part(key, How.TEXT, mask_text(value) if isinstance(value, str) else "*", 0))
            continue
        if how is None and not isinstance(value, (dict, list)):  # a scalar: its digest now, no child
            clock.tick()
            parts.append(Part(key, How.JSON, short_digest(_scalar(value)), 0))
            continue
        at = base + escape(key)
        if key in SETS and isinstance(value, list):
            if any(isinstance(v, (dict, list)) for v in value):
                parts.append(Part(key, How.SET, None, len(value)))
                pushes.extend(Enter(v, Role.JSON, "") for v in value)
            else:
                for _ in value:
                    clock.tick()
                digests = sorted({short_digest(_scalar(v)) for v in value})
                parts.append(Part(key, How.SET, digests, 0))
        elif how == "map" and isinstance(value, dict):
            names = sorted(value)
            kind = How.PROPS if key == "properties" else How.DEFS if key in DEFINITIONS else How.MAP
            detail = (names, schema.get("required") if kind is How.PROPS else None)
            parts.append(Part(key, kind, detail, len(names)))
            pushes.extend(Enter(value[n], Role.SCHEMA, f"{at}/{escape(n)}") for n in names)
        elif how in ("list", "one_or_list") and isinstance(value, list):
            parts.append(Part(key, How.UNION if key in UNIONS else How.LIST, None, len(value)))
            pushes.extend(Enter(v, Role.SCHEMA, f"{at}/{i}") for i, v in enumerate(value))
        elif how in ("one", "one_or_list"):
            parts.append(Part(key, How.ONE, None, 1))
            pushes.append(Enter(value, Role.SCHEMA, at))
        else:
            parts.append(Part(key, How.JSON, None, 1))
            pushes.append(Enter(value, Role.JSON, at))
    return parts, pushes


def _format_parts(node: dict[str, Any], base: str) -> tuple[list[Part], list[Enter]]:
    """A structural-tag format node: its formats and schemas are children, a call list's `tags` a
    union hole (the tools a request enabled), every other field (begin, end, triggers) structure."""
    parts: list[Part] = []
    pushes: list[Enter] = []
    for key in sorted(node):
        value, at = node[key], base + escape(key)
        how = FORMAT_CHILDREN.get(key)
        if how == "list" and isinstance(value, list):
            parts.append(Part(key, How.UNION if key in TAG_UNIONS else How.LIST, None, len(value)))
            pushes.extend(Enter(v, Role.SCHEMA, f"{at}/{i}") for i, v in enumerate(value))
        elif how == "one":
            parts.append(Part(key, How.ONE, None, 1))
            pushes.append(Enter(value, Role.SCHEMA, at))
        else:
            parts.append(Part(key, How.JSON, None, 1))
            pushes.append(Enter(value, Role.JSON, at))
    return parts, pushes


def _combine(node: Exit, kids: list[_Result]) -> _Result:
    if node.what is Composite.OBJECT:
        pairs = zip(node.detail, kids, strict=True)
        d = short_digest("{" + ",".join(f"{_label(k)}:{r.shape}" for k, r in pairs) + "}")
        return _Result(d, d, [], True, 0)
    if node.what is Composite.ARRAY:
        d = short_digest("[" + ",".join(r.shape for r in kids) + "]")
        return _Result(d, d, [], True, 0)
    pointer = node.pointer
    shape: list[str] = []
    frame: list[str] = []
    holes: list[Hole] = []
    leaf = True
    size = 1
    i = 0
    for part in node.detail:
        key, how, info, n = part.key, part.how, part.detail, part.children
        label = _label(key)
        if how is How.LITERAL:
            shape.append(f"{label}:*")
            frame.append(f"{label}:*")
            continue
        if how is How.TEXT:
            text = f"{label}:{_scalar(info)}"
            shape.append(text)
            frame.append(text)
            continue
        if key == "$ref":
            leaf = False
        if n == 0 and (how is How.JSON or how is How.SET):
            text = f"{label}:{info}" if how is How.JSON else f"{label}:[" + ",".join(info) + "]"
            shape.append(text)
            frame.append(text)
            continue
        mine = kids[i : i + n]
        i += n
        if how is How.ONE or how is How.JSON:
            r = mine[0]
            shape.append(f"{label}:{r.shape}")
            frame.append(f"{label}:{r.frame}")
            holes.extend(r.holes)
            size += r.size
            leaf = leaf and (how is How.JSON or not r.size)
        elif how is How.SET:
            text = f"{label}:[" + ",".join(sorted({r.shape for r in mine})) + "]"
            shape.append(text)
            frame.append(text)
        elif how is How.LIST or how is How.MAP:
            names = info[0] if how is How.MAP else [str(j) for j in range(len(mine))]
            shape.append(
                f"{label}:["
                + ",".join(f"{_label(n)}={r.shape}" for n, r in zip(names, mine, strict=True))
                + "]"
            )
            frame.append(
                f"{label}:["
                + ",".join(f"{_label(n)}={r.frame}" for n, r in zip(names, mine, strict=True))
                + "]"
            )
            for r in mine:
                holes.extend(r.holes)
                size += r.size
            leaf = leaf and not any(r.size for r in mine)
        elif how is How.UNION:
            branches = sorted(r.shape for r in mine)
            shape.append(f"{label}:<" + ",".join(branches) + ">")
            frame.append(f"{label}:?")
            members = tuple(sorted({(b, b) for b in branches}))
            leaves = frozenset(r.shape for r in mine if r.leaf)
            holes.append(Hole(f"{pointer}/{escape(key)}", key, members, leaves))
            leaf = leaf and not mine
        else:  # PROPS or DEFS: a named hole; required properties stay in the frame
            names, listed = info
            required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
            shape.append(
                f"{label}:{{"
                + ",".join(f"{_label(n)}:{r.shape}" for n, r in zip(names, mine, strict=True))
                + "}"
            )
            fixed = []
            optional = []
            for n, r in zip(names, mine, strict=True):
                if n in required:
                    fixed.append(f"{_label(n)}:{r.frame}")
                    holes.extend(r.holes)
                    size += r.size
                else:
                    optional.append((n, r))
            frame.append(f"{label}:{{" + ",".join(fixed) + "}?")
            members = tuple(sorted((n, r.shape) for n, r in optional))
            leaves = frozenset(n for n, r in optional if r.leaf)
            holes.append(Hole(f"{pointer}/{escape(key)}", key, members, leaves))
            leaf = leaf and not mine
    s = short_digest("{" + ",".join(shape) + "}")
    f = short_digest("{" + ",".join(frame) + "}")
    return _Result(s, f, holes, leaf, size)


def text_kind(spec: str) -> str:
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


def text_fingerprint(spec: str) -> Fingerprint:
    """A regex or grammar: its kind and its text with literals masked (a regex's literal runs, a
    grammar's quoted strings), so that per-request words inside it join while structure does not.
    Over MAX_TEXT characters, the exact text is its own family."""
    kind = text_kind(spec[:MAX_TEXT])
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
            return text_fingerprint(spec)
        if not isinstance(value, dict):
            return _exact(spec, value, "json", readable_name(value), False)
        value, _ = canonical(value, budget)  # definition names are not the shape (definitions.py)
        value, model = root_name(value)  # nor the root model's own name
        result = analyse_structure(value, rules, budget)
        holes = tuple(sorted(result.holes, key=lambda h: h.pointer))
        named = short_digest(model) if model else ""
        return Fingerprint(
            result.frame, result.shape, holes, "schema", result.size, readable_name(value), named=named
        )
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
