"""SGLang's tool-call parsers per version, as data: each `--tool-call-parser` name's detector, its family
(how a forced call is constrained), its xgrammar model and legacy tag parts, and the auto tags that do
not depend on the tools. Generated from each wheel by tools/sglang_tool_parsers.py."""

from __future__ import annotations

DEFAULT_VERSION = "0.5.23"
KIND_JSON = "json"
KIND_TAG = "structural_tag"
KIND_EBNF = "ebnf"
NAME = "\x00"  # where the tool's name goes in a legacy tag's begin and trigger

ParserRow = tuple[str, str, str | None, str | None, str | None, str | None, bool]

# name -> (detector, family, xgrammar model, legacy begin, legacy end, legacy trigger, auto tag):
# FunctionCallParser.ToolCallParserEnum read from the installed wheel (families: the module docstring
# of tools/sglang_tool_parsers.py). Regenerate with `python tools/sglang_tool_parsers.py --python`.
# fmt: off
PARSERS_0_5_23: dict[str, ParserRow] = {
    # SGLang 0.5.23: tools/sglang_tool_parsers.py --python
    'apertus2509': ('Apertus2509Detector', 'legacy_tag', None, '<|tools_prefix|>[{"\x00": ', '}]<|tools_suffix|>', '<|tools_prefix|>', False),  # noqa: E501
    'beam': ('BeamDetector', 'response_template', None, None, None, None, False),
    'cohere_command4': ('CohereCommand4Detector', 'json', None, None, None, None, False),
    'deepseekv3': ('DeepSeekV3Detector', 'legacy_tag', None, '<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function<\uff5ctool\u2581sep\uff5c>\x00\n```json\n', '\n```<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>', '<\uff5ctool\u2581calls\u2581begin\uff5c>', False),  # noqa: E501
    'deepseekv31': ('DeepSeekV31Detector', 'legacy_tag', None, '<\uff5ctool\u2581call\u2581begin\uff5c>\x00<\uff5ctool\u2581sep\uff5c>', '<\uff5ctool\u2581call\u2581end\uff5c>', '<\uff5ctool\u2581call\u2581begin\uff5c>', False),  # noqa: E501
    'deepseekv32': ('DeepSeekV32Detector', 'native_tag', 'deepseek_v3_2', None, None, None, False),
    'deepseekv4': ('DeepSeekV4Detector', 'native_tag', 'deepseek_v4', None, None, None, False),
    'deepseekv41': ('DeepSeekV41Detector', 'native_tag', 'deepseek_v4_1', None, None, None, False),
    'dots': ('DotsToolDetector', 'json', None, None, None, None, False),
    'gemma4': ('Gemma4Detector', 'json', None, None, None, None, False),
    'gigachat3': ('GigaChat3Detector', 'json', None, None, None, None, False),
    'gigachat35': ('GigaChat35Detector', 'json', None, None, None, None, False),
    'glm': ('Glm4MoeDetector', 'json', None, None, None, None, False),
    'glm45': ('Glm4MoeDetector', 'json', None, None, None, None, False),
    'glm47': ('Glm47MoeDetector', 'glm47', 'glm_4_7', None, None, None, False),
    'gpt-oss': ('GptOssDetector', 'native_tag', 'harmony', None, None, None, False),
    'hermes': ('HermesDetector', 'legacy_tag', None, '<tool_call>{"name":"\x00", "arguments":', '}</tool_call>', '<tool_call>', False),  # noqa: E501
    'hunyuan': ('HunyuanDetector', 'native_parse', None, None, None, None, False),
    'inkling': ('InklingDetector', 'legacy_tag', None, '<|message_model|>\x00<|content_invoke_tool_json|>{"name":"\x00","args":', '}<|end_message|>', '<|message_model|>\x00<|content_invoke_tool_json|>', True),  # noqa: E501
    'interns1': ('InternlmDetector', 'legacy_tag', None, '<|action_start|> <|plugin|>\n{"name": "\x00", "parameters": ', '}<|action_end|>', '<|action_start|> <|plugin|>', False),  # noqa: E501
    'iquest_q1': ('IQuestQ1Detector', 'required_parser', 'glm_4_7', None, None, None, False),
    'k2_horizon': ('K2V3Detector', 'json', None, None, None, None, False),
    'kimi_k2': ('KimiK2Detector', 'native_tag', 'kimi', None, None, None, False),
    'kimi_k3': ('KimiK3Detector', 'native_tag', None, None, None, None, True),
    'lfm2': ('Lfm2Detector', 'json', None, None, None, None, False),
    'ling3': ('Ling3Detector', 'json', None, None, None, None, False),
    'llama3': ('Llama32Detector', 'legacy_tag', None, '<|python_tag|>{"name":"\x00", "arguments":', '}', '<|python_tag|>', False),  # noqa: E501
    'mimo': ('MiMoDetector', 'json', None, None, None, None, False),
    'minicpm5': ('MiniCPM5Detector', 'json', None, None, None, None, False),
    'minimax-m2': ('MinimaxM2Detector', 'json', None, None, None, None, False),
    'minimax-m3': ('MinimaxM3Detector', 'json', None, None, None, None, False),
    'mistral': ('MistralDetector', 'legacy_tag', None, '[TOOL_CALLS] [{"name":"\x00", "arguments":', '}]', '[TOOL_CALLS]', False),  # noqa: E501
    'muse': ('MuseGlimmerDetector', 'native_parse', None, None, None, None, False),
    'nanbeige': ('Qwen3CoderDetector', 'native_tag', 'qwen_3_coder', None, None, None, False),
    'poolside_v1': ('PoolsideV1Detector', 'json', None, None, None, None, False),
    'pythonic': ('PythonicDetector', 'json', None, None, None, None, False),
    'qwen': ('Qwen25Detector', 'legacy_tag', None, '<tool_call>\n{"name":"\x00", "arguments":', '}\n</tool_call>', '<tool_call>', False),  # noqa: E501
    'qwen25': ('Qwen25Detector', 'legacy_tag', None, '<tool_call>\n{"name":"\x00", "arguments":', '}\n</tool_call>', '<tool_call>', False),  # noqa: E501
    'qwen3_coder': ('Qwen3CoderDetector', 'native_tag', 'qwen_3_coder', None, None, None, False),
    'response_template': ('ResponseTemplateToolDetector', 'response_template', None, None, None, None, False),
    'spark25': ('Spark25Detector', 'native_parse', None, None, None, None, False),
    'step3': ('Step3Detector', 'json', None, None, None, None, False),
    'step3p5': ('Qwen3CoderDetector', 'native_tag', 'qwen_3_coder', None, None, None, False),
    'trinity': ('TrinityDetector', 'legacy_tag', None, '<tool_call>\n{"name":"\x00", "arguments":', '}\n</tool_call>', '<tool_call>', False),  # noqa: E501
}
# The auto tags that do not depend on the tools (the same text for every `auto` request), with the
# xgrammar 0.2.7 SGLang 0.5.23 pins.
AUTO_TAGS_0_5_23: dict[str, str] = {
    # SGLang 0.5.23: tools/sglang_tool_parsers.py --python
    'inkling': '{"type": "structural_tag", "format": {"type": "token_triggered_tags", "trigger_tokens": [200049], "tags": [{"type": "tag", "begin": {"type": "token", "token": 200049}, "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"name": {"type": "string"}, "args": {"type": "object"}}, "required": ["name", "args"], "additionalProperties": false}, "style": "json", "any_order": false, "max_whitespace_cnt": null}, "end": {"type": "token", "token": 200010}}], "exclude_tokens": [], "at_least_one": false, "stop_after_first": false}}',  # noqa: E501
}
# fmt: on
PARSER_TABLES = {"0.5.23": PARSERS_0_5_23}
AUTO_TAG_TABLES = {"0.5.23": AUTO_TAGS_0_5_23}
FAMILIES = frozenset({
    "json", "legacy_tag", "native_tag", "native_parse", "required_parser", "glm47", "response_template",
})  # fmt: skip
# Response-template detectors whose tag constrains every turn, with or without tools
# (`constrains_every_turn`, parser/response_template.py and function_call/beam_detector.py).
EVERY_TURN = frozenset({"beam"})


def parser_family(name: str, version: str = DEFAULT_VERSION) -> str | None:
    """The family (FAMILIES) of SGLang `version`'s parser `name`, or None when it has no such name."""
    row = PARSER_TABLES.get(version, {}).get(name)
    return None if row is None else row[1]
