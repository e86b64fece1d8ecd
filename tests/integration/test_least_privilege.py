"""Least privilege in what ships (issue 47, items 13 and 4), with real Helm 4 and Helm 3 and the real
kustomize of kubectl: the RBAC is exactly `create` on tokenreviews (the TCP probe transports) plus
`list` on pods (pod discovery, only while it is on), never a binding to system:auth-delegator; the
ServiceAccount token is mounted only when the daemon calls the API; a NetworkPolicy admits the metrics
port and the probe port from the peers the values name and nothing else, in the chart and in the
kustomize base and components."""

from __future__ import annotations

import itertools
import os
import re
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
from tests.integration.test_helm import CHART, HELMS, NAMESPACE, RELEASE, by_key, helm_path, run, template
from tools.harness import ROOT

METRICS_PORT = 9479
PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
TOKENREVIEWS = {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
EVERY_POD = [{"namespaceSelector": {}}]
# discovery settings as the daemon reads them (parse_bool), on and off
DISCOVERY = {
    "default": ({}, True),
    "kubernetes off": ({"config": {"kubernetes": {"enabled": False}}}, False),
    "kubernetes off (a string)": ({"config": {"kubernetes": {"enabled": "off"}}}, False),
    "kubernetes on (a string)": ({"config": {"kubernetes": {"enabled": "yes"}}}, True),
    "vllm collector off": ({"config": {"collector": {"vllm": False}}}, False),
    "vllm collector on": ({"config": {"collector": {"vllm": "true"}}}, True),
}


@pytest.fixture(params=sorted(HELMS))
def helm(request: pytest.FixtureRequest) -> str:
    return helm_path(request.param)


def merged(*values: dict[str, Any]) -> dict[str, Any]:
    """Values dicts merged key by key (the config: sections of several cases together)."""
    out: dict[str, Any] = {}
    for value in values:
        for key, item in value.items():
            if isinstance(item, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], item)
            else:
                out[key] = item
    return out


def rbac_rules(docs: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, namespace, rule) of every Role and ClusterRole rule."""
    return [
        (d["kind"], d["metadata"].get("namespace", ""), rule)
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
        for rule in d["rules"]
    ]


def daemon_discovers(docs: list[dict[str, Any]], tmp_path: Path) -> bool:
    """Whether the daemon, given the rendered config.yaml, lists pods (what server.build_collectors does)."""
    from exporter.daemon import config as cfg

    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    path = tmp_path / "config.yaml"
    path.write_text(configmap["data"]["config.yaml"])
    loaded = cfg.load({"config_file": str(path)}, {"NODE_NAME": "node-a"})
    return loaded.kubernetes_enabled and loaded.collector_vllm


def pod_labels(docs: list[dict[str, Any]]) -> dict[str, str]:
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    return ds["spec"]["template"]["metadata"]["labels"]


def container_ports(docs: list[dict[str, Any]]) -> dict[str, int]:
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    (exporter,) = ds["spec"]["template"]["spec"]["containers"]
    return {p["name"]: p["containerPort"] for p in exporter["ports"]}


# ---- RBAC (item 13)


def test_default_cluster_role_is_tokenreviews_create_and_list_pods(helm: str) -> None:
    """The default install: one ClusterRole, exactly list pods and create tokenreviews, bound to the
    release's ServiceAccount alone; system:auth-delegator (which also creates SubjectAccessReviews)
    bound nowhere."""
    docs = template(helm, namespace="other")
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert role["metadata"]["name"] == RELEASE
    assert role["rules"] == [PODS, TOKENREVIEWS]
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": RELEASE,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": "other"}]
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    assert "auth-delegator" not in yaml.safe_dump_all(docs)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize("case", sorted(DISCOVERY))
def test_rules_follow_discovery_and_transport(helm: str, transport: str, case: str, tmp_path: Path) -> None:
    """Every transport, discovery on and off (as the daemon parses the setting), with and without
    rbac.namespaces: the pods rule exactly when the daemon lists pods (in the ClusterRole, or in a Role
    per namespace), the tokenreviews rule exactly with the TCP transports, nothing else; no objects
    left over; the token mounted exactly when one of them is there."""
    values, discovers = DISCOVERY[case]
    tcp = transport != "socket"
    for namespaces in ([], ["team-a", "team-b"]):
        chosen = merged(values, {"probe": {"transport": transport}, "rbac": {"namespaces": namespaces}})
        docs = template(helm, chosen)
        assert daemon_discovers(docs, tmp_path) is discovers  # the chart reads the toggle the daemon reads
        keyed = by_key(docs)
        cluster = ([PODS] if discovers and not namespaces else []) + ([TOKENREVIEWS] if tcp else [])
        roles = {ns: [PODS] for ns in namespaces} if discovers else {}
        if cluster:
            assert keyed[f"ClusterRole/{RELEASE}"]["rules"] == cluster
            assert keyed[f"ClusterRoleBinding/{RELEASE}"]["roleRef"]["name"] == RELEASE
        assert [d["kind"] for d in docs if d["kind"].startswith("Cluster")] == (
            ["ClusterRole", "ClusterRoleBinding"] if cluster else []
        )
        assert {d["metadata"]["namespace"]: d["rules"] for d in docs if d["kind"] == "Role"} == roles
        assert sorted(d["metadata"]["namespace"] for d in docs if d["kind"] == "RoleBinding") == sorted(roles)
        for kind, _, rule in rbac_rules(docs):
            assert rule in (PODS, TOKENREVIEWS), (kind, rule)  # no secrets, no get/watch, no wildcard
        token = bool(cluster or roles)
        assert keyed[f"ServiceAccount/{RELEASE}"]["automountServiceAccountToken"] is token
        pod = keyed[f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]
        assert pod.get("automountServiceAccountToken", True) is token
        for doc in docs:
            validate(doc, VERSIONS[-1])


def test_no_rule_grants_more_than_the_daemon_calls(helm: str) -> None:
    """Across every combination of transport, discovery, namespaces and the OpenShift SCC: no rule on
    Secrets or ConfigMaps, no wildcard, no verb but list, create and the SCC's use; no binding to a
    built-in role."""
    for transport, case, namespaces, scc in itertools.product(
        TRANSPORTS, DISCOVERY, ([], ["team-a"]), (False, True)
    ):
        values = merged(
            DISCOVERY[case][0],
            {"probe": {"transport": transport}, "rbac": {"namespaces": namespaces}},
            {"openshift": {"scc": {"enabled": scc}}},
        )
        docs = template(helm, values)
        for kind, _, rule in rbac_rules(docs):
            where = (transport, case, namespaces, kind, rule)
            assert not {"*", "secrets", "configmaps", "nodes", "nodes/proxy"} & set(rule["resources"]), where
            assert set(rule["verbs"]) <= {"list", "create", "use"} and "*" not in rule["apiGroups"], where
        for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
            assert not binding["roleRef"]["name"].startswith("system:"), binding["metadata"]["name"]


# ---- NetworkPolicy (item 4)


def network_policy(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    return policy


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_network_policy_admits_the_two_ports_from_pods_only(helm: str, transport: str) -> None:
    """On by default: it selects the DaemonSet's pods, isolates their ingress and admits the metrics
    port and (TCP transports) the probe port, each from every pod of the cluster and from nothing off
    it (no ipBlock); no other port; egress not isolated (the API server, the engines' ports)."""
    docs = template(helm, {"probe": {"transport": transport}})
    policy = network_policy(docs)
    assert policy["metadata"]["namespace"] == NAMESPACE and policy["metadata"]["name"] == RELEASE
    spec = policy["spec"]
    assert (
        spec["podSelector"]["matchLabels"]
        and spec["podSelector"]["matchLabels"].items() <= pod_labels(docs).items()
    )
    assert spec["policyTypes"] == ["Ingress"] and "egress" not in spec
    ports = container_ports(docs)
    want = [{"ports": [{"port": METRICS_PORT, "protocol": "TCP"}], "from": EVERY_POD}]
    if transport != "socket":
        want.append({"ports": [{"port": PROBE_PORT, "protocol": "TCP"}], "from": EVERY_POD})
    assert spec["ingress"] == want
    # the ports admitted are the container's, no more
    assert sorted(r["ports"][0]["port"] for r in spec["ingress"]) == sorted(ports.values())
    for version in VERSIONS:
        validate(policy, version)


def test_network_policy_values(helm: str) -> None:
    """The peers of each port are the values' (Prometheus's namespace and labels, the engines'); the
    probe rule follows probe.port; networkPolicy.enabled=false renders none."""
    prometheus = [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    engines = [
        {
            "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]},
            "podSelector": {"matchLabels": {"guided-decoding-exporter.io/probe": "injected"}},
        },
        {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
    ]
    values = {
        "networkPolicy": {"metrics": {"from": prometheus}, "probe": {"from": engines}},
        "probe": {"port": 9555},
    }
    docs = template(helm, values)
    policy = network_policy(docs)
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": METRICS_PORT, "protocol": "TCP"}], "from": prometheus},
        {"ports": [{"port": 9555, "protocol": "TCP"}], "from": engines},
    ]
    assert container_ports(docs)["probe"] == 9555
    for version in VERSIONS:
        validate(policy, version)
    assert not [
        d for d in template(helm, {"networkPolicy": {"enabled": False}}) if d["kind"] == "NetworkPolicy"
    ]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("networkPolicy.enabeld=false", "enabeld"),
        ("networkPolicy.metrics.from=null", "from"),  # an empty `from` would admit every source
        ("networkPolicy.probe.from[0].namespaceSelecter.x=y", "namespaceSelecter"),
        ("networkPolicy.metrics.from[0].ipBlock.cidrs=10.0.0.0/8", "cidr"),
    ],
)
def test_network_policy_values_schema_refuses_mistakes(helm: str, setting: str, message: str) -> None:
    out = run(helm, "template", RELEASE, str(CHART), "--set", setting)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_an_empty_from_is_refused(helm: str, tmp_path: Path) -> None:
    """`from: []` renders a rule with no peers, which Kubernetes reads as every source: refused."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"networkPolicy": {"probe": {"from": []}}}))
    out = run(helm, "template", RELEASE, str(CHART), "-f", str(values))
    assert out.returncode != 0 and "from" in out.stderr, out.stderr


# ---- the kustomize base and components


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_kustomize_builds_ship_the_same_least_privilege(transport: str, tmp_path: Path) -> None:
    """The base (service) and the transport components: the ClusterRole's rules, no auth-delegator
    binding, the NetworkPolicy's ports, in the namespace the overlay names."""
    component = TRANSPORTS[transport][0]
    components = [component] if component else []
    docs = kustomize_dir(overlay(tmp_path, ["base"], ["openshift", *components], namespace="other"))
    keyed = by_key(docs)
    tcp = transport != "socket"
    assert keyed[f"ClusterRole/{RELEASE}"]["rules"] == [PODS, *([TOKENREVIEWS] if tcp else [])]
    (binding,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == RELEASE
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": "other"}]
    assert "auth-delegator" not in yaml.safe_dump_all(docs)
    policy = network_policy(docs)
    assert policy["metadata"]["namespace"] == "other"
    assert [r["ports"] for r in policy["spec"]["ingress"]] == [
        [{"port": METRICS_PORT, "protocol": "TCP"}],
        *([[{"port": PROBE_PORT, "protocol": "TCP"}]] if tcp else []),
    ]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels(docs).items()
    for version in VERSIONS:
        for doc in docs:
            validate(doc, version)


def test_kustomize_base_has_the_network_policy() -> None:
    policy = network_policy(kustomize("kubernetes/base"))
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert [r["from"] for r in policy["spec"]["ingress"]] == [EVERY_POD, EVERY_POD]


def test_the_documented_discovery_off_overlay(tmp_path: Path) -> None:
    """docs/kubernetes.md's kustomize overlay for pod discovery off, as written: the ClusterRole keeps
    only the chart's rule for discovery off, and the daemon, told by its environment, lists no pods."""
    from exporter.daemon import config as cfg

    text = (ROOT / "docs" / "kubernetes.md").read_text()
    (block,) = re.findall(r"```yaml\n(# my-overlay/kustomization.yaml: pod discovery off.*?)```", text, re.S)
    doc = yaml.safe_load(block)
    doc["resources"] = [os.path.relpath(DEPLOY / "kubernetes" / "base", tmp_path)]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    built = kustomize_dir(tmp_path)
    keyed = by_key(built)
    chart = by_key(template(helm_path("helm4"), {"config": {"kubernetes": {"enabled": False}}}))
    assert (
        keyed[f"ClusterRole/{RELEASE}"]["rules"] == chart[f"ClusterRole/{RELEASE}"]["rules"] == [TOKENREVIEWS]
    )
    (exporter,) = keyed[f"DaemonSet/{RELEASE}"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in exporter["env"] if "value" in e}
    assert env["GDX_KUBERNETES_ENABLED"] == "false"
    path = tmp_path / "config.yaml"
    path.write_text(keyed[f"ConfigMap/{RELEASE}"]["data"]["config.yaml"])
    assert cfg.load({"config_file": str(path)}, {"NODE_NAME": "node-a"}).kubernetes_enabled
    assert not cfg.load({"config_file": str(path)}, {"NODE_NAME": "node-a", **env}).kubernetes_enabled
    for doc in built:
        validate(doc, VERSIONS[-1])
