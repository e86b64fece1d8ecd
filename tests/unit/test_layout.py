"""The package reads as one product: each class name is defined once in `exporter/` (two `Settings`
or two `Histogram`s make a reader open the wrong one), at module level or nested."""

from __future__ import annotations

import ast
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
