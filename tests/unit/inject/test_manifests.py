# ruff: noqa: E501  (manifests read better on one line)
"""The pod templates of each kind, and the manifests vLLM's docs, the vLLM production-stack chart and
KServe generate (tests/support/data/manifests, provenance in its README) with the probe injected:
the engine container found, every other container and kind untouched, no Pod Security level lowered."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.inject.manifests import inject_object
from exporter.inject.podspec import INIT_NAME, MOUNT, InjectOptions
from tests.support.pod_security import level_of, pod_specs
from tools.harness import DATA

OPTIONS = InjectOptions(image="guided-decoding-exporter:test")
MANIFESTS = DATA / "manifests"


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def engine_env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def template(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    for key in path:
        doc = doc[key]
    return doc


def test_vllm_docs_deployment() -> None:
    docs = load("vllm-docs-deployment.yaml")
    out = [inject_object(d, OPTIONS) for d in docs]
    kinds = {d["kind"]: said for d, (_, said) in zip(docs, out, strict=True)}
    assert [o.status for o in kinds["Deployment"]] == ["injected"]
    assert [o.status for o in kinds["Service"]] == ["passed"]
    injected = out[[d["kind"] for d in docs].index("Deployment")][0]
    spec = template(injected, "spec", "template", "spec")
    assert engine_env(spec["containers"][0])["PYTHONPATH"] == MOUNT
    assert spec["initContainers"][-1]["name"] == INIT_NAME


def test_production_stack_injects_the_engine_and_leaves_the_router() -> None:
    docs = load("production-stack.yaml")
    results = {(d["kind"], d["metadata"]["name"]): inject_object(d, OPTIONS) for d in docs}
    injected = [(k, o) for k, (_, said) in results.items() for o in said if o.status == "injected"]
    assert len(injected) == 1 and injected[0][0][0] == "Deployment"
    assert "container vllm, vllm" in injected[0][1].detail
    for (kind, name), (new, said) in results.items():
        original = next(d for d in docs if (d["kind"], d["metadata"]["name"]) == (kind, name))
        if not any(o.status == "injected" for o in said):
            assert new == original, (kind, name)  # the router and everything else: untouched


def test_kserve_inference_service_gets_the_probe_and_the_runtime_is_left_with_a_reason() -> None:
    (isvc,) = load("kserve-inferenceservice.yaml")
    new, said = inject_object(isvc, OPTIONS)
    assert [o.status for o in said] == ["injected"]
    predictor = new["spec"]["predictor"]
    assert predictor["initContainers"][-1]["name"] == INIT_NAME and "name" not in predictor["model"]
    assert engine_env(predictor["model"])["PYTHONPATH"] == f"{MOUNT}:/kserve-workspace/huggingfaceserver"
    assert predictor["annotations"]["guided-decoding-exporter.io/probe"] == "injected"
    for runtime in load("kserve-servingruntime-vllm.yaml"):
        same, said = inject_object(runtime, OPTIONS)
        assert same == runtime and said[0].status == "skipped" and "InferenceService" in said[0].detail


@pytest.mark.parametrize("name", ["vllm-docs-deployment.yaml", "production-stack.yaml"])
@pytest.mark.parametrize("transport", ["service", "hostip"])
def test_no_fixture_pod_loses_its_pod_security_level(name: str, transport: str) -> None:
    options = InjectOptions(image="x", transport=transport)
    for doc in load(name):
        new, _ = inject_object(doc, options)
        if doc.get("kind") not in ("Deployment", "StatefulSet", "DaemonSet", "Job", "Pod"):
            continue
        for (where, meta, before), (_, meta2, after) in zip(pod_specs(doc), pod_specs(new), strict=True):
            assert level_of(after, meta2) == level_of(before, meta), where


def test_list_cronjob_and_leaderworkerset() -> None:
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "eval"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "e", "command": ["vllm", "serve", "m"]}]}}}}}}  # fmt: skip
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "big"},
           "spec": {"leaderWorkerTemplate": {
               "leaderTemplate": {"spec": {"containers": [{"name": "leader", "command": ["sh", "-c"],
                                  "args": ["ray start --head && vllm serve m --tensor-parallel-size 16"]}]}},
               "workerTemplate": {"spec": {"containers": [{"name": "worker", "command": ["sh", "-c"],
                                  "args": ["ray start --address=$(LWS_LEADER_ADDRESS):6379 --block"]}]}}}}}  # fmt: skip
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [cron, lws, {"kind": "ConfigMap", "metadata": {"name": "c"}}],
    }
    before = copy.deepcopy(listed)
    new, said = inject_object(listed, OPTIONS)
    assert listed == before
    assert [(o.where, o.status) for o in said] == [
        ("cronjob/eval", "injected"),
        ("leaderworkerset/big (leader)", "injected"),
        ("leaderworkerset/big (worker)", "skipped"),
        ("configmap/c", "passed"),
    ]
    job_pod = new["items"][0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job_pod["initContainers"][-1]["name"] == INIT_NAME
    assert "initContainers" not in new["items"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert new["items"][2] == listed["items"][2]


def test_every_fixture_is_vendored_with_its_provenance() -> None:
    readme = (MANIFESTS / "README.md").read_text()
    for path in sorted(Path(MANIFESTS).glob("*.yaml")):
        assert path.name in readme
