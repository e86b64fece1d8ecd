"""Specs of every request kind: what `detect` calls them and what `lint_spec` finds, at which pointer."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.analysis.lint import RULES, lint
from exporter.analysis.spec import GRAMMAR_RULES, detect, grammar_facts, inner_schemas, lint_spec
from exporter.schema import identity
from exporter.schema.findings import SEVERITIES, Finding, Thresholds
from exporter.schema.regex import analyse, facts
from exporter.schema.walk import Budget


def rules(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.severity, f.pointer) for f in findings]


GBNF = """# a JSON object of up to 40 pairs
root ::= "{" ws pair ("," ws pair){0,40} "}"
pair ::= key ":" ws value
key  ::= "\\"" [^"\\\\]+ "\\""   # a class holding a quote, then a string
value ::= [0-9]+ | "\\"::={999}\\""
ws ::= [ \\t\\n]*
"""
LARK = """start: answer | "none"
?answer: WORD ("," WORD)~1..3
WORD: /[a-z]{2,80}/
%ignore " "
"""


def test_detect_agrees_with_gdx_hash_on_json_and_reads_the_rest() -> None:
    assert detect('{"type": "object"}') == "json"
    assert detect('"^[a-z]+$"') == "json"  # valid JSON text is JSON, as gdx hash decides
    assert detect("[1, 2]") == "json"
    assert detect(json.dumps({"type": "structural_tag", "format": {"type": "triggered_tags"}})) == (
        "structural_tag"
    )
    assert detect(json.dumps({"structures": [], "triggers": ["<f="]})) == "structural_tag"
    assert detect(json.dumps({"structures": []})) == "json"  # both keys, or the type, make a tag
    assert detect("^[A-Z]{8,64}$") == "regex"
    assert detect(GBNF) == "grammar"
    assert detect(LARK) == "grammar"
    assert detect("") == "regex"
    for text in ("^[a-z]+$", GBNF, '{"a": 1}'):
        assert (identity.parse_spec(text) is not None) == (detect(text) in ("json", "structural_tag"))


def test_regex_bounded_quantifier_like_the_pattern_rule() -> None:
    found = lint_spec("regex", "^[A-Z0-9_-]{8,64}$")
    assert rules(found) == [("bounded_quantifier", "warning", "")]
    assert "up to 64" in found[0].message
    as_pattern = lint({"type": "string", "pattern": "^[A-Z0-9_-]{8,64}$"})
    assert [f.message for f in as_pattern] == [found[0].message]  # same wording
    assert lint_spec("regex", "^[A-Z]{8,16}$") == []
    assert lint_spec("regex", "^[A-Z]{8,16}$", Thresholds(quantifier=10))[0].rule == "bounded_quantifier"
    assert lint_spec("auto", "^a{1,99}$")[0].rule == "bounded_quantifier"


def test_regex_lookaround_is_refused_by_both_engines() -> None:
    found = lint_spec("regex", "^(?!admin$)[a-z]+$")
    assert rules(found) == [("llguidance_refused", "error", ""), ("xgrammar_refused", "error", "")]
    assert all("`lookaround`" in f.message for f in found)
    assert rules(lint_spec("regex", "(?<=a)b", engines=["xgrammar"])) == [("xgrammar_refused", "error", "")]
    assert rules(lint_spec("regex", "(?<=a)b", engines=["llguidance"])) == [
        ("llguidance_refused", "error", "")
    ]


def test_wide_alternations_count_real_branches_only() -> None:
    words = "|".join(f"tenant{i}x" for i in range(100))
    found = lint_spec("regex", f"^({words})$")
    assert rules(found) == [("regex_alternation", "info", "")]
    assert "100 branches (limit 64)" in found[0].message
    assert lint_spec("regex", "^(" + "|".join(f"w{i}x" for i in range(64)) + ")$") == []
    letters = "|".join("abcdefghijklmnopqrstuvwxyz")
    assert lint_spec("regex", f"^({letters})+$", Thresholds(enum_size=3)) == []  # one character class
    parsed = analyse("^(alice|bob|carol)$")
    assert parsed is not None and parsed.widest_alternation == 3
    assert facts("x" * 20_000, 10_000) is None and facts("x" * 20_000, 30_000) is not None


def test_gbnf_and_lark_grammars_are_sized_and_their_bounds_found() -> None:
    assert grammar_facts(GBNF) == (5, 40, 2)  # the {999} inside a string is text, not a bound
    found = lint_spec("auto", GBNF)
    assert rules(found) == [("bounded_quantifier", "warning", ""), ("grammar_size", "info", "")]
    assert "up to 40 (line 2)" in found[0].message
    assert found[1].message == f"5 rules, {len(GBNF)} chars"
    assert rules(lint_spec("grammar", GBNF, Thresholds(quantifier=40))) == [("grammar_size", "info", "")]
    assert grammar_facts(LARK) == (3, 80, 3)
    assert rules(lint_spec("auto", LARK)) == [
        ("bounded_quantifier", "warning", ""),
        ("grammar_size", "info", ""),
    ]
    big = "root ::= " + " | ".join(f"r{i}" for i in range(300)) + "\n"
    big += "\n".join(f'r{i} ::= "k{i}" [a-z]+' for i in range(300))
    (size,) = lint_spec("grammar", big)
    assert (size.rule, size.severity) == ("grammar_size", "warning")
    assert size.message.startswith(f"301 rules, {len(big)} chars (warning from {GRAMMAR_RULES} rules")


def test_structural_tags_lint_each_inner_schema_at_its_place() -> None:
    old = {
        "type": "structural_tag",
        "structures": [
            {
                "begin": "<function=lookup>",
                "schema": {
                    "type": "object",
                    "properties": {"code": {"type": "string", "pattern": "^a{1,99}$"}},
                },
                "end": "</function>",
            },
            {
                "begin": "<function=tags>",
                "schema": {"type": "array", "items": {}, "uniqueItems": True},
                "end": "</function>",
            },
        ],
        "triggers": ["<function="],
    }
    assert rules(lint_spec("auto", json.dumps(old))) == [
        ("bounded_quantifier", "warning", "/structures/0/schema/properties/code/pattern"),
        ("llguidance_refused", "error", "/structures/1/schema/uniqueItems"),
        ("xgrammar_unenforced", "warning", "/structures/1/schema/uniqueItems"),
    ]
    new = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<tool>"],
            "tags": [
                {
                    "type": "tag",
                    "begin": "<tool>",
                    "content": {
                        "type": "json_schema",
                        "json_schema": {"type": "object", "properties": {"a": {"maxItems": 50}}},
                    },
                    "end": "</tool>",
                }
            ],
        },
    }  # fmt: skip
    assert rules(lint_spec("structural_tag", json.dumps(new), engines=["xgrammar"])) == [
        ("max_items", "warning", "/format/tags/0/content/json_schema/properties/a/maxItems"),
        ("xgrammar_unenforced", "warning", "/format/tags/0/content/json_schema/properties/a/maxItems"),
    ]  # an untyped maxItems: xgrammar drops it
    # a property named "schema" inside a found schema is not a second schema
    nested = {"structures": [{"schema": {"properties": {"schema": {"uniqueItems": True}}}}], "triggers": []}
    assert [p for p, _ in inner_schemas(nested)] == ["/structures/0/schema"]


def test_choice_other_and_unknown_kinds_have_no_findings() -> None:
    for kind in ("choice", "other", "no-such-kind"):
        assert lint_spec(kind, '["a", "b"]') == []
    assert rules(lint_spec("json_object", json.dumps({"type": "array", "maxItems": 30}))) == [
        ("max_items", "warning", "/maxItems")
    ]


HOSTILE: list[tuple[str, str]] = [
    ("regex", "(" * 5_000 + ")" * 5_000),  # deeper than the parser's recursion
    ("regex", "^(" + "|".join(f"w{i}" for i in range(40_000)) + ")$"),  # over MAX_REGEX_CHARS
    ("regex", "a{1,99999999999999999999}"),
    ("regex", "[z-a]"),
    ("regex", "\\"),
    ("grammar", "root ::= " + "x{1,9}" * 200_000),
    ("grammar", '"' * 100_000 + "[" * 100_000),  # unclosed strings and classes: a linear scan
    ("grammar", '"' + "\\" * 200_000),
    ("grammar", "\x00\udcff ::= {}"),
    ("structural_tag", "[" * 100_000 + "]" * 100_000),
    ("structural_tag", json.dumps({"structures": [{"schema": {"x": [1] * 10}}] * 50_000, "triggers": []})),
    ("structural_tag", "{not json"),
    ("structural_tag", json.dumps([[[[{"json_schema": True}]]]])),
    ("auto", " " * (17 * 2**20)),
    ("json", "[" * 100_000),
]


@pytest.mark.parametrize(("kind", "text"), HOSTILE, ids=[f"{k}-{i}" for i, (k, _) in enumerate(HOSTILE)])
def test_hostile_specs_do_not_raise_and_stay_bounded(kind: str, text: str) -> None:
    started = time.monotonic()
    found = lint_spec(kind, text, Thresholds(budget=Budget(max_nodes=50_000, max_seconds=2.0)))
    assert time.monotonic() - started < 10
    for finding in found:
        assert finding.rule in RULES and finding.severity in SEVERITIES
    detect(text)


def test_a_structural_tag_over_the_budget_is_too_complex() -> None:
    many: dict[str, Any] = {
        "structures": [{"schema": {"type": "object"}} for _ in range(2_000)],
        "triggers": [],
    }
    found = lint_spec("structural_tag", json.dumps(many), Thresholds(budget=Budget(max_nodes=1_000)))
    assert rules(found) == [("too_complex", "error", "")]
    assert lint_spec("structural_tag", json.dumps(many)) == []  # within the default budget: clean


SPEC_ALPHABET = st.sampled_from([*"(){}[]|?*+^$\\.:=-,~\"'#/ \nabAZ019", "::=", "(?!", "(?<=", "{1,99}"])
schema_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["schema", "json_schema", "structures", "type", "pattern", "x"]), inner
        )
    ),
    max_leaves=30,
)


@pytest.mark.filterwarnings("ignore:Possible:FutureWarning")  # re's parser; hidden in the CLI by regex.py
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(SPEC_ALPHABET, max_size=60).map("".join), st.sampled_from(["auto", "regex", "grammar"]))
def test_any_regex_or_grammar_text_gives_findings_not_exceptions(text: str, kind: str) -> None:
    for finding in lint_spec(kind, text):
        assert finding.rule in RULES and finding.severity in SEVERITIES and finding.pointer == ""
    assert detect(text) in ("json", "structural_tag", "regex", "grammar")


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(schema_values)
def test_any_structural_tag_gives_findings_at_pointers_inside_it(value: Any) -> None:
    for finding in lint_spec("structural_tag", json.dumps(value)):
        assert finding.rule in RULES
        assert finding.pointer == "" or "/schema" in finding.pointer or "/json_schema" in finding.pointer
