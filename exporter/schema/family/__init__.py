"""Families of specs: the unit of blame when a service injects per-request values into its schemas.

The engine caches grammars by the exact string, so a value injected per request means a compile per
request. A family is every spec that is the same schema up to
- a literal: `enum`, `const`, `default`, `examples`/`example`, `pattern` and `format` values, and
  the numbers of bounds (`minItems`/`maxItems`, `minimum`/`maximum`, `minLength`/`maxLength` and the
  like: exactly n items per request) are removed (the keyword stays); `description`, `title` and
  `$comment` text is kept with its volatile tokens masked (anything holding a digit: timestamps, ids,
  counters, amounts; month and day names);
- key order and whitespace (the parsed value is hashed, dict keys sorted, `type`/`required` as sets);
- per-request subsets of union branches (`anyOf`/`oneOf`: the tool_choice="required" pattern), of
  optional properties, and of `$defs`/`definitions` that come and go with them.

Why text is masked rather than removed: in JSONSchemaBench many genuinely different schemas differ
from another only in description wording (37 `calculate_area` functions, say); with the text removed
13.6 % of its 4,828 schemas share a family with another, masked 0.87 % (`python -m
tools.bench.families`, docs/families.md). Masking joins the machine-made values services inject (the
timestamp, the tenant id) and keeps human wording apart. Injected *words* (a tenant's name in a
description) split the family; `shape_hash` (identity.py) still shows those variants.

The key: a spec's *frame* is its structure with literals removed, text masked and each union's
branch list, each object's optional properties and each definitions map replaced by a *hole*. A
hole's members are keyed by their own literal-free structure (a branch by its digest, a property or
a definition by its name and digest). Two specs are `same_family` when their frames are equal and,
hole by hole, their members are compatible: equal; or, for a union, sharing a branch that is not a
bare leaf like `{"type": "string"}`; or, for named members, no name with two structures and the
shared names at least a third of the larger side. `FamilyIndex` joins specs by single linkage (a
tool-list subset joins through any earlier subset it shares a tool with) and reports a family joined
through holes once it has a quorum of 4 distinct variants: versions of one schema (v2 adds a
property) look like properties that come and go, but come in twos and threes.

Outputs are digests, JSON pointers, property names and counts: no literal value leaves this module.
Everything is bounded by the walk `Budget` and degrades (the exact spec as its own family) instead of
raising.
"""

from exporter.schema.family.fingerprint import fingerprint, mask_text, of, text_fingerprint, text_kind
from exporter.schema.family.index import FamilyIndex, compatible, same_family
from exporter.schema.family.model import (
    MASKED,
    MAX_TEXT,
    MAX_VARIANTS,
    NUMBERS,
    REMOVED,
    FamilySummary,
    Fingerprint,
    Hole,
    Membership,
    OptionalVariation,
    Rules,
    UnionVariation,
    Variation,
)
from exporter.schema.family.names import family_title, readable_name, shared_title
from exporter.schema.family.variation import Positions, positions, text_positions, variation, what_varies

__all__ = [
    "MASKED",
    "MAX_TEXT",
    "MAX_VARIANTS",
    "NUMBERS",
    "REMOVED",
    "FamilyIndex",
    "FamilySummary",
    "Fingerprint",
    "Hole",
    "Membership",
    "OptionalVariation",
    "Positions",
    "Rules",
    "UnionVariation",
    "Variation",
    "compatible",
    "family_title",
    "fingerprint",
    "mask_text",
    "of",
    "positions",
    "readable_name",
    "same_family",
    "shared_title",
    "text_fingerprint",
    "text_kind",
    "text_positions",
    "variation",
    "what_varies",
]
