"""The SGLang releases the product supports, one row each (as exporter/engines/vllm/versions.py for
vLLM): what the wheel pins and the tables the product copies for it. Adding a release is a row here
with its parser table (parsers.py) and its agreement test
(tests/integration/test_sglang_toolcalls_agreement.py)."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.engines.sglang.parsers import AUTO_TAG_TABLES, PARSER_TABLES, ParserRow


@dataclass(frozen=True)
class SglangRelease:
    """One SGLang release: its pins (the wheel's METADATA) and its tool-call parser tables."""

    version: str
    xgrammar: str
    llguidance: str
    outlines: str
    parsers: dict[str, ParserRow]
    auto_tags: dict[str, str]
    # The probe's patch point: the grammar backend's cache lookup (exporter/probe/targets/sglang.py).
    probe_module: str = "sglang.srt.constrained.base_grammar_backend"


RELEASES: dict[str, SglangRelease] = {
    r.version: r
    for r in (
        SglangRelease(
            "0.5.23", xgrammar="0.2.7", llguidance=">=1.7.6,<2.0.0", outlines="0.1.11",
            parsers=PARSER_TABLES["0.5.23"], auto_tags=AUTO_TAG_TABLES["0.5.23"],
        ),
    )
}  # fmt: skip
SUPPORTED = tuple(RELEASES)
NEWEST = SUPPORTED[-1]
