"""`--prove`: a counterexample for each xgrammar finding, or an honest "not proven".

The search alternates two moves within a time budget: sample an instance from the compiled grammar
(exporter/lint/prove/engine.py), then try the edits one step away from it (exporter/lint/prove/candidates.py).
A candidate counts when the validator rejects it where a finding points (exporter/lint/prove/validator.py)
*and* the engine accepts it token by token: then the finding is proven with that instance. A
rejection at a place no finding names, of an instance the engine accepts, is a gap no table knows: it
becomes a finding of its own. Findings left without a counterexample drop to `info` and say so.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from exporter.lint.prove import candidates
from exporter.lint.prove.engine import CompiledGrammar, XgrammarEngine
from exporter.lint.prove.validator import Validator, Violation, dumps
from exporter.schema.findings import Finding, Proof
from exporter.schema.walk import resolve

RULE = "xgrammar_unenforced"
UNIONS = frozenset({"anyOf", "oneOf", "allOf"})
OBJECT_KEYS = ("patternProperties", "additionalProperties", "unevaluatedProperties", "propertyNames")
MAX_SIBLING_PLACES = 40  # places edited under the properties beside a union
EXEMPLARS = 3  # the first, second and third choice of every union and enum
MAX_STUCK = 20  # walks in a row that did not finish: the grammar's strings are too long to sample


@dataclass(frozen=True)
class ProofSettings:
    seconds: float = 10.0  # search budget per schema, after the compile
    explore: float = 1.0  # searched for gaps no finding names, once the findings are settled
    patience: float = 1.5  # stop when the last proof is this old: what is left is likely unprovable
    seed: int = 0


@dataclass(frozen=True)
class Outcome:
    findings: tuple[Finding, ...]  # the xgrammar findings given, each with its proof
    discovered: tuple[Finding, ...]  # gaps no finding named, each proven
    compile_seconds: float
    seconds: float
    samples: int
    candidates: int
    error: str = ""


def covers(finding: Finding, violation: Violation) -> bool:
    """Whether a validator error proves this finding: it sits where the dropped keyword acts, in the
    document or on the validator's way there (a `$ref` under an `allOf` branch leads elsewhere)."""
    places = (violation.pointer, violation.route, *violation.trail)
    return any(_covers(finding, violation, place) for place in places if place)


def _covers(finding: Finding, violation: Violation, place: str) -> bool:
    name, pointer = finding.keyword, finding.pointer
    if not pointer:
        return bool(name) and violation.keyword in name
    node = pointer.rpartition("/")[0]
    if name.startswith("properties beside"):  # the union is compiled, its siblings are dropped
        rest = place[len(node) + 1 :].split("/", 1)[0]
        return place.startswith(node + "/") and rest not in UNIONS
    if "patternProperties" in name:  # a key the pattern should refuse falls to additionalProperties
        node = pointer.partition("/patternProperties")[0]
        return any(_within(place, f"{node}/{key}") for key in OBJECT_KEYS)
    if name == "allOf with several branches":  # the whole subschema compiles to any JSON value
        return _within(place, node)
    if name == "$ref to an anchor":  # the target is never reached: all it asks is dropped
        return place.startswith(node + "/")
    if name.endswith("beside $ref"):  # the target is compiled, the $ref's siblings are dropped
        return place.startswith(node + "/") and not _within(place, pointer)
    if name in ("if", "then", "else"):
        return any(_within(place, f"{node}/{key}") for key in ("if", "then", "else"))
    if name == "oneOf exclusivity":
        return place == pointer and violation.several
    return _within(place, pointer)


def _within(pointer: str, prefix: str) -> bool:
    return pointer == prefix or pointer.startswith(prefix + "/")


class _Search:
    def __init__(
        self, engine: XgrammarEngine, compiled: CompiledGrammar, schema: Any, targets: list[Finding]
    ) -> None:
        self.engine = engine
        self.compiled = compiled
        self.validator = Validator(schema)
        self.targets = targets
        self.proofs: dict[int, Proof] = {}
        self.found: dict[str, tuple[Violation, Proof]] = {}  # pointer -> a gap no finding names
        self.candidates = 0
        self.started = self.progress = time.perf_counter()  # progress: when the last proof came

    def settled(self) -> bool:
        return len(self.proofs) == len(self.targets)

    def open(self, index: int) -> bool:
        proof = self.proofs.get(index)
        return proof is None or proof.status == "proven"

    def consider(self, instance: Any, how: str) -> None:
        self.candidates += 1
        violations = self.validator.violations(instance)
        if not violations:
            return
        text = dumps(instance)
        wanted: list[tuple[Violation, int | None]] = []
        for violation in violations:
            matched = [i for i, target in enumerate(self.targets) if covers(target, violation)]
            if not matched and self._better(self.found.get(violation.pointer, (None, None))[1], text):
                wanted.append((violation, None))
            wanted.extend(
                (violation, i) for i in matched if self.open(i) and self._better(self.proofs.get(i), text)
            )
        if not wanted:
            return
        if not self.engine.accepts(self.compiled, text):
            return
        self.progress = time.perf_counter()
        tokens = len(self.engine.tokens(text))
        seconds = round(time.perf_counter() - self.started, 3)
        engine = f"xgrammar {self.engine.version}"
        for violation, index in wanted:
            proof = Proof("proven", engine, text, violation.message, tokens, how, seconds)
            if index is None:
                self.found[violation.pointer] = (violation, proof)
            else:
                self.proofs[index] = proof

    @staticmethod
    def _better(proof: Proof | None, text: str) -> bool:
        """Not proven yet, or this counterexample is much shorter: the user reads it."""
        return proof is None or len(text) * 2 <= len(proof.instance)


def prove(
    text: str,
    findings: Sequence[Finding],
    engine: XgrammarEngine,
    settings: ProofSettings = ProofSettings(),
    compiled: CompiledGrammar | None = None,
) -> Outcome:
    """Proofs for the `xgrammar_unenforced` findings among `findings` (others are returned as they
    are, not in the outcome) and the gaps the search found on its own. Never raises on a schema.
    `compiled`: the text's grammar when the caller has it (else compiled here)."""
    targets = [finding for finding in findings if finding.rule == RULE]
    started = time.perf_counter()
    engine_name = f"xgrammar {engine.version}"
    try:
        schema = json.loads(text)
        compiled = compiled or engine.compile(text)
        search = _Search(engine, compiled, schema, targets)
    except Exception as err:
        reason = reason_of(err)
        not_compiled = Proof("unproven", engine_name, how=f"not compiled: {reason}")
        return Outcome(
            tuple(unproven(t, not_compiled) for t in targets),
            (),
            0.0,
            time.perf_counter() - started,
            0,
            0,
            reason,
        )
    for index, target in enumerate(targets):
        format_name = _format_at(schema, target.pointer)
        if format_name and not search.validator.checks_format(format_name):
            why = f"the validator does not check format {format_name}: nothing to prove it against"
            search.proofs[index] = Proof("unproven", engine_name, how=why)
    rng = random.Random(settings.seed)
    literals = candidates.pool(schema)
    deadline = time.perf_counter() + settings.seconds
    explore_until: float | None = None

    def over() -> bool:
        nonlocal explore_until
        now = time.perf_counter()
        if explore_until is None and search.settled():
            explore_until = min(deadline, now + settings.explore)
        return now >= (explore_until or deadline) or now - search.progress >= settings.patience

    samples = stuck = 0
    failure = ""
    try:
        # First the schema's own examples, edited where each finding points: precise and cheap,
        # bounded by the budget alone. Then their random mutations and the walks, with patience.
        def spent() -> bool:
            return time.perf_counter() >= deadline or search.settled()

        made_ones = [candidates.Exemplar(schema, variant) for variant in range(EXEMPLARS)]
        reached = {pointer for made in made_ones for pointer in made.where}
        for index, target in enumerate(targets):  # a union branch none of them took
            node = target.pointer.rpartition("/")[0]
            if index not in search.proofs and node not in reached:
                made_ones.append(candidates.Exemplar(schema, 0, aim=node))
                reached.update(made_ones[-1].where)
        for made in made_ones:
            _edit_where_pointed(search, made, literals, spent)
        search.progress = time.perf_counter()
        for made in made_ones[:EXEMPLARS]:
            for candidate in candidates.mutations(made.instance, literals, rng):
                if over():
                    break
                search.consider(candidate, "mutation of the schema's example")
        while not over() and stuck < MAX_STUCK:
            sample = engine.sample(compiled, rng)
            if sample is None:
                stuck += 1
                continue
            stuck = 0
            samples += 1
            instance = json.loads(sample)
            search.consider(instance, "sampling")
            for candidate in candidates.mutations(instance, literals, rng):
                if over():
                    break
                search.consider(candidate, "mutation")
    except (
        Exception,
        RecursionError,
    ) as err:  # the engine's matcher or a deep value: stop, keep what is proven
        failure = f"the search failed: {type(err).__name__}: {str(err)[:160]}"
    elapsed = time.perf_counter() - started
    why = "no counterexample found" + (
        f" (searched {time.perf_counter() - started:.1f} s)"
        if stuck < MAX_STUCK
        else ": the grammar's values are too long to sample"
    )
    missing = Proof("unproven", engine_name, how=failure or why)
    done = tuple(settle(t, search.proofs.get(i) or missing) for i, t in enumerate(targets))
    discovered = tuple(_discovered(violation, proof) for violation, proof in search.found.values())
    return Outcome(done, discovered, compiled.seconds, elapsed, samples, search.candidates)


def _edit_where_pointed(search: _Search, made: candidates.Exemplar, literals: list[Any], over: Any) -> None:
    """The schema's example, then edits of it at the place each open finding points to."""
    search.consider(made.instance, "the schema's example")
    for index, target in enumerate(search.targets):
        for place in _places(made, target):
            if over():
                return
            if index in search.proofs:
                break
            for candidate in candidates.targeted(made, place, literals):
                search.consider(candidate, "edit of the schema's example where the finding points")
                if over() or index in search.proofs:
                    break


def _places(made: candidates.Exemplar, target: Finding) -> list[str]:
    """The subschemas whose values a finding is about: its own, and for `properties beside` a
    union, every place under those properties that the example filled."""
    node = target.pointer.rpartition("/")[0]
    if not target.keyword.startswith("properties beside"):
        return [node]
    under = [pointer for pointer in made.where if pointer.startswith(f"{node}/properties/")]
    return [node, *under[:MAX_SIBLING_PLACES]]


def _format_at(schema: Any, pointer: str) -> str:
    """The format a finding at `.../format` is about (read from the schema, not the message)."""
    if not pointer.endswith("/format"):
        return ""
    found = resolve(schema, "#" + pointer)
    return found[1] if found is not None and isinstance(found[1], str) else ""


def reason_of(err: BaseException) -> str:
    """An engine's exception in one line: its message's first line, else its type."""
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__


def settle(finding: Finding, proof: Proof) -> Finding:
    """The finding with its proof: proven as it is, else dropped to info (unproven)."""
    return replace(finding, proof=proof) if proof.status == "proven" else unproven(finding, proof)


def unproven(finding: Finding, proof: Proof) -> Finding:
    """Without a counterexample a finding is a suspicion, not a fact: info until one is shown."""
    return replace(finding, severity="info", proof=proof)


def _discovered(violation: Violation, proof: Proof) -> Finding:
    return Finding(
        RULE, "warning", violation.pointer,
        f"xgrammar accepts an instance that fails `{violation.keyword}` here, a gap no known keyword "
        f"names (found by --prove on {proof.engine})",
        "validate the output after decoding", violation.keyword, proof,
    )  # fmt: skip


@dataclass(frozen=True)
class Prover:
    """The engine and budget `gdx lint --prove` runs with, applied to one schema's findings."""

    engine: XgrammarEngine
    settings: ProofSettings = ProofSettings()

    def apply(self, text: str, findings: Sequence[Finding]) -> list[Finding]:
        """The findings with each xgrammar one proven or dropped to info, plus the gaps found."""
        from exporter.lint.prove import overreach

        try:  # one compile for both searches; where it fails, each says why
            compiled: CompiledGrammar | None = self.engine.compile(text)
        except Exception:
            compiled = None
        outcome = prove(text, findings, self.engine, self.settings, compiled)
        over = overreach.prove(text, findings, self.engine, compiled)
        others = [finding for finding in findings if finding.rule not in (RULE, overreach.RULE)]
        return [*others, *outcome.findings, *over, *outcome.discovered]
