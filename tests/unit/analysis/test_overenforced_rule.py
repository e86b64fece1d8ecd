"""`xgrammar_overenforced` from each mechanism, built at random (hypothesis): a length-bounded string, a
pattern with each end open or closed, a name pattern on a closed object, at a random place in a
document. The rule fires exactly where the mechanism is and xgrammar enforces the keyword; beside
what makes xgrammar drop the keyword instead (a `$ref`, `format`, `enum`, a lookaround), on a closed
end, on an impossible bound, or when only llguidance is linted, it is quiet. Whether xgrammar really
refuses is checked on the engine (tests/integration/test_overenforced.py)."""

from __future__ import annotations

import re
import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.analysis.lint import lint
from exporter.schema.regex import open_ends

RULE = "xgrammar_overenforced"
core = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=6)
names = st.text(string.ascii_lowercase, min_size=1, max_size=6)


def at(path: list[str], schema: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """`schema` as the value of nested properties `path`, and its pointer."""
    document: dict[str, Any] = schema
    for name in reversed(path):
        document = {"type": "object", "properties": {name: document}, "required": [name]}
    return document, "".join(f"/properties/{name}" for name in path)


def found(document: dict[str, Any], **kwargs: Any) -> set[tuple[str, str]]:
    return {(f.pointer, f.keyword) for f in lint(document, **kwargs) if f.rule == RULE}


def pattern_of(literal: str, start: str, end: str) -> str:
    """A pattern around `literal` with each end anchored (^, $), swallowing (.*) or open ('')."""
    return start + re.escape(literal) + end


@settings(max_examples=80, deadline=None)
@given(
    bound=st.one_of(st.none(), st.integers(0, 300)),
    low=st.one_of(st.none(), st.integers(0, 300)),
    path=st.lists(names, max_size=3, unique=True),
)
def test_a_length_bound_on_a_plain_string_takes_no_escapes(
    bound: int | None, low: int | None, path: list[str]
) -> None:
    schema: dict[str, Any] = {"type": "string"}
    if low is not None:
        schema["minLength"] = low
    if bound is not None:
        schema["maxLength"] = bound
    document, pointer = at(path, schema)
    fits = bound is None or bound >= max(low or 0, 1)  # a string holding one character fits the bound
    expected = set()
    if fits and bound is not None:
        expected.add((f"{pointer}/maxLength", "escapes under maxLength"))
    if fits and low:
        expected.add((f"{pointer}/minLength", "escapes under minLength"))
    assert found(document) == expected
    assert found(document, engines=("llguidance",)) == set()


@settings(max_examples=40, deadline=None)
@given(bound=st.integers(1, 50), beside=st.sampled_from(["format", "enum", "const", "$ref", "no type"]))
def test_where_xgrammar_drops_the_bound_it_cannot_overreach(bound: int, beside: str) -> None:
    schema: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": bound}
    if beside == "format":
        schema["format"] = "date"
    elif beside == "enum":
        schema["enum"] = ["a", "b"]
    elif beside == "const":
        schema["const"] = "a"
    elif beside == "$ref":
        schema["$ref"] = "#/$defs/s"
    else:
        del schema["type"]
    document = {"$defs": {"s": {"type": "string"}}, "type": "object", "properties": {"v": schema}}
    assert found(document) == set()


@settings(max_examples=80, deadline=None)
@given(
    literal=core,
    start=st.sampled_from(["", "^", ".*"]),
    end=st.sampled_from(["", "$", ".*"]),
    path=st.lists(names, max_size=3, unique=True),
)
def test_a_pattern_with_an_open_end_is_matched_whole(
    literal: str, start: str, end: str, path: list[str]
) -> None:
    pattern = pattern_of(literal, start, end)
    document, pointer = at(path, {"type": "string", "pattern": pattern})
    open_end = start == "" or end == ""
    assert open_ends(pattern) == (start == "", end == "")
    assert found(document) == ({(f"{pointer}/pattern", "pattern matched whole")} if open_end else set())
    # with a lookaround xgrammar drops the pattern (xgrammar_unenforced): nothing to overreach
    dropped, _ = at(path, {"type": "string", "pattern": f"(?!zz){pattern}"})
    assert found(dropped) == set()


@settings(max_examples=60, deadline=None)
@given(literal=core, start=st.sampled_from(["", "^"]), end=st.sampled_from(["", "$"]), closed=st.booleans())
def test_a_name_pattern_on_a_closed_object_is_matched_whole(
    literal: str, start: str, end: str, closed: bool
) -> None:
    schema: dict[str, Any] = {"type": "object", "patternProperties": {pattern_of(literal, start, end): {}}}
    if closed:
        schema["additionalProperties"] = False
    document = {"type": "object", "properties": {"tags": schema}}
    fires = closed and (start == "" or end == "")
    expected = {("/properties/tags/patternProperties", "patternProperties matched whole")}
    assert found(document) == (expected if fires else set())


def test_the_message_names_the_mechanism_and_the_version() -> None:
    (finding,) = [f for f in lint({"type": "string", "pattern": "[0-9]+"}) if f.rule == RULE]
    assert finding.severity == "warning" and "`pattern matched whole`" in finding.message
    assert "verified on xgrammar" in finding.message and "anchor" in finding.fix
