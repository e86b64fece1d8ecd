# ruff: noqa: E501  (manifests read better on one line)
"""Manifests with a field of the wrong type: refused with the field's path, never a traceback, and
never the probe in the wrong container (a `null` before the engine shifted its index)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from exporter.inject.errors import InvalidManifest
from exporter.inject.manifests import inject_object
from exporter.inject.podspec import InjectOptions

OPTIONS = InjectOptions(image="guided-decoding-exporter:test")
ENGINE = {"name": "vllm", "image": "vllm/vllm-openai:v0.32.0", "command": ["vllm", "serve", "m"]}


def deployment(**spec: Any) -> dict[str, Any]:
    template = {"metadata": {}, "spec": {"containers": [dict(ENGINE)], **spec}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "v"},
        "spec": {"template": template},
    }


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [dict(ENGINE)], **spec},
    }


def with_(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


TEMPLATE = ("spec", "template", "spec")


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        (with_(deployment(), ("spec",), [1, 2]), "spec"),
        (with_(deployment(), ("spec", "template"), "x"), "spec.template"),
        (with_(deployment(), TEMPLATE, [1]), "spec.template.spec"),
        (with_(deployment(), ("spec", "template", "metadata"), [1]), "spec.template.metadata"),
        (with_(deployment(), ("spec", "template", "metadata", "annotations"), {"a": 1}), "spec.template.metadata.annotations.a"),
        (with_(deployment(), (*TEMPLATE, "containers"), {"vllm": ENGINE}), "spec.template.spec.containers"),
        (with_(deployment(), (*TEMPLATE, "containers", 0, "command"), 5), "spec.template.spec.containers[0].command"),
        (with_(deployment(), (*TEMPLATE, "containers", 0, "args"), ["--port", 8000]), "spec.template.spec.containers[0].args[1]"),
        (with_(deployment(), (*TEMPLATE, "containers", 0, "env"), {"A": "1"}), "spec.template.spec.containers[0].env"),
        (with_(deployment(), (*TEMPLATE, "containers", 0, "env"), [{"name": "A", "value": 1}]), "spec.template.spec.containers[0].env[0].value"),
        (with_(deployment(), (*TEMPLATE, "containers", 0, "securityContext"), "root"), "spec.template.spec.containers[0].securityContext"),
        (with_(deployment(), (*TEMPLATE, "containers", 0, "securityContext"), {"runAsUser": True}), "spec.template.spec.containers[0].securityContext.runAsUser"),
        (with_(deployment(), (*TEMPLATE, "securityContext"), {"runAsUser": "0"}), "spec.template.spec.securityContext.runAsUser"),
        (with_(deployment(), (*TEMPLATE, "initContainers"), "x"), "spec.template.spec.initContainers"),
        (with_(deployment(), (*TEMPLATE, "volumes"), [None]), "spec.template.spec.volumes[0]"),
        (with_(pod(), ("spec",), [1]), "spec"),
        (with_(pod(), ("metadata",), "p"), "metadata"),
        (with_(pod(), ("kind",), ["Pod"]), "kind"),
        ({"apiVersion": "v1", "kind": "List", "items": {"a": 1}}, "items"),
        ({"apiVersion": "v1", "kind": "List", "items": [pod(), with_(pod(), ("spec", "containers", 0, "command"), 5)]}, "items[1].spec.containers[0].command"),
        ({"kind": "InferenceService", "metadata": {"name": "i"}, "spec": {"predictor": [1]}}, "spec.predictor"),
        ({"kind": "InferenceService", "metadata": {"name": "i"}, "spec": {"predictor": {"model": {"modelFormat": [1]}}}}, "spec.predictor.model.modelFormat"),
        ({"kind": "InferenceService", "metadata": {"name": "i"}, "spec": {"predictor": {"model": {"args": [1]}}}}, "spec.predictor.model.args[0]"),
    ],
)  # fmt: skip
def test_a_field_of_the_wrong_type_is_refused_by_its_path(doc: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidManifest) as err:
        inject_object(doc, OPTIONS)
    assert err.value.path == path and " where " in err.value.problem


def test_a_null_container_is_refused_not_skipped() -> None:
    """It was skipped when looking for the engine, but not when indexing: the probe went into the
    container before the engine (busybox here)."""
    doc = with_(
        deployment(), (*TEMPLATE, "containers"), [None, {"name": "side", "image": "busybox"}, dict(ENGINE)]
    )
    with pytest.raises(InvalidManifest) as err:
        inject_object(doc, OPTIONS)
    assert err.value.path == "spec.template.spec.containers[0]" and err.value.problem.startswith("null where")


@pytest.mark.parametrize("doc", ["just a string", [1, 2], 42])
def test_a_document_that_is_no_object_is_refused(doc: Any) -> None:
    with pytest.raises(InvalidManifest, match="where a Kubernetes object belongs"):
        inject_object(doc, OPTIONS)


def test_well_shaped_manifests_still_inject() -> None:
    doc = deployment(
        securityContext={"runAsUser": 1000, "supplementalGroups": [5]},
        volumes=[{"name": "v", "emptyDir": {}}],
    )
    doc["spec"]["template"]["spec"]["containers"].insert(
        0,
        {
            "name": "side",
            "image": "busybox",
            "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
        },
    )
    out, said = inject_object(doc, OPTIONS)
    assert [o.status for o in said] == ["injected"]
    side, vllm = out["spec"]["template"]["spec"]["containers"]
    assert "PYTHONPATH" in {e["name"] for e in vllm["env"]} and "PYTHONPATH" not in {
        e["name"] for e in side["env"]
    }
    empty, _ = inject_object({"kind": "Deployment", "metadata": {"name": "e"}, "spec": None}, OPTIONS)
    assert empty["spec"] is None
