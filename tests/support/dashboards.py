"""Reading the generated dashboard in tests: every panel, every query, the variables substituted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tools.harness import ROOT

DASHBOARD = ROOT / "dashboards" / "guided-decoding.json"
# What a user's "All" selection sends, and Grafana's rate interval for a 1 s scrape.
SUBSTITUTIONS = {"$instance": ".*", "$pod": ".*", "$schema_hash": ".*", "$__rate_interval": "30s"}


def load() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def panels(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in doc["panels"]:
        if panel["type"] != "row":
            yield panel


def substitute(expr: str, **values: str) -> str:
    """`expr` as Grafana sends it: "All" for every variable unless `values` names one (instance=...)."""
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, values.get(variable.removeprefix("$"), value))
    return expr


def queries(doc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, query with the variables substituted)."""
    for panel in panels(doc):
        for target in panel["targets"]:
            yield panel["title"], substitute(target["expr"])


def variable(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [v for v in doc["templating"]["list"] if v["name"] == name]
    (one,) = found
    return one


def titled(doc: dict[str, Any], title: str) -> dict[str, Any]:
    """The one panel whose title starts with `title`."""
    (found,) = [p for p in panels(doc) if p["title"].startswith(title)]
    return found
