"""What each lint rule means, for the formats that describe their rules (SARIF's `tool.driver.rules`):
a short and a full description, the fix, and where the documentation is. docs/reference/lint-rules.md
is generated from this table (docs/gen_rules.py); docs/schema-analysis.md ("The rules") says when each
fires at length; tests/unit/lint/test_sarif.py checks that every rule is in both."""

from __future__ import annotations

from dataclasses import dataclass

DOCS = "https://github.com/guided-decoding-exporter/guided-decoding-exporter/blob/main/docs/reference/lint-rules.md"
RULES_ANCHOR = "#rules"


@dataclass(frozen=True)
class RuleHelp:
    short: str  # one line
    full: str  # when it fires, and why it costs
    fix: str


HELP: dict[str, RuleHelp] = {
    "dynamic_schema": RuleHelp(
        "A schema family injected per request",
        "The family's variants are reused fewer than twice each: the engine's grammar cache never hits and "
        "every request pays a full compile before its first token.",
        "Send one static schema; move what varies into the prompt and check it after decoding (gdx fix).",
    ),
    "depth": RuleHelp(
        "Objects and arrays nested too deep",
        "Nesting beyond the --lint.depth level (3), through $refs: every level multiplies grammar states.",
        "Flatten the schema.",
    ),
    "recursive_ref": RuleHelp(
        "A $ref that leads back into its own chain",
        "A recursive schema compiles into an unbounded grammar.",
        "Unroll it to a fixed depth.",
    ),
    "union_depth": RuleHelp(
        "anyOf/oneOf nested too deep",
        "Unions nested more than --lint.union-depth (3) deep multiply the grammar's alternatives.",
        "Use one discriminated union (gdx fix flattens where the accepted set stays the same).",
    ),
    "union_width": RuleHelp(
        "A union with many branches",
        "More than --lint.union-width (8) branches in one anyOf/oneOf.",
        "Fewer, distinct alternatives.",
    ),
    "bounded_quantifier": RuleHelp(
        "A large {m,n} bound",
        "A repetition bound above --lint.quantifier (32) in a pattern, a regex or a grammar unrolls into "
        "as many grammar states.",
        "Use maxLength or +, or check the count after decoding.",
    ),
    "large_enum": RuleHelp(
        "An enum with many members",
        "More than --lint.enum-size (64) members: each is a branch of the grammar.",
        "Use a string and check membership after decoding.",
    ),
    "max_items": RuleHelp(
        "A large minItems/maxItems",
        "minItems/maxItems above --lint.max-items (20): each counted item is a grammar state.",
        "Drop the bound from the grammar and check the count after decoding.",
    ),
    "unstable_serialization": RuleHelp(
        "One schema sent as several strings",
        "The same canonical schema arrives as different exact strings (key order, spacing): each string "
        "is a cache miss.",
        "Serialise the schema once.",
    ),
    "xgrammar_unenforced": RuleHelp(
        "A keyword xgrammar compiles and ignores",
        "xgrammar accepts the keyword but does not enforce it: outputs can break it.",
        "Validate after decoding.",
    ),
    "xgrammar_overenforced": RuleHelp(
        "A value the schema allows that xgrammar refuses",
        "xgrammar enforces more than the keyword asks (a string with a length bound takes no escaped "
        "character; pattern and patternProperties names matched whole where JSON Schema searches): "
        "outputs the schema promises can never be decoded, and the model is forced into other ones.",
        "Anchor the pattern as the values really are, or drop the bound from the grammar and check it "
        "after decoding.",
    ),
    "llguidance_refused": RuleHelp(
        "A keyword llguidance refuses",
        "llguidance fails the compile on this keyword (or a lookaround in a regex): the request fails.",
        "Remove it and validate after decoding.",
    ),
    "llguidance_ignored": RuleHelp(
        "A keyword llguidance compiles with a warning and drops",
        "llguidance compiled the schema but warned that it does not enforce a keyword.",
        "Remove the keyword or the option and validate after decoding.",
    ),
    "xgrammar_refused": RuleHelp(
        "A spec xgrammar refuses",
        "xgrammar fails the compile (a lookaround in a regex request): the request fails.",
        "Remove it and check after decoding.",
    ),
    "backend_mismatch": RuleHelp(
        "vLLM's auto backend sends this schema elsewhere",
        "vLLM's default backend `auto` resolves this schema to another backend than most requests: 0.33 "
        "rejects it with HTTP 400, 0.32 compiles it elsewhere with the keyword not enforced.",
        "Pin structured_outputs_config.backend, or change the schema so that it does not need the keyword.",
    ),
    "server_crash": RuleHelp(
        "A schema that aborts vLLM's API server",
        "vLLM's API server validates this schema with outlines on its request path with no memory bound; "
        "the bounded run of the same steps died: every request in flight on the replica is lost.",
        "Pin the backend to xgrammar, or replace patternProperties by additionalProperties.",
    ),
    "server_stall": RuleHelp(
        "A schema that stalls vLLM's API server",
        "The same bounded validation took this long: the seconds the API server answers no request.",
        "Pin the backend to xgrammar, or make optional properties fewer or required.",
    ),
    "server_rejected": RuleHelp(
        "A schema vLLM's API server refuses",
        "vLLM's API server validates a schema with the backend its router chose: sent to outlines, where "
        "outlines cannot build the regex (a false subschema) or vLLM's check of it refuses it "
        "(lookarounds, backreferences, word boundaries, an anchor first); sent to guidance, where "
        "llguidance refuses it (an unknown format, oneOf, uniqueItems, not). The request gets HTTP 400 "
        "before any engine sees it.",
        "Pin the backend to xgrammar, or change the schema so that the chosen backend takes it (outlines: "
        "a regex it can build; guidance: no keyword llguidance refuses).",
    ),
    "regex_alternation": RuleHelp(
        "A regex with a wide alternation",
        "An alternation of more than --lint.enum-size (64) branches in a regex request.",
        "Use the general form and check membership after decoding.",
    ),
    "grammar_size": RuleHelp(
        "A large grammar",
        "A grammar request's rules and characters; past 200 rules or 20,000 characters it compiles slowly.",
        "Split the grammar per request type.",
    ),
    "too_complex": RuleHelp(
        "A spec over the analysis budget",
        "The analysis ran out of its budget (1 s of CPU, 100,000 subschemas) or the text is over 16 MiB.",
        "Split the schema.",
    ),
    "invalid_spec": RuleHelp(
        "A JSON spec that is not JSON",
        "The engine cannot compile it and fails the request.",
        "Send the schema as JSON (json.dumps of it).",
    ),
    "request_rejected": RuleHelp(
        "A request the server rejects before any grammar",
        "The server answers this request with an error (an unknown named tool, clashing $defs, ...).",
        "Send what the server's request validation accepts.",
    ),
}

LEVELS = {"error": "error", "warning": "warning", "info": "note"}  # severity -> SARIF level
# Each rule's usual severity (docs/reference/lint-rules.md), for SARIF's defaultConfiguration; a
# finding's own level says what it is (dynamic_schema and server_stall grow with what they measure).
DEFAULT_SEVERITY = {
    **{rule: "warning" for rule in HELP},
    **dict.fromkeys(("union_width", "large_enum", "regex_alternation", "grammar_size"), "info"),
    **dict.fromkeys(
        ("llguidance_refused", "xgrammar_refused", "backend_mismatch", "server_crash", "too_complex",
         "invalid_spec", "request_rejected", "server_rejected"),
        "error",
    ),
}  # fmt: skip
