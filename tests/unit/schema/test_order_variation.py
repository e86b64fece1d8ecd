"""Order means nothing in an enum, `required`, a `type` list or a union's branches, yet each order is
a new string for the engine's cache: what varies names a change of order alone as its own part
(`order`), with the members the same; a change of members stays a literal or a branch subset. Built
from the mechanism (random members, random permutations), not from fixed examples."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.schema import family
from exporter.schema.findings import Thresholds
from exporter.schema.injection import FIX_ORDER, Usage, dynamic_schema

names = st.lists(st.text("abcdefghij", min_size=1, max_size=6), min_size=3, max_size=8, unique=True)


def families(specs: list[Any]) -> set[str]:
    """The family ids the specs end in, following ids absorbed once a family is confirmed."""
    index, alias, placed = family.FamilyIndex(), {}, []
    for spec in specs:
        m = index.add(family.of(spec))
        alias.update(dict.fromkeys(m.absorbed, m.family))
        placed.append(m.family)
    out = set()
    for found in placed:
        while found in alias:
            found = alias[found]
        out.add(found)
    return out


def tool(name: str, same_shape: bool) -> dict[str, Any]:
    """A tool branch as vLLM derives it: `same_shape` ones differ only by their name's literal."""
    arg = "arg" if same_shape else f"arg_{name}"
    return {
        "type": "object",
        "properties": {"name": {"enum": [name]}, arg: {"type": "integer"}},
        "required": ["name", arg],
    }


def variant(members: list[str], tools: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    members, tools = members[:], tools[:]
    rng.shuffle(members)
    rng.shuffle(tools)
    required = ["kind", "call", "note"]
    rng.shuffle(required)
    return {
        "type": "object",
        "properties": {
            "kind": {"enum": members},
            "call": {"anyOf": tools},
            "note": {"type": rng.sample(["string", "null"], 2)},
        },
        "required": required,
    }


@settings(max_examples=60, deadline=None)
@given(names, names, st.booleans(), st.integers(0, 2**32))
def test_a_reorder_alone_is_order(members: list[str], tool_names: list[str], same: bool, seed: int) -> None:
    rng = random.Random(seed)
    tools = [tool(n, same) for n in tool_names]
    variants = [variant(members, tools, rng) for _ in range(12)]
    assert len(families(variants)) == 1  # one family: the members never change
    found = family.what_varies(variants)
    assert not found.literals and not found.unions and not found.optional, found
    pointers = {p for p, _ in found.orders}
    assert pointers <= {
        "/properties/kind/enum",
        "/properties/call/anyOf",
        "/properties/note/type",
        "/required",
    }
    assert found.order_only == bool(found.orders)
    assert all(what == "order" for _, what, _ in found.parts())


@settings(max_examples=40, deadline=None)
@given(names, st.integers(0, 2**32))
def test_new_members_are_a_literal_not_an_order(members: list[str], seed: int) -> None:
    rng = random.Random(seed)
    variants = []
    for i in range(8):
        own = [*members, f"tenant-{i}"]
        rng.shuffle(own)
        variants.append({"type": "object", "properties": {"kind": {"enum": own}}})
    found = family.what_varies(variants)
    assert [p for p, _ in found.literals] == ["/properties/kind/enum"]
    assert found.orders == () and not found.order_only


def test_the_finding_for_order_alone_says_to_sort_at_the_source() -> None:
    rng = random.Random(7)
    members = [f"m{i}" for i in range(9)]
    variants = [variant(members, [tool(n, True) for n in "abcd"], rng) for _ in range(10)]
    found = family.what_varies(variants)
    (finding,) = dynamic_schema(found, Usage(requests=10, variants=10), Thresholds())
    assert finding.fix == FIX_ORDER and "same members in a new order" in finding.message
    assert finding.severity == "warning"
