"""The family vocabulary: which keywords are literals, and the typed results every step returns
(fingerprints, holes, memberships, summaries, what varies)."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.schema.identity import LITERAL_KEYS, digest
from exporter.schema.walk import Budget, TooComplex

# Removed from the frame (the keyword stays): values a service injects per request.
# Numbers a service sets per request (exactly n items, a tenant's range or length): values, like literals.
NUMBERS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
    "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains",
})  # fmt: skip
REMOVED = frozenset((LITERAL_KEYS - {"title", "description"}) | {"example", "pattern", "format"} | NUMBERS)
# Human text: kept with volatile tokens masked (the package docstring says why).
MASKED = frozenset({"title", "description", "$comment"})
UNIONS = ("anyOf", "oneOf")
DEFINITIONS = ("$defs", "definitions")
SETS = frozenset({"type", "required"})  # lists whose order means nothing
NAME_MAX = 64
TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
MAX_VARIANTS = 1_000
MAX_TEXT = 1 << 20  # characters of a regex or grammar masked; past it, the exact text is the family
MAX_REPORTED_NAMES = 32
DEFAULT_BUDGET = Budget()
# What hostile input (or a caller's non-JSON Python value) can raise inside the analysis: it degrades.
HOSTILE = (TooComplex, RecursionError, ValueError, TypeError, AttributeError, KeyError, IndexError)


@dataclass(frozen=True)
class Rules:
    """Which keywords are literals: removed from the frame, or kept with volatile tokens masked."""

    removed: frozenset[str] = REMOVED
    masked: frozenset[str] = MASKED


DEFAULT_RULES = Rules()


@dataclass(frozen=True)
class Hole:
    """A place in the frame whose members may come and go between variants of one family."""

    pointer: str  # JSON pointer of the `anyOf`/`oneOf` list, the `properties` or the definitions map
    kind: str  # the keyword: "anyOf", "oneOf", "properties", "$defs" or "definitions"
    members: tuple[tuple[str, str], ...]  # sorted (key, structure digest); a branch's key is its digest
    leaves: frozenset[str] = frozenset()  # keys of members without subschemas ({"type": "string"})


@dataclass(frozen=True)
class Fingerprint:
    """What a spec contributes to its family: the frame digest and the members of its holes."""

    frame: str  # digest of the frame; for a non-JSON spec, of its kind and its text with literals masked
    shape: str  # digest of the whole structure, holes filled: equal shapes are one spec up to literals
    holes: tuple[Hole, ...]
    kind: str  # "schema", "json" (JSON that is not an object), "regex", "grammar"
    size: int  # subschemas in the frame (outside the holes); characters for a regex or grammar
    name: str  # readable, from structure only
    degraded: bool = False  # over the budget or malformed: the exact spec is its own family
    # a digest of the root title where it names the model (definitions.root_name), left out of the
    # frame and shape: specs under two such names join only at an equal shape, never through holes
    named: str = ""

    @property
    def key(self) -> str:
        """The family id this spec gives the family it founds (12 hex digits, like schema_hash)."""
        return digest(f"{self.frame}|{self.shape}")


@dataclass(frozen=True)
class Membership:
    """Where `FamilyIndex.add` put a spec."""

    family: str  # the family id (12 hex digits): the key of the family's first spec still held
    new: bool  # the spec founded a family
    absorbed: tuple[str, ...] = ()  # ids given out before that now mean `family` (confirmed or bridged)


@dataclass(frozen=True)
class FamilySummary:
    family: str
    frame: str
    kind: str
    size: int
    name: str
    specs: int  # specs added to it (including the families it absorbed)
    variants: int  # distinct variants (literal-free shapes) remembered
    confirmed: bool  # reached the quorum (always, for a family of one shape)
    holes: tuple[tuple[str, str, int], ...]  # (pointer, kind, distinct members in those variants)


@dataclass(frozen=True)
class UnionVariation:
    pointer: str  # of the `anyOf`/`oneOf` list, in the first variant that has it
    variants: int  # variants that have this union
    subsets: int  # distinct branch sets among them
    branches: int  # distinct branches (by literal-free structure) over all of them


@dataclass(frozen=True)
class OptionalVariation:
    pointer: str  # of the `properties` map, in the first variant that has it
    variants: int  # variants that have this object
    names: tuple[tuple[str, int], ...]  # (property name, variants it is present in), those not in all


@dataclass(frozen=True)
class Variation:
    """What differs between the variants of one family; pointers and counts, never values."""

    variants: int
    literals: tuple[tuple[str, int], ...]  # (pointer, variants differing from the commonest value)
    unions: tuple[UnionVariation, ...]
    optional: tuple[OptionalVariation, ...]
    degraded: bool = False
    # (pointer, distinct orders) of lists whose members never change but whose order does (an enum, a
    # union's branches, `required`, a `type` list): order means nothing in JSON Schema, yet each order
    # is a new string for the engine's cache.
    orders: tuple[tuple[str, int], ...] = ()
    # (pointer of the definitions map, or `/title` for the root model's own name; distinct name sets)
    # where variants differ only in what their models are called (a tenant in a model's name)
    names: tuple[tuple[str, int], ...] = ()

    @property
    def order_only(self) -> bool:
        """Nothing but order varies: the fix is a canonical order at the source."""
        return bool(self.orders) and not (self.literals or self.unions or self.optional or self.names)

    @property
    def names_only(self) -> bool:
        """Nothing but model names (definitions', the root's; perhaps order) varies: the fix is stable
        model names."""
        return bool(self.names) and not (self.literals or self.unions or self.optional)

    def lines(self) -> tuple[str, ...]:
        """One line per finding, e.g. "/anyOf: 37 distinct subsets of 12 branches"."""
        out = [
            f"{u.pointer or '/'}: {u.subsets} distinct subsets of {u.branches} branches" for u in self.unions
        ]
        for o in self.optional:
            shown = ", ".join(f"{n} ({k}/{o.variants})" for n, k in o.names[:8])
            more = f", +{len(o.names) - 8}" if len(o.names) > 8 else ""
            out.append(f"{o.pointer}: optional properties come and go: {shown}{more}")
        out += [
            f"{p or 'text'}: literal differs in {n} of {self.variants} variants" for p, n in self.literals
        ]
        out += [f"{p}: the same members in {n} different orders" for p, n in self.orders]
        out += [
            f"{p}: the same model under {n} different names"
            if p == "/title"
            else f"{p}: the same definitions under {n} different sets of names"
            for p, n in self.names
        ]
        return tuple(out)

    def parts(self) -> tuple[tuple[str, str, int], ...]:
        """(pointer, what, how many) in the order of `lines`: "branches" (distinct subsets), "optional"
        (properties that come and go), "literal" (variants differing), "order" (distinct orders of the
        same members), "names" (distinct sets of definition names); a text spec's pointer is ""."""
        return (
            *((u.pointer or "/", "branches", u.subsets) for u in self.unions),
            *((o.pointer, "optional", len(o.names)) for o in self.optional),
            *((p, "literal", n) for p, n in self.literals),
            *((p, "order", n) for p, n in self.orders),
            *((p, "names", n) for p, n in self.names),
        )
