"""The probe tree `gdx probe-files` writes holds exactly what `import exporter.probe` and the warm hook's
`exporter.fix.warm` load, nothing of the third-party world, and the .dist-info that gives vLLM its
plugin entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from exporter.inject.tree import write_tree

PROGRAM = """
import json, sys
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
import exporter.probe
import exporter.fix.warm
import importlib.metadata as m
loaded = sorted(set(sys.modules) - before)
print(json.dumps({
    "exporter": sorted(getattr(sys.modules[n], "__file__", "") for n in loaded if n.startswith("exporter")),
    "third_party": sorted(n for n in loaded if n.split(".")[0] not in sys.stdlib_module_names
                          and n.split(".")[0] not in ("exporter", "__mp_main__")),
    "plugins": [(e.name, e.value) for e in m.entry_points(group="vllm.general_plugins")],
    "version": m.version("guided-decoding-exporter"),
}))
"""


def test_the_tree_is_the_probes_import_closure(tmp_path: Path) -> None:
    written = write_tree(tmp_path)
    assert Path("sitecustomize.py") in written
    out = subprocess.run(
        [sys.executable, "-I", "-c", PROGRAM, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    modules = {str(tmp_path / p) for p in written if p.suffix == ".py" and p.parts[0] == "exporter"}
    assert set(seen["exporter"]) == modules  # every module it loads is in the tree, and nothing more
    assert seen["third_party"] == []
    assert seen["plugins"] == [["guided_decoding_probe", "exporter.probe:register"]]
    assert seen["version"]


def test_writing_again_replaces_and_keeps_other_files(tmp_path: Path) -> None:
    (tmp_path / "other.txt").write_text("x")
    first = write_tree(tmp_path)
    assert write_tree(tmp_path) == first and (tmp_path / "other.txt").read_text() == "x"
