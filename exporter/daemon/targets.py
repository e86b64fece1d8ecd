"""The engines whose metric pages the daemon scrapes, and their scrape targets.

An engine (`ENGINES`) is known by the name the flags and the pod annotation `.../engine` use; its
families are those whose name starts with its prefix, and it serves them at its default path. A target
is one engine's endpoint, from the configuration (`--vllm.target`, `--sglang.target`, `--trtllm.target`,
parsed here) or from pod discovery.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from exporter.engines import sglang, trtllm, vllm
from exporter.kernel.names import ENGINE_KINDS


@dataclass(frozen=True)
class Engine:
    """An engine whose own metric families the daemon scrapes and passes through."""

    name: str  # as in the flags (`--sglang.target`) and the pod annotation `.../engine`
    prefix: str  # its families: those whose name starts with this; the rest of its page is dropped
    default_path: str  # where it serves the Prometheus text format


# Each engine's page as its package declares it (exporter/engines/), in the kernel's order.
PAGES = {"vllm": vllm.PAGE, "sglang": sglang.PAGE, "trtllm": trtllm.PAGE}
ENGINES: dict[str, Engine] = {
    kind: Engine(kind, PAGES[kind].prefix, PAGES[kind].path) for kind in ENGINE_KINDS
}


@dataclass(frozen=True)
class Target:
    """One engine's metrics endpoint; `pod` (and `namespace`, when known) become labels of its
    passed-through samples, `engine` (a key of `ENGINES`) says which families of its page are kept.
    Discovered pods always carry their namespace: two `vllm-0` of two namespaces stay two series."""

    url: str
    pod: str
    engine: str = "vllm"
    namespace: str = ""


def _target_from(raw: Any, engine: Engine) -> Target:
    if isinstance(raw, Mapping):
        unknown = set(raw) - {"url", "pod", "namespace"}
        if unknown:
            raise ValueError(f"unknown target field(s) {sorted(unknown)}; expected url, pod and namespace")
        url, pod, namespace = raw.get("url"), raw.get("pod"), raw.get("namespace")
    else:
        url, pod, namespace = raw, None, None
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{raw!r} has no url")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000{engine.default_path})")
    if parts.path in ("", "/"):
        url = url.rstrip("/") + engine.default_path
    name = str(pod).strip() if pod is not None else parts.netloc
    if not name:
        raise ValueError(f"{raw!r} has an empty pod name")
    return Target(url=url, pod=name, engine=engine.name, namespace=str(namespace or "").strip())


def parse_targets(raw: Any, engine: str = "vllm") -> tuple[Target, ...]:
    """A list (YAML) or a comma-separated string (env) of URLs or `{url, pod}` mappings, all of one
    engine; a URL without a path gets the engine's (`/metrics`, TensorRT-LLM's `/prometheus/metrics`)."""
    if raw is None:
        return ()
    items: Sequence[Any]
    if isinstance(raw, str):
        items = [part for part in raw.split(",") if part.strip()]
    elif isinstance(raw, (list, tuple)):
        items = raw
    else:
        items = [raw]
    targets = tuple(_target_from(item, ENGINES[engine]) for item in items)
    pods = [(t.namespace, t.pod) for t in targets]
    duplicates = sorted({p for p in pods if pods.count(p) > 1})
    if duplicates:
        namespace, pod = duplicates[0]
        where = f" in namespace {namespace!r}" if namespace else ""
        raise ValueError(f"two targets share the pod name {pod!r}{where}; give each a distinct pod")
    return targets


def targets_of(engine: str) -> Callable[[Any], tuple[Target, ...]]:
    """The parser of one engine's target list (`--sglang.target`, `trtllm.targets`, ...)."""

    def parse(raw: Any) -> tuple[Target, ...]:
        return parse_targets(raw, engine)

    return parse
