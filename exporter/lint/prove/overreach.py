"""`--prove` for `xgrammar_overenforced`: a value the schema allows that the compiled grammar refuses.

The schema's own example is made, aimed at the finding's subschema (candidates.Exemplar), and the
engine must accept it: the control, so that a refusal is the keyword's and not the example's. Then the
value at the finding's place becomes a witness the mechanism predicts the engine refuses (a newline
in a length-bounded string, text beside a pattern's match, a property name with text beside its pattern's
match); the validator must accept the whole instance and the engine must refuse it, token by token.
xgrammar matches bytes, so a refusal of this tokenization is a refusal of every tokenization.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

from exporter.lint.prove import candidates
from exporter.lint.prove.engine import CompiledGrammar, XgrammarEngine
from exporter.lint.prove.search import reason_of, settle, unproven
from exporter.lint.prove.validator import Validator, dumps
from exporter.schema import regex
from exporter.schema.findings import Finding, Proof
from exporter.schema.values import is_number
from exporter.schema.walk import resolve

RULE = "xgrammar_overenforced"
BESIDE = ("x", "-", "0", " ")  # what is put beside a match: any one a pattern does not swallow
MAX_WITNESS = 10_000  # characters of a length witness (a minLength past it stays unproven)


def witnesses(keyword: str, node: dict[str, Any], value: Any) -> Iterator[Any]:
    """Values for the place the finding names, each valid if the finding's mechanism is all there is."""
    if keyword in ("escapes under maxLength", "escapes under minLength"):
        least = node.get("minLength")
        length = max(1, int(least) if is_number(least) else 0)
        if length > MAX_WITNESS:
            return
        for char in ("\n", '"', "\\"):
            yield "a" * (length - 1) + char
    elif keyword == "pattern matched whole" and isinstance(value, str):
        yield from _beside(node["pattern"], value)
    elif keyword == "patternProperties matched whole" and isinstance(value, dict):
        for name, subschema in node["patternProperties"].items():
            match = (candidates.pattern_literals(name) or [""])[0]
            for key in _beside(name, match):
                if key not in value:
                    yield {**value, key: candidates.exemplar(subschema)}


def _beside(pattern: str, match: str) -> Iterator[str]:
    ends = regex.open_ends(pattern) or (False, False)
    for char in BESIDE:
        if ends[0]:
            yield char + match
        if ends[1]:
            yield match + char


def prove(
    text: str, findings: Sequence[Finding], engine: XgrammarEngine, compiled: CompiledGrammar | None = None
) -> list[Finding]:
    """The `xgrammar_overenforced` findings among `findings`, each proven or dropped to info with why.
    Never raises on a schema. `compiled`: the text's grammar when the caller has it."""
    targets = [finding for finding in findings if finding.rule == RULE]
    if not targets:
        return []
    started = time.perf_counter()
    try:
        schema = json.loads(text)
        compiled = compiled or engine.compile(text)
        validator = Validator(schema)
    except Exception as err:
        why = f"not compiled: {reason_of(err)}"
        return [unproven(t, Proof("unproven", f"xgrammar {engine.version}", how=why)) for t in targets]
    return [settle(t, _witnessed(schema, t, engine, compiled, validator, started)) for t in targets]


def _witnessed(
    schema: Any,
    target: Finding,
    engine: XgrammarEngine,
    compiled: CompiledGrammar,
    validator: Validator,
    started: float,
) -> Proof:
    name = f"xgrammar {engine.version}"
    pointer = target.pointer.rpartition("/")[0]
    found = resolve(schema, "#" + pointer) if pointer else ("", schema)
    node = found[1] if found is not None else None
    if not isinstance(node, dict):
        return Proof("unproven", name, how="the finding's subschema is not in the document")
    try:
        made = candidates.Exemplar(schema, 0, aim=pointer)
        paths = made.places(pointer)
        if not paths:
            return Proof("unproven", name, how="the schema's example does not reach this subschema")
        control = dumps(made.instance)
        if validator.violations(made.instance) or not engine.accepts(compiled, control):
            why = "the schema's own example is not a valid output xgrammar takes"
            return Proof("unproven", name, how=why)
        for path in paths:
            current = candidates.at(made.instance, path)
            for value in witnesses(target.keyword, node, current):
                instance = candidates.replace(made.instance, path, value)
                if validator.violations(instance):
                    continue
                witness = dumps(instance)
                if engine.accepts(compiled, witness):
                    continue
                seconds = round(time.perf_counter() - started, 3)
                why = "valid: the schema allows this output, which no decoding can produce"
                tokens = len(engine.tokens(witness))
                return Proof("proven", name, witness, why, tokens, "witness of the mechanism", seconds)
    except (Exception, RecursionError) as err:
        return Proof("unproven", name, how=f"the search failed: {type(err).__name__}: {str(err)[:160]}")
    return Proof("unproven", name, how="every valid witness tried was accepted")
