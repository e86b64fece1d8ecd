"""The structural tag vLLM builds from a chat request's tools, as the exact string its engine compiles.

A tool parser with a structural-tag model (hermes, llama3_json, qwen3_coder, ...) answers
`tool_choice` required, a named function and (from a strict level up) auto with a structural tag
built from the tools; vLLM compiles `json.dumps(tag.model_dump())`. This package rebuilds that
string without vLLM or xgrammar: `formats` (the dumped format nodes), `tools` (what builders read),
`xgrammar_models` and `vllm_models` (one builder per structural-tag model, mirroring xgrammar 0.2.8's
builtin_structural_tag.py and vLLM's structural_tag_registry.py, the same in 0.32.0 to 0.34.0 but for
the GLM values 0.34.0 pins as JSON).
tests/integration/test_toolcalls_agreement.py compares every string with vLLM's own.
"""

from __future__ import annotations

from exporter.engines.grammars.tag_tools import Builder


def builders(glm_values: str = "unless_string") -> dict[str, Builder]:
    """Every structural-tag model's builder for a release (its `glm_values`, versions.py); vLLM's own
    win over xgrammar's of the same name, as in `get_model_structural_tag`."""
    from exporter.engines.grammars import xgrammar_tag_models as xgrammar_models
    from exporter.engines.vllm.tooltags import vllm_models

    return {**xgrammar_models.BUILDERS, **vllm_models.BUILDERS, "glm_4_7": vllm_models.glm_4_7(glm_values)}
