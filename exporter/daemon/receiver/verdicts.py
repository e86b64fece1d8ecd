"""What the node has seen kill or freeze a vLLM API server, per schema hash: the verdicts the daemon
sends to every API server's probe on the node, whose guard (exporter/probe/guard.py) refuses the
schema from its next request on, on every engine, not only the one that suffered it.

A death (a schema's `deaths`, as an API server's snapshot counts them) is `server_crash`; validations
that took the guard's bound (a second) or more on average are `server_stall`. Observed as each
snapshot arrives, not when a scrape attributes it. Bounded (the most recent first out) and aged: a
verdict the node has not seen again within `max_age` is dropped, so a fixed engine is not refused
forever. `version` moves on every change; each connection sends the list when its version is behind.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from exporter import wire

MAX_VERDICTS = 256
STALL_SECONDS = 1.0  # the guard's default bound (GDX_GUARD_TIMEOUT)
MAX_AGE = 86400.0


class NodeVerdicts:
    """Schema hash -> (reason, when last seen), thread-safe (the store applies under its lock, the
    listener reads from the event loop)."""

    def __init__(self, max_verdicts: int = MAX_VERDICTS, max_age: float = MAX_AGE) -> None:
        self.max_verdicts = max_verdicts
        self.max_age = max_age
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.version = 0

    def observe(self, schema_hash: str, deaths: int, stalls: int, stall_seconds: float, now: float) -> None:
        """One schema's counts in an API server's snapshot (cumulative: observing them again changes
        nothing but when the verdict was last seen)."""
        if deaths > 0:
            reason = "server_crash"
        elif stalls > 0 and stall_seconds / stalls >= STALL_SECONDS:
            reason = "server_stall"
        else:
            return
        with self._lock:
            known = self._seen.get(schema_hash)
            if known is not None and known[0] == "server_crash":
                reason = "server_crash"  # a crash is not demoted by a later stall
            self._seen[schema_hash] = (reason, now)
            self._seen.move_to_end(schema_hash)
            while len(self._seen) > self.max_verdicts:
                self._seen.popitem(last=False)
            if known is None or known[0] != reason:
                self.version += 1

    def line(self, now: float) -> bytes:
        """The message the probes read: one JSON line, the live verdicts (aged ones dropped here)."""
        with self._lock:
            for schema_hash in [h for h, (_, at) in self._seen.items() if now - at > self.max_age]:
                del self._seen[schema_hash]
                self.version += 1
            verdicts = [{"schema_hash": h, "reason": r, "detail": "an engine of this node"}
                        for h, (r, _) in self._seen.items()]  # fmt: skip
        doc = {"v": wire.VERSION, "kind": "verdicts", "verdicts": verdicts}
        return json.dumps(doc, separators=(",", ":")).encode() + b"\n"
