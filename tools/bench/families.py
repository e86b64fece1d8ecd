"""Schema families on JSONSchemaBench (`python -m tools.bench.families`): do different schemas merge?

Every benchmark schema is a different schema, so a family that holds more than one distinct schema
(by `schema_hash`) is a false merge. Each schema is fed, as one spec, to a `FamilyIndex` large enough
to hold them all (default quorum and variants), in the benchmark's order. Printed: schemas read,
families, the false-merge count and rate (schemas in a family holding more than one distinct schema
/ all schemas), split into families of one literal-free shape (of which those whose schemas differ
only in the order of `required`, i.e. are equivalent) and families joined through holes; the same
figures without the quorum, with description/title removed instead of masked and with numeric bounds
kept as structure (the alternatives
docs/families.md measures); the 10 largest merged families (sizes and counts only, no values); the
time per schema (fingerprint + index) p50/p99.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from exporter.schema.family import MASKED, NUMBERS, REMOVED, FamilyIndex, Fingerprint, Rules, fingerprint
from exporter.schema.family.definitions import canonical
from exporter.schema.identity import schema_hash
from tools.bench.schemas import DATA, read


@dataclass(frozen=True)
class Spec:
    category: str
    exact: str  # schema_hash
    fp: Fingerprint


@dataclass(frozen=True)
class Grouping:
    families: dict[str, list[Spec]]
    times: list[float]


def group(docs: list[tuple[str, str, object]], rules: Rules, quorum: int = 4) -> Grouping:
    """Feed every (category, text, parsed) to one index; follow absorbed ids to their family."""
    index = FamilyIndex(max_families=len(docs) + 1, max_per_frame=len(docs) + 1, quorum=quorum)
    alias: dict[str, str] = {}
    placed: list[tuple[str, Spec]] = []
    times = []
    for category, text, schema in docs:
        t0 = time.perf_counter()
        fp = fingerprint(text, schema, rules=rules)
        membership = index.add(fp)
        times.append(time.perf_counter() - t0)
        for gone in membership.absorbed:
            alias[gone] = membership.family
        placed.append((membership.family, Spec(category, schema_hash(text, schema), fp)))
    families: dict[str, list[Spec]] = defaultdict(list)
    for family, spec in placed:
        for _ in range(len(alias)):
            if family not in alias:
                break
            family = alias[family]
        families[family].append(spec)
    return Grouping(dict(families), times)


def _required_sorted(value: object) -> object:
    """The schema with every `required` list sorted: equal results are equivalent JSON Schemas."""
    if isinstance(value, dict):
        return {
            k: sorted(v, key=str) if k == "required" and isinstance(v, list) else _required_sorted(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_required_sorted(v) for v in value]
    return value


def _renamed(schema: object) -> str:
    """The schema up to its definitions' names and its `required` order."""
    return json.dumps(_required_sorted(canonical(schema)[0]), sort_keys=True)


@dataclass(frozen=True)
class Merges:
    schemas: int  # in a family holding more than one distinct schema
    literal_only: int  # of which in families of one literal-free shape
    equivalent: int  # of which in families whose schemas differ only in the order of `required`
    renamed: int = 0  # of which in families whose schemas differ only in definition names (and order)

    @property
    def through_holes(self) -> int:
        return self.schemas - self.literal_only


def false_merges(families: dict[str, list[Spec]], parsed: dict[str, object]) -> Merges:
    merged = literal_only = equivalent = renamed = 0
    for specs in families.values():
        exact = {s.exact for s in specs}
        if len(exact) > 1:
            merged += len(specs)
            if len({s.fp.shape for s in specs}) == 1:
                literal_only += len(specs)
            if len({json.dumps(_required_sorted(parsed[e]), sort_keys=True) for e in exact}) == 1:
                equivalent += len(specs)
            elif (
                len({json.dumps(_required_sorted(canonical(parsed[e])[0]), sort_keys=True) for e in exact})
                == 1
            ):
                renamed += len(specs)
    return Merges(merged, literal_only, equivalent, renamed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA, help=f"JSONSchemaBench folder (default {DATA})")
    args = parser.parse_args(argv)
    from tools.bench.machine import header

    print(header("tools.bench.families", argv), flush=True)
    docs = [(d["category"], json.dumps(d["schema"]), d["schema"]) for d in read(args.data / "schemas")]
    parsed = {schema_hash(text, schema): schema for _, text, schema in docs}
    n = len(docs)
    result = group(docs, Rules())
    m = false_merges(result.families, parsed)
    print(
        f"schemas read: {n}; distinct schemas (schema_hash): {len(parsed)}; families: {len(result.families)}"
    )
    print(
        f"false merges: {m.schemas} schemas ({m.schemas / n:.2%}); {m.literal_only} of them in families "
        f"of one literal-free shape ({m.equivalent} differ only in the order of `required`, {m.renamed} only "
        f"in definition names), {m.through_holes} joined through holes; "
        f"without the equivalent and renamed ones: {(m.schemas - m.equivalent - m.renamed) / n:.2%}"
    )
    for label, rules, quorum in (
        ("without the quorum (quorum 1)", Rules(), 1),
        (
            "with description/title/$comment removed instead of masked",
            Rules(REMOVED | MASKED, frozenset()),
            4,
        ),
        ("with numeric bounds kept as structure (numbers never vary)", Rules(REMOVED - NUMBERS, MASKED), 4),
    ):
        other = group(docs, rules, quorum)
        o = false_merges(other.families, parsed)
        print(
            f"{label}: {len(other.families)} families, "
            f"false merges {o.schemas} schemas ({o.schemas / n:.2%}), "
            f"{o.literal_only} of one literal-free shape, {o.through_holes} through holes"
        )
    big = sorted(
        (specs for specs in result.families.values() if len({s.exact for s in specs}) > 1),
        key=lambda specs: (-len(specs), specs[0].fp.frame),
    )[:10]
    print("\n| family | schemas | distinct schemas | distinct shapes | frame size | holes | categories |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for specs in big:
        fp = specs[0].fp
        cats = ", ".join(f"{c} {k}" for c, k in Counter(s.category for s in specs).most_common())
        exact, shapes = len({s.exact for s in specs}), len({s.fp.shape for s in specs})
        print(f"| {fp.key} | {len(specs)} | {exact} | {shapes} | {fp.size} | {len(fp.holes)} | {cats} |")
    if not big:
        print("| (none) | | | | | | |")
    times = sorted(result.times)
    degraded = sum(1 for f in result.families.values() for s in f if s.fp.degraded)
    print(
        f"\nfingerprint + index per schema: p50 {statistics.median(times) * 1e3:.2f} ms, "
        f"p99 {times[int(len(times) * 0.99)] * 1e3:.2f} ms, max {times[-1] * 1e3:.1f} ms "
        f"({n} schemas, one thread); over the budget (own family): {degraded}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
