"""The schema analysis measured on JSONSchemaBench (`python -m tools.bench.schemas`, `make bench`).

    counts     lint every schema of schemas/: per category the schemas each rule fires on, and the
               time per schema (p50, p99) and schemas per second (the lint performance target)
    maskbench  for every maskbench schema with must-reject instances: does real xgrammar accept one,
               and did `xgrammar_unenforced` fire? Precision and recall of the rule, and what the
               jsonschema validator says of each acceptance no finding explains (tools/bench/maskbench.py:
               needs xgrammar and --tokenizer, verdicts cached per xgrammar version in .cache/maskbench/)

Prints Markdown tables (docs/measurements/schema-analysis.md holds a run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from exporter.analysis.lint import lint
from exporter.schema import identity, variants
from tools.harness import JSONSCHEMABENCH

DATA = JSONSCHEMABENCH
RULE_COLUMNS = ("depth", "recursive_ref", "union_depth", "union_width", "bounded_quantifier", "large_enum",
                "max_items", "xgrammar_unenforced", "llguidance_refused", "too_complex")  # fmt: skip


def read(folder: Path) -> Iterator[dict[str, Any]]:
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)


def counts(data: Path) -> int:
    per_category: dict[str, Counter[str]] = defaultdict(Counter)
    sizes: Counter[str] = Counter()
    times: list[float] = []
    started = time.perf_counter()
    for doc in read(data / "schemas"):
        schema = doc["schema"]
        t0 = time.perf_counter()
        findings = lint(schema)
        text = json.dumps(schema)
        identity.shape_hash(text, schema)
        variants.literals(schema)
        times.append(time.perf_counter() - t0)
        sizes[doc["category"]] += 1
        for rule in {f.rule for f in findings}:
            per_category[doc["category"]][rule] += 1
    total = time.perf_counter() - started
    print("| category | schemas | " + " | ".join(RULE_COLUMNS) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in RULE_COLUMNS) + " |")
    for category in sorted(sizes):
        cells = " | ".join(str(per_category[category][r]) for r in RULE_COLUMNS)
        print(f"| {category} | {sizes[category]} | {cells} |")
    all_rules = Counter[str]()
    for c in per_category.values():
        all_rules.update(c)
    print(f"| all | {sum(sizes.values())} | " + " | ".join(str(all_rules[r]) for r in RULE_COLUMNS) + " |")
    times.sort()
    p50 = statistics.median(times) * 1e3
    p99 = times[int(len(times) * 0.99)] * 1e3
    print(
        f"\nlint + shape hash + literal digests per schema: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
        f"max {times[-1] * 1e3:.1f} ms; {len(times) / total:.0f} schemas/s ({len(times)} schemas, one thread)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("counts", "maskbench"))
    parser.add_argument("--data", type=Path, default=DATA, help=f"JSONSchemaBench folder (default {DATA})")
    parser.add_argument("--tokenizer", default=os.environ.get("GDX_TOKENIZER_JSON", ""))
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per maskbench schema")
    parser.add_argument("--engines-path", default="", help="maskbench: folder(s) first on the worker's path")
    parser.add_argument("--cached", action="store_true", help="maskbench: cached verdicts only, no compiles")
    parser.add_argument("--sample", type=int, default=1, help="maskbench: 1 in N schemas by digest")
    args = parser.parse_args(argv)
    from tools.bench.machine import header

    print(header("tools.bench.schemas", argv), flush=True)
    if args.what == "counts":
        return counts(args.data)
    from tools.bench import maskbench

    return maskbench.run(args.data, args.tokenizer, args.timeout, args.engines_path, args.cached, args.sample)


if __name__ == "__main__":
    raise SystemExit(main())
