"""Lint rules: why a schema is slow to compile, or not enforced, in words a developer acts on.

Each rule is a small function over one subschema (or, for `dynamic_schema` and
`unstable_serialization`, over a set of variants) and returns findings with a rule id, a severity,
the JSON pointer where it fires and a one-line fix. Pure functions: no I/O. Cost is bounded by the
walker's budget; past it the schema gets one `too_complex` finding instead of an answer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from exporter.schema import backends, compiled, gaps, regex
from exporter.schema.walk import Budget, Cycle, Node, TooComplex, escape, walk

SEVERITIES = ("error", "warning", "info")
MAX_INPUT_CHARS = 16 * 2**20


@dataclass(frozen=True)
class Thresholds:
    """Where each rule starts to fire. Depth 3, 20 items and unions 3 deep are the limits taken from the
    per-tenant enum incident this project started from (its invoice schema, the one `make demo` sends,
    nests 3 levels); the other defaults were measured."""

    depth: int = 3
    max_items: int = 20
    union_depth: int = 3
    union_width: int = 8
    enum_size: int = 64
    quantifier: int = 32  # {8,64} compiled in 62-77 ms over the Llama 3 vocabulary, {8,640} in 300 ms
    budget: Budget = field(default_factory=Budget)
    # dynamic_schema (exporter/schema/injection.py): a family whose variants are used fewer times than
    # this on average is injected per request; an error once its compiles cost this many seconds.
    dynamic_reuse: float = 2.0
    dynamic_seconds: float = 1.0
    # In the daemon's window, new variants must have kept arriving this long before it warns: a static
    # set's first requests are all new variants too.
    dynamic_span: float = 30.0


@dataclass(frozen=True)
class Proof:
    """What `gdx lint --prove` found for a finding: an instance the engine accepts token by token and
    the validator rejects here (proven), or why none was found (unproven)."""

    status: str  # "proven" or "unproven"
    engine: str  # e.g. "xgrammar 0.2.9"
    instance: str = ""  # the counterexample, exactly as fed to the engine
    violation: str = ""  # the validator's error at the finding's pointer
    tokens: int = 0
    how: str = ""  # "mutation", "sampling", or why unproven
    seconds: float = 0.0


@dataclass(frozen=True, order=True)
class Finding:
    rule: str
    severity: str
    pointer: str
    message: str
    fix: str
    keyword: str = ""  # the keyword a backend rule is about (`format email`, `minLength`); "" for others
    proof: Proof | None = field(default=None, compare=False)

    def doc(self) -> dict[str, Any]:
        out = asdict(self)
        if self.proof is None:
            del out["proof"]
        return out


Rule = Callable[[Node, Thresholds], Iterable[Finding]]


def depth(node: Node, limits: Thresholds) -> Iterable[Finding]:
    """Levels of objects and arrays, the root being level 1: the demo's invoice schema (envelope,
    line_items array, line item) has 3."""
    if node.depth == limits.depth and _is_container(node.schema):
        yield Finding(
            "depth", "warning", node.pointer,
            f"object/array nesting reaches level {node.depth + 1} here (limit {limits.depth}): "
            "every level multiplies grammar states",
            f"flatten to at most {limits.depth} levels; "
            "move deep detail into a second request or post-processing",
        )  # fmt: skip


def union_depth(node: Node, limits: Thresholds) -> Iterable[Finding]:
    key = "anyOf" if "anyOf" in node.schema else "oneOf" if "oneOf" in node.schema else ""
    if key and node.union_depth == limits.union_depth:
        yield Finding(
            "union_depth", "warning", f"{node.pointer}/{key}",
            f"anyOf/oneOf nested {node.union_depth + 1} deep here (limit {limits.union_depth})",
            "flatten the unions into one discriminated union at one level",
        )  # fmt: skip


def union_width(node: Node, limits: Thresholds) -> Iterable[Finding]:
    for key in ("anyOf", "oneOf"):
        branches = node.schema.get(key)
        if isinstance(branches, list) and len(branches) > limits.union_width:
            yield Finding(
                "union_width", "info", f"{node.pointer}/{key}",
                f"{len(branches)} branches (limit {limits.union_width})",
                "split into fewer, distinct alternatives or into separate schemas per request type",
            )  # fmt: skip


def bounded_quantifier(node: Node, limits: Thresholds) -> Iterable[Finding]:
    for pointer, pattern in _patterns(node):
        facts = regex.analyse(pattern)
        if facts is not None and facts.max_bounded_repeat > limits.quantifier:
            yield Finding(
                "bounded_quantifier", "warning", pointer,
                f"a bounded repeat up to {facts.max_bounded_repeat} unrolls into as many grammar states",
                "drop the length bound from the pattern (use maxLength) or check the format after decoding",
            )  # fmt: skip


def large_enum(node: Node, limits: Thresholds) -> Iterable[Finding]:
    values = node.schema.get("enum")
    if isinstance(values, list) and len(values) > limits.enum_size:
        yield Finding(
            "large_enum", "info", f"{node.pointer}/enum",
            f"{len(values)} members (limit {limits.enum_size})",
            "constrain to a string and validate membership after decoding",
        )  # fmt: skip


def max_items(node: Node, limits: Thresholds) -> Iterable[Finding]:
    for key in ("minItems", "maxItems"):
        value = node.schema.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limits.max_items:
            yield Finding(
                "max_items", "warning", f"{node.pointer}/{key}",
                f"{key} {value} (limit {limits.max_items}): each counted item is a grammar state",
                f"drop {key} from the grammar and check the count after decoding",
            )  # fmt: skip


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
    Only where xgrammar compiles (`live`, exporter/schema/compiled.py): under a `not`, beside a
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
    "llguidance_refused": llguidance_refused,
}
BACKEND_RULES = {"xgrammar": "xgrammar_unenforced", "llguidance": "llguidance_refused"}
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
    "llguidance_refused": frozenset(_LLGUIDANCE_KEYS),
}
# The rules of non-JSON specs (regex and grammar requests, exporter/schema/spec.py) come last.
RULES = (
    *NODE_RULES, "recursive_ref", "dynamic_schema", "unstable_serialization", "too_complex", "invalid_spec",
    "xgrammar_refused", "regex_alternation", "grammar_size", "llguidance_ignored", "backend_mismatch",
    "server_crash", "server_stall",
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
    skip = {rule for engine, rule in BACKEND_RULES.items() if engine not in set(engines)}
    context = [NODE_RULES[name] for name in CONTEXT_RULES]
    bound = versions or backends.NEWEST
    keyed = [
        (TRIGGERS[name], _with_versions(name, rule, bound, schema))
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


def _with_versions(name: str, rule: Rule, versions: backends.Versions, root: Any = None) -> Rule:
    """The backend rules read the tables of the engine versions linted for (and xgrammar's, the
    document: its `$ref`s and its draft)."""
    if name == "xgrammar_unenforced":
        live = compiled.live(root) if isinstance(root, dict) else None
        return functools.partial(xgrammar_unenforced, versions=versions, root=root, live=live)
    if name == "llguidance_refused":
        return functools.partial(llguidance_refused, versions=versions)
    return rule


def _is_container(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return bool({"object", "array"} & {k for k in kinds if isinstance(k, str)}) or any(
        keyword in schema for keyword in ("properties", "items", "prefixItems", "additionalProperties")
    )


def _patterns(node: Node) -> Iterable[tuple[str, str]]:
    pattern = node.schema.get("pattern")
    if isinstance(pattern, str):
        yield f"{node.pointer}/pattern", pattern
    names = node.schema.get("patternProperties")
    if isinstance(names, dict):
        for name in names:
            yield f"{node.pointer}/patternProperties/{escape(name)}", name


def _lookaround(node: Node) -> bool:
    pattern = node.schema.get("pattern")
    if not isinstance(pattern, str):
        return False
    facts = regex.analyse(pattern)
    return facts is not None and facts.lookaround


def count(findings: Iterable[Finding]) -> dict[tuple[str, str], int]:
    """Places each (rule, severity) fires: the value of `schema_lint_findings`."""
    out: dict[tuple[str, str], int] = {}
    for finding in findings:
        key = (finding.rule, finding.severity)
        out[key] = out.get(key, 0) + 1
    return out
