"""`gdx fix` on a schema whose unions nest past gdx lint's limit (`union_depth`): flattened where that
keeps what it accepts, proven on the real engines over the Llama 3 tokenizer, each rewrite in the report;
where no union can be flattened, not fixed, and the report says why."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from exporter.analysis.lint import lint
from tests.support.cli import gdx
from tools.harness import TOKENIZER_JSON

POINT = {
    "type": "object",
    "required": ["x", "y"],
    "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
}
# A drawing's shape, as grown release by release: each new kind of shape wrapped the old union in a new one.
SHAPE = {"title": "Shape", "anyOf": [
    {"type": "null"},
    {"title": "since v2", "anyOf": [
        {"type": "object", "required": ["kind", "r"],
         "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}}},
        {"anyOf": [
            {"type": "object", "required": ["kind", "points"],
             "properties": {"kind": {"const": "path"}, "points": {"type": "array", "items": POINT}}},
            {"anyOf": [{"type": "string", "enum": ["square", "triangle"]}, POINT]},
        ]},
    ]},
]}  # fmt: skip
DRAWING = {"title": "Drawing", "type": "object", "required": ["name", "shape"],
           "properties": {"name": {"type": "string"}, "shape": SHAPE}}  # fmt: skip


def fix(out: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return gdx("fix", "--tokenizer", str(TOKENIZER_JSON), "--out", str(out), *map(str, files))


def write(path: Path, schema: dict[str, Any]) -> Path:
    path.write_text(json.dumps(schema), encoding="utf-8")
    return path


def test_unions_nested_past_the_limit_are_flattened_proven_and_reported(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    assert [f.pointer for f in lint(DRAWING) if f.rule == "union_depth"] == [
        "/properties/shape/anyOf/1/anyOf/1/anyOf/1/anyOf"
    ]
    out = fix(tmp_path / "fix", write(tmp_path / "drawing.json", DRAWING))
    assert out.returncode == 0, out.stdout + out.stderr
    (result,) = json.loads((tmp_path / "fix" / "report.json").read_text())["families"]
    assert result["fixed"] and result["finding"] == "union_depth"
    assert result["proofs"] and all(proof["proven"] for proof in result["proofs"])
    assert result["moved"] == [] and result["not_rewritten"] == []
    shape = "/properties/shape/anyOf/1"
    assert result["rewrites"] == [
        {"pointer": f"{shape}/anyOf/1/anyOf/1", "rewrite": "replaced by the 2 branches of its anyOf"},
        {"pointer": f"{shape}/anyOf/1", "rewrite": "replaced by the 3 branches of its anyOf"},
        {"pointer": shape, "rewrite": "replaced by the 4 branches of its anyOf"},
    ]
    static = json.loads((tmp_path / "fix" / result["folder"] / "schema.json").read_text())
    branches = static["properties"]["shape"]["anyOf"]
    kinds = [b.get("properties", {}).get("kind") or b.get("type") for b in branches]
    assert kinds == ["null", {"const": "circle"}, {"const": "path"}, "string", "object"]
    assert [f for f in lint(static) if f.rule == "union_depth"] == []
    assert (
        f"fixed  schema {result['family']} Drawing: 0 constraints moved to the check, 3 nested unions "
        "flattened" in out.stdout
    )


def test_unions_that_cannot_be_flattened_are_not_fixed_and_say_why(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    """The innermost union is a oneOf whose branches overlap (a square is both): inlined into the
    anyOf above it, a value both branches accept would pass where the oneOf rejects it."""
    overlapping = {"oneOf": [{"type": "string"}, {"enum": ["square", "triangle"]}]}
    kept = {**DRAWING, "properties": {**DRAWING["properties"], "shape": {"anyOf": [
        {"type": "null"}, {"allOf": [{"anyOf": [{"type": "boolean"}, {"allOf": [
            {"anyOf": [{"type": "integer"}, overlapping]}]}]}]}]}}}  # fmt: skip
    out = fix(tmp_path / "fix", write(tmp_path / "kept.json", kept))
    assert out.returncode == 1, out.stdout + out.stderr
    (result,) = json.loads((tmp_path / "fix" / "report.json").read_text())["families"]
    assert not result["fixed"] and result["folder"] is None and result["rewrites"] == []
    (left,) = result["not_rewritten"]
    assert left["pointer"] == "/properties/shape/anyOf/1/allOf/0/anyOf/1/allOf/0/anyOf/1/oneOf"
    assert "a oneOf in an anyOf whose branches are not provably exclusive" in left["why"]
    assert "its nested unions stay" in result["why_not"]
    assert not (tmp_path / "fix" / "Drawing").exists() and "not fixed  schema" in out.stdout
