"""SGLang's `sglang:*` and TensorRT-LLM's `trtllm_*` passthrough, beside vLLM's: the prefix filter on
the engines' real pages (tests/support/data, rendered by engine_pages.py from the engines' metric
code), the per-engine targets and switches of the configuration, pod discovery by the engine
annotation, and the scrape over loopback HTTP with each engine at its own path."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from exporter.daemon import passthrough
from exporter.daemon.collectors.engines import VllmCollector, VllmSettings
from exporter.daemon.config import Config, ConfigError, load
from exporter.daemon.discovery import DiscoverySettings, targets_from_pod_list
from exporter.daemon.targets import ENGINES, Target
from tools.harness import DATA

SGLANG_PAGE = (DATA / "sglang-0.5.23-metrics.txt").read_text(encoding="utf-8")
TRTLLM_PAGE = (DATA / "trtllm-metrics.txt").read_text(encoding="utf-8")
ANN = "guided-decoding-exporter.io"
GRAMMAR_FAMILIES = {
    "sglang:grammar_compilation_time_seconds",
    "sglang:num_grammar_total",
    "sglang:num_grammar_cache_hit_total",
    "sglang:num_grammar_timeout_total",
    "sglang:num_grammar_aborted_total",
    "sglang:num_grammar_queue_reqs",
    "sglang:grammar_schema_count",
    "sglang:grammar_ebnf_size",
}
Sample = tuple[str, tuple[tuple[str, str], ...], float | str]


def _samples(families: Any) -> set[Sample]:
    """Every sample as (name, sorted labels, value); NaN as a string so that equal pages compare equal."""
    return {
        (s.name, tuple(sorted(s.labels.items())), "nan" if math.isnan(s.value) else s.value)
        for f in families
        for s in f.samples
    }


def _reference(page: str, prefix: str, pod: str) -> set[Sample]:
    """What prometheus-client reads from the engine's page: its own families, the pod label added."""
    mine = [f for f in parse_text(page) if f.name.startswith(prefix)]
    return {(n, tuple(sorted({**dict(ls), "pod": pod}.items())), v) for n, ls, v in _samples(mine)}


@pytest.mark.parametrize(
    ("page", "engine", "count"), [(SGLANG_PAGE, "sglang", 522), (TRTLLM_PAGE, "trtllm", 237)]
)
def test_engine_page_passes_through_in_both_formats(page: str, engine: str, count: int) -> None:
    prefix = ENGINES[engine].prefix
    families = passthrough.parse(page, f"{engine}-0", prefix)
    want = _reference(page, prefix, f"{engine}-0")
    assert len(want) == count
    assert _samples(parse_text(passthrough.render_text(families))) == want
    om = list(parse_openmetrics(passthrough.render_openmetrics(families) + "# EOF\n"))
    assert _samples(om) == want
    # prometheus-client's multiprocess pages keep `_total` in a counter's family name; OpenMetrics
    # names the family without it, with the same samples.
    assert all(f.type in ("counter", "gauge", "histogram") for f in om)


def test_sglang_grammar_families_come_through() -> None:
    names = {f.name for f in passthrough.parse(SGLANG_PAGE, "sglang-0", "sglang:")}
    assert names >= GRAMMAR_FAMILIES
    text = passthrough.render_text(passthrough.parse(SGLANG_PAGE, "sglang-0", "sglang:"))
    got = {(s.name, s.value) for f in parse_text(text) for s in f.samples if s.labels["pod"] == "sglang-0"}
    assert {("sglang:num_grammar_total", 13.0), ("sglang:num_grammar_cache_hit_total", 9.0)} <= got
    assert ("sglang:grammar_compilation_time_seconds_count", 4.0) in got


def test_other_engines_families_on_a_page_are_dropped(vllm_page: str) -> None:
    mixed = vllm_page + SGLANG_PAGE + TRTLLM_PAGE
    for engine in ENGINES.values():
        names = {f.name for f in passthrough.parse(mixed, "p", engine.prefix)}
        assert names and all(n.startswith(engine.prefix) for n in names), engine.name


def test_trtllm_pid_and_existing_pod_labels() -> None:
    page = TRTLLM_PAGE + '# TYPE trtllm_x gauge\ntrtllm_x{pod="inner"} 1\n'
    samples = _samples(parse_text(passthrough.render_text(passthrough.parse(page, "trt-0", "trtllm_"))))
    batch = next(s for s in samples if s[0] == "trtllm_scheduled_batch_size")
    assert {"pid", "rank", "pod"} <= {k for k, _ in batch[1]} and ("pod", "trt-0") in batch[1]
    assert ("trtllm_x", (("exported_pod", "inner"), ("pod", "trt-0")), 1.0) in samples


# ---- configuration --------------------------------------------------------------------------------------


def test_each_engine_has_its_targets_and_default_path() -> None:
    cfg = load(
        {
            "vllm_targets": ["http://10.0.0.1:8000"],
            "sglang_targets": ["http://10.0.0.2:30000", "http://10.0.0.3:30000/custom"],
            "trtllm_targets": ["http://10.0.0.4:8000/"],
        },
        environ={},
    )
    assert cfg.scrape_targets() == (
        Target("http://10.0.0.1:8000/metrics", "10.0.0.1:8000", "vllm"),
        Target("http://10.0.0.2:30000/metrics", "10.0.0.2:30000", "sglang"),
        Target("http://10.0.0.3:30000/custom", "10.0.0.3:30000", "sglang"),
        Target("http://10.0.0.4:8000/prometheus/metrics", "10.0.0.4:8000", "trtllm"),
    )


def test_yaml_targets_and_switches_per_engine(tmp_path: Path) -> None:
    path = tmp_path / "gdx.yaml"
    path.write_text(
        "sglang:\n  targets:\n    - {url: 'http://10.0.0.2:30000', pod: sglang-0}\n  passthrough: false\n"
        "trtllm: {targets: ['http://10.0.0.4:8000'], passthrough: true}\n"
    )
    cfg = load({"config_file": str(path)}, environ={"GDX_TRTLLM_TARGET": "http://10.0.0.5:8000"})
    assert cfg.sglang_targets == (Target("http://10.0.0.2:30000/metrics", "sglang-0", "sglang"),)
    assert cfg.trtllm_targets == (
        Target("http://10.0.0.5:8000/prometheus/metrics", "10.0.0.5:8000", "trtllm"),
    )
    assert (cfg.vllm_passthrough, cfg.sglang_passthrough, cfg.trtllm_passthrough) == (True, False, True)


def test_one_url_under_two_engines_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"is also a vllm\.target: one URL, one engine"):
        load({"vllm_targets": ["http://h:1/metrics"], "sglang_targets": ["http://h:1"]}, environ={})


def test_settings_carry_the_switches() -> None:
    from exporter.daemon.collectors.engines import vllm_settings

    settings = vllm_settings(
        Config(sglang_passthrough=False, trtllm_targets=(Target("http://h/p", "t", "trtllm"),))
    )
    assert settings.targets == (Target("http://h/p", "t", "trtllm"),)
    assert [settings.passes(e) for e in ("vllm", "sglang", "trtllm", "other")] == [True, False, True, False]


# ---- discovery ------------------------------------------------------------------------------------------


def _pod(name: str, ip: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {f"{ANN}/scrape": "true", **annotations}},
        "status": {"phase": "Running", "podIP": ip},
    }


def test_engine_annotation_sets_engine_and_default_path() -> None:
    doc = {
        "items": [
            _pod("vllm-0", "10.1.0.1"),
            _pod("sglang-0", "10.1.0.2", **{f"{ANN}/engine": "sglang", f"{ANN}/port": "30000"}),
            _pod("trt-0", "10.1.0.3", **{f"{ANN}/engine": "TRTLLM"}),
            _pod("trt-1", "10.1.0.4", **{f"{ANN}/engine": "trtllm", f"{ANN}/path": "/other"}),
            _pod("odd", "10.1.0.5", **{f"{ANN}/engine": "llamacpp"}),
            _pod("badport", "10.1.0.6", **{f"{ANN}/port": "http"}),
        ]
    }
    skipped: list[str] = []
    assert targets_from_pod_list(doc, DiscoverySettings(), skipped) == [
        Target("http://10.1.0.1:8000/metrics", "vllm-0", "vllm"),
        Target("http://10.1.0.2:30000/metrics", "sglang-0", "sglang"),
        Target("http://10.1.0.3:8000/prometheus/metrics", "trt-0", "trtllm"),
        Target("http://10.1.0.4:8000/other", "trt-1", "trtllm"),
    ]
    assert skipped == [
        f"pod odd: {ANN}/engine 'llamacpp' is not one of vllm, sglang, trtllm",
        f"pod badport: {ANN}/port 'http' is not a port number",
    ]


async def test_skipped_pod_is_logged_once(
    aiohttp_server: Callable[..., Awaitable[Any]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from exporter.daemon.discovery import PodDiscovery

    api = web.Application()

    async def pods(_: web.Request) -> web.Response:
        return web.json_response({"items": [_pod("odd", "127.0.0.1", **{f"{ANN}/engine": "llamacpp"})]})

    api.router.add_get("/api/v1/pods", pods)
    server = await aiohttp_server(api)
    (tmp_path / "token").write_text("t")
    discovery = PodDiscovery(
        DiscoverySettings(
            node_name="n",
            refresh_interval=0.0,
            api_server=f"http://127.0.0.1:{server.port}",
            token_file=str(tmp_path / "token"),
        )
    )
    source = VllmCollector(VllmSettings(timeout=1.0), discovery)
    caplog.set_level(logging.WARNING, "gdx.collector.vllm")
    await source.start()
    try:
        for _ in range(3):
            await source.timed_refresh()
    finally:
        await source.close()
    assert source.success and source.results == []
    lines = [r.getMessage() for r in caplog.records if "llamacpp" in r.getMessage()]
    why = f"pod odd: {ANN}/engine 'llamacpp' is not one of vllm, sglang, trtllm"
    assert lines == [f"kubernetes discovery: {why}; not scraped"]


# ---- the scrape -----------------------------------------------------------------------------------------

Serve = Callable[[dict[str, str]], Awaitable[str]]


@pytest.fixture
async def serve(aiohttp_server: Callable[..., Awaitable[Any]]) -> Serve:
    """A loopback server answering each path with its page (others 404); returns its base URL."""

    async def start(pages: dict[str, str]) -> str:
        app = web.Application()
        for path, body in pages.items():

            async def page(_: web.Request, body: str = body) -> web.Response:
                return web.Response(text=body, content_type="text/plain")

            app.router.add_get(path, page)
        server = await aiohttp_server(app)
        return f"http://127.0.0.1:{server.port}"

    return start


async def _refresh(*targets: Target, **settings: Any) -> VllmCollector:
    source = VllmCollector(VllmSettings(targets=targets, timeout=2.0, **settings))
    await source.start()
    try:
        await source.timed_refresh()
    finally:
        await source.close()
    return source


def _pods_by_series(source: VllmCollector, openmetrics: bool = False) -> dict[str, set[str]]:
    """The pods of each sample name (`_bucket`, `_total`, ...) in the passthrough, as read back."""
    text = source.passthrough_text(openmetrics)
    parsed = parse_openmetrics(text + "# EOF\n") if openmetrics else parse_text(text)
    out: dict[str, set[str]] = {}
    for family in parsed:
        for sample in family.samples:
            out.setdefault(sample.name, set()).add(sample.labels["pod"])
    return out


async def _three_engines(serve: Serve, vllm_page: str) -> tuple[Target, ...]:
    # TensorRT-LLM's /metrics answers JSON iteration stats; the daemon reads /prometheus/metrics.
    trt = await serve({"/metrics": "[]", "/prometheus/metrics": TRTLLM_PAGE})
    return (
        Target((await serve({"/metrics": vllm_page})) + "/metrics", "vllm-0", "vllm"),
        Target((await serve({"/metrics": SGLANG_PAGE + TRTLLM_PAGE})) + "/metrics", "sglang-0", "sglang"),
        Target(trt + ENGINES["trtllm"].default_path, "trt-0", "trtllm"),
    )


async def test_each_engine_passes_its_own_families(serve: Serve, vllm_page: str) -> None:
    source = await _refresh(*await _three_engines(serve, vllm_page))
    assert source.success, source.last_error
    for openmetrics in (False, True):
        by_family = _pods_by_series(source, openmetrics)
        pods = {"vllm:": {"vllm-0"}, "sglang:": {"sglang-0"}, "trtllm_": {"trt-0"}}
        assert all(
            pods[next(p for p in pods if name.startswith(p))] == got for name, got in by_family.items()
        )
        assert {next(p for p in pods if n.startswith(p)) for n in by_family} == set(pods)
    assert {"sglang:grammar_compilation_time_seconds_count", "sglang:num_grammar_total"} <= set(
        _pods_by_series(source)
    )


@pytest.mark.parametrize("off", ["vllm", "sglang", "trtllm"])
async def test_switching_an_engine_off_drops_only_its_families(
    serve: Serve, vllm_page: str, off: str
) -> None:
    switch = {"vllm": "passthrough", "sglang": "sglang_passthrough", "trtllm": "trtllm_passthrough"}[off]
    source = await _refresh(*await _three_engines(serve, vllm_page), **{switch: False})
    assert source.success  # still scraped: its target_up stays 1
    every = {e.prefix for e in ENGINES.values()}
    kept = {next(p for p in every if name.startswith(p)) for name in _pods_by_series(source)}
    assert kept == every - {ENGINES[off].prefix}


async def test_series_cap_names_the_engine_and_the_flag(serve: Serve) -> None:
    sglang = Target(await serve({"/metrics": SGLANG_PAGE}) + "/metrics", "sglang-0", "sglang")
    trt = Target(await serve({"/prometheus/metrics": TRTLLM_PAGE}) + "/prometheus/metrics", "trt-0", "trtllm")
    source = await _refresh(sglang, trt, max_series=300)  # SGLang's page has 522 samples, TRT-LLM's 237
    down = {r.target.pod: r.error for r in source.results if not r.up}
    assert down == {"sglang-0": "more than 300 sglang:* samples (vllm.max-series)"}
    assert set(_pods_by_series(source)) and all(n.startswith("trtllm_") for n in _pods_by_series(source))


async def test_wrong_path_for_trtllm_is_a_clear_error(serve: Serve) -> None:
    base = await serve({"/metrics": '[{"iter": 1}]', "/prometheus/metrics": TRTLLM_PAGE})
    source = await _refresh(Target(base + "/metrics", "trt-0", "trtllm"))
    assert not source.success and "not the Prometheus text format: line 1" in (source.last_error or "")


async def test_type_conflicts_are_counted_per_engine_family(serve: Serve) -> None:
    as_counter = SGLANG_PAGE.replace(
        "# TYPE sglang:num_grammar_queue_reqs gauge", "# TYPE sglang:num_grammar_queue_reqs counter"
    )
    assert as_counter != SGLANG_PAGE
    a = Target(await serve({"/metrics": SGLANG_PAGE}) + "/metrics", "sglang-a", "sglang")
    b = Target(await serve({"/metrics": as_counter}) + "/metrics", "sglang-b", "sglang")
    source = await _refresh(a, b)
    registry = CollectorRegistry()
    registry.register(source)
    assert registry.get_sample_value("guided_decoding_passthrough_type_conflicts_total") == 1.0
    by_family = _pods_by_series(source)
    assert by_family["sglang:num_grammar_queue_reqs"] == {"sglang-a"}  # the first declaration wins
    assert by_family["sglang:num_grammar_total"] == {"sglang-a", "sglang-b"}


async def test_unknown_engine_is_marked_down_without_a_request(serve: Serve) -> None:
    source = await _refresh(Target("http://127.0.0.1:9/metrics", "x", "llamacpp"))
    assert [r.error for r in source.results] == ["unknown engine 'llamacpp'"]
