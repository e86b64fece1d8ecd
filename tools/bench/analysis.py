"""The daemon's schema analysis per distinct schema, before and after families
(`python -m tools.bench.analysis`, in `make bench`).

For every JSONSchemaBench schema, interleaved in one run (these machines are noisy):
  lint only   what the analysis did before families: parse, lint rules, literal digests;
  with family what it does now: `analysis.analyse` (the same, plus the family fingerprint, from one
              parse), the family index's `add` and, for a schema that joins a family (a variant),
              the positions what-varies compares.
Printed: p50, p99 and mean per schema for each, and the ratios. The daemon analyses each distinct
schema once, off the event loop, within a time slice per scrape.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from exporter.analysis import lint
from exporter.daemon.receiver.analysis import analyse, positions
from exporter.schema import family, findings, identity, variants
from tools.bench.schemas import DATA, read


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA, help=f"JSONSchemaBench folder (default {DATA})")
    parser.add_argument("--limit", type=int, default=0, help="schemas to read (default all)")
    args = parser.parse_args(argv)
    thresholds = findings.Thresholds()
    index = family.FamilyIndex(max_families=10_000)
    before: list[float] = []
    after: list[float] = []
    for n, doc in enumerate(read(args.data / "schemas")):
        if args.limit and n >= args.limit:
            break
        text = json.dumps(doc["schema"])
        shape = identity.shape_hash(text)
        t0 = time.perf_counter()
        schema = json.loads(text)
        lint.lint(schema, thresholds)
        variants.literals(schema, thresholds.budget)
        t1 = time.perf_counter()
        result, _ = analyse(shape, "json", text, thresholds)
        if result.fingerprint is not None and not index.add(result.fingerprint).new:
            positions("json", text, thresholds)  # a variant joining a family: what varies needs them
        t2 = time.perf_counter()
        before.append(t1 - t0)
        after.append(t2 - t1)
    print(f"schemas: {len(before)}")
    print("| analysis per schema | p50 ms | p99 ms | mean ms |")
    print("| --- | ---: | ---: | ---: |")
    for name, times in (("lint only (before families)", before), ("with family (now)", after)):
        print(
            f"| {name} | {quantile(times, 0.5) * 1e3:.2f} | {quantile(times, 0.99) * 1e3:.2f} "
            f"| {statistics.fmean(times) * 1e3:.2f} |"
        )
    print(
        f"ratio now/before: p50 {quantile(after, 0.5) / quantile(before, 0.5):.2f}x, "
        f"p99 {quantile(after, 0.99) / quantile(before, 0.99):.2f}x, "
        f"mean {statistics.fmean(after) / statistics.fmean(before):.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
