"""docs/install.md with real tools. Step 1: kube-prometheus-stack installed with
`-f alerts/alertmanager/kube-prometheus-stack-values.yaml` gives Alertmanager a configuration it
accepts, that keeps the chart's own routing and adds ours; the old `--set-file alertmanager.config=`
gave one it refuses.

The chart cannot be downloaded here, so each test builds a stand-in chart: its values.yaml is the
chart's default `alertmanager.config` as read from kube-prometheus-stack 88.5.3
(tests/support/data/kube-prometheus-stack-88.5.3-alertmanager-values.yaml) and its secret template
renders that value the way the real chart's templates/alertmanager/secret.yaml does (`toYaml` of the
value, `tpl` only with `tplConfig`). Real `helm template` (Helm 4 and Helm 3) renders it, real
`amtool` checks and routes the result, and a real Alertmanager pages a local PagerDuty endpoint with
it. install.md's own step 1 and step 6 commands are checked against the same files. Steps 3 and 4:
their helm and kustomize commands render, as written, what the stack selects and step 6 calls."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_alerts import _alert_labels, _post
from tests.integration.test_deploy import INIT_CONTAINER, TRANSPORTS, assert_injected, kustomize_dir
from tests.integration.test_helm import HELMS, helm_path
from tests.support import pod_security
from tools.harness import ROOT
from tools.harness.processes import Alertmanager, Receiver

VALUES = ROOT / "alerts" / "alertmanager" / "kube-prometheus-stack-values.yaml"
EXAMPLE = ROOT / "alerts" / "alertmanager" / "alertmanager.yml"
CHART_DEFAULTS = ROOT / "tests" / "support" / "data" / "kube-prometheus-stack-88.5.3-alertmanager-values.yaml"
MOUNTED_KEY = "/etc/alertmanager/secrets/alertmanager-pagerduty/routing-key"
INSTALL_MD = ROOT / "docs" / "install.md"
CHART_VERSION = "88.5.3"

CHART_YAML = """\
apiVersion: v2
name: kube-prometheus-stack
description: stand-in for kube-prometheus-stack 88.5.3, its Alertmanager secret and spec.secrets only
version: 88.5.3
"""
# The chart's data section of templates/alertmanager/secret.yaml, same branches: with tplConfig,
# stringConfig or a string config or the map through `tpl`; without it (the default), `toYaml` of
# the value, whatever its type. The chart's helper templates are replaced by the names they give for
# release `kube-prometheus-stack` in namespace `monitoring`.
SECRET_TEMPLATE = """\
{{- if and .Values.alertmanager.enabled (not .Values.alertmanager.alertmanagerSpec.useExistingSecret) }}
apiVersion: v1
kind: Secret
metadata:
  name: alertmanager-{{ .Release.Name }}-alertmanager
  namespace: {{ .Release.Namespace }}
data:
{{- if .Values.alertmanager.tplConfig }}
{{- if .Values.alertmanager.stringConfig }}
  alertmanager.yaml: {{ tpl (.Values.alertmanager.stringConfig) . | b64enc | quote }}
{{- else if eq (typeOf .Values.alertmanager.config) "string" }}
  alertmanager.yaml: {{ tpl (.Values.alertmanager.config) . | b64enc | quote }}
{{- else }}
  alertmanager.yaml: {{ tpl (toYaml .Values.alertmanager.config) . | b64enc | quote }}
{{- end }}
{{- else }}
  alertmanager.yaml: {{ toYaml .Values.alertmanager.config | b64enc | quote }}
{{- end }}
{{- range $key, $val := .Values.alertmanager.templateFiles }}
  {{ $key }}: {{ $val | b64enc | quote }}
{{- end }}
{{- end }}
"""
# templates/alertmanager/alertmanager.yaml: the secrets the operator mounts under /etc/alertmanager/secrets/
ALERTMANAGER_TEMPLATE = """\
apiVersion: monitoring.coreos.com/v1
kind: Alertmanager
metadata:
  name: {{ .Release.Name }}-alertmanager
  namespace: {{ .Release.Namespace }}
spec:
{{- if .Values.alertmanager.alertmanagerSpec.secrets }}
  secrets:
{{ toYaml .Values.alertmanager.alertmanagerSpec.secrets | indent 4 }}
{{- end }}
"""
# The command install.md step 1 had: the example as one JSON string through --set-file.
OLD_STEP = (
    "sed 's#/etc/alertmanager/secrets/pagerduty-routing-key"
    "#/etc/alertmanager/secrets/alertmanager-pagerduty/routing-key#' alerts/alertmanager/alertmanager.yml"
    " | {python} -c 'import sys, yaml, json; print(json.dumps(yaml.safe_load(sys.stdin)))'"
)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: `make sysdeps` installs it with apt")
    return path


def stand_in_chart(where: Path) -> Path:
    chart = where / "kube-prometheus-stack"
    (chart / "templates" / "alertmanager").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART_YAML)
    shutil.copy(CHART_DEFAULTS, chart / "values.yaml")
    (chart / "templates" / "alertmanager" / "secret.yaml").write_text(SECRET_TEMPLATE)
    (chart / "templates" / "alertmanager" / "alertmanager.yaml").write_text(ALERTMANAGER_TEMPLATE)
    return chart


def helm_template(name: str, where: Path, *args: str) -> dict[str, dict[str, Any]]:
    """`helm template kube-prometheus-stack <stand-in> -n monitoring ARGS`: the documents by kind."""
    chart = stand_in_chart(where)
    home = {f"HELM_{d}_HOME": str(where / f"helm-{d.lower()}") for d in ("CACHE", "CONFIG", "DATA")}
    out = subprocess.run(
        [helm_path(name), "template", "kube-prometheus-stack", str(chart), "-n", "monitoring", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=60, env={**os.environ, **home},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}


def rendered_config(docs: dict[str, dict[str, Any]]) -> str:
    return base64.b64decode(docs["Secret"]["data"]["alertmanager.yaml"]).decode()


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("amtool"), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module", params=sorted(HELMS))
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The alertmanager.yaml the chart's secret holds after step 1, as written to disk."""
    where = tmp_path_factory.mktemp(request.param)
    docs = helm_template(request.param, where, "-f", str(VALUES))
    assert docs["Alertmanager"]["spec"]["secrets"] == ["alertmanager-pagerduty"]
    path = where / "alertmanager.yaml"
    path.write_text(rendered_config(docs))
    return path


def test_step_1_renders_a_config_alertmanager_accepts(rendered: Path) -> None:
    check = amtool("check-config", str(rendered))
    assert check.returncode == 0, check.stdout + check.stderr
    config = yaml.safe_load(rendered.read_text())
    # what Helm merged is exactly the values file's map: nothing of the chart's defaults lost or
    # added behind its back, and Alertmanager's {{ }} templates left alone (no tplConfig)
    assert config == yaml.safe_load(VALUES.read_text())["alertmanager"]["config"]
    keys = [pd["routing_key_file"] for r in config["receivers"] for pd in r.get("pagerduty_configs", [])]
    assert keys and set(keys) == {MOUNTED_KEY}  # where the operator mounts spec.secrets[0]


def test_step_1_keeps_the_charts_own_configuration(rendered: Path) -> None:
    chart = yaml.safe_load(CHART_DEFAULTS.read_text())["alertmanager"]["config"]
    config = yaml.safe_load(rendered.read_text())
    assert config["global"] == chart["global"] and config["templates"] == chart["templates"]
    for key, value in chart["route"].items():
        if key != "routes":
            assert config["route"][key] == value, key
    assert config["route"]["routes"][: len(chart["route"]["routes"])] == chart["route"]["routes"]
    assert all(rule in config["inhibit_rules"] for rule in chart["inhibit_rules"])
    assert all(receiver in config["receivers"] for receiver in chart["receivers"])


def _alerts() -> dict[str, str]:
    rules = yaml.safe_load((ROOT / "alerts" / "guided-decoding.rules.yml").read_text())
    return {r["alert"]: r["labels"]["severity"] for g in rules["groups"] for r in g["rules"] if "alert" in r}


def test_step_1_routes_each_alert(rendered: Path) -> None:
    """`amtool config routes test` on the rendered config: the chart's routes, ours, and the stack's
    own critical alerts paging (install.md and the values file say why)."""

    def receiver(**labels: str) -> str:
        out = amtool(
            "config",
            "routes",
            "test",
            "--config.file",
            str(rendered),
            *(f"{k}={v}" for k, v in labels.items()),
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.strip()

    assert receiver(alertname="Watchdog", severity="none") == "null"
    assert receiver(alertname="InfoInhibitor", severity="none", namespace="default") == "null"
    ours = {"critical": "pagerduty", "warning": "ticket", "info": "blackhole"}
    alerts = _alerts()
    assert len(alerts) == 19 and {s for s in alerts.values()} == set(ours)
    for name, severity in alerts.items():
        got = receiver(alertname=name, severity=severity, instance="node-a", pod="vllm-0")
        assert got == ours[severity], name
    # the stack's own: critical pages (its own PagerDuty receiver), warning and info as in the chart
    assert receiver(alertname="KubeAPIDown", severity="critical") == "pagerduty-stack"
    assert (
        receiver(alertname="KubePodCrashLooping", severity="critical", namespace="default")
        == "pagerduty-stack"
    )
    assert receiver(alertname="KubePodCrashLooping", severity="warning", namespace="default") == "null"
    assert receiver(alertname="CPUThrottlingHigh", severity="info", namespace="default") == "null"


def _effective(routes: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    """Each GuidedDecoding route with what it inherits from the root filled in."""
    inherited = ("group_by", "group_wait", "group_interval", "repeat_interval")
    return [
        {**{k: parent[k] for k in inherited}, **r} if r["receiver"] != "blackhole" else r
        for r in routes
        if any("GuidedDecoding" in m for m in r.get("matchers", []))
    ]


def test_our_routing_is_the_examples() -> None:
    """The values file and alerts/alertmanager/alertmanager.yml (what test_alerts.py tests on a real
    Alertmanager) route, group, notify and inhibit the GuidedDecoding alerts the same way."""
    values = yaml.safe_load(VALUES.read_text())["alertmanager"]["config"]
    example = yaml.safe_load(EXAMPLE.read_text())
    assert _effective(values["route"]["routes"], values["route"]) == _effective(
        example["route"]["routes"], example["route"]
    )
    by_name = {r["name"]: r for r in values["receivers"]}
    for receiver in example["receivers"]:
        receiver = json.loads(json.dumps(receiver))
        for pd in receiver.get("pagerduty_configs", []):
            pd["routing_key_file"] = MOUNTED_KEY  # the example's own path is a plain file
        assert by_name[receiver["name"]] == receiver, receiver["name"]
    ours = [r for r in values["inhibit_rules"] if "GuidedDecoding" in json.dumps(r)]
    assert ours == example["inhibit_rules"]


@pytest.mark.parametrize("name", sorted(HELMS))
def test_the_old_set_file_step_renders_a_string_alertmanager_refuses(name: str, tmp_path: Path) -> None:
    """The bug: `--set-file alertmanager.config=<json>` hands the chart a string; toYaml renders it as
    one quoted scalar, and Alertmanager cannot read a string as its configuration: nothing pages."""
    json_file = tmp_path / "config.json"
    old = subprocess.run(
        ["bash", "-c", OLD_STEP.format(python=sys.executable)], capture_output=True, text=True, cwd=ROOT
    )
    assert old.returncode == 0, old.stderr
    json_file.write_text(old.stdout)
    docs = helm_template(
        name, tmp_path, "--set", "alertmanager.alertmanagerSpec.secrets[0]=alertmanager-pagerduty",
        "--set-file", f"alertmanager.config={json_file}",
    )  # fmt: skip
    text = rendered_config(docs)
    assert isinstance(yaml.safe_load(text), str)  # the whole configuration as one string
    (tmp_path / "alertmanager.yaml").write_text(text)
    check = amtool("check-config", str(tmp_path / "alertmanager.yaml"))
    assert check.returncode != 0
    assert (
        "cannot unmarshal !!str" in check.stdout + check.stderr
        and "config.plain" in check.stdout + check.stderr
    )


def _shell_lines(section: str) -> list[str]:
    """The commands of a step's ```sh blocks, continuation lines joined."""
    text = INSTALL_MD.read_text()
    step = text[text.index(f"## {section}") :]
    step = step[: step.index("\n## ", 1)]
    blocks = [b.split("\n", 1)[1] for b in step.split("```sh")[1:]]
    joined = "\n".join(b.split("```")[0] for b in blocks).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.startswith("#")]


def test_install_md_runs_the_checked_commands(rendered: Path) -> None:
    """install.md's step 1 commands install the values file this test renders, with the secret and key
    it mounts; the routes it tests give the receivers it names; step 6's silence uses only labels the
    page carries."""
    values = yaml.safe_load(VALUES.read_text())["alertmanager"]
    step1 = _shell_lines("1.")
    assert not [line for line in step1 if "--set-file" in line or "--set " in line]
    (install,) = [line for line in step1 if line.startswith("helm upgrade --install")]
    assert f"-f {VALUES.relative_to(ROOT)}" in install and f"--version {CHART_VERSION}" in install, install
    assert "kube-prometheus-stack prometheus-community/kube-prometheus-stack -n monitoring" in install
    (secret,) = [line for line in step1 if "create secret generic" in line]
    (name,) = values["alertmanagerSpec"]["secrets"]
    assert f"create secret generic {name} --from-file=routing-key=" in secret
    assert f"/etc/alertmanager/secrets/{name}/routing-key" == MOUNTED_KEY
    routes = [line for line in step1 if line.startswith("amtool config routes test")]
    assert len(routes) >= 2
    for line in routes:
        command, expected = line.split("#")
        labels = [a for a in command.split()[4:] if not a.startswith("--config.file")]
        out = amtool("config", "routes", "test", "--config.file", str(rendered), *labels)
        assert out.returncode == 0 and out.stdout.strip() == expected.strip(), line + out.stderr
    (silence,) = [line for line in _shell_lines("6.") if "silence add" in line]
    matchers = dict(
        a.split("=", 1) for a in silence.split("silence add")[1].split() if not a.startswith("--")
    )
    assert matchers["alertname"] == "GuidedDecodingCompileP95High" and "--duration" in silence
    assert set(matchers) <= _alert_labels()["GuidedDecodingCompileP95High"] - {"severity"}, matchers


def test_step_1_pages_on_a_real_alertmanager(tmp_path: Path) -> None:
    """The rendered config (Helm 4) on a real Alertmanager: GuidedDecodingCompileP95High and the stack's
    KubeAPIDown reach the local PagerDuty endpoint with the routing key from the mounted secret's
    file; Watchdog and a stack warning do not; the warning GuidedDecoding alert opens a ticket.
    Only the key file's path, the endpoints' URLs and the timers are changed for the test."""
    config = yaml.safe_load(rendered_config(helm_template("helm4", tmp_path, "-f", str(VALUES))))
    receiver = Receiver()
    key = tmp_path / "routing-key"
    key.write_text("R0UT1NG")
    for r in config["receivers"]:
        for pd in r.get("pagerduty_configs", []):
            assert pd["routing_key_file"] == MOUNTED_KEY
            pd["routing_key_file"], pd["url"] = str(key), receiver.url + "/v2/enqueue"
        for hook in r.get("webhook_configs", []):
            hook["url"] = receiver.url + "/ticket"
    for route in [config["route"], *config["route"]["routes"]]:
        route.update(group_wait="1s", group_interval="1s")
    am = Alertmanager(tmp_path, config)
    try:

        def alert(name: str, severity: str, summary: str, **labels: str) -> dict[str, Any]:
            annotations = {
                "summary": summary,
                "description": f"{name} {labels}",
                "runbook_url": f"https://rb/{name}",
            }
            if name.startswith("GuidedDecoding"):
                annotations["dashboard_url"] = "https://grafana/d/guided-decoding/guided-decoding"
            return {"labels": {"alertname": name, "severity": severity, **labels}, "annotations": annotations}

        sent = [
            alert("GuidedDecodingCompileP95High", "critical", "Grammar compiles are slow", instance="node-a",
                  pod="vllm-0", backend="xgrammar"),
            alert("GuidedDecodingDynamicSchema", "warning", "A schema varies", instance="node-a",
                  family="3fa2b1c4d5e6"),
            alert("KubeAPIDown", "critical", "Target disappeared from Prometheus target discovery."),
            alert("Watchdog", "none", "Always firing"),
            alert("KubePodCrashLooping", "warning", "Pod is crash looping.", namespace="default"),
        ]  # fmt: skip
        _post(am.url + "/api/v2/alerts", sent)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pages = {e["payload"]["summary"].split(":")[0] for e in receiver.pagerduty()}
            tickets = [e for p, e in receiver.events if p == "/ticket"]
            if len(pages) >= 2 and tickets:
                break
            time.sleep(0.3)
        time.sleep(2)  # a few more group intervals: nothing else may arrive
        events = receiver.pagerduty()
        assert {e["payload"]["summary"].split(":")[0] for e in events} == {
            "GuidedDecodingCompileP95High",
            "KubeAPIDown",
        }
        assert {e["routing_key"] for e in events} == {"R0UT1NG"}
        page = next(e for e in events if e["payload"]["summary"].startswith("GuidedDecodingCompileP95High"))
        assert page["event_action"] == "trigger" and page["payload"]["severity"] == "critical"
        assert page["client"] == "guided-decoding-exporter"
        assert {link["text"] for link in page["links"]} == {"runbook", "dashboard"}
        stack = next(e for e in events if e["payload"]["summary"].startswith("KubeAPIDown"))
        assert stack["client"] == "kube-prometheus-stack"
        tickets = [e for p, e in receiver.events if p == "/ticket"]
        assert {t["groupLabels"]["alertname"] for t in tickets} == {"GuidedDecodingDynamicSchema"}
    finally:
        am.stop()
        receiver.stop()


# ---- steps 3 and 4: the exporter and the engines, as install.md writes them ---------------------------

REGISTRY = "registry.example"
LABEL = re.compile(r"kubectl label namespace (\S+)((?: pod-security\.kubernetes\.io/[a-z]+=[a-z]+)+)")


def _helm_home(tmp_path: Path) -> dict[str, str]:
    return {f"HELM_{d}_HOME": str(tmp_path / d.lower()) for d in ("CACHE", "CONFIG", "DATA")}


def _labels(command: str) -> dict[str, str]:
    """The Pod Security labels a `kubectl label namespace NS k=v ...` command sets (flags aside)."""
    match = LABEL.search(command)
    assert match, command
    return dict(a.split("=", 1) for a in match.group(2).split())


def _notes_labels(tmp_path: Path, *args: str) -> dict[str, str]:
    """The label command the chart's NOTES print for `helm install ARGS` (Helm 4 renders NOTES with
    `--dry-run=client`, without a cluster)."""
    out = subprocess.run(
        [helm_path("helm4"), "install", *args, "--dry-run=client"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={**os.environ, **_helm_home(tmp_path), "KUBECONFIG": "/nonexistent"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return _labels(out.stdout.split("NOTES:", 1)[1])


def _transport_table() -> dict[str, list[str]]:
    """Step 3's table of transports: transport -> its cells (Helm, kustomize, the exporter's namespace,
    the engines' namespaces)."""
    step = INSTALL_MD.read_text().split("## 3.", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in step.splitlines():
        if line.startswith("| `") and "`probe.transport`" not in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].split("`")[1]] = cells[1:]
    return rows


def _inject(*args: str, stdin: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "inject", *args],
        input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _pod(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = doc["spec"]["template"]
    return pod["spec"], pod["metadata"]


@pytest.mark.parametrize("name", sorted(HELMS))
def test_step_3a_helm_commands_render_what_kube_prometheus_stack_selects(name: str, tmp_path: Path) -> None:
    """Step 3a's `helm upgrade --install`, run as `helm template` with every flag as written: the release
    label of step 1 on the monitor and the rules, the dashboards where Grafana's sidecar looks, the
    image given; its namespace labels are the base Namespace's, at the level the chart's NOTES ask for
    with those flags, and the DaemonSet's pods meet it (upstream's checks)."""
    step3 = _shell_lines("3.")
    (install,) = [line for line in step3 if line.startswith("helm upgrade --install")]
    args = install.replace("$REGISTRY", REGISTRY).split()[3:]
    out = subprocess.run(
        [helm_path(name), "template", *args],  # release name, chart and flags as written
        capture_output=True, text=True, cwd=ROOT, timeout=60, env={**os.environ, **_helm_home(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}
    (stack,) = [line for line in _shell_lines("1.") if line.startswith("helm upgrade --install")]
    assert stack.split()[3] == "kube-prometheus-stack"  # step 1's release: the label its Prometheus selects
    for kind in ("PodMonitor", "PrometheusRule"):
        (doc,) = [d for (k, _), d in docs.items() if k == kind]
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack", kind
        assert doc["metadata"]["namespace"] == "guided-decoding"
    (dashboards,) = [d for (k, n), d in docs.items() if k == "ConfigMap" and "dashboard" in n]
    assert dashboards["metadata"]["namespace"] == "monitoring"
    (ds,) = [d for (k, _), d in docs.items() if k == "DaemonSet"]
    images = {c["image"] for c in ds["spec"]["template"]["spec"]["containers"]}
    assert images == {f"{REGISTRY}/guided-decoding-exporter:0.1.0"}
    # the default transport: the probes' Service, node-local, and the TokenReview rule
    service = docs[("Service", "guided-decoding-exporter-probe")]
    assert service["spec"]["internalTrafficPolicy"] == "Local"
    tokenreviews = {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["tokenreviews"],
        "verbs": ["create"],
    }
    assert tokenreviews in docs[("ClusterRole", "guided-decoding-exporter")]["rules"]
    (label,) = [line for line in step3 if line.startswith("kubectl label namespace guided-decoding")]
    labels = _labels(label)
    base = kustomize_dir(ROOT / "deploy" / "kubernetes" / "base")
    (namespace,) = [d for d in base if d["kind"] == "Namespace"]
    assert labels == {
        k: v for k, v in namespace["metadata"]["labels"].items() if k.startswith("pod-security")
    }
    notes = _notes_labels(tmp_path, *args)  # what `helm install` prints for these flags
    assert notes.items() <= labels.items(), notes
    level = labels["pod-security.kubernetes.io/enforce"]
    assert level == "restricted" and set(labels.values()) == {level}
    assert pod_security.level_of(*_pod(ds)) == level


def test_step_3_transports_are_what_the_chart_and_kustomize_make(tmp_path: Path) -> None:
    """Each row of step 3's transport table: its `--set` makes the chart's NOTES ask for the exporter's
    namespace level the row gives, its component relabels the 3b overlay's namespace to it, the
    DaemonSet's pods meet it; `gdx inject --transport` of the example engine keeps the level its pod had
    where the row says "what their pods need", and needs the level the row names otherwise."""
    rows = _transport_table()
    assert set(rows) == set(TRANSPORTS) and rows["service"][0] == "nothing to set"
    step3 = _shell_lines("3.")
    (install,) = [line for line in step3 if line.startswith("helm upgrade --install")]
    release_and_chart = install.split()[3:5]
    (cd,) = [line for line in step3 if line.startswith("cd deploy/kubernetes/overlays/")]
    overlay_dir = ROOT / cd.split()[1]
    (engine,) = yaml.safe_load_all((ROOT / "deploy" / "vllm" / "deployment.yaml").read_text())
    before = pod_security.level_of(*_pod(engine))
    for transport, (helm_cell, kustomize_cell, exporter_cell, engines_cell) in rows.items():
        level = exporter_cell.strip("`")
        assert level == TRANSPORTS[transport][1], transport
        sets = re.findall(r"--set (\S+)`", helm_cell)
        assert sets == ([] if transport == "service" else [f"probe.transport={transport}"]), helm_cell
        flags = [a for s in sets for a in ("--set", s)]
        notes = _notes_labels(tmp_path / transport, *release_and_chart, "-n", "guided-decoding", *flags)
        assert notes == {"pod-security.kubernetes.io/enforce": level}, transport
        components = re.findall(r"`(\.\./\.\./components/[a-z-]+)`", kustomize_cell)
        assert [Path(c).name for c in components] == [c for c in [TRANSPORTS[transport][0]] if c]
        where = tmp_path / f"{transport}-kustomize"
        where.mkdir()
        (where / "kustomization.yaml").write_text(yaml.safe_dump({
            "resources": [os.path.relpath(overlay_dir, where)],
            "components": [os.path.relpath((overlay_dir / c).resolve(), where) for c in components],
        }))  # fmt: skip
        built = kustomize_dir(where)
        (ns,) = [d for d in built if d["kind"] == "Namespace"]
        assert {k: v for k, v in ns["metadata"]["labels"].items() if k.startswith("pod-security")} == {
            f"pod-security.kubernetes.io/{mode}": level for mode in ("enforce", "audit", "warn")
        }, transport
        (ds,) = [d for d in built if d["kind"] == "DaemonSet"]
        assert pod_security.level_of(*_pod(ds)) == level, transport
        (injected,) = _inject("--transport", transport, "-", stdin=yaml.safe_dump(engine))
        after = pod_security.level_of(*_pod(injected))
        if engines_cell == "what their pods need":
            assert after == before == "baseline", transport  # the example runs as root: baseline
        else:
            assert after == engines_cell.strip("`") == "privileged", transport


def test_step_3b_overlay_builds_with_the_release_label() -> None:
    step3 = _shell_lines("3.")
    (cd,) = [line for line in step3 if line.startswith("cd deploy/kubernetes/overlays/")]
    overlay = ROOT / cd.split()[1]
    docs = kustomize_dir(overlay)
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "DaemonSet", "PodMonitor", "PrometheusRule", "ConfigMap", "Service"} <= kinds
    for doc in docs:
        if doc["kind"] in ("PodMonitor", "PrometheusRule"):
            assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
    (exporter,) = ds["spec"]["template"]["spec"]["containers"]
    (edit,) = [line for line in step3 if line.startswith("kustomize edit set image")]
    assert exporter["image"].split(":")[0] == edit.split()[-1].split("=")[0]  # what it names
    assert exporter["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert any(line.startswith("curl -s localhost:9479/readyz") for line in step3)


def _assert_injected_with(doc: dict[str, Any], image: str) -> None:
    """The contract's injected pod (the service transport), its copy step from the exporter image
    `image` (`gdx inject` gives it the engine container's security context, kept at its level)."""
    spec, metadata = _pod(doc)
    container = next(c for c in spec["containers"] if c["name"] == "vllm")
    init = spec["initContainers"][-1]
    assert init["image"] == image
    ours = {k: v for k, v in INIT_CONTAINER.items() if k not in ("image", "securityContext")}
    assert {k: init[k] for k in ours} == ours
    assert init["securityContext"]["allowPrivilegeEscalation"] is False
    normalized = {
        **init,
        "image": INIT_CONTAINER["image"],
        "securityContext": INIT_CONTAINER["securityContext"],
    }
    pod = {
        "spec": {**spec, "initContainers": [*spec["initContainers"][:-1], normalized]},
        "metadata": metadata,
    }
    assert_injected(pod, container)


def test_step_4_engine_gets_the_probe_its_namespace_and_the_service_step_6_calls() -> None:
    step4 = _shell_lines("4.")
    (apply,) = [line for line in step4 if line.startswith("kubectl apply -k")]
    directory = apply.split()[3]
    docs = kustomize_dir(ROOT / directory)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["image"].startswith("vllm/vllm-openai:")  # the stock image
    assert_injected(pod, container)  # init container, token, address, downward API, annotations
    (edit,) = [line for line in step4 if "kustomize edit set image" in line]
    assert edit.startswith(f"(cd {directory} && kustomize edit set image ")
    (init,) = pod["spec"]["initContainers"]
    assert edit.split()[-1].rstrip(")").split("=")[0] == init["image"].split(":")[0]  # the name it sets
    (secret,) = [line for line in step4 if "create secret generic" in line]
    name, key = (
        secret.split("create secret generic ")[1].split()[0],
        secret.split("--from-file=")[1].split("=")[0],
    )
    env = {e["name"]: e for e in container["env"]}
    ref = env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert (ref["name"], ref["key"]) == (name, key)
    (service,) = [d for d in docs if d["kind"] == "Service"]
    step6 = INSTALL_MD.read_text().split("## 6.")[1]
    url = step6.split('base_url="')[1].split('"')[0]  # http://vllm-llama.<ns>.svc:8000/v1
    host, port = url.split("//")[1].split("/")[0].split(":")
    assert host.split(".")[0] == service["metadata"]["name"] and int(port) in [
        p["port"] for p in service["spec"]["ports"]
    ]
    http = [p for p in container["ports"] if p.get("name") == "http"]
    assert http and http[0]["containerPort"] == int(port)  # the port the exporter takes from the spec


def test_step_4_gdx_inject_on_the_command_line(tmp_path: Path) -> None:
    """The pipe of step 4 with its middle command as written, on a stock Deployment (the example's,
    as `kubectl get -o yaml` gives it): the probe injected, from the image built in step 2."""
    step4 = _shell_lines("4.")
    (pipe,) = [line for line in step4 if "| gdx inject" in line]
    get, inject, apply = (part.strip() for part in pipe.split("|"))
    assert get.startswith("kubectl -n <ns> get deploy ") and get.endswith("-o yaml")
    assert apply == "kubectl apply -f -"
    args = inject.replace("$REGISTRY", REGISTRY).split()
    assert args[:2] == ["gdx", "inject"] and args[-1] == "-"
    live = (ROOT / "deploy" / "vllm" / "deployment.yaml").read_text()
    (doc,) = _inject(*args[2:], stdin=live)
    _assert_injected_with(doc, f"{REGISTRY}/guided-decoding-exporter:0.1.0")
    # injected twice: unchanged
    assert _inject(*args[2:], stdin=yaml.safe_dump(doc)) == [doc]


def test_step_4_helm_post_renderer(tmp_path: Path) -> None:
    """Step 4's Helm line, run as `helm template` with Helm 3 on a stand-in engine chart (the example
    Deployment as its template) and the post-renderer flags as written: the rendered Deployment has the
    probe. With Helm 4, through the plugin step 4 installs (Helm 4 refuses an executable post-renderer)."""
    helm4_line, helm3_line = [
        line for line in _shell_lines("4.") if line.startswith("helm upgrade --install")
    ]
    (install,) = [line for line in _shell_lines("4.") if line.startswith("helm plugin install")]
    args = helm3_line.replace("$REGISTRY", REGISTRY).split()[3:]
    assert args[:4] == ["<release>", "<engine-chart>", "-n", "<ns>"] and "--post-renderer" in args
    chart = tmp_path / "engine"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: engine\nversion: 0.1.0\n")
    shutil.copy(ROOT / "deploy" / "vllm" / "deployment.yaml", chart / "templates")
    flags = args[4:]
    # gdx as installed with this package (`pip install .`): the virtualenv's
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = {**os.environ, **_helm_home(tmp_path), "PATH": path}
    command = ["template", "vllm", str(chart), "-n", "team-a", *flags]
    out = subprocess.run([helm_path("helm3"), *command], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    (doc,) = [d for d in yaml.safe_load_all(out.stdout) if d]
    _assert_injected_with(doc, f"{REGISTRY}/guided-decoding-exporter:0.1.0")
    four = subprocess.run([helm_path("helm4"), *command], capture_output=True, text=True, timeout=60, env=env)
    assert four.returncode != 0 and "plugin" in four.stderr, four.stderr
    plugin = install.split()[3:]
    done = subprocess.run([helm_path("helm4"), "plugin", "install", *plugin], capture_output=True, text=True,
                          timeout=60, env=env, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    args4 = helm4_line.replace("$REGISTRY", REGISTRY).split()[3:]
    command4 = ["template", "vllm", str(chart), "-n", "team-a", *args4[4:]]
    out4 = subprocess.run(
        [helm_path("helm4"), *command4], capture_output=True, text=True, timeout=60, env=env
    )
    assert out4.returncode == 0, out4.stderr
    (doc4,) = [d for d in yaml.safe_load_all(out4.stdout) if d]
    _assert_injected_with(doc4, f"{REGISTRY}/guided-decoding-exporter:0.1.0")
