"""The backend rules checked against the real engines on every run: each keyword the rules say
xgrammar does not enforce is compiled by xgrammar, which then accepts a must-reject instance; each
keyword the rules say llguidance refuses fails llguidance's compile; each JSON Schema the rules say
an xgrammar version refuses fails that version's compile (and compiles on the others). And the
linter, given the installed versions, detects each keyword in its own example where the entry holds
on them, so rule and table cannot drift apart."""

from __future__ import annotations

import importlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from exporter.analysis.lint import lint
from exporter.engines.grammars import backends
from exporter.lint.engines import Engines


@pytest.fixture(scope="module")
def engines(tokenizer_json: Path) -> Engines:
    # test_engine_versions.py runs this module against each pinned engine version: check the
    # interpreter really imported those (a folder missing from the path would test the newest again)
    for package in ("xgrammar", "llguidance"):
        expected = os.environ.get(f"GDX_EXPECT_{package.upper()}")
        if expected:
            assert metadata.version(package) == expected, (package, metadata.version(package), expected)
            assert "/engines/" in importlib.import_module(package).__file__, package
    return Engines(str(tokenizer_json), ["xgrammar", "llguidance"])


@pytest.fixture(scope="module")
def vllm_engines(tokenizer_json: Path) -> Engines:
    """xgrammar as vLLM compiles: any whitespace, the cache on (0.2.7/0.2.8 fail some compiles only
    then)."""
    return Engines(str(tokenizer_json), ["xgrammar"], vllm_defaults=True)


INSTALLED = backends.Versions(
    xgrammar=metadata.version("xgrammar"), llguidance=metadata.version("llguidance")
)
XGRAMMAR_TABLE = backends.xgrammar_table_version(INSTALLED.xgrammar)


def _keywords(schema: dict[str, Any], rule: str) -> set[str]:
    """The keywords a rule names (between backticks) on a schema, for the installed versions."""
    found = lint(schema, versions=INSTALLED)
    return {finding.message.split("`")[1] for finding in found if finding.rule == rule}


def test_the_installed_versions_are_known() -> None:
    assert INSTALLED.xgrammar in backends.XGRAMMAR_VERSIONS
    assert INSTALLED.llguidance in backends.LLGUIDANCE_VERSIONS


@pytest.mark.parametrize("keyword", sorted(backends.XGRAMMAR_UNENFORCED))
def test_xgrammar_does_not_enforce(vllm_engines: Engines, keyword: str) -> None:
    """Compiled as vLLM does (any whitespace): with compact separators 0.2.7/0.2.8 emit ", " inside
    unconstrained values, so a compact instance there is rejected for its formatting alone."""
    behaviour = backends.XGRAMMAR_UNENFORCED[keyword]
    assert vllm_engines.compile(json.dumps(behaviour.example))[0].ok
    holds = behaviour.holds_on(XGRAMMAR_TABLE)
    verdict = vllm_engines.xgrammar_accepts(behaviour.example, behaviour.must_reject)
    assert verdict == ("unenforced" if holds else "enforced")
    assert (keyword in _keywords(behaviour.example, "xgrammar_unenforced")) == holds


@pytest.mark.parametrize("keyword", sorted(backends.XGRAMMAR_REFUSED))
def test_xgrammar_refuses_on_the_versions_listed(vllm_engines: Engines, keyword: str) -> None:
    behaviour = backends.XGRAMMAR_REFUSED[keyword]
    holds = behaviour.holds_on(XGRAMMAR_TABLE)
    (xgrammar,) = vllm_engines.compile(json.dumps(behaviour.example))
    assert xgrammar.ok != holds, xgrammar
    assert (keyword in _keywords(behaviour.example, "xgrammar_refused")) == holds


@pytest.fixture(scope="module")
def llguidance(tokenizer_json: Path) -> Any:
    from exporter.lint.prove.engine import LlguidanceEngine

    return LlguidanceEngine(str(tokenizer_json))


@pytest.mark.parametrize("keyword", sorted(backends.XGRAMMAR_OVERREACH))
def test_xgrammar_refuses_a_value_the_schema_allows(
    vllm_engines: Engines, llguidance: Any, keyword: str
) -> None:
    """Each over-enforcement entry: the validator accepts its value, xgrammar (compiled as vLLM does)
    refuses it on the versions listed, llguidance takes it (the loss is xgrammar's, not the schema's),
    and the rule names it on its own example exactly there."""
    from exporter.lint.prove.validator import Validator, dumps

    overreach = backends.XGRAMMAR_OVERREACH[keyword]
    assert Validator(overreach.example).violations(overreach.must_accept) == []
    holds = overreach.holds_on(XGRAMMAR_TABLE)
    verdict = vllm_engines.xgrammar_accepts(overreach.example, overreach.must_accept)
    assert verdict == ("enforced" if holds else "unenforced")  # "enforced": the value is refused
    compiled = llguidance.compile(json.dumps(overreach.example))
    assert llguidance.accepts(compiled, dumps(overreach.must_accept))
    assert (keyword in _keywords(overreach.example, "xgrammar_overenforced")) == holds


@pytest.mark.parametrize("keyword", sorted(backends.LLGUIDANCE_REFUSED))
def test_llguidance_refuses(engines: Engines, keyword: str) -> None:
    behaviour = backends.LLGUIDANCE_REFUSED[keyword]
    llguidance = engines.compile(json.dumps(behaviour.example))[1]
    assert llguidance.engine == "llguidance" and not llguidance.ok, llguidance
    assert keyword in _keywords(behaviour.example, "llguidance_refused")


@pytest.mark.parametrize(
    ("schema", "must_reject"),
    [
        ({"type": "object", "patternProperties": {"^x_": {"type": "integer"}}}, {"x_a": "s"}),
        ({"type": "integer", "multipleOf": 5}, 7),
        ({"type": "string", "format": "email"}, "zz zz"),
        ({"type": "string", "format": "uri-reference"}, "\\\\ zz"),
        ({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1}, {}),
    ],
    ids=["patternProperties", "multipleOf", "format-email", "format-uri-reference", "minProperties"],
)
def test_what_xgrammar_does_enforce_is_not_flagged(
    engines: Engines, schema: dict[str, Any], must_reject: Any
) -> None:
    """Older write-ups list these as unenforced; xgrammar 0.2.7 to 0.2.9 enforce them, so the rule is
    quiet (test_engine_versions.py runs this module on each pinned version)."""
    assert engines.xgrammar_accepts(schema, must_reject) == "enforced"
    assert _keywords(schema, "xgrammar_unenforced") == set()


@pytest.mark.parametrize(
    ("schema", "must_reject"),
    [
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, True),
        (
            {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"k": {"const": "a"}, "x": {"type": "integer"}},
                        "required": ["k", "x"],
                    },
                    {
                        "type": "object",
                        "properties": {"k": {"const": "b"}, "y": {"type": "string"}},
                        "required": ["k", "y"],
                    },
                ]
            },
            {"k": "a", "y": "s"},
        ),
    ],
    ids=["distinct-types", "discriminator"],
)
def test_disjoint_one_of_is_enforced_and_not_flagged(
    engines: Engines, schema: dict[str, Any], must_reject: Any
) -> None:
    assert engines.xgrammar_accepts(schema, must_reject) == "enforced"
    assert "oneOf exclusivity" not in _keywords(schema, "xgrammar_unenforced")


def test_llguidance_compiles_what_the_rule_leaves_alone(engines: Engines) -> None:
    quiet = {"type": "object", "properties": {"a": {"type": "string", "format": "date"}}, "required": ["a"],
             "minProperties": 1, "anyOf": [{"required": ["a"]}]}  # fmt: skip
    assert engines.compile(json.dumps(quiet))[1].ok
    assert _keywords(quiet, "llguidance_refused") == set()
