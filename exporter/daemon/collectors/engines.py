"""The engine scraper (the `vllm` collector): per-target up/duration, and each engine's own families
passed through: `vllm:*` from vLLM, `sglang:*` from SGLang, `trtllm_*` from TensorRT-LLM.

Every target is scraped concurrently at scrape time, each under its own timeout and body cap; a
target that times out, errors, refuses, sends garbage or too much is marked down and the others are
untouched. A target is of one engine (`Target.engine`): only that engine's families are kept from its
page, and only while that engine's passthrough is on. Targets are the static ones from the
configuration plus, when enabled, the engine pods Kubernetes reports on this node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
from prometheus_client.core import Metric

from exporter.daemon import passthrough
from exporter.daemon.collectors import Shared, register
from exporter.daemon.collectors.base import Collector, CollectorError, pod_labels
from exporter.daemon.discovery import PodDiscovery
from exporter.daemon.httpbody import BodyTooLarge, read_capped
from exporter.daemon.metrics_table import declared
from exporter.daemon.profiles import PROFILES
from exporter.daemon.targets import ENGINES, Target

if TYPE_CHECKING:
    from exporter.daemon.options import Config

log = logging.getLogger("gdx.collector.vllm")
# Ask for the classic text format: it is what the passthrough parser is tuned for.
ACCEPT = "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"


@dataclass(frozen=True)
class VllmSettings:
    """What the scraper uses of the configuration (`Config.settings` fills it from the `vllm.*` options)."""

    targets: tuple[Target, ...] = ()  # static targets of every engine; discovered pods are added
    timeout: float = 3.0  # per target, whole body included
    max_body_bytes: int = 16 * 2**20
    max_series: int = 10_000  # samples of its engine's families accepted from one target
    passthrough: bool = True  # re-export vLLM's vllm:* families with a pod label
    sglang_passthrough: bool = True  # SGLang's sglang:*
    trtllm_passthrough: bool = True  # TensorRT-LLM's trtllm_*
    families: frozenset[str] | None = None  # the series profile's: the families passed through (None: all)

    def passes(self, engine: str) -> bool:
        """Whether the families of this engine's targets are re-exported."""
        return {
            "vllm": self.passthrough,
            "sglang": self.sglang_passthrough,
            "trtllm": self.trtllm_passthrough,
        }.get(engine, False)


@dataclass
class TargetResult:
    target: Target
    up: bool = False
    duration: float = 0.0
    error: str | None = None
    families: list[passthrough.Family] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)  # samples of its page dropped, by reason


class VllmCollector(Collector):
    name = "vllm"

    def __init__(self, settings: VllmSettings, discovery: PodDiscovery | None = None) -> None:
        # The source's own timeout leaves room for every target's: they run concurrently.
        super().__init__(timeout=settings.timeout + 2.0)
        self.settings = settings
        self.discovery = discovery
        self.results: list[TargetResult] = []
        self.type_conflicts = 0
        self._conflicting: set[str] = set()  # families whose types disagreed at the last refresh
        self._session: aiohttp.ClientSession | None = None
        self._errors: dict[str, str | None] = {}
        # Per target (url, pod): the parser's line cache, kept between scrapes, dropped with the target.
        self._line_caches: dict[Target, passthrough.LineCache] = {}
        # Per target, the last page parsed, its families and what it dropped: an unchanged page (an idle
        # engine) is not parsed again, and when no target's families changed the merge and its renders
        # are kept.
        self._pages: dict[Target, tuple[bytes, list[passthrough.Family], Counter[str]]] = {}
        # Samples dropped from pages for their labels, by reason, counted at every scrape of the page.
        self.dropped_total: Counter[str] = Counter()
        self._dropping: dict[str, frozenset[str]] = {}  # per target url, the reasons at its last scrape
        self._merged_from: list[list[passthrough.Family]] = []
        self._last_conflicts: list[str] = []
        self.reparsed_total = 0  # pages parsed (bench and tests: the others were re-served)
        # (merged families, renders of them by format), swapped whole so a render thread sees one refresh.
        self._passthrough: tuple[list[passthrough.Family], dict[str, str]] = ([], {})

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            headers={"Accept": ACCEPT, "User-Agent": "guided-decoding-exporter"},
            connector=aiohttp.TCPConnector(limit=64, force_close=False),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _scrape(self, target: Target) -> TargetResult:
        assert self._session is not None
        result = TargetResult(target)
        started = time.perf_counter()
        try:
            engine = ENGINES.get(target.engine)
            if engine is None:
                raise CollectorError(f"unknown engine {target.engine!r}")
            async with self._session.get(
                target.url,
                timeout=aiohttp.ClientTimeout(total=self.settings.timeout),
                allow_redirects=False,
            ) as resp:
                if resp.status != 200:
                    raise CollectorError(f"HTTP {resp.status}")
                body = await read_capped(resp, self.settings.max_body_bytes)
            last = self._pages.get(target)
            if last is not None and last[0] == body:
                result.families, result.dropped, result.up = last[1], last[2], True
                return self._done(result, started)
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as err:
                raise CollectorError(f"body is not UTF-8 (byte {err.start})") from None
            try:
                cache = self._line_caches.setdefault(target, {})
                result.families = passthrough.parse(
                    text,
                    target.pod,
                    engine.prefix,
                    cache=cache,
                    max_samples=self.settings.max_series,
                    namespace=target.namespace,
                    dropped=result.dropped,
                )
            except passthrough.ParseError as err:
                raise CollectorError(f"not the Prometheus text format: {err}") from None
            except passthrough.TooManySamples as err:
                raise CollectorError(f"{err} (vllm.max-series)") from None
            keep = self.settings.families  # the series profile's (the whole page is still validated)
            if keep is not None:
                result.families = [f for f in result.families if f.name in keep]
            self.reparsed_total += 1
            self._pages[target] = (body, result.families, result.dropped)
            result.up = True
        except CollectorError as err:
            result.error = str(err)
        except TimeoutError:
            result.error = f"timed out after {self.settings.timeout:g}s"
        except BodyTooLarge as err:
            result.error = f"{err} (vllm.max-body-bytes)"
        except (aiohttp.ClientError, OSError) as err:
            result.error = f"{type(err).__name__}: {err}"
        if result.error:
            self._pages.pop(target, None)
        return self._done(result, started)

    def _done(self, result: TargetResult, started: float) -> TargetResult:
        target = result.target
        result.duration = time.perf_counter() - started
        if self._errors.get(target.url) != result.error:
            if result.error:
                log.warning("target %s (pod %s) down: %s", target.url, target.pod, result.error)
            elif target.url in self._errors:
                log.info("target %s (pod %s) up", target.url, target.pod)
        self._errors[target.url] = result.error
        self.dropped_total.update(result.dropped)
        reasons = frozenset(result.dropped)
        if reasons - self._dropping.get(target.url, frozenset()):  # logged as a target starts dropping
            log.warning(
                "target %s (pod %s): dropped %s",
                target.url,
                target.pod,
                ", ".join(f"{n} samples ({r})" for r, n in sorted(result.dropped.items())),
            )
        self._dropping[target.url] = reasons
        return result

    async def refresh(self) -> None:
        targets: list[Target] = list(self.settings.targets)
        discovery_error = None
        if self.discovery is not None:
            assert self._session is not None
            try:
                found = await self.discovery.refresh(self._session, self.settings.timeout)
            except CollectorError as err:
                discovery_error = f"kubernetes discovery: {err}"
                found = self.discovery.targets
            static = {t.url for t in targets}
            targets += [t for t in found if t.url not in static]
        results = list(await asyncio.gather(*(self._scrape(t) for t in targets)))
        pages = [r.families for r in results if self.settings.passes(r.target.engine)]
        unchanged = len(pages) == len(self._merged_from) and all(
            a is b for a, b in zip(pages, self._merged_from, strict=True)
        )
        if unchanged:  # every page as at the last refresh: the same merge, its renders kept
            merged, conflicts = self._passthrough[0], self._last_conflicts
        else:
            merged, conflicts = passthrough.merge(pages)
        self._merged_from, self._last_conflicts = pages, conflicts
        self.type_conflicts += len(conflicts)
        if set(conflicts) - self._conflicting:  # logged when a family starts to conflict, not every scrape
            log.warning(
                "targets disagree on the type of %s; kept the first", ", ".join(sorted(set(conflicts)))
            )
        self._conflicting = set(conflicts)
        current = set(targets)  # forget the state of targets that went away (pods deleted)
        self._errors = {t.url: self._errors.get(t.url) for t in current}
        self._dropping = {t.url: self._dropping.get(t.url, frozenset()) for t in current}
        self._line_caches = {t: c for t, c in self._line_caches.items() if t in current}
        self._pages = {t: page for t, page in self._pages.items() if t in current}
        self.results = results
        if not unchanged:
            self._passthrough = (merged, {})
        down = [r for r in results if not r.up]
        problems = [discovery_error] if discovery_error else []
        if down:
            detail = "; ".join(f"{r.target.pod} ({r.error})" for r in down[:5])
            problems.append(f"{len(down)} of {len(results)} targets down: {detail}")
        if problems:
            raise CollectorError(". ".join(problems))

    async def not_ready(self) -> str | None:
        """Why discovery does not work now (readiness), or None. Lists pods when the last list is older
        than the refresh interval, as a scrape would (so readiness is known before the first scrape)."""
        if self.discovery is None or self._session is None:
            return None
        try:
            await self.discovery.refresh(self._session, self.settings.timeout)
        except CollectorError as err:
            return f"kubernetes discovery: {err}"
        return None

    def passthrough_text(self, openmetrics: bool) -> str:
        """The merged families of the last refresh (engines whose passthrough is on), rendered once per
        format."""
        merged, cache = self._passthrough
        key = "om" if openmetrics else "text"
        rendered = cache.get(key)
        if rendered is None:
            render = passthrough.render_openmetrics if openmetrics else passthrough.render_text
            rendered = cache[key] = render(merged)
        return rendered

    def collect(self) -> Iterable[Metric]:
        up = declared("target_up").gauge()
        duration = declared("target_scrape_duration_seconds").gauge()
        results: Sequence[TargetResult] = self.results
        for r in results:
            # `namespace` only where known (discovered pods): a static target's series keep two labels.
            labels = {"target": r.target.url, **pod_labels(r.target.namespace, r.target.pod)}
            up.add_sample(up.name, labels, 1.0 if r.up else 0.0)
            duration.add_sample(duration.name, labels, r.duration)
        yield up
        yield duration
        yield declared("passthrough_type_conflicts").counter(self.type_conflicts)
        dropped = declared("passthrough_samples_dropped").counter()
        for reason in passthrough.DROP_REASONS:
            dropped.add_metric([reason], self.dropped_total[reason])
        yield dropped


def vllm_settings(config: Config) -> VllmSettings:
    return config.settings(
        VllmSettings,
        "vllm",
        targets=config.scrape_targets(),
        sglang_passthrough=config.sglang_passthrough,
        trtllm_passthrough=config.trtllm_passthrough,
        families=PROFILES[config.metrics_profile].passthrough,
    )


@register("vllm")
def build(config: Config, shared: Shared) -> VllmCollector:
    """Static targets from the configuration, the pods on this node from discovery when it is on."""
    return VllmCollector(vllm_settings(config), shared.discovery)
