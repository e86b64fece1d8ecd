"""The in-engine probe: measures grammar compiles per schema inside vLLM, SGLang or TensorRT-LLM.

vLLM loads it through the `vllm.general_plugins` entry point (`register`) in every process it starts;
it arms itself where grammars are compiled (the EngineCore process, or the main process of an offline
`LLM` when `VLLM_ENABLE_V1_MULTIPROCESSING=0` runs its engine in-process) and, as engine `api-server`,
in the API server, which validates each structured request on its event loop (targets/vllm_api.py). SGLang and
TensorRT-LLM call `install()` explicitly, e.g. from `sitecustomize.py`. Standard library only;
nothing here raises into the engine. Environment:

    GDX_PROBE=0                  disable
    GDX_PROBE_ADDRESS            the daemon: tcp://HOST:PORT (a node-local Service or the node's IP) or
                                 unix:PATH; wins over GDX_PROBE_SOCKET
    GDX_PROBE_SOCKET             daemon socket (default /run/guided-decoding-exporter/probe.sock)
    GDX_PROBE_TOKEN_FILE         over TCP, the projected ServiceAccount token shown to the daemon
                                 (default /var/run/secrets/guided-decoding-exporter/token)
    GDX_PROBE_DAEMON_UID         on the unix socket, the uid that must listen (default: the owner of
                                 the socket's directory); nothing is sent to any other
    GDX_PROBE_ENGINE_KIND        which engine the injected sitecustomize arms for (sglang, trtllm)
    GDX_PROBE_TRACKED_SPECS      specs tracked per engine process before the least recently used fold
                                 into `other` (500); GDX_PROBE_MAX_SCHEMAS, its old name, is still read
                                 for one release when it is unset, with a deprecation warning
    GDX_PROBE_INTERVAL           seconds between snapshots (1)
    GDX_PROBE_STATE_DIR          where vLLM's API server notes the spec it validates on the unbounded
                                 (outlines) path, so its successor names it if it dies (an emptyDir;
                                 default: TMPDIR/guided-decoding-probe)
    GDX_PROBE_HIT_MAX_SECONDS    calls faster than this are cache hits without asking the cache (0.0002)
    GDX_PROBE_ENGINE             engine label when the engine does not tell (default 0)
    GDX_GUARD                    vLLM's API server: off (default), observe or enforce: refuse a schema
                                 whose outlines validation is known to stall or kill it (guard.py);
                                 GDX_GUARD_MEMORY (1GiB) and GDX_GUARD_TIMEOUT (1s) bound the first
                                 validation of a new one, GDX_GUARD_FILE loads `gdx lint --write-guard`'s
                                 verdicts, GDX_GUARD_VERDICT_SECONDS (86400) ages them out,
                                 GDX_GUARD_MAX_VERDICTS (4096) bounds them
    GDX_POD_NAME / POD_NAME      pod label (default: the host name, which is the pod name in Kubernetes)
    GDX_POD_NAMESPACE            namespace label (downward API metadata.namespace; default: the mounted
                                 service account's namespace, else none)

Parts: `settings` (the environment), `targets` (the wrapped call sites, per engine), `patching`
(wrapping on import), `recorder` (the bounded counts), `identity` (spec string -> schema hash),
`shipper` (the background thread and the socket), `hello` (who this process is).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import re
import sys
import threading

from exporter.probe import guard as guard_module
from exporter.probe import patching, targets
from exporter.probe.hello import hello_fields
from exporter.probe.inflight import DeathCount, Markers, ledger
from exporter.probe.recorder import Recorder
from exporter.probe.settings import disabled, read_settings
from exporter.probe.shipper import Shipper
from exporter.probe.spec_identity import identify
from exporter.probe.targets import ENGINE_KINDS
from exporter.probe.targets.vllm_api import GUARD, MARKERS
from exporter.wire import DEFAULT_SOCKET

log = logging.getLogger("gdx.probe")
_lock = threading.Lock()
_shipper: Shipper | None = None

__all__ = [
    "DEFAULT_SOCKET",
    "ENGINE_KINDS",
    "Recorder",
    "disabled",
    "get_recorder",
    "get_shipper",
    "install",
    "register",
    "uninstall",
]


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
        elif name == "MainProcess" and _vllm_helper():
            return  # e.g. the model registry's inspection subprocess: not the API server
        elif in_process and name == "MainProcess" and not _api_server():
            install("vllm", markers=True)
        elif name == "MainProcess" or name.startswith("ApiServer"):
            match = re.search(r"_(\d+)$", name)
            engine = f"api-server-{match.group(1)}" if match else "api-server"
            install("vllm", engine=engine, markers=True, sizing=False)
    except Exception as err:  # a plugin that raises would stop vLLM from starting
        log.warning("guided-decoding probe: not armed: %r", err)


def _api_server() -> bool:
    """vLLM's OpenAI server (`python -m vllm.entrypoints...`, `vllm serve`). Its engine is a process of
    its own whatever VLLM_ENABLE_V1_MULTIPROCESSING says (AsyncLLM starts an EngineCore in 0.32 to
    0.34; the setting runs in-process only the offline `LLM`): armed as engine 0, it would take the
    EngineCore's identity on the daemon and lose its own validation series."""
    main = sys.modules.get("__main__")
    module = getattr(getattr(main, "__spec__", None), "name", None) or ""
    argv = sys.argv
    return module.startswith("vllm.entrypoints.") or (
        bool(argv) and os.path.basename(argv[0]) == "vllm" and argv[1:2] == ["serve"]
    )


def _vllm_helper() -> bool:
    """A process vLLM starts as `python -m vllm.<module>` to do one job and exit, which loads the general
    plugins too (`vllm.model_executor.models.registry` inspects a model class there when its model-info
    cache is cold, as on a new pod). Armed as `api-server`, it would take the API server's identity on
    the daemon. The API server itself runs from `vllm serve`, `vllm.entrypoints.*`, or a program of
    its own (KServe's huggingfaceserver)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    module = getattr(spec, "name", None) or ""
    return module.startswith("vllm.") and not module.startswith("vllm.entrypoints.")


def install(
    engine_kind: str = "generic",
    engine: str | None = None,
    socket_path: str | None = None,
    markers: bool = False,
    sizing: bool = True,
) -> bool:
    """Arms the probe in this process (idempotent); returns whether it is armed.

    engine_kind: "vllm" wraps vLLM's StructuredOutputManager and its API server's validation; "sglang"
    adds SGLang's grammar cache lookups, "trtllm" TensorRT-LLM's matcher factories, "generic" only
    xgrammar and llguidance. `markers`: this process validates requests (vLLM's API server): it marks
    the unbounded step and reports the specs its dead predecessors were validating. `sizing`: it sends
    what it is sized with (not in a process that only validates, whose cgroup is the engine's)."""
    global _shipper
    if disabled():
        return False
    try:
        with _lock:
            if targets.ARMED.recorder is not None:
                return True
            if engine_kind not in ENGINE_KINDS:
                raise ValueError(f"engine_kind must be one of {ENGINE_KINDS}")
            settings = read_settings(engine, socket_path)
            recorder = Recorder(settings.tracked_specs, settings.hit_max_seconds, locate_cgroup=sizing)
            recorder.sizing = sizing
            targets.ARMED.recorder = recorder
            targets.hook_engine(engine_kind, recorder)
            deaths = _arm_markers(recorder, settings.state_dir) if markers else []
            if markers and settings.guard.mode != "off":
                _arm_guard(recorder, settings.guard, deaths)
            hello = hello_fields(engine_kind, settings.pod, settings.engine, settings.namespace)
            if GUARD.guard is not None:
                hello["guard"] = settings.guard.mode  # the daemon sends this process the node's verdicts
            _shipper = Shipper(
                recorder,
                settings.socket_path,
                hello,
                settings.interval,
                token_file=settings.token_file,
                daemon_uid=settings.daemon_uid,
            )
            if GUARD.guard is not None:
                _shipper.on_message = _daemon_message
            _shipper.start()
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork)
            log.info(
                "guided-decoding probe armed (%s, pid %d, daemon at %s)",
                engine_kind,
                os.getpid(),
                settings.socket_path,
            )
            return True
    except Exception as err:
        log.warning("guided-decoding probe: install failed: %r", err)
        return False


def _arm_guard(recorder: Recorder, settings: guard_module.GuardSettings, deaths: list[DeathCount]) -> None:
    """The API server's guard, with a verdict for each spec its predecessors died validating and the
    verdict list GDX_GUARD_FILE names; its counts at zero from the first snapshot, so that a first
    refusal moves increase() (the alert)."""
    action = "refused" if settings.mode == "enforce" else "would_refuse"
    for reason in guard_module.REASONS:
        recorder.guarded.setdefault((reason, action, ""), 0)
    found = guard_module.Guard(settings)
    for entry in deaths:
        if entry.kind == "json":
            found.add(identify(entry.kind, entry.spec).schema_hash, "server_crash", "death")
    loaded = found.load(guard_module.read_file(settings.verdict_file), "lint") if settings.verdict_file else 0
    GUARD.guard = found
    log.warning(
        "guided-decoding guard: %s in this API server (%d verdicts: %d from deaths here, %d from %s);"
        " a schema without one is validated bounded (%d MiB, %g s) before vLLM's outlines step",
        settings.mode, len(found), len(deaths), loaded, settings.verdict_file or "no GDX_GUARD_FILE",
        settings.memory_bytes >> 20, settings.timeout,
    )  # fmt: skip


def _arm_markers(recorder: Recorder, folder: str) -> list[DeathCount]:
    """The marker folder; each spec's deaths so far, the ones that gone processes' markers add logged.
    Returns the ledger's entries (every spec the pod's API servers died validating)."""
    recorder.validates()
    found = MARKERS.markers = Markers(folder)
    new = found.collect()
    entries = ledger(folder, new) if found.ready else []
    for entry in entries:
        recorder.died(entry.backend, entry.kind, entry.spec, entry.deaths)
    recorder.server_deaths = sum(e.deaths for e in entries)
    for death in new:
        log.warning(
            "guided-decoding probe: a previous API server process (pid %d) died while %s validated a %s spec"
            " (schema_hash %s): counted in guided_decoding_schema_server_deaths_total",
            death.pid, death.backend, death.kind, identify(death.kind, death.spec).schema_hash,
        )  # fmt: skip
    return entries


def _daemon_message(doc: dict[str, object]) -> None:
    """The daemon's message on the shipper's thread: the node's verdicts go to this server's guard."""
    guard = GUARD.guard
    verdicts = doc.get("verdicts")
    if guard is not None and doc.get("kind") == "verdicts" and isinstance(verdicts, list):
        guard.load(verdicts[: guard.settings.max_verdicts], "daemon")


def _after_fork() -> None:
    """A forked child has the parent's counts but no shipper thread: it starts clean, unarmed."""
    global _shipper
    targets.ARMED.recorder = None
    MARKERS.markers = None
    GUARD.guard = None
    _shipper = None


def get_recorder() -> Recorder | None:
    return targets.ARMED.recorder


def get_shipper() -> Shipper | None:
    return _shipper


def uninstall() -> None:
    """Stops shipping and restores every wrapped function (for tests)."""
    global _shipper
    with _lock:
        if _shipper is not None:
            _shipper.stop()
            _shipper = None
        targets.ARMED.recorder = None
        MARKERS.markers = None
        GUARD.guard = None
        patching.unwrap_all()
        patching.remove_import_hooks()
