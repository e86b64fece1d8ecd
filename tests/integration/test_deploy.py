"""The Kubernetes manifests a platform team applies as is: valid for Kubernetes 1.28 to 1.33 (strict,
unknown fields are errors), the operator's CRDs' fields checked, generated parts in sync with their
sources, and the security posture asserted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tools.harness import ROOT

DEPLOY = ROOT / "deploy"
VERSIONS = ["1.28", "1.29", "1.30", "1.31", "1.32", "1.33"]
CRD_KINDS = ("PodMonitor", "ServiceMonitor", "PrometheusRule")
OPERATOR = json.loads((ROOT / "tests/support/data/prometheus-operator-v1.schema.json").read_text())
BUILDS = ["kubernetes/base", "kubernetes/overlays/kube-prometheus-stack", "vllm"]


def kustomize(path: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with its built-in kustomize) is needed to build deploy/"
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def manifests() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        if path.name == "kustomization.yaml" or (path.parent.name == "base" and path.name == "config.yaml"):
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and "kind" in doc:
                docs.append((str(path.relative_to(ROOT)), doc))
    for build in BUILDS:
        docs.extend((f"kustomize {build}", d) for d in kustomize(build))
    return docs


def validate(doc: dict[str, Any], version: str) -> None:
    if doc["kind"] in CRD_KINDS:
        jsonschema.validate(doc, {**OPERATOR, "$ref": f"#/$defs/{doc['kind']}"})
    elif doc.get("metadata", {}).get("name") != "ignored-by-target":  # a strategic-merge patch, not an object
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid(version: str) -> None:
    docs = manifests()
    kinds = "Namespace ServiceAccount ClusterRole ClusterRoleBinding ConfigMap DaemonSet Deployment Service"
    kinds += " PodMonitor ServiceMonitor PrometheusRule Secret"
    assert {d["kind"] for _, d in docs} >= set(kinds.split())
    for where, doc in docs:
        try:
            validate(doc, version)
        except Exception as err:
            raise AssertionError(f"{where}: {doc['kind']} {doc['metadata'].get('name')}: {err}") from err


def test_validation_catches_an_unknown_field() -> None:
    (ds,) = [d for _, d in manifests() if d["kind"] == "DaemonSet"][:1]
    ds["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privilegd"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, "1.33", strict=True)
    pm = next(d for _, d in manifests() if d["kind"] == "PodMonitor")
    pm["spec"]["podMetricsEndpoints"][0]["intervall"] = "15s"
    with pytest.raises(jsonschema.ValidationError):
        validate(pm, "1.33")


def test_generated_parts_match_their_sources() -> None:
    out = subprocess.run(
        [sys.executable, str(DEPLOY / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    base = {d["kind"] + "/" + d["metadata"]["name"]: d for d in kustomize("kubernetes/base")}
    rule = yaml.safe_load((ROOT / "alerts" / "prometheusrule.yaml").read_text())
    assert base["PrometheusRule/guided-decoding-exporter"]["spec"] == rule["spec"]
    dashboards = base["ConfigMap/guided-decoding-dashboards"]
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboards["data"]["guided-decoding.json"]) == json.loads(
        (ROOT / "dashboards" / "guided-decoding.json").read_text()
    )
    config = yaml.safe_load(base["ConfigMap/guided-decoding-exporter"]["data"]["config.yaml"])
    from exporter import config as cfg

    path = DEPLOY / "kubernetes" / "base" / "config.yaml"
    loaded = cfg.load({"config_file": str(path)}, {"NODE_NAME": "node-a"})  # the daemon accepts it as is
    assert loaded.kubernetes_enabled and loaded.probe_socket == config["probe"]["socket"]


def test_security_posture() -> None:
    docs = kustomize("kubernetes/base")
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    pod = ds["spec"]["template"]["spec"]
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    for container in pod["containers"] + pod["initContainers"]:
        sc = container["securityContext"]
        assert not sc.get("privileged"), container["name"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["limits"] and container["resources"]["requests"]
    (exporter,) = pod["containers"]
    assert "runAsUser" not in exporter["securityContext"]  # the pod's non-root user
    assert set(pod["initContainers"][0]["securityContext"]["capabilities"]["add"]) == {"CHOWN", "FOWNER"}
    host_paths = [v for v in pod["volumes"] if "hostPath" in v]
    assert [v["hostPath"]["path"] for v in host_paths] == ["/run/guided-decoding-exporter"]  # the socket only
    mounts = {m["name"]: m for c in pod["containers"] for m in c["volumeMounts"]}
    assert mounts["config"]["readOnly"] is True
    assert (
        exporter["livenessProbe"]["httpGet"]["path"]
        == exporter["readinessProbe"]["httpGet"]["path"]
        == "/healthz"
    )
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    env = {e["name"]: e for e in exporter["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"


def test_overlay_labels_for_kube_prometheus_stack_and_engine_patch() -> None:
    overlay = kustomize("kubernetes/overlays/kube-prometheus-stack")
    for doc in overlay:
        if doc["kind"] in ("PodMonitor", "PrometheusRule"):
            assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (engine,) = [d for d in kustomize("vllm") if d["kind"] == "Deployment"]
    pod = engine["spec"]["template"]
    assert pod["metadata"]["annotations"]["guided-decoding-exporter.io/scrape"] == "true"
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["GDX_PROBE_SOCKET"]["value"] == "/run/guided-decoding-exporter/probe.sock"
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/run/guided-decoding-exporter"}
    assert 65532 in pod["spec"]["securityContext"]["supplementalGroups"]
