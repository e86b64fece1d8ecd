"""`xgrammar_overenforced` proven on the real engines over the Llama 3 vocabulary, from each mechanism
built at random (seeded; no fixed example): a document of a few plain properties with the mechanism
on one of them. `--prove` must show a witness that a standard validator accepts and that xgrammar
refuses token by token (both re-checked here, independently of the prover), which llguidance takes;
the same document with the mechanism closed (anchors, no bound) has no such finding. And `gdx lint
--prove`, as users run it, prints the refusal and puts the proof in its JSON."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from exporter.analysis.lint import lint
from exporter.lint.prove.engine import LlguidanceEngine, XgrammarEngine
from exporter.lint.prove.search import Prover
from tests.support.cli import gdx

RULE = "xgrammar_overenforced"
CASES = 4  # per mechanism


def _word(rng: random.Random, low: int = 2, high: int = 6) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))


def length_bound(key: str) -> Callable[[random.Random, bool], dict[str, Any]]:
    def build(rng: random.Random, closed: bool) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", key: rng.randint(1, 40)}
        if closed:
            schema["format"] = "date"  # xgrammar drops the bound beside a format: nothing is lost to it
        return schema

    return build


def pattern(rng: random.Random, closed: bool) -> dict[str, Any]:
    body = rng.choice([_word(rng), f"[0-9]{{{rng.randint(1, 4)}}}", f"{_word(rng)}-[a-z]+"])
    start, end = ("^", "$") if closed else rng.choice([("", ""), ("^", ""), ("", "$")])
    return {"type": "string", "pattern": start + body + end}


def name_pattern(rng: random.Random, closed: bool) -> dict[str, Any]:
    name = ("^" + _word(rng) + "$") if closed else _word(rng)
    value = rng.choice([{"type": "integer"}, {"type": "string"}, {"type": "boolean"}])
    return {"type": "object", "patternProperties": {name: value}, "additionalProperties": False}


MECHANISMS: dict[str, Callable[[random.Random, bool], dict[str, Any]]] = {
    "escapes under maxLength": length_bound("maxLength"),
    "escapes under minLength": length_bound("minLength"),
    "pattern matched whole": pattern,
    "patternProperties matched whole": name_pattern,
}


def document(rng: random.Random, build: Callable[[random.Random, bool], dict[str, Any]], closed: bool) -> Any:
    """Plain properties with the mechanism's subschema as one of them, at a random position."""
    names = [_word(rng) + str(i) for i in range(rng.randint(2, 5))]
    properties: dict[str, Any] = {n: rng.choice([{"type": "integer"}, {"type": "boolean"}]) for n in names}
    place = rng.randrange(len(names))
    properties[names[place]] = build(rng, closed)
    return {"type": "object", "properties": properties, "required": names}, names[place]


@pytest.fixture(scope="module")
def xgrammar(tokenizer_json: Path) -> XgrammarEngine:
    return XgrammarEngine(str(tokenizer_json))


@pytest.fixture(scope="module")
def llguidance(tokenizer_json: Path) -> LlguidanceEngine:
    return LlguidanceEngine(str(tokenizer_json))


@pytest.mark.parametrize("keyword", sorted(MECHANISMS))
def test_each_mechanism_is_proven_on_xgrammar_and_not_llguidances(
    keyword: str, xgrammar: XgrammarEngine, llguidance: LlguidanceEngine
) -> None:
    rng = random.Random(f"overenforced:{keyword}")
    prover = Prover(xgrammar)
    for _ in range(CASES):
        schema, place = document(rng, MECHANISMS[keyword], closed=False)
        text = json.dumps(schema)
        findings = [f for f in prover.apply(text, lint(schema)) if f.rule == RULE]
        assert [(f.keyword, f.pointer.startswith(f"/properties/{place}/")) for f in findings] == [
            (keyword, True)
        ]
        (finding,) = findings
        assert finding.severity == "warning" and finding.proof is not None, finding
        assert finding.proof.status == "proven", (schema, finding.proof)
        witness = json.loads(finding.proof.instance)
        jsonschema.Draft202012Validator(schema).validate(witness)  # valid for the schema
        assert not xgrammar.accepts(xgrammar.compile(text), finding.proof.instance)  # xgrammar refuses it
        assert llguidance.accepts(llguidance.compile(text), finding.proof.instance)  # llguidance takes it

        closed, _ = document(random.Random(f"{keyword}:{place}"), MECHANISMS[keyword], closed=True)
        assert [f for f in lint(closed) if f.rule == RULE] == []


def test_gdx_lint_prove_prints_the_refusal_and_exports_the_proof(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    rng = random.Random("overenforced:cli")
    schema, place = document(rng, pattern, closed=False)
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema, indent=2))
    base = ("lint", "--engine", "xgrammar", "--tokenizer", str(tokenizer_json), "--prove")
    done = gdx(*base, "--format", "json", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # a warning, not an error
    (entry,) = json.loads(done.stdout)["families"][0]["schemas"]
    (finding,) = [f for f in entry["findings"] if f["rule"] == RULE]
    assert finding["pointer"] == f"/properties/{place}/pattern" and finding["proof"]["status"] == "proven"
    text = gdx(*base, str(path), cwd=tmp_path)
    assert f"proven on xgrammar {metadata.version('xgrammar')}: it refuses" in text.stdout, text.stdout
