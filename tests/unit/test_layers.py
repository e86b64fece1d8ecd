"""The layers `make check` enforces with `lint-imports` (pyproject's [tool.importlinter]): the contracts
hold on the tree, and a cross-program import or a core module importing a program breaks them. Run on a
copy of the package with one import added (a mutation), found first on PYTHONPATH."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.kernel import names
from tools.harness import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def copy_with(tmp_path: Path, module: str, line: str) -> Path:
    shutil.copytree(ROOT / "exporter", tmp_path / "exporter", ignore=shutil.ignore_patterns("__pycache__"))
    if module:
        target = tmp_path / "exporter" / module
        target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    return tmp_path


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    done = lint_imports(copy_with(tmp_path, "", ""))
    assert done.returncode == 0, done.stdout[-3000:]
    assert "5 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("probe/recorder.py", "import exporter.daemon.config", "programs never import each other"),
        (
            "daemon/discovery.py",
            "from exporter.inject import podspec",
            "programs never import each other",
        ),
        ("fix/command.py", "from exporter.lint.command import lint_main", "gdx fix imports no other program"),
        ("schema/identity.py", "import exporter.lint.report", "the core imports no program"),
        ("kernel/names.py", "import exporter.probe", "the core imports no program"),
        ("engines/vllm/routing.py", "import exporter.lint.report", "the core imports no program"),
        (
            "schema/walk.py",
            "from exporter.engines.grammars import backends",
            "analysis over engines over JSON Schema",
        ),
        (
            "engines/grammars/gaps.py",
            "from exporter.analysis import lint",
            "analysis over engines over JSON Schema",
        ),
        (
            "engines/sglang/kimi.py",
            "from exporter.engines.vllm import routing",
            "an engine's package imports no other engine's",
        ),
    ],
)
def test_a_cross_program_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    done = lint_imports(copy_with(tmp_path, module, line))
    assert done.returncode != 0, done.stdout[-3000:]
    assert f"{broken} BROKEN" in done.stdout, done.stdout[-3000:]


def test_the_kernels_names_are_written_once() -> None:
    """The annotation prefix, the engine list and the metric namespace live in exporter/kernel/names.py;
    a program that spells them out again would drift from it (docstrings and log lines may name them)."""
    owner = ROOT / "exporter" / "kernel" / "names.py"
    engines = set(names.ENGINE_KINDS)
    found = []
    for path in sorted((ROOT / "exporter").rglob("*.py")):
        if path == owner:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
            if names.ANNOTATION_PREFIX in text and id(node) not in docstrings:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]!r}")
            if re.fullmatch(names.METRIC_PREFIX + "[a-z_]+", text):  # a name, not a log line naming one
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text!r}")
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if engines <= values:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: the engine list")
    assert found == []
