"""The repository stands alone: a copy of it in a temporary directory, with no `shared` folder beside it
and `GDX_SHARED_DIR` unset, finds every file its tests, benchmarks and demo read, and runs the tests that
read them (the vLLM fixture page's users, the data readers, a JSONSchemaBench test) to a pass.

The copy is what a clone holds: the working tree without dot-folders (.git, .venv, .cache), build
outputs or caches. It runs with this interpreter (the packages are installed, not copied) and imports
`exporter`, `tools` and `tests` from the copy, never from this checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench.schemas import read
from tools.harness import ROOT

pytestmark = pytest.mark.slow

# What the copy runs: every module that reads the vendored data, one JSONSchemaBench test of each kind.
DATA_TESTS = (
    "tests/unit/daemon/test_passthrough.py",  # the vLLM page (the session fixture)
    "tests/unit/daemon/test_engine_passthrough.py",  # the SGLang and TRT-LLM pages
    "tests/unit/test_dashboards.py",  # the vLLM page through the dashboard's queries
    "tests/unit/schema/test_family.py::test_fifty_benchmark_schemas_stay_in_separate_families",
    "tests/integration/test_jsonschemabench.py::test_gdx_lint_reads_a_benchmark_file",
)
# The ways a file can name a folder outside the repository by default.
OUTSIDE = re.compile(r"\.\./shared|parent\s*/\s*\"shared\"|GDX_SHARED_DIR\",\s*ROOT")


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository in a fresh temporary directory, nothing beside it."""
    where = tmp_path_factory.mktemp("standalone")
    copy = where / "guided-decoding-exporter"
    left_out = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT, copy, ignore=left_out)
    assert sorted(p.name for p in where.iterdir()) == [copy.name]
    return copy


def _env(copy: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GDX_SHARED_DIR"}
    env["PYTHONPATH"] = str(copy)
    return env


def test_the_copy_reads_its_own_data(alone: Path) -> None:
    probe = (
        "import exporter, tools.harness as h, tools.bench.schemas as s, tools.harness.scenarios as sc; print("
        "exporter.__file__, h.DATA, h.JSONSCHEMABENCH, h.VLLM_PAGE, s.DATA, sc.BENCH_SCHEMAS, sep=chr(10))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=alone, env=_env(alone), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    paths = [Path(line) for line in out.stdout.split()]
    assert len(paths) == 6
    for path in paths:
        assert path.is_relative_to(alone), path
        assert path.exists(), path
    benchmark = alone / "tests" / "support" / "data" / "jsonschemabench"
    assert sum(1 for _ in read(benchmark / "schemas")) == 4828  # the counts its README states
    assert sum(1 for _ in read(benchmark / "maskbench")) == 5655
    assert (benchmark / "LICENSE").read_text(encoding="utf-8").startswith("The JSONSchemaBench data")


def test_the_data_tests_pass_in_the_copy(alone: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *DATA_TESTS],
        cwd=alone,
        env=_env(alone),
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) >= 20, tail
    assert " skipped" not in run.stdout.splitlines()[-1], tail


def test_no_file_reads_outside_the_repository_by_default() -> None:
    """A default path that leaves the repository is what broke every public clone; an explicit override
    (GDX_SHARED_DIR set) is still allowed."""
    offenders = []
    for folder in ("exporter", "tools", "tests", "alerts", "dashboards", "deploy", "scripts"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".sh", ".yaml", ".toml"} and path != Path(__file__):
                text = path.read_text(encoding="utf-8", errors="replace")
                offenders += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    for name in ("Makefile", "pyproject.toml", ".ci/run"):
        text = (ROOT / name).read_text(encoding="utf-8")
        offenders += [f"{name}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    assert offenders == []
