"""Exact spec string -> identity: the one place the probe names a spec the way the daemon labels it.

The hot path keys specs by the exact string the engine passed (the key of the engine's own cache);
people look schemas up by `schema_hash` (canonical JSON, what `gdx hash FILE` prints), group
per-request variants by `shape_hash` (literals removed) and read the sanitised `title`. The recorder
asks `identify` once per distinct spec, on the shipper thread, never on an engine thread. The hashing
rules themselves are `exporter.schema.identity`'s, shared with the daemon and `gdx hash`; like this
module, it is standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.schema.identity import JSON_KINDS, digest, parse_spec, spec_hashes, title_of


@dataclass(frozen=True, slots=True)
class SpecIdentity:
    schema_hash: str
    shape_hash: str
    title: str


def identify(kind: str, text: str) -> SpecIdentity:
    """The identity of one exact spec string of a request kind (`identity.spec_hashes`, the rule
    `gdx lint` reports by); never raises (a spec that cannot be parsed or canonicalised is identified
    by its string)."""
    try:
        parsed = parse_spec(text) if kind in JSON_KINDS else None
        if parsed is not None:
            schema, shape = spec_hashes(kind, text, parsed)
            return SpecIdentity(schema, shape, title_of(parsed))
    except Exception:
        pass
    exact = digest(text)
    return SpecIdentity(exact, exact, "")
