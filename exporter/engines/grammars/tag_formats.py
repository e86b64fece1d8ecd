"""xgrammar 0.2.8's structural-tag formats as the plain dicts `StructuralTag.model_dump()` gives.

vLLM keys and compiles a tool-call structural tag as `json.dumps(tag.model_dump())`
(vllm/parser/abstract_parser.py `Parser._apply_structural_tag`), so the string depends on every
field pydantic dumps, defaults included, in each model's field order (xgrammar/structural_tag.py).
Each function here builds one format's dict in that order, so `json.dumps` of a tree of them is the
engine's string byte for byte. Node values are used as given: a schema dict is not copied, as
model_dump does not copy it either (`json.dumps` is what reads it).
"""

from __future__ import annotations

from typing import Any

Node = dict[str, Any]


def structural_tag(fmt: Node) -> Node:
    return {"type": "structural_tag", "format": fmt}


def const_string(value: str) -> Node:
    return {"type": "const_string", "value": value}


def json_schema(
    schema: Any,
    style: str = "json",
    any_order: bool = False,
    max_whitespace_cnt: int | None = None,
    excludes: list[str] | None = None,
) -> Node:
    return {
        "type": "json_schema",
        "json_schema": schema,
        "style": style,
        "any_order": any_order,
        "max_whitespace_cnt": max_whitespace_cnt,
        "excludes": list(excludes or []),
    }


def qwen_xml_parameter(schema: Any) -> Node:
    return {"type": "qwen_xml_parameter", "json_schema": schema}


def any_text(
    excludes: list[str] | None = None, max_tokens: int | None = None, max_chars: int | None = None
) -> Node:
    return {
        "type": "any_text",
        "excludes": list(excludes or []),
        "max_tokens": max_tokens,
        "max_chars": max_chars,
    }


def token(value: int | str) -> Node:
    return {"type": "token", "token": value}


def exclude_token(exclude_tokens: list[int | str] | None = None) -> Node:
    return {"type": "exclude_token", "exclude_tokens": list(exclude_tokens or [])}


def any_tokens(exclude_tokens: list[int | str] | None = None, max_tokens: int | None = None) -> Node:
    return {"type": "any_tokens", "exclude_tokens": list(exclude_tokens or []), "max_tokens": max_tokens}


def grammar(text: str) -> Node:
    return {"type": "grammar", "grammar": text}


def regex(pattern: str) -> Node:
    return {"type": "regex", "pattern": pattern}


def sequence(elements: list[Node]) -> Node:
    return {"type": "sequence", "elements": list(elements)}


def or_(elements: list[Node]) -> Node:
    return {"type": "or", "elements": list(elements)}


def tag(begin: str | Node, content: Node, end: str | list[str] | Node) -> Node:
    """`begin`/`end` may be a `token(...)` node, as TagFormat allows."""
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def triggered_tags(
    triggers: list[str],
    tags: list[Node],
    at_least_one: bool = False,
    stop_after_first: bool = False,
    excludes: list[str] | None = None,
) -> Node:
    return {
        "type": "triggered_tags",
        "triggers": list(triggers),
        "tags": list(tags),
        "at_least_one": at_least_one,
        "stop_after_first": stop_after_first,
        "excludes": list(excludes or []),
    }


def token_triggered_tags(
    trigger_tokens: list[int | str],
    tags: list[Node],
    exclude_tokens: list[int | str] | None = None,
    at_least_one: bool = False,
    stop_after_first: bool = False,
) -> Node:
    return {
        "type": "token_triggered_tags",
        "trigger_tokens": list(trigger_tokens),
        "tags": list(tags),
        "exclude_tokens": list(exclude_tokens or []),
        "at_least_one": at_least_one,
        "stop_after_first": stop_after_first,
    }


def tags_with_separator(
    tags: list[Node], separator: str, at_least_one: bool = False, stop_after_first: bool = False
) -> Node:
    return {
        "type": "tags_with_separator",
        "tags": list(tags),
        "separator": separator,
        "at_least_one": at_least_one,
        "stop_after_first": stop_after_first,
    }


def optional(content: Node) -> Node:
    return {"type": "optional", "content": content}


def plus(content: Node) -> Node:
    return {"type": "plus", "content": content}


def star(content: Node) -> Node:
    return {"type": "star", "content": content}


def repeat(minimum: int, maximum: int, content: Node) -> Node:
    return {"type": "repeat", "min": minimum, "max": maximum, "content": content}


def dispatch(rules: list[tuple[str, Node]], loop: bool = True, excludes: list[str] | None = None) -> Node:
    return {
        "type": "dispatch",
        "rules": [list(r) for r in rules],
        "loop": loop,
        "excludes": list(excludes or []),
    }


def token_dispatch(
    rules: list[tuple[int | str, Node]], loop: bool = True, exclude_tokens: list[int | str] | None = None
) -> Node:
    return {
        "type": "token_dispatch",
        "rules": [list(r) for r in rules],
        "loop": loop,
        "exclude_tokens": list(exclude_tokens or []),
    }


# The formats `limit_to_single_tool_call` stops after their first call (vllm/tool_parsers/
# structural_tag_registry.py `_TOOL_CALL_LIST_FORMATS`).
CALL_LISTS = frozenset({"triggered_tags", "token_triggered_tags", "tags_with_separator"})


def limit_to_single_call(node: Any) -> None:
    """Set `stop_after_first` on every call-list format in the tree, in place, as vLLM does for
    `parallel_tool_calls: false`. It walks format nodes only, never into a JSON schema value."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind in CALL_LISTS:
            node["stop_after_first"] = True
        for key, value in node.items():
            if key != "json_schema":
                limit_to_single_call(value)
    elif isinstance(node, list):
        for item in node:
            limit_to_single_call(item)
