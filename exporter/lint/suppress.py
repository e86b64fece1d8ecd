"""What `gdx lint` leaves out of a report, and says it did: rules not selected or ignored (by path
too), reviewed exceptions, and a baseline's findings (by fingerprint, never by line).

The report keeps its shape: the findings left out are removed where they were, so the text, JSON and
SARIF outputs and the exit code all see the same findings. Exceptions that matched nothing are
returned as stale; a baseline is the fingerprints of `--write-baseline`'s run (exporter/lint/located.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from exporter.lint.lintconfig import LintConfig, Reviewed
from exporter.lint.locate import Locator
from exporter.lint.located import Located, located
from exporter.lint.report import Report
from exporter.lint.requests import Request

BASELINE_VERSION = 1


@dataclass(frozen=True)
class Filtered:
    report: Report
    ignored: int = 0  # select, ignore, per-path ignores
    excepted: int = 0  # reviewed exceptions
    baselined: int = 0
    stale: tuple[Reviewed, ...] = ()


def apply(
    report: Report,
    requests: Sequence[Request],
    settings: LintConfig,
    baseline: frozenset[str] = frozenset(),
    locator: Locator | None = None,
) -> Filtered:
    drop: set[int] = set()
    used: set[int] = set()
    ignored = excepted = baselined = 0
    if not (baseline or settings.exceptions or settings.per_path_ignores):
        # nothing here needs a finding's place: the rules alone decide (locating every finding of a
        # large input was 13 % of `gdx lint`'s time on the development half)
        for finding in report.findings():
            if not settings.reported(finding.rule, ""):
                ignored += 1
                drop.add(id(finding))
        return Filtered(_without(report, drop), ignored)
    base = Path(settings.path).resolve().parent if settings.path else None
    for item in located(report, requests, locator):
        finding, path = item.finding, _relative(item.location.path, base)
        if not settings.reported(finding.rule, path):
            ignored += 1
        elif (hit := _exception(settings, path, finding.pointer, finding.rule)) is not None:
            used.add(hit)
            excepted += 1
        elif item.fingerprint in baseline:
            baselined += 1
        else:
            continue
        drop.add(id(finding))
    stale = tuple(e for i, e in enumerate(settings.exceptions) if i not in used)
    return Filtered(_without(report, drop), ignored, excepted, baselined, stale)


def _relative(path: str, base: Path | None) -> str:
    """The finding's file as the configuration names files: relative to the folder it is in (as ruff
    reads per-file ignores), or as given where it is outside that folder."""
    if base is None:
        return path
    try:
        return Path(os.path.abspath(path)).relative_to(base).as_posix()
    except ValueError:
        return path


def _exception(settings: LintConfig, path: str, pointer: str, rule: str) -> int | None:
    return next((i for i, e in enumerate(settings.exceptions) if e.matches(path, pointer, rule)), None)


def _without(report: Report, drop: set[int]) -> Report:
    if not drop:
        return report
    families = tuple(
        dataclasses.replace(
            family,
            findings=tuple(f for f in family.findings if id(f) not in drop),
            schemas=tuple(
                dataclasses.replace(schema, findings=tuple(f for f in schema.findings if id(f) not in drop))
                for schema in family.schemas
            ),
        )
        for family in report.families
    )
    rejected = tuple(r for r in report.rejected if id(r.finding) not in drop)
    return dataclasses.replace(report, families=families, rejected=rejected)


def baseline_doc(found: Iterable[Located]) -> dict[str, object]:
    """What --write-baseline writes: each finding's fingerprint with what it was, for a reviewer."""
    entries = [
        {"fingerprint": item.fingerprint, "rule": item.finding.rule, "path": item.location.path,
         "pointer": item.finding.pointer}
        for item in found
    ]  # fmt: skip
    return {"version": BASELINE_VERSION, "tool": "gdx lint", "findings": entries}


class BaselineError(ValueError):
    pass


def read_baseline(path: str) -> frozenset[str]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise BaselineError(f"--baseline {path}: {err}") from None
    findings = doc.get("findings") if isinstance(doc, dict) else None
    if doc.get("version") != BASELINE_VERSION or not isinstance(findings, list):
        raise BaselineError(f"--baseline {path}: not a gdx lint baseline (version {BASELINE_VERSION})")
    prints = [f.get("fingerprint") for f in findings if isinstance(f, dict)]
    if not all(isinstance(p, str) for p in prints):
        raise BaselineError(f"--baseline {path}: a finding without a fingerprint")
    return frozenset(p for p in prints if isinstance(p, str))
