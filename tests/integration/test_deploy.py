"""The Kubernetes manifests a platform team applies as is: valid for Kubernetes 1.28 to 1.33 (strict,
unknown fields are errors), the operator's CRDs' and OpenShift's SCC's fields checked, generated parts
in sync with their sources, the security posture asserted, and every kustomize path (base, the
components, the overlays, the engine's probe Component) built and checked for what it must do."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support import pod_security
from tests.support.k8s_schemas import CRD_KINDS, validate
from tools.harness import ROOT

DEPLOY = ROOT / "deploy"
VERSIONS = ["1.28", "1.29", "1.30", "1.31", "1.32", "1.33"]
COMPONENTS = ["monitors", "servicemonitor", "dashboards", "openshift", "gpu-operator", "priority-class"]
# the probe's transports: the base's (the chart's default, service) and the component for each other one,
# with the Pod Security level the exporter's namespace is labelled (and its pods meet)
TRANSPORTS = {"service": (None, "restricted"), "hostip": ("probe-hostip", "privileged"),
              "socket": ("probe-socket", "privileged")}  # fmt: skip
PROBE_PORT = 9478
BUILDS = [
    "kubernetes/base",
    "kubernetes/overlays/kube-prometheus-stack",
    "kubernetes/overlays/prometheus",
    "vllm",
]
SOCKET_DIR = "/run/guided-decoding-exporter"


def kubectl() -> str:
    path = shutil.which("kubectl")
    assert path, "kubectl (with its built-in kustomize) is needed to build deploy/"
    return path


def kustomize_dir(directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def kustomize(path: str) -> list[dict[str, Any]]:
    """`kubectl kustomize deploy/<path>`."""
    return kustomize_dir(DEPLOY / path)


def overlay(
    tmp: Path,
    resources: list[str],
    components: Sequence[str] = (),
    namespace: str | None = None,
    **extra: Any,
) -> Path:
    """A kustomization in tmp over deploy/kubernetes/<resources> with ../components/<components>,
    the way a user's own overlay names them."""
    tmp.mkdir(parents=True, exist_ok=True)
    rel = lambda p: os.path.relpath(DEPLOY / "kubernetes" / p, tmp)  # noqa: E731
    doc: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    if namespace:
        doc["namespace"] = namespace
    doc["resources"] = [rel(r) for r in resources]
    if components:
        doc["components"] = [rel(f"components/{c}") for c in components]
    doc |= extra
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp


def by_key(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"] + "/" + d["metadata"]["name"]: d for d in docs}


def manifests(tmp: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every object file under deploy/kubernetes and deploy/vllm (not the patches, the kustomizations
    or the Prometheus scrape config) and every build, the one with every component among them."""
    docs = []
    for path in sorted([*(DEPLOY / "kubernetes").rglob("*.yaml"), *(DEPLOY / "vllm").rglob("*.yaml")]):
        if path.name in ("kustomization.yaml", "scrape-config.yaml"):
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "kind" in doc and doc["metadata"].get("name") != "ignored-by-target":
                docs.append((str(path.relative_to(ROOT)), doc))
    for build in BUILDS:
        docs.extend((f"kustomize {build}", d) for d in kustomize(build))
    everything = overlay(tmp / "all", ["base"], COMPONENTS)
    docs.extend(("kustomize base + every component", d) for d in kustomize_dir(everything))
    for transport, (component, _) in TRANSPORTS.items():
        if component:  # listed last, as its kustomization says
            built = kustomize_dir(overlay(tmp / transport, ["base"], [*COMPONENTS, component]))
            docs.extend((f"kustomize base + every component + {component}", d) for d in built)
    return docs


def test_every_manifest_is_valid(tmp_path: Path) -> None:
    docs = manifests(tmp_path)
    kinds = (
        "Namespace ServiceAccount ClusterRole ClusterRoleBinding RoleBinding ConfigMap DaemonSet Deployment"
    )
    kinds += (
        " Service PodMonitor ServiceMonitor PrometheusRule Secret SecurityContextConstraints NetworkPolicy"
    )
    assert {d["kind"] for _, d in docs} >= set(kinds.split())
    for version in VERSIONS:
        for where, doc in docs:
            try:
                validate(doc, version)
            except Exception as err:
                raise AssertionError(
                    f"{version} {where}: {doc['kind']} {doc['metadata'].get('name')}: {err}"
                ) from err


def test_validation_catches_an_unknown_field(tmp_path: Path) -> None:
    docs = [d for _, d in manifests(tmp_path)]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privilegd"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(ds, "1.33")
    pm = next(d for d in docs if d["kind"] == "PodMonitor")
    pm["spec"]["podMetricsEndpoints"][0]["intervall"] = "15s"
    with pytest.raises(jsonschema.ValidationError):
        validate(pm, "1.33")
    scc = next(d for d in docs if d["kind"] == "SecurityContextConstraints")
    with pytest.raises(jsonschema.ValidationError):
        validate({**scc, "allowHostDirVolumePlugins": True}, "1.33")
    with pytest.raises(jsonschema.ValidationError):  # a required field of the CRD
        validate({k: v for k, v in scc.items() if k != "allowHostPorts"}, "1.33")


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("deploy_generate", DEPLOY / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_parts_match_their_sources(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(DEPLOY / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    built = by_key(kustomize_dir(overlay(tmp_path / "o", ["base"], ["monitors", "dashboards"])))
    rule = yaml.safe_load((ROOT / "alerts" / "prometheusrule.yaml").read_text())
    assert built["PrometheusRule/guided-decoding-exporter"]["spec"] == rule["spec"]
    dashboards = built["ConfigMap/guided-decoding-exporter-dashboards"]
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    sources = {p.name: json.loads(p.read_text()) for p in (ROOT / "dashboards").glob("*.json")}
    assert {k: json.loads(v) for k, v in dashboards["data"].items()} == sources
    config = built["ConfigMap/guided-decoding-exporter"]["data"]["config.yaml"]
    (tmp_path / "config.yaml").write_text(config)
    from exporter.daemon import config as cfg

    loaded = cfg.load(
        {"config_file": str(tmp_path / "config.yaml")}, {"NODE_NAME": "node-a"}
    )  # accepted as is
    assert loaded.kubernetes_enabled and loaded.probe_socket == f"{SOCKET_DIR}/probe.sock"
    assert loaded.probe_listen_address == f":{PROBE_PORT}"  # the default transport: the Service's


def test_generate_check_catches_each_kind_of_staleness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--check` covers the chart's copies of alerts/ and dashboards/ and the kustomize files rendered
    from the chart: each edited by hand fails it, `make deploy` (no --check) repairs it."""
    gen = _generator()
    chart, kube = tmp_path / "chart", tmp_path / "kubernetes"
    shutil.copytree(gen.CHART, chart)
    shutil.copytree(gen.KUBERNETES, kube)
    monkeypatch.setattr(gen, "CHART", chart)
    monkeypatch.setattr(gen, "KUBERNETES", kube)
    assert gen.main(["--check"]) == 0
    edits = [
        chart / "files" / "prometheusrule-spec.yaml",
        chart / "files" / "dashboards" / "guided-decoding.json",
        kube / "base" / "daemonset.yaml",
        kube / "components" / "monitors" / "podmonitor.yaml",
        kube / "components" / "probe-socket" / "kustomization.yaml",
    ]
    for path in edits:
        path.write_text(path.read_text().replace("guided", "guidded", 1))
        assert gen.main(["--check"]) == 1, path
        assert gen.main([]) == 0 and gen.main(["--check"]) == 0, path
    # a template edit reaches the generated base
    template = chart / "templates" / "daemonset.yaml"
    template.write_text(template.read_text().replace("periodSeconds: 5", "periodSeconds: 7"))
    assert gen.main(["--check"]) == 1
    gen.main([])
    assert "periodSeconds: 7" in (kube / "base" / "daemonset.yaml").read_text()
    # and the transport components' patches
    template.write_text(template.read_text().replace("type: DirectoryOrCreate", "type: Directory"))
    assert gen.main(["--check"]) == 1
    gen.main([])
    assert "type: Directory\n" in (kube / "components" / "probe-socket" / "kustomization.yaml").read_text()


def transport_build(tmp: Path, transport: str, components: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The base with the components and, last, the transport's own (none for the default)."""
    component = TRANSPORTS[transport][0]
    if not component and not components:
        return kustomize("kubernetes/base")
    return kustomize_dir(
        overlay(tmp / transport, ["base"], [*components, *([component] if component else [])])
    )


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_security_posture(transport: str, tmp_path: Path) -> None:
    docs = transport_build(tmp_path, transport)
    level = TRANSPORTS[transport][1]
    (ns,) = [d for d in docs if d["kind"] == "Namespace"]
    for mode in ("enforce", "audit", "warn"):
        assert ns["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}"] == level
    assert not [d for d in docs if d["kind"] in CRD_KINDS]  # the base applies without the operator
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    # the level the namespace is labelled is the strictest the pods meet (upstream's checks, ported)
    assert pod_security.level_of(pod, ds["spec"]["template"]["metadata"]) == level
    failed = {v.check for v in pod_security.violations(pod, "baseline")}
    assert failed == {"service": set(), "hostip": {"hostPorts"}, "socket": {"hostPathVolumes"}}[transport]
    assert "priorityClassName" not in pod and "runtimeClassName" not in pod  # settings, in components
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for container in pod["containers"] + pod.get("initContainers", []):
        sc = container["securityContext"]
        assert not sc.get("privileged"), container["name"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["limits"] and container["resources"]["requests"]
    (exporter,) = pod["containers"]
    assert "runAsUser" not in exporter["securityContext"]  # the pod's non-root user
    volumes = {v["name"]: v for v in pod["volumes"]}
    ports = {p["name"]: p for p in exporter["ports"]}
    config = yaml.safe_load(by_key(docs)["ConfigMap/guided-decoding-exporter"]["data"]["config.yaml"])
    keyed = by_key(docs)
    if transport == "socket":  # as before the TCP transports
        (init,) = pod["initContainers"]
        assert init["securityContext"]["runAsUser"] == 0
        assert set(init["securityContext"]["capabilities"]["add"]) == {"CHOWN", "FOWNER"}
        host_paths = [v for v in pod["volumes"] if "hostPath" in v]
        assert [v["hostPath"]["path"] for v in host_paths] == [SOCKET_DIR]  # the socket only
        assert list(ports) == ["metrics"] and "listen_address" not in config["probe"]
        assert "Service/guided-decoding-exporter-probe" not in keyed
    else:
        assert "initContainers" not in pod  # no root step
        assert not [v for v in pod["volumes"] if "hostPath" in v]
        assert volumes["probe-socket"]["emptyDir"]  # the daemon's socket, for nobody
        assert ports["probe"]["containerPort"] == PROBE_PORT and ports["probe"]["protocol"] == "TCP"
        assert ports["probe"].get("hostPort") == (PROBE_PORT if transport == "hostip" else None)
        assert "hostPort" not in ports["metrics"]
        assert config["probe"]["listen_address"] == f":{PROBE_PORT}"
        assert ("Service/guided-decoding-exporter-probe" in keyed) == (transport == "service")
    mounts = {m["name"]: m for c in pod["containers"] for m in c["volumeMounts"]}
    assert mounts["config"]["readOnly"] is True and mounts["probe-socket"]["mountPath"] == SOCKET_DIR
    assert exporter["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert exporter["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    # what the code calls: list pods (discovery), create tokenreviews (the TCP transports); one binding,
    # to the service account alone, and none to the built-in system:auth-delegator
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}] + (
        [] if transport == "socket"
        else [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}]
    )  # fmt: skip
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "guided-decoding-exporter"
    }  # fmt: skip
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "guided-decoding"}
    ]
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    env = {e["name"]: e for e in exporter["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"


def test_probe_service_reaches_the_daemon_on_its_own_node() -> None:
    """The default transport: the Service the engines connect to selects the DaemonSet's pods, only the
    one on the client's node (internalTrafficPolicy Local), on the port named probe."""
    built = by_key(kustomize("kubernetes/base"))
    svc, ds = built["Service/guided-decoding-exporter-probe"], built["DaemonSet/guided-decoding-exporter"]
    spec = svc["spec"]
    assert spec["internalTrafficPolicy"] == "Local" and spec.get("type", "ClusterIP") == "ClusterIP"
    assert "clusterIP" not in spec and "externalTrafficPolicy" not in spec
    assert (
        spec["selector"] and spec["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    )
    assert spec["selector"].items() <= ds["spec"]["selector"]["matchLabels"].items()
    assert spec["ports"] == [{"name": "probe", "port": PROBE_PORT, "targetPort": "probe", "protocol": "TCP"}]
    names = {p["name"] for p in ds["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert "probe" in names
    assert svc["metadata"]["namespace"] == ds["metadata"]["namespace"] == "guided-decoding"
    # the address the engine Component gives the probe is this Service's
    (engine,) = [d for d in kustomize("vllm") if d["kind"] == "Deployment"]
    env = {e["name"]: e.get("value") for e in engine["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (
        env["GDX_PROBE_ADDRESS"] == f"tcp://guided-decoding-exporter-probe.guided-decoding.svc:{PROBE_PORT}"
    )


def test_transport_components_follow_the_other_components(tmp_path: Path) -> None:
    """probe-hostip and probe-socket listed after the others: the SCC follows the transport, the
    settings components' patches are kept, and with existing-namespace there is no Namespace to relabel."""
    for transport in ("hostip", "socket"):
        built = by_key(
            transport_build(
                tmp_path / "all", transport, ["monitors", "openshift", "gpu-operator", "priority-class"]
            )
        )
        pod = built["DaemonSet/guided-decoding-exporter"]["spec"]["template"]["spec"]
        assert (pod["runtimeClassName"], pod["priorityClassName"]) == ("nvidia", "system-node-critical")
        scc = built["SecurityContextConstraints/guided-decoding-exporter"]
        assert scc["allowHostPorts"] is (transport == "hostip")
        assert scc["allowHostDirVolumePlugin"] is (transport == "socket")
        kept = transport_build(tmp_path / "kept", transport, ["existing-namespace"])
        assert not [d for d in kept if d["kind"] == "Namespace"] and [
            d for d in kept if d["kind"] == "DaemonSet"
        ]


def test_kube_prometheus_stack_overlay() -> None:
    built = by_key(kustomize("kubernetes/overlays/kube-prometheus-stack"))
    for key in ("PodMonitor/guided-decoding-exporter", "PrometheusRule/guided-decoding-exporter"):
        assert built[key]["metadata"]["labels"]["release"] == "kube-prometheus-stack", key
    assert (
        built["ConfigMap/guided-decoding-exporter-dashboards"]["metadata"]["labels"]["grafana_dashboard"]
        == "1"
    )
    assert "ServiceMonitor/guided-decoding-exporter" not in built
    pm = built["PodMonitor/guided-decoding-exporter"]
    pod_labels = built["DaemonSet/guided-decoding-exporter"]["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["relabelings"][0] == {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "instance",
    }
    assert endpoint["honorLabels"] is True and pm["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert pod_labels["app.kubernetes.io/name"] == "guided-decoding-exporter"  # the job the alerts select
    assert {d["metadata"].get("namespace") for k, d in built.items() if not k.startswith("Cluster")} - {
        None
    } == {"guided-decoding"}


def test_servicemonitor_component_scrapes(tmp_path: Path) -> None:
    """kube-prometheus-stack + servicemonitor: the PodMonitor is gone, the ServiceMonitor has the
    release label, selects the Service by its labels and port name, in the Service's namespace, and
    the Service selects the exporter pods."""
    # the overlay as its comment says: servicemonitor added after monitors, its patches kept
    kps = yaml.safe_load(
        (DEPLOY / "kubernetes/overlays/kube-prometheus-stack/kustomization.yaml").read_text()
    )
    assert kps["resources"] == ["../../base"] and kps["components"][0] == "../../components/monitors"
    components = [c.removeprefix("../../components/") for c in kps["components"]] + ["servicemonitor"]
    built = by_key(
        kustomize_dir(overlay(tmp_path, ["base"], components, namespace="gdx", patches=kps["patches"]))
    )
    assert (
        "PodMonitor/guided-decoding-exporter" not in built
        and "PrometheusRule/guided-decoding-exporter" in built
    )
    sm, svc = built["ServiceMonitor/guided-decoding-exporter"], built["Service/guided-decoding-exporter"]
    ds = built["DaemonSet/guided-decoding-exporter"]
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["metadata"]["namespace"] == svc["metadata"]["namespace"] == ds["metadata"]["namespace"] == "gdx"
    assert "namespaceSelector" not in sm["spec"]  # its own namespace, the Service's
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in svc["spec"]["ports"]}
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in ds["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert endpoint["relabelings"][0] == {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "instance",
    }
    assert endpoint["honorLabels"] is True and sm["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert svc["metadata"]["labels"]["app.kubernetes.io/name"] == "guided-decoding-exporter"


def test_another_namespace_keeps_the_bindings_right(tmp_path: Path) -> None:
    built = kustomize_dir(overlay(tmp_path, ["base"], ["openshift"], namespace="other"))
    keyed = by_key(built)
    for key in ("ClusterRoleBinding/guided-decoding-exporter", "RoleBinding/guided-decoding-exporter-scc"):
        (subject,) = keyed[key]["subjects"]
        assert subject == {
            "kind": "ServiceAccount",
            "name": "guided-decoding-exporter",
            "namespace": "other",
        }, key
    assert (
        keyed["Namespace/other"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    )
    assert keyed["NetworkPolicy/guided-decoding-exporter"]["metadata"]["namespace"] == "other"
    assert keyed["Service/guided-decoding-exporter-probe"]["metadata"]["namespace"] == "other"
    namespaced = [d for d in built if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")]
    assert {d["metadata"].get("namespace") for d in namespaced} == {"other"}


def test_an_existing_namespace_keeps_its_labels(tmp_path: Path) -> None:
    """Into a namespace that exists (monitoring): without the component kustomize renames the base's
    Namespace to it, and applying would relabel that shared namespace privileged; with
    components/existing-namespace no Namespace object is applied and everything else moves there."""
    renamed = by_key(kustomize_dir(overlay(tmp_path / "plain", ["base"], namespace="monitoring")))
    assert renamed["Namespace/monitoring"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    built = kustomize_dir(
        overlay(
            tmp_path / "kept",
            ["overlays/kube-prometheus-stack"],
            ["existing-namespace"],
            namespace="monitoring",
        )
    )
    assert not [d for d in built if d["kind"] == "Namespace"]
    namespaced = [d for d in built if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
    assert {d["metadata"].get("namespace") for d in namespaced} == {"monitoring"}
    (subject,) = by_key(built)["ClusterRoleBinding/guided-decoding-exporter"]["subjects"]
    assert subject["namespace"] == "monitoring"
    assert {"DaemonSet", "PodMonitor", "PrometheusRule"} <= {d["kind"] for d in built}


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_openshift_scc_allows_what_the_daemonset_needs(transport: str, tmp_path: Path) -> None:
    built = by_key(transport_build(tmp_path, transport, ["openshift"]))
    scc = built["SecurityContextConstraints/guided-decoding-exporter"]
    pod = built["DaemonSet/guided-decoding-exporter"]["spec"]["template"]["spec"]
    containers = pod.get("initContainers", []) + pod["containers"]
    host_ports = [p for c in containers for p in c.get("ports", []) if p.get("hostPort")]
    assert (
        scc["allowHostDirVolumePlugin"] is (transport == "socket")
        and scc["allowPrivilegedContainer"] is False
    )
    assert scc["allowHostPorts"] is bool(host_ports) is (transport == "hostip")
    assert not any(scc[f"allowHost{k}"] for k in ("IPC", "Network", "PID"))
    assert scc["allowPrivilegeEscalation"] is False and scc["readOnlyRootFilesystem"] is True
    added = {cap for c in containers for cap in c["securityContext"]["capabilities"].get("add", [])}
    assert set(scc["allowedCapabilities"]) == added and scc["requiredDropCapabilities"] == ["ALL"]
    assert added == ({"CHOWN", "FOWNER"} if transport == "socket" else set())
    volumes = {next(k for k in v if k != "name") for v in pod["volumes"]} | {"projected"}  # + the token
    socket_volume = "hostPath" if transport == "socket" else "emptyDir"
    assert set(scc["volumes"]) == volumes == {"configMap", socket_volume, "projected"}
    users = {c["securityContext"].get("runAsUser", pod["securityContext"]["runAsUser"]) for c in containers}
    if transport == "socket":  # the init step as 0, the daemon as 65532
        assert scc["runAsUser"] == {"type": "RunAsAny"} and users == {0, 65532}
    else:
        assert scc["runAsUser"] == {"type": "MustRunAs", "uid": 65532} and users == {65532}
    assert (
        scc["seccompProfiles"] == ["runtime/default"]
        and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    )
    fs = scc["fsGroup"]
    assert fs["type"] == "MustRunAs" and fs["ranges"] == [
        {"min": pod["securityContext"]["fsGroup"]} | {"max": 65532}
    ]
    assert scc["users"] == [] and scc["groups"] == []  # granted by RBAC `use` only
    role = built["ClusterRole/guided-decoding-exporter-scc"]
    assert role["rules"] == [
        {"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
         "resourceNames": ["guided-decoding-exporter"], "verbs": ["use"]}
    ]  # fmt: skip
    binding = built["RoleBinding/guided-decoding-exporter-scc"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]


def test_setting_components(tmp_path: Path) -> None:
    def pod(components: list[str]) -> dict[str, Any]:
        built = kustomize_dir(overlay(tmp_path / "-".join(components), ["base"], components))
        (ds,) = [d for d in built if d["kind"] == "DaemonSet"]
        return ds["spec"]["template"]["spec"]

    assert pod(["gpu-operator"])["runtimeClassName"] == "nvidia"
    assert pod(["priority-class"])["priorityClassName"] == "system-node-critical"
    both = pod(["gpu-operator", "priority-class"])
    assert (both["runtimeClassName"], both["priorityClassName"]) == ("nvidia", "system-node-critical")


def test_plain_prometheus_overlay(tmp_path: Path) -> None:
    built = by_key(kustomize("kubernetes/overlays/prometheus"))
    assert not [k for k in built if k.split("/")[0] in CRD_KINDS]
    cm = built["ConfigMap/guided-decoding-exporter-prometheus"]
    scrape = yaml.safe_load(cm["data"]["scrape-config.yaml"])
    # a configuration Prometheus accepts, with the project's rules. The Debian promtool is built
    # without Kubernetes discovery: the job is checked with a static target in its place.
    checked = json.loads(json.dumps(scrape))
    for job in checked["scrape_configs"]:
        assert job.pop("kubernetes_sd_configs")
        job["static_configs"] = [{"targets": ["10.0.0.1:9479"]}]
    config = {"rule_files": [str(ROOT / "alerts" / "guided-decoding.rules.yml")], **checked}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: run `make test` (it installs it with apt)"
    check = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    (job,) = scrape["scrape_configs"]
    assert job["job_name"] == "guided-decoding-exporter" and job["honor_labels"] is True
    (sd,) = job["kubernetes_sd_configs"]
    assert sd["role"] == "pod" and sd["namespaces"]["names"] == [cm["metadata"]["namespace"]]
    relabel = {r.get("target_label"): r for r in job["relabel_configs"]}
    assert relabel["instance"]["source_labels"] == ["__meta_kubernetes_pod_node_name"]
    keep = next(r for r in job["relabel_configs"] if r.get("action") == "keep")

    def kept(pod_template: dict[str, Any]) -> list[bool]:
        """Prometheus' keep over each container port: the sanitized meta label values joined by ';'."""
        labels = {
            "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
            for k, v in pod_template["metadata"]["labels"].items()
        }
        out = []
        for c in pod_template["spec"]["containers"]:
            for p in c.get("ports", []):
                meta = labels | {"__meta_kubernetes_pod_container_port_name": p.get("name", "")}
                value = ";".join(meta.get(s, "") for s in keep["source_labels"])
                out.append(re.fullmatch(keep["regex"], value) is not None)
        return out

    assert kept(built["DaemonSet/guided-decoding-exporter"]["spec"]["template"]) == [True, False]  # not probe
    (engine,) = [d for d in kustomize("vllm") if d["kind"] == "Deployment"]
    assert kept(engine["spec"]["template"]) == [False]  # the engines are the daemon's to scrape


ENGINE = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: my-engine
  labels: {guided-decoding-exporter.io/probe: enabled}
spec:
  selector: {matchLabels: {app: my-engine}}
  template:
    metadata:
      labels: {app: my-engine}
      annotations: {example.com/owner: ml}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
      initContainers:
        - name: fetch-model
          image: busybox:1
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
      containers:
        - name: engine
          image: my-vllm:1
          ports: [{name: http, containerPort: 8080}]
          env: [{name: HF_HOME, value: /models}]
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
          volumeMounts: [{name: models, mountPath: /models}]
        - name: sidecar
          image: proxy:1
          securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
      volumes:
        - {name: models, emptyDir: {}}
"""
PROBE_ADDRESS = f"tcp://guided-decoding-exporter-probe.guided-decoding.svc:{PROBE_PORT}"
TOKEN_DIR = "/var/run/secrets/guided-decoding-exporter"
INIT_CONTAINER = {
    "name": "gdx-probe",
    "image": "guided-decoding-exporter:0.1.0",
    "command": ["cp", "-r", "/opt/guided-decoding-exporter/probe/.", "/gdx-probe"],
    "volumeMounts": [{"name": "gdx-probe", "mountPath": "/gdx-probe"}],
    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
    "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    },
}  # fmt: skip
PROBE_VOLUMES = {
    "gdx-probe": {"name": "gdx-probe", "emptyDir": {"sizeLimit": "64Mi"}},
    "gdx-probe-state": {"name": "gdx-probe-state", "emptyDir": {"sizeLimit": "32Mi"}},
    "gdx-probe-token": {"name": "gdx-probe-token", "projected": {"sources": [{"serviceAccountToken": {
        "audience": "guided-decoding-exporter", "expirationSeconds": 3600, "path": "token"}}]}},
}  # fmt: skip


def _engine(tmp: Path, text: str) -> subprocess.CompletedProcess[str]:
    tmp.mkdir(parents=True)
    (tmp / "deployment.yaml").write_text(text)
    component = os.path.relpath(DEPLOY / "vllm" / "probe", tmp)
    (tmp / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["deployment.yaml"], "components": [component]})
    )
    return subprocess.run([kubectl(), "kustomize", str(tmp)], capture_output=True, text=True, timeout=60)


def assert_injected(pod: dict[str, Any], container: dict[str, Any]) -> None:
    """The contract's injected path (service transport): init container, volumes, mounts, env, annotations."""
    spec = pod["spec"]
    assert spec["initContainers"][-1] == INIT_CONTAINER  # after the pod's own
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert {k: volumes[k] for k in PROBE_VOLUMES} == PROBE_VOLUMES
    assert not [v for v in spec["volumes"] if "hostPath" in v]
    mounts = [m for m in container["volumeMounts"] if m["name"].startswith("gdx-probe")]
    assert mounts == [
        {"name": "gdx-probe", "mountPath": "/gdx-probe", "readOnly": True},
        {"name": "gdx-probe-state", "mountPath": "/gdx-probe-state"},  # written: the API server's markers
        {"name": "gdx-probe-token", "mountPath": TOKEN_DIR, "readOnly": True},
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["PYTHONPATH"] == {"name": "PYTHONPATH", "value": "/gdx-probe"}
    assert env["GDX_PROBE_ADDRESS"]["value"] == PROBE_ADDRESS
    assert env["GDX_PROBE_ENGINE_KIND"]["value"] == "vllm"
    assert env["GDX_PROBE_STATE_DIR"]["value"] == "/gdx-probe-state"
    assert env["GDX_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["GDX_POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert "GDX_PROBE_SOCKET" not in env and "GDX_HOST_IP" not in env
    assert "supplementalGroups" not in spec.get("securityContext", {})
    annotations = pod["metadata"]["annotations"]
    assert annotations["guided-decoding-exporter.io/scrape"] == "true"
    assert annotations["guided-decoding-exporter.io/probe"] == "injected"
    assert "guided-decoding-exporter.io/port" not in annotations  # no port: the spec's


def test_probe_component_on_any_container_name(tmp_path: Path) -> None:
    out = _engine(tmp_path / "ok", ENGINE)
    assert out.returncode == 0, out.stderr
    (deployment,) = yaml.safe_load_all(out.stdout)
    pod = deployment["spec"]["template"]
    engine, sidecar = pod["spec"]["containers"]  # no image-less container added
    assert engine["name"] == "engine" and engine["image"] == "my-vllm:1"
    assert_injected(pod, engine)
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["fetch-model", "gdx-probe"]
    assert [e["name"] for e in engine["env"]] == [
        "HF_HOME", "PYTHONPATH", "GDX_PROBE_ADDRESS", "GDX_POD_NAME", "GDX_POD_NAMESPACE",
        "GDX_PROBE_ENGINE_KIND", "GDX_PROBE_STATE_DIR",
    ]  # fmt: skip
    assert engine["env"][0] == {"name": "HF_HOME", "value": "/models"}  # kept, first
    assert engine["volumeMounts"][0] == {"name": "models", "mountPath": "/models"}
    assert "env" not in sidecar and "volumeMounts" not in sidecar  # the first container only
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["models"] == {"name": "models", "emptyDir": {}}
    assert pod["metadata"]["annotations"]["example.com/owner"] == "ml"  # kept
    kubernetes_validate.validate(deployment, "1.33", strict=True)
    # the injection lowers no pod's Pod Security level: restricted before, restricted after
    (before,) = yaml.safe_load_all(ENGINE)
    assert pod_security.level_of(before["spec"]["template"]["spec"]) == "restricted"
    assert pod_security.level_of(pod["spec"], pod["metadata"]) == "restricted"
    # no init containers of its own: the probe's is the only one
    out = _engine(
        tmp_path / "no-init",
        ENGINE.replace(ENGINE[ENGINE.index("      initContainers:") : ENGINE.index("      containers:")], ""),
    )
    assert out.returncode == 0, out.stderr
    (alone,) = yaml.safe_load_all(out.stdout)
    assert alone["spec"]["template"]["spec"]["initContainers"] == [INIT_CONTAINER]
    # a Deployment without the label is left alone
    untouched = _engine(
        tmp_path / "other", ENGINE.replace("guided-decoding-exporter.io/probe: enabled", "x: y")
    )
    assert untouched.returncode == 0 and "gdx-probe" not in untouched.stdout


@pytest.mark.parametrize(
    ("remove", "path"),
    [
        ("          env: [{name: HF_HOME, value: /models}]\n", "/spec/template/spec/containers/0/env/-"),
        (
            "          volumeMounts: [{name: models, mountPath: /models}]\n",
            "/spec/template/spec/containers/0/volumeMounts/-",
        ),
    ],
)
def test_probe_component_needs_the_lists(tmp_path: Path, remove: str, path: str) -> None:
    """The lists the JSON patch appends to must exist (deploy/vllm/README.md says so): kustomize
    stops with this message, naming the path, when one is missing."""
    assert remove in ENGINE
    out = _engine(tmp_path / "missing", ENGINE.replace(remove, ""))
    assert out.returncode != 0
    assert "add operation does not apply: doc is missing path" in out.stderr and path in out.stderr, (
        out.stderr
    )
    empty = _engine(tmp_path / "empty", ENGINE.replace("[{name: HF_HOME, value: /models}]", "[]"))
    assert empty.returncode == 0 and "GDX_POD_NAMESPACE" in empty.stdout  # empty is enough


def test_example_engine() -> None:
    """deploy/vllm: the stock vLLM image with the probe injected by the Component, no hostPath, Pod
    Security baseline before and after."""
    built = by_key(kustomize("vllm"))
    deployment, svc = built["Deployment/vllm-llama"], built["Service/vllm-llama"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "vllm/vllm-openai:v0.32.0"  # stock, not the rebuilt vllm-openai-gdx
    assert_injected(pod, container)
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["gdx-probe"]
    env = {e["name"]: e for e in container["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True  # the gated model's token
    assert {"name": "http", "containerPort": 8000} in container["ports"]  # the port the daemon scrapes
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    (source,) = yaml.safe_load_all((DEPLOY / "vllm" / "deployment.yaml").read_text())
    before = pod_security.level_of(source["spec"]["template"]["spec"])
    assert before == "baseline"  # the image runs as root: restricted needs a non-root user
    assert pod_security.level_of(pod["spec"], pod["metadata"]) == before
    assert "hostPath" not in json.dumps(deployment)


def test_warm_component_matches_gdx_inject_and_takes_the_generated_configmap(tmp_path: Path) -> None:
    """The warm Component over the probe Component: the postStart hook gdx inject --warm-configmap
    writes for `vllm serve` on its default port, the ConfigMap kustomize generates from gdx fix's
    registry (its hashed name reaching the volume), optional, and the pod still `restricted`."""
    from exporter.inject.podspec import InjectOptions, inject

    (tmp_path / "deployment.yaml").write_text(ENGINE)
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / "Invoice-77e6bb7fa102.json").write_text('{"type": "object"}')
    components = [os.path.relpath(DEPLOY / "vllm" / name, tmp_path) for name in ("probe", "warm")]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["deployment.yaml"], "components": components,
        "configMapGenerator": [{"name": "gdx-warm", "files": ["registry/Invoice-77e6bb7fa102.json"]}],
    }))  # fmt: skip
    built = {f"{d['kind']}/{d['metadata']['name']}": d for d in kustomize_dir(tmp_path)}
    (configmap,) = [d for key, d in built.items() if key.startswith("ConfigMap/gdx-warm-")]
    assert list(configmap["data"]) == ["Invoice-77e6bb7fa102.json"]
    pod = built["Deployment/my-engine"]["spec"]["template"]
    engine = pod["spec"]["containers"][0]
    assert_injected(pod, engine)  # the probe Component's work, untouched
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["gdx-warm"]["configMap"] == {"name": configmap["metadata"]["name"], "optional": True}
    assert engine["volumeMounts"][-1] == {"name": "gdx-warm", "mountPath": "/gdx-warm", "readOnly": True}
    (stock,) = yaml.safe_load_all(ENGINE)
    stock["spec"]["template"]["spec"]["containers"][0]["command"] = ["vllm", "serve", "m"]
    options = InjectOptions(image="guided-decoding-exporter:0.1.0", warm_configmap="gdx-warm")
    injected = inject(stock["spec"]["template"]["spec"], {}, options).spec["containers"][0]
    assert engine["lifecycle"] == injected["lifecycle"]  # the Component and gdx inject agree
    assert pod_security.level_of(pod["spec"], pod["metadata"]) == "restricted"
    kubernetes_validate.validate(built["Deployment/my-engine"], "1.33", strict=True)


def test_guard_component_matches_gdx_inject_and_takes_the_generated_configmap(tmp_path: Path) -> None:
    """The guard Component over the probe Component: GDX_GUARD=enforce and GDX_GUARD_FILE as
    `gdx inject --guard enforce --guard-configmap gdx-guard` writes them, the ConfigMap kustomize
    generates from lint's guard.json (its hashed name reaching the volume), optional, still `restricted`."""
    from exporter.inject.podspec import InjectOptions, inject

    (tmp_path / "deployment.yaml").write_text(ENGINE)
    (tmp_path / "guard.json").write_text('{"vllm": "0.32.0", "verdicts": []}')
    components = [os.path.relpath(DEPLOY / "vllm" / name, tmp_path) for name in ("probe", "guard")]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["deployment.yaml"], "components": components,
        "configMapGenerator": [{"name": "gdx-guard", "files": ["guard.json"]}],
    }))  # fmt: skip
    built = {f"{d['kind']}/{d['metadata']['name']}": d for d in kustomize_dir(tmp_path)}
    (configmap,) = [d for key, d in built.items() if key.startswith("ConfigMap/gdx-guard-")]
    pod = built["Deployment/my-engine"]["spec"]["template"]
    engine = pod["spec"]["containers"][0]
    assert_injected(pod, engine)  # the probe Component's work, untouched
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["gdx-guard"]["configMap"] == {"name": configmap["metadata"]["name"], "optional": True}
    (stock,) = yaml.safe_load_all(ENGINE)
    options = InjectOptions(
        image="guided-decoding-exporter:0.1.0", guard="enforce", guard_configmap="gdx-guard"
    )
    injected = inject(stock["spec"]["template"]["spec"], {}, options).spec["containers"][0]
    guard_names = {"GDX_GUARD", "GDX_GUARD_FILE"}
    assert [e for e in engine["env"] if e["name"] in guard_names] == [
        e for e in injected["env"] if e["name"] in guard_names
    ]  # the Component and gdx inject agree
    assert [m for m in engine["volumeMounts"] if m["name"] == "gdx-guard"] == [
        m for m in injected["volumeMounts"] if m["name"] == "gdx-guard"
    ]
    assert pod_security.level_of(pod["spec"], pod["metadata"]) == "restricted"
    kubernetes_validate.validate(built["Deployment/my-engine"], "1.33", strict=True)
