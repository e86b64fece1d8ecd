"""Lint: every rule over one schema, in words a developer acts on. The structural rules are JSON
Schema's (exporter/schema/structure.py); the backend rules read the grammar engines' tables
(exporter/engines/grammars/), which is why this runs above both.

Each rule is a small function over one subschema (or, for `dynamic_schema` and
`unstable_serialization`, over a set of variants) and returns findings with a rule id, a severity,
the JSON pointer where it fires and a one-line fix. Pure functions: no I/O. Cost is bounded by the
walker's budget; past it the schema gets one `too_complex` finding instead of an answer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any

from exporter.engines.grammars import backends, compiled, gaps
from exporter.schema import regex
from exporter.schema.findings import MAX_INPUT_CHARS, Finding, Rule, Thresholds
from exporter.schema.structure import (
    bounded_quantifier,
    depth,
    large_enum,
    max_items,
    union_depth,
    union_width,
)
from exporter.schema.walk import Cycle, Node, TooComplex, escape, walk

WHAT_IT_DOES = {  # where dropping the keyword reaches further than the keyword
    "allOf with several branches": ": this whole subschema accepts any JSON value",
    "oneOf exclusivity": ": a value matching several branches passes",
}


def xgrammar_unenforced(
    node: Node,
    limits: Thresholds,
    versions: backends.Versions = backends.NEWEST,
    root: Any = None,
    live: frozenset[str] | None = None,
) -> Iterable[Finding]:
    """What xgrammar drops (a warning) and, on the versions that do, what fails its compile (an
    error, rule `xgrammar_refused`), from the table of the version reported (or the closest known).
    Only where xgrammar compiles (`live`, exporter/engines/grammars/compiled.py): under a `not`, beside a
    union, in a definition nothing compiled refers to, a dropped keyword changes nothing."""
    if live is not None and node.pointer not in live:
        return
    version = backends.xgrammar_table_version(versions.xgrammar)
    facts = _lookaround(node)
    schema = node.schema
    if node.pointer.endswith("/propertyNames"):  # names are strings: xgrammar enforces these
        schema = {"type": "string", **schema}
    for keyword, key in gaps.xgrammar_gaps(schema, facts, version, root):
        named = schema.get("format")
        if keyword.startswith("format ") and isinstance(named, str) and named not in backends.SPEC_FORMATS:
            yield Finding(  # nothing enforces a format the spec does not define: not xgrammar's gap
                "xgrammar_unenforced", "info", f"{node.pointer}/{escape(key)}",
                f"xgrammar compiles `{keyword}` and ignores it, as JSON Schema validators ignore a format "
                f"the spec does not define (verified on xgrammar {version})",
                "check the value after decoding if it matters", keyword,
            )  # fmt: skip
            continue
        yield Finding(
            "xgrammar_unenforced", "warning", f"{node.pointer}/{escape(key)}",
            f"xgrammar compiles `{keyword}` and does not enforce it{WHAT_IT_DOES.get(keyword, '')} "
            f"(verified on xgrammar {version})",
            "validate the output after decoding, or use llguidance where it refuses instead", keyword,
        )  # fmt: skip
    for keyword, key in gaps.xgrammar_refusals(schema, version):
        yield Finding(
            "xgrammar_refused", "error", f"{node.pointer}/{escape(key)}",
            f"xgrammar refuses `{keyword}` at compile time (verified on xgrammar {version}): "
            "the request fails",
            "rewrite the schema without it, or upgrade xgrammar", keyword,
        )  # fmt: skip


LENGTH_WHY = (
    "a string with a length bound takes no escape sequence at all (no quote, backslash or control "
    "character, whatever its length), so a value holding one is refused"
)
LENGTH_FIX = (
    "drop the bound from the grammar and check the length after decoding (gdx fix does), or use llguidance"
)
OVERREACH_WHY = {
    "escapes under maxLength": LENGTH_WHY,
    "escapes under minLength": LENGTH_WHY,
    "pattern matched whole": "it matches the pattern against the whole value, where JSON Schema searches "
    "(no implicit anchors), so a value with text beside the match is refused",
    "patternProperties matched whole": "it matches each name pattern against the whole name, where JSON "
    "Schema searches, so a name with text beside the match is refused",
}
OVERREACH_FIX = {
    "escapes under maxLength": LENGTH_FIX,
    "escapes under minLength": LENGTH_FIX,
    "pattern matched whole": "anchor the pattern (^...$) as the values really are, or write `.*` where "
    "text may stand beside the match",
    "patternProperties matched whole": "anchor the name pattern (^...$) as the names really are, or "
    "write `.*` where text may stand beside the match",
}


def xgrammar_overenforced(
    node: Node,
    limits: Thresholds,
    versions: backends.Versions = backends.NEWEST,
    live: frozenset[str] | None = None,
) -> Iterable[Finding]:
    """Where xgrammar refuses values the schema allows: outputs the schema promises that no decoding
    can produce (a warning; --prove shows one). Only where xgrammar compiles (`live`)."""
    if live is not None and node.pointer not in live:
        return
    version = backends.xgrammar_table_version(versions.xgrammar)
    for keyword, key in gaps.xgrammar_overreach(node.schema, version):
        yield Finding(
            "xgrammar_overenforced", "warning", f"{node.pointer}/{escape(key)}",
            f"xgrammar refuses values the schema allows (`{keyword}`): {OVERREACH_WHY[keyword]} "
            f"(verified on xgrammar {version})",
            OVERREACH_FIX[keyword], keyword,
        )  # fmt: skip


def llguidance_refused(
    node: Node, limits: Thresholds, versions: backends.Versions = backends.NEWEST
) -> Iterable[Finding]:
    version = backends.llguidance_table_version(versions.llguidance)
    facts = _lookaround(node)
    for keyword, key in gaps.llguidance_refusals(node.schema, facts, version):
        yield Finding(
            "llguidance_refused", "error", f"{node.pointer}/{escape(key)}",
            f"llguidance refuses `{keyword}` at compile time (verified on llguidance {version}): "
            "the request fails",
            "remove the keyword from the grammar and validate after decoding", keyword,
        )  # fmt: skip


NODE_RULES: dict[str, Rule] = {
    "depth": depth,
    "union_depth": union_depth,
    "union_width": union_width,
    "bounded_quantifier": bounded_quantifier,
    "large_enum": large_enum,
    "max_items": max_items,
    "xgrammar_unenforced": xgrammar_unenforced,
    "xgrammar_overenforced": xgrammar_overenforced,
    "llguidance_refused": llguidance_refused,
}
ENGINE_RULES = {
    "xgrammar": ("xgrammar_unenforced", "xgrammar_overenforced"),
    "llguidance": ("llguidance_refused",),
}
# Rules that depend on where a node is reached (depth, union nesting) run on every visit; the others
# once per place in the document (not again through each $ref), and only when one of their keywords
# is present.
CONTEXT_RULES = ("depth", "union_depth")
_XGRAMMAR_KEYS = {*backends.SIMPLE_KEYWORDS, "anyOf", "oneOf", "allOf", "pattern", "format", "$ref",
                  "required", "multipleOf", "enum", "const", "patternProperties",
                  *backends.UNTYPED_DROPS}  # fmt: skip
_LLGUIDANCE_KEYS = {*backends.SIMPLE_KEYWORDS, "propertyNames", "unevaluatedProperties", "unevaluatedItems",
                    "oneOf", "minProperties", "maxProperties", "pattern", "patternProperties",
                    "format"}  # fmt: skip
TRIGGERS: dict[str, frozenset[str]] = {
    "union_width": frozenset({"anyOf", "oneOf"}),
    "bounded_quantifier": frozenset({"pattern", "patternProperties"}),
    "large_enum": frozenset({"enum"}),
    "max_items": frozenset({"minItems", "maxItems"}),
    "xgrammar_unenforced": frozenset(_XGRAMMAR_KEYS),
    "xgrammar_overenforced": frozenset({"minLength", "maxLength", "pattern", "patternProperties"}),
    "llguidance_refused": frozenset(_LLGUIDANCE_KEYS),
}
# The rules of non-JSON specs (regex and grammar requests, exporter/analysis/spec.py) come last.
RULES = (
    *NODE_RULES, "recursive_ref", "dynamic_schema", "unstable_serialization", "too_complex", "invalid_spec",
    "xgrammar_refused", "regex_alternation", "grammar_size", "llguidance_ignored", "backend_mismatch",
    "server_crash", "server_stall", "server_rejected",
)  # fmt: skip


def lint(
    schema: Any,
    thresholds: Thresholds = Thresholds(),
    engines: Iterable[str] = ("xgrammar", "llguidance"),
    *,
    versions: backends.Versions | None = None,
) -> list[Finding]:
    """Findings for one decoded schema, sorted by pointer; duplicates (a definition reached through
    several $refs) reported once. `versions`: the engine versions whose backend tables apply
    (default: the newest known)."""
    skip = {rule for engine, rules in ENGINE_RULES.items() if engine not in set(engines) for rule in rules}
    context = [NODE_RULES[name] for name in CONTEXT_RULES]
    bound = versions or backends.NEWEST
    # where xgrammar compiles, read once for both of its rules
    live = compiled.live(schema) if isinstance(schema, dict) and "xgrammar" in set(engines) else None
    keyed = [
        (TRIGGERS[name], _with_versions(name, rule, bound, schema, live))
        for name, rule in NODE_RULES.items()
        if name in TRIGGERS and name not in skip
    ]
    found: dict[tuple[str, str, str], Finding] = {}
    cycles: list[Cycle] = []
    keyed_done: set[str] = set()
    try:
        for node in walk(schema, thresholds.budget, cycles):
            rules = list(context)
            if node.pointer not in keyed_done:  # once per place, however many $refs reach it
                keyed_done.add(node.pointer)
                keys = node.schema.keys()
                rules.extend(rule for trigger, rule in keyed if not trigger.isdisjoint(keys))
            for rule in rules:
                for finding in rule(node, thresholds):
                    found.setdefault((finding.rule, finding.pointer, finding.message), finding)
    except TooComplex as err:
        found[("too_complex", "", "")] = Finding(
            "too_complex", "error", "",
            f"analysis stopped: {err}; the engine's compile is likely as unbounded",
            "split the schema, or cap recursion and unions",
        )  # fmt: skip
    except RecursionError:
        found[("too_complex", "", "")] = Finding(
            "too_complex", "error", "", "analysis stopped: nesting too deep", "flatten the schema"
        )
    for cycle in cycles:
        found.setdefault(
            ("recursive_ref", cycle.pointer, ""),
            Finding(
                "recursive_ref", "warning", cycle.pointer,
                f"$ref to {cycle.target or '#'} recurses: the grammar expands it as deep as output goes",
                "replace the recursion with a fixed depth (e.g. two explicit levels)",
            ),
        )  # fmt: skip
    return sorted(found.values(), key=lambda finding: (finding.pointer, finding.rule, finding.message))


def decode(text: str) -> tuple[Any, Finding | None]:
    """A JSON spec's text decoded, or why it cannot be linted as one: over MAX_INPUT_CHARS or nested
    too deep (`too_complex`), or not JSON at all (`invalid_spec`: the engine cannot compile it and
    the request fails)."""
    if len(text) > MAX_INPUT_CHARS:
        message = f"schema text over {MAX_INPUT_CHARS} characters"
        return None, Finding("too_complex", "error", "", message, "split the schema")
    try:
        return json.loads(text), None
    except RecursionError:
        return None, Finding("too_complex", "error", "", "nesting too deep to parse", "flatten the schema")
    except ValueError as err:
        where = f" at line {err.lineno} column {err.colno}" if isinstance(err, json.JSONDecodeError) else ""
        reason = getattr(err, "msg", "undecodable")
        message = f"the spec is not JSON ({reason}{where}): the engine cannot compile it"
        return None, Finding(
            "invalid_spec", "error", "", message, "send the schema as JSON (json.dumps of the object)"
        )


def parse_and_lint(
    text: str,
    thresholds: Thresholds = Thresholds(),
    engines: Iterable[str] = ("xgrammar", "llguidance"),
    *,
    versions: backends.Versions | None = None,
) -> list[Finding]:
    """lint() of a schema given as text; oversize, too deeply nested or undecodable text is a finding,
    not an exception."""
    schema, refusal = decode(text)
    if refusal is not None:
        return [refusal]
    return lint(schema, thresholds, engines, versions=versions)


def _with_versions(
    name: str, rule: Rule, versions: backends.Versions, root: Any = None, live: frozenset[str] | None = None
) -> Rule:
    """The backend rules read the tables of the engine versions linted for (and xgrammar's, the
    document: its `$ref`s and its draft, and `live`: where it compiles)."""
    if name == "xgrammar_unenforced":
        return functools.partial(xgrammar_unenforced, versions=versions, root=root, live=live)
    if name == "xgrammar_overenforced":
        return functools.partial(xgrammar_overenforced, versions=versions, live=live)
    if name == "llguidance_refused":
        return functools.partial(llguidance_refused, versions=versions)
    return rule


def _lookaround(node: Node) -> bool:
    pattern = node.schema.get("pattern")
    if not isinstance(pattern, str):
        return False
    facts = regex.analyse(pattern)
    return facts is not None and facts.lookaround
