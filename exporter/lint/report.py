"""`gdx lint`'s analysis: requests into a Report of schema families, each with its distinct specs.

Engines cache compiled grammars by the exact string, so a service that injects a value per request
compiles every request; one schema hash per variant would hide that. So the specs are grouped into
families (exporter/schema/family.py: the same spec up to injected literals, key order, whitespace and
per-request subsets) and each family is reported with its traffic, what varies and the reuse-aware
`dynamic_schema` finding (exporter/schema/injection.py, shared with the daemon); then each distinct
spec with its own findings (exporter/analysis/spec.py), computed once per schema hash however many
lines send it. Printing and exit codes are exporter/lint/command.py's.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.analysis import spec_report
from exporter.engines.grammars import backends
from exporter.engines.sglang import toolcalls as sglang_toolcalls
from exporter.engines.vllm import outlines_validation as bounded
from exporter.engines.vllm import routing, toolcalls
from exporter.lint.engines import CompileResult, Engines, ProbeResult
from exporter.lint.prove.search import Prover
from exporter.lint.requests import Inputs, Rejected, Request, Skipped
from exporter.schema import family, identity, injection, variants
from exporter.schema.family import Fingerprint, Variation
from exporter.schema.findings import SEVERITIES, Finding, Thresholds
from exporter.schema.walk import Budget


@dataclass(frozen=True)
class SchemaReport:
    """One distinct spec (schema hash) of the input and what it costs on its own."""

    name: str  # the first request that sent it
    schema_hash: str
    shape_hash: str
    kind: str
    title: str
    lines: int  # request lines that sent it
    findings: tuple[Finding, ...]
    compiles: tuple[CompileResult, ...] = ()
    probes: tuple[ProbeResult, ...] = ()
    vllm_backend: str = ""  # with --engine vllm: where that version's `auto` sends it

    @property
    def seconds(self) -> float | None:
        """A cold compile with the slowest of the engines asked for; None when not compiled."""
        return max((c.seconds for c in self.compiles), default=None)

    def outcome(self) -> tuple[Any, ...]:
        """What two variants share when their output would read the same (compile times aside)."""
        compiled = tuple((c.engine, c.ok, c.error) for c in self.compiles)
        probes = tuple((p.engine, p.keyword, p.outcome) for p in self.probes)
        return self.findings, compiled, probes, self.vllm_backend

    def doc(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "schema_hash": self.schema_hash,
            "shape_hash": self.shape_hash,
            "kind": self.kind,
            "title": self.title,
            "lines": self.lines,
            "findings": [finding.doc() for finding in self.findings],
            "compile": [compiled.doc() for compiled in self.compiles],
            "probes": [probe.doc() for probe in self.probes],
            **({"vllm_backend": self.vllm_backend} if self.vllm_backend else {}),
        }


@dataclass(frozen=True)
class FamilyReport:
    """A family of specs: its traffic in the input, what varies, `dynamic_schema`, its specs."""

    family: str
    name: str  # the first variant's sanitised title, else a name from its structure
    kind: str
    requests: int
    variants: int
    seconds: float | None  # compile seconds of its distinct variants (--tokenizer), else None
    varies: tuple[str, ...]
    findings: tuple[Finding, ...]
    schemas: tuple[SchemaReport, ...]

    def doc(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "name": self.name,
            "kind": self.kind,
            "requests": self.requests,
            "variants": self.variants,
            "seconds": None if self.seconds is None else round(self.seconds, 6),
            "varies": list(self.varies),
            "findings": [finding.doc() for finding in self.findings],
            "schemas": [schema.doc() for schema in self.schemas],
        }


@dataclass(frozen=True)
class ServerSteps:
    """The bounded runs of the API server's outlines validation (--engine vllm): how many, what they
    cost `gdx lint`, and why none ran where outlines_core is missing."""

    runs: int = 0
    seconds: float = 0.0
    unavailable: str = ""  # the reason none ran; "" when they did or none was needed
    guidance_runs: int = 0  # guidance-routed schemas checked with llguidance's own validation
    guidance_unavailable: str = ""  # why they were not (llguidance missing); "" otherwise

    def doc(self) -> dict[str, Any]:
        return {"runs": self.runs, "seconds": round(self.seconds, 3),
                **({"unavailable": self.unavailable} if self.unavailable else {}),
                "guidance_runs": self.guidance_runs,
                **({"guidance_unavailable": self.guidance_unavailable}
                   if self.guidance_unavailable else {})}  # fmt: skip


@dataclass(frozen=True)
class ServerBounds:
    """Where `gdx lint` runs the API server's unbounded validation steps: within these."""

    memory_bytes: int = bounded.DEFAULT_MEMORY_BYTES
    timeout: float = bounded.DEFAULT_TIMEOUT_SECONDS


REJECTED_RULE = "request_rejected"
# What a client does about each 400 vLLM answers before compiling anything (toolcalls.ERRORS).
REJECTED_FIXES = {
    "defs_clash": "give the clashing `$defs` entries distinct names in the tools' parameters",
    "defs_not_object": "make each tool's `$defs` an object of schemas",
    "unknown_named_tool": "name a tool of the request's `tools` in `tool_choice`, or send that tool",
    "no_tool_parser": "start vLLM with --enable-auto-tool-choice --tool-call-parser, or drop tool_choice",
    "parser_error": "use the chat completions API with this tool parser, or another parser",
    "no_function_tools": "send a function tool with tool_choice required or named",
}


@dataclass(frozen=True)
class RejectedRequest:
    """A request vLLM answers with a 400 before any grammar, as a finding of its own."""

    name: str
    finding: Finding
    server: str = "vLLM"

    def doc(self) -> dict[str, Any]:
        return {"name": self.name, **self.finding.doc()}


def rejected_request(rejected: Rejected) -> RejectedRequest:
    server = rejected.server
    fix = REJECTED_FIXES.get(rejected.error, f"send what {server}'s request validation accepts")
    statuses = sglang_toolcalls.ERROR_STATUS if server == "SGLang" else toolcalls.ERROR_STATUS
    message = (
        f"{server} answers HTTP {statuses.get(rejected.error, 400)} ({rejected.error}): {rejected.message}"
    )
    finding = Finding(REJECTED_RULE, "error", "", message, fix, rejected.error)
    return RejectedRequest(rejected.name, finding, server)


@dataclass(frozen=True)
class Report:
    families: tuple[FamilyReport, ...]
    skipped: tuple[Skipped, ...] = ()
    server: ServerSteps = ServerSteps()
    rejected: tuple[RejectedRequest, ...] = ()

    def findings(self) -> Iterator[Finding]:
        for group in self.families:
            yield from group.findings
            for schema in group.schemas:
                yield from schema.findings
        for request in self.rejected:
            yield request.finding

    def skipped_by_reason(self) -> dict[str, int]:
        """Requests without a grammar, by SKIP_REASONS key, most first."""
        counts = Counter(item.reason for item in self.skipped)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> dict[str, int]:
        counts = {severity: 0 for severity in SEVERITIES}
        for finding in self.findings():
            counts[finding.severity] += 1
        return {
            "families": len(self.families),
            "schemas": sum(len(group.schemas) for group in self.families),
            "requests": sum(group.requests for group in self.families),
            "skipped": len(self.skipped),
            "rejected": len(self.rejected),
            **counts,
        }

    def doc(self) -> dict[str, Any]:
        summary: dict[str, Any] = {**self.summary(), "skipped_by_reason": self.skipped_by_reason()}
        doc: dict[str, Any] = {"families": [group.doc() for group in self.families], "summary": summary}
        if self.rejected:
            doc["rejected"] = [request.doc() for request in self.rejected]
        if (
            self.server.runs
            or self.server.unavailable
            or self.server.guidance_runs
            or self.server.guidance_unavailable
        ):
            doc["api_server_validation"] = self.server.doc()
        return doc


@dataclass
class _Distinct:
    """A distinct spec while the requests are counted."""

    first: Request
    schema_hash: str
    texts: set[str] = field(default_factory=set)  # its exact strings (unstable_serialization)
    lines: int = 0


def analyse(
    inputs: Inputs,
    thresholds: Thresholds,
    engines: Sequence[str],
    checker: Engines | None = None,
    prover: Prover | None = None,
    versions: backends.Versions | None = None,
    router: str = "",
    server: ServerBounds | None = None,
    jobs: int = 1,
) -> Report:
    """Distinct specs (each analysed by the core, compiled and fingerprinted once), grouped into
    families in log order; each family ranked by compile seconds (when measured), variants, requests.
    `router`: a vLLM version whose `auto` routing to resolve each JSON Schema with (backend_mismatch);
    `server`: with it, the bounds to run that version's API-server validation of outlines-routed
    schemas in (server_crash, server_stall); None: not run. `jobs`: processes that analyse the
    distinct specs side by side (without engines or a prover: those hold one tokenizer's state)."""
    items = distinct_specs(inputs.requests, inputs.counts)
    if checker is None and prover is None and jobs > 1 and len(items) >= PARALLEL_MIN and forkable():
        members = in_parallel(items, thresholds, engines, versions, jobs)
    else:
        members = [_schema(item, thresholds, engines, checker, prover, versions) for item in items]
    steps = ServerSteps()
    if router:
        members, steps = routed(members, router, server)
    families = group(members)
    reports = [_family(family_id, found, thresholds) for family_id, found in families.items()]
    reports.sort(key=lambda f: (f.seconds or 0.0, f.variants, f.requests), reverse=True)
    rejected = tuple(rejected_request(item) for item in inputs.rejected)
    return Report(tuple(reports), inputs.skipped, steps, rejected)


PARALLEL_MIN = 64  # distinct specs below which one process is quicker than starting others
_WORK: list[tuple[list[_Distinct], Thresholds, tuple[str, ...], backends.Versions | None]] = []


def forkable() -> bool:
    """Whether this process can fork workers safely: only its main thread runs (a fork copies a lock
    another thread holds, held forever in the child) and the platform forks."""
    return threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()


def in_parallel(
    items: list[_Distinct],
    thresholds: Thresholds,
    engines: Sequence[str],
    versions: backends.Versions | None,
    jobs: int,
) -> list[_Member]:
    """`_schema` of each item in `jobs` forked processes, in order. The children inherit the items
    (nothing is sent to them but an index) and send back each spec's report and fingerprint."""
    context = multiprocessing.get_context("fork")
    _WORK[:] = [(items, thresholds, tuple(engines), versions)]
    try:
        with context.Pool(jobs) as pool:
            done = pool.map(_analysed, range(len(items)), chunksize=max(1, min(32, len(items) // (jobs * 8))))
    finally:
        _WORK.clear()
    return [
        _Member(item, report, fingerprint) for item, (report, fingerprint) in zip(items, done, strict=True)
    ]


def _analysed(index: int) -> tuple[SchemaReport, Fingerprint]:
    items, thresholds, engines, versions = _WORK[0]
    member = _schema(items[index], thresholds, engines, None, None, versions)
    return member.report, member.fingerprint


def distinct_specs(requests: Sequence[Request], counts: Sequence[int] = ()) -> list[_Distinct]:
    """By schema hash, in order of first appearance; a repeated exact string is hashed once. `counts`:
    the requests that sent each (read_inputs keeps one per exact string); none given, one each."""
    by_hash: dict[str, _Distinct] = {}
    hash_of: dict[str, str] = {}
    for index, request in enumerate(requests):
        schema_hash = hash_of.get(request.text)
        if schema_hash is None:
            schema_hash = hash_of[request.text] = identity.spec_schema_hash(
                request.kind, request.text, request.parsed
            )
        found = by_hash.get(schema_hash)
        if found is None:
            found = by_hash[schema_hash] = _Distinct(request, schema_hash)
        found.texts.add(request.text)
        found.lines += counts[index] if counts else 1
    return list(by_hash.values())


def xgrammar_converts() -> Callable[[Any], str | None] | None:
    """xgrammar's own conversion (no tokenizer needed), where xgrammar is installed; else None."""
    try:
        import xgrammar
    except ImportError:
        return None

    def converts(schema: Any) -> str | None:
        try:
            xgrammar.Grammar.from_json_schema(schema)
        except Exception as err:
            return str(err)[:200] or type(err).__name__
        return None

    return converts


def llguidance_validates() -> Callable[[str], str | None] | str:
    """vLLM's guidance validation of a JSON Schema (`validate_guidance_grammar`: llguidance's grammar
    from the schema with flexible whitespace, then its validation): text -> the error vLLM answers
    HTTP 400 with, or None. Where llguidance is not installed: the reason, a string."""
    try:
        import llguidance
    except ImportError as err:
        return f"llguidance is not installed: {err}"

    def validates(text: str) -> str | None:
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(
                text, defaults={"whitespace_flexible": True}
            )
            error = llguidance.LLMatcher.validate_grammar(grammar, None)
        except Exception as err:  # vLLM: "Invalid grammar specification: ..."
            return f"Invalid grammar specification: {str(err)[:300] or type(err).__name__}"
        return f"Grammar error: {error}" if error else None

    return validates


def routed(
    members: Sequence[_Member], version: str, server: ServerBounds | None = None
) -> tuple[list[_Member], ServerSteps]:
    """Each JSON Schema with the backend vLLM `version`'s `auto` gives it, backend_mismatch on those
    routed elsewhere than most of the requests and, within `server`'s bounds, server_crash and
    server_stall on those whose API-server validation (outlines) dies or blocks; server_rejected on
    those that validation or guidance's (llguidance's own, where installed) refuses."""
    converts = xgrammar_converts()
    guidance = llguidance_validates() if server is not None else "not asked"
    guidance_runs = 0
    routes = {
        m.report.schema_hash: (routing.route(m.spec.first.parsed, converts), m.report.lines)
        for m in members
        if m.report.kind == "json" and m.spec.first.parsed is not None
    }
    findings = routing.mismatch_findings(routes, version)
    out = []
    runs, seconds, unavailable = 0, 0.0, ""
    for member in members:
        found = routes.get(member.report.schema_hash)
        if found is None:
            out.append(member)
            continue
        extra = [findings[member.report.schema_hash]] if member.report.schema_hash in findings else []
        if found[0].backend == "guidance" and not isinstance(guidance, str):
            guidance_runs += 1
            error = guidance(member.spec.first.text)
            if error is not None:
                extra.append(routing.guidance_rejected(found[0], error, version))
        if server is not None and found[0].backend == "outlines" and not unavailable:
            run = bounded.run(member.spec.first.text, server.memory_bytes, server.timeout)
            if run.outcome == "unavailable":
                unavailable = run.detail
            else:
                runs, seconds = runs + 1, seconds + run.seconds
                step = routing.ServerStep(run.stall, run.crashed, run.outcome == "timeout",
                                          run.allocation_bytes, server.memory_bytes, run.detail,
                                          run.outcome == "rejected")  # fmt: skip
                extra += routing.server_findings(found[0], step, version)
        new = sorted((*member.report.findings, *extra), key=spec_report.order)
        report = dataclasses.replace(member.report, findings=tuple(new), vllm_backend=found[0].backend)
        out.append(dataclasses.replace(member, report=report))
    needed = any(m.report.vllm_backend == "guidance" for m in out)
    missing = guidance if isinstance(guidance, str) and needed and server is not None else ""
    return out, ServerSteps(runs, seconds, unavailable, guidance_runs, missing)


@dataclass(frozen=True)
class _Member:
    spec: _Distinct
    report: SchemaReport
    fingerprint: Fingerprint


def group(members: Sequence[_Member]) -> dict[str, list[_Member]]:
    """Family id -> its distinct specs. Each is added to one FamilyIndex in log order (large enough
    that nothing is evicted); ids a family absorbed (on reaching its quorum, or bridging two) are
    mapped to it at the end, so every spec lands in its final family."""
    index = family.FamilyIndex(max_families=len(members) + 1)
    assigned: list[tuple[str, _Member]] = []
    renamed: dict[str, str] = {}
    for member in members:
        membership = index.add(member.fingerprint)
        for old in membership.absorbed:
            renamed[old] = membership.family
        assigned.append((membership.family, member))
    out: dict[str, list[_Member]] = {}
    for family_id, member in assigned:
        out.setdefault(_final(family_id, renamed), []).append(member)
    return out


def _final(family_id: str, renamed: dict[str, str]) -> str:
    seen = {family_id}
    while family_id in renamed and renamed[family_id] not in seen:
        family_id = renamed[family_id]
        seen.add(family_id)
    return family_id


def _family(family_id: str, members: list[_Member], thresholds: Thresholds) -> FamilyReport:
    schemas = [member.report for member in members]
    timed = [s.seconds for s in schemas if s.seconds is not None]
    seconds = sum(timed) if timed else None
    requests = sum(s.lines for s in schemas)
    variation = _variation([member.spec.first for member in members], thresholds.budget)
    usage = injection.Usage(requests, len(schemas), None, seconds)
    first = members[0]
    schemas.sort(key=lambda s: (s.seconds or 0.0, s.lines), reverse=True)  # hottest first, else log order
    return FamilyReport(
        family_id,
        family.family_title([member.report.title for member in members]) or first.fingerprint.name,
        first.spec.first.kind,
        requests,
        len(schemas),
        seconds,
        variation.lines(),
        tuple(injection.dynamic_schema(variation, usage, thresholds)),
        tuple(schemas),
    )


def _variation(firsts: Sequence[Request], budget: Budget) -> Variation:
    """What varies: over the parsed schemas, or over the texts of a regex or grammar family."""
    parsed = [request.parsed for request in firsts]
    if all(isinstance(value, dict) for value in parsed):
        return family.what_varies(parsed, budget)
    if all(value is None for value in parsed):
        return family.variation([family.text_positions(request.text) for request in firsts])
    return family.variation([])


def _schema(
    item: _Distinct,
    thresholds: Thresholds,
    engines: Sequence[str],
    checker: Engines | None,
    prover: Prover | None = None,
    versions: backends.Versions | None = None,
) -> _Member:
    """One distinct spec: the core's verdict (the daemon's, exporter/analysis/spec_report.py) with what
    the engines said compiling it, then what only `gdx lint` adds: unstable_serialization over its
    exact strings, the keyword probes and, with --prove, a counterexample per xgrammar finding."""
    request = item.first
    compiles: list[CompileResult] = []
    if checker is not None and request.kind == "json" and isinstance(request.parsed, (dict, bool)):
        compiles = checker.compile(request.text)
    decoded = request.parsed if request.parsed is not None else spec_report.NOT_DECODED
    verdict = spec_report.report(
        request.kind,
        request.text,
        thresholds,
        engines=engines,
        versions=versions,
        said=compiles,
        parsed=decoded,
    )
    findings = [*verdict.findings, *variants.unstable_serialization(len(item.texts))]
    probes: list[ProbeResult] = []
    if compiles:
        backend_rules = ("xgrammar_unenforced", "llguidance_refused")
        keywords = {finding.keyword for finding in findings if finding.rule in backend_rules}
        for engine in engines:
            for keyword in sorted(k for k in keywords if k):
                result = checker.probe(engine, keyword) if checker is not None else None
                if result is not None:
                    probes.append(result)
    if prover is not None and request.kind == "json" and isinstance(request.parsed, dict):
        findings = prover.apply(request.text, findings)  # a counterexample per xgrammar finding
    findings.sort(key=spec_report.order)
    report = SchemaReport(
        request.name,
        item.schema_hash,
        verdict.shape_hash,
        request.kind,
        verdict.title,
        item.lines,
        tuple(findings),
        tuple(compiles),
        tuple(probes),
    )
    return _Member(item, report, verdict.fingerprint)
