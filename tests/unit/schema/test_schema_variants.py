"""Variants of one shape: the pointer that varies, ranked; literals never leave as values."""

from __future__ import annotations

import json
from typing import Any

from exporter.schema.identity import schema_hash, shape_hash
from exporter.schema.variants import (
    literals,
    unstable_serialization,
    unstable_serialization_counts,
    varying_paths,
)

ITEM = "/properties/line_items/items/properties/cost_center_id/enum"


def invoice(tenant: int, note: str = "static") -> dict[str, Any]:
    return {
        "type": "object",
        "description": note,
        "properties": {
            "line_items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"cost_center_id": {"enum": [f"CC-{tenant}-{i}" for i in range(5)]}},
                },
            }
        },
    }


def test_the_injected_enum_is_the_top_varying_path() -> None:
    variants = [invoice(t, note="static" if t % 4 else f"run {t}") for t in range(20)]
    assert len({schema_hash(json.dumps(v)) for v in variants}) == 20
    assert len({shape_hash(json.dumps(v)) for v in variants}) == 1
    paths = varying_paths([literals(v) for v in variants])
    assert paths[0] == (ITEM, 19)
    assert paths[1] == ("/description", 5)


def test_literal_maps_hold_digests_not_values() -> None:
    marker = "SECRET-MARKER-42"
    digests = literals({"enum": [marker], "properties": {"a": {"description": marker}}})
    assert set(digests) == {"/enum", "/properties/a/description"}
    assert marker not in json.dumps(digests)


def test_identical_variants_do_not_vary_and_serialisations_are_counted() -> None:
    same = [literals(invoice(1)) for _ in range(3)]
    assert varying_paths(same) == []
    assert unstable_serialization(1) == []
    assert [f.rule for f in unstable_serialization(3)] == ["unstable_serialization"]


def test_counts_for_the_daemon_come_from_the_same_rules() -> None:
    """The daemon's schema_lint_findings values: unstable_serialization carries the number of
    serialisations, each of which compiles."""
    assert unstable_serialization_counts(1) == {}
    assert unstable_serialization_counts(3) == {("unstable_serialization", "warning"): 3}
