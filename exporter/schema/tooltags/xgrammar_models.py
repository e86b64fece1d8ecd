"""Placeholder: builders land here."""

from __future__ import annotations

from exporter.schema.tooltags.tools import Builder

BUILDERS: dict[str, Builder] = {}
