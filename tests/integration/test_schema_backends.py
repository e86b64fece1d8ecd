"""The backend rules checked against the real engines on every run: each keyword the rules say
xgrammar does not enforce is compiled by xgrammar, which then accepts a must-reject instance; each
keyword the rules say llguidance refuses fails llguidance's compile. And the linter detects each
keyword in its own example, so rule and table cannot drift apart."""

from __future__ import annotations

import importlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from exporter.enginecheck import Engines
from exporter.schema import backends
from exporter.schema.lint import lint


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


def _keywords(schema: dict[str, Any], rule: str) -> set[str]:
    """The keywords a rule names (between backticks) on a schema."""
    return {finding.message.split("`")[1] for finding in lint(schema) if finding.rule == rule}


@pytest.mark.parametrize("keyword", sorted(backends.XGRAMMAR_UNENFORCED))
def test_xgrammar_does_not_enforce(engines: Engines, keyword: str) -> None:
    behaviour = backends.XGRAMMAR_UNENFORCED[keyword]
    assert engines.compile(json.dumps(behaviour.example))[0].ok
    assert engines.xgrammar_accepts(behaviour.example, behaviour.must_reject) == "unenforced"
    assert keyword in _keywords(behaviour.example, "xgrammar_unenforced")


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
