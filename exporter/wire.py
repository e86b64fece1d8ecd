"""The probe-to-daemon protocol, version 1: constants both sides share and the records of each message.

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

The records below are what the daemon's validator (`exporter.wire_check.validate`) makes of each
message, so that the daemon never reads a protocol field by a string key. Standard library only, no
project imports: the engine side imports the constants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

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
