"""Schema families: per-request variants join, different schemas stay apart, no value leaves."""

from __future__ import annotations

import copy
import json
import random
import re
import sys
from collections.abc import Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.schema.family import (
    FamilyIndex,
    Fingerprint,
    fingerprint,
    mask_text,
    of,
    readable_name,
    same_family,
    what_varies,
)
from exporter.schema.family.definitions import canonical
from exporter.schema.identity import schema_hash
from exporter.schema.walk import Budget
from tools.bench.schemas import DATA, read

fingerprint_module = sys.modules[
    "exporter.schema.family.fingerprint"
]  # the package exports a function of that name

TYPES = ("string", "integer", "number", "boolean")


def families(specs: Iterable[Any], index: FamilyIndex | None = None) -> set[str]:
    """The family ids the specs end in (following ids absorbed by later confirmations and bridges)."""
    index = index or FamilyIndex()
    alias: dict[str, str] = {}
    placed = []
    for spec in specs:
        fp = spec if isinstance(spec, Fingerprint) else of(spec)
        m = index.add(fp)
        alias.update(dict.fromkeys(m.absorbed, m.family))
        placed.append(m.family)
    out = set()
    for family in placed:
        while family in alias:
            family = alias[family]
        out.add(family)
    return out


def invoice(tenant: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "invoice_id": {"type": "string", "pattern": f"^T{tenant}-[0-9]+$"},
            "tenant": {"const": f"tenant-{tenant}"},
            "cost_center": {
                "enum": [f"CC-{tenant}-{i}" for i in range(tenant % 5 + 1)],
                "default": f"CC-{tenant}-0",
            },
            "total": {"type": "number", "minimum": 0},
        },
        "required": ["invoice_id", "tenant", "cost_center", "total"],
    }


def tool(i: int) -> dict[str, Any]:
    """An OpenAI-style tool_choice="required" branch; each tool's arguments differ in structure."""
    args = {
        f"arg{i}_{j}": {"type": TYPES[(i + j) % 4], "description": f"argument {j}"} for j in range(i % 4 + 1)
    }
    return {
        "type": "object",
        "properties": {
            "name": {"const": f"tool_{i}"},
            "arguments": {"type": "object", "properties": args, "required": sorted(args)},
        },
        "required": ["name", "arguments"],
    }


def test_per_tenant_enum_const_pattern_and_default_join() -> None:
    variants = [invoice(t) for t in range(20)]
    assert len({schema_hash(json.dumps(v)) for v in variants}) == 20
    assert len(families(variants)) == 1
    varies = what_varies(variants)
    pointers = dict(varies.literals)
    assert pointers["/properties/tenant/const"] == 19
    assert "/properties/cost_center/enum" in pointers and "/properties/invoice_id/pattern" in pointers
    assert varies.unions == () and varies.optional == ()


def test_per_request_numbers_in_keywords_join_and_are_named() -> None:
    """Exactly n items, a per-request range, a tenant's length bound: numbers vary like literals."""

    def picks(n: int) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 8 * n},
                    "minItems": n,
                    "maxItems": n,
                },
                "score": {"type": "number", "minimum": -n, "exclusiveMaximum": 10 * n, "multipleOf": 0.5},
            },
            "required": ["items", "score"],
        }

    variants = [picks(n) for n in range(1, 41)]
    assert len({schema_hash(json.dumps(v)) for v in variants}) == 40
    assert len(families(variants)) == 1
    varies = dict(what_varies(variants).literals)
    assert set(varies) == {
        "/properties/items/minItems", "/properties/items/maxItems", "/properties/items/items/maxLength",
        "/properties/score/minimum", "/properties/score/exclusiveMaximum",
    }  # fmt: skip
    assert varies["/properties/items/maxItems"] == 39  # multipleOf, the same in all, does not vary
    # a bound that appears in some variants and not others is structure: those stay apart
    unbounded = copy.deepcopy(picks(1))
    del unbounded["properties"]["items"]["minItems"], unbounded["properties"]["items"]["maxItems"]
    assert len(families([picks(1), unbounded])) == 2


def test_timestamps_in_descriptions_and_titles_join() -> None:
    def report(stamp: str) -> dict[str, Any]:
        return {
            "title": f"Report {stamp}",
            "description": f"Generated at {stamp} for request 8f3a{stamp[-2:]}",
            "type": "object",
            "properties": {"summary": {"type": "string", "description": f"As of {stamp}, summarise."}},
            "required": ["summary"],
        }

    stamps = [f"2026-0{m}-1{d}T0{d}:15:00Z" for m in range(1, 4) for d in range(5)]
    variants = [report(s) for s in stamps]
    assert len(families(variants)) == 1
    varies = dict(what_varies(variants).literals)
    assert set(varies) == {"/title", "/description", "/properties/summary/description"}
    assert mask_text("Monday, May 4 2026 at 10:15 PM") == mask_text("Tue, June 5 2027 at 9:01 AM")


DATE_WORDS = [
    "jan",
    "january",
    "feb",
    "february",
    "mar",
    "march",
    "apr",
    "april",
    "may",
    "jun",
    "june",
    "jul",
    "july",
    "aug",
    "august",
    "sep",
    "sept",
    "september",
    "oct",
    "october",
    "nov",
    "november",
    "dec",
    "december",
    "mon",
    "monday",
    "tue",
    "tues",
    "tuesday",
    "wed",
    "wednesday",
    "thu",
    "thur",
    "thurs",
    "thursday",
    "fri",
    "friday",
    "sat",
    "saturday",
    "sun",
    "sunday",
    "am",
    "pm",
    "utc",
    "gmt",
]
PLAIN = re.compile(
    r"(?<![\w.:+/-])[\w.:+/-]*\d[\w.:+/-]*|\b(?:"
    + "|".join(sorted(DATE_WORDS, key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)


def test_the_month_and_day_names_as_a_tree_mask_what_the_plain_list_masks() -> None:
    """The masking regex spells the names as a tree behind a first-letter check (for speed): it must match
    exactly the plain alternation's words, in any case, beside digits and punctuation."""
    rng = random.Random(11)
    words = [
        *DATE_WORDS,
        *(n.upper() for n in DATE_WORDS),
        *(n + "x" for n in DATE_WORDS),
        *("x" + n for n in DATE_WORDS),
    ]
    words += ["ma", "ju", "se", "thursd", "\u017fept", "june2", "2may", "mid-may", "x.jan", "am/pm", "u.t.c."]
    glue = ["", " ", ".", "-", "_", "/", ":", "2", "é", ", "]
    texts = ["".join(rng.choice(words) + rng.choice(glue) for _ in range(12)) for _ in range(3000)]
    texts += DATE_WORDS
    masked = fingerprint_module._VOLATILE
    assert [masked.sub("#", t) for t in texts] == [PLAIN.sub("#", t) for t in texts]
    assert sum(t != masked.sub("#", t) for t in texts) > 2500  # names were there to mask


def test_the_digest_and_mask_caches_stay_bounded_and_change_nothing() -> None:
    """Short texts' digests and masks are kept between specs; long ones never, and never more than
    CACHED_TEXTS of them."""
    specs = [
        {
            "type": "object",
            "description": f"text {i} " + "w" * (i % 3000),
            "properties": {f"p{i}": {"type": "string"}},
        }
        for i in range(3 * fingerprint_module.CACHED_TEXTS)
    ]
    warm = [fingerprint(json.dumps(s)) for s in specs]
    for cache in (fingerprint_module._DIGESTS, fingerprint_module._MASKS):
        assert 0 < len(cache) <= fingerprint_module.CACHED_TEXTS
        assert max(map(len, cache)) <= fingerprint_module.CACHED_CHARS
    cold = []
    for s in specs:
        fingerprint_module._DIGESTS.clear()
        fingerprint_module._MASKS.clear()
        cold.append(fingerprint(json.dumps(s)))
    assert warm == cold


def test_different_wording_in_descriptions_does_not_join() -> None:
    """Human wording is what tells apart many real schemas of one structure (docs/families.md)."""
    a = {"type": "object", "properties": {"x": {"type": "number", "description": "The base of the triangle"}}}
    b = {
        "type": "object",
        "properties": {"x": {"type": "number", "description": "The width of the rectangle"}},
    }
    assert not same_family(of(a), of(b))


def test_key_order_and_whitespace_join() -> None:
    spec = invoice(3)
    texts = [
        json.dumps(spec),
        json.dumps(spec, indent=4),
        json.dumps(dict(reversed(list(spec.items()))), separators=(",", ":")),
    ]
    shuffled = json.loads(texts[0])
    shuffled["properties"] = dict(reversed(list(shuffled["properties"].items())))
    shuffled["required"] = list(reversed(shuffled["required"]))
    texts.append(json.dumps(shuffled, sort_keys=True))
    fps = [fingerprint(t) for t in texts]
    assert len({fp.key for fp in fps}) == 1
    assert len(families(fps)) == 1


def test_tool_subsets_of_a_12_tool_union_join_and_the_union_is_named() -> None:
    rnd = random.Random(7)
    tools = [tool(i) for i in range(12)]
    subsets: set[tuple[int, ...]] = set()
    while len(subsets) < 37:
        subsets.add(tuple(sorted(rnd.sample(range(12), rnd.randint(1, 12)))))
    specs = [{"anyOf": [tools[i] for i in s]} for s in sorted(subsets, key=lambda s: rnd.random())]
    assert len(families(specs)) == 1
    varies = what_varies(specs)
    assert [(u.pointer, u.subsets, u.branches, u.variants) for u in varies.unions] == [("/anyOf", 37, 12, 37)]
    assert varies.literals == ()  # each tool's name lines up with its own branch, not with an index
    assert "/anyOf: 37 distinct subsets of 12 branches" in varies.lines()


def test_unions_of_bare_types_do_not_join_on_a_shared_leaf() -> None:
    optional_str: dict[str, Any] = {
        "type": "object",
        "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["v"],
    }
    optional_int = copy.deepcopy(optional_str)
    optional_int["properties"]["v"]["anyOf"][0] = {"type": "integer"}
    assert not same_family(of(optional_str), of(optional_int))
    assert len(families([optional_str, optional_int] * 5)) == 2


def test_optional_properties_that_come_and_go_join_and_are_named() -> None:
    rnd = random.Random(11)
    optional = {f"field_{i}": {"type": TYPES[i % 4]} for i in range(8)}
    variants = []
    for _ in range(30):
        chosen = [n for n in optional if rnd.random() < 0.5] or ["field_0"]
        properties = {"request_id": {"type": "string"}, **{n: optional[n] for n in chosen}}
        variants.append({"type": "object", "properties": properties, "required": ["request_id"]})
    assert len(families(variants)) == 1
    varies = what_varies(variants)
    [come_and_go] = varies.optional
    assert come_and_go.pointer == "/properties" and come_and_go.variants == 30
    assert {n for n, _ in come_and_go.names} <= set(optional)
    assert all(0 < k < 30 for _, k in come_and_go.names)


def test_two_versions_of_a_schema_stay_apart_until_a_quorum_of_variants() -> None:
    """A property added in v2 looks like one that comes and goes; two versions are not a family."""
    v1: dict[str, Any] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "status": {"type": "string"}},
    }
    v2 = copy.deepcopy(v1)
    v2["properties"]["certificate"] = {"type": "string"}
    assert same_family(of(v1), of(v2))
    assert len(families([v1, v2])) == 2
    v3 = copy.deepcopy(v2)
    v3["properties"]["expires"] = {"type": "integer"}
    v4 = copy.deepcopy(v1)
    v4["properties"]["expires"] = {"type": "integer"}
    assert len(families([v1, v2, v3, v4])) == 1


def test_a_recursive_pydantic_model_reused_is_one_family_with_nothing_varying() -> None:
    model = {
        "$defs": {
            "Node": {
                "title": "Node",
                "type": "object",
                "properties": {
                    "value": {"title": "Value", "type": "integer"},
                    "children": {
                        "title": "Children",
                        "type": "array",
                        "items": {"$ref": "#/$defs/Node"},
                        "default": [],
                    },
                },
                "required": ["value"],
            }
        },
        "$ref": "#/$defs/Node",
    }
    texts = [json.dumps(model), json.dumps(model, indent=2), json.dumps(model, sort_keys=True)] * 4
    assert len(families(fingerprint(t) for t in texts)) == 1
    varies = what_varies([json.loads(t) for t in texts])
    assert varies.literals == () and varies.unions == () and varies.optional == () and not varies.degraded


def synthetic(i: int) -> dict[str, Any]:
    """Fifty different static schemas: each has its own required property names and types."""
    rnd = random.Random(i)
    names = [
        f"{rnd.choice(['id', 'name', 'amount', 'items', 'note', 'when'])}_{i}_{j}"
        for j in range(rnd.randint(1, 5))
    ]
    props: dict[str, Any] = {n: {"type": rnd.choice(TYPES)} for n in names}
    if i % 3 == 0:
        props[names[0]] = {
            "type": "array",
            "items": {"type": "object", "properties": {"k": {"type": "string"}}},
        }
    return {"type": "object", "properties": props, "required": names}


def test_different_static_schemas_stay_in_separate_families() -> None:
    specs = [synthetic(i) for i in range(50)]
    assert len(families(specs)) == 50


def test_fifty_benchmark_schemas_stay_in_separate_families() -> None:
    """Kubernetes schemas join only when they are the same schema up to their definitions' names
    (one API version and the next: `...v1_UserInfo` and `...v1beta1_UserInfo`, the same structure)."""
    docs = [d["schema"] for d in read(DATA / "schemas") if d["category"] == "Kubernetes"][:50]
    assert len(docs) == 50
    distinct = {schema_hash(json.dumps(d)) for d in docs}
    up_to_names = {schema_hash(json.dumps(canonical(d)[0])) for d in docs}
    assert len(families(docs)) == len(up_to_names) == len(distinct) - 2


def test_a_property_type_a_required_set_or_a_property_name_is_a_different_schema() -> None:
    base: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a", "b"],
    }
    typed = copy.deepcopy(base)
    typed["properties"]["b"]["type"] = "integer"
    fewer_required = copy.deepcopy(base)
    fewer_required["required"] = ["a"]
    renamed = copy.deepcopy(base)
    renamed["properties"]["c"] = renamed["properties"].pop("b")
    renamed["required"] = ["a", "c"]
    for other in (typed, fewer_required, renamed):
        assert not same_family(of(base), of(other))
        assert len(families([base, other] * 4)) == 2
    # an optional property with the same name and another type is a conflict, not a come-and-go
    loose: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
    }
    loose_typed = copy.deepcopy(loose)
    loose_typed["properties"]["b"]["type"] = "integer"
    assert not same_family(of(loose), of(loose_typed))
    # unrelated all-optional objects that share one common property do not join
    left = {
        "type": "object",
        "properties": {"id": {"type": "string"}, **{f"l{i}": {"type": "integer"} for i in range(4)}},
    }
    right = {
        "type": "object",
        "properties": {"id": {"type": "string"}, **{f"r{i}": {"type": "integer"} for i in range(4)}},
    }
    assert not same_family(of(left), of(right))


def test_regex_and_grammar_specs_are_keyed_by_kind_and_masked_text() -> None:
    """A regex keeps its metacharacters, classes, escapes and {m,n} bounds, its literal runs masked; a
    grammar keeps its rules, its quoted strings masked; the two kinds never meet."""
    invoice_regex, po_regex = fingerprint(r"^INV-\d{6}$"), fingerprint(r"^PO-\d{6}$")
    assert invoice_regex.kind == "regex" and invoice_regex.frame == po_regex.frame
    assert fingerprint(r"^INV-\d{8}$").frame != invoice_regex.frame
    assert fingerprint(r"^(alice|bob)$").frame != fingerprint(r"^(alice|bob|carol)$").frame
    yes_no, a_b = fingerprint('root ::= "yes" | "no"'), fingerprint('root ::= "a" | "b"')
    assert yes_no.kind == "grammar" and yes_no.frame == a_b.frame
    assert fingerprint('root ::= "yes" | "no" | "maybe"').frame != yes_no.frame
    assert fingerprint("start: value\nvalue: WORD").kind == "grammar"
    assert len(families([invoice_regex, po_regex, yes_no, a_b])) == 2
    assert "INV" not in invoice_regex.name and "yes" not in yes_no.name


def test_hostile_input_degrades_instead_of_raising() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(10_000):
        deep = {"type": "array", "items": deep}
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5_000)}}
    cyclic: dict[str, Any] = {"type": "object", "properties": {}}
    cyclic["properties"]["self"] = cyclic
    odd: list[Any] = [
        deep,
        cyclic,
        {"required": [1, None, {"x": []}], "type": [3, "a"]},
        {1: "x"},
        {"enum": 10**5000},
    ]
    odd += [
        {"anyOf": "nope", "properties": [1], "$defs": 3},
        {"minimum": float("nan")},
        [],
        "text",
        None,
        True,
    ]
    for spec in odd:
        fp = of(spec, Budget(max_nodes=20_000, max_seconds=0.5))
        assert isinstance(fp, Fingerprint)
        readable_name(spec)
    assert of(deep, Budget(max_nodes=1000)).degraded
    assert of(wide, Budget(max_nodes=100)).degraded
    assert not of(wide).degraded
    assert fingerprint("{not json").kind == "regex"
    assert what_varies([deep, cyclic, wide], Budget(max_nodes=1000, max_seconds=0.5)).degraded
    assert what_varies([]).variants == 0


def test_the_index_is_bounded_and_deterministic() -> None:
    specs = [synthetic(i) for i in range(30)] + [invoice(t) for t in range(10)]
    first = [FamilyIndex(max_families=8).add(of(s)).family for s in specs]
    index = FamilyIndex(max_families=8)
    again = [index.add(of(s)).family for s in specs]
    assert first == again and len(index) <= 8
    assert index.summary(again[-1]) is not None and index.summary(again[0]) is None  # the oldest went


MARK = st.text(alphabet="XYZ", min_size=4, max_size=12)
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=30)


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(NAMES, min_size=0, max_size=6, unique=True),
    values=st.lists(MARK, min_size=5, max_size=5),
    union=st.booleans(),
)
def test_readable_names_never_hold_a_literal_value(names: list[str], values: list[str], union: bool) -> None:
    enum, const, description, default, title = values
    props = {
        n: {"type": "string", "enum": [enum], "description": description, "default": default} for n in names
    }
    schema: dict[str, Any] = {"title": title, "description": description, "const": const}
    if union:
        schema["anyOf"] = [{"const": const}, {"enum": [enum, default]}]
    else:
        schema["properties"] = props
    for name in (readable_name(schema), of(schema).name):
        assert len(name) <= 64 and all(c.isalnum() or c in "_.,+ -" for c in name)
        assert not any(v in name for v in values)
        assert not set(name) & set("XYZ")


def test_a_type_list_is_read_as_a_schema_not_degraded() -> None:
    """`"type": ["string", "null"]` is a list (unhashable): reading it as a structural-tag format's
    type raised, and every schema holding one was its own exact family."""
    a = {"type": "object", "properties": {"n": {"type": ["string", "null"]}, "k": {"enum": ["x", "y"]}}}
    b = {"type": "object", "properties": {"n": {"type": ["null", "string"]}, "k": {"enum": ["z", "w"]}}}
    assert not of(a).degraded and of(a).frame == of(b).frame
    assert [p for p, _ in what_varies([a, b]).literals] == ["/properties/k/enum"]
