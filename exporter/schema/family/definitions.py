"""Definition names are not the shape: a schema whose `$defs`/`definitions` keys (and the `$ref`s to
them, and titles that repeat them) differ from another's only by name is the same schema for its
family. Services make such names per request (Pydantic's `create_model(f"LineItem_{tenant}")`), and
each name is a new string for the engine's cache.

`canonical` renames the root's definitions `d0`, `d1`, ... in the order a fixed traversal first
reaches their `$ref`s (the root before the definitions, each definition when first referenced;
unreferenced ones after, by structure), rewrites every `$ref` to them and every title equal to its
definition's name. Two schemas equal up to definition names give equal canonical schemas; the
original names are returned apart, for what varies. Pure; bounded by the walk budget's node count.

The root's own title is a model's name in the same way when it reads as one (an identifier, as
Pydantic writes the class name: `Order_acme`), not prose (`Cost centre`): `root_name` sets it apart.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import quote

from exporter.schema.family.model import DEFAULT_BUDGET
from exporter.schema.family.names import family_title
from exporter.schema.walk import Budget, TooComplex

DEFINITIONS = ("$defs", "definitions")
PREFIX = "d"
# A title that names a model rather than describing it: an identifier (dots, dashes and generic
# brackets allowed), no spaces.
_MODEL_NAME = re.compile(r"[A-Za-z_][\w.\-\[\],]{0,199}", re.ASCII)
ROOT_NAME = "Model"  # what a root model name reads as for the family (and a fix's fallback name)


def root_name(schema: Any) -> tuple[Any, str | None]:
    """The schema with a root title that names a model replaced by ROOT_NAME, and that name; the
    schema itself and None when its root title is prose or absent."""
    if isinstance(schema, dict):
        title = schema.get("title")
        if isinstance(title, str) and title != ROOT_NAME and _MODEL_NAME.fullmatch(title):
            return {**schema, "title": ROOT_NAME}, title
    return schema, None


def canonical(schema: Any, budget: Budget = DEFAULT_BUDGET) -> tuple[Any, tuple[str, ...]]:
    """The schema with its root definitions renamed canonically, and their original names (in the
    canonical order); the schema itself and () when it has none to rename."""
    if not isinstance(schema, dict):
        return schema, ()
    maps = [(k, schema[k]) for k in DEFINITIONS if isinstance(schema.get(k), dict) and schema[k]]
    if not maps:
        return schema, ()
    order = _order(schema, maps, budget)
    names = {(keyword, name): f"{PREFIX}{i}" for i, (keyword, name) in enumerate(order)}
    refs = {ref: f"#/{keyword}/{names[(keyword, name)]}" for ref, (keyword, name) in _refs(maps).items()}
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in DEFINITIONS and isinstance(value, dict) and value:
            renamed = {
                names[(key, n)]: _rewrite(d, refs, (n, names[(key, n)]), budget) for n, d in value.items()
            }
            result[key] = {new: renamed[new] for new in sorted(renamed, key=lambda n: int(n[len(PREFIX) :]))}
        else:
            result[key] = _rewrite(value, refs, None, budget)
    return result, tuple(name for _, name in order)


def _rewrite(value: Any, refs: dict[str, str], own: tuple[str, str] | None, budget: Budget) -> Any:
    """A copy of `value` with its `$ref`s renamed and, at its top, a title equal to its definition's
    old name given the new one (Pydantic writes the model's name there). Iterative, node-bounded."""
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, bool]] = [(value, top, 0, True)]
    left = budget.max_nodes
    while stack:
        src, parent, slot, first = stack.pop()
        left -= 1
        if left < 0:
            raise TooComplex("definitions: over the node budget")
        if isinstance(src, dict):
            dst: dict[str, Any] = {}
            parent[slot] = dst
            for k, v in src.items():
                if k == "$ref" and isinstance(v, str):
                    dst[k] = _renamed_ref(v, refs)
                elif k == "title" and first and own is not None and v == own[0]:
                    dst[k] = own[1]
                else:
                    dst[k] = None
                    stack.append((v, dst, k, False))
        elif isinstance(src, list):
            items: list[Any] = [None] * len(src)
            parent[slot] = items
            stack.extend((v, items, i, False) for i, v in enumerate(src))
        else:
            parent[slot] = src
    return top[0]


def _refs(maps: list[tuple[str, dict[str, Any]]]) -> dict[str, tuple[str, str]]:
    """Each way a local `$ref` names a root definition (its pointer token escaped, and percent-encoded
    as in a URI fragment) -> (keyword, name)."""
    out: dict[str, tuple[str, str]] = {}
    for keyword, defs in maps:
        for name in defs:
            token = name.replace("~", "~0").replace("/", "~1")
            out[f"#/{keyword}/{token}"] = (keyword, name)
            out.setdefault(f"#/{keyword}/{quote(token, safe=_SAFE)}", (keyword, name))
    return out


_SAFE = "~!$&'()*+,;=:@-._"


def _order(
    schema: dict[str, Any], maps: list[tuple[str, dict[str, Any]]], budget: Budget
) -> list[tuple[str, str]]:
    """(keyword, name) of every root definition, in the order their `$ref`s are first reached."""
    known = _refs(maps)
    order: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    queue: list[Any] = [{k: v for k, v in schema.items() if k not in DEFINITIONS}]
    left = budget.max_nodes
    while queue:
        stack = [queue.pop(0)]
        while stack:
            left -= 1
            if left < 0:
                raise TooComplex("definitions: over the node budget")
            value = stack.pop()
            if isinstance(value, dict):
                ref = value.get("$ref")
                target = known.get(_strip(ref)) if isinstance(ref, str) else None
                if target is not None and target not in seen:
                    seen.add(target)
                    order.append(target)
                    queue.append(dict(maps)[target[0]][target[1]])
                stack.extend(reversed([value[k] for k in sorted(value) if k != "$ref"]))
            elif isinstance(value, list):
                stack.extend(reversed(value))
    rest = [(keyword, name) for keyword, defs in maps for name in defs if (keyword, name) not in seen]
    rest.sort(key=lambda item: (_structure(dict(maps)[item[0]][item[1]]), item[0], item[1]))
    return order + rest


def _structure(value: Any) -> str:
    """A digest of a definition's keys and leaf kinds only (no values, so no literal nor name): the
    order of definitions no `$ref` reaches, the same for variants that differ in literals."""
    parts: list[str] = []
    stack = [value]
    while stack and len(parts) < 10_000:
        item = stack.pop()
        if isinstance(item, dict):
            parts.append("{" + ",".join(sorted(map(str, item))))
            stack.extend(item[k] for k in sorted(item, key=str) if k not in ("title", "description"))
        elif isinstance(item, list):
            parts.append(f"[{len(item)}")
            stack.extend(item)
        else:
            parts.append(type(item).__name__)
    return hashlib.blake2b("|".join(parts).encode(), digest_size=8).hexdigest()


def _strip(ref: str) -> str:
    """A local ref to a root definition, its subpath dropped (`#/$defs/A/properties/x` -> `#/$defs/A`)."""
    parts = ref.split("/")
    return "/".join(parts[:3]) if len(parts) >= 3 and parts[0] == "#" else ref


def _renamed_ref(ref: str, refs: dict[str, str]) -> str:
    head = _strip(ref)
    new = refs.get(head)
    return ref if new is None else new + ref[len(head) :]


def renamed(schema: Any, names: dict[str, str], budget: Budget = DEFAULT_BUDGET) -> Any:
    """The schema with root definitions renamed by `names` (old -> new, keys of either definitions
    map), with their `$ref`s and the titles that repeat an old name."""
    if not isinstance(schema, dict) or not names:
        return schema
    maps = [(k, schema[k]) for k in DEFINITIONS if isinstance(schema.get(k), dict) and schema[k]]
    refs = {
        ref: f"#/{keyword}/{_token(names.get(name, name))}" for ref, (keyword, name) in _refs(maps).items()
    }
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in DEFINITIONS and isinstance(value, dict) and value:
            out: dict[str, Any] = {}
            for n, d in value.items():
                new = names.get(str(n), str(n))
                out[new] = _rewrite(d, refs, (str(n), new), budget)
            result[key] = out
        else:
            result[key] = _rewrite(value, refs, None, budget)
    return result


def _token(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def stable(variants: list[Any], budget: Budget = DEFAULT_BUDGET) -> list[Any]:
    """Variants that differ in their definitions' names, renamed alike: each definition takes what
    its names share across the variants (`LineItem_acme`, `LineItem_globex` -> `LineItem`), else
    `Model{i}`; a root title that names the model, likewise (else `Model`). Variants whose names
    already agree are returned as they are."""
    titled = [root_name(v) for v in variants]
    if len({title for _, title in titled}) > 1:  # the root's own name differs: what they share, or Model
        shared = family_title([title or "" for _, title in titled]) or ROOT_NAME
        variants = [{**v, "title": shared} if title is not None else v for v, title in titled]
    done = [canonical(v, budget) for v in variants]
    if len({tuple(sorted(names)) for _, names in done}) < 2:
        return list(variants)
    width = max(len(names) for _, names in done)
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    for i in range(width):
        shared = family_title([names[i] if i < len(names) else "" for _, names in done])
        name = shared if shared and shared not in taken else f"Model{i}"
        taken.add(name)
        chosen[f"{PREFIX}{i}"] = name
    return [renamed(schema, chosen, budget) for schema, _ in done]
