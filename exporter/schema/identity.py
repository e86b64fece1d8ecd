"""Identity of a grammar request: `schema_hash` (what the user can look up) and `shape_hash`.

Engines cache by the exact string they receive; people think in schemas. `schema_hash` is the first
12 hex digits of SHA-256 over the canonical JSON (sorted keys, no spaces, UTF-8), so two
serialisations of one schema share it and `gdx hash FILE` reproduces it. A spec that is not JSON
(regex, EBNF/Lark, choice) is hashed as its string. `shape_hash` drops the literal values a
per-request injection changes (enum members, const, default, examples, title, description) and keeps
the structure, so many schema hashes under one shape hash is the signature of a dynamic schema.
Standard library only: this module runs inside engine processes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

HASH_DIGITS = 12
# Keys whose values are literals a per-request injection changes; the shape keeps that they exist.
LITERAL_KEYS = frozenset({"enum", "const", "default", "examples", "title", "description"})
# Under these keys the children are names (of properties, definitions), not keywords.
NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_TITLE_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
TITLE_MAX = 64


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False), with one encoder
    instead of one per call."""
    return _CANONICAL.encode(value)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]


def parse_spec(spec: str) -> Any | None:
    """The decoded JSON of a spec string, or None when it is not JSON (a regex, a grammar)."""
    try:
        return json.loads(spec)
    except (ValueError, RecursionError):
        return None


def _hash_of(spec: str, parsed: Any | None, transform: Callable[[Any], Any]) -> str:
    """Hash of the canonical JSON of transform(spec); the plain string's hash when it is not JSON
    (or too deep to serialise), so every spec gets a stable identity."""
    value = parsed if parsed is not None else parse_spec(spec)
    if value is None:
        return digest(spec)
    try:
        return digest(canonical_json(transform(value)))
    except (ValueError, RecursionError):
        return digest(spec)


def schema_hash(spec: str, parsed: Any | None = None) -> str:
    """Canonical hash of a JSON spec; the plain string's hash when it is not JSON."""
    return _hash_of(spec, parsed, lambda value: value)


def shape_of(node: Any, in_names: bool = False) -> Any:
    """The structure with literal values replaced by "*" (keywords and property names kept)."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, child in node.items():
            if in_names:
                out[key] = shape_of(child)
            elif key in LITERAL_KEYS:
                out[key] = "*"  # the keyword stays, its literal goes
            else:
                out[key] = shape_of(child, key in NAME_MAPS)
        return out
    if isinstance(node, list):
        return [shape_of(child) for child in node]
    return node


def shape_hash(spec: str, parsed: Any | None = None) -> str:
    """Hash of the structure with literal values removed; equals schema_hash for non-JSON specs."""
    return _hash_of(spec, parsed, shape_of)


# Request kinds whose spec is a JSON Schema, identified by its canonical form; every other kind (regex,
# grammar, choice, structural tag) is identified by its exact string, as the engine caches it.
JSON_KINDS = frozenset({"json", "json_object"})


def _json_value(kind: str, text: str, parsed: Any | None) -> Any | None:
    """The decoded spec of a JSON Schema kind, or None: another kind, or a text that is not JSON."""
    if kind not in JSON_KINDS:
        return None
    return parsed if parsed is not None else parse_spec(text)


def spec_hashes(kind: str, text: str, parsed: Any | None = None) -> tuple[str, str]:
    """(schema_hash, shape_hash) of a spec of a request kind, as the probe labels it and `gdx lint`
    reports it: a JSON Schema's canonical hashes (the string's when it does not parse), any other
    kind's exact string for both."""
    value = _json_value(kind, text, parsed)
    if value is None:
        exact = digest(text)
        return exact, exact
    return schema_hash(text, value), shape_hash(text, value)


def spec_shape_hash(kind: str, text: str, parsed: Any | None = None) -> str:
    """`spec_hashes(kind, text, parsed)[1]`, without the schema hash."""
    value = _json_value(kind, text, parsed)
    return digest(text) if value is None else shape_hash(text, value)


def spec_schema_hash(kind: str, text: str, parsed: Any | None = None) -> str:
    """`spec_hashes(kind, text, parsed)[0]`, without the shape hash."""
    value = _json_value(kind, text, parsed)
    return digest(text) if value is None else schema_hash(text, value)


def title_of(parsed: Any) -> str:
    """The schema's top-level `title`, sanitised for a label ([A-Za-z0-9_.-], at most 64), or ''."""
    if not isinstance(parsed, dict) or not isinstance(parsed.get("title"), str):
        return ""
    return sanitize_title(parsed["title"])


def sanitize_title(title: str) -> str:
    return _TITLE_BAD.sub("_", title).strip("_")[:TITLE_MAX]


# A word of a sanitised title with 3 or more digits, or nothing but digits and separators.
_VOLATILE_WORD = re.compile(r"(?:[^_]*\d){3}[^_]*|[\d.-]+")
_MASKED_RUN = re.compile(r"#(?:_#)+")


def mask_title(title: str) -> str:
    """A sanitised title with each `_`-separated word holding 3 or more digits (a timestamp, a request
    or tenant id) or nothing but digits as `#`, so that a value injected into a title never becomes a
    label: `InvoiceV2` stays, `Answer_2026-01-10T00_00_58Z_req-b8dc15ba` becomes `Answer_#`. Empty
    when nothing but such words is left."""
    masked = _MASKED_RUN.sub(
        "#", "_".join("#" if _VOLATILE_WORD.fullmatch(w) else w for w in title.split("_"))
    )
    return masked if any(c.isalpha() for c in masked) else ""


Screen = tuple[int, int]


def screen_key(value: Any) -> Screen:
    """What the guard can tell of a request's JSON Schema without serialising or hashing it: an exact
    string's (-1, length); a decoded object's (its keys, its `properties`' keys, -1 without). A cheap
    first test before the hash (probe/guard.py): many schemas share one, and equal schemas never differ."""
    if isinstance(value, str):
        return -1, len(value)
    if isinstance(value, dict):
        properties = value.get("properties")
        return len(value), len(properties) if isinstance(properties, dict) else -1
    return -2, 0


@dataclass(frozen=True, slots=True)
class SpecIdentity:
    schema_hash: str
    shape_hash: str
    title: str
    # screen_key of the exact string and of its decoded object: how it came, not who it is
    screens: tuple[Screen, ...] = field(default=(), compare=False)


def identify(kind: str, text: str) -> SpecIdentity:
    """The identity of one exact spec string of a request kind (`spec_hashes`, the rule `gdx lint`
    reports by), as the probe names a spec and the daemon checks it; never raises (a spec that cannot
    be parsed or canonicalised is identified by its string)."""
    try:
        parsed = parse_spec(text) if kind in JSON_KINDS else None
        if parsed is not None:
            schema, shape = spec_hashes(kind, text, parsed)
            return SpecIdentity(schema, shape, title_of(parsed), (screen_key(text), screen_key(parsed)))
    except Exception:
        pass
    exact = digest(text)
    return SpecIdentity(exact, exact, "", (screen_key(text),))
