"""The documents of a Kubernetes YAML text, for `gdx inject`, with aliases bounded.

An alias repeats a node without copying it, so a few hundred bytes of nested aliases (a "billion
laughs") describe a tree of billions of nodes: whatever walks the loaded value as a tree (the
injection reading a container's `args`, a copy, a dump) then takes minutes and gigabytes. Manifests
may use anchors (`<<: *defaults`), so aliases are allowed, as long as what they add to the tree stays
under ALIAS_NODES per text; past that, or for an alias that contains itself, the text is refused
before anything is built. The node graph is checked as exporter/lint/yamlspec.py checks a schema
file's: libyaml composes an alias as the node it names, so a node reached twice is an alias.
"""

from __future__ import annotations

from typing import Any

import yaml

from exporter.inject.errors import InvalidManifest

ALIAS_NODES = 100_000  # nodes aliases may add to one text's documents, as a tree
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_documents(text: str) -> list[Any]:
    """The text's documents (None for an empty one); InvalidManifest for what is not YAML, nests
    deeper than the parser allows, or has aliases past the bound."""
    loader = _LOADER(text)
    docs: list[Any] = []
    added = 0
    try:
        while loader.check_node():
            root = loader.get_node()
            if root is None:
                continue
            # A document has fewer nodes than its text has characters (plus one): a tree this size
            # without its distinct nodes is past the bound already, so the count can stop there.
            tree, distinct = tree_size(root, ALIAS_NODES - added + 2 * len(text) + 2)
            added += tree - distinct
            if added > ALIAS_NODES:
                mark = root.start_mark
                raise InvalidManifest(
                    f"line {mark.line + 1}: its aliases repeat more than {ALIAS_NODES:,} nodes"
                    " (an alias bomb?)"
                )
            docs.append(loader.construct_document(root))
    except yaml.YAMLError as err:
        raise InvalidManifest(f"not YAML: {err}") from None
    except RecursionError:
        raise InvalidManifest("not YAML this tool reads: nested too deep") from None
    finally:
        loader.dispose()
    return docs


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def tree_size(root: yaml.Node, cap: int) -> tuple[int, int]:
    """(nodes of the document as a tree, at most `cap`; nodes it is made of); InvalidManifest for an
    alias inside the node it names (a cycle)."""
    size: dict[int, int] = {}
    entered: set[int] = set()  # the nodes the walk is inside: an alias to one of them is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            entered.discard(key)
            size[key] = min(cap, 1 + sum(size[id(c)] for c in _children(node)))
            continue
        if key in size:
            continue
        if key in entered:
            mark = node.start_mark
            raise InvalidManifest(f"line {mark.line + 1}: an alias inside the node it names (a cycle)")
        entered.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    return size[id(root)], len(size)
