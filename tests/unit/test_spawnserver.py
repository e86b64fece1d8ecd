"""The spawn server (tests/support/spawnserver.py) gives what subprocess.Popen gives for the same
command: the program's view of argv, working directory and environment, its stderr, its exit status,
its death by a signal; and refuses a command whose path would shadow a module it loaded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import spawnserver

PRELOAD = ("json", "yaml")
PROGRAM = """
import json, os, sys, time
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("SPAWN_TEST"),
                  "path0": sys.path[0], "stdin": sys.stdin.read()}), file=sys.stderr)
print("to stdout")
if sys.argv[1] == "sleep":
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    return tmp_path


def popen(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *argv],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_run_is_what_popen_gives(program: Path) -> None:
    env = {**os.environ, "SPAWN_TEST": "x y"}
    argv = ["-m", "prog", "3", "ü"]
    spawned = spawnserver.spawn(argv, env=env, cwd=program, preload=PRELOAD)
    assert spawned is not None
    plain = popen(argv, env, program)
    assert spawned.wait(30) == plain.wait(30) == 3
    assert spawned.stderr is not None and plain.stderr is not None
    mine, theirs = json.loads(spawned.stderr.read()), json.loads(plain.stderr.read())
    assert mine == theirs
    assert mine["argv"][1:] == ["3", "ü"] and mine["env"] == "x y" and mine["cwd"] == str(program)


def test_a_signal_ends_it_as_it_ends_a_popen_child(program: Path) -> None:
    argv = ["-m", "prog", "sleep"]
    spawned = spawnserver.spawn(argv, env=dict(os.environ), cwd=program, preload=PRELOAD)
    assert spawned is not None
    plain = popen(argv, dict(os.environ), program)
    assert spawned.stderr is not None
    spawned.stderr.readline()  # it runs
    assert spawned.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        spawned.wait(0.1)
    before = spawnserver.reaped_cpu()
    for proc in (spawned, plain):
        proc.send_signal(signal.SIGKILL)
    assert spawned.wait(10) == plain.wait(10) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while spawnserver.reaped_cpu() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spawnserver.reaped_cpu() > before  # its CPU counted, though not this process's child


def test_a_path_that_shadows_a_loaded_module_is_refused(program: Path) -> None:
    (program / "yaml.py").write_text("raise SystemExit('not the yaml the server loaded')\n", encoding="utf-8")
    assert spawnserver.spawn(["-m", "prog", "0"], env=dict(os.environ), cwd=program, preload=PRELOAD) is None
    (program / "yaml.py").unlink()
    spawned = spawnserver.spawn(["-m", "prog", "0"], env=dict(os.environ), cwd=program, preload=PRELOAD)
    assert spawned is not None and spawned.wait(30) == 0
