"""The injected probe on every CPython the engines ship (3.10 to 3.13: vLLM, SGLang and TensorRT-LLM
images), with nothing of this package installed: the tree `gdx probe-files` writes (the exporter
image's build step), copied by the init container's own command from `gdx inject`'s output, and the
engine container's environment from that output. Each interpreter arms the probe from the tree's
sitecustomize, finds the vLLM plugin entry point, runs the image's own sitecustomize after ours, and
reports to a daemon over TCP; under `-E` or `-I` it runs untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.inject.podspec import MOUNT, InjectOptions
from tools.harness import ROOT, free_port
from tools.harness.apiserver import BoundToken, FakeApiServer
from tools.harness.injected import copy_as_init, injected_pod, pod_env
from tools.harness.processes import DaemonProcess
from tools.harness.scraping import sample, scrape, wait_for

VERSIONS = ("3.10", "3.11", "3.12", "3.13")
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"
PROGRAM = """
import importlib.metadata, json, os, sys, time
time.sleep(float(sys.argv[1]))
plugins = [e.value for e in importlib.metadata.entry_points(group="vllm.general_plugins")]
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "plugins": plugins,
    "probe_loaded": "exporter.probe" in sys.modules,
    "image_sitecustomize": os.environ.get("IMAGE_SITECUSTOMIZE_RAN", ""),
    "probe_from": getattr(sys.modules.get("exporter"), "__file__", ""),
}))
"""
# What an engine image's own sitecustomize might do: ours must run it after arming the probe.
IMAGE_SITECUSTOMIZE = "import os\nos.environ['IMAGE_SITECUSTOMIZE_RAN'] = 'yes'\n"


def interpreter(version: str) -> str:
    """The CPython of that minor version: pyenv's (these machines carry 3.10 to 3.13), else on PATH."""
    found = sorted(PYENV.glob(f"{version}.*/bin/python{version}"))
    if found:
        return str(found[-1])
    if sys.version.startswith(version + "."):
        return sys.executable
    raise FileNotFoundError(f"no CPython {version}: looked in {PYENV} (pyenv install {version})")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProcess, Path, dict[str, str]]]:
    work = tmp_path_factory.mktemp("pythons")
    image = work / "image-tree"
    built = subprocess.run(
        [sys.executable, "-m", "exporter", "probe-files", str(image)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert built.returncode == 0, built.stderr
    port = free_port()
    options = InjectOptions(image="guided-decoding-exporter:test", service="gdx", namespace="mon", port=port)
    spec = injected_pod(options)
    tree = copy_as_init(spec, image, work / "empty-dir")
    own = work / "image-site"
    own.mkdir()
    (own / "sitecustomize.py").write_text(IMAGE_SITECUSTOMIZE)
    api = FakeApiServer()
    (work / "daemon-token").write_text(api.daemon_token)
    for version in VERSIONS:
        api.tokens[f"token-{version}"] = BoundToken(namespace="llm", pod=f"py-{version.replace('.', '-')}")
    daemon = DaemonProcess(
        ["--no-collector.nvml", "--no-collector.vllm", "--probe.socket", "",
         "--probe.listen-address", f"127.0.0.1:{port}", "--kubernetes.api-server", api.url,
         "--kubernetes.token-file", str(work / "daemon-token"), "--kubernetes.ca-file", "",
         "--kubernetes.node-name", "node-a"]
    )  # fmt: skip
    env = pod_env(
        spec, {"gdx.mon.svc": "127.0.0.1"}, {"metadata.name": "ignored", "metadata.namespace": "llm"}
    )
    assert env["PYTHONPATH"] == MOUNT and env["GDX_PROBE_ADDRESS"] == f"tcp://127.0.0.1:{port}"
    env["PYTHONPATH"] = f"{tree}:{own}"  # the emptyDir first, then what the image had
    env["GDX_PROBE_ENGINE_KIND"] = "sglang"  # the sitecustomize arms SGLang and TensorRT-LLM itself
    env["GDX_PROBE_INTERVAL"] = "0.2"
    try:
        yield daemon, work, env
    finally:
        daemon.stop()
        api.stop()


def run(version: str, work: Path, env: dict[str, str], *flags: str, wait: float = 1.5) -> dict[str, object]:
    token = work / f"token-{version}"
    token.write_text(f"token-{version}")
    out = subprocess.run(
        [interpreter(version), *flags, "-c", PROGRAM, str(wait)],
        env={"PATH": "/usr/bin:/bin", **env, "GDX_PROBE_TOKEN_FILE": str(token)},
        capture_output=True, text=True, timeout=60, cwd=work,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("version", VERSIONS)
def test_the_injected_probe_arms_and_reports(
    node: tuple[DaemonProcess, Path, dict[str, str]], version: str
) -> None:
    daemon, work, env = node
    result = run(version, work, env)
    assert result["version"] == version
    assert result["plugins"] == ["exporter.probe:register"]  # vLLM would find it: the tree's .dist-info
    assert result["probe_loaded"] is True and str(result["probe_from"]).startswith(str(work / "empty-dir"))
    assert result["image_sitecustomize"] == "yes"  # the image's own sitecustomize ran after ours
    pod = f"py-{version.replace('.', '-')}"
    wait_for(lambda: f"probe connected: pod=llm/{pod}" in daemon.log, timeout=10)  # named by its review
    info = [line for line in daemon.lines if f"pod=llm/{pod}" in line and "probe connected" in line]
    assert info and "kind=sglang" in info[0]


@pytest.mark.parametrize("flag", ["-E", "-I"])
def test_python_that_ignores_the_environment_runs_untouched(
    node: tuple[DaemonProcess, Path, dict[str, str]], flag: str
) -> None:
    daemon, work, env = node
    before = sample(scrape(daemon.url), "guided_decoding_probe_connections_refused_total", reason="no_token")
    connected = daemon.log.count("probe connected:")
    result = run("3.12", work, env, flag, wait=1.0)
    assert result["probe_loaded"] is False and result["plugins"] == []
    assert result["image_sitecustomize"] == ""  # PYTHONPATH not read at all
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_probe_connections_refused_total", reason="no_token") == before
    assert daemon.log.count("probe connected:") == connected
