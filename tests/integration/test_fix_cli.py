# ruff: noqa: E501  (schemas and request bodies read better on one line)
"""`gdx fix` as a user runs it: a request log in, per family injected per request the static schema
and check.py out, proven on real xgrammar and real llguidance over the Llama 3 tokenizer; what cannot
be fixed says why, and a static schema that loses a valid output or lets an invalid one through is
caught by the proof on either engine."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

from exporter.fix.plan import FamilyPlan
from exporter.fix.proof import prove
from exporter.lint.prove.engine import LlguidanceEngine, XgrammarEngine
from exporter.schema.identity import schema_hash
from exporter.schema.static import Merged, Moved
from tests.support.cli import gdx
from tools.harness import TOKENIZER_JSON


def fix(out: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`gdx fix --tokenizer <the Llama 3 tokenizer> --out OUT ARGS...` (tests ask for the
    `tokenizer_json` fixture, which says how to fetch it when it is missing)."""
    return gdx("fix", "--tokenizer", str(TOKENIZER_JSON), "--out", out, *args)


def chat(schema: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}}  # fmt: skip


def invoice(tenant: int) -> dict[str, Any]:
    """The seed's case, as Pydantic writes it: the tenant's cost-centre codes a `Literal` in `$defs`."""
    return {
        "$defs": {"LineItem": {"properties": {
            "amount": {"title": "Amount", "type": "number"},
            "cost_center": {"enum": [f"CC-{tenant:03d}-{i}" for i in range(4)], "title": "Cost Center", "type": "string"},
        }, "required": ["amount", "cost_center"], "title": "LineItem", "type": "object"}},
        "properties": {"vendor": {"title": "Vendor", "type": "string"},
                       "lines": {"items": {"$ref": "#/$defs/LineItem"}, "title": "Lines", "type": "array"}},
        "required": ["vendor", "lines"], "title": "Invoice", "type": "object",
    }  # fmt: skip


def proven(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A fixed result's proofs by engine: both engines, each proven, nothing lost or missed."""
    proofs = {p["engine"].split()[0]: p for p in result["proofs"]}
    assert list(proofs) == ["xgrammar", "llguidance"], result["proofs"]
    for p in proofs.values():
        assert p["proven"] and p["valid_instances_kept"] > 0, p
        assert (
            p["valid_instances_lost"] == [] and p["invalid_instances_missed"] == [] and p["error"] is None
        ), p
    return proofs


def write_log(path: Path, bodies: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies), encoding="utf-8")
    return path


def load_check(folder: Path) -> Any:
    """The written check.py, imported by an isolated interpreter, as a service would."""

    def run(output: Any, schema: Any) -> list[str]:
        code = (
            f"import sys, json; sys.path.insert(0, {str(folder)!r}); import check; "
            f"print(json.dumps(check.check(json.loads(sys.argv[1]), json.loads(sys.argv[2]))))"
        )
        out = subprocess.run([sys.executable, "-I", "-S", "-c", code, json.dumps(output), json.dumps(schema)],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return list(json.loads(out.stdout))

    return run


def test_a_tenant_enum_family_gets_a_proven_static_schema_and_check(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    receipt = {"title": "Receipt", "type": "object", "properties": {"total": {"type": "number"}}}
    once = {"title": "Once", "type": "object", "properties": {"n": {"type": "integer"}}}
    bodies = [chat(invoice(t)) for t in range(24)] + [chat(receipt)] * 3 + [chat(once)]
    log = write_log(tmp_path / "requests.jsonl", bodies)
    out = fix(str(tmp_path / "fix"), str(log), "--proof-variants", "8")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((tmp_path / "fix" / "report.json").read_text())
    (family,) = report["families"]
    assert (
        family["fixed"] and family["name"] == "Invoice" and family["folder"] == f"Invoice-{family['family']}"
    )
    assert family["moved"] == [{"pointer": "/$defs/LineItem/properties/cost_center", "keyword": "enum"}]
    proofs = proven(family)
    xgrammar, llguidance = proofs["xgrammar"], proofs["llguidance"]
    assert xgrammar["compiles_before"] == 24 and xgrammar["compiles_after"] == 1  # every variant compiled
    assert xgrammar["variants"] == 24 and xgrammar["variants_checked"] == 8  # 8 checked, first to last
    # xgrammar: one compile, then cache hits; llguidance: no cache, every request compiles
    assert xgrammar["compile_seconds_after"] < xgrammar["compile_seconds_before"] / 5
    assert llguidance["compiles_before"] == llguidance["compiles_after"] == 24
    for p in proofs.values():
        assert p["valid_instances_kept"] > 8 and p["invalid_instances_caught"] > 0
    folder = tmp_path / "fix" / family["folder"]
    static = json.loads((folder / "schema.json").read_text())
    # 96 codes in all, past the 64 an enum keeps: the static schema has the type and the codes' one
    # length, the check the codes
    assert static["$defs"]["LineItem"]["properties"]["cost_center"] == {
        "title": "Cost Center", "type": "string", "minLength": 8, "maxLength": 8,
    }  # fmt: skip
    assert family["static_schema_hash"] == schema_hash((folder / "schema.json").read_text().strip())
    assert list(static["properties"]) == ["vendor", "lines"]  # the engine emits them in this order
    check = load_check(folder)
    mine = {"vendor": "ACME", "lines": [{"amount": 1.5, "cost_center": "CC-003-2"}]}
    assert check(mine, invoice(3)) == []
    assert check(mine, invoice(4)) == ["/lines/0/cost_center: is not one of the values this request allows"]
    assert f"fixed  family {family['family']} Invoice: 1 constraint moved to the check" in out.stdout
    assert (
        f"  {xgrammar['engine']}: 24 compiles" in out.stdout
        and f"  {llguidance['engine']}: 24 compiles" in out.stdout
    )
    assert "of 8 of its 24 variants (--proof-variants)" in out.stdout
    # the registry a new replica warms: the fix first, then the log's reused static schema; not the
    # schema sent once, nor any variant of the family
    from exporter.fix.warm import schemas

    registry = tmp_path / "fix" / "registry"
    assert [e["file"] for e in report["registry"]] == [
        f"{family['folder']}.json",
        f"Receipt-{schema_hash(json.dumps(receipt))}.json",
    ]
    assert [schema for _, schema in schemas([str(registry)])] == [static, receipt]
    again = fix(str(tmp_path / "fix"), str(log), "--proof-variants", "2", "--registry-size", "1")
    assert again.returncode == 0 and sorted(p.name for p in registry.iterdir()) == [
        f"{family['folder']}.json"
    ]


def test_an_agents_tool_subsets_get_the_union_and_a_check_that_the_tool_was_enabled(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    rng = random.Random(34)
    names = [f"tool_{i}" for i in range(6)]
    params = {
        n: {"type": "object", "properties": {f"q{i}": {"type": "string"}}, "required": [f"q{i}"]}
        for i, n in enumerate(names)
    }
    bodies = []
    for turn in range(20):
        enabled = sorted(rng.sample(names, rng.randint(2, 4)))
        bodies.append({"model": "m", "messages": [{"role": "user", "content": str(turn)}], "tool_choice": "required",
                       "parallel_tool_calls": False,
                       "tools": [{"type": "function", "function": {"name": n, "parameters": params[n]}} for n in enabled]})  # fmt: skip
    log = write_log(tmp_path / "agent.jsonl", bodies)
    out = fix(str(tmp_path / "fix"), str(log), "--tool-call-parser", "pythonic")
    assert out.returncode == 0, out.stdout + out.stderr
    (family,) = json.loads((tmp_path / "fix" / "report.json").read_text())["families"]
    assert family["moved"] == [{"pointer": "/items", "keyword": "anyOf"}]
    assert all(p["invalid_instances_caught"] > 0 for p in proven(family).values())
    static = json.loads((tmp_path / "fix" / family["folder"] / "schema.json").read_text())
    assert static["maxItems"] == 1 and len(static["items"]["anyOf"]) == len(
        {n for b in bodies for t in b["tools"] for n in [t["function"]["name"]]}
    )
    from exporter.engines.vllm.toolcalls import derive

    request_schema = json.loads(derive(bodies[0], "pythonic", "0.33.0").spec_text or "")
    enabled = [t["function"]["name"] for t in bodies[0]["tools"]]
    other = next(n for n in names if n not in enabled)
    check = load_check(tmp_path / "fix" / family["folder"])
    first = {"name": enabled[0], "parameters": {f"q{names.index(enabled[0])}": "x"}}
    assert check([first], request_schema) == []
    assert check([{"name": other, "parameters": {f"q{names.index(other)}": "x"}}], request_schema) == [
        f"/0: matches none of the {len(enabled)} alternatives this request allows"
    ]


def test_what_cannot_be_fixed_says_why_and_writes_nothing_for_it(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    """Variants whose `not` differs cannot be joined without changing what each accepts; a title
    made to climb out of the folder stays a folder name inside it."""
    bodies = [chat({"title": "../../etc", "type": "object", "properties": {"n": {"type": "integer", "not": {"const": i}}}})
              for i in range(20)]  # fmt: skip
    bodies += [
        chat(
            {
                "title": "../../x",
                "type": "object",
                "properties": {"k": {"enum": [f"v{i}"]}},
                "required": ["k"],
            }
        )
        for i in range(20)
    ]
    out = fix(str(tmp_path / "fix"), str(write_log(tmp_path / "r.jsonl", bodies)))
    assert out.returncode == 1, out.stdout + out.stderr
    families = {f["name"]: f for f in json.loads((tmp_path / "fix" / "report.json").read_text())["families"]}
    refused = families[".._.._etc"]  # titles are sanitised before they are names
    assert not refused["fixed"] and refused["folder"] is None
    assert refused["why_not"] == "cannot be joined: /properties/n/not: `not` differs between variants"
    fixed = families[".._.._x"]
    assert fixed["fixed"] and fixed["folder"] == f"_-_x-{fixed['family']}" and proven(fixed)
    assert refused["proofs"] == []
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    folder = f"fix/_-_x-{fixed['family']}"
    registry = f"fix/registry/_-_x-{fixed['family']}.json"  # named as safely as the folder
    assert written == [f"{folder}/check.py", f"{folder}/schema.json", registry, "fix/report.json", "r.jsonl"]
    assert f"not fixed  family {refused['family']} .._.._etc: cannot be joined" in out.stdout


def test_bad_input_is_exit_2_and_nothing_written(tmp_path: Path, tokenizer_json: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    out = fix(str(tmp_path / "fix"), str(tmp_path / "broken.json"))
    assert out.returncode == 2 and "gdx fix: " in out.stderr and not (tmp_path / "fix").exists()
    missing = gdx(
        "fix",
        "--tokenizer",
        str(tmp_path / "nope.json"),
        "--out",
        str(tmp_path / "fix"),
        str(tmp_path / "broken.json"),
    )
    assert missing.returncode == 2 and not (tmp_path / "fix").exists()
    for engine, said in [("outlines", "not xgrammar, llguidance, all, vllm==VERSION or sglang==VERSION"),
                         ("llguidance==0.0.1", "the proof compiles with the installed llguidance")]:  # fmt: skip
        flag = fix(str(tmp_path / "fix"), "--engine", engine, str(tmp_path / "broken.json"))
        assert flag.returncode == 2 and said in flag.stderr and not (tmp_path / "fix").exists()


def test_a_slow_schema_moves_its_costly_keywords_to_the_check(tmp_path: Path, tokenizer_json: Path) -> None:
    """One schema with a `{8,64}` pattern and item bounds above 20: those keywords leave the grammar,
    proven like a family; the check holds them (a patternProperties entry would not be dropped)."""
    codes = {"title": "Codes", "type": "object", "required": ["code", "tags"], "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{8,64}$"},
        "tags": {"type": "array", "minItems": 25, "maxItems": 50, "items": {"type": "string"}}}}  # fmt: skip
    (tmp_path / "codes.json").write_text(json.dumps(codes), encoding="utf-8")
    out = fix(str(tmp_path / "fix"), str(tmp_path / "codes.json"))
    assert out.returncode == 0, out.stdout + out.stderr
    (result,) = json.loads((tmp_path / "fix" / "report.json").read_text())["families"]
    assert result["fixed"] and result["finding"] == "bounded_quantifier/max_items" and proven(result)
    assert sorted((m["pointer"], m["keyword"]) for m in result["moved"]) == [
        ("/properties/code", "pattern"), ("/properties/tags", "maxItems"), ("/properties/tags", "minItems"),
    ]  # fmt: skip
    folder = tmp_path / "fix" / result["folder"]
    assert json.loads((folder / "schema.json").read_text())["properties"] == {
        "code": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}}  # fmt: skip
    check = load_check(folder)
    assert check({"code": "ABCDEFGHIJ", "tags": ["t"] * 30}, codes) == []
    assert check({"code": "abc", "tags": ["t"]}, codes) == [
        "/code: does not match the pattern this request requires",
        "/tags: has 1 items, fewer than this request's 25",
    ]
    assert f"fixed  schema {result['family']} Codes: 3 constraints moved to the check" in out.stdout
    assert out.stdout.count(": 1 compile (") == 2  # one line per engine


def test_a_static_schema_that_loses_or_lets_through_is_caught_on_both_engines(tokenizer_json: Path) -> None:
    """The proof itself, on each engine: a static schema stricter than a member (its enum lacks the
    member's value) loses that member's valid outputs; a check that holds another constraint than
    the enum the static schema dropped lets the other members' values through both."""
    variants = tuple({"type": "object", "properties": {"k": {"enum": [v]}}, "required": ["k"]} for v in "ab")
    strict = {"type": "object", "properties": {"k": {"enum": ["a"]}}, "required": ["k"]}
    loose = {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}

    def plan(static: dict[str, Any], pointer: str) -> FamilyPlan:
        merged = Merged(static, (Moved(pointer, "enum"),))
        return FamilyPlan("f", "F", "F-f", "warning", 2, variants, ("a", "b"), merged)

    for engine in (XgrammarEngine(str(tokenizer_json)), LlguidanceEngine(str(tokenizer_json))):
        assert prove(plan(loose, "/properties/k"), engine, [1, 1]).proven, engine.name  # what gdx fix writes
        lost = prove(plan(strict, "/properties/k"), engine, [1, 1])
        assert not lost.proven and lost.lost[0].startswith('variant 1: the static grammar rejects {"k"'), lost
        missed = prove(plan(loose, "/properties/other"), engine, [1, 1])
        assert not missed.proven and missed.missed[0].startswith("variant 0: the check lets through"), missed


def test_renamed_and_reordered_families_get_one_canonical_schema(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    """Per-tenant model names (the same models under `LineItem_<tenant>`, and a whole model under
    `Order_<tenant>`) and per-request order (an enum from a set): gdx fix writes one schema per
    family, its models named by what the variants' names share, no tenant in it, proven on both
    engines."""
    import random

    rng = random.Random(20261205)
    tenants = [f"tnt{rng.randrange(10**6)}qq" for _ in range(12)]
    members = [f"CC-{i:02d}" for i in range(8)]
    bodies = []
    for t in tenants:
        item = {
            "title": f"LineItem_{t}",
            "type": "object",
            "properties": {"sku": {"type": "string"}},
            "required": ["sku"],
        }
        items = {"type": "array", "items": {"$ref": f"#/$defs/LineItem_{t}"}}
        bodies.append(
            chat(
                {
                    "title": "Invoice",
                    "type": "object",
                    "properties": {"items": items},
                    "$defs": {f"LineItem_{t}": item},
                }
            )
        )
        order = {"title": f"Order_{t}", "type": "object", "properties": {"n": {"type": "integer"}}}
        bodies.append(chat({**order, "required": ["n"]}))  # the whole model named per tenant
        rng.shuffle(members)
        bodies.append(
            chat(
                {
                    "title": "Code",
                    "type": "object",
                    "properties": {"cc": {"enum": list(members)}},
                    "required": ["cc"],
                }
            )
        )
    out = fix(str(tmp_path / "fix"), str(write_log(tmp_path / "r.jsonl", bodies)))
    assert out.returncode == 0, out.stdout + out.stderr
    families = {f["name"]: f for f in json.loads((tmp_path / "fix" / "report.json").read_text())["families"]}
    assert set(families) == {"Invoice", "Code", "Order"}
    assert all(f["fixed"] and proven(f) for f in families.values())
    order = json.loads((tmp_path / "fix" / families["Order"]["folder"] / "schema.json").read_text())
    assert order["title"] == "Order"
    invoice = json.loads((tmp_path / "fix" / families["Invoice"]["folder"] / "schema.json").read_text())
    assert invoice["$defs"].keys() == {"LineItem"} and invoice["properties"]["items"]["items"] == {
        "$ref": "#/$defs/LineItem"
    }
    written = "".join(p.read_text() for p in (tmp_path / "fix").rglob("*") if p.is_file())
    assert not any(t in written for t in tenants)
    code = json.loads((tmp_path / "fix" / families["Code"]["folder"] / "schema.json").read_text())
    assert sorted(code["properties"]["cc"]["enum"]) == sorted(members)


def test_length_bounds_that_lose_escaped_values_on_xgrammar_are_widened_and_proven_again(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    """Per-tenant consts past the enum limit, each of one length and holding a character JSON must
    escape (built at random): the static schema keeps the shared length, under which xgrammar takes
    no escape at all and refuses every tenant's own value (the first proof loses them), so gdx fix
    drops the bounds from the grammar, checks them after decoding instead, and proves again."""
    rng = random.Random(20261206)
    length = rng.randint(6, 12)
    names: set[str] = set()
    while len(names) < 70:  # past the 64 members an enum keeps
        chars = [rng.choice(string.ascii_lowercase) for _ in range(length)]
        chars[rng.randrange(length)] = rng.choice(['"', "\\", "\n", "\t"])
        names.add("".join(chars))
    tenants = sorted(names)
    bodies = [
        chat({"title": "Ticket", "type": "object", "required": ["tenant", "n"],
              "properties": {"tenant": {"const": t, "type": "string"}, "n": {"type": "integer"}}})
        for t in tenants
    ]  # fmt: skip
    out = fix(str(tmp_path / "fix"), str(write_log(tmp_path / "r.jsonl", bodies)), "--proof-variants", "6")
    assert out.returncode == 0, out.stdout + out.stderr
    (family,) = json.loads((tmp_path / "fix" / "report.json").read_text())["families"]
    assert family["fixed"] and proven(family)
    widened = [{"pointer": "/properties/tenant", "keyword": k} for k in ("maxLength", "minLength")]
    assert family["widened"] == widened and all(w in family["moved"] for w in widened)
    static = json.loads((tmp_path / "fix" / family["folder"] / "schema.json").read_text())
    assert static["properties"]["tenant"] == {"type": "string"}  # no bound left for xgrammar to overreach
    check = load_check(tmp_path / "fix" / family["folder"])
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert check({"tenant": tenants[0], "n": 1}, schema) == []
    assert check({"tenant": tenants[1], "n": 1}, schema) != []  # another tenant's value: caught after
    assert "widened: maxLength at /properties/tenant left the grammar" in out.stdout, out.stdout
