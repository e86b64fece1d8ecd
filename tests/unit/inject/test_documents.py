"""Manifest YAML with aliases: anchors a manifest really uses still load; a few hundred bytes of
nested aliases (a billion laughs), or an alias inside the node it names, are refused before anything
is built."""

from __future__ import annotations

import time

import pytest

from exporter.inject.documents import ALIAS_NODES, load_documents
from exporter.inject.errors import InvalidManifest


def laughs(levels: int, where: str = "args") -> str:
    """A Pod whose engine `args` is 9**levels strings, in about 60 bytes a level."""
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    lines += ["apiVersion: v1", "kind: Pod", "metadata: {name: p}", "spec:", "  containers:",
              f"  - {{name: vllm, image: vllm/vllm-openai, {where}: *a{levels - 1}}}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_once() -> None:
    text = laughs(9)
    assert len(text) < 700
    start = time.perf_counter()
    with pytest.raises(InvalidManifest, match="aliases repeat more than 100,000 nodes"):
        load_documents(text)
    assert time.perf_counter() - start < 5  # the graph is counted, not expanded


def test_the_bound_is_per_text_not_per_document() -> None:
    one = "a: &a [" + ", ".join(["x"] * 1000) + "]\nb: [" + ", ".join(["*a"] * 60) + "]\n"  # adds 60,060
    assert len(load_documents(one)) == 1
    with pytest.raises(InvalidManifest, match="alias bomb"):
        load_documents(one + "---\n" + one)


def test_anchors_and_merge_keys_a_manifest_uses_still_load() -> None:
    text = """\
x-env: &env
  - {name: HF_HOME, value: /cache}
x-common: &common
  image: vllm/vllm-openai:v0.32.0
  env: *env
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - <<: *common
    name: vllm
    command: [vllm, serve, m]
  - <<: *common
    name: other
"""
    (doc,) = load_documents(text)
    vllm, other = doc["spec"]["containers"]
    assert vllm["image"] == other["image"] == "vllm/vllm-openai:v0.32.0"
    assert vllm["env"] == [{"name": "HF_HOME", "value": "/cache"}] and vllm["command"] == [
        "vllm",
        "serve",
        "m",
    ]


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "- &x [1, [2, *x]]\n"])
def test_an_alias_inside_the_node_it_names_is_refused(text: str) -> None:
    with pytest.raises(InvalidManifest, match="cycle"):
        load_documents(text)


def test_not_yaml_and_too_deep_are_refused() -> None:
    with pytest.raises(InvalidManifest, match="not YAML"):
        load_documents("kind: [unclosed\n")
    with pytest.raises(InvalidManifest):
        load_documents("[" * 20_000 + "]" * 20_000)
    assert load_documents("---\n---\na: 1\n") == [None, {"a": 1}]  # as yaml.safe_load_all reads it


def test_the_bound_is_what_the_message_says() -> None:
    assert ALIAS_NODES == 100_000
