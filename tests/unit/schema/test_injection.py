"""`dynamic_schema`: reuse decides whether it fires, cost decides how loud; one finding per family."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.schema.family import what_varies
from exporter.schema.findings import Thresholds
from exporter.schema.injection import Usage, dynamic_schema

ENUM = "/properties/label/enum"


def classifier(i: int) -> dict[str, Any]:
    return {"type": "object", "properties": {"label": {"enum": [f"A{i}", f"B{i}"]}}, "required": ["label"]}


VARIATION = what_varies([classifier(i) for i in range(10)])


@pytest.mark.parametrize(
    ("usage", "severity"),
    [
        (Usage(requests=100, variants=10, hits=90, seconds=0.3), "info"),  # static variants, each reused
        (Usage(requests=10, variants=10, hits=0, seconds=None), "warning"),  # per request, cost unknown
        (Usage(requests=10, variants=10, hits=0, seconds=0.5), "warning"),  # per request, cheap
        (Usage(requests=40, variants=40, hits=0, seconds=2.0), "error"),  # per request, 2 s of compiles
        (Usage(requests=2, variants=2, hits=0, seconds=5.0), "info"),  # two variants: a version change
        (Usage(requests=19, variants=10, hits=9, seconds=5.0), "error"),  # 1.9 per variant: under 2
    ],
)
def test_severity_from_reuse_then_cost(usage: Usage, severity: str) -> None:
    (finding,) = dynamic_schema(VARIATION, usage, Thresholds())
    assert (finding.rule, finding.severity, finding.pointer) == ("dynamic_schema", severity, ENUM)
    assert f"{usage.variants} variants in {usage.requests} requests" in finding.message


def test_thresholds_move_the_lines() -> None:
    usage = Usage(requests=30, variants=10, hits=20, seconds=0.5)
    assert dynamic_schema(VARIATION, usage, Thresholds())[0].severity == "info"
    strict = Thresholds(dynamic_reuse=5.0, dynamic_seconds=0.25)
    assert dynamic_schema(VARIATION, usage, strict)[0].severity == "error"


def test_nothing_varies_or_one_variant_is_no_finding() -> None:
    same = what_varies([classifier(1), classifier(1)])
    assert dynamic_schema(same, Usage(10, 10), Thresholds()) == []
    assert dynamic_schema(VARIATION, Usage(10, 1), Thresholds()) == []


def test_the_message_carries_pointers_and_counts_never_values() -> None:
    (finding,) = dynamic_schema(VARIATION, Usage(10, 10), Thresholds())
    assert ENUM in finding.message and "A1" not in finding.message and "B2" not in finding.message
