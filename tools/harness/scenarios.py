"""Traffic for the scenario suite, the benchmarks and the demo: what real services send an engine.

Each generator is a plain function that returns the requests of one scenario, in order, as
`(kind, spec_text)`: `kind` is the compile call the engine makes ("json": `compile_json_schema`,
"regex": `compile_regex`, "grammar": `compile_grammar`, as the probe labels them) and `spec_text` the
exact string it is given. Randomness comes from a `random.Random(seed)`, so a run is reproducible.
Every spec is small (a few ms to tens of ms to compile with xgrammar over the Llama 3 vocabulary).

Injected (one family, a new variant per request): `tenant_const`, `volatile_text`, `tool_subsets`,
`regex_prefix`, `grammar_prefix`. Static (reused): `unstable_serialization` (one schema, many
serialisations), `recursive_model`, `classifiers`, `interleave`. `mixed` puts both together, and
`benchmark_schemas` picks real schemas from JSONSchemaBench by a fixed rule.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tools.harness import JSONSCHEMABENCH

Request = tuple[str, str]  # (kind, spec_text)
BENCH_SCHEMAS = JSONSCHEMABENCH / "schemas"


def dumps(schema: Any) -> str:
    """How a service usually serialises: json.dumps with its default separators, keys in order."""
    return json.dumps(schema)


def request_log(requests: Sequence[Request], model: str = "llama-3") -> str:
    """The requests as a log `gdx lint` reads, one line per request. A JSON Schema is its exact text
    (so that a log keeps its serialisation); a regex or a grammar is a vLLM request body with the
    spec in `structured_outputs` (its exact string, newlines included, JSON-encoded)."""
    lines = []
    for kind, text in requests:
        if kind == "json":
            lines.append(text)
        else:
            body = {"model": model, "prompt": "Answer:", "structured_outputs": {kind: text}}
            lines.append(json.dumps(body))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------
# Injected per request


def search_request(tenant: str) -> dict[str, Any]:
    """A retrieval request whose tenant id the service pins as a `const` (the per-tenant const)."""
    return {
        "title": "SearchRequest",
        "type": "object",
        "properties": {
            "tenant_id": {"const": tenant},
            "query": {"type": "string"},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["tenant_id", "query"],
    }


def tenant_const(n: int = 30, seed: int = 1) -> list[Request]:
    """Each request from a new tenant, its id injected as the `const` at /properties/tenant_id/const."""
    rng = random.Random(seed)
    return [("json", dumps(search_request(f"tenant-{rng.randrange(16**8):08x}"))) for _ in range(n)]


def _timestamps(rng: random.Random, n: int) -> Iterator[str]:
    at = datetime(2026, 1, 10, tzinfo=UTC)
    for _ in range(n):
        at += timedelta(seconds=rng.randrange(1, 600), microseconds=rng.randrange(1_000_000))
        yield at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def volatile_text(where: str, n: int = 30, seed: int = 2) -> list[Request]:
    """A timestamp and a request id written into text: `where="description"` puts them in the
    top-level description and in the description of a property; `where="title"` in the title.
    What a service does that builds its schema from a template with "generated at ..."."""
    if where not in ("description", "title"):
        raise ValueError(where)
    rng = random.Random(seed)
    out = []
    for stamp in _timestamps(rng, n):
        request_id = f"req-{rng.randrange(16**12):012x}"
        answer: dict[str, Any] = {"type": "string", "maxLength": 200}
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"answer": answer, "confidence": {"type": "number"}},
            "required": ["answer", "confidence"],
        }
        if where == "description":
            schema["description"] = f"Answer extracted at {stamp} for request {request_id}"
            answer["description"] = f"The answer to request {request_id}"
        else:
            schema["title"] = f"Answer {stamp} {request_id}"
        out.append(("json", dumps(schema)))
    return out


TOOLS = (
    ("get_weather", {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}),
    ("get_time", {"timezone": {"type": "string"}}),
    ("search_web", {"query": {"type": "string"}, "limit": {"type": "integer"}}),
    ("send_email", {"to": {"type": "string"}, "subject": {"type": "string"}}),
    ("create_event", {"title": {"type": "string"}, "day": {"type": "string", "format": "date"}}),
    ("convert_currency", {"amount": {"type": "number"}, "to": {"type": "string"}}),
    ("translate", {"text": {"type": "string"}, "language": {"type": "string"}}),
    ("lookup_order", {"order_id": {"type": "string"}}),
    ("book_flight", {"origin": {"type": "string"}, "destination": {"type": "string"}}),
    ("get_stock_price", {"symbol": {"type": "string"}}),
    ("set_reminder", {"text": {"type": "string"}, "minutes": {"type": "integer"}}),
    ("play_music", {"artist": {"type": "string"}, "shuffle": {"type": "boolean"}}),
)


def tool_branch(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """One tool as a union branch: its name as a const, its arguments as an object."""
    return {
        "type": "object",
        "properties": {
            "name": {"const": name},
            "arguments": {"type": "object", "properties": parameters, "required": sorted(parameters)},
        },
        "required": ["name", "arguments"],
    }


def tool_subsets(n: int = 32, seed: int = 3, smallest: int = 2) -> list[Request]:
    """The tool_choice="required" pattern: a top-level `anyOf` over the tools each tenant has enabled,
    a random subset (kept in catalogue order) of the 12 in `TOOLS` per request."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        chosen = sorted(rng.sample(range(len(TOOLS)), rng.randint(smallest, len(TOOLS) - 1)))
        out.append(("json", dumps({"anyOf": [tool_branch(*TOOLS[i]) for i in chosen]})))
    return out


def distinct_subsets(requests: Sequence[Request]) -> int:
    """How many distinct tool subsets `tool_subsets` produced (its branches' names, as sets)."""
    seen = set()
    for _, text in requests:
        seen.add(frozenset(b["properties"]["name"]["const"] for b in json.loads(text)["anyOf"]))
    return len(seen)


REGEX_TAIL = "-[A-Z]{2}-[0-9]{8,64}$"


def regex_prefix(n: int = 24, seed: int = 4) -> list[Request]:
    """A ticket-number regex with the tenant's code injected as a literal prefix per request: the
    family's text varies, and `{8,64}` is a bounded quantifier past the default limit (32)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        letters = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(3))
        code = f"{letters}{rng.randrange(100, 999)}"
        out.append(("regex", f"^{code}{REGEX_TAIL}"))
    return out


def grammar_prefix(n: int = 24, seed: int = 5) -> list[Request]:
    """A GBNF grammar whose quoted greeting carries the request's customer number."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        customer = rng.randrange(10**6, 10**7)
        spec = (
            f'root ::= "Dear customer {customer}, your answer is " answer "."\n'
            'answer ::= "yes" | "no" | "maybe"'
        )
        out.append(("grammar", spec))
    return out


# ---------------------------------------------------------------------------------------------------
# Static (reused)


ORDER = {
    "title": "Order",
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "description": "the order"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                "required": ["sku", "qty"],
            },
        },
        "express": {"type": "boolean"},
    },
    "required": ["order_id", "items"],
}
SEPARATORS = ((",", ":"), (", ", ": "), (",  ", " : "), (" ,", ":  "))


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def unstable_serialization(n: int = 24, seed: int = 6, schema: Any = None) -> list[Request]:
    """ONE schema (`ORDER` by default) serialised with its keys shuffled and mixed whitespace per
    request (no newlines, one request per line of a log): every string differs, the schema does not."""
    rng = random.Random(seed)
    schema = ORDER if schema is None else schema
    out = []
    for _ in range(n):
        item_sep, key_sep = rng.choice(SEPARATORS)
        out.append(("json", json.dumps(_shuffled(schema, rng), separators=(item_sep, key_sep))))
    return out


def comment_thread() -> dict[str, Any]:
    """What Pydantic v2's `model_json_schema()` gives for a thread of recursive comments."""
    return {
        "$defs": {
            "Comment": {
                "properties": {
                    "author": {"title": "Author", "type": "string"},
                    "text": {"title": "Text", "type": "string"},
                    "replies": {"items": {"$ref": "#/$defs/Comment"}, "title": "Replies", "type": "array"},
                },
                "required": ["author", "text", "replies"],
                "title": "Comment",
                "type": "object",
            }
        },
        "properties": {
            "topic": {"title": "Topic", "type": "string"},
            "comments": {"items": {"$ref": "#/$defs/Comment"}, "title": "Comments", "type": "array"},
        },
        "required": ["topic", "comments"],
        "title": "Thread",
        "type": "object",
    }


def recursive_model(n: int = 30) -> list[Request]:
    """The recursive model, serialised the same way on every request (a service's constant)."""
    return [("json", dumps(comment_thread()))] * n


LABEL_WORDS = (
    "billing", "refund", "shipping", "login", "bug", "feature", "praise", "spam", "legal", "security",
    "pricing", "outage", "account", "privacy", "invoice", "delivery", "returns", "warranty", "upgrade",
    "cancel", "fraud", "abuse", "feedback", "question", "partner", "press", "hiring", "other",
)  # fmt: skip


def classifier(labels: Sequence[str]) -> dict[str, Any]:
    return {
        "title": "Classification",
        "type": "object",
        "properties": {"label": {"enum": list(labels)}, "confidence": {"type": "number"}},
        "required": ["label", "confidence"],
    }


def classifiers(count: int = 10, rounds: int = 10, seed: int = 7) -> list[Request]:
    """`count` static classifiers that differ only in their label enum, each used in `rounds` rounds
    but one or none (9 or 10 of 10): a classifier service with a handful of label sets."""
    rng = random.Random(seed)
    label_sets = [rng.sample(LABEL_WORDS, rng.randint(3, 8)) for _ in range(count)]
    skips = {i: rng.randrange(rounds) if rng.random() < 0.5 else None for i in range(count)}
    out: list[Request] = []
    for r in range(rounds):
        round_ = [i for i in range(count) if skips[i] != r]
        rng.shuffle(round_)
        out.extend(("json", dumps(classifier(label_sets[i]))) for i in round_)
    return out


def interleave(specs: Sequence[Request], repeats: int = 4, seed: int = 8) -> list[Request]:
    """Each spec sent `repeats` times, all shuffled together (distinct static schemas in one stream)."""
    rng = random.Random(seed)
    out = [spec for spec in specs for _ in range(repeats)]
    rng.shuffle(out)
    return out


def report_schema(index: int) -> dict[str, Any]:
    """A static schema heavier than the injected ones (bounded strings and a nested array), each index
    its own structure (a section of its own): the same structure under another model name would be one
    model's names (exporter/schema/family/definitions.py), not another schema."""
    section = f"section_{'abcdefgh'[index]}"
    return {
        "title": f"Report{'ABCDEFGH'[index]}",
        "type": "object",
        "properties": {
            section: {"type": "string", "maxLength": 40},
            "code": {"type": "string", "pattern": f"^[A-Z]{{{2 + index}}}-[0-9]{{6,30}}$"},
            "summary": {"type": "string", "minLength": 10, "maxLength": 120},
            "rows": {
                "type": "array",
                "maxItems": 8,
                "items": {
                    "type": "object",
                    "properties": {"k": {"type": "string"}, "v": {"type": "number"}},
                    "required": ["k", "v"],
                },
            },
        },
        "required": ["code", "summary", "rows", section],
    }


def mixed(
    statics: int = 3, static_rate: int = 2, injected: int = 50, seed: int = 9
) -> tuple[list[Request], set[str]]:
    """Static high-rate schemas (`statics` of `report_schema`, `static_rate` requests each for every
    injected request) with one injected family (`tenant_const`) at the lower rate. Returns the
    requests and the set of static spec texts (every other request is injected)."""
    rng = random.Random(seed)
    static = [dumps(report_schema(i)) for i in range(statics)]
    injected_specs = tenant_const(injected, seed=seed)
    out: list[Request] = []
    for spec in injected_specs:
        burst = [("json", text) for text in static for _ in range(static_rate)]
        rng.shuffle(burst)
        out.extend(burst[: len(burst) // 2])
        out.append(spec)
        out.extend(burst[len(burst) // 2 :])
    return out, set(static)


def benchmark_schemas(
    n: int,
    fast: Callable[[str], bool],
    max_chars: int = 1500,
    folder: Path = BENCH_SCHEMAS,
) -> list[tuple[str, str]]:
    """The first `n` JSONSchemaBench schemas by (id, category) whose serialisation is at most
    `max_chars` characters, that are objects with `properties`, distinct (schema_hash), and for which
    `fast(text)` holds (e.g. "xgrammar compiles it under 100 ms"). A fixed rule: no ids are picked
    by hand. Returns (id, text) pairs."""
    from exporter.schema.identity import schema_hash

    docs = []
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                doc = json.loads(line)
                docs.append((doc["id"], doc["category"], doc["schema"]))
    docs.sort(key=lambda d: (d[0], d[1]))
    out: list[tuple[str, str]] = []
    seen = set()
    for doc_id, _, schema in docs:
        if len(out) == n:
            break
        if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
            continue
        text = dumps(schema)
        digest = schema_hash(text, schema)
        if len(text) > max_chars or digest in seen:
            continue
        if fast(text):
            seen.add(digest)
            out.append((doc_id, text))
    if len(out) < n:
        raise ValueError(f"only {len(out)} benchmark schemas satisfy the rule, {n} wanted")
    return out
