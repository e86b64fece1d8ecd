"""Family-level series from the real probe through the daemon's store and analysis (no socket):
the family at fault is named and ranked first, what varies is said, counters never go backwards,
and `dynamic_schema` weighs reuse, not variety."""

from __future__ import annotations

import json
import random
from typing import Any

from exporter.daemon.receiver.analysis import SchemaAnalysis
from exporter.daemon.receiver.metric_families import family_families
from exporter.daemon.receiver.store import ProbeStore, StoreView
from tests.support.probelink import Link


def invoice(tenant: int) -> dict[str, Any]:
    return {
        "title": "Invoice",
        "type": "object",
        "properties": {
            "vendor": {"type": "string"},
            "total": {"type": "number"},
            "cost_centre": {"enum": [f"CC-{tenant}-{i}" for i in range(4)]},
        },
        "required": ["vendor", "total", "cost_centre"],
    }


def tool(i: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "name": {"const": f"tool_{i}"},
            "arguments": {"type": "object", "properties": {f"a{i}": {"type": "string"}}},
        },
        "required": ["name", "arguments"],
    }


def static(i: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"field_{i}": {"type": "integer"}}, "required": [f"field_{i}"]}


def run(link: Link, store: ProbeStore, seconds: float = 10.0) -> StoreView:
    """`seconds` later: ship, analyse what arrived, settle the families (what a scrape's refresh does)."""
    link.now += seconds - 1
    link.ship()
    store.analysis.run(deadline=float("inf"))
    store.settle(link.now)
    return store.view(link.now)


def new_store(**kwargs: Any) -> ProbeStore:
    return ProbeStore(analysis=SchemaAnalysis(window=600.0), **kwargs)


def top(view: StoreView) -> str:
    return max(view.families.recent, key=lambda f: view.families.recent[f])


def test_injected_enum_family_ranks_first_above_a_costlier_static_schema() -> None:
    """The demo's phase 2: one static schema costs 0.2 s per compile, each injected variant 0.045 s;
    per hash the static one ranks first, per family the injection does."""
    store = new_store()
    link = Link(store)
    heavy = json.dumps(static(99))
    for round_ in range(6):
        link.compile(heavy, 0.0001 if round_ else 0.2, hit=round_ > 0)
        for j in range(4):
            link.compile(json.dumps(invoice(round_ * 4 + j)), 0.045)
        view = run(link, store)
    first_hash = max(view.recent, key=lambda h: view.recent[h])
    assert view.info[first_hash].title == ""  # per hash, the static schema ranks first
    family = top(view)
    report = view.family_analysis.reports[family]
    assert report.name == "Invoice" and report.kind == "schema"
    assert view.families.usage[family].variants == 24
    assert view.families.series[family].requests == 24
    assert abs(view.families.series[family].sum - 24 * 0.045) < 1e-6
    parts = report.variation.parts()
    # compared: the 23 variants that joined (a founder's positions are not kept: most never vary)
    assert parts[0] == ("/properties/cost_centre/enum", "literal", 23)
    assert report.findings == {("dynamic_schema", "error"): 1}  # 1.08 s of compiles >= 1 s


def test_a_per_request_item_count_is_one_family_with_its_bounds_named() -> None:
    """Exactly n items per request: 30 distinct hashes, one family, minItems/maxItems what varies."""
    store = new_store()
    link = Link(store)
    for round_ in range(5):  # 40 s of new variants: past dynamic_span, an injection, not a warm-up
        for j in range(6):
            n = round_ * 6 + j + 1
            items = {"type": "array", "items": {"type": "string"}, "minItems": n, "maxItems": n}
            schema = {"title": "Picks", "type": "object", "properties": {"items": items}}
            link.compile(json.dumps(schema), 0.05)
        view = run(link, store)
    family = top(view)
    report = view.family_analysis.reports[family]
    assert report.name == "Picks" and view.families.usage[family].variants == 30
    parts = report.variation.parts()
    assert {part[0] for part in parts} == {"/properties/items/minItems", "/properties/items/maxItems"}
    assert all(kind == "literal" and count == 29 for _, kind, count in parts)
    assert report.findings == {("dynamic_schema", "error"): 1}  # 1.5 s of compiles >= 1 s


def test_static_classifiers_each_reused_stay_quiet() -> None:
    """Ten label-set variants, each reused 9 times out of 10: at most an info, never a warning."""
    store = new_store()
    link = Link(store)
    specs = [
        json.dumps(
            {"title": "Classifier", "type": "object", "properties": {"label": {"enum": [f"L{i}", f"M{i}"]}}}
        )
        for i in range(10)
    ]
    for round_ in range(10):
        for spec in specs:
            link.compile(spec, 0.03, hit=round_ > 0)
        view = run(link, store)
    (family,) = view.families.recent
    assert view.families.usage[family].variants == 10 and view.families.usage[family].requests == 100
    assert view.family_analysis.reports[family].findings == {("dynamic_schema", "info"): 1}


def test_tool_subsets_join_one_family_and_its_counters_never_go_backwards() -> None:
    """Per-request subsets of 12 tools: distinct hashes and shapes, one family once the quorum is
    reached; the ids given out before it linger frozen, none ever decreases."""
    store = new_store(max_families=3, linger=2)
    link = Link(store)
    rng = random.Random(3)
    last: dict[str, tuple[int, float]] = {}
    for _ in range(20):
        for _ in range(3):
            chosen = sorted(rng.sample(range(12), rng.randrange(2, 7)))
            link.compile(json.dumps({"anyOf": [tool(i) for i in chosen]}), 0.03)
        link.compile(json.dumps(static(rng.randrange(8))), 0.001, hit=True)
        view = run(link, store)
        for family, totals in view.families.series.items():
            before = last.get(family, (0, 0.0))
            assert totals.requests >= before[0] and totals.sum >= before[1] - 1e-9, family
            last[family] = (totals.requests, totals.sum)
    family = top(view)
    report = view.family_analysis.reports[family]
    assert report.name.startswith("anyOf, ")  # from structure: the founding request's union
    (union,) = report.variation.unions
    assert union.pointer == "/anyOf" and union.branches == 12 and union.subsets > 10
    assert (
        report.findings.get(("dynamic_schema", "warning"), 0)
        + report.findings.get(("dynamic_schema", "error"), 0)
        == 1
    )
    # every compile counted once: the last value of every family series adds up to the engine's calls
    assert sum(r for r, _ in last.values()) == 20 * 4


def test_family_metrics_are_bounded_and_carry_no_literal() -> None:
    store = new_store(max_families=2)
    link = Link(store)
    for i in range(30):
        link.compile(
            json.dumps(
                {
                    "type": "object",
                    "description": f"SECRET-{i} at 2026-01-0{i % 9}",
                    "properties": {f"p{i}": {"type": "string"}},
                    "required": [f"p{i}"],
                }
            ),
            0.01,
        )
    view = run(link, store)
    text = "".join(str(m) for m in family_families(view.families, view.family_analysis))
    assert "SECRET" not in text
    assert len(view.families.recent) <= 2 + 2  # exposed + lingering
    assert "other" in view.families.series
