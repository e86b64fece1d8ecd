"""The copy step the injection adds must start wherever the engine pod did: the kubelet refuses a
container with `runAsNonRoot: true` whose user is 0 (tests/support/kubelet_nonroot.py), and a
container without a `runAsUser` takes the pod's. A `restricted` pod stays `restricted`
(tests/support/pod_security.py)."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.inject.podspec import INIT_NAME, InjectOptions, inject
from tests.support.kubelet_nonroot import refusal
from tests.support.pod_security import level_of, violations

OPTIONS = InjectOptions(image="guided-decoding-exporter:test")
EXPORTER_IMAGE_USER = "65532:65532"  # deploy/Dockerfile
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def engine(**security: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.32.0",
        "command": ["vllm", "serve", "m"],
    }
    return {**container, "securityContext": security} if security else container


@pytest.mark.parametrize(
    ("spec", "level"),
    [
        ({"securityContext": {"runAsUser": 0}, "containers": [engine()]}, "baseline"),  # the pod runs as root
        (
            {"securityContext": {"runAsUser": 0, "runAsGroup": 0}, "containers": [engine(runAsUser=0)]},
            "baseline",
        ),
        ({"containers": [engine(runAsUser=0)]}, "baseline"),  # only the engine container sets root
        ({"securityContext": {"runAsUser": 0}, "containers": [engine(runAsUser=1000)]}, "baseline"),
        ({"securityContext": {"runAsUser": 1000}, "containers": [engine(runAsUser=0)]}, "baseline"),
        ({"securityContext": {"runAsUser": 0, "runAsNonRoot": False}, "containers": [engine()]}, "baseline"),
        ({"containers": [engine()]}, "baseline"),  # the image's user, whatever it is
        (
            {
                "securityContext": {"runAsUser": 1000, "runAsNonRoot": True},
                "containers": [engine(**RESTRICTED)],
            },
            "restricted",
        ),
        ({"containers": [engine(**RESTRICTED, runAsUser=2000)]}, "restricted"),
        ({"securityContext": {"runAsNonRoot": True}, "containers": [engine(**RESTRICTED)]}, "restricted"),
    ],
)
def test_the_copy_step_starts_where_the_engine_pod_did(spec: dict[str, Any], level: str) -> None:
    assert level_of(spec) == level
    after = inject(spec, {}, OPTIONS).spec
    (init,) = [c for c in after["initContainers"] if c["name"] == INIT_NAME]
    assert refusal(after, init, EXPORTER_IMAGE_USER) == ""
    assert init["securityContext"]["runAsNonRoot"] is True
    assert level_of(after) == level, violations(after, level)


def test_in_a_root_pod_the_copy_step_names_the_exporter_images_user() -> None:
    spec = {"securityContext": {"runAsUser": 0}, "containers": [engine()]}
    init = inject(spec, {}, OPTIONS).spec["initContainers"][0]
    assert init["securityContext"]["runAsUser"] == 65532
    assert refusal(spec | {"initContainers": [init]}, init, EXPORTER_IMAGE_USER) == ""


def test_the_engines_own_non_root_user_is_kept() -> None:
    spec = {"securityContext": {"runAsUser": 0}, "containers": [engine(runAsUser=1000, runAsGroup=1000)]}
    init = inject(spec, {}, OPTIONS).spec["initContainers"][0]
    assert (init["securityContext"]["runAsUser"], init["securityContext"]["runAsGroup"]) == (1000, 1000)


def test_the_kubelet_check_refuses_what_it_should() -> None:
    """The port itself: each refusal the kubelet makes, so that a pass above means something."""
    root_pod = {"securityContext": {"runAsUser": 0}}
    nonroot = {"name": "c", "securityContext": {"runAsNonRoot": True}}
    assert "breaks non-root policy" in refusal(root_pod, nonroot, "65532")
    assert "will run as root" in refusal({}, nonroot, "")
    assert "non-numeric user" in refusal({}, nonroot, "exporter")
    assert refusal({}, nonroot, "65532:65532") == ""
    assert refusal(root_pod, {"name": "c"}, "") == ""  # runAsNonRoot not asked for: root is fine
    assert (
        refusal(root_pod, {"name": "c", "securityContext": {"runAsNonRoot": True, "runAsUser": 5}}, "") == ""
    )
