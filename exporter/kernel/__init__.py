"""The shared kernel: facts that more than one program needs, each defined here once.

The programs (`probe`, `daemon`, `lint` with `fix`, `inject`) import the kernel and the core
(`exporter.schema`, `exporter.wire`), never each other; `lint-imports` checks it in `make check`
(the contracts are in pyproject.toml). `names.py` is standard library only: the probe imports it
inside the engine (it is in the probe tree `gdx probe-files` writes).
"""
