"""The proof of a family's fix on a real engine: one compile instead of one per variant (where the
engine caches), nothing valid lost, nothing invalid let through both the static grammar and the check
after decoding.

Run once per engine (xgrammar, llguidance: exporter/lint/prove/engine.py), over the tokenizer
`gdx lint --tokenizer` uses. For each variant (a member of the family):
- valid instances: texts the member's own grammar emits (random walks) and an instance with every
  property filled per union branch, kept when the jsonschema validator accepts them under the member;
  each must be accepted by the static grammar, token by token, and pass `check` against the member;
- instances the static grammar emits that the member's grammar rejects: `check` against the member
  must reject each.
And the compiles, as vLLM serves the requests. xgrammar caches: every member request sent as itself
is one cold compile per distinct variant, sent as the static schema through one caching compiler one
compile and then hits. llguidance does not: every request compiles either way, so what the static
schema changes is the seconds of each compile (a member's, timed once, times its requests, beside
every request's compile of the static schema). A family whose proof, on any engine, finds a lost
instance or a missed one, or cannot compile a member or the static schema, is not fixed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from exporter.fix.plan import FamilyPlan
from exporter.fix.postcheck import check
from exporter.lint.prove import candidates
from exporter.lint.prove.engine import CompiledGrammar, ProofEngine
from exporter.lint.prove.validator import Validator

SAMPLES = 6  # random walks per member, each way
MAX_VARIANTS = 40  # variants whose instances are checked (all compile): a log of hundreds stays minutes
BRANCHES = 3  # exemplars per member: union branch 0, 1, 2
SHOWN = 3  # examples kept of what went wrong


@dataclass
class FixProof:
    engine: str  # "xgrammar 0.2.9"
    compiles_before: int = 0  # every request sent as itself: one per variant (a cache), or per request
    seconds_before: float = 0.0
    compiles_after: int = 0  # every request sent as the static schema: one (a cache), or one per request
    seconds_after: float = 0.0
    valid: int = 0  # member instances the static grammar accepts and the check passes
    lost: list[str] = field(default_factory=list)
    caught: int = 0  # static-grammar instances a member's grammar rejects, and the check rejects
    missed: list[str] = field(default_factory=list)
    error: str = ""  # a member or the static schema the engine does not compile
    refused: str = ""  # the engine refuses the family's own schemas too: it never serves them
    variants: int = 0  # the family's variants (each compiled)
    variants_checked: int = 0  # those compiled and whose instances were checked (at most max_variants,
    # spread); past it, seconds_before is theirs scaled to every variant's compiles

    @property
    def proven(self) -> bool:
        return self.valid > 0 and not self.lost and not self.missed and not self.error and not self.refused

    def doc(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "compiles_before": self.compiles_before,
            "compile_seconds_before": round(self.seconds_before, 4),
            "compiles_after": self.compiles_after,
            "compile_seconds_after": round(self.seconds_after, 4),
            "valid_instances_kept": self.valid,
            "valid_instances_lost": self.lost[:SHOWN],
            "invalid_instances_caught": self.caught,
            "invalid_instances_missed": self.missed[:SHOWN],
            "variants": self.variants,
            "variants_checked": self.variants_checked,
            "error": self.error or None,
            "refused": self.refused or None,
            "proven": self.proven,
        }


def spread(count: int, limit: int) -> set[int]:
    """`limit` indices of `count`, evenly spread from the first to the last (all when fewer)."""
    if count <= limit:
        return set(range(count))
    if limit <= 1:
        return {0}
    return {round(i * (count - 1) / (limit - 1)) for i in range(limit)}


def prove(
    plan: FamilyPlan, engine: ProofEngine, requests: Sequence[int], seed: int = 29,
    max_variants: int = MAX_VARIANTS,
) -> FixProof:  # fmt: skip
    """`requests`: how many requests sent each variant (in `plan.variants` order). At most
    `max_variants` variants, spread over the log's order, are compiled and their instances checked
    (the variants of one family differ where the same pointers vary); the compile counts are every
    variant's, their seconds the checked ones' scaled up."""
    rng = random.Random(seed)
    proof = FixProof(f"{engine.name} {engine.version}", variants=len(plan.variants))
    checked = spread(len(plan.variants), max_variants)
    proof.variants_checked = len(checked)
    moved = [(m.pointer, m.keyword) for m in plan.merged.moved]
    total = max(1, sum(requests))
    try:
        static = engine.compile(plan.static_text)
    except Exception as err:
        try:
            engine.compile(json.dumps(plan.variants[0]))
        except Exception as own:  # the engine refuses what the service sends today as well
            proof.refused = f"{engine.name} refuses the schema as sent: {_reason(own)}"
            return proof
        proof.error = f"the static schema does not compile: {_reason(err)}"
        return proof
    proof.compiles_after = 1 if engine.caches else total
    proof.seconds_after = sum(engine.request_compiles([plan.static_text] * total))
    timed = 0  # compiles of the checked variants, whose seconds stand for every variant's
    for index, member in enumerate(plan.variants):
        sent = 1 if engine.caches else max(1, requests[index])  # the requests that compile it
        proof.compiles_before += sent
        if index not in checked:
            continue
        try:
            compiled = engine.compile(json.dumps(member))
        except Exception as err:
            proof.error = f"variant {index} does not compile: {_reason(err)}"
            return proof
        timed += sent
        proof.seconds_before += compiled.seconds * sent
        validator = Validator(member)
        for out, instance in _valid_instances(member, compiled, engine, validator, rng):
            if not engine.accepts(static, out):
                proof.lost.append(f"variant {index}: the static grammar rejects {out[:200]}")
            elif problems := check(instance, member, moved):
                proof.lost.append(f"variant {index}: the check rejects {out[:200]}: {problems[0]}")
            else:
                proof.valid += 1
        for _ in range(SAMPLES):
            made = engine.sample(static, rng)
            if made is None or engine.accepts(compiled, made):
                continue
            try:
                instance = json.loads(made)
            except ValueError:
                continue
            if check(instance, member, moved):
                proof.caught += 1
            elif validator.violations(instance):
                proof.missed.append(f"variant {index}: the check lets through {made[:200]}")
    if timed < proof.compiles_before:  # the checked variants' compiles, scaled to every variant's
        proof.seconds_before *= proof.compiles_before / max(1, timed)
    return proof


def _reason(err: Exception) -> str:
    return str(err).splitlines()[0][:300] if str(err) else type(err).__name__


def _valid_instances(member: Any, compiled: CompiledGrammar, engine: ProofEngine, validator: Validator,
                     rng: random.Random) -> list[tuple[str, Any]]:  # fmt: skip
    """(text, value) pairs the member accepts: the texts its grammar emitted, as emitted (a number
    too large for a float is still valid JSON text), and exemplars written as JSON that its grammar
    accepts (what the engine already refuses under the member, a fix cannot lose)."""
    found: dict[str, tuple[str, Any]] = {}
    for branch in range(BRANCHES):
        try:
            instance = candidates.exemplar(member, branch)
            text = json.dumps(instance, allow_nan=False)
        except (RecursionError, ValueError, TypeError):
            continue
        if engine.accepts(compiled, text):  # one the member's own grammar already rejects is no loss
            found.setdefault(text, (text, instance))
    for _ in range(SAMPLES):
        made = engine.sample(compiled, rng)
        if made is not None:
            try:
                found.setdefault(made, (made, json.loads(made)))
            except ValueError:
                continue
    return [pair for pair in found.values() if not validator.violations(pair[1])]
