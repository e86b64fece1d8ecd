"""`gdx lint --engine vllm`'s prediction of the API server's outlines validation
(exporter/engines/vllm/outlines_validation.py:
the same library steps and the same checks of the regex, bounded) agrees with vLLM's own
`validate_structured_output_request_outlines` on every schema of a generated set, release by
release: refused where outlines cannot build the regex (a `false` subschema) or vLLM's check of the
regex refuses it (lookarounds, backreferences, word boundaries), validated otherwise. The counts
print.

The prediction does not depend on the release (one bounded child per schema, this repository's code
and outlines_core), so each distinct schema's bounded run is made once for the module (`predicted`)
and compared with every release's answer for it; vLLM's own validation runs once per release, in
one process for all the schemas, while the predictions are made."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from exporter.engines.vllm import outlines_validation as bounded
from exporter.engines.vllm.versions import SUPPORTED
from tests.support import forkserver
from tools.harness import ROOT
from tools.harness.vllm import VLLM_PYTHON, release_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
DRIVER = ROOT / "tests" / "support" / "engines" / "vllm_outlines_validation.py"
PATTERNS = [
    "^[a-z]+$", "(?=a)b", "(?!x)y", "(?<=a)b", r"(a)\1", r"\bword\b", r"\Bx", "^(ab|cd)$", "a|^b",
    "[0-9]{2,4}", r"(?:x|y)+z", "(", r"\d+(?=%)", "^$", ".*", r"\p{L}", "(?P<n>a)(?P=n)",
]  # fmt: skip


def schemas(seed: int = 20261205) -> list[Any]:
    """Small schemas built from the mechanisms that fail outlines or vLLM's regex checks, mixed
    with ones that pass: a pattern in a property or a pattern key, a `false` subschema, nesting."""
    rng = random.Random(seed)
    out: list[Any] = []
    for _ in range(120):
        pattern = rng.choice(PATTERNS)
        leaf: Any = {"type": "string", "pattern": pattern}
        if rng.random() < 0.15:
            leaf = False
        prop = rng.choice(["a", "b", "c"])
        schema: dict[str, Any] = {"type": "object", "properties": {prop: leaf}}
        if rng.random() < 0.5:
            schema["patternProperties"] = {rng.choice(["^x", "y", "^z_"]): {"type": "integer"}}
        if rng.random() < 0.3:
            schema = {"type": "object", "properties": {"outer": schema}, "required": ["outer"]}
        out.append(schema)
    return out


_PREDICTED: dict[str, bounded.BoundedRun] = {}  # a schema's text -> the bounded run of it


def predicted(text: str) -> bounded.BoundedRun:
    """`bounded.run(text, timeout=30)`, once per distinct text for the module: the same schema gets
    the same prediction for every release."""
    if text not in _PREDICTED:
        _PREDICTED[text] = bounded.run(text, timeout=30)
    return _PREDICTED[text]


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_bounded_prediction_is_vllms_own(version: str, tmp_path: Path) -> None:
    if not VLLM_PYTHON.exists():
        raise FileNotFoundError(f"{VLLM_PYTHON} is missing: run `make vllm` (make test does)")
    cases = schemas()
    (tmp_path / "schemas.json").write_text(json.dumps(cases), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["PYTHONPATH"] = release_path(version)
    # vLLM's interpreter forked from a server that has imported its third-party stack once
    # (tests/support/forkserver.py): the driver is a process of its own, as a fresh one would be
    vllm = forkserver.run(
        VLLM_PYTHON, [str(DRIVER), str(tmp_path / "schemas.json")], env=env, cwd=tmp_path, timeout=300
    )
    assert vllm.returncode == 0, vllm.stderr[-3000:]
    ours_all = [predicted(json.dumps(schema)) for schema in cases]
    printed = json.loads(vllm.stdout.strip().splitlines()[-1])
    assert printed["vllm"] == version
    counts: Counter[str] = Counter()
    mismatches = []
    for schema, theirs, ours in zip(cases, printed["results"], ours_all, strict=True):
        counts[f"{theirs['outcome']}/{ours.outcome}"] += 1
        if ours.outcome != theirs["outcome"]:
            mismatches.append(
                f"{json.dumps(schema)[:160]}: vLLM {theirs}, lint {ours.outcome} {ours.detail[:80]}"
            )
    print(f"vLLM {version}: {len(cases)} schemas, {dict(counts)}, {len(mismatches)} mismatches")
    assert mismatches == []
    assert counts["rejected/rejected"] >= 20 and counts["validated/validated"] >= 20
