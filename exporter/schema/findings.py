"""The words every rule speaks: a finding (rule, severity, JSON pointer, message, fix), the proof
`gdx lint --prove` attaches to one, and the thresholds where the rules start to fire. Shared by the
schema rules here, the engines' rules (exporter/engines/) and every program that reports them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from exporter.schema.walk import Budget, Node

SEVERITIES = ("error", "warning", "info")
MAX_INPUT_CHARS = 16 * 2**20


@dataclass(frozen=True)
class Thresholds:
    """Where each rule starts to fire. Depth 3, 20 items and unions 3 deep are the limits taken from the
    per-tenant enum incident this project started from (its invoice schema, the one `make demo` sends,
    nests 3 levels); the other defaults were measured."""

    depth: int = 3
    max_items: int = 20
    union_depth: int = 3
    union_width: int = 8
    enum_size: int = 64
    quantifier: int = 32  # {8,64} compiled in 62-77 ms over the Llama 3 vocabulary, {8,640} in 300 ms
    budget: Budget = field(default_factory=Budget)
    # dynamic_schema (exporter/schema/injection.py): a family whose variants are used fewer times than
    # this on average is injected per request; an error once its compiles cost this many seconds.
    dynamic_reuse: float = 2.0
    dynamic_seconds: float = 1.0
    # In the daemon's window, new variants must have kept arriving this long before it warns: a static
    # set's first requests are all new variants too.
    dynamic_span: float = 30.0


@dataclass(frozen=True)
class Proof:
    """What `gdx lint --prove` found for a finding: an instance the engine accepts token by token and
    the validator rejects here (proven; for `xgrammar_overenforced` the other way round: the validator
    accepts it and the engine refuses it), or why none was found (unproven)."""

    status: str  # "proven" or "unproven"
    engine: str  # e.g. "xgrammar 0.2.9"
    instance: str = ""  # the counterexample, exactly as fed to the engine
    violation: str = ""  # the validator's error at the finding's pointer
    tokens: int = 0
    how: str = ""  # "mutation", "sampling", or why unproven
    seconds: float = 0.0


@dataclass(frozen=True, order=True)
class Finding:
    rule: str
    severity: str
    pointer: str
    message: str
    fix: str
    keyword: str = ""  # the keyword a backend rule is about (`format email`, `minLength`); "" for others
    proof: Proof | None = field(default=None, compare=False)

    def doc(self) -> dict[str, Any]:
        """As `asdict` gives it, without `proof` when there is none (built directly: a run over a
        benchmark has tens of thousands of findings, and asdict copies each field deeply)."""
        out: dict[str, Any] = {
            "rule": self.rule, "severity": self.severity, "pointer": self.pointer, "message": self.message,
            "fix": self.fix, "keyword": self.keyword,
        }  # fmt: skip
        if self.proof is not None:
            out["proof"] = asdict(self.proof)
        return out


Rule = Callable[[Node, Thresholds], Iterable[Finding]]


def count(findings: Iterable[Finding]) -> dict[tuple[str, str], int]:
    """Places each (rule, severity) fires: the value of `schema_lint_findings`."""
    out: dict[tuple[str, str], int] = {}
    for finding in findings:
        key = (finding.rule, finding.severity)
        out[key] = out.get(key, 0) + 1
    return out
