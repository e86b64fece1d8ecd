"""`gdx hash` and `gdx lint`: the schema analysis on the command line, usable in CI.

The flags, the text and JSON output and the exit codes; the files are read by exporter/lint/requests.py
and analysed by exporter/lint/report.py.

Exit codes of `gdx lint`: 0 no `error` finding, 1 at least one, 2 unreadable input (the file and the
reason on stderr) or an invalid flag value.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from exporter.analysis.lint import RULES
from exporter.engines.grammars import backends
from exporter.engines.sglang import toolcalls as sglang_toolcalls
from exporter.engines.vllm import versions as vllm_releases
from exporter.kernel import lint_options, options
from exporter.lint import guardfile, lintconfig, sarif, suppress, targets
from exporter.lint.engines import Engines
from exporter.lint.flags import (
    CLIENT_HELP,
    FlagError,
    add_tool_flags,
    sglang_engine,
    tool_server,
    vllm_router,
)
from exporter.lint.locate import Locator
from exporter.lint.located import located
from exporter.lint.prove.engine import XgrammarEngine
from exporter.lint.prove.search import ProofSettings, Prover
from exporter.lint.report import FamilyReport, Report, SchemaReport, ServerBounds, analyse
from exporter.lint.requests import (
    KINDS,
    SKIP_REASONS,
    InputError,
    read_inputs,
)
from exporter.schema.findings import SEVERITIES, Finding

# The spellings `gdx lint` took before it shared the `lint.*` flags with `gdx serve`: hidden aliases,
# kept for one release (0.1.x), that say which flag replaces them.
OLD_SPELLINGS = {
    "--depth": "lint.depth",
    "--max-items": "lint.max-items",
    "--union-depth": "lint.union-depth",
    "--union-width": "lint.union-width",
    "--enum-size": "lint.enum-size",
    "--quantifier": "lint.quantifier",
    "--budget-seconds": "lint.budget",
    "--budget-nodes": "lint.budget-nodes",
}
SHOWN_HASHES = 3  # schema hashes listed on a "same for the other variants" line
SHOWN_CHARS = 300  # of a counterexample in the text output (--format json has it whole)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity, a container's cpuset), at most 8."""
    try:
        return max(1, min(8, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):
        return max(1, min(8, os.cpu_count() or 1))


def _jobs(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of processes") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r}: 0 (one per CPU) or more")
    return value


def lint_main(args: argparse.Namespace) -> int:
    try:
        settings = lint_config(args.config)
        baseline = suppress.read_baseline(args.baseline) if args.baseline else frozenset()
        given = {f.name: vars(args)[f.name] for f in lint_options.LINT_OPTIONS if f.name in vars(args)}
        thresholds = lint_options.lint_thresholds_from({**settings.thresholds, **given})
        sglang, asked = sglang_engine(args.engine or list(settings.engines))
        router, asked = vllm_router(asked)
        engines, versions = engine_versions(asked or ["all"], bool(args.tokenizer))
        if args.prove and not (args.tokenizer and "xgrammar" in engines):
            raise FlagError("--prove needs --tokenizer and the xgrammar engine")
        if not args.prove_seconds > 0:
            raise FlagError(f"--prove.seconds {args.prove_seconds:g}: must be above 0")
        tools = tool_server(args.tool_call_parser, args.tool_strict_level, router, sglang)
        if args.write_guard and not (router and args.api_server_validate):
            raise FlagError("--write-guard needs --engine vllm[==VERSION] and the API server's validation")
        if args.write_guard_unions and not args.write_guard:
            raise FlagError("--write-guard-unions adds to --write-guard FILE: give that too")
        server = None
        if router and args.api_server_validate:
            try:
                memory = options.parse_size(args.api_server_memory)
            except ValueError as err:
                raise FlagError(f"--api-server.memory-limit: {err}") from None
            if not args.api_server_timeout > 0:
                raise FlagError(f"--api-server.timeout {args.api_server_timeout:g}: must be above 0")
            server = ServerBounds(memory, args.api_server_timeout)
    except (options.ConfigError, FlagError, lintconfig.LintConfigError, suppress.BaselineError) as err:
        print(f"gdx lint: {err}", file=sys.stderr)
        return 2
    try:
        inputs = read_inputs(args.files, sys.stdin, args.kind, tools, args.client)
    except InputError as err:
        print(f"gdx lint: {err}", file=sys.stderr)
        return 2
    checker = prover = None
    if args.tokenizer:
        try:
            checker = Engines(args.tokenizer, engines)
            if args.prove:
                import jsonschema  # type: ignore[import-untyped]  # noqa: F401 - the reference of a proof

                proof_settings = ProofSettings(
                    seconds=args.prove_seconds, explore=min(1.0, args.prove_seconds)
                )
                prover = Prover(XgrammarEngine(args.tokenizer), proof_settings)
        except (OSError, ImportError, ValueError) as err:
            hint = " (install the `prove` extra)" if isinstance(err, ImportError) else ""
            print(f"gdx lint: cannot load the engines with {args.tokenizer}: {err}{hint}", file=sys.stderr)
            return 2
    jobs = args.jobs or available_cpus()
    report = analyse(
        inputs, thresholds, engines, checker, prover, versions, router=router, server=server, jobs=jobs
    )
    release = vllm_releases.RELEASES.get(router)
    for step, why, library, finds in (
        (
            "outlines",
            report.server.unavailable,
            "outlines_core",
            "server_rejected, server_stall and server_crash",
        ),
        ("guidance", report.server.guidance_unavailable, "llguidance", "server_rejected"),
    ):
        if why and release is not None:
            pin = _pin(library, getattr(release, library))
            said = f"the API server's {step} validation was not run ({why}): install {pin} (what vLLM"
            print(
                f"gdx lint: {said} {router} pins) to find {finds} on what it sends to {step}", file=sys.stderr
            )
    held = {name: getattr(versions, name) for name in engines} | ({"vllm": router} if router else {})
    locator = Locator(inputs.where)
    if args.write_guard:
        doc = guardfile.verdicts(report, router, inputs.requests, args.write_guard_unions)
        Path(args.write_guard).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"gdx lint: {len(doc['verdicts'])} verdicts written to {args.write_guard}", file=sys.stderr)
    if args.write_baseline:
        doc = suppress.baseline_doc(located(suppress.apply(report, inputs.requests, settings).report,
                                            inputs.requests, locator))  # fmt: skip
        Path(args.write_baseline).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    filtered = suppress.apply(report, inputs.requests, settings, baseline, locator)
    report = filtered.report
    for reviewed in filtered.stale:
        print(f"gdx lint: {settings.path}: stale exception, it matches no finding: {reviewed.rule} at "
              f"{reviewed.path} {reviewed.pointer or '/'} ({reviewed.reason})", file=sys.stderr)  # fmt: skip
    if args.format == "json":
        extra = (
            {"stale_exceptions": [dataclasses.asdict(r) for r in filtered.stale]} if filtered.stale else {}
        )
        # one write of the whole text: json.dump writes each of its (millions of) pieces apart
        print(json.dumps({**report.doc(), "engines": held, **extra}, indent=2))
    elif args.format == "sarif":
        print(json.dumps(sarif.sarif(located(report, inputs.requests, locator), held), indent=2))
    elif args.format == "github":
        for line in sarif.github(located(report, inputs.requests, locator)):
            print(line)
    else:
        print_text(report)
        if report.server.runs:
            print(f"the API server's outlines validation, bounded: {_count(report.server.runs, 'schema')},"
                  f" {_duration(report.server.seconds)}")  # fmt: skip
        if report.server.unavailable:  # said here too: a text reader must not take silence for a pass
            print(f"NOT CHECKED: the API server's outlines validation ({report.server.unavailable}):"
                  " server_rejected, server_stall and server_crash are unknown for what it gets")  # fmt: skip
        if report.server.guidance_unavailable:
            print(f"NOT CHECKED: the API server's guidance validation ({report.server.guidance_unavailable}):"
                  " server_rejected is unknown for what it gets")  # fmt: skip
        print("findings hold for " + ", ".join(f"{name} {version}" for name, version in held.items()))
        left_out = [
            (filtered.ignored, "by the configuration's select and ignore"),
            (filtered.excepted, "by reviewed exceptions"),
            (filtered.baselined, "in the baseline"),
        ]
        said = ", ".join(f"{n} {why}" for n, why in left_out if n)
        if said:
            print(f"left out: {said} ({settings.path or args.baseline})")
    return 1 if any(finding.severity == "error" for finding in report.findings()) else 0


def lint_config(path: str | None) -> lintconfig.LintConfig:
    """--config PATH, else the nearest pyproject.toml [tool.gdx.lint] or .gdx.yaml upward, else none."""
    if path is not None:
        if not Path(path).is_file():
            raise FlagError(f"--config {path}: no such file")
        return lintconfig.load(Path(path))
    found = lintconfig.find(Path.cwd())
    return lintconfig.load(found) if found else lintconfig.LintConfig()


def engine_versions(values: Sequence[str], compiling: bool) -> tuple[list[str], backends.Versions]:
    """The engines asked for and the table version of each: the one given (`xgrammar==0.2.8`), else
    the installed one, else the newest known. A version no table was verified on uses the closest
    older one, and says so; compiling with another version than the installed one cannot be done."""
    names: list[str] = []
    chosen: dict[str, str] = {}
    for value in values:
        name, _, version = value.partition("==")
        for engine in ("xgrammar", "llguidance") if name == "all" else (name,):
            if engine not in ("xgrammar", "llguidance"):
                raise FlagError(f"--engine {value}: not xgrammar, llguidance or all")
            if engine not in names:
                names.append(engine)
            installed = _installed(engine)
            if version and compiling and installed and version != installed:
                raise FlagError(
                    f"--engine {value}: --tokenizer compiles with the installed {engine} {installed}; "
                    f"install {engine}=={version} or drop --tokenizer to get the {version} table alone"
                )
            chosen[engine] = version or chosen.get(engine) or installed or ""
    known = {"xgrammar": backends.XGRAMMAR_VERSIONS, "llguidance": backends.LLGUIDANCE_VERSIONS}
    resolved = {}
    for engine, version in chosen.items():
        table = backends.table_version(known[engine], version) if version else known[engine][-1]
        if version and table != version:
            print(
                f"gdx lint: {engine} {version} is not a verified version ({', '.join(known[engine])}): "
                f"its findings use the {table} table",
                file=sys.stderr,
            )
        resolved[engine] = table
    return names, backends.Versions(**resolved)


def _installed(engine: str) -> str:
    try:
        return metadata.version(engine)
    except metadata.PackageNotFoundError:
        return ""


def _pin(name: str, spec: str) -> str:
    """A requirement as pip takes it: `name==1.2` for a version, `name>=1.7,<1.8` for a range."""
    return f"'{name}{spec}'" if spec[:1] in "<>=!~" else f"{name}=={spec}"


def print_text(report: Report) -> None:
    """One block per family, then a summary line. Variants whose own findings, compile results and
    probes read the same are printed once ("same for N other variants"); --format json lists each."""
    for group_ in report.families:
        _print_family(group_)
    for rejected in report.rejected:
        print(f"request {rejected.name}  rejected before any grammar")
        _print_finding(rejected.finding, "  ")
    summary = report.summary()
    counts = ", ".join(f"{summary[severity]} {severity}" for severity in SEVERITIES)
    servers = " or ".join(sorted({r.server for r in report.rejected}))
    refused = f"; {_count(len(report.rejected), 'request')} rejected by {servers}" if report.rejected else ""
    skipped = f"; {_count(len(report.skipped), 'request')} without a grammar" if report.skipped else ""
    print(
        f"{_count(summary['families'], 'family', 'families')}, {_count(summary['schemas'], 'schema')}, "
        f"{_count(summary['requests'], 'request')}: {counts}{refused}{skipped}"
    )
    for reason, number in report.skipped_by_reason().items():
        print(f"  skipped {number:>6}  {SKIP_REASONS.get(reason, reason)}")


def _print_family(report: FamilyReport) -> None:
    cost = "" if report.seconds is None else f", {_duration(report.seconds)} of compiles"
    print(
        f"family {report.family} {report.name}  {_count(report.requests, 'request')}, "
        f"{_count(report.variants, 'variant')}{cost}"
    )
    for finding in report.findings:
        _print_finding(finding, "  ")
    named = len(report.varies) <= 3 and report.findings  # dynamic_schema's message names the first 3
    for number, line in enumerate(() if named else report.varies):
        print(f"  {'varies:' if number == 0 else '':<8} {line}")
    _print_schemas(report.schemas)


def _print_schemas(schemas: Sequence[SchemaReport]) -> None:
    """Each distinct spec; those that read the same as an earlier one are named on one line."""
    outcomes: dict[tuple[Any, ...], list[SchemaReport]] = defaultdict(list)
    for schema in schemas:
        outcomes[schema.outcome()].append(schema)
    for same in outcomes.values():
        _print_schema(same[0])
        others = same[1:]
        if others:
            shown = ", ".join(s.schema_hash for s in others[:SHOWN_HASHES])
            more = f", +{len(others) - SHOWN_HASHES}" if len(others) > SHOWN_HASHES else ""
            timed = [s.seconds for s in others if s.seconds is not None]
            cost = f" ({_duration(sum(timed))} of compiles)" if timed else ""
            print(f"    same for {_count(len(others), 'other variant')}{cost}: {shown}{more}")


def _print_schema(schema: SchemaReport) -> None:
    title = f" title={schema.title}" if schema.title else ""
    print(
        f"  schema {schema.schema_hash}  shape_hash={schema.shape_hash} kind={schema.kind}{title}  "
        f"{schema.name} ({_count(schema.lines, 'request')})"
    )
    if schema.vllm_backend:
        print(f"    vLLM auto: {schema.vllm_backend}")
    for compiled in schema.compiles:
        state = (
            f"compiles in {compiled.seconds * 1000:.1f} ms"
            if compiled.ok
            else f"does not compile: {compiled.error}"
        )
        print(f"    {compiled.engine}: {state}")
    for probe in schema.probes:
        print(f"    probe {probe.engine} `{probe.keyword}`: {probe.outcome}")
    for finding in schema.findings:
        _print_finding(finding, "    ")
    if not schema.findings:
        print("    no findings")


def _print_finding(finding: Finding, indent: str) -> None:
    print(f"{indent}{finding.severity:<8} {finding.rule:<22} {finding.pointer or '/'}")
    print(f"{indent}         {finding.message}")
    print(f"{indent}         fix: {finding.fix}")
    proof = finding.proof
    if proof is not None and proof.status == "proven":
        shown = proof.instance if len(proof.instance) <= SHOWN_CHARS else proof.instance[:SHOWN_CHARS] + "..."
        verdict = "refuses" if finding.rule == "xgrammar_overenforced" else "accepts"
        tokens = _count(proof.tokens, "token")
        print(f"{indent}         proven on {proof.engine}: it {verdict} {shown} ({tokens})")
        print(f"{indent}         the validator: {proof.violation}")
    elif proof is not None:
        print(f"{indent}         not proven on {proof.engine}: {proof.how}")


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"


def _count(number: int, noun: str, plural: str = "") -> str:
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


class _OldSpelling(argparse.Action):
    """A hidden alias of a `--lint.*` flag: stores its value where the new flag would, and says so once."""

    def __init__(self, option_strings: Sequence[str], dest: str, new_flag: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new_flag = new_flag
        self.warned = False

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if not self.warned:
            print(
                f"gdx lint: {option_string} is deprecated and goes away in the next release; "
                f"use --{self.new_flag}",
                file=sys.stderr,
            )
            self.warned = True
        setattr(namespace, self.dest, values)


def add_parsers(commands: Any) -> None:
    """`gdx hash` and `gdx lint`, added to the `gdx` subcommands."""
    hash_parser = commands.add_parser(
        "hash",
        help="print a schema's schema_hash and shape_hash (as the probe reports them)",
        description="Print schema_hash (SHA-256 of the canonical JSON, 12 hex digits) and shape_hash "
        "(literals removed) of each FILE ('-' for stdin), the values the dashboards show. A file that "
        "is not JSON (a regex, a grammar) is hashed as its text without the trailing newline; a structural "
        "tag as its exact text, as the probe labels it. A request log (JSONL of request bodies or batch "
        "lines, or one request body) prints one line per request: the spec the server compiles for it "
        "(with --tool-call-parser, the grammar it derives from `tools`), or why it compiles none.",
    )
    hash_parser.add_argument("files", nargs="+", metavar="FILE")
    hash_parser.add_argument("--client", choices=targets.CLIENTS, default="pydantic", help=CLIENT_HELP)
    hash_parser.add_argument(
        "--engine", action="append", metavar="NAME[==VERSION]",
        help="the server whose tool-call derivation a request log's requests get: vllm[==VERSION] "
        f"({', '.join(vllm_releases.SUPPORTED)}; default the newest) or sglang[==VERSION] "
        f"({', '.join(sorted(sglang_toolcalls.PARSER_TABLES))})",
    )  # fmt: skip
    add_tool_flags(hash_parser)
    lint_parser = commands.add_parser(
        "lint",
        help="find what makes specs slow to compile or not enforced, by schema family",
        description="Lint structured-output specs for grammar-compile cost and backend gaps. FILE ('-' "
        "reads stdin) is one spec (a JSON Schema, a structural tag, a regex or a grammar; a .yaml/.yml "
        "file is a schema as the JSON of its value) or a request "
        'log: JSONL, one request per line, each a schema, a {"id", "schema"} line, an OpenAI/vLLM '
        "request body (response_format json_schema or structural_tag; structured_outputs or "
        "guided_decoding json/regex/grammar/choice/structural_tag; guided_json, guided_regex, "
        'guided_grammar, guided_choice), a Responses API body, a batch line {"custom_id", "body"}, or a '
        "Python target module:Name (--client); requests without a grammar are counted by reason. Specs "
        "are grouped into families: the same spec up to injected values (enum, const, a bound's number), "
        "key order and per-request subsets of union branches or optional properties. Each family is "
        "reported with its requests, its distinct variants and what varies between them, and "
        "dynamic_schema when its variants are not reused (injected per request: every request compiles); "
        "then each distinct spec with its own findings. Exit 0: no error finding; 1: errors; 2: unreadable "
        "input or an invalid flag. Rules: " + ", ".join(RULES) + ".",
    )
    lint_parser.add_argument("files", nargs="+", metavar="FILE")
    lint_parser.add_argument("--client", choices=targets.CLIENTS, default="pydantic", help=CLIENT_HELP)
    lint_parser.add_argument(
        "--format", choices=("text", "json", "sarif", "github"), default="text",
        help="output format (default text); json: {families: [{family, name, kind, requests, variants, "
        "seconds, varies, findings, schemas: [...]}], summary, engines: {name: version its findings hold "
        "for}}; with --prove each xgrammar finding has a proof. sarif: SARIF 2.1.0 for code scanning, each "
        "finding at the file, line and column of the node its pointer names (a request log: its line), "
        "with fingerprints that survive reindenting. github: GitHub Actions workflow commands "
        "(::error file=F,line=L,col=C,title=RULE::message), one per finding",
    )  # fmt: skip
    lint_parser.add_argument(
        "--jobs", type=_jobs, default=0, metavar="N",
        help="processes that analyse the distinct specs side by side (default 0: one per CPU this process"
        " may use, at most 8); 1: one. With --tokenizer or --prove the analysis runs in one process",
    )  # fmt: skip
    ci = lint_parser.add_argument_group(
        "configuration, exceptions and baselines (for CI)",
        "[tool.gdx.lint] in pyproject.toml, or `lint:` in .gdx.yaml, is read from the nearest folder up from "
        "the current one that has it: `engines`, the thresholds under the --lint.* names without the prefix "
        "(depth = 5), `select` and `ignore` (rules), `per-path-ignores` ({glob = [rules]}) and `exceptions`, "
        "reviewed findings each with `path` (a glob), `pointer`, `rule` and a required `reason`; flags win. "
        "An exception that matches no finding is reported as stale. A bad key is exit 2 naming the file and "
        "the key.",
    )
    ci.add_argument("--config", metavar="PATH", help="the configuration file (default: found upward)")
    ci.add_argument(
        "--write-baseline", metavar="FILE",
        help="write today's findings (their fingerprints: rule, keyword, pointer and the spec's canonical "
        "hash, not the line) to FILE, for --baseline",
    )  # fmt: skip
    ci.add_argument(
        "--baseline", metavar="FILE",
        help="report, and set the exit code from, only findings that are not in FILE (--write-baseline's): "
        "a reindented or reordered schema brings no new findings",
    )  # fmt: skip
    lint_parser.add_argument(
        "--kind", choices=KINDS, default="auto",
        help="what each FILE holds (default auto: one JSON value is one spec, json or structural_tag, or one "
        "request as in a log; "
        "JSON on every line is a request log; anything else, trailing newline stripped as gdx hash does, "
        "is one regex or grammar, unless it is a .json/.jsonl file or starts with '{'). json and "
        "structural_tag: JSON or JSONL, else exit 2. regex and grammar: the whole file is one spec, even "
        "when it is also valid JSON text",
    )  # fmt: skip
    lint_parser.add_argument(
        "--engine", action="append", metavar="NAME[==VERSION]",
        help="backend whose gaps to report (and, with --tokenizer, to compile with): xgrammar, llguidance "
        "or all (default), repeatable; NAME==VERSION (xgrammar==0.2.8: what vLLM 0.33 pins) reports "
        "that version's table, else the installed version's, else the newest verified "
        f"(xgrammar {', '.join(backends.XGRAMMAR_VERSIONS)}; llguidance "
        f"{', '.join(backends.LLGUIDANCE_VERSIONS)}). The output says which versions its findings hold for. "
        f"vllm[==VERSION] ({', '.join(vllm_releases.SUPPORTED)}; default the newest): also resolve each JSON "
        "Schema as that vLLM's default backend `auto` would, report where it goes, and give backend_mismatch "
        "(an error) to each schema routed elsewhere than most of the requests, saying what that version "
        "does with it (0.33: rejected, HTTP 400; 0.32: compiled by the other backend, the keyword dropped). "
        f"sglang[==VERSION] ({', '.join(sorted(sglang_toolcalls.PARSER_TABLES))}): the server is SGLang: "
        "the tool-call grammars (--tool-call-parser) are the ones that version derives",
    )  # fmt: skip
    server = lint_parser.add_argument_group(
        "the API server's validation (with --engine vllm)",
        "vLLM's API server validates each schema `auto` sends to outlines on its request path, with no "
        "bound: building the regex can block every request for seconds or abort the process. gdx lint runs "
        "the same library steps (outlines_core, Python's regex parser) in a child process within these "
        "bounds and reports server_crash (error) and server_stall (error from 1 s, warning from 0.1 s).",
    )
    server.add_argument(
        "--api-server.memory-limit", dest="api_server_memory", default="4GiB", metavar="SIZE",
        help="address-space limit of the child (default 4GiB; a container's memory limit is the real bound)",
    )  # fmt: skip
    server.add_argument(
        "--api-server.timeout", dest="api_server_timeout", type=float, default=30.0, metavar="SECONDS",
        help="wall-clock limit per schema (default 30): one still running then stalls at least that long",
    )  # fmt: skip
    server.add_argument(
        "--write-guard", metavar="FILE",
        help="write the schemas whose validation crashed or stalled a second or more (server_crash, "
        "server_stall at error) to FILE as the probe's guard loads it (GDX_GUARD_FILE): their next request "
        "is refused with HTTP 400 instead of freezing or killing the API server. Needs --engine vllm",
    )  # fmt: skip
    server.add_argument(
        "--write-guard-unions", action="store_true",
        help="with --write-guard, also write each schema with a union_depth finding (anyOf/oneOf nested"
        " --lint.union-depth deep) as a compile_budget verdict: the guard refuses it on every path, not only"
        " the outlines one (an operator's choice: a deep union is slow to compile, not always too slow)",
    )  # fmt: skip
    server.add_argument(
        "--no-api-server.validate", dest="api_server_validate", action="store_false",
        help="do not run the API server's validation steps (outlines' bounded, guidance's)",
    )  # fmt: skip
    add_tool_flags(lint_parser)
    lint_parser.add_argument(
        "--prove", action="store_true",
        help="with --tokenizer: for each xgrammar finding, search for a counterexample (an instance the "
        "compiled grammar accepts token by token and the jsonschema validator rejects at the finding's "
        "pointer) and print it; a finding with none drops to info; a gap no keyword names becomes a "
        "finding of its own. Needs the `prove` extra (jsonschema with its format checkers)",
    )  # fmt: skip
    lint_parser.add_argument(
        "--prove.seconds", dest="prove_seconds", type=float, default=10.0, metavar="SECONDS",
        help="search budget per schema after its compile (default 10)",
    )  # fmt: skip
    lint_parser.add_argument(
        "--tokenizer", metavar="PATH",
        help="a tokenizer.json: also compile each distinct JSON Schema once with the real engine(s), report "
        "the time and whether it compiles, probe the keywords it uses with must-reject instances, report "
        "what the engines themselves say (xgrammar's compile log, llguidance's error and warnings) as "
        "findings, and count a family's compile seconds (dynamic_schema is an error from "
        "--lint.dynamic-seconds)",
    )  # fmt: skip
    limits = lint_parser.add_argument_group(
        "limits",
        "Where each rule starts to fire. These are `gdx serve`'s --lint.* options: given the daemon's "
        "values, a schema gets the same findings here as on the daemon's /metrics.",
    )
    lint_options.add_lint_flags(limits)
    dests = {option.metadata["flag"]: option.name for option in lint_options.LINT_OPTIONS}
    for old, new in OLD_SPELLINGS.items():
        lint_parser.add_argument(
            old, dest=dests[new], action=_OldSpelling, new_flag=new, default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )  # fmt: skip
