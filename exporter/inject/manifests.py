"""Where the pod specs are in Kubernetes objects, and the objects with the probe injected into them.

Workloads whose pod template the probe can join: Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet,
ReplicationController, Job, CronJob, LeaderWorkerSet (its leader and worker templates), KServe's
InferenceService (`spec.predictor` carries a pod spec; its `model` is the engine container). A `List`
is handled item by item. Every other kind passes through untouched, and so does a KServe
ServingRuntime: its spec has no initContainers, so the probe goes into the InferenceService instead.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from exporter.inject import shapes
from exporter.inject.errors import InvalidManifest
from exporter.inject.podspec import IMAGE_PYTHONPATHS, Injected, InjectOptions, inject

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"}
SERVING_RUNTIMES = {"ServingRuntime", "ClusterServingRuntime"}


@dataclass(frozen=True)
class InjectOutcome:
    """What happened to one pod template of one object, for the report."""

    where: str  # kind/name, and the template for kinds with several
    status: str  # injected | already | skipped | passed (not a kind with pod templates)
    detail: str = ""
    warnings: tuple[str, ...] = ()


def _name(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{str(doc.get('kind') or '?').lower()}/{meta.get('name') or '?'}"


def _templates(doc: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """(label, path to the pod template) for each pod template of a workload."""
    kind = doc.get("kind")
    if kind in WORKLOADS:
        yield "", ["spec", "template"]
    elif kind == "CronJob":
        yield "", ["spec", "jobTemplate", "spec", "template"]
    elif kind == "LeaderWorkerSet":
        yield " (leader)", ["spec", "leaderWorkerTemplate", "leaderTemplate"]
        yield " (worker)", ["spec", "leaderWorkerTemplate", "workerTemplate"]


def _at(doc: dict[str, Any], path: list[str]) -> Any:
    """doc at `path`: None where a key is absent or null; InvalidManifest where a step is not an
    object (a `spec` that is a list is no Deployment: refused, not passed through as if empty)."""
    found: Any = doc
    for depth, key in enumerate(path):
        if found is None:
            return None
        if not isinstance(found, dict):
            raise shapes.wrong(".".join(path[:depth]), found, "an object")
        found = found.get(key)
    return found


def _template(doc: dict[str, Any], path: list[str]) -> dict[str, Any] | None:
    template = _at(doc, path)
    if template is None or isinstance(template, dict):
        return template
    raise shapes.wrong(".".join(path), template, "a pod template (an object)")


def _report(where: str, result: Injected) -> InjectOutcome:
    if result.status == "injected" and result.engine is not None:
        detail = f"container {result.engine.name}, {result.engine.kind}"
    else:
        detail = result.why
    return InjectOutcome(where, result.status, detail, result.warnings)


def _inference_service(
    doc: dict[str, Any], options: InjectOptions
) -> tuple[dict[str, Any], list[InjectOutcome]]:
    """KServe: the predictor is the pod spec; `model` (merged into kserve-container) is the engine."""
    where = _name(doc)
    predictor = _template(doc, ["spec", "predictor"])
    if predictor is None:
        return doc, [InjectOutcome(where, "skipped", "no spec.predictor")]
    model = shapes.mapping(predictor, "model", "spec.predictor.")
    if model is not None:
        shapes.container(model, "spec.predictor.model")
        shapes.mapping(model, "modelFormat", "spec.predictor.model.")
    shapes.pod_template(predictor, {"annotations": predictor.get("annotations")}, "spec.predictor.")
    spec = dict(predictor)
    metadata = {"annotations": dict(predictor.get("annotations") or {})}
    if isinstance(model, dict):
        fmt = str((model.get("modelFormat") or {}).get("name") or "").lower()
        engine = dict(model, name=model.get("name") or "kserve-container")
        spec["containers"] = [engine]
        kind = options.engine_kind or ("vllm" if fmt in ("huggingface", "vllm") else "")
        if not kind:
            return doc, [InjectOutcome(where, "skipped", f"model format {fmt!r} is not served by vLLM")]
        # The huggingface format is served by KServe's huggingfaceserver runtime, whose image sets
        # PYTHONPATH in its ENV: keep it after the probe's.
        known = IMAGE_PYTHONPATHS["kserve/huggingfaceserver"] if fmt == "huggingface" else ""
        options = dataclasses.replace(
            options,
            engine_kind=kind,
            container=engine["name"],
            image_pythonpath=options.image_pythonpath or known,
        )
    result = inject(spec, metadata, options)
    if result.status != "injected":
        return doc, [_report(where, result)]
    out = copy.deepcopy(doc)
    new = dict(result.spec)
    if isinstance(model, dict):
        engine = new.pop("containers")[0]
        if not model.get("name"):
            engine.pop("name")
        new["model"] = engine
    new["annotations"] = result.metadata["annotations"]
    out["spec"]["predictor"] = new
    return out, [_report(where, result)]


def inject_object(doc: Any, options: InjectOptions) -> tuple[Any, list[InjectOutcome]]:
    """One object (a List's items one by one) with the probe in each pod template that has an
    engine container; raises InjectError (podspec) for a template it cannot inject as asked."""
    if not isinstance(doc, dict):
        raise InvalidManifest(f"{shapes.what(doc)} where a Kubernetes object belongs")
    kind = doc.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise shapes.wrong("kind", kind, "a string")
    if kind == "List" or (kind and kind.endswith("List") and isinstance(doc.get("items"), list)):
        out = dict(doc)
        outcomes: list[InjectOutcome] = []
        items = []
        listed = doc.get("items")
        if listed is not None and not isinstance(listed, list):
            raise shapes.wrong("items", listed, "a list")
        for index, item in enumerate(listed or []):
            try:
                new, said = inject_object(item, options)
            except InvalidManifest as err:
                raise err.under(f"items[{index}]") from None
            items.append(new)
            outcomes.extend(said)
        out["items"] = items
        return out, outcomes
    if kind == "Pod":
        spec, metadata = doc.get("spec"), doc.get("metadata")
        shapes.pod_template({} if spec is None else spec, metadata)
        result = inject(spec or {}, metadata or {}, options)
        if result.status != "injected":
            return doc, [_report(_name(doc), result)]
        return {**doc, "metadata": result.metadata, "spec": result.spec}, [_report(_name(doc), result)]
    if kind == "InferenceService":
        return _inference_service(doc, options)
    if kind in SERVING_RUNTIMES:
        why = "a ServingRuntime has no initContainers: inject the InferenceService that uses it"
        return doc, [InjectOutcome(_name(doc), "skipped", why)]
    templates = list(_templates(doc))
    if not templates:
        return doc, [InjectOutcome(_name(doc), "passed")]
    out = copy.deepcopy(doc)
    outcomes = []
    for label, path in templates:
        template = _template(out, path)
        if template is None:
            continue
        spec, metadata = template.get("spec"), template.get("metadata")
        shapes.pod_template({} if spec is None else spec, metadata, ".".join(path) + ".")
        result = inject(spec or {}, metadata or {}, options)
        if result.status == "injected":
            template["spec"], template["metadata"] = result.spec, result.metadata
        outcomes.append(_report(_name(doc) + label, result))
    return out, outcomes
