"""schema_hash and shape_hash: what a user looks up, and what reveals per-request injection."""

from __future__ import annotations

import json

from exporter.schema.identity import (
    sanitize_title,
    schema_hash,
    shape_hash,
    spec_hashes,
    spec_schema_hash,
    spec_shape_hash,
    title_of,
)

INVOICE = {
    "title": "Invoice",
    "type": "object",
    "properties": {
        "vendor": {"type": "string", "description": "who sent it"},
        "cost_center": {"enum": ["A1", "B2"]},
        "total": {"type": "number", "minimum": 0},
    },
    "required": ["vendor", "total"],
}


def test_schema_hash_ignores_serialisation_but_not_content() -> None:
    compact = json.dumps(INVOICE, separators=(",", ":"))
    spaced = json.dumps(INVOICE, indent=2)
    reordered = json.dumps(dict(reversed(list(INVOICE.items()))))
    assert len({schema_hash(compact), schema_hash(spaced), schema_hash(reordered)}) == 1
    assert len(schema_hash(compact)) == 12
    changed = json.loads(compact)
    changed["properties"]["total"]["minimum"] = 1
    assert schema_hash(json.dumps(changed)) != schema_hash(compact)


def test_shape_hash_is_blind_to_literals_only() -> None:
    base = json.dumps(INVOICE)
    variant = json.loads(base)
    variant["properties"]["cost_center"]["enum"] = ["X9", "Y8", "Z7"]
    variant["properties"]["vendor"]["description"] = "tenant 42"
    variant["title"] = "Invoice for tenant 42"
    assert schema_hash(json.dumps(variant)) != schema_hash(base)
    assert shape_hash(json.dumps(variant)) == shape_hash(base)
    structural = json.loads(base)
    structural["properties"]["total"]["maximum"] = 10  # a bound is structure
    assert shape_hash(json.dumps(structural)) != shape_hash(base)
    renamed = json.loads(base)
    renamed["properties"]["title"] = renamed["properties"].pop("vendor")  # a property named "title"
    assert shape_hash(json.dumps(renamed)) != shape_hash(base)


def test_non_json_specs_hash_as_strings() -> None:
    assert schema_hash("^[A-Z]{8,64}$") == shape_hash("^[A-Z]{8,64}$")
    assert schema_hash("^[A-Z]{8,64}$") != schema_hash("^[A-Z]{8,65}$")


def test_each_spec_hash_alone_is_its_half_of_the_pair() -> None:
    for kind, text in (
        ("json", json.dumps(INVOICE)),
        ("json", '{"type": "object", "properties": {"a": {"const": 1}}}'),
        ("json", "not json"),
        ("regex", "^[A-Z]{8,64}$"),
        ("grammar", 'root ::= "a"'),
        ("json", "[" * 10_000 + "]" * 10_000),
    ):
        assert (spec_schema_hash(kind, text), spec_shape_hash(kind, text)) == spec_hashes(kind, text)
    assert spec_shape_hash("json", json.dumps(INVOICE)) != spec_schema_hash("json", json.dumps(INVOICE))


def test_hostile_specs_do_not_raise() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert len(schema_hash(deep)) == 12 and len(shape_hash(deep)) == 12
    assert len(schema_hash("\ud800")) == 12  # a lone surrogate


def test_titles_are_sanitised() -> None:
    assert title_of(INVOICE) == "Invoice"
    assert title_of({"title": "Tenant <script> 42 / acme"}) == "Tenant_script_42_acme"
    assert title_of({"title": 5}) == "" and title_of([1]) == ""
    assert len(sanitize_title("x" * 500)) == 64
