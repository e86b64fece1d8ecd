"""vLLM's tool-parser registry per version, as data: each `--tool-call-parser` name's structural-tag
model, whether it constrains required and named choices, the Parser composed around it and its default
strict level. Generated from each wheel by tools/vllm_tool_parsers.py; adding a version is a table here
(and its row in exporter/engines/vllm/versions.py)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_VERSION = "0.32.0"
PLAIN_COMPOSER = "abstract_parser"  # DelegatingParser: hands the request to the tool parser
RESPONSE_TEMPLATE = "response_template"  # `hf`: no tool grammar; rejects what it cannot guarantee

ParserRow = tuple[str | None, bool, str, int | None]

# name -> (structural_tag_model, supports_required_and_named, composer, default_tool_strict_level):
# vLLM's ToolParserManager
# registry read from the installed wheel with the default VLLM_ENFORCE_STRICT_TOOL_CALLING=1.
# Regenerate with `python tools/vllm_tool_parsers.py --python` in the vLLM virtualenv.
PARSERS_0_32_0: dict[str, ParserRow] = {
    # vLLM 0.32.0: tools/vllm_tool_parsers.py --python
    "apertus": (None, True, "abstract_parser", None),
    "cohere_command3": (None, True, "cohere_command", None),
    "cohere_command4": (None, True, "cohere_command", None),
    "deepseek_v3": ("deepseek_r1", False, "abstract_parser", None),
    "deepseek_v31": ("deepseek_v3_1", False, "abstract_parser", None),
    "deepseek_v32": ("deepseek_v3_2", False, "abstract_parser", None),
    "deepseek_v4": ("deepseek_v4", False, "abstract_parser", None),
    "deepseek_v41": ("deepseek_v4_1", False, "abstract_parser", None),
    "dots": (None, False, "abstract_parser", None),
    "ernie45": (None, True, "abstract_parser", None),
    "functiongemma": (None, True, "abstract_parser", None),
    "gemma4": (None, False, "abstract_parser", None),
    "gigachat3": (None, True, "abstract_parser", None),
    "glm45": ("glm_4_7", False, "abstract_parser", 1),
    "glm47": ("glm_4_7", False, "abstract_parser", 1),
    "granite": (None, True, "abstract_parser", None),
    "granite-20b-fc": (None, True, "abstract_parser", None),
    "granite4": (None, True, "abstract_parser", None),
    "hermes": ("hermes", False, "abstract_parser", None),
    "hf": (None, True, "response_template", None),
    "hunyuan_a13b": (None, True, "abstract_parser", None),
    "hy_v3": (None, True, "abstract_parser", None),
    "hy_v4": ("hy_v4", False, "abstract_parser", None),
    "inkling": (None, False, "abstract_parser", None),
    "internlm": (None, True, "abstract_parser", None),
    "jamba": (None, True, "abstract_parser", None),
    "k2_horizon": (None, False, "abstract_parser", None),
    "kimi_k2": ("kimi", False, "abstract_parser", None),
    "kimi_k3": ("kimi_k3", False, "kimi_k3", None),
    "lfm2": (None, True, "abstract_parser", None),
    "ling3": ("glm_4_7", False, "abstract_parser", None),
    "llama3_json": ("llama", False, "abstract_parser", None),
    "llama4_json": ("llama", False, "abstract_parser", None),
    "llama4_pythonic": (None, True, "abstract_parser", None),
    "longcat": ("longcat", False, "abstract_parser", None),
    "mimo": ("mimo", False, "abstract_parser", None),
    "minicpm5": (None, True, "abstract_parser", None),
    "minimax_m2": ("minimax", False, "abstract_parser", None),
    "minimax_m3": (None, False, "abstract_parser", None),
    "mistral": (None, False, "abstract_parser", None),
    "muse_glimmer": (None, False, "abstract_parser", None),
    "olmo3": (None, True, "abstract_parser", None),
    "openai": ("harmony", False, "abstract_parser", None),
    "phi4_mini_json": (None, True, "abstract_parser", None),
    "plamo3": ("plamo3", False, "abstract_parser", None),
    "poolside_v1": (None, False, "abstract_parser", None),
    "pythonic": (None, True, "abstract_parser", None),
    "qwen3_coder": ("qwen_3_coder", False, "abstract_parser", None),
    "qwen3_json": ("hermes", False, "abstract_parser", None),
    "qwen3_xml": ("qwen_3_coder", False, "abstract_parser", None),
    "seed_oss": (None, True, "abstract_parser", None),
    "step3": (None, True, "abstract_parser", None),
    "step3p5": ("qwen_3_coder", False, "abstract_parser", None),
    "xlam": (None, True, "abstract_parser", None),
}
# 0.33.0 derives the same schema the same way; its registry adds four names.
PARSERS_0_33_0: dict[str, ParserRow] = {
    # vLLM 0.33.0: tools/vllm_tool_parsers.py --python
    "apertus": (None, True, "abstract_parser", 0),
    "beam": (None, True, "beam", 0),
    "cohere_command3": (None, True, "cohere_command", 0),
    "cohere_command4": (None, True, "cohere_command", 0),
    "deepseek_v3": ("deepseek_r1", False, "abstract_parser", 0),
    "deepseek_v31": ("deepseek_v3_1", False, "abstract_parser", 0),
    "deepseek_v32": ("deepseek_v3_2", False, "abstract_parser", 0),
    "deepseek_v4": ("deepseek_v4", False, "abstract_parser", 0),
    "deepseek_v41": ("deepseek_v4_1", False, "abstract_parser", 0),
    "dots": (None, False, "abstract_parser", 0),
    "ernie45": (None, True, "abstract_parser", 0),
    "functiongemma": (None, True, "abstract_parser", 0),
    "gemma4": (None, False, "abstract_parser", 0),
    "gigachat3": (None, True, "abstract_parser", 0),
    "glm45": ("glm_4_7", False, "abstract_parser", 1),
    "glm47": ("glm_4_7", False, "abstract_parser", 1),
    "granite": (None, True, "abstract_parser", 0),
    "granite-20b-fc": (None, True, "abstract_parser", 0),
    "granite4": (None, True, "abstract_parser", 0),
    "hermes": ("hermes", False, "abstract_parser", 0),
    "hf": (None, True, "response_template", 0),
    "hunyuan_a13b": (None, True, "abstract_parser", 0),
    "hy_v3": (None, True, "abstract_parser", 0),
    "hy_v4": ("hy_v4", False, "abstract_parser", 0),
    "inkling": (None, False, "abstract_parser", 0),
    "internlm": (None, True, "abstract_parser", 0),
    "jamba": (None, True, "abstract_parser", 0),
    "k2_horizon": (None, False, "abstract_parser", 0),
    "kimi_k2": ("kimi", False, "abstract_parser", 0),
    "kimi_k3": ("kimi_k3", False, "kimi_k3", 0),
    "lfm2": (None, True, "abstract_parser", 0),
    "ling3": ("glm_4_7", False, "abstract_parser", 0),
    "llama3_json": ("llama", False, "abstract_parser", 0),
    "llama4_json": ("llama", False, "abstract_parser", 0),
    "llama4_pythonic": (None, True, "abstract_parser", 0),
    "longcat": ("longcat", False, "abstract_parser", 0),
    "mimo": ("mimo", False, "abstract_parser", 0),
    "minicpm5": (None, True, "abstract_parser", 0),
    "minimax_m2": ("minimax", False, "abstract_parser", 0),
    "minimax_m3": (None, False, "abstract_parser", 0),
    "mistral": (None, False, "abstract_parser", 0),
    "muse": (None, False, "abstract_parser", 0),
    "muse_glimmer": (None, False, "abstract_parser", 0),
    "musespark1x": (None, False, "abstract_parser", 0),
    "olmo3": (None, True, "abstract_parser", 0),
    "openai": ("harmony", False, "abstract_parser", 0),
    "phi4_mini_json": (None, True, "abstract_parser", 0),
    "plamo3": ("plamo3", False, "abstract_parser", 0),
    "poolside_v1": (None, False, "abstract_parser", 0),
    "pythonic": (None, True, "abstract_parser", 0),
    "qwen3_coder": ("qwen_3_coder", False, "abstract_parser", 0),
    "qwen3_json": ("hermes", False, "abstract_parser", 0),
    "qwen3_xml": ("qwen_3_coder", False, "abstract_parser", 0),
    "seed_oss": (None, True, "abstract_parser", 0),
    "step3": (None, True, "abstract_parser", 0),
    "step3p5": ("qwen_3_coder", False, "abstract_parser", 0),
    "step5": ("qwen_3_coder", False, "abstract_parser", 0),
    "xlam": (None, True, "abstract_parser", 0),
}
# 0.34.0 (tools/vllm_tool_parsers.py --python, as a change of 0.33.0's: the agreement test compares the
# whole table with vLLM's): musespark1x is renamed musespark; granite_toolcall_parser, ripple, zaya and
# zaya_xml are new; every other row is 0.33.0's.
PARSERS_0_34_0: dict[str, ParserRow] = {
    **{name: row for name, row in PARSERS_0_33_0.items() if name not in {"musespark1x"}},
    "granite_toolcall_parser": ("qwen_3_coder", False, "abstract_parser", 0),
    "musespark": (None, False, "abstract_parser", 0),
    "ripple": ("hermes", False, "abstract_parser", 0),
    "zaya": (None, True, "abstract_parser", 0),
    "zaya_xml": (None, True, "abstract_parser", 0),
}
PARSER_TABLES: dict[str, dict[str, ParserRow]] = {
    "0.32.0": PARSERS_0_32_0,
    "0.33.0": PARSERS_0_33_0,
    "0.34.0": PARSERS_0_34_0,
}


@dataclass(frozen=True, slots=True)
class ToolParserInfo:
    """What decides a tool parser's grammar: a structural-tag model (its own grammar, not derived here),
    whether required/named choices are constrained to JSON, and the Parser composed around it."""

    name: str
    structural_tag_model: str | None
    supports_required_and_named: bool
    composer: str = PLAIN_COMPOSER
    default_strict_level: int | None = None


def parser_info(name: str, version: str = DEFAULT_VERSION) -> ToolParserInfo | None:
    """The registered parser `name` of vLLM `version`, or None when that version has no such name."""
    row = PARSER_TABLES.get(version, {}).get(name)
    return None if row is None else ToolParserInfo(name, *row)
