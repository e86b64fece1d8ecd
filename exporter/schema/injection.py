"""`dynamic_schema`: the one finding for a family of specs injected per request, decided here only.

The daemon calls it with a family's traffic in its window (compile calls, distinct variants, hits,
compile seconds); `gdx lint` with the lines of a request log (and the seconds it measured with
`--tokenizer`). What matters is reuse, not variety: a classifier service with ten static label sets,
each sent many times, has ten variants and a warm cache; a service that puts a timestamp into every
schema has as many variants as requests and compiles every one. So the rule fires when the variants
are used fewer than `Thresholds.dynamic_reuse` times each on average, and its severity is what the
compiles cost (`Thresholds.dynamic_seconds`). A few static variants each reused are at most an info.
A window is incomplete where a log is not: a static set's first requests are all new variants, so the
daemon warns only once new variants have kept arriving for `Thresholds.dynamic_span` (a static set
stops producing them; an injection never does).
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.schema.family import Variation
from exporter.schema.findings import Finding, Thresholds

RULE = "dynamic_schema"
MIN_VARIANTS = 3  # two variants are a version change as often as an injection
FIX = (
    "keep one static schema: move what varies out of it (allowed values into the prompt and a check "
    "after decoding, timestamps and ids out of descriptions, one tool union for all tenants)"
)


# When nothing but order varies: the members never change, so sorting at the source is the whole fix.
FIX_ORDER = (
    "send the members in one canonical order (sort the enum, `required` and the tools where the service "
    "builds them, e.g. from a set or a dict): the same members then make one string that compiles once"
)


# When only definition names vary: the same models under per-request names.
FIX_NAMES = (
    "keep model names static (no tenant or id in the class name, e.g. pydantic's create_model name): "
    "the structure never changes, only the names do, and each name set compiles from scratch"
)


@dataclass(frozen=True)
class Usage:
    """A family's traffic: in the daemon's window, or in a request log."""

    requests: int  # compile calls (daemon) or lines (log)
    variants: int  # distinct specs among them
    hits: int | None = None  # grammar-cache hits among the calls; None where unknown (a log)
    seconds: float | None = None  # compile seconds they cost; None where unknown (no --tokenizer)
    span: float | None = None  # seconds over which new variants arrived (daemon); None for a log

    @property
    def reuse(self) -> float:
        return self.requests / self.variants if self.variants else 0.0


def dynamic_schema(variation: Variation, usage: Usage, limits: Thresholds) -> list[Finding]:
    """At most one finding for the family, at the pointer of what varies most."""
    if usage.variants < 2 or not variation.parts():
        return []
    pointer, _, _ = variation.parts()[0]
    varies = "; ".join(variation.lines()[:3])
    traffic = f"{usage.variants} variants in {usage.requests} requests ({usage.reuse:.1f} per variant"
    if usage.hits is not None and usage.requests:
        traffic += f", {usage.hits / usage.requests:.0%} cache hits"
    traffic += ")"
    cost = "" if usage.seconds is None else f", {usage.seconds:.2f} s of compiles"
    if usage.span is not None and usage.span < limits.dynamic_span and usage.reuse < limits.dynamic_reuse:
        return [
            Finding(
                RULE, "info", pointer,
                f"{traffic}{cost}: new variants for {usage.span:.0f} s so far (a warning from "
                f"{limits.dynamic_span:g} s: a static set's first requests are new variants too); "
                f"varies: {varies}",
                "wait and see: an injection keeps producing new variants",
            )
        ]  # fmt: skip
    if usage.reuse >= limits.dynamic_reuse or usage.variants < MIN_VARIANTS:
        return [
            Finding(
                RULE, "info", pointer,
                f"{traffic}{cost}: static variants, each reused; varies: {varies}",
                "fine while the set of variants stays small; one schema would compile once",
            )
        ]  # fmt: skip
    if usage.seconds is None:
        severity, costs = "warning", "; run gdx lint --tokenizer to measure what it costs"
    elif usage.seconds >= limits.dynamic_seconds:
        severity, costs = "error", f"{cost} (error from {limits.dynamic_seconds:g} s)"
    else:
        severity, costs = "warning", f"{cost} (error from {limits.dynamic_seconds:g} s)"
    if variation.names_only:
        what = "the same models under new names per request, every name set compiles from scratch"
        return [Finding(RULE, severity, pointer, f"{traffic}: {what}{costs}; varies: {varies}", FIX_NAMES)]
    if variation.order_only:
        what = "the same members in a new order per request, every order compiles from scratch"
        return [Finding(RULE, severity, pointer, f"{traffic}: {what}{costs}; varies: {varies}", FIX_ORDER)]
    return [
        Finding(
            RULE, severity, pointer,
            f"{traffic}: injected per request, every variant compiles from scratch{costs}; varies: {varies}",
            FIX,
        )
    ]  # fmt: skip
