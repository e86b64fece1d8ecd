# ruff: noqa: E501  (strategy tables)
"""Hostile input, generated: the probe-message decoder and the schema analysis never raise an
unhandled exception and stay within their budget (hypothesis; 4,000 cases each, more with
GDX_FUZZ_EXAMPLES)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporter import wire
from exporter.analysis.lint import lint, parse_and_lint
from exporter.daemon.receiver.message_check import classify
from exporter.daemon.receiver.messages import RESULTS
from exporter.schema.findings import Thresholds
from exporter.schema.identity import schema_hash, shape_hash
from exporter.schema.variants import literals
from exporter.schema.walk import Budget

EXAMPLES = int(os.environ.get("GDX_FUZZ_EXAMPLES", "4000"))
# 10,000 cases per target: minutes, so outside `make check` (make test runs it).
pytestmark = pytest.mark.slow
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)

keywords = st.sampled_from([
    "type", "properties", "items", "anyOf", "oneOf", "allOf", "not", "$ref", "$defs", "enum", "const", "pattern",
    "patternProperties", "additionalProperties", "required", "minItems", "maxItems", "format", "if", "then",
    "uniqueItems", "contains", "prefixItems", "minProperties", "dependentRequired", "title", "default",
])  # fmt: skip
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=20),
    st.sampled_from(["#", "#/$defs/a", "#/properties/x", "^[a-z]{1,99}$", "(?!x)", "(", "object", "array"]),
)  # fmt: skip
json_like = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(keywords | st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)
message_fields = st.sampled_from(["v", "kind", "instance", "pid", "pod", "engine", "schemas", "backends", "full",
                                  "seq", "evicted", "other", "cpu", "probe", "id", "hash", "buckets", "sum",
                                  "miss", "rejections", "caches", "cgroup", "pool_workers", "cpus"])  # fmt: skip
messages = st.recursive(
    scalars | st.sampled_from(["hello", "schemas", "snapshot", 1]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(message_fields, inner, max_size=8),
    max_leaves=30,
)


@FUZZ
@given(st.binary(max_size=300))
def test_classify_never_raises_on_bytes(data: bytes) -> None:
    result, msg = classify(data)
    assert result in RESULTS and (msg is None) == (result != "ok")


@FUZZ
@given(messages)
@example({"kind": "hello", "pid": float("inf")})  # found by this test: Python's json writes Infinity
def test_validator_only_accepts_or_rejects(doc: Any) -> None:
    result, _ = classify(json.dumps(doc).encode())
    assert result in RESULTS
    if isinstance(doc, dict) and doc.get("kind") in wire.KINDS:
        with_version = {**doc, "v": 1}
        result, _msg = classify(json.dumps(with_version).encode())
        try:  # NaN and Infinity are not JSON: Python writes them, the protocol's reader refuses them
            json.dumps(with_version, allow_nan=False)
            assert result in ("ok", "rejected")
        except ValueError:
            assert result == "malformed"


BUDGET = Thresholds(budget=Budget(max_nodes=5_000, max_seconds=0.5))


@FUZZ
@given(json_like)
@example(
    {"properties": {}, "minProperties": None, "required": [[]]}
)  # found by this test: a list in required
@example({"type": "", "const": float("nan")})  # found by this test: NaN and infinity, which json reads
@example({"type": "integer", "multipleOf": float("inf")})
@example({"enum": [float("-inf"), 1]})
def test_schema_analysis_never_raises_and_stays_in_budget(schema: Any) -> None:
    started = time.monotonic()
    findings = lint(schema, BUDGET)
    literals(schema, BUDGET.budget)
    text = json.dumps(schema)
    assert len(schema_hash(text)) == len(shape_hash(text)) == 12
    assert all(f.rule and f.severity in ("error", "warning", "info") for f in findings)
    assert time.monotonic() - started < 2.0


@FUZZ
@given(st.text(max_size=200))
def test_text_input_never_raises(text: str) -> None:
    parse_and_lint(text, BUDGET)
    assert len(schema_hash(text)) == 12
