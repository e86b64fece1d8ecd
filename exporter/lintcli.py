"""`gdx hash` and `gdx lint`: the schema analysis on the command line, usable in CI.

Exit codes of `gdx lint`: 0 no `error` finding, 1 at least one, 2 unreadable input (the file and the
reason on stderr) or an invalid `--lint.*` value. Input: JSON Schema files, or JSONL with one schema
per line (a line may be `{"id": ..., "schema": {...}}`, as JSONSchemaBench's), or `-` for stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from exporter import config
from exporter.schema import identity, variants
from exporter.schema.lint import RULES, SEVERITIES, Finding, Thresholds, lint

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


class InputError(Exception):
    pass


@dataclass
class Item:
    name: str
    text: str  # the exact serialisation (what an engine would be sent)
    schema: Any
    schema_hash: str = ""
    shape_hash: str = ""
    title: str = ""
    findings: list[Finding] = field(default_factory=list)
    compiles: list[Any] = field(default_factory=list)
    probes: list[Any] = field(default_factory=list)


def read_inputs(paths: Sequence[str], stdin: TextIO) -> Iterator[Item]:
    for path in paths:
        try:
            if path == "-":
                text, name = stdin.read(), "<stdin>"
            else:
                with open(path, encoding="utf-8") as handle:
                    text, name = handle.read(), path
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: {getattr(err, 'strerror', None) or err}") from err
        yield from _parse(name, text)


def _parse(name: str, text: str) -> Iterator[Item]:
    try:
        yield Item(name, text.strip(), json.loads(text))
        return
    except json.JSONDecodeError as err:
        if "Extra data" not in err.msg:
            raise InputError(f"{name}: not JSON: {err.msg} at line {err.lineno} column {err.colno}") from err
    except RecursionError as err:
        raise InputError(f"{name}: nested too deep to parse") from err
    for number, line in enumerate(text.splitlines(), 1):  # JSONL
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as err:
            raise InputError(f"{name}:{number}: not JSON: {err}") from err
        if isinstance(doc, dict) and "schema" in doc and ("id" in doc or len(doc) <= 3):
            label = f"{name}:{doc.get('id', number)}"
            schema = doc["schema"]
            yield Item(label, json.dumps(schema), schema)
        else:
            yield Item(f"{name}:{number}", line, doc)


def hash_main(args: argparse.Namespace) -> int:
    try:
        for path in args.files:
            text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()  # noqa: SIM115
            spec = text if identity.parse_spec(text) is not None else text.rstrip("\n")
            parsed = identity.parse_spec(spec)
            schema_hash = identity.schema_hash(spec, parsed)
            print(f"schema_hash={schema_hash} shape_hash={identity.shape_hash(spec, parsed)} {path}")
    except (OSError, UnicodeDecodeError) as err:
        print(f"gdx hash: {err}", file=sys.stderr)
        return 2
    return 0


def lint_main(args: argparse.Namespace) -> int:
    engines = ["xgrammar", "llguidance"] if args.engine == "all" else [args.engine]
    try:
        thresholds = config.lint_thresholds_from(vars(args))
    except config.ConfigError as err:
        print(f"gdx lint: {err}", file=sys.stderr)
        return 2
    try:
        items = list(read_inputs(args.files, sys.stdin))
    except InputError as err:
        print(f"gdx lint: {err}", file=sys.stderr)
        return 2
    checker = None
    if args.tokenizer:
        from exporter.enginecheck import Engines

        try:
            checker = Engines(args.tokenizer, engines)
        except (OSError, ImportError, ValueError) as err:
            print(f"gdx lint: cannot load the engines with {args.tokenizer}: {err}", file=sys.stderr)
            return 2
    analyse(items, thresholds, engines)
    if checker is not None:
        for item in items:
            item.compiles = checker.compile(item.text)
            keywords = {
                _keyword(finding)
                for finding in item.findings
                if finding.rule in ("xgrammar_unenforced", "llguidance_refused")
            }
            for engine in engines:
                for keyword in sorted(k for k in keywords if k):
                    result = checker.probe(engine, keyword)
                    if result is not None:
                        item.probes.append(result)
    (print_json if args.format == "json" else print_text)(items)
    return 1 if any(finding.severity == "error" for item in items for finding in item.findings) else 0


def analyse(items: list[Item], thresholds: Thresholds, engines: Sequence[str]) -> None:
    """Per-schema rules, then the rules over the whole set: variants of a shape, serialisations."""
    by_shape: dict[str, list[Item]] = defaultdict(list)
    texts: dict[str, set[str]] = defaultdict(set)
    for item in items:
        item.schema_hash = identity.schema_hash(item.text, item.schema)
        item.shape_hash = identity.shape_hash(item.text, item.schema)
        item.title = identity.title_of(item.schema)
        item.findings = lint(item.schema, thresholds, engines)
        by_shape[item.shape_hash].append(item)
        texts[item.schema_hash].add(item.text)
    for group in by_shape.values():
        distinct = {item.schema_hash: item for item in group}
        if len(distinct) < 2:
            continue
        maps = [variants.literals(variant.schema, thresholds.budget) for variant in distinct.values()]
        found = variants.dynamic_enum(variants.varying_paths(maps), len(distinct))
        for item in group:
            item.findings.extend(found)
    for item in items:
        item.findings.extend(variants.unstable_serialization(len(texts[item.schema_hash])))
        item.findings.sort(key=_report_order)


def _report_order(finding: Finding) -> tuple[int, str, str]:
    """Errors first, then by place in the document."""
    return SEVERITIES.index(finding.severity), finding.pointer, finding.rule


def _keyword(finding: Finding) -> str:
    """The keyword a backend rule names between backticks in its message."""
    start = finding.message.find("`")
    end = finding.message.find("`", start + 1)
    return finding.message[start + 1 : end] if 0 <= start < end else ""


def print_text(items: list[Item]) -> None:
    for item in items:
        title = f" title={item.title}" if item.title else ""
        print(f"{item.name}  schema_hash={item.schema_hash} shape_hash={item.shape_hash}{title}")
        for compiled in item.compiles:
            state = (
                f"compiles in {compiled.seconds * 1000:.1f} ms"
                if compiled.ok
                else f"does not compile: {compiled.error}"
            )
            print(f"  {compiled.engine}: {state}")
        for probe in item.probes:
            print(f"  probe {probe.engine} `{probe.keyword}`: {probe.outcome}")
        for finding in item.findings:
            print(f"  {finding.severity:<8} {finding.rule:<22} {finding.pointer or '/'}")
            print(f"           {finding.message}")
            print(f"           fix: {finding.fix}")
        if not item.findings:
            print("  no findings")
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        for finding in item.findings:
            counts[finding.severity] += 1
    summary = ", ".join(f"{counts[severity]} {severity}" for severity in SEVERITIES)
    print(f"{len(items)} schema(s): {summary}")


def print_json(items: list[Item]) -> None:
    json.dump(
        [
            {
                "name": item.name,
                "schema_hash": item.schema_hash,
                "shape_hash": item.shape_hash,
                "title": item.title,
                "findings": [finding.doc() for finding in item.findings],
                "compile": [compiled.doc() for compiled in item.compiles],
                "probes": [probe.doc() for probe in item.probes],
            }
            for item in items
        ],
        sys.stdout,
        indent=2,
    )
    print()


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
        "is not JSON (a regex, a grammar) is hashed as its text without the trailing newline.",
    )
    hash_parser.add_argument("files", nargs="+", metavar="FILE")
    lint_parser = commands.add_parser(
        "lint",
        help="find what makes schemas slow to compile or not enforced",
        description="Lint JSON Schemas for grammar-compile cost and backend gaps. FILE: a schema, or "
        'JSONL with one per line ({"id", "schema"} lines accepted); \'-\' reads stdin. Several '
        "variants of one shape are compared: the pointers where they differ are reported "
        "(dynamic_enum). Exit 0: no error finding; 1: errors; 2: unreadable input or an invalid "
        "limit. Rules: " + ", ".join(RULES) + ".",
    )
    lint_parser.add_argument("files", nargs="+", metavar="FILE")
    lint_parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    lint_parser.add_argument(
        "--engine", choices=("xgrammar", "llguidance", "all"), default="all",
        help="backend whose gaps to report (and, with --tokenizer, to compile with); default all",
    )  # fmt: skip
    lint_parser.add_argument(
        "--tokenizer", metavar="PATH",
        help="a tokenizer.json: also compile each schema with the real engine(s), report the time and "
        "whether it compiles, and probe the keywords it uses with must-reject instances",
    )  # fmt: skip
    limits = lint_parser.add_argument_group(
        "limits",
        "Where each rule starts to fire. These are `gdx serve`'s --lint.* options: given the daemon's "
        "values, a schema gets the same findings here as on the daemon's /metrics.",
    )
    config.add_lint_flags(limits)
    dests = {option.metadata["flag"]: option.name for option in config.LINT_OPTIONS}
    for old, new in OLD_SPELLINGS.items():
        lint_parser.add_argument(
            old, dest=dests[new], action=_OldSpelling, new_flag=new, default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )  # fmt: skip
