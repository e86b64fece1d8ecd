"""`gdx fix`: for each family injected per request, the static schema to send, the check after
decoding, and the proof on the real engine that they keep every valid output and let no invalid one
through both.

Writes, under `--out DIR`, per family proven: `<name>-<family>/schema.json` (the static schema, one
canonical string), `<name>-<family>/check.py` (exporter/fix/postcheck.py with the moved constraints
filled in as data) and, for every family, `report.json`. Exit codes: 0 every family got a proven fix
(or there was none to fix), 1 some could not be fixed (each says why), 2 bad input or flags (a
message, nothing written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from exporter.daemon import config
from exporter.fix import postcheck
from exporter.fix.plan import FamilyPlan, plans, schemas_by_hash, slow_plans
from exporter.lint import targets
from exporter.lint.command import FlagError, tool_server, vllm_router
from exporter.lint.report import analyse
from exporter.lint.requests import KINDS, InputError, read_inputs
from exporter.schema import identity

MOVED_LINE = "MOVED: tuple[tuple[str, str], ...] = ()"


def fix_main(args: argparse.Namespace) -> int:
    try:
        thresholds = config.lint_thresholds_from(vars(args))
        router, _ = vllm_router(args.engine or [])
        tools = tool_server(args.tool_call_parser, args.tool_strict_level, router)
        inputs = read_inputs(args.files, sys.stdin, args.kind, tools, args.client)
    except (config.ConfigError, FlagError, InputError) as err:
        print(f"gdx fix: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"gdx fix: --out {out}: not a folder", file=sys.stderr)
        return 2
    try:
        from exporter.lint.prove.engine import XgrammarEngine

        engine = XgrammarEngine(args.tokenizer)
    except (OSError, ImportError, ValueError) as err:
        hint = " (install the `prove` extra)" if isinstance(err, ImportError) else ""
        print(f"gdx fix: cannot load xgrammar with {args.tokenizer}: {err}{hint}", file=sys.stderr)
        return 2
    from exporter.fix.proof import prove

    report = analyse(inputs, thresholds, ("xgrammar",))
    lines = {schema.schema_hash: schema.lines for family in report.families for schema in family.schemas}
    results = []
    parsed = schemas_by_hash(inputs.requests)
    families = plans(report, parsed)
    for plan in [*families, *slow_plans(report, parsed, families)]:
        if plan.merged.schema is None:
            results.append(_result(plan, None, f"cannot be joined: {plan.merged.error}"))
            continue
        proof = prove(plan, engine, [lines.get(h, 1) for h in plan.hashes])
        why = "" if proof.proven else _why(proof)
        results.append(_result(plan, proof, why))
        if proof.proven:
            _write(out, plan)
    out.mkdir(parents=True, exist_ok=True)
    document = {"families": results, "engine": f"xgrammar {engine.version}"}
    (out / "report.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.format == "json":
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        _summary(results, out)
    return 0 if all(r["fixed"] for r in results) else 1


def _why(proof: Any) -> str:
    if proof.lost:
        return f"a valid output would be lost: {proof.lost[0]}"
    if proof.missed:
        return f"an invalid output would get through: {proof.missed[0]}"
    return "no valid instance of its variants could be made to prove it on"


def _result(plan: FamilyPlan, proof: Any, why: str) -> dict[str, Any]:
    fixed = proof is not None and proof.proven
    seconds = None
    if proof is not None and plan.requests:
        per_request = (proof.seconds_before - proof.seconds_after) / plan.requests
        seconds = round(max(0.0, per_request) * 1000, 3)
    return {
        "family": plan.family,
        "name": plan.name,
        "folder": plan.folder if fixed else None,
        "finding": f"dynamic_schema {plan.severity}" if len(plan.variants) > 1 else plan.severity,
        "requests": plan.requests,
        "members": list(plan.hashes),
        "static_schema_hash": identity.schema_hash(plan.static_text)
        if plan.merged.schema is not None
        else None,
        "moved": [{"pointer": m.pointer, "keyword": m.keyword} for m in plan.merged.moved],
        "proof": None if proof is None else proof.doc(),
        "compile_seconds_saved_per_1000_requests": seconds,
        "fixed": fixed,
        "why_not": why or None,
    }


def _write(out: Path, plan: FamilyPlan) -> None:
    """schema.json and check.py of a proven family, inside `out` whatever its name."""
    folder = (out / plan.folder).resolve()
    if out.resolve() not in folder.parents:
        raise ValueError(f"{plan.folder}: outside {out}")  # folder_name allows no separators: never
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "schema.json").write_text(plan.static_text + "\n", encoding="utf-8")
    (folder / "check.py").write_text(check_source(plan), encoding="utf-8")


def check_source(plan: FamilyPlan) -> str:
    """postcheck.py with MOVED filled: the pointers as one JSON string literal (repr of a str is
    always a plain literal, so no pointer or name of a schema can become code)."""
    source = Path(postcheck.__file__).read_text(encoding="utf-8")
    moved = json.dumps([[m.pointer, m.keyword] for m in plan.merged.moved])
    line = f"MOVED: tuple[tuple[str, str], ...] = tuple(tuple(m) for m in json.loads({moved!r}))"
    if source.count(MOVED_LINE) != 1:
        raise AssertionError("postcheck.py has no MOVED line to fill")
    header = (
        f"# gdx fix: the check after decoding of family {plan.family}; call check(output, request_schema)\n"
    )
    return header + source.replace(MOVED_LINE, line)


def _summary(results: list[dict[str, Any]], out: Path) -> None:
    for r in results:
        if r["fixed"]:
            proof = r["proof"]
            before = f"{proof['compiles_before']} compiles ({proof['compile_seconds_before']:.3f} s)"
            after = f"1 ({proof['compile_seconds_after']:.3f} s over {r['requests']} requests)"
            kept, caught = proof["valid_instances_kept"], proof["invalid_instances_caught"]
            moved, where = len(r["moved"]), out / r["folder"]
            print(
                f"fixed  {_unit(r)} {r['family']} {r['name']}: {before} -> {after}; {moved} constraints "
                f"moved to the check; proven on {kept} valid and {caught} invalid outputs -> {where}"
            )
        else:
            print(f"not fixed  {_unit(r)} {r['family']} {r['name']}: {r['why_not']}")
    fixed = sum(r["fixed"] for r in results)
    print(f"{fixed} of {len(results)} families and schemas fixed; report: {out / 'report.json'}")


def _unit(result: dict[str, Any]) -> str:
    """A family injected per request, or one schema whose slow-compile keywords moved to the check."""
    return "family" if str(result["finding"]).startswith("dynamic_schema") else "schema"


def add_parser(commands: Any) -> None:
    from exporter.lint.command import CLIENT_HELP, add_tool_flags

    parser = commands.add_parser(
        "fix",
        help="write the static schema and the check after decoding of each family injected per request",
        description="For every family gdx lint gives a dynamic_schema warning or error (its variants are "
        "injected per request: every request compiles), write the one static schema to send instead "
        "(it accepts every output any variant accepts: enum and const values joined, bounds widened, "
        "tool subsets united) and check.py, standard library only: check(output, request_schema) "
        "returns one message per constraint of that request's own schema the output breaks among those "
        "the static schema dropped. Each fix is proven on real xgrammar over --tokenizer first: one "
        "compile instead of one per variant, every valid output of every variant still accepted and "
        "passing the check, every output the static grammar allows and a variant's grammar rejects "
        "caught by the check; a family whose proof fails is reported, not written. Writes DIR/<name>-"
        "<family>/schema.json and check.py per fixed family and DIR/report.json. Exit 0: every family "
        "fixed (or none to fix); 1: some not (each says why); 2: bad input or flags, nothing written.",
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="what gdx lint takes (request logs, specs, module:Model)"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="the folder to write into (created)")
    parser.add_argument(
        "--tokenizer", required=True, metavar="PATH", help="the tokenizer.json the proof compiles with"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="stdout: a summary (text) or the report (json)",
    )
    parser.add_argument(
        "--kind", choices=KINDS, default="auto", help="what each FILE holds, as gdx lint --kind"
    )
    parser.add_argument("--client", choices=targets.CLIENTS, default="pydantic", help=CLIENT_HELP)
    parser.add_argument(
        "--engine",
        action="append",
        metavar="vllm==VERSION",
        help="the vLLM version whose tool-call derivation applies",
    )
    add_tool_flags(parser)
    limits = parser.add_argument_group("limits", "gdx lint's --lint.* options: where dynamic_schema fires.")
    config.add_lint_flags(limits)
