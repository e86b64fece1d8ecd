"""`gdx fix` for a tool parser's structural tags: one static tool list, the tag vLLM builds from it,
the check that each call's tool was enabled for its request, and the proof on xgrammar.

An agent that sends each request the tools its tenant enabled makes the server build a new structural
tag per subset (exporter/engines/vllm/tooltags): one family varying at the tag's call list. The fix is on
the client: send the union of every tool in every request, in one order, so vLLM builds one tag and
its cache hits; `toolcheck.check` (copied as check.py) then refuses, after decoding, a call to a tool
the request did not enable, or a second call where it allowed one. The union is exact only where
each tool name has one definition in the whole log; a name sent with two definitions, a named
tool_choice (a tag for one tool) or bodies that differ in their tool settings are not united, and say
so. The proof, on xgrammar (vLLM's only backend that reads these tags; its guidance backend reads
only the legacy `structures`/`triggers` form): every member's compile against one compile of the
static tag, calls each member's own grammar emits accepted by the static grammar (nothing lost), and
the static grammar's calls to tools a member did not enable refused by the check (nothing let through).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exporter.engines.sglang import toolcalls as sglang_toolcalls
from exporter.engines.vllm import toolcalls
from exporter.fix.plan import dynamic_severity, folder_name
from exporter.fix.proof import SAMPLES, FixProof, spread
from exporter.fix.toolcheck import check, enabled_tools
from exporter.lint.report import Report
from exporter.lint.requests import SGLANG_LEVELS, Request, ToolServer
from exporter.schema import identity

KIND = "structural_tag"
SETTINGS = ("tool_choice", "parallel_tool_calls", "response_format", "structured_outputs", "text")


@dataclass(frozen=True)
class TagPlan:
    """One structural-tag family to fix: its members' tags and requests, and the static tool list."""

    family: str
    name: str
    folder: str
    severity: str
    requests: int
    hashes: tuple[str, ...]
    members: tuple[str, ...]  # each variant's tag text, in log order
    bodies: tuple[dict[str, Any], ...]  # a request that sent each variant
    sent: tuple[int, ...]  # requests per variant
    tools: tuple[dict[str, Any], ...]  # the union, in first-seen order; () when not united
    static_text: str | None  # the tag vLLM builds from the union
    error: str = ""  # why not united
    api: str = "chat"


def _tool_name(tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return None
    function = tool.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return str(function["name"])
    return tool["name"] if isinstance(tool.get("name"), str) else None


def unite(bodies: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The union of the bodies' tools in first-seen order, or why there is none."""
    first = bodies[0]
    for body in bodies[1:]:
        for key in SETTINGS:
            if body.get(key) != first.get(key):
                return [], f"requests differ in `{key}`: united only where the tool list alone varies"
    choice = first.get("tool_choice")
    if isinstance(choice, dict):
        return [], "a named tool_choice builds a tag for one tool: nothing to unite"
    union: dict[str, dict[str, Any]] = {}
    for body in bodies:
        for tool in body.get("tools") or ():
            name = _tool_name(tool)
            if name is None:
                return [], "a tool without a name"
            if name in union and identity.canonical_json(union[name]) != identity.canonical_json(tool):
                return [], f"tool {name!r} is sent with two definitions: one static list needs one"
            union.setdefault(name, tool)
    return list(union.values()), ""


def tag_plans(report: Report, requests: Sequence[Request], server: ToolServer) -> list[TagPlan]:
    """A plan per structural-tag family whose dynamic_schema finding is a warning or an error."""
    by_hash: dict[str, Request] = {}
    for request in requests:
        if request.kind == KIND and request.body is not None:
            by_hash.setdefault(identity.spec_hashes(KIND, request.text)[0], request)
    out = []
    for family in report.families:
        severity = dynamic_severity(family)
        if not severity or family.kind != KIND:
            continue
        found = [
            (s.schema_hash, s.lines, by_hash[s.schema_hash])
            for s in family.schemas
            if s.schema_hash in by_hash
        ]
        folder = folder_name(family.name, family.family)
        hashes = tuple(h for h, _, _ in found)
        members = tuple(r.text for _, _, r in found)
        bodies = tuple(r.body for _, _, r in found)
        sent = tuple(max(1, lines) for _, lines, _ in found)
        api = found[0][2].api if found else "chat"
        tools, error = unite(bodies) if bodies else ([], "no request of the family was read")
        static = None
        if not error:
            static_body = {**copy.deepcopy(bodies[0]), "tools": tools}
            got = derive(static_body, server, api)
            if got.kind != KIND or got.spec_text is None:
                error = f"the united tools give no structural tag ({got.reason} {got.message})".replace(
                    " )", ")"
                )
            else:
                static = got.spec_text
        out.append(
            TagPlan(
                family.family, family.name, folder, severity, family.requests, hashes, members, bodies,
                sent, tuple(tools), static, error, api,
            )
        )  # fmt: skip
    return out


def derive(body: dict[str, Any], server: ToolServer, api: str) -> Any:
    """The tool-call grammar the server derives (vLLM's or SGLang's), a ToolCallGrammar."""
    if server.engine == "sglang":
        level = SGLANG_LEVELS.get(server.strict_level or "")
        return sglang_toolcalls.derive(body, server.parser, server.version, level)
    return toolcalls.derive(body, server.parser, server.version, server.strict_level, api)


def call_begins(plan: TagPlan, server: ToolServer) -> list[tuple[str, str]]:
    """(begin string, tool name) of each tool's calls in the static tag, longest first: the tag of a
    request with that one tool, so a sampled text's calls can be named whatever the model's syntax."""
    out: list[tuple[str, str]] = []
    for tool in plan.tools:
        name = _tool_name(tool)
        body = {**copy.deepcopy(plan.bodies[0]), "tools": [tool]}
        got = derive(body, server, plan.api)
        if name is None or got.spec_text is None:
            continue
        for node in _tags(json.loads(got.spec_text)):
            begin = node.get("begin")
            if isinstance(begin, str) and begin:
                out.append((begin, name))
    return sorted(set(out), key=lambda pair: -len(pair[0]))


def _tags(node: Any) -> list[dict[str, Any]]:
    """Every `tag` format node in a tag tree (not inside a JSON Schema)."""
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "tag" or ("begin" in item and "schema" in item):  # legacy too
                found.append(item)
            stack.extend(v for k, v in item.items() if k not in ("json_schema", "schema"))
        elif isinstance(item, list):
            stack.extend(item)
    return found


def calls_in(text: str, begins: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The calls a sampled text makes, as a parser would hand them back (names only), in order."""
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for begin, name in begins:  # longest first: a begin inside a longer one is not a call of its own
        start = text.find(begin)
        while start != -1:
            end = start + len(begin)
            if not any(a <= start < b for a, b in taken):
                taken.append((start, end))
                found.append((start, name))
            start = text.find(begin, end)
    return [{"function": {"name": name}} for _, name in sorted(found)]


def prove_tags(
    plan: TagPlan, engine: Any, server: ToolServer, seed: int = 29, max_variants: int = 40
) -> FixProof:
    """The proof on xgrammar (exporter.lint.prove.engine.XgrammarEngine), as exporter.fix.proof's
    for JSON Schemas: compiles before and after, nothing lost, nothing let through the check."""
    rng = random.Random(seed)
    proof = FixProof(f"{engine.name} {engine.version}", variants=len(plan.members))
    assert plan.static_text is not None
    checked = spread(len(plan.members), max_variants)
    proof.variants_checked = len(checked)
    total = sum(plan.sent)
    try:
        static = engine.compile(plan.static_text, KIND)
    except Exception as err:
        proof.error = f"the static tag does not compile: {str(err)[:300]}"
        return proof
    proof.compiles_after = 1
    proof.seconds_after = sum(engine.request_compiles([plan.static_text] * total, KIND))
    begins = call_begins(plan, server)
    timed = 0
    for index, (member, body) in enumerate(zip(plan.members, plan.bodies, strict=True)):
        proof.compiles_before += 1
        if index not in checked:
            continue
        try:
            compiled = engine.compile(member, KIND)
        except Exception as err:
            proof.error = f"variant {index} does not compile: {str(err)[:300]}"
            return proof
        timed += 1
        proof.seconds_before += compiled.seconds
        for _ in range(SAMPLES):
            made = engine.sample(compiled, rng)
            if made is None:
                continue
            if not engine.accepts(static, made):
                proof.lost.append(f"variant {index}: the static grammar rejects {made[:200]}")
            elif problems := check(calls_in(made, begins), body):
                proof.lost.append(f"variant {index}: the check rejects {made[:200]}: {problems[0]}")
            else:
                proof.valid += 1
        enabled = enabled_tools(body)
        for _ in range(SAMPLES * 2):
            made = engine.sample(static, rng)
            if made is None or engine.accepts(compiled, made):
                continue
            calls = calls_in(made, begins)
            if check(calls, body):
                proof.caught += 1
            elif any(c["function"]["name"] not in enabled for c in calls) or not calls:
                proof.missed.append(f"variant {index}: the check lets through {made[:200]}")
    if timed < proof.compiles_before:
        proof.seconds_before *= proof.compiles_before / max(1, timed)
    return proof
