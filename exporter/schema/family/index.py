"""Joining fingerprints into families: the pairwise test (`same_family`) and the bounded index
that links specs by single linkage and reports a family once it has a quorum of variants."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from exporter.schema.family.model import UNIONS, FamilySummary, Fingerprint, Membership
from exporter.schema.identity import digest
from exporter.schema.walk import TAG_UNIONS


def compatible(kind: str, a: Mapping[str, str], b: Mapping[str, str], leaves: Iterable[str] = ()) -> bool:
    """Whether two member maps of one hole can be variants of one schema.

    Equal maps always are. A union's branch lists are when they share a branch that is not a leaf in
    `leaves` (a whole tool object, not a bare `{"type": "string"}` that any two unions share). Named
    members (properties, definitions) are when no shared name has two structures and the shared names
    are at least a third of the larger side: random subsets of one set of optional properties overlap
    that much, two unrelated objects that happen to share an `id` do not."""
    if a == b:
        return True
    shared = a.keys() & b.keys()
    if kind in UNIONS or kind in TAG_UNIONS:
        skip = set(leaves)
        return any(k not in skip for k in shared)
    if any(a[k] != b[k] for k in shared):
        return False
    return 3 * len(shared) >= max(len(a), len(b))


def same_family(a: Fingerprint, b: Fingerprint) -> bool:
    """The pairwise test: equal frames and every hole compatible (equal shapes where the root models'
    names differ: a tenant in a model's name, not two models that share some properties). FamilyIndex
    also joins through a third spec that each is compatible with, and asks for a quorum of variants
    first."""
    if a.frame != b.frame:
        return False
    if a.degraded or b.degraded:
        return a.key == b.key
    if a.named != b.named:  # two model names: the same structure under either, or two models
        return a.shape == b.shape
    theirs = {h.pointer: h for h in b.holes}
    for hole in a.holes:
        other = theirs.get(hole.pointer)
        if other is None or not compatible(
            hole.kind, dict(hole.members), dict(other.members), hole.leaves | other.leaves
        ):
            return False
    return len(theirs) == len(a.holes)


@dataclass
class _Family:
    id: str
    seq: int
    founder: Fingerprint
    variants: OrderedDict[str, Fingerprint]  # by shape, most recent last, at most max_variants
    specs: int = 1
    confirmed: bool = False  # reached the quorum: its variants are reported as one family

    def reported(self) -> set[str]:
        """The ids its specs were given: the family's once confirmed, each variant's own before."""
        return {self.id} if self.confirmed else {v.key for v in self.variants.values()}


class FamilyIndex:
    """Specs joined into families by single linkage: a spec joins every family of its frame that holds
    a variant it is `same_family` with, and bridges them into the oldest (a tool-list subset joins
    through any earlier subset it shares a tool with). Comparing with variants, not with the union of
    all members seen, keeps a family from snowballing: a spec must be close to one real variant.

    Quorum: variants that differ only in literals are one family at once, but a family joined through
    holes is reported as one only once it holds `quorum` distinct variants (literal-free shapes);
    before that each variant keeps its own id. Per-request subsets produce many variants quickly; two
    or three versions of a schema (a property added in v2) look the same but stay apart, and a
    handful of compiles is not worth blaming anyway. When a family is confirmed or bridged, the ids it
    replaces come back in `Membership.absorbed`.

    Bounded: at most `max_families` (least recently used dropped first), `max_per_frame` of one frame
    and `max_variants` distinct variants remembered per family (least recent dropped). Deterministic:
    the same specs in the same order give the same ids; a family's id is its first spec's `key`."""

    def __init__(
        self, max_families: int = 1024, max_variants: int = 16, max_per_frame: int = 64, quorum: int = 4
    ) -> None:
        self.max_families = max_families
        self.max_variants = max(max_variants, quorum)
        self.max_per_frame = max_per_frame
        self.quorum = max(1, quorum)
        self._families: OrderedDict[str, _Family] = OrderedDict()
        self._by_frame: dict[str, list[str]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._families)

    def add(self, fp: Fingerprint) -> Membership:
        candidates = [self._families[i] for i in self._by_frame.get(fp.frame, ())]
        fits = [f for f in candidates if any(same_family(fp, v) for v in reversed(f.variants.values()))]
        if not fits:
            found = self._found(fp)
            return Membership(found.id if found.confirmed else fp.key, True)
        keep = min(fits, key=lambda f: f.seq)
        before = set().union(*(f.reported() for f in fits))
        for other in fits:
            if other is not keep:
                for shape, variant in other.variants.items():
                    self._remember(keep, shape, variant)
                keep.specs += other.specs
                keep.confirmed = keep.confirmed or other.confirmed
                self._drop(other.id)
        self._remember(keep, fp.shape, fp)
        keep.specs += 1
        keep.confirmed = keep.confirmed or len(keep.variants) >= self.quorum
        self._families.move_to_end(keep.id)
        family = keep.id if keep.confirmed else fp.key
        return Membership(family, False, tuple(sorted(before - keep.reported())))

    def summary(self, family: str) -> FamilySummary | None:
        f = self._families.get(family)
        if f is None:
            return None
        seen: dict[tuple[str, str], set[str]] = {}
        for variant in f.variants.values():
            for h in variant.holes:
                seen.setdefault((h.pointer, h.kind), set()).update(k for k, _ in h.members)
        holes = tuple((p, k, len(m)) for (p, k), m in sorted(seen.items()))
        fp = f.founder
        return FamilySummary(
            f.id, fp.frame, fp.kind, fp.size, fp.name, f.specs, len(f.variants), f.confirmed, holes
        )

    def _remember(self, family: _Family, shape: str, fp: Fingerprint) -> None:
        family.variants[shape] = fp
        family.variants.move_to_end(shape)
        while len(family.variants) > self.max_variants:
            family.variants.popitem(last=False)

    def _found(self, fp: Fingerprint) -> _Family:
        family_id = fp.key
        while family_id in self._families:
            family_id = digest(family_id)
        ids = self._by_frame.get(fp.frame, [])
        if len(ids) >= self.max_per_frame:
            self._drop(ids[0])
        self._seq += 1
        family = _Family(family_id, self._seq, fp, OrderedDict({fp.shape: fp}), 1, self.quorum <= 1)
        self._families[family_id] = family
        self._by_frame.setdefault(fp.frame, []).append(family_id)
        while len(self._families) > self.max_families:
            self._drop(next(iter(self._families)))
        return family

    def _drop(self, family_id: str) -> None:
        family = self._families.pop(family_id, None)
        if family is None:
            return
        ids = self._by_frame.get(family.founder.frame, [])
        if family_id in ids:
            ids.remove(family_id)
        if not ids:
            self._by_frame.pop(family.founder.frame, None)
