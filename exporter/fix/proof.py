"""The proof of a family's fix on the real engine: one compile instead of one per variant, nothing
valid lost, nothing invalid let through both the static grammar and the check after decoding.

For each variant (a member of the family), with xgrammar over the tokenizer `gdx lint --tokenizer`
uses (exporter/lint/prove/engine.py):
- valid instances: texts the member's own grammar emits (random walks) and an instance with every
  property filled per union branch, kept when the jsonschema validator accepts them under the member;
  each must be accepted by the static grammar, token by token, and pass `check` against the member;
- instances the static grammar emits that the member's grammar rejects: `check` against the member
  must reject each.
And the compiles: every member request sent as itself (one cold compile per distinct variant) beside
every member request sent as the static schema through one caching compiler (one compile, then hits).
A family whose proof finds a lost instance or a missed one is not fixed.
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
from exporter.lint.prove.engine import XgrammarEngine
from exporter.lint.prove.validator import Validator

SAMPLES = 6  # random walks per member, each way
BRANCHES = 3  # exemplars per member: union branch 0, 1, 2
SHOWN = 3  # examples kept of what went wrong


@dataclass
class FixProof:
    engine: str
    compiles_before: int = 0
    seconds_before: float = 0.0  # the members' cold compiles, summed
    seconds_after: float = 0.0  # every request sent as the static schema through one caching compiler
    valid: int = 0  # member instances the static grammar accepts and the check passes
    lost: list[str] = field(default_factory=list)
    caught: int = 0  # static-grammar instances a member's grammar rejects, and the check rejects
    missed: list[str] = field(default_factory=list)

    @property
    def proven(self) -> bool:
        return self.valid > 0 and not self.lost and not self.missed

    def doc(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "compiles_before": self.compiles_before,
            "compile_seconds_before": round(self.seconds_before, 4),
            "compiles_after": 1,
            "compile_seconds_after": round(self.seconds_after, 4),
            "valid_instances_kept": self.valid,
            "valid_instances_lost": self.lost[:SHOWN],
            "invalid_instances_caught": self.caught,
            "invalid_instances_missed": self.missed[:SHOWN],
            "proven": self.proven,
        }


def prove(plan: FamilyPlan, engine: XgrammarEngine, requests: Sequence[int], seed: int = 29) -> FixProof:
    """`requests`: how many requests sent each variant (in `plan.variants` order)."""
    rng = random.Random(seed)
    proof = FixProof(f"xgrammar {engine.version}")
    moved = [(m.pointer, m.keyword) for m in plan.merged.moved]
    static = engine.compile(plan.static_text)
    sent = [plan.static_text] * max(1, sum(requests))
    proof.seconds_after = sum(engine.cached_compiles(sent))
    for index, member in enumerate(plan.variants):
        text = json.dumps(member)
        compiled = engine.compile(text)
        proof.compiles_before += 1
        proof.seconds_before += compiled.seconds
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
    return proof


def _valid_instances(member: Any, compiled: Any, engine: XgrammarEngine, validator: Validator,
                     rng: random.Random) -> list[tuple[str, Any]]:  # fmt: skip
    """(text, value) pairs the member accepts: the texts its grammar emitted, as emitted (a number
    too large for a float is still valid JSON text), and exemplars written as JSON."""
    found: dict[str, tuple[str, Any]] = {}
    for branch in range(BRANCHES):
        try:
            instance = candidates.exemplar(member, branch)
            text = json.dumps(instance, allow_nan=False)
        except (RecursionError, ValueError, TypeError):
            continue
        found.setdefault(text, (text, instance))
    for _ in range(SAMPLES):
        made = engine.sample(compiled, rng)
        if made is not None:
            try:
                found.setdefault(made, (made, json.loads(made)))
            except ValueError:
                continue
    return [pair for pair in found.values() if not validator.violations(pair[1])]
