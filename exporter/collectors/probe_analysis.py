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
from dataclasses import dataclass, field
from typing import Any

from exporter.schema import identity, lint, variants
from exporter.schema.lint import Thresholds

log = logging.getLogger("gdx.analysis")
MAX_PENDING_BYTES = 64 * 2**20  # texts waiting for analysis; beyond, skipped and counted
MAX_PENDING = 5_000  # and at most this many (a flood of tiny schemas must not grow the queue's index)
MAX_ANALYSED = 20_000  # analyses remembered (counts and literal digests, a few KB each at most)
MAX_SHAPES = 500  # with up to MAX_VARIANTS each: at most 500,000 (hash, time) pairs
VARIANTS_COMPARED = 50  # the most recent variants of a shape compared for varying paths
MAX_VARIANTS = 1_000  # distinct schemas remembered per shape: shape_variants saturates here
MAX_REDACTED = 1_000  # redacted structures kept for /schemas (the most recent analyses)
REDACTED_CHARS = 16 * 1024
MAX_PATHS = 5


@dataclass
class Analysis:
    shape: str
    counts: dict[tuple[str, str], int]
    literals: dict[str, str]


@dataclass
class Shape:
    seen: OrderedDict[str, float] = field(default_factory=OrderedDict)  # schema_hash -> last seen
    paths: list[tuple[str, int]] = field(default_factory=list)
    version: int = 0
    paths_version: int = -1


class SchemaAnalysis:
    def __init__(self, thresholds: Thresholds | None = None, window: float = 600.0) -> None:
        self.thresholds = thresholds or Thresholds()
        self.window = window
        self.lock = threading.Lock()
        self.pending: OrderedDict[str, tuple[str, str, str]] = OrderedDict()  # hash -> (shape, kind, text)
        self.pending_bytes = 0
        self.done: OrderedDict[str, Analysis] = OrderedDict()
        self.redacted: OrderedDict[str, str] = OrderedDict()
        self.shapes: OrderedDict[str, Shape] = OrderedDict()
        self.skipped = 0
        self.analysed = 0
        self.seconds = 0.0

    def submit(self, schema_hash: str, shape: str, kind: str, text: str | None) -> None:
        """Queues a schema's text for analysis unless it is known (called on the event loop: cheap)."""
        with self.lock:
            if schema_hash in self.done or schema_hash in self.pending or text is None:
                return
            if self.pending_bytes + len(text) > MAX_PENDING_BYTES or len(self.pending) >= MAX_PENDING:
                self.skipped += 1
                return
            self.pending[schema_hash] = (shape, kind, text)
            self.pending_bytes += len(text)

    def seen(self, schema_hash: str, shape: str, now: float) -> None:
        """A compile of this schema happened now: it counts as a variant of its shape."""
        with self.lock:
            entry = self.shapes.get(shape)
            if entry is None:
                entry = self.shapes[shape] = Shape()
                if len(self.shapes) > MAX_SHAPES:
                    self.shapes.popitem(last=False)
            else:
                self.shapes.move_to_end(shape)
            if schema_hash not in entry.seen:
                entry.version += 1
            entry.seen[schema_hash] = now
            entry.seen.move_to_end(schema_hash)
            if len(entry.seen) > MAX_VARIANTS:
                entry.seen.popitem(last=False)

    def run(self, deadline: float) -> None:
        """Analyses queued texts until done or `deadline` (monotonic); runs in a worker thread."""
        while time.monotonic() < deadline:
            with self.lock:
                if not self.pending:
                    return
                schema_hash, (shape, kind, text) = self.pending.popitem(last=False)
                self.pending_bytes -= len(text)
            started = time.monotonic()
            result = analyse(shape, kind, text, self.thresholds)
            structure = redact(kind, text)
            with self.lock:
                self.redacted[schema_hash] = structure
                if len(self.redacted) > MAX_REDACTED:
                    self.redacted.popitem(last=False)
                self.seconds += time.monotonic() - started
                self.analysed += 1
                self.done[schema_hash] = result
                if len(self.done) > MAX_ANALYSED:
                    self.done.popitem(last=False)

    def view(self, now: float, schema_hashes: set[str]) -> dict[str, Any]:
        """Findings of the given (exposed) schemas, variants and varying paths of their shapes."""
        with self.lock:
            findings: dict[str, dict[tuple[str, str], int]] = {}
            shapes: dict[str, tuple[int, list[tuple[str, int]]]] = {}
            for schema_hash in schema_hashes:
                result = self.done.get(schema_hash)
                if result is None:
                    continue
                counts = dict(result.counts)
                shape = self.shapes.get(result.shape)
                if shape is not None:
                    live = [h for h, at in shape.seen.items() if now - at <= self.window]
                    paths = self._paths(shape, live)
                    shapes[result.shape] = (len(live), paths)
                    dynamic = sum(1 for p, _ in paths if p.endswith(("/enum", "/const")))
                    if len(live) > 1 and dynamic:
                        counts[("dynamic_enum", "error")] = dynamic
                findings[schema_hash] = counts
            return {
                "findings": findings,
                "shapes": shapes,
                "analysed": self.analysed,
                "skipped": self.skipped,
                "pending": len(self.pending),
                "seconds": self.seconds,
            }

    def _paths(self, shape: Shape, live: list[str]) -> list[tuple[str, int]]:
        if shape.paths_version != shape.version:
            maps = [self.done[h].literals for h in live[-VARIANTS_COMPARED:] if h in self.done]
            shape.paths = variants.varying_paths(maps, MAX_PATHS) if len(maps) > 1 else []
            shape.paths_version = shape.version
        return shape.paths


def redact(kind: str, text: str) -> str:
    """The schema's structure with every literal (enum, const, default, examples, title, description)
    replaced by "*": what /schemas may show. Non-JSON specs (regex, grammar) are not shown at all."""
    if kind not in ("json", "json_object"):
        return "<not JSON: not shown>"
    try:
        shape = identity.canonical_json(identity.shape_of(json.loads(text)))
    except (ValueError, RecursionError):
        return "<unparsable>"
    return shape if len(shape) <= REDACTED_CHARS else shape[:REDACTED_CHARS] + "...<truncated>"


def analyse(shape: str, kind: str, text: str, thresholds: Thresholds) -> Analysis:
    """Pure: the findings and literal digests of one schema text (never raises)."""
    if kind not in ("json", "json_object"):
        return Analysis(shape, {}, {})
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError):
        return Analysis(shape, {("too_complex", "error"): 1}, {})
    try:
        found = lint.lint(schema, thresholds)
        digests = variants.literals(schema, thresholds.budget)
    except Exception as err:  # a bug in a rule must not stop the others' schemas
        log.warning("schema analysis failed on a schema (shape %s): %s", shape, type(err).__name__)
        return Analysis(shape, {("too_complex", "error"): 1}, {})
    return Analysis(shape, lint.count(found), digests)
