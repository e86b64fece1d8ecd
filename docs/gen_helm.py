"""docs/reference/helm-values.md: every value of the chart (deploy/helm/guided-decoding-exporter/
values.yaml), its default and what its comments say. A comment block above a key, or a comment at the
end of its line, describes it; a blank line ends a block; the block above the first key is the intro."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from gen_common import REFERENCE, ROOT, cell, header, row, table

VALUES = ROOT / "deploy" / "helm" / "guided-decoding-exporter" / "values.yaml"
PAGE = REFERENCE / "helm-values.md"
KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w.-]*):(?P<rest>.*)$")
TRAILING = re.compile(r"\s+#\s?(?P<comment>.*)$")


def entries(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The intro's lines and (dotted key, description) for each key line, in the file's order."""
    intro: list[str] = []
    found: list[tuple[str, str]] = []
    pending: list[str] = []
    path: list[tuple[int, str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        if not stripped:
            if not found and not intro:
                intro = pending
            pending = []
            continue
        match = KEY.match(line)
        if not match:  # a list item or a continued value: part of the key above
            pending = []
            continue
        indent = len(match["indent"])
        path = [(i, k) for i, k in path if i < indent] + [(indent, match["key"])]
        trailing = TRAILING.search(match["rest"])
        said = [*pending, trailing["comment"]] if trailing else pending
        found.append((".".join(k for _, k in path), " ".join(said)))
        pending = []
    return intro, found


def default(values: dict[str, Any], dotted: str) -> str:
    value: Any = values
    for part in dotted.split("."):
        value = value[part]
    if isinstance(value, dict) and value:
        return ""  # a section: its keys follow
    return f"`{cell(json.dumps(value))}`"


def page() -> str:
    text = VALUES.read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    intro, found = entries(text)
    lines = header(
        "Helm values reference",
        "For operators installing the chart: every value, its default and what it does. The walkthrough is"
        " [install.md](../install.md); what the manifests set and why: [kubernetes.md](../kubernetes.md).",
        "docs/gen_helm.py",
        "the comments of `deploy/helm/guided-decoding-exporter/values.yaml`",
    )
    rows = [row(f"`{key}`", default(values, key), cell(said) or "-") for key, said in found]
    lines += [cell(" ".join(intro)), "", *table(("value", "default", "what it does"), rows), ""]
    return "\n".join(lines)


def pages() -> dict[Path, str]:
    return {PAGE: page()}
