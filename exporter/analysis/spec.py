"""Any spec an engine compiles, not only JSON Schema: what it is (`detect`) and what it costs (`lint_spec`).

Structured-output requests carry a JSON Schema, a regex, a grammar (GBNF/EBNF or Lark), a choice list
or a structural tag (JSON Schemas between trigger strings). The probe reports each with its request
kind (`exporter.wire.REQUEST_KINDS`); `gdx lint` meets them in request logs and in files. The same
costs apply to each kind, so each gets the rules that fit it:
- a regex: the JSON `pattern` rules on the whole regex (a bounded repeat unrolls into states, a
  lookaround is refused), and a wide alternation, which costs what an `enum` of as many members does;
- a grammar: its size (every rule is compiled against the whole vocabulary) and its bounded repeats;
- a structural tag: the JSON Schemas inside it, each linted as a schema, at pointers into the tag.

`detect` agrees with `gdx hash` (identity.parse_spec): text that is JSON is JSON, whatever else it could
be; the rest is a grammar or a regex as the family key decides (family.text_kind), so a spec's kind
here and its family's kind are one answer. Pure functions, bounded like `lint` (MAX_INPUT_CHARS, the
walk budget): hostile input gives a `too_complex` finding or none, never an exception.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

from exporter.analysis.lint import lint, parse_and_lint
from exporter.engines.grammars import backends
from exporter.schema import family, identity, regex
from exporter.schema.findings import MAX_INPUT_CHARS, Finding, Thresholds
from exporter.schema.walk import Budget, TooComplex, escape

MAX_REGEX_CHARS = 100_000  # a whole regex request is parsed up to this (about 0.1 s); longer: no findings
# A grammar is a warning past either limit. Measured with xgrammar 0.2.9 over the Llama 3 vocabulary
# (cold compiles, 2 cores): 100 rules of alternatives took 0.27 s, 300 rules 0.52 s, 1,000 rules 1.7 s
# (41,676 chars); a chain of 1,000 nested rules (29,779 chars) took 0.2 s with xgrammar and 1.0 s
# with llguidance 1.9.1. Past 200 rules or 20,000 characters a cold compile is hundreds of ms.
GRAMMAR_RULES = 200
GRAMMAR_CHARS = 20_000
SCHEMA_KEYS = ("schema", "json_schema")  # where a structural tag holds a JSON Schema (old and new formats)
DEFAULT_THRESHOLDS = Thresholds()
DEFAULT_BUDGET = Budget()
# What a hostile text can raise inside the analysis of a regex or grammar: no findings, not a crash.
HOSTILE = (RecursionError, ValueError, TypeError, OverflowError)

# Text inside a grammar that is not grammar: quoted strings, character classes, comments. One pattern,
# so that whichever starts first wins (GBNF's `[^"\\]` holds a quote; a string may hold a `[`). An
# unclosed string or class runs to the end of its line: every alternative always matches where it
# starts, so the scan is linear (no backtracking over a line of unclosed quotes).
_NOT_CODE = re.compile(
    r'"(?:[^"\\\n]|\\[^\n]?)*(?:"|$)|\[(?:[^\]\\\n]|\\[^\n]?)*(?:\]|$)|(?:#|//)[^\n]*', re.MULTILINE
)
_GBNF_RULE = re.compile(r"::=")
_LARK_RULE = re.compile(r"^[ \t]*[?!]?[A-Za-z_][\w]*(?:\.-?\d+)?[ \t]*:(?![:=])", re.MULTILINE)
_BOUND = re.compile(r"\{\s*(\d{1,12})\s*(?:(,)\s*(\d{0,12})\s*)?\}")
_LARK_RANGE = re.compile(r"~\s*(\d{1,12})(?:\s*\.\.\s*(\d{1,12}))?")


def detect(text: str) -> str:
    """ "json" for text that is one JSON value (as `gdx hash` decides), "structural_tag" for a JSON
    object that is a structural tag; otherwise "grammar" (`::=`, or a Lark `name:` rule line) or
    "regex". A regex such as `Answer: (yes|no)` looks like a Lark rule: name the kind where it matters."""
    if len(text) > MAX_INPUT_CHARS:
        return family.text_kind(text[: family.MAX_TEXT])
    value = identity.parse_spec(text)
    if value is None:
        return family.text_kind(text[: family.MAX_TEXT])
    return kind_of_value(value)


def kind_of_value(value: Any) -> str:
    """The kind of an already decoded JSON spec: "structural_tag" or "json"."""
    return "structural_tag" if is_structural_tag(value) else "json"


def is_structural_tag(value: Any) -> bool:
    """vLLM's and xgrammar's structural tags: `{"type": "structural_tag", ...}` (the `format` trees and
    vLLM's response_format), or the older object with `structures` and `triggers`."""
    if not isinstance(value, dict):
        return False
    return value.get("type") == "structural_tag" or ("structures" in value and "triggers" in value)


def lint_spec(
    kind: str,
    text: str,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    engines: Iterable[str] = ("xgrammar", "llguidance"),
    *,
    versions: backends.Versions | None = None,
    parsed: Any = None,
) -> list[Finding]:
    """Findings for one spec of a request kind ("auto": `detect` it), sorted by pointer. json and
    json_object: the JSON Schema rules; regex, grammar, structural_tag: below; choice, other and an
    unknown kind: none (a choice list compiles to as many literal strings, cheap). `versions`: the
    engine versions whose backend tables apply (default: the newest known). `parsed`: a structural
    tag already decoded (exporter/analysis/spec_report.py decodes each spec once)."""
    engines = tuple(engines)
    if kind == "auto":
        kind = detect(text)
    if kind in ("json", "json_object"):
        return parse_and_lint(text, thresholds, engines, versions=versions)
    if kind not in ("regex", "grammar", "structural_tag"):
        return []
    if len(text) > MAX_INPUT_CHARS:
        return [_too_complex("", f"spec text over {MAX_INPUT_CHARS} characters", "split the spec")]
    try:
        if kind == "regex":
            found = lint_regex(text, thresholds, engines, versions=versions)
        elif kind == "grammar":
            found = lint_grammar(text, thresholds)
        else:
            found = lint_structural_tag(text, thresholds, engines, versions=versions, parsed=parsed)
    except HOSTILE:
        return []
    return sorted(found, key=lambda finding: (finding.pointer, finding.rule, finding.message))


# ---------------------------------------------------------------------------------------------------
# Regex requests


def lint_regex(
    text: str, limits: Thresholds, engines: Iterable[str], *, versions: backends.Versions | None = None
) -> list[Finding]:
    """The whole regex at pointer "". Lookaround: measured on xgrammar 0.2.9, a regex request with
    one fails to compile ("Lookahead is not supported yet"), where a JSON `pattern` with one compiles
    and drops it; llguidance 1.9.1 refuses both (tests/integration/test_lint_cli.py re-checks this).
    An unparsable regex (or one over MAX_REGEX_CHARS) gets no findings: no guess."""
    facts = regex.facts(text, MAX_REGEX_CHARS)
    if facts is None:
        return []
    out: list[Finding] = []
    if facts.max_bounded_repeat > limits.quantifier:
        out.append(
            Finding(
                "bounded_quantifier", "warning", "",
                f"a bounded repeat up to {facts.max_bounded_repeat} unrolls into as many grammar states",
                "drop the length bound from the regex (use + or *) and check the length after decoding",
            )
        )  # fmt: skip
    if facts.widest_alternation > limits.enum_size:
        out.append(
            Finding(
                "regex_alternation", "info", "",
                f"an alternation of {facts.widest_alternation} branches (limit {limits.enum_size}): each "
                "branch is a grammar path, as an enum member is",
                "match the general form (e.g. a character class and +) and check membership after decoding",
            )
        )  # fmt: skip
    if facts.lookaround:
        out.extend(_lookaround(set(engines), versions or backends.NEWEST))
    return out


def _lookaround(engines: set[str], versions: backends.Versions) -> Iterator[Finding]:
    """Measured on xgrammar 0.2.7 to 0.2.9 and llguidance 1.7.6 and 1.9.1 alike (issue 15;
    tests/integration/test_lint_cli.py re-checks the installed ones)."""
    fix = "remove the lookaround from the regex and check that condition after decoding"
    if "xgrammar" in engines:
        yield Finding(
            "xgrammar_refused", "error", "",
            f"xgrammar refuses `lookaround` in a regex at compile time (verified on xgrammar "
            f"{backends.xgrammar_table_version(versions.xgrammar)}; in a JSON `pattern` it compiles and "
            "drops it): the request fails",
            fix, "lookaround",
        )  # fmt: skip
    if "llguidance" in engines:
        yield Finding(
            "llguidance_refused", "error", "",
            f"llguidance refuses `lookaround` at compile time (verified on llguidance "
            f"{backends.llguidance_table_version(versions.llguidance)}): the request fails",
            fix, "lookaround",
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# Grammar requests


def grammar_facts(text: str) -> tuple[int, int, int]:
    """(rules, the largest finite repeat bound, its line) of a GBNF/EBNF or Lark grammar. Quoted
    strings, character classes and comments are removed first: a `{` or `::=` inside them is text.
    Rules: the `::=` definitions, or for Lark the `name:` lines (rules and terminals)."""
    code = _NOT_CODE.sub(" ", text)  # none of them spans a line: line numbers stay right
    rules = len(_GBNF_RULE.findall(code)) or len(_LARK_RULE.findall(code))
    largest, at = 0, 0
    for match in _BOUND.finditer(code):
        low, comma, high = match.groups()
        bound = int(low) if not comma else int(high) if high else 0  # {m,} is unbounded
        if bound > largest:
            largest, at = bound, match.start()
    for match in _LARK_RANGE.finditer(code):
        bound = int(match.group(2) or match.group(1))
        if bound > largest:
            largest, at = bound, match.start()
    return rules, largest, code.count("\n", 0, at) + 1 if largest else 0


def lint_grammar(text: str, limits: Thresholds) -> list[Finding]:
    """Always its size (info; a warning past GRAMMAR_RULES or GRAMMAR_CHARS) and its largest bounded
    repeat when over the `quantifier` limit, as for a JSON `pattern`."""
    rules, largest, line = grammar_facts(text)
    size = f"{rules} rules, {len(text)} chars"
    if rules > GRAMMAR_RULES or len(text) > GRAMMAR_CHARS:
        out = [
            Finding(
                "grammar_size", "warning", "",
                f"{size} (warning from {GRAMMAR_RULES} rules or {GRAMMAR_CHARS} chars): each rule compiles "
                "against the whole vocabulary; 1,000 rules took 1.7 s with xgrammar",
                "split the grammar per request type, or constrain less and check after decoding",
            )
        ]  # fmt: skip
    else:
        out = [
            Finding(
                "grammar_size", "info", "", f"{size}",
                f"fine below {GRAMMAR_RULES} rules and {GRAMMAR_CHARS} chars; "
                "keep the grammar one static string",
            )
        ]  # fmt: skip
    if largest > limits.quantifier:
        out.append(
            Finding(
                "bounded_quantifier", "warning", "",
                f"a bounded repeat up to {largest} (line {line}) unrolls into as many grammar states",
                "drop the bound from the grammar (use + or *) and check the length after decoding",
            )
        )  # fmt: skip
    return out


# ---------------------------------------------------------------------------------------------------
# Structural tags


def lint_structural_tag(
    text: str,
    limits: Thresholds,
    engines: Iterable[str],
    *,
    versions: backends.Versions | None = None,
    parsed: Any = None,
) -> list[Finding]:
    """Each JSON Schema inside the tag linted, its pointers prefixed by where it sits (e.g.
    `/structures/0/schema/properties/x`). The search and the lints share one time budget; past it,
    one `too_complex` finding. `parsed`: the tag already decoded."""
    if parsed is not None:
        value = parsed
    else:
        try:
            value = json.loads(text)
        except RecursionError:
            return [_too_complex("", "nesting too deep to parse", "flatten the structural tag")]
        except ValueError:
            return []
    deadline = time.monotonic() + limits.budget.max_seconds
    out: list[Finding] = []
    try:
        for prefix, schema in inner_schemas(value, limits.budget):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TooComplex(f"more than {limits.budget.max_seconds:g}s")
            inner = dataclasses.replace(limits, budget=Budget(limits.budget.max_nodes, left))
            out.extend(
                dataclasses.replace(finding, pointer=prefix + finding.pointer)
                for finding in lint(schema, inner, engines, versions=versions)
            )
    except TooComplex as err:
        out.append(
            _too_complex(
                "", f"analysis stopped: {err}; the engine's compile is likely as unbounded", "split the tag"
            )
        )
    return out


def inner_schemas(value: Any, budget: Budget = DEFAULT_BUDGET) -> Iterator[tuple[str, Any]]:
    """(pointer, schema) of every object under a `schema` or `json_schema` key, in document order,
    not looking inside a schema once found. Iterative; past the budget's values or seconds it raises
    TooComplex."""
    started = time.monotonic()
    stack: list[tuple[str, Any]] = [("", value)]
    visited = 0
    while stack:
        pointer, node = stack.pop()
        visited += 1
        if visited > budget.max_nodes or (
            visited % 256 == 0 and time.monotonic() - started > budget.max_seconds
        ):
            raise TooComplex(f"more than {visited - 1} values or {budget.max_seconds:g}s")
        if isinstance(node, dict):
            found: list[tuple[str, Any]] = []
            for key, child in node.items():
                where = f"{pointer}/{escape(str(key))}"
                if key in SCHEMA_KEYS and isinstance(child, dict):
                    yield where, child
                elif isinstance(child, (dict, list)):
                    found.append((where, child))
            stack.extend(reversed(found))
        elif isinstance(node, list):
            stack.extend((f"{pointer}/{i}", child) for i, child in reversed(list(enumerate(node))))


def _too_complex(pointer: str, message: str, fix: str) -> Finding:
    return Finding("too_complex", "error", pointer, message, fix)
