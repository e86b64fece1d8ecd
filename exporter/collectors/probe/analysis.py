"""The daemon's schema analysis: lint findings once per distinct schema, off the event loop, and
per shape the variants seen in a sliding window and the pointers where they differ.

Texts wait in a bounded queue until a scrape's refresh analyses them in a worker thread (each under
the lint budget); then only digests and counts are kept. Nothing here keeps a schema's values.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from exporter.schema import identity, lint, variants
from exporter.schema.lint import Thresholds

log = logging.getLogger("gdx.collector.probe.analysis")
DEFAULT_WINDOW = 600.0
MAX_PENDING_BYTES = 64 * 2**20  # texts waiting for analysis; beyond, skipped and counted
MAX_PENDING = 5_000  # and at most this many (a flood of tiny schemas must not grow the queue's index)
MAX_ANALYSED = 20_000  # analyses remembered (counts and literal digests, a few KB each at most)
MAX_SHAPES = 500  # with up to MAX_VARIANTS each: at most 500,000 (hash, time) pairs
VARIANTS_COMPARED = 50  # the most recent variants of a shape compared for varying paths
MAX_VARIANTS = 1_000  # distinct schemas remembered per shape: shape_variants saturates here
MAX_REDACTED = 1_000  # redacted structures kept for /schemas (the most recent analyses)
REDACTED_CHARS = 16 * 1024
MAX_PATHS = 5
NOT_ANALYSED = "<not analysed yet>"
JSON_KINDS = ("json", "json_object")

RuleSeverity = tuple[str, str]  # (rule, severity): the labels of schema_lint_findings
FindingCounts = Mapping[RuleSeverity, int]  # places each rule fires


@dataclass(frozen=True, slots=True)
class ShapeVariants:
    """A shape's distinct schemas compiled within the window, and the pointers where they differ."""

    variants: int
    varying_paths: tuple[tuple[str, int], ...]  # (JSON pointer, variants differing there), at most 5


@dataclass(frozen=True, slots=True)
class AnalysisView:
    findings: Mapping[str, FindingCounts]  # analysed schema hash -> its lint and dynamic_enum counts
    shapes: Mapping[str, ShapeVariants]  # shape hash -> its variants
    analysed: int
    skipped: int
    pending: int
    seconds: float


@dataclass(frozen=True, slots=True)
class SchemaResult:
    """What is kept of one analysed schema: counts and literal digests, never its values."""

    shape: str
    counts: FindingCounts
    literals: variants.LiteralMap


@dataclass(frozen=True, slots=True)
class QueuedText:
    shape: str
    kind: str
    text: str


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
        self._redacted: OrderedDict[str, str] = OrderedDict()
        self._shapes: OrderedDict[str, ShapeHistory] = OrderedDict()
        self.skipped = 0
        self.analysed = 0
        self.seconds = 0.0

    def submit(self, schema_hash: str, shape: str, kind: str, text: str | None) -> None:
        """Queues a schema's text for analysis unless it is known (called on the event loop: cheap)."""
        with self._lock:
            if schema_hash in self._done or schema_hash in self.pending or text is None:
                return
            if self.pending_bytes + len(text) > MAX_PENDING_BYTES or len(self.pending) >= MAX_PENDING:
                self.skipped += 1
                return
            self.pending[schema_hash] = QueuedText(shape, kind, text)
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
            result = analyse(queued.shape, queued.kind, queued.text, self.thresholds)
            structure = redact(queued.kind, queued.text)
            with self._lock:
                self._redacted[schema_hash] = structure
                if len(self._redacted) > MAX_REDACTED:
                    self._redacted.popitem(last=False)
                self.seconds += time.monotonic() - started
                self.analysed += 1
                self._done[schema_hash] = result
                if len(self._done) > MAX_ANALYSED:
                    self._done.popitem(last=False)

    def view(self, now: float, schema_hashes: Iterable[str]) -> AnalysisView:
        """Findings of the given (exposed) schemas, variants and varying paths of their shapes."""
        with self._lock:
            findings: dict[str, FindingCounts] = {}
            shapes: dict[str, ShapeVariants] = {}
            for schema_hash in schema_hashes:
                result = self._done.get(schema_hash)
                if result is None:
                    continue
                counts = dict(result.counts)
                shape = shapes.get(result.shape) or self._shape_variants(result.shape, now)
                if shape is not None:
                    shapes[result.shape] = shape
                    counts.update(variants.dynamic_enum_counts(shape.varying_paths, shape.variants))
                findings[schema_hash] = counts
            return AnalysisView(
                findings=findings,
                shapes=shapes,
                analysed=self.analysed,
                skipped=self.skipped,
                pending=len(self.pending),
                seconds=self.seconds,
            )

    def structures(self, schema_hashes: Iterable[str]) -> dict[str, str]:
        """The redacted structure of each schema, or a placeholder until it is analysed (/schemas)."""
        with self._lock:
            return {h: self._redacted.get(h, NOT_ANALYSED) for h in schema_hashes}

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


def redact(kind: str, text: str) -> str:
    """The schema's structure with every literal (enum, const, default, examples, title, description)
    replaced by "*": what /schemas may show. Non-JSON specs (regex, grammar) are not shown at all."""
    if kind not in JSON_KINDS:
        return "<not JSON: not shown>"
    try:
        shape = identity.canonical_json(identity.shape_of(json.loads(text)))
    except (ValueError, RecursionError):
        return "<unparsable>"
    return shape if len(shape) <= REDACTED_CHARS else shape[:REDACTED_CHARS] + "...<truncated>"


def analyse(shape: str, kind: str, text: str, thresholds: Thresholds) -> SchemaResult:
    """Pure: the findings and literal digests of one schema text (never raises)."""
    if kind not in JSON_KINDS:
        return SchemaResult(shape, {}, {})
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError):
        return SchemaResult(shape, {("too_complex", "error"): 1}, {})
    try:
        found = lint.lint(schema, thresholds)
        digests = variants.literals(schema, thresholds.budget)
    except Exception as err:  # a bug in a rule must not stop the others' schemas
        log.warning("schema analysis failed on a schema (shape %s): %s", shape, type(err).__name__)
        return SchemaResult(shape, {("too_complex", "error"): 1}, {})
    return SchemaResult(shape, lint.count(found), digests)
