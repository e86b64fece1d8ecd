"""`--prove` on the real xgrammar over the real Llama 3 vocabulary: a counterexample for every keyword
the table names, each re-checked here on another path than the prover's (the engine fed the text as a
string, not tokens; the validator run afresh, its own errors compared), a gap no table names found
by the search alone, and a finding without a counterexample dropped to info."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from exporter.analysis.lint import lint
from exporter.engines.grammars import backends
from exporter.lint.prove.engine import XgrammarEngine
from exporter.lint.prove.search import ProofSettings, prove
from exporter.schema.findings import Finding
from tests.support.cli import gdx

SETTINGS = ProofSettings(seconds=20.0, explore=0.0, patience=20.0)


@pytest.fixture(scope="module")
def engine(tokenizer_json: Path) -> XgrammarEngine:
    expected = os.environ.get("GDX_EXPECT_XGRAMMAR")
    if expected:  # run per pinned version by test_engine_versions.py
        assert metadata.version("xgrammar") == expected
    return XgrammarEngine(str(tokenizer_json))


@pytest.fixture(scope="module")
def recheck(tokenizer_json: Path) -> Any:
    """The independent verdict: a fresh compile, the instance fed as one string (xgrammar splits it
    into bytes itself), and the validator's own error messages."""
    import xgrammar
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json))
    stop = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    info = xgrammar.TokenizerInfo.from_huggingface(
        tokenizer, vocab_size=len(tokenizer), stop_token_ids=[stop]
    )

    def check(schema: Any, instance: str) -> list[str]:
        compiled = xgrammar.GrammarCompiler(info, cache_enabled=False).compile_json_schema(json.dumps(schema))
        matcher = xgrammar.GrammarMatcher(compiled)
        assert matcher.accept_string(instance), f"the engine rejects {instance}"
        assert matcher.accept_token(stop) and matcher.is_terminated(), f"the engine does not end {instance}"
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(json.loads(instance)))
        assert errors, f"the validator accepts {instance}"
        return [_short(error.message) for error in errors]

    return check


def _short(message: str) -> str:
    """As a proof quotes the validator: its first 200 characters."""
    return message if len(message) <= 200 else message[:197] + "..."


def _finding(schema: Any, name: str) -> Finding:
    found = [
        f for f in lint(schema, engines=["xgrammar"]) if f.rule == "xgrammar_unenforced" and f.keyword == name
    ]
    assert found, f"the linter does not name `{name}` on its own example"
    return found[0]


@pytest.mark.parametrize("name", sorted(backends.XGRAMMAR_UNENFORCED))
def test_every_table_keyword_gets_a_counterexample(engine: XgrammarEngine, recheck: Any, name: str) -> None:
    schema = backends.XGRAMMAR_UNENFORCED[name].example
    target = _finding(schema, name)
    outcome = prove(json.dumps(schema), [target], engine, SETTINGS)
    (proved,) = outcome.findings
    assert proved.proof is not None and proved.proof.status == "proven", proved.proof
    assert proved.severity == target.severity
    assert proved.proof.engine == f"xgrammar {metadata.version('xgrammar')}"
    messages = recheck(schema, proved.proof.instance)
    assert proved.proof.violation in messages


def test_a_gap_no_table_names_is_found_by_the_search(engine: XgrammarEngine, recheck: Any) -> None:
    # `type` beside a union whose branch says nothing of types: xgrammar compiles the union alone
    # and lets any value through; no table entry names `type` here
    schema = {"type": "object", "anyOf": [{"required": ["a"]}]}
    table = [f for f in lint(schema, engines=["xgrammar"]) if f.rule == "xgrammar_unenforced"]
    assert all(f.pointer != "/type" for f in table)
    outcome = prove(json.dumps(schema), table, engine, ProofSettings(seconds=20.0, explore=5.0))
    (gap,) = [f for f in outcome.discovered if f.pointer == "/type"]
    assert gap.rule == "xgrammar_unenforced" and gap.severity == "warning" and gap.proof is not None
    assert "`type`" in gap.message and "no known keyword" in gap.message
    assert gap.proof.violation in recheck(schema, gap.proof.instance)


def test_a_finding_without_counterexample_drops_to_info(engine: XgrammarEngine) -> None:
    # `not` is dropped, but the type already excludes what it forbids: nothing to show
    schema = {"type": "object", "properties": {"a": {"type": "string", "not": {"type": "integer"}}}}
    target = _finding(schema, "not")
    (result,) = prove(json.dumps(schema), [target], engine, ProofSettings(seconds=1.0)).findings
    assert result.severity == "info" and result.proof is not None
    assert result.proof.status == "unproven" and "no counterexample" in result.proof.how


def test_a_schema_that_does_not_compile_leaves_its_findings_unproven(engine: XgrammarEngine) -> None:
    schema = {"type": "string", "pattern": "(a)\\1", "not": {"const": "x"}}
    target = _finding(schema, "not")
    outcome = prove(json.dumps(schema), [target], engine, ProofSettings(seconds=1.0))
    assert outcome.error and outcome.findings[0].severity == "info"
    assert outcome.findings[0].proof is not None and "not compiled" in outcome.findings[0].proof.how


def test_gdx_lint_prove_prints_and_exports_the_counterexample(tmp_path: Path, tokenizer_json: Path) -> None:
    path = tmp_path / "tags.json"
    path.write_text(json.dumps(backends.XGRAMMAR_UNENFORCED["uniqueItems"].example))
    base = ["lint", "--engine", "xgrammar", "--tokenizer", str(tokenizer_json), "--prove"]
    done = gdx(*base, "--format", "json", str(path), timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (schema,) = doc["families"][0]["schemas"]
    (finding,) = [f for f in schema["findings"] if f["rule"] == "xgrammar_unenforced"]
    assert finding["proof"]["status"] == "proven" and finding["severity"] == "warning"
    instance = json.loads(finding["proof"]["instance"])
    assert len(instance) != len({json.dumps(item) for item in instance})  # a duplicate item
    text = gdx(*base, str(path), timeout=300)
    assert "proven on xgrammar" in text.stdout and finding["proof"]["instance"] in text.stdout


# What exporter/engines/grammars/compiled.py assumes of xgrammar's parser, on the installed version (and on
# every pinned one through test_engine_versions.py): (schema, instance, accepted).
MODEL_PREMISES = [
    ({"allOf": [{"type": "integer"}, {"minimum": 0}]}, '"any value"', True),  # several branches: any
    ({"allOf": [{"type": "integer"}, {"minimum": 0}]}, '{"zz":[1]}', True),
    ({"allOf": [{"type": "integer"}]}, '"x"', False),  # one branch: that branch
    ({"anyOf": [{"required": ["a"]}]}, "[1]", True),  # a branch without type: any value
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, '{"a":1,"b":2}', False),  # closed
    ({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, '{"b":2}', True),
    ({"type": "string", "pattern": "ab"}, '"xabx"', False),  # the pattern matches the whole string
    (
        {"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"type": "object"}]},
        '{"a":5}',
        True,
    ),
    ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "maximum": 1}, "5", True),  # $ref wins
    ({"type": "integer", "enum": ["a"]}, '"a"', True),  # enum before type
    ({"type": "object", "description": "bare"}, '{"a":[1]}', True),  # a bare object: any object
    ({"type": "array", "title": "bare"}, '[1,"x"]', True),  # a bare array: any array
    ({"type": "array", "uniqueItems": True}, "[1,1]", False),  # not bare: closed, `[]` only
    ({"type": "object", "maxProperties": 3}, '{"a":1}', False),
]


@pytest.mark.parametrize(("schema", "instance", "accepted"), MODEL_PREMISES)
def test_the_model_of_the_compile_holds_on_the_engine(
    engine: XgrammarEngine, schema: Any, instance: str, accepted: bool
) -> None:
    assert engine.accepts(engine.compile(json.dumps(schema)), instance) is accepted


def test_a_date_deep_in_optional_objects_is_proven(engine: XgrammarEngine, recheck: Any) -> None:
    """The walks rarely fill six optional objects; the schema's own example fills them all."""
    leaf = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}
    schema: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}, "a": leaf}}
    for name in ("b", "c", "d", "e", "f", "g"):
        schema = {
            "type": "object",
            "properties": {"x": {"type": "string"}, "y": {"type": "number"}, name: schema},
        }
    target = _finding(schema, "format date day of month")
    (proved,) = prove(json.dumps(schema), [target], engine, ProofSettings(seconds=3.0, patience=3.0)).findings
    assert proved.proof is not None and proved.proof.status == "proven", proved.proof
    assert "-02-30" in proved.proof.instance or "-04-31" in proved.proof.instance
    assert proved.proof.how == "edit of the schema's example where the finding points"  # before any walk
    assert proved.proof.violation in recheck(schema, proved.proof.instance)


def test_the_walk_over_character_tokens_makes_the_texts_the_walk_over_the_vocabulary_makes(
    engine: XgrammarEngine,
) -> None:
    """`sample` walks a grammar compiled over the character-tokens alone (microseconds a step instead
    of a mask over 128,256 tokens): from the same seed, the same text as the walk over the model's
    whole vocabulary, on two schemas of each JSONSchemaBench category (and on this
    xgrammar: test_engine_versions.py runs this file on each version the engines pin)."""
    import gzip
    import random

    import xgrammar

    from exporter.lint.prove.engine import _character_tokens, _RandomWalk
    from tools.harness import JSONSCHEMABENCH

    info = engine._info
    whole = _RandomWalk(*_character_tokens(info.decoded_vocab), engine.stop)

    def over_the_vocabulary(compiled: Any, rng: random.Random) -> str | None:
        matcher = xgrammar.GrammarMatcher(compiled.grammar)
        bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
        return whole(lambda: matcher.fill_next_token_bitmask(bitmask), matcher.accept_token,
                     bitmask[0].numpy(), rng)  # fmt: skip

    texts = compared = 0
    for path in sorted((JSONSCHEMABENCH / "schemas").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            schemas = sorted((json.dumps(json.loads(line)["schema"]) for line in lines), key=len)
        for text in (schemas[len(schemas) * q // 20] for q in (2, 3)):  # by size: the 10th and 15th %
            try:
                compiled = engine.compile(text)
            except Exception:
                continue
            seed = compared  # one walk a schema: the old versions' masks over the vocabulary are slow
            expected = over_the_vocabulary(compiled, random.Random(seed))
            assert engine.sample(compiled, random.Random(seed)) == expected, (path.name, seed)
            texts += expected is not None
            compared += 1
    assert compared >= 16 and texts >= compared // 2, (compared, texts)
