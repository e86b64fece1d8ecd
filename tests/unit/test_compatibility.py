"""docs/compatibility.md and the README's table are generated from the engine folders: the committed
pages are what `docs/generate.py` writes now, each supported release has its row, and a page that falls
behind a release table fails `--check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from exporter.engines.sglang import versions as sglang_versions
from exporter.engines.vllm import versions as vllm_versions
from tests.support import docs_generator
from tools.harness import ROOT


def generator() -> ModuleType:
    return docs_generator.load("docs_generate")


def test_the_committed_pages_are_generated() -> None:
    done = subprocess.run(
        [sys.executable, str(docs_generator.SCRIPT), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_every_release_has_its_row() -> None:
    page = generator().page()
    for version in vllm_versions.SUPPORTED:
        assert f"\n| {version} | {vllm_versions.RELEASES[version].xgrammar} |" in page
    for version in sglang_versions.SUPPORTED:
        assert f"\n| {version} | {sglang_versions.RELEASES[version].xgrammar} |" in page
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"| vLLM | {version} |" in readme for version in vllm_versions.SUPPORTED)


def test_a_release_added_without_regenerating_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = generator()
    newest = vllm_versions.RELEASES[vllm_versions.NEWEST]
    extra = {**vllm_versions.RELEASES, "9.9.9": type(newest)(**{**newest.__dict__, "version": "9.9.9"})}
    monkeypatch.setattr(module.vllm_versions, "RELEASES", extra)
    for name in ("PAGE", "README"):
        copy = tmp_path / Path(getattr(module, name)).name
        copy.write_text(Path(getattr(module, name)).read_text(encoding="utf-8"), encoding="utf-8")
        monkeypatch.setattr(module, name, copy)
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0 and module.main(["--check"]) == 0
    assert "| 9.9.9 |" in (tmp_path / "compatibility.md").read_text(encoding="utf-8")
    assert "| vLLM | 9.9.9 |" in (tmp_path / "README.md").read_text(encoding="utf-8")
