"""In-flight markers: the spec an API server process is validating on an unbounded path, on disk, so
that the process that replaces it can name the spec when it died doing so.

vLLM's API server builds outlines' regex from a schema in its own process, with no time or memory
bound: one schema can abort it (a Rust allocation failure) and take every in-flight request with it.
Nothing survives that in memory, so before that step the probe writes the spec to its state folder
(in a pod, an emptyDir, which outlives a container restart) and removes it after. At arming, a marker
whose owner is gone (its pid no longer runs, or runs another process: the start time differs) is a
death: logged once, moved into the folder's ledger and removed. The ledger keeps each spec's deaths
for as long as the folder lives (the pod), so every successor reports the same growing count and the
daemon's counter moves by one per death, though each process's own counters start from zero. Only
the unbounded path writes: xgrammar's validation never does.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass

from exporter.wire import MAX_TEXT_CHARS

PREFIX, SUFFIX = "inflight-", ".json"
LEDGER = "deaths.json"
MAX_MARKERS = 64  # read at arming; the rest are removed unread (a folder that filled up is not ours)
MAX_LEDGER = 16  # specs whose deaths are kept; beyond, the oldest are forgotten


@dataclass(frozen=True, slots=True)
class Death:
    """What a dead process was validating when it died."""

    pid: int
    backend: str
    kind: str
    spec: str


def _stat(pid: int, field: int) -> str:
    """Field `field` (counted from 3, the state) of /proc/PID/stat, after the command's parentheses;
    "" when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return stat[stat.rindex(")") + 2 :].split()[field - 3]
    except (OSError, ValueError, IndexError):
        return ""


def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with the pid,
    it names one process even after the pid is reused (PID 1 in each new container). "" when unknown."""
    return _stat(pid, 22)


def _state(pid: int) -> str:
    """The process's state letter (field 3: R, S, Z...); "" when unknown."""
    return _stat(pid, 3)


def alive(pid: int, started: str) -> bool:
    """Whether the process that wrote a marker still runs: its pid with the same start time, and not a
    zombie (dead, not yet reaped by its parent: a supervisor that has not waited for it yet)."""
    if pid <= 0:
        return False
    if _state(pid) in ("Z", "X"):
        return False
    now = start_time(pid)
    if now:
        return now == started
    try:  # no /proc: the pid alone
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class DeathCount:
    """A spec's deaths over the folder's life (the pod's), as the ledger keeps them."""

    backend: str
    kind: str
    spec: str
    deaths: int


class Markers:
    """One marker file per validating thread of this process. Never raises: a folder that cannot be
    written only loses the naming of a death."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.pid = os.getpid()
        self.started = start_time(self.pid)
        self.failures = 0  # markers that could not be written or removed
        self.ready = False
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            self.ready = os.access(folder, os.W_OK)
        except OSError:
            self.failures += 1

    def _path(self) -> str:
        return os.path.join(self.folder, f"{PREFIX}{self.pid}-{threading.get_ident()}{SUFFIX}")

    def enter(self, backend: str, kind: str, spec: str) -> str:
        """Writes the marker (atomically: a half-written one is never read); returns its path, "" when
        none was written (not ready, or a spec over MAX_TEXT_CHARS the daemon could not name anyway)."""
        if not self.ready or len(spec) > MAX_TEXT_CHARS:
            return ""
        path = self._path()
        doc = {"pid": self.pid, "started": self.started, "backend": backend, "kind": kind, "spec": spec}
        try:
            _write(path, doc)
            return path
        except (OSError, ValueError, TypeError):
            self.failures += 1
            return ""

    def leave(self, path: str) -> None:
        if not path:
            return
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            self.failures += 1

    def collect(self) -> list[Death]:
        """The markers of processes that are gone, each removed once read; this process's own (a
        leftover of a pid it reuses with the same start time cannot exist) are left alone."""
        if not self.ready:
            return []
        try:
            names = sorted(n for n in os.listdir(self.folder) if n.startswith(PREFIX) and n.endswith(SUFFIX))
        except OSError:
            return []
        deaths = []
        for index, name in enumerate(names):
            path = os.path.join(self.folder, name)
            death = None if index >= MAX_MARKERS else _read(path)
            if death is not None and alive(death[0].pid, death[1]):
                continue  # another live process's (two API servers share the folder)
            if death is not None:
                deaths.append(death[0])
            self.leave(path)
        return deaths


def _read(path: str) -> tuple[Death, str] | None:
    try:
        if os.path.getsize(path) > 2 * MAX_TEXT_CHARS + 1024:
            return None
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        death = Death(int(doc["pid"]), str(doc["backend"]), str(doc["kind"]), str(doc["spec"]))
        return death, str(doc.get("started", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: str, doc: object) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def ledger(folder: str, new: list[Death]) -> list[DeathCount]:
    """The folder's ledger with `new` added (and written back when there is any): every spec's deaths
    so far. Never raises: an unreadable ledger starts again from `new`."""
    path = os.path.join(folder, LEDGER)
    entries: list[DeathCount] = []
    try:
        if os.path.getsize(path) <= MAX_LEDGER * (2 * MAX_TEXT_CHARS + 1024):
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            entries = [
                DeathCount(str(e["backend"]), str(e["kind"]), str(e["spec"]), int(e["deaths"])) for e in doc
            ]
    except (OSError, ValueError, KeyError, TypeError):
        entries = []
    for death in new:
        found = next(
            (e for e in entries if (e.backend, e.kind, e.spec) == (death.backend, death.kind, death.spec)),
            None,
        )
        if found is not None:
            entries.remove(found)
        entries.append(DeathCount(death.backend, death.kind, death.spec, (found.deaths if found else 0) + 1))
    entries = entries[-MAX_LEDGER:]
    if new:
        with contextlib.suppress(OSError, ValueError, TypeError):
            _write(
                path,
                [{"backend": e.backend, "kind": e.kind, "spec": e.spec, "deaths": e.deaths} for e in entries],
            )
    return entries
