"""The vLLM source over real loopback HTTP: the real page, and each kind of hostile target.

Every hostile test scrapes a good target beside the bad one: the bad one is marked down with a clear
reason, the good one keeps all its samples, and the refresh ends within the timeout.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families as parse_text

from exporter.daemon.collectors.engines import VllmCollector, VllmSettings, vllm_settings
from exporter.daemon.targets import Target

TIMEOUT = 0.5
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def serve(aiohttp_server: Callable[..., Awaitable[object]]) -> Callable[[Handler], Awaitable[str]]:
    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_get("/metrics", handler)
        server = await aiohttp_server(app)
        return f"http://127.0.0.1:{server.port}/metrics"  # type: ignore[attr-defined]

    return start


@pytest.fixture
async def good_url(serve: Callable[[Handler], Awaitable[str]], vllm_page: str) -> str:
    async def page(_: web.Request) -> web.Response:
        return web.Response(text=vllm_page, content_type="text/plain")

    return await serve(page)


async def _scrape(*targets: Target, **overrides: object) -> tuple[VllmCollector, float]:
    settings = VllmSettings(targets=targets, timeout=TIMEOUT, **overrides)  # type: ignore[arg-type]
    source = VllmCollector(settings)
    await source.start()
    started = time.monotonic()
    try:
        await source.timed_refresh()
    finally:
        await source.close()
    return source, time.monotonic() - started


def _up(source: VllmCollector) -> dict[str, float | None]:
    registry = CollectorRegistry()
    registry.register(source)
    return {
        r.target.pod: registry.get_sample_value(
            "guided_decoding_target_up", {"target": r.target.url, "pod": r.target.pod}
        )
        for r in source.results
    }


async def test_real_page_passes_through_with_pod(good_url: str, vllm_page: str) -> None:
    source, _ = await _scrape(Target(good_url, "vllm-0"))
    assert source.success and _up(source) == {"vllm-0": 1.0}
    samples = [s for f in parse_text(source.passthrough_text(False)) for s in f.samples]
    original = [s for f in parse_text(vllm_page) if f.name.startswith("vllm:") for s in f.samples]
    assert len(samples) == len(original) == 364
    assert all(s.labels["pod"] == "vllm-0" for s in samples)


async def test_passthrough_switch_off(good_url: str) -> None:
    source, _ = await _scrape(Target(good_url, "vllm-0"), passthrough=False)
    assert _up(source) == {"vllm-0": 1.0}
    assert source.passthrough_text(False) == "" and source.passthrough_text(True) == ""


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def _hostile(good_url: str, bad_url: str, **overrides: object) -> str:
    """Scrapes a good and a bad target; checks the named behaviour and returns the bad one's error."""
    lines = Lines()
    logger = logging.getLogger("gdx.collector.vllm")
    logger.addHandler(lines)
    try:
        source, took = await _scrape(Target(good_url, "good"), Target(bad_url, "bad"), **overrides)
    finally:
        logger.removeHandler(lines)
    assert _up(source) == {"good": 1.0, "bad": 0.0}
    assert not source.success
    assert took < TIMEOUT + 1.5
    good = {s.labels["pod"] for f in parse_text(source.passthrough_text(False)) for s in f.samples}
    assert good == {"good"}
    bad = next(r for r in source.results if r.target.pod == "bad")
    assert bad.error and bad.error in (source.last_error or "")
    assert [line for line in lines.lines if bad_url in line and bad.error in line], (
        lines.lines
    )  # one clear line
    return bad.error


async def test_target_that_hangs(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    async def hang(_: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response(text="")

    assert "timed out after 0.5s" in await _hostile(good_url, await serve(hang))


async def test_target_that_trickles(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    async def trickle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for _ in range(300):
            await resp.write(b"v")
            await asyncio.sleep(0.1)
        return resp

    assert "timed out" in await _hostile(good_url, await serve(trickle))


async def test_target_answering_500(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    async def fail(_: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    assert await _hostile(good_url, await serve(fail)) == "HTTP 500"


async def test_target_sending_garbage(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    async def garbage(_: web.Request) -> web.Response:
        return web.Response(text="<html><body>Service Unavailable</body></html>\n")

    assert "not the Prometheus text format: line 1" in await _hostile(good_url, await serve(garbage))


async def test_target_sending_invalid_utf8(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    async def latin1(_: web.Request) -> web.Response:
        return web.Response(body=b'vllm:x{a="caf\xe9"} 1\n')

    assert "not UTF-8" in await _hostile(good_url, await serve(latin1))


async def test_target_streaming_1gb(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    sent = [0]

    async def huge(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()  # chunked: no Content-Length to reject up front
        await resp.prepare(request)
        line = b"vllm:x 1\n" * (2**20 // 9)
        for _ in range(1024):  # 1 GiB, if anyone kept reading
            await resp.write(line)
            sent[0] += len(line)
        return resp

    error = await _hostile(good_url, await serve(huge), max_body_bytes=16 * 2**20)
    assert "larger than 16777216 bytes (vllm.max-body-bytes)" in error
    assert sent[0] < 60 * 2**20  # the daemon hung up long before 1 GiB


async def test_target_with_100000_families(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    page = "".join(f"# TYPE vllm:family_{i} gauge\nvllm:family_{i} {i}\n" for i in range(100_000)).encode()

    async def wide(_: web.Request) -> web.Response:
        return web.Response(body=page, content_type="text/plain")

    error = await _hostile(good_url, await serve(wide), max_series=10_000)
    assert error == "more than 10000 vllm:* samples (vllm.max-series)"


async def test_target_declaring_100mb(serve: Callable[[Handler], Awaitable[str]], good_url: str) -> None:
    async def declared(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Length": str(100 * 2**20)})
        await resp.prepare(request)
        await resp.write(b"vllm:x 1\n")
        await asyncio.sleep(5)
        return resp

    assert "vllm.max-body-bytes" in await _hostile(good_url, await serve(declared))


async def test_target_refusing_connections(good_url: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = await _hostile(good_url, f"http://127.0.0.1:{port}/metrics")
    assert "Connect" in error


async def test_recovery_is_logged_once(
    serve: Callable[[Handler], Awaitable[str]], vllm_page: str, caplog: pytest.LogCaptureFixture
) -> None:
    healthy = [False]

    async def flaky(_: web.Request) -> web.Response:
        return web.Response(text=vllm_page) if healthy[0] else web.Response(status=503)

    url = await serve(flaky)
    source = VllmCollector(VllmSettings(targets=(Target(url, "p"),), timeout=TIMEOUT))
    await source.start()
    caplog.set_level(logging.INFO)
    try:
        for _ in range(3):
            await source.timed_refresh()
        healthy[0] = True
        await source.timed_refresh()
    finally:
        await source.close()
    messages = [r.getMessage() for r in caplog.records if r.name == "gdx.collector.vllm"]
    assert len([m for m in messages if "down: HTTP 503" in m]) == 1
    assert len([m for m in messages if m.endswith(" up")]) == 1
    assert source.success


@pytest.fixture
async def many(serve: Callable[[Handler], Awaitable[str]], vllm_page: str) -> AsyncIterator[list[str]]:
    async def page(_: web.Request) -> web.Response:
        await asyncio.sleep(0.2)
        return web.Response(text=vllm_page)

    yield [await serve(page) for _ in range(8)]


async def test_targets_are_scraped_concurrently(many: list[str]) -> None:
    source, took = await _scrape(*(Target(u, f"p{i}") for i, u in enumerate(many)))
    assert source.success
    assert took < 8 * 0.2  # sequential would take at least 1.6 s


async def test_type_conflict_between_targets_is_counted(serve: Callable[[Handler], Awaitable[str]]) -> None:
    async def as_gauge(_: web.Request) -> web.Response:
        return web.Response(text="# TYPE vllm:x gauge\nvllm:x 1\n")

    async def as_counter(_: web.Request) -> web.Response:
        return web.Response(text="# TYPE vllm:x counter\nvllm:x 2\n")

    source, _ = await _scrape(Target(await serve(as_gauge), "a"), Target(await serve(as_counter), "b"))
    registry = CollectorRegistry()
    registry.register(source)
    assert registry.get_sample_value("guided_decoding_passthrough_type_conflicts_total") == 1.0
    assert [s.labels["pod"] for f in parse_text(source.passthrough_text(False)) for s in f.samples] == ["a"]


def test_settings_from_the_configuration() -> None:
    from exporter.daemon.config import Config

    assert vllm_settings(Config()) == VllmSettings()
    assert vllm_settings(Config(vllm_max_series=5, vllm_passthrough=False)) == VllmSettings(
        max_series=5, passthrough=False
    )


async def test_an_unchanged_page_is_served_as_parsed_and_a_changed_one_parsed_again(
    serve: Callable[[Handler], Awaitable[str]], vllm_page: str
) -> None:
    """An idle engine's page costs a byte comparison, not a parse: the families and the rendered
    passthrough are the last refresh's own objects; a page that moved is parsed and rendered anew."""
    pages = [
        vllm_page,
        vllm_page,
        vllm_page.replace("vllm:num_requests_running{", 'vllm:num_requests_running{x="1",', 1),
    ]

    async def page(_: web.Request) -> web.Response:
        return web.Response(text=pages[0], content_type="text/plain")

    url = await serve(page)
    settings = VllmSettings(targets=(Target(url, "vllm-0"),), timeout=TIMEOUT)
    source = VllmCollector(settings)
    await source.start()
    try:
        await source.timed_refresh()
        first = source.passthrough_text(False)
        families = source.results[0].families
        pages.pop(0)
        await source.timed_refresh()
        assert source.reparsed_total == 1 and source.results[0].families is families
        assert source.passthrough_text(False) is first and _up(source) == {"vllm-0": 1.0}
        pages.pop(0)
        await source.timed_refresh()
        assert source.reparsed_total == 2
        moved = source.passthrough_text(False)
        assert moved != first and 'x="1"' in moved
        assert [f.name for f in parse_text(moved)] == [f.name for f in parse_text(first)]
    finally:
        await source.close()


async def test_the_minimal_profile_passes_through_only_the_families_it_names(
    good_url: str, vllm_page: str
) -> None:
    from exporter.daemon.profiles import MINIMAL

    source, _ = await _scrape(Target(good_url, "vllm-0"), families=MINIMAL.passthrough)
    assert source.success and _up(source) == {"vllm-0": 1.0}
    kept = list(parse_text(source.passthrough_text(False)))
    original = {f.name: len(f.samples) for f in parse_text(vllm_page) if f.name.startswith("vllm:")}
    vllm = {n for n in MINIMAL.passthrough if n.startswith("vllm:")}
    assert {f.name for f in kept} == vllm  # the real page has each of them
    assert {f.name: len(f.samples) for f in kept} == {n: original[n] for n in vllm}
    assert sum(len(f.samples) for f in kept) < sum(original.values()) / 5
