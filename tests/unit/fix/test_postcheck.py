"""The check after decoding (exporter/fix/postcheck.py): on the output, what the family's static
schema dropped, read from the request's own schema; the same verdict as the jsonschema validator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from exporter.fix.command import standalone_check
from exporter.fix.postcheck import check, check_json
from exporter.schema.static import merge
from tests.unit.schema.test_static import perturbed_pairs, tenant, tenant_instance, valid, validator


def test_a_tenants_output_is_checked_against_that_tenants_own_values() -> None:
    variants = [tenant(t) for t in range(1, 6)]
    merged = merge(variants)
    moved = [(m.pointer, m.keyword) for m in merged.moved]
    assert check(tenant_instance(1), variants[0], moved) == []
    assert check_json(json.dumps(tenant_instance(1)), variants[0], moved) == []  # as the engine returns it
    wrong = check(tenant_instance(2), variants[0], moved)  # tenant 2's answer under tenant 1's request
    assert wrong == [
        "/tenant: is not the value this request requires",
        "/cost_center: is not one of the values this request allows",
        "/lines: has 2 items, more than this request's 1",
        "/lines/0: is out of this request's range (maximum 100)",
        "/lines/1: is out of this request's range (maximum 100)",
    ]
    assert valid(merged.schema, tenant_instance(2))  # the static grammar let it through: the check did not


def test_a_call_to_a_tool_the_request_did_not_enable_is_caught() -> None:
    def call(name: str) -> dict[str, Any]:
        return {"properties": {"name": {"type": "string", "enum": [name]}, "parameters": {"type": "object"}},
                "required": ["name", "parameters"]}  # fmt: skip

    request = {
        "type": "array",
        "minItems": 1,
        "maxItems": 1,
        "items": {"type": "object", "anyOf": [call("a"), call("b")]},
    }
    moved = [("/items", "anyOf")]
    assert check([{"name": "a", "parameters": {}}], request, moved) == []
    assert check([{"name": "c", "parameters": {}}], request, moved) == [
        "/0: matches none of the 2 alternatives this request allows"
    ]
    assert check([{"name": "a", "parameters": {}}] * 2, request) == [
        "/: has 2 items, more than this request's 1"
    ]


def test_only_what_moved_is_reported_unless_nothing_is_named() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}, "b": {"enum": [1]}}}
    output = {"a": "long", "b": 2}
    assert check(output, schema, [("/properties/b", "enum")]) == [
        "/b: is not one of the values this request allows"
    ]
    assert len(check(output, schema, [])) == 2


def test_hostile_outputs_and_schemas_end_in_a_message_not_an_exception() -> None:
    deep: Any = []
    for _ in range(10_000):
        deep = [deep]
    (message,) = check(deep, {"items": {"$ref": "#"}})
    assert message.startswith("/0/0/0/") and message.endswith(": nested deeper than 256: not checked")
    assert check({"a": 1}, {"$ref": "#"}) == []  # a reference to itself, followed a bounded number of times
    assert check_json("{not json", {}) == [
        "/: not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    ]
    assert check("x", {"type": "string", "pattern": "("}) == [
        "/: has a pattern the check does not read (missing ) at 1): not checked"
    ]


def test_it_runs_with_the_standard_library_alone(tmp_path: Path) -> None:
    """Written as the service's check.py (the pattern reader inlined) and imported by an isolated
    interpreter without site-packages or this package."""
    (tmp_path / "check.py").write_text(standalone_check([]), encoding="utf-8")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import check, json; "
        "print(json.dumps(check.check({'n': 3}, {'properties': {'n': {'maximum': 2}}})))"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["/n: is out of this request's range (maximum 2)"]


# The whole benchmark: about 20 s, so make test runs it and make check (the inner loop) does not.
@pytest.mark.slow
def test_on_jsonschemabench_its_verdict_is_the_validators() -> None:
    """Each real schema merged with a perturbed copy (as in test_static): for every instance the
    original accepts, the check against the perturbed variant, restricted to what moved, finds a
    broken constraint exactly when jsonschema rejects the instance under that variant."""
    agreed = rejected = 0
    disagreed: list[str] = []
    for pair in perturbed_pairs():
        if pair.merged.schema is None:
            continue
        moved = [(m.pointer, m.keyword) for m in pair.merged.moved]
        for instance in pair.instances:
            try:
                if not valid(pair.schema, instance):
                    continue
                theirs = validator(pair.other).is_valid(instance)
            except (jsonschema.exceptions.SchemaError, jsonschema.exceptions._WrappedReferencingError):
                break
            found = check(instance, pair.other, moved)
            if (found == []) == theirs:
                agreed += 1
                rejected += not theirs
            else:
                disagreed.append(f"{pair.id}: jsonschema {theirs}, check {found}")
    print(f"{agreed} verdicts agree ({rejected} rejections), {len(disagreed)} differ")
    assert agreed > 6000 and rejected > 500
    assert disagreed == [], disagreed[:10]
