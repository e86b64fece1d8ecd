"""Variants of one shape: which literal values differ between them, i.e. the field that varies.

Many `schema_hash` values under one `shape_hash` means something is injected per request. Comparing
the literals (enum members, const, default, examples, title, description) at each JSON pointer
across the variants names the field to move out of the schema, ranked by how many variants differ
there. Literals are kept as digests, never as values: nothing from inside a schema leaves this module.

`unstable_serialization` (one schema, several exact strings) is decided here only: `gdx lint` reports
its findings, the daemon exposes their counts. Injection per request is `dynamic_schema`, decided per
family in injection.py.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from exporter.schema.findings import Finding
from exporter.schema.identity import LITERAL_KEYS, canonical_json
from exporter.schema.walk import Budget, TooComplex, escape, walk

LiteralMap = dict[str, str]  # JSON pointer of a literal -> digest of its canonical value
MAX_LITERALS = 10_000
DEFAULT_BUDGET = Budget()


def literals(schema: Any, budget: Budget = DEFAULT_BUDGET) -> LiteralMap:
    """Digests of every literal at a schema position (not following $refs: pointers are the document's)."""
    out: LiteralMap = {}
    try:
        for node in walk(schema, budget, follow_refs=False):
            for key in LITERAL_KEYS & node.schema.keys():
                value = canonical_json(node.schema[key]).encode("utf-8", "surrogatepass")
                out[f"{node.pointer}/{escape(key)}"] = hashlib.blake2b(value, digest_size=8).hexdigest()
                if len(out) >= MAX_LITERALS:
                    return out
    except (TooComplex, RecursionError, ValueError):
        pass
    return out


def varying_paths(variants: Sequence[LiteralMap], limit: int = 5) -> list[tuple[str, int]]:
    """(pointer, variants that differ from the commonest value there), most differing first."""
    pointers: set[str] = set()
    for m in variants:
        pointers.update(m)
    ranked = []
    for pointer in pointers:
        values = Counter(m.get(pointer, "") for m in variants)
        differ = len(variants) - values.most_common(1)[0][1]
        if differ > 0:
            ranked.append((pointer, differ))
    ranked.sort(key=lambda item: (-item[1], item[0]))
    return ranked[:limit]


def unstable_serialization(exact_strings: int) -> list[Finding]:
    """Several exact strings with one canonical form compile several times."""
    if exact_strings < 2:
        return []
    return [
        Finding(
            "unstable_serialization",
            "warning",
            "",
            f"{exact_strings} different serialisations of this schema reached the engine: each compiles",
            "serialise once (sorted keys, fixed separators) and reuse the string",
        )
    ]


def unstable_serialization_counts(exact_strings: int) -> dict[tuple[str, str], int]:
    """`schema_lint_findings` for `unstable_serialization`: the number of serialisations, each of
    which compiles, rather than the one place the rule fires."""
    return {(f.rule, f.severity): exact_strings for f in unstable_serialization(exact_strings)}
