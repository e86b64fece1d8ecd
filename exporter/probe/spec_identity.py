"""Exact spec string -> identity: the one place the probe names a spec the way the daemon labels it.

The hot path keys specs by the exact string the engine passed (the key of the engine's own cache);
people look schemas up by `schema_hash` (canonical JSON, what `gdx hash FILE` prints), group
per-request variants by `shape_hash` (literals removed) and read the sanitised `title`. The recorder
asks `identify` once per distinct spec, on the shipper thread, never on an engine thread. The hashing
rules themselves are `exporter.schema.identity`'s, shared with the daemon and `gdx hash`; like this
module, it is standard library only.
"""

from __future__ import annotations

from exporter.schema.identity import SpecIdentity, identify

__all__ = ["SpecIdentity", "identify"]
