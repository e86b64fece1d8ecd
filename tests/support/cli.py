"""`gdx ARGS` as the integration tests run it: `python -m exporter ARGS`, a process of its own with its
exit status, stdout and stderr, forked from a server of this Python that has imported the CLI and the
proofs' engines once (tests/support/forkserver.py). A `gdx fix --tokenizer` run as a fresh interpreter
spends about 9 CPU s, 5 of them importing xgrammar's torch and transformers (the census, 2026-12-05);
forked, it starts with them loaded. GDX_NO_FORKSERVER=1 runs each as a plain subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import forkserver

# what `gdx lint`, `gdx hash` and `gdx fix` import (the proofs: xgrammar, a tokenizers tokenizer, jsonschema)
CLI = forkserver.Preload(
    then=(
        "exporter.cli",
        "exporter.lint.command",
        "exporter.fix.command",
        "exporter.fix.warm",
        "exporter.inject.command",
        "exporter.lint.prove.engine",
        "xgrammar",
        "transformers",
        "llguidance",
        "jsonschema",  # the proofs' validator: 1.4 s of import (rfc3987-syntax builds its grammars)
    )
)


def gdx(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`python -m exporter ARGS` in `cwd` (default: here) with os.environ and `env` over it."""
    return forkserver.run(
        Path(sys.executable),
        ["-m", "exporter", *args],
        env={**os.environ, **(env or {})},
        cwd=cwd or Path.cwd(),
        timeout=timeout,
        preload=CLI,
    )
