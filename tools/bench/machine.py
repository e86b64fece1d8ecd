"""The lines every benchmark prints first: the command that produced the figures and the machine."""

from __future__ import annotations

import os
import platform
import sys


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> str:
    return (
        f"{cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()},"
        f" Python {platform.python_version()}"
    )


def header(module: str, argv: list[str] | None = None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return f"# command: python -m {' '.join([module, *args])}\n# machine: {describe()}"
