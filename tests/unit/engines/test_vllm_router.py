# ruff: noqa: E501  (schemas read better on one line)
"""vLLM's `auto` router, emulated: where each schema goes and which keyword, where, sent it there
(vLLM itself says neither; tests/integration/test_routing_agreement.py checks the backend against vLLM's code)."""

from __future__ import annotations

from typing import Any

import pytest

from exporter.engines.vllm.routing import Route, RouteReason, route, too_deep, xgrammar_objections


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("schema", "backend", "keyword", "pointer"),
    [
        (obj(n={"type": "integer", "multipleOf": 5}), "guidance", "multipleOf", "/properties/n"),
        (obj(n={"multipleOf": 5}), "xgrammar", None, None),  # untyped: vLLM does not look
        (obj(n={"type": ["number", "null"], "multipleOf": 0.5}), "guidance", "multipleOf", "/properties/n"),
        (obj(tags={"type": "array", "uniqueItems": True}), "guidance", "uniqueItems", "/properties/tags"),
        (obj(d={"type": "string", "format": "iso-date"}), "guidance", "format", "/properties/d"),
        (obj(d={"type": "string", "format": "date-time"}), "xgrammar", None, None),
        (obj(c={"type": "string", "pattern": "^[A-Z]+$", "maxLength": 8}), "guidance", "pattern", "/properties/c"),
        ({"type": "object", "propertyNames": {"pattern": "^a"}, "properties": {}}, "guidance", "propertyNames", ""),
        ({"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}}}, "outlines", "patternProperties", ""),
        ({"type": "object", "patternProperties": {"^x": {}}}, "xgrammar", None, None),
        ({"allOf": [{"type": "string"}, {"enum": ["yes", "no"]}]}, "guidance", "allOf", ""),
        ({"allOf": [{"type": "string"}]}, "xgrammar", None, None),
        # vLLM walks every value, whatever the keyword: a default that looks like a schema counts
        (obj(n={"type": "integer", "default": {"type": "integer", "multipleOf": 2}}), "guidance", "multipleOf",
         "/properties/n/default"),
        (obj(**{"a/b": {"type": "integer", "multipleOf": 3}}), "guidance", "multipleOf", "/properties/a~1b"),
    ],
)  # fmt: skip
def test_where_auto_sends_a_schema_and_why(
    schema: Any, backend: str, keyword: str | None, pointer: str | None
) -> None:
    result = route(schema)
    assert result.backend == backend
    if keyword is None:
        assert result.reasons == ()
    else:
        assert (result.reasons[0].keyword, result.reasons[0].pointer) == (keyword, pointer)


def test_a_fallback_with_pattern_properties_anywhere_goes_to_outlines() -> None:
    schema = {"type": "object", "properties": {"m": {"type": "object", "patternProperties": {"^k": {}}},
              "n": {"type": "integer", "multipleOf": 2}}}  # fmt: skip
    result = route(schema)
    assert result.backend == "outlines" and result.outlines_pointer == "/properties/m/patternProperties"
    assert [r.keyword for r in result.reasons] == ["multipleOf"]


def test_every_objection_is_listed_not_only_the_first() -> None:
    schema = obj(
        a={"type": "integer", "multipleOf": 2}, b={"type": "array", "contains": {}, "maxContains": 2}
    )
    assert [(r.keyword, r.pointer) for r in xgrammar_objections(schema)] == [
        ("multipleOf", "/properties/a"), ("contains", "/properties/b"), ("maxContains", "/properties/b"),
    ]  # fmt: skip


def test_nesting_past_64_levels_is_rejected_before_any_backend() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"x": deep}}  # two levels per wrap
    assert too_deep(deep) and route(deep).backend == "rejected"
    shallow: dict[str, Any] = {"type": "string"}
    for _ in range(20):
        shallow = {"type": "object", "properties": {"x": shallow}}
    assert not too_deep(shallow) and route(shallow).backend == "xgrammar"


def test_a_schema_xgrammar_cannot_convert_falls_back_with_the_error() -> None:
    tuple_items = {"type": "array", "items": [{"type": "string"}]}
    result = route(tuple_items, converts=lambda schema: "items must be an object")
    assert result == Route(
        "guidance", (RouteReason("", "", "xgrammar cannot convert it: items must be an object"),)
    )
    assert route(tuple_items, converts=lambda schema: None).backend == "xgrammar"


def test_a_root_that_is_not_an_object_is_not_walked() -> None:
    listed = [{"type": "integer", "multipleOf": 2}, {"patternProperties": {"^a": {}}}]
    assert route(listed).backend == "xgrammar"  # vLLM's checks look into dict roots only
    assert route(listed, converts=lambda schema: "not a schema").backend == "guidance"


def test_the_usual_backend_is_the_one_most_requests_get_and_the_others_are_errors() -> None:
    from exporter.engines.vllm.routing import majority, mismatch_findings

    plain, odd = route(obj(a={"type": "string"})), route(obj(n={"type": "integer", "multipleOf": 5}))
    assert majority({"p": (plain, 9), "o": (odd, 1)}) == "xgrammar"
    assert majority({"p": (plain, 1), "o": (odd, 9)}) == "guidance"
    assert majority({"p": (plain, 1), "o": (odd, 1)}) == "xgrammar"  # a tie: the order of BACKENDS
    found = mismatch_findings({"p": (plain, 9), "o": (odd, 1)}, "0.33.0")
    assert list(found) == ["o"] and found["o"].rule == "backend_mismatch" and found["o"].severity == "error"
    assert "HTTP 400" in found["o"].message and found["o"].keyword == "multipleOf"
    # the reverse: most requests fall back to guidance, so the ordinary schema is the one rejected
    reverse = mismatch_findings({"p": (plain, 1), "o": (odd, 9)}, "0.32.0")
    assert list(reverse) == ["p"] and "compiles it with guidance" in reverse["p"].message
    assert mismatch_findings({"p": (plain, 3)}, "0.33.0") == {}
    deep = Route("rejected", (RouteReason("", "", "nested"),))
    assert mismatch_findings({"p": (plain, 3), "d": (deep, 5)}, "0.33.0") == {}  # rejected anyway


def test_the_api_servers_outlines_validation_is_a_crash_or_a_stall_by_what_it_measured() -> None:
    """server_crash when the bounded step died, server_stall by seconds (warning from 0.1 s, error from
    1 s), nothing below; each names the keywords that sent it to outlines and the two fixes."""
    from exporter.engines.vllm.routing import ServerStep, server_findings

    schema = {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}}}
    found = route(schema)
    assert found.backend == "outlines"
    died = ServerStep(
        3.2, died=True, allocation_bytes=3 << 30, memory_bytes=4 << 30, detail="signal 6: abort"
    )
    (crash,) = server_findings(found, died, "0.33.0")
    assert (crash.rule, crash.severity, crash.pointer, crash.keyword) == (
        "server_crash", "error", "/patternProperties", "patternProperties"
    )  # fmt: skip
    assert "3 GiB failed" in crash.message and "under 4 GiB" in crash.message and "signal 6" in crash.message
    assert '"backend": "xgrammar"' in crash.fix and "additionalProperties" in crash.fix
    by_seconds = {
        s: [(f.rule, f.severity) for f in server_findings(found, ServerStep(s), "0.32.0")]
        for s in (0.05, 0.1, 0.99, 1.0, 13.4)
    }
    assert by_seconds == {
        0.05: [],
        0.1: [("server_stall", "warning")],
        0.99: [("server_stall", "warning")],
        1.0: [("server_stall", "error")],
        13.4: [("server_stall", "error")],
    }
    (bound,) = server_findings(found, ServerStep(30.0, timed_out=True), "0.33.0")
    assert bound.severity == "error" and "over 30 s" in bound.message
