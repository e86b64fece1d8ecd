# ruff: noqa: E501  (traffic bodies and table rows read better on one line)
"""`gdx fix` on three kinds of injected traffic (`python -m tools.bench.fix`): what the fix costs to
make and prove per family, and the compile seconds of the same requests before and after, side by side.

The traffic, 40 requests each: per-tenant cost-centre codes in `$defs` (the seed's Pydantic case),
per-request item counts and ranges, and an agent's per-request tool subsets (tool_choice required,
the pythonic parser). For each family: seconds to merge (the static schema), then per engine (real
xgrammar and real llguidance over the Llama 3 tokenizer) the seconds to prove it, and every request
compiled as vLLM serves it (xgrammar: one caching compiler, a compile per distinct variant; llguidance:
no cache, a compile per request) beside every request sent as the static schema, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from exporter.fix.plan import plans, schemas_by_hash
from exporter.fix.proof import prove
from exporter.lint.prove.engine import LlguidanceEngine, ProofEngine, XgrammarEngine
from exporter.lint.report import analyse
from exporter.lint.requests import Inputs, Request, ToolServer, parse_file
from exporter.schema.findings import Thresholds
from tools.harness import TOKENIZER_JSON

REQUESTS = 40


def _chat(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [],
        "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}},
    }


def traffic() -> dict[str, list[dict[str, Any]]]:
    rng = random.Random(29)
    tenants = []
    for _ in range(REQUESTS):
        t = rng.randrange(1000)
        codes = [f"CC-{t:03d}-{j}" for j in range(4)]
        line = {"properties": {"amount": {"type": "number"}, "cost_center": {"enum": codes, "type": "string"}},
                "required": ["amount", "cost_center"], "title": "LineItem", "type": "object"}  # fmt: skip
        tenants.append(_chat({"$defs": {"LineItem": line}, "title": "Invoice", "type": "object", "required": ["lines"],
                              "properties": {"lines": {"items": {"$ref": "#/$defs/LineItem"}, "type": "array"}}}))  # fmt: skip
    counts = []
    for i in range(REQUESTS):
        n = i + 1
        counts.append(_chat({"title": "Picks", "type": "object", "required": ["items"], "properties": {
            "items": {"type": "array", "items": {"type": "string"}, "minItems": n, "maxItems": n},
            "score": {"type": "number", "minimum": 0, "maximum": 10 * n}}}))  # fmt: skip
    names = [f"tool_{i}" for i in range(12)]
    tools = []
    for _ in range(REQUESTS):
        enabled = sorted(rng.sample(names, rng.randint(2, 8)), key=names.index)
        tools.append({"model": "m", "messages": [], "tool_choice": "required", "tools": [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object", "required": [f"a{k}"],
             "properties": {f"a{k}": {"type": "string"}, f"b{k}": {"type": "integer"}}}}}
            for k, n in ((names.index(n), n) for n in enabled)]})  # fmt: skip
    return {"tenant codes in $defs": tenants, "item counts and ranges": counts, "tool subsets": tools}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", default=str(TOKENIZER_JSON))
    args = parser.parse_args(argv)
    from tools.bench.machine import header

    print(header("tools.bench.fix", argv), flush=True)
    engines: list[ProofEngine] = [XgrammarEngine(args.tokenizer), LlguidanceEngine(args.tokenizer)]
    print(", ".join(f"{e.name} {e.version}" for e in engines) + f", {REQUESTS} requests per traffic\n")
    print(
        "| traffic | variants | moved | merge | engine | proof | valid kept / invalid caught | compiles before | after | ratio |"
    )
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, bodies in traffic().items():
        text = "".join(json.dumps(b) + "\n" for b in bodies)
        records = parse_file(f"{label}.jsonl", text, tools=ToolServer("pythonic", "0.33.0"))
        requests = tuple(r for r in records if isinstance(r, Request))
        report = analyse(Inputs(requests), Thresholds(), ("xgrammar",))
        started = time.perf_counter()
        (plan,) = plans(report, schemas_by_hash(requests))
        merge_seconds = time.perf_counter() - started
        lines = {s.schema_hash: s.lines for f in report.families for s in f.schemas}
        for engine in engines:
            started = time.perf_counter()
            proof = prove(plan, engine, [lines.get(h, 1) for h in plan.hashes])
            proof_seconds = time.perf_counter() - started
            before = sum(engine.request_compiles([r.text for r in requests]))
            after = sum(engine.request_compiles([plan.static_text] * len(requests)))
            print(
                f"| {label} | {len(plan.variants)} | {len(plan.merged.moved)} | {merge_seconds * 1000:.1f} ms | "
                f"{engine.name} | {proof_seconds:.2f} s | {proof.valid} / {proof.caught} | {before:.3f} s | "
                f"{after:.3f} s | {before / after:.1f}x |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
