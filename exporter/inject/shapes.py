"""The types of the fields `gdx inject` reads and writes in a pod template, checked before it does.

Kubernetes refuses a pod whose `spec` is a list, whose `command` is a number or whose `containers`
hold a `null`; `gdx inject` must not crash on one (a traceback), nor, worse, count past a `null`
container and put the probe into the wrong one. Each check names the field by its path in the object
(`spec.template.spec.containers[0].command`) and what it found, and raises InvalidManifest: the
input is refused whole and nothing is written. Fields the injection neither reads nor writes are
left to the API server.
"""

from __future__ import annotations

from typing import Any

from exporter.inject.errors import InvalidManifest


def what(value: Any) -> str:
    """A value's JSON type, for a message: never the value itself (it may be anything)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def wrong(path: str, value: Any, wanted: str) -> InvalidManifest:
    return InvalidManifest(f"{what(value)} where {wanted} belongs", path)


def mapping(parent: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    """parent[key] when it is an object; None when absent or null; else InvalidManifest."""
    value = parent.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise wrong(f"{path}{key}", value, "an object")


def objects(parent: dict[str, Any], key: str, path: str, wanted: str) -> list[dict[str, Any]]:
    """parent[key] as a list of objects ([] when absent or null); a null or other item in it is an
    error, not skipped (skipping would shift every index after it)."""
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong(f"{path}{key}", value, f"a list of {wanted}s")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise wrong(f"{path}{key}[{index}]", item, f"a {wanted} (an object)")
    return value


def _scalar(parent: dict[str, Any], key: str, path: str, kind: type, wanted: str) -> None:
    value = parent.get(key)
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise wrong(f"{path}{key}", value, wanted)


def _strings(parent: dict[str, Any], key: str, path: str) -> None:
    value = parent.get(key)
    if value is None:
        return
    if not isinstance(value, list):
        raise wrong(f"{path}{key}", value, "a list of strings")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise wrong(f"{path}{key}[{index}]", item, "a string")


def security_context(parent: dict[str, Any], path: str) -> None:
    """The fields of a pod's or a container's securityContext that the copy step's is built from."""
    found = mapping(parent, "securityContext", path)
    if found is None:
        return
    at = f"{path}securityContext."
    for key in ("runAsUser", "runAsGroup"):
        _scalar(found, key, at, int, "an integer")
    _scalar(found, "runAsNonRoot", at, bool, "a boolean")
    groups = found.get("supplementalGroups")
    if groups is not None and not (
        isinstance(groups, list) and all(isinstance(g, int) and not isinstance(g, bool) for g in groups)
    ):
        raise wrong(f"{at}supplementalGroups", groups, "a list of integers")


def container(item: dict[str, Any], path: str) -> None:
    """A container whose fields the injection reads (its command line, image, env) and extends."""
    at = f"{path}."
    for key in ("name", "image"):
        _scalar(item, key, at, str, "a string")
    _strings(item, "command", at)
    _strings(item, "args", at)
    for index, env in enumerate(objects(item, "env", at, "variable")):
        where = f"{at}env[{index}]."
        _scalar(env, "name", where, str, "a string")
        _scalar(env, "value", where, str, "a string")
        mapping(env, "valueFrom", where)
    objects(item, "volumeMounts", at, "volume mount")
    mapping(item, "lifecycle", at)
    security_context(item, at)


def pod_template(spec: Any, metadata: Any, path: str = "") -> None:
    """A pod template's spec and metadata (`path`: where the template is, `spec.template.` for a
    Deployment's); raises InvalidManifest naming the first field of the wrong type."""
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise wrong(f"{path}metadata", metadata, "an object")
        annotations = mapping(metadata, "annotations", f"{path}metadata.")
        for key, value in (annotations or {}).items():
            if not isinstance(value, str):
                raise wrong(f"{path}metadata.annotations.{key}", value, "a string")
    if not isinstance(spec, dict):
        raise wrong(f"{path}spec", spec, "an object")
    at = f"{path}spec."
    for index, item in enumerate(objects(spec, "containers", at, "container")):
        container(item, f"{at}containers[{index}]")
    for index, item in enumerate(objects(spec, "initContainers", at, "container")):
        _scalar(item, "name", f"{at}initContainers[{index}].", str, "a string")
    objects(spec, "volumes", at, "volume")
    security_context(spec, at)
