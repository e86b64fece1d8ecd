"""The demo's remedy: `gdx fix` run on the demo's own request log, and the files it wrote put to use as
a service would (the static schema sent instead of each tenant's, `check.py` imported and called on
every output).

`gdx fix` proves on the real grammar engines, which the demo's product virtualenv does not carry (no
torch, no engines): it runs in the engine's virtualenv, on the versions vLLM itself pins, from this
checkout (the product is pure Python).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from tools.harness import ROOT
from tools.harness.vllm import VLLM_PYTHON

FLAGS = ("--proof-variants", "16")  # a demo's minute: 16 tenants' variants proven, every one counted


@dataclass(frozen=True)
class Remedy:
    """What `gdx fix` wrote for one family: the static schema to send and the check to call."""

    family: str
    folder: Path
    schema: dict[str, Any]
    check: ModuleType
    report: dict[str, Any]  # the family's entry in report.json

    def problems(self, content: str, request_schema: dict[str, Any]) -> list[str]:
        """The check after decoding, on one output, against the request's own schema."""
        found: list[str] = self.check.check_json(content, request_schema)
        return found


@dataclass(frozen=True)
class FixRun:
    exit_code: int
    stdout: str
    remedies: dict[str, Remedy]  # by family id: the families gdx fix fixed


def run_fix(log: Path, out: Path, tokenizer_json: Path, timeout: float = 600) -> FixRun:
    """`gdx fix --tokenizer T --out OUT LOG` in the engine's virtualenv; the fixed families loaded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    gdx = [str(VLLM_PYTHON), "-m", "exporter"]
    command = [*gdx, "fix", "--tokenizer", str(tokenizer_json), "--out", str(out)]
    done = subprocess.run(
        [*command, *FLAGS, str(log)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode == 2 or not (out / "report.json").is_file():
        raise RuntimeError(f"gdx fix failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    remedies = {}
    for entry in report["families"]:
        if entry["fixed"]:
            folder = out / entry["folder"]
            schema = json.loads((folder / "schema.json").read_text(encoding="utf-8"))
            check = _load(folder / "check.py")
            remedies[entry["family"]] = Remedy(entry["family"], folder, schema, check, entry)
    return FixRun(done.returncode, done.stdout, remedies)


def _load(path: Path) -> ModuleType:
    """check.py imported as the service would import it (standard library only)."""
    spec = importlib.util.spec_from_file_location(f"gdx_check_{path.parent.name.replace('-', '_')}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
