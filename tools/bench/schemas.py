"""The schema analysis measured on JSONSchemaBench (`python -m tools.bench.schemas`, `make bench`).

    counts     lint every schema of schemas/: per category the schemas each rule fires on, and the
               time per schema (p50, p99) and schemas per second (the lint performance target)
    maskbench  for every maskbench schema with must-reject instances: does real xgrammar accept one,
               and did `xgrammar_unenforced` fire? Precision and recall of the rule (needs xgrammar
               and --tokenizer; each schema in a worker process, killed after --timeout)

Prints Markdown tables (docs/schema-analysis.md holds a run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from exporter.schema import identity, variants
from exporter.schema.lint import lint
from tools.harness import ROOT

DATA = Path(os.environ.get("GDX_SHARED_DIR", ROOT.parent / "shared")) / "data" / "jsonschemabench"
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


def _worker(tokenizer: str, inbox: Any, outbox: Any) -> None:
    from exporter.enginecheck import Engines

    engines = Engines(tokenizer, ["xgrammar"])
    while True:
        job = inbox.get()
        if job is None:
            return
        schema, invalid = job
        try:
            accepted = any(engines.xgrammar_accepts(schema, inst) == "unenforced" for inst in invalid)
            outbox.put(("ok", accepted))
        except Exception as err:
            outbox.put(("error", str(err)[:100]))


def maskbench(data: Path, tokenizer: str, timeout: float) -> int:
    ctx = mp.get_context("spawn")
    worker = None
    inbox: Any = None
    outbox: Any = None
    tally: Counter[str] = Counter()
    keywords: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    for doc in read(data / "maskbench"):
        invalid = [t["data"] for t in doc.get("tests", []) if t.get("valid") is False]
        if not invalid:
            continue
        if worker is None or not worker.is_alive():
            inbox, outbox = ctx.Queue(), ctx.Queue()
            worker = ctx.Process(target=_worker, args=(tokenizer, inbox, outbox), daemon=True)
            worker.start()
        inbox.put((doc["schema"], invalid))
        try:
            status, value = outbox.get(timeout=timeout)
        except Exception:
            worker.kill()
            worker = None
            tally["timeout"] += 1
            continue
        if status == "error":
            tally["does not compile"] += 1
            continue
        fired = [f for f in lint(doc["schema"], engines=["xgrammar"]) if f.rule == "xgrammar_unenforced"]
        key = ("fired" if fired else "quiet") + ("+accepted" if value else "")
        tally[key] += 1
        if fired and value:
            keywords.update({f.message.split("`")[1] for f in fired})
        if value and not fired:
            missed[doc["category"]] += 1
    if worker is not None:
        inbox.put(None)
    tp, fp, fn = tally["fired+accepted"], tally["fired"], tally["quiet+accepted"]
    print("| xgrammar on must-reject instances | rule fired | rule quiet |")
    print("| --- | ---: | ---: |")
    print(f"| accepted at least one (unenforced) | {tp} | {fn} |")
    print(f"| rejected all | {fp} | {tally['quiet']} |")
    rates = f"precision {tp / max(1, tp + fp):.2f}, recall {tp / max(1, tp + fn):.2f}"
    failed = f"not compiled: {tally['does not compile']}, timed out (> {timeout:g} s): {tally['timeout']}"
    print(f"\n{rates}; {failed}")
    print("keywords named where xgrammar did accept an invalid instance: " + ", ".join(
        f"{k} {n}" for k, n in keywords.most_common()))  # fmt: skip
    print(
        "unexplained acceptances by category: "
        + (", ".join(f"{k} {n}" for k, n in missed.most_common()) or "none")
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
    args = parser.parse_args(argv)
    from tools.bench.machine import header

    print(header("tools.bench.schemas", argv), flush=True)
    if args.what == "counts":
        return counts(args.data)
    if not args.tokenizer:
        parser.error("maskbench needs --tokenizer (or GDX_TOKENIZER_JSON)")
    return maskbench(args.data, args.tokenizer, args.timeout)


if __name__ == "__main__":
    raise SystemExit(main())
