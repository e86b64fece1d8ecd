"""`gdx lint`'s configuration file: `[tool.gdx.lint]` in pyproject.toml or `lint:` in .gdx.yaml.

Found upward from the current folder (the first folder with either file that has the section), or
named with `--config PATH`; flags given on the command line win. Keys:
- `engines`: the `--engine` values;
- the thresholds, under the daemon's `--lint.*` names without the prefix (`depth`, `max-items`,
  `enum-size`...), so CI and the daemon judge alike (the chart can render the daemon's from the
  same file);
- `select` / `ignore`: rules to report (default all) and rules never to report;
- `per-path-ignores`: {glob: [rules]} for findings in matching files;
- `exceptions`: reviewed findings, each `{path (a glob), pointer, rule, reason}` (reason required);
  one that matches no finding is reported as stale, as ruff reports an unused `noqa`.
A key that is not one of these, a missing reason, a rule that does not exist or a glob that cannot
match is a `ConfigError` naming the file and the key.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from exporter.analysis.lint import RULES
from exporter.kernel import lint_options, options

PYPROJECT = "pyproject.toml"
YAML_FILE = ".gdx.yaml"
REJECTED_RULE = "request_rejected"
KNOWN_RULES = frozenset((*RULES, REJECTED_RULE))
THRESHOLDS = {f.metadata["flag"].removeprefix("lint."): f.name for f in lint_options.LINT_OPTIONS}
KEYS = frozenset({"engines", "select", "ignore", "per-path-ignores", "exceptions", *THRESHOLDS})
EXCEPTION_KEYS = frozenset({"path", "pointer", "rule", "reason"})


class LintConfigError(ValueError):
    """A configuration `gdx lint` cannot use: exit 2 with the file and the key."""

    def __init__(self, path: str, key: str, problem: str) -> None:
        super().__init__(f"{path}: {key}: {problem}")


@dataclass(frozen=True)
class Reviewed:
    path: str
    pointer: str
    rule: str
    reason: str

    def matches(self, file: str, pointer: str, rule: str) -> bool:
        return rule == self.rule and pointer == self.pointer and _glob(file, self.path)


@dataclass(frozen=True)
class LintConfig:
    path: str = ""  # the file it was read from; "" for none
    engines: tuple[str, ...] = ()
    thresholds: Mapping[str, Any] = field(default_factory=dict)  # LINT_OPTIONS name -> raw value
    select: frozenset[str] = frozenset()  # empty: every rule
    ignore: frozenset[str] = frozenset()
    per_path_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    exceptions: tuple[Reviewed, ...] = ()

    def reported(self, rule: str, file: str) -> bool:
        """Whether a finding of `rule` in `file` is reported at all (select, ignore, per-path ignores)."""
        if self.select and rule not in self.select:
            return False
        if rule in self.ignore:
            return False
        return not any(rule in rules and _glob(file, glob) for glob, rules in self.per_path_ignores)


def _glob(file: str, pattern: str) -> bool:
    """A path glob as ruff's per-file ignores read it: against the path as given and its POSIX form."""
    posix = Path(file).as_posix()
    return fnmatch.fnmatchcase(posix, pattern) or fnmatch.fnmatchcase(posix.removeprefix("./"), pattern)


def find(start: Path) -> Path | None:
    """The nearest pyproject.toml with [tool.gdx.lint] or .gdx.yaml with `lint:`, from `start` up."""
    for folder in (start, *start.parents):
        yaml_file = folder / YAML_FILE
        if yaml_file.is_file():
            return yaml_file
        pyproject = folder / PYPROJECT
        if pyproject.is_file():
            try:
                doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue
            if isinstance(doc.get("tool", {}).get("gdx", {}).get("lint"), dict):
                return pyproject
    return None


def load(path: Path) -> LintConfig:
    """The file's lint section, checked; LintConfigError on anything it cannot use."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise LintConfigError(name, "<file>", str(err)) from None
    if path.name.endswith((".yaml", ".yml")):
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError as err:
            raise LintConfigError(name, "<file>", f"not YAML: {err}") from None
        section = doc.get("lint", {}) if isinstance(doc, dict) else None
        prefix = "lint"
    else:
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise LintConfigError(name, "<file>", f"not TOML: {err}") from None
        section = doc.get("tool", {}).get("gdx", {}).get("lint", {})
        prefix = "tool.gdx.lint"
    if not isinstance(section, dict):
        raise LintConfigError(name, prefix, "not a table")
    return parse(section, name, prefix)


def parse(section: Mapping[str, Any], name: str, prefix: str) -> LintConfig:
    for key in section:
        if key not in KEYS:
            raise LintConfigError(name, f"{prefix}.{key}", f"unknown key (known: {', '.join(sorted(KEYS))})")
    thresholds: dict[str, Any] = {}
    for key, dest in THRESHOLDS.items():
        if key in section:
            value = section[key]
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise LintConfigError(name, f"{prefix}.{key}", "a number")
            try:
                lint_options.lint_thresholds_from({dest: str(value)})
            except options.ConfigError as err:
                raise LintConfigError(name, f"{prefix}.{key}", str(err)) from None
            thresholds[dest] = str(value)
    return LintConfig(
        path=name,
        engines=tuple(_strings(section.get("engines", []), name, f"{prefix}.engines")),
        thresholds=thresholds,
        select=_rules(section.get("select", []), name, f"{prefix}.select"),
        ignore=_rules(section.get("ignore", []), name, f"{prefix}.ignore"),
        per_path_ignores=_per_path(section.get("per-path-ignores", {}), name, f"{prefix}.per-path-ignores"),
        exceptions=_exceptions(section.get("exceptions", []), name, f"{prefix}.exceptions"),
    )


def _strings(value: Any, name: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LintConfigError(name, key, "a list of strings")
    return list(value)


def _rules(value: Any, name: str, key: str) -> frozenset[str]:
    rules = _strings(value, name, key)
    unknown = sorted(set(rules) - KNOWN_RULES)
    if unknown:
        raise LintConfigError(name, key, f"no such rule: {', '.join(unknown)}")
    return frozenset(rules)


def _valid_glob(pattern: Any, name: str, key: str) -> str:
    if not isinstance(pattern, str) or not pattern or pattern.startswith("/") or "\x00" in pattern:
        raise LintConfigError(name, key, f"{pattern!r} is not a relative path glob")
    if pattern.count("[") != pattern.count("]"):
        raise LintConfigError(name, key, f"{pattern!r}: unbalanced brackets")
    return pattern


def _per_path(value: Any, name: str, key: str) -> tuple[tuple[str, frozenset[str]], ...]:
    if not isinstance(value, Mapping):
        raise LintConfigError(name, key, "a table of glob = [rules]")
    return tuple(
        (_valid_glob(glob, name, f"{key}.{glob}"), _rules(rules, name, f"{key}.{glob}"))
        for glob, rules in value.items()
    )


def _exceptions(value: Any, name: str, key: str) -> tuple[Reviewed, ...]:
    if not isinstance(value, list):
        raise LintConfigError(name, key, "a list of tables")
    out = []
    for i, item in enumerate(value):
        here = f"{key}[{i}]"
        if not isinstance(item, Mapping):
            raise LintConfigError(name, here, "a table with path, pointer, rule and reason")
        for extra in set(item) - EXCEPTION_KEYS:
            raise LintConfigError(name, f"{here}.{extra}", "unknown key (known: path, pointer, rule, reason)")
        for required in ("path", "rule", "reason"):
            if not isinstance(item.get(required), str) or not item[required].strip():
                raise LintConfigError(name, f"{here}.{required}", "required: a non-empty string")
        pointer = item.get("pointer", "")
        if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
            raise LintConfigError(name, f"{here}.pointer", "a JSON pointer ('' or starting with '/')")
        (rule,) = _rules([item["rule"]], name, f"{here}.rule")
        out.append(Reviewed(_valid_glob(item["path"], name, f"{here}.path"), pointer, rule, item["reason"]))
    return tuple(out)
