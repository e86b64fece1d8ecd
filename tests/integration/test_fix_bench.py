"""`gdx fix` on the two kinds of input the issue names: a log of per-tenant consts (every tenant's
request pins its own id with `const`) and the JSONSchemaBench schemas gdx lint's slow-compile rules
flag; each fix proven on real xgrammar and real llguidance over the Llama 3 tokenizer."""

from __future__ import annotations

import gzip
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from exporter.analysis.lint import lint
from exporter.lint.prove.engine import LlguidanceEngine, XgrammarEngine
from exporter.lint.prove.validator import Validator
from exporter.schema.findings import Thresholds
from exporter.schema.identity import schema_hash
from tests.integration.test_fix_cli import chat, fix, load_check, proven, write_log
from tools.harness import JSONSCHEMABENCH

TENANTS = 16  # at most 64: the static schema joins their consts into one enum
REGIONS = ("eu", "us", "apac", "latam")


def ticket(tenant: int) -> dict[str, Any]:
    """A tenant's request schema: its own id (and region, inside each line item) pinned by `const`."""
    return {"title": "Ticket", "type": "object", "properties": {
        "tenant": {"const": f"tenant-{tenant:02d}"},
        "subject": {"type": "string", "maxLength": 80},
        "priority": {"enum": ["low", "normal", "high"]},
        "lines": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "region": {"const": REGIONS[tenant % len(REGIONS)]}},
            "required": ["sku", "region"]}},
    }, "required": ["tenant", "subject", "priority", "lines"]}  # fmt: skip


def test_per_tenant_consts_become_one_enum_and_a_check_of_the_tenants_own_value(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    log = write_log(tmp_path / "requests.jsonl", [chat(ticket(t)) for t in range(TENANTS)])
    out = fix(str(tmp_path / "fix"), str(log), "--proof-variants", "8")  # all 16 compiled, 8 walked
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((tmp_path / "fix" / "report.json").read_text())
    (family,) = report["families"]
    assert family["fixed"] and family["name"] == "Ticket" and family["why_not"] is None
    assert family["finding"].startswith("dynamic_schema") and len(family["members"]) == TENANTS
    assert family["moved"] == [
        {"pointer": "/properties/lines/items/properties/region", "keyword": "const"},
        {"pointer": "/properties/tenant", "keyword": "const"},
    ]
    for p in proven(family).values():  # both engines, nothing lost or missed
        assert p["variants"] == TENANTS and p["variants_checked"] == 8, p
        assert p["valid_instances_kept"] >= 8 and p["invalid_instances_caught"] > 0, p
    folder = tmp_path / "fix" / family["folder"]
    static = json.loads((folder / "schema.json").read_text())
    # the consts joined: one enum of every tenant's id, every region; the rest as each tenant sends it
    assert static["properties"]["tenant"] == {"enum": [f"tenant-{t:02d}" for t in range(TENANTS)]}
    assert static["properties"]["lines"]["items"]["properties"]["region"] == {"enum": sorted(REGIONS)}
    assert list(static["properties"]) == ["tenant", "subject", "priority", "lines"]
    assert {k: v for k, v in static["properties"].items() if k not in ("tenant", "lines")} == {
        k: v for k, v in ticket(0)["properties"].items() if k not in ("tenant", "lines")
    }
    assert static["required"] == ticket(0)["required"]
    check = load_check(folder)

    def output(tenant: int) -> dict[str, Any]:
        return {"tenant": f"tenant-{tenant:02d}", "subject": "printer on fire", "priority": "high",
                "lines": [{"sku": "A-1", "region": REGIONS[tenant % len(REGIONS)]}]}  # fmt: skip

    assert check(output(3), ticket(3)) == []
    assert check(output(4), ticket(4)) == []
    assert check(output(4), ticket(3)) == [
        "/tenant: is not the value this request requires",
        "/lines/0/region: is not the value this request requires",
    ]
    # a constraint that stayed in the static schema is the grammar's to hold, not the check's
    assert check({**output(3), "priority": "urgent"}, ticket(3)) == []
    assert f"fixed  family {family['family']} Ticket: 2 constraints moved to the check" in out.stdout


SLOW_RULES = ("max_items", "bounded_quantifier", "large_enum")  # the slow-compile rules gdx fix rewrites
SAMPLE = 8  # the first flagged schemas in the dataset's order: about 25 s of proofs on 2 busy CPUs
MOVABLE = {"minItems", "maxItems", "pattern", "enum"}  # what those rules' keywords are
NOT_MATCHING = ("", " ", "!", " x", "x ", "\n", "~~~", "0" * 300)  # strings to break a pattern with


def flagged(count: int) -> list[tuple[str, dict[str, Any], list[Any]]]:
    """The first `count` maskbench schemas (files by name, lines in order) on which a slow-compile rule
    fires at warning or error: (id, schema, the dataset's valid instances)."""
    out = []
    for path in sorted((JSONSCHEMABENCH / "maskbench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                doc = json.loads(line)
                findings = lint(doc["schema"], Thresholds(), ("xgrammar",))
                if any(f.rule in SLOW_RULES and f.severity in ("warning", "error") for f in findings):
                    valid = [t["data"] for t in doc["tests"] if t["valid"]]
                    out.append((doc["id"], doc["schema"], valid))
                    if len(out) == count:
                        return out
    raise AssertionError(f"fewer than {count} flagged schemas under {JSONSCHEMABENCH}")


def without(schema: dict[str, Any], moved: list[dict[str, str]]) -> dict[str, Any]:
    """The schema with each moved keyword deleted: what the static schema should be."""
    out = json.loads(json.dumps(schema))
    for m in moved:
        node: Any = out
        for token in m["pointer"].split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            node = node[int(token)] if isinstance(node, list) else node[token]
        del node[m["keyword"]]
    return out


def broken(instance: Any, pointer: str, keyword: str, schema: dict[str, Any]) -> tuple[Any, str] | None:
    """The instance with the value a moved constraint at `pointer` (a chain of `properties`) governs
    made to break it, and the check's message for it; None where the instance has no such value."""
    tokens = pointer.split("/")[1:]
    if len(tokens) % 2 or not tokens or any(t != "properties" for t in tokens[::2]):
        return None
    names = [t.replace("~1", "/").replace("~0", "~") for t in tokens[1::2]]
    out = json.loads(json.dumps(instance))
    holder: Any = out
    for name in names[:-1]:
        holder = holder.get(name) if isinstance(holder, dict) else None
    if not isinstance(holder, dict) or names[-1] not in holder:
        return None
    rule: Any = schema
    for name in names:
        rule = rule["properties"][name]
    value = holder[names[-1]]
    if keyword == "maxItems" and isinstance(value, list) and value:
        holder[names[-1]] = value + [value[0]] * (rule["maxItems"] + 1 - len(value))
        return out, f"has {rule['maxItems'] + 1} items, more than this request's {rule['maxItems']}"
    if keyword == "pattern" and isinstance(value, str):
        for text in NOT_MATCHING:
            if re.search(rule["pattern"], text) is None:
                holder[names[-1]] = text
                return out, "does not match the pattern this request requires"
    return None


def served(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A fixed result's proofs by engine: each engine proven, except one that refuses the schema as
    sent (it never serves it: `refused`, said); xgrammar among the proven."""
    proofs = {p["engine"].split()[0]: p for p in result["proofs"]}
    assert list(proofs) == ["xgrammar", "llguidance"], result["proofs"]
    for p in proofs.values():
        if p["refused"]:
            assert p["refused"].startswith(f"{p['engine'].split()[0]} refuses the schema as sent: "), p
            continue
        assert p["proven"] and p["valid_instances_kept"] > 0, p
        assert (
            p["valid_instances_lost"] == [] and p["invalid_instances_missed"] == [] and p["error"] is None
        ), p
    assert proofs["xgrammar"]["proven"], proofs
    return proofs


def test_jsonschemabench_schemas_the_slow_compile_rules_flag_are_fixed_or_say_why(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    """The first schemas of the dataset gdx lint flags slow to compile, as schema files into one run
    of gdx fix: each fixed and proven on both engines, or not fixed and saying why; most fixed."""
    started = time.monotonic()
    sample = flagged(SAMPLE)
    files = []
    for index, (name, schema, _) in enumerate(sample):
        files.append(tmp_path / f"{index:02d}-{re.sub(r'[^A-Za-z0-9_-]', '_', name)}.json")
        files[-1].write_text(json.dumps(schema), encoding="utf-8")
    out = fix(str(tmp_path / "fix"), *map(str, files))
    assert out.returncode in (0, 1), out.stdout + out.stderr
    report = json.loads((tmp_path / "fix" / "report.json").read_text())
    by_member = {member: r for r in report["families"] for member in r["members"]}
    entries = []  # (id, schema, valid instances, its entry in the report), in the dataset's order
    for (name, schema, valid), path in zip(sample, files, strict=True):
        result = by_member[schema_hash(path.read_text(encoding="utf-8"))]  # every flagged one is reported
        entries.append((name, schema, valid, result))
        if "patternProperties entry stays" in (result["why_not"] or ""):
            # nothing to move: a bounded quantifier in a patternProperties name (not rewritten: dropping
            # that entry could hand its properties to additionalProperties: false), said, not skipped
            slow = [f for f in lint(schema) if f.rule in SLOW_RULES and f.severity != "info"]
            assert all("/patternProperties/" in f.pointer for f in slow) and not result["fixed"], name
    results = list({r["family"]: r for *_, r in entries}.values())
    refusing: dict[str, Any] = {}  # an engine loaded to see it refuse a schema as sent
    for name, schema, _, result in entries:
        if not result["fixed"]:
            assert result["why_not"] and result["folder"] is None
            engine, _, why = result["why_not"].removeprefix("on ").partition(": ")
            if why.startswith("the static schema does not compile"):  # only where the schema as sent
                kind = engine.split()[0]  # does not compile either: nothing the fix did
                if kind not in refusing:
                    load = XgrammarEngine if kind == "xgrammar" else LlguidanceEngine
                    refusing[kind] = load(str(tokenizer_json))
                with pytest.raises(Exception):  # noqa: B017  (each engine raises its own kind)
                    refusing[kind].compile(json.dumps(schema))
            continue
        served(result)  # on each engine that compiles the schema: valid kept, nothing lost
        assert set(result["finding"].split("/")) <= set(SLOW_RULES) and not result["rewrites"], result
        assert result["moved"] and {m["keyword"] for m in result["moved"]} <= MOVABLE, result["moved"]
        # the static schema is the schema as sent without the moved keywords
        folder = tmp_path / "fix" / result["folder"]
        assert json.loads((folder / "schema.json").read_text()) == without(schema, result["moved"]), name
    fixed = [r for r in results if r["fixed"]]
    refused = sum(any(p["refused"] for p in r["proofs"]) for r in fixed)
    assert 2 * len(fixed) >= len(results), [r["why_not"] for r in results]
    # the slowest compile among them is what the fix is for: a bounded quantifier's states gone
    xgrammar = max((served(r)["xgrammar"] for r in fixed), key=lambda p: p["compile_seconds_before"])
    assert xgrammar["compile_seconds_after"] < xgrammar["compile_seconds_before"] / 10, xgrammar
    # the check of the first fixed schema with dataset instances: they pass; one of them with a moved
    # constraint broken (a pattern, too many items) fails, as the schema as sent says, with a message
    name, schema, valid, result = next(e for e in entries if e[3]["fixed"] and e[2])
    check, validator = load_check(tmp_path / "fix" / result["folder"]), Validator(schema)
    for instance in valid:
        assert validator.violations(instance) == [] and check(instance, schema) == [], (name, instance)
    pointer, (instance, message) = next(
        (m["pointer"], bad)
        for m in result["moved"]
        for given in valid
        if (bad := broken(given, m["pointer"], m["keyword"], schema)) is not None
    )
    assert validator.violations(instance), instance
    assert check(instance, schema) == ["/" + "/".join(pointer.split("/")[2::2]) + f": {message}"], name
    print(f"\ngdx fix on the first {len(sample)} JSONSchemaBench schemas gdx lint flags slow to compile: "
          f"{len(fixed)} fixed / {len(results)} (refused by an engine as sent: {refused}), "
          f"{time.monotonic() - started:.1f} s")  # fmt: skip
