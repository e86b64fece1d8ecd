"""The wheel ships the product and nothing else: the `exporter` package (the daemon, the probe, the
schema analysis, the CLI) with its entry points, never the repository's tooling (tools/: harness,
demo, benchmarks, simulator) or its tests.

The wheel is built as the Dockerfiles build it (`pip wheel .`), without build isolation or an
index so no network is needed, from a copy of the repository: setuptools leaves `build/` behind, and
a stale `build/lib` in the working tree would put deleted modules back into later wheels.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import PurePosixPath

import pytest

from exporter import __version__
from tools.harness import ROOT

DIST_INFO = f"guided_decoding_exporter-{__version__}.dist-info"
# No file of the wheel may sit under, or be, a module of these names.
NOT_SHIPPED = frozenset({"tools", "tests", "bench", "demo", "simulate", "harness", "support", "conftest"})


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[zipfile.ZipFile, str]:
    """The built wheel, and what the build printed."""
    work = tmp_path_factory.mktemp("packaging")
    source, out = work / "source", work / "wheels"
    left_out = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__", "shared")
    shutil.copytree(ROOT, source, ignore=left_out)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    built = subprocess.run(
        [*command, "--wheel-dir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    log = built.stdout + built.stderr
    assert built.returncode == 0, log
    (path,) = out.glob("*.whl")
    archive = zipfile.ZipFile(path)
    print(f"\n{path.name}:")
    for name in archive.namelist():
        print(f"  {name}")
    return archive, log


def test_only_the_exporter_package_and_its_metadata(wheel: tuple[zipfile.ZipFile, str]) -> None:
    names = wheel[0].namelist()
    assert {PurePosixPath(name).parts[0] for name in names} == {"exporter", DIST_INFO}
    shipped = {name for name in names if name.startswith("exporter/")}
    in_repository = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "exporter").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert shipped == in_repository  # every module of the package, nothing else (no data files)
    for part in (
        "cli.py",
        "daemon/server.py",
        "probe/__init__.py",
        "analysis/lint.py",
        "engines/vllm/routing.py",
        "lint/command.py",
    ):
        assert f"exporter/{part}" in shipped  # the CLI, the daemon, the probe, the schema analysis


def test_no_tooling_or_tests(wheel: tuple[zipfile.ZipFile, str]) -> None:
    for name in wheel[0].namelist():
        parts = {part.removesuffix(".py") for part in PurePosixPath(name).parts}
        assert not parts & NOT_SHIPPED, name


def test_entry_points(wheel: tuple[zipfile.ZipFile, str]) -> None:
    archive = wheel[0]
    entry_points = configparser.ConfigParser()
    entry_points.read_string(archive.read(f"{DIST_INFO}/entry_points.txt").decode())
    assert dict(entry_points["console_scripts"]) == {"gdx": "exporter.cli:main"}
    assert dict(entry_points["vllm.general_plugins"]) == {"guided_decoding_probe": "exporter.probe:register"}
    shipped = set(archive.namelist())
    assert {"exporter/cli.py", "exporter/probe/__init__.py"} <= shipped  # where they point


def test_metadata_and_a_clean_build(wheel: tuple[zipfile.ZipFile, str]) -> None:
    archive, log = wheel
    metadata = archive.read(f"{DIST_INFO}/METADATA").decode()
    assert "Name: guided-decoding-exporter" in metadata
    assert "License-Expression: Apache-2.0" in metadata  # an SPDX expression, not the deprecated table
    assert "License-File: LICENSE" in metadata  # the licence's text travels with the wheel
    assert archive.read(f"{DIST_INFO}/licenses/LICENSE").decode().lstrip().startswith("Apache License")
    warnings = [line for line in log.splitlines() if "deprecat" in line.lower() or "Warning:" in line]
    assert warnings == []
