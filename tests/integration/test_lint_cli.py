"""`gdx hash` and `gdx lint` as a user runs them: real processes, real files, exit codes."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exporter import cli
from exporter.lint.command import OLD_SPELLINGS
from exporter.schema.identity import schema_hash, shape_hash
from tests.support.cli import gdx as forked

PATTERN = {
    "title": "Codes",
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^[A-Z]{8,64}$"}},
}


def gdx(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m exporter ARGS`: forked from the CLI's fork server, or a plain subprocess to be given
    `stdin` (the fork server's runs read /dev/null)."""
    if stdin is None:
        return forked(*args, timeout=300)
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args], input=stdin, capture_output=True, text=True, timeout=300
    )


def test_hash_matches_what_the_probe_reports(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(PATTERN, indent=4))
    engine_string = json.dumps(dict(reversed(list(PATTERN.items()))))  # what an engine might be sent
    out = gdx("hash", str(path))
    assert out.returncode == 0
    assert out.stdout.split() == [
        f"schema_hash={schema_hash(engine_string)}",
        f"shape_hash={shape_hash(engine_string)}",
        str(path),
    ]
    regex = tmp_path / "r.txt"
    regex.write_text("^[0-9]{3}$\n")
    assert gdx("hash", str(regex)).stdout.split()[0] == f"schema_hash={schema_hash('^[0-9]{3}$')}"


def test_lint_exit_codes_and_text(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "string"}}}))
    out = gdx("lint", str(good))
    assert out.returncode == 0 and "no findings" in out.stdout
    warn = tmp_path / "warn.json"
    warn.write_text(json.dumps(PATTERN))
    out = gdx("lint", str(warn))
    assert (
        out.returncode == 0
        and "bounded_quantifier" in out.stdout
        and "/properties/code/pattern" in out.stdout
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "array", "items": {}, "uniqueItems": True}))
    assert gdx("lint", str(bad)).returncode == 1  # llguidance refuses it: an error
    assert gdx("lint", "--engine", "xgrammar", str(bad)).returncode == 0  # only a warning for xgrammar
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    out = gdx("lint", str(broken))
    assert out.returncode == 2 and str(broken) in out.stderr and "not JSON" in out.stderr
    out = gdx("lint", str(tmp_path / "missing.json"))
    assert out.returncode == 2 and "missing.json" in out.stderr


def test_jsonl_variants_name_the_varying_enum(tmp_path: Path) -> None:
    lines = []
    for tenant in range(6):
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"cc": {"enum": [f"T{tenant}-{i}" for i in range(3)]}},
        }
        lines.append(json.dumps({"id": f"req{tenant}", "schema": schema}))
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = gdx("lint", "--format", "json", str(path))
    assert out.returncode == 0  # a warning without --tokenizer: the cost is not measured
    (family,) = json.loads(out.stdout)["families"]
    assert sorted(s["name"] for s in family["schemas"]) == [f"{path}:req{t}" for t in range(6)]
    assert [(f["rule"], f["severity"], f["pointer"]) for f in family["findings"]] == [
        ("dynamic_schema", "warning", "/properties/cc/enum")
    ]
    assert "T0-0" not in out.stdout  # no literal value in the report


def test_stdin_and_unstable_serialisation() -> None:
    a = json.dumps({"type": "integer", "maximum": 5})
    b = json.dumps({"maximum": 5, "type": "integer"})
    out = gdx("lint", "--format", "json", "-", stdin=f"{a}\n{b}\n")
    assert _rules(out) == ["unstable_serialization"]  # one distinct schema, two strings: reported once
    (family,) = json.loads(out.stdout)["families"]
    assert (family["requests"], family["variants"], family["schemas"][0]["lines"]) == (2, 1, 2)


def test_lint_compiles_for_real_with_a_tokenizer(tmp_path: Path, tokenizer_json: Path) -> None:
    """One run (the engines load once): a schema's compile and keyword probes, and scenario (d) with
    its compile seconds measured: a per-tenant enum is an error once they pass --lint.dynamic-seconds."""
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {"type": "object", "properties": {"a": {"not": {"type": "string"}}, "b": {"type": "string"}}}
        )
    )
    tenants = _log(tmp_path, "tenants.jsonl", [{"guided_json": _tenant(t), "prompt": "p"} for t in range(12)])
    out = gdx(
        "lint", "--format", "json", "--tokenizer", str(tokenizer_json), "--lint.dynamic-seconds", "1ms",
        str(path), str(tenants),
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    families = {f["schemas"][0]["name"].split(":")[0]: f for f in json.loads(out.stdout)["families"]}
    (report,) = families[str(path)]["schemas"]
    by_engine = {c["engine"]: c for c in report["compile"]}
    assert by_engine["xgrammar"]["ok"] and by_engine["xgrammar"]["seconds"] > 0
    assert not by_engine["llguidance"]["ok"] and "not" in by_engine["llguidance"]["error"]
    assert {(p["engine"], p["keyword"], p["outcome"]) for p in report["probes"]} == {
        ("xgrammar", "not", "unenforced"),
        ("llguidance", "not", "refused"),
    }
    tenant = families[str(tenants)]
    assert (tenant["requests"], tenant["variants"]) == (12, 12)
    slowest = [max(c["seconds"] for c in s["compile"]) for s in tenant["schemas"]]
    assert tenant["seconds"] == pytest.approx(sum(slowest), abs=1e-5) and tenant["seconds"] >= 0.001
    assert [(f["rule"], f["severity"], f["pointer"]) for f in tenant["findings"]] == [
        ("dynamic_schema", "error", "/properties/cost_center/enum")
    ]
    assert "s of compiles (error from 0.001 s)" in tenant["findings"][0]["message"]


def test_help_lists_the_rules_and_explains_families_and_kinds() -> None:
    out = gdx("lint", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    for rule in (
        "dynamic_schema",
        "bounded_quantifier",
        "xgrammar_unenforced",
        "too_complex",
        "grammar_size",
    ):
        assert rule in text
    for words in (
        "--kind {auto,json,regex,grammar,structural_tag}",
        "request log",
        "families",
        "guided_regex",
    ):
        assert words in text


def _four_levels(tmp_path: Path) -> Path:
    """Objects four deep: one past the default depth limit of 3."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(4):
        schema = {"type": "object", "properties": {"x": schema}}
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(schema))
    return path


def _findings(out: subprocess.CompletedProcess[str]) -> list[dict[str, str]]:
    """Every finding of a --format json report: the families' own, then their schemas'."""
    found = []
    for family in json.loads(out.stdout)["families"]:
        found += family["findings"]
        for schema in family["schemas"]:
            found += schema["findings"]
    return found


def _rules(out: subprocess.CompletedProcess[str]) -> list[str]:
    return [f["rule"] for f in _findings(out)]


def test_lint_takes_the_serve_flag_names(tmp_path: Path) -> None:
    path = _four_levels(tmp_path)
    assert _rules(gdx("lint", "--format", "json", str(path))) == ["depth"]
    out = gdx("lint", "--format", "json", "--lint.depth", "4", str(path))
    assert out.returncode == 0 and _rules(out) == [] and out.stderr == ""
    out = gdx("lint", "--format", "json", "--lint.budget-nodes", "2", "--lint.budget", "5s", str(path))
    assert out.returncode == 1 and _rules(out) == ["too_complex"]
    out = gdx("lint", "--lint.depth", "0", str(path))
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "gdx lint: invalid configuration: lint.depth (from --lint.depth): '0' must be greater than zero"
    )


def test_old_flag_spellings_still_work_and_warn_once(tmp_path: Path) -> None:
    path = _four_levels(tmp_path)
    args = ["--depth", "4", "--depth", "5", "--max-items", "30", "--union-depth", "4", "--union-width", "9"]
    args += ["--enum-size", "65", "--quantifier", "33", "--budget-seconds", "2", "--budget-nodes", "50000"]
    out = gdx("lint", "--format", "json", *args, str(path))
    assert out.returncode == 0 and _rules(out) == []  # --depth took effect
    assert out.stderr.splitlines() == [
        f"gdx lint: {old} is deprecated and goes away in the next release; use --{new}"
        for old, new in OLD_SPELLINGS.items()
    ]
    out = gdx("lint", "--format", "json", "--budget-nodes", "2", str(path))
    assert _rules(out) == ["too_complex"] and len(out.stderr.splitlines()) == 1


def test_old_spellings_are_hidden_aliases_of_the_new_flags() -> None:
    (commands,) = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    lint_parser = commands.choices["lint"]
    by_flag = {flag: action for action in lint_parser._actions for flag in action.option_strings}
    assert set(OLD_SPELLINGS) <= set(by_flag)
    for old, new in OLD_SPELLINGS.items():
        assert by_flag[old].dest == by_flag["--" + new].dest
        assert by_flag[old].help == argparse.SUPPRESS
    help_text = gdx("lint", "--help").stdout
    assert "--lint.budget-nodes" in help_text
    assert [old for old in OLD_SPELLINGS if old in help_text] == []


# ---------------------------------------------------------------------------------------------------
# Request logs grouped by family, and specs that are not JSON


def _log(tmp_path: Path, name: str, records: list[Any]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _chat(schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat request with a JSON Schema response format, as a service logs it."""
    return {
        "model": "llama",
        "messages": [{"role": "user", "content": "..."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
    }


def _tenant(tenant: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "cost_center": {"type": "string", "enum": [f"T{tenant}-CC{j}" for j in range(4)]},
            "amount": {"type": "number"},
        },
        "required": ["cost_center", "amount"],
    }


def _tool(i: int) -> dict[str, Any]:
    """A tool_choice="required" branch; the tools' arguments differ in structure."""
    kinds = ["string", "integer", "number", "boolean"]
    args = {f"arg{i}_{j}": {"type": kinds[(i + j) % 4]} for j in range(i % 4 + 1)}
    return {
        "type": "object",
        "properties": {
            "name": {"const": f"tool_{i}"},
            "arguments": {"type": "object", "properties": args, "required": sorted(args)},
        },
        "required": ["name", "arguments"],
    }


def _one_family(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    (family,) = json.loads(out.stdout)["families"]
    return dict(family)


def test_a_timestamp_in_a_description_is_one_family_injected_per_request(tmp_path: Path) -> None:
    """(a) Every request's schema carries the time it was made: one family, every request a compile."""
    records = []
    for i in range(25):
        stamp = f"2026-03-{1 + i % 28:02d}T{i % 24:02d}:{i:02d}:07Z"
        records.append(
            _chat(
                {
                    "title": "News digest",
                    "type": "object",
                    "properties": {"summary": {"type": "string", "description": f"The news as of {stamp}."}},
                    "required": ["summary"],
                }
            )
        )
    records.append({"model": "llama", "messages": [], "response_format": {"type": "json_object"}})
    path = _log(tmp_path, "digest.jsonl", records)
    out = gdx("lint", "--format", "json", str(path))
    assert out.returncode == 0, out.stderr
    family = _one_family(out)
    assert (family["name"], family["kind"], family["requests"], family["variants"]) == (
        "News_digest", "json", 25, 25,
    )  # fmt: skip
    (finding,) = family["findings"]
    assert (finding["rule"], finding["severity"], finding["pointer"]) == (
        "dynamic_schema", "warning", "/properties/summary/description",
    )  # fmt: skip
    assert "25 variants in 25 requests" in finding["message"] and "--tokenizer" in finding["message"]
    summary = json.loads(out.stdout)["summary"]
    assert (summary["skipped"], summary["skipped_by_reason"]) == (1, {"json_object": 1})
    assert "2026" not in out.stdout  # the injected value stays out of the report
    text = gdx("lint", str(path))
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert lines[0] == f"family {family['family']} News_digest  25 requests, 25 variants"
    assert "    same for 24 other variants: " in text.stdout  # identical per-spec findings, printed once
    assert lines[-3:-1] == [
        "1 family, 25 schemas, 25 requests: 0 error, 1 warning, 0 info; 1 request without a grammar",
        "  skipped      1  json_object (one fixed JSON grammar, the same for every request)",
    ]
    assert (
        lines[-1]
        == f"findings hold for xgrammar {_installed('xgrammar')}, llguidance {_installed('llguidance')}"
    )


def test_tool_subsets_are_one_family_and_the_union_is_what_varies(tmp_path: Path) -> None:
    """(b) tool_choice="required" over the tools each tenant enabled: random subsets of 12 tools."""
    rnd = random.Random(5)
    tools = [_tool(i) for i in range(12)]
    subsets = [sorted(rnd.sample(range(12), rnd.randint(2, 12))) for _ in range(40)]
    records = [
        {"structured_outputs": {"json": {"anyOf": [tools[i] for i in s]}}, "prompt": "."} for s in subsets
    ]
    out = gdx("lint", "--format", "json", str(_log(tmp_path, "tools.jsonl", records)))
    family = _one_family(out)
    distinct = len({tuple(s) for s in subsets})
    assert (family["requests"], family["variants"]) == (40, distinct) and distinct > 30
    (finding,) = family["findings"]
    assert (finding["rule"], finding["severity"], finding["pointer"]) == (
        "dynamic_schema",
        "warning",
        "/anyOf",
    )
    assert f"/anyOf: {distinct} distinct subsets of 12 branches" in finding["message"]
    assert family["varies"][0] == f"/anyOf: {distinct} distinct subsets of 12 branches"
    assert out.returncode == 0


def test_static_classifiers_each_reused_are_healthy(tmp_path: Path) -> None:
    """(c) Ten label sets, each sent again and again: a warm cache, at most an info."""
    records = []
    for k in range(10):
        schema = {"type": "object", "properties": {"label": {"enum": [f"c{k}-{j}" for j in range(5)]}}}
        records += [{"guided_json": schema, "prompt": "."}] * (9 + k % 2)
    random.Random(1).shuffle(records)
    out = gdx("lint", "--format", "json", str(_log(tmp_path, "classify.jsonl", records)))
    assert out.returncode == 0
    family = _one_family(out)
    assert (family["requests"], family["variants"]) == (95, 10)
    assert {(f["rule"], f["severity"]) for f in _findings(out)} == {("dynamic_schema", "info")}
    assert "static variants, each reused" in family["findings"][0]["message"]


def test_a_new_tenant_per_request_is_dynamic_schema(tmp_path: Path) -> None:
    """(d) without --tokenizer (with it: test_lint_compiles_for_real_with_a_tokenizer)."""
    records = [
        {"custom_id": f"req-{t}", "url": "/v1/chat/completions", "body": _chat(_tenant(t))} for t in range(8)
    ]
    out = gdx("lint", "--format", "json", str(_log(tmp_path, "batch.jsonl", records)))
    assert out.returncode == 0
    family = _one_family(out)
    assert [(f["rule"], f["severity"], f["pointer"]) for f in family["findings"]] == [
        ("dynamic_schema", "warning", "/properties/cost_center/enum")
    ]
    assert family["seconds"] is None
    assert sorted(s["name"] for s in family["schemas"]) == sorted(
        f"{tmp_path / 'batch.jsonl'}:req-{t}" for t in range(8)
    )


def test_models_named_per_request_are_one_family_whose_names_vary(tmp_path: Path) -> None:
    """Pydantic models made per tenant (`create_model(f"{base}_{tenant}")`, at the top and nested):
    one family named by what the names share, what varies is the names (`/$defs` and `/title`), the
    fix is stable model names, and no tenant in the report. Built from the mechanism: random tenant
    and model names."""
    from exporter.schema.injection import FIX_NAMES

    rng = random.Random(20261206)
    base = "".join(rng.choice("nopqrstuvwxyz") for _ in range(7)).capitalize()
    tenants = ["".join(rng.choice("abcdefghijklm") for _ in range(8)) for _ in range(8)]
    records = []
    for t in tenants:
        item = {"title": f"Line_{t}", "type": "object", "properties": {"sku": {"type": "string"}}}
        schema = {
            "title": f"{base}_{t}",
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": f"#/$defs/Line_{t}"}}},
            "$defs": {f"Line_{t}": item},
        }
        records.append({"custom_id": f"req-{t}", "url": "/v1/chat/completions", "body": _chat(schema)})
    out = gdx("lint", "--format", "json", str(_log(tmp_path, "batch.jsonl", records)))
    assert out.returncode == 0, out.stderr
    family = _one_family(out)
    assert family["name"] == base and family["variants"] == 8
    assert family["varies"] == [
        "/$defs: the same definitions under 8 different sets of names",
        "/title: the same model under 8 different names",
    ]
    (finding,) = family["findings"]
    assert (finding["rule"], finding["severity"], finding["pointer"]) == (
        "dynamic_schema",
        "warning",
        "/$defs",
    )
    assert finding["fix"] == FIX_NAMES
    reported = json.dumps({k: v for k, v in family.items() if k != "schemas"})
    assert not any(t in reported for t in tenants)


def test_regex_grammar_and_json_files_lint_and_hash_as_gdx_hash_does(tmp_path: Path) -> None:
    """(e) The file `gdx hash` names is the file `gdx lint` reports, whatever its kind."""
    regex = tmp_path / "invoice.regex"
    regex.write_text("^INV-(?!0000)[0-9A-Z]{8,64}$\n")
    ebnf = tmp_path / "pairs.ebnf"
    ebnf.write_text(
        'root ::= "{" pair ("," pair){0,40} "}"\npair ::= key ":" [0-9]+\nkey ::= "\\"" [a-z]+ "\\""\n'
    )
    lark = tmp_path / "answer.lark"
    lark.write_text('start: "yes" | "no" | WORD\nWORD: /[a-z]{2,80}/\n')
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(PATTERN, indent=2) + "\n")
    files = [regex, ebnf, lark, schema]
    out = gdx("lint", "--format", "json", *map(str, files))
    assert out.returncode == 1  # the lookaround: both engines refuse it
    by_name = {s["name"]: s for f in json.loads(out.stdout)["families"] for s in f["schemas"]}
    hashes = gdx("hash", *map(str, files)).stdout.splitlines()
    for path, line in zip(files, hashes, strict=True):
        linted = by_name[str(path)]
        assert line == f"schema_hash={linted['schema_hash']} shape_hash={linted['shape_hash']} {path}"

    def found(path: Path) -> list[tuple[str, str]]:
        return [(f["rule"], f["severity"]) for f in by_name[str(path)]["findings"]]

    assert by_name[str(regex)]["kind"] == "regex"
    assert found(regex) == [
        ("llguidance_refused", "error"),
        ("xgrammar_refused", "error"),
        ("bounded_quantifier", "warning"),
    ]
    assert by_name[str(ebnf)]["kind"] == "grammar"
    assert found(ebnf) == [("bounded_quantifier", "warning"), ("grammar_size", "info")]
    assert "up to 40 (line 1)" in by_name[str(ebnf)]["findings"][0]["message"]
    assert found(lark) == [("bounded_quantifier", "warning"), ("grammar_size", "info")]
    assert found(schema) == [("bounded_quantifier", "warning")]
    assert gdx("lint", str(ebnf)).returncode == 0


def test_kind_decides_what_a_file_is(tmp_path: Path) -> None:
    """(f) `"[A-Z]{8,64}"` is JSON text (a JSON string): auto reads it as JSON, as gdx hash does;
    --kind regex reads the whole file as one regex, quotes included. --kind json refuses a regex."""
    path = tmp_path / "quoted.txt"
    path.write_text('"[A-Z]{8,64}"\n')
    (expected,) = gdx("hash", str(path)).stdout.split()[:1]
    auto = _one_family(gdx("lint", "--format", "json", str(path)))
    forced = _one_family(gdx("lint", "--format", "json", "--kind", "regex", str(path)))
    assert (auto["kind"], auto["schemas"][0]["findings"]) == ("json", [])
    assert forced["kind"] == "regex"
    assert [f["rule"] for f in forced["schemas"][0]["findings"]] == ["bounded_quantifier"]
    assert f"schema_hash={auto['schemas'][0]['schema_hash']}" == expected
    assert f"schema_hash={forced['schemas'][0]['schema_hash']}" == expected
    regex = tmp_path / "r.txt"
    regex.write_text("^[a-z]+$\n")
    out = gdx("lint", "--kind", "json", str(regex))
    assert out.returncode == 2 and out.stderr.startswith(f"gdx lint: {regex}: not JSON: ")
    looks_like_lark = tmp_path / "answer.regex"
    looks_like_lark.write_text("Answer: (yes|no)\n")  # a `name:` line: auto calls it a grammar
    assert _one_family(gdx("lint", "--format", "json", str(looks_like_lark)))["kind"] == "grammar"
    assert (
        _one_family(gdx("lint", "--format", "json", "--kind", "regex", str(looks_like_lark)))["kind"]
        == "regex"
    )
    odd = tmp_path / "odd.regex"
    odd.write_text("^[[a-z]--x]{1,99}$\n")  # syntax Python's parser warns about (FutureWarning)
    out = gdx("lint", str(odd))
    assert out.returncode == 0 and "bounded_quantifier" in out.stdout and out.stderr == ""
    broken_log = tmp_path / "log.txt"
    broken_log.write_text('{"type": "string"}\n{"type": \n')
    out = gdx("lint", str(broken_log))
    assert out.returncode == 2 and f"{broken_log}:2: not JSON" in out.stderr


def test_request_log_formats_and_the_json_report_shape(tmp_path: Path) -> None:
    """(g) Every request form, one request per line, and the --format json layout."""
    tag = {
        "type": "structural_tag",
        "structures": [{"begin": "<f>", "schema": {"type": "array", "maxItems": 30}, "end": "</f>"}],
        "triggers": ["<f"],
    }
    records: list[Any] = [
        {"id": "bench-1", "schema": {"type": "string"}},
        _chat({"type": "integer"}),
        {"model": "m", "messages": [], "response_format": tag},
        {"prompt": ".", "structured_outputs": {"regex": "^[0-9]{1,40}$"}},
        {"prompt": ".", "guided_decoding": {"grammar": 'root ::= "a" | "b"'}},
        {"prompt": ".", "guided_choice": ["left", "right"]},
        {"prompt": ".", "guided_regex": "^[0-9]{1,40}$"},
        {"prompt": ".", "extra_body": {"guided_grammar": 'root ::= "a" | "b"'}},
        {"prompt": ".", "structured_outputs": {"json_object": True}},
        {"prompt": "no structured output"},
        {"type": "boolean"},
    ]
    out = gdx("lint", "--format", "json", str(_log(tmp_path, "mixed.jsonl", records)))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"families", "summary", "engines"}
    assert report["engines"] == {"xgrammar": _installed("xgrammar"), "llguidance": _installed("llguidance")}
    assert report["summary"] == {
        "families": 7, "schemas": 7, "requests": 9, "skipped": 2, "rejected": 0, "error": 0, "warning": 2,
        "info": 1, "skipped_by_reason": {"json_object": 1, "no_spec": 1},
    }  # fmt: skip
    for family in report["families"]:
        assert set(family) == {
            "family", "name", "kind", "requests", "variants", "seconds", "varies", "findings", "schemas",
        }  # fmt: skip
        for schema in family["schemas"]:
            assert set(schema) == {
                "name", "schema_hash", "shape_hash", "kind", "title", "lines",
                "findings", "compile", "probes",
            }  # fmt: skip
    assert sorted((f["kind"], f["requests"]) for f in report["families"]) == [
        ("choice", 1), ("grammar", 2), ("json", 1), ("json", 1), ("json", 1), ("regex", 2),
        ("structural_tag", 1),
    ]  # fmt: skip
    by_kind = {f["kind"]: f for f in report["families"]}
    (tag_finding,) = by_kind["structural_tag"]["schemas"][0]["findings"]
    assert (tag_finding["rule"], tag_finding["pointer"]) == ("max_items", "/structures/0/schema/maxItems")
    assert [f["rule"] for f in by_kind["regex"]["schemas"][0]["findings"]] == ["bounded_quantifier"]
    assert by_kind["regex"]["schemas"][0]["lines"] == 2  # one regex, two requests, linted once
    names = {s["name"].rsplit(":", 1)[1] for f in report["families"] for s in f["schemas"]}
    assert "bench-1" in names


def test_the_lookaround_claim_holds_on_the_installed_engines() -> None:
    """spec.lint_regex says both engines refuse a lookaround in a regex request (where xgrammar drops
    one in a JSON `pattern`): re-checked here on every run, as tests/integration/test_schema_backends.py
    does for the JSON keywords."""
    xgrammar = pytest.importorskip("xgrammar")
    llguidance = pytest.importorskip("llguidance")
    for pattern in ("^(?!admin$)[a-z]+$", "(?<=a)b", "[a-z]+(?=x)x"):
        with pytest.raises(Exception, match="not supported"):
            xgrammar.Grammar.from_regex(pattern)
        assert "look-around" in llguidance.LLMatcher.validate_grammar(
            llguidance.grammar_from("regex", pattern)
        )
    xgrammar.Grammar.from_regex("^[a-z]{8,64}$")
    assert llguidance.LLMatcher.validate_grammar(llguidance.grammar_from("regex", "^[a-z]{8,64}$")) == ""


def _installed(package: str) -> str:
    from importlib import metadata

    return metadata.version(package)


def test_engine_version_picks_the_table_and_is_said(tmp_path: Path, tokenizer_json: Path) -> None:
    """--engine xgrammar==0.2.7 reports that version's table (0.2.7 refuses a repeat past 128 in a
    pattern with the cache on, as vLLM compiles; 0.2.9 does not) and says so; a version no table was
    verified on uses the closest older one; compiling with another version than the installed one
    is refused, not faked."""
    path = tmp_path / "code.json"
    path.write_text(
        json.dumps({"type": "object", "properties": {"c": {"type": "string", "pattern": "^[A-Z]{8,500}$"}}})
    )
    old = gdx("lint", "--engine", "xgrammar==0.2.7", "--format", "json", str(path))
    assert old.returncode == 1, old.stderr  # an error finding: the compile fails on 0.2.7
    report = json.loads(old.stdout)
    assert report["engines"] == {"xgrammar": "0.2.7"}
    (schema,) = report["families"][0]["schemas"]
    (refused,) = [f for f in schema["findings"] if f["rule"] == "xgrammar_refused"]
    assert "verified on xgrammar 0.2.7" in refused["message"] and refused["severity"] == "error"
    new = gdx("lint", "--engine", "xgrammar==0.2.9", str(path))
    assert new.returncode == 0 and "xgrammar_refused" not in new.stdout
    assert new.stdout.splitlines()[-1] == "findings hold for xgrammar 0.2.9"
    later = gdx("lint", "--engine", "xgrammar==0.2.12", "--engine", "llguidance==1.7.9", str(path))
    assert later.stdout.splitlines()[-1] == "findings hold for xgrammar 0.2.9, llguidance 1.7.6"
    assert "xgrammar 0.2.12 is not a verified version" in later.stderr
    mismatch = gdx("lint", "--engine", "xgrammar==0.2.8", "--tokenizer", str(tokenizer_json), str(path))
    assert mismatch.returncode == 2 and "compiles with the installed xgrammar" in mismatch.stderr
    assert gdx("lint", "--engine", "tensorrt", str(path)).returncode == 2  # sglang names the tool-call server
    unknown_router = gdx("lint", "--engine", "vllm==0.31.0", str(path))
    assert unknown_router.returncode == 2 and "known for vLLM 0.32.0, 0.33.0" in unknown_router.stderr
    assert gdx("lint", "--prove", str(path)).returncode == 2  # --prove needs --tokenizer


def test_the_vllm_router_names_the_schema_an_engine_will_reject(tmp_path: Path) -> None:
    """--engine vllm==V: where that vLLM's `auto` sends each schema, and backend_mismatch on the schema
    that goes elsewhere than most requests, with what that version does (0.33 rejects, 0.32 drops)."""
    usual = {"type": "object", "properties": {"a": {"type": "string"}}}
    odd = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}}
    log = tmp_path / "mixed.jsonl"
    log.write_text("\n".join(json.dumps(s) for s in (usual, usual, usual, odd)) + "\n")
    out = gdx("lint", "--engine", "vllm==0.33.0", "--format", "json", str(log))
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    schemas = {s["schema_hash"]: s for f in doc["families"] for s in f["schemas"]}
    routes = sorted(s["vllm_backend"] for s in schemas.values())
    assert routes == ["guidance", "xgrammar"] and doc["engines"]["vllm"] == "0.33.0"
    (flagged,) = [s for s in schemas.values() if s["vllm_backend"] == "guidance"]
    (finding,) = [f for f in flagged["findings"] if f["rule"] == "backend_mismatch"]
    assert finding["severity"] == "error" and finding["keyword"] == "multipleOf"
    assert finding["pointer"] == "/properties/n" and "HTTP 400" in finding["message"]
    older = json.loads(gdx("lint", "--engine", "vllm==0.32.0", "--format", "json", str(log)).stdout)
    messages = [f["message"] for fam in older["families"] for s in fam["schemas"] for f in s["findings"]
                if f["rule"] == "backend_mismatch"]  # fmt: skip
    assert len(messages) == 1 and "does not enforce `multipleOf`" in messages[0]
    plain = json.loads(gdx("lint", "--format", "json", str(log)).stdout)  # without the flag: no routing
    assert not any("vllm_backend" in s for fam in plain["families"] for s in fam["schemas"])


def test_numbers_set_per_request_are_one_family_with_dynamic_schema(tmp_path: Path) -> None:
    """A service that asks for exactly n items (and a range scaled by n) sends 40 distinct schemas:
    one family, the varying bounds named."""
    records = []
    for n in range(1, 41):
        schema = {
            "title": "Picks",
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "string"}, "minItems": n, "maxItems": n},
                "score": {"type": "number", "minimum": 0, "maximum": 10 * n},
            },
            "required": ["items", "score"],
        }
        records.append(_chat(schema))
    out = gdx("lint", "--format", "json", str(_log(tmp_path, "picks.jsonl", records)))
    assert out.returncode == 0, out.stderr
    family = _one_family(out)
    assert (family["name"], family["requests"], family["variants"]) == ("Picks", 40, 40)
    (finding,) = family["findings"]
    assert (finding["rule"], finding["severity"]) == ("dynamic_schema", "warning")
    assert family["varies"] == [
        "/properties/items/maxItems: literal differs in 39 of 40 variants",
        "/properties/items/minItems: literal differs in 39 of 40 variants",
        "/properties/score/maximum: literal differs in 39 of 40 variants",
    ]


def test_a_reader_that_goes_away_ends_gdx_quietly(tmp_path: Path) -> None:
    """`gdx lint ... | head -1`: SIGPIPE's status, no traceback."""
    # 1,000 distinct schemas, 1,000 families: about 150 KB, more than a pipe buffers (64 KiB)
    records = [
        _chat({"type": "object", "properties": {f"field_{t}": {"type": "string"}}}) for t in range(1_000)
    ]
    path = _log(tmp_path, "many.jsonl", records)
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "lint", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
