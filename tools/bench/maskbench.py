"""Does `xgrammar_unenforced` predict what real xgrammar lets through? (`python -m tools.bench.schemas
maskbench`, docs/measurements/schema-analysis.md holds a run.)

For every maskbench schema with must-reject instances, real xgrammar compiles the schema as vLLM does
by default (any whitespace, the compiler cache on; compact separators would make xgrammar 0.2.7/0.2.8
reject valid output for formatting reasons, docs/measurements/engine-versions.md §3) and is fed each
must-reject instance. Each schema runs in a worker process, killed after --timeout. The engine's verdicts are
cached per schema and xgrammar version under .cache/maskbench/, so that recall can be recomputed
after a table change without compiling again (`--cached` uses only the cache). Each acceptance that
no finding explains is put to the `jsonschema` validator, which names the keyword the instance fails.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import multiprocessing as mp
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from exporter.analysis.lint import lint
from exporter.engines.grammars import backends
from tools.harness import ROOT

CACHE = ROOT / ".cache" / "maskbench"
STARTUP_SECONDS = 300.0  # importing torch and xgrammar cold, and loading the tokenizer


@dataclass(frozen=True)
class Measured:
    """One schema's verdict from one xgrammar version."""

    id: str
    digest: str  # sha1 of the schema's JSON: a changed data set is not matched from the cache
    category: str
    status: str  # "ok", "error" (does not compile) or "timeout"
    seconds: float  # compile seconds; the timeout for "timeout"
    accepted: list[int]  # indices of the must-reject instances xgrammar accepted
    error: str = ""


@dataclass(frozen=True)
class Case:
    id: str
    digest: str
    category: str
    schema: Any
    invalid: list[Any]


def digest(schema: Any) -> str:
    return hashlib.sha1(json.dumps(schema, sort_keys=True).encode()).hexdigest()


def cases(docs: Iterable[dict[str, Any]], sample: int) -> Iterator[Case]:
    """The schemas with must-reject instances; with `sample` > 1 only those whose digest is 0 modulo
    it (a deterministic subset for the slow old versions)."""
    for doc in docs:
        invalid = [t["data"] for t in doc.get("tests", []) if t.get("valid") is False]
        key = digest(doc["schema"])
        if invalid and (sample <= 1 or int(key, 16) % sample == 0):
            yield Case(str(doc.get("id", key)), key, doc["category"], doc["schema"], invalid)


def xgrammar_version(engines_path: str) -> str:
    """The xgrammar version a worker with `engines_path` first on its path imports (read from the
    package metadata, without importing it: two versions in one process abort)."""
    paths = [*engines_path.split(os.pathsep), *sys.path] if engines_path else sys.path
    return metadata.version("xgrammar") if not engines_path else _version_on(paths)


def _version_on(paths: list[str]) -> str:
    for dist in metadata.distributions(path=paths):
        if dist.metadata["Name"] == "xgrammar":
            return dist.version
    raise SystemExit(f"xgrammar not found on {paths[:2]}")


def cache_path(version: str) -> Path:
    return CACHE / f"xgrammar-{version}.jsonl"


def load_cache(path: Path) -> dict[tuple[str, str], Measured]:
    out: dict[tuple[str, str], Measured] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = Measured(**json.loads(line))
                out[(item.id, item.digest)] = item
    return out


def _worker(tokenizer: str, engines_path: str, inbox: Any, outbox: Any) -> None:
    if engines_path:
        sys.path[:0] = engines_path.split(os.pathsep)
    from exporter.lint.engines import Engines

    engines = Engines(tokenizer, ["xgrammar"], vllm_defaults=True)
    outbox.put(("version", metadata.version("xgrammar"), []))
    while True:
        job = inbox.get()
        if job is None:
            return
        schema, invalid = job
        started = time.perf_counter()
        try:
            compiled = engines.xgrammar_compile(json.dumps(schema))
        except Exception as err:
            why = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
            outbox.put(("error", time.perf_counter() - started, why))
            continue
        seconds = time.perf_counter() - started
        try:
            verdicts = [engines.xgrammar_verdict(compiled, instance) for instance in invalid]
        except Exception as err:  # a matcher failure: count it as not compiled, say why
            outbox.put(("error", seconds, f"matcher: {err}"[:200]))
            continue
        outbox.put(("ok", seconds, [i for i, verdict in enumerate(verdicts) if verdict == "unenforced"]))


class Runner:
    """One worker process at a time; a schema that runs past the timeout kills it (a fresh one
    starts for the next)."""

    def __init__(self, tokenizer: str, engines_path: str, timeout: float) -> None:
        self.tokenizer, self.engines_path, self.timeout = tokenizer, engines_path, timeout
        self.ctx = mp.get_context("spawn")
        self.worker: Any = None
        self.version = ""

    def _start(self) -> None:
        self.inbox, self.outbox = self.ctx.Queue(), self.ctx.Queue()
        self.worker = self.ctx.Process(
            target=_worker, args=(self.tokenizer, self.engines_path, self.inbox, self.outbox), daemon=True
        )
        self.worker.start()
        _, self.version, _ = self.outbox.get(timeout=STARTUP_SECONDS)

    def measure(self, case: Case) -> Measured:
        if self.worker is None or not self.worker.is_alive():
            self._start()
        self.inbox.put((case.schema, case.invalid))
        try:
            status, seconds, value = self.outbox.get(timeout=self.timeout)
        except Exception:
            self.worker.kill()
            self.worker.join()
            self.worker = None
            return Measured(case.id, case.digest, case.category, "timeout", self.timeout, [])
        if status == "error":
            return Measured(case.id, case.digest, case.category, "error", round(seconds, 4), [], value)
        return Measured(case.id, case.digest, case.category, "ok", round(seconds, 4), value)

    def close(self) -> None:
        if self.worker is not None:
            self.inbox.put(None)
            self.worker.join(timeout=10)


def measure_all(
    all_cases: list[Case], tokenizer: str, engines_path: str, timeout: float, cached_only: bool, sample: int
) -> tuple[str, list[Measured]]:
    """(xgrammar version, verdicts): from the cache where it has the schema, else measured and
    appended to it."""
    version = xgrammar_version(engines_path)
    path = cache_path(version)
    cache = load_cache(path)
    todo = [case for case in all_cases if (case.id, case.digest) not in cache]
    if todo and not cached_only:
        if not tokenizer:
            raise SystemExit("maskbench needs --tokenizer (or GDX_TOKENIZER_JSON) to measure; or --cached")
        path.parent.mkdir(parents=True, exist_ok=True)
        runner = Runner(tokenizer, engines_path, timeout)
        try:
            with path.open("a", encoding="utf-8") as out:
                for n, case in enumerate(todo, 1):
                    item = runner.measure(case)
                    if runner.version != version:
                        raise SystemExit(f"worker imported xgrammar {runner.version}, expected {version}")
                    cache[(case.id, case.digest)] = item
                    out.write(json.dumps(asdict(item)) + "\n")
                    out.flush()
                    if n % 250 == 0:
                        print(f"# {n}/{len(todo)} measured", file=sys.stderr, flush=True)
        finally:
            runner.close()
    return version, [cache[(c.id, c.digest)] for c in all_cases if (c.id, c.digest) in cache]


def validator_says(schema: Any, instance: Any) -> list[str]:
    """`keyword at /schema/pointer` for each error the `jsonschema` validator of the schema's draft
    (FORMAT_CHECKER on) reports; for a failed anyOf/oneOf, the branch error that fits best too."""
    jsonschema = importlib.import_module("jsonschema")  # untyped; only this benchmark needs it
    best_match = importlib.import_module("jsonschema.exceptions").best_match
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(instance))
    except Exception as err:
        return [f"validator error: {type(err).__name__}"]
    if not errors:
        return ["valid for jsonschema"]
    out = []
    for error in errors:
        pointer = "/" + "/".join(str(part) for part in error.absolute_schema_path)
        keyword = str(error.validator)
        if error.context:
            keyword += f" ({best_match(error.context).validator})"
        out.append(f"{keyword} at {pointer}")
    return out


def report(version: str, items: list[Measured], by_id: dict[str, Case], timeout: float, sample: int) -> None:
    versions = backends.Versions(xgrammar=version)
    table = backends.xgrammar_table_version(version)
    tally: Counter[str] = Counter()
    named: Counter[str] = Counter()
    quiet_named: Counter[str] = Counter()
    refusals = Counter[str]()
    missed: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    details: list[str] = []
    errors: Counter[str] = Counter()
    compile_seconds = sorted(item.seconds for item in items if item.status == "ok")
    for item in items:
        if item.status != "ok":
            tally[item.status] += 1
            if item.status == "error":
                errors[_strip(item.error)[:70]] += 1
                found = lint(by_id[item.id].schema, engines=["xgrammar"], versions=versions)
                refusals[
                    "predicted" if any(f.rule == "xgrammar_refused" for f in found) else "not predicted"
                ] += 1
            continue
        case = by_id[item.id]
        findings = lint(case.schema, engines=["xgrammar"], versions=versions)
        fired = [f for f in findings if f.rule in ("xgrammar_unenforced", "xgrammar_refused")]
        tally[("fired" if fired else "quiet") + ("+accepted" if item.accepted else "")] += 1
        if fired:
            (named if item.accepted else quiet_named).update({f.message.split("`")[1] for f in fired})
        if item.accepted and not fired:
            missed[case.category] += 1
            said = {line for i in item.accepted for line in validator_says(case.schema, case.invalid[i])}
            causes.update({line.split(" at ")[0] for line in said})
            details.append(f"- {item.id}: " + "; ".join(sorted(said)))
    tp, fp, fn = tally["fired+accepted"], tally["fired"], tally["quiet+accepted"]
    scope = f"1 in {sample} by schema digest" if sample > 1 else "all"
    print(f"xgrammar {version} (table verified on {table}); schemas: {scope}, {len(items)} with results")
    print("\n| xgrammar on must-reject instances | rule fired | rule quiet |")
    print("| --- | ---: | ---: |")
    print(f"| accepted at least one (unenforced) | {tp} | {fn} |")
    print(f"| rejected all | {fp} | {tally['quiet']} |")
    rates = f"precision {tp / max(1, tp + fp):.2f}, recall {tp / max(1, tp + fn):.2f}"
    failed = f"not compiled: {tally['error']}, timed out (> {timeout:g} s): {tally['timeout']}"
    print(f"\n{rates}; {failed}")
    if compile_seconds:
        p95 = compile_seconds[int(len(compile_seconds) * 0.95)]
        total, slowest = sum(compile_seconds), compile_seconds[-1]
        print(f"compile seconds: total {total:.0f}, p95 {p95:.2f}, max {slowest:.1f}")
    print("compile errors: " + (", ".join(f"{k!r} {n}" for k, n in errors.most_common(8)) or "none"))
    print("compile errors that `xgrammar_refused` predicted: " + _counts(refusals))
    print("keywords named where xgrammar did accept an invalid instance: " + ", ".join(
        f"{k} {n}" for k, n in named.most_common()))  # fmt: skip
    print("keywords named where xgrammar rejected every must-reject instance: " + _counts(quiet_named))
    print("unexplained acceptances by category: " + _counts(missed))
    print("unexplained acceptances by what jsonschema says (schemas): " + _counts(causes))
    print("\n".join(details))


def _strip(error: str) -> str:
    """An engine error without its "[time] file.cc:line: " prefix (the line differs per version)."""
    return re.sub(r"^\[[0-9:]+\] \S+:\d+: ", "", error)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in counter.most_common()) or "none"


def run(data: Path, tokenizer: str, timeout: float, engines_path: str, cached: bool, sample: int) -> int:
    from tools.bench.schemas import read

    all_cases = list(cases(read(data / "maskbench"), sample))
    version, items = measure_all(all_cases, tokenizer, engines_path, timeout, cached, sample)
    report(version, items, {case.id: case for case in all_cases}, timeout, sample)
    return 0
