"""What every engine's tool-call derivation returns: the exact spec string the engine compiles for a
request's tools (vLLM's, exporter/engines/vllm/toolcalls.py; SGLang's, exporter/engines/sglang/), or
why there is none. One type, so lint, fix and the daemon treat both engines' answers alike."""

from __future__ import annotations

from dataclasses import dataclass

KIND = "json"


@dataclass(frozen=True, slots=True)
class ToolCallGrammar:
    """The spec an engine compiles for a request's tool calls, or why there is none.

    `spec_text` is the exact string the engine receives (hash it with identity.schema_hash); `reason`
    is one of the engine's DERIVED_REASONS when there is one, else of its NO_GRAMMAR_REASONS; `error`
    (one of its ERRORS) is set when the server answers the request with a 400, `message` says what
    was wrong."""

    spec_text: str | None
    reason: str
    kind: str = KIND
    error: str | None = None
    message: str = ""
