"""Which grammar backend vLLM's default `auto` gives a JSON Schema, and why: the API server's router
(`SamplingParams._validate_structured_outputs`, the same in vLLM 0.32.0 and 0.33.0), emulated.

vLLM tries xgrammar unless the schema nests objects and arrays deeper than 64 levels (rejected
outright), a walk over every dict and list of it finds a feature xgrammar does not support (each
needs an explicit `type` but `allOf`), or xgrammar cannot convert it. Failing xgrammar, a schema with
`patternProperties` anywhere goes to outlines, any other to guidance (llguidance). vLLM says only
which backend; `route` also says which keyword, where, made it fall back: what a lint finding names.
Pure and standard library only; the xgrammar conversion, where wanted, is the caller's (`converts`).
tests/integration/test_routing_agreement.py runs vLLM's own code beside this on every JSONSchemaBench schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from exporter.engines.vllm.versions import RELEASES
from exporter.schema.findings import Finding
from exporter.schema.walk import escape

NESTING_LIMIT = 64  # vllm.sampling_params.MAX_STRUCTURED_OUTPUT_JSON_NESTING
XGRAMMAR_FORMATS = frozenset({
    "email", "date", "time", "date-time", "duration", "ipv4", "ipv6", "hostname", "uuid", "uri",
    "uri-reference", "uri-template", "json-pointer", "relative-json-pointer",
})  # fmt: skip
BACKENDS = ("xgrammar", "guidance", "outlines", "rejected")


@dataclass(frozen=True, slots=True)
class RouteReason:
    """One thing that keeps a schema off xgrammar: the keyword, where it is, what vLLM objects to."""

    keyword: str
    pointer: str
    why: str


@dataclass(frozen=True, slots=True)
class Route:
    """Where `auto` sends the schema; `reasons` say why not xgrammar (empty when it is xgrammar)."""

    backend: str  # one of BACKENDS
    reasons: tuple[RouteReason, ...] = ()
    outlines_pointer: str = ""  # for outlines: the first patternProperties, which guidance lacks


def _types(node: dict[str, Any]) -> set[str]:
    value = node.get("type")
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {item for item in value if isinstance(item, str)}
    return set()


def _pattern_and_length(node: dict[str, Any]) -> bool:
    return ("pattern" in node or "format" in node) and ("minLength" in node or "maxLength" in node)


def _objections(node: dict[str, Any], at: str) -> Iterator[RouteReason]:
    """What vLLM's check objects to in this one node, in its order."""
    types = _types(node)
    if types & {"integer", "number"} and "multipleOf" in node:
        yield RouteReason("multipleOf", at, "multipleOf on a number or integer")
    if "array" in types:
        for key in ("uniqueItems", "contains", "minContains", "maxContains"):
            if key in node:
                yield RouteReason(key, at, f"{key} on an array")
    if "string" in types:
        if "format" in node and node["format"] not in XGRAMMAR_FORMATS:
            yield RouteReason(
                "format", at, f"string format {str(node['format'])[:40]!r} outside xgrammar's list"
            )
        if _pattern_and_length(node):
            yield RouteReason("pattern" if "pattern" in node else "format", at,
                              "pattern or format with minLength or maxLength")  # fmt: skip
    if "object" in types and "propertyNames" in node:
        names = node["propertyNames"]
        if isinstance(names, dict) and _pattern_and_length(names):
            yield RouteReason("propertyNames", at, "propertyNames with a pattern or format and a length")
        for key in ("patternProperties", "properties"):
            if key in node:
                yield RouteReason("propertyNames", at, f"propertyNames with {key}")
        if node.get("unevaluatedProperties", True) is not True:
            yield RouteReason("propertyNames", at, "propertyNames with unevaluatedProperties")
    if "object" in types and isinstance(node.get("patternProperties"), dict):
        if "properties" in node:
            yield RouteReason("patternProperties", at, "patternProperties with properties")
        if len(node["patternProperties"]) > 1:
            yield RouteReason("patternProperties", at, "more than one patternProperties pattern")
    branches = node.get("allOf")
    if isinstance(branches, list) and len(branches) >= 2:
        yield RouteReason("allOf", at, "allOf with two or more branches")


def _nodes(root: Any) -> Iterator[tuple[dict[str, Any], str]]:
    """Every dict in the document with its JSON pointer, as vLLM walks it (every value, any keyword)."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, at = stack.pop()
        if isinstance(node, dict):
            yield node, at
            children = [(v, f"{at}/{escape(str(k))}") for k, v in node.items()]
        elif isinstance(node, list):
            children = [(v, f"{at}/{i}") for i, v in enumerate(node)]
        else:
            continue
        stack.extend(reversed([c for c in children if isinstance(c[0], (dict, list))]))


def xgrammar_objections(schema: Any) -> list[RouteReason]:
    """Every place vLLM's `has_xgrammar_unsupported_json_features` would stop at (it stops at the first)."""
    return [reason for node, at in _nodes(schema) for reason in _objections(node, at)]


def too_deep(schema: Any, limit: int = NESTING_LIMIT) -> bool:
    """Whether objects and arrays nest deeper than `limit` (vLLM's check_json_nesting)."""
    level = [schema]
    for _ in range(limit):
        level = [
            child
            for node in level
            if isinstance(node, (dict, list))
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return False
    return bool(level)


def route(schema: Any, converts: Callable[[Any], str | None] | None = None) -> Route:
    """Where vLLM's `auto` sends a JSON Schema. `converts(schema)` is xgrammar's conversion (None when
    it converts, else the error); without it a schema with no objection is taken to convert."""
    if too_deep(schema):
        return Route("rejected", (RouteReason("", "", f"nested deeper than {NESTING_LIMIT} levels"),))
    reasons = xgrammar_objections(schema) if isinstance(schema, dict) else []
    if not reasons and converts is not None:
        error = converts(schema)
        if error is not None:
            reasons = [RouteReason("", "", f"xgrammar cannot convert it: {error[:200]}")]
    if not reasons:
        return Route("xgrammar")
    walked = _nodes(schema) if isinstance(schema, dict) else iter(())  # vLLM looks into dict roots only
    pattern_props = next((at for node, at in walked if "patternProperties" in node), None)
    if pattern_props is not None:
        return Route("outlines", tuple(reasons), pattern_props + "/patternProperties")
    return Route("guidance", tuple(reasons))


RULE = "backend_mismatch"


def majority(routes: Mapping[str, tuple[Route, int]]) -> str:
    """The backend most requests resolve to (ties: xgrammar, guidance, outlines): the one an engine
    most likely latches onto, its first structured request being most likely one of them."""
    lines: dict[str, int] = {}
    for found, requests in routes.values():
        if found.backend != "rejected":
            lines[found.backend] = lines.get(found.backend, 0) + requests
    order = {name: i for i, name in enumerate(BACKENDS)}
    return min(lines, key=lambda name: (-lines[name], order[name])) if lines else ""


def mismatch_findings(routes: Mapping[str, tuple[Route, int]], version: str) -> dict[str, Finding]:
    """Schema hash -> the error for each schema `auto` sends elsewhere than most of the service's
    requests (`routes`: hash -> its route and request lines): what that vLLM version does with it."""
    usual = majority(routes)
    out: dict[str, Finding] = {}
    for schema_hash, (found, _requests) in routes.items():
        if not usual or found.backend in ("rejected", usual):
            continue
        reason = found.reasons[0] if found.reasons else RouteReason("", "", "")
        cause = f"`{reason.keyword}` ({reason.why})" if reason.keyword else reason.why
        message = f"vLLM {version}'s default router sends this schema to {found.backend}, not {usual}"
        message += " like most of these requests" + (f", because of {cause}" if cause else "")
        release = RELEASES.get(version)
        if release is not None and release.one_backend_rejects:
            message += (
                f": an engine already on {usual} rejects it (HTTP 400, 'only supports one backend per"
                f" engine'), and an engine that gets it first rejects every {usual} request after it"
                " until restart"
            )
        else:
            dropped = cause or f"what {found.backend} would"
            message += (
                f": an engine already on {usual} compiles it with {usual}, which does not enforce"
                f" {dropped} (or fails the compile: HTTP 500)"
            )
        pin = f'--structured-outputs-config \'{{"backend": "{usual}"}}\''
        fix = f"pin the backend (vllm serve {pin}) and check what it drops, or change the schema"
        if reason.keyword:
            fix += f" so that it does not need `{reason.keyword}`"
        out[schema_hash] = Finding(RULE, "error", reason.pointer, message, fix, reason.keyword)
    return out


CRASH_RULE, STALL_RULE, REJECTED_RULE = "server_crash", "server_stall", "server_rejected"
STALL_WARNING_SECONDS, STALL_ERROR_SECONDS = 0.1, 1.0


@dataclass(frozen=True, slots=True)
class ServerStep:
    """What the API server's validation of an outlines-routed schema did, measured bounded: `died`
    (the step aborted, `allocation_bytes` when the library said what it failed to allocate), or the
    seconds it ran (`timed_out`: it was still running at the bound)."""

    seconds: float
    died: bool = False
    timed_out: bool = False
    allocation_bytes: int = 0
    memory_bytes: int = 0  # the bound it ran under
    detail: str = ""
    rejected: bool = False  # the validation refused the schema: vLLM answers HTTP 400 (detail: why)


def server_findings(found: Route, step: ServerStep, version: str) -> list[Finding]:
    """server_crash / server_stall for a schema `auto` sends to outlines, whose validation vLLM's API
    server runs on the request path without a time or memory bound: what `step` measured."""
    where = found.outlines_pointer
    why = f"`patternProperties` at {where or '/'}, which guidance lacks"
    first = found.reasons[0] if found.reasons else None
    if first is not None and f"{first.pointer}/{first.keyword}" != where:
        why = f"`{first.keyword}` at {first.pointer or '/'} ({first.why}) and {why}"
    elif first is not None:
        why = f"`patternProperties` at {where or '/'} ({first.why}), which guidance lacks"
    lead = f"vLLM {version}'s default router sends this schema to outlines because of {why}; its API server"
    lead += " validates it there on the request path, with no time or memory bound"
    pin = 'vllm serve --structured-outputs-config \'{"backend": "xgrammar"}\''
    fix = (f"pin the backend ({pin}: this schema alone then gets HTTP 400), or replace patternProperties by"
           " additionalProperties and check the keys after decoding")  # fmt: skip
    if step.died:
        how = step.detail.split(":", 1)[0] if step.detail else "it died"
        size = f": an allocation of {_bytes(step.allocation_bytes)} failed" if step.allocation_bytes else ""
        limit = f" under {_bytes(step.memory_bytes)}" if step.memory_bytes else ""
        message = (f"{lead}: run bounded{limit} here, the step died ({how}{size}): the API"
                   " server process aborts, every request in flight on the replica is lost")  # fmt: skip
        return [Finding(CRASH_RULE, "error", where, message, fix, "patternProperties")]
    found_rules = []
    if step.rejected:
        message = (f"vLLM {version}'s default router sends this schema to outlines because of {why}; its"
                   " API server refuses it there: HTTP 400 before any engine sees the request"
                   f" ({' '.join(step.detail.split())})")  # fmt: skip
        fix_400 = (f"pin the backend ({pin}), or change the schema so that outlines can build its regex"
                   " (no `false` subschema, no pattern it cannot read)")  # fmt: skip
        found_rules.append(Finding(REJECTED_RULE, "error", where, message, fix_400, "patternProperties"))
    if step.seconds < STALL_WARNING_SECONDS:
        return found_rules
    severity = "error" if step.seconds >= STALL_ERROR_SECONDS else "warning"
    took = f"over {step.seconds:.0f} s (stopped at the bound)" if step.timed_out else f"{step.seconds:.2f} s"
    message = f"{lead}: it took {took} here, the time every request on that server (structured or not) waits"
    return [*found_rules, Finding(STALL_RULE, severity, where, message, fix, "patternProperties")]


def guidance_rejected(found: Route, error: str, version: str) -> Finding:
    """server_rejected for a schema `auto` sends to guidance whose validation refuses it: vLLM's API
    server asks llguidance (`validate_guidance_grammar`) and answers HTTP 400 with its error."""
    first = found.reasons[0] if found.reasons else RouteReason("", "", "")
    cause = f"`{first.keyword}` at {first.pointer or '/'} ({first.why})" if first.keyword else first.why
    message = (f"vLLM {version}'s default router sends this schema to guidance because of {cause}; its API"
               f" server refuses it there: HTTP 400 before any engine sees the request (llguidance:"
               f" {' '.join(error.split())[:300]})")  # fmt: skip
    pin = 'vllm serve --structured-outputs-config \'{"backend": "xgrammar"}\''
    fix = (f"change the schema so that llguidance takes it (see llguidance_refused), or so that xgrammar"
           f" does{f' (no `{first.keyword}` there)' if first.keyword else ''}; pinning xgrammar ({pin})"
           " refuses it too")  # fmt: skip
    return Finding(REJECTED_RULE, "error", first.pointer, message, fix, first.keyword)


def _bytes(n: int) -> str:
    return f"{n / 2**30:.3g} GiB" if n >= 2**30 else f"{n / 2**20:.3g} MiB"
