"""What varies between a family's variants: each variant's positions (aligned keys, digests and
pointers), then the literals, union branch sets and optional properties that differ."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from exporter.schema.family.definitions import DEFINITIONS, PREFIX, canonical, root_name
from exporter.schema.family.fingerprint import analyse_structure, short_digest
from exporter.schema.family.model import (
    DEFAULT_BUDGET,
    DEFAULT_RULES,
    HOSTILE,
    MAX_REPORTED_NAMES,
    MAX_VARIANTS,
    UNIONS,
    OptionalVariation,
    Rules,
    UnionVariation,
    Variation,
)
from exporter.schema.identity import LITERAL_KEYS, canonical_json
from exporter.schema.variants import literals
from exporter.schema.walk import TAG_UNIONS, Budget, children, cpu_clock, escape, is_format, walk


@dataclass(frozen=True)
class Positions:
    """One variant's schema positions under aligned keys (a union branch keyed by its structure,
    not its index, so that subsets and reorderings line up). Digests and pointers only: the daemon
    keeps these per spec instead of the text, and `variation` compares them."""

    nodes: dict[str, str]  # aligned key -> real pointer
    literals: dict[str, tuple[str, str]]  # aligned key -> (real pointer, digest)
    unions: dict[str, frozenset[str]]  # aligned key of the list -> branch keys
    optional: dict[str, frozenset[str]]  # aligned key of the properties map -> optional names
    # aligned key of a list whose order means nothing -> (real pointer, members digest, order digest)
    orders: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # the root definitions, renamed canonically for alignment (definitions.py): (canonical pointer,
    # this variant's own pointer) each; the pointers above are canonical where there are any
    names: tuple[tuple[str, str], ...] = ()
    title: str = ""  # the digest of the root title where it names the model, as Fingerprint.named


# Lists whose order carries no meaning in JSON Schema (besides a union's branches): compared as sets
# for what varies, their order reported on its own.
ORDERLESS = ("enum", "required", "type")


def _literal_digest(value: Any) -> str:
    """The same digest as variants.literals."""
    text = canonical_json(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def _orderless(value: list[Any]) -> tuple[str, str]:
    """(members digest, order digest) of a list: equal members digests and unequal order digests are
    the same members in another order."""
    members = [_literal_digest(v) for v in value]
    return _literal_digest(sorted(members)), _literal_digest(members)


RANK_NODES = 200_000  # JSON values read per schema to rank same-shape branches; past it, by place


def _size_within(value: Any, left: list[int]) -> bool:
    """Counts `value`'s JSON nodes against the allowance in `left[0]`; False once it runs out."""
    stack = [value]
    while stack:
        left[0] -= 1
        if left[0] < 0:
            return False
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _branch_ranks(
    branches: list[tuple[str, str, Any]], shapes: dict[str, str], left: list[int]
) -> dict[str, int]:
    """Branches of one union that share a literal-free shape (tools that differ only in their name),
    ranked by their whole content rather than their place: the same branches in another order line
    up with themselves, so a reorder reads as order and not as every literal changing. Reading them
    is bounded per schema (`left`, RANK_NODES); past it they keep their place."""
    by_shape: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for keyword, pointer, child in branches:
        key = (keyword, shapes.get(pointer, pointer.rsplit("/", 1)[1]))
        by_shape.setdefault(key, []).append((pointer, child))
    ranks: dict[str, int] = {}
    for same in by_shape.values():
        if len(same) > 1 and all(_size_within(child, left) for _, child in same):
            ordered = sorted(same, key=lambda item: (_literal_digest(item[1]), item[0]))
            ranks.update((pointer, rank) for rank, (pointer, _) in enumerate(ordered))
        elif len(same) > 1:
            ranks.update((pointer, rank) for rank, (pointer, _) in enumerate(same))
    return ranks


def _positions(schema: Any, budget: Budget, rules: Rules) -> Positions:
    schema, original = canonical(schema, budget)
    schema, model = root_name(schema)
    names = tuple(
        (f"/{keyword}/{PREFIX}{i}", f"/{keyword}/{escape(name)}")
        for i, name in enumerate(original)
        for keyword in DEFINITIONS
        if isinstance(schema.get(keyword), dict) and f"{PREFIX}{i}" in schema[keyword]
    )
    shapes: dict[str, str] = {}
    analyse_structure(schema, rules, budget, shapes)
    real_literals = literals(schema, budget)  # the standard literal keys, digested as variants does
    extra = (rules.removed | rules.masked) - LITERAL_KEYS
    keys = rules.removed | rules.masked
    aligned: dict[str, str] = {"": ""}
    nodes: dict[str, str] = {}
    lits: dict[str, tuple[str, str]] = {}
    unions: dict[str, frozenset[str]] = {}
    optional: dict[str, frozenset[str]] = {}
    orders: dict[str, tuple[str, str, str]] = {}
    left = [RANK_NODES]
    for node in walk(schema, budget, follow_refs=False, tags=True):
        a = aligned.get(node.pointer, node.pointer)
        nodes[a] = node.pointer
        s = node.schema
        for key in keys & s.keys() if not is_format(s) else ():
            real = f"{node.pointer}/{escape(key)}"
            found = real_literals.get(real)
            if found is None and key in extra:
                found = _literal_digest(s[key])
            if found is not None:
                lits[f"{a}/{escape(key)}"] = (real, found)
        for key in ORDERLESS:
            value = s.get(key)
            if isinstance(value, list) and len(value) > 1 and not is_format(s):
                real = f"{node.pointer}/{key}"
                members, order = _orderless(value)
                orders[f"{a}/{key}"] = (real, members, order)
                if f"{a}/{key}" in lits:  # an enum: its members are the literal, its order apart
                    lits[f"{a}/{key}"] = (real, members)
        props = s.get("properties")
        if isinstance(props, dict):
            required = s.get("required")
            needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
            optional[f"{a}/properties"] = frozenset(n for n in props if n not in needed)
        unions_here = (*UNIONS, *TAG_UNIONS) if is_format(s) else UNIONS
        kids = [(k, p, c) for k, p, c in children(node.pointer, s, tags=True) if isinstance(c, dict)]
        ranks = _branch_ranks([(k, p, c) for k, p, c in kids if k in unions_here], shapes, left)
        for keyword, pointer, _child in kids:
            token = pointer.rsplit("/", 1)[1]
            if keyword in unions_here:
                shape = shapes.get(pointer, token)
                rank = ranks.get(pointer, 0)
                token = f"~{shape}" + (f"~{rank + 1}" if rank else "")
            aligned[pointer] = f"{a}/{escape(keyword)}/{token}"
        for keyword in unions_here:
            branches = s.get(keyword)
            if isinstance(branches, list):
                base = f"{node.pointer}/{keyword}"
                tokens = [aligned.get(f"{base}/{i}", "").rsplit("/", 1)[-1] for i in range(len(branches))]
                unions[f"{a}/{keyword}"] = frozenset(t for t in tokens if t)
                if len(tokens) > 1:
                    members, order = _orderless(tokens)
                    orders[f"{a}/{keyword}"] = (base, members, order)
    return Positions(nodes, lits, unions, optional, orders, names, short_digest(model) if model else "")


def positions(schema: Any, budget: Budget = DEFAULT_BUDGET, rules: Rules = DEFAULT_RULES) -> Positions | None:
    """One parsed variant's positions, or None over the budget or malformed."""
    try:
        return _positions(schema, budget, rules)
    except HOSTILE:
        return None


def text_positions(text: str) -> Positions:
    """A regex or grammar: one literal position, the whole text (its literal runs are what varies)."""
    return Positions({"": ""}, {"/": ("", short_digest(text))}, {}, {})


def what_varies(
    variants: Sequence[Any], budget: Budget = DEFAULT_BUDGET, rules: Rules = DEFAULT_RULES, limit: int = 20
) -> Variation:
    """For the parsed variants of one family: the literal pointers that differ (compared only where
    the enclosing schema exists), the unions whose branch set varies, and the optional properties that
    come and go. At most MAX_VARIANTS variants, each within `budget.max_nodes`, all within
    `budget.max_seconds`; a variant over it is skipped and the result marked degraded."""
    if len(variants) < 2:  # nothing to differ from: most families of a schema set or a log are one spec
        return Variation(len(variants), (), (), ())
    deadline = cpu_clock() + budget.max_seconds
    per: list[Positions] = []
    degraded = len(variants) > MAX_VARIANTS
    for v in variants[:MAX_VARIANTS]:
        left = deadline - cpu_clock()
        if left <= 0:
            degraded = True
            break
        found = positions(v, Budget(budget.max_nodes, left), rules)
        if found is None:
            degraded = True
        else:
            per.append(found)
    return variation(per, limit, degraded)


def variation(per: Sequence[Positions], limit: int = 20, degraded: bool = False) -> Variation:
    """What differs between these variants' positions (see `what_varies`). Where the definitions'
    names are the same in every variant, pointers read with those names; where they differ, with the
    canonical ones (`/$defs/d0`): no variant's own name (a tenant's, say) is reported as the place."""
    named = {p.names for p in per if p.names}
    real = _real(next(iter(named))) if len(named) == 1 else _same
    names = _varying_names(per)
    return Variation(
        len(per),
        tuple((real(p), n) for p, n in _varying_literals(per, limit)),
        tuple(replace(u, pointer=real(u.pointer)) for u in _varying_unions(per, limit)),
        tuple(replace(o, pointer=real(o.pointer)) for o in _varying_optional(per, limit)),
        degraded,
        tuple((real(p), n) for p, n in _varying_orders(per, limit)),
        names,
    )


def _same(pointer: str) -> str:
    return pointer


def _real(names: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    """Canonical definition pointers back to the names every variant shares."""

    def real(pointer: str) -> str:
        for canonical_pointer, own in names:
            if pointer == canonical_pointer or pointer.startswith(canonical_pointer + "/"):
                return own + pointer[len(canonical_pointer) :]
        return pointer

    return real


def _varying_names(per: Sequence[Positions]) -> tuple[tuple[str, int], ...]:
    """The definitions map whose names differ between variants otherwise aligned, and the root title
    where it names the model: (pointer, distinct name sets). The pointer is the map's or `/title`,
    never a name."""
    out: list[tuple[str, int]] = []
    found = [p.names for p in per if p.names]
    distinct = {tuple(own for _, own in names) for names in found}
    if len(distinct) > 1:
        out.append((f"/{found[0][0][0].split('/')[1]}", len(distinct)))
    titles = {p.title for p in per if p.title}
    if len(titles) > 1:
        out.append(("/title", len(titles)))
    return tuple(out)


def _first(per: Sequence[Positions], key: str, table: str) -> str:
    for p in per:
        if table == "nodes" and key in p.nodes:
            return p.nodes[key]
        if table == "literals" and key in p.literals:
            return p.literals[key][0]
    return key


def _varying_literals(per: Sequence[Positions], limit: int) -> tuple[tuple[str, int], ...]:
    keys = sorted({k for p in per for k in p.literals})
    ranked = []
    for key in keys:
        parent = key.rsplit("/", 1)[0]
        values = Counter(p.literals.get(key, ("", ""))[1] for p in per if parent in p.nodes)
        differ = sum(values.values()) - values.most_common(1)[0][1]
        if differ > 0:
            ranked.append((_first(per, key, "literals"), differ))
    ranked.sort(key=lambda item: (-item[1], item[0]))
    return tuple(ranked[:limit])


def _varying_unions(per: Sequence[Positions], limit: int) -> tuple[UnionVariation, ...]:
    out = []
    for key in sorted({k for p in per for k in p.unions}):
        sets = [p.unions[key] for p in per if key in p.unions]
        distinct = set(sets)
        if len(distinct) > 1:
            branches = frozenset().union(*sets)
            parent, keyword = key.rsplit("/", 1)
            pointer = f"{_first(per, parent, 'nodes')}/{keyword}"
            out.append(UnionVariation(pointer, len(sets), len(distinct), len(branches)))
    out.sort(key=lambda u: (-u.subsets, u.pointer))
    return tuple(out[:limit])


def _varying_optional(per: Sequence[Positions], limit: int) -> tuple[OptionalVariation, ...]:
    out = []
    for key in sorted({k for p in per for k in p.optional}):
        sets = [p.optional[key] for p in per if key in p.optional]
        present = Counter(n for s in sets for n in s)
        names = tuple(sorted((n, k) for n, k in present.items() if k < len(sets)))
        if names:
            parent = key.rsplit("/", 1)[0]
            pointer = f"{_first(per, parent, 'nodes')}/properties"
            out.append(OptionalVariation(pointer, len(sets), names[:MAX_REPORTED_NAMES]))
    out.sort(key=lambda o: (-len(o.names), o.pointer))
    return tuple(out[:limit])


def _varying_orders(per: Sequence[Positions], limit: int) -> tuple[tuple[str, int], ...]:
    """Lists whose members are the same in every variant that has them and whose order is not."""
    out = []
    for key in sorted({k for p in per for k in p.orders}):
        found = [p.orders[key] for p in per if key in p.orders]
        orders = {order for _, _, order in found}
        if len(orders) > 1 and len({members for _, members, _ in found}) == 1:
            out.append((found[0][0], len(orders)))
    out.sort(key=lambda item: (-item[1], item[0]))
    return tuple(out[:limit])
