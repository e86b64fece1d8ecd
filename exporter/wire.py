"""The probe-to-daemon protocol, version 1: constants both sides share and the daemon's validator.

One JSON object per line over a unix stream socket or TCP. On each connection the probe sends `hello`,
then `schemas` (metadata and text of every tracked schema, in chunks), then `snapshot` messages
about once a second. Values are cumulative since the engine process started, so a lost message or
a daemon restart loses nothing: the next snapshot carries the totals. A `full` snapshot carries
every tracked schema; the others only those that changed, plus the ids evicted into `other`.

    hello    {v, kind, instance, pid, pod, engine, engine_kind, engine_version, backends{name: version},
              probe_version}
    schemas  {v, kind, schemas: [{id, hash, shape, kind, backend, title, text|null, bytes, truncated,
              warnings: [str] (what llguidance said it ignores; absent when none)}]}
    snapshot {v, kind, seq, full, backends: {name: {requests, hits, errors{reason: n},
              rejections{reason: n}, compile, miss, wait, mask (histograms: {buckets: [n...], sum}),
              in_progress, oldest_seconds}},
              schemas: [{id, requests, hits, errors, buckets, sum, rejected, refused, misrouted,
                         stalls, stall_seconds, deaths (each absent: 0)}],
              other: {backend: same without id},
              routes: [{requested, resolved, backend, outcome, requests}] (vLLM; absent: none),
              guard: [{reason, action, requests}] (vLLM's API server's guard; absent: none),
              validation: {backend: histogram} (vLLM's API server: its structured-output validation
                          per resolved backend, `rejected` when it refused the request; absent: none),
              deaths: n (vLLM's API server: its predecessors that died validating, over the pod's
                     life; absent elsewhere),
              evicted: [id], cpu: {user, system}, probe: {name: n},
              engine: {caches: [{backend, compiler, bytes, limit_bytes}], pool_workers, cpus,
                       cgroup: {version, periods, throttled_periods, throttled_seconds, quota_cores},
                       backend (the grammar backend the engine latched on; absent: none yet)}}
    (`miss` and `engine` are absent from older probes; `cgroup` where the probe found no CPU cgroup)
    auth     {v, kind, token}: over TCP only, the first line: the pod's projected ServiceAccount token
             (audience DEFAULT_AUDIENCE), which the daemon checks with a TokenReview before it reads
             anything else; the pod's name and namespace come from that review, not from hello

`validate` turns a decoded message into the typed, immutable records below, so that the daemon
never reads a protocol field by a string key. Standard library only, no project imports: the
engine side imports the constants.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

VERSION = 1
KINDS = ("hello", "schemas", "snapshot", "auth")
# The socket both sides default to: a hostPath directory shared by the daemon and the engine pods.
DEFAULT_SOCKET = "/run/guided-decoding-exporter/probe.sock"
# The TCP transports (a node-local Service, or the node's IP): the daemon's port for probes, the
# audience of the token a probe presents, and where its projected volume puts that token.
DEFAULT_TCP_PORT = 9478
DEFAULT_AUDIENCE = "guided-decoding-exporter"
DEFAULT_TOKEN_FILE = "/var/run/secrets/guided-decoding-exporter/token"
MAX_TOKEN_CHARS = 16 * 1024
# Engine-level compile and wait buckets (the metric contract), then the per-schema coarse ones
# (0.005 exact so that "share above 5 ms" needs no interpolation), then per-step mask fill.
COMPILE_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
SCHEMA_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 2.5)
MASK_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
)  # fmt: skip
ERROR_REASONS = ("invalid_schema", "unsupported", "timeout", "internal")
# A compiled grammar that fails later: it refused tokens its own mask allowed (vLLM ends the request
# with an error), or advancing it raised.
REJECTION_REASONS = ("rejected", "error")
REQUEST_KINDS = ("json", "json_object", "regex", "grammar", "choice", "structural_tag", "other")
# Where vLLM's router sent a structured request, against the backend its engine uses (one per
# EngineCore: the first request's): compiled by the backend it resolved to; rejected (vLLM 0.33:
# "only supports one backend per engine", HTTP 400); other_backend (vLLM 0.32: compiled by the engine's
# backend anyway, so the keyword that made it fall back is not enforced, or the compile fails).
ROUTE_OUTCOMES = ("compiled", "rejected", "other_backend")
# vLLM's API server's guard (exporter/probe/guard.py): why it refuses, worst first (a schema keeps its
# worst: GUARD_RANK), what it did, the modes a hello announces, the schemas a snapshot names.
GUARD_REASONS = ("server_crash", "server_stall", "compile_budget")
GUARD_ACTIONS = ("refused", "would_refuse")
GUARD_MODES = ("observe", "enforce")
GUARD_RANK = {reason: len(GUARD_REASONS) - i for i, reason in enumerate(GUARD_REASONS)}  # higher: worse
MAX_GUARD_SCHEMAS = 32
MAX_ROUTES = 64
# vLLM's API server validates each structured request on its event loop before anything else runs:
# a validation this slow is a stall of every request it serves, and its spec is named.
STALL_SECONDS = 0.1
# The probe's own counters. A snapshot may carry counters this daemon does not know (a newer probe,
# mid-upgrade): they are ignored, never a reason to refuse the snapshot; at most MAX_PROBE_COUNTERS.
PROBE_COUNTERS = (
    "internal_errors", "send_failures", "deferred", "connects", "texts_dropped", "evicted", "dropped",
    "guard_validations", "guard_errors",
)  # fmt: skip
MAX_PROBE_COUNTERS = 64
MAX_TEXT_CHARS = 256 * 1024
MAX_SCHEMAS_PER_MESSAGE = 100_000
MAX_BACKENDS = 16
_NAME = re.compile(r"^[A-Za-z0-9_.:/+-]{1,128}$")
_HASH = re.compile(r"^[0-9a-f]{12}$")
_MAX_COUNT = 2**63
_REASONS = frozenset(ERROR_REASONS)
_REJECTIONS = frozenset(REJECTION_REASONS)
_COUNTERS = frozenset(PROBE_COUNTERS)
_OUTCOMES = frozenset(ROUTE_OUTCOMES)
_NO_ERRORS: Mapping[str, int] = {}
_INT_ONLY = frozenset({int})
_NUMBER = (int, float)
_FLOAT_MAX = sys.float_info.max  # NaN, infinities and ints too large for a float compare false


class Invalid(ValueError):
    """A message that is well-formed JSON but not a valid protocol message."""


# ---- the validated messages -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """Who the probe is: one engine process, named by its pod and engine index."""

    instance: str  # unique per engine process: a reconnect keeps it, a restart changes it
    pid: int
    pod: str
    engine: str
    engine_kind: str
    engine_version: str
    backends: Mapping[str, str]  # grammar backend name -> its version
    probe_version: str
    namespace: str = ""  # the pod's namespace (GDX_POD_NAMESPACE); empty from older probes
    guard: str = ""  # GUARD_MODES: this process's guard reads the node's verdicts; "": none


@dataclass(frozen=True, slots=True)
class SchemaMeta:
    """One tracked spec's identity and text, sent once per connection; `id` names it in snapshots."""

    id: int
    hash: str
    shape: str
    kind: str
    backend: str
    title: str
    text: str | None  # None: over MAX_TEXT_CHARS on the engine side, not sent
    bytes: int
    truncated: bool
    warnings: tuple[str, ...] = ()  # what the backend said it ignores when it compiled it (llguidance)


@dataclass(frozen=True, slots=True)
class SchemasMessage:
    schemas: tuple[SchemaMeta, ...]


@dataclass(frozen=True, slots=True)
class Histogram:
    buckets: tuple[int, ...]  # non-cumulative counts, one per bound and the last for +Inf
    sum: float


@dataclass(frozen=True, slots=True)
class BackendTotals:
    """One grammar backend's engine-level totals."""

    requests: int
    hits: int
    errors: Mapping[str, int]  # reason (ERROR_REASONS) -> failed calls; absent reasons are 0
    compile: Histogram  # COMPILE_BUCKETS
    wait: Histogram  # COMPILE_BUCKETS
    mask: Histogram  # MASK_BUCKETS
    in_progress: int
    oldest_seconds: float
    miss: Histogram | None = None  # COMPILE_BUCKETS, the calls that missed; None from older probes
    rejections: Mapping[str, int] = field(default_factory=dict)  # REJECTION_REASONS -> count


class SpecTotals(NamedTuple):
    """Cumulative compile calls of one spec (or of a backend's `other`), over SCHEMA_BUCKETS.

    Flat, and a named tuple rather than a frozen dataclass: one is built for every changed row of
    every snapshot, and a tuple is built about five times faster (immutable all the same)."""

    requests: int
    hits: int
    errors: Mapping[str, int]
    buckets: tuple[int, ...]
    sum: float
    rejected: int  # grammar rejections of this spec after it compiled (0 from older probes)
    refused: int = 0  # requests the engine rejected: they resolved to another backend than its own
    misrouted: int = 0  # requests compiled by the engine's backend, not the one they resolved to
    stalls: int = 0  # API server validations of this spec that took STALL_SECONDS or more
    stall_seconds: float = 0.0  # their seconds: the API server answered nothing meanwhile
    deaths: int = 0  # API server processes that died while validating it (found by their successor)
    id: int = 0  # a tracked spec's row: the `id` of its SchemaMeta (0 in a backend's `other`)

    @property
    def failed(self) -> int:
        """Its compile calls that failed, every reason."""
        return sum(self.errors.values())


SpecRow = SpecTotals  # a row of `schemas`: its `id` names the spec


@dataclass(frozen=True, slots=True)
class RouteCount:
    """Structured requests of one engine by the backend asked for (`auto` or the configured one),
    the one vLLM's router resolved them to, the engine's own, and the outcome (ROUTE_OUTCOMES)."""

    requested: str
    resolved: str
    backend: str
    outcome: str
    requests: int


@dataclass(frozen=True, slots=True)
class GuardCount:
    """Requests the guard of vLLM's API server refused (enforce) or would have (observe), by reason."""

    reason: str
    action: str
    requests: int
    schema_hash: str = ""  # the schema refused; "" for the process's zeros and beyond MAX_GUARD_SCHEMAS


@dataclass(frozen=True, slots=True)
class CpuSeconds:
    user: float
    system: float
    probe: float = 0.0  # the probe's shipper thread (absent from older probes: 0)


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int
    full: bool  # every tracked spec is listed: a known id that is missing was evicted
    backends: Mapping[str, BackendTotals]
    schemas: tuple[SpecRow, ...]
    other: Mapping[str, SpecTotals]  # backend -> totals of the specs evicted (or never tracked)
    evicted: tuple[int, ...]
    cpu: CpuSeconds
    probe: Mapping[str, int]  # the probe's own counters (PROBE_COUNTERS); absent ones are 0
    engine: EngineSizing | None = None  # None from older probes
    routes: tuple[RouteCount, ...] = ()  # vLLM's per-request backend resolution (empty elsewhere)
    validation: Mapping[str, Histogram] = field(default_factory=dict)  # COMPILE_BUCKETS, per backend
    deaths: int | None = None  # an API server's predecessors that died validating; None: not one
    guard: tuple[GuardCount, ...] = ()  # an API server's guard (absent: off, or nothing guarded yet)


@dataclass(frozen=True, slots=True)
class CacheSize:
    """One grammar compiler's cache: bytes held and its limit (-1: unlimited)."""

    backend: str
    compiler: str  # the engine's name for it (vLLM: compiler, full_vocab_compiler), else its order
    bytes: int
    limit_bytes: int


@dataclass(frozen=True, slots=True)
class CgroupCpu:
    """The engine container's CFS counters and quota (cores; 0.0 when none)."""

    version: int
    periods: int
    throttled_periods: int
    throttled_seconds: float
    quota_cores: float


@dataclass(frozen=True, slots=True)
class EngineSizing:
    """What the engine is sized with: caches, compile pool workers (0: unknown), the CPUs it counts
    (os.cpu_count(): the node's, whatever the quota) and its container's CPU cgroup."""

    caches: tuple[CacheSize, ...]
    pool_workers: int
    cpus: int
    cgroup: CgroupCpu | None
    backend: str = ""  # the grammar backend the engine latched on (vLLM); empty: none yet, or unknown


@dataclass(frozen=True, slots=True)
class Auth:
    """A TCP connection's credentials: a bound ServiceAccount token. Never logged, never stored."""

    token: str = field(repr=False)


Message = Hello | SchemasMessage | Snapshot | Auth


# ---- checks: each raises Invalid("what: problem"), the message built only on failure ------------------


def _require(condition: bool, what: str, problem: str = "") -> None:
    if not condition:
        raise Invalid(f"{what}: {problem}" if problem else what)


def _count(value: Any, what: str) -> int:
    # Inline checks: this runs about 25 times per row of every snapshot.
    if type(value) is int and 0 <= value < _MAX_COUNT:
        return value
    raise Invalid(f"{what}: not a non-negative integer")


def _seconds(value: Any, what: str) -> float:
    if type(value) in _NUMBER and 0 <= value <= _FLOAT_MAX:
        return float(value)
    raise Invalid(f"{what}: bad number")


def _name(value: Any, what: str) -> str:
    _require(isinstance(value, str) and bool(_NAME.match(value)), what, "bad name")
    return str(value)


def _text(value: Any, what: str, limit: int = 256) -> str:
    _require(isinstance(value, str) and len(value) <= limit, what, "bad string")
    return str(value)


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> str:
    _require(value in allowed, what, f"not one of {', '.join(allowed)}")
    return str(value)


def _hash(value: Any, what: str) -> str:
    _require(isinstance(value, str) and bool(_HASH.match(value)), what)
    return str(value)


def _counts(values: list[Any] | tuple[Any, ...]) -> bool:
    """Every value a non-negative int below 2**63 (not a bool): three C-level passes, no Python loop."""
    return not values or (
        _INT_ONLY.issuperset(map(type, values)) and min(values) >= 0 and max(values) < _MAX_COUNT
    )


def _buckets(doc: dict[str, Any], bounds: tuple[float, ...], what: str) -> tuple[int, ...]:
    buckets = doc.get("buckets")
    if type(buckets) is not list or len(buckets) != len(bounds) + 1:
        raise Invalid(f"{what}: bucket count")
    if not _counts(buckets):
        raise Invalid(f"{what}: not a non-negative integer")
    return tuple(buckets)


def _histogram(doc: Any, bounds: tuple[float, ...], what: str) -> Histogram:
    _require(isinstance(doc, dict), what, "not an object")
    return Histogram(_buckets(doc, bounds, what), _seconds(doc.get("sum"), what))


def _errors(doc: Any, what: str, reasons: frozenset[str] = _REASONS) -> Mapping[str, int]:
    """Counts by reason, every reason one of `reasons` (compile errors by default; rejections too)."""
    if not doc and isinstance(doc, dict):
        return _NO_ERRORS
    _require(isinstance(doc, dict) and reasons.issuperset(doc), what, "bad reasons")
    return {reason: _count(n, what) for reason, n in doc.items()}


def _spec_totals(doc: Any, what: str, row: bool = False) -> SpecTotals:
    """A row of `schemas` (`row`: with its id) or of `other`, checked. The hot path of every snapshot,
    one call per changed row: the counts are checked together, a message built only on failure."""
    if type(doc) is not dict:
        raise Invalid(f"{what}: not an object")
    get = doc.get
    counts: tuple[Any, ...] = (
        get("requests"), get("hits"), get("rejected", 0), get("refused", 0), get("misrouted", 0),
        get("stalls", 0), get("deaths", 0), get("id") if row else 0,
    )  # fmt: skip
    if not _counts(counts):
        raise Invalid(f"{what}: not a non-negative integer")
    requests, hits, rejected, refused, misrouted, stalls, deaths, ident = counts
    if hits > requests:
        raise Invalid(f"{what}: more hits than requests")
    return SpecTotals(
        requests,
        hits,
        _errors(get("errors", _NO_ERRORS), what),
        _buckets(doc, SCHEMA_BUCKETS, what),
        _seconds(get("sum"), what),
        rejected,
        refused,
        misrouted,
        stalls,
        _seconds(get("stall_seconds", 0), what),
        deaths,
        ident,
    )


_MAX_GUARD_COUNTS = (MAX_GUARD_SCHEMAS + 1) * len(GUARD_REASONS) * len(GUARD_ACTIONS)


def _guard(doc: Any) -> tuple[GuardCount, ...]:
    _require(isinstance(doc, list) and len(doc) <= _MAX_GUARD_COUNTS, "snapshot.guard")
    counts = []
    for item in doc:
        _require(isinstance(item, dict), "snapshot.guard item")
        reason, action = item.get("reason"), item.get("action")
        _require(reason in GUARD_REASONS and action in GUARD_ACTIONS, "snapshot.guard reason or action")
        schema = _hash(item["schema_hash"], "snapshot.guard.schema_hash") if item.get("schema_hash") else ""
        counts.append(
            GuardCount(str(reason), str(action), _count(item.get("requests"), "snapshot.guard"), schema)
        )
    _require(len({c.schema_hash for c in counts} - {""}) <= MAX_GUARD_SCHEMAS, "snapshot.guard: schemas")
    return tuple(counts)


def _routes(doc: Any) -> tuple[RouteCount, ...]:
    _require(isinstance(doc, list) and len(doc) <= MAX_ROUTES, "snapshot.routes")
    routes = []
    for item in doc:
        _require(isinstance(item, dict), "snapshot.routes item")
        outcome = item.get("outcome")
        _require(outcome in _OUTCOMES, "snapshot.routes.outcome")
        routes.append(RouteCount(
            _name(item.get("requested"), "snapshot.routes.requested"),
            _name(item.get("resolved"), "snapshot.routes.resolved"),
            _name(item.get("backend"), "snapshot.routes.backend"),
            str(outcome),
            _count(item.get("requests"), "snapshot.routes.requests"),
        ))  # fmt: skip
    return tuple(routes)


def _validation(doc: Any) -> Mapping[str, Histogram]:
    _require(isinstance(doc, dict) and len(doc) <= MAX_BACKENDS, "snapshot.validation")
    return {
        _name(k, "snapshot.validation"): _histogram(v, COMPILE_BUCKETS, "snapshot.validation")
        for k, v in doc.items()
    }


def _backend(doc: Any) -> BackendTotals:
    _require(isinstance(doc, dict), "snapshot.backends item")
    return BackendTotals(
        requests=_count(doc.get("requests"), "backend.requests"),
        hits=_count(doc.get("hits"), "backend.hits"),
        errors=_errors(doc.get("errors", _NO_ERRORS), "backend.errors"),
        compile=_histogram(doc.get("compile"), COMPILE_BUCKETS, "backend.compile"),
        wait=_histogram(doc.get("wait"), COMPILE_BUCKETS, "backend.wait"),
        mask=_histogram(doc.get("mask"), MASK_BUCKETS, "backend.mask"),
        in_progress=_count(doc.get("in_progress", 0), "backend.in_progress"),
        oldest_seconds=_seconds(doc.get("oldest_seconds", 0), "backend.oldest_seconds"),
        miss=None if doc.get("miss") is None else _histogram(doc["miss"], COMPILE_BUCKETS, "backend.miss"),
        rejections=_errors(doc.get("rejections", _NO_ERRORS), "backend.rejections", _REJECTIONS),
    )


MAX_WARNINGS = 16


def _warnings(doc: Any) -> tuple[str, ...]:
    _require(isinstance(doc, list) and len(doc) <= MAX_WARNINGS, "schemas.warnings")
    return tuple(_text(w, "schemas.warnings", 512) for w in doc)


def _schema_meta(item: Any) -> SchemaMeta:
    _require(isinstance(item, dict), "schemas: item")
    text = item.get("text")
    _require(text is None or (isinstance(text, str) and len(text) <= MAX_TEXT_CHARS), "schemas.text")
    schema_hash = _hash(item.get("hash"), "schemas.hash")
    shape_hash = _hash(item.get("shape"), "schemas.shape")
    kind = item.get("kind")
    _require(kind in REQUEST_KINDS, "schemas.kind")
    return SchemaMeta(
        id=_count(item.get("id"), "schemas.id"),
        hash=schema_hash,
        shape=shape_hash,
        kind=str(kind),
        backend=_name(item.get("backend"), "schemas.backend"),
        title=_text(item.get("title", ""), "schemas.title", 1024),
        text=text,
        bytes=_count(item.get("bytes", 0), "schemas.bytes"),
        truncated=bool(item.get("truncated", False)),
        warnings=_warnings(item.get("warnings", [])),
    )


# ---- the messages -------------------------------------------------------------------------------


def _hello(doc: dict[str, Any]) -> Hello:
    backends = doc.get("backends", {})
    _require(isinstance(backends, dict) and len(backends) <= MAX_BACKENDS, "hello: backends")
    return Hello(
        instance=_name(doc.get("instance"), "hello.instance"),
        pid=_count(doc.get("pid"), "hello.pid"),
        pod=_name(doc.get("pod"), "hello.pod"),
        engine=_name(doc.get("engine"), "hello.engine"),
        engine_kind=_name(doc.get("engine_kind"), "hello.engine_kind"),
        engine_version=_text(doc.get("engine_version", ""), "hello.engine_version", 64),
        backends={_name(k, "hello.backends"): _text(v, "hello.backends", 64) for k, v in backends.items()},
        probe_version=_text(doc.get("probe_version", ""), "hello.probe_version", 64),
        namespace=_name(doc["namespace"], "hello.namespace") if doc.get("namespace") else "",
        guard=_choice(doc["guard"], GUARD_MODES, "hello.guard") if doc.get("guard") else "",
    )


def _schemas(doc: dict[str, Any]) -> SchemasMessage:
    items = doc.get("schemas")
    if not isinstance(items, list) or len(items) > MAX_SCHEMAS_PER_MESSAGE:
        raise Invalid("schemas: list")
    return SchemasMessage(tuple([_schema_meta(item) for item in items]))


MAX_CACHES = 16


def _engine(doc: Any) -> EngineSizing | None:
    if doc is None:
        return None
    _require(isinstance(doc, dict), "snapshot.engine")
    caches = doc.get("caches", [])
    _require(isinstance(caches, list) and len(caches) <= MAX_CACHES, "snapshot.engine.caches")
    sizes = []
    for c in caches:
        _require(isinstance(c, dict), "snapshot.engine.caches item")
        limit = c.get("limit_bytes", -1)
        _require(type(limit) is int and -1 <= limit < _MAX_COUNT, "snapshot.engine.caches.limit_bytes")
        sizes.append(CacheSize(_name(c.get("backend"), "snapshot.engine.caches.backend"),
                               _name(c.get("compiler"), "snapshot.engine.caches.compiler"),
                               _count(c.get("bytes"), "snapshot.engine.caches.bytes"), limit))  # fmt: skip
    group = doc.get("cgroup")
    cpu = None
    if group is not None:
        _require(isinstance(group, dict), "snapshot.engine.cgroup")
        version = _count(group.get("version"), "snapshot.engine.cgroup.version")
        _require(version in (1, 2), "snapshot.engine.cgroup.version")
        cpu = CgroupCpu(
            version,
            _count(group.get("periods"), "snapshot.engine.cgroup.periods"),
            _count(group.get("throttled_periods"), "snapshot.engine.cgroup.throttled_periods"),
            _seconds(group.get("throttled_seconds"), "snapshot.engine.cgroup.throttled_seconds"),
            _seconds(group.get("quota_cores"), "snapshot.engine.cgroup.quota_cores"),
        )
    return EngineSizing(
        tuple(sizes),
        _count(doc.get("pool_workers", 0), "snapshot.engine.pool_workers"),
        _count(doc.get("cpus", 0), "snapshot.engine.cpus"),
        cpu,
        _name(doc["backend"], "snapshot.engine.backend") if doc.get("backend") else "",
    )


def _snapshot(doc: dict[str, Any]) -> Snapshot:
    backends = doc.get("backends")
    if not isinstance(backends, dict) or len(backends) > MAX_BACKENDS:
        raise Invalid("snapshot.backends")
    totals = {_name(name, "snapshot.backends"): _backend(b) for name, b in backends.items()}
    rows = doc.get("schemas", [])
    _require(isinstance(rows, list) and len(rows) <= MAX_SCHEMAS_PER_MESSAGE, "snapshot.schemas")
    other = doc.get("other", {})
    _require(isinstance(other, dict) and len(other) <= MAX_BACKENDS, "snapshot.other")
    evicted = doc.get("evicted", [])
    _require(isinstance(evicted, list) and len(evicted) <= MAX_SCHEMAS_PER_MESSAGE, "snapshot.evicted")
    cpu = doc.get("cpu", {})
    _require(isinstance(cpu, dict), "snapshot.cpu")
    probe = doc.get("probe", {})
    _require(isinstance(probe, dict) and len(probe) <= MAX_PROBE_COUNTERS, "snapshot.probe")
    return Snapshot(
        seq=_count(doc.get("seq"), "snapshot.seq"),
        full=bool(doc.get("full", False)),
        backends=totals,
        schemas=tuple([_spec_totals(row, "snapshot.schemas", True) for row in rows]),
        other={_name(k, "snapshot.other"): _spec_totals(r, "snapshot.other") for k, r in other.items()},
        evicted=tuple([_count(i, "snapshot.evicted") for i in evicted]),
        cpu=CpuSeconds(
            _seconds(cpu.get("user", 0), "snapshot.cpu"),
            _seconds(cpu.get("system", 0), "snapshot.cpu"),
            _seconds(cpu.get("probe", 0), "snapshot.cpu"),
        ),
        probe={k: _count(v, "snapshot.probe") for k, v in probe.items() if k in _COUNTERS},
        engine=_engine(doc.get("engine")),
        routes=_routes(doc.get("routes", [])),
        validation=_validation(doc.get("validation", {})),
        deaths=None if doc.get("deaths") is None else _count(doc["deaths"], "snapshot.deaths"),
        guard=_guard(doc.get("guard", [])),
    )


def validate(doc: dict[str, Any]) -> Message:
    """The typed message a decoded JSON object carries; raises Invalid naming the first problem."""
    _require(type(doc.get("v")) is int and doc["v"] == VERSION, "unsupported protocol version")  # not True
    kind = doc.get("kind")
    if kind == "hello":
        return _hello(doc)
    if kind == "schemas":
        return _schemas(doc)
    if kind == "snapshot":
        return _snapshot(doc)
    if kind == "auth":
        token = doc.get("token")
        _require(isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_CHARS, "auth: token")
        return Auth(str(token))
    raise Invalid("unknown kind")
