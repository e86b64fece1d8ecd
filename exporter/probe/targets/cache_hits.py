"""The second hit signal for calls slower than the hit threshold: did the compiler's cache grow?

xgrammar counts no hits. A hit returns in microseconds, so a fast call is a hit by time alone; a slow
one (a starved host, or a compile) is told apart by the compiler's cache size, which a compile grows
and a hit does not. The probe keeps its last reading on the compiler object itself.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()


def cache_generation(compiler: Any) -> int:
    """How many cache growths the probe has seen on this compiler; read when a call starts."""
    try:
        return int(compiler.__dict__.get("_gdx_gen", 0))
    except Exception:
        return -1


def cache_unchanged(compiler: Any, generation: int) -> bool:
    """Asked only by calls slower than the hit threshold. The call was a hit if the compiler's cache
    size is what the last slow call saw and no slow call saw it change while this one ran. A compile
    adds an entry; a hit (slow because the host is starved) adds none. A slow hit that overlaps
    another thread's compile counts as a miss: it did wait."""
    try:
        size = compiler.get_cache_size_bytes()
        with _lock:
            state = compiler.__dict__
            current = state.get("_gdx_gen", 0)
            if size != state.get("_gdx_cache_size"):
                state["_gdx_cache_size"] = size
                state["_gdx_gen"] = current + 1
                return False
            return bool(current == generation)
    except Exception:
        return False
