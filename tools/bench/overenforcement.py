"""What a grammar engine enforces too much (`python -m tools.bench.overenforcement`): outputs that are
valid for their schema (a standard validator accepts them) and that the compiled grammar refuses, so
that no decoding can ever produce them.

Each mechanism builds its own cases at random (a seed, no fixed example): a schema that uses the
keyword and an instance the schema allows that the mechanism says the engine refuses. Each case is
compiled on the real engine (vLLM's defaults: `exporter.lint.prove.engine`), the instance is fed
token by token, and `jsonschema` re-checks that it is valid. Printed per engine and mechanism: valid
instances the engine refused, of those built, and one control per mechanism (an instance without the
mechanism's trait, which the engine must accept: the refusal is the trait's, not the schema's).

Mechanisms:
- escapes under `maxLength`: a string of at most maxLength characters holding characters JSON must
  escape (`"`, `\\`, control characters), whose escaped text is longer than the bound;
- escapes under `minLength`: a string at least minLength long holding one such character (which
  showed that the loss is not a count over the escaped text: a length bound takes no escape at all);
- `pattern` searched, not matched: a value holding the pattern's match inside other characters
  (JSON Schema's `pattern` is a search, ECMA-262 without implicit anchors);
- `patternProperties` searched: a property whose name holds the key's match inside other characters;
- property order: the schema's properties in another order than declared (by design in both engines:
  they emit properties in the schema's order).

`--dev-half`: instead, the lint rule over JSONSchemaBench's development half (vendored, 4,828
schemas): the `xgrammar_overenforced` findings per mechanism, and how many `--prove` proves on this
xgrammar (a witness the validator accepts and xgrammar refuses, exporter/lint/prove/overreach.py),
with the reasons of the rest.

Usage: python -m tools.bench.overenforcement [--cases N] [--seed S] [--dev-half] [--engines-path DIRS]
(--engines-path: folders put first on sys.path, for another xgrammar/llguidance: `make engines`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tools.harness import TOKENIZER_JSON

MUST_ESCAPE = ['"', "\\", "\n", "\t", "\r", "\b", "\f", "\x01"]


@dataclass(frozen=True)
class Case:
    schema: dict[str, Any]
    instance: Any  # valid for the schema, with the mechanism's trait
    control: Any  # valid for the schema, without it


def _word(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))


def max_length(rng: random.Random) -> Case:
    bound = rng.randint(2, 12)
    chars = [rng.choice(string.ascii_letters) for _ in range(bound)]
    for i in rng.sample(range(bound), rng.randint(1, max(1, bound // 2))):
        chars[i] = rng.choice(MUST_ESCAPE)
    control = "".join(rng.choice(string.ascii_letters) for _ in range(bound))
    return Case({"type": "string", "maxLength": bound}, "".join(chars), control)


def min_length(rng: random.Random) -> Case:
    """A string as long as its minLength or longer holding one character JSON must escape: valid, and
    refused where a length bound excludes escapes (the control has none)."""
    bound = rng.randint(1, 12)
    chars = [rng.choice(string.ascii_letters) for _ in range(bound + rng.randint(0, 4))]
    chars[rng.randrange(len(chars))] = rng.choice(MUST_ESCAPE)
    control = "".join(rng.choice(string.ascii_letters) for _ in range(bound))
    return Case({"type": "string", "minLength": bound}, "".join(chars), control)


def pattern(rng: random.Random) -> Case:
    core = _word(rng, 2, 5)
    return Case({"type": "string", "pattern": core}, _word(rng, 1, 4) + core + _word(rng, 1, 4), core)


def pattern_properties(rng: random.Random) -> Case:
    core = _word(rng, 2, 5)
    schema = {
        "type": "object",
        "patternProperties": {core: {"type": "integer"}},
        "additionalProperties": False,
    }
    return Case(schema, {_word(rng, 1, 4) + core: rng.randint(0, 99)}, {core: rng.randint(0, 99)})


def property_order(rng: random.Random) -> Case:
    names = rng.sample([_word(rng, 3, 8) + str(i) for i in range(6)], rng.randint(2, 5))
    props = {n: {"type": "integer"} for n in names}
    schema = {"type": "object", "properties": props, "required": names}
    values = {n: rng.randint(0, 9) for n in names}
    return Case(schema, dict(reversed(list(values.items()))), values)


MECHANISMS: dict[str, Callable[[random.Random], Case]] = {
    "escapes under maxLength": max_length,
    "escapes under minLength": min_length,
    "pattern searched": pattern,
    "patternProperties searched": pattern_properties,
    "property order": property_order,
}


def dev_half() -> None:
    """Findings and proofs per mechanism over the vendored development half, on the xgrammar loaded."""
    import collections
    import gzip
    import time

    from exporter.analysis.lint import lint
    from exporter.lint.prove import overreach
    from exporter.lint.prove.engine import XgrammarEngine
    from tools.harness import JSONSCHEMABENCH

    engine = XgrammarEngine(str(TOKENIZER_JSON))
    found: collections.Counter[str] = collections.Counter()
    proven: collections.Counter[str] = collections.Counter()
    why: collections.Counter[tuple[str, str]] = collections.Counter()
    schemas = with_findings = 0
    started = time.perf_counter()
    for path in sorted((JSONSCHEMABENCH / "schemas").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                schema = json.loads(line)["schema"]
                schemas += 1
                findings = [f for f in lint(schema) if f.rule == overreach.RULE]
                if not findings:
                    continue
                with_findings += 1
                for finding in overreach.prove(json.dumps(schema), findings, engine):
                    found[finding.keyword] += 1
                    assert finding.proof is not None
                    if finding.proof.status == "proven":
                        proven[finding.keyword] += 1
                    else:
                        why[(finding.keyword, finding.proof.how.split(":")[0][:60])] += 1
    print(f"xgrammar {engine.version}: {schemas} schemas, {with_findings} with xgrammar_overenforced "
          f"findings ({time.perf_counter() - started:.0f} s)")  # fmt: skip
    for keyword in sorted(found):
        print(f"  {keyword:32} findings {found[keyword]:5d}   proven {proven[keyword]:5d}")
    for (keyword, reason), count in why.most_common():
        print(f"    unproven {keyword}: {reason} ({count})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=40, help="cases per mechanism (default 40)")
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument(
        "--engines-path", default="", help="folders first on sys.path (another engine version)"
    )
    parser.add_argument(
        "--dev-half", action="store_true", help="the lint rule and its proofs over the dev half"
    )
    args = parser.parse_args()
    if args.engines_path:
        sys.path[:0] = args.engines_path.split(os.pathsep)
    if args.dev_half:
        print("# command: python -m tools.bench.overenforcement --dev-half"
              + (f" --engines-path {args.engines_path}" if args.engines_path else ""))  # fmt: skip
        dev_half()
        return
    import jsonschema  # type: ignore[import-untyped]

    from exporter.lint.prove.engine import LlguidanceEngine, XgrammarEngine

    print(f"# command: python -m tools.bench.overenforcement --cases {args.cases} --seed {args.seed}"
          + (f" --engines-path {args.engines_path}" if args.engines_path else ""))  # fmt: skip
    for engine in (XgrammarEngine(str(TOKENIZER_JSON)), LlguidanceEngine(str(TOKENIZER_JSON))):
        print(f"{engine.name} {engine.version}")
        for name, build in MECHANISMS.items():
            rng = random.Random(f"{args.seed}:{name}")
            refused = controls_refused = 0
            for _ in range(args.cases):
                case = build(rng)
                validator = jsonschema.Draft202012Validator(case.schema)
                assert validator.is_valid(case.instance) and validator.is_valid(case.control), case
                compiled = engine.compile(json.dumps(case.schema))
                refused += not engine.accepts(compiled, json.dumps(case.instance))
                controls_refused += not engine.accepts(compiled, json.dumps(case.control))
            print(
                f"  {name:28} valid refused {refused:3d}/{args.cases}   controls refused {controls_refused}"
            )


if __name__ == "__main__":
    main()
