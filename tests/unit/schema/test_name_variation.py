"""Definition names are not the shape: the same models under per-request names (Pydantic's
`create_model(f"LineItem_{tenant}")`: `$defs` keys, every `$ref` and the titles that repeat them) are
one family whose varying part is the names, reported at the definitions map, never at a name, and
the family's name is what the variants' titles share. Built from the mechanism: random tenants,
random structures of definitions that refer to each other."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.schema import family
from exporter.schema.family.definitions import canonical
from exporter.schema.findings import Thresholds
from exporter.schema.injection import FIX_NAMES, Usage, dynamic_schema
from exporter.schema.static import merge

tenants = st.lists(st.from_regex(r"[a-z]{4,9}", fullmatch=True), min_size=5, max_size=8, unique=True)


def models(tenant: str, sizes: list[int], keyword: str) -> dict[str, Any]:
    """An envelope whose items are a per-tenant model, each model holding the next one's list."""
    names = [f"Model{i}_{tenant}" for i in range(len(sizes))]
    defs: dict[str, Any] = {}
    for i, (name, size) in enumerate(zip(names, sizes, strict=True)):
        props: dict[str, Any] = {f"f{j}": {"type": "string"} for j in range(size)}
        if i + 1 < len(names):
            props["children"] = {"type": "array", "items": {"$ref": f"#/{keyword}/{names[i + 1]}"}}
        defs[name] = {"title": name, "type": "object", "properties": props, "required": sorted(props)}
    root = {
        "title": "Envelope",
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": f"#/{keyword}/{names[0]}"}}},
    }
    return {**root, keyword: dict(reversed(list(defs.items())))}


@settings(max_examples=40, deadline=None)
@given(
    tenants, st.lists(st.integers(1, 4), min_size=1, max_size=4), st.sampled_from(["$defs", "definitions"])
)
def test_names_alone_are_names(names: list[str], sizes: list[int], keyword: str) -> None:
    variants = [models(t, sizes, keyword) for t in names]
    assert len({family.of(v).frame for v in variants}) == 1
    assert len({family.of(v).shape for v in variants}) == 1
    found = family.what_varies(variants)
    assert found.parts() == ((f"/{keyword}", "names", len(names)),) and found.names_only
    reported = json.dumps([found.lines(), found.parts(), [family.of(v).name for v in variants]])
    assert not any(t in reported for t in names)  # no tenant in what the product reports
    (finding,) = dynamic_schema(found, Usage(len(names), len(names)), Thresholds())
    assert finding.fix == FIX_NAMES and finding.pointer == f"/{keyword}"


@settings(max_examples=30, deadline=None)
@given(tenants, st.integers(0, 2**32))
def test_a_literal_under_varying_names_is_at_a_canonical_pointer(names: list[str], seed: int) -> None:
    rng = random.Random(seed)
    variants = []
    for t in names:
        v = models(t, [2, 1], "$defs")
        v["$defs"][f"Model1_{t}"]["properties"]["f0"]["enum"] = [f"{t}-{rng.randrange(99)}"]
        variants.append(v)
    found = family.what_varies(variants)
    assert [p for p, _ in found.literals] == ["/$defs/d1/properties/f0/enum"]
    assert ("/$defs", "names", len(names)) in found.parts() and not found.names_only


def test_static_names_keep_their_own_pointers() -> None:
    variants = [models("acme", [2], "$defs") for _ in range(3)]
    for i, v in enumerate(variants):
        v["$defs"]["Model0_acme"]["properties"]["f0"]["enum"] = [f"v{i}"]
    found = family.what_varies(variants)
    assert found.parts() == (("/$defs/Model0_acme/properties/f0/enum", "literal", 2),)


def test_canonical_renames_refs_titles_and_nothing_else() -> None:
    schema = models("acme", [1, 1], "$defs")
    schema["properties"]["note"] = {"enum": ["#/$defs/Model0_acme"], "title": "Model0_acme"}
    renamed, original = canonical(schema)
    assert original == ("Model0_acme", "Model1_acme")
    assert renamed["properties"]["items"]["items"] == {"$ref": "#/$defs/d0"}
    assert renamed["$defs"]["d0"]["title"] == "d0" and "children" in renamed["$defs"]["d0"]["properties"]
    assert renamed["properties"]["note"] == schema["properties"]["note"]  # values are not refs
    assert canonical({"type": "object"}) == ({"type": "object"}, ())


def test_the_family_name_is_what_the_titles_share() -> None:
    assert family.family_title(["LineItem_acme", "LineItem_globex"]) == "LineItem"
    assert family.family_title(["acme", "globex"]) == ""
    assert family.family_title(["Invoice", "Invoice"]) == "Invoice"
    assert family.family_title(["Invoice", ""]) == ""
    # a tenant whose name starts another's is not a name the family shares
    assert family.family_title(["Order_acme", "Order_acmecorp"]) == "Order"
    assert family.family_title(["InvoiceAcme", "InvoiceGlobex"]) == "Invoice"  # CamelCase words


@settings(max_examples=25, deadline=None)
@given(tenants, st.lists(st.integers(1, 3), min_size=1, max_size=3))
def test_the_static_schema_names_each_model_once(names: list[str], sizes: list[int]) -> None:
    """gdx fix's static schema for a family of renamed models: one name per model, what the
    variants' names share (`Model0_acme`, `Model0_globex` -> `Model0`), no tenant in it."""
    merged = merge([models(t, sizes, "$defs") for t in names])
    assert merged.schema is not None, merged.reason
    assert sorted(merged.schema["$defs"]) == [f"Model{i}" for i in range(len(sizes))]
    text = json.dumps(merged.schema)
    assert not any(t in text for t in names) and merged.moved == ()
    assert merged.schema["properties"]["items"]["items"] == {"$ref": "#/$defs/Model0"}


# tenants from a-m, the rest of a name from n-z and capitals: no tenant is ever part of a base or a field
tenants_am = st.lists(st.from_regex(r"[a-m]{4,9}", fullmatch=True), min_size=5, max_size=8, unique=True)
titles = st.from_regex(r"[A-Z][n-z]{2,8}(Request|Out)?", fullmatch=True)
FIELD_TYPES = st.sampled_from(["string", "integer", "boolean", "number"])


def root_model(base: str, tenant: str, fields: dict[str, str], nested: bool) -> dict[str, Any]:
    """The whole model made per tenant (`create_model(f"{base}_{tenant}")`), its items a per-tenant
    definition too when `nested`."""
    props: dict[str, Any] = {f: {"type": t} for f, t in fields.items()}
    schema: dict[str, Any] = {"title": f"{base}_{tenant}", "type": "object", "properties": props}
    if nested:
        item = f"Item_{tenant}"
        props["items"] = {"type": "array", "items": {"$ref": f"#/$defs/{item}"}}
        schema["$defs"] = {item: {"title": item, "type": "object", "properties": {"sku": {"type": "string"}}}}
    schema["required"] = sorted(props)
    return schema


FIELDS = st.dictionaries(st.from_regex(r"[N-Z]{1,8}", fullmatch=True), FIELD_TYPES, min_size=1, max_size=5)


@settings(max_examples=40, deadline=None)
@given(tenants_am, titles, FIELDS, st.booleans())
def test_a_root_model_named_per_tenant_is_one_family_named_by_what_is_shared(
    names: list[str], base: str, fields: dict[str, str], nested: bool
) -> None:
    variants = [root_model(base, t, fields, nested) for t in names]
    assert len({family.of(v).key for v in variants}) == 1
    found = family.what_varies(variants)
    expected = ((("/$defs", "names", len(names)),) if nested else ()) + (("/title", "names", len(names)),)
    assert found.parts() == expected and found.names_only
    assert family.family_title([v["title"] for v in variants]) == base
    reported = json.dumps([found.lines(), found.parts(), [family.of(v).name for v in variants]])
    assert not any(t in reported for t in names)
    (finding,) = dynamic_schema(found, Usage(len(names), len(names)), Thresholds())
    assert finding.fix == FIX_NAMES
    merged = merge(variants)  # gdx fix's static schema: the shared name, no tenant
    assert merged.schema is not None and merged.schema["title"] == base, merged.reason
    assert not any(t in json.dumps(merged.schema) for t in names)


def test_prose_titles_are_text_and_static_names_that_share_a_shape_are_not_a_finding() -> None:
    """The trap: a title that describes (spaces, not an identifier) stays text, so a tenant in prose
    splits families as before; two static models of one shape under their own names are one family,
    and reused, never a finding."""
    prose = [{"title": f"Order for {t}", "type": "object"} for t in ("acme", "globex")]
    assert len({family.of(v).key for v in prose}) == 2
    named = [
        {"title": n, "type": "object", "properties": {"id": {"type": "string"}}}
        for n in ("Invoice", "Receipt")
    ]
    assert len({family.of(v).key for v in named}) == 1
    found = family.what_varies(named)
    assert found.parts() == (("/title", "names", 2),)
    (finding,) = dynamic_schema(found, Usage(requests=400, variants=2, hits=398), Thresholds())
    assert finding.severity == "info" and "static variants, each reused" in finding.message
