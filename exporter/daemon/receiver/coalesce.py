"""One snapshot standing for several held snapshots of one engine, so that a read pass checks and
applies a batch once instead of each one (`MessageHandling._apply_conn`).

Why: a probe sends a snapshot a second, and what a daemon with nobody scraping spends is mostly
decoding, checking and applying them, about 0.1 ms each (docs/measurements/daemon-speedups.md). Their
values are cumulative and a non-full snapshot lists only the specs that changed, so a batch applies
exactly as the last snapshot's totals with, per spec, its latest row, every eviction in order, and
each backend's latest `other`. Only the fields merged are read from the earlier snapshots: their
superseded totals (backends, cpu, the probe's counters...) are never checked, nor used.

Not merged (None: each is applied as it came, as before): anything that does not decode to a plain
non-full snapshot, an API server's (`deaths`: its stalls and deaths make node verdicts per snapshot),
a row or eviction that is not what the protocol says, and a row of a spec an earlier snapshot of the
batch evicted (applied one by one it is ignored, merged it would count). Pure.
"""

from __future__ import annotations

from typing import Any

import orjson


def coalesce(lines: list[bytes]) -> dict[str, Any] | None:
    """The decoded snapshot that applies as `lines` applied in order would, or None."""
    rows: dict[int, Any] = {}
    evicted: list[int] = []
    gone: set[int] = set()
    other: dict[str, Any] = {}
    doc: Any = None
    for line in lines:
        try:
            doc = orjson.loads(line)
        except (ValueError, RecursionError):
            return None
        if (
            type(doc) is not dict
            or doc.get("kind") != "snapshot"
            or doc.get("full")
            or doc.get("deaths") is not None
        ):
            return None
        these = doc.get("schemas", [])
        out = doc.get("evicted", [])
        more = doc.get("other", {})
        if type(these) is not list or type(out) is not list or type(more) is not dict:
            return None
        for row in these:
            spec = row.get("id") if type(row) is dict else None
            if type(spec) is not int or spec in gone:
                return None
            rows[spec] = row
        for spec in out:
            if type(spec) is not int:
                return None
            gone.add(spec)
        evicted.extend(out)
        other.update(more)
    if doc is None:
        return None
    return {**doc, "schemas": list(rows.values()), "evicted": evicted, "other": other}
