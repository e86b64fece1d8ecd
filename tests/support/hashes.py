"""The schema_hash comparison of the tool-call agreements: ours kept per text (many parsers derive the
same one), the engine's hashed anew every time, so that each comparison hashes what the engine made."""

from __future__ import annotations

from exporter.schema.identity import schema_hash


def hashes_agree(ours: str, theirs: str, memo: dict[str, str] | None = None) -> bool:
    mine = None if memo is None else memo.get(ours)
    if mine is None:
        mine = schema_hash(ours)
        if memo is not None:
            memo[ours] = mine
    return mine == schema_hash(theirs)
