"""The kubelet's run-as-non-root check, in Python: what makes it refuse to start a container
(CreateContainerConfigError) whatever admission let through.

From kubernetes/kubernetes `pkg/kubelet/kuberuntime/security_context_others.go` (verifyRunAsNonRoot)
and `pkg/securitycontext/util.go` (DetermineEffectiveSecurityContext): the container's
securityContext over the pod's, field by field; with `runAsNonRoot: true` in effect, a `runAsUser`
of 0 is refused, and without a `runAsUser` the image's user is: refused when it is 0 (none is root),
or a name (the kubelet cannot tell its uid). Windows pods (`runAsUserName`) are not covered.
"""

from __future__ import annotations

from typing import Any

FIELDS = ("runAsUser", "runAsNonRoot")


def effective(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """The securityContext the kubelet applies: the pod's, each field the container sets replacing it."""
    pod = spec.get("securityContext") or {}
    own = container.get("securityContext") or {}
    return {f: own[f] if own.get(f) is not None else pod.get(f) for f in FIELDS}


def refusal(spec: dict[str, Any], container: dict[str, Any], image_user: str) -> str:
    """Why the kubelet refuses to start `container` of the pod `spec` ("" if it starts it).
    `image_user`: the image's USER ("" for none: root)."""
    context = effective(spec, container)
    if context["runAsNonRoot"] is not True:
        return ""
    if context["runAsUser"] is not None:
        return "container's runAsUser breaks non-root policy" if context["runAsUser"] == 0 else ""
    user = image_user.split(":", 1)[0]
    if user in ("", "0"):
        return "container has runAsNonRoot and image will run as root"
    if not user.isdigit():
        return f"container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root"  # noqa: E501
    return ""
