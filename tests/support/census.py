"""Where the suite's CPU goes by process: every Python interpreter the tests start, its command and its
CPU seconds. The timeline (timeline.py) sums CPU per test file; this says which programs spent it
(gdx runs, daemons, vLLM servers, engine-version interpreters), the count of each and how many were
killed before they could report (a SIGKILLed server's CPU is not counted).

Usage (in a checkout whose virtualenvs make test built):
    python -m tests.support.census install .venv .venv-vllm .venv-instructor
    GDX_CENSUS=$PWD/.cache/census.jsonl make suite
    python -m tests.support.census report .cache/census.jsonl
    python -m tests.support.census uninstall .venv .venv-vllm .venv-instructor

`install` puts a .pth file in each virtualenv's site-packages that, when GDX_CENSUS names a file,
appends a line at the interpreter's start and one at its exit (os.times() of the process itself).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

MODULE = "gdx_census"
HOOK = """import os
if os.environ.get("GDX_CENSUS"):
    import atexit, json, sys

    def _line(kind):
        t = os.times()
        try:
            with open(os.environ["GDX_CENSUS"], "a") as f:
                f.write(json.dumps({"k": kind, "pid": os.getpid(), "argv": [sys.executable] + sys.argv[:8],
                                    "cpu": t.user + t.system}) + "\\n")
        except Exception:
            pass

    _line("start")
    atexit.register(_line, "exit")
"""


def _site_packages(venv: str) -> Path:
    (found,) = Path(venv).glob("lib/python3*/site-packages")
    return found


def install(venvs: list[str]) -> None:
    for venv in venvs:
        site = _site_packages(venv)
        (site / f"{MODULE}.py").write_text(HOOK, encoding="utf-8")
        (site / f"zz_{MODULE}.pth").write_text(f"import {MODULE}\n", encoding="utf-8")


def uninstall(venvs: list[str]) -> None:
    for venv in venvs:
        site = _site_packages(venv)
        for name in (f"{MODULE}.py", f"zz_{MODULE}.pth"):
            (site / name).unlink(missing_ok=True)


def kind(argv: list[str]) -> str:
    """The program, not its arguments: the virtualenv and the first three words after the interpreter."""
    venv = argv[0].split("/bin/")[0].rsplit("/", 1)[-1] if "/bin/" in argv[0] else argv[0]
    return " ".join([venv, *(word.rsplit("/", 1)[-1] for word in argv[1:4])])[:80]


def report(path: str, top: int = 30) -> None:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]
    exits = {r["pid"]: r for r in rows if r["k"] == "exit"}
    cpu: Counter[str] = Counter()
    started: Counter[str] = Counter()
    killed: Counter[str] = Counter()
    for row in (r for r in rows if r["k"] == "start"):
        name = kind(row["argv"])
        started[name] += 1
        if row["pid"] in exits:
            cpu[name] += exits[row["pid"]]["cpu"]
        else:
            killed[name] += 1
    print(f"{sum(started.values())} interpreters, {len(exits)} reported, {sum(cpu.values()):.0f} CPU s")
    print(f"{'cpu s':>8} {'runs':>5} {'killed':>6}  program")
    for name, seconds in cpu.most_common(top):
        print(f"{seconds:8.1f} {started[name]:5d} {killed[name]:6d}  {name}")


def main() -> None:
    command, *args = sys.argv[1:] or ["help"]
    if command == "install":
        install(args)
    elif command == "uninstall":
        uninstall(args)
    elif command == "report" and args:
        report(args[0])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
