"""docs/generate.py, loaded as a module (it is a script beside the pages, not part of the package)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tools.harness import ROOT

SCRIPT = ROOT / "docs" / "generate.py"


def load(name: str = "docs_generate") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
