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


def _at(doc: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


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
    predictor = _at(doc, ["spec", "predictor"])
    if not isinstance(predictor, dict):
        return doc, [InjectOutcome(where, "skipped", "no spec.predictor")]
    model = predictor.get("model")
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
        return doc, []
    kind = doc.get("kind")
    if kind == "List" or (
        isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list)
    ):
        out = dict(doc)
        outcomes: list[InjectOutcome] = []
        items = []
        for item in doc.get("items") or []:
            new, said = inject_object(item, options)
            items.append(new)
            outcomes.extend(said)
        out["items"] = items
        return out, outcomes
    if kind == "Pod":
        result = inject(doc.get("spec") or {}, doc.get("metadata") or {}, options)
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
        template = _at(out, path)
        if not isinstance(template, dict):
            continue
        result = inject(template.get("spec") or {}, template.get("metadata") or {}, options)
        if result.status == "injected":
            template["spec"], template["metadata"] = result.spec, result.metadata
        outcomes.append(_report(_name(doc) + label, result))
    return out, outcomes
