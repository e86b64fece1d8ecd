"""`gdx fix`: for each family injected per request, the static schema to send, the check after
decoding, and the proof on the real engines (xgrammar, llguidance: `--engine`) that they keep every
valid output and let no invalid one through both.

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
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exporter.fix import postcheck, registry, toolcheck, toolfix
from exporter.fix.plan import FamilyPlan, plans, schemas_by_hash, slow_plans
from exporter.fix.proof import MAX_VARIANTS
from exporter.fix.widen import widened
from exporter.kernel import lint_options, options
from exporter.lint import targets
from exporter.lint.flags import FlagError, sglang_engine, tool_server, vllm_router
from exporter.lint.prove.engine import LlguidanceEngine, ProofEngine, XgrammarEngine
from exporter.lint.report import analyse
from exporter.lint.requests import KINDS, InputError, read_inputs
from exporter.schema import ecma_automaton, ecma_pattern, identity
from exporter.schema.static import Moved

if TYPE_CHECKING:
    from exporter.fix.proof import FixProof

MOVED_LINE = "MOVED: tuple[tuple[str, str], ...] = ()"
INLINED_LINE = "from exporter.schema.ecma_automaton import ecma_search  # gdx fix inlines this module here"
FUTURE_LINE = "from __future__ import annotations\n"
# The pattern reader check.py carries: its modules, inlined in this order (each imports those above it).
READER_FILES = (Path(ecma_pattern.__file__), Path(ecma_automaton.__file__))
READER_IMPORT = "from exporter.schema.ecma_"  # one reader module importing another: dropped, it is above
ENGINES = ("xgrammar", "llguidance")  # the order the proofs run and are reported in


def fix_main(args: argparse.Namespace) -> int:
    try:
        thresholds = lint_options.lint_thresholds_from(vars(args))
        sglang, asked = sglang_engine(args.engine or [])
        router, asked = vllm_router(asked)
        names = proof_engines(asked)
        tools = tool_server(args.tool_call_parser, args.tool_strict_level, router, sglang)
        inputs = read_inputs(args.files, sys.stdin, args.kind, tools, args.client)
    except (options.ConfigError, FlagError, InputError) as err:
        print(f"gdx fix: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"gdx fix: --out {out}: not a folder", file=sys.stderr)
        return 2
    engines: list[ProofEngine] = []
    for name in names:
        try:
            engines.append((XgrammarEngine if name == "xgrammar" else LlguidanceEngine)(args.tokenizer))
        except (OSError, ImportError, ValueError) as err:
            hint = " (install the `prove` extra)" if isinstance(err, ImportError) else ""
            print(f"gdx fix: cannot load {name} with {args.tokenizer}: {err}{hint}", file=sys.stderr)
            return 2
    from exporter.fix.proof import prove

    report = analyse(inputs, thresholds, ("xgrammar",))
    lines = {schema.schema_hash: schema.lines for family in report.families for schema in family.schemas}
    results = []
    parsed = schemas_by_hash(inputs.requests)
    families = plans(report, parsed)
    proven: list[FamilyPlan] = []
    for tag_plan in toolfix.tag_plans(report, inputs.requests, tools):  # a tool parser's tags
        results.append(_prove_tags(tag_plan, engines, tools, out, args.proof_variants))
    for plan in [*families, *slow_plans(report, parsed, families, thresholds.union_depth)]:
        if plan.merged.schema is None:
            verb = "cannot be joined" if len(plan.variants) > 1 else "cannot be rewritten"
            results.append(_result(plan, [], f"{verb}: {plan.merged.error}"))
            continue
        requests = [lines.get(h, 1) for h in plan.hashes]
        proofs = [prove(plan, engine, requests, max_variants=args.proof_variants) for engine in engines]
        failed = _failed(proofs)
        widening = widened(plan) if failed is not None and failed.lost else None
        dropped: tuple[Moved, ...] = ()
        if widening is not None:  # lost to xgrammar's overreach: drop those bounds, check them after
            wide, moved = widening
            wide_proofs = [
                prove(wide, engine, requests, max_variants=args.proof_variants) for engine in engines
            ]
            if _failed(wide_proofs) is None:
                plan, proofs, failed, dropped = wide, wide_proofs, None, moved
        results.append(_result(plan, proofs, "" if failed is None else _why(failed), dropped))
        if failed is None:
            _write(out, plan)
            proven.append(plan)
    out.mkdir(parents=True, exist_ok=True)
    warm = registry.entries(report, parsed, proven, args.registry_size)
    registry.write(out / "registry", warm)
    document = {
        "families": results,
        "engines": [f"{e.name} {e.version}" for e in engines],
        "registry": [{"file": e.file, "requests": e.requests, "source": e.source} for e in warm],
    }
    (out / "report.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.format == "json":
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        _summary(results, out, warm)
    return 0 if all(r["fixed"] for r in results) else 1


def proof_engines(values: Sequence[str]) -> list[str]:
    """The engines the proof runs on, as `gdx lint --engine` names them: xgrammar, llguidance or all
    (NAME==VERSION must be the installed version: the proof compiles with it); none named: every one
    installed (both, when neither is: loading then says what to install)."""
    names: list[str] = []
    for value in values:
        name, _, version = value.partition("==")
        for engine in ENGINES if name == "all" else (name,):
            if engine not in ENGINES:
                raise FlagError(
                    f"--engine {value}: not xgrammar, llguidance, all, vllm==VERSION or sglang==VERSION"
                )
            installed = _installed(engine)
            if version and installed and version != installed:
                raise FlagError(
                    f"--engine {value}: the proof compiles with the installed {engine} {installed}; "
                    f"install {engine}=={version} to prove on it"
                )
            if engine not in names:
                names.append(engine)
    if values:
        return sorted(names, key=ENGINES.index)
    return [name for name in ENGINES if _installed(name)] or list(ENGINES)


def _installed(engine: str) -> str:
    try:
        return metadata.version(engine)
    except metadata.PackageNotFoundError:
        return ""


def _failed(proofs: Sequence[FixProof]) -> FixProof | None:
    """The first proof that fails, among the engines that serve the family's schemas (an engine that
    refuses them as sent never serves them: nothing to prove there)."""
    serving = [proof for proof in proofs if not proof.refused] or proofs
    return next((proof for proof in serving if not proof.proven), None)


def _why(proof: FixProof) -> str:
    on = f"on {proof.engine}: "
    if proof.refused:  # every engine refuses it: no engine serves this schema today
        return on + proof.refused
    if proof.error:
        return on + proof.error
    if proof.lost:
        return f"{on}a valid output would be lost: {proof.lost[0]}"
    if proof.missed:
        return f"{on}an invalid output would get through: {proof.missed[0]}"
    return f"{on}no valid instance of its variants could be made to prove it on"


def _result(
    plan: FamilyPlan, proofs: Sequence[FixProof], why: str, widened: Sequence[Moved] = ()
) -> dict[str, Any]:
    """The family's entry in report.json: one proof per engine, each with the compile seconds the
    static schema saves per 1,000 requests on it (negative where it costs: on llguidance, which
    compiles every request, a static union of every tool compiles slower than each subset);
    `widened`: the keywords dropped because xgrammar enforced them beyond the schema (exporter/fix/
    widen.py), among `moved`."""
    fixed = bool(proofs) and not why
    docs = []
    for proof in proofs:
        per_request = (proof.seconds_before - proof.seconds_after) / max(1, plan.requests)
        docs.append({**proof.doc(), "compile_seconds_saved_per_1000_requests": round(per_request * 1000, 3)})
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
        "widened": [{"pointer": m.pointer, "keyword": m.keyword} for m in widened],
        "rewrites": [{"pointer": r.pointer, "rewrite": r.what} for r in plan.merged.rewrites if r.done],
        "not_rewritten": [{"pointer": r.pointer, "why": r.what} for r in plan.merged.rewrites if not r.done],
        "check": "check.py" if fixed and plan.merged.moved else None,
        "proofs": docs,
        "fixed": fixed,
        "why_not": why or None,
    }


def _write(out: Path, plan: FamilyPlan) -> None:
    """schema.json and check.py of a proven family, inside `out` whatever its name (no check.py when
    nothing moved to it: flattened unions accept what they did)."""
    folder = (out / plan.folder).resolve()
    if out.resolve() not in folder.parents:
        raise ValueError(f"{plan.folder}: outside {out}")  # folder_name allows no separators: never
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "schema.json").write_text(plan.static_text + "\n", encoding="utf-8")
    if plan.merged.moved:
        (folder / "check.py").write_text(check_source(plan), encoding="utf-8")


# vLLM's guidance backend builds a structural tag only from the legacy `structures`/`triggers` form
# (vllm/v1/structured_output/backend_guidance.py): a tool parser's tags go to xgrammar.
TAGS_NOT_READ = (
    "llguidance does not read a tool parser's structural tags as vLLM sends them (vLLM compiles them on "
    "xgrammar; the proof runs there)"
)


def _prove_tags(
    plan: toolfix.TagPlan, engines: Sequence[ProofEngine], tools: Any, out: Path, max_variants: int
) -> dict[str, Any]:
    """A structural-tag family: united, proven on xgrammar, written (tools.json, tag.json, check.py)."""
    from exporter.fix.proof import FixProof

    proofs: list[FixProof] = []
    why = f"cannot be joined: {plan.error}" if plan.error else ""
    if not why:
        for engine in engines:
            if engine.name == "xgrammar":
                proofs.append(toolfix.prove_tags(plan, engine, tools, max_variants=max_variants))
            else:
                proofs.append(FixProof(f"{engine.name} {engine.version}", refused=TAGS_NOT_READ))
        serving = [proof for proof in proofs if not proof.refused]
        failed = next((proof for proof in serving if not proof.proven), None)
        if not serving:
            why = "the proof needs xgrammar (--engine xgrammar): it is the engine that serves these tags"
        elif failed is not None:
            why = _why(failed)
    fixed = not why
    if fixed:
        folder = (out / plan.folder).resolve()
        if out.resolve() not in folder.parents:
            raise ValueError(f"{plan.folder}: outside {out}")  # folder_name allows no separators: never
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tools.json").write_text(json.dumps(list(plan.tools), indent=2) + "\n", encoding="utf-8")
        (folder / "tag.json").write_text((plan.static_text or "") + "\n", encoding="utf-8")
        header = (
            f"# gdx fix: the check after decoding of tool family {plan.family}: check(tool_calls, request)\n"
        )
        (folder / "check.py").write_text(
            header + Path(toolcheck.__file__).read_text(encoding="utf-8"), encoding="utf-8"
        )
    docs = []
    for proof in proofs:
        per_request = (proof.seconds_before - proof.seconds_after) / max(1, plan.requests)
        docs.append({**proof.doc(), "compile_seconds_saved_per_1000_requests": round(per_request * 1000, 3)})
    return {
        "family": plan.family,
        "name": plan.name,
        "folder": plan.folder if fixed else None,
        "finding": f"dynamic_schema {plan.severity}",
        "requests": plan.requests,
        "members": list(plan.hashes),
        "static_schema_hash": identity.spec_hashes("structural_tag", plan.static_text)[0]
        if plan.static_text
        else None,
        "tools": len(plan.tools),
        "moved": [],
        "rewrites": [],
        "not_rewritten": [],
        "check": "check.py" if fixed else None,
        "proofs": docs,
        "fixed": fixed,
        "why_not": why or None,
    }


def check_source(plan: FamilyPlan) -> str:
    """check.py of a family: postcheck.py standalone with MOVED filled."""
    header = (
        f"# gdx fix: the check after decoding of family {plan.family}; call check(output, request_schema)\n"
    )
    return header + standalone_check([(m.pointer, m.keyword) for m in plan.merged.moved])


def standalone_check(moved: Sequence[tuple[str, str]]) -> str:
    """postcheck.py as one standard-library file: the ECMA-262 pattern reader inlined where it is
    imported, MOVED filled with the pointers as one JSON string literal (repr of a str is always a
    plain literal, so no pointer or name of a schema can become code)."""
    source = Path(postcheck.__file__).read_text(encoding="utf-8")
    line = f"MOVED: tuple[tuple[str, str], ...] = tuple(tuple(m) for m in json.loads({json.dumps(moved)!r}))"
    if source.count(MOVED_LINE) != 1 or source.count(INLINED_LINE) != 1:
        raise AssertionError("postcheck.py has no MOVED line to fill or no pattern reader to inline")
    reader = "".join(_inlined(path) for path in READER_FILES)
    return source.replace(MOVED_LINE, line).replace(INLINED_LINE, f"# --- {INLINED_LINE}\n{reader}# ---\n")


def _inlined(path: Path) -> str:
    """One reader module as check.py holds it: without `from __future__` (check.py has its own, first)
    and without its one-line imports of the reader modules inlined above it."""
    kept = []
    for line in path.read_text(encoding="utf-8").replace(FUTURE_LINE, "", 1).splitlines(keepends=True):
        if line.startswith(READER_IMPORT) and "(" not in line:
            continue
        if line.startswith(("from exporter", "import exporter")):
            raise AssertionError(f"{path.name}: {line.strip()}: check.py would not run alone")
        kept.append(line)
    return "".join(kept)


def _summary(results: list[dict[str, Any]], out: Path, warm: Sequence[registry.Entry]) -> None:
    for r in results:
        if r["fixed"]:
            count = len(r["moved"])
            moved = f"{count} constraint{'' if count == 1 else 's'} moved to the check"
            if "tools" in r:
                moved = f"{r['tools']} tools in every request, the enabled ones checked after decoding"
            if r["rewrites"]:
                moved += f", {len(r['rewrites'])} nested unions flattened"
            print(f"fixed  {_unit(r)} {r['family']} {r['name']}: {moved} -> {out / r['folder']}")
            for wide in r.get("widened", ()):  # the first proof lost valid outputs to xgrammar's overreach
                print(f"  widened: {wide['keyword']} at {wide['pointer'] or '/'} left the grammar (xgrammar"
                      " enforces it beyond the schema) for the check")  # fmt: skip
            for proof in r["proofs"]:
                print(f"  {proof['engine']}: {_proof_line(proof, r['requests'])}")
        else:
            print(f"not fixed  {_unit(r)} {r['family']} {r['name']}: {r['why_not']}")
    fixed = sum(r["fixed"] for r in results)
    print(f"{fixed} of {len(results)} families and schemas fixed; report: {out / 'report.json'}")
    if warm:
        print(f"registry: {len(warm)} static schemas for new replicas (gdx warm) -> {out / 'registry'}")


def _proof_line(proof: dict[str, Any], requests: int) -> str:
    if proof["refused"]:
        return f"{proof['refused']}: it never serves this schema, nothing to prove there"
    n = proof["compiles_before"]
    before = f"{n} compile{'' if n == 1 else 's'} ({proof['compile_seconds_before']:.3f} s)"
    after = f"{proof['compiles_after']} ({proof['compile_seconds_after']:.3f} s over {requests} requests)"
    kept, caught = proof["valid_instances_kept"], proof["invalid_instances_caught"]
    line = f"{before} -> {after}; proven on {kept} valid and {caught} invalid outputs"
    if proof["variants_checked"] < proof["variants"]:
        line += f" of {proof['variants_checked']} of its {proof['variants']} variants (--proof-variants)"
    return line


def _positive(raw: str) -> int:
    value = int(raw) if raw.strip().isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{raw!r}: a whole number, 1 or more")
    return value


def _unit(result: dict[str, Any]) -> str:
    """A family injected per request, or one schema whose slow-compile keywords moved to the check."""
    return "family" if str(result["finding"]).startswith("dynamic_schema") else "schema"


def add_parser(commands: Any) -> None:
    from exporter.lint.flags import CLIENT_HELP, add_tool_flags

    parser = commands.add_parser(
        "fix",
        help="write the static schema and the check after decoding of each family injected per request",
        description="For every family gdx lint gives a dynamic_schema warning or error (its variants are "
        "injected per request: every request compiles), write the one static schema to send instead "
        "(it accepts every output any variant accepts: enum and const values joined, bounds widened, "
        "tool subsets united) and check.py, standard library only: check(output, request_schema) "
        "returns one message per constraint of that request's own schema the output breaks among those "
        "the static schema dropped. Each fix is proven first on every --engine, as vLLM runs it over "
        "--tokenizer: one compile instead of one per variant (xgrammar caches; llguidance compiles every "
        "request, the seconds are compared), every valid output of every variant still accepted and "
        "passing the check, every output the static grammar allows and a variant's grammar rejects "
        "caught by the check; a family whose proof fails on any of them is reported, not written. "
        "Writes DIR/<name>-<family>/schema.json and check.py per fixed family and DIR/report.json. Exit "
        "0: every family fixed (or none to fix); 1: some not (each says why); 2: bad input or flags, "
        "nothing written.",
    )  # fmt: skip
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
        metavar="NAME[==VERSION]",
        help="the engine to prove on, as gdx lint --engine: xgrammar, llguidance or all, repeatable "
        "(default: every one installed; NAME==VERSION must be the installed version); vllm==VERSION: the "
        "vLLM version whose tool-call derivation applies; sglang==VERSION (0.5.23): SGLang's instead",
    )
    parser.add_argument(
        "--proof-variants",
        type=_positive,
        default=MAX_VARIANTS,
        metavar="N",
        help=f"prove on at most N variants per family, spread over the log (default {MAX_VARIANTS}; every "
        "variant is counted, the compile seconds of the others scaled from theirs): hundreds in a minute",
    )
    parser.add_argument(
        "--registry-size",
        type=_positive,
        default=registry.LIMIT,
        metavar="N",
        help=f"schemas in DIR/registry/ (default {registry.LIMIT}): the fixes, then the log's reused static "
        "schemas, most requested first; each is one compile a new replica does before its traffic (gdx warm)",
    )
    add_tool_flags(parser)
    limits = parser.add_argument_group("limits", "gdx lint's --lint.* options: where dynamic_schema fires.")
    lint_options.add_lint_flags(limits)
