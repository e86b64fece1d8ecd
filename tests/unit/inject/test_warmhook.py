# ruff: noqa: E501  (pod specs read better on one line)
"""`gdx inject --warm-configmap`: the engine container's postStart hook runs `gdx warm` from the
probe's tree against the engine on its own port, over the ConfigMap's schemas; an engine with its own
postStart keeps it. The hook itself runs against a real vLLM in tests/system/test_vllm_probe.py."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.inject.podspec import InjectOptions, inject
from exporter.inject.warmhook import WARM_DIR, WARM_VOLUME, engine_url, hook_command
from tests.support.pod_security import level_of

OPTIONS = InjectOptions(image="guided-decoding-exporter:test", warm_configmap="gdx-warm")


@pytest.mark.parametrize(
    ("words", "kind", "url"),
    [
        (["vllm", "serve", "m"], "vllm", "http://127.0.0.1:8000"),
        (["vllm", "serve", "m", "--host", "0.0.0.0", "--port", "9000"], "vllm", "http://127.0.0.1:9000"),
        (["vllm", "serve", "m", "--port=8080", "--host=10.1.2.3"], "vllm", "http://10.1.2.3:8080"),
        (["python3", "-m", "sglang.launch_server", "--model-path", "m"], "sglang", "http://127.0.0.1:30000"),
        (
            ["vllm", "serve", "m", "--port", "$(PORT)"],
            "vllm",
            "http://127.0.0.1:8000",
        ),  # not a number: the default
    ],
)
def test_the_hook_finds_the_engine_where_it_serves(words: list[str], kind: str, url: str) -> None:
    assert engine_url(words, kind) == url


def test_the_hook_runs_the_engines_own_python_else_python3() -> None:
    assert hook_command(["/opt/venv/bin/python3.12", "-m", "vllm.entrypoints.openai.api_server"], "vllm")[:3] == [
        "/opt/venv/bin/python3.12", "-m", "exporter.fix.warm",
    ]  # fmt: skip
    command = hook_command(["/bin/sh", "-c", "vllm", "serve", "m"], "vllm")
    assert command[0] == "python3" and "--exit-zero" in command and command[-1] == WARM_DIR


def test_inject_adds_the_hook_the_optional_configmap_and_keeps_restricted() -> None:
    secure = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
              "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
    spec = {
        "containers": [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.32.0",
                "command": ["vllm", "serve", "m", "--port", "8001"],
                "securityContext": secure,
            }
        ]
    }
    done = inject(spec, {}, OPTIONS)
    assert done.status == "injected" and not done.warnings
    container = done.spec["containers"][0]
    command = container["lifecycle"]["postStart"]["exec"]["command"]
    assert command[command.index("--url") + 1] == "http://127.0.0.1:8001"
    assert {"name": WARM_VOLUME, "mountPath": WARM_DIR, "readOnly": True} in container["volumeMounts"]
    volumes = {v["name"]: v for v in done.spec["volumes"]}
    assert volumes[WARM_VOLUME]["configMap"] == {"name": "gdx-warm", "optional": True}
    assert level_of(done.spec) == "restricted"
    assert "lifecycle" not in spec["containers"][0]  # the input is untouched
    plain = inject(spec, {}, InjectOptions(image="guided-decoding-exporter:test"))
    assert "lifecycle" not in plain.spec["containers"][0] and WARM_VOLUME not in {
        v["name"] for v in plain.spec["volumes"]
    }


def test_an_engine_with_its_own_post_start_keeps_it_and_is_warned() -> None:
    own: dict[str, Any] = {
        "postStart": {"exec": {"command": ["touch", "/tmp/up"]}},
        "preStop": {"sleep": {"seconds": 5}},
    }
    spec = {"containers": [{"name": "vllm", "command": ["vllm", "serve", "m"], "lifecycle": own}]}
    done = inject(spec, {}, OPTIONS)
    assert done.status == "injected" and done.spec["containers"][0]["lifecycle"] == own
    assert any("own postStart hook" in w for w in done.warnings)
    assert WARM_VOLUME not in {v["name"] for v in done.spec["volumes"]}
    kept = {
        "containers": [
            {"name": "vllm", "command": ["vllm", "serve", "m"], "lifecycle": {"preStop": own["preStop"]}}
        ]
    }
    lifecycle = inject(kept, {}, OPTIONS).spec["containers"][0]["lifecycle"]
    assert lifecycle["preStop"] == own["preStop"] and "postStart" in lifecycle


def test_a_configmap_name_kubernetes_refuses_is_a_flag_error(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from exporter.inject.command import add_parsers

    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["inject", "--warm-configmap", "../Warm", "-"])
    assert exit_.value.code == 2 and "not a ConfigMap name" in capsys.readouterr().err
