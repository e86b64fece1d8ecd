"""The documentation holds together: every relative link in the repository's Markdown (README, docs/,
runbooks, deploy/ and test-data notes) points at a file that exists and, with `#anchor`, at a heading
of it; every `docs/...md#anchor` the code, alerts, dashboards and manifests cite exists; docs/README.md
indexes every page; each page says first who it is for; no page outgrows its budget."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from tools.harness import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*$", re.M)
DOCS = ROOT / "docs"
README_BUDGET = 12 * 1024
PAGE_BUDGET = 25 * 1024


def pages() -> list[Path]:
    return [
        ROOT / "README.md",
        *(p for d in ("docs", "alerts", "deploy", "tests") for p in sorted((ROOT / d).rglob("*.md"))),
    ]


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def test_relative_links_resolve() -> None:
    assert len(pages()) > 20
    broken = []
    for page in pages():
        for match in LINK.finditer(FENCE.sub("", page.read_text(encoding="utf-8"))):
            target = match.group(1)
            if re.match(r"^[a-z]+:", target):
                continue  # a URL
            path, _, anchor = target.partition("#")
            where = (page.parent / path) if path else page
            if not where.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{page.relative_to(ROOT)} -> {target} (no such heading)")
    assert broken == []


def test_the_docs_the_code_cites_exist() -> None:
    """`docs/x.md` or `docs/x.md#anchor` in code, tests, alerts, dashboards, manifests and scripts."""
    cited = re.compile(r"\bdocs/([\w./-]+\.md)(?:#([\w-]+))?")
    sources = [ROOT / "Makefile"] + [
        p
        for d in ("exporter", "tools", "tests", "alerts", "dashboards", "deploy", "scripts")
        for p in sorted((ROOT / d).rglob("*"))
        if p.is_file()
        and p.suffix in (".py", ".yaml", ".yml", ".json", ".sh", ".txt", ".tpl", ".md")
        and "support/data" not in p.as_posix()
        and p != Path(__file__)
    ]
    broken = []
    for source in sources:
        for match in cited.finditer(source.read_text(encoding="utf-8", errors="replace")):
            page, anchor = DOCS / match.group(1), match.group(2)
            if not page.exists() or (anchor and anchor not in anchors(page)):
                broken.append(f"{source.relative_to(ROOT)}: {match.group(0)}")
    assert broken == []


def test_the_index_links_every_page() -> None:
    index = DOCS / "README.md"
    linked = {
        (index.parent / m.group(1).split("#")[0]).resolve()
        for m in LINK.finditer(index.read_text(encoding="utf-8"))
        if not re.match(r"^[a-z]+:", m.group(1))
    }
    missing = [str(p.relative_to(ROOT)) for p in doc_pages() if p != index and p.resolve() not in linked]
    assert missing == [], "docs/README.md does not link these pages"


def test_each_page_says_first_who_it_is_for() -> None:
    """The first line after a page's title says who it is for and what it answers."""
    wrong = []
    for page in doc_pages():
        lines = [line for line in page.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not (lines[0].startswith("# ") and lines[1].startswith("For ")):
            wrong.append(str(page.relative_to(ROOT)))
    assert wrong == []


def test_no_page_outgrows_its_budget() -> None:
    assert len((ROOT / "README.md").read_bytes()) < README_BUDGET
    large = {str(p.relative_to(ROOT)): n for p in doc_pages() if (n := len(p.read_bytes())) > PAGE_BUDGET}
    assert large == {}
