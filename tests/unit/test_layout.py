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
