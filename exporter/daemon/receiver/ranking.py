"""The exposed top set of a bounded label (a schema hash, a family): ranked by recent compile
seconds, with hysteresis, and a linger for the demoted so that every scraper reads their final value.

A key's score is its compile seconds decayed with a 5-minute half-life. At most `size` keys are
exposed; a newcomer takes the weakest's place only when it beats it by HYSTERESIS, and the weakest
then lingers (its series frozen on /metrics) for `linger` seconds. At most `size` keys linger: a
demotion waits for room. Besides, at most MAX_PINNED keys are pinned: exposed whatever their score,
because something other than compile seconds makes them the ones to name (their requests were
refused or compiled by another backend, they froze or killed an API server); a pin lasts PIN_SECONDS
after the last such event. Not thread-safe: its owner's lock guards it.
"""

from __future__ import annotations

import math

HALF_LIFE = 300.0  # "recent" compile seconds: a score halves every 5 minutes
HYSTERESIS = 1.5  # a newcomer must beat the weakest exposed key by this factor
LINGER = 120.0  # a demoted key's final values stay exposed this long: longer than scrape intervals
MAX_PINNED = 32
PIN_SECONDS = 3600.0


class Ranking:
    def __init__(self, size: int, linger: float = LINGER) -> None:
        self.size = max(1, size)
        self.linger = linger
        self.exposed: set[str] = set()  # active: increments go to their own series
        self.lingering: dict[str, float] = {}  # demoted, still on /metrics (frozen) until this time
        self.scores: dict[str, tuple[float, float]] = {}  # key -> (score, when)
        self.pinned: dict[str, float] = {}  # key -> when it was last pinned (insertion order: oldest first)
        self.evicted_total = 0
        # Scores decay by the same factor for all, so the weakest exposed key stays the weakest
        # until its own score grows or the set changes: cached, instead of a min() per newcomer.
        self._weakest: str | None = None

    def score(self, key: str, now: float) -> float:
        score, at = self.scores.get(key, (0.0, now))
        return score * math.pow(0.5, max(0.0, now - at) / HALF_LIFE)

    def shown(self) -> set[str]:
        """Every key with series on /metrics: exposed or lingering."""
        return self.exposed | set(self.lingering) | set(self.pinned)

    def pin(self, key: str, now: float) -> bool:
        """Exposes `key` whatever its score (true); the pin longest unrenewed makes room when full."""
        self.pinned.pop(key, None)
        self.pinned[key] = now
        while len(self.pinned) > MAX_PINNED:
            self._unpin(next(iter(self.pinned)), now)
        return True

    def _unpin(self, key: str, now: float) -> None:
        del self.pinned[key]
        if key not in self.exposed:  # its final values linger, as a demoted key's do
            self.lingering[key] = now + self.linger
            self.evicted_total += 1

    def credit(self, key: str, seconds: float, now: float) -> bool:
        """Adds compile seconds to the key's score; whether its increments go to its own series
        (it is exposed, or has just been promoted)."""
        self.scores[key] = (self.score(key, now) + seconds, now)
        if key == self._weakest:
            self._weakest = None
        return key in self.exposed or key in self.pinned or self._promote(key, now)

    def _promote(self, key: str, now: float) -> bool:
        if len(self.exposed) < self.size:
            self.exposed.add(key)
            self.lingering.pop(key, None)
            self._weakest = None
            return True
        if len(self.lingering) - (key in self.lingering) >= self.size:
            return False  # demotions are paced: no room to keep another final value on show
        weakest = self._weakest
        if weakest is None or weakest not in self.exposed:
            weakest = self._weakest = min(self.exposed, key=lambda k: self.score(k, now))
        if self.score(key, now) <= HYSTERESIS * self.score(weakest, now):
            return False
        self.demote(weakest, now)
        self.exposed.add(key)
        self.lingering.pop(key, None)  # back before its linger ended: the series goes on
        return True

    def demote(self, key: str, now: float) -> None:
        """Out of the exposed set; its final values linger."""
        if key in self.exposed:
            self.exposed.discard(key)
            self.lingering[key] = now + self.linger
            self.evicted_total += 1
            self._weakest = None

    def end_lingering(self, now: float) -> set[str]:
        """The demoted keys whose final values have been on show long enough: they leave /metrics."""
        for key in [k for k, at in self.pinned.items() if now - at > PIN_SECONDS]:
            self._unpin(key, now)
        done = {k for k, until in self.lingering.items() if until <= now}
        for k in done:
            del self.lingering[k]
        return done - self.pinned.keys()  # pinned since: still shown

    def merge(self, old: str, new: str, now: float) -> None:
        """`old` is now part of `new` (a family absorbed): its score moves over, it is demoted."""
        moved = self.score(old, now)
        self.scores.pop(old, None)
        self.demote(old, now)
        if moved:
            self.scores[new] = (self.score(new, now) + moved, now)
            if new == self._weakest:
                self._weakest = None

    def crowded(self) -> bool:
        return len(self.scores) > 20 * self.size

    def prune(self, now: float) -> set[str]:
        """Forgets the scores of all but the strongest 10 x size keys (and those shown); returns the
        keys kept."""
        keep = sorted(self.scores, key=lambda k: self.score(k, now), reverse=True)[: 10 * self.size]
        kept = set(keep) | self.shown()
        self.scores = {k: s for k, s in self.scores.items() if k in kept}
        return kept
