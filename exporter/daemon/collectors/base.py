"""What every source shares: refresh off the render path, self-metrics, and quiet failure logging.

A scrape first awaits `refresh()` of every enabled source concurrently, each under a timeout, then
renders; `collect()` only yields what the last refresh stored, so rendering never waits on a source.
A source swaps in new state objects rather than mutating them, so a render running in a thread
always sees one whole refresh.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prometheus_client.core import Metric

from exporter.daemon import metrics_table
from exporter.daemon.metrics_table import declared

log = logging.getLogger("gdx.collector")
T = TypeVar("T")


def pod_labels(namespace: str, pod: str) -> dict[str, str]:
    """The labels naming an engine pod: `namespace` first where it is known, then `pod`. Where it is
    not (a static target, a probe outside Kubernetes) the series keep `pod` alone, as before."""
    return {"namespace": namespace, "pod": pod} if namespace else {"pod": pod}


class CollectorError(Exception):
    """A source could not collect; the message is what /healthz and the log show."""


class Collector:
    """A prometheus-client custom collector fed by an async `refresh()`."""

    name = "source"

    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self.success = False
        self.duration = 0.0
        self.last_error: str | None = None
        self.refreshed = False
        self._blocking: asyncio.Future[Any] | None = None

    async def start(self) -> None:
        """Acquire long-lived resources (sessions, sockets). Called once before the first scrape."""

    async def close(self) -> None:
        """Release what `start` acquired."""

    async def refresh(self) -> None:
        """Gather fresh data; raise `CollectorError` (or anything) on failure."""
        raise NotImplementedError

    def collect(self) -> Iterable[Metric]:
        return ()

    def describe(self) -> Iterable[Metric]:
        """The families `collect()` yields, empty, from their declarations (exporter.daemon.metrics_table,
        under this collector's name): the registry reads their names as it takes the collector, and
        refuses one that another collector declares."""
        return metrics_table.describe(self.name)

    async def not_ready(self) -> str | None:
        """Why the daemon cannot do this source's job yet (/readyz answers 503), or None. Only what
        a restart or a wait could change: a GPU-less node's NVML is no reason to take a pod out."""
        return None

    async def run_blocking(self, func: Callable[..., T], *args: Any) -> T:
        """Runs a blocking call in a worker thread. A call still running from an earlier scrape is
        not doubled up: threads cannot be cancelled, so stacking them would grow without bound."""
        if self._blocking is not None and not self._blocking.done():
            raise CollectorError("the previous collection is still running (blocked in a library call)")
        loop = asyncio.get_running_loop()
        self._blocking = loop.run_in_executor(None, functools.partial(func, *args))
        return await asyncio.shield(self._blocking)

    async def timed_refresh(self) -> None:
        """Refresh under the timeout, record success and duration, log only on a change of state."""
        started = time.perf_counter()
        error: str | None = None
        try:
            await asyncio.wait_for(self.refresh(), self.timeout)
        except TimeoutError:
            error = f"timed out after {self.timeout:g}s"
        except CollectorError as err:
            error = str(err)
        except Exception as err:  # a bug or an unexpected library error must not break the scrape
            log.debug("collector %s raised", self.name, exc_info=True)
            error = f"{type(err).__name__}: {err}"
        self.duration = time.perf_counter() - started
        self.refreshed = True
        if error != self.last_error:
            if error is not None:
                log.warning("collector %s failed: %s", self.name, error)
            elif self.last_error is not None:
                log.info("collector %s recovered", self.name)
        self.success = error is None
        self.last_error = error


class SelfCollector:
    """`guided_decoding_collector_success` and `_duration_seconds` for every enabled source."""

    def __init__(self, collectors: Iterable[Collector]) -> None:
        self.collectors = list(collectors)

    def describe(self) -> Iterable[Metric]:
        return metrics_table.describe("self")

    def collect(self) -> Iterable[Metric]:
        success = declared("collector_success").gauge()
        duration = declared("collector_duration_seconds").gauge()
        for source in self.collectors:
            if not source.refreshed:
                continue
            success.add_metric([source.name], 1.0 if source.success else 0.0)
            duration.add_metric([source.name], source.duration)
        yield success
        yield duration
