"""The Pod Security Standards checks, in Python: a port of the Go package
`k8s.io/pod-security-admission/policy`, for tests that must show a change to a pod spec (an injected init
container, added volumes) lowers no pod's Pod Security level.

Ported from `staging/src/k8s.io/pod-security-admission/policy/` of kubernetes/kubernetes at commit
dde51bfc48b109a0f311055843d4d81a1966e9da (read from its published mirror kubernetes/pod-security-admission,
commit 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8, July 2026, whose newest check version is v1.37): the
check_*.go files, with the level/override logic of registry.go, the container walk of visitor.go and the
message helpers of helpers.go. The pod specs of objects follow `DefaultPodSpecExtractor` in
admission/admission.go (plus LeaderWorkerSet's two templates). Only the "latest" version is ported: the
newest `VersionedCheck` of each check, which is what a namespace labelled `...-version: latest` (or
unlabelled) gets.

Baseline checks (ids as upstream):
  appArmorProfile             the `container.apparmor.security.beta.kubernetes.io/*` annotations must be
                              empty, `runtime/default` or `localhost/*`; `appArmorProfile.type` (pod and
                              every container) must be RuntimeDefault or Localhost
  capabilities_baseline       `capabilities.add` only from the default set (AUDIT_WRITE, CHOWN,
                              DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID,
                              SETPCAP, SETUID, SYS_CHROOT)
  hostNamespaces              no hostNetwork, hostPID, hostIPC
  hostPathVolumes             no hostPath volume
  hostPorts                   no container port with a non-zero hostPort
  hostProbesAndHostLifecycle  no `host` in httpGet/tcpSocket of probes and postStart/preStop handlers
  privileged                  no `securityContext.privileged: true`
  procMount                   `procMount` unset or "Default", any value when `hostUsers: false`
  seLinuxOptions              type "", container_t, container_init_t, container_kvm_t or
                              container_engine_t; no user, no role (pod and containers)
  seccompProfile_baseline     `seccompProfile.type`, where set (pod, containers), RuntimeDefault or
                              Localhost (the seccomp annotations were checked only up to v1.18)
  sysctls                     only the safe sysctls of v1.37 (`SAFE_SYSCTLS`)
  windowsHostProcess          no `windowsOptions.hostProcess: true` (pod and containers)
Restricted checks, which run with the baseline ones; four of them replace a baseline check:
  allowPrivilegeEscalation    every container sets `allowPrivilegeEscalation: false` (windows exempt)
  capabilities_restricted     every container drops "ALL" and adds nothing but NET_BIND_SERVICE (windows
                              exempt); replaces capabilities_baseline
  procMount_restricted        `procMount` unset or "Default", user namespace or not; replaces procMount
  restrictedVolumes           volumes only of configMap, csi, downwardAPI, emptyDir, ephemeral, image,
                              persistentVolumeClaim, projected, secret; replaces hostPathVolumes
  runAsNonRoot                `runAsNonRoot: true` on every container, or on the pod and never false on a
                              container (`hostUsers: false` exempt)
  runAsUser                   no `runAsUser: 0`, pod or container (`hostUsers: false` exempt)
  seccompProfile_restricted   RuntimeDefault or Localhost on every container, directly or from the pod
                              (windows exempt); replaces seccompProfile_baseline

"Every container" is, as upstream, the init containers, the containers and the ephemeral containers. The
spec is the JSON/YAML form (camelCase keys); absent and null mean Go's nil, and a field of the wrong JSON
type raises `TypeError` (the API server would refuse the object). The reasons and details are upstream's
messages; `%q` of annotation values is rendered as Go's strconv.Quote renders printable text.

One API-server default is applied before the checks (`api_defaults=True`), since admission sees the
decoded, defaulted object: a volume without a source becomes an emptyDir (`SetDefaults_Volume`), which is
how upstream's own fixtures list `{name: volume0}` among the volumes restricted allows. (Defaulting
hostPort to containerPort on hostNetwork pods is left out: hostNetwork fails baseline anyway.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BASELINE",
    "LEVELS",
    "PRIVILEGED",
    "RESTRICTED",
    "SAFE_SYSCTLS",
    "Violation",
    "level_of",
    "pod_specs",
    "violations",
]

PRIVILEGED = "privileged"
BASELINE = "baseline"
RESTRICTED = "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)  # loosest first


@dataclass(frozen=True)
class Violation:
    """One failed check: its upstream id, upstream's short reason, and the detail naming the pod,
    containers, volumes or annotations at fault."""

    check: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return (
            f"{self.check}: {self.reason} ({self.detail})" if self.detail else f"{self.check}: {self.reason}"
        )


# --- reading the spec the way Go decodes it -----------------------------------------------------------

Obj = dict[str, Any]


def _typed(parent: Obj, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{key}: expected {what}, got {type(value).__name__} {value!r}")
    return value


def _obj(parent: Obj | None, key: str) -> Obj | None:
    """A pointer to a struct: None when absent or null."""
    return None if parent is None else _typed(parent, key, dict, "an object")


def _list(parent: Obj | None, key: str) -> list[Any]:
    return [] if parent is None else (_typed(parent, key, list, "a list") or [])


def _str(parent: Obj | None, key: str) -> str:
    """A string field: "" (Go's zero value) when absent or null."""
    return "" if parent is None else (_typed(parent, key, str, "a string") or "")


def _opt_str(parent: Obj | None, key: str) -> str | None:
    """A pointer to a string (procMount): None when absent or null."""
    return None if parent is None else _typed(parent, key, str, "a string")


def _bool(parent: Obj | None, key: str) -> bool | None:
    """A *bool: None when absent or null."""
    return None if parent is None else _typed(parent, key, bool, "a boolean")


def _int(parent: Obj | None, key: str) -> int | None:
    return None if parent is None else _typed(parent, key, int, "an integer")


def _items(parent: Obj | None, key: str) -> list[Obj]:
    items = _list(parent, key)
    for item in items:
        if not isinstance(item, dict):
            raise TypeError(f"{key}: expected a list of objects, got {item!r}")
    return items


def _annotations(meta: Obj) -> dict[str, str]:
    annotations: dict[str, Any] = _obj(meta, "annotations") or {}
    for key, value in annotations.items():
        if not isinstance(value, str):
            raise TypeError(f"annotations: {key}: expected a string, got {type(value).__name__} {value!r}")
    return annotations


def _containers(spec: Obj) -> Iterator[Obj]:
    """visitContainers: init containers, containers, ephemeral containers, in that order."""
    yield from _items(spec, "initContainers")
    yield from _items(spec, "containers")
    yield from _items(spec, "ephemeralContainers")


def _name(container: Obj) -> str:
    return _str(container, "name")


def _security_context(container: Obj) -> Obj | None:
    return _obj(container, "securityContext")


def _pod_security_context(spec: Obj) -> Obj | None:
    return _obj(spec, "securityContext")


def _is_windows(spec: Obj) -> bool:
    return _str(_obj(spec, "os"), "name") == "windows"


def _in_user_namespace(spec: Obj) -> bool:
    """relaxPolicyForUserNamespacePod: `hostUsers` set, and false."""
    return _bool(spec, "hostUsers") is False


# --- upstream's message helpers -----------------------------------------------------------------------


def _join_quote(items: list[str]) -> str:
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers_phrase(names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_join_quote(names)}"


_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v"}
_GO_ESCAPES |= {"\\": "\\\\", '"': '\\"'}


def _go_quote(text: str) -> str:
    """fmt's %q of a string (strconv.Quote), for printable text and the usual control characters."""
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


# --- API-server defaulting ----------------------------------------------------------------------------

# The members of corev1.VolumeSource (all pointers), by JSON name.
ALLOWED_VOLUME_SOURCES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
# restrictedVolumes_1_0 names the first of these a volume sets, in this order.
RESTRICTED_VOLUME_SOURCES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
)
VOLUME_SOURCES = ALLOWED_VOLUME_SOURCES + RESTRICTED_VOLUME_SOURCES


def _defaulted(spec: Obj) -> Obj:
    """SetDefaults_Volume: a volume with every VolumeSource pointer nil gets `emptyDir: {}`."""
    volumes = _items(spec, "volumes")
    if all(any(_obj(v, key) is not None for key in VOLUME_SOURCES) for v in volumes):
        return spec
    fixed = [
        v if any(_obj(v, key) is not None for key in VOLUME_SOURCES) else {**v, "emptyDir": {}}
        for v in volumes
    ]
    return {**spec, "volumes": fixed}


# --- the checks: each returns None when the pod passes ------------------------------------------------

Result = tuple[str, str] | None  # (reason, detail)
CheckFn = Callable[[Obj, Obj], Result]

_APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
_APPARMOR_TYPES = ("RuntimeDefault", "Localhost")


def _app_armor_profile(meta: Obj, spec: Obj) -> Result:
    setters: list[str] = []
    bad_values: set[str] = set()
    pod_profile = _obj(_pod_security_context(spec), "appArmorProfile")
    if pod_profile is not None and _str(pod_profile, "type") not in _APPARMOR_TYPES:
        setters.append("pod")
        bad_values.add(_str(pod_profile, "type"))
    bad_containers = []
    for container in _containers(spec):
        profile = _obj(_security_context(container), "appArmorProfile")
        if profile is not None and _str(profile, "type") not in _APPARMOR_TYPES:
            bad_containers.append(_name(container))
            bad_values.add(_str(profile, "type"))
    if bad_containers:
        setters.append(_containers_phrase(bad_containers))
    bad_list = sorted(bad_values)
    forbidden = sorted(
        f"{key}={_go_quote(value)}"
        for key, value in _annotations(meta).items()
        if key.startswith(_APPARMOR_ANNOTATION_PREFIX)
        and not (value in ("", "runtime/default") or value.startswith("localhost/"))
    )
    if forbidden:
        bad_list += forbidden
        setters.append(_plural("annotation", "annotations", len(forbidden)))
    if not setters:
        return None
    return (
        _plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad_list)),
        f"{' and '.join(setters)} must not set AppArmor profile type to {_join_quote(bad_list)}",
    )


BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)


def _capabilities_baseline(meta: Obj, spec: Obj) -> Result:
    bad_containers = []
    non_default: set[str] = set()
    for container in _containers(spec):
        added = _list(_obj(_security_context(container), "capabilities"), "add")
        extra = [c for c in added if c not in BASELINE_CAPABILITIES]
        if extra:
            bad_containers.append(_name(container))
            non_default.update(extra)
    if not bad_containers:
        return None
    return (
        "non-default capabilities",
        f"{_containers_phrase(bad_containers)} must not include {_join_quote(sorted(non_default))}"
        " in securityContext.capabilities.add",
    )


def _host_namespaces(meta: Obj, spec: Obj) -> Result:
    used = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if _bool(spec, key)]
    return ("host namespaces", ", ".join(used)) if used else None


def _host_path_volumes(meta: Obj, spec: Obj) -> Result:
    names = [_name(v) for v in _items(spec, "volumes") if _obj(v, "hostPath") is not None]
    if not names:
        return None
    return "hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_join_quote(names)}"


def _host_ports(meta: Obj, spec: Obj) -> Result:
    bad_containers = []
    ports: set[str] = set()
    for container in _containers(spec):
        used = [str(port) for p in _items(container, "ports") if (port := _int(p, "hostPort") or 0) != 0]
        if used:
            bad_containers.append(_name(container))
            ports.update(used)
    if not bad_containers:
        return None
    return (
        "hostPort",
        f"{_containers_phrase(bad_containers)} {_plural('uses', 'use', len(bad_containers))}"
        f" {_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}",
    )


def _handler_hosts(handler: Obj | None) -> list[str]:
    hosts = [_str(_obj(handler, action), "host") for action in ("httpGet", "tcpSocket")]
    return [host for host in hosts if host]


def _host_probes_and_host_lifecycle(meta: Obj, spec: Obj) -> Result:
    bad_containers: set[str] = set()
    hosts: set[str] = set()
    for container in _containers(spec):
        lifecycle = _obj(container, "lifecycle")
        handlers = [_obj(container, key) for key in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [_obj(lifecycle, key) for key in ("postStart", "preStop")]
        for handler in handlers:
            if found := _handler_hosts(handler):
                bad_containers.add(_name(container))
                hosts.update(found)
    if not bad_containers:
        return None
    noun = _plural("probe or lifecycle host", "probe or lifecycle hosts", len(hosts))
    return (
        "probe or lifecycle host",
        f"{_containers_phrase(sorted(bad_containers))} {_plural('uses', 'use', len(bad_containers))}"
        f" {noun} {_join_quote(sorted(hosts))}",
    )


def _privileged(meta: Obj, spec: Obj) -> Result:
    bad = [_name(c) for c in _containers(spec) if _bool(_security_context(c), "privileged")]
    if not bad:
        return None
    return "privileged", f"{_containers_phrase(bad)} must not set securityContext.privileged=true"


def _proc_mount_any(meta: Obj, spec: Obj) -> Result:
    """procMount_1_0: every procMount, where set, is "Default"."""
    bad_containers = []
    types: set[str] = set()
    for container in _containers(spec):
        mount = _opt_str(_security_context(container), "procMount")
        if mount is not None and mount != "Default":
            bad_containers.append(_name(container))
            types.add(mount)
    if not bad_containers:
        return None
    return (
        "procMount",
        f"{_containers_phrase(bad_containers)} must not set securityContext.procMount to"
        f" {_join_quote(sorted(types))}",
    )


def _proc_mount_baseline(meta: Obj, spec: Obj) -> Result:
    return None if _in_user_namespace(spec) else _proc_mount_any(meta, spec)


SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})


def _se_linux_options(meta: Obj, spec: Obj) -> Result:
    bad_types: set[str] = set()
    set_user = set_role = False

    def valid(opts: Obj) -> bool:
        nonlocal set_user, set_role
        ok = True
        if _str(opts, "type") not in SELINUX_TYPES:
            ok = False
            bad_types.add(_str(opts, "type"))
        if _str(opts, "user"):
            ok = False
            set_user = True
        if _str(opts, "role"):
            ok = False
            set_role = True
        return ok

    setters = []
    pod_opts = _obj(_pod_security_context(spec), "seLinuxOptions")
    if pod_opts is not None and not valid(pod_opts):
        setters.append("pod")
    bad_containers = []
    for container in _containers(spec):
        opts = _obj(_security_context(container), "seLinuxOptions")
        if opts is not None and not valid(opts):
            bad_containers.append(_name(container))
    if bad_containers:
        setters.append(_containers_phrase(bad_containers))
    if not setters:
        return None
    data = []
    if bad_types:
        data.append(f"{_plural('type', 'types', len(bad_types))} {_join_quote(sorted(bad_types))}")
    if set_user:
        data.append("user may not be set")
    if set_role:
        data.append("role may not be set")
    return (
        "seLinuxOptions",
        f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}",
    )


_SECCOMP_TYPES = ("RuntimeDefault", "Localhost")


def _seccomp(spec: Obj, *, required: bool) -> Result:
    """seccompProfileBaseline_1_19 (required=False) and seccompProfileRestricted_1_19 (required=True)."""
    setters: list[str] = []
    bad_values: set[str] = set()
    pod_set = False
    pod_profile = _obj(_pod_security_context(spec), "seccompProfile")
    if pod_profile is not None:
        if _str(pod_profile, "type") in _SECCOMP_TYPES:
            pod_set = True
        else:
            setters.append("pod")
            bad_values.add(_str(pod_profile, "type"))
    explicit, implicit = [], []
    for container in _containers(spec):
        profile = _obj(_security_context(container), "seccompProfile")
        if profile is not None:
            if _str(profile, "type") not in _SECCOMP_TYPES:
                explicit.append(_name(container))
                bad_values.add(_str(profile, "type"))
        elif not pod_set:
            implicit.append(_name(container))
    if explicit:
        setters.append(_containers_phrase(explicit))
    if setters:
        return (
            "seccompProfile",
            f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to"
            f" {_join_quote(sorted(bad_values))}",
        )
    if required and implicit:
        return (
            "seccompProfile",
            f"pod or {_containers_phrase(implicit)} must set securityContext.seccompProfile.type to"
            ' "RuntimeDefault" or "Localhost"',
        )
    return None


def _seccomp_profile_baseline(meta: Obj, spec: Obj) -> Result:
    return _seccomp(spec, required=False)


def _seccomp_profile_restricted(meta: Obj, spec: Obj) -> Result:
    return None if _is_windows(spec) else _seccomp(spec, required=True)


SAFE_SYSCTLS = frozenset(
    {
        # v1.0
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        # v1.27
        "net.ipv4.ip_local_reserved_ports",
        # v1.29
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        # v1.32
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        # v1.37
        "net.ipv4.tcp_slow_start_after_idle",
        "net.ipv4.tcp_notsent_lowat",
    }
)


def _sysctls(meta: Obj, spec: Obj) -> Result:
    names = [_str(s, "name") for s in _items(_pod_security_context(spec), "sysctls")]
    forbidden = [name for name in names if name not in SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(forbidden)) if forbidden else None


def _windows_host_process(meta: Obj, spec: Obj) -> Result:
    def host_process(context: Obj | None) -> bool:
        return _bool(_obj(context, "windowsOptions"), "hostProcess") is True

    setters = ["pod"] if host_process(_pod_security_context(spec)) else []
    bad = [_name(c) for c in _containers(spec) if host_process(_security_context(c))]
    if bad:
        setters.append(_containers_phrase(bad))
    if not setters:
        return None
    return (
        "hostProcess",
        f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true",
    )


def _allow_privilege_escalation(meta: Obj, spec: Obj) -> Result:
    if _is_windows(spec):
        return None
    bad = [
        _name(c)
        for c in _containers(spec)
        if _bool(_security_context(c), "allowPrivilegeEscalation") is not False
    ]
    if not bad:
        return None
    return (
        "allowPrivilegeEscalation != false",
        f"{_containers_phrase(bad)} must set securityContext.allowPrivilegeEscalation=false",
    )


def _capabilities_restricted(meta: Obj, spec: Obj) -> Result:
    if _is_windows(spec):
        return None
    missing_drop, adding = [], []
    forbidden: set[str] = set()
    for container in _containers(spec):
        capabilities = _obj(_security_context(container), "capabilities")
        if capabilities is None:
            missing_drop.append(_name(container))
            continue
        if "ALL" not in _list(capabilities, "drop"):
            missing_drop.append(_name(container))
        extra = [c for c in _list(capabilities, "add") if c != "NET_BIND_SERVICE"]
        if extra:
            adding.append(_name(container))
            forbidden.update(extra)
    details = []
    if missing_drop:
        details.append(
            f'{_containers_phrase(missing_drop)} must set securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_containers_phrase(adding)} must not include {_join_quote(sorted(forbidden))}"
            " in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def _restricted_volumes(meta: Obj, spec: Obj) -> Result:
    bad_volumes = []
    bad_types: set[str] = set()
    for volume in _items(spec, "volumes"):
        if any(_obj(volume, key) is not None for key in ALLOWED_VOLUME_SOURCES):
            continue
        bad_volumes.append(_name(volume))
        used = [key for key in RESTRICTED_VOLUME_SOURCES if _obj(volume, key) is not None]
        bad_types.add(used[0] if used else "unknown")
    if not bad_volumes:
        return None
    return (
        "restricted volume types",
        f"{_plural('volume', 'volumes', len(bad_volumes))} {_join_quote(bad_volumes)}"
        f" {_plural('uses', 'use', len(bad_volumes))}"
        f" {_plural('restricted volume type', 'restricted volume types', len(bad_types))}"
        f" {_join_quote(sorted(bad_types))}",
    )


def _run_as_non_root(meta: Obj, spec: Obj) -> Result:
    if _in_user_namespace(spec):
        return None
    setters = []
    pod_value = _bool(_pod_security_context(spec), "runAsNonRoot")
    if pod_value is False:
        setters.append("pod")
    explicit, implicit = [], []
    for container in _containers(spec):
        value = _bool(_security_context(container), "runAsNonRoot")
        if value is False:
            explicit.append(_name(container))
        elif value is None and pod_value is not True:
            implicit.append(_name(container))
    if explicit:
        setters.append(_containers_phrase(explicit))
    if setters:
        return (
            "runAsNonRoot != true",
            f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return (
            "runAsNonRoot != true",
            f"pod or {_containers_phrase(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def _run_as_user(meta: Obj, spec: Obj) -> Result:
    if _in_user_namespace(spec):
        return None
    setters = ["pod"] if _int(_pod_security_context(spec), "runAsUser") == 0 else []
    bad = [_name(c) for c in _containers(spec) if _int(_security_context(c), "runAsUser") == 0]
    if bad:
        setters.append(_containers_phrase(bad))
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


@dataclass(frozen=True)
class _Check:
    id: str
    level: str
    fn: CheckFn
    overrides: tuple[str, ...] = ()


CHECKS = (
    _Check("appArmorProfile", BASELINE, _app_armor_profile),
    _Check("capabilities_baseline", BASELINE, _capabilities_baseline),
    _Check("hostNamespaces", BASELINE, _host_namespaces),
    _Check("hostPathVolumes", BASELINE, _host_path_volumes),
    _Check("hostPorts", BASELINE, _host_ports),
    _Check("hostProbesAndHostLifecycle", BASELINE, _host_probes_and_host_lifecycle),
    _Check("privileged", BASELINE, _privileged),
    _Check("procMount", BASELINE, _proc_mount_baseline),
    _Check("seLinuxOptions", BASELINE, _se_linux_options),
    _Check("seccompProfile_baseline", BASELINE, _seccomp_profile_baseline),
    _Check("sysctls", BASELINE, _sysctls),
    _Check("windowsHostProcess", BASELINE, _windows_host_process),
    _Check("allowPrivilegeEscalation", RESTRICTED, _allow_privilege_escalation),
    _Check("capabilities_restricted", RESTRICTED, _capabilities_restricted, ("capabilities_baseline",)),
    _Check("procMount_restricted", RESTRICTED, _proc_mount_any, ("procMount",)),
    _Check("restrictedVolumes", RESTRICTED, _restricted_volumes, ("hostPathVolumes",)),
    _Check("runAsNonRoot", RESTRICTED, _run_as_non_root),
    _Check("runAsUser", RESTRICTED, _run_as_user),
    _Check(
        "seccompProfile_restricted", RESTRICTED, _seccomp_profile_restricted, ("seccompProfile_baseline",)
    ),
)


def _checks_for(level: str) -> list[_Check]:
    """registry.go's populate: baseline checks sorted by id, then restricted ones sorted by id; restricted
    runs the baseline checks no restricted check overrides."""
    baseline = sorted((c for c in CHECKS if c.level == BASELINE), key=lambda c: c.id)
    if level == BASELINE:
        return baseline
    restricted = sorted((c for c in CHECKS if c.level == RESTRICTED), key=lambda c: c.id)
    overridden = {o for c in restricted for o in c.overrides}
    return [c for c in baseline if c.id not in overridden] + restricted


# --- the API ------------------------------------------------------------------------------------------


def violations(
    pod_spec: dict[str, Any],
    level: str,
    pod_metadata: dict[str, Any] | None = None,
    *,
    api_defaults: bool = True,
) -> list[Violation]:
    """The checks of `level` ("baseline" or "restricted"; "privileged" has none) the pod fails, in
    upstream's order. `pod_metadata` is the pod's (or template's) metadata: only its annotations matter."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}: expected one of {', '.join(LEVELS)}")
    if not isinstance(pod_spec, dict):
        raise TypeError(f"pod spec: expected an object, got {type(pod_spec).__name__}")
    if level == PRIVILEGED:
        return []
    meta = pod_metadata or {}
    spec = _defaulted(pod_spec) if api_defaults else pod_spec
    found = []
    for check in _checks_for(level):
        if (result := check.fn(meta, spec)) is not None:
            found.append(Violation(check.id, *result))
    return found


def level_of(
    pod_spec: dict[str, Any], pod_metadata: dict[str, Any] | None = None, *, api_defaults: bool = True
) -> str:
    """The strictest level the pod meets: "restricted", "baseline" or "privileged"."""
    for level in (RESTRICTED, BASELINE):
        if not violations(pod_spec, level, pod_metadata, api_defaults=api_defaults):
            return level
    return PRIVILEGED


def _template(
    doc: Obj, path: tuple[str, ...], label: str, *, required: bool = True
) -> list[tuple[str, Obj, Obj]]:
    node: Obj | None = doc
    for key in path:
        node = _obj(node, key)
    if node is None:
        if required:
            raise ValueError(f"{label}: no {'.'.join(path)}")
        return []
    return [(f"{label} {'.'.join(path)}", _obj(node, "metadata") or {}, _obj(node, "spec") or {})]


_TEMPLATE_PATHS = {
    "PodTemplate": ("template",),
    "ReplicationController": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def pod_specs(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The pod specs in a Kubernetes object, each as (where, metadata, spec): a Pod's own, the template of
    a PodTemplate, ReplicationController, ReplicaSet, Deployment, DaemonSet, StatefulSet or Job, a
    CronJob's job template's, a LeaderWorkerSet's leader (if any) and worker templates, those of a List's
    items; none for other kinds. A missing template a kind requires raises ValueError."""
    kind = _str(doc, "kind")
    label = f"{kind}/{_str(_obj(doc, 'metadata'), 'name') or '?'}"
    if kind == "Pod":
        return [(f"{label} spec", _obj(doc, "metadata") or {}, _obj(doc, "spec") or {})]
    if kind in _TEMPLATE_PATHS:
        # upstream evaluates a nil ReplicationController template as nothing at all
        return _template(doc, _TEMPLATE_PATHS[kind], label, required=kind != "ReplicationController")
    if kind == "LeaderWorkerSet":
        base = ("spec", "leaderWorkerTemplate")
        return _template(doc, (*base, "leaderTemplate"), label, required=False) + _template(
            doc, (*base, "workerTemplate"), label
        )
    if kind.endswith("List"):
        return [found for item in _items(doc, "items") for found in pod_specs(item)]
    return []
