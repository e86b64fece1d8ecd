"""One analysis of one spec, the same for every consumer: the daemon (once per distinct spec a probe
reports) and `gdx lint` (once per distinct spec of its input) both call `report` and add only what is
theirs (the daemon: timing, counts and exposure; lint: engine compiles, probes and proofs on request).
A team that sees one verdict in CI and another on the dashboard stops trusting both, so nothing about
a spec's findings is decided anywhere else.

The text is decoded once (or not at all when the caller already holds the decoded value, or the kind
is a regex or a grammar) and that value feeds every step: the lint rules, what the engines said, the
literal digests, the family fingerprint, the shape hash and the title. Pure: no I/O, bounded by the
lint budget, never raises (a rule that fails becomes a `too_complex` finding and `failure` says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.analysis import lint, spec
from exporter.engines.grammars import enginelogs
from exporter.engines.grammars.backends import Versions
from exporter.schema import family, identity, variants
from exporter.schema.findings import MAX_INPUT_CHARS, SEVERITIES, Finding, Thresholds
from exporter.schema.identity import JSON_KINDS
from exporter.schema.walk import Budget

TEXT_KINDS = ("regex", "grammar")  # never JSON: not decoded
NOT_DECODED = object()  # `parsed` when the caller has not decoded the text


@dataclass(frozen=True, slots=True)
class EngineSaid:
    """What an engine said when it compiled the spec (an enginelogs.CompileOutcome): the daemon gets
    llguidance's grammar warnings from the probe, `gdx lint` its own compiles' errors and logs."""

    engine: str
    version: str
    warnings: tuple[str, ...] = ()
    ok: bool = True
    error: str = ""


@dataclass(frozen=True, slots=True)
class SpecReport:
    """The verdict on one spec: never a literal value outside `parsed`, which is for the caller's next
    step (positions, proofs) and is never exposed."""

    kind: str  # the request kind analysed ("auto" resolved)
    findings: tuple[Finding, ...]  # errors first, then by pointer and rule
    literals: variants.LiteralMap  # pointer -> digest of each literal ({} unless a JSON schema)
    fingerprint: family.Fingerprint
    shape_hash: str
    title: str  # the sanitised top-level title ("" when none)
    failure: str = ""  # the exception a rule raised ("" normally): a bug, reported as too_complex
    parsed: Any = field(default=None, compare=False, repr=False)  # the decoded spec; None when not JSON


def order(finding: Finding) -> tuple[int, str, str, str]:
    """Errors first, then by place in the document, then by rule and keyword."""
    return SEVERITIES.index(finding.severity), finding.pointer, finding.rule, finding.keyword


def report(
    kind: str,
    text: str,
    thresholds: Thresholds = spec.DEFAULT_THRESHOLDS,
    *,
    engines: Iterable[str] = ("xgrammar", "llguidance"),
    versions: Versions | None = None,
    said: Sequence[enginelogs.CompileOutcome] = (),
    parsed: Any = NOT_DECODED,
) -> SpecReport:
    """The findings, literal digests, family fingerprint, shape hash and title of one spec string.

    `versions`: the engine versions whose backend tables apply (default the newest); `said`: what the
    engines said compiling it, merged in (llguidance's warnings as `llguidance_ignored`, its refusal,
    xgrammar's logs); `parsed`: the decoded text when the caller already has it."""
    engines = tuple(engines)
    if kind == "auto":  # as spec.detect decides, from the one decode
        if parsed is NOT_DECODED and len(text) <= MAX_INPUT_CHARS:
            parsed = identity.parse_spec(text)
        if parsed is None or parsed is NOT_DECODED:
            kind, parsed = family.text_kind(text[: family.MAX_TEXT]), NOT_DECODED
        else:
            kind = spec.kind_of_value(parsed)
    budget = thresholds.budget
    value: Any = None
    if kind in TEXT_KINDS:
        pass
    elif kind in (*JSON_KINDS, "structural_tag"):
        if parsed is not NOT_DECODED and len(text) <= MAX_INPUT_CHARS:
            value = parsed
        else:
            value, refusal = lint.decode(text)
            if refusal is not None:  # an undecodable structural tag has nothing to lint, as before
                kept = [refusal] if kind in JSON_KINDS or refusal.rule == "too_complex" else []
                return _report(kind, text, None, kept, {}, "", budget)
    else:  # choice, other: nothing to lint, but a JSON value has a family of its own
        value = parsed if parsed is not NOT_DECODED else identity.parse_spec(text)
    failure = ""
    try:
        if kind in JSON_KINDS:
            found = lint.lint(value, thresholds, engines, versions=versions)
            if said and isinstance(value, (dict, bool)):
                found = enginelogs.merge(found, enginelogs.findings(value, said, budget))
            digests = variants.literals(value, budget)
        else:
            found = spec.lint_spec(kind, text, thresholds, engines, versions=versions, parsed=value)
            digests = {}
    except Exception as err:  # a bug in a rule must not stop the other rules' specs
        failure = type(err).__name__
        found = [Finding("too_complex", "error", "", f"analysis failed ({failure})", "report this schema")]
        digests = {}
    return _report(kind, text, value, found, digests, failure, budget)


def _report(
    kind: str,
    text: str,
    value: Any,
    found: list[Finding],
    digests: variants.LiteralMap,
    failure: str,
    budget: Budget,
) -> SpecReport:
    fingerprint = family.text_fingerprint(text) if value is None else family.fingerprint(text, value, budget)
    shape = identity.spec_shape_hash(kind, text, value) if value is not None else identity.digest(text)
    findings = tuple(sorted(found, key=order))
    return SpecReport(kind, findings, digests, fingerprint, shape, identity.title_of(value), failure, value)
