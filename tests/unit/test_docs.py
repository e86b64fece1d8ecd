"""Every relative link in the repository's Markdown (README, docs/, runbooks, deploy/ and test-data
notes) points at a file that exists: pages move (docs/measurements/), links must follow."""

from __future__ import annotations

import re

from tools.harness import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def test_relative_links_resolve() -> None:
    pages = [
        ROOT / "README.md",
        *(p for d in ("docs", "alerts", "deploy", "tests") for p in (ROOT / d).rglob("*.md")),
    ]
    assert len(pages) > 20
    broken = []
    for page in pages:
        for match in LINK.finditer(FENCE.sub("", page.read_text(encoding="utf-8"))):
            target = match.group(1)
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []
