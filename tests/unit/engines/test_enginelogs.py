"""The engines' own diagnostics as findings (exporter/engines/grammars/enginelogs.py): xgrammar's log lines as
xgrammar 0.2.7, 0.2.8 and 0.2.9 print them (file:line differ), each mapped to its place in the schema;
llguidance's errors and warnings as 1.7.6 and 1.9.1 return them; the merge with the table findings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from exporter.analysis.lint import lint
from exporter.engines.grammars import enginelogs
from exporter.engines.grammars.enginelogs import llguidance_sites, merge, parse, xgrammar_sites
from exporter.schema.walk import Budget

ONEOF = "oneOf with overlapping or non-provably-disjoint branches cannot be represented exactly; falling back to anyOf semantics"  # noqa: E501
# What each version wrote to fd 2, captured around a cold compile (only file:line differ).
LOGGED = {
    "0.2.7": f"[20:24:23] /project/cpp/json_schema_converter.cc:829: Warning: {ONEOF}\n"
    "[20:24:23] /project/cpp/json_schema_converter.cc:3208: Warning: Support for allOf with multiple "
    "options is still ongoing\n",
    "0.2.8": f"[20:24:28] /project/cpp/json_schema_converter.cc:832: Warning: {ONEOF}\n"
    "[20:24:28] /project/cpp/json_schema_converter.cc:3510: Warning: Support for allOf with multiple "
    "options is still ongoing\n",
    "0.2.9": f"[20:24:33] /project/cpp/json_schema_converter.cc:870: Warning: {ONEOF}\n"
    "[20:24:33] /project/cpp/json_schema_converter.cc:3636: Warning: Support for allOf with multiple "
    "options is still ongoing\n",
}


def sites(schema: Any, message: str) -> list[tuple[str, str]]:
    """(keyword, pointer) of each place, sorted (the walk is depth first, last property first)."""
    nodes = enginelogs._nodes(schema, Budget())
    return sorted((site.keyword, site.pointer) for site in xgrammar_sites(nodes, message))


def ll_sites(schema: Any, message: str) -> list[tuple[str, str]]:
    nodes = enginelogs._nodes(schema, Budget())
    return sorted((site.keyword, site.pointer) for site in llguidance_sites(nodes, message))


@pytest.mark.parametrize("version", sorted(LOGGED))
def test_parse_strips_the_prefix_of_every_version(version: str) -> None:
    messages, other = parse(LOGGED[version])
    assert messages == (ONEOF, "Support for allOf with multiple options is still ongoing")
    assert other == ""


def test_parse_keeps_each_message_once_and_hands_back_other_lines() -> None:
    regex = (
        "[20:24:23] /project/cpp/fsm_builder.cc:1237: Warning: Anchor '$' in the middle of regex is ignored: "
        "^ab$c\n"
    )
    text = (
        regex * 3 + "a python warning\n" + regex + "[9:05:01] /x/y.cc:12: multipleOf must be greater than 0\n"
    )
    messages, other = parse(text)
    assert messages == (
        "Anchor '$' in the middle of regex is ignored: ^ab$c",
        "multipleOf must be greater than 0",
    )
    assert other == "a python warning\n"
    assert parse("") == ((), "")
    assert parse("[10:00:00] nothing here\n") == ((), "[10:00:00] nothing here\n")


def test_oneof_fallback_maps_to_the_oneofs_xgrammar_cannot_prove_disjoint() -> None:
    schema = {
        "type": "object",
        "properties": {
            "x": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "y": {"oneOf": [{"type": "integer"}, {"type": "string"}]},  # disjoint: no log from it
            "z": {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]},
        },
    }
    assert sites(schema, ONEOF) == [
        ("oneOf exclusivity", "/properties/x/oneOf"),
        ("properties beside oneOf", "/properties/z/oneOf"),
    ]
    assert sites({"oneOf": [{"type": "integer"}, {"type": "string"}]}, ONEOF) == [
        ("oneOf exclusivity", "/oneOf")
    ]
    assert sites({"type": "string"}, ONEOF) == [("oneOf exclusivity", "")]  # no oneOf here: the root


def test_allof_with_several_branches() -> None:
    schema = {
        "allOf": [{"type": "object"}, {"required": ["a"]}],
        "$defs": {"one": {"allOf": [{"type": "string"}]}},
    }
    message = "Support for allOf with multiple options is still ongoing"
    assert sites(schema, message) == [("allOf with several branches", "/allOf")]


def test_regex_messages_map_to_the_patterns_they_quote() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^ab$c"},
            "b": {"type": "string", "pattern": "^ab$c"},
            "c": {"type": "string", "pattern": "^(?!admin$)[a-z]+$"},
            "d": {"type": "string", "pattern": "a$\nb"},
        },
        "patternProperties": {"^(?!x)[a-z]+$": {"type": "integer"}},
    }
    assert sites(schema, "Anchor '$' in the middle of regex is ignored: ^ab$c") == [
        ("pattern anchor in the middle", "/properties/a/pattern"),
        ("pattern anchor in the middle", "/properties/b/pattern"),
    ]
    assert sites(
        schema, "Lookahead assertion is not supported and is ignored in regex: ^(?!admin$)[a-z]+$"
    ) == [("pattern lookaround", "/properties/c/pattern")]
    assert sites(schema, "Lookahead assertion is not supported and is ignored in regex: ^(?!x)[a-z]+$") == [
        ("pattern lookaround", "/patternProperties/^(?!x)[a-z]+$")
    ]
    position = "Regex parsing warning at position 2: '$' should be at the end of the regex, but found in the middle. It is ignored."  # noqa: E501
    assert sites(schema, position) == [("pattern anchor in the middle", "/properties/d/pattern")]
    assert sites(schema, "Anchor '^' in the middle of regex is ignored: zz^") == [
        ("pattern anchor in the middle", "")
    ]


def test_multipleof_messages() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "number", "multipleOf": 0.5},
            "m": {"type": ["number", "null"], "multipleOf": 5},
            "i": {"type": "integer", "multipleOf": 3},
            "lo": {"type": "integer", "minimum": 1, "multipleOf": 3},
            "both": {"type": "integer", "minimum": 1, "maximum": 99, "multipleOf": 3},
            "frac": {"type": "integer", "multipleOf": 2.5},
            "big": {"type": "integer", "multipleOf": 4096},
        },
    }
    assert sites(schema, "multipleOf is not supported for type:number; ignoring multipleOf") == [
        ("number multipleOf", "/properties/m/multipleOf"),
        ("number multipleOf", "/properties/n/multipleOf"),
    ]
    assert sites(schema, "range + multipleOf combination not yet supported; ignoring multipleOf") == [
        ("multipleOf beside a one-sided range", "/properties/lo/multipleOf")
    ]
    assert sites(schema, "multipleOf for type:integer must be an integer; ignoring multipleOf") == [
        ("number multipleOf", "/properties/frac/multipleOf")
    ]
    assert sites(schema, "multipleOf for type:integer must be > 0 and <= 1024; ignoring multipleOf") == [
        ("integer multipleOf over 1024", "/properties/big/multipleOf")
    ]


def test_length_beside_pattern_or_a_known_format() -> None:
    schema = {
        "type": "object",
        "properties": {
            "p": {"type": "string", "pattern": "^[a-z]+$", "minLength": 1, "maxLength": 5},
            "f": {"type": "string", "format": "email", "maxLength": 20},
            "iri": {"type": "string", "format": "iri", "maxLength": 20},  # a format xgrammar does not know
            "plain": {"type": "string", "maxLength": 20},
        },
    }
    message = "pattern combined with minLength/maxLength is not supported; ignoring minLength/maxLength"
    assert sites(schema, message) == [
        ("maxLength beside pattern", "/properties/p/maxLength"),
        ("minLength beside pattern", "/properties/p/minLength"),
    ]
    assert sites(schema, message.replace("pattern", "format", 1)) == [
        ("maxLength beside format", "/properties/f/maxLength")
    ]


def test_an_unknown_message_is_the_root_without_a_keyword() -> None:
    assert sites({"type": "string"}, "something new in 0.3.0") == [("", "")]
    (finding,) = [r.finding for r in enginelogs.xgrammar_findings([], "0.3.0", ["some `new` thing"])]
    assert (finding.rule, finding.severity, finding.pointer) == ("xgrammar_unenforced", "warning", "")
    assert finding.message == "xgrammar 0.3.0 logged while compiling: some 'new' thing"
    assert finding.keyword == ""


def test_llguidance_messages_map_to_the_keywords_they_name() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"not": {"type": "string"}},
            "b": {"type": "string", "format": "iri"},
            "c": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "d": {"type": "object", "properties": {"q": {"type": "integer"}}, "minProperties": 1},
            "e": {"type": "string", "pattern": "^(?!admin$)[a-z]+$"},
            "f": {"if": {"type": "string"}, "then": {"minLength": 1}},
        },
    }
    assert ll_sites(schema, 'Unimplemented keys: ["not"]') == [("not", "/properties/a/not")]
    assert ll_sites(schema, 'Unimplemented keys: ["if", "then"]') == [
        ("if", "/properties/f/if"),
        ("then", "/properties/f/then"),
    ]
    assert ll_sites(schema, "Unknown format: iri") == [("format iri", "/properties/b/format")]
    assert ll_sites(schema, "oneOf not fully supported, falling back to anyOf.") == [
        ("oneOf", "/properties/c/oneOf")
    ]
    min_max = 'min/maxProperties only supported when all keys listed in "properties" are required'
    assert ll_sites(schema, min_max) == [
        ("minProperties with optional properties", "/properties/d/minProperties")
    ]
    regex = "regex parse error: ^(?!admin$)[a-z]+$ ^^^ error: look-around, including look-ahead and look-behind, is not supported"  # noqa: E501
    assert ll_sites(schema, regex) == [("pattern lookaround", "/properties/e/pattern")]
    assert ll_sites(schema, "Unsatisfiable schema: Regex is empty") == [("", "")]
    assert ll_sites(schema, 'Unimplemented keys: ["contains"]') == [("contains", "")]


def test_merge_confirms_a_table_finding_and_adds_what_it_lacks() -> None:
    schema = {
        "type": "object",
        "properties": {
            "u": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "n": {"type": "number", "multipleOf": 0.5},
        },
    }
    table = lint(schema, engines=("xgrammar",))
    nodes = enginelogs._nodes(schema, Budget())
    said = enginelogs.xgrammar_findings(
        nodes,
        "0.2.8",
        [ONEOF, "multipleOf is not supported for type:number; ignoring multipleOf", "A new warning"],
    )
    merged = merge(table, said + said)  # a message twice is one finding
    by_pointer = {f.pointer: f for f in merged}
    assert len(merged) == len(table) + 1  # the two the table names are confirmed, the new one added
    oneof = by_pointer["/properties/u/oneOf"]
    assert oneof.message.startswith("xgrammar compiles `oneOf exclusivity` and does not enforce it")
    assert "(verified on xgrammar" in oneof.message
    assert oneof.message.endswith(" (xgrammar 0.2.8 logged it)")
    number = by_pointer["/properties/n/multipleOf"]
    assert (number.rule, number.severity, number.keyword) == (
        "xgrammar_unenforced",
        "warning",
        "number multipleOf",
    )
    assert number.message.endswith(" (xgrammar 0.2.8 logged it)")
    assert by_pointer[""].message == "xgrammar 0.2.8 logged while compiling: A new warning"


@dataclass(frozen=True)
class Compile:
    """What exporter.lint.engines.CompileResult carries, for the pure functions."""

    engine: str
    version: str
    ok: bool
    error: str = ""
    warnings: tuple[str, ...] = ()


def test_a_refusal_carries_the_engines_words() -> None:
    schema = {"type": "object", "properties": {"a": {"not": {"type": "string"}}, "b": {"uniqueItems": True}}}
    table = lint(schema, engines=("llguidance",))
    error = 'Unimplemented keys: ["not"]'
    merged = merge(
        table, enginelogs.findings(schema, [Compile("llguidance", "1.7.6", False, error)], Budget())
    )
    assert [(f.rule, f.pointer) for f in merged] == [(f.rule, f.pointer) for f in table]
    confirmed = {f.pointer: f.message for f in merged}
    assert confirmed["/properties/a/not"].endswith(' (llguidance 1.7.6: Unimplemented keys: ["not"])')
    assert "llguidance 1.7.6" not in confirmed["/properties/b/uniqueItems"]  # it stops at the first
    unknown = enginelogs.findings(
        schema, [Compile("llguidance", "1.9.1", False, "Unsatisfiable schema")], Budget()
    )
    (alone,) = merge(table, unknown)[len(table) :]
    assert (alone.rule, alone.severity, alone.pointer) == ("llguidance_refused", "error", "")
    assert alone.message == "llguidance 1.9.1 refuses this schema at compile time: Unsatisfiable schema"


def test_what_lenient_llguidance_compiles_replaces_the_refusal() -> None:
    schema = {
        "x-guidance": {"lenient": True},
        "type": "object",
        "properties": {"a": {"not": {"type": "string"}}},
    }
    table = lint(schema, engines=("llguidance",))
    assert [(f.rule, f.pointer) for f in table] == [("llguidance_refused", "/properties/a/not")]
    compiled = Compile("llguidance", "1.9.1", True, warnings=('Unimplemented keys: ["not"]',))
    (finding,) = merge(table, enginelogs.findings(schema, [compiled], Budget()))
    assert (finding.rule, finding.severity, finding.pointer) == (
        "llguidance_ignored",
        "warning",
        "/properties/a/not",
    )
    assert finding.message == (
        'llguidance compiles `not` and ignores it (llguidance 1.9.1 warned: Unimplemented keys: ["not"])'
    )


def test_a_schema_past_the_budget_maps_what_was_walked() -> None:
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "number", "multipleOf": 0.5} for i in range(50)},
    }
    nodes = enginelogs._nodes(wide, Budget(max_nodes=10))
    assert len(nodes) == 10
    assert enginelogs._nodes(True, Budget()) == []
    assert sites(True, ONEOF) == [("oneOf exclusivity", "")]


def test_findings_carry_the_keyword_their_message_names() -> None:
    """The keyword a backend finding is about is its own field, the one its message names."""
    schema = {"oneOf": [{"type": "integer"}, {"type": "number"}], "pattern": "a$b"}
    nodes = enginelogs._nodes(schema, Budget())
    messages = [ONEOF, "Anchor '$' in the middle of regex is ignored: a$b"]
    words = {r.finding.keyword for r in enginelogs.xgrammar_findings(nodes, "0.2.9", messages)}
    assert words == {"oneOf exclusivity", "pattern anchor in the middle"}
    refused = enginelogs.llguidance_refusals(nodes, "1.9.1", "oneOf constraints are not `supported`")
    assert [r.finding.keyword for r in refused] == ["oneOf"]


def test_what_xgrammar_logs_counts_only_where_it_can_show() -> None:
    """xgrammar's own disjointness proof is narrower than the table's: a fallback to anyOf over
    branches that exclude each other anyway, or under a `not`, changes nothing it emits."""
    apart = {"oneOf": [{"type": "string", "pattern": "^#"}, {"enum": ["red", "blue"]}]}
    overlapping = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    schema = {"type": "object", "properties": {"a": apart, "b": overlapping, "c": {"not": overlapping}}}
    said = enginelogs.findings(schema, [Compile("xgrammar", "0.2.8", True, warnings=(ONEOF,))], Budget())
    assert [r.finding.pointer for r in said] == ["/properties/b/oneOf"]


def test_the_engines_warnings_reach_the_daemons_analysis() -> None:
    """A schema whose llguidance warnings the probe read off the engine's matcher: the daemon's
    analysis turns them into `llguidance_ignored`, replacing the table's `llguidance_refused`
    (lenient mode compiles what the table says it refuses); without them, the table's finding."""
    import json

    from exporter.daemon.receiver.analysis import analyse
    from exporter.schema.findings import Thresholds

    schema = {"type": "object", "properties": {"a": {"type": "string", "format": "foo"}}}
    text = json.dumps({**schema, "x-guidance": {"lenient": True}})
    table = analyse("s", "json", text, Thresholds())[0].counts
    told = analyse("s", "json", text, Thresholds(), None, ("Unknown format: foo",))[0].counts
    assert table.get(("llguidance_refused", "error")) == 1 and ("llguidance_ignored", "warning") not in table
    assert told.get(("llguidance_ignored", "warning")) == 1 and ("llguidance_refused", "error") not in told
