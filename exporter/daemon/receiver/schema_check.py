"""A probe's claim about a spec, checked against its text: the daemon recomputes the schema and shape
hashes with the probe's own rule (`exporter.probe.spec_identity.identify`, repeated here: the daemon
never imports the probe; both rest on `exporter.schema.identity`) and reads the title from the text.

Why: a schema hash is what /metrics, /schemas, findings and /schemas/registry (hence `gdx warm`) name a
schema by, for every tenant on the node. Taken on trust, the first probe to report a hash would decide
its text, title and findings: another tenant could report a victim's hash with a text of its own.
A text that does not hash to its claim is refused. A spec whose text was not sent (over
wire.MAX_TEXT_CHARS) cannot be checked: its hash is taken as an unverified claim, with no title.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

from exporter import wire
from exporter.schema.identity import JSON_KINDS, digest, parse_spec, spec_hashes, title_of

MAX_CHECKED = 20_000  # exact texts whose identity is remembered (a reconnect resends every text)


@dataclass(frozen=True, slots=True)
class SpecIdentity:
    schema_hash: str
    shape_hash: str
    title: str


def identify(kind: str, text: str) -> SpecIdentity:
    """The identity the probe gives one exact spec string of a request kind (its `identify`, line for
    line): a JSON kind's canonical hashes and sanitised title, else the string's hash for both."""
    try:
        parsed = parse_spec(text) if kind in JSON_KINDS else None
        if parsed is not None:
            schema, shape = spec_hashes(kind, text, parsed)
            return SpecIdentity(schema, shape, title_of(parsed))
    except Exception:
        pass
    exact = digest(text)
    return SpecIdentity(exact, exact, "")


@dataclass(frozen=True, slots=True)
class CheckedSpec:
    """What the daemon takes from a spec's metadata."""

    schema_hash: str
    shape_hash: str
    title: str  # from the text (sanitised as the probe does), never the probe's word; "" unverified
    verified: bool  # the daemon hashed the text itself


class SpecChecker:
    """Recomputes each text's identity once (remembered by the text's digest, bounded)."""

    def __init__(self) -> None:
        self._known: OrderedDict[bytes, SpecIdentity] = OrderedDict()

    def identity(self, kind: str, text: str) -> SpecIdentity:
        key = hashlib.sha256(f"{kind}\0{text}".encode("utf-8", "surrogatepass")).digest()
        found = self._known.get(key)
        if found is None:
            found = self._known[key] = identify(kind, text)
            if len(self._known) > MAX_CHECKED:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(key)
        return found

    def check(self, item: wire.SchemaMeta) -> CheckedSpec | None:
        """The spec as the daemon will know it, or None when its text does not hash to its claim."""
        if item.text is None:
            return CheckedSpec(item.hash, item.shape, "", verified=False)
        found = self.identity(item.kind, item.text)
        if (found.schema_hash, found.shape_hash) != (item.hash, item.shape):
            return None
        return CheckedSpec(found.schema_hash, found.shape_hash, found.title, verified=True)
