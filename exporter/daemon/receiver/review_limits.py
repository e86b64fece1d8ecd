"""What keeps TCP connections from turning into TokenReviews: a rate limit on the reviews the daemon
asks for, a short memory of the tokens the API server refused, and a shorter one of those it accepted.

Without them every connection that sent a line shaped like `auth` cost the API server one review (300
in 3 s from one client), and a probe reconnecting with its valid token cost one each time (at the rate
limit, an honest reconnect storm was refused). Both caches are keyed by a SHA-256 of the token, never
the token: nothing here keeps or can log one. An accepted review is remembered for at most
ACCEPT_TTL and never past the token's `exp` (less ACCEPT_MARGIN); a re-review always asks the API
server, and forgets the accepted review first, so a revoked token is not vouched for from memory.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

REVIEWS_PER_SECOND = 5.0  # a node's engines reconnecting after a daemon restart fit in the burst
REVIEW_BURST = 20
REFUSAL_TTL = 30.0  # seconds a refused token is answered from memory (a probe backs off meanwhile)
MAX_REFUSALS = 1024
ACCEPT_TTL = 60.0  # seconds an accepted token is vouched for from memory, at most
ACCEPT_MARGIN = 10.0  # and never closer than this to its `exp`
MAX_ACCEPTED = 1024  # a node's engines: a few dozen tokens
T = TypeVar("T")


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


@dataclass(frozen=True, slots=True)
class CachedAcceptance(Generic[T]):
    found: T  # what the review said (the pod)
    until: float


class AcceptedCache(Generic[T]):
    """Accepted reviews by token digest, each until min(`ttl`, the token's expiry less `margin`), at most
    `size` of them (the oldest go first)."""

    def __init__(
        self, ttl: float = ACCEPT_TTL, size: int = MAX_ACCEPTED, margin: float = ACCEPT_MARGIN
    ) -> None:
        self.ttl = ttl
        self.size = size
        self.margin = margin
        self._entries: OrderedDict[bytes, CachedAcceptance[T]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: bytes) -> bool:
        return key in self._entries

    def get(self, key: bytes, now: float) -> T | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.until <= now:
            del self._entries[key]
            return None
        return entry.found

    def put(self, key: bytes, found: T, now: float, expires_in: float | None) -> None:
        """`expires_in`: seconds until the token's `exp` (None: it does not say)."""
        until = now + self.ttl
        if expires_in is not None:
            until = min(until, now + expires_in - self.margin)
        if until <= now:
            self._entries.pop(key, None)
            return
        self._entries[key] = CachedAcceptance(found, until)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def forget(self, key: bytes) -> None:
        self._entries.pop(key, None)
