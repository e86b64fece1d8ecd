"""What the node has seen kill or freeze a vLLM API server, or hold an engine on one compile, per schema
hash: the verdicts the daemon sends to every guarded probe on the node (its hello names its guard's
mode), whose guard (exporter/probe/guard.py) refuses the schema from its next request on, on every
engine, not only the one that suffered it.

A death (a schema's `deaths`, as an API server's snapshot counts them) is `server_crash`; validations
that took the guard's bound (a second) or more on average are `server_stall`; with a compile budget
(--guard.compile-budget, off by default), a schema whose compiles on an engine took that long or more
on average is `compile_budget`, sent with its screens (identity.screen_key) so that a guard hashes only
the requests that could be it. Observed as each snapshot arrives, not when a scrape attributes it.
Bounded (the most recent first out) and aged: a verdict the node has not seen again within `max_age`
is dropped, so a fixed engine is not refused forever. `version` moves on every change; each connection
sends the list when its version is behind.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

from exporter import wire
from exporter.schema.identity import Screen

MAX_VERDICTS = 256
STALL_SECONDS = 1.0  # the guard's default bound (GDX_GUARD_TIMEOUT)
MAX_AGE = 86400.0


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    reason: str
    detail: str
    screens: tuple[Screen, ...]
    seen: float  # when last observed


class NodeVerdicts:
    """Schema hash -> its verdict, thread-safe (the store applies under its lock, the listener reads
    from the event loop). `compile_budget`: seconds per compile that make a verdict (0: off)."""

    def __init__(
        self, max_verdicts: int = MAX_VERDICTS, max_age: float = MAX_AGE, compile_budget: float = 0.0
    ) -> None:
        self.max_verdicts = max_verdicts
        self.max_age = max_age
        self.compile_budget = compile_budget
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, NodeVerdict] = OrderedDict()
        self.version = 0

    def observe(self, schema_hash: str, deaths: int, stalls: int, stall_seconds: float, now: float) -> None:
        """One schema's counts in an API server's snapshot (cumulative: observing them again changes
        nothing but when the verdict was last seen)."""
        if deaths > 0:
            self._note(schema_hash, "server_crash", "an API server of this node died validating it", (), now)
        elif stalls > 0 and stall_seconds / stalls >= STALL_SECONDS:
            detail = f"an API server of this node stalled {stall_seconds / stalls:.1f} s validating it"
            self._note(schema_hash, "server_stall", detail, (), now)

    def observe_compiles(
        self, schema_hash: str, compiles: int, seconds: float, screens: tuple[Screen, ...], now: float
    ) -> None:
        """One schema's compiles (misses) and their seconds, cumulative, in an engine's snapshot."""
        if self.compile_budget <= 0 or compiles <= 0 or seconds / compiles < self.compile_budget:
            return
        detail = (f"its grammar compiled in {seconds / compiles:.1f} s on an engine of this node, over the"
                  f" node's --guard.compile-budget of {self.compile_budget:g} s")  # fmt: skip
        self._note(schema_hash, "compile_budget", detail, screens, now)

    def _note(
        self, schema_hash: str, reason: str, detail: str, screens: tuple[Screen, ...], now: float
    ) -> None:
        with self._lock:
            known = self._seen.get(schema_hash)
            if known is not None and wire.GUARD_RANK[known.reason] > wire.GUARD_RANK[reason]:  # not demoted
                found = dataclasses.replace(known, seen=now)
            else:
                found = NodeVerdict(reason, detail, screens, now)
            self._seen[schema_hash] = found
            self._seen.move_to_end(schema_hash)
            while len(self._seen) > self.max_verdicts:
                self._seen.popitem(last=False)
            if known is None or known.reason != found.reason:
                self.version += 1

    def line(self, now: float) -> bytes:
        """The message the probes read: one JSON line, the live verdicts (aged ones dropped here)."""
        with self._lock:
            for schema_hash in [h for h, v in self._seen.items() if now - v.seen > self.max_age]:
                del self._seen[schema_hash]
                self.version += 1
            verdicts = [
                {"schema_hash": h, "reason": v.reason, "detail": v.detail,
                 **({"screens": [list(s) for s in v.screens]} if v.screens else {})}
                for h, v in self._seen.items()
            ]  # fmt: skip
        doc = {"v": wire.VERSION, "kind": "verdicts", "verdicts": verdicts}
        return json.dumps(doc, separators=(",", ":")).encode() + b"\n"
