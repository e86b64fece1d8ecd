"""What an engine's own metric page is, as each engine package declares it: the prefix its families
share (the daemon passes those through with pod labels and drops the rest) and where it serves the
Prometheus text format."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    prefix: str  # its families: those whose name starts with this
    path: str  # its default path
