# ruff: noqa: E501  (tool schemas read better on one line)
"""`gdx lint` on an agent's request log: per-request tool subsets under tool_choice required are one
family varying at the tool union, as the server's tool parser compiles them; the requests vLLM
rejects are errors; the rest are counted by reason. Run as users run it, `python -m exporter`: each
run forked from a server of this Python that has imported the CLI and the proofs' engines once
(tests/support/forkserver.py), a fresh process for every command all the same."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from exporter.engines.vllm import toolcalls
from exporter.schema.identity import schema_hash, spec_hashes
from tests.support.cli import gdx

TOOLS: dict[str, dict[str, Any]] = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]},
    "search_docs": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}}, "required": ["query"]},
    "create_ticket": {"type": "object", "properties": {"title": {"type": "string"}, "priority": {"enum": ["low", "high"]}}, "required": ["title"]},
    "send_email": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}, "required": ["to", "body"]},
    "lookup_order": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "refund": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}}, "required": ["order_id", "amount"]},
}  # fmt: skip
OWN = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": f"{name}.", "parameters": TOOLS[name]},
    }


def agent_log(path: Path) -> list[dict[str, Any]]:
    """30 requests, each with the tools its tenant enabled (2 to 5 of 6), tool_choice required; then a
    named tool that is not sent (a 400), an auto request and an auto request with its own schema."""
    rng = random.Random(34)
    names = list(TOOLS)
    bodies = []
    for turn in range(30):
        enabled = sorted(rng.sample(names, rng.randint(2, 5)), key=names.index)
        bodies.append({
            "model": "m", "messages": [{"role": "user", "content": f"turn {turn}"}],
            "tools": [tool(n) for n in enabled], "tool_choice": "required", "parallel_tool_calls": False,
        })  # fmt: skip
    base = {"model": "m", "messages": [{"role": "user", "content": "?"}], "tools": [tool("refund")]}
    bodies.append({**base, "tool_choice": {"type": "function", "function": {"name": "lookup_order"}}})
    bodies.append({**base, "tool_choice": "auto"})
    rf = {"type": "json_schema", "json_schema": {"name": "out", "schema": OWN}}
    bodies.append({**base, "tool_choice": "auto", "response_format": rf})
    path.write_text("".join(json.dumps(body) + "\n" for body in bodies), encoding="utf-8")
    return bodies


def test_an_agents_tool_subsets_are_one_family_varying_at_the_tool_union(tmp_path: Path) -> None:
    bodies = agent_log(tmp_path / "agent.jsonl")
    out = gdx("lint", "--format", "json", "--tool-call-parser", "pythonic", str(tmp_path / "agent.jsonl"))
    assert out.returncode == 1, out.stderr  # the rejected request is an error
    report = json.loads(out.stdout)
    tools_family, own = report["families"]
    derived = {
        schema_hash(toolcalls.derive(body, "pythonic", "0.33.0").spec_text or "") for body in bodies[:30]
    }
    assert {schema["schema_hash"] for schema in tools_family["schemas"]} == derived
    assert (tools_family["requests"], tools_family["variants"]) == (30, len(derived))
    (finding,) = tools_family["findings"]
    assert (finding["rule"], finding["pointer"]) == ("dynamic_schema", "/items/anyOf")
    assert tools_family["varies"] == [f"/items/anyOf: {len(derived)} distinct subsets of 6 branches"]
    assert [schema["schema_hash"] for schema in own["schemas"]] == [schema_hash(json.dumps(OWN))]
    (rejected,) = report["rejected"]
    assert (rejected["name"], rejected["rule"], rejected["severity"], rejected["keyword"]) == (
        f"{tmp_path / 'agent.jsonl'}:31", "request_rejected", "error", "unknown_named_tool",
    )  # fmt: skip
    summary = report["summary"]
    assert (summary["requests"], summary["rejected"], summary["skipped"]) == (31, 1, 1)
    assert summary["skipped_by_reason"] == {"tool_choice_auto": 1}


def test_the_text_report_counts_requests_without_a_grammar_by_reason(tmp_path: Path) -> None:
    agent_log(tmp_path / "agent.jsonl")
    hermes = gdx("lint", "--tool-call-parser", "hermes", str(tmp_path / "agent.jsonl"))
    assert hermes.returncode == 1, hermes.stderr
    assert "1 request rejected by vLLM; 1 request without a grammar" in hermes.stdout
    assert "  skipped      1  tool_choice auto" in hermes.stdout
    assert f"request {tmp_path / 'agent.jsonl'}:31  rejected before any grammar" in hermes.stdout
    unset = gdx("lint", str(tmp_path / "agent.jsonl"))
    assert unset.returncode == 0, unset.stderr  # without the server's parser, no 400 is claimed
    assert "  skipped     31  tool_choice required or named without --tool-call-parser" in unset.stdout


def test_a_structural_tag_parsers_agent_traffic_varies_at_the_tags_call_list(tmp_path: Path) -> None:
    """hermes answers the same log with structural tags: one family varying at the call list's tags
    (two layouts per tool), each tag's hash the one vLLM compiles (the strings: test_toolcalls_agreement)."""
    bodies = agent_log(tmp_path / "agent.jsonl")
    out = gdx(
        "lint", "--format", "json", "--tool-call-parser", "hermes", "--tool-strict-level", "parameter",
        str(tmp_path / "agent.jsonl"),
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    derived = [toolcalls.derive(body, "hermes", "0.33.0", "parameter") for body in bodies[:30]]
    assert {g.kind for g in derived} == {"structural_tag"}
    hashes = {spec_hashes("structural_tag", g.spec_text or "")[0] for g in derived}  # as the probe labels it
    (tags_family,) = [f for f in report["families"] if f["requests"] == 30]
    assert {schema["schema_hash"] for schema in tags_family["schemas"]} == hashes
    assert {schema["kind"] for schema in tags_family["schemas"]} == {"structural_tag"}
    (finding,) = tags_family["findings"]
    assert (finding["rule"], finding["pointer"]) == ("dynamic_schema", "/format/tags")
    assert tags_family["varies"] == [f"/format/tags: {len(hashes)} distinct subsets of 12 branches"]
    # at `parameter` each tool's parameters are its tag's schema: a tool's enum is linted in the tag
    first = json.loads(derived[0].spec_text or "")
    assert (
        first["format"]["tags"][0]["content"]["json_schema"]
        == TOOLS[bodies[0]["tools"][0]["function"]["name"]]
    )


def test_a_parser_the_version_does_not_register_is_a_flag_error(tmp_path: Path) -> None:
    agent_log(tmp_path / "agent.jsonl")
    out = gdx(
        "lint", "--engine", "vllm==0.32.0", "--tool-call-parser", "step5", str(tmp_path / "agent.jsonl")
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "--tool-call-parser step5: vLLM 0.32.0 registers no such parser" in out.stderr
    assert (
        gdx("lint", "--tool-call-parser", "step5", str(tmp_path / "agent.jsonl")).returncode == 1
    )  # 0.33.0 has it
    level = gdx(
        "lint", "--tool-call-parser", "hermes", "--tool-strict-level", "max", str(tmp_path / "agent.jsonl")
    )
    assert level.returncode == 2 and "--tool-strict-level" in level.stderr


def test_gdx_fix_unites_a_structural_tag_familys_tools_and_checks_the_enabled_ones(
    tmp_path: Path, tokenizer_json: Path
) -> None:
    """The static fix for an agent under hermes: every tool in every request (tools.json), the one tag
    vLLM builds from them (tag.json), proven on xgrammar; check.py refuses a call the request did not
    enable and a second call where parallel_tool_calls was false. A tool sent with two definitions
    cannot be united, and says so."""
    bodies = agent_log(tmp_path / "agent.jsonl")
    out = gdx(
        "fix", "--tool-call-parser", "hermes", "--tool-strict-level", "parameter", "--tokenizer",
        str(tokenizer_json), "--proof-variants", "4", "--out", str(tmp_path / "fix"), str(tmp_path / "agent.jsonl"),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6 tools in every request, the enabled ones checked after decoding" in out.stdout
    report = json.loads((tmp_path / "fix" / "report.json").read_text(encoding="utf-8"))
    (family,) = report["families"]
    folder = tmp_path / "fix" / family["folder"]
    tools = json.loads((folder / "tools.json").read_text(encoding="utf-8"))
    assert sorted(t["function"]["name"] for t in tools) == sorted(TOOLS)  # each once, as sent
    static = toolcalls.derive({**bodies[0], "tools": tools}, "hermes", "0.33.0", "parameter")
    assert (folder / "tag.json").read_text(encoding="utf-8") == f"{static.spec_text}\n"
    assert family["static_schema_hash"] == spec_hashes("structural_tag", static.spec_text or "")[0]
    xgrammar, llguidance = family["proofs"]
    assert xgrammar["proven"], xgrammar
    assert (xgrammar["compiles_before"], xgrammar["compiles_after"]) == (len(family["members"]), 1)
    assert xgrammar["valid_instances_kept"] > 0 and xgrammar["invalid_instances_caught"] > 0
    assert xgrammar["valid_instances_lost"] == [] and xgrammar["invalid_instances_missed"] == []
    assert llguidance["refused"].startswith("llguidance does not read")
    namespace: dict[str, Any] = {}
    exec(compile((folder / "check.py").read_text(encoding="utf-8"), "check.py", "exec"), namespace)
    request = bodies[0]
    enabled = [t["function"]["name"] for t in request["tools"]]
    other = next(name for name in TOOLS if name not in enabled)
    call = {"function": {"name": enabled[0], "arguments": "{}"}}
    assert namespace["check"]([call], request) == []
    assert namespace["check"]([{"function": {"name": other, "arguments": "{}"}}], request) == [
        f"call 0: tool {other!r} was not enabled for this request"
    ]
    assert namespace["check"]([call, call], request) == [
        "2 tool calls, but the request allowed one (parallel_tool_calls false)"
    ]
    # one tool sent with two definitions: no single static list
    clash = [*bodies[:30]]
    clash[1] = {
        **clash[1],
        "tools": [
            {
                **clash[1]["tools"][0],
                "function": {**clash[1]["tools"][0]["function"], "description": "changed"},
            },
            *clash[1]["tools"][1:],
        ],
    }
    (tmp_path / "clash.jsonl").write_text("".join(json.dumps(b) + "\n" for b in clash), encoding="utf-8")
    out = gdx(
        "fix", "--tool-call-parser", "hermes", "--tool-strict-level", "parameter", "--tokenizer",
        str(tokenizer_json), "--out", str(tmp_path / "fix2"), str(tmp_path / "clash.jsonl"),
    )  # fmt: skip
    assert out.returncode == 1 and "is sent with two definitions: one static list needs one" in out.stdout


def test_gdx_hash_prints_each_requests_spec_as_gdx_lint_names_it(tmp_path: Path) -> None:
    """A request log through `gdx hash`: one line per request, the hash `gdx lint` reports for it (a
    structural tag's exact text, as the probe labels it), or why there is no grammar."""
    agent_log(tmp_path / "agent.jsonl")
    log = str(tmp_path / "agent.jsonl")
    for flags in (
        ["--tool-call-parser", "hermes"],
        ["--tool-call-parser", "pythonic"],
        ["--engine", "sglang"],
    ):
        hashed = gdx("hash", *flags, log)
        assert hashed.returncode == 0, hashed.stderr
        lines = hashed.stdout.splitlines()
        assert len(lines) == 33
        by_line = {line.rsplit(" ", 1)[1]: line for line in lines}
        assert by_line[f"{log}:31"].startswith("rejected: ") and "unknown_named_tool" in by_line[f"{log}:31"]
        assert by_line[f"{log}:32"] == f"no grammar: tool_choice auto  {log}:32"
        linted = json.loads(gdx("lint", "--format", "json", *flags, log).stdout)
        hashes = {
            line.split()[0].removeprefix("schema_hash=") for line in lines if line.startswith("schema_hash=")
        }
        assert hashes == {
            schema["schema_hash"] for family in linted["families"] for schema in family["schemas"]
        }


def test_an_sglang_server_derives_its_own_tool_grammars(tmp_path: Path) -> None:
    """--engine sglang: SGLang 0.5.23 derives the JSON Schema of the tool union without a parser too,
    and hermes's legacy structural tag (one family varying at `/structures`); its 400s are SGLang's."""
    bodies = agent_log(tmp_path / "agent.jsonl")
    log = str(tmp_path / "agent.jsonl")
    plain = json.loads(gdx("lint", "--format", "json", "--engine", "sglang", log).stdout)
    tools_family = next(f for f in plain["families"] if f["requests"] == 30)
    assert tools_family["varies"][0].startswith("/items/anyOf: ")
    (rejected,) = plain["rejected"]
    assert rejected["message"].startswith("SGLang answers HTTP 400 (unknown_named_tool)")
    hermes = json.loads(
        gdx(
            "lint", "--format", "json", "--engine", "sglang==0.5.23", "--tool-call-parser", "hermes", log
        ).stdout
    )
    tags = next(f for f in hermes["families"] if f["requests"] == 30)
    assert {s["kind"] for s in tags["schemas"]} == {"structural_tag"}
    (finding,) = tags["findings"]
    assert (finding["rule"], finding["pointer"]) == ("dynamic_schema", "/structures")
    assert tags["varies"] == [f"/structures: {len(tags['schemas'])} distinct subsets of 6 branches"]
    assert len(bodies) == 33
    bad = gdx("lint", "--engine", "sglang", "--tool-call-parser", "pythonic_v9", log)
    assert bad.returncode == 2 and "SGLang 0.5.23 registers no such parser" in bad.stderr
    both = gdx("lint", "--engine", "sglang", "--engine", "vllm", log)
    assert both.returncode == 2 and "one server's tool calls at a time" in both.stderr
