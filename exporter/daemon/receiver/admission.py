"""What one probe may create in the daemon, whatever it sends: engines per pod and per node, backend
names per engine, and label values in their documented form.

A probe is authenticated (a TokenReview over TCP, the socket's mode and uids otherwise), not trusted:
one pod must not be able to grow /metrics or the daemon's memory without bound, nor put arbitrary
text in a label. Each refusal and each value changed is counted by a reason or field from a fixed
list (never by what was sent) and logged at most once a minute per kind. Not thread-safe: the
store's lock guards it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from exporter import wire
from exporter.schema import identity

log = logging.getLogger("gdx.collector.probe")
DEFAULT_MAX_ENGINES = 64  # per node: the node the daemon is sized for runs 8 (docs/metrics.md)
# per pod: vLLM with data parallelism 8 on an 8-GPU node runs 8 EngineCores and up to 8 API servers
DEFAULT_MAX_ENGINES_PER_POD = 16
# Distinct backend names one engine may use in all it sends (grammar backends, `rejected` of the API
# server's validation): a real one uses at most xgrammar, llguidance, outlines, lm-format-enforcer.
MAX_ENGINE_BACKENDS = 8
FREE_NAMES = frozenset({"auto"})  # a route's `requested` when no backend was pinned: not a backend
REFUSALS = (
    "engines_per_pod",
    "engines_per_node",
    "engine_taken",
    "backends_per_engine",
    "schema_hash_mismatch",
)
SANITISED = ("title", "engine_version", "probe_version", "backend_version")
LOG_EVERY = 60.0
V = TypeVar("V")
# A version as packages spell them (PEP 440, semver, a git describe): what probe_info's version
# labels may hold.
_VERSION_BAD = re.compile(r"[^A-Za-z0-9_.+!-]+")
VERSION_MAX = 64


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds on what probes create (`--probe.max-engines`, `--probe.max-engines-per-pod`)."""

    max_engines: int = DEFAULT_MAX_ENGINES
    max_engines_per_pod: int = DEFAULT_MAX_ENGINES_PER_POD
    max_backends: int = MAX_ENGINE_BACKENDS


def version_label(value: str) -> str:
    """A version in the form probe_info's labels document: [A-Za-z0-9_.+!-], at most 64 characters."""
    return _VERSION_BAD.sub("_", value)[:VERSION_MAX]


def title_label(value: str) -> str:
    """A title in the form schema_info documents ([A-Za-z0-9_.-], at most 64), volatile words masked."""
    return identity.mask_title(identity.sanitize_title(value))


class Tally:
    """Refusals by reason and values changed by field (fixed lists), each kind logged once a minute."""

    def __init__(self) -> None:
        self.refused = dict.fromkeys(REFUSALS, 0)
        self.sanitised = dict.fromkeys(SANITISED, 0)
        self._logged_at: dict[str, float] = {}

    def refuse(self, reason: str, detail: str, n: int = 1) -> None:
        self.refused[reason] += n
        self._log(
            reason,
            "refused from a probe (%s): %s (counted in guided_decoding_probe_refused_total; at most one such"
            " line a minute)",
            reason,
            detail,
        )

    def changed(self, field: str, who: str) -> None:
        self.sanitised[field] += 1
        self._log(
            "sanitised:" + field,
            "%s sent a %s outside its documented form: sanitised (counted in"
            " guided_decoding_probe_values_sanitised_total; at most one such line a minute)",
            who,
            field,
        )

    def _log(self, kind: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._logged_at.get(kind, -LOG_EVERY) >= LOG_EVERY:
            self._logged_at[kind] = now
            log.warning(msg, *args)


def hello_labels(msg: wire.Hello, tally: Tally, who: str) -> wire.Hello:
    """The hello with its free-text label values (versions) in their documented form. Its names (pod,
    engine, namespace, backends) are already held to [A-Za-z0-9_.:/+-], 128 characters, by wire."""
    engine_version, probe_version = version_label(msg.engine_version), version_label(msg.probe_version)
    backends = {name: version_label(v) for name, v in msg.backends.items()}
    if engine_version != msg.engine_version:
        tally.changed("engine_version", who)
    if probe_version != msg.probe_version:
        tally.changed("probe_version", who)
    if backends != msg.backends:
        tally.changed("backend_version", who)
    same = (engine_version, probe_version, backends) == (msg.engine_version, msg.probe_version, msg.backends)
    if same:
        return msg
    return replace(msg, engine_version=engine_version, probe_version=probe_version, backends=backends)


class BackendNames:
    """The backend names one engine has used, at most `limit`: the first ones it names are its own for
    its life in the store; a later one is refused wherever it appears."""

    __slots__ = ("limit", "names")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.names: set[str] = set(FREE_NAMES)

    def admit(self, name: str) -> bool:
        if name in self.names:
            return True
        if len(self.names) - len(FREE_NAMES) >= self.limit:
            return False
        self.names.add(name)
        return True

    def _all(self, names: set[str]) -> bool:
        """Whether every name is (or can become) the engine's: the names admitted in order."""
        return all([self.admit(n) for n in sorted(names)])

    def bound(self, msg: wire.Snapshot) -> tuple[wire.Snapshot, int]:
        """The snapshot without what names a backend beyond the engine's limit, and how many entries
        went. The same object when nothing did (each snapshot of every engine comes here)."""
        names = {*msg.backends, *msg.other, *msg.validation}
        for route in msg.routes:
            names.update((route.requested, route.resolved, route.backend))
        if msg.engine is not None:
            names.update(c.backend for c in msg.engine.caches)
            if msg.engine.backend:
                names.add(msg.engine.backend)
        if names <= self.names or self._all(names):
            return msg, 0
        ok = self.names
        backends, other, validation = _keep(msg.backends, ok), _keep(msg.other, ok), _keep(msg.validation, ok)
        routes = tuple(r for r in msg.routes if {r.requested, r.resolved, r.backend} <= ok)
        pairs = ((msg.backends, backends), (msg.other, other), (msg.validation, validation))
        dropped = sum(len(a) - len(b) for a, b in pairs) + len(msg.routes) - len(routes)
        engine = msg.engine
        if engine is not None:
            caches = tuple(c for c in engine.caches if c.backend in ok)
            latched = engine.backend if engine.backend in ok else ""
            dropped += len(engine.caches) - len(caches) + (latched != engine.backend)
            engine = replace(engine, caches=caches, backend=latched)
        bounded = replace(
            msg, backends=backends, other=other, validation=validation, routes=routes, engine=engine
        )
        return bounded, dropped


def _keep(values: Mapping[str, V], names: set[str]) -> dict[str, V]:
    return {k: v for k, v in values.items() if k in names}
