"""The guard (GDX_GUARD=off|observe|enforce, default off): in vLLM's API server, a schema whose
outlines validation is known to freeze or kill the server is refused before that validation runs.

Under `auto`, vLLM's API server validates a schema its router sends to outlines in its own process,
with no time or memory bound (docs/probe.md#api-server): one schema can stall every request for
seconds or abort the process. Before that step the guard looks the schema's hash up among its
verdicts:
- a death: a previous API server of this pod died validating it (the marker ledger, inflight.py);
- lint: `gdx lint --engine vllm --write-guard FILE` predicted server_crash or server_stall for it
  (GDX_GUARD_FILE, loaded at arming);
- daemon: an API server anywhere on the node died on it or stalled a second or more validating it:
  the daemon sends the node's verdicts over the probe's connection (daemon/receiver/verdicts.py);
- bounded: a schema with no verdict is first validated in a helper process under the guard's bounds
  (GDX_GUARD_MEMORY, 1GiB; GDX_GUARD_TIMEOUT, 1 s of CPU, the interpreter's start left out, ten
  times that of wall clock): one that dies or runs past them gets a verdict, one that finishes is
  cleared and not run again.
`enforce` refuses a schema with a verdict with vLLM's own validation error (HTTP 400) naming the
reason, the schema hash and the fix; `observe` only counts (guided_decoding_guard_requests_total,
action would_refuse). A verdict expires
after GDX_GUARD_VERDICT_SECONDS (a day), so a fixed engine is not refused forever; verdicts and
cleared hashes are bounded (GDX_GUARD_MAX_VERDICTS, least recently used first out). The guard never
refuses what it cannot justify: any internal error lets the request through (`guard_errors`).

A third reason reaches every structured request, not only the outlines path: compile_budget, a schema
whose grammar compiled longer than the node's budget on an engine of the node (the daemon's
--guard.compile-budget, off by default). Only while such a verdict lives does the guard look at every
request's schema, and first by its `screen` (identity.screen_key: an object's key counts, a string's
length), which the daemon sends with the verdict: only a request that matches one is hashed. With none,
a structured request pays one attribute read; the outlines path pays the lookup and the bounded run.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from exporter.engines.vllm import outlines_validation
from exporter.schema.identity import Screen, identify, schema_hash, screen_key
from exporter.wire import GUARD_REASONS

log = logging.getLogger("gdx.probe")
MODES = ("off", "observe", "enforce")
REASONS = GUARD_REASONS  # the wire protocol's: what the daemon accepts from the probe and sends back
EVERYWHERE = frozenset({"compile_budget"})  # reasons refused on every path, not only outlines'
UNSCREENED: Screen = (-3, 0)  # a verdict that came without screens: every request is hashed
SOURCES = ("death", "bounded", "lint", "daemon")
MAX_FILE_BYTES = 4 << 20  # a verdict list is hashes and reasons: a larger file is not one
PIN = '--structured-outputs-config \'{"backend": "xgrammar"}\''
MAX_SCREENS = 4


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """What the guard reads from the API server's environment (GDX_GUARD*)."""

    mode: str = "off"
    memory_bytes: int = 1 << 30
    timeout: float = 1.0
    verdict_file: str = ""
    verdict_seconds: float = 86400.0
    max_verdicts: int = 4096


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why a schema is refused: `reason` (server_crash, server_stall), where the verdict came from
    (`source`: death, bounded, lint), a short detail, and when it expires (monotonic seconds)."""

    reason: str
    source: str
    detail: str
    expires: float

    def message(self, schema_hash: str) -> str:
        """The 400's text: what happened, the schema, and the fix."""
        if self.reason in EVERYWHERE:
            return (f"guided-decoding guard: schema {schema_hash} refused ({self.reason}: {self.detail}); its"
                    " grammar compile holds the engine's batch for that long. Send the schema `gdx fix`"
                    " writes, or a simpler one")  # fmt: skip
        what = {
            "death": "an API server of this pod died validating it",
            "bounded": f"its validation, run bounded first, {self.detail}",
            "lint": f"gdx lint predicted it ({self.detail})",
            "daemon": "an API server of this node stalled or died on it (the node's daemon said)",
        }.get(self.source, self.detail)
        return (f"guided-decoding guard: schema {schema_hash} refused ({self.reason}: {what}); vLLM's"
                f" outlines validation of it stalls or kills this server. Pin the backend ({PIN}) or send"
                " the schema `gdx fix` writes")  # fmt: skip


class Guard:
    """Verdicts by schema hash, and the schemas validated within the bounds; thread-safe, bounded."""

    def __init__(
        self,
        settings: GuardSettings,
        validate: Callable[[str], outlines_validation.BoundedRun] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._validate = validate or self._bounded
        self._clock = clock
        self._lock = threading.Lock()
        self._verdicts: OrderedDict[str, Verdict] = OrderedDict()
        self._cleared: OrderedDict[str, float] = OrderedDict()  # hash -> when the clearance expires
        self._screened: dict[str, tuple[Screen, ...]] = {}  # hash -> screens, of the EVERYWHERE verdicts
        # every request's first test: the screens of the live EVERYWHERE verdicts (empty: none, and a
        # structured request pays nothing more); rebuilt when they change
        self.screens: frozenset[Screen] = frozenset()
        self._screens_until = float("inf")  # when the first of them expires
        self.runs = 0  # bounded validations made

    @property
    def enforcing(self) -> bool:
        return self.settings.mode == "enforce"

    def add(
        self, schema_hash: str, reason: str, source: str, detail: str = "", screens: tuple[Screen, ...] = ()
    ) -> None:
        """A verdict; `screens` (an EVERYWHERE reason's): the request forms it can come in (none known:
        every request is hashed while it lives)."""
        expires = self._clock() + self.settings.verdict_seconds
        with self._lock:
            self._verdicts[schema_hash] = Verdict(reason, source, detail[:300], expires)
            self._verdicts.move_to_end(schema_hash)
            self._cleared.pop(schema_hash, None)
            changed = self._screened.pop(schema_hash, None) is not None
            if reason in EVERYWHERE:
                self._screened[schema_hash] = screens[:MAX_SCREENS] or (UNSCREENED,)
                changed = True
            while len(self._verdicts) > self.settings.max_verdicts:
                gone, _ = self._verdicts.popitem(last=False)
                changed = self._screened.pop(gone, None) is not None or changed
            if changed:
                self._rescreen()

    def verdict(self, schema_hash: str) -> Verdict | None:
        """The schema's live verdict; an expired one is dropped."""
        with self._lock:
            found = self._verdicts.get(schema_hash)
            if found is not None and found.expires <= self._clock():
                del self._verdicts[schema_hash]
                if self._screened.pop(schema_hash, None) is not None:
                    self._rescreen()
                return None
            return found

    def _rescreen(self) -> None:
        self.screens = frozenset(s for screens in self._screened.values() for s in screens)
        self._screens_until = min((self._verdicts[h].expires for h in self._screened), default=float("inf"))

    def screen(self, spec: object) -> tuple[str, Verdict] | None:
        """(schema hash, verdict) when a request's JSON Schema (`spec`: the object or string vLLM holds)
        has an EVERYWHERE verdict, else None. The caller tests `screens` first: empty, nothing to do."""
        if self._clock() >= self._screens_until:  # a verdict no request asks for again expires too
            with self._lock:
                now = self._clock()
                for gone in [h for h in self._screened if self._verdicts[h].expires <= now]:
                    del self._verdicts[gone], self._screened[gone]
                self._rescreen()
        screens = self.screens
        if screen_key(spec) not in screens and UNSCREENED not in screens:
            return None
        found_hash = schema_hash(spec) if isinstance(spec, str) else schema_hash("", spec)
        found = self.verdict(found_hash)
        return (found_hash, found) if found is not None and found.reason in EVERYWHERE else None

    def __len__(self) -> int:
        return len(self._verdicts)

    def judge(self, kind: str, spec: str) -> tuple[str, Verdict | None]:
        """(schema hash, its verdict or None) for a spec about to take the outlines validation: a
        verdict already held, else the bounded run's (once per schema while its clearance lasts)."""
        schema_hash = identify(kind, spec).schema_hash
        found = self.verdict(schema_hash)
        if found is not None or kind != "json":
            return schema_hash, found
        now = self._clock()
        with self._lock:
            until = self._cleared.get(schema_hash)
            if until is not None and until > now:
                self._cleared.move_to_end(schema_hash)
                return schema_hash, None
        self.runs += 1
        run = self._validate(spec)
        if run.outcome in ("died", "timeout"):
            reason = "server_crash" if run.outcome == "died" else "server_stall"
            self.add(schema_hash, reason, "bounded", _ran(run, self.settings))
            return schema_hash, self.verdict(schema_hash)
        if run.outcome in ("validated", "rejected"):  # "unavailable": nothing learned, ask again
            with self._lock:
                self._cleared[schema_hash] = now + self.settings.verdict_seconds
                while len(self._cleared) > self.settings.max_verdicts:
                    self._cleared.popitem(last=False)
        return schema_hash, None

    def load(self, entries: Iterable[object], source: str) -> int:
        """Verdicts from a list of {"schema_hash", "reason", "detail"} (what `gdx lint --write-guard`
        writes); entries that are not that are skipped. Returns how many were taken."""
        taken = 0
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            schema_hash, reason = entry.get("schema_hash"), entry.get("reason")
            if (isinstance(schema_hash, str) and len(schema_hash) == 12 and schema_hash.isalnum()
                    and reason in REASONS):  # fmt: skip
                self.add(schema_hash, str(reason), source, str(entry.get("detail", ""))[:300],
                         _screens(entry.get("screens")))  # fmt: skip
                taken += 1
        return taken

    def _bounded(self, spec: str) -> outlines_validation.BoundedRun:
        limit = self.settings.timeout
        # The bound is CPU seconds of the steps (a contended node does not make a schema a stall); the
        # wall clock backs it at ten times that, and a child still running then is a stall too.
        return outlines_validation.run(
            spec, self.settings.memory_bytes, timeout=max(10 * limit, limit + 5), python=sys.executable,
            step_timeout=limit,
        )  # fmt: skip


def _screens(value: object) -> tuple[Screen, ...]:
    """A verdict entry's `screens` ([[a, b], ...], identity.screen_key's pairs); others are left out."""
    if not isinstance(value, list):
        return ()
    return tuple(
        (item[0], item[1]) for item in value[:MAX_SCREENS]
        if isinstance(item, list) and len(item) == 2 and all(type(n) is int for n in item)
    )  # fmt: skip


def _ran(run: outlines_validation.BoundedRun, settings: GuardSettings) -> str:
    if run.outcome == "died":
        return f"died under {settings.memory_bytes >> 20} MiB"
    return f"ran past {settings.timeout:g} s"


def read_file(path: str) -> list[object]:
    """The verdict list at `path` (JSON: {"verdicts": [...]}, or the list itself); [] with a log line
    when it cannot be read: a bad ConfigMap must not stop the server."""
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise ValueError(f"over {MAX_FILE_BYTES} bytes")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        entries = doc.get("verdicts") if isinstance(doc, dict) else doc
        if not isinstance(entries, list):
            raise ValueError("no list of verdicts")
        return entries
    except (OSError, ValueError) as err:
        log.warning("guided-decoding guard: GDX_GUARD_FILE %s not loaded: %s", path, err)
        return []
