"""What the engine process is sized with, beside the compile counts: its grammar caches (bytes and
limit, per backend and compiler), its compile pool's workers, the CPUs it believes it has and its
container's CPU quota and throttling.

The wrappers note a compiler or pool once (a dict lookup on the hot path, then nothing); the shipper
thread reads them once per snapshot: `get_cache_size_bytes()` and two cgroup files, off the engine's
threads. Bounded: at most MAX_COMPILERS compilers, held weakly (a dropped compiler is forgotten).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

from exporter.probe import cgroup

MAX_COMPILERS = 8


class EngineFacts:
    def __init__(self, cpu_cgroup: cgroup.CpuCgroup | None = None, locate: bool = True) -> None:
        self._lock = threading.Lock()
        self._compilers: dict[tuple[str, str], weakref.ref[Any]] = {}
        self.pool_workers = 0
        self.backend = ""  # the grammar backend the engine latched on (vLLM: its first request's)
        # The container's own cgroup unless one is given (tests) or looking is turned off.
        if cpu_cgroup is None and locate:
            cpu_cgroup = cgroup.locate()
        self.cgroup = cpu_cgroup

    def note_compiler(self, backend: str, name: str, compiler: Any) -> None:
        """Remembers a grammar compiler whose cache is to be reported (called once per compiler)."""
        try:
            with self._lock:
                live = {k: r for k, r in self._compilers.items() if r() is not None}
                if (backend, name) not in live and len(live) < MAX_COMPILERS:
                    live[(backend, name)] = weakref.ref(compiler)
                self._compilers = live
        except TypeError:  # an object that cannot be referenced weakly: not reported
            pass

    def compiler_name(self, backend: str) -> str:
        """A name for a compiler used directly (not through an engine that names it): its order."""
        return str(sum(1 for b, _ in self._compilers if b == backend))

    def to_wire(self) -> dict[str, Any]:
        caches = []
        for (backend, name), ref in sorted(self._compilers.items()):
            compiler = ref()
            if compiler is None:
                continue
            try:
                size = int(compiler.get_cache_size_bytes())
                limit = int(getattr(compiler, "cache_limit_bytes", -1))
            except Exception:  # a compiler that cannot tell: skipped, never raised
                continue
            caches.append({"backend": backend, "compiler": name, "bytes": max(size, 0), "limit_bytes": limit})
        doc: dict[str, Any] = {
            "caches": caches,
            "pool_workers": self.pool_workers,
            "cpus": os.cpu_count() or 0,
        }
        if self.backend:
            doc["backend"] = self.backend
        throttling = cgroup.read(self.cgroup) if self.cgroup is not None else None
        if throttling is not None:
            doc["cgroup"] = {
                "version": self.cgroup.version if self.cgroup else 0,
                "periods": throttling.periods,
                "throttled_periods": throttling.throttled_periods,
                "throttled_seconds": throttling.throttled_seconds,
                "quota_cores": throttling.quota_cores,
            }
        return doc
