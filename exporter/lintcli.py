"""`gdx hash` and `gdx lint`: the schema analysis on the command line, usable in CI.

Exit codes of `gdx lint`: 0 no `error` finding, 1 at least one, 2 unreadable input (the file and the
reason on stderr). Input: JSON Schema files, or JSONL with one schema per line (a line may be
`{"id": ..., "schema": {...}}`, as JSONSchemaBench's), or `-` for stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from exporter.schema import identity, variants
from exporter.schema.lint import RULES, SEVERITIES, Finding, Thresholds, lint
from exporter.schema.walk import Budget


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
                with open(path, encoding="utf-8") as f:
                    text, name = f.read(), path
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
    thresholds = Thresholds(
        depth=args.depth,
        max_items=args.max_items,
        union_depth=args.union_depth,
        union_width=args.union_width,
        enum_size=args.enum_size,
        quantifier=args.quantifier,
        budget=Budget(max_nodes=args.budget_nodes, max_seconds=args.budget_seconds),
    )  # fmt: skip
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
                _keyword(f) for f in item.findings if f.rule in ("xgrammar_unenforced", "llguidance_refused")
            }
            for engine in engines:
                for keyword in sorted(k for k in keywords if k):
                    result = checker.probe(engine, keyword)
                    if result is not None:
                        item.probes.append(result)
    (print_json if args.format == "json" else print_text)(items)
    return 1 if any(f.severity == "error" for item in items for f in item.findings) else 0


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
        distinct = {i.schema_hash: i for i in group}
        if len(distinct) < 2:
            continue
        maps = [variants.literals(i.schema, thresholds.budget) for i in distinct.values()]
        found = variants.dynamic_enum(variants.varying_paths(maps), len(distinct))
        for item in group:
            item.findings.extend(found)
    for item in items:
        item.findings.extend(variants.unstable_serialization(len(texts[item.schema_hash])))
        item.findings.sort(key=lambda f: (SEVERITIES.index(f.severity), f.pointer, f.rule))


def _keyword(f: Finding) -> str:
    start = f.message.find("`")
    end = f.message.find("`", start + 1)
    return f.message[start + 1 : end] if 0 <= start < end else ""


def print_text(items: list[Item]) -> None:
    for item in items:
        title = f" title={item.title}" if item.title else ""
        print(f"{item.name}  schema_hash={item.schema_hash} shape_hash={item.shape_hash}{title}")
        for c in item.compiles:
            state = f"compiles in {c.seconds * 1000:.1f} ms" if c.ok else f"does not compile: {c.error}"
            print(f"  {c.engine}: {state}")
        for p in item.probes:
            print(f"  probe {p.engine} `{p.keyword}`: {p.outcome}")
        for f in item.findings:
            print(f"  {f.severity:<8} {f.rule:<22} {f.pointer or '/'}")
            print(f"           {f.message}")
            print(f"           fix: {f.fix}")
        if not item.findings:
            print("  no findings")
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        for f in item.findings:
            counts[f.severity] += 1
    summary = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES)
    print(f"{len(items)} schema(s): {summary}")


def print_json(items: list[Item]) -> None:
    json.dump(
        [
            {
                "name": i.name,
                "schema_hash": i.schema_hash,
                "shape_hash": i.shape_hash,
                "title": i.title,
                "findings": [f.doc() for f in i.findings],
                "compile": [c.doc() for c in i.compiles],
                "probes": [p.doc() for p in i.probes],
            }
            for i in items
        ],
        sys.stdout,
        indent=2,
    )
    print()


def add_parsers(sub: Any) -> None:
    h = sub.add_parser(
        "hash",
        help="print a schema's schema_hash and shape_hash (as the probe reports them)",
        description="Print schema_hash (SHA-256 of the canonical JSON, 12 hex digits) and shape_hash "
        "(literals removed) of each FILE ('-' for stdin), the values the dashboards show. A file that "
        "is not JSON (a regex, a grammar) is hashed as its text without the trailing newline.",
    )
    h.add_argument("files", nargs="+", metavar="FILE")
    t = Thresholds()
    b = Budget()
    lt = sub.add_parser(
        "lint",
        help="find what makes schemas slow to compile or not enforced",
        description="Lint JSON Schemas for grammar-compile cost and backend gaps. FILE: a schema, or "
        'JSONL with one per line ({"id", "schema"} lines accepted); \'-\' reads stdin. Several '
        "variants of one shape are compared: the pointers where they differ are reported "
        "(dynamic_enum). Exit 0: no error finding; 1: errors; 2: unreadable input. Rules: "
        + ", ".join(RULES)
        + ".",
    )
    lt.add_argument("files", nargs="+", metavar="FILE")
    lt.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    lt.add_argument(
        "--engine", choices=("xgrammar", "llguidance", "all"), default="all",
        help="backend whose gaps to report (and, with --tokenizer, to compile with); default all",
    )  # fmt: skip
    lt.add_argument(
        "--tokenizer", metavar="PATH",
        help="a tokenizer.json: also compile each schema with the real engine(s), report the time and "
        "whether it compiles, and probe the keywords it uses with must-reject instances",
    )  # fmt: skip
    lt.add_argument("--depth", type=int, default=t.depth, help=f"nesting levels allowed (default {t.depth})")
    lt.add_argument(
        "--max-items",
        type=int,
        default=t.max_items,
        help=f"minItems/maxItems allowed (default {t.max_items})",
    )
    lt.add_argument(
        "--union-depth",
        type=int,
        default=t.union_depth,
        help=f"anyOf/oneOf nesting allowed (default {t.union_depth})",
    )
    lt.add_argument(
        "--union-width", type=int, default=t.union_width, help=f"branches per union (default {t.union_width})"
    )
    lt.add_argument(
        "--enum-size", type=int, default=t.enum_size, help=f"enum members (default {t.enum_size})"
    )
    lt.add_argument(
        "--quantifier",
        type=int,
        default=t.quantifier,
        help=f"largest regex {{m,n}} bound (default {t.quantifier})",
    )
    lt.add_argument(
        "--budget-seconds",
        type=float,
        default=b.max_seconds,
        help=f"analysis time per schema (default {b.max_seconds})",
    )
    lt.add_argument(
        "--budget-nodes",
        type=int,
        default=b.max_nodes,
        help=f"subschemas visited per schema (default {b.max_nodes})",
    )
