# ruff: noqa: E501  (pod specs read better on one line)
"""One pod spec with the probe injected: the engine container found, its environment, the volumes and
the init container, idempotence, what keeps a probe from arming, and no Pod Security level lowered
(the upstream checks, ported in tests/support/pod_security.py)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from exporter.inject.podspec import (
    INIT_NAME,
    MOUNT,
    InjectError,
    InjectOptions,
    blockers,
    engine_kind_of,
    find_engine,
    inject,
)
from tests.support.pod_security import level_of, violations

OPTIONS = InjectOptions(image="guided-decoding-exporter:test")
RESTRICTED_CONTAINER = {
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
}


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"containers": list(containers), **spec}


def vllm(**extra: Any) -> dict[str, Any]:
    return {"name": "vllm", "image": "vllm/vllm-openai:v0.32.0", "command": ["vllm", "serve", "m"], **extra}


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize(
    ("container", "kind"),
    [
        ({"command": ["vllm", "serve", "meta-llama/Llama-3.1-8B"]}, "vllm"),
        ({"command": ["/bin/sh", "-c"], "args": ["vllm serve mistralai/Mistral-7B --port 8000"]}, "vllm"),
        ({"command": ["python3", "-m", "vllm.entrypoints.openai.api_server"]}, "vllm"),
        ({"image": "vllm/vllm-openai:v0.32.0"}, "vllm"),  # the image's entrypoint is vllm serve
        ({"image": "kserve/huggingfaceserver:v0.20.0"}, "vllm"),
        ({"command": ["python3", "-m", "sglang.launch_server", "--model-path", "m"]}, "sglang"),
        ({"command": ["trtllm-serve", "m"]}, "trtllm"),
        ({"image": "lmcache/lmstack-router:latest", "command": ["vllm-router", "--port", "80"]}, ""),
        ({"image": "busybox", "command": ["sh", "-c", "echo vllm is great"]}, ""),
    ],
)
def test_the_engine_is_recognised_by_command_line_or_image(container: dict[str, Any], kind: str) -> None:
    assert engine_kind_of(container) == kind


def test_the_engine_container_is_the_named_one_else_the_first_recognised() -> None:
    spec = pod({"name": "sidecar", "image": "envoy"}, vllm(), {"name": "other", "command": ["trtllm-serve"]})
    assert find_engine(spec, {}, OPTIONS) == find_engine(spec, {}, OPTIONS)
    found = find_engine(spec, {}, OPTIONS)
    assert found is not None and (found.index, found.name, found.kind) == (1, "vllm", "vllm")
    by_annotation = {"annotations": {"guided-decoding-exporter.io/container": "sidecar"}}
    named = find_engine(spec, by_annotation, OPTIONS)
    assert named is not None and (named.name, named.kind) == ("sidecar", "vllm")
    with pytest.raises(InjectError, match="no container named 'absent'"):
        find_engine(spec, {}, InjectOptions(image="x", container="absent"))
    assert find_engine(pod({"name": "web", "image": "nginx"}), {}, OPTIONS) is None


def test_service_transport_adds_the_tree_the_token_and_the_environment() -> None:
    before = pod(vllm(env=[{"name": "HF_HOME", "value": "/cache"}]), initContainers=[{"name": "warm"}])
    kept = copy.deepcopy(before)
    result = inject(before, {"labels": {"app": "x"}}, OPTIONS)
    assert before == kept  # the input is untouched
    assert result.status == "injected" and result.engine is not None and result.engine.kind == "vllm"
    spec = result.spec
    engine = spec["containers"][0]
    values = env(engine)
    assert values["HF_HOME"] == "/cache" and values["PYTHONPATH"] == MOUNT
    assert values["GDX_PROBE_ADDRESS"] == "tcp://guided-decoding-exporter-probe.guided-decoding.svc:9478"
    assert values["GDX_PROBE_ENGINE_KIND"] == "vllm"
    assert values["GDX_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert values["GDX_POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert [c["name"] for c in spec["initContainers"]] == ["warm", INIT_NAME]  # after the pod's own
    init = spec["initContainers"][1]
    assert init["command"] == ["cp", "-r", "/opt/guided-decoding-exporter/probe/.", MOUNT]
    assert init["image"] == "guided-decoding-exporter:test"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["gdx-probe"] == {"name": "gdx-probe", "emptyDir": {"sizeLimit": "64Mi"}}
    # vLLM's API server writes its in-flight markers there: it outlives a container restart
    assert volumes["gdx-probe-state"] == {"name": "gdx-probe-state", "emptyDir": {"sizeLimit": "32Mi"}}
    token = volumes["gdx-probe-token"]["projected"]["sources"][0]["serviceAccountToken"]
    assert token == {"audience": "guided-decoding-exporter", "expirationSeconds": 3600, "path": "token"}
    assert not any("hostPath" in v for v in spec["volumes"])
    mounts = {m["name"]: m for m in engine["volumeMounts"]}
    assert mounts["gdx-probe"]["readOnly"] and mounts["gdx-probe-token"]["readOnly"]
    assert mounts["gdx-probe-state"] == {"name": "gdx-probe-state", "mountPath": "/gdx-probe-state"}
    assert {"name": "GDX_PROBE_STATE_DIR", "value": "/gdx-probe-state"} in engine["env"]
    assert result.metadata["annotations"] == {
        "guided-decoding-exporter.io/scrape": "true",
        "guided-decoding-exporter.io/probe": "injected",
    }
    assert result.metadata["labels"] == {"app": "x"}


def test_a_literal_pythonpath_is_kept_after_the_probe_and_valuefrom_is_an_error() -> None:
    spec = inject(pod(vllm(env=[{"name": "PYTHONPATH", "value": "/app:/lib"}])), {}, OPTIONS).spec
    assert env(spec["containers"][0])["PYTHONPATH"] == f"{MOUNT}:/app:/lib"
    from_config = {"name": "PYTHONPATH", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}
    with pytest.raises(InjectError, match="PYTHONPATH comes from valueFrom"):
        inject(pod(vllm(env=[from_config])), {}, OPTIONS)


def test_the_images_own_pythonpath_is_kept_where_known() -> None:
    hf = {"name": "kserve-container", "image": "kserve/huggingfaceserver:v0.20.0"}
    assert env(inject(pod(hf), {}, OPTIONS).spec["containers"][0])["PYTHONPATH"] == (
        f"{MOUNT}:/kserve-workspace/huggingfaceserver"
    )
    told = InjectOptions(image="x", image_pythonpath="/opt/app")
    assert env(inject(pod(vllm()), {}, told).spec["containers"][0])["PYTHONPATH"] == f"{MOUNT}:/opt/app"
    annotated = {"annotations": {"guided-decoding-exporter.io/image-pythonpath": "/srv"}}
    assert env(inject(pod(vllm()), annotated, OPTIONS).spec["containers"][0])["PYTHONPATH"] == f"{MOUNT}:/srv"


def test_hostip_transport_reads_the_node_ip_before_using_it() -> None:
    spec = inject(pod(vllm()), {}, InjectOptions(image="x", transport="hostip", port=9999)).spec
    names = [e["name"] for e in spec["containers"][0]["env"]]
    assert names.index("GDX_HOST_IP") < names.index("GDX_PROBE_ADDRESS")
    values = env(spec["containers"][0])
    assert values["GDX_HOST_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert values["GDX_PROBE_ADDRESS"] == "tcp://$(GDX_HOST_IP):9999"
    assert not any("hostPath" in v for v in spec["volumes"]) and "hostPort" not in str(spec)


def test_socket_transport_is_the_hostpath_as_before() -> None:
    spec = inject(pod(vllm()), {}, InjectOptions(image="x", transport="socket")).spec
    assert (
        env(spec["containers"][0])["GDX_PROBE_ADDRESS"] == "unix:///run/guided-decoding-exporter/probe.sock"
    )
    assert {
        "name": "gdx-probe-socket",
        "hostPath": {"path": "/run/guided-decoding-exporter", "type": "Directory"},
    } in spec["volumes"]
    assert spec["securityContext"]["supplementalGroups"] == [65532]
    assert not any(v["name"] == "gdx-probe-token" for v in spec["volumes"])


def test_injecting_twice_changes_nothing() -> None:
    once = inject(pod(vllm()), {}, OPTIONS)
    twice = inject(once.spec, once.metadata, OPTIONS)
    assert twice.status == "already" and twice.spec == once.spec and twice.metadata == once.metadata


def test_a_pod_without_an_engine_is_skipped() -> None:
    result = inject(pod({"name": "web", "image": "nginx"}), {}, OPTIONS)
    assert result.status == "skipped" and "no engine container" in result.why


def test_other_engines_are_annotated_and_told_their_kind() -> None:
    result = inject(pod({"name": "s", "command": ["python3", "-m", "sglang.launch_server"]}), {}, OPTIONS)
    assert env(result.spec["containers"][0])["GDX_PROBE_ENGINE_KIND"] == "sglang"
    assert result.metadata["annotations"]["guided-decoding-exporter.io/engine"] == "sglang"


@pytest.mark.parametrize(
    ("container", "found"),
    [
        (vllm(env=[{"name": "VLLM_PLUGINS", "value": "lora_filesystem_resolver"}]), ["vllm_plugins"]),
        (vllm(env=[{"name": "VLLM_PLUGINS", "value": ""}]), ["vllm_plugins"]),  # an empty allowlist
        (vllm(env=[{"name": "VLLM_PLUGINS", "value": "lora_filesystem_resolver, guided_decoding_probe"}]), []),
        ({"command": ["python3", "-I", "-m", "vllm.entrypoints.openai.api_server"]}, ["python_ignores_environment"]),
        ({"command": ["/usr/bin/python3.12", "-sE", "-m", "vllm.entrypoints.openai.api_server"]},
         ["python_ignores_environment"]),
        ({"command": ["sh", "-c"], "args": ["exec python -I -m vllm.entrypoints.openai.api_server"]},
         ["python_ignores_environment"]),
        ({"command": ["python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--served-model-name", "-I"]}, []),
        (vllm(env=[{"name": "GDX_PROBE", "value": "0"}]), ["probe_disabled"]),
        (vllm(env=[{"name": "PYTHONPATH", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
         ["pythonpath_from_valuefrom"]),
        (vllm(), []),
    ],
)  # fmt: skip
def test_what_keeps_the_probe_from_arming(container: dict[str, Any], found: list[str]) -> None:
    assert blockers(container, "vllm") == found


def test_a_hostile_command_line_is_read_in_linear_time() -> None:
    """Any pod on the node reaches this: a 200,000-letter option, and 100,000 options that each name a
    Python, are read in one pass (the regex and the rescan took 1.7 s at 20,000 letters, quadratic)."""
    import time

    long_option = {
        "command": ["python3", "-" + "E" * 200_000 + "!", "-m", "vllm.entrypoints.openai.api_server"]
    }
    many = {"command": ["python3", *["-x/python"] * 100_000, "-m", "vllm.entrypoints.openai.api_server"]}
    started = time.process_time()
    assert blockers(long_option, "vllm") == [] and blockers(many, "vllm") == []
    assert time.process_time() - started < 1


def test_the_report_warns_when_the_probe_will_not_arm() -> None:
    container = vllm(env=[{"name": "VLLM_PLUGINS", "value": "lora_filesystem_resolver"}])
    result = inject(pod(container), {}, OPTIONS)
    assert result.status == "injected" and result.warnings and "VLLM_PLUGINS" in result.warnings[0]


RESTRICTED_POD = pod(
    vllm(**RESTRICTED_CONTAINER),
    securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
)
BASELINE_ROOT_POD = pod(vllm(securityContext={"runAsUser": 0}))
PRIVILEGED_POD = pod(vllm(securityContext={"privileged": True}))
OPENSHIFT_LIKE = pod(vllm(securityContext={"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}),
                     securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}})  # fmt: skip


@pytest.mark.parametrize("transport", ["service", "hostip"])
@pytest.mark.parametrize(
    ("spec", "level"),
    [(RESTRICTED_POD, "restricted"), (OPENSHIFT_LIKE, "restricted"), (BASELINE_ROOT_POD, "baseline"),
     (PRIVILEGED_POD, "privileged")],
    ids=["restricted", "restricted-no-uid", "baseline-root", "privileged"],
)  # fmt: skip
def test_injection_lowers_no_pod_security_level(spec: dict[str, Any], level: str, transport: str) -> None:
    assert level_of(spec) == level
    after = inject(spec, {}, InjectOptions(image="x", transport=transport)).spec
    assert level_of(after) == level, violations(after, level)
    init = after["initContainers"][-1]["securityContext"]
    assert init["allowPrivilegeEscalation"] is False and init["capabilities"] == {"drop": ["ALL"]}
    assert init.get("runAsUser", 1) != 0 and "privileged" not in init


def test_the_socket_transport_needs_privileged_as_documented() -> None:
    after = inject(RESTRICTED_POD, {}, InjectOptions(image="x", transport="socket")).spec
    assert level_of(after) == "privileged"
    assert {v.check for v in violations(after, "baseline")} == {"hostPathVolumes"}


def test_the_init_container_keeps_the_engines_non_root_user_and_selinux_settings() -> None:
    engine = vllm(
        securityContext={**RESTRICTED_CONTAINER["securityContext"], "seLinuxOptions": {"level": "s0:c1"}}
    )
    init = inject(pod(engine), {}, OPTIONS).spec["initContainers"][-1]["securityContext"]
    assert init["runAsUser"] == 1000 and init["seLinuxOptions"] == {"level": "s0:c1"}


def test_the_guard_is_set_only_when_asked_and_its_verdicts_come_from_an_optional_configmap() -> None:
    plain = env(inject(pod(vllm()), {}, OPTIONS).spec["containers"][0])
    assert "GDX_GUARD" not in plain and "GDX_GUARD_FILE" not in plain  # the probe's default: off
    options = dataclasses.replace(OPTIONS, guard="enforce", guard_configmap="gdx-guard-verdicts")
    spec = inject(pod(vllm()), {}, options).spec
    engine = spec["containers"][0]
    assert env(engine)["GDX_GUARD"] == "enforce"
    assert env(engine)["GDX_GUARD_FILE"] == "/gdx-guard/guard.json"
    assert {"name": "gdx-guard", "mountPath": "/gdx-guard", "readOnly": True} in engine["volumeMounts"]
    assert {"name": "gdx-guard", "configMap": {"name": "gdx-guard-verdicts", "optional": True}} in spec[
        "volumes"
    ]
    observe = env(
        inject(pod(vllm()), {}, dataclasses.replace(OPTIONS, guard="observe")).spec["containers"][0]
    )
    assert observe["GDX_GUARD"] == "observe" and "GDX_GUARD_FILE" not in observe
