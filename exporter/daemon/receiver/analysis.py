"""The daemon's schema analysis: once per distinct spec, off the event loop, its lint findings, its
family (docs/families.md) and, once a second variant joins a family, the positions of its literals
(a founder's text waits, bounded, until a variant joins: most families never vary and never pay for
positions); per shape the variants seen in a sliding
window; per family what varies and the `dynamic_schema` finding (exporter/schema/injection.py).

Texts wait in a bounded queue until a scrape's refresh analyses them in a worker thread (each under
the lint budget); then only digests, pointers and counts are kept, and the texts of family founders
that may yet need positions (bounded, never exposed). Nothing here exposes a schema's values.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from exporter.analysis import spec_report
from exporter.analysis.spec_report import EngineSaid, SpecReport
from exporter.daemon.receiver import redaction
from exporter.daemon.receiver.rollup import FamilyUsage
from exporter.engines.grammars import backends
from exporter.engines.vllm import routing
from exporter.schema import family, identity, injection, variants
from exporter.schema.findings import Finding, Thresholds, count
from exporter.schema.identity import JSON_KINDS

log = logging.getLogger("gdx.collector.probe.analysis")
DEFAULT_WINDOW = 600.0
MAX_PENDING_BYTES = 64 * 2**20  # texts waiting for analysis; beyond, skipped and counted
MAX_PENDING = 5_000  # and at most this many (a flood of tiny schemas must not grow the queue's index)
MAX_ANALYSED = 20_000  # analyses remembered (counts and literal digests, a few KB each at most)
MAX_SHAPES = 500  # with up to MAX_VARIANTS each: at most 500,000 (hash, time) pairs
VARIANTS_COMPARED = 50  # the most recent variants of a shape compared for varying paths
MAX_VARIANTS = 1_000  # distinct schemas remembered per shape: shape_variants saturates here
MAX_REDACTED = 1_000  # redacted structures kept for /schemas (the most recent analyses)
MAX_PLACES = 64  # finding places kept per schema for /schemas
REDACTED_CHARS = 16 * 1024
MAX_PATHS = 5
MAX_FOUNDER_BYTES = 16 * 2**20  # founders' texts waiting for a variant to join their family
# Positions kept for what-varies: only a family's RECENT_VARIANTS (50) most recent are compared, so
# 2,000 cover 40 varying families; and at most this many pointers over all of them.
MAX_POSITIONS = 2_000
MAX_POSITION_ENTRIES = 300_000
MAX_ALIASES = 20_000  # absorbed family ids remembered (a hash analysed before its family merged)
MAX_PARTS = 5  # what varies: at most this many parts per family on /metrics
NOT_ANALYSED = "<not analysed yet>"

RuleSeverity = tuple[str, str]  # (rule, severity): the labels of schema_lint_findings
MISMATCH: RuleSeverity = (routing.RULE, "error")
FindingCounts = Mapping[RuleSeverity, int]  # places each rule fires


@dataclass(frozen=True, slots=True)
class Place:
    """Where one finding sits: what /schemas lists per schema (the same as `gdx lint`'s findings,
    without the message and fix, which may quote the schema)."""

    rule: str
    severity: str
    pointer: str
    keyword: str


@dataclass(frozen=True, slots=True)
class Shown:
    """What /schemas may show of an analysed schema: never one of its values."""

    structure: str
    places: tuple[Place, ...]


UNSEEN = Shown(NOT_ANALYSED, ())


@dataclass(frozen=True, slots=True)
class ShapeVariants:
    """A shape's distinct schemas compiled within the window, and the pointers where they differ."""

    variants: int
    varying_paths: tuple[tuple[str, int], ...]  # (JSON pointer, variants differing there), at most 5


@dataclass(frozen=True, slots=True)
class AnalysisView:
    findings: Mapping[str, FindingCounts]  # analysed schema hash -> its lint counts
    shapes: Mapping[str, ShapeVariants]  # shape hash -> its variants
    families: Mapping[str, str]  # analysed schema hash -> its family
    analysed: int
    skipped: int
    pending: int
    seconds: float
    # analysed schema hash -> what its family's titles share: the schema_info title, so that a name
    # made per request (a tenant in a model's name) never becomes a label
    titles: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FamilyVerdict:
    """What /metrics and /schemas say of one family: never a value from inside its specs."""

    kind: str  # schema, json, regex, grammar, structural_tag, choice, other
    name: str  # its title, else built from structure ("" when titles are off)
    variation: family.Variation
    findings: FindingCounts  # dynamic_schema
    finding: Finding | None  # the same, with its message and fix (for /schemas)


@dataclass(frozen=True, slots=True)
class FamilyView:
    reports: Mapping[str, FamilyVerdict]  # family -> report, for the families given


@dataclass(frozen=True, slots=True)
class SchemaResult:
    """What is kept of one analysed schema: counts and literal digests, never its values."""

    shape: str
    counts: FindingCounts
    literals: variants.LiteralMap
    fingerprint: family.Fingerprint | None = None
    # Where vLLM's `auto` router would take it off xgrammar (backend_mismatch places): shown only once
    # an engine is seen compiling it with, or refusing it for, another backend than it resolved to.
    routing: tuple[Place, ...] = ()


@dataclass(frozen=True, slots=True)
class QueuedText:
    shape: str
    kind: str
    text: str
    title: str = ""
    versions: backends.Versions | None = None  # the reporting engine's backends (None: the newest)
    warnings: tuple[str, ...] = ()  # what llguidance said it ignores when the engine compiled it


@dataclass(frozen=True, slots=True)
class FamilyMeta:
    kind: str
    title: str  # what its variants' sanitised titles share (family.shared_title), "" when too little
    structure: str  # a name from its structure only


def _entries(positions: family.Positions) -> int:
    p = positions
    return 1 + len(p.nodes) + len(p.literals) + len(p.unions) + len(p.optional)


@dataclass
class ShapeHistory:
    seen: OrderedDict[str, float] = field(default_factory=OrderedDict)  # schema_hash -> last compile
    paths: list[tuple[str, int]] = field(default_factory=list)
    version: int = 0  # bumped when a new variant appears: the cached paths are then recomputed
    paths_version: int = -1


class SchemaAnalysis:
    def __init__(self, thresholds: Thresholds | None = None, window: float = DEFAULT_WINDOW) -> None:
        self.thresholds = thresholds or Thresholds()
        self.window = window
        self._lock = threading.Lock()
        self.pending: OrderedDict[str, QueuedText] = OrderedDict()
        self.pending_bytes = 0
        self._done: OrderedDict[str, SchemaResult] = OrderedDict()
        self._redacted: OrderedDict[str, Shown] = OrderedDict()
        self._shapes: OrderedDict[str, ShapeHistory] = OrderedDict()
        self._index = family.FamilyIndex()
        self._family: dict[str, str] = {}  # analysed schema hash -> the family it was put in
        self._aliases: OrderedDict[str, str] = OrderedDict()  # absorbed family -> the one it joined
        self._merges: list[tuple[str, str]] = []  # not yet taken by the store
        self._meta: OrderedDict[str, FamilyMeta] = OrderedDict()
        self._positions: OrderedDict[str, family.Positions] = OrderedDict()
        self._position_entries = 0
        self._founders: OrderedDict[str, list[tuple[str, str, str]]] = OrderedDict()  # frame -> texts
        self._founder_bytes = 0
        self._variations: dict[str, tuple[tuple[str, ...], family.Variation]] = {}
        self.skipped = 0
        self.analysed = 0
        self.seconds = 0.0

    def submit(
        self,
        schema_hash: str,
        shape: str,
        kind: str,
        text: str | None,
        title: str = "",
        *,
        versions: backends.Versions | None = None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        """Queues a schema's text for analysis unless it is known (called on the event loop: cheap).
        `versions`: the backend versions of the engine reporting it, whose tables its lint uses; a
        spec is linted once, so the first engine to report it decides."""
        with self._lock:
            if schema_hash in self._done or schema_hash in self.pending or text is None:
                return
            if self.pending_bytes + len(text) > MAX_PENDING_BYTES or len(self.pending) >= MAX_PENDING:
                self.skipped += 1
                return
            self.pending[schema_hash] = QueuedText(shape, kind, text, title, versions, warnings)
            self.pending_bytes += len(text)

    def seen(self, schema_hash: str, shape: str, now: float) -> None:
        """A compile of this schema happened now: it counts as a variant of its shape."""
        with self._lock:
            entry = self._shapes.get(shape)
            if entry is None:
                entry = self._shapes[shape] = ShapeHistory()
                if len(self._shapes) > MAX_SHAPES:
                    self._shapes.popitem(last=False)
            else:
                self._shapes.move_to_end(shape)
            if schema_hash not in entry.seen:
                entry.version += 1
            entry.seen[schema_hash] = now
            entry.seen.move_to_end(schema_hash)
            if len(entry.seen) > MAX_VARIANTS:
                entry.seen.popitem(last=False)

    def run(self, deadline: float) -> None:
        """Analyses queued texts until done or `deadline` (monotonic); runs in a worker thread."""
        while time.monotonic() < deadline:
            with self._lock:
                if not self.pending:
                    return
                schema_hash, queued = self.pending.popitem(last=False)
                self.pending_bytes -= len(queued.text)
            started = time.monotonic()
            result, verdict = analyse(
                queued.shape, queued.kind, queued.text, self.thresholds, queued.versions, queued.warnings
            )
            shown = Shown(redact(queued.kind, verdict.parsed), places(verdict.findings))
            with self._lock:
                self._redacted[schema_hash] = shown
                if len(self._redacted) > MAX_REDACTED:
                    self._redacted.popitem(last=False)
                joined = self._join(schema_hash, queued, result)
                founders = self._founders_of(result, queued, schema_hash, joined)
                self._done[schema_hash] = replace(result, fingerprint=None)  # needed only to join
                if len(self._done) > MAX_ANALYSED:
                    old, _ = self._done.popitem(last=False)
                    self._family.pop(old, None)
            found = [(h, positions(kind, text, self.thresholds)) for h, kind, text in founders]
            if joined:  # the variant itself, from the value its analysis decoded
                own = positions(queued.kind, queued.text, self.thresholds, verdict.parsed)
                found.append((schema_hash, own))
            with self._lock:
                for h, p in found:
                    if p is not None:
                        self._keep_positions(h, p)
                self.seconds += time.monotonic() - started
                self.analysed += 1

    def _join(self, schema_hash: str, queued: QueuedText, result: SchemaResult) -> bool:
        """Puts an analysed spec in its family (under the lock); whether it joined an existing one."""
        fp = result.fingerprint
        if fp is None:
            return False
        membership = self._index.add(fp)
        self._family[schema_hash] = membership.family
        title = identity.mask_title(queued.title)
        meta = self._meta.get(membership.family)
        if meta is None:
            kind = fp.kind if queued.kind in JSON_KINDS else queued.kind
            self._meta[membership.family] = FamilyMeta(kind, title, fp.name)
            if len(self._meta) > 2 * self._index.max_families:
                self._meta.popitem(last=False)
        elif meta.title and title != meta.title:  # the name is what every variant's title shares
            self._meta[membership.family] = replace(meta, title=family.shared_title(meta.title, title))
        for old in membership.absorbed:
            if old != membership.family:
                self._aliases[old] = membership.family
                self._merges.append((old, membership.family))
        while len(self._aliases) > MAX_ALIASES:
            self._aliases.popitem(last=False)
        del self._merges[:-MAX_ALIASES]
        return not membership.new

    def _founders_of(
        self, result: SchemaResult, queued: QueuedText, schema_hash: str, joined: bool
    ) -> list[tuple[str, str, str]]:
        """The founders whose positions are due (under the lock): those of its frame still waiting when
        a variant joined (the variant's own come from its analysis); a founder's text is kept aside."""
        fp = result.fingerprint
        if fp is None:
            return []
        if not joined:
            self._founders.setdefault(fp.frame, []).append((schema_hash, queued.kind, queued.text))
            self._founders.move_to_end(fp.frame)
            self._founder_bytes += len(queued.text)
            while self._founder_bytes > MAX_FOUNDER_BYTES and self._founders:
                _, dropped = self._founders.popitem(last=False)
                self._founder_bytes -= sum(len(text) for _, _, text in dropped)
            return []
        waiting = self._founders.pop(fp.frame, [])
        self._founder_bytes -= sum(len(text) for _, _, text in waiting)
        return waiting

    def founder_texts(self, wanted: Collection[str]) -> dict[str, str]:
        """The kept texts of these schemas: a family's founder, kept while no other variant has joined
        its family (a static schema's text stays, within the founders' byte bound)."""
        with self._lock:
            return {h: text for kept in self._founders.values() for h, _, text in kept if h in wanted}

    def _keep_positions(self, schema_hash: str, found: family.Positions) -> None:
        self._positions[schema_hash] = found
        self._position_entries += _entries(found)
        while len(self._positions) > 1 and (
            self._position_entries > MAX_POSITION_ENTRIES or len(self._positions) > MAX_POSITIONS
        ):
            _, dropped = self._positions.popitem(last=False)
            self._position_entries -= _entries(dropped)

    def _resolve(self, family_id: str) -> str:
        for _ in range(64):  # alias chains are short; bounded against a cycle all the same
            nxt = self._aliases.get(family_id)
            if nxt is None or nxt == family_id:
                break
            family_id = nxt
        return family_id

    def family_of(self, schema_hash: str) -> str | None:
        """The family of a schema hash; None while its text waits for analysis; the hash itself when
        it was never analysed (no text reached the daemon, or the queue was full)."""
        with self._lock:
            found = self._family.get(schema_hash)
            if found is not None:
                return self._resolve(found)
            return None if schema_hash in self.pending else schema_hash

    def take_merges(self) -> list[tuple[str, str]]:
        """(absorbed family, the family it joined), in order, since the last call."""
        with self._lock:
            merges, self._merges = self._merges, []
            return merges

    def family_view(self, usage: Mapping[str, FamilyUsage], titles: bool) -> FamilyView:
        """Per family: kind, name, what varies between its recent variants and `dynamic_schema`,
        weighed on its traffic in the window (`usage`, from the store's rollup)."""
        reports: dict[str, FamilyVerdict] = {}
        with self._lock:
            for family_id, used in usage.items():
                meta = self._meta.get(family_id)
                variation = self._variation(family_id, used.recent)
                found = injection.dynamic_schema(
                    variation,
                    injection.Usage(used.requests, used.variants, used.hits, used.seconds, used.span),
                    self.thresholds,
                )
                name = ""
                if titles and meta is not None:
                    name = meta.title or meta.structure
                reports[family_id] = FamilyVerdict(
                    kind=meta.kind if meta is not None else "other",
                    name=name,
                    variation=variation,
                    findings=count(found),
                    finding=found[0] if found else None,
                )
            self._variations = {f: v for f, v in self._variations.items() if f in usage}
        return FamilyView(reports)

    def _variation(self, family_id: str, recent: tuple[str, ...]) -> family.Variation:
        cached = self._variations.get(family_id)
        if cached is not None and cached[0] == recent:
            return cached[1]
        per = [self._positions[h] for h in recent if h in self._positions]
        found = family.variation(per, MAX_PARTS, degraded=len(per) < len(recent))
        self._variations[family_id] = (recent, found)
        return found

    def view(
        self, now: float, schema_hashes: Iterable[str], mismatched: frozenset[str] = frozenset()
    ) -> AnalysisView:
        """Findings of the given (exposed) schemas, variants and varying paths of their shapes.
        `mismatched`: schemas an engine compiled with, or refused for, another backend than vLLM's
        router gave them: their backend_mismatch places join their findings."""
        with self._lock:
            findings: dict[str, FindingCounts] = {}
            shapes: dict[str, ShapeVariants] = {}
            families: dict[str, str] = {}
            titles: dict[str, str] = {}
            for schema_hash in schema_hashes:
                result = self._done.get(schema_hash)
                if result is None:
                    continue
                found = self._family.get(schema_hash)
                if found is not None:
                    families[schema_hash] = self._resolve(found)
                    meta = self._meta.get(families[schema_hash])
                    if meta is not None:
                        titles[schema_hash] = meta.title
                shape = shapes.get(result.shape) or self._shape_variants(result.shape, now)
                if shape is not None:
                    shapes[result.shape] = shape
                findings[schema_hash] = result.counts
                if schema_hash in mismatched:
                    findings[schema_hash] = {**result.counts, MISMATCH: max(1, len(result.routing))}
            return AnalysisView(
                findings=findings,
                shapes=shapes,
                families=families,
                analysed=self.analysed,
                skipped=self.skipped,
                pending=len(self.pending),
                seconds=self.seconds,
                titles=titles,
            )

    def shown(
        self, schema_hashes: Iterable[str], mismatched: frozenset[str] = frozenset()
    ) -> dict[str, Shown]:
        """What /schemas shows of each schema: its redacted structure and where its findings sit, or a
        placeholder until it is analysed."""
        with self._lock:
            found = {h: self._redacted.get(h, UNSEEN) for h in schema_hashes}
            for h in mismatched & found.keys():
                result = self._done.get(h)
                if result is not None and result.routing:
                    found[h] = replace(found[h], places=(*found[h].places, *result.routing)[:MAX_PLACES])
            return found

    def _shape_variants(self, shape_hash: str, now: float) -> ShapeVariants | None:
        shape = self._shapes.get(shape_hash)
        if shape is None:
            return None
        live = [h for h, at in shape.seen.items() if now - at <= self.window]
        if shape.paths_version != shape.version:
            maps = [self._done[h].literals for h in live[-VARIANTS_COMPARED:] if h in self._done]
            shape.paths = variants.varying_paths(maps, MAX_PATHS) if len(maps) > 1 else []
            shape.paths_version = shape.version
        return ShapeVariants(len(live), tuple(shape.paths))


def redact(kind: str, parsed: Any) -> str:
    """The schema's structure with every literal replaced by "*", by an allow-list of JSON Schema
    keywords (exporter/daemon/receiver/redaction.py): what /schemas may show. Non-JSON specs (regex,
    grammar) are not shown at all."""
    if kind not in JSON_KINDS:
        return "<not JSON: not shown>"
    if parsed is None:
        return "<unparsable>"
    try:
        shape = identity.canonical_json(redaction.redact_schema(parsed))
    except (ValueError, RecursionError):
        return "<unparsable>"
    return shape if len(shape) <= REDACTED_CHARS else shape[:REDACTED_CHARS] + "...<truncated>"


def places(findings: Iterable[Finding]) -> tuple[Place, ...]:
    """Where each finding sits, for /schemas: rule, severity, pointer and keyword (never a message,
    which may quote the schema), at most MAX_PLACES."""
    return tuple(Place(f.rule, f.severity, f.pointer, f.keyword) for f in findings)[:MAX_PLACES]


def analyse(
    shape: str,
    kind: str,
    text: str,
    thresholds: Thresholds,
    versions: backends.Versions | None = None,
    warnings: tuple[str, ...] = (),
) -> tuple[SchemaResult, SpecReport]:
    """The core's verdict on one spec text (exporter/analysis/spec_report.py, the same as gdx lint's)
    and what the daemon keeps of it. `versions`: whose backend tables apply. `warnings`: what
    llguidance said it ignores when the engine compiled it, merged in as `llguidance_ignored`."""
    llguidance = (versions or backends.NEWEST).llguidance
    said = (EngineSaid("llguidance", llguidance, warnings),) if warnings else ()
    found = spec_report.report(kind, text, thresholds, versions=versions, said=said)
    if found.failure:
        log.warning("schema analysis failed on a %s spec (shape %s): %s", kind, shape, found.failure)
    counts = count(found.findings)
    return SchemaResult(
        shape, counts, found.literals, found.fingerprint, routed_places(kind, found.parsed)
    ), found


def routed_places(kind: str, parsed: Any) -> tuple[Place, ...]:
    """Where vLLM's `auto` router takes a JSON Schema off xgrammar (exporter/engines/vllm/routing.py), at
    most MAX_PLACES: a keyword and its pointer, never a value."""
    if kind not in JSON_KINDS or not isinstance(parsed, dict):
        return ()
    try:
        found = routing.route(parsed)
    except RecursionError:
        return ()
    return tuple(Place(MISMATCH[0], MISMATCH[1], r.pointer, r.keyword) for r in found.reasons)[:MAX_PLACES]


def positions(
    kind: str, text: str, thresholds: Thresholds, parsed: Any = spec_report.NOT_DECODED
) -> family.Positions | None:
    """Where a spec's literals sit (for what varies): a JSON spec's positions, a text spec's one.
    `parsed`: the spec already decoded (a variant's, by the analysis that just ran)."""
    if parsed is spec_report.NOT_DECODED:
        parsed = identity.parse_spec(text) if kind in (*JSON_KINDS, "structural_tag") else None
    if parsed is None:
        return None if kind in JSON_KINDS else family.text_positions(text)
    return family.positions(parsed, thresholds.budget)
