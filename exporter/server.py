"""The daemon's HTTP side: `/metrics`, `/healthz`, `/`, and orderly start and stop.

A scrape refreshes every enabled source concurrently (single-flight: scrapes that arrive while a refresh
runs share it), then renders in a worker thread so a large page never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import logging
import signal
import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.openmetrics import exposition as om_exposition

from exporter import __version__, exposition, logs
from exporter.collectors.base import Collector, SelfCollector
from exporter.collectors.cpu import CpuCollector
from exporter.collectors.kubernetes import PodDiscovery
from exporter.collectors.nvml import NvmlCollector
from exporter.collectors.vllm import VllmCollector
from exporter.config import Config, split_address

log = logging.getLogger("gdx.server")
SHUTDOWN_GRACE = 1.0  # seconds in-flight requests get after SIGTERM; the whole stop stays well under 5 s
# The classic format: the passthrough is written in it, and every Prometheus reads it.
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def build_collectors(config: Config) -> list[Collector]:
    """The enabled collectors, in a stable order."""
    collectors: list[Collector] = []
    if config.collector_cpu:
        collectors.append(CpuCollector(timeout=config.collector_timeout))
    if config.collector_nvml:
        collectors.append(
            NvmlCollector(retry_interval=config.nvml_retry_interval, timeout=config.collector_timeout)
        )
    if config.collector_vllm:
        discovery = PodDiscovery(config) if config.kubernetes_enabled else None
        collectors.append(VllmCollector(config, discovery))
    if config.collector_probe:
        from exporter.collectors.probe import ProbeCollector

        collectors.append(ProbeCollector(config))
    return collectors


class Exporter:
    """Collectors, the registry that renders them, and the single-flight refresh."""

    def __init__(self, config: Config, collectors: Sequence[Collector] | None = None) -> None:
        self.config = config
        self.collectors = list(build_collectors(config) if collectors is None else collectors)
        self.registry = CollectorRegistry(auto_describe=False)
        for source in self.collectors:
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


def schemas_view(probe: Any) -> list[dict[str, Any]]:
    """The exposed schemas for /schemas: hashes, title, findings, and the structure with every
    literal value redacted (never a schema's values)."""
    if probe is None:
        return []
    view = probe.store.view()
    with probe.analysis.lock:
        redacted = dict(probe.analysis.redacted)
    findings = view["analysis"]["findings"]
    out = []
    for schema_hash, meta in sorted(view["info"].items()):
        out.append(
            {
                "schema_hash": schema_hash,
                "shape_hash": meta.shape,
                "kind": meta.kind,
                "backend": meta.backend,
                "title": meta.title,
                "recent_compile_seconds": view["recent"].get(schema_hash, 0.0),
                "findings": {f"{r}/{s}": n for (r, s), n in sorted(findings.get(schema_hash, {}).items())},
                "structure": redacted.get(schema_hash, "<not analysed yet>"),
            }
        )
    return out


def make_app(exporter: Exporter, users: dict[str, bytes] | None = None) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        await exporter.refresh()
        body, content_type = await asyncio.get_running_loop().run_in_executor(
            None, exporter.render, request.headers.get("Accept", "")
        )
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response(exporter.health(), dumps=lambda d: json.dumps(d, indent=2) + "\n")

    async def index(_: web.Request) -> web.Response:
        enabled = ", ".join(html.escape(s.name) for s in exporter.collectors) or "none"
        links = '<li><a href="metrics">/metrics</a></li><li><a href="healthz">/healthz</a></li>'
        if exporter.config.web_schemas:
            links += '<li><a href="schemas">/schemas</a> (literal values redacted)</li>'
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
        probe = next((s for s in exporter.collectors if s.name == "probe"), None)
        body = await asyncio.get_running_loop().run_in_executor(None, schemas_view, probe)
        return web.json_response(body, dumps=lambda d: json.dumps(d, indent=2) + "\n")

    from exporter.webconfig import basic_auth

    app = web.Application(middlewares=[basic_auth(users)] if users else [])
    app.router.add_get("/metrics", metrics)
    if exporter.config.web_schemas:
        app.router.add_get("/schemas", schemas)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/", index)
    return app


async def serve(
    config: Config, ready: asyncio.Event | None = None, stop: asyncio.Event | None = None
) -> None:
    """Runs until SIGTERM/SIGINT (or `stop` is set), then stops within SHUTDOWN_GRACE plus cleanup."""
    from exporter import webconfig

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
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread (tests)
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting down")
    exporter.cancel_refresh()
    await runner.cleanup()
    await exporter.close()
    log.info("stopped")
