"""The engines' own diagnostics as findings: what xgrammar logs while it compiles a JSON Schema, what
llguidance refuses with or warns about.

xgrammar's C++ writes a warning to fd 2 when it drops a keyword ("[HH:MM:SS] /project/cpp/x.cc:N:
Warning: <message>", file and line differ per version; docs/measurements/engine-versions.md §4);
exporter/lint/engines.py captures those bytes around a compile and parse() here reads them. llguidance returns
its error and warnings through its API. Neither names the subschema (only regex messages carry the
regex), so each message is mapped to the places in the schema that produce it. Pure functions: no
I/O, the walk bounded by the lint budget.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from exporter.engines.grammars import backends, compiled, gaps
from exporter.schema.findings import Finding
from exporter.schema.values import declared_types, is_integral
from exporter.schema.walk import Budget, Node, TooComplex, escape, resolve, walk

# "[20:24:23] /project/cpp/json_schema_converter.cc:829: Warning: " (the level is absent on some lines)
LOG_PREFIX = re.compile(r"^\[\d{1,2}:\d{2}:\d{2}\] [^\s:][^:\n]*:\d+: (?:(?:Warning|Error|Info): )?")
XGRAMMAR_FIX = "validate the output after decoding, or use llguidance where it refuses instead"
LLGUIDANCE_REFUSED_FIX = "remove the keyword from the grammar and validate after decoding"
LLGUIDANCE_IGNORED_FIX = (
    "the schema's x-guidance options (lenient, coerce_one_of) make llguidance drop it: remove the "
    "keyword, or validate the output after decoding"
)
_LOWER = ("minimum", "exclusiveMinimum")
_UPPER = ("maximum", "exclusiveMaximum")


class CompileOutcome(Protocol):
    """What the mapping needs of one engine's compile (exporter.lint.engines.CompileResult)."""

    @property
    def engine(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def error(self) -> str: ...
    @property
    def warnings(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Reported:
    """A finding from an engine's own words; `said` is what a table finding it confirms gets appended."""

    finding: Finding
    said: str
    replaces: str = ""  # a table rule the engine contradicts at the same place and keyword


@dataclass(frozen=True)
class Site:
    """Where a message applies: the keyword it names ("" when unknown) and its JSON pointer."""

    keyword: str
    pointer: str


def parse(text: str) -> tuple[tuple[str, ...], str]:
    """(the log messages, prefix stripped, each once in order of appearance; the other lines), of
    what an engine wrote to fd 2. A message comes once per cold compile, a regex one once per use."""
    messages: dict[str, None] = {}
    other: list[str] = []
    for line in text.splitlines(keepends=True):
        match = LOG_PREFIX.match(line)
        if match is None:
            other.append(line)
        elif line[match.end() :].strip():
            messages.setdefault(line[match.end() :].strip(), None)
    return tuple(messages), "".join(other)


def findings(schema: Any, compiles: Iterable[CompileOutcome], budget: Budget) -> list[Reported]:
    """The findings of each engine's own diagnostics about `schema` (unsorted)."""
    nodes = _nodes(schema, budget)
    live = compiled.live(schema) if isinstance(schema, dict) else None
    out: list[Reported] = []
    for result in compiles:
        if result.engine == "xgrammar":
            said = xgrammar_findings(nodes, result.version, result.warnings)
            out.extend(r for r in said if observable(r.finding, schema, live))
        elif result.engine == "llguidance":
            if not result.ok:
                out.extend(llguidance_refusals(nodes, result.version, result.error))
            out.extend(llguidance_warnings(nodes, result.version, result.warnings))
    return out


def observable(finding: Finding, schema: Any, live: frozenset[str] | None) -> bool:
    """Whether what xgrammar logged can change what it emits, as the table decides: not where the
    parser never reaches (`live`), not a oneOf whose branches exclude each other anyway (xgrammar's
    own proof is narrower than the table's, exporter/engines/grammars/compiled.py)."""
    word = finding.keyword
    if not word or live is None:
        return True
    node = finding.pointer.rpartition("/")[0]
    if node not in live:
        return False
    if word == "oneOf exclusivity":
        found = resolve(schema, f"#{node}")
        branches = found[1].get("oneOf") if found and isinstance(found[1], dict) else None
        return not (isinstance(branches, list) and gaps.exclusive(branches, schema))
    return True


def xgrammar_findings(nodes: Sequence[Node], version: str, messages: Iterable[str]) -> list[Reported]:
    """`xgrammar_unenforced` for each logged message at each place it maps to."""
    out = []
    for message in messages:
        said = f"xgrammar {version} logged while compiling: {_plain(message)}"
        for site in xgrammar_sites(nodes, message):
            body = (
                f"xgrammar compiles `{site.keyword}` and does not enforce it ({said})"
                if site.keyword
                else said
            )
            finding = Finding(
                "xgrammar_unenforced", "warning", site.pointer, body, XGRAMMAR_FIX, site.keyword
            )
            out.append(Reported(finding, f"xgrammar {version} logged it"))
    return out


def llguidance_refusals(nodes: Sequence[Node], version: str, error: str) -> list[Reported]:
    """`llguidance_refused` with the engine's own error, at the places it names (or the root)."""
    said = f"llguidance {version}: {_plain(error)}"
    out = []
    for site in llguidance_sites(nodes, error):
        body = (
            f"llguidance refuses `{site.keyword}` at compile time ({said}): the request fails"
            if site.keyword
            else f"llguidance {version} refuses this schema at compile time: {_plain(error)}"
        )
        finding = Finding(
            "llguidance_refused", "error", site.pointer, body, LLGUIDANCE_REFUSED_FIX, site.keyword
        )
        out.append(Reported(finding, said))
    return out


def llguidance_warnings(nodes: Sequence[Node], version: str, warnings: Iterable[str]) -> list[Reported]:
    """`llguidance_ignored`: what llguidance compiled but drops (lenient or coerce_one_of mode)."""
    out = []
    for warning in warnings:
        said = f"llguidance {version} warned: {_plain(warning)}"
        for site in llguidance_sites(nodes, warning):
            body = f"llguidance compiles `{site.keyword}` and ignores it ({said})" if site.keyword else said
            finding = Finding(
                "llguidance_ignored", "warning", site.pointer, body, LLGUIDANCE_IGNORED_FIX, site.keyword
            )
            out.append(Reported(finding, said, replaces="llguidance_refused"))
    return out


def merge(table: Iterable[Finding], engine: Iterable[Reported]) -> list[Finding]:
    """The table's findings, those an engine confirmed saying so, then the engine's own findings that
    no table finding has: one finding per rule, pointer and keyword (and per message without one). A
    table finding the engine contradicts (llguidance compiled what the table says it refuses, in
    lenient mode) gives way to the engine's."""
    out: list[Finding | None] = list(table)
    where = {(f.rule, f.pointer, f.keyword): i for i, f in reversed(list(enumerate(out))) if f}
    confirmed: set[int] = set()
    seen: set[tuple[str, str, str]] = set()
    for reported in engine:
        finding = reported.finding
        word = finding.keyword
        key = (finding.rule, finding.pointer, word or finding.message)
        index = where.get(key)
        contradicted = where.get((reported.replaces, finding.pointer, word)) if word else None
        if contradicted is not None:
            out[contradicted] = None
        if index is not None and index not in confirmed:
            confirmed.add(index)
            current = out[index]
            if current is not None:
                out[index] = replace(current, message=f"{current.message} ({reported.said})")
        elif index is None and key not in seen:
            seen.add(key)
            out.append(finding)
    return [finding for finding in out if finding is not None]


def xgrammar_sites(nodes: Sequence[Node], message: str) -> list[Site]:
    """The places an xgrammar log message is about; the root with no keyword when it is unknown."""
    for known in _XGRAMMAR_MESSAGES:
        found = re.search(known.regex, message, re.S)
        if found is not None:
            return known.where(nodes, found) or [Site(known.keyword.format(**found.groupdict()), "")]
    return [Site("", "")]


def llguidance_sites(nodes: Sequence[Node], message: str) -> list[Site]:
    """The places an llguidance error or warning is about; the root with no keyword when unknown."""
    keys = re.search(r"Unimplemented keys: (\[[^\]]*\])", message)
    if keys:
        try:
            names = [str(name) for name in json.loads(keys.group(1))]
        except ValueError:
            names = []
        return [site for name in names for site in _with_key(nodes, name, name) or [Site(name, "")]]
    unknown = re.search(r"Unknown format: (\S+)", message)
    if unknown:
        name = unknown.group(1)
        places = [
            Site(f"format {name}", f"{n.pointer}/format") for n in nodes if n.schema.get("format") == name
        ]
        return places or [Site(f"format {name}", "")]
    if "oneOf" in message:
        return _with_key(nodes, "oneOf", "oneOf") or [Site("oneOf", "")]
    if "min/maxProperties" in message:
        return _optional_properties(nodes) or [Site("minProperties with optional properties", "")]
    if "regex" in message:
        word = "pattern lookaround" if "look" in message.lower() else "pattern"
        return [Site(word, pointer) for pointer in _regexes_in(nodes, message)] or [Site(word, "")]
    return [Site("", "")]


def _nodes(schema: Any, budget: Budget) -> list[Node]:
    """Every place in the document once ($refs not followed; definitions walked where they are)."""
    out: list[Node] = []
    with contextlib.suppress(TooComplex, RecursionError):  # too_complex is the lint's; map what was walked
        for node in walk(schema, budget, follow_refs=False):
            out.append(node)
    return out


def _plain(text: str) -> str:
    """One line without backticks (a backtick would end the finding's keyword)."""
    return " ".join(text.replace("`", "'").split())


def _with_key(nodes: Sequence[Node], key: str, word: str) -> list[Site]:
    return [Site(word, f"{n.pointer}/{escape(key)}") for n in nodes if key in n.schema]


def _regex_sites(nodes: Sequence[Node]) -> list[tuple[str, str]]:
    """(pointer, regex) of every `pattern` and `patternProperties` name."""
    out = []
    for node in nodes:
        pattern = node.schema.get("pattern")
        if isinstance(pattern, str):
            out.append((f"{node.pointer}/pattern", pattern))
        names = node.schema.get("patternProperties")
        if isinstance(names, dict):
            out.extend((f"{node.pointer}/patternProperties/{escape(str(n))}", str(n)) for n in names)
    return out


def _regexes_equal(nodes: Sequence[Node], regex: str) -> list[str]:
    """Pointers of the regexes a message quotes (its first line, when the regex spans several)."""
    sites = _regex_sites(nodes)
    exact = [pointer for pointer, pattern in sites if pattern == regex]
    return exact or [pointer for pointer, pattern in sites if pattern.split("\n", 1)[0] == regex]


def _regexes_in(nodes: Sequence[Node], text: str) -> list[str]:
    """Pointers of the longest regexes that occur in an error text (llguidance quotes the regex)."""
    found = [(pointer, pattern) for pointer, pattern in _regex_sites(nodes) if pattern and pattern in text]
    longest = max((len(pattern) for _, pattern in found), default=0)
    return [pointer for pointer, pattern in found if len(pattern) == longest]


def _oneof(nodes: Sequence[Node], _: re.Match[str]) -> list[Site]:
    """Where xgrammar falls back to anyOf: a oneOf it cannot prove disjoint, or with properties beside."""
    out = []
    for node in nodes:
        branches = node.schema.get("oneOf")
        if not isinstance(branches, list):
            continue
        if not gaps.provably_disjoint(branches):
            out.append(Site("oneOf exclusivity", f"{node.pointer}/oneOf"))
        elif "properties" in node.schema:
            out.append(Site("properties beside oneOf", f"{node.pointer}/oneOf"))
    return out or [
        Site("oneOf exclusivity", f"{n.pointer}/oneOf")
        for n in nodes
        if isinstance(n.schema.get("oneOf"), list)
    ]


def _allof(nodes: Sequence[Node], _: re.Match[str]) -> list[Site]:
    return [
        Site("allOf with several branches", f"{n.pointer}/allOf")
        for n in nodes
        if isinstance(n.schema.get("allOf"), list) and len(n.schema["allOf"]) > 1
    ]


def _lookahead(nodes: Sequence[Node], found: re.Match[str]) -> list[Site]:
    return [Site("pattern lookaround", pointer) for pointer in _regexes_equal(nodes, found["regex"])]


def _anchor(nodes: Sequence[Node], found: re.Match[str]) -> list[Site]:
    word = "pattern anchor in the middle"
    return [Site(word, pointer) for pointer in _regexes_equal(nodes, found["regex"])]


def _anchor_at(nodes: Sequence[Node], found: re.Match[str]) -> list[Site]:
    """The message gives the anchor's position (1-based) and no regex: the regexes with it there."""
    position, anchor = int(found["position"]), found["anchor"]
    return [
        Site("pattern anchor in the middle", pointer)
        for pointer, pattern in _regex_sites(nodes)
        if 1 < position <= len(pattern) and pattern[position - 1] == anchor
    ]


def _number_multiple(nodes: Sequence[Node], _: re.Match[str]) -> list[Site]:
    return [
        Site("number multipleOf", f"{n.pointer}/multipleOf")
        for n in nodes
        if "multipleOf" in n.schema and "number" in (declared_types(n.schema) or set())
    ]


def _one_sided(nodes: Sequence[Node], _: re.Match[str]) -> list[Site]:
    """xgrammar 0.2.7-0.2.9 drop an integer multipleOf bounded on one side only (both sides: kept)."""
    return [
        Site("multipleOf beside a one-sided range", f"{n.pointer}/multipleOf")
        for n in nodes
        if "multipleOf" in n.schema
        and "integer" in (declared_types(n.schema) or set())
        and any(k in n.schema for k in _LOWER) != any(k in n.schema for k in _UPPER)
    ]


def _integer_multiple(nodes: Sequence[Node], found: re.Match[str]) -> list[Site]:
    """On an integer: a fractional multipleOf ("must be an integer"), or a whole one past the limit
    the message gives ("must be > 0 and <= 1024")."""
    limit = found["limit"]

    def dropped(value: Any) -> bool:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        if not limit:
            return not is_integral(value)
        return value == math.inf or (is_integral(value) and not 0 < value <= int(limit))

    return [  # the table's names: a fractional step is a number's, a large one has its own
        Site(
            f"integer multipleOf over {limit}" if limit else "number multipleOf",
            f"{n.pointer}/multipleOf",
        )
        for n in nodes
        if "integer" in (declared_types(n.schema) or set()) and dropped(n.schema.get("multipleOf"))
    ]


def _length_beside(nodes: Sequence[Node], found: re.Match[str]) -> list[Site]:
    """xgrammar 0.2.8+ drops minLength/maxLength beside a pattern or a format it knows."""
    beside = found["beside"]
    out: list[Site] = []
    for node in nodes:
        value = node.schema.get(beside)
        known = isinstance(value, str) and (beside == "pattern" or value in backends.XGRAMMAR_FORMATS)
        if known and (declared_types(node.schema) or set()) <= {"string"}:
            out.extend(
                Site(f"{key} beside {beside}", f"{node.pointer}/{key}")
                for key in ("minLength", "maxLength")
                if key in node.schema
            )
    return out


def _optional_properties(nodes: Sequence[Node]) -> list[Site]:
    out: list[Site] = []
    for node in nodes:
        properties = node.schema.get("properties")
        required = node.schema.get("required", [])
        if isinstance(properties, dict) and not set(properties) <= set(
            required if isinstance(required, list) else []
        ):
            out.extend(
                Site(f"{key} with optional properties", f"{node.pointer}/{key}")
                for key in ("minProperties", "maxProperties")
                if key in node.schema
            )
    return out


Mapper = Callable[[Sequence[Node], re.Match[str]], list[Site]]


@dataclass(frozen=True)
class _Message:
    """One message xgrammar can log: how to recognise it, where it applies, and its keyword (formatted
    with the match's named groups) for when no place in the schema matches."""

    regex: str  # searched with re.S: a quoted regex may span lines
    where: Mapper
    keyword: str


# Every message xgrammar 0.2.7-0.2.9 can log while compiling a JSON Schema (grepped from `strings` of
# each libxgrammar_bindings.so, each triggered on the three versions; the length ones from 0.2.8).
_XGRAMMAR_MESSAGES = (
    _Message(r"oneOf .*falling back to anyOf", _oneof, "oneOf exclusivity"),
    _Message(r"allOf with multiple options", _allof, "allOf with several branches"),
    _Message(r"^Lookahead assertion is not supported and is ignored in regex: (?P<regex>.*)$",
             _lookahead, "pattern lookaround"),
    _Message(r"^Anchor '(?P<anchor>.)' in the middle of regex is ignored: (?P<regex>.*)$",
             _anchor, "pattern anchor in the middle"),
    _Message(r"^Regex parsing warning at position (?P<position>\d+): '(?P<anchor>.)' should be",
             _anchor_at, "pattern anchor in the middle"),
    _Message(r"multipleOf is not supported for type:number", _number_multiple,
             "number multipleOf"),
    _Message(r"range \+ multipleOf combination", _one_sided, "multipleOf beside a one-sided range"),
    _Message(r"multipleOf for type:integer must be (?:> 0 and <= (?P<limit>\d+))?",
             _integer_multiple, "number multipleOf"),
    _Message(r"^(?P<beside>pattern|format) combined with minLength/maxLength", _length_beside,
             "maxLength beside {beside}"),
)  # fmt: skip
