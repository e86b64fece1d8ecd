"""The Helm chart deploy/helm/guided-decoding-exporter with real Helm 4 and Helm 3: lint --strict,
every rendered object strict-valid for Kubernetes 1.28 to 1.33 (the operator's CRDs and OpenShift's
SCC against their schemas), typos refused by values.schema.json, the packaged chart renders the
same, the monitors scrape what they must, and `helm template` equals each kustomize path."""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_deploy import (
    DEPLOY,
    PROBE_PORT,
    TRANSPORTS,
    VERSIONS,
    kustomize,
    kustomize_dir,
    overlay,
    validate,
)
from tests.support import pod_security
from tools.harness import ROOT

CHART = DEPLOY / "helm" / "guided-decoding-exporter"
RELEASE, NAMESPACE = "guided-decoding-exporter", "guided-decoding"
HELMS = {"helm4": ("GDX_HELM4", "v4", "v4."), "helm3": ("GDX_HELM3", "v3", "v3.")}
CRD_KINDS = {"PodMonitor", "ServiceMonitor", "PrometheusRule"}
HELM_ONLY = {
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
}
INSTANCE = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance"}
# every toggle on, and every value that adds something to a template
ALL_TOGGLES = {
    "podMonitor": {
        "enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}, "scrapeTimeout": "10s",
        "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "exporter_pod"}],
        "metricRelabelings": [{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}],
    },
    "serviceMonitor": {
        "enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}, "namespace": "monitoring",
        "interval": "30s", "scrapeTimeout": "10s", "honorLabels": True,
        "metricRelabelings": [{"sourceLabels": ["__name__"], "regex": "go_.*", "action": "drop"}],
    },
    "prometheusRule": {"enabled": True, "additionalLabels": {"release": "kube-prometheus-stack"}},
    "dashboards": {
        "enabled": True, "namespace": "monitoring", "labels": {"grafana_dashboard": "1", "team": "ml"},
    },
    "openshift": {"scc": {"enabled": True}},
    "runtimeClassName": "nvidia",
    "priorityClassName": "system-node-critical",
    "imagePullSecrets": [{"name": "registry"}],
    "podAnnotations": {"example.com/owner": "ml-platform"},
    "podLabels": {"team": "ml"},
    "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
    "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/x"}},
    "extraEnv": [{"name": "GDX_LOG_LEVEL", "value": "debug"}],
    "networkPolicy": {
        "metrics": {"from": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }]},
        "probe": {"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"team": "ml"}}},
                           {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}]},
    },
}  # fmt: skip


@functools.cache
def helm_path(which: str) -> str:
    env, folder, version = HELMS[which]
    path = os.environ.get(env) or str(ROOT / ".cache" / "helm" / folder / "helm")
    assert Path(path).is_file(), f"{which}: no helm binary at {path} (set {env} or run `make helm`)"
    out = subprocess.run([path, "version", "--short"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith(version), (path, out.stdout, out.stderr)
    return path


@pytest.fixture(params=sorted(HELMS))
def helm(request: pytest.FixtureRequest) -> str:
    return helm_path(request.param)


def run(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=120)


@functools.cache
def _values_dir() -> Path:
    path = tempfile.mkdtemp(prefix="gdx-helm-values-")
    atexit.register(shutil.rmtree, path, True)
    return Path(path)


def values_file(values: dict[str, Any]) -> str:
    text = json.dumps(values, sort_keys=True)
    path = _values_dir() / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


@functools.cache
def _template(helm: str, values: str, namespace: str, chart: str) -> str:
    out = run(
        helm, "template", RELEASE, chart, "--namespace", namespace, "-f", values_file(json.loads(values))
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def template(
    helm: str, values: dict[str, Any] | None = None, namespace: str = NAMESPACE, chart: Path = CHART
) -> list[dict[str, Any]]:
    text = _template(helm, json.dumps(values or {}, sort_keys=True), namespace, str(chart))
    return [d for d in yaml.safe_load_all(text) if d]


def by_key(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"] + "/" + d["metadata"]["name"]: d for d in docs}


def test_lint_strict(helm: str) -> None:
    for values in ({}, ALL_TOGGLES):
        out = run(helm, "lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", values_file(values))
        assert out.returncode == 0, out.stdout + out.stderr
        assert "0 chart(s) failed" in out.stdout


@pytest.mark.parametrize("values", [{}, ALL_TOGGLES], ids=["defaults", "all-toggles"])
def test_every_rendered_object_is_valid(helm: str, values: dict[str, Any]) -> None:
    docs = template(helm, values)
    kinds = {d["kind"] for d in docs}
    base = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Service"}
    base |= {"NetworkPolicy"}
    assert kinds == (
        base if not values else base | CRD_KINDS | {"Service", "RoleBinding", "SecurityContextConstraints"}
    )
    for version in VERSIONS:
        for doc in docs:
            try:
                validate(doc, version)
            except Exception as err:
                raise AssertionError(f"{version}: {doc['kind']} {doc['metadata']['name']}: {err}") from err


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("podMonitor.enabeld=true", "enabeld"),
        ("imag.tag=x", "imag"),
        ("serviceMonitor.interval=15 seconds", "interval"),
        ("openshift.scc.enable=true", "enable"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("probe.transport=tcp", "transport"),
        ("probe.transport=hostIP", "transport"),
        ("probe.port=0", "port"),
        ("probe.port=http", "port"),
        ("probe.tranport=socket", "tranport"),
    ],
)
def test_values_schema_refuses_typos(helm: str, setting: str, message: str) -> None:
    out = run(helm, "template", RELEASE, str(CHART), "--set", setting)
    assert out.returncode != 0 and "schema" in out.stderr and message in out.stderr, out.stderr
    lint = run(helm, "lint", "--strict", str(CHART), "--set", setting)
    assert lint.returncode != 0, lint.stdout


def test_package_renders_the_same(helm: str, tmp_path: Path) -> None:
    out = run(helm, "package", str(CHART), "--destination", str(tmp_path))
    assert out.returncode == 0, out.stderr
    (tgz,) = tmp_path.glob("guided-decoding-exporter-0.1.0.tgz")
    with tarfile.open(tgz) as tar:
        names = set(tar.getnames())
    inside = {"values.schema.json", "files/prometheusrule-spec.yaml", "files/dashboards/guided-decoding.json"}
    assert {f"guided-decoding-exporter/{name}" for name in inside} <= names
    assert template(helm, ALL_TOGGLES, chart=tgz) == template(helm, ALL_TOGGLES)


def test_helm3_and_helm4_render_the_same() -> None:
    for values in ({}, ALL_TOGGLES):
        assert template(helm_path("helm3"), values) == template(helm_path("helm4"), values)


def test_monitors_are_off_by_default(helm: str) -> None:
    docs = template(helm)
    assert not [d for d in docs if d["kind"] in CRD_KINDS | {"SecurityContextConstraints"}]
    services = [d["metadata"]["name"] for d in docs if d["kind"] == "Service"]
    assert services == [f"{RELEASE}-probe"]  # the probes' (the default transport), not the monitors'
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert "priorityClassName" not in pod and "runtimeClassName" not in pod
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ] == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]
    assert not [d for d in docs if d["kind"] == "Namespace"]  # --create-namespace's


def test_monitors_relabel_instance_and_keep_the_job(helm: str) -> None:
    docs = by_key(template(helm, ALL_TOGGLES))
    pod_labels = docs[f"DaemonSet/{RELEASE}"]["spec"]["template"]["metadata"]["labels"]
    for kind, endpoints in (("PodMonitor", "podMetricsEndpoints"), ("ServiceMonitor", "endpoints")):
        monitor = docs[f"{kind}/{RELEASE}"]
        (endpoint,) = monitor["spec"][endpoints]
        assert endpoint["relabelings"][0] == INSTANCE, kind
        assert endpoint["honorLabels"] is True and endpoint["port"] == "metrics", kind
        assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name", kind
        assert endpoint["metricRelabelings"] == ALL_TOGGLES["podMonitor"]["metricRelabelings"], kind
        assert (
            endpoint["scrapeTimeout"] == "10s"
            and monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        )
    assert pod_labels["app.kubernetes.io/name"] == "guided-decoding-exporter"  # the job the alerts select
    (pm_endpoint,) = docs[f"PodMonitor/{RELEASE}"]["spec"]["podMetricsEndpoints"]
    assert (
        pm_endpoint["relabelings"][1:] == ALL_TOGGLES["podMonitor"]["relabelings"]
    )  # the user's, after instance
    assert pm_endpoint["interval"] == "15s"
    (sm_endpoint,) = docs[f"ServiceMonitor/{RELEASE}"]["spec"]["endpoints"]
    assert sm_endpoint["interval"] == "30s"
    # honorLabels can be turned off (then the engines' pod labels become exported_pod)
    (off,) = by_key(template(helm, {"podMonitor": {"enabled": True, "honorLabels": False}}))[
        f"PodMonitor/{RELEASE}"
    ]["spec"]["podMetricsEndpoints"]
    assert off["honorLabels"] is False


def test_servicemonitor_selects_the_service(helm: str) -> None:
    for values, sm_namespace in (
        ({"serviceMonitor": {"enabled": True}}, NAMESPACE),
        (ALL_TOGGLES, "monitoring"),
    ):
        docs = by_key(template(helm, values))
        sm, svc, ds = (
            docs[f"ServiceMonitor/{RELEASE}"],
            docs[f"Service/{RELEASE}"],
            docs[f"DaemonSet/{RELEASE}"],
        )
        assert svc["metadata"]["namespace"] == ds["metadata"]["namespace"] == NAMESPACE
        assert sm["metadata"]["namespace"] == sm_namespace
        if sm_namespace == NAMESPACE:
            assert "namespaceSelector" not in sm["spec"]
        else:  # elsewhere: it must look in the release's namespace, where the Service is
            assert sm["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
        assert svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
        (endpoint,) = sm["spec"]["endpoints"]
        (port,) = svc["spec"]["ports"]
        assert endpoint["port"] == port["name"] == "metrics"
        assert port["targetPort"] == ds["spec"]["template"]["spec"]["containers"][0]["ports"][0]["name"]
        assert svc["spec"]["clusterIP"] == "None"
    pm = by_key(template(helm, {"podMonitor": {"enabled": True, "namespace": "monitoring"}}))[
        f"PodMonitor/{RELEASE}"
    ]
    assert pm["metadata"]["namespace"] == "monitoring" and pm["spec"]["namespaceSelector"] == {
        "matchNames": [NAMESPACE]
    }


def test_rbac_is_exactly_list_pods_and_create_tokenreviews(helm: str) -> None:
    docs = by_key(template(helm, ALL_TOGGLES, namespace="other"))
    assert docs[f"ClusterRole/{RELEASE}"]["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    ]
    for key in (f"ClusterRoleBinding/{RELEASE}", f"RoleBinding/{RELEASE}-scc"):
        assert docs[key]["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": "other"}], (
            key
        )
    rules = [r for d in docs.values() if d["kind"] == "ClusterRole" for r in d["rules"]]
    # the SCC's `use` besides, nothing else
    assert sorted(r["verbs"] for r in rules) == [["create"], ["list"], ["use"]]
    # TokenReviews of the probes' tokens: the chart's own rule, not the built-in system:auth-delegator
    bindings = sorted(k for k, d in docs.items() if d["kind"] == "ClusterRoleBinding")
    assert bindings == [f"ClusterRoleBinding/{RELEASE}"]
    assert docs[f"ClusterRoleBinding/{RELEASE}"]["roleRef"]["name"] == RELEASE


def test_rbac_namespaces_grant_a_role_in_each_and_nothing_cluster_wide(helm: str) -> None:
    """rbac.namespaces: a Role (list pods) and RoleBinding in each engine namespace, no ClusterRole on
    pods, and the daemon's config lists exactly those namespaces (which it then lists one by one)."""
    from exporter.daemon import config as cfg

    docs = template(helm, {"rbac": {"namespaces": ["team-a", "team-b"]}})
    roles = [d for d in docs if d["kind"] == "Role"]
    assert sorted(d["metadata"]["namespace"] for d in roles) == ["team-a", "team-b"]
    assert all(d["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}] for d in roles)
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert sorted(d["metadata"]["namespace"] for d in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
        assert binding["roleRef"]["kind"] == "Role"
    # cluster-wide, only the TokenReview rule (a TokenReview is not namespaced); none with the socket
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert cluster_role["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
    ]
    cluster = [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert cluster == [RELEASE]
    socket = template(helm, {"rbac": {"namespaces": ["team-a", "team-b"]}, "probe": {"transport": "socket"}})
    assert not [d for d in socket if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    path = Path(tempfile.mkdtemp(prefix="gdx-helm-config-")) / "config.yaml"
    path.write_text(configmap["data"]["config.yaml"])
    loaded = cfg.load({"config_file": str(path)}, {"NODE_NAME": "node-a"})
    assert loaded.kubernetes_namespaces == ("team-a", "team-b") and loaded.kubernetes_enabled
    for doc in docs:
        validate(doc, VERSIONS[-1])
    out = run(helm, "template", RELEASE, str(CHART), "--set", "rbac.namespaces[0]=Team_A")
    assert out.returncode != 0 and "rbac" in out.stderr and "pattern" in out.stderr  # not a namespace name


def test_settings_reach_the_daemonset(helm: str) -> None:
    docs = by_key(template(helm, ALL_TOGGLES))
    pod = docs[f"DaemonSet/{RELEASE}"]["spec"]["template"]
    spec = pod["spec"]
    assert (spec["runtimeClassName"], spec["priorityClassName"]) == ("nvidia", "system-node-critical")
    assert (
        spec["imagePullSecrets"] == [{"name": "registry"}]
        and spec["nodeSelector"] == ALL_TOGGLES["nodeSelector"]
    )
    assert pod["metadata"]["labels"]["team"] == "ml"
    assert pod["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
    (exporter,) = spec["containers"]
    assert exporter["image"] == "guided-decoding-exporter:0.1.0"  # the appVersion
    env = {e["name"]: e.get("value") for e in exporter["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert env["GDX_LOG_LEVEL"] == "debug"
    assert exporter["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert exporter["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # nvml off: no NVIDIA runtime variables, the collector off
    (off,) = by_key(template(helm, {"nvml": {"enabled": False}}))[f"DaemonSet/{RELEASE}"]["spec"]["template"][
        "spec"
    ]["containers"]
    env = {e["name"]: e.get("value") for e in off["env"]}
    assert "NVIDIA_VISIBLE_DEVICES" not in env and env["GDX_COLLECTOR_NVML"] == "false"
    for transport in TRANSPORTS:
        values = {"image": {"repository": "r.example/gdx", "tag": "0.2.0"}, "probe": {"transport": transport}}
        image_pod = by_key(template(helm, values))[f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]
        containers = image_pod.get("initContainers", []) + image_pod["containers"]
        assert len(containers) == (2 if transport == "socket" else 1)
        assert {c["image"] for c in containers} == {"r.example/gdx:0.2.0"}


def test_socket_dir_and_config(helm: str, tmp_path: Path) -> None:
    values = {"socketDir": "/var/run/gdx", "config": {"probe": {"max_schemas": 20}}}
    docs = by_key(template(helm, {**values, "probe": {"transport": "socket"}}))
    spec = docs[f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]
    assert [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v] == ["/var/run/gdx"]
    mounts = {m["mountPath"] for c in spec["initContainers"] + spec["containers"] for m in c["volumeMounts"]}
    assert "/var/run/gdx" in mounts and "/run/guided-decoding-exporter" not in mounts
    assert "'/var/run/gdx'" in spec["initContainers"][0]["command"][-1]
    text = docs[f"ConfigMap/{RELEASE}"]["data"]["config.yaml"]
    config = yaml.safe_load(text)  # the values merged into the defaults, the socket under socketDir
    assert config["probe"] == {"max_schemas": 20, "socket": "/var/run/gdx/probe.sock"}
    assert config["kubernetes"]["enabled"] is True
    # the TCP transports: the socket in an emptyDir at socketDir, the listener on the probe port
    for transport in ("service", "hostip"):
        docs = by_key(template(helm, {**values, "probe": {"transport": transport, "port": 9555}}))
        spec = docs[f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]
        volume = {v["name"]: v for v in spec["volumes"]}["probe-socket"]
        assert "hostPath" not in volume and "emptyDir" in volume
        (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "probe-socket"]
        assert mount["mountPath"] == "/var/run/gdx"
        config = yaml.safe_load(docs[f"ConfigMap/{RELEASE}"]["data"]["config.yaml"])
        assert config["probe"] == {
            "max_schemas": 20,
            "socket": "/var/run/gdx/probe.sock",
            "listen_address": ":9555",
        }
    # an explicit config.probe.listen_address wins
    docs = by_key(template(helm, {"config": {"probe": {"listen_address": "0.0.0.0:9600"}}}))
    assert yaml.safe_load(docs[f"ConfigMap/{RELEASE}"]["data"]["config.yaml"])["probe"]["listen_address"] == (
        "0.0.0.0:9600"
    )
    # the default config is one the daemon accepts
    (tmp_path / "config.yaml").write_text(
        by_key(template(helm))[f"ConfigMap/{RELEASE}"]["data"]["config.yaml"]
    )
    from exporter.daemon import config as cfg

    loaded = cfg.load({"config_file": str(tmp_path / "config.yaml")}, {"NODE_NAME": "node-a"})
    assert loaded.probe_socket == "/run/guided-decoding-exporter/probe.sock" and loaded.kubernetes_enabled
    assert loaded.probe_listen_address == f":{PROBE_PORT}"
    # a changed config rolls the pods (checksum annotation)
    changed = by_key(template(helm, {"config": {"log": {"format": "logfmt"}}}))[f"DaemonSet/{RELEASE}"]
    default = by_key(template(helm))[f"DaemonSet/{RELEASE}"]
    assert (
        changed["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        != default["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    )


def test_dashboards_and_rules_come_from_their_sources(helm: str) -> None:
    docs = by_key(template(helm, ALL_TOGGLES))
    cm = docs[f"ConfigMap/{RELEASE}-dashboards"]
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["labels"]["team"] == "ml"
    sources = {p.name: json.loads(p.read_text()) for p in (ROOT / "dashboards").glob("*.json")}
    assert {k: json.loads(v) for k, v in cm["data"].items()} == sources
    rule = yaml.safe_load((ROOT / "alerts" / "prometheusrule.yaml").read_text())
    assert docs[f"PrometheusRule/{RELEASE}"]["spec"] == rule["spec"]


def test_notes() -> None:
    """NOTES.txt (rendered by `helm install --dry-run=client`, which Helm 4 does without a cluster)."""

    def notes(*sets: str) -> str:
        args = ["install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client"]
        for s in sets:
            args += ["--set", s]
        out = subprocess.run([helm_path("helm4"), *args], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "KUBECONFIG": "/nonexistent"})  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout.split("NOTES:", 1)[1]

    default = notes()
    assert "monitors are off unless enabled" in default and "/readyz" in default
    assert "pod-security.kubernetes.io/enforce=restricted" in default and "privileged" not in default
    assert f"GDX_PROBE_ADDRESS=tcp://{RELEASE}-probe.{NAMESPACE}.svc:{PROBE_PORT}" in default
    assert "create tokenreviews" in default and "auth-delegator" not in default
    assert f"NetworkPolicy {RELEASE}: ingress to the metrics port 9479 and the probe port 9478" in default
    hostip = notes("probe.transport=hostip")
    assert "pod-security.kubernetes.io/enforce=privileged" in hostip and "hostPort 9478" in hostip
    assert f"{RELEASE}-probe" not in hostip and "status.hostIP" in hostip
    socket = notes("probe.transport=socket")
    assert "pod-security.kubernetes.io/enforce=privileged" in socket and "tokenreviews" not in socket
    assert "hostPath /run/guided-decoding-exporter" in socket and "GDX_PROBE_ADDRESS" not in socket
    assert "WARNING: nvml.enabled is true and runtimeClassName is empty" in default
    enabled = notes("runtimeClassName=nvidia", "podMonitor.enabled=true", "prometheusRule.enabled=true")
    assert (
        "WARNING" not in enabled
        and "monitors are off" not in enabled
        and "PodMonitor guided-decoding-exporter" in enabled
    )
    assert "WARNING" not in notes("nvml.enabled=false")
    both = notes("runtimeClassName=nvidia", "podMonitor.enabled=true", "serviceMonitor.enabled=true")
    assert "WARNING: podMonitor and serviceMonitor are both enabled" in both


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_each_transport_renders_valid(helm: str, transport: str) -> None:
    """Every transport, alone and with every toggle on: lint --strict, every object strict-valid, and
    the DaemonSet's pods at the Pod Security level NOTES asks the namespace for (upstream's checks)."""
    for values in ({"probe": {"transport": transport}}, {**ALL_TOGGLES, "probe": {"transport": transport}}):
        out = run(helm, "lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", values_file(values))
        assert out.returncode == 0, out.stdout + out.stderr
        docs = template(helm, values)
        for version in VERSIONS:
            for doc in docs:
                try:
                    validate(doc, version)
                except Exception as err:
                    raise AssertionError(
                        f"{version}: {doc['kind']} {doc['metadata']['name']}: {err}"
                    ) from err
        (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
        pod = ds["spec"]["template"]
        assert pod_security.level_of(pod["spec"], pod["metadata"]) == TRANSPORTS[transport][1]


def test_transports(helm: str) -> None:
    """service: the probe Service (internalTrafficPolicy Local, the DaemonSet's pods, port probe), no
    hostPort; hostip: the hostPort and no Service; socket: exactly the objects and DaemonSet of before
    (no listener, Service or TokenReview rule); the tokenreviews rule with the TCP ones."""
    rendered = {t: by_key(template(helm, {"probe": {"transport": t}})) for t in TRANSPORTS}
    for transport, docs in rendered.items():
        pod = docs[f"DaemonSet/{RELEASE}"]["spec"]["template"]
        (exporter,) = pod["spec"]["containers"]
        ports = {p["name"]: p for p in exporter["ports"]}
        host_ports = [p for p in exporter["ports"] if "hostPort" in p]
        config = yaml.safe_load(docs[f"ConfigMap/{RELEASE}"]["data"]["config.yaml"])
        rules = docs[f"ClusterRole/{RELEASE}"]["rules"]
        assert ({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
                in rules) == (transport != "socket"), transport  # fmt: skip
        assert (f"Service/{RELEASE}-probe" in docs) == (transport == "service"), transport
        if transport == "socket":
            assert list(ports) == ["metrics"] and "listen_address" not in config["probe"]
            (init,) = pod["spec"]["initContainers"]
            assert init["name"] == "socket-dir" and init["securityContext"]["runAsUser"] == 0
            assert [v for v in pod["spec"]["volumes"] if "hostPath" in v] == [
                {
                    "name": "probe-socket",
                    "hostPath": {"path": "/run/guided-decoding-exporter", "type": "DirectoryOrCreate"},
                }
            ]
            continue
        assert "initContainers" not in pod["spec"] and not [
            v for v in pod["spec"]["volumes"] if "hostPath" in v
        ]
        assert ports["probe"]["containerPort"] == PROBE_PORT and ports["probe"]["protocol"] == "TCP"
        assert host_ports == ([ports["probe"]] if transport == "hostip" else [])
        assert ports["probe"].get("hostPort") == (PROBE_PORT if transport == "hostip" else None)
        assert config["probe"]["listen_address"] == f":{PROBE_PORT}"
        assert not pod["spec"].get("hostNetwork")
    svc, ds = rendered["service"][f"Service/{RELEASE}-probe"], rendered["service"][f"DaemonSet/{RELEASE}"]
    assert svc["spec"]["internalTrafficPolicy"] == "Local" and svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert svc["spec"]["selector"] == ds["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"] == [
        {"name": "probe", "port": PROBE_PORT, "targetPort": "probe", "protocol": "TCP"}
    ]
    assert svc["metadata"]["namespace"] == NAMESPACE
    # socket renders the objects the chart rendered before the TCP transports, and the NetworkPolicy
    assert sorted(rendered["socket"]) == sorted(
        [f"ServiceAccount/{RELEASE}", f"ClusterRole/{RELEASE}", f"ClusterRoleBinding/{RELEASE}",
         f"ConfigMap/{RELEASE}", f"DaemonSet/{RELEASE}", f"NetworkPolicy/{RELEASE}"]
    )  # fmt: skip
    # the port is one value: the container port, the Service's, the hostPort and the listener
    moved = {
        t: by_key(template(helm, {"probe": {"transport": t, "port": 9555}})) for t in ("service", "hostip")
    }
    (port,) = moved["service"][f"Service/{RELEASE}-probe"]["spec"]["ports"]
    assert port["port"] == 9555 and port["targetPort"] == "probe"
    probe = {
        p["name"]: p
        for p in moved["hostip"][f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]["containers"][0]["ports"]
    }["probe"]
    assert probe["containerPort"] == probe["hostPort"] == 9555


def test_openshift_scc_follows_the_transport(helm: str) -> None:
    for transport in TRANSPORTS:
        docs = by_key(
            template(helm, {"openshift": {"scc": {"enabled": True}}, "probe": {"transport": transport}})
        )
        scc = docs[f"SecurityContextConstraints/{RELEASE}"]
        assert scc["allowHostPorts"] is (transport == "hostip") and scc["allowHostNetwork"] is False
        assert scc["allowHostDirVolumePlugin"] is (transport == "socket")
        assert ("hostPath" in scc["volumes"]) is (transport == "socket")
        assert scc["allowedCapabilities"] == (["CHOWN", "FOWNER"] if transport == "socket" else [])


# ---- one source of truth: `helm template` with the matching values == kustomize build


def normalize(doc: dict[str, Any]) -> dict[str, Any]:
    """An object without what only Helm has (its labels, anywhere a label map is, and the config checksum)
    and without the namespace kustomize writes into the SCC (a kind it does not know is cluster-scoped)."""

    def strip(obj: Any) -> Any:
        if isinstance(obj, dict):
            out = {k: strip(v) for k, v in obj.items() if k not in HELM_ONLY and k != "checksum/config"}
            return {k: v for k, v in out.items() if not (k in ("labels", "annotations") and v == {})}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    doc = strip(doc)
    if doc["kind"] == "SecurityContextConstraints":
        doc["metadata"].pop("namespace", None)
    return doc


def assert_same(helm_docs: list[dict[str, Any]], kustomize_docs: list[dict[str, Any]]) -> None:
    left = {k: normalize(v) for k, v in by_key(helm_docs).items()}
    right = {k: normalize(v) for k, v in by_key(kustomize_docs).items() if v["kind"] != "Namespace"}
    assert sorted(left) == sorted(right)
    for key in left:
        assert left[key] == right[key], key


def test_helm_template_equals_kustomize(helm: str, tmp_path: Path) -> None:
    kps = {"additionalLabels": {"release": "kube-prometheus-stack"}}
    kps_values = {"podMonitor": {"enabled": True, **kps}, "prometheusRule": {"enabled": True, **kps}}
    os_values = {"openshift": {"scc": {"enabled": True}}}
    cases: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
        ({}, kustomize("kubernetes/base")),
        (
            {**kps_values, "dashboards": {"enabled": True}},
            kustomize("kubernetes/overlays/kube-prometheus-stack"),
        ),
        (
            {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
            kustomize_dir(overlay(tmp_path / "sm", ["base"], ["monitors", "servicemonitor"])),
        ),
        (os_values, kustomize_dir(overlay(tmp_path / "os", ["base"], ["openshift"]))),
        ({"runtimeClassName": "nvidia"}, kustomize_dir(overlay(tmp_path / "g", ["base"], ["gpu-operator"]))),
        (
            {"priorityClassName": "system-node-critical"},
            kustomize_dir(overlay(tmp_path / "pc", ["base"], ["priority-class"])),
        ),
    ]  # fmt: skip
    # the transports: their components listed after the others
    for transport, (component, _) in TRANSPORTS.items():
        if not component:
            continue
        chosen = {"probe": {"transport": transport}}
        cases += [
            (chosen, kustomize_dir(overlay(tmp_path / transport, ["base"], [component]))),
            (
                {**chosen, **os_values, "runtimeClassName": "nvidia", "serviceMonitor": {"enabled": True}},
                kustomize_dir(
                    overlay(
                        tmp_path / f"{transport}-all",
                        ["base"],
                        ["servicemonitor", "openshift", "gpu-operator", component],
                    )
                ),
            ),
        ]
    for values, built in cases:
        assert_same(template(helm, values), built)
    # and in another namespace: the chart's --namespace, kustomize's namespace:
    assert_same(
        template(helm, {"openshift": {"scc": {"enabled": True}}}, namespace="other"),
        kustomize_dir(overlay(tmp_path / "other", ["base"], ["openshift"], namespace="other")),
    )
    assert_same(
        template(helm, {"probe": {"transport": "socket"}}, namespace="other"),
        kustomize_dir(overlay(tmp_path / "other-socket", ["base"], ["probe-socket"], namespace="other")),
    )


def test_equality_check_sees_a_difference(helm: str) -> None:
    with pytest.raises(AssertionError):
        assert_same(template(helm, {"runtimeClassName": "nvidia"}), kustomize("kubernetes/base"))
    with pytest.raises(AssertionError):
        assert_same(template(helm, {"podMonitor": {"enabled": True}}), kustomize("kubernetes/base"))
    for transport in ("hostip", "socket"):
        with pytest.raises(AssertionError):
            assert_same(template(helm, {"probe": {"transport": transport}}), kustomize("kubernetes/base"))


def test_existing_service_account(helm: str) -> None:
    docs = by_key(template(helm, {"serviceAccount": {"create": False, "name": "platform-sa"}}))
    assert not [k for k in docs if k.startswith("ServiceAccount/")]
    assert docs[f"ClusterRoleBinding/{RELEASE}"]["subjects"][0]["name"] == "platform-sa"
    assert docs[f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]["serviceAccountName"] == "platform-sa"
    out = run(helm, "template", RELEASE, str(CHART), "--set", "serviceAccount.create=false")
    assert out.returncode != 0 and "serviceAccount.name is required" in out.stderr, out.stderr


def test_the_daemon_judges_as_ci_from_the_same_gdx_yaml(helm: str, tmp_path: Path) -> None:
    """`helm upgrade -f .gdx.yaml`: the lint thresholds `gdx lint` reads from the file are the daemon's;
    CI's own keys pass the values schema; an explicit config.lint key wins; a typo is refused."""
    from exporter.daemon import config as cfg
    from exporter.kernel.lint_options import lint_thresholds_from
    from exporter.lint import lintconfig

    gdx_yaml = tmp_path / ".gdx.yaml"
    settings = {
        "engines": ["xgrammar"], "max-items": 30, "enum-size": 64, "budget": "2s", "dynamic-reuse": 3,
        "ignore": ["union_width"], "per-path-ignores": {"schemas/legacy/*": ["depth"]},
        "exceptions": [{"path": "s.json", "pointer": "/enum", "rule": "large_enum", "reason": "reviewed"}],
    }  # fmt: skip
    gdx_yaml.write_text(yaml.safe_dump({"lint": settings}))
    ci = lintconfig.load(gdx_yaml)
    rendered = run(helm, "template", RELEASE, str(CHART), "-f", str(gdx_yaml))
    assert rendered.returncode == 0, rendered.stderr
    (configmap,) = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "ConfigMap"]
    (tmp_path / "config.yaml").write_text(configmap["data"]["config.yaml"])
    daemon = cfg.load({"config_file": str(tmp_path / "config.yaml")}, {"NODE_NAME": "node-a"})
    assert daemon.lint_thresholds() == lint_thresholds_from(ci.thresholds)
    assert daemon.lint_thresholds() != cfg.load({}, {"NODE_NAME": "node-a"}).lint_thresholds()
    assert (daemon.lint_max_items, daemon.lint_enum_size, daemon.lint_budget) == (30, 64, 2.0)
    both = template(helm, {"lint": {"max-items": 30}, "config": {"lint": {"max_items": 40}}})
    (configmap,) = [d for d in both if d["kind"] == "ConfigMap"]
    assert yaml.safe_load(configmap["data"]["config.yaml"])["lint"] == {"max_items": 40}
    typo = run(helm, "template", RELEASE, str(CHART), "--set", "lint.max_items=3")
    assert typo.returncode != 0 and "max_items" in typo.stderr
