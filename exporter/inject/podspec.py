"""Pure functions over one pod spec: which container is the engine, what would keep a probe from
running in it, and the pod spec with the probe injected.

The injected probe is the tree `gdx probe-files` writes, copied by an init container into an emptyDir
and put first on the engine's PYTHONPATH (after nothing: a literal PYTHONPATH in the spec is kept
after it; one from `valueFrom` cannot be extended and is an error). No hostPath for the TCP
transports: the probe reaches the node's daemon by a node-local Service or the node's IP and shows a
projected ServiceAccount token. Every function returns new objects and leaves its input untouched.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from exporter.inject import shapes, warmhook
from exporter.inject.errors import InjectError as InjectError  # re-exported: callers import it from here
from exporter.kernel import engine_pods
from exporter.kernel.engine_pods import (  # re-exported: inject's callers and tests import them from here
    BLOCKER_TEXT as BLOCKER_TEXT,
)
from exporter.kernel.engine_pods import EngineContainer as EngineContainer
from exporter.kernel.engine_pods import blockers as blockers
from exporter.kernel.engine_pods import command_line as command_line
from exporter.kernel.engine_pods import engine_kind_of as engine_kind_of
from exporter.kernel.names import CONTAINER_ANNOTATION as CONTAINER_ANNOTATION
from exporter.kernel.names import ENGINE_ANNOTATION, SCRAPE_ANNOTATION
from exporter.kernel.names import ENGINE_KINDS as ENGINE_KINDS
from exporter.kernel.names import PLUGIN as PLUGIN
from exporter.kernel.names import PROBE_ANNOTATION as PROBE_ANNOTATION
from exporter.kernel.names import PYTHONPATH_ANNOTATION as PYTHONPATH_ANNOTATION
from exporter.wire import DEFAULT_AUDIENCE, DEFAULT_SOCKET, DEFAULT_TCP_PORT, DEFAULT_TOKEN_FILE

# The PYTHONPATH an image sets in its own ENV, which a PYTHONPATH in the pod spec replaces (Kubernetes
# cannot see image ENV): given by --image-pythonpath or PYTHONPATH_ANNOTATION, else known for these images.
IMAGE_PYTHONPATHS = {
    # kserve/kserve python/huggingface_server.Dockerfile: ENV PYTHONPATH=/kserve-workspace/huggingfaceserver
    "kserve/huggingfaceserver": "/kserve-workspace/huggingfaceserver",
}
INIT_NAME = "gdx-probe"
TREE_VOLUME = "gdx-probe"
TOKEN_VOLUME = "gdx-probe-token"
SOCKET_VOLUME = "gdx-probe-socket"
MOUNT = "/gdx-probe"
# vLLM's API server notes there the spec it validates on the unbounded path; an emptyDir outlives a
# container restart, so the process that replaces a dead one names the spec (exporter/probe/inflight.py).
STATE_VOLUME = "gdx-probe-state"
STATE_DIR = "/gdx-probe-state"
GUARD_VOLUME = "gdx-guard"  # gdx lint --write-guard's verdicts, from a ConfigMap (GDX_GUARD_FILE)
GUARD_DIR = "/gdx-guard"
IMAGE_TREE = "/opt/guided-decoding-exporter/probe"  # where the exporter image carries the tree
TOKEN_DIR = DEFAULT_TOKEN_FILE.rsplit("/", 1)[0]
SOCKET_DIR = DEFAULT_SOCKET.rsplit("/", 1)[0]
EXPORTER_GROUP = 65532
EXPORTER_USER = 65532  # the exporter image's USER (deploy/Dockerfile)
TRANSPORTS = ("service", "hostip", "socket")


@dataclass(frozen=True)
class InjectOptions:
    """What `gdx inject` is told: the engine kind (empty: recognised), the transport, the image."""

    image: str
    transport: str = "service"
    engine_kind: str = ""
    container: str = ""  # the engine container's name (empty: the annotation, else recognised)
    image_pythonpath: str = ""  # the image's own ENV PYTHONPATH, kept after the probe's
    service: str = "guided-decoding-exporter-probe"
    namespace: str = "guided-decoding"  # the exporter's namespace (the Service's)
    port: int = DEFAULT_TCP_PORT
    audience: str = DEFAULT_AUDIENCE
    warm_configmap: str = ""  # the ConfigMap of schemas the engine's postStart hook warms ("": no hook)
    guard: str = ""  # GDX_GUARD for vLLM's API server: off, observe, enforce ("": not set, the probe's off)
    guard_configmap: str = ""  # the ConfigMap holding `gdx lint --write-guard`'s guard.json ("": none)


@dataclass(frozen=True)
class Injected:
    """One pod template's outcome: `spec`/`metadata` new (or the input's when nothing changed)."""

    spec: dict[str, Any]
    metadata: dict[str, Any]
    status: str  # injected | already | skipped
    engine: EngineContainer | None = None
    why: str = ""  # for skipped: why
    warnings: tuple[str, ...] = ()  # what will keep the probe from arming


def find_engine(
    spec: dict[str, Any], metadata: dict[str, Any], options: InjectOptions
) -> EngineContainer | None:
    """`engine_pods.find_engine` with `gdx inject`'s --container and --engine; InjectError for a named
    container the pod does not have."""
    try:
        return engine_pods.find_engine(spec, metadata, options.container, options.engine_kind)
    except engine_pods.NoSuchContainer as err:
        raise InjectError(str(err)) from None


def _init_security(engine: dict[str, Any], pod_security: dict[str, Any]) -> dict[str, Any]:
    """The copy step's securityContext: never more than the engine's, and enough for `restricted`:
    no privilege escalation, every capability dropped, non-root, a seccomp profile; the engine's own
    non-root user, SELinux and AppArmor settings kept (an OpenShift SCC assigns the user otherwise).

    The kubelet refuses to start a container with `runAsNonRoot: true` whose user is 0, and a
    container without its own `runAsUser` takes the pod's: where the engine runs as `runAsUser: 0`
    (its own or the pod's) the copy step runs as the exporter image's user, named, so that the
    kubelet sees it non-root. (Such a pod was not `restricted`, which forbids `runAsUser: 0`; one
    that was keeps its level.)"""
    theirs = engine.get("securityContext") or {}
    ours: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    for key in ("runAsUser", "runAsGroup"):
        if isinstance(theirs.get(key), int) and theirs[key] != 0:
            ours[key] = theirs[key]
    engine_user = theirs.get("runAsUser", pod_security.get("runAsUser"))
    if engine_user == 0:  # the engine runs as root: the copy step as the image's user, said out loud
        ours["runAsUser"] = EXPORTER_USER
    for key in ("seLinuxOptions", "appArmorProfile", "seccompProfile", "readOnlyRootFilesystem"):
        if key in theirs:
            ours[key] = copy.deepcopy(theirs[key])
    if "seccompProfile" not in ours and "seccompProfile" not in pod_security:
        ours["seccompProfile"] = {"type": "RuntimeDefault"}
    return ours


def _set_env(env: list[dict[str, Any]], item: dict[str, Any]) -> None:
    for at, existing in enumerate(env):
        if isinstance(existing, dict) and existing.get("name") == item["name"]:
            env[at] = item
            return
    env.append(item)


def _field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def image_pythonpath(container: dict[str, Any], annotations: dict[str, Any], options: InjectOptions) -> str:
    """What the image's own ENV sets PYTHONPATH to, where known: the flag, the annotation, the table."""
    if options.image_pythonpath or annotations.get(PYTHONPATH_ANNOTATION):
        return str(options.image_pythonpath or annotations[PYTHONPATH_ANNOTATION])
    repository = str(container.get("image") or "").split("@")[0].rsplit(":", 1)[0]
    return next((path for image, path in IMAGE_PYTHONPATHS.items() if repository.endswith(image)), "")


def probe_env(
    container: dict[str, Any], kind: str, options: InjectOptions, image_path: str = ""
) -> list[dict[str, Any]]:
    """The engine container's env with the probe's variables; PYTHONPATH gets the tree in front of
    the spec's literal one, else of `image_path` (what the image's ENV would have set)."""
    env = copy.deepcopy([e for e in container.get("env") or [] if isinstance(e, dict)])
    current = engine_pods.env_value(container, "PYTHONPATH")
    if current is not None and "valueFrom" in current:
        raise InjectError(
            f"container {container.get('name')!r}: PYTHONPATH comes from valueFrom, which cannot be"
            " extended: set it as a literal value, or put the probe's directory in it yourself"
        )
    existing = str((current or {}).get("value") or "") if current is not None else image_path
    paths = [p for p in existing.split(":") if p and p != MOUNT]
    _set_env(env, {"name": "PYTHONPATH", "value": ":".join([MOUNT, *paths])})
    if options.transport == "service":
        address = f"tcp://{options.service}.{options.namespace}.svc:{options.port}"
    elif options.transport == "hostip":
        _set_env(env, _field("GDX_HOST_IP", "status.hostIP"))  # before the variable that uses it
        address = f"tcp://$(GDX_HOST_IP):{options.port}"
    else:
        address = f"unix://{DEFAULT_SOCKET}"
    for item in (
        {"name": "GDX_PROBE_ADDRESS", "value": address},
        {"name": "GDX_PROBE_ENGINE_KIND", "value": kind},
        _field("GDX_POD_NAME", "metadata.name"),
        _field("GDX_POD_NAMESPACE", "metadata.namespace"),
        {"name": "GDX_PROBE_STATE_DIR", "value": STATE_DIR},
        *([{"name": "GDX_GUARD", "value": options.guard}] if options.guard else []),
        *(
            [{"name": "GDX_GUARD_FILE", "value": f"{GUARD_DIR}/guard.json"}]
            if options.guard_configmap
            else []
        ),
    ):
        _set_env(env, item)
    return env


def _add_named(items: list[dict[str, Any]], item: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in items if not (isinstance(i, dict) and i.get("name") == item["name"])] + [item]


def inject(spec: dict[str, Any], metadata: dict[str, Any], options: InjectOptions) -> Injected:
    """The pod spec and metadata with the probe added to the engine container; raises InjectError
    (InvalidManifest for a field of the wrong type)."""
    if options.transport not in TRANSPORTS:
        raise InjectError(f"transport must be one of {', '.join(TRANSPORTS)}")
    shapes.pod_template(spec, metadata)
    if any(isinstance(c, dict) and c.get("name") == INIT_NAME for c in spec.get("initContainers") or []):
        return Injected(spec, metadata, "already")
    engine = find_engine(spec, metadata, options)
    if engine is None:
        return Injected(spec, metadata, "skipped", why="no engine container (name it: --container)")
    spec, metadata = copy.deepcopy(spec), copy.deepcopy(metadata)
    container = spec["containers"][engine.index]
    warnings = tuple(BLOCKER_TEXT[b] for b in blockers(container, engine.kind))
    image_path = image_pythonpath(container, metadata.get("annotations") or {}, options)
    container["env"] = probe_env(container, engine.kind, options, image_path)
    mounts = [m for m in container.get("volumeMounts") or [] if isinstance(m, dict)]
    mounts = _add_named(mounts, {"name": TREE_VOLUME, "mountPath": MOUNT, "readOnly": True})
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
    volumes = _add_named(volumes, {"name": TREE_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}})
    mounts = _add_named(mounts, {"name": STATE_VOLUME, "mountPath": STATE_DIR})
    volumes = _add_named(volumes, {"name": STATE_VOLUME, "emptyDir": {"sizeLimit": "32Mi"}})
    if options.transport == "socket":
        # read-only: the engine connects to the daemon's socket, and can put nothing in its place
        mounts = _add_named(mounts, {"name": SOCKET_VOLUME, "mountPath": SOCKET_DIR, "readOnly": True})
        volumes = _add_named(
            volumes, {"name": SOCKET_VOLUME, "hostPath": {"path": SOCKET_DIR, "type": "Directory"}}
        )
        pod_security = spec.setdefault("securityContext", {})
        groups = list(pod_security.get("supplementalGroups") or [])
        pod_security["supplementalGroups"] = groups if EXPORTER_GROUP in groups else [*groups, EXPORTER_GROUP]
    else:
        mounts = _add_named(mounts, {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True})
        token = {"audience": options.audience, "expirationSeconds": 3600, "path": "token"}
        volumes = _add_named(
            volumes, {"name": TOKEN_VOLUME, "projected": {"sources": [{"serviceAccountToken": token}]}}
        )
    if options.guard_configmap:  # optional: a missing ConfigMap leaves the guard without lint's verdicts
        mounts = _add_named(mounts, {"name": GUARD_VOLUME, "mountPath": GUARD_DIR, "readOnly": True})
        volumes = _add_named(
            volumes, {"name": GUARD_VOLUME, "configMap": {"name": options.guard_configmap, "optional": True}}
        )
    container["volumeMounts"] = mounts
    if options.warm_configmap:
        volumes, warned = warmhook.add_hook(
            container, volumes, options.warm_configmap, command_line(container), engine.kind
        )
        warnings += (warned,) if warned else ()
    spec["volumes"] = volumes
    init = {
        "name": INIT_NAME,
        "image": options.image,
        "command": ["cp", "-r", f"{IMAGE_TREE}/.", MOUNT],
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"cpu": "100m", "memory": "64Mi"},
        },
        "securityContext": _init_security(container, spec.get("securityContext") or {}),
        "volumeMounts": [{"name": TREE_VOLUME, "mountPath": MOUNT}],
    }
    spec["initContainers"] = [*(spec.get("initContainers") or []), init]
    annotations = dict(metadata.get("annotations") or {})
    annotations[SCRAPE_ANNOTATION] = "true"
    annotations[PROBE_ANNOTATION] = "injected"
    if engine.kind != "vllm":
        annotations[ENGINE_ANNOTATION] = engine.kind
    metadata["annotations"] = annotations
    return Injected(spec, metadata, "injected", engine, warnings=warnings)
