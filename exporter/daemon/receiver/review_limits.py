"""What keeps junk TCP connections from turning into TokenReviews: a rate limit on the reviews the daemon
asks for, and a short memory of the tokens the API server refused.

Without them every connection that sent a line shaped like `auth` cost the API server one review (300
in 3 s from one client). The refusal cache is keyed by a SHA-256 of the token, never the token: a
refused token is not kept, and nothing here can log one.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

REVIEWS_PER_SECOND = 5.0  # a node's engines reconnecting after a daemon restart fit in the burst
REVIEW_BURST = 20
REFUSAL_TTL = 30.0  # seconds a refused token is answered from memory (a probe backs off meanwhile)
MAX_REFUSALS = 1024


def token_key(token: str) -> bytes:
    """What the cache keeps of a token: its SHA-256 digest."""
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


class ReviewBudget:
    """A token bucket: `take(now)` is True while the reviews asked for stay under the rate."""

    def __init__(self, rate: float = REVIEWS_PER_SECOND, burst: int = REVIEW_BURST) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at: float | None = None

    def take(self, now: float) -> bool:
        if self._at is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


@dataclass(frozen=True, slots=True)
class CachedRefusal:
    reason: str
    detail: str
    until: float


class RefusalCache:
    """Refusals by token digest, for `ttl` seconds, at most `size` of them (the oldest go first)."""

    def __init__(self, ttl: float = REFUSAL_TTL, size: int = MAX_REFUSALS) -> None:
        self.ttl = ttl
        self.size = size
        self._entries: OrderedDict[bytes, CachedRefusal] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes, now: float) -> CachedRefusal | None:
        entry = self._entries.get(key)
        if entry is not None and entry.until <= now:
            del self._entries[key]
            return None
        return entry

    def put(self, key: bytes, reason: str, detail: str, now: float) -> None:
        self._entries[key] = CachedRefusal(reason, detail, now + self.ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
