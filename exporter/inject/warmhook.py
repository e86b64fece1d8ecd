"""`gdx inject --warm-configmap NAME`: the engine warms its registry of static schemas as it starts.

A `postStart` hook on the engine container runs `gdx warm` (exporter/fix/warm.py, standard library
only, copied with the probe's tree) against the engine on localhost, over the schema files of the
ConfigMap NAME (`kubectl create configmap NAME --from-file=DIR/registry/` from `gdx fix`), mounted
read-only. Kubernetes marks the container Running, and so starts its probes and sends it traffic, only
once the hook returns: the replica's first user request finds each registry schema compiled. The
hook waits for the engine's `/health` (model loads take minutes) and always exits 0 (a failing hook
kills the container); what it did is in the container's log. The ConfigMap is optional: without it
the hook warms nothing and the engine starts as before.
"""

from __future__ import annotations

import re
from typing import Any

WARM_VOLUME = "gdx-warm"
WARM_DIR = "/gdx-warm"
READY_TIMEOUT = 1800  # a large model's load; past it the engine starts cold
# Each engine's default port for its OpenAI-compatible server, where the command line names none.
DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}
_PYTHON = re.compile(r"(?:^|/)python(?:\d+(?:\.\d+)?)?$")
_ANY_HOST = ("", "0.0.0.0", "::", "[::]")


def _flag(words: list[str], name: str) -> str:
    """The value of `--name V` or `--name=V` (the last one given), else ""."""
    value = ""
    for index, word in enumerate(words):
        if word == name and index + 1 < len(words):
            value = words[index + 1]
        elif word.startswith(name + "="):
            value = word.split("=", 1)[1]
    return value


def engine_url(words: list[str], kind: str) -> str:
    """Where the engine serves, from inside its container: its `--host` unless that is every
    address, its `--port` else the engine's default."""
    port = _flag(words, "--port")
    host = _flag(words, "--host")
    if not port.isdigit():
        port = str(DEFAULT_PORTS.get(kind, 8000))
    host = "127.0.0.1" if host in _ANY_HOST else host
    return f"http://{host}:{port}"


def hook_command(words: list[str], kind: str) -> list[str]:
    """The hook's command: the engine's own Python (the first word of its command line when that is
    a Python), else `python3`, running `gdx warm` from the probe's tree."""
    python = words[0] if words and _PYTHON.search(words[0]) else "python3"
    return [
        python, "-m", "exporter.fix.warm", "--url", engine_url(words, kind),
        "--ready-timeout", str(READY_TIMEOUT), "--exit-zero", "--log", "/proc/1/fd/1", WARM_DIR,
    ]  # fmt: skip


def add_hook(
    container: dict[str, Any], volumes: list[dict[str, Any]], configmap: str, words: list[str], kind: str
) -> tuple[list[dict[str, Any]], str]:
    """Adds the hook and the ConfigMap's mount to `container` (in place) and returns the volumes with
    the ConfigMap's, and a warning ("" for none): a container with its own postStart keeps it and
    gets no hook (Kubernetes allows one)."""
    found = container.get("lifecycle")
    lifecycle: dict[str, Any] = found if isinstance(found, dict) else {}
    if lifecycle and lifecycle.get("postStart"):
        return volumes, "the engine container has its own postStart hook: none added (run gdx warm from it)"
    container["lifecycle"] = {**lifecycle, "postStart": {"exec": {"command": hook_command(words, kind)}}}
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != WARM_VOLUME]
    container["volumeMounts"] = [*mounts, {"name": WARM_VOLUME, "mountPath": WARM_DIR, "readOnly": True}]
    kept = [v for v in volumes if v.get("name") != WARM_VOLUME]
    return [*kept, {"name": WARM_VOLUME, "configMap": {"name": configmap, "optional": True}}], ""
