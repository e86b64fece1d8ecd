"""Each collector is registered by the module that declares it (exporter.daemon.collectors): the
daemon builds the enabled ones, in the order of the `--collector.*` flags, from their factories; a
disabled collector's module is never imported; pod discovery is shared by the collectors that read it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from exporter.daemon import collectors, options
from exporter.daemon.collectors.base import Collector
from exporter.daemon.options import Config
from exporter.daemon.server import build_collectors


def test_each_collector_is_registered_by_the_module_that_declares_it() -> None:
    assert tuple(collectors.MODULES) == options.COLLECTORS
    for name, module in collectors.MODULES.items():
        factory = collectors.factory(name)
        assert factory.__module__ == f"exporter.daemon.collectors.{module}"
        built = factory(Config(probe_socket=""), collectors.Shared())
        assert isinstance(built, Collector) and built.name == name


def test_a_name_is_registered_once() -> None:
    collectors.factory("cpu")
    with pytest.raises(ValueError, match="'cpu' is registered twice"):
        collectors.register("cpu")(collectors.FACTORIES["cpu"])


@pytest.mark.parametrize(
    ("off", "built"),
    [
        ((), ["cpu", "nvml", "vllm", "probe"]),
        (("nvml",), ["cpu", "vllm", "probe"]),
        (("cpu", "probe"), ["nvml", "vllm"]),
    ],
)
def test_the_enabled_collectors_are_built_in_the_flags_order(off: tuple[str, ...], built: list[str]) -> None:
    config = Config(probe_socket="", **{f"collector_{name}": False for name in off})  # type: ignore[arg-type]
    assert [source.name for source in build_collectors(config)] == built


def test_pod_discovery_is_shared_by_the_collectors_that_read_it() -> None:
    config = Config(probe_socket="", kubernetes_enabled=True, kubernetes_node_name="gpu-7")
    by_name = {source.name: source for source in build_collectors(config)}
    discovery = by_name["vllm"].discovery  # type: ignore[attr-defined]
    assert discovery is not None and discovery.settings.node_name == "gpu-7"
    probe = by_name["probe"]
    assert probe.pod_namespaces.__self__ is discovery  # type: ignore[attr-defined]
    assert probe.injected_pods.__self__ is discovery  # type: ignore[attr-defined]
    without = {s.name: s for s in build_collectors(Config(probe_socket=""))}
    assert without["vllm"].discovery is None and without["probe"].pod_namespaces is None  # type: ignore[attr-defined]


LOADED = """
import json, sys
from exporter.daemon import config, server
built = server.build_collectors(config.load({"collector_probe": False}, environ={}))
loaded = sorted(m for m in sys.modules if m.endswith(("collectors.probe", "receiver.analysis")))
print(json.dumps([[s.name for s in built], loaded]))
"""


def test_a_disabled_probe_collector_is_never_imported() -> None:
    """Its module brings the receiver and the schema analysis (several MB): not loaded when it is off."""
    out = subprocess.run(
        [sys.executable, "-c", LOADED], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [["cpu", "nvml", "vllm"], []]
