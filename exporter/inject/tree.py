"""The probe tree an init container copies into an engine pod (`gdx probe-files DIR`).

Only the modules the probe and `gdx warm` import (standard library only, no third-party package:
nothing in the engine's environment is shadowed but this package's own name), a `.dist-info` under
this package's distribution name, so that `importlib.metadata` finds the `vllm.general_plugins` entry point (a
PYTHONPATH entry comes before site-packages, and for one distribution name the first on sys.path
wins: an image that also has the package installed gets one plugin, this one), and the
`sitecustomize.py` that arms SGLang and TensorRT-LLM and chains to the image's own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import exporter
from exporter import __version__
from exporter.kernel.names import DISTRIBUTION

PACKAGE = Path(exporter.__file__).resolve().parent
# What `import exporter.probe` and `python -m exporter.fix.warm` (the warm hook, exporter/inject/
# warmhook.py) load (tests/unit/inject checks this against a clean interpreter).
MODULES = (
    "__init__.py", "wire.py", "schema/__init__.py", "schema/identity.py", "fix/__init__.py", "fix/warm.py",
    "kernel/__init__.py", "kernel/names.py", "kernel/options.py",
    # the guard's bounded run of vLLM's outlines validation (exporter/probe/guard.py)
    "engines/__init__.py", "engines/page.py", "engines/vllm/__init__.py",
    "engines/vllm/outlines_validation.py",
)  # fmt: skip
PACKAGES = ("probe",)
# The probe's sitecustomize: copied to the tree's top as `sitecustomize.py`, not as a module of the probe.
SITECUSTOMIZE = Path("probe") / "sitecustomize_file.py"
ENTRY_POINTS = "[vllm.general_plugins]\nguided_decoding_probe = exporter.probe:register\n"


def sources() -> list[Path]:
    """The probe's source files, relative to the package folder."""
    found = [Path(m) for m in MODULES]
    for package in PACKAGES:
        found.extend(sorted(p.relative_to(PACKAGE) for p in (PACKAGE / package).rglob("*.py")))
    return [p for p in found if p != SITECUSTOMIZE]


def write_tree(dest: Path) -> list[Path]:
    """Writes the tree into `dest` (created; files there with the same names are replaced) and
    returns the paths written, relative to it."""
    dest.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for relative in sources():
        target = dest / "exporter" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE / relative, target)
        written.append(target.relative_to(dest))
    info = dest / f"{DISTRIBUTION}-{__version__}.dist-info"
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": (
            f"Metadata-Version: 2.1\nName: guided-decoding-exporter\nVersion: {__version__}\n"
            "Summary: guided-decoding-exporter's in-engine probe, injected (gdx probe-files)\n"
        ),
        "entry_points.txt": ENTRY_POINTS,
        "top_level.txt": "exporter\n",
        "INSTALLER": "gdx probe-files\n",
    }
    for name, text in files.items():
        (info / name).write_text(text, encoding="utf-8")
        written.append((info / name).relative_to(dest))
    shutil.copyfile(PACKAGE / SITECUSTOMIZE, dest / "sitecustomize.py")
    written.append(Path("sitecustomize.py"))
    return written
