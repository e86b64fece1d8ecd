"""The probe as an engine pod gets it from `gdx inject`: the image's tree, then the init container's copy.

`image_tree` writes what the exporter image carries (deploy/Dockerfile runs `gdx probe-files` at
build time); `copy_as_init` runs the init container's own command, taken from what `gdx inject`
writes, with the image's and the emptyDir's paths mapped to folders here. `pod_env` is the engine
container's environment from the same output, `$(VAR)` references expanded as the kubelet does.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from exporter.inject.podspec import IMAGE_TREE, INIT_NAME, MOUNT, InjectOptions, inject
from exporter.inject.tree import write_tree
from exporter.wire import DEFAULT_SOCKET

ENGINE_POD = {
    "metadata": {"name": "vllm-0"},
    "spec": {
        "containers": [
            {"name": "vllm", "image": "vllm/vllm-openai:v0.32.0", "command": ["vllm", "serve", "tiny"]}
        ]
    },
}


def injected_pod(options: InjectOptions) -> dict[str, Any]:
    result = inject(ENGINE_POD["spec"], ENGINE_POD["metadata"], options)
    assert result.status == "injected"
    return result.spec


def image_tree(where: Path) -> Path:
    write_tree(where)
    return where


def copy_as_init(spec: dict[str, Any], image: Path, empty_dir: Path) -> Path:
    """Runs the init container's command with IMAGE_TREE -> `image` and MOUNT -> `empty_dir`."""
    init = next(c for c in spec["initContainers"] if c["name"] == INIT_NAME)
    empty_dir.mkdir(parents=True, exist_ok=True)
    command = [
        str(word).replace(IMAGE_TREE, str(image)).replace(MOUNT, str(empty_dir)) for word in init["command"]
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    return empty_dir


def pod_env(spec: dict[str, Any], mapped: dict[str, str], fields: dict[str, str]) -> dict[str, str]:
    """The engine container's literal env, paths in `mapped` replaced, fieldRefs from `fields`, and
    `$(VAR)` expanded from earlier variables (the kubelet's rule)."""
    engine = spec["containers"][0]
    env: dict[str, str] = {}
    for item in engine.get("env") or []:
        source = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
        value = str(item["value"]) if "value" in item else fields[source]
        value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)
        for old, new in mapped.items():
            value = value.replace(old, new)
        env[item["name"]] = value
    return env


def engine_env(workdir: Path, address: Path | str, pod: str, namespace: str = "") -> dict[str, str]:
    """The environment an engine container gets from `gdx inject`, with its probe tree copied here by
    the init container's command: for a unix socket path (the socket transport) or tcp://HOST:PORT
    (the service transport, the Service's name mapped to HOST)."""
    image = image_tree(workdir / "probe-image")
    text = str(address)
    if text.startswith("tcp://"):
        host, _, port = text[len("tcp://") :].rpartition(":")
        options = InjectOptions(image="gdx", service="exporter-probe", namespace="monitoring", port=int(port))
        mapped = {"exporter-probe.monitoring.svc": host}
    else:
        options = InjectOptions(image="gdx", transport="socket")
        mapped = {DEFAULT_SOCKET: text}
    spec = injected_pod(options)
    tree = copy_as_init(spec, image, workdir / "gdx-probe")
    return pod_env(
        spec, {MOUNT: str(tree), **mapped}, {"metadata.name": pod, "metadata.namespace": namespace}
    )
