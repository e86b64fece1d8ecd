"""The package reads as one product: each class name is defined once in `exporter/` (two `Settings`
or two `Histogram`s make a reader open the wrong one), at module level or nested."""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from tools.harness import ROOT


def test_every_class_name_is_defined_once() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    modules = sorted((ROOT / "exporter").rglob("*.py"))
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(modules) > 50 and len(where) > 50
    assert {name: places for name, places in where.items() if len(places) > 1} == {}


MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """A module past 600 lines does several jobs: split it by what it does (issue 49's rule)."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted((ROOT / "exporter").rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_engine_facts_live_in_their_engine_package() -> None:
    """A metric page prefix is spelled only in its engine's package (exporter/engines/<engine>/):
    the daemon reads it from there."""
    prefixes = {"vllm:": "vllm", "sglang:": "sglang", "trtllm_": "trtllm"}
    found = []
    for path in sorted((ROOT / "exporter").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            owner = prefixes.get(node.value) if isinstance(node, ast.Constant) else None
            if owner and path.parent != ROOT / "exporter" / "engines" / owner:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert found == []


def _layout() -> str:
    """The code block of docs/architecture.md's "Layout" section."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    return text.split("\n## Layout\n", 1)[1].split("```", 2)[1]


def test_the_layout_in_architecture_md_is_the_tree() -> None:
    """docs/architecture.md describes the layout once: every package and top-level module of `exporter/`
    is named there (a path at the start of its line), and every name there exists. A package moved or
    added without the page fails here."""
    block = _layout()
    product = block.split("\nexporter/", 1)[1].split("\ntools/", 1)[0]
    named = set(re.findall(r"^  (\S+)", product, re.M))
    here = ROOT / "exporter"
    packages = {
        f"{path.relative_to(here)}/"
        for path in here.rglob("*")
        if path.is_dir() and path.name != "__pycache__" and any(path.glob("*.py"))
    }
    modules = {p.name for p in here.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    assert len(packages) > 10
    assert sorted((packages | modules) - named) == [], "in exporter/, not in docs/architecture.md's layout"
    assert sorted(named - packages - modules) == [], "in docs/architecture.md's layout, not in exporter/"


def test_the_layout_names_only_folders_that_exist() -> None:
    block = _layout()
    top = set(re.findall(r"^([a-z]\S*/)", block, re.M))
    assert {"exporter/", "tools/", "tests/", "docs/", "deploy/"} <= top
    assert sorted(t for t in top if not (ROOT / t).is_dir()) == []
    beside = set(re.findall(r"^  (\S+/)", block.split("\ntools/", 1)[1].split("\ntests/", 1)[0], re.M))
    assert beside == {
        f"{p.name}/" for p in (ROOT / "tools").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
