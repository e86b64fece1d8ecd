"""The probe collector: what the engines' in-engine probes send, received, kept, analysed and exposed.
It wires the receiver's parts into one collector (exporter.daemon.receiver's docstring says what each
does): the socket listener, the store, the schema analysis and the metric families.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from exporter import wire
from exporter.daemon import metrics_table
from exporter.daemon.collectors import Shared, register
from exporter.daemon.collectors.base import Collector, CollectorError
from exporter.daemon.discovery import NodePod, PodDiscovery
from exporter.daemon.profiles import PROFILES
from exporter.daemon.receiver.admission import DEFAULT_MAX_ENGINES, DEFAULT_MAX_ENGINES_PER_POD, Limits
from exporter.daemon.receiver.analysis import DEFAULT_WINDOW, Place, RuleSeverity, SchemaAnalysis
from exporter.daemon.receiver.listener import ProbeListener
from exporter.daemon.receiver.metric_families import absent_family, listener_families, store_families
from exporter.daemon.receiver.store import (
    DEFAULT_ENGINE_TTL,
    DEFAULT_MAX_FAMILIES,
    DEFAULT_MAX_SCHEMAS,
    ProbeStore,
    with_namespaces,
)
from exporter.daemon.receiver.tokenreview import ReviewSettings, TokenReviewer
from exporter.schema.findings import Finding, Thresholds

if TYPE_CHECKING:
    from exporter.daemon.options import Config


@dataclass(frozen=True)
class ProbeSettings:
    """What the receiver uses of the configuration (`Config.settings` fills it from `probe.*`)."""

    socket: str = wire.DEFAULT_SOCKET  # "" for no unix socket
    listen_address: str = ""  # HOST:PORT for probes over TCP; "" for none
    token_audience: str = wire.DEFAULT_AUDIENCE
    socket_group: str = ""  # name or gid given to the socket; empty: the daemon's
    allowed_uids: tuple[int, ...] = ()  # empty: whoever the socket's mode lets in
    max_schemas: int = DEFAULT_MAX_SCHEMAS
    max_families: int = DEFAULT_MAX_FAMILIES
    max_engines: int = DEFAULT_MAX_ENGINES  # engines the store keeps per node
    max_engines_per_pod: int = DEFAULT_MAX_ENGINES_PER_POD  # and per pod identity
    engine_ttl: float = DEFAULT_ENGINE_TTL
    apply_interval: float = 1.0  # parked connections read together this often (0: on arrival)
    max_hold: float = 15.0  # the longest a snapshot read waits to be applied while nothing scrapes
    titles: bool = True
    shape_window: float = DEFAULT_WINDOW
    thresholds: Thresholds = field(default_factory=Thresholds)
    timeout: float = 5.0
    schema_les: frozenset[str] | None = None  # the series profile's per-schema buckets (None: all)
    compile_budget: float = 0.0  # --guard.compile-budget: compiles this long make a node verdict (0: off)
    verdict_ttl: float = 86400.0  # --guard.verdict-ttl: a node verdict not seen again this long is dropped


@dataclass(frozen=True, slots=True)
class ExposedSchema:
    """One exposed schema as /schemas shows it: identity, findings, the structure with every literal
    value redacted (never a schema's values)."""

    schema_hash: str
    shape_hash: str
    family: str  # empty until analysed
    kind: str
    backend: str
    title: str
    recent_compile_seconds: float
    findings: Mapping[RuleSeverity, int]
    structure: str
    places: tuple[Place, ...] = ()  # where each finding sits (rule, severity, pointer, keyword)


@dataclass(frozen=True, slots=True)
class FamilyEntry:
    """One family on /metrics as /schemas shows it, with its exposed schemas (ranked)."""

    family: str
    kind: str
    name: str
    recent_compile_seconds: float
    requests: int  # in the window
    hits: int
    variants: int
    varies: tuple[str, ...]
    findings: Mapping[RuleSeverity, int]
    finding: Finding | None  # dynamic_schema, with its message and fix
    schemas: tuple[ExposedSchema, ...]


@dataclass(frozen=True, slots=True)
class SchemasView:
    families: tuple[FamilyEntry, ...]  # ranked by recent compile seconds, the family at fault first
    schemas: tuple[ExposedSchema, ...]  # every exposed schema, ranked the same way


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """A static schema for `gdx warm`, from /schemas/registry (its text: literal values included)."""

    schema_hash: str
    family: str
    name: str
    requests: int  # in the window
    text: str


class ProbeCollector(Collector):
    name = "probe"

    def __init__(
        self,
        settings: ProbeSettings,
        pod_namespaces: Callable[[], Mapping[str, str]] | None = None,
        reviewer: TokenReviewer | None = None,
        injected_pods: Callable[[], Iterable[NodePod]] | None = None,
    ) -> None:
        """`pod_namespaces`: pod name -> namespace from pod discovery, for probes that do not say theirs;
        `reviewer`: checks the tokens of probes over TCP (settings.listen_address); `injected_pods`:
        the pods on this node `gdx inject` gave the probe, from discovery (which have not connected)."""
        self.injected_pods = injected_pods
        self.schema_les = settings.schema_les
        super().__init__(settings.timeout)
        self.pod_namespaces = pod_namespaces
        self.analysis = SchemaAnalysis(settings.thresholds, settings.shape_window)
        self.analysis_time = max(0.05, min(2.0, settings.timeout / 2))
        self.store = ProbeStore(
            settings.max_schemas,
            settings.engine_ttl,
            settings.titles,
            self.analysis,
            max_families=settings.max_families,
            limits=Limits(settings.max_engines, settings.max_engines_per_pod),
            compile_budget=settings.compile_budget,
            verdict_ttl=settings.verdict_ttl,
        )
        self.listener = ProbeListener(
            settings.socket,
            settings.socket_group,
            settings.allowed_uids,
            self.store,
            listen_address=settings.listen_address,
            reviewer=reviewer,
            apply_interval=settings.apply_interval,
            max_hold=settings.max_hold,
        )

    async def start(self) -> None:
        await self.listener.start()

    async def close(self) -> None:
        await self.listener.close()

    async def refresh(self) -> None:
        await self.listener.read_pass()  # a scrape sees every snapshot the probes have sent
        self.store.expire(time.monotonic())
        if self.analysis.pending:  # new schemas: lint them in a worker thread, within a time slice
            deadline = time.monotonic() + self.analysis_time
            await asyncio.get_running_loop().run_in_executor(None, self.analysis.run, deadline)
        self.store.settle(time.monotonic())
        if self.listener.listen_error:
            raise CollectorError(self.listener.listen_error)

    async def not_ready(self) -> str | None:
        return self.listener.not_listening()

    def describe(self) -> Iterable[Metric]:
        """As `collect`: `probe_absent` only with pod discovery's list of the pods given the probe."""
        return metrics_table.describe(self.name, () if self.injected_pods is not None else ("probe_absent",))

    def collect(self) -> Iterable[Metric]:
        yield from listener_families(self.listener.view())
        view = self.store.view()
        if self.pod_namespaces is not None:
            view = with_namespaces(view, self.pod_namespaces())
        yield from store_families(view, self.schema_les)
        if self.injected_pods is not None:
            yield absent_family(self.injected_pods(), view)

    def schemas_view(self) -> SchemasView:
        """The exposed families and schemas, ranked (blocking: call it off the event loop)."""
        view = self.store.view()
        shown = self.analysis.shown(view.info, view.mismatched)
        reports = sorted(
            (
                ExposedSchema(
                    schema_hash=schema_hash,
                    shape_hash=info.shape_hash,
                    family=view.analysis.families.get(schema_hash, ""),
                    kind=info.kind,
                    backend=info.backend,
                    title=info.title,
                    recent_compile_seconds=view.recent.get(schema_hash, 0.0),
                    findings=view.analysis.findings.get(schema_hash, {}),
                    structure=shown[schema_hash].structure,
                    places=shown[schema_hash].places,
                )
                for schema_hash, info in view.info.items()
            ),
            key=lambda r: (-r.recent_compile_seconds, r.schema_hash),
        )
        entries = []
        for family_id, score in view.families.recent.items():
            report = view.family_analysis.reports.get(family_id)
            used = view.families.usage.get(family_id)
            entries.append(
                FamilyEntry(
                    family=family_id,
                    kind=report.kind if report else "",
                    name=report.name if report else "",
                    recent_compile_seconds=score,
                    requests=used.requests if used else 0,
                    hits=used.hits if used else 0,
                    variants=used.variants if used else 0,
                    varies=report.variation.lines()[:5] if report else (),
                    findings=report.findings if report else {},
                    finding=report.finding if report else None,
                    schemas=tuple(r for r in reports if r.family == family_id),
                )
            )
        entries.sort(key=lambda e: (-e.recent_compile_seconds, e.family))
        return SchemasView(tuple(entries), tuple(reports))

    def registry(self, limit: int) -> list[RegistryEntry]:
        """Up to `limit` of this node's static JSON Schema families, most requested first, with their
        one schema's text: what a new replica should compile before its first user request. A family
        injected per request is never in it (its next variant is new anyway), nor one whose text is no
        longer kept (blocking: call it off the event loop)."""
        static = [
            entry
            for entry in self.schemas_view().families
            if entry.kind == "schema" and len(entry.schemas) == 1 and not _injected(entry.findings)
        ]
        texts = self.analysis.founder_texts({entry.schemas[0].schema_hash for entry in static})
        found = [
            RegistryEntry(entry.schemas[0].schema_hash, entry.family, entry.name, entry.requests, text)
            for entry in static
            if (text := texts.get(entry.schemas[0].schema_hash)) is not None
        ]
        found.sort(key=lambda e: (-e.requests, e.schema_hash))
        return found[:limit]


def _injected(findings: Mapping[RuleSeverity, int]) -> bool:
    return any(findings.get(("dynamic_schema", severity)) for severity in ("warning", "error"))


def probe_settings(config: Config) -> ProbeSettings:
    return config.settings(
        ProbeSettings,
        "probe",
        shape_window=config.shape_window,
        thresholds=config.lint_thresholds(),
        timeout=config.collector_timeout,
        schema_les=PROFILES[config.metrics_profile].schema_les,
        compile_budget=config.guard_compile_budget,
        verdict_ttl=config.guard_verdict_ttl,
    )


def token_reviewer(config: Config, discovery: PodDiscovery | None) -> TokenReviewer | None:
    """The TokenReview client for probes over TCP, with this daemon's API-server credentials."""
    if not config.probe_listen_address:
        return None
    settings = config.settings(
        ReviewSettings,
        "kubernetes",  # api_server, token_file, ca_file: the same credentials as pod discovery
        audience=config.probe_token_audience,
        node=config.kubernetes_node_name,
        timeout=config.collector_timeout,
    )
    return TokenReviewer(settings, discovery.node_pods if discovery is not None else None)


@register("probe")
def build(config: Config, shared: Shared) -> ProbeCollector:
    discovery = shared.discovery
    return ProbeCollector(
        probe_settings(config),
        discovery.pod_namespaces if discovery is not None else None,  # for probes that do not say theirs
        token_reviewer(config, discovery),
        discovery.injected_pods if discovery is not None else None,
    )
