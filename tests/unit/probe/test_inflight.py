"""In-flight markers: a process that dies validating a spec is named by the one that replaces it,
once per death, with the count kept for the folder's life. Real processes, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from exporter.probe.inflight import LEDGER, MAX_LEDGER, Markers, alive, ledger, start_time
from exporter.wire import MAX_TEXT_CHARS

SPEC = '{"type":"object","patternProperties":{"^x-":{"type":"string"}},"properties":{"a":{}}}'
# A child that marks a spec and dies inside the step, as an aborting API server does (no cleanup).
DIES = """
import os, sys
from exporter.probe.inflight import Markers
m = Markers(sys.argv[1])
assert m.enter("outlines", "json", sys.argv[2])
os.abort()
"""


def die_validating(folder: Path, spec: str = SPEC) -> None:
    child = subprocess.run([sys.executable, "-c", DIES, str(folder), spec], capture_output=True, timeout=60)
    assert child.returncode < 0, child.stderr  # killed by SIGABRT, its marker left behind


def test_a_marker_left_by_a_dead_process_is_one_death_and_is_removed(tmp_path: Path) -> None:
    die_validating(tmp_path)
    (marker,) = tmp_path.glob("inflight-*.json")
    successor = Markers(str(tmp_path))
    (death,) = successor.collect()
    assert (death.backend, death.kind, death.spec) == ("outlines", "json", SPEC)
    assert death.pid != os.getpid() and not marker.exists()
    assert successor.collect() == []  # reported once


def test_the_ledger_counts_each_death_for_the_folders_life(tmp_path: Path) -> None:
    """Each successor reports the spec's deaths so far: the daemon's counter moves once per death
    though every process's own counters start at zero."""
    counts = []
    for _ in range(3):
        die_validating(tmp_path)
        counts.append([(e.spec, e.deaths) for e in ledger(str(tmp_path), Markers(str(tmp_path)).collect())])
    assert counts == [[(SPEC, 1)], [(SPEC, 2)], [(SPEC, 3)]]
    assert [(e.spec, e.deaths) for e in ledger(str(tmp_path), [])] == [(SPEC, 3)]  # no new death: unchanged


def test_the_ledger_is_bounded_and_survives_garbage(tmp_path: Path) -> None:
    from exporter.probe.inflight import Death

    for i in range(MAX_LEDGER + 5):
        ledger(str(tmp_path), [Death(1, "outlines", "json", f'{{"n":{i}}}')])
    kept = ledger(str(tmp_path), [])
    assert len(kept) == MAX_LEDGER and kept[-1].spec == f'{{"n":{MAX_LEDGER + 4}}}'
    (tmp_path / LEDGER).write_text("{not json")
    assert ledger(str(tmp_path), []) == []  # unreadable: starts again, never raises


def test_live_markers_are_left_alone_and_a_reused_pid_is_a_death(tmp_path: Path) -> None:
    mine = Markers(str(tmp_path))
    path = mine.enter("outlines", "json", SPEC)
    assert path and Markers(str(tmp_path)).collect() == []  # this process is alive: not a death
    mine.leave(path)
    # PID 1 again in the restarted container: the same pid, another start time
    doc = {"pid": os.getpid(), "started": "1", "backend": "outlines", "kind": "json", "spec": SPEC}
    (tmp_path / f"inflight-{os.getpid()}-7.json").write_text(json.dumps(doc))
    assert start_time(os.getpid()) not in ("", "1") and not alive(os.getpid(), "1")
    assert [d.spec for d in Markers(str(tmp_path)).collect()] == [SPEC]


def test_no_marker_for_a_spec_the_daemon_could_not_name_or_a_folder_it_cannot_write(tmp_path: Path) -> None:
    markers = Markers(str(tmp_path))
    assert markers.enter("outlines", "json", "x" * (MAX_TEXT_CHARS + 1)) == ""
    blocked = tmp_path / "file"
    blocked.write_text("")
    stuck = Markers(str(blocked / "sub"))  # a path under a file: cannot exist
    assert not stuck.ready and stuck.enter("outlines", "json", SPEC) == "" and stuck.collect() == []
    garbage = tmp_path / "inflight-1-1.json"
    garbage.write_text("{")
    assert markers.collect() == [] and not garbage.exists()  # unreadable markers are removed, not deaths


def test_a_dead_process_its_parent_has_not_reaped_yet_is_a_death(tmp_path: Path) -> None:
    """A zombie keeps its pid and start time until its parent waits for it (a supervisor that has not
    yet): the marker it left is still a death."""
    child = subprocess.Popen([sys.executable, "-c", DIES, str(tmp_path), SPEC], stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # until it has died (its marker written), unreaped
            with open(f"/proc/{child.pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    break
            time.sleep(0.05)
        (death,) = Markers(str(tmp_path)).collect()
        assert death.pid == child.pid
    finally:
        child.wait(timeout=60)
