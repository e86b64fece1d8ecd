"""Schemas kept as YAML files: the JSON value a client sends for them, and each node's line and column.

Teams keep JSON Schemas in YAML beside OpenAPI documents; the client loads the file and posts its JSON,
so the spec is `json.dumps` of the loaded value (a YAML date becomes its ISO string, as most loaders
hand it on). Aliases are refused: a schema file is a tree, and an alias bomb would expand without
bound. Positions come from PyYAML's node marks (members at their key, items at their value), the same
way exporter/lint/positions.py gives them for JSON text.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import yaml

from exporter.lint.positions import Position

SUFFIXES = (".yaml", ".yml")


class YamlSpecError(ValueError):
    """Not a YAML schema file: the message says where and why."""


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where the wheel has it: 4x faster


def _compose(text: str) -> tuple[Any, yaml.Node | None]:
    """The loader and the document's node graph, checked to be a tree: libyaml composes an alias as the
    node it names (no expansion yet), so a node met twice is an alias."""
    loader = _LOADER(text)
    try:
        root = loader.get_single_node()
    except BaseException:
        loader.dispose()
        raise
    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            loader.dispose()
            mark = node.start_mark
            raise YamlSpecError(
                f"line {mark.line + 1} column {mark.column + 1}: a node an alias repeats (a schema is a tree)"
            )
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(child for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return loader, root


def is_yaml(name: str) -> bool:
    return name.lower().endswith(SUFFIXES)


def load(text: str) -> Any:
    """The file's value as JSON types; YamlSpecError for what is not one YAML document of them."""
    try:
        loader, root = _compose(text)
        try:
            value = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
        return json.loads(json.dumps(value, default=_plain))
    except YamlSpecError:
        raise
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        raise YamlSpecError(f"{where}{err.problem or err}") from err
    except (yaml.YAMLError, RecursionError, TypeError, ValueError) as err:
        raise YamlSpecError(str(err) or type(err).__name__) from err


def _plain(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is no JSON value")


def positions(text: str) -> dict[str, Position]:
    """Every node's position by its JSON pointer; empty when the text is not a YAML tree."""
    try:
        loader, root = _compose(text)
    except (yaml.YAMLError, YamlSpecError, RecursionError):
        return {}
    loader.dispose()
    found: dict[str, Position] = {}
    if root is None:
        return found
    stack: list[tuple[str, yaml.Node, Position]] = [("", root, _at(root))]
    while stack:
        pointer, node, where = stack.pop()
        found.setdefault(pointer, where)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                token = _key_token(key)
                stack.append((f"{pointer}/{token}", value, _at(key)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((f"{pointer}/{i}", item, _at(item)) for i, item in enumerate(node.value))
    return found


def _at(node: yaml.Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


def _key_token(key: yaml.Node) -> str:
    """The pointer token of a mapping key, as json.dumps names it (`true` for a YAML 1.1 `on:`)."""
    text = str(key.value)
    if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:str":
        try:
            text = json.dumps(yaml.safe_load(yaml.serialize(key)))
            text = json.loads(text) if text.startswith('"') else text
        except (yaml.YAMLError, TypeError, ValueError):
            pass
    return text.replace("~", "~0").replace("/", "~1")
