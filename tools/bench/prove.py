"""`gdx lint --prove` measured on JSONSchemaBench's maskbench (`python -m tools.bench.prove`).

For every maskbench schema with must-reject instances on which `xgrammar_unenforced` fires, or on
which xgrammar accepted a must-reject instance (the verdicts `python -m tools.bench.maskbench`
cached for this xgrammar version), in a worker process with the installed (or --engines-path)
xgrammar:
- the share of the table's findings that `--prove` confirms with a counterexample;
- every counterexample re-checked on another path: a fresh compile fed the text as one string
  (`accept_string`, not the prover's tokens) and a fresh `jsonschema` validator (must be 1.00);
- recall with --prove: of the schemas where xgrammar accepted a must-reject instance, the share where
  a finding (table, engine log or search) covers the validator's error on that instance;
- seconds per schema (compile + search), median and p95.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tools.bench import maskbench
from tools.bench.schemas import DATA, read

STARTUP_SECONDS = 300.0


def _worker(tokenizer: str, engines_path: str, seconds: float, inbox: Any, outbox: Any) -> None:
    if engines_path:
        sys.path[:0] = engines_path.split(os.pathsep)
    from importlib import metadata

    from exporter.analysis.lint import lint
    from exporter.engines.grammars import backends
    from exporter.lint.prove.engine import XgrammarEngine
    from exporter.lint.prove.search import ProofSettings, covers, prove
    from exporter.lint.prove.validator import Validator

    engine = XgrammarEngine(tokenizer)
    version = metadata.version("xgrammar")
    recheck = _Recheck(engine)
    outbox.put(("version", version))
    while True:
        job = inbox.get()
        if job is None:
            return
        schema, accepted = job
        text = json.dumps(schema)
        findings = lint(schema, engines=["xgrammar"], versions=backends.Versions(xgrammar=version))
        table = [f for f in findings if f.rule == "xgrammar_unenforced"]
        started = time.perf_counter()
        outcome = prove(text, table, engine, ProofSettings(seconds=seconds, explore=min(1.0, seconds)))
        elapsed = time.perf_counter() - started
        proofs = [
            f.proof
            for f in (*outcome.findings, *outcome.discovered)
            if f.proof and f.proof.status == "proven"
        ]
        checks = [recheck(schema, proof.instance, proof.violation) for proof in proofs]
        final = [f for f in (*outcome.findings, *outcome.discovered)]
        covered = []
        if accepted:
            validator = Validator(schema)
            for instance in accepted:
                violations = validator.violations(instance)
                covered.append(any(covers(f, v) for f in final for v in violations))
        outbox.put({
            "table": len(table),
            "proven": sum(1 for f in outcome.findings if f.proof and f.proof.status == "proven"),
            "verdicts": [
                (f.message.split("`")[1], before.severity, bool(f.proof and f.proof.status == "proven"),
                 f.pointer)
                for before, f in zip(table, outcome.findings, strict=True)
            ],
            "discovered": [f.message.split("`")[1] for f in outcome.discovered],
            "checks": checks,
            "covered": covered,
            "seconds": elapsed,
            "compile": outcome.compile_seconds,
            "error": outcome.error,
        })  # fmt: skip


class _Recheck:
    """Not the prover's path: its own compiler, the text as one string, its own validator."""

    def __init__(self, engine: Any) -> None:
        import xgrammar

        self.info = engine._info  # the tokenizer's vocabulary, shared: loading it twice costs seconds
        self.stop = engine.stop
        self.xgrammar = xgrammar

    def __call__(self, schema: Any, instance: str, violation: str) -> str:
        import jsonschema

        compiler = self.xgrammar.GrammarCompiler(self.info, cache_enabled=False)
        matcher = self.xgrammar.GrammarMatcher(compiler.compile_json_schema(json.dumps(schema)))
        if not (
            matcher.accept_string(instance) and matcher.accept_token(self.stop) and matcher.is_terminated()
        ):
            return "engine rejects"
        from exporter.engines.grammars.backends import draft

        drafts = {"4": jsonschema.Draft4Validator, "6": jsonschema.Draft6Validator,
                  "7": jsonschema.Draft7Validator, "2019-09": jsonschema.Draft201909Validator}  # fmt: skip
        default = drafts.get(draft(schema), jsonschema.Draft202012Validator)  # the spec's rule, not code
        cls = jsonschema.validators.validator_for(schema, default=default)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(json.loads(instance)))
        if not errors:
            return "validator accepts"
        messages = []
        while errors:  # a union's failed branches too: the prover may quote one of them
            error = errors.pop()
            messages.append(error.message if len(error.message) <= 200 else error.message[:197] + "...")
            errors.extend(error.context or [])
        return "ok" if violation in messages else "other error"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--tokenizer", default=os.environ.get("GDX_TOKENIZER_JSON", ""))
    parser.add_argument("--engines-path", default="", help="folders put first on the worker's path")
    parser.add_argument("--seconds", type=float, default=10.0, help="--prove.seconds (default 10)")
    parser.add_argument("--sample", type=int, default=1, help="only schemas whose digest is 0 modulo this")
    parser.add_argument("--limit", type=int, default=0, help="stop after this many schemas")
    parser.add_argument("--dump", type=Path, help="write each schema's verdicts here (JSON lines)")
    args = parser.parse_args(argv)
    from exporter.analysis.lint import lint
    from tools.bench.machine import header

    print(header("tools.bench.prove", argv), flush=True)
    version = maskbench.xgrammar_version(args.engines_path)
    cache = maskbench.load_cache(maskbench.cache_path(version))
    jobs = []
    for case in maskbench.cases(read(args.data / "maskbench"), args.sample):
        measured = cache.get((case.id, case.digest))
        accepted = (
            [case.invalid[i] for i in measured.accepted] if measured and measured.status == "ok" else []
        )
        fires = any(f.rule == "xgrammar_unenforced" for f in lint(case.schema, engines=["xgrammar"]))
        if (fires or accepted) and not (measured and measured.status != "ok"):
            jobs.append((case, accepted))
    if args.limit:
        jobs = jobs[: args.limit]
    print(f"xgrammar {version}: {len(jobs)} schemas ({len(cache)} cached verdicts)", flush=True)
    ctx = mp.get_context("spawn")
    worker: Any = None
    results: list[dict[str, Any]] = []
    timeouts = 0
    for number, (case, accepted) in enumerate(jobs):
        if worker is None or not worker.is_alive():
            inbox, outbox = ctx.Queue(), ctx.Queue()
            worker = ctx.Process(
                target=_worker,
                args=(args.tokenizer, args.engines_path, args.seconds, inbox, outbox),
                daemon=True,
            )
            worker.start()
            outbox.get(timeout=STARTUP_SECONDS)
        inbox.put((case.schema, accepted))
        try:
            result = outbox.get(timeout=args.seconds * 3 + 60)
        except Exception:
            worker.kill()
            worker.join()
            worker = None
            timeouts += 1
            continue
        result["id"] = case.id
        results.append(result)
        if number % 50 == 0:
            print(f"  {number}/{len(jobs)}", flush=True)
    if worker is not None:
        inbox.put(None)
    if args.dump:
        args.dump.write_text("".join(json.dumps(r) + "\n" for r in results))
    _report(version, results, timeouts, args)
    return 0


def _report(version: str, results: list[dict[str, Any]], timeouts: int, args: argparse.Namespace) -> None:
    table = sum(r["table"] for r in results)
    proven = sum(r["proven"] for r in results)
    checks = Counter(check for r in results for check in r["checks"])
    accepted = [r for r in results if r["covered"]]
    cause = sum(1 for r in accepted if any(r["covered"]))
    times = sorted(r["seconds"] + r["compile"] for r in results)
    discovered = Counter(k for r in results for k in r["discovered"])
    scope = f"{len(results)} schemas, budget {args.seconds:g} s, sample {args.sample}"
    print(f"\n## --prove on xgrammar {version} ({scope})")
    print(f"- table findings proven: {proven}/{table} = {proven / max(1, table):.3f}")
    verdicts = [v for r in results for v in r["verdicts"]]
    warned = [v for v in verdicts if v[1] == "warning"]
    shown = sum(1 for v in warned if v[2])
    share = shown / max(1, len(warned))
    print(f"- of those at warning (an undefined format is info): {shown}/{len(warned)} = {share:.3f}")
    left = Counter(v[0] if not v[0].startswith("format ") else "format ..." for v in warned if not v[2])
    print("- warnings left unproven by keyword: " + ", ".join(f"{k} {n}" for k, n in left.most_common()))
    print(f"- counterexamples re-checked: {checks['ok']}/{sum(checks.values())} ok; others {dict(checks)}")
    print(f"- recall (a finding covers the accepted instance's error): {cause}/{len(accepted)} = "
          f"{cause / max(1, len(accepted)):.3f}")  # fmt: skip
    if times:
        p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
        median = statistics.median(times)
        print(f"- seconds per schema (compile + search): median {median:.2f}, p95 {p95:.2f}, "
              f"max {times[-1]:.2f}; timed out {timeouts}")  # fmt: skip
    print(f"- schemas with a gap no table names: {sum(1 for r in results if r['discovered'])}; by keyword: "
          + ", ".join(f"{k} {n}" for k, n in discovered.most_common()))  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
