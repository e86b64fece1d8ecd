# ruff: noqa: E501  (alert labels and PromQL read better on one line)
"""The alert rules as code: generated files up to date, promtool check and unit tests, runbooks and
annotations complete, recording rules named for their labels and all used, the Alertmanager example
valid and routing every alert, one page per incident on a real Alertmanager, ExporterDown selecting
the job and instance the shipped monitors really give (on a real Prometheus), metric names from the
contract."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from alerts import generate as alert_rules
from tools.harness import ROOT
from tools.harness.processes import Alertmanager, DaemonProcess, Prometheus, Receiver

ALERTS = ROOT / "alerts"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    binary = shutil.which(args[0])
    assert binary, f"{args[0]} is not installed: run `make test` (it installs it with apt)"
    return subprocess.run([binary, *args[1:]], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_generated_files_are_up_to_date_and_match() -> None:
    out = subprocess.run(
        [sys.executable, str(ALERTS / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    custom = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())
    assert custom["kind"] == "PrometheusRule" and custom["spec"] == rules


def test_promtool_checks_and_unit_tests_pass() -> None:
    check = run("promtool", "check", "rules", str(ALERTS / "guided-decoding.rules.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    test = run("promtool", "test", "rules", "guided-decoding.tests.yml", cwd=ALERTS / "tests")
    assert test.returncode == 0, test.stdout + test.stderr


def test_the_unit_tests_see_the_thresholds(tmp_path: Path) -> None:
    """The same tests against rules rendered with a 20 ms line must fail: they bind the threshold."""
    gen = alert_rules
    (tmp_path / "tests").mkdir()
    (tmp_path / "guided-decoding.rules.yml").write_text(
        gen.dump(gen.render(gen.Params(compile_p95_seconds=0.02)))
    )
    shutil.copy(ALERTS / "tests" / "guided-decoding.tests.yml", tmp_path / "tests")
    test = run("promtool", "test", "rules", "guided-decoding.tests.yml", cwd=tmp_path / "tests")
    assert test.returncode != 0 and "GuidedDecodingCompileP95High" in test.stdout + test.stderr


def test_every_alert_is_complete_and_tested() -> None:
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    tests = (ALERTS / "tests" / "guided-decoding.tests.yml").read_text()
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    records = [r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r]
    expected = {
        "CompileP95High", "SchemaCompileSlow", "CacheHitRatioLow", "DynamicSchema", "CPUStarvation",
        "GrammarWaitHigh", "CompileStuck", "UnenforcedKeywords", "ProbeMissing", "ExporterDown", "EngineCPUThrottled", "GrammarFailures", "NVMLUnavailable",
        "BackendRejections", "BackendRejectionsHigh", "BackendNotEnforced", "APIServerKilled", "APIServerStalls",
        "GuardRefusing",
    }  # fmt: skip
    assert {a["alert"] for a in alerts} == {f"GuidedDecoding{n}" for n in expected}
    for a in alerts:
        name, ann = a["alert"], a["annotations"]
        assert a["labels"]["severity"] in ("critical", "warning", "info")
        assert "{{" not in ann["summary"] and "{{" in ann["description"], name
        assert ann["runbook_url"].endswith(f"/alerts/runbooks/{name}.md")
        runbook = (ALERTS / "runbooks" / f"{name}.md").read_text()
        for section in ("## What it means", "## Confirm it", "## Fix", "## Silence it safely"):
            assert section in runbook, (name, section)
        assert ann["dashboard_url"].endswith("/d/guided-decoding/guided-decoding")
        assert f"alertname: {name}" in tests, f"{name} has no promtool test"
    for record in records:
        assert f"expr: {record}" in tests, f"recording rule {record} has no expression test"
    assert {a["alert"] for a in alerts if a["labels"]["severity"] == "critical"} >= {
        "GuidedDecodingCompileP95High"
    }


def test_rules_use_only_metrics_that_exist() -> None:
    """Every metric a rule reads is in the family tables of docs/reference/metrics.md or is a recording
    rule."""
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    lines = (ROOT / "docs" / "reference" / "metrics.md").read_text().splitlines()
    table = [r for r in lines if r.startswith("| `guided_decoding_")]
    every = [r for g in rules["groups"] for r in g["rules"]]
    # the expressions and the queries in the descriptions (the top families, what varies)
    exprs = " ".join(
        [r["expr"] for r in every] + [r["annotations"]["description"] for r in every if "alert" in r]
    )
    exprs = re.sub(r"\b[a-z_]+:guided_decoding_[a-z0-9_:]+", " ", exprs)  # recording rules
    names = {re.sub(r"_(bucket|count|sum)$", "", n) for n in re.findall(r"\bguided_decoding_[a-z_]+", exprs)}
    assert len(names) >= 12
    documented = {n for r in table for n in re.findall(r"`(guided_decoding_[a-z_]+)`", r.split("|")[1])}
    for name in names:
        assert name in documented, f"{name} is read by a rule but not in the metric contract"


def test_description_queries_stay_on_the_alerts_node() -> None:
    """A page for node B never names node A's families: every selector in a description's query is
    scoped to the alert's `instance` (the promtool tests check it with two nodes)."""
    rules = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    ranked = [a for a in alerts if "Top families" in a["annotations"]["description"]]
    listing = (
        "CompileP95High",
        "CacheHitRatioLow",
        "CPUStarvation",
        "GrammarWaitHigh",
        "CompileStuck",
        "EngineCPUThrottled",
    )
    assert {a["alert"] for a in ranked} == {f"GuidedDecoding{n}" for n in listing}
    calls = 0
    for a in alerts:
        description = a["annotations"]["description"]
        assert "schema_recent_compile_seconds" not in description and "shape_" not in description, a["alert"]
        for call in re.findall(r'query \(printf "(.*?)" \$', description):
            calls += 1
            selectors = re.findall(r"[a-z_:]*guided_decoding_[a-z0-9_:]+(\{[^}]*\})?", call)
            assert selectors and all('instance=\\"%s\\"' in s for s in selectors), (a["alert"], call)
        assert not re.search(r'query "', description), f"{a['alert']}: a query not scoped to the node"
    assert calls >= 5 * 4 + 4


def test_alertmanager_example_is_valid() -> None:
    out = run("amtool", "check-config", str(ALERTS / "alertmanager" / "alertmanager.yml"))
    assert out.returncode == 0, out.stdout + out.stderr
    config = yaml.safe_load((ALERTS / "alertmanager" / "alertmanager.yml").read_text())
    (pd,) = next(r for r in config["receivers"] if r["name"] == "pagerduty")["pagerduty_configs"]
    assert (
        pd["send_resolved"] and "routing_key_file" in pd and "{{ .CommonLabels.severity }}" in pd["severity"]
    )
    assert {link["text"] for link in pd["links"]} == {"runbook", "dashboard"}


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((ALERTS / "guided-decoding.rules.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def _alert_labels() -> dict[str, set[str]]:
    """Each alert's labels as the promtool tests see them fire (union over the cases)."""
    tests = yaml.safe_load((ALERTS / "tests" / "guided-decoding.tests.yml").read_text())
    labels: dict[str, set[str]] = {}
    for case in tests["tests"]:
        for t in case.get("alert_rule_test", []):
            for a in t["exp_alerts"]:
                labels.setdefault(t["alertname"], {"alertname"}).update(a["exp_labels"])
    return labels


def test_recording_rules_are_named_for_their_labels_and_all_used() -> None:
    """`level:metric:operations`: the level is the labels the rule keeps, in order; `backend` kept
    wherever `pod` is; every rule read by an alert or the dashboard."""
    every = _rules()
    readers = " ".join(r["expr"] + json.dumps(r.get("annotations", {})) for r in every if "alert" in r)
    readers += (ROOT / "dashboards" / "guided-decoding.json").read_text()
    names = alert_rules.records()
    recorded = [r for r in every if "record" in r]
    assert {r["record"] for r in recorded} == set(vars(names).values())
    for r in recorded:
        level, metric, operations = r["record"].split(":")
        kept = re.findall(r"\bby \(([^)]*)\)", r["expr"])
        assert kept, r["record"]
        for by in kept:
            labels = [x.strip() for x in by.split(",") if x.strip() != "le"]
            assert "_".join(labels) == level, (r["record"], by)
        assert metric.startswith("guided_decoding_") and operations, r["record"]
        assert r["record"] in readers, f"{r['record']} is read by no alert and no panel"
    engine_level = re.compile(r"guided_decoding_(compile|grammar_wait|mask|schema_compile|schema_requests)")
    for r in (r for r in every if engine_level.search(r["expr"])):  # families that carry `backend`
        for by in re.findall(r"\bby \(([^)]*)\)", r["expr"]):
            assert "pod" not in by or "backend" in by, (r.get("alert") or r.get("record"), by)


def test_the_page_keeps_firing_and_the_thresholds_are_exact_bucket_edges() -> None:
    from exporter import wire

    p = alert_rules.Params()
    page = next(r for r in _rules() if r.get("alert") == "GuidedDecodingCompileP95High")
    assert page["keep_firing_for"] == p.keep_firing_for and page["labels"]["severity"] == "critical"
    # "share above the line" needs no interpolation: the line is a bucket edge of both histograms
    assert p.compile_p95_seconds in wire.COMPILE_BUCKETS and p.compile_p95_seconds in wire.SCHEMA_BUCKETS
    starvation = next(r for r in _rules() if r.get("alert") == "GuidedDecodingCPUStarvation")
    assert _minutes(starvation["for"]) > _minutes(page["for"])  # the page fires first and inhibits it


def _minutes(duration: str) -> int:
    return int(duration.removesuffix("m"))


def _receiver_of(labels: dict[str, str]) -> str:
    out = run(
        "amtool", "config", "routes", "test", "--config.file", str(ALERTS / "alertmanager" / "alertmanager.yml"),
        *(f"{k}={v}" for k, v in labels.items()),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


def test_every_alert_routes_by_its_severity() -> None:
    """`amtool config routes test` on the example: critical pages, warning tickets, info nowhere."""
    expected = {"critical": "pagerduty", "warning": "ticket", "info": "blackhole"}
    alerts = [r for r in _rules() if "alert" in r]
    labels = _alert_labels()
    for a in alerts:
        name, severity = a["alert"], a["labels"]["severity"]
        sample = {label: "x" for label in labels[name] - {"alertname", "severity"}}
        assert _receiver_of({"alertname": name, "severity": severity, **sample}) == expected[severity], name
    critical = {a["alert"] for a in alerts if a["labels"]["severity"] == "critical"}
    assert critical == {
        f"GuidedDecoding{n}"
        for n in (
            "CompileP95High",
            "CPUStarvation",
            "CompileStuck",
            "ExporterDown",
            "BackendRejectionsHigh",
            "APIServerKilled",
        )
    }


def _post(url: str, body: Any) -> None:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200


def test_one_incident_pages_once_and_the_causes_ride_along(tmp_path: Path) -> None:
    """On a real Alertmanager with the example's routing: the page on two pods of node-a and one of
    node-b (a fleet-wide bad client) is one PagerDuty incident; its symptoms on the same pod and node
    are inhibited; the alerts that name the cause are never inhibited and open one ticket each."""
    receiver = Receiver()
    config = yaml.safe_load((ALERTS / "alertmanager" / "alertmanager.yml").read_text())
    config["route"].update(group_wait="1s", group_interval="1s")
    for r in config["receivers"]:
        for pd in r.get("pagerduty_configs", []):
            key = tmp_path / "key"
            key.write_text("R0UT1NG")
            pd["routing_key_file"], pd["url"] = str(key), receiver.url + "/v2/enqueue"
        for hook in r.get("webhook_configs", []):
            hook["url"] = receiver.url + "/ticket"
    am = Alertmanager(tmp_path, config)
    try:

        def alert(name: str, severity: str, **labels: str) -> dict[str, Any]:
            return {"labels": {"alertname": f"GuidedDecoding{name}", "severity": severity, **labels},
                    "annotations": {"summary": name, "description": f"{name} {labels}"}}  # fmt: skip

        pod = {"backend": "xgrammar"}
        sent = [
            alert("CompileP95High", "critical", instance="node-a", pod="vllm-0", **pod),
            alert("CompileP95High", "critical", instance="node-a", pod="vllm-1", **pod),
            alert("CompileP95High", "critical", instance="node-b", pod="vllm-0", **pod),
            alert("GrammarWaitHigh", "warning", instance="node-a", pod="vllm-0", **pod),  # inhibited
            alert("CompileStuck", "critical", instance="node-a", pod="vllm-1", **pod),  # inhibited
            alert("CPUStarvation", "critical", instance="node-a"),  # inhibited
            alert("CPUStarvation", "critical", instance="node-c"),  # no page on node-c: its own page
            alert("GrammarWaitHigh", "warning", instance="node-c", pod="vllm-5", **pod),  # a ticket
            alert("DynamicSchema", "warning", instance="node-a", family="3fa2b1c4d5e6"),
            alert("DynamicSchema", "warning", instance="node-b", family="3fa2b1c4d5e6"),  # same ticket
            alert("SchemaCompileSlow", "warning", instance="node-a", pod="vllm-0", schema_hash="0a1b2c3d4e5f", **pod),
            alert("CacheHitRatioLow", "warning", instance="node-a", pod="vllm-0", **pod),
            alert("UnenforcedKeywords", "info", instance="node-a", schema_hash="111111111111"),
        ]  # fmt: skip
        _post(am.url + "/api/v2/alerts", sent)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tickets = {
                json.dumps(e["groupLabels"], sort_keys=True) for p, e in receiver.events if p == "/ticket"
            }
            pages = {e["dedup_key"] for e in receiver.pagerduty() if e["event_action"] == "trigger"}
            if len(pages) >= 2 and len(tickets) >= 4:
                break
            time.sleep(0.5)
        time.sleep(3)  # a few more group intervals: nothing else may arrive
        with urllib.request.urlopen(am.url + "/api/v2/alerts", timeout=10) as resp:
            state = json.load(resp)
        inhibited = {
            (a["labels"]["alertname"].removeprefix("GuidedDecoding"), a["labels"]["instance"], a["labels"].get("pod", ""))
            for a in state if a["status"]["inhibitedBy"]
        }  # fmt: skip
        assert inhibited == {
            ("GrammarWaitHigh", "node-a", "vllm-0"), ("CompileStuck", "node-a", "vllm-1"), ("CPUStarvation", "node-a", ""),
        }  # fmt: skip
        triggers = [e for e in receiver.pagerduty() if e["event_action"] == "trigger"]
        by_key: dict[str, set[str]] = {}
        for e in triggers:
            by_key.setdefault(e["dedup_key"], set()).add(e["payload"]["summary"].split(":")[0])
        assert sorted(by_key.values(), key=sorted) == [
            {"GuidedDecodingCPUStarvation"},
            {"GuidedDecodingCompileP95High"},
        ], by_key  # two incidents: the fleet-wide page, node-c's starvation
        page = next(e for e in triggers if e["payload"]["summary"].startswith("GuidedDecodingCompileP95High"))
        latest = [e for e in triggers if e["dedup_key"] == page["dedup_key"]][-1]
        assert set(latest["payload"]["custom_details"]["nodes"].split()) == {
            "node-a/vllm-0",
            "node-a/vllm-1",
            "node-b/vllm-0",
        }
        tickets = {json.dumps(e["groupLabels"], sort_keys=True) for p, e in receiver.events if p == "/ticket"}
        names = sorted(json.loads(t)["alertname"].removeprefix("GuidedDecoding") for t in tickets)
        assert names == ["CacheHitRatioLow", "DynamicSchema", "GrammarWaitHigh", "SchemaCompileSlow"], tickets
    finally:
        am.stop()
        receiver.stop()


def test_runbooks_mitigate_and_silence_by_the_alerts_own_labels() -> None:
    labels = _alert_labels()
    for name, have in labels.items():
        runbook = (ALERTS / "runbooks" / f"{name}.md").read_text()
        assert "## Mitigate" in runbook, name
        silences = re.findall(r"amtool silence add ([^`\n]*)", runbook)
        assert silences, f"{name}: no amtool silence example"
        for line in silences:
            matchers = dict(re.findall(r"(\w+)=(\S+)", line.split(" --")[0]))
            assert matchers.get("alertname") == name, (name, line)
            assert set(matchers) <= have - {"severity"}, f"{name}: silences on {set(matchers) - have}"
            assert "--duration" in line and "--comment" in line, (name, line)


def _monitor_scrape_config(
    kind: str, monitor: dict[str, Any], labels: dict[str, str], target: str
) -> dict[str, Any]:
    """The scrape config the Prometheus operator generates for the monitor, as far as `job` and
    `instance` go (prometheus-operator pkg/prometheus/promcfg.go: the default job, then `jobLabel`
    from the pod's or Service's labels, then the monitor's own relabelings), over a static target
    with the meta labels Kubernetes discovery would give the exporter pod on node-a."""
    meta = "__meta_kubernetes_pod_label_" if kind == "PodMonitor" else "__meta_kubernetes_service_label_"
    sanitize = lambda name: re.sub(r"[^a-zA-Z0-9_]", "_", name)  # noqa: E731
    target_labels = {meta + sanitize(k): v for k, v in labels.items()}
    target_labels |= {
        "__meta_kubernetes_pod_node_name": "node-a",
        "__meta_kubernetes_service_name": "guided-decoding-exporter",
    }
    if kind == "PodMonitor":
        default = {"target_label": "job", "replacement": f"monitoring/{monitor['metadata']['name']}"}
        endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    else:
        default = {
            "source_labels": ["__meta_kubernetes_service_name"],
            "target_label": "job",
            "replacement": "${1}",
        }
        endpoint = monitor["spec"]["endpoints"][0]
    relabel = [default]
    if monitor["spec"].get("jobLabel"):
        relabel.append({"source_labels": [meta + sanitize(monitor["spec"]["jobLabel"])], "target_label": "job",
                        "regex": "(.+)", "replacement": "${1}"})  # fmt: skip
    for r in endpoint.get("relabelings", []):
        relabel.append({"source_labels": r["sourceLabels"], "target_label": r["targetLabel"]})
    return {"job_name": "operator-generated", "static_configs": [{"targets": [target], "labels": target_labels}],
            "relabel_configs": relabel}  # fmt: skip


def test_exporter_down_selects_the_job_and_node_the_monitors_give(tmp_path: Path) -> None:
    """Both monitor paths, on a real Prometheus scraping a real daemon: `up` carries the job the alert
    selects and the node's name as `instance`; ExporterDown is quiet while it is up and fires when
    the scrape fails."""
    from tests.integration.test_deploy import kustomize

    built = kustomize("kubernetes/base") + kustomize("kubernetes/overlays/kube-prometheus-stack")
    objects = {d["kind"]: d for d in built}
    pod_labels = objects["DaemonSet"]["spec"]["template"]["metadata"]["labels"]
    service_monitor = yaml.safe_load(
        (ROOT / "deploy/kubernetes/components/servicemonitor/servicemonitor.yaml").read_text()
    )
    service = yaml.safe_load((ROOT / "deploy/kubernetes/components/servicemonitor/service.yaml").read_text())
    p = alert_rules.Params(short_for="0s")
    rules = tmp_path / "rules.yml"
    rules.write_text(alert_rules.dump(alert_rules.render(p)))
    daemon = DaemonProcess(["--no-collector.nvml", "--no-collector.vllm", "--no-collector.probe"])
    target = daemon.url.removeprefix("http://")
    without_job_label = json.loads(json.dumps(objects["PodMonitor"]))
    del without_job_label["spec"]["jobLabel"]
    try:
        for kind, monitor, labels, quiet in (
            ("PodMonitor", objects["PodMonitor"], pod_labels, True),
            # the operator's default job, "<namespace>/<name>": the alert would fire on every install
            ("PodMonitor", without_job_label, pod_labels, False),
            ("ServiceMonitor", service_monitor, service["metadata"]["labels"], True),
        ):
            work = tmp_path / f"{kind}-{quiet}"
            work.mkdir()
            config = _monitor_scrape_config(kind, monitor, labels, target)
            prom = Prometheus(work, [], rule_files=[rules], scrape_config=config)
            try:
                (up,) = prom.wait_for("up")
                assert up["metric"]["instance"] == "node-a" and up["value"][1] == "1", (kind, up)
                assert (up["metric"]["job"] == p.exporter_job) is quiet, (kind, up)
                down = prom.query(alert_rules.job_down(p))
                assert (down == []) is quiet, (kind, down)
                if kind == "ServiceMonitor":  # the scrape fails: the node's exporter is down
                    daemon.stop()
                    (fired,) = prom.wait_for(f"({alert_rules.job_down(p)}) == 0")
                    assert fired["metric"]["instance"] == "node-a", fired
            finally:
                prom.stop()
    finally:
        daemon.stop()
