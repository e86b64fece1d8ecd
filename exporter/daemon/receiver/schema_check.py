"""A probe's claim about a spec, checked against its text: the daemon recomputes the schema and shape
hashes with the probe's own rule (`exporter.schema.identity.identify`, which the probe calls too) and
reads the title from the text.

Why: a schema hash is what /metrics, /schemas, findings and /schemas/registry (hence `gdx warm`) name a
schema by, for every tenant on the node. Taken on trust, the first probe to report a hash would decide
its text, title and findings: another tenant could report a victim's hash with a text of its own.
A text that does not hash to its claim is refused. A spec whose text was not sent (over
wire.MAX_TEXT_CHARS) cannot be checked: its hash is taken as an unverified claim, with no title.

The recomputation costs about 35 us for a small schema and up to 30 ms for a text of 256 KiB: one
4 MiB `schemas` message held the event loop for up to half a second. So the listener has a large
message read in a child process (`message_check`, which calls `identities`) before the store applies it
(`check` with the identity found there); the store never sees the spec, nor titles or analyses it, before.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from exporter import wire
from exporter.daemon.receiver.admission import title_label
from exporter.schema import identity

MAX_CHECKED = 20_000  # exact texts whose identity is remembered (a reconnect resends every text)


@dataclass(frozen=True, slots=True)
class TextIdentity:
    schema_hash: str
    shape_hash: str
    title: str
    label: str = ""  # the title as schema_info's label shows it (admission.title_label)
    screens: tuple[identity.Screen, ...] = ()  # the guard's first test (identity.screen_key)


def identify(kind: str, text: str) -> TextIdentity:
    """The identity the probe gives one exact spec string (`identity.identify`), with its title's label."""
    found = identity.identify(kind, text)
    return TextIdentity(
        found.schema_hash, found.shape_hash, found.title, title_label(found.title), found.screens
    )


@dataclass(frozen=True, slots=True)
class CheckedSpec:
    """What the daemon takes from a spec's metadata."""

    schema_hash: str
    shape_hash: str
    title: str  # from the text (sanitised as the probe does), never the probe's word; "" unverified
    verified: bool  # the daemon hashed the text itself
    label: str = ""  # the title in schema_info's form
    screens: tuple[identity.Screen, ...] = ()  # from the text; () unverified


Identities = tuple[TextIdentity | None, ...]  # one per spec of a message, None where no text came


class SpecChecker:
    """Recomputes each text's identity once (remembered by the text's digest, bounded). Thread-safe:
    the event loop calls it, and the listener's check process holds one of its own."""

    def __init__(self) -> None:
        self._known: OrderedDict[bytes, TextIdentity] = OrderedDict()
        self._lock = threading.Lock()

    def identity(self, kind: str, text: str) -> TextIdentity:
        key = hashlib.sha256(f"{kind}\0{text}".encode("utf-8", "surrogatepass")).digest()
        with self._lock:
            found = self._known.get(key)
            if found is not None:
                self._known.move_to_end(key)
                return found
        found = identify(kind, text)  # outside the lock: the loop's small checks never wait on it
        with self._lock:
            self._known[key] = found
            if len(self._known) > MAX_CHECKED:
                self._known.popitem(last=False)
        return found

    def identities(self, msg: wire.SchemasMessage) -> Identities:
        """Every text's identity in `msg`, in order (blocking: the check process calls it)."""
        return tuple(None if i.text is None else self.identity(i.kind, i.text) for i in msg.schemas)

    def check(self, item: wire.SchemaMeta, found: TextIdentity | None = None) -> CheckedSpec | None:
        """The spec as the daemon will know it, or None when its text does not hash to its claim.
        `found`: its text's identity, computed by `identities` (else here)."""
        if item.text is None:
            return CheckedSpec(item.hash, item.shape, "", verified=False)
        if found is None:
            found = self.identity(item.kind, item.text)
        if (found.schema_hash, found.shape_hash) != (item.hash, item.shape):
            return None
        return CheckedSpec(found.schema_hash, found.shape_hash, found.title, True, found.label, found.screens)
