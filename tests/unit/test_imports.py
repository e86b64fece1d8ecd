"""The two sides stay apart: the daemon never loads the engine-side probe (its patching, wrappers,
recorder and shipper belong inside engine processes), and the probe loads nothing but the standard
library (it runs inside engines whose dependencies are not ours). Each check runs in a fresh
interpreter, so what this test process has imported does not hide an import."""

from __future__ import annotations

import json
import subprocess
import sys

DAEMON_MODULES = ("exporter.wire", "exporter.cli")

# Every module of the daemon and of `gdx lint` (the command, its report, engine checks and proofs).
LOADED_PROBE_MODULES = """
import importlib, json, pkgutil, sys
import exporter.daemon, exporter.lint
names = list(sys.argv[1:])
for package in (exporter.daemon, exporter.lint):
    names += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
assert len(names) > 30, names
for name in names:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m == "exporter.probe" or m.startswith("exporter.probe."))))
"""


def test_the_daemon_loads_no_engine_side_module() -> None:
    out = subprocess.run(
        [sys.executable, "-c", LOADED_PROBE_MODULES, *DAEMON_MODULES],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# That importing `exporter.probe` loads only the standard library is checked beside the probe's other
# loading rules, in tests/integration/test_probe_plugin.py
# (test_importing_the_probe_loads_only_the_standard_library).
