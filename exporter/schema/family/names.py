"""A readable name for an untitled spec, from its structure only (never a literal value)."""

from __future__ import annotations

import re
from typing import Any

from exporter.schema.family.model import HOSTILE, NAME_MAX, TYPES, UNIONS

_NAME_BAD = re.compile(r"[^A-Za-z0-9_.,+ -]+")


def _clean(text: str) -> str:
    return _NAME_BAD.sub("_", text).strip(" _")


def readable_name(value: Any) -> str:
    """A name for an untitled schema from its structure only: its first property names (required
    first, sorted) and how many more, or its union and width, or its `$ref` or type. Never a literal
    value (title, description, enum, const, default): those may be per-request and are not read."""
    try:
        return _clean(_name(value))[:NAME_MAX] or "schema"
    except HOSTILE:
        return "schema"


def _name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean schema"
    if isinstance(value, list):
        return f"json array, {len(value)} items"
    if not isinstance(value, dict):
        return "json " + type(value).__name__
    props = value.get("properties")
    if isinstance(props, dict) and props:
        required = value.get("required")
        needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        names = sorted(n for n in props if n in needed) + sorted(n for n in props if n not in needed)
        shown: list[str] = []
        for n in names:
            clean = _clean(str(n))[:24]
            if not clean:
                continue
            if len(shown) == 3 or sum(len(s) + 2 for s in shown) + len(clean) > NAME_MAX - 8:
                break
            shown.append(clean)
        rest = len(names) - len(shown)
        return ", ".join(shown + ([f"+{rest}"] if rest else []))
    for keyword in (*UNIONS, "allOf"):
        branches = value.get(keyword)
        if isinstance(branches, list):
            return f"{keyword}, {len(branches)} branches"
    ref = value.get("$ref")
    if isinstance(ref, str):
        return "ref " + ref.rsplit("/", 1)[-1][:40]
    kind = value.get("type")
    if isinstance(kind, str):
        items = value.get("items")
        if kind == "array" and isinstance(items, dict) and items.get("type") in TYPES:
            return f"array of {items['type']}"
        return kind if kind in TYPES else "schema"
    return "schema" if value else "empty schema"


SEPARATORS = "_-. "
MIN_SHARED = 3


def _ends_word(title: str, n: int) -> bool:
    """Whether a word of `title` ends before position n: its end, a separator, or a capital after a
    small letter (`Invoice|V2`). `Order_acme` and `Order_acmecorp` share `Order`, not `Order_acme`."""
    if n >= len(title) or title[n] in SEPARATORS:
        return True
    return title[n].isupper() and title[n - 1].islower()


def shared_title(a: str, b: str) -> str:
    """What two variants' titles share, for the family's name: the common start, cut at a word
    boundary ("LineItem_acme", "LineItem_globex" -> "LineItem"), or "" when too little is shared. A
    name made per request (a tenant in a model's name) then never names the whole family."""
    if a == b:
        return a
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    common = a[:n]
    if common and common[-1] not in SEPARATORS and not (_ends_word(a, n) and _ends_word(b, n)):
        cut = max(common.rfind(s) for s in SEPARATORS)
        common = common[: cut + 1] if cut >= 0 else ""
    common = common.rstrip(SEPARATORS)
    return common if len(common) >= MIN_SHARED else ""


def family_title(titles: list[str]) -> str:
    """What every variant's title shares ("" when any has none, or they share too little)."""
    if not titles or not all(titles):
        return ""
    out = titles[0]
    for title in titles[1:]:
        out = shared_title(out, title)
    return out
