"""The daemon's HTTP side: `/metrics`, `/healthz`, `/readyz`, `/`, and orderly start and stop.

`/healthz` is liveness: 200 whenever the event loop serves HTTP (what a restart could fix), with
each collector's last state in the body. `/readyz` is readiness: 503 until the probe socket listens
and pod discovery lists, with the reasons. Neither is behind basic auth: kubelet probes carry no
credentials, and neither body holds more than collector states.

A scrape refreshes every enabled source concurrently (single-flight: scrapes that arrive while a refresh
runs share it), then renders in a worker thread so a large page never stalls the event loop. Each
collector module maps the `Config` to the settings it uses (exporter.daemon.collectors).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import html
import json
import logging
import signal
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.openmetrics import exposition as om_exposition

from exporter import __version__
from exporter.daemon import exposition, logs
from exporter.daemon.collectors import Shared, build_enabled
from exporter.daemon.collectors.base import Collector, SelfCollector
from exporter.daemon.collectors.engines import VllmCollector
from exporter.daemon.discovery import DiscoverySettings, PodDiscovery
from exporter.daemon.option_parsers import split_address
from exporter.daemon.options import Config

if TYPE_CHECKING:  # imported when the probe collector is enabled: it brings the schema analysis
    from exporter.daemon.collectors.probe import ExposedSchema, SchemasView

log = logging.getLogger("gdx.server")
SHUTDOWN_GRACE = 1.0  # seconds in-flight requests get after SIGTERM; the whole stop stays well under 5 s
# The classic format: the passthrough is written in it, and every Prometheus reads it.
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def discovery_settings(config: Config) -> DiscoverySettings:
    return config.settings(DiscoverySettings, "kubernetes")


def build_collectors(config: Config) -> list[Collector]:
    """The enabled collectors, in a stable order (each registered by its module: exporter.daemon.collectors),
    pod discovery shared between those that read it."""
    # discovery lists pods for the vllm collector; the probe collector reads its namespaces
    listing = config.kubernetes_enabled and config.collector_vllm
    discovery = PodDiscovery(discovery_settings(config)) if listing else None
    return build_enabled(config, Shared(discovery))


class Exporter:
    """Collectors, the registry that renders them, and the single-flight refresh."""

    def __init__(self, config: Config, collectors: Sequence[Collector] | None = None) -> None:
        self.config = config
        self.collectors = list(build_collectors(config) if collectors is None else collectors)
        self.registry = CollectorRegistry(auto_describe=False)
        for source in self.collectors:  # each describes its families: a name two declare raises here
            self.registry.register(source)
        self.registry.register(SelfCollector(self.collectors))
        self.registry.register(logs.DroppedCollector())
        ProcessCollector(namespace="", registry=self.registry)
        self.vllm = next((s for s in self.collectors if isinstance(s, VllmCollector)), None)
        self._refreshing: asyncio.Task[None] | None = None
        self.started_at = time.time()

    async def start(self) -> None:
        for source in self.collectors:
            await source.start()

    async def close(self) -> None:
        for source in self.collectors:
            try:
                await source.close()
            except Exception:
                log.exception("closing collector %s", source.name)

    async def refresh(self) -> None:
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.ensure_future(self._refresh_all())
        await asyncio.shield(self._refreshing)

    def cancel_refresh(self) -> None:
        """On shutdown: scrapes waiting on a slow source end now rather than at their timeout."""
        if self._refreshing is not None:
            self._refreshing.cancel()

    async def _refresh_all(self) -> None:
        await asyncio.gather(*(s.timed_refresh() for s in self.collectors))

    def render(self, accept: str) -> tuple[bytes, str]:
        """The page in the format the scraper asked for (OpenMetrics or text 0.0.4)."""
        openmetrics = "application/openmetrics-text" in accept
        extra = self.vllm.passthrough_text(openmetrics) if self.vllm is not None else ""
        own = exposition.render(self.registry.collect(), openmetrics)
        if openmetrics:
            body = own[: -len(b"# EOF\n")] + extra.encode() + b"# EOF\n"
            return body, om_exposition.CONTENT_TYPE_LATEST
        return own + extra.encode(), TEXT_CONTENT_TYPE

    def schemas(self) -> dict[str, object]:
        """/schemas, from the probe collector (blocking: call it off the event loop)."""
        from exporter.daemon.collectors.probe import ProbeCollector

        probe = next((s for s in self.collectors if isinstance(s, ProbeCollector)), None)
        return schemas_body(probe.schemas_view()) if probe is not None else {"families": [], "schemas": []}

    def warm_registry(self) -> dict[str, object]:
        """/schemas/registry, from the probe collector (blocking: call it off the event loop)."""
        from exporter.daemon.collectors.probe import ProbeCollector

        probe = next((s for s in self.collectors if isinstance(s, ProbeCollector)), None)
        found = probe.registry(self.config.web_schemas_registry) if probe is not None else []
        return {
            "schemas": [
                {
                    "schema_hash": entry.schema_hash,
                    "family": entry.family,
                    "name": entry.name,
                    "requests": entry.requests,
                    "schema": json.loads(entry.text),
                }
                for entry in found
            ]
        }

    async def readiness(self) -> list[str]:
        """Why the daemon is not ready (empty: ready), per collector; a check that raises is a reason."""
        reasons: list[str] = []
        for source in self.collectors:
            try:
                reason = await asyncio.wait_for(source.not_ready(), source.timeout)
            except TimeoutError:
                reason = f"{source.name}: readiness check timed out after {source.timeout:g}s"
            except Exception as err:
                reason = f"{source.name}: {type(err).__name__}: {err}"
            if reason:
                reasons.append(reason)
        return reasons

    def health(self) -> dict[str, object]:
        return {
            "status": "ok",
            "version": __version__,
            "uptime_seconds": round(time.time() - self.started_at, 3),
            "collectors": {
                s.name: {
                    "success": s.success if s.refreshed else None,
                    "last_error": s.last_error,
                    "duration_seconds": round(s.duration, 6),
                }
                for s in self.collectors
            },
        }


def _schema_doc(report: ExposedSchema) -> dict[str, object]:
    return {
        "schema_hash": report.schema_hash,
        "shape_hash": report.shape_hash,
        "family": report.family,
        "kind": report.kind,
        "backend": report.backend,
        "title": report.title,
        "recent_compile_seconds": report.recent_compile_seconds,
        "findings": _counts(report.findings),
        "places": [
            {"rule": p.rule, "severity": p.severity, "pointer": p.pointer, "keyword": p.keyword}
            for p in report.places
        ],
        "structure": report.structure,
    }


def _counts(findings: Mapping[tuple[str, str], int]) -> dict[str, int]:
    return {f"{rule}/{severity}": n for (rule, severity), n in sorted(findings.items())}


def schemas_body(view: SchemasView) -> dict[str, object]:
    """The /schemas JSON: the families on /metrics ranked by recent compile seconds (the one at fault
    first), what varies in each and its `dynamic_schema` finding, then every exposed schema: hashes,
    title, findings, and the structure with every literal redacted (never a schema's values)."""
    return {
        "families": [
            {
                "family": entry.family,
                "kind": entry.kind,
                "name": entry.name,
                "recent_compile_seconds": entry.recent_compile_seconds,
                "window": {"requests": entry.requests, "cache_hits": entry.hits, "variants": entry.variants},
                "varies": list(entry.varies),
                "findings": _counts(entry.findings),
                "finding": entry.finding.doc() if entry.finding is not None else None,
                "schemas": [report.schema_hash for report in entry.schemas],
            }
            for entry in view.families
        ],
        "schemas": [_schema_doc(report) for report in view.schemas],
    }


def make_app(exporter: Exporter, users: dict[str, bytes] | None = None) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        await exporter.refresh()
        body, content_type = await asyncio.get_running_loop().run_in_executor(
            None, exporter.render, request.headers.get("Accept", "")
        )
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response(exporter.health(), dumps=lambda d: json.dumps(d, indent=2) + "\n")

    async def readyz(_: web.Request) -> web.Response:
        reasons = await exporter.readiness()
        body = {"status": "not ready" if reasons else "ready", "reasons": reasons}
        return web.json_response(
            body, status=503 if reasons else 200, dumps=lambda d: json.dumps(d, indent=2) + "\n"
        )

    async def index(_: web.Request) -> web.Response:
        enabled = ", ".join(html.escape(s.name) for s in exporter.collectors) or "none"
        links = '<li><a href="metrics">/metrics</a></li><li><a href="healthz">/healthz</a></li>'
        links += '<li><a href="readyz">/readyz</a></li>'
        if exporter.config.web_schemas:
            links += '<li><a href="schemas">/schemas</a> (literal values redacted)</li>'
        if exporter.config.web_schemas_registry:
            links += '<li><a href="schemas/registry">/schemas/registry</a> (for gdx warm)</li>'
        page = (
            "<!doctype html><html><head><title>guided-decoding-exporter</title></head><body>"
            f"<h1>guided-decoding-exporter {html.escape(__version__)}</h1>"
            "<p>Grammar-compile metrics for structured-output serving.</p>"
            f"<p>Collectors: {enabled}</p>"
            f"<ul>{links}</ul>"
            "</body></html>\n"
        )
        return web.Response(text=page, content_type="text/html")

    async def schemas(_: web.Request) -> web.Response:
        await exporter.refresh()  # new schemas get analysed, as on a scrape
        body = await asyncio.get_running_loop().run_in_executor(None, exporter.schemas)
        return web.json_response(body, dumps=lambda d: json.dumps(d, indent=2) + "\n")

    async def registry(_: web.Request) -> web.Response:
        await exporter.refresh()
        body = await asyncio.get_running_loop().run_in_executor(None, exporter.warm_registry)
        return web.json_response(body, dumps=lambda d: json.dumps(d, ensure_ascii=False) + "\n")

    from exporter.daemon.webconfig import basic_auth

    open_paths = frozenset({"/healthz", "/readyz"})  # kubelet probes carry no credentials
    app = web.Application(middlewares=[basic_auth(users, open_paths)] if users else [])
    app.router.add_get("/metrics", metrics)
    if exporter.config.web_schemas:
        app.router.add_get("/schemas", schemas)
    if exporter.config.web_schemas_registry:
        app.router.add_get("/schemas/registry", registry)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/", index)
    return app


async def serve(
    config: Config,
    ready: asyncio.Event | None = None,
    stop: asyncio.Event | None = None,
    freeze: bool = False,
) -> None:
    """Runs until SIGTERM/SIGINT (or `stop` is set), then stops within SHUTDOWN_GRACE plus cleanup.

    `freeze` (the daemon's own process, not a test's): once started, everything built so far (the
    modules, the analysis tables, the collectors) is moved out of the garbage collector's sight. None
    of it is ever garbage, and the full collections a scrape's allocations set off (about one every
    seven scrapes at the caps) no longer walk it: 40 ms each became 4 to 15 ms
    (docs/measurements/performance.md)."""
    from exporter.daemon import webconfig

    # SIGTERM from the first moment: one that came between "listening" and these handlers killed the
    # daemon (exit -15) instead of stopping it (found by the tests' forked daemons, stopped at once).
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread (tests)
            loop.add_signal_handler(sig, stop.set)
    web_config = webconfig.load(config.web_config_file) if config.web_config_file else webconfig.WebConfig()
    exporter = Exporter(config)
    await exporter.start()
    app = make_app(exporter, web_config.users)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=SHUTDOWN_GRACE)
    await runner.setup()
    host, port = split_address(config.web_listen_address)
    site = web.TCPSite(runner, host, port, ssl_context=web_config.ssl_context)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        await exporter.close()
        raise SystemExit(f"cannot listen on {config.web_listen_address}: {err.strerror or err}") from None
    for addr in runner.addresses:
        log.info(
            "listening on %s://%s:%d/ (collectors: %s)",
            "https" if web_config.ssl_context else "http",
            f"[{addr[0]}]" if ":" in addr[0] else addr[0],
            addr[1],
            ",".join(s.name for s in exporter.collectors) or "none",
        )
    if freeze:
        gc.collect()
        gc.freeze()
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting down")
    exporter.cancel_refresh()
    await runner.cleanup()
    await exporter.close()
    log.info("stopped")
