"""The Pod Security Standards port (`tests.support.pod_security`) against upstream's own cases: the minimal
valid pods of pod-security-admission's test/fixtures.go, the table entries of policy/check_*_test.go
(reason and detail to the character), and single deviations from a restricted pod, each landing at the
level and check id upstream gives it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.pod_security import (
    BASELINE,
    PRIVILEGED,
    RESTRICTED,
    SAFE_SYSCTLS,
    Violation,
    level_of,
    pod_specs,
    violations,
)

Spec = dict[str, Any]


def baseline_pod() -> Spec:
    """fixtures.go's baseline_1_0: one init container, one container, nothing else."""
    return {
        "initContainers": [{"name": "initcontainer1", "image": "registry.k8s.io/pause"}],
        "containers": [{"name": "container1", "image": "registry.k8s.io/pause"}],
    }


def restricted_pod() -> Spec:
    """fixtures.go's restricted_1_22, the minimal valid restricted pod of every version since 1.22."""
    spec = baseline_pod()
    spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    for container in spec["initContainers"] + spec["containers"]:
        container["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return spec


def ids(spec: Spec, level: str, meta: Spec | None = None, **kwargs: Any) -> list[str]:
    return [v.check for v in violations(spec, level, meta, **kwargs)]


def tweak(change: Callable[[Spec], object], spec: Spec | None = None) -> Spec:
    spec = copy.deepcopy(spec if spec is not None else restricted_pod())
    change(spec)
    return spec


def container(spec: Spec) -> Spec:
    first: Spec = spec["containers"][0]
    return first


def init(spec: Spec) -> Spec:
    first: Spec = spec["initContainers"][0]
    return first


# --- the minimal pods ---------------------------------------------------------------------------------


def test_the_minimal_restricted_pod_meets_restricted() -> None:
    assert violations(restricted_pod(), RESTRICTED) == []
    assert violations(restricted_pod(), BASELINE) == []
    assert level_of(restricted_pod()) == RESTRICTED


def test_the_minimal_baseline_pod_meets_baseline_and_fails_four_restricted_checks() -> None:
    assert violations(baseline_pod(), BASELINE) == []
    assert level_of(baseline_pod()) == BASELINE
    assert violations(baseline_pod(), RESTRICTED) == [
        Violation(
            "allowPrivilegeEscalation",
            "allowPrivilegeEscalation != false",
            'containers "initcontainer1", "container1" must set'
            " securityContext.allowPrivilegeEscalation=false",
        ),
        Violation(
            "capabilities_restricted",
            "unrestricted capabilities",
            'containers "initcontainer1", "container1" must set securityContext.capabilities.drop=["ALL"]',
        ),
        Violation(
            "runAsNonRoot",
            "runAsNonRoot != true",
            'pod or containers "initcontainer1", "container1" must set securityContext.runAsNonRoot=true',
        ),
        Violation(
            "seccompProfile_restricted",
            "seccompProfile",
            'pod or containers "initcontainer1", "container1" must set securityContext.seccompProfile.type to'
            ' "RuntimeDefault" or "Localhost"',
        ),
    ]


def test_the_minimal_windows_pod_is_exempt_from_the_linux_only_restricted_checks() -> None:
    """fixtures.go's restricted_1_25_windows: restricted_1_0 (runAsNonRoot) plus os.name=windows."""
    windows = tweak(lambda s: s.update(os={"name": "windows"}), baseline_pod())
    windows["securityContext"] = {"runAsNonRoot": True}
    assert level_of(windows) == RESTRICTED
    linux = tweak(lambda s: s.update(os={"name": "linux"}), windows)
    assert ids(linux, RESTRICTED) == [
        "allowPrivilegeEscalation",
        "capabilities_restricted",
        "seccompProfile_restricted",
    ]


def test_an_empty_pod_spec_is_restricted() -> None:
    assert level_of({}) == RESTRICTED


# --- single deviations from the restricted pod --------------------------------------------------------


def _set(path: str, value: object) -> Callable[[Spec], None]:
    """A change that sets a dotted path, where `c` is the container, `i` the init container."""

    def change(spec: Spec) -> None:
        head, *rest = path.split(".")
        node = {"c": container(spec), "i": init(spec), "pod": spec}[head]
        for key in rest[:-1]:
            node = node.setdefault(key, {})
        if value is _DELETE:
            del node[rest[-1]]
        else:
            node[rest[-1]] = value

    return change


_DELETE = object()

# (name, change, level, failing check ids at restricted, failing check ids at baseline)
DEVIATIONS: list[tuple[str, Callable[[Spec], object], str, list[str], list[str]]] = [
    (
        "hostPath volume",
        _set("pod.volumes", [{"name": "host", "hostPath": {"path": "/var/run"}}]),
        PRIVILEGED,
        ["restrictedVolumes"],
        ["hostPathVolumes"],
    ),
    (
        "hostPort",
        _set("c.ports", [{"containerPort": 8080, "hostPort": 8080}]),
        PRIVILEGED,
        ["hostPorts"],
        ["hostPorts"],
    ),
    ("hostPort 0", _set("c.ports", [{"containerPort": 8080, "hostPort": 0}]), RESTRICTED, [], []),
    ("hostNetwork", _set("pod.hostNetwork", True), PRIVILEGED, ["hostNamespaces"], ["hostNamespaces"]),
    ("hostPID", _set("pod.hostPID", True), PRIVILEGED, ["hostNamespaces"], ["hostNamespaces"]),
    ("hostIPC", _set("pod.hostIPC", True), PRIVILEGED, ["hostNamespaces"], ["hostNamespaces"]),
    ("hostNetwork false", _set("pod.hostNetwork", False), RESTRICTED, [], []),
    ("privileged", _set("c.securityContext.privileged", True), PRIVILEGED, ["privileged"], ["privileged"]),
    ("privileged false", _set("c.securityContext.privileged", False), RESTRICTED, [], []),
    (
        "runAsNonRoot missing",
        _set("pod.securityContext.runAsNonRoot", _DELETE),
        BASELINE,
        ["runAsNonRoot"],
        [],
    ),
    (
        "runAsNonRoot false on pod",
        _set("pod.securityContext.runAsNonRoot", False),
        BASELINE,
        ["runAsNonRoot"],
        [],
    ),
    (
        "runAsNonRoot false on container",
        _set("c.securityContext.runAsNonRoot", False),
        BASELINE,
        ["runAsNonRoot"],
        [],
    ),
    ("runAsUser 0 on pod", _set("pod.securityContext.runAsUser", 0), BASELINE, ["runAsUser"], []),
    ("runAsUser 0 on container", _set("c.securityContext.runAsUser", 0), BASELINE, ["runAsUser"], []),
    ("runAsUser 1000", _set("c.securityContext.runAsUser", 1000), RESTRICTED, [], []),
    (
        "allowPrivilegeEscalation unset",
        _set("c.securityContext.allowPrivilegeEscalation", _DELETE),
        BASELINE,
        ["allowPrivilegeEscalation"],
        [],
    ),
    (
        "allowPrivilegeEscalation true",
        _set("c.securityContext.allowPrivilegeEscalation", True),
        BASELINE,
        ["allowPrivilegeEscalation"],
        [],
    ),
    (
        "capabilities not dropping ALL",
        _set("c.securityContext.capabilities.drop", ["NET_RAW"]),
        BASELINE,
        ["capabilities_restricted"],
        [],
    ),
    (
        "capabilities unset",
        _set("c.securityContext.capabilities", _DELETE),
        BASELINE,
        ["capabilities_restricted"],
        [],
    ),
    (
        "capabilities add NET_BIND_SERVICE",
        _set("c.securityContext.capabilities.add", ["NET_BIND_SERVICE"]),
        RESTRICTED,
        [],
        [],
    ),
    (
        "capabilities add CHOWN (a default capability)",
        _set("c.securityContext.capabilities.add", ["CHOWN"]),
        BASELINE,
        ["capabilities_restricted"],
        [],
    ),
    (
        "capabilities add SYS_ADMIN",
        _set("c.securityContext.capabilities.add", ["SYS_ADMIN"]),
        PRIVILEGED,
        ["capabilities_restricted"],
        ["capabilities_baseline"],
    ),
    (
        "capabilities add NET_RAW",
        _set("c.securityContext.capabilities.add", ["NET_RAW"]),
        PRIVILEGED,
        ["capabilities_restricted"],
        ["capabilities_baseline"],
    ),
    (
        "seccomp unset",
        _set("pod.securityContext.seccompProfile", _DELETE),
        BASELINE,
        ["seccompProfile_restricted"],
        [],
    ),
    (
        "seccomp Unconfined on pod",
        _set("pod.securityContext.seccompProfile", {"type": "Unconfined"}),
        PRIVILEGED,
        ["seccompProfile_restricted"],
        ["seccompProfile_baseline"],
    ),
    (
        "seccomp Unconfined on container",
        _set("c.securityContext.seccompProfile", {"type": "Unconfined"}),
        PRIVILEGED,
        ["seccompProfile_restricted"],
        ["seccompProfile_baseline"],
    ),
    (
        "seccomp Localhost",
        _set("pod.securityContext.seccompProfile", {"type": "Localhost", "localhostProfile": "p.json"}),
        RESTRICTED,
        [],
        [],
    ),
    (
        "seccomp without a type",
        _set("pod.securityContext.seccompProfile", {}),
        PRIVILEGED,
        ["seccompProfile_restricted"],
        ["seccompProfile_baseline"],
    ),
    (
        "AppArmor RuntimeDefault",
        _set("pod.securityContext.appArmorProfile", {"type": "RuntimeDefault"}),
        RESTRICTED,
        [],
        [],
    ),
    (
        "AppArmor Unconfined on pod",
        _set("pod.securityContext.appArmorProfile", {"type": "Unconfined"}),
        PRIVILEGED,
        ["appArmorProfile"],
        ["appArmorProfile"],
    ),
    (
        "AppArmor Unconfined on init container",
        _set("i.securityContext.appArmorProfile", {"type": "Unconfined"}),
        PRIVILEGED,
        ["appArmorProfile"],
        ["appArmorProfile"],
    ),
    (
        "seLinux type container_t",
        _set("c.securityContext.seLinuxOptions", {"type": "container_t"}),
        RESTRICTED,
        [],
        [],
    ),
    (
        "seLinux type container_engine_t (1.31+)",
        _set("pod.securityContext.seLinuxOptions", {"type": "container_engine_t"}),
        RESTRICTED,
        [],
        [],
    ),
    (
        "seLinux type spc_t",
        _set("c.securityContext.seLinuxOptions", {"type": "spc_t"}),
        PRIVILEGED,
        ["seLinuxOptions"],
        ["seLinuxOptions"],
    ),
    (
        "seLinux user",
        _set("pod.securityContext.seLinuxOptions", {"user": "system_u"}),
        PRIVILEGED,
        ["seLinuxOptions"],
        ["seLinuxOptions"],
    ),
    (
        "seLinux level only",
        _set("pod.securityContext.seLinuxOptions", {"level": "s0:c1,c2"}),
        RESTRICTED,
        [],
        [],
    ),
    (
        "procMount Unmasked",
        _set("c.securityContext.procMount", "Unmasked"),
        PRIVILEGED,
        ["procMount_restricted"],
        ["procMount"],
    ),
    ("procMount Default", _set("c.securityContext.procMount", "Default"), RESTRICTED, [], []),
    (
        "sysctl unsafe",
        _set("pod.securityContext.sysctls", [{"name": "kernel.msgmax", "value": "65536"}]),
        PRIVILEGED,
        ["sysctls"],
        ["sysctls"],
    ),
    (
        "sysctl safe (1.37)",
        _set("pod.securityContext.sysctls", [{"name": "net.ipv4.tcp_notsent_lowat", "value": "16384"}]),
        RESTRICTED,
        [],
        [],
    ),
    (
        "hostProcess on pod",
        _set("pod.securityContext.windowsOptions", {"hostProcess": True}),
        PRIVILEGED,
        ["windowsHostProcess"],
        ["windowsHostProcess"],
    ),
    (
        "hostProcess on container",
        _set("c.securityContext.windowsOptions", {"hostProcess": True}),
        PRIVILEGED,
        ["windowsHostProcess"],
        ["windowsHostProcess"],
    ),
    (
        "probe host",
        _set("c.livenessProbe", {"httpGet": {"host": "127.0.0.1", "port": 8080}}),
        PRIVILEGED,
        ["hostProbesAndHostLifecycle"],
        ["hostProbesAndHostLifecycle"],
    ),
    ("probe without host", _set("c.readinessProbe", {"tcpSocket": {"port": 8080}}), RESTRICTED, [], []),
    (
        "preStop host",
        _set("i.lifecycle", {"preStop": {"tcpSocket": {"host": "example.com", "port": 1}}}),
        PRIVILEGED,
        ["hostProbesAndHostLifecycle"],
        ["hostProbesAndHostLifecycle"],
    ),
    (
        "init container privileged",
        _set("i.securityContext.privileged", True),
        PRIVILEGED,
        ["privileged"],
        ["privileged"],
    ),
    (
        "init container runAsUser 0",
        _set("i.securityContext.runAsUser", 0),
        BASELINE,
        ["runAsUser"],
        [],
    ),
    (
        "init container allowPrivilegeEscalation true",
        _set("i.securityContext.allowPrivilegeEscalation", True),
        BASELINE,
        ["allowPrivilegeEscalation"],
        [],
    ),
    (
        "user namespace relaxes runAsNonRoot and runAsUser",
        lambda s: (
            s.update(hostUsers=False),
            s["securityContext"].pop("runAsNonRoot"),
            s["securityContext"].update(runAsUser=0),
        ),
        RESTRICTED,
        [],
        [],
    ),
    (
        "user namespace relaxes procMount at baseline only",
        lambda s: (s.update(hostUsers=False), container(s)["securityContext"].update(procMount="Unmasked")),
        BASELINE,
        ["procMount_restricted"],
        [],
    ),
    ("hostUsers true", _set("pod.hostUsers", True), RESTRICTED, [], []),
]


@pytest.mark.parametrize(
    ("change", "level", "at_restricted", "at_baseline"),
    [pytest.param(*case[1:], id=case[0]) for case in DEVIATIONS],
)
def test_a_single_deviation_lands_at_its_level(
    change: Callable[[Spec], object], level: str, at_restricted: list[str], at_baseline: list[str]
) -> None:
    spec = tweak(change)
    assert ids(spec, RESTRICTED) == at_restricted
    assert ids(spec, BASELINE) == at_baseline
    assert level_of(spec) == level


def test_pod_level_runasnonroot_and_seccomp_cover_containers_that_set_neither() -> None:
    """The injected-init-container case: an init container with only allowPrivilegeEscalation and
    capabilities passes, because the pod sets runAsNonRoot and seccompProfile for it."""
    spec = restricted_pod()
    spec["initContainers"].append(
        {
            "name": "injected",
            "image": "busybox",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    )
    assert level_of(spec) == RESTRICTED
    del spec["securityContext"]
    assert ids(spec, RESTRICTED) == ["runAsNonRoot", "seccompProfile_restricted"]
    # ... and the containers can carry them themselves instead
    for c in spec["initContainers"] + spec["containers"]:
        c["securityContext"] |= {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert level_of(spec) == RESTRICTED


def test_an_injected_init_container_without_a_security_context_drops_the_pod_to_baseline() -> None:
    spec = restricted_pod()
    spec["initContainers"].insert(0, {"name": "injected", "image": "busybox"})
    assert violations(spec, RESTRICTED) == [
        Violation(
            "allowPrivilegeEscalation",
            "allowPrivilegeEscalation != false",
            'container "injected" must set securityContext.allowPrivilegeEscalation=false',
        ),
        Violation(
            "capabilities_restricted",
            "unrestricted capabilities",
            'container "injected" must set securityContext.capabilities.drop=["ALL"]',
        ),
    ]
    assert level_of(spec) == BASELINE


def test_ephemeral_containers_are_checked_too() -> None:
    spec = restricted_pod()
    spec["ephemeralContainers"] = [
        {"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}
    ]
    assert ids(spec, BASELINE) == ["privileged"]
    found = violations(spec, RESTRICTED)
    assert [v.check for v in found] == ["privileged", "allowPrivilegeEscalation", "capabilities_restricted"]
    assert found[1].detail == 'container "debug" must set securityContext.allowPrivilegeEscalation=false'
    assert level_of(spec) == PRIVILEGED


ALLOWED_VOLUMES = {
    "emptyDir": {"medium": "Memory"},
    "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
    "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
    "configMap": {"name": "cm"},
    "secret": {"secretName": "s"},
    "csi": {"driver": "inline.storage.kubernetes.io"},
    "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}},
    "persistentVolumeClaim": {"claimName": "pvc"},
    "image": {"reference": "registry.k8s.io/pause"},
}


@pytest.mark.parametrize("source", list(ALLOWED_VOLUMES))
def test_restricted_allows_the_volume_type(source: str) -> None:
    spec = tweak(_set("pod.volumes", [{"name": "v", source: ALLOWED_VOLUMES[source]}]))
    assert level_of(spec) == RESTRICTED


def test_restricted_allows_all_of_the_volume_types_at_once() -> None:
    """fixtures_restrictedVolumes.go's pass case, with its "volume0" (no source: an emptyDir, defaulted)."""
    volumes = [{"name": "volume0"}] + [{"name": f"v-{k}", k: v} for k, v in ALLOWED_VOLUMES.items()]
    assert level_of(tweak(_set("pod.volumes", volumes))) == RESTRICTED


RESTRICTED_VOLUMES = {
    "gcePersistentDisk": {"pdName": "test"},
    "awsElasticBlockStore": {"volumeID": "test"},
    "gitRepo": {"repository": "github.com/kubernetes/kubernetes"},
    "nfs": {"server": "test", "path": "/test"},
    "iscsi": {"targetPortal": "test", "iqn": "iqn.2001-04.com.example:storage.kube.sys1.xyz", "lun": 0},
    "glusterfs": {"path": "test", "endpoints": "test"},
    "rbd": {"monitors": ["test"], "image": "test"},
    "flexVolume": {"driver": "test"},
    "cinder": {"volumeID": "test"},
    "cephfs": {"monitors": ["test"]},
    "flocker": {"datasetName": "test"},
    "fc": {"wwids": ["test"]},
    "azureFile": {"secretName": "test", "shareName": "test"},
    "vsphereVolume": {"volumePath": "test"},
    "quobyte": {"registry": "localhost:1234", "volume": "test"},
    "azureDisk": {"diskName": "test", "diskURI": "https://test.blob.core.windows.net/test/test.vhd"},
    "photonPersistentDisk": {"pdID": "test"},
    "portworxVolume": {"volumeID": "test", "fsType": "ext4"},
    "scaleIO": {"volumeName": "test", "gateway": "localhost", "system": "test"},
    "storageos": {"volumeName": "test"},
}


@pytest.mark.parametrize("source", list(RESTRICTED_VOLUMES))
def test_restricted_forbids_the_volume_type_baseline_allows_it(source: str) -> None:
    """fixtures_restrictedVolumes.go's fail cases (hostPath, the last, is the baseline failure above)."""
    spec = tweak(_set("pod.volumes", [{"name": "volume1", source: RESTRICTED_VOLUMES[source]}]))
    assert violations(spec, RESTRICTED) == [
        Violation(
            "restrictedVolumes",
            "restricted volume types",
            f'volume "volume1" uses restricted volume type "{source}"',
        )
    ]
    assert level_of(spec) == BASELINE


def test_a_volume_without_a_source_is_unknown_unless_defaulted() -> None:
    spec = tweak(_set("pod.volumes", [{"name": "c1"}]))
    assert ids(spec, RESTRICTED) == []
    assert violations(spec, RESTRICTED, api_defaults=False) == [
        Violation(
            "restrictedVolumes",
            "restricted volume types",
            'volume "c1" uses restricted volume type "unknown"',
        )
    ]
    assert spec["volumes"] == [{"name": "c1"}]  # the caller's spec is left alone


def test_a_null_source_is_no_source() -> None:
    spec = tweak(_set("pod.volumes", [{"name": "v", "hostPath": None, "secret": {"secretName": "s"}}]))
    assert level_of(spec) == RESTRICTED


@pytest.mark.parametrize("name", sorted(SAFE_SYSCTLS))
def test_every_safe_sysctl_is_allowed(name: str) -> None:
    assert level_of(tweak(_set("pod.securityContext.sysctls", [{"name": name, "value": "1"}]))) == RESTRICTED


@pytest.mark.parametrize(
    ("annotation", "value", "level"),
    [
        ("container.apparmor.security.beta.kubernetes.io/container1", "runtime/default", RESTRICTED),
        ("container.apparmor.security.beta.kubernetes.io/container1", "localhost/profile", RESTRICTED),
        ("container.apparmor.security.beta.kubernetes.io/container1", "", RESTRICTED),
        ("container.apparmor.security.beta.kubernetes.io/container1", "unconfined", PRIVILEGED),
        ("env", "unconfined", RESTRICTED),
        # the seccomp annotations were checked up to v1.18 only: "latest" reads the fields alone
        ("seccomp.security.alpha.kubernetes.io/pod", "unconfined", RESTRICTED),
    ],
)
def test_pod_annotations(annotation: str, value: str, level: str) -> None:
    assert level_of(restricted_pod(), {"annotations": {annotation: value}}) == level


# --- upstream's unit tables, reason and detail to the character ---------------------------------------

# (name, check id, level it runs at, metadata, spec, reason, detail); an empty reason: allowed
UPSTREAM: list[tuple[str, str, str, Spec, Spec, str, str]] = [
    (
        "allowPrivilegeEscalation: multiple containers",
        "allowPrivilegeEscalation",
        RESTRICTED,
        {},
        {
            "containers": [
                {"name": "a"},
                {"name": "b", "securityContext": {"allowPrivilegeEscalation": None}},
                {"name": "c", "securityContext": {"allowPrivilegeEscalation": True}},
                {"name": "d", "securityContext": {"allowPrivilegeEscalation": False}},
            ]
        },
        "allowPrivilegeEscalation != false",
        'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false',
    ),
    (
        "allowPrivilegeEscalation: windows pod",
        "allowPrivilegeEscalation",
        RESTRICTED,
        {},
        {"os": {"name": "windows"}, "containers": [{"name": "a"}]},
        "",
        "",
    ),
    (
        "allowPrivilegeEscalation: linux pod",
        "allowPrivilegeEscalation",
        RESTRICTED,
        {},
        {"os": {"name": "linux"}, "containers": [{"name": "a"}]},
        "allowPrivilegeEscalation != false",
        'container "a" must set securityContext.allowPrivilegeEscalation=false',
    ),
    (
        "appArmorProfile: unconfined pod",
        "appArmorProfile",
        BASELINE,
        {},
        {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
        "forbidden AppArmor profile",
        'pod must not set AppArmor profile type to "Unconfined"',
    ),
    (
        "appArmorProfile: unconfined container",
        "appArmorProfile",
        BASELINE,
        {},
        {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "foo", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}],
        },
        "forbidden AppArmor profile",
        'container "foo" must not set AppArmor profile type to "Unconfined"',
    ),
    (
        "appArmorProfile: unconfined init container",
        "appArmorProfile",
        BASELINE,
        {},
        {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "foo"}],
            "initContainers": [
                {"name": "bar", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}
            ],
        },
        "forbidden AppArmor profile",
        'container "bar" must not set AppArmor profile type to "Unconfined"',
    ),
    (
        "appArmorProfile: multiple containers (annotations)",
        "appArmorProfile",
        BASELINE,
        {
            "annotations": {
                "container.apparmor.security.beta.kubernetes.io/": "bogus",
                "container.apparmor.security.beta.kubernetes.io/a": "",
                "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
                "container.apparmor.security.beta.kubernetes.io/c": "localhost/",
                "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
                "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
                "container.apparmor.security.beta.kubernetes.io/f": "unknown",
            }
        },
        {},
        "forbidden AppArmor profiles",
        "annotations must not set AppArmor profile type to "
        '"container.apparmor.security.beta.kubernetes.io/="bogus"", '
        '"container.apparmor.security.beta.kubernetes.io/e="unconfined"", '
        '"container.apparmor.security.beta.kubernetes.io/f="unknown""',
    ),
    (
        "appArmorProfile: default annotation and extra annotations",
        "appArmorProfile",
        BASELINE,
        {
            "annotations": {
                "container.apparmor.security.beta.kubernetes.io/test": "runtime/default",
                "env": "prod",
            }
        },
        {},
        "",
        "",
    ),
    (
        "capabilities_baseline: multiple containers",
        "capabilities_baseline",
        BASELINE,
        {},
        {
            "containers": [
                {"name": "a", "securityContext": {"capabilities": {"add": ["FOO", "BAR"]}}},
                {"name": "b", "securityContext": {"capabilities": {"add": ["BAR", "BAZ"]}}},
            ]
        },
        "non-default capabilities",
        'containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add',
    ),
    (
        "capabilities_restricted: multiple containers",
        "capabilities_restricted",
        RESTRICTED,
        {},
        {
            "containers": [
                {"name": "a", "securityContext": {"capabilities": {"add": ["FOO", "BAR"]}}},
                {"name": "b", "securityContext": {"capabilities": {"add": ["BAR", "BAZ"]}}},
                {
                    "name": "c",
                    "securityContext": {
                        "capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]}
                    },
                },
            ]
        },
        "unrestricted capabilities",
        'containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; '
        'containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO"'
        " in securityContext.capabilities.add",
    ),
    (
        "capabilities_restricted: windows pod",
        "capabilities_restricted",
        RESTRICTED,
        {},
        {"os": {"name": "windows"}, "containers": [{"name": "a"}]},
        "",
        "",
    ),
    (
        "capabilities_restricted: linux pod",
        "capabilities_restricted",
        RESTRICTED,
        {},
        {"os": {"name": "linux"}, "containers": [{"name": "a"}]},
        "unrestricted capabilities",
        'container "a" must set securityContext.capabilities.drop=["ALL"]',
    ),
    (
        "hostNamespaces: multiple host namespaces",
        "hostNamespaces",
        BASELINE,
        {},
        {"hostNetwork": True, "hostIPC": True, "hostPID": True},
        "host namespaces",
        "hostNetwork=true, hostPID=true, hostIPC=true",
    ),
    (
        "hostPathVolumes: host path volumes",
        "hostPathVolumes",
        BASELINE,
        {},
        {
            "volumes": [
                {"name": "a", "hostPath": {}},
                {"name": "b", "hostPath": {}},
                {"name": "c", "emptyDir": {}},
            ]
        },
        "hostPath volumes",
        'volumes "a", "b"',
    ),
    (
        "hostPorts: one container, one host port",
        "hostPorts",
        BASELINE,
        {},
        {
            "containers": [
                {"name": "a", "ports": [{"hostPort": 0}]},
                {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 20}]},
            ]
        },
        "hostPort",
        'container "b" uses hostPort 20',
    ),
    (
        "hostPorts: multiple containers, multiple host port",
        "hostPorts",
        BASELINE,
        {},
        {
            "containers": [
                {"name": "a", "ports": [{"hostPort": 0}]},
                {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]},
                {"name": "c", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}]},
            ]
        },
        "hostPort",
        'containers "b", "c" use hostPorts 10, 20, 30',
    ),
    (
        "hostProbesAndHostLifecycle: valid pod with unset hosts",
        "hostProbesAndHostLifecycle",
        BASELINE,
        {},
        {
            "containers": [
                {
                    "name": "a",
                    "livenessProbe": {"httpGet": {}},
                    "readinessProbe": {"tcpSocket": {}},
                    "lifecycle": {"postStart": {"httpGet": {}}},
                }
            ]
        },
        "",
        "",
    ),
    (
        "hostProbesAndHostLifecycle: local host IP as probe host",
        "hostProbesAndHostLifecycle",
        BASELINE,
        {},
        {
            "containers": [
                {
                    "name": "a",
                    "livenessProbe": {"httpGet": {"host": "127.0.0.1"}},
                    "readinessProbe": {"tcpSocket": {"host": "::1"}},
                    "startupProbe": {"httpGet": {"host": "localhost"}},
                }
            ]
        },
        "probe or lifecycle host",
        'container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost"',
    ),
    (
        "hostProbesAndHostLifecycle: invalid poststart tcpsocket host",
        "hostProbesAndHostLifecycle",
        BASELINE,
        {},
        {"containers": [{"name": "d", "lifecycle": {"postStart": {"tcpSocket": {"host": "invalid.host"}}}}]},
        "probe or lifecycle host",
        'container "d" uses probe or lifecycle host "invalid.host"',
    ),
    (
        "hostProbesAndHostLifecycle: multiple containers with multiple invalid hosts",
        "hostProbesAndHostLifecycle",
        BASELINE,
        {},
        {
            "containers": [
                {"name": "valid"},
                {"name": "invalid1", "livenessProbe": {"httpGet": {"host": "a.com"}}},
                {
                    "name": "invalid2",
                    "lifecycle": {"preStop": {"tcpSocket": {"host": "b.com"}}},
                    "startupProbe": {"httpGet": {"host": "a.com"}},
                },
            ]
        },
        "probe or lifecycle host",
        'containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com"',
    ),
    (
        "hostProbesAndHostLifecycle: invalid host in initcontainer",
        "hostProbesAndHostLifecycle",
        BASELINE,
        {},
        {"initContainers": [{"name": "init", "livenessProbe": {"httpGet": {"host": "invalid.init.host"}}}]},
        "probe or lifecycle host",
        'container "init" uses probe or lifecycle host "invalid.init.host"',
    ),
    (
        "privileged",
        "privileged",
        BASELINE,
        {},
        {
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"privileged": False}},
                {"name": "d", "securityContext": {"privileged": True}},
                {"name": "e", "securityContext": {"privileged": True}},
            ]
        },
        "privileged",
        'containers "d", "e" must not set securityContext.privileged=true',
    ),
    *[
        (
            f"{check}: procMount, hostUsers {host_users}",
            check,
            level,
            {},
            {
                "hostUsers": host_users,
                "containers": [
                    {"name": "a", "securityContext": None},
                    {"name": "b", "securityContext": {}},
                    {"name": "c", "securityContext": {"procMount": "Default"}},
                    {"name": "d", "securityContext": {"procMount": "Unmasked"}},
                    {"name": "e", "securityContext": {"procMount": "other"}},
                ],
            },
            "" if allowed else "procMount",
            ""
            if allowed
            else 'containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"',
        )
        for check, level, host_users, allowed in [
            ("procMount", BASELINE, True, False),
            ("procMount", BASELINE, False, True),
            ("procMount_restricted", RESTRICTED, True, False),
            ("procMount_restricted", RESTRICTED, False, False),
        ]
    ],
    (
        "restrictedVolumes: host path volumes (literal spec)",
        "restrictedVolumes",
        RESTRICTED,
        {},
        {
            "volumes": [
                *[{"name": f"a{i}", source: {}} for i, source in enumerate(ALLOWED_VOLUMES, 1)],
                *[
                    {"name": f"b{i}", source: {}}
                    for i, source in enumerate(["hostPath", *RESTRICTED_VOLUMES], 1)
                ],
                {"name": "c1"},
            ]
        },
        "restricted volume types",
        'volumes "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14",'
        ' "b15", "b16", "b17", "b18", "b19", "b20", "b21", "c1" use restricted volume types'
        ' "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume",'
        ' "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", "hostPath", "iscsi", "nfs",'
        ' "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown",'
        ' "vsphereVolume"',
    ),
    (
        "runAsNonRoot: no explicit runAsNonRoot",
        "runAsNonRoot",
        RESTRICTED,
        {},
        {"containers": [{"name": "a"}]},
        "runAsNonRoot != true",
        'pod or container "a" must set securityContext.runAsNonRoot=true',
    ),
    (
        "runAsNonRoot: pod runAsNonRoot=false",
        "runAsNonRoot",
        RESTRICTED,
        {},
        {"securityContext": {"runAsNonRoot": False}, "containers": [{"name": "a", "securityContext": None}]},
        "runAsNonRoot != true",
        "pod must not set securityContext.runAsNonRoot=false",
    ),
    (
        "runAsNonRoot: containers runAsNonRoot=false",
        "runAsNonRoot",
        RESTRICTED,
        {},
        {
            "securityContext": {"runAsNonRoot": True},
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"runAsNonRoot": False}},
                {"name": "d", "securityContext": {"runAsNonRoot": False}},
                {"name": "e", "securityContext": {"runAsNonRoot": True}},
                {"name": "f", "securityContext": {"runAsNonRoot": True}},
            ],
        },
        "runAsNonRoot != true",
        'containers "c", "d" must not set securityContext.runAsNonRoot=false',
    ),
    (
        "runAsNonRoot: pod nil, container fallthrough",
        "runAsNonRoot",
        RESTRICTED,
        {},
        {
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "d", "securityContext": {"runAsNonRoot": True}},
                {"name": "e", "securityContext": {"runAsNonRoot": True}},
            ]
        },
        "runAsNonRoot != true",
        'pod or containers "a", "b" must set securityContext.runAsNonRoot=true',
    ),
    ("runAsNonRoot: host users false allowed", "runAsNonRoot", RESTRICTED, {}, {"hostUsers": False}, "", ""),
    (
        "runAsUser: pod runAsUser=0",
        "runAsUser",
        RESTRICTED,
        {},
        {"securityContext": {"runAsUser": 0}, "containers": [{"name": "a", "securityContext": None}]},
        "runAsUser=0",
        "pod must not set runAsUser=0",
    ),
    (
        "runAsUser: pod runAsUser=non-zero",
        "runAsUser",
        RESTRICTED,
        {},
        {"securityContext": {"runAsUser": 1000}, "containers": [{"name": "a", "securityContext": None}]},
        "",
        "",
    ),
    (
        "runAsUser: containers runAsUser=0",
        "runAsUser",
        RESTRICTED,
        {},
        {
            "securityContext": {"runAsUser": 1000},
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"runAsUser": 0}},
                {"name": "d", "securityContext": {"runAsUser": 0}},
                {"name": "e", "securityContext": {"runAsUser": 1}},
                {"name": "f", "securityContext": {"runAsUser": 1}},
            ],
        },
        "runAsUser=0",
        'containers "c", "d" must not set runAsUser=0',
    ),
    (
        "runAsUser: host users false allowed",
        "runAsUser",
        RESTRICTED,
        {},
        {"hostUsers": False, "securityContext": {"runAsUser": 0}},
        "",
        "",
    ),
    (
        "seLinuxOptions: invalid pod and containers",
        "seLinuxOptions",
        BASELINE,
        {},
        {
            "securityContext": {"seLinuxOptions": {"type": "foo", "user": "bar", "role": "baz"}},
            "containers": [
                {"name": "a", "securityContext": {"seLinuxOptions": {"type": "container_t"}}},
                {"name": "b", "securityContext": {"seLinuxOptions": {"type": "container_init_t"}}},
                {"name": "c", "securityContext": {"seLinuxOptions": {"type": "container_kvm_t"}}},
                {"name": "d", "securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}},
                {"name": "e", "securityContext": {"seLinuxOptions": {"type": "bar"}}},
                {"name": "f", "securityContext": {"seLinuxOptions": {"user": "bar"}}},
                {"name": "g", "securityContext": {"seLinuxOptions": {"role": "baz"}}},
            ],
        },
        "seLinuxOptions",
        'pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo";'
        " user may not be set; role may not be set",
    ),
    (
        "seLinuxOptions: invalid containers",
        "seLinuxOptions",
        BASELINE,
        {},
        {
            "securityContext": {"seLinuxOptions": {}},
            "containers": [
                {"name": "a", "securityContext": {"seLinuxOptions": {"type": "container_t"}}},
                {"name": "e", "securityContext": {"seLinuxOptions": {"type": "bar"}}},
                {"name": "f", "securityContext": {"seLinuxOptions": {"user": "bar"}}},
                {"name": "g", "securityContext": {"seLinuxOptions": {"role": "baz"}}},
            ],
        },
        "seLinuxOptions",
        'containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: type "bar";'
        " user may not be set; role may not be set",
    ),
    (
        "seLinuxOptions: bad role",
        "seLinuxOptions",
        BASELINE,
        {},
        {"securityContext": {"seLinuxOptions": {"role": "bad"}}},
        "seLinuxOptions",
        "pod set forbidden securityContext.seLinuxOptions: role may not be set",
    ),
    (
        "seccompProfile_baseline: pod and containers seccomp invalid",
        "seccompProfile_baseline",
        BASELINE,
        {},
        {
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "d", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "e", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                {"name": "f", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
            ],
        },
        "seccompProfile",
        'pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
    ),
    (
        "seccompProfile_restricted: no explicit seccomp",
        "seccompProfile_restricted",
        RESTRICTED,
        {},
        {"containers": [{"name": "a"}]},
        "seccompProfile",
        'pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault"'
        ' or "Localhost"',
    ),
    (
        "seccompProfile_restricted: no explicit seccomp, windows pod",
        "seccompProfile_restricted",
        RESTRICTED,
        {},
        {"os": {"name": "windows"}, "containers": [{"name": "a"}]},
        "",
        "",
    ),
    (
        "seccompProfile_restricted: containers seccomp invalid",
        "seccompProfile_restricted",
        RESTRICTED,
        {},
        {
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "d", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "e", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
            ],
        },
        "seccompProfile",
        'containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
    ),
    (
        "seccompProfile_restricted: pod nil, container fallthrough",
        "seccompProfile_restricted",
        RESTRICTED,
        {},
        {
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "d", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
                {"name": "e", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}},
            ]
        },
        "seccompProfile",
        'pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault"'
        ' or "Localhost"',
    ),
    (
        "sysctls: forbidden sysctls",
        "sysctls",
        BASELINE,
        {},
        {"securityContext": {"sysctls": [{"name": "a"}, {"name": "b"}]}},
        "forbidden sysctls",
        "a, b",
    ),
    *[
        (
            "sysctls: " + name,
            "sysctls",
            BASELINE,
            {},
            {"securityContext": {"sysctls": [{"name": name, "value": "1"}]}},
            "",
            "",
        )
        for name in ("net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_wmem")
    ],
    (
        "windowsHostProcess: host process",
        "windowsHostProcess",
        BASELINE,
        {},
        {
            "securityContext": {"windowsOptions": {"hostProcess": True}},
            "containers": [
                {"name": "a", "securityContext": None},
                {"name": "b", "securityContext": {}},
                {"name": "c", "securityContext": {"windowsOptions": {}}},
                {"name": "d", "securityContext": {"windowsOptions": {"hostProcess": False}}},
                {"name": "e", "securityContext": {"windowsOptions": {"hostProcess": True}}},
                {"name": "f", "securityContext": {"windowsOptions": {"hostProcess": True}}},
            ],
        },
        "hostProcess",
        'pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true',
    ),
]


@pytest.mark.parametrize(
    ("check", "level", "meta", "spec", "reason", "detail"),
    [pytest.param(*case[1:], id=case[0]) for case in UPSTREAM],
)
def test_upstream_unit_case(check: str, level: str, meta: Spec, spec: Spec, reason: str, detail: str) -> None:
    found = [v for v in violations(spec, level, meta, api_defaults=False) if v.check == check]
    assert found == ([Violation(check, reason, detail)] if reason else [])


# --- the check set, the levels, the errors ------------------------------------------------------------

BASELINE_IDS = [
    "appArmorProfile",
    "capabilities_baseline",
    "hostNamespaces",
    "hostPathVolumes",
    "hostPorts",
    "hostProbesAndHostLifecycle",
    "privileged",
    "procMount",
    "seLinuxOptions",
    "seccompProfile_baseline",
    "sysctls",
    "windowsHostProcess",
]
RESTRICTED_ONLY_IDS = [
    "allowPrivilegeEscalation",
    "capabilities_restricted",
    "procMount_restricted",
    "restrictedVolumes",
    "runAsNonRoot",
    "runAsUser",
    "seccompProfile_restricted",
]


def worst_pod() -> tuple[Spec, Spec]:
    """A pod that fails every check there is, at both levels."""
    spec: Spec = {
        "hostNetwork": True,
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "securityContext": {
            "runAsUser": 0,
            "seccompProfile": {"type": "Unconfined"},
            "sysctls": [{"name": "kernel.msgmax"}],
            "seLinuxOptions": {"type": "spc_t"},
            "windowsOptions": {"hostProcess": True},
            "appArmorProfile": {"type": "Unconfined"},
        },
        "containers": [
            {
                "name": "c",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "livenessProbe": {"httpGet": {"host": "localhost", "port": 80}},
                "securityContext": {
                    "privileged": True,
                    "procMount": "Unmasked",
                    "capabilities": {"add": ["SYS_ADMIN"]},
                },
            }
        ],
    }
    return {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "unconfined"}}, spec


def test_restricted_runs_the_baseline_checks_it_does_not_replace_then_its_own_in_upstream_order() -> None:
    meta, spec = worst_pod()
    assert ids(spec, BASELINE, meta) == BASELINE_IDS
    replaced = {"capabilities_baseline", "hostPathVolumes", "procMount", "seccompProfile_baseline"}
    assert ids(spec, RESTRICTED, meta) == [i for i in BASELINE_IDS if i not in replaced] + RESTRICTED_ONLY_IDS
    assert level_of(spec, meta) == PRIVILEGED
    assert violations(spec, PRIVILEGED, meta) == []


def test_a_violation_reads_as_check_reason_and_detail() -> None:
    (found,) = violations(tweak(_set("c.securityContext.privileged", True)), BASELINE)
    assert (
        str(found)
        == 'privileged: privileged (container "container1" must not set securityContext.privileged=true)'
    )
    with pytest.raises(AttributeError):
        found.check = "other"  # type: ignore[misc]


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown Pod Security level 'Restricted'"):
        violations(restricted_pod(), "Restricted")


@pytest.mark.parametrize(
    "change",
    [
        _set("pod.securityContext.runAsNonRoot", "true"),
        _set("c.securityContext.allowPrivilegeEscalation", "false"),
        _set("c.securityContext.runAsUser", "0"),
        _set("c.securityContext", "restricted"),
        _set("c.ports", [{"hostPort": "8080"}]),
        _set("c.securityContext.runAsUser", False),
    ],
)
def test_a_field_of_the_wrong_json_type_is_an_error_not_a_pass(change: Callable[[Spec], None]) -> None:
    with pytest.raises(TypeError):
        level_of(tweak(change))


# --- pod_specs ----------------------------------------------------------------------------------------


def template(name: str) -> Spec:
    return {"metadata": {"labels": {"app": name}}, "spec": restricted_pod()}


def test_pod_specs_of_a_pod() -> None:
    doc = {"kind": "Pod", "metadata": {"name": "p", "annotations": {"a": "b"}}, "spec": baseline_pod()}
    assert pod_specs(doc) == [("Pod/p spec", {"name": "p", "annotations": {"a": "b"}}, baseline_pod())]


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Deployment", "spec.template"),
        ("StatefulSet", "spec.template"),
        ("DaemonSet", "spec.template"),
        ("ReplicaSet", "spec.template"),
        ("Job", "spec.template"),
        ("ReplicationController", "spec.template"),
        ("PodTemplate", "template"),
        ("CronJob", "spec.jobTemplate.spec.template"),
    ],
)
def test_pod_specs_of_a_workload(kind: str, path: str) -> None:
    doc: Spec = {"apiVersion": "x", "kind": kind, "metadata": {"name": "w"}}
    node = doc
    for key in path.split(".")[:-1]:
        node = node.setdefault(key, {})
    node[path.split(".")[-1]] = template(kind)
    ((where, meta, spec),) = pod_specs(doc)
    assert (where, meta, spec) == (f"{kind}/w {path}", {"labels": {"app": kind}}, restricted_pod())
    assert level_of(spec, meta) == RESTRICTED


def test_pod_specs_of_a_leaderworkerset() -> None:
    lws: Spec = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm"},
        "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": template("worker")}},
    }
    assert [where for where, _, _ in pod_specs(lws)] == [
        "LeaderWorkerSet/vllm spec.leaderWorkerTemplate.workerTemplate"
    ]
    lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {"spec": baseline_pod()}
    found = pod_specs(lws)
    assert [where for where, _, _ in found] == [
        "LeaderWorkerSet/vllm spec.leaderWorkerTemplate.leaderTemplate",
        "LeaderWorkerSet/vllm spec.leaderWorkerTemplate.workerTemplate",
    ]
    assert [level_of(spec, meta) for _, meta, spec in found] == [BASELINE, RESTRICTED]


def test_pod_specs_of_lists_and_other_kinds() -> None:
    deployment = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": template("d")}}
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    assert [
        w for w, _, _ in pod_specs({"kind": "List", "items": [deployment, {"kind": "Service"}, pod]})
    ] == [
        "Deployment/d spec.template",
        "Pod/p spec",
    ]
    assert pod_specs({"kind": "ConfigMap", "data": {}}) == []
    assert pod_specs({"kind": "ReplicationController", "metadata": {"name": "rc"}, "spec": {}}) == []
    with pytest.raises(ValueError, match=r"Deployment/d: no spec\.template"):
        pod_specs({"kind": "Deployment", "metadata": {"name": "d"}, "spec": {}})


def test_template_annotations_reach_the_checks() -> None:
    deployment: Spec = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": template("d")}}
    deployment["spec"]["template"]["metadata"]["annotations"] = {
        "container.apparmor.security.beta.kubernetes.io/container1": "unconfined"
    }
    ((_, meta, spec),) = pod_specs(deployment)
    assert ids(spec, RESTRICTED, meta) == ["appArmorProfile"]
    assert level_of(spec, meta) == PRIVILEGED
