"""The socket transport's directory (issue 47, item 6): the init step leaves it 2750 (the engines'
group reaches the socket, and can create, rename or remove nothing beside it), in the chart and in the
kustomize component generated from it, and `gdx inject` mounts it read-only into engines."""

from __future__ import annotations

import pytest

from exporter.inject.podspec import InjectOptions, inject
from tests.integration.test_helm import RELEASE, by_key, helm_path, template
from tools.harness import ROOT


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_path("helm4")


def test_the_chart_leaves_the_socket_directory_2750(helm: str) -> None:
    docs = by_key(template(helm, {"probe": {"transport": "socket"}}))
    spec = docs[f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert "os.chmod(p, 0o2750)" in init["command"][-1]
    component = ROOT / "deploy" / "kubernetes" / "components" / "probe-socket" / "kustomization.yaml"
    assert "os.chmod(p, 0o2750)" in component.read_text() and "0o2770" not in component.read_text()


def test_engines_mount_the_socket_directory_read_only() -> None:
    engine = {"name": "vllm", "image": "vllm/vllm-openai:v0.32.0", "command": ["vllm", "serve", "m"]}
    pod = {"containers": [engine]}
    spec = inject(pod, {}, InjectOptions(image="x", transport="socket")).spec
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "gdx-probe-socket"]
    assert mount == {
        "name": "gdx-probe-socket",
        "mountPath": "/run/guided-decoding-exporter",
        "readOnly": True,
    }
