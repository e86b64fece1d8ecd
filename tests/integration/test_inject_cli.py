"""`gdx inject` as the README runs it: YAML that a real kubectl writes, on stdin, out to stdout,
strict-valid for every Kubernetes version the deploy tests cover; the report on stderr; an error
writes nothing and exits 1. (`kubectl apply` needs a cluster, which cannot run here: the output is
checked with kubernetes-validate --strict instead.)"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.k8s_schemas import validate
from tools.harness import DATA, ROOT

VERSIONS = ("1.28", "1.30", "1.33")
MANIFESTS = DATA / "manifests"


def gdx(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def kubectl_deployment(*command: str) -> str:
    """What `kubectl create deployment --dry-run=client -o yaml` writes: a real kubectl's object."""
    out = subprocess.run(
        ["kubectl", "create", "deployment", "vllm", "--image=vllm/vllm-openai:v0.32.0", "--dry-run=client",
         "-o", "yaml", "--", *command],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout


def as_get_list(text: str) -> str:
    """The same object as `kubectl get deploy -o yaml` lists it: a List, with the server's fields."""
    doc = yaml.safe_load(text)
    doc["metadata"] |= {
        "uid": "1c3b0a8e-0000-4000-8000-000000000001",
        "resourceVersion": "4242",
        "generation": 3,
    }
    doc["status"] = {"observedGeneration": 3, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    return yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [doc]}
    )


def strict(doc: dict[str, Any]) -> None:
    for version in VERSIONS:
        validate(doc, version)


def test_the_readme_pipeline_on_what_kubectl_writes() -> None:
    listed = as_get_list(kubectl_deployment("vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"))
    out = gdx("inject", "-", stdin=listed)
    assert out.returncode == 0, out.stderr
    (doc,) = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert doc["kind"] == "List"
    deployment = doc["items"][0]
    strict(deployment)
    spec = deployment["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["gdx-probe"]
    assert spec["initContainers"][0]["image"].startswith("guided-decoding-exporter:")
    assert "deployment/vllm injected (container vllm-openai, vllm)" in out.stderr
    again = gdx("inject", "-", stdin=out.stdout)
    assert again.returncode == 0 and again.stdout == out.stdout and "already" in again.stderr


def test_files_folders_and_many_documents(tmp_path: Path) -> None:
    for name in ("vllm-docs-deployment.yaml", "production-stack.yaml", "kserve-inferenceservice.yaml"):
        (tmp_path / name).write_text((MANIFESTS / name).read_text())
    out = gdx("inject", "--transport", "hostip", "--image", "registry.example/gdx:1", str(tmp_path))
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert len(docs) == sum(
        len([d for d in yaml.safe_load_all((MANIFESTS / n).read_text()) if d]) for n in (
            "vllm-docs-deployment.yaml", "production-stack.yaml", "kserve-inferenceservice.yaml")
    )  # fmt: skip
    assert out.stdout.count("---\n") == len(docs)
    for doc in docs:
        if doc["kind"] != "InferenceService":
            strict(doc)
    assert out.stderr.count(" injected (") == 3 and "passed" in out.stderr
    assert "registry.example/gdx:1" in out.stdout and "$(GDX_HOST_IP)" in out.stdout


def test_an_error_writes_no_yaml_and_exits_1() -> None:
    text = kubectl_deployment("vllm", "serve", "m")
    doc = yaml.safe_load(text)
    doc["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "PYTHONPATH", "valueFrom": {"configMapKeyRef": {"name": "paths", "key": "pythonpath"}}}
    ]
    out = gdx("inject", "-", stdin=yaml.safe_dump(doc))
    assert out.returncode == 1 and out.stdout == ""
    assert "PYTHONPATH comes from valueFrom" in out.stderr and "nothing written" in out.stderr
    broken = gdx("inject", "-", stdin="kind: [unclosed\n")  # no manifest at all: 2, as a wrong flag
    assert broken.returncode == 2 and broken.stdout == "" and "not YAML" in broken.stderr
    missing = gdx("inject", "/nonexistent.yaml")
    assert missing.returncode == 1 and missing.stdout == ""


def test_warnings_for_a_probe_that_will_not_arm_and_a_flag_that_is_wrong() -> None:
    doc = yaml.safe_load(kubectl_deployment("python3", "-I", "-m", "vllm.entrypoints.openai.api_server"))
    out = gdx("inject", "-", stdin=yaml.safe_dump(doc))
    assert out.returncode == 0 and "warning: the engine starts Python with -E or -I" in out.stderr
    bad = gdx("inject", "--transport", "carrier-pigeon", "-")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_nothing_to_inject_says_so() -> None:
    out = gdx("inject", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    assert out.returncode == 0 and "configmap/c passed" in out.stderr and "nothing injected" in out.stderr
    assert yaml.safe_load(out.stdout.split("---")[0]) == {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "c"}}  # fmt: skip


def test_probe_files_is_what_the_image_carries(tmp_path: Path) -> None:
    out = gdx("probe-files", str(tmp_path / "tree"))
    assert out.returncode == 0 and "files in" in out.stderr
    assert (tmp_path / "tree" / "sitecustomize.py").is_file()
    assert (tmp_path / "tree" / "exporter" / "probe" / "__init__.py").is_file()
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert (
        "gdx probe-files /opt/guided-decoding-exporter/probe" in dockerfile
    )  # the path the init copies from


def _at_most_1_gib() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


def test_an_alias_bomb_is_refused_in_a_second_and_writes_nothing() -> None:
    """520 bytes of nested aliases were 9**8 strings in a container's args: over 40 s and 900 MB
    before anything was written. Now the node graph is counted, not expanded: exit 2 at once."""
    lines = ["x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    lines += ["apiVersion: v1", "kind: Pod", "metadata: {name: p}", "spec:", "  containers:",
              "  - {name: vllm, image: vllm/vllm-openai, args: *a8}"]  # fmt: skip
    bomb = "\n".join(lines) + "\n"
    assert len(bomb) < 800
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "inject", "-"], input=bomb, capture_output=True, text=True,
        cwd=ROOT, timeout=20, preexec_fn=_at_most_1_gib,
    )  # fmt: skip
    assert out.returncode == 2 and out.stdout == "", out.stderr[-500:]
    assert "alias bomb" in out.stderr and "nothing written" in out.stderr and "Traceback" not in out.stderr


def test_a_field_of_the_wrong_type_exits_2_naming_it_and_writes_nothing() -> None:
    good = yaml.safe_load(kubectl_deployment("vllm", "serve", "m"))
    template = ["spec", "template", "spec"]
    cases = [
        (["spec"], [1, 2], "spec: a list where an object belongs"),
        ([*template, "containers", 0, "command"], 5, "[0].command: a number where a list of strings"),
        ([*template, "containers"], [None, good["spec"]["template"]["spec"]["containers"][0]],
         "containers[0]: null where a container"),
        ([*template, "securityContext"], "root", "spec.securityContext: a string where an object"),
    ]  # fmt: skip
    for path, value, said in cases:
        doc = yaml.safe_load(yaml.safe_dump(good))
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        out = gdx("inject", "-", stdin=yaml.safe_dump_all([other, doc]))
        assert out.returncode == 2 and out.stdout == "", (path, out.stderr)
        assert said in out.stderr and "stdin, document 2: " in out.stderr and "Traceback" not in out.stderr


def test_a_root_pod_gets_a_copy_step_the_kubelet_starts() -> None:
    """`runAsUser: 0` on the pod: the init container's `runAsNonRoot: true` would have inherited uid 0,
    which the kubelet refuses (CreateContainerConfigError); it now runs as the exporter image's user."""
    from tests.support.kubelet_nonroot import refusal

    doc = yaml.safe_load(kubectl_deployment("vllm", "serve", "m"))
    doc["spec"]["template"]["spec"]["securityContext"] = {"runAsUser": 0}
    out = gdx("inject", "-", stdin=yaml.safe_dump(doc))
    assert out.returncode == 0, out.stderr
    (injected,) = [d for d in yaml.safe_load_all(out.stdout) if d]
    strict(injected)
    spec = injected["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert refusal(spec, init, "65532:65532") == ""
