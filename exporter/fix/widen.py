"""A fix whose proof lost valid outputs, widened where xgrammar enforces more than the schema asks.

The static schema's proof on xgrammar can lose a valid output to xgrammar itself, not to the merge:
no escaped character in a string with a length bound, a `pattern` matched whole where JSON Schema searches
(`xgrammar_overenforced`, exporter/analysis/lint.py). Then the static schema drops those keywords
and the check after decoding holds them instead (each becomes a moved constraint, read from the
request's own schema), and the family is proven again. Name patterns (`patternProperties` on a
closed object) are not dropped: without them the object would accept fewer names, not more.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from exporter.analysis.lint import lint
from exporter.fix.plan import FamilyPlan
from exporter.schema.static import Moved
from exporter.schema.walk import resolve, unescape

RULE = "xgrammar_overenforced"
DROPPED = frozenset({"escapes under maxLength", "escapes under minLength", "pattern matched whole"})


def widened(plan: FamilyPlan) -> tuple[FamilyPlan, tuple[Moved, ...]] | None:
    """The plan with each over-enforced keyword of its static schema moved to the check, and those
    keywords; None when there is none to drop (what was lost is not xgrammar's overreach)."""
    if plan.merged.schema is None:
        return None
    static = copy.deepcopy(plan.merged.schema)
    dropped: list[Moved] = []
    for finding in lint(static, engines=("xgrammar",)):
        if finding.rule != RULE or finding.keyword not in DROPPED:
            continue
        node_pointer, _, token = finding.pointer.rpartition("/")
        key = unescape(token)
        found = resolve(static, "#" + node_pointer)
        if found is None or not isinstance(found[1], dict) or key not in found[1]:
            continue
        del found[1][key]
        dropped.append(Moved(node_pointer, key))
    if not dropped:
        return None
    moved = (*plan.merged.moved, *(m for m in dropped if m not in plan.merged.moved))
    return replace(plan, merged=replace(plan.merged, schema=static, moved=moved)), tuple(dropped)
