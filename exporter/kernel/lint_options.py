"""The `lint.*` options: `gdx serve`, `gdx lint` and `gdx fix` take exactly these (the daemon as flags,
environment and YAML, lint and fix as flags), so their findings agree; the rules' limits built from them
(`LintOptions.thresholds`). The defaults live with the rules (exporter/analysis/lint.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter.kernel.options import (
    ArgumentAdder,
    add_flag,
    option,
    parse_duration,
    parse_option,
    parse_positive_float,
    parse_positive_int,
)
from exporter.schema.findings import Thresholds
from exporter.schema.walk import Budget

_DEFAULTS = Thresholds()


@dataclass(frozen=True)
class LintOptions:
    """The `lint.*` options' values. Field metadata is their part of the option table."""

    lint_depth: int = option(
        _DEFAULTS.depth,
        "lint.depth",
        parse_positive_int,
        "Object/array nesting levels allowed.",
        metavar="N",
    )
    lint_max_items: int = option(
        _DEFAULTS.max_items,
        "lint.max-items",
        parse_positive_int,
        "minItems/maxItems allowed in the grammar.",
        metavar="N",
    )
    lint_union_depth: int = option(
        _DEFAULTS.union_depth,
        "lint.union-depth",
        parse_positive_int,
        "anyOf/oneOf nesting allowed.",
        metavar="N",
    )
    lint_union_width: int = option(
        _DEFAULTS.union_width,
        "lint.union-width",
        parse_positive_int,
        "Branches per anyOf/oneOf allowed.",
        metavar="N",
    )
    lint_enum_size: int = option(
        _DEFAULTS.enum_size, "lint.enum-size", parse_positive_int, "Enum members allowed.", metavar="N"
    )
    lint_quantifier: int = option(
        _DEFAULTS.quantifier,
        "lint.quantifier",
        parse_positive_int,
        "Largest regex {m,n} upper bound allowed.",
        metavar="N",
    )
    lint_budget: float = option(
        _DEFAULTS.budget.max_seconds,
        "lint.budget",
        parse_duration,
        "Analysis CPU time per schema (the analysing thread's, so a busy machine reaches the same verdict as"
        " an idle one); past it the schema gets a too_complex finding.",
        metavar="DURATION",
    )
    lint_budget_nodes: int = option(
        _DEFAULTS.budget.max_nodes,
        "lint.budget-nodes",
        parse_positive_int,
        "Subschemas visited per schema; past it the schema gets a too_complex finding. Unlike the time"
        " budget, it stops at exactly the same place on every machine.",
        metavar="N",
    )
    lint_dynamic_reuse: float = option(
        _DEFAULTS.dynamic_reuse,
        "lint.dynamic-reuse",
        parse_positive_float,
        "dynamic_schema: a family whose variants are used fewer times than this on average (requests per"
        " variant) is injected per request. Static variants each reused stay quiet.",
        metavar="X",
    )
    lint_dynamic_seconds: float = option(
        _DEFAULTS.dynamic_seconds,
        "lint.dynamic-seconds",
        parse_duration,
        "dynamic_schema is an error once the family's compiles cost this much (in the window; in gdx lint,"
        " measured with --tokenizer); a warning below.",
        metavar="DURATION",
    )
    lint_dynamic_span: float = option(
        _DEFAULTS.dynamic_span,
        "lint.dynamic-span",
        parse_duration,
        "dynamic_schema in the daemon: warn only once new variants of the family have kept arriving this"
        " long (a static set's first requests are all new variants too); a request log has no clock.",
        metavar="DURATION",
    )

    def thresholds(self) -> Thresholds:
        """The lint rules' limits."""
        return Thresholds(
            depth=self.lint_depth,
            max_items=self.lint_max_items,
            union_depth=self.lint_union_depth,
            union_width=self.lint_union_width,
            enum_size=self.lint_enum_size,
            quantifier=self.lint_quantifier,
            budget=Budget(max_nodes=self.lint_budget_nodes, max_seconds=self.lint_budget),
            dynamic_reuse=self.lint_dynamic_reuse,
            dynamic_seconds=self.lint_dynamic_seconds,
            dynamic_span=self.lint_dynamic_span,
        )


LINT_OPTIONS: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(LintOptions)
_BY_NAME = {f.name: f for f in LINT_OPTIONS}


def lint_field(name: str) -> Any:
    """A fresh copy of one `lint.*` option's field, for the daemon's `Config` to hold in its own table."""
    known = _BY_NAME[name]
    return field(default=known.default, metadata=known.metadata)


def add_lint_flags(parser: ArgumentAdder) -> None:
    """The `lint.*` options as `gdx lint` flags: same names, defaults, parsers and help as `gdx serve`.

    Flags only: `gdx lint` in CI should do what its command line says, not what the daemon's
    `GDX_LINT_*` environment on the same machine says."""
    for f in LINT_OPTIONS:
        add_flag(parser, f, show_env=False)


def lint_thresholds_from(flags: Mapping[str, Any]) -> Thresholds:
    """`gdx lint`'s limits: the given `lint.*` flags over the defaults, as the daemon builds its own.
    Raises `ConfigError` naming the flag."""
    values = {
        f.name: parse_option(f, flags[f.name], "--" + f.metadata["flag"])
        for f in LINT_OPTIONS
        if f.name in flags
    }
    return LintOptions(**values).thresholds()
