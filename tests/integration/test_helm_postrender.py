"""Teams that render their engines with Helm get the probe from a post-renderer, with real helm
binaries: Helm 4 through the plugin deploy/helm/gdx-inject (post-renderers are plugins there), Helm 3
by running `gdx inject` directly. The chart here renders vLLM's own docs Deployment unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.integration.test_helm import helm_path
from tools.harness import DATA, ROOT


def chart(tmp: Path) -> Path:
    where = tmp / "engine"
    (where / "templates").mkdir(parents=True)
    (where / "Chart.yaml").write_text("apiVersion: v2\nname: engine\nversion: 0.1.0\n")
    shutil.copyfile(DATA / "manifests" / "vllm-docs-deployment.yaml", where / "templates" / "vllm.yaml")
    return where


def env(tmp: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # where `gdx` is installed
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "XDG_DATA_HOME": str(tmp / "data"),
            "XDG_CONFIG_HOME": str(tmp / "config"), "XDG_CACHE_HOME": str(tmp / "cache")}  # fmt: skip


def injected(text: str) -> dict[str, str]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert spec["initContainers"][-1]["name"] == "gdx-probe"
    return {e["name"]: e.get("value", "") for e in spec["containers"][0]["env"]}


def test_helm4_post_renderer_plugin(tmp_path: Path) -> None:
    helm = helm_path("helm4")
    run_env = env(tmp_path)
    installed = subprocess.run([helm, "plugin", "install", str(ROOT / "deploy" / "helm" / "gdx-inject")],
                               capture_output=True, text=True, env=run_env, timeout=60)  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    out = subprocess.run(
        [helm, "template", "llm", str(chart(tmp_path)), "--post-renderer", "gdx-inject",
         "--post-renderer-args=--transport=hostip", "--post-renderer-args=--warm-configmap=gdx-warm"],
        capture_output=True, text=True, env=run_env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert injected(out.stdout)["GDX_PROBE_ADDRESS"] == "tcp://$(GDX_HOST_IP):9478"
    (deployment,) = [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "Deployment"]
    engine = deployment["spec"]["template"]["spec"]["containers"][0]
    hook = engine["lifecycle"]["postStart"]["exec"]["command"]  # the warm hook, on vllm serve's port
    assert hook[1:5] == ["-m", "exporter.fix.warm", "--url", "http://127.0.0.1:8000"], hook


def test_helm3_post_renderer(tmp_path: Path) -> None:
    out = subprocess.run(
        [helm_path("helm3"), "template", "llm", str(chart(tmp_path)), "--post-renderer", "gdx",
         "--post-renderer-args", "inject"],
        capture_output=True, text=True, env=env(tmp_path), timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    values = injected(out.stdout)
    assert values["PYTHONPATH"] == "/gdx-probe"
    assert values["GDX_PROBE_ADDRESS"] == "tcp://guided-decoding-exporter-probe.guided-decoding.svc:9478"
