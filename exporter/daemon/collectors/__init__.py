"""One collector per data source (node_exporter's layout), each in the module named for its source:
`cpu` (psutil), `nvml` (the GPUs), `vllm` (the engines' metrics pages: engines.py), `probe` (the
in-engine probes). Pod discovery, which two of them read, is not a collector (exporter.daemon.discovery).

Each module registers its collector where it declares it: `@register("cpu")` on the function that
makes it from the configuration (node_exporter's registerCollector). `build_enabled` makes the enabled
ones in the order of MODULES, which is the order of the `--collector.*` flags and of /metrics. A module
is imported only when its collector is enabled (the probe's brings the schema analysis): MODULES says
where each collector is declared, and nothing else about it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from exporter.daemon.collectors.base import Collector
    from exporter.daemon.discovery import PodDiscovery
    from exporter.daemon.options import Config

# collector name (its `--collector.NAME` flag, its name on /healthz) -> the module of this package that
# declares and registers it
MODULES = {"cpu": "cpu", "nvml": "nvml", "vllm": "engines", "probe": "probe"}


@dataclass(frozen=True)
class Shared:
    """What the collectors share: pod discovery, when it is on (the vllm collector scrapes the pods it
    lists, the probe collector reads their namespaces and which of them were given the probe)."""

    discovery: PodDiscovery | None = None


Factory = Callable[["Config", Shared], "Collector"]
F = TypeVar("F", bound=Factory)
FACTORIES: dict[str, Factory] = {}


def register(name: str) -> Callable[[F], F]:
    """Registers the decorated function as the factory of collector `name`."""

    def add(factory: F) -> F:
        if name in FACTORIES:
            raise ValueError(f"collector {name!r} is registered twice")
        FACTORIES[name] = factory
        return factory

    return add


def factory(name: str) -> Factory:
    """The factory of collector `name`, its module imported (so registered) on first use."""
    importlib.import_module(f"{__name__}.{MODULES[name]}")
    return FACTORIES[name]


def build_enabled(config: Config, shared: Shared) -> list[Collector]:
    """The enabled collectors, in a stable order (the page's)."""
    return [factory(name)(config, shared) for name in MODULES if config.collector_enabled(name)]
